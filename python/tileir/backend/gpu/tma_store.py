"""The TMA store epilogue's code (stage `gpu`): a `tile.store` that
layout/tma_store.py planned (`StorePlan`; its docstring has the contract), written
into swizzled shared buffers slab by slab and stored by `cp.async.bulk.tensor`."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, nvvm, scf

from tileir.backend.layout import layouts as L
from tileir.backend.layout.tma_store import StorePlan
from .barriers import GROUP_BARRIER_BASE
from .context import Frag, LoweringContext
from .shared import SmemTile, fence_async_proxy, store_frag



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


def unbatched(frag: Frag, lead: int) -> Frag:
    """`frag` without its `lead` leading unit dims (the same registers)."""
    lin = frag.lin
    for _ in range(lead):
        lin = L.drop_dim(lin, 0)
    return Frag(lin, frag.elem, frag.regs)


def lower(cx: LoweringContext, op, p: StorePlan) -> None:
    """`tile.store` by TMA (see the module docstring); a tile with leading unit dims
    stores its plane of the array (their indices are the box's outer coordinates)."""
    cx.stores_seen = True
    frag = unbatched(cx.frag(op.tile), p.lead)
    tmap = cx.tensor_map(op.array, p.box, p.swizzle)
    bars = cx.epilogue_barriers(cx.num_warps) if p.gated else None   # (below the buffers)
    base = cx.scratch(p.smem_bytes - (1024 if p.gated else 0), align=1024)
    index = op.index
    row0, col0 = (arith.muli(cx.get(i), cx.const(n))
                  for i, n in zip(index[p.lead:], (p.rows, p.cols)))
    # a leading unit dim's coordinate is its tile index; TMA takes the innermost first
    planes = [cx.get(i) for i in reversed(index[:p.lead])]
    cx.smem_barrier_before()             # earlier readers (and stores) of the buffers are done
    if p.gated:
        return _lower_gated(cx, frag, tmap, base, bars, row0, col0, planes, p)
    if p.warp_rows:
        return _lower_per_warp(cx, frag, tmap, base, row0, col0, planes, p)
    if p.buffers == p.slabs:             # room for the whole tile: one barrier
        store_frag(cx, frag, SmemTile(p.layout, (p.rows, p.cols), frag.elem, base))
        fence_async_proxy(cx)
        cx.barrier()
        _issue(cx, tmap, [(base + s * p.slab_bytes, s) for s in range(p.slabs)], row0, col0,
               planes, p)
        return
    for s in range(p.slabs):
        buf = base + (s % p.buffers) * p.slab_bytes
        store_frag(cx, slab_frag(frag, s, p.width),
                   SmemTile(p.layout, (p.rows, p.width), frag.elem, buf))
        fence_async_proxy(cx)
        if s + 1 < p.slabs and s + 1 >= p.buffers:
            # slab s + 1 reuses the buffer of slab s + 1 - buffers: its store has read it
            cx.wait_bulk_reads(p.buffers - 2)
        cx.barrier()
        _issue(cx, tmap, [(buf, s)], row0, col0, planes, p)


def _lower_per_warp(cx: LoweringContext, frag: Frag, tmap: ir.Value, base: int,
                    row0: ir.Value, col0: ir.Value, planes: list[ir.Value],
                    p: StorePlan) -> None:
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
                tmap, cx.smem_ptr(offset), [col, arith.addi(row0, row), *planes])
            nvvm.cp_async_bulk_commit_group()
        _on(lane0, issue)


def _lower_gated(cx: LoweringContext, frag: Frag, tmap: ir.Value, base: int, bars: int,
                 row0: ir.Value, col0: ir.Value, planes: list[ir.Value],
                 p: StorePlan) -> None:
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
            nvvm.cp_async_bulk_tensor_global_shared_cta(tmap, cx.smem_ptr(buf),
                                                        [col, row0, *planes])
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
           planes: list[ir.Value], p: StorePlan) -> None:
    """Thread 0 stores each (shared offset, slab) box and commits them as one bulk group."""
    if_op = scf.IfOp(cx.first_thread(), [], has_else=False)
    with ir.InsertionPoint(if_op.then_block):
        for offset, s in boxes:
            col = arith.addi(col0, cx.const(s * p.width)) if s else col0
            nvvm.cp_async_bulk_tensor_global_shared_cta(tmap, cx.smem_ptr(offset),
                                                        [col, row0, *planes])
        nvvm.cp_async_bulk_commit_group()
        scf.YieldOp([])
