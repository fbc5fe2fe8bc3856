"""The TMA store epilogue (sm_90a): a tensor-core accumulator stored by TMA.

Contract.  A `tile.store` of a 2-d tile in a wgmma accumulator layout
(`#tile.mma_acc<3 ...>`, or what element-wise ops after the loop keep of it:
casts, scale, bias) into an aligned array (`tile.aligned`: what TMA needs) that
the kernel never loads from (a later load would have to wait for the store's
global writes) is stored through shared memory by TMA instead of converting to a
coalesced layout and storing from registers:

* The tile is cut into *slabs* of `width` columns, one swizzle row each (128
  bytes: 64 bf16 columns; the whole row when shorter).  A slab is one TMA box.
* Each thread writes its accumulator registers of a slab into a swizzled
  shared buffer (`stmatrix` for 16-bit types, else vector stores), fences them
  for the async proxy; after a barrier thread 0 issues the box's
  `cp.async.bulk.tensor` store and commits it as a bulk group.  TMA drops what
  lies outside the array: ragged edges cost nothing.
* When the slab a register belongs to is a function of its register bits
  alone (`slabbed`: the columns of the wgmma layout beyond 8 are register bits
  unless warpgroups split N), slabs take turns in two buffers: before the
  barrier that ends slab s, thread 0 waits until the store of slab s - 1 has
  read its buffer (`cp.async.bulk.wait_group.read 0`), so slab s + 1 can
  overwrite it.  Otherwise, or when the buffers hold every slab, the whole tile
  is written, then stored box by box after one barrier.
* When moreover each warp holds rows of its own (`warp_rows`: the wgmma layout's
  16 rows a warp), every warp stores its rows of a slab itself: its registers into
  the buffer, a fence, `__syncwarp`, and its lane 0 issues a box of `warp_rows`
  rows and commits it; before reusing a buffer, each lane 0 waits for its own
  store from it.  No block barrier in the epilogue (`PER_WARP`).  With
  `GROUP_WARPS` = 4 a warpgroup does this together: a named barrier of its 128
  threads for `__syncwarp`, its first warp's lane 0 issuing one 64-row box.  With
  `GATED` the warps write their rows and arrive on an mbarrier, and thread 0 stores
  each whole slab once all have (two more mbarriers hand the buffers back).  Both are
  measured variants, not defaults (bench/RESULTS.md: fewer, larger stores run at
  higher clocks at the power cap; independent per-warp stores do more per clock).
* The stores stay in flight after the epilogue: the next writer of that
  shared memory waits for them first (`LoweringContext.smem_barrier_before`,
  the ring's allocation, the kernel's end: `wait_bulk_reads`).  In a persistent
  kernel the stores of one tile drain while the next tile's loop runs.

The shared memory a store takes is `StorePlan.smem_bytes` (two slabs, or the
tile), which the pipeliner reserves beside a ring that outlives the store (the
warp-specialized persistent kernel).  The kernel option `tma_store=False`
(function attribute `tile.tma_store`) keeps the register path.
"""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, nvvm, scf

from tileir.dialect.layout import tile_layout
from tileir.dialect.types import bitwidth
from tileir.dialect.verifier import arg_has
from tileir.backend.layout import layouts as L
from .context import Frag, LoweringContext
from tileir.backend.layout.mma_layouts import (TMA_MAX_BOX, Mma, Shared, choose_swizzle,
                                               smem_tile_bytes, tile_bytes)
from .shared import SmemTile, fence_async_proxy, store_frag

ENABLE_ATTR = "tile.tma_store"
SLAB_ROW_BYTES = 128         # one slab row: the widest swizzle
BUFFERS = 2                  # slabs in flight when slabbed
PER_WARP = True              # warps that hold their own rows store them (no block barrier)
GROUP_WARPS = 1              # ... in groups of this many warps (4: a warpgroup), one box each
GROUP_BARRIER_BASE = 2       # named barriers 2, 3, ...: one per group (1 is the consumers')
# the warps write their rows, thread 0 stores whole slabs when mbarriers say they are
# done (few stores, no block barrier)
GATED = False


