"""tile-reverse-rereads: a loop that re-reads what an earlier loop read runs backwards.

Flag:          --tile-reverse-rereads
Input/output:  Tile IR -> the same dialects.
Precondition:  verified IR.  A loop L is reversed when
               - it counts 0, 1, ..., n - 1 (constant bounds 0 and step 1) and carries
                 no values;
               - it is a map over slabs along some dim d (passes/iterations.py: each
                 iteration loads and stores only its own slab k), so any order gives
                 the same result;
               - an earlier loop of the same block, counting 0 to the same n, loads
                 slab k along d of an array L loads too.
               The counter's uses become n - 1 - k.

Why: a block's first loop streams its row through L2 once (a softmax's max and
sum); when the second loop starts, only the row's tail is still in L2 (other
blocks' rows stream through meanwhile).  Run forwards, the second loop asks first
for the head, long evicted, and by the time it reaches the tail that has gone too:
every re-read comes from DRAM.  Run backwards, it reads the tail while it is still
in L2.  A vocabulary softmax (read, re-read, write: 3 passes over DRAM forwards)
then moves about half its re-read from L2 instead.

Example:
  before:  %s = scf.for %k = %c0 to %n step %c1 iter_args(...) { load(%X, %r, %k) ... }
           scf.for %k = %c0 to %n step %c1 { %t = load(%X, %r, %k) ; store(%Y, %t', %r, %k) }
  after:   %last = arith.subi %n, %c1
           scf.for %k = %c0 to %n step %c1 {
             %j = arith.subi %last, %k ; %t = load(%X, %r, %j) ; store(%Y, %t', %r, %j) }
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from .effects import Effects, blocks_under, ops_of
from .iterations import MEMORY_OPS, constant_int, map_dim

FLAG = "tile-reverse-rereads"
SUMMARY = "run a loop that re-reads an earlier loop's slabs backwards (L2 reuse)"


def run(module: ir.Module) -> None:
    effects = Effects()
    for block in blocks_under(module.operation):
        earlier: list[ir.Operation] = []
        for op in ops_of(block):
            if op.name != "scf.for":
                continue
            if _should_reverse(op, earlier, effects):
                _reverse(op)
            earlier.append(op)


def _counts_from_zero(loop: ir.Operation) -> bool:
    return constant_int(loop.operands[0]) == 0 and constant_int(loop.operands[2]) == 1


def _slab_loads(loop: ir.Operation, dim: int) -> set[tuple[ir.Value, int]]:
    """(array, tile extent) of the loads directly in `loop`'s body that read slab k
    along `dim` (the counter itself at that index position)."""
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    out = set()
    for op in ops_of(body):
        if op.name == "tile.load":
            index = list(op.operands)[MEMORY_OPS["tile.load"]:]
            if dim < len(index) and index[dim] == iv:
                out.add((op.operands[0], ir.RankedTensorType(op.results[0].type).shape[dim]))
    return out


def _should_reverse(loop: ir.Operation, earlier: list[ir.Operation], effects: Effects) -> bool:
    if len(loop.results) or not _counts_from_zero(loop):
        return False
    dim = map_dim(loop, effects)
    if dim is None:
        return False
    mine = _slab_loads(loop, dim)
    for prior in earlier:
        if _counts_from_zero(prior) and prior.operands[1] == loop.operands[1] and \
                mine & _slab_loads(prior, dim):
            return True
    return False


def _reverse(loop: ir.Operation) -> None:
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    n, one = loop.operands[1], loop.operands[2]
    with ir.InsertionPoint(loop), loop.location:
        last = arith.subi(n, one)
    with ir.InsertionPoint.at_block_begin(body), loop.location:
        k = arith.subi(last, iv)
    k_op = k.owner.operation if isinstance(k.owner, ir.OpView) else k.owner
    iv.replace_all_uses_except(k, k_op)
