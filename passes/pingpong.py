"""tile-pingpong: the two consumer warpgroups of a warp-specialized sm_90a kernel take
turns at the tensor cores (stage `pipeline`, after tile-pipeline-loops).

Flag:          --tile-pingpong
Input/output:  pipeline-stage Tile IR -> the same, with `tile.turn` ops (dialect/ring.py)
               around the product issue of each qualifying loop and before and after
               the loop.
Precondition:  tile-pipeline-loops ran.  An sm_90 target (`tile.target`, sm_90a when
               absent); loops of the consumer branch of a warp-specialized split
               with two consumer warpgroups, rotated by product_rotation.py, each
               warpgroup owning its rows, block-uniform bounds
               (tileir.backend.pipeline.pingpong has the contract).  Of those, a
               kernel with `tile.pingpong = true` (the kernel option) gets turns in
               all, one with `false` in none; otherwise the compiler chooses:
               attention-shaped loops of head dim >= 128 (where the GPU measured
               a gain).  Anything else is left as it is.  The decisions, with
               their reasons, are the module attribute `tile.pingpong_choice`
               (and tile-opt's remarks).

Example:
  before:  scf.for ... { ...; %s = "tile.mma_async"(%q, %k, %z); %o = "tile.mma_async"(%p, %v, %a)
                         %w = "tile.mma_wait"(%s) {pending = 1} ... }
  after:   "tile.turn"() {kind = "pass", warpgroup = 1}
           scf.for ... { ...; "tile.turn"() {kind = "wait", warpgroup = -1}
                         %s = "tile.mma_async"(...); %o = "tile.mma_async"(...)
                         "tile.turn"() {kind = "pass", warpgroup = -1}
                         %w = "tile.mma_wait"(%s) {pending = 1} ... }
           "tile.turn"() {kind = "wait", warpgroup = 0}
"""

from mlir import ir

from tileir.backend.pipeline.pingpong import pingpong_loops

from .lower_to_llvm import module_target

FLAG = "tile-pingpong"
SUMMARY = "the two consumer warpgroups of a rotated attention loop take turns at the tensor cores"


def run(module: ir.Module) -> None:
    pingpong_loops(module, module_target(module).chip)
