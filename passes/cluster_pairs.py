"""tile-cluster-pairs: run neighbouring tiles or blocks as 2-block clusters sharing loads.

Flag:          --tile-cluster-pairs
Input/output:  Tile IR -> the same, where a kernel qualifies
               (tileir.backend.pipeline.cluster_pairs.choose), with `tile.cluster_pairs = a`
               (the grid axis whose tiles pair), `tile.cluster = [2, 1, 1]` and
               `tile.multicast` on each load in a loop whose tile the two blocks of a
               pair share (its index does not depend on `bid(a)`).  The later passes
               act on the marks: tile-persistent-tiles walks pairs of tiles,
               tile-pipeline-loops lists the marked loads' buffers in the ring's
               `tile.multicast`, and tile-lower-to-gpu copies each such tile as two
               TMA multicast halves (docs/tensor-cores.md, "Cluster pairs").
Precondition:  verified Tile IR with layouts, on sm_90a, of a persistent kernel
               (`tile.persistent`) whose launch grid is even along `a` (the grid
               wish's "wide" mask) and whose loops run as long for both tiles of a
               pair; any other kernel is untouched.  A kernel that asks
               (`tile.pair_axis = a`, the kernel option `pair_axis`) and is launched as
               written is paired along `a` (warp roles allowed; the tiles of one loop
               multicast), with `tile.cluster` two blocks along `a` ((1, 2, 1) for
               a = 1), or refused with a located error naming why (a loop's bounds
               depend on `bid(a)`, a persistent kernel, a retiled axis, ...).

Example:
  before:  func.func @gemm(...) attributes {tile.grid_wish = "wide:3", tile.persistent = true, ...}
             %8 = "tile.load"(%w, %j, %k) ...
  after:   func.func @gemm(...) attributes {tile.cluster = array<i64: 2, 1, 1>,
                                            tile.cluster_pairs = 0 : i64, ...}
             %8 = "tile.load"(%w, %j, %k) {tile.multicast, ...} ...
"""

from mlir import ir

from tileir.backend.pipeline.cluster_pairs import plan

FLAG = "tile-cluster-pairs"
SUMMARY = ("pair a persistent GEMM's neighbouring tiles, or a kernel's blocks along the "
           "axis it asks for, in 2-block clusters sharing operand tiles")


def run(module: ir.Module) -> None:
    plan(module)
