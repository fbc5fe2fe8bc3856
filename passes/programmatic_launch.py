"""tile-programmatic-launch: an sm_90a kernel lets the next one launch, and waits for the last.

Flag:          --tile-programmatic-launch
Input/output:  pipeline-stage Tile IR -> the same, each sm_90a kernel's body opening
               with `tile.grid_dependency wait` and then
               `tile.grid_dependency launch_dependents` (stage `pipeline`, last; after
               the L2 prefetches and the early ring loads tile-pipeline-loops put at
               the top for the `l2_prefetch` and `early_loads` options, when only pure
               ops and ring allocations and acquires precede them, and after the plain
               loads of `early_loads` arrays at the body's top level, which it first
               moves to the top with the pure ops of their indices), the
               kernel marked `tile.overlapped`; the launcher then launches it with
               programmatic stream serialization (meta `programmatic_launch`).
Precondition:  verified IR.  Unchanged: modules for another target (`tile.target`
               not sm_90*), kernels that use `tile.grid_dependency` themselves (launched
               programmatically where the launch asks: meta `programmatic_on_request`),
               and kernels with `tile.programmatic_launch = false` (the kernel option
               `programmatic_launch=False`).  tileir.backend.pipeline.programmatic.

Why: the kernel's launch (blocks placed, parameters read) overlaps the previous
kernel's run, and the wait before any memory access keeps the stream's order: at
decode sizes, where a kernel lasts one to three microseconds, that launch is much of
it (graph replay on the H100: RoPE of Llama-3-70B at one token 1.36 -> 0.91 us,
LayerNorm of Llama-3-8B at 64 rows 2.20 -> 1.77).  The wait comes first, so at most
one kernel waits ahead of the running one.

Example:
  before:  func.func @k(...) attributes {tile.kernel} { %t = "tile.bid"() ... }
  after:   func.func @k(...) attributes {tile.kernel, tile.overlapped} {
             "tile.grid_dependency"() {kind = "wait"} : () -> ()
             "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
             %t = "tile.bid"() ... }
"""

from mlir import ir

from tileir.backend.pipeline.programmatic import overlap_launches

FLAG = "tile-programmatic-launch"
SUMMARY = ("open each sm_90a kernel with a wait for the previous kernel, letting the next "
           "one launch early")


def run(module: ir.Module) -> None:
    overlap_launches(module)
