"""Persistent kernels: each block walks tiles in a loop instead of taking one.

`@kernel(persistent=True)` launches as many blocks as the GPU holds at once (a
1-d grid); each runs the kernel body for tiles `t = pid, pid + P, pid + 2P, ...`
of the grid the user asked for (`tile.grid_size`), with `bid(0..2)` decoded from
`t` (axes 0 and 1 in grouped order unless the kernel's `block_order` is
"linear", see `block_order`; a batched product's batch axis walked last, the
other two grouped: `block_order.walk_order`) and `num_blocks(a)` the user's
grid.  A kernel whose tiles run in cluster pairs along axis a (`cluster_pairs.py`)
walks the grid halved along a with clusters instead of blocks, and the block of
rank r in its cluster takes tile `2 bid(a) + r` of the pair:

    %g0, %g1, %g2 = tile.grid_size 0, 1, 2
    %pid = bid(0) + bid(1) * num_blocks(0) + bid(2) * num_blocks(0) * num_blocks(1)
    scf.for %t = %pid to g0 * g1 * g2 step (num_blocks(0) * num_blocks(1) * num_blocks(2))
        {tile.persistent_loop} { <the body, bid and num_blocks decoded from %t> }

The linear id over whatever grid the kernel runs on keeps the loop right under
the interpreter too (which runs the user's grid: one tile each).  What a block
gains: no launch tail per tile, and a K loop's ring that runs on from tile to
tile, so the next tile's first copies are in flight during this tile's last
products and epilogue (`flatten_tile_loop`; with warp specialization the
producer warpgroup walks the tiles ahead instead: `specialize_tile_loop`), both
called by the pipeliner (software_pipeline.py).  Retiling makes a tensor-core
kernel persistent by default for a grid of many waves (retile.py).  A kernel
that asks for stream-K gets the segment loop of `stream_k.wrap` instead of the
plain tile loop (backend/pipeline/stream_k.py).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from tileir.dialect.tile import BidOp, GridSizeOp, NumBlocksOp
from tileir.dialect.verifier import kernel_functions
from tileir.backend.layout.tma_store import store_smem_bytes

from . import stream_k
from .block_order import ORDER_ATTR, grouped, walk_order
from .cluster_pairs import pair_axis
from .pure_slices import clone_ops, defined_in, pure_slice
from .rings import (MAX_DEFAULT_STAGES, MAX_SMALL_GRID_STAGES, PRODUCER_WARPS,
                    PRODUCER_WARPS_ATTR, register_shares)

PERSISTENT_ATTR = "tile.persistent"
LOOP_ATTR = "tile.persistent_loop"
# L2 lookahead of a ring continued across tiles (`flatten_tile_loop`, sm_90a): with
# each copy of iteration it + S - 1 into the ring, an L2 prefetch of the tiles of
# iteration it + S - 1 + L2_AHEAD (this tile's, else the block's next tile's; a
# block's first tile prefetches iterations S - 1 .. S + L2_AHEAD - 2 with the
# ring's first copies), so
# operands that miss L2 (a batched GEMM's, whose batches share nothing) are on
# their way from DRAM L2_AHEAD iterations before the ring asks for them, with no
# shared memory spent.  0 (the default) issues none; bench/bmm.py --schedules
# measures 4, 8 and 16 against it.  Read when a kernel is compiled: a compile
# cache keyed without it (TILEIR_CACHE=0 when changing it).
L2_AHEAD = 0


def make_persistent(module: ir.Module) -> None:
    for op in kernel_functions(module):
        if PERSISTENT_ATTR in op.attributes and ir.BoolAttr(op.attributes[PERSISTENT_ATTR]).value:
            _wrap(op)


def _wrap(func: ir.Operation) -> None:
    entry = func.regions[0].blocks[0]
    body = [op.operation for op in entry.operations][:-1]       # all but the return
    ret = list(entry.operations)[-1]
    linear = ORDER_ATTR in func.attributes and \
        ir.StringAttr(func.attributes[ORDER_ATTR]).value == "linear"
    sk = stream_k.plan(func, body)
    # (stream-K's segments walk the same planes: a batched product's batch axis last,
    # where walking its columns last would read each batch's A once per column tile)
    x, y, z = (0, 1, 2) if linear else walk_order(func)

    def c(v: int, bits: int = 32) -> ir.Value:
        return arith.ConstantOp(ir.IntegerType.get_signless(bits), v).result

    def decode(t, plane, g):
        """The tile ids of linear tile `t` of grid `g`: plane by plane along z (`plane`
        = g[x] * g[y] tiles), each plane grouped (or linear) over x and y."""
        bz = arith.divui(t, plane)
        rest = arith.remui(t, plane)
        if linear:
            bx, by = arith.remui(rest, g[x]), arith.divui(rest, g[x])
        else:
            bx, by = grouped(rest, g[x], g[y])
        return {x: bx, y: by, z: bz}

    if sk is not None:
        decoded, g = stream_k.wrap(func, body, ret, sk, decode, c, (x, y))
    else:
        pair = pair_axis(func)
        with ir.InsertionPoint(ret), func.location:
            g = [GridSizeOp(a).result for a in range(3)]
            hw = [BidOp(a).result for a in range(3)]
            nb = [NumBlocksOp(a).result for a in range(3)]
            walked = list(g)
            if pair is not None:
                # (2, 1, 1) clusters of a 1-d grid walk the pairs of tiles along axis
                # `pair`; a block's rank in its cluster picks the tile of the pair
                rank = arith.remui(hw[0], c(2))
                hw[0], nb[0] = arith.divui(hw[0], c(2)), arith.divui(nb[0], c(2))
                walked[pair] = arith.divui(g[pair], c(2))
            pid = arith.addi(hw[0], arith.muli(arith.addi(hw[1], arith.muli(hw[2], nb[1])),
                                               nb[0]))
            programs = arith.muli(arith.muli(nb[0], nb[1]), nb[2])
            plane = arith.muli(walked[x], walked[y])
            total = arith.muli(plane, walked[z])
            loop = scf.ForOp(pid, total, programs, [])
            with ir.InsertionPoint(loop.body):
                decoded = decode(loop.induction_variable, plane, walked)
                if pair is not None:
                    decoded[pair] = arith.addi(arith.muli(decoded[pair], c(2)), rank)
                done = scf.YieldOp([])
        for op in body:
            op.move_before(done.operation)
        loop.operation.attributes[LOOP_ATTR] = ir.UnitAttr.get()
    grid_ops = []

    def visit(op):
        if op.name in ("tile.bid", "tile.num_blocks"):
            grid_ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    for op in body:
        op.walk(visit)
    for op in grid_ops:
        axis = ir.IntegerAttr(op.attributes["axis"]).value
        op.results[0].replace_all_uses_with(decoded[axis] if op.name == "tile.bid" else g[axis])
        op.erase()


# ---------------------------------------------------------------------------
# Warp specialization across tiles (called by the pipeliner, software_pipeline.py)
# ---------------------------------------------------------------------------
def specialize_tile_loop(pl, loop: ir.Operation, loads, tiles) -> bool:
    """The ring of K loop `loop`, inside a persistent kernel's tile loop, with its
    producer in warps of its own that run across tiles:

        ring_alloc
        if is_producer:  for t (tiles):  <index math of t>; for k: acquire, loads, commit
        else:            for t (tiles):  the body: for k: wait, views, product, release;
                                         mma_wait(0); epilogue
                         ring_free

    Both sides count ring iterations across tiles (an iteration argument of the tile
    loop), so slots and phases continue from one tile to the next: the producer
    fills the next tile's stages while the consumers run this tile's epilogue.
    The producer recomputes what the loads' indices and the K loop's bounds need
    from the tile index (pure ops of the tile loop's body, cloned); where that is
    not possible, returns False and the loop is pipelined in place."""
    from tileir.dialect.ring import IsProducerOp, RingFreeOp, SetMaxRegistersOp
    outer = loop.parent
    func = pl.func
    if len(outer.results):
        return False
    body = outer.regions[0].blocks[0]
    # one K loop a tile only: the producer walks this loop's copies, so a second K loop
    # would be pipelined in place inside the consumers' branch, its copies waiting on
    # a producer that never issues them (a SwiGLU GEMV's gate then up loops)
    if [op.operation for op in body.operations if op.name == "scf.for"] != [loop]:
        return False
    # a cluster pair's ring closes with a cluster barrier of every thread, which this
    # producer branch does not reach (software_pipeline.producer_branch does): pairs
    # come to a persistent kernel only unspecialized (cluster_pairs.choose), so keep it so
    if any(ld.multicast for ld in loads):
        return False
    # what the producer recomputes: the K bounds, the loads' index slices' inputs
    prefix = _tile_prefix(outer, loop, loads)
    if prefix is None:
        return False
    _reserve_epilogue(pl, outer)      # the producer runs on during the epilogue
    warps = ir.IntegerAttr(func.attributes["tile.num_warps"]).value \
        if "tile.num_warps" in func.attributes else 4
    # one block per SM: the ring takes what the SM has, as for a small grid
    stages = pl.stages_opt or pl.num_stages_for(tiles, 1, MAX_SMALL_GRID_STAGES)
    c = pl.const
    loc = loop.location
    shuffle = warps >= 8
    entry = func.regions[0].blocks[0]
    entry_ops = [op.operation for op in entry.operations]
    after = entry_ops[entry_ops.index(outer) + 1:-1]            # up to the return
    lb, ub, step = list(loop.operands)[:3]
    with ir.InsertionPoint(outer), loc:
        ring = pl.ring_alloc(stages, loads)
        branch = scf.IfOp(IsProducerOp().result, [], has_else=True)
    # -- producer: the tile loop's index math and the copies only
    with ir.InsertionPoint(branch.then_block), loc:
        if shuffle:
            SetMaxRegistersOp(register_shares(warps)[0], "dec")
        walk = scf.ForOp(outer.operands[0], outer.operands[1], outer.operands[2], [c(0)])
        with ir.InsertionPoint(walk.body):
            mapping = {body.arguments[0]: walk.induction_variable}
            clone_ops(prefix, mapping)
            plb, pub, pstep = (mapping.get(v, v) for v in (lb, ub, step))
            base = walk.inner_iter_args[0]
            copies = scf.ForOp(plb, pub, pstep, [])
            with ir.InsertionPoint(copies.body):
                k = copies.induction_variable
                it = arith.addi(base, arith.divui(arith.subi(k, plb), pstep))
                pl.issue(ring, loads, *pl.producer_slot(it, stages), c(1, 1), k, loop, mapping)
                scf.YieldOp([])
            scf.YieldOp([arith.addi(base, _trips(plb, pub, pstep, c))])
        scf.YieldOp([])
    # -- consumers: the tile loop, counting ring iterations across tiles
    with ir.InsertionPoint(branch.else_block), loc:
        if shuffle:
            SetMaxRegistersOp(register_shares(warps)[1], "inc")
        tiles_loop, next_base = _rebuild(outer, [c(0)])
        free_at = scf.YieldOp([])
    base = tiles_loop.inner_iter_args[0]
    pl.consumer(loop, ring, loads, stages, None, base)
    with loc:
        with ir.InsertionPoint(next_base.operation):
            next_base.operation.operands[0] = arith.addi(base, _trips(lb, ub, step, c))
        with ir.InsertionPoint(free_at.operation):
            RingFreeOp(ring)
    for op in after:
        op.move_before(free_at.operation)
    func.attributes[PRODUCER_WARPS_ATTR] = ir.IntegerAttr.get(
        ir.IntegerType.get_signless(32), PRODUCER_WARPS)
    return True


def _rebuild(outer: ir.Operation, inits: list[ir.Value]):
    """The tile loop `outer` (no results) rebuilt at the insertion point with iteration
    arguments `inits`, its body moved in; returns (the new loop, its yield, which
    yields the arguments unchanged until the caller sets its operands)."""
    body = outer.regions[0].blocks[0]
    new = scf.ForOp(outer.operands[0], outer.operands[1], outer.operands[2], inits)
    new.operation.attributes[LOOP_ATTR] = ir.UnitAttr.get()
    with ir.InsertionPoint(new.body):
        yield_op = scf.YieldOp(list(new.inner_iter_args))
    for op in list(body.operations)[:-1]:
        op.move_before(yield_op.operation)
    body.arguments[0].replace_all_uses_with(new.induction_variable)
    outer.erase()
    return new, yield_op


def _tile_prefix(outer: ir.Operation, loop: ir.Operation, loads):
    """The pure ops of tile loop `outer`'s body, before K loop `loop`, that compute the
    K loop's bounds and what the loads' indices need from the tile index; None when
    something else (a carried value, an op with effects) enters them."""
    needed = list(loop.operands[:3])
    for ld in loads:
        needed += [x for op in ld.slice for x in op.operands] + list(ld.index)
    tile = outer.regions[0].blocks[0].arguments[0]
    return pure_slice(outer, needed, lambda v: v == tile or not defined_in(v, outer) or
                      defined_in(v, loop), before=loop)


def _reserve_epilogue(pl, outer: ir.Operation) -> None:
    """The epilogue's shared memory is taken while the ring is live: leave room for the
    tiles the tile loop stores."""
    stored = [0]

    def visit(op):            # (a stream-K epilogue sits in an scf.if)
        if op.name == "tile.store":
            stored[0] = max(stored[0], store_smem_bytes(pl.func, op, pl.chip))
        return ir.WalkResult.ADVANCE

    for op in outer.regions[0].blocks[0].operations:
        if op.name != "scf.for":
            op.operation.walk(visit)
    pl.held += stored[0]


# ---------------------------------------------------------------------------
# Copies across tiles without warp specialization (called by the pipeliner)
# ---------------------------------------------------------------------------
def flatten_tile_loop(pl, loop: ir.Operation, loads, tiles) -> bool:
    """The ring of K loop `loop`, inside a persistent kernel's tile loop, continued
    from tile to tile (as if the two loops were one, as far as the copies go):

        ring_alloc
        for t (tiles) iter_args(base = 0, ahead = 0):
            <the body up to the K loop>;  n = its trips;  t2 = the block's next tile
            if ahead < S - 1:  acquire/load/commit iterations ahead .. S-2 (< n)
            for k (iteration it = base + j):
                wait, views, product, release it - 1;
                copy iteration it + S - 1: j + S - 1 of this tile while < n, else
                    j + S - 1 - n of tile t2 (if there is one, with that many trips,
                    and this tile had S - 1 trips to spare)
            mma_wait(0); the epilogue
            yield base + n, (S - 1 if n >= S - 1 else 0)
        ring_free

    So the first S - 1 copies of a tile are in flight while the last products and
    the epilogue of the tile before it run: no pipeline fill per tile.  Both tiles'
    load indices come from the tile index by the same pure ops (`_tile_prefix`,
    cloned for t2 once per tile); where that is not possible, returns False and the
    loop is pipelined in place."""
    from tileir.dialect.ring import RingFreeOp
    outer = loop.parent
    body = outer.regions[0].blocks[0]
    if len(outer.results) or [op.operation for op in body.operations
                              if op.name == "scf.for"] != [loop]:
        return False
    prefix = _tile_prefix(outer, loop, loads)
    if prefix is None:
        return False
    _reserve_epilogue(pl, outer)
    stages = pl.stages_opt or pl.num_stages_for(tiles, 1, MAX_DEFAULT_STAGES)
    ahead_max = stages - 1
    c = pl.const
    loc = loop.location
    t_step, t_end = outer.operands[2], outer.operands[1]
    with ir.InsertionPoint(outer), loc:
        ring = pl.ring_alloc(stages, loads)
        tiles_loop, next_yield = _rebuild(outer, [c(0), c(0)])
    with ir.InsertionPoint.after(tiles_loop), loc:
        RingFreeOp(ring)
    lb, ub, step = list(loop.operands)[:3]
    base, ahead = tiles_loop.inner_iter_args
    t = tiles_loop.induction_variable
    with ir.InsertionPoint(loop), loc:
        n = _trips(lb, ub, step, c)
        spare = arith.cmpi(arith.CmpIPredicate.sge, n, c(ahead_max))
        # the next tile's K bounds and load-index inputs
        t2 = arith.addi(t, t_step)
        has_next = arith.cmpi(arith.CmpIPredicate.slt, t2, t_end)
        mapping = {t: t2}
        clone_ops(prefix, mapping)
        lb2, ub2, step2 = (mapping.get(v, v) for v in (lb, ub, step))
        n2 = _trips(lb2, ub2, step2, c)
        # what the tile before did not copy ahead (all of it for the first tile)
        catch_up = scf.IfOp(arith.cmpi(arith.CmpIPredicate.slt, ahead, c(ahead_max)), [],
                            has_else=False)
        with ir.InsertionPoint(catch_up.then_block):
            for j in range(ahead_max):
                pred = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, c(j), ahead),
                                  arith.cmpi(arith.CmpIPredicate.slt, c(j), n))
                k = arith.addi(lb, arith.muli(c(j), step)) if j else lb
                pl.issue(ring, loads, *pl.producer_slot(arith.addi(base, c(j)), stages),
                         pred, k, loop)
            if L2_AHEAD > 0 and pl.chip.startswith("sm_90"):
                # the lookahead of the copies above, which no tile before announced
                ahead_loop = scf.ForOp(c(ahead_max), arith.minsi(n, c(ahead_max + L2_AHEAD)),
                                       c(1), [])
                with ir.InsertionPoint(ahead_loop.body):
                    j = ahead_loop.induction_variable
                    pl.prefetch(loads, tiles, c(1, 1), arith.addi(lb, arith.muli(j, step)),
                                loop)
                    scf.YieldOp([])
            scf.YieldOp([])
    it, at, _ = pl.consume_and_release(loop, ring, loads, stages, base)
    iv = loop.regions[0].blocks[0].arguments[0]
    with loc:
        with at:
            j = arith.subi(it, base)
            nj = arith.addi(j, c(ahead_max))
            here = arith.cmpi(arith.CmpIPredicate.slt, nj, n)
            j2 = arith.subi(nj, n)
            there = arith.andi(arith.andi(spare, has_next),
                               arith.cmpi(arith.CmpIPredicate.slt, j2, n2))
            k_here = arith.addi(iv, arith.muli(c(ahead_max), step))
            k_there = arith.addi(lb2, arith.muli(j2, step2))
            pl.issue(ring, loads, *pl.producer_slot(arith.addi(it, c(ahead_max)), stages),
                     arith.ori(here, there), k_here, loop,
                     alt=(arith.xori(here, c(1, 1)), k_there, mapping))
            if L2_AHEAD > 0 and pl.chip.startswith("sm_90"):
                _prefetch_ahead(pl, loads, tiles, loop, nj, n, lb, step, n2, lb2, step2,
                                has_next, mapping)
    with ir.InsertionPoint(next_yield.operation), loc:
        next_yield.operation.operands[0] = arith.addi(base, n)
        next_yield.operation.operands[1] = arith.select(spare, c(ahead_max), c(0))
    return True


def _prefetch_ahead(pl, loads, tiles, loop, nj, n, lb, step, n2, lb2, step2, has_next,
                    mapping) -> None:
    """`L2_AHEAD` iterations past copy `nj` (counted from this tile's first, of `n`):
    L2 prefetches of that iteration's tiles, this tile's while it has them, else the
    next tile's (`mapping` its values; `lb2`, `step2`, `n2` its K loop) if there is
    one.  A hint: nothing waits for it, and a box past the array's edge is clipped by
    its tensor map as the ring's copy is."""
    c = pl.const
    pj = arith.addi(nj, c(L2_AHEAD))
    here = arith.cmpi(arith.CmpIPredicate.slt, pj, n)
    j2 = arith.subi(pj, n)
    there = arith.andi(has_next, arith.cmpi(arith.CmpIPredicate.slt, j2, n2))
    k_here = arith.addi(lb, arith.muli(pj, step))
    k_there = arith.addi(lb2, arith.muli(j2, step2))
    pl.prefetch(loads, tiles, arith.ori(here, there), k_here, loop,
                alt=(arith.xori(here, c(1, 1)), k_there, mapping))


def _trips(lb: ir.Value, ub: ir.Value, step: ir.Value, c) -> ir.Value:
    """Iterations of `for k = lb to ub step step` (step > 0): 0 when ub <= lb."""
    span = arith.maxsi(arith.subi(ub, lb), c(0))
    return arith.divui(arith.addi(span, arith.subi(step, c(1))), step)
