"""tile-defer-online-reductions: an online softmax's max and sum, kept per lane, reduced after the loop.

Flag:          --tile-defer-online-reductions
Input/output:  Tile IR -> the same dialects.  Applied to kernels the launcher
               compiles for a small grid (`tile.grid_wish` with a "split" item:
               at most one block for every two SMs, tileir.backend.layout.grid_wish).
Precondition:  verified Tile IR.  A loop qualifies when two of its carried
               values m (init a splat constant, not NaN) and s (init a splat 0) follow the
               online softmax recurrence over a tile T of the iteration,
                   m' = maximumf(m, reduce_max(T, a))
                   s' = s * exp(m - m') + reduce_sum(exp(T - broadcast(m')), a)
               (operands of maximumf, mulf and addf in either order; m' broadcast
               back along `a` by a reshape that restores the unit dim), or the same
               with NaN ignored in both maxima: maxnumf and reduce kind maxnum
               (cuTile's default `ct.maximum(m, ct.max(T, a))`); no op of it carries
               a float option (`tile.rounding`, `tile.ftz`), and no value of the
               recurrence but m and s' has a use outside it.

A block that streams one long row (a vocabulary's log-sum-exp or softmax at
decode sizes: 1 to 64 rows, one block each) runs two block-wide reductions per
chunk, each a tree of shuffles, a shared-memory exchange and barriers; measured
on the H100, those set the time of such a loop, not its loads.  Carried per lane
instead (M and S of T's shape: each element position runs the recurrence over
its own column of chunks), the loop body is element-wise:
    d = T - M;  e = exp(-|d|);  S' = d > 0 ? S * e + 1 : S + e;  M' = max(M, T)
(one exp per element, as before: the larger of T and M is the new maximum, the
other is scaled by e), and the row's m and s come from two reductions after the
loop: m = reduce_max(M, a), s = reduce_sum(S * exp(M - broadcast(m)), a).  This is
the same sum, associated differently, and the same NaN behaviour: the lanes' max
and the final reduction propagate NaN, or ignore it, as the row's max did (a NaN
element makes s NaN either way, through exp(T - m)).  An m init of -inf becomes the most
negative finite float (a lane of only -inf then gives S = 0, not a NaN).

Large grids keep the loop as written: there every SM holds several blocks, the
reductions overlap other blocks' loads, and the per-lane form's extra
arithmetic per element is not free.

Example: (T: tensor<1x8192xf32>, m, s: tensor<1xf32>)
  before:  %m2 = maximumf(%m, reduce_max(%T)) ; %s2 = %s * exp(%m - %m2) + reduce_sum(exp(%T - bcast(%m2)))
  after:   %M2 = maximumf(%M, %T) ; %S2 = select(%d > 0, %S * %e + 1, %S + %e)    (M, S: tensor<1x8192xf32>)
           after the loop: %m = reduce_max(%M) ; %s = reduce_sum(%S * exp(%M - bcast(%m)))
"""

from __future__ import annotations

import dataclasses
import math as pymath

import numpy as np
from mlir import ir
from mlir.dialects import arith, math

from tileir.backend.layout.retile import note_grid_rewrite
from tileir.backend.layout.split import small_grid
from tileir.dialect import tile

from .effects import defining_op, op_after, user

FLAG = "tile-defer-online-reductions"
SUMMARY = "carry an online softmax's max and sum per lane, reduce after the loop (small grids)"


@dataclasses.dataclass
class Online:
    """One matched recurrence in `loop`: carried values `m_index`, `s_index`."""

    loop: ir.Operation
    m_index: int
    s_index: int
    tile: ir.Value                  # T
    axis: int                       # a
    dead: list[ir.Operation]        # the recurrence's ops, users first
    max_kind: str = "max"           # the tile.reduce kind of m: "max" or "maxnum"


def run(module: ir.Module) -> None:
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or "tile.kernel" not in op.attributes or \
                not small_grid(op):
            continue
        for loop in loops(op):
            while (found := match(loop)) is not None:
                rewrite(found)
                note_grid_rewrite(op, FLAG)


