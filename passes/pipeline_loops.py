"""tile-pipeline-loops: software-pipeline loops that load tiles into shared memory
(stage `pipeline`).

Flag:          --tile-pipeline-loops
Input/output:  layout-stage Tile IR -> the same, with each eligible `scf.for`
               rewritten into a ring of shared-memory stages (tile.ring_* ops,
               dialect/ring.py) and, on sm_90a, its loop-carried wgmma
               accumulations into `tile.mma_async` + `tile.mma_wait`.
Precondition:  the `layout` stage ran (loads feeding shared memory have
               `#tile.shared` results).  A load is pipelined when it sits in the
               loop body itself, reads an aligned kernel array (`tile.aligned`)
               with zero or undetermined padding, the target can copy its tile
               asynchronously (TMA boxes of <= 256 per dim on sm_90a, 16-byte
               rows for cp.async on sm_80), and its indices depend only on the
               loop counter and loop-invariant values.  Stages: the kernel's
               `tile.num_stages`, else 2 to 4, what fits the shared memory of
               a block that shares its SM with another when registers allow
               (tileir.backend.pipeline.software_pipeline).  The target is the module's
               `tile.target` (sm_90a when absent).
               With the kernel's `tile.l2_prefetch` (option `l2_prefetch=True`), on
               sm_90a, where tile-programmatic-launch will place the kernel's wait:
               `tile.prefetch_l2` of the tiles of each ring's first S - 1 iterations at
               the top of the kernel (for the loops in its body; indices from pure
               ops on its arguments only).  They read nothing into the kernel (the PTX
               ISA's weak read, a hint, with no destination), so running before the
               wait is safe whatever the previous kernel writes: a wasted fetch at
               worst (software_pipeline.py `prefetch_first`).
               With the kernel's `tile.early_loads` (option `early_loads=(names)`,
               arrays the author promises no earlier kernel in the stream writes),
               likewise on sm_90a where the wait will be placed: the first ring of the
               kernel's body is allocated at its top, with its prologue's acquires and
               those arrays' loads (software_pipeline.py `load_early`); the slots'
               other loads stay in the prologue, after the wait.  A named array the
               kernel writes is an error at the write, on every target.

Example:        (S = 3, one tile)
  before:  scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) {
             %a = "tile.load"(%A, %i, %k) : ... -> tensor<128x64xbf16, #tile.shared<...>>
             %d = "tile.mma"(%a, %b, %acc) ...
  after:   %r = "tile.ring_alloc"() {stages = 3 : i64, tiles = [tensor<128x64xbf16, ...>]}
           (ring_acquire, ring_load, ring_commit for iterations 0 and 1)
           scf.for %k ... { %t = "tile.ring_wait"(%r, %slot, %parity) ...
             %d = "tile.mma_async"(%t, %b, %acc); %w = "tile.mma_wait"(%d) {pending = 1}
             "tile.ring_release"(%r, %prev, %notfirst); (acquire, load, commit of k + 2) }
           "tile.mma_wait"(%res) {pending = 0}; "tile.ring_free"(%r)
"""

from mlir import ir

from tileir.backend.pipeline.software_pipeline import pipeline_loops

from .lower_to_llvm import module_target

FLAG = "tile-pipeline-loops"
SUMMARY = "software-pipeline loops of shared-memory loads into rings of async copies"


def run(module: ir.Module) -> None:
    pipeline_loops(module, module_target(module).chip)
