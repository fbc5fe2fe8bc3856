"""tile-hoist-loads: issue each register load as early in its block as its operands allow.

Flag:          --tile-hoist-loads
Input/output:  layout-stage Tile IR -> the same, ops reordered within their blocks
               (stage `pipeline`, first: a scheduling decision for the target).
Precondition:  verified IR.  On sm_90a, a `tile.load` into registers (not one
               with a `#tile.shared` result, whose staging the pipeliner and the
               memory planner place) moves up within its block past pure
               region-free ops, stopping below the last op that defines one of
               its operands or below the previous load (loads keep the order they
               were written in).  It never crosses a store (which may write what
               it reads), a loop or a branch (a load hoisted above a loop would
               hold its registers through it: a GEMM's epilogue operands stay
               after the K loop), or a call.  On sm_80: no change (LayerNorm at
               8192 wide, the kernel that gains on sm_90a, spills there with its
               weight live through both reductions, and no sm_80 GPU was at hand
               to weigh that).

Why: ptxas does not move a load across a barrier, and every block-wide reduction
has barriers.  LayerNorm written the plain way loads its weight and bias after its
two reductions, so each block waits for them (an L2 round trip) at the end of its
critical path; issued at the top, they arrive while the row is reduced (H100,
8192 rows: 0.74 -> 0.80 of copy bandwidth at 7168 wide, bench/RESULTS.md).

Example:
  before:  %x = "tile.load"(%X, %r) ; %s = "tile.reduce"(%x) ; %w = "tile.load"(%W, %c0)
  after:   %x = "tile.load"(%X, %r) ; %w = "tile.load"(%W, %c0) ; %s = "tile.reduce"(%x)
"""

from __future__ import annotations

from mlir import ir

from tileir.backend.layout.mma_layouts import Shared
from tileir.dialect.layout import tile_layout

from .effects import TERMINATORS, Effect, Effects, blocks_under, ops_of
from .lower_to_llvm import module_target

FLAG = "tile-hoist-loads"
SUMMARY = "issue register loads as early in their block as operands allow (sm_90a)"


def run(module: ir.Module) -> None:
    if not module_target(module).chip.startswith("sm_90"):
        return
    effects = Effects()
    for block in blocks_under(module.operation):
        _hoist_in(block, effects)


def _hoist_in(block: ir.Block, effects: Effects) -> None:
    ops = ops_of(block)
    for i, op in enumerate(ops):
        if op.name != "tile.load" or isinstance(tile_layout(op.results[0].type), Shared):
            continue
        defs = {_defining_op(v) for v in op.operands}
        j = i
        while j > 0:
            prev = ops[j - 1]
            if prev in defs or prev.regions or prev.name in TERMINATORS or \
                    effects.of(prev) != Effect.PURE:
                break
            j -= 1
        if j < i:
            op.move_before(ops[j])
            ops.insert(j, ops.pop(i))


def _defining_op(v: ir.Value) -> ir.Operation | None:
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if isinstance(owner, ir.OpView) else owner