def loops(func: ir.Operation) -> list[ir.Operation]:
    """The scf.for ops of `func`, outer ones first."""
    out = []

    def visit(op):
        if op.name == "scf.for":
            out.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return out


# ---------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------
def _named(v: ir.Value, name: str) -> ir.Operation | None:
    op = defining_op(v)
    return op if op is not None and op.name == name else None


def _other(op: ir.Operation, v: ir.Value) -> ir.Value | None:
    """The other operand of a binary op one of whose operands is `v`."""
    a, b = op.operands[0], op.operands[1]
    return b if a == v else a if b == v else None


def _only_used_by(v: ir.Value, users: list[ir.Operation]) -> bool:
    return all(any(user(use) == u for u in users) for use in v.uses)


def _splat(v: ir.Value) -> float | None:
    op = _named(v, "arith.constant")
    if op is None:
        return None
    attr = op.attributes["value"]
    if not isinstance(attr, ir.DenseFPElementsAttr) or not attr.is_splat:
        return None
    return float(ir.FloatAttr(attr.get_splat_value()).value)


def match(loop: ir.Operation) -> Online | None:
    body = loop.regions[0].blocks[0]
    yields = list(body.operations)[-1]
    args = list(body.arguments)[1:]
    for i, m_arg in enumerate(args):
        found = match_pair(loop, yields, args, i, m_arg)
        if found is not None:
            return found
    return None


def match_pair(loop, yields, args, i, m_arg) -> Online | None:
    """The recurrence whose m is carried value i, or None."""
    m_new = yields.operands[i]
    mx = _named(m_new, "arith.maximumf") or _named(m_new, "arith.maxnumf")
    if mx is None or _other(mx, m_arg) is None:
        return None
    red = _named(_other(mx, m_arg), "tile.reduce")
    # the lanes' maximum must treat NaN as the row's did: propagated by both
    # (maximumf, max) or ignored by both (maxnumf, maxnum)
    max_kind = "maxnum" if mx.name == "arith.maxnumf" else "max"
    if red is None or ir.StringAttr(red.attributes["kind"]).value != max_kind:
        return None
    t = red.operands[0]
    axis = ir.IntegerAttr(red.attributes["axis"]).value
    t_type = ir.RankedTensorType(t.type)
    if not isinstance(t_type.element_type, ir.F32Type):
        return None
    for j, s_arg in enumerate(args):
        if j == i:
            continue
        add = _named(yields.operands[j], "arith.addf")
        if add is None:
            continue
        for scaled, summed in ((add.operands[0], add.operands[1]),
                               (add.operands[1], add.operands[0])):
            mul = _named(scaled, "arith.mulf")
            sred = _named(summed, "tile.reduce")
            if mul is None or sred is None or _other(mul, s_arg) is None or \
                    ir.StringAttr(sred.attributes["kind"]).value != "sum" or \
                    ir.IntegerAttr(sred.attributes["axis"]).value != axis:
                continue
            alpha = _named(_other(mul, s_arg), "math.exp")
            asub = alpha and _named(alpha.operands[0], "arith.subf")
            if asub is None or asub.operands[0] != m_arg or asub.operands[1] != m_new:
                continue
            ex = _named(sred.operands[0], "math.exp")
            tsub = ex and _named(ex.operands[0], "arith.subf")
            if tsub is None or tsub.operands[0] != t:
                continue
            chain = _broadcast_chain(tsub.operands[1], m_new, t_type, axis)
            if chain is None:
                continue
            dead = [add, sred, ex, tsub, *chain, mul, alpha, asub, mx, red]
            if not _private(dead, m_arg, args[j], yields, m_new, add.results[0]):
                continue
            m0 = _splat(loop.operands[3 + i])
            if m0 is None or _splat(loop.operands[3 + j]) != 0.0:
                continue
            if pymath.isnan(m0):
                continue             # a NaN start: per lane it would become a float's max

            if any(tile.float_options_of(op) for op in dead):
                continue             # a rounding mode or ftz: the per-lane form has neither
            return Online(loop, i, j, t, axis, dead, max_kind)
    return None


