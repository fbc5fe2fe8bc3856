"""Ring rules: the `pipeline` stage's `tile.ring_*` ops as async copies and barriers.

A ring is `stages` slots of shared memory, each holding one tile of each type
the ring carries (1024-byte aligned, the swizzle period).

sm_90a (TMA): each slot has a *full* mbarrier (count 1: the producer's
`arrive.expect_tx` plus the copies' completed bytes) and an *empty* one (count:
one arrival per warp).  `ring_acquire` is thread 0 waiting on *empty* and
announcing the slot's bytes; `ring_load` is thread 0 issuing one
`cp.async.bulk.tensor` per TMA box (the tile's fastest dim is cut into boxes of
one swizzle row) from a tensor map the runtime encodes (the kernel's trailing
tensor-map parameters, see `lower.py`); out-of-bounds elements arrive as zeros.
A box is cut short along its slowest dim longer than 1 (`tma_clip_dim`: the rows
of a row-major tile) to the array's extent there when the array is shorter than
the tile, the way `runtime.tensor_maps.clipped_box` encodes it: TMA delivers
out-of-bounds zeros several times slower than data, and a decode GEMM's A tile
of 16 rows in a 128-row box is 7/8 zeros.  The rows the box no longer covers
are zeroed once, when the ring is allocated (`_zero_clipped_rows`), and the
slot's transaction bytes count the box as cut.
`ring_wait` is every thread waiting on *full*; `ring_release` is lane 0 of
each warp arriving on *empty*.

A ring copied in parts (`tile.copy_parts` on its `ring_alloc`,
backend/pipeline/copy_parts.py) has a full barrier per TMA box of a slot instead: the
acquire announces each box's bytes on its own barrier and each box completes its own.
A `ring_wait` marked the same way emits nothing: its slot's views carry their boxes'
barriers and the wait's parity (`Parts`, in `cx.smem_parts` by the view's base), and
the wgmma rule waits for a box before the first k step that reads it; an unmarked
wait waits for every box.

A ring whose `tile.multicast` lists buffers belongs to a cluster pair
(`backend/pipeline/cluster_pairs.py`): the two blocks of a (2, 1, 1) cluster load those
tiles alike, so block r copies half r of each (`cluster_pairs.split`: boxes r,
r + 2, ..., or rows [r h, (r + 1) h) of a tile's one box) with
`.multicast::cluster` into both blocks' slots, completing bytes on the full
barrier at the same offset in each.  Each block's full barrier still expects the
whole slot.  A slot may be refilled only when both blocks are done with it (the
peer's copy writes into this block's slot too): empty barriers count the warps of
both blocks, and `ring_release` arrives on the peer's as well (`mapa`).  A
cluster barrier after the barriers' initialization (the peer's copies and
arrivals may come at once) and before they are invalidated (the peer's last
arrivals land in this block's shared memory) closes the ring.

sm_80 (cp.async): every thread copies its 16-byte chunks of the tile with
`cp.async.cg` (a chunk past the array's edge copies its in-bounds bytes and
zero-fills the rest); `ring_commit` closes a commit group; `ring_wait` waits
until only the S - 2 youngest groups are pending, then a block barrier makes
the slot's data visible and the previous iteration's slot free.  Acquire and
release need no code.
"""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, gpu, llvm, nvvm, scf

from tileir.dialect import TileIRError
from tileir.backend.pipeline.cluster_pairs import MULTICAST_ATTR, half_bytes, split
from tileir.backend.pipeline.copy_parts import PARTS_ATTR
from tileir.backend.layout.mma_layouts import (Shared, smem_tile_bytes, tile_bytes, tma_box,
                                               tma_clip_dim)
from ..context import I32, I64, LoweringContext, _bits
from ..memory import _Addressing
from ..shared import SmemTile, _groups, fence_async_proxy, staging_linear, thread_offset
from .cluster import cluster_sync, mapa
from .registry import rule

BARRIER_BYTES = 8
_WAIT_TICKS = 0x989680        # try_wait's suspend-time hint (ns)


