"""Stream-K: a persistent GEMM's last waves split along K, so every block ends together.

A persistent kernel of T tiles on P blocks runs ceil(T / P) waves; when the last
one is partly empty (T = 512 tiles of 128 x 256 on 132 SMs: 3.88 waves, so 12 %
of the last wave's SMs idle), the kernel's time is that of the fullest block.
Stream-K (Osama et al., 2023) balances it: the first `full - 1` waves stay whole
tiles (data-parallel), and the remaining `P + T mod P` tiles' K iterations are
dealt to the blocks in equal contiguous runs, so each block ends within one K
iteration of the others.  A run that begins or ends inside a tile sums only part
of its K range:

    block b:     ... | tile u, k 0 .. 37 (head)      block b + 1:  tile u, k 38 .. 63 (tail) | ...

The tail's block stores its partial sum in a workspace slot (`tile.partial_store`,
at the start of its run); the head's block, at the end of its run, waits for it,
adds it (`tile.partial_add`) and runs the epilogue.  Runs are at least one tile
long, so a tile has at most two parts, block b + 1's tail is its first work and
block b's head its last: the wait is satisfied long before it is reached, and the
dependencies run one way (b waits for b + 1 only), so no order of block scheduling
can deadlock.  When the last wave is at least 90 % full, or the kernel has a
single wave, the split is off at run time and the loop is the plain persistent one.

`wrap` builds the persistent tile loop of `persistent.py` in this form:

    n = <the K loop's trip count, computed before the loop>
    on = T / P >= 1 and T % P != 0 and 10 (T % P) < 9 P and n >= 2
    dp = on ? (T / P - 1) P : T                    tiles taken whole, t = pid + s P
    q  = ceil((T - dp) n / P)                      K iterations of each block's run
    for s in 0 .. <this block's whole tiles + the tiles its run touches>:
        t, k_lo, k_hi, head, tail = <decoded from s>
        <the body, with bid from t and the K loop running k_lo .. k_hi>
        tile.partial_store(acc, pid, tail)
        acc' = tile.partial_add(acc, pid + 1, head)
        if not tail: <the epilogue, with acc'>

Which kernels (`plan`): one K loop in the body, counting 0 .. n by 1 with n
computed from the kernel's arguments alone, carrying one f32 accumulator that
starts at zero (zeros add nothing, so the parts sum to the tile) and multiplied
into with `tile.mma`, and no effect before the loop (it would run once per part).
"""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, scf

from tileir.dialect.stream_k import PartialAddOp, PartialStoreOp

from .pure_slices import clone_ops

STREAM_K_ATTR = "tile.stream_k"     # @kernel(stream_k=True) asks for it
FULL_ENOUGH = 9                     # a last wave at least 9/10 full runs as it is


@dataclasses.dataclass
class Plan:
    loop: ir.Operation              # the K loop
    trips: list[ir.Operation]       # the pure ops computing its upper bound


def wanted(func: ir.Operation) -> bool:
    """Asked for with `@kernel(stream_k=True)`: off by default (see the module doc)."""
    return STREAM_K_ATTR in func.attributes and \
        ir.BoolAttr(func.attributes[STREAM_K_ATTR]).value


def plan(func: ir.Operation, body: list[ir.Operation]) -> Plan | None:
    """The kernel's K loop and what computes its trip count, when stream-K applies to
    `body` (the kernel's ops but the return); else None."""
    if not wanted(func) or "tile.producer_warps" in func.attributes or \
            "tile.warp_specialize" in func.attributes and \
            ir.BoolAttr(func.attributes["tile.warp_specialize"]).value:
        return None
    from tileir.passes import effects       # (passes import the backend: not at load)
    from tileir.passes.iterations import constant_int
    loops = [op for op in body if op.name == "scf.for"]
    if len(loops) != 1:
        return None
    loop = loops[0]
    lb, ub, step = list(loop.operands)[:3]
    if constant_int(lb) != 0 or constant_int(step) != 1 or len(loop.results) != 1:
        return None
    acc = loop.results[0]
    t = acc.type
    if not isinstance(t, ir.RankedTensorType) or t.rank != 2 or str(t.element_type) != "f32" \
            or not _zero(list(loop.operands)[3]) or not effects.contains(loop, "tile.mma"):
        return None
    classify = effects.Effects()
    for op in body[:body.index(loop)]:          # once per part: nothing but reads
        if classify.of(op) > effects.Effect.READ:
            return None
    trips = _slice(ub, body)
    return None if trips is None else Plan(loop, trips)


def _zero(v: ir.Value) -> bool:
    op = v.owner
    if isinstance(op, ir.Block) or op.name != "arith.constant":
        return False
    attr = op.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return False
    return ir.FloatAttr(attr.get_splat_value()).value == 0.0


_GRID_OPS = ("tile.bid", "tile.num_blocks", "tile.grid_size")


def _slice(value: ir.Value, body: list[ir.Operation]) -> list[ir.Operation] | None:
    """The region-free pure ops of `body` that compute `value` from the kernel's
    arguments and constants, in body order; None when it depends on a block index
    or on anything with effects."""
    from tileir.passes import effects
    classify = effects.Effects()
    needed: set = set()
    ok = [True]

    def need(v: ir.Value) -> None:
        op = v.owner
        if isinstance(op, ir.Block):
            return                                # a kernel argument
        op = op.operation if hasattr(op, "operation") else op
        if op in needed:
            return
        if op not in body or op.name in _GRID_OPS or len(op.regions) or \
                classify.of(op) != effects.Effect.PURE:
            ok[0] = False
            return
        needed.add(op)
        for x in op.operands:
            need(x)

    need(value)
    return [op for op in body if op in needed] if ok[0] else None