def _broadcast_chain(b: ir.Value, m_new: ir.Value, t_type, axis: int) -> list | None:
    """[broadcast, reshape] (or [broadcast]) taking m' back to T's shape along `axis`."""
    bc = _named(b, "tile.broadcast")
    if bc is None or list(ir.RankedTensorType(b.type).shape) != list(t_type.shape):
        return None
    src = bc.operands[0]
    keep = list(t_type.shape)
    keep[axis] = 1
    if list(ir.RankedTensorType(src.type).shape) != keep:
        return None
    if src == m_new:
        return [bc]
    rs = _named(src, "tile.reshape")
    if rs is None or rs.operands[0] != m_new:
        return None
    return [bc, rs]


def _private(dead, m_arg, s_arg, yields, m_new, s_new) -> bool:
    """No value of the recurrence is used outside it (m' and s' only by it and the
    yield, the carried m and s only by it)."""
    inside = list(dead) + [yields]
    for op in dead:
        for r in op.results:
            if not _only_used_by(r, inside):
                return False
    return _only_used_by(m_arg, dead) and _only_used_by(s_arg, dead) and \
        sum(1 for u in m_new.uses if user(u) == yields) == 1 and \
        sum(1 for u in s_new.uses if user(u) == yields) == 1


# ---------------------------------------------------------------------------
# Rewrite
# ---------------------------------------------------------------------------
def _const(t: ir.RankedTensorType, value: float) -> ir.Value:
    return arith.constant(t, ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(
        t.element_type, value)))


def rewrite(o: Online) -> None:
    loop, i, j, axis = o.loop, o.m_index, o.s_index, o.axis
    body = loop.regions[0].blocks[0]
    yields = list(body.operations)[-1]
    t_type = ir.RankedTensorType(o.tile.type)
    m0 = _splat(loop.operands[3 + i])
    if not np.isfinite(m0):
        m0 = float(np.finfo(np.float32).min) if m0 < 0 else float(np.finfo(np.float32).max)
    m_uses = [(user(u), u.operand_number) for u in loop.results[i].uses]
    s_uses = [(user(u), u.operand_number) for u in loop.results[j].uses]
    with ir.InsertionPoint(loop), loop.location:
        loop.operands[3 + i] = _const(t_type, m0)
        loop.operands[3 + j] = _const(t_type, 0.0)
    m_arg, s_arg = body.arguments[1 + i], body.arguments[1 + j]
    for v in (m_arg, s_arg, loop.results[i], loop.results[j]):
        v.set_type(t_type)
    update = defining_op(yields.operands[i])
    loc = update.location
    lane_max = arith.maxnumf if update.name == "arith.maxnumf" else arith.maximumf
    with ir.InsertionPoint(yields), loc:
        d = arith.subf(o.tile, m_arg)
        e = math.exp(arith.negf(math.absf(d)))
        grown = arith.addf(arith.mulf(s_arg, e), _const(t_type, 1.0))
        kept = arith.addf(s_arg, e)
        up = arith.cmpf(arith.CmpFPredicate.OGT, d, _const(t_type, 0.0))
        s_new = arith.select(up, grown, kept)
        m_new = lane_max(m_arg, o.tile)
    yields.operands[i] = m_new
    yields.operands[j] = s_new
    for op in o.dead:
        op.erase()
    # the row's m and s from the lanes, after the loop
    with ir.InsertionPoint(op_after(loop)), loc:
        big_m, big_s = loop.results[i], loop.results[j]
        m = tile.ReduceOp(big_m, o.max_kind, axis).result
        keep = list(t_type.shape)
        keep[axis] = 1
        mb = tile.BroadcastOp(tile.ReshapeOp(m, ir.RankedTensorType.get(
            keep, t_type.element_type)).result, t_type).result
        w = math.exp(arith.subf(big_m, mb))
        s = tile.ReduceOp(arith.mulf(big_s, w), "sum", axis).result
    for owner, n in m_uses:
        owner.operands[n] = m
    for owner, n in s_uses:
        owner.operands[n] = s