@dataclasses.dataclass
class Ring:
    stages: int
    tiles: list[tuple[Shared, tuple[int, ...], ir.Type]]
    offsets: list[int]         # each tile's byte offset inside a slot
    stage_bytes: int
    base: int                  # byte offset of slot 0 in the dynamic shared memory
    size: int                  # bytes reserved (slots and barriers)
    tma: bool
    full: int = 0              # byte offset of the full barriers (one per slot)
    empty: int = 0
    tx: ir.Value | None = None  # i32 bytes per slot when a box may be clipped (runtime)
    multicast: frozenset = frozenset()   # buffers a cluster pair shares (copied in halves)
    # copied in parts: the first part (box) of each buffer, and the part count; a
    # slot's full barriers are then `parts` consecutive ones
    part_base: list[int] | None = None
    parts: int = 1
    clipped: dict = dataclasses.field(default_factory=dict)   # buffer -> (dim, rows kept)
    # a marked ring_wait's parity by its (tile-level) slot value: its views' Parts
    deferred: dict = dataclasses.field(default_factory=dict)

    def slot_base(self, cx: LoweringContext, slot: ir.Value) -> ir.Value:
        return arith.addi(cx.const(self.base), arith.muli(slot, cx.const(self.stage_bytes)))

    def barrier(self, cx: LoweringContext, which: int, slot: ir.Value) -> ir.Value:
        off = arith.addi(cx.const(which), arith.muli(slot, cx.const(BARRIER_BYTES)))
        return cx.smem_ptr(off)

    def full_part(self, cx: LoweringContext, slot: ir.Value, part: int) -> ir.Value:
        """The full barrier of part `part` of `slot` (part 0: the slot's only one when
        the ring is not copied in parts)."""
        off = arith.addi(cx.const(self.full + part * BARRIER_BYTES),
                         arith.muli(slot, cx.const(self.parts * BARRIER_BYTES)))
        return cx.smem_ptr(off)

    def part_tx(self, cx: LoweringContext, buffer: int) -> ir.Value:
        """Bytes one box of `buffer` delivers (a clipped box: its kept rows')."""
        lay, shape, elem = self.tiles[buffer]
        eb = max(1, _bits(elem) // 8)
        per_box = tile_bytes(shape, elem) // lay.num_boxes(shape, eb)
        if buffer not in self.clipped:
            return cx.const(per_box)
        clip, kept = self.clipped[buffer]
        return arith.muli(kept, cx.const(per_box // shape[clip]))

    def tx_bytes(self) -> int:
        """Bytes the copies of one slot deliver: every element of every tile (TMA counts
        a box's out-of-bounds zeros as delivered), not the boxes' padded footprint."""
        return sum(tile_bytes(shape, elem) for _, shape, elem in self.tiles)

    def tx_value(self, cx: LoweringContext) -> ir.Value:
        return self.tx if self.tx is not None else cx.const(self.tx_bytes())


@dataclasses.dataclass
class Parts:
    """The boxes of a ring view copied in parts, waited for by the products that read
    them: each box's full barrier, the elements of the tile's fastest dim a box holds,
    the parity to wait for, and the boxes already waited for by the blocks whose code
    runs before what is lowered next (a block and the blocks inside it)."""
    barriers: list[ir.Value]
    box_elems: int
    parity: ir.Value
    waited: dict = dataclasses.field(default_factory=dict)   # ir.Block -> set of boxes

    def wait(self, cx: LoweringContext, boxes) -> None:
        """Waits for `boxes` not waited for yet where the insertion point is."""
        block = ir.InsertionPoint.current.block
        done = set()
        b = block
        while b is not None:
            done |= self.waited.get(b, set())
            owner = b.owner
            op = getattr(owner, "operation", owner)
            b = op.block if op is not None and op.name != "builtin.module" else None
        for box in sorted(set(boxes) - done):
            nvvm.mbarrier_try_wait_parity(self.barriers[box], self.parity,
                                          cx.const(_WAIT_TICKS))
            self.waited.setdefault(block, set()).add(box)


def copy_box(lay: Shared, shape, eb: int, multicast: bool) -> tuple[tuple[int, ...], int | None]:
    """(the TMA box of one copy of a ring tile, the dim the runtime may clip it along):
    a multicast tile split by rows is copied in halves along its clip dim and never
    clipped; one split by whole boxes keeps its boxes and their clip."""
    box = tma_box(lay, shape, eb)
    clip = tma_clip_dim(lay, shape)
    if not multicast or split(lay, shape, eb) == "boxes":
        return box, clip          # (whole boxes: clipped alike in both blocks)
    half = list(box)
    half[clip] //= 2
    return tuple(half), None


def multicast_buffers(alloc: ir.Operation) -> frozenset:
    """The buffers of ring `alloc` (a tile.ring_alloc) a cluster pair shares."""
    if MULTICAST_ATTR not in alloc.attributes:
        return frozenset()
    return frozenset(ir.DenseI64ArrayAttr(alloc.attributes[MULTICAST_ATTR]))


def _round(n: int, m: int) -> int:
    return (n + m - 1) // m * m


@rule("tile.ring_alloc")
def _ring_alloc(cx, op):
    from tileir.dialect.layout import tile_layout
    tiles = [(tile_layout(t), tuple(t.shape), t.element_type) for t in op.tiles]
    offsets, at = [], 0
    for lay, shape, elem in tiles:
        offsets.append(at)
        at += _round(smem_tile_bytes(lay, shape, elem), 1024)
    stage_bytes = at
    tma = cx.chip.startswith("sm_90")
    stages = op.stages
    part_base, parts = None, 1
    if tma and PARTS_ATTR in op.operation.attributes and not multicast_buffers(op.operation):
        boxes = [lay.num_boxes(shape, max(1, _bits(elem) // 8)) for lay, shape, elem in tiles]
        part_base = [sum(boxes[:b]) for b in range(len(boxes))]
        parts = sum(boxes)
    size = stages * stage_bytes + ((parts + 1) * stages * BARRIER_BYTES if tma else 0)
    # earlier users of this memory are done (readers of an exchange, TMA stores)
    # before its barriers are initialized and clipped rows zeroed
    cx.smem_barrier_before()
    base = cx.alloc_smem(size)
    ring = Ring(stages, tiles, offsets, stage_bytes, base, size, tma,
                multicast=multicast_buffers(op.operation) if tma else frozenset(),
                part_base=part_base, parts=parts)
    if tma:
        ring.full = base + stages * stage_bytes
        ring.empty = ring.full + stages * parts * BARRIER_BYTES
        releasers = cx.num_warps * (2 if ring.multicast else 1)
        if_op = scf.IfOp(cx.first_thread(), [], has_else=False)
        with ir.InsertionPoint(if_op.then_block):
            for s in range(stages):
                for p in range(parts):
                    nvvm.mbarrier_init(cx.smem_ptr(ring.full + (s * parts + p) * BARRIER_BYTES),
                                       cx.const(1))
                nvvm.mbarrier_init(cx.smem_ptr(ring.empty + s * BARRIER_BYTES),
                                   cx.const(releasers))
            nvvm.fence_mbarrier_init()
            scf.YieldOp([])
        clips = _clipped_buffers(cx, op, ring)
        if clips:
            ring.tx = _clipped_tx(cx, ring, clips)
            ring.clipped = {b: (clip, kept) for b, clip, kept in clips}
            _zero_clipped_rows(cx, ring, clips)
    if ring.multicast:           # both blocks' barriers are initialized for both
        cluster_sync(cx)
    else:
        cx.barrier()             # the barriers are initialized for all
    cx.values[op.result] = ring


def _clipped_buffers(cx, op, ring: Ring) -> list[tuple[int, int, ir.Value]]:
    """(buffer, clip dim, rows its box keeps: an i32) for each TMA-loaded buffer whose
    box may be cut (`tma_clip_dim`), from the array its `ring_load`s read."""
    arrays: dict[int, set] = {}
    for use in op.result.uses:
        owner = use.owner
        if owner.name == "tile.ring_load":
            view = owner.opview
            arrays.setdefault(ir.IntegerAttr(owner.attributes["buffer"]).value,
                              set()).add(view.array)
    out = []
    for b, found in sorted(arrays.items()):
        lay, shape, _ = ring.tiles[b]
        clip = tma_clip_dim(lay, shape)
        if clip is None or (b in ring.multicast and split(
                lay, shape, max(1, _bits(ring.tiles[b][2]) // 8)) == "rows"):
            continue
        if len(found) != 1:
            raise TileIRError(f"internal error: ring buffer {b} is loaded from "
                              f"{len(found)} arrays", op.location)
        extent = cx.arrays[next(iter(found))].dims[clip]
        kept = arith.maxsi(arith.minsi(extent, cx.const(shape[clip])), cx.const(1))
        out.append((b, clip, kept))
    return out


def _clipped_tx(cx, ring: Ring, clips) -> ir.Value:
    """A slot's transaction bytes with the clipped boxes counted as cut."""
    clipped = {b for b, _, _ in clips}
    total = cx.const(sum(tile_bytes(shape, elem) for b, (_, shape, elem)
                         in enumerate(ring.tiles) if b not in clipped))
    for b, clip, kept in clips:
        _, shape, elem = ring.tiles[b]
        per_row = tile_bytes(shape, elem) // shape[clip]
        total = arith.addi(total, arith.muli(kept, cx.const(per_row)))
    return total


def _zero_clipped_rows(cx, ring: Ring, clips) -> None:
    """Every thread zeroes 16-byte chunks of the rows the cut boxes leave out, in every
    slot (no copy writes them afterwards, so once is enough), when some box is cut;
    then the writes are ordered before the async proxy's reads (wgmma)."""
    tid, _, _ = cx.thread_ids()
    threads = 32 * (cx.num_warps + cx.producer_warps)
    cut = None
    for b, clip, kept in clips:
        c = arith.cmpi(arith.CmpIPredicate.slt, kept, cx.const(ring.tiles[b][1][clip]))
        cut = c if cut is None else arith.ori(cut, c)
    if_op = _if(cut)
    with ir.InsertionPoint(if_op.then_block):
        zero = arith.ConstantOp(ir.VectorType.get([4], I32()),
                                ir.DenseElementsAttr.get_splat(
                                    ir.VectorType.get([4], I32()),
                                    ir.IntegerAttr.get(I32(), 0))).result
        for b, clip, kept in clips:
            lay, shape, elem = ring.tiles[b]
            eb = max(1, _bits(elem) // 8)
            boxes = lay.num_boxes(shape, eb)
            box_bytes = lay.box_bytes(shape, eb)
            rows = 1                      # box rows: every dim but the fastest
            for d in lay.order[1:]:
                rows *= shape[d]
            # bytes of one index along the clip dim inside a box (a multiple of 16)
            stride = rows // shape[clip] * lay.row_bytes(shape, eb)
            chunks = arith.muli(arith.subi(cx.const(shape[clip]), kept),
                                cx.const(stride // 16))          # per box
            total = arith.muli(chunks, cx.const(ring.stages * boxes))
            skip = arith.muli(kept, cx.const(stride))
            # rounds of one chunk per thread (bounds uniform across the block)
            rounds = arith.divui(arith.addi(total, cx.const(threads - 1)), cx.const(threads))
            loop = scf.ForOp(cx.const(0), rounds, cx.const(1), [])
            with ir.InsertionPoint(loop.body):
                i = arith.addi(arith.muli(loop.induction_variable, cx.const(threads)), tid)
                inside = _if(arith.cmpi(arith.CmpIPredicate.ult, i, total))
                with ir.InsertionPoint(inside.then_block):
                    j = arith.divui(i, chunks)            # (slot, box)
                    k = arith.remui(i, chunks)
                    slot = arith.divui(j, cx.const(boxes))
                    box = arith.remui(j, cx.const(boxes))
                    off = arith.addi(ring.slot_base(cx, slot), cx.const(ring.offsets[b]))
                    off = arith.addi(off, arith.muli(box, cx.const(box_bytes)))
                    off = arith.addi(arith.addi(off, skip), arith.muli(k, cx.const(16)))
                    llvm.store(zero, cx.smem_ptr(off), alignment=16)
                    scf.YieldOp([])
                scf.YieldOp([])
        scf.YieldOp([])
    fence_async_proxy(cx)


def _if(cond: ir.Value):
    if_op = scf.IfOp(cond, [], has_else=False)
    return if_op


def _first_thread_and(cx: LoweringContext, pred: ir.Value) -> ir.Value:
    return arith.andi(cx.first_thread(), pred)


@rule("tile.ring_acquire")
def _ring_acquire(cx, op):
    ring: Ring = cx.get(op.ring)
    if not ring.tma:
        return                   # cp.async: the consumer's wait already freed the slot
    slot = cx.get(op.slot)
    if_op = _if(_first_thread_and(cx, cx.get(op.pred)))
    with ir.InsertionPoint(if_op.then_block):
        nvvm.mbarrier_try_wait_parity(ring.barrier(cx, ring.empty, slot), cx.get(op.parity),
                                      cx.const(_WAIT_TICKS))
        if ring.part_base is None:
            nvvm.mbarrier_arrive_expect_tx(None, ring.barrier(cx, ring.full, slot),
                                           ring.tx_value(cx))
        else:                    # each box's bytes on its own barrier
            for b, first in enumerate(ring.part_base):
                lay, shape, elem = ring.tiles[b]
                tx = ring.part_tx(cx, b)
                for box in range(lay.num_boxes(shape, max(1, _bits(elem) // 8))):
                    nvvm.mbarrier_arrive_expect_tx(None, ring.full_part(cx, slot, first + box),
                                                   tx)
        scf.YieldOp([])


@rule("tile.ring_load")
def _ring_load(cx, op):
    ring: Ring = cx.get(op.ring)
    lay, shape, elem = ring.tiles[op.buffer]
    slot = cx.get(op.slot)
    dst = arith.addi(ring.slot_base(cx, slot), cx.const(ring.offsets[op.buffer]))
    index = [cx.get(i) for i in op.index]
    if ring.tma:
        _tma_load(cx, op, ring, lay, shape, elem, slot, dst, index)
    else:
        _cp_async_load(cx, op, lay, shape, elem, dst, index)


def _tma_load(cx, op, ring, lay, shape, elem, slot, dst, index) -> None:
    eb = max(1, _bits(elem) // 8)
    box_inner = lay.box_elems(shape, eb)
    shared = op.buffer in ring.multicast
    box, _ = copy_box(lay, shape, eb, shared)
    tmap = cx.tensor_map(op.array, box, lay.swizzle)
    if_op = _if(_first_thread_and(cx, cx.get(op.pred)))
    with ir.InsertionPoint(if_op.then_block):
        bar = ring.barrier(cx, ring.full, slot)
        # element coordinates, innermost dim first
        origin = [arith.muli(i, cx.const(s)) for i, s in zip(index, shape)]
        mask = None
        box_bytes = lay.box_bytes(shape, eb)
        boxes = lay.num_boxes(shape, eb)
        step = 1
        if shared:
            rank = _cluster_rank(cx)
            mask = arith.ConstantOp(ir.IntegerType.get_signless(16), 0b11).result
            if split(lay, shape, eb) == "boxes":       # boxes r, r + 2, ...
                step = 2
                inner = lay.order[0]
                origin[inner] = arith.addi(origin[inner],
                                           arith.muli(rank, cx.const(box_inner)))
                dst = arith.addi(dst, arith.muli(rank, cx.const(box_bytes)))
            else:                # rows [r h, (r + 1) h) of its box
                clip = tma_clip_dim(lay, shape)
                origin[clip] = arith.addi(origin[clip], arith.muli(rank, cx.const(box[clip])))
                dst = arith.addi(dst, arith.muli(rank,
                                                 cx.const(half_bytes(lay, shape, eb, clip))))
        for b in range(0, boxes, step):
            coords = list(reversed(origin))
            if b:
                coords[0] = arith.addi(coords[0], cx.const(b * box_inner))
            to = cx.smem_ptr(arith.addi(dst, cx.const(b * box_bytes)))
            if ring.part_base is not None:      # copied in parts: the box's own barrier
                bar = ring.full_part(cx, slot, ring.part_base[op.buffer] + b)
            cluster = llvm.addrspacecast(ir.Type.parse("!llvm.ptr<7>"), to)
            nvvm.cp_async_bulk_tensor_shared_cluster_global(cluster, tmap, coords, bar, [],
                                                            multicast_mask=mask)
        scf.YieldOp([])


@rule("tile.prefetch_l2")
def _prefetch_l2(cx, op):
    """`cp.async.bulk.prefetch.tensor.Nd.L2.global.tile` of each box a `ring_load` of
    the tile copies, through the same tensor map (so a clipped box is clipped alike),
    from the block's first thread."""
    if not cx.chip.startswith("sm_90"):
        raise TileIRError(f"tile.prefetch_l2 copies TMA boxes: it needs sm_90a, not "
                          f"{cx.chip}", op.location)
    t = op.tile_type()
    from tileir.dialect.layout import tile_layout
    lay, shape = tile_layout(t), tuple(t.shape)
    eb = max(1, _bits(t.element_type) // 8)
    box, _ = copy_box(lay, shape, eb, False)
    tmap = cx.tensor_map(op.array, box, lay.swizzle)
    box_inner = lay.box_elems(shape, eb)
    index = [cx.get(i) for i in op.index]
    if_op = _if(_first_thread_and(cx, cx.get(op.pred)))
    with ir.InsertionPoint(if_op.then_block):
        origin = [arith.muli(i, cx.const(s)) for i, s in zip(index, shape)]
        for b in range(lay.num_boxes(shape, eb)):
            coords = list(reversed(origin))          # innermost dim first
            if b:
                coords[0] = arith.addi(coords[0], cx.const(b * box_inner))
            nvvm.cp_async_bulk_tensor_prefetch(tmap, coords, [])
        scf.YieldOp([])


def _cluster_rank(cx: LoweringContext) -> ir.Value:
    """This block's rank in its cluster of two: bid(a) mod 2 along the cluster's axis a
    of two blocks (a persistent kernel's 1-d grid of (2, 1, 1) clusters: a = 0)."""
    axis = cx.cluster_dims.index(2) if cx.cluster_dims else 0
    dim = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)[axis]
    bid = arith.index_castui(I32(), gpu.block_id(dim))
    return arith.remui(bid, cx.const(2))


def _cp_async_load(cx, op, lay, shape, elem, dst, index) -> None:
    """Every thread copies its 16-byte chunks (`staging_linear`), zero-filling what lies
    outside the array."""
    arr = cx.arrays[op.array]
    lin = staging_linear(cx, shape, elem, lay)
    tile = SmemTile(lay, shape, elem, dst)
    eb = tile.elem_bytes
    v = _groups(tile, lin)
    if v * eb != 16:
        raise ValueError(f"cp.async rings copy 16-byte chunks; this tile gives {v * eb}")
    if_op = _if(cx.get(op.pred))
    with ir.InsertionPoint(if_op.then_block):
        addr = _Addressing(cx, arr, index, lin)
        toff = thread_offset(cx, tile, lin)
        last = len(shape) - 1
        cache = ir.Attribute.parse("#nvvm<load_cache_modifier cg>")
        for r0 in range(0, lin.num_regs, v):
            coords = addr.coords(r0)
            other = addr.in_bounds(coords, range(last))
            left = arith.subi(addr.dims64[last], coords[last])        # elements to the edge
            n = arith.maxsi(arith.minsi(left, cx.const(v, I64())), cx.const(0, I64()))
            if other is not None:
                n = arith.select(other, n, cx.const(0, I64()))
            nbytes = arith.trunci(I32(), arith.muli(n, cx.const(eb, I64())))
            src = arith.select(arith.cmpi(arith.CmpIPredicate.sgt, n, cx.const(0, I64())),
                               addr.ptr(r0), arr.ptr)
            roff = tile.offset(lin.reg_coord(r0))
            off = arith.xori(toff, cx.const(roff)) if roff else toff
            nvvm.cp_async_shared_global(cx.smem_ptr(arith.addi(dst, off)), src, 16, cache,
                                        cp_size=nbytes)
        scf.YieldOp([])


@rule("tile.ring_commit")
def _ring_commit(cx, op):
    ring: Ring = cx.get(op.operands[0])
    if not ring.tma:
        nvvm.cp_async_commit_group()


@rule("tile.ring_wait")
def _ring_wait(cx, op):
    ring: Ring = cx.get(op.ring)
    slot = cx.get(op.slot)
    if ring.tma and ring.part_base is not None:
        if PARTS_ATTR in op.operation.attributes:
            # the views' products wait for their boxes (rules/mma.py `_wait_parts`)
            ring.deferred[op.slot] = cx.get(op.parity)
            return
        for p in range(ring.parts):
            nvvm.mbarrier_try_wait_parity(ring.full_part(cx, slot, p), cx.get(op.parity),
                                          cx.const(_WAIT_TICKS))
    elif ring.tma:
        nvvm.mbarrier_try_wait_parity(ring.barrier(cx, ring.full, slot), cx.get(op.parity),
                                      cx.const(_WAIT_TICKS))
    else:
        # groups committed after this slot's: the S - 2 loads issued since
        nvvm.cp_async_wait_group(ring.stages - 2)
        cx.barrier()


OPAQUE_SLOT_ATTR = "tile.opaque_slot"    # on a ring_view: its slot through a volatile move


@rule("tile.ring_view")
def _ring_view(cx, op):
    ring: Ring = cx.get(op.ring)
    lay, shape, elem = ring.tiles[op.buffer]
    slot = cx.get(op.slot)
    if OPAQUE_SLOT_ATTR in op.operation.attributes:
        # a slot LLVM could fold to a constant (an alternating owners' step: slot g % 2
        # of g = 2i or 2i + 1): read through a volatile move, so the addresses and wgmma
        # descriptors made from it stay in the loop instead of being hoisted out of it,
        # one set a slot, live across the loop (backend/pipeline/owner_pairs.py)
        slot = llvm.inline_asm(I32(), [slot], "mov.b32 $0, $1;", "=r,r",
                               has_side_effects=True)
    base = arith.addi(ring.slot_base(cx, slot), cx.const(ring.offsets[op.buffer]))
    cx.values[op.result] = SmemTile(lay, shape, elem, base)
    if op.slot in ring.deferred:          # its wait was deferred to the products
        eb = max(1, _bits(elem) // 8)
        slot = cx.get(op.slot)
        cx.smem_parts[base] = Parts(
            [ring.full_part(cx, slot, ring.part_base[op.buffer] + b)
             for b in range(lay.num_boxes(shape, eb))],
            lay.box_elems(shape, eb), ring.deferred[op.slot])


@rule("tile.ring_release")
def _ring_release(cx, op):
    ring: Ring = cx.get(op.ring)
    if not ring.tma:
        return
    _, lane, _ = cx.thread_ids()
    cond = arith.andi(arith.cmpi(arith.CmpIPredicate.eq, lane, cx.const(0)),
                      cx.get(op.operands[2]))
    if_op = _if(cond)
    with ir.InsertionPoint(if_op.then_block):
        empty = ring.barrier(cx, ring.empty, cx.get(op.slot))
        nvvm.mbarrier_arrive(I64(), empty)
        if ring.multicast:       # the peer copies into this slot too: free it there
            peer = arith.xori(_cluster_rank(cx), cx.const(1))
            remote = mapa(llvm.ptrtoint(I32(), empty), peer)
            # the default .release.cta: what matters is that this block's wgmma reads
            # of the slot are done (they are: waited for), not that its writes reach
            # the peer; .release.cluster would fence the GPU at every arrival
            llvm.inline_asm(ir.Type.parse("!llvm.void"), [remote],
                            "mbarrier.arrive.shared::cluster.b64 _, [$0];",
                            "r", has_side_effects=True)
        scf.YieldOp([])


@rule("tile.ring_free")
def _ring_free(cx, op):
    ring: Ring = cx.get(op.operands[0])
    if cx.role == "producer":
        # a cluster pair's producer warps, after their last copy: their part of the
        # closing cluster barrier (the consumers' ring_free invalidates and frees)
        if not ring.multicast:
            raise TileIRError("internal error: a producer's ring_free for a ring no "
                              "cluster pair shares", op.location)
        cluster_sync(cx)
        return
    if ring.tma:
        if ring.multicast:      # ... and the peer's arrivals on this block's barriers
            cluster_sync(cx)
        else:
            cx.barrier()        # every wait on the barriers is over
        if_op = _if(cx.first_thread())
        with ir.InsertionPoint(if_op.then_block):
            for s in range(ring.stages):
                for p in range(ring.parts):
                    nvvm.mbarrier_inval(cx.smem_ptr(ring.full + (s * ring.parts + p) *
                                                    BARRIER_BYTES))
                nvvm.mbarrier_inval(cx.smem_ptr(ring.empty + s * BARRIER_BYTES))
            scf.YieldOp([])
    else:
        nvvm.cp_async_wait_group(0)
    cx.free_smem(ring.base, ring.size)
