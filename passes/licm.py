"""tile-licm: hoist loop-invariant, speculatable ops out of `scf.for` loops.

Flag:          --tile-licm
Input/output:  Tile IR -> same dialects.
Precondition:  verified IR.  An op is hoisted when all its operands are
               defined outside the loop and it is pure and speculatable: safe
               to run even if the loop runs zero times (so not integer
               division, `tensor.extract`, calls, or ops with regions).
               `tile.load` stays in the loop (the loop may store to the array).
               Inner loops are visited first, so invariants climb as far out
               as their operands allow.  Only `scf.for` bodies are hoisted
               from; `scf.if`/`scf.while` bodies run conditionally.

Example:
  before:  scf.for %i = %lo to %hi step %c1 : i32 { %b = "tile.broadcast"(%x) : ... ; use %b, %i }
  after:   %b = "tile.broadcast"(%x) : ...
           scf.for %i = %lo to %hi step %c1 : i32 { use %b, %i }
"""

from __future__ import annotations

from mlir import ir

from .effects import Effects, ops_of

FLAG = "tile-licm"
SUMMARY = "hoist loop-invariant pure ops out of scf.for (innermost loops first)"


def run(module: ir.Module) -> None:
    effects = Effects()
    for loop in _loops_innermost_first(module.operation):
        _hoist_invariants(loop, effects)


def _loops_innermost_first(root: ir.Operation) -> list[ir.Operation]:
    loops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.for":
            loops.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.POST_ORDER)
    return loops


def _is_inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    while op is not None:
        if op == ancestor:
            return True
        op = op.parent
    return False


def _defined_outside(value: ir.Value, loop: ir.Operation) -> bool:
    owner = value.owner
    # A block argument belongs to the op owning its block (the loop itself for
    # the induction variable and iter_args).
    defining_op = owner.owner if isinstance(owner, ir.Block) else owner
    return not _is_inside(defining_op.operation, loop)


def _hoist_invariants(loop: ir.Operation, effects: Effects) -> None:
    body = loop.regions[0].blocks[0]
    # Program order: an op whose operands were just hoisted becomes invariant too.
    for op in ops_of(body):
        if effects.speculatable(op) and \
                all(_defined_outside(v, loop) for v in op.operands):
            op.move_before(loop)