def wrap(func: ir.Operation, body: list[ir.Operation], ret: ir.Operation, p: Plan,
         decode, c, plane_axes: tuple[int, int] = (0, 1)) -> tuple[dict, scf.ForOp]:
    """The stream-K tile loop at `ret` with `body` moved in (see the module doc);
    `decode(t, plane, g)` gives the tile's (b0, b1, b2), walking planes of the grid
    axes `plane_axes` (a batched product's: those other than its batch axis), and
    `c(v)` an i32 constant.  Returns the decoded block ids by axis and the grid
    values, for `persistent` to substitute."""
    from tileir.dialect.tile import BidOp, GridSizeOp, NumBlocksOp
    with ir.InsertionPoint(ret), func.location:
        g = [GridSizeOp(a).result for a in range(3)]
        hw = [BidOp(a).result for a in range(3)]
        nb = [NumBlocksOp(a).result for a in range(3)]
        pid = arith.addi(hw[0], arith.muli(arith.addi(hw[1], arith.muli(hw[2], nb[1])), nb[0]))
        blocks = arith.muli(arith.muli(nb[0], nb[1]), nb[2])
        plane = arith.muli(g[plane_axes[0]], g[plane_axes[1]])
        tiles = arith.muli(arith.muli(g[0], g[1]), g[2])
        mapping: dict = {}
        clone_ops(p.trips, mapping)
        ub = list(p.loop.operands)[1]
        n = arith.maxsi(mapping.get(ub, ub), c(0))
        full = arith.divui(tiles, blocks)
        rem = arith.remui(tiles, blocks)
        on = _all(arith.cmpi(arith.CmpIPredicate.uge, full, c(1)),
                  arith.cmpi(arith.CmpIPredicate.ne, rem, c(0)),
                  arith.cmpi(arith.CmpIPredicate.ult, arith.muli(rem, c(10)),
                             arith.muli(blocks, c(FULL_ENOUGH))),
                  arith.cmpi(arith.CmpIPredicate.sge, n, c(2)))
        dp = arith.select(on, arith.muli(arith.subi(full, c(1)), blocks), tiles)
        run_all = arith.muli(arith.subi(tiles, dp), n)            # K iterations split
        q = arith.divui(arith.addi(run_all, arith.subi(blocks, c(1))), blocks)
        mine = arith.select(arith.cmpi(arith.CmpIPredicate.ult, pid, dp),
                            arith.addi(arith.divui(arith.subi(arith.subi(dp, c(1)), pid),
                                                   blocks), c(1)), c(0))
        begin = arith.minui(arith.muli(pid, q), run_all)
        end = arith.minui(arith.addi(begin, q), run_all)
        n1 = arith.maxsi(n, c(1))
        first = arith.divui(begin, n1)
        last = arith.divui(arith.subi(end, c(1)), n1)
        touched = arith.select(arith.cmpi(arith.CmpIPredicate.ugt, end, begin),
                               arith.addi(arith.subi(last, first), c(1)), c(0))
        loop = scf.ForOp(c(0), arith.addi(mine, touched), c(1), [])
        loop.operation.attributes["tile.persistent_loop"] = ir.UnitAttr.get()
        with ir.InsertionPoint(loop.body):
            s = loop.induction_variable
            whole = arith.cmpi(arith.CmpIPredicate.slt, s, mine)
            u = arith.addi(first, arith.subi(s, mine))            # the run's tile
            t = arith.select(whole, arith.addi(pid, arith.muli(s, blocks)), arith.addi(dp, u))
            start = arith.muli(u, n)
            k_lo = arith.select(whole, c(0), arith.maxsi(arith.subi(begin, start), c(0)))
            k_hi = arith.select(whole, n, arith.minsi(arith.subi(end, start), n))
            split = arith.xori(whole, c(1, 1))
            head = _all(split, arith.cmpi(arith.CmpIPredicate.eq, k_lo, c(0)),
                        arith.cmpi(arith.CmpIPredicate.slt, k_hi, n))
            tail = arith.andi(split, arith.cmpi(arith.CmpIPredicate.sgt, k_lo, c(0)))
            decoded = decode(t, plane, g)
            done = scf.YieldOp([])
    for op in body:
        op.move_before(done.operation)
    k_loop = p.loop
    k_loop.operands[0] = k_lo
    k_loop.operands[1] = k_hi
    after = [op.operation for op in loop.body.operations]
    after = after[after.index(k_loop) + 1:-1]                    # the epilogue
    acc = k_loop.results[0]
    with ir.InsertionPoint(after[0] if after else done.operation), k_loop.location:
        uses = [(u.owner, u.operand_number) for u in acc.uses]
        PartialStoreOp(acc, pid, tail)             # first: then acc dies in the sum
        summed = PartialAddOp(acc, arith.addi(pid, c(1)), head).sum
        keep = scf.IfOp(arith.xori(tail, c(1, 1)), [], has_else=False)
        with ir.InsertionPoint(keep.then_block):
            end_keep = scf.YieldOp([])
    for owner, i in uses:
        if owner.name not in ("tile.partial_add", "tile.partial_store"):
            owner.operands[i] = summed
    for op in after:
        op.move_before(end_keep.operation)
    return decoded, g


def _all(*conds: ir.Value) -> ir.Value:
    out = conds[0]
    for x in conds[1:]:
        out = arith.andi(out, x)
    return out


__all__ = ["FULL_ENOUGH", "Plan", "STREAM_K_ATTR", "plan", "wanted", "wrap"]
