"""tile-dce: erase operations whose results are unused and that have no effect.

Flag:          --tile-dce
Input/output:  Tile IR (tile, arith, math, tensor, scf, func) -> same dialects.
Precondition:  verified IR.  Knows that every tile op is pure except
               `tile.store` (writes) and `tile.load` (reads, so erasable when
               unused); `func.call` is as pure as its callee's body; `scf.for`
               and `scf.if` are as pure as their bodies; `scf.while` is kept
               (it may not terminate).  Unknown ops are kept.  Works inside
               nested regions.  Upstream DCE cannot do this: IRDL ops have no
               memory-effect information.

Example:
  before:  %0 = "tile.reshape"(%t) : (tensor<16xf32>) -> tensor<4x4xf32>    // unused
           "tile.store"(%a, %t, %i) : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
  after:   "tile.store"(%a, %t, %i) : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
"""

from __future__ import annotations

from mlir import ir

from .effects import Effects, has_uses, ops_of

FLAG = "tile-dce"
SUMMARY = "erase unused side-effect-free ops, tile ops included (upstream DCE cannot see them)"


def run(module: ir.Module) -> None:
    erase_dead_ops(module.operation)


def erase_dead_ops(root: ir.Operation) -> None:
    """Erases dead removable ops everywhere under `root` (also used by tile-canonicalize)."""
    effects = Effects()
    for region in root.regions:
        for block in region.blocks:
            _sweep(block, effects)


def _sweep(block: ir.Block, effects: Effects) -> None:
    # Users follow their definitions in a block, and ops in nested regions are
    # swept before the op holding them: one backward pass erases whole chains.
    for op in reversed(ops_of(block)):
        for region in op.regions:
            for inner in region.blocks:
                _sweep(inner, effects)
        if not has_uses(op) and effects.removable(op):
            op.erase()
