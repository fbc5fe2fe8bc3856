"""tile-persistent-tiles: make a kernel walk tiles in a loop (a persistent kernel).

Flag:          --tile-persistent-tiles
Input/output:  Tile IR -> the same with the kernel body inside one `scf.for`
               (attribute `tile.persistent_loop`) over the tiles of the grid the
               user asked for (`tile.grid_size`), stepping by the number of
               blocks actually launched; `tile.bid` and `tile.num_blocks` inside
               become the tile's coordinates (grouped order on axes 0 and 1
               unless `tile.block_order` is "linear") and the user's grid.
               With `tile.stream_k = true` (`@kernel(stream_k=True)`) and a K loop
               that qualifies (backend/pipeline/stream_k.py), the loop counts this block's
               segments instead: whole tiles, then the tiles its run of K iterations
               touches, the K loop bounded by the segment, `tile.partial_store` /
               `tile.partial_add` after it and the epilogue only where the segment
               is not a tail (test/Transforms/stream-k.mlir).
Precondition:  verified Tile IR of a kernel with `tile.persistent = true`
               (`@kernel(persistent=True)`); kernels without it are untouched.
               The runtime launches such a kernel on a 1-d grid of as many blocks
               as fit the GPU at once and passes the user's grid after the other
               parameters (docs/gpu-backend.md, ABI).  tileir.backend.pipeline.persistent.

Example:
  before:  %i = "tile.bid"() {axis = 0 : i64} ... "tile.store"(%c, %t, %i, %j)
  after:   %g0 = "tile.grid_size"() {axis = 0 : i64} ...
           scf.for %t = %pid to %total step %programs { %i = <decoded from %t> ...
             "tile.store"(%c, %t, %i, %j) } {tile.persistent_loop}
"""

from mlir import ir

from tileir.backend.pipeline.persistent import make_persistent

FLAG = "tile-persistent-tiles"
SUMMARY = "make a persistent kernel: each block loops over tiles of the user's grid"


def run(module: ir.Module) -> None:
    make_persistent(module)