@dataclasses.dataclass(frozen=True)
class StorePlan:
    rows: int
    cols: int
    elem_bytes: int
    width: int               # columns of one slab (one TMA box)
    slabbed: bool            # a slab is chosen by register bits: double-buffered
    # rows each warp holds alone (a block of them, `per_warp`): each warp then stores
    # its own rows of a slab by TMA, ordered by __syncwarp, with no block barrier; 0
    # when warps share rows
    warp_rows: int = 0
    # warps that store their rows together (consecutive warps: consecutive rows), one
    # box a group ordered by a named barrier of the group; 1: each warp alone
    group_warps: int = 1
    # the warps write their rows and signal mbarriers; thread 0 stores each whole slab
    # (`_lower_gated`: slabs a multiple of 4, so every mbarrier completes an even number
    # of phases a tile and its parities are the same in every tile)
    gated: bool = False

    @property
    def slabs(self) -> int:
        return self.cols // self.width

    @property
    def swizzle(self) -> int:
        return choose_swizzle(self.width * self.elem_bytes)

    @property
    def layout(self) -> Shared:
        return Shared(self.swizzle, (1, 0))

    @property
    def box(self) -> tuple[int, int]:
        """The TMA box, in tile dim order: a group's rows of a slab, or the slab."""
        if self.gated:
            return (self.rows, self.width)
        return (self.warp_rows * self.group_warps or self.rows, self.width)

    @property
    def slab_bytes(self) -> int:
        return self.layout.size_bytes((self.rows, self.width), self.elem_bytes)

    @property
    def buffers(self) -> int:
        return min(BUFFERS, self.slabs) if self.slabbed else self.slabs

    @property
    def smem_bytes(self) -> int:
        # (gated: its mbarriers, kept below the 1024-aligned buffers)
        return self.buffers * self.slab_bytes + (1024 if self.gated else 0)


