"""tile-cse: merge identical side-effect-free operations.

Flag:          --tile-cse
Input/output:  Tile IR -> same dialects.
Precondition:  verified IR.  Two ops are identical when they have the same
               name, operands, attributes and result types.  Merged: pure tile
               ops, arith/math ops, region-free tensor ops and calls of pure
               functions, within dominance scopes (an op is visible later in its
               block and inside the regions of `scf` ops there; never across
               functions).  `tile.store` is never merged.  `tile.load` is merged
               only with an identical load earlier in the *same block* with no
               op that may write memory in between: a store to any array may
               alias, and a load inside a loop body can follow a store of the
               previous iteration, so loads are not visible in nested regions.
               Upstream `cse` cannot do this: IRDL ops have no memory effects.

Example:
  before:  %0 = "tile.bid"() {axis = 0 : i64} : () -> i32
           %1 = "tile.bid"() {axis = 0 : i64} : () -> i32
  after:   %0 = "tile.bid"() {axis = 0 : i64} : () -> i32        // uses of %1 now use %0
"""

from __future__ import annotations

from collections import ChainMap
from typing import Hashable

from mlir import ir

from .effects import TERMINATORS, Effect, Effects, ops_of

FLAG = "tile-cse"
SUMMARY = "merge identical pure ops (tile, arith, math, tensor) and store-free repeated loads"

# Ops whose regions see the values (and so the available expressions) of the
# enclosing block.  Every other region op starts a fresh scope: func.func and
# modules are isolated from above, and unknown ops are treated as if they were.
SCOPED_REGION_OPS = frozenset({"scf.for", "scf.if", "scf.while", "scf.execute_region"})

Key = tuple[Hashable, ...]
Scope = ChainMap  # Key -> ir.Operation


def run(module: ir.Module) -> None:
    effects = Effects()
    for region in module.operation.regions:
        for block in region.blocks:
            _cse_block(block, ChainMap(), effects)


def _key(op: ir.Operation) -> Key:
    return (op.name, tuple(op.operands), tuple(sorted(op.attributes.items())),
            tuple(r.type for r in op.results))


def _replace(op: ir.Operation, by: ir.Operation) -> None:
    for old, new in zip(op.results, by.results):
        old.replace_all_uses_with(new)
    op.erase()


def _mergeable(op: ir.Operation, effects: Effects) -> bool:
    return (len(op.results) > 0 and not op.regions and op.name not in TERMINATORS
            and effects.of(op) == Effect.PURE)


def _cse_block(block: ir.Block, scope: Scope, effects: Effects) -> None:
    scope = scope.new_child()
    loads: dict[Key, ir.Operation] = {}
    for op in ops_of(block):
        if effects.may_write(op):
            loads.clear()
        if _mergeable(op, effects):
            if _merge_into(op, scope):
                continue
        elif op.name == "tile.load":
            if _merge_into(op, loads):
                continue
        for region in op.regions:
            outer = scope if op.name in SCOPED_REGION_OPS else ChainMap()
            for inner in region.blocks:
                _cse_block(inner, outer, effects)


def _merge_into(op: ir.Operation, table: Scope | dict[Key, ir.Operation]) -> bool:
    """Replaces `op` by an identical op in `table` (True), or records it there (False)."""
    key = _key(op)
    existing = table.get(key)
    if existing is None:
        table[key] = op
        return False
    _replace(op, existing)
    return True
