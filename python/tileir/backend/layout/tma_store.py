"""The TMA store epilogue (sm_90a): a tensor-core accumulator stored by TMA.

Contract.  A `tile.store` of a 2-d tile in a wgmma accumulator layout
(`#tile.mma_acc<3 ...>`, or what element-wise ops after the loop keep of it:
casts, scale, bias), or of such a tile with leading unit dims (a batched
product's (1, M, N) tile: the batch index picks the box's plane), into an aligned
array (`tile.aligned`: what TMA needs) that the kernel never loads from (a later
load would have to wait for the store's global writes) is stored through shared
memory by TMA instead of converting to a coalesced layout and storing from
registers:

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

This module plans the stores, from the `layout` stage on (layout assignment keeps a
planned tile in its accumulator layout); gpu/tma_store.py writes them.  The shared
memory a store takes is `StorePlan.smem_bytes` (two slabs, or the tile), which the
pipeliner reserves beside a ring that outlives the store (the warp-specialized
persistent kernel).  The kernel option `tma_store=False` (function attribute
`tile.tma_store`) keeps the register path.
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from tileir.dialect.layout import tile_layout
from tileir.dialect.types import bitwidth
from tileir.dialect.verifier import arg_has
from . import layouts as L
from .mma_layouts import TMA_MAX_BOX, Mma, Shared, choose_swizzle, smem_tile_bytes, tile_bytes

ENABLE_ATTR = "tile.tma_store"
SLAB_ROW_BYTES = 128         # one slab row: the widest swizzle
BUFFERS = 2                  # slabs in flight when slabbed
PER_WARP = True              # warps that hold their own rows store them (no block barrier)
GROUP_WARPS = 1              # ... in groups of this many warps (4: a warpgroup), one box each
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
    # unit dims of the tile before its rows (a batched product's (1, M, N) tile): the
    # box is one plane of a higher-rank array, at the tile's index along them
    lead: int = 0

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
        """The TMA box, in tile dim order: a group's rows of a slab, or the slab (after
        the leading unit dims)."""
        rows = self.rows if self.gated else self.warp_rows * self.group_warps or self.rows
        return (1,) * self.lead + (rows, self.width)

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
    if not isinstance(layout, Mma) or layout.version != 3 or len(shape) != layout.rank \
            or any(d != 1 for d in shape[:layout.lead]):
        return None
    lead = layout.lead
    layout, shape = layout.with_lead(0), tuple(shape)[lead:]
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
    return StorePlan(rows, cols, eb, width, slabbed, warp_rows, group, gated, lead)


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
