"""tile-version-bounds: a straight-line kernel's version for blocks whose tiles lie inside.

Flag:          --tile-version-bounds
Input/output:  pipeline-stage Tile IR -> the same, the body of a kernel without
               loops wrapped as `scf.if %ok { body, accesses marked tile.in_bounds }
               else { body }` (stage `pipeline`, last).
Precondition:  verified IR with layouts.  A kernel qualifies when it has no loop,
               reduction, product, ring, cluster gather or stream-K op and is not
               persistent;
               its top-level weak `tile.load`s (into registers) and `tile.store`s
               whose array and tile indices are computed by pure region-free ops
               from its arguments are marked, and `%ok` says that each of their
               tiles lies inside its array (`i <u dim >> log2(extent)` per dim,
               computed once before the branch).  Other accesses stay checked in
               both versions; a kernel with nothing to mark is unchanged.
               tileir.backend.pipeline.version_bounds.

Why: marked accesses lower without per-thread bounds arithmetic or branches
(backend/gpu/memory.py), so blocks whose tiles fit, all of them at most sizes, run
straight-line code.  At one block per token that code's length is the kernel's
time: RoPE at one token on the H100 went from 0.77 to 0.87x torch.compile (8B).

Example:
  before:  %x = "tile.load"(%X, %t, %c0) {tile_shape = array<i64: 1, 64>}
           "tile.store"(%Y, %x, %t, %c0)
  after:   %d0 = "tile.dim"(%X) {axis = 0} ... %ok = arith.andi ...
           scf.if %ok { %x = "tile.load"(...) {tile.in_bounds, ...}
                        "tile.store"(...) {tile.in_bounds} }
           else       { %x = "tile.load"(...) ... "tile.store"(...) }
"""

from mlir import ir

from tileir.backend.pipeline.version_bounds import version_kernels

FLAG = "tile-version-bounds"
SUMMARY = ("version a kernel without loops or reductions for blocks whose tiles lie "
           "inside their arrays")


def run(module: ir.Module) -> None:
    version_kernels(module)