def plan(layout, shape, elem_bits: int, aligned: bool, chip: str,
         enabled: bool = True) -> StorePlan | None:
    """How a tile of `shape` in `layout` is stored by TMA, or None (the register path)."""
    if not (enabled and aligned and chip.startswith("sm_90")):
        return None
    if not isinstance(layout, Mma) or layout.version != 3 or len(shape) != 2:
        return None
    eb = max(1, elem_bits // 8)
    rows, cols = shape
    width = min(cols, SLAB_ROW_BYTES // eb)
    if width * eb < 16 or cols % width or rows > TMA_MAX_BOX or layout.check(shape):
        return None
    lin = layout.linear(shape)
    threads_in_slab = all(b[1] < width for b in lin.lanes + lin.warps)
    slabbed = threads_in_slab and cols > width
    warp_rows = _warp_rows(lin) if slabbed and PER_WARP else 0
    group = GROUP_WARPS if warp_rows and (1 << len(lin.warps)) % GROUP_WARPS == 0 and \
        warp_rows * GROUP_WARPS <= TMA_MAX_BOX else 1
    gated = GATED and bool(warp_rows) and (cols // width) % 4 == 0 and BUFFERS == 2
    return StorePlan(rows, cols, eb, width, slabbed, warp_rows, group, gated)


def _warp_rows(lin: L.Linear) -> int:
    """R when warp w alone holds rows [w R, (w + 1) R) (its lanes and registers span
    fewer than R rows, the warp bits add R, 2R, 4R, ...), R a multiple of 8 (one
    128-byte swizzle atom: a box of R rows starts on an atom); else 0."""
    within = max((b[0] for b in lin.regs + lin.lanes), default=0)
    rows = 1
    while rows <= within:
        rows *= 2
    warps = [b for b in lin.warps]
    if rows % 8 or any(b[1] for b in warps) or \
            sorted(b[0] for b in warps) != [rows << k for k in range(len(warps))]:
        return 0
    return rows


def plan_for(func: ir.Operation, array: ir.Value, layout, tile_type: ir.Type,
             chip: str) -> StorePlan | None:
    """The plan of a store of a `tile_type` tile held in `layout` into `array` (an
    argument of kernel function `func`)."""
    aligned = isinstance(array.owner, ir.Block) and \
        array.owner == func.regions[0].blocks[0] and \
        arg_has(func, array.arg_number, "tile.aligned")
    if aligned and reads(array):
        return None          # a load after the store must see it: the register path
    return plan(layout, tuple(tile_type.shape), bitwidth(tile_type.element_type), aligned,
                chip, enabled(func))


def reads(array: ir.Value) -> bool:
    """Whether the kernel loads from `array` anywhere (the TMA store's writes become
    visible to later loads only after a full bulk wait, which the epilogue does not
    do: a kernel that reads what it stores keeps the register path)."""
    for use in array.uses:
        owner = use.owner
        owner = owner.operation if isinstance(owner, ir.OpView) else owner
        if owner.name in ("tile.load", "tile.ring_load", "tile.gather", "tile.atomic_rmw",
                          "tile.atomic_cas"):
            return True
    return False


def enabled(func: ir.Operation) -> bool:
    """The kernel option `tma_store` (default on)."""
    return ir.BoolAttr(func.attributes[ENABLE_ATTR]).value \
        if ENABLE_ATTR in func.attributes else True


def plan_of(func: ir.Operation, store: ir.Operation, chip: str) -> StorePlan | None:
    """The plan of a `tile.store` whose tile type carries its layout (stage `layout` on)."""
    t = store.operands[1].type
    return plan_for(func, store.operands[0], tile_layout(t), t, chip)


def store_smem_bytes(func: ir.Operation, store: ir.Operation, chip: str) -> int:
    """Shared memory a `tile.store` takes while it runs: its TMA buffers, else (at most)
    the tile, exchanged into the store's layout."""
    p = plan_of(func, store, chip)
    if p is not None:
        return p.smem_bytes
    t = store.operands[1].type
    lay = tile_layout(t)
    if isinstance(lay, Shared):
        return smem_tile_bytes(lay, t.shape, t.element_type)
    return tile_bytes(t.shape, t.element_type)


def stores(func: ir.Operation, chip: str) -> list[tuple[ir.Operation, StorePlan]]:
    """Every TMA store of kernel function `func`, with its plan."""
    found = []

    def visit(op):
        if op.name == "tile.store":
            p = plan_of(func, op, chip)
            if p is not None:
                found.append((op, p))
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return found


# ---------------------------------------------------------------------------
# The gpu stage
# ---------------------------------------------------------------------------
def slab_frag(frag: Frag, s: int, width: int) -> Frag:
    """The registers of `frag` in columns [s * width, (s + 1) * width), as a tile of
    that width (the slab bits are register bits: `StorePlan.slabbed`)."""
    lin = frag.lin
    rows = lin.shape[0]
    kept = tuple(b for b in lin.regs if b[1] < width)
    sub = L.Linear((rows, width), kept, lin.lanes, lin.warps)
    where = {lin.reg_coord(r): r for r in range(lin.num_regs)}
    regs = []
    for r in range(sub.num_regs):
        row, col = sub.reg_coord(r)
        regs.append(frag.regs[where[(row, col + s * width)]])
    return Frag(sub, frag.elem, regs)


def lower(cx: LoweringContext, op, p: StorePlan) -> None:
    """`tile.store` by TMA (see the module docstring)."""
    cx.stores_seen = True
    frag = cx.frag(op.tile)
    tmap = cx.tensor_map(op.array, p.box, p.swizzle)
    bars = cx.epilogue_barriers(cx.num_warps) if p.gated else None   # (below the buffers)
    base = cx.scratch(p.smem_bytes - (1024 if p.gated else 0), align=1024)
    row0, col0 = (arith.muli(cx.get(i), cx.const(n))
                  for i, n in zip(op.index, (p.rows, p.cols)))
    cx.smem_barrier_before()             # earlier readers (and stores) of the buffers are done
    if p.gated:
        return _lower_gated(cx, frag, tmap, base, bars, row0, col0, p)
    if p.warp_rows:
        return _lower_per_warp(cx, frag, tmap, base, row0, col0, p)
    if p.buffers == p.slabs:             # room for the whole tile: one barrier
        store_frag(cx, frag, SmemTile(p.layout, (p.rows, p.cols), frag.elem, base))
        fence_async_proxy(cx)
        cx.barrier()
        _issue(cx, tmap, [(base + s * p.slab_bytes, s) for s in range(p.slabs)], row0, col0, p)
        return
    for s in range(p.slabs):
        buf = base + (s % p.buffers) * p.slab_bytes
        store_frag(cx, slab_frag(frag, s, p.width), SmemTile(p.layout, p.box, frag.elem, buf))
        fence_async_proxy(cx)
        if s + 1 < p.slabs and s + 1 >= p.buffers:
            # slab s + 1 reuses the buffer of slab s + 1 - buffers: its store has read it
            cx.wait_bulk_reads(p.buffers - 2)
        cx.barrier()
        _issue(cx, tmap, [(buf, s)], row0, col0, p)


def _lower_per_warp(cx: LoweringContext, frag: Frag, tmap: ir.Value, base: int,
                    row0: ir.Value, col0: ir.Value, p: StorePlan) -> None:
    """Each warp stores its own `warp_rows` rows of every slab: its registers into the
    slab's buffer, a fence and __syncwarp, then its lane 0 issues the box and commits
    it as a bulk group of its own.  Before a warp overwrites a buffer, its lane 0 waits
    until its store from that buffer has read it.  No block barrier: warps never
    touch each other's rows (`LoweringContext.bulk_by_warps`: every lane 0 waits for
    its own stores where shared memory is reused)."""
    _, lane, warp = cx.thread_ids()
    lane0 = arith.cmpi(arith.CmpIPredicate.eq, lane, cx.const(0))
    row = cx.thread_coords(frag.lin)[0]                # lane 0: the warp's first row
    row_bytes = p.width * p.elem_bytes
    g = p.group_warps
    if g > 1:       # the group's first warp issues; the group meets at a barrier of its own
        lane0 = arith.andi(lane0, arith.cmpi(arith.CmpIPredicate.eq,
                                             arith.remui(warp, cx.const(g)), cx.const(0)))
        bar_id = arith.addi(arith.divui(warp, cx.const(g)), cx.const(GROUP_BARRIER_BASE))

        def sync():
            nvvm.barrier(None, barrier_id=bar_id, number_of_threads=cx.const(32 * g))
    else:
        full = cx.const(-1)

        def sync():
            nvvm.bar_warp_sync(full)
    for s in range(p.slabs):
        buf = base + (s % p.buffers) * p.slab_bytes
        if s >= p.buffers:               # each issuer, for its own stores
            cx.wait_bulk_reads(p.buffers - 1)
            sync()
        slab = SmemTile(p.layout, (p.rows, p.width), frag.elem, buf)
        store_frag(cx, slab_frag(frag, s, p.width), slab)
        fence_async_proxy(cx)
        sync()

        def issue(s=s, buf=buf):
            col = arith.addi(col0, cx.const(s * p.width)) if s else col0
            offset = arith.addi(cx.const(buf), arith.muli(row, cx.const(row_bytes)))
            nvvm.cp_async_bulk_tensor_global_shared_cta(
                tmap, cx.smem_ptr(offset), [col, arith.addi(row0, row)])
            nvvm.cp_async_bulk_commit_group()
        _on(lane0, issue)


def _lower_gated(cx: LoweringContext, frag: Frag, tmap: ir.Value, base: int, bars: int,
                 row0: ir.Value, col0: ir.Value, p: StorePlan) -> None:
    """The warps write their rows of each slab as in `_lower_per_warp`, and thread 0
    stores the whole slab: full[b] (one arrival a warp) says buffer b holds a slab,
    free[b] (thread 0's arrival) that its last store has read it.  Buffer b's use u in
    the tile waits for parity u % 2 of both: each completes S / 2 phases a tile (S a
    multiple of 4), the free ones once at the start (after `smem_barrier_before` every
    earlier store has read its buffer) and once for each reuse."""
    _, lane, _ = cx.thread_ids()
    lane0 = arith.cmpi(arith.CmpIPredicate.eq, lane, cx.const(0))
    first = cx.first_thread()
    full = [bars, bars + 8]
    free = [bars + 16, bars + 24]
    ticks = cx.const(0x989680)

    def arrive(off):
        nvvm.mbarrier_arrive(ir.IntegerType.get_signless(64), cx.smem_ptr(off))

    def wait(off, parity):
        nvvm.mbarrier_try_wait_parity(cx.smem_ptr(off), cx.const(parity), ticks)

    _on(first, lambda: (arrive(free[0]), arrive(free[1])))
    every = cx.const(-1)
    for s in range(p.slabs):
        b, u = s % 2, s // 2
        buf = base + b * p.slab_bytes
        wait(free[b], u % 2)
        store_frag(cx, slab_frag(frag, s, p.width),
                   SmemTile(p.layout, (p.rows, p.width), frag.elem, buf))
        fence_async_proxy(cx)
        nvvm.bar_warp_sync(every)
        _on(lane0, lambda b=b: arrive(full[b]))

        def issue(s=s, b=b, u=u, buf=buf):
            wait(full[b], u % 2)
            col = arith.addi(col0, cx.const(s * p.width)) if s else col0
            nvvm.cp_async_bulk_tensor_global_shared_cta(tmap, cx.smem_ptr(buf), [col, row0])
            nvvm.cp_async_bulk_commit_group()
            if 1 <= s and s + 1 < p.slabs:     # slab s + 1 reuses slab s - 1's buffer
                nvvm.cp_async_bulk_wait_group(1, read=ir.UnitAttr.get())
                arrive(free[(s - 1) % 2])
        _on(first, issue)


def _on(cond: ir.Value, body) -> None:
    if_op = scf.IfOp(cond, [], has_else=False)
    with ir.InsertionPoint(if_op.then_block):
        body()
        scf.YieldOp([])


def _issue(cx: LoweringContext, tmap: ir.Value, boxes, row0: ir.Value, col0: ir.Value,
           p: StorePlan) -> None:
    """Thread 0 stores each (shared offset, slab) box and commits them as one bulk group."""
    if_op = scf.IfOp(cx.first_thread(), [], has_else=False)
    with ir.InsertionPoint(if_op.then_block):
        for offset, s in boxes:
            col = arith.addi(col0, cx.const(s * p.width)) if s else col0
            nvvm.cp_async_bulk_tensor_global_shared_cta(tmap, cx.smem_ptr(offset), [col, row0])
        nvvm.cp_async_bulk_commit_group()
        scf.YieldOp([])
