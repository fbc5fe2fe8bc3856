"""tile-reassociate-reductions: a large tile a loop accumulates, only reduced after the
loop, is reduced in each iteration instead.

Flag:          --tile-reassociate-reductions
Input/output:  Tile IR -> the same dialects.
Precondition:  verified IR.  A value an `scf.for` carries is rewritten when
               - it is a tile of at least LARGE elements;
               - the body's only use of it combines it with one other tile
                 (`arith.addf`/`addi`, `maximumf`, `minimumf`, `maxnumf`,
                 `minnumf`) and yields the result in its place;
               - every use of the loop's result is a `tile.reduce` of the kind
                 that combiner is (sum, max, min, maxnum, minnum) along one
                 axis, without rounding or flush-to-zero options.
               The loop then carries the reduced tile: each iteration reduces
               its tile along that axis and combines the result; the initial
               value is reduced before the loop (a zero or, for max/min, any
               splat is folded); the reductions after the loop read the
               loop's result.

Why: a kernel that sums (32, 1024) partial gradients over a loop and reduces over
the 32 rows afterwards (cuTile's LayerNorm backward dW/dB) carries 32 768 floats a
block: 256 registers a thread at 128 threads, or, where the grid is small and the
tile is dealt to blocks, megabytes of shared memory.  sum(init + x0 + x1 + ...)
along an axis is sum(init) + sum(x0) + sum(x1) + ... (and likewise for max/min),
so the loop can carry 1024 floats.  Sums are then added in another order: equal
up to rounding, as any two summation orders are (max/min are exact).  Smaller
tiles are left alone: their registers are cheap, and a reduction in every
iteration costs shuffles where the reduced axis spans lanes.

Example:
  before:  %r = scf.for ... iter_args(%a = %zero) -> (tensor<32x1024xf32>) {
             %t = "tile.load"(...) ; %s = arith.addf %a, %t ; scf.yield %s }
           %y = "tile.reduce"(%r) {axis = 0 : i64, kind = "sum"} -> tensor<1024xf32>
  after:   %y = scf.for ... iter_args(%a = %zero1024) -> (tensor<1024xf32>) {
             %t = "tile.load"(...) ; %u = "tile.reduce"(%t) {axis = 0, kind = "sum"}
             %s = arith.addf %a, %u ; scf.yield %s }
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith

from tileir.dialect import tile

from .effects import blocks_under, ops_of

FLAG = "tile-reassociate-reductions"
SUMMARY = "reduce a large loop-carried tile in each iteration when only its reduction is used"

LARGE = 4096                  # elements of a carried tile worth rewriting (16 KiB of f32)
# the reduction each combiner of a carried tile is one step of
KIND_OF = {"arith.addf": "sum", "arith.addi": "sum", "arith.maximumf": "max",
           "arith.minimumf": "min", "arith.maxnumf": "maxnum", "arith.minnumf": "minnum"}


def run(module: ir.Module) -> None:
    loops = [op for block in blocks_under(module.operation) for op in ops_of(block)
             if op.name == "scf.for"]
    for loop in loops:
        for i in range(len(loop.results)):
            found = _reassociable(loop, i)
            if found is not None:
                with loop.location:
                    _rewrite(loop, i, *found)


def _reassociable(loop: ir.Operation, i: int):
    """(combiner op, the other operand, the reductions after the loop) of carried value
    `i`, or None when it is not to be rewritten."""
    body = loop.regions[0].blocks[0]
    arg = body.arguments[i + 1]
    t = arg.type
    if not isinstance(t, ir.RankedTensorType) or t.rank == 0 or math.prod(t.shape) < LARGE:
        return None
    uses = list(arg.uses)
    if len(uses) != 1:
        return None
    comb = uses[0].owner
    kind = KIND_OF.get(comb.name)
    if kind is None or comb.parent != loop or len(list(comb.operands)) != 2:
        return None
    other = comb.operands[1] if comb.operands[0] == arg else comb.operands[0]
    if other == arg:
        return None
    out = list(comb.results[0].uses)
    yield_op = list(body.operations)[-1]
    if len(out) != 1 or out[0].owner != yield_op or out[0].operand_number != i:
        return None
    reductions = [u.owner for u in loop.results[i].uses]
    if not reductions:
        return None
    axes = set()
    for r in reductions:
        if r.name != "tile.reduce" or ir.StringAttr(r.attributes["kind"]).value != kind or \
                "tile.rounding" in r.attributes or "tile.ftz" in r.attributes:
            return None
        axes.add(ir.IntegerAttr(r.attributes["axis"]).value)
    if len(axes) != 1:
        return None
    return comb, other, kind, axes.pop(), reductions


def _rewrite(loop, i, comb, other, kind, axis, reductions) -> None:
    body = loop.regions[0].blocks[0]
    arg = body.arguments[i + 1]
    t = ir.RankedTensorType(arg.type)
    reduced = ir.RankedTensorType.get([d for a, d in enumerate(t.shape) if a != axis],
                                      t.element_type)
    with ir.InsertionPoint(loop), loop.location:
        loop.operands[3 + i] = _reduced_init(loop.operands[3 + i], kind, axis, reduced)
    arg.set_type(reduced)
    loop.results[i].set_type(reduced)
    with ir.InsertionPoint(comb), comb.location:
        part = tile.ReduceOp(other, kind, axis).result
        new = ir.Operation.create(comb.name, results=[reduced], operands=[arg, part],
                                  attributes={n: comb.attributes[n] for n in comb.attributes})
    comb.results[0].replace_all_uses_with(new.results[0])
    comb.erase()
    for r in reductions:
        r.results[0].replace_all_uses_with(loop.results[i])
        r.erase()


def _reduced_init(init: ir.Value, kind: str, axis: int, reduced: ir.Type) -> ir.Value:
    """The loop's initial value reduced along `axis`: a splat constant folds (zero for a
    sum, any value for max/min); anything else is reduced before the loop."""
    owner = init.owner
    owner = owner.operation if isinstance(owner, ir.OpView) else owner
    if isinstance(owner, ir.Operation) and owner.name == "arith.constant":
        value = ir.DenseElementsAttr(owner.attributes["value"])
        if value.is_splat:
            v = value.get_splat_value()
            zero = (float(ir.FloatAttr(v).value) if isinstance(v, ir.FloatAttr)
                    else ir.IntegerAttr(v).value) == 0
            if kind != "sum" or zero:
                return arith.ConstantOp(reduced, ir.DenseElementsAttr.get_splat(reduced, v)
                                        ).result
    return tile.ReduceOp(init, kind, axis).result
