"""Memory ordering between blocks: `tile.fence` (dialect/ordering.py).

The loads and stores around a fence are relaxed accesses at its scope
(`memory.relaxed_load`), and a tile access is the whole block's.  So a release
fence first gathers the block (a barrier: every thread's earlier accesses are
ordered before each thread's fence, the barrier being cumulative at block scope),
then each thread fences (`fence.acq_rel.<scope>`), and the relaxed stores that
follow publish it all.  An acquire fence is the mirror image: each thread's relaxed
loads, its fence, then a barrier, so that no thread of the block reads what the
acquire guards before every thread has fenced.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import llvm

from ..memory import PTX_SCOPE
from .registry import rule


def _fence(scope: str) -> None:
    llvm.inline_asm(ir.Type.parse("!llvm.void"), [], f"fence.acq_rel.{PTX_SCOPE[scope]};", "",
                    has_side_effects=True)


@rule("tile.fence")
def _tile_fence(cx, op):
    if op.kind == "release":
        cx.barrier()
        _fence(op.scope)
    else:
        _fence(op.scope)
        cx.barrier()
