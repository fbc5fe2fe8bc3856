"""tile-split-blocks: more blocks for a small grid, each computing a slice of a block's tiles.

Flag:          --tile-split-blocks
Input/output:  Tile IR -> the same, where the launcher's `tile.grid_wish` asks for a
               split ("split:<s>;free:<mask>", tileir.backend.layout.grid_wish: a grid of at
               most one block for every two SMs, of a kernel without products): the
               tiles along one dim that flows only through element-wise ops are split
               `s'` ways (s' <= s, tileir.backend.layout.split chooses the dim and s') across a
               grid axis in the mask the kernel does not read; every load and store of
               those tiles takes index `i * s' + bid(u)` and extent E / s', and the
               kernel attribute `tile.grid_scale = [u, 1, s']` tells the launcher to run
               s' blocks along u.
Precondition:  verified Tile IR of a kernel.  Without a split wish, or when no dim
               can split (a reduction along every dim, a store of a tile that
               follows none, no free grid axis): no change.

Example: (wish "split:8;free:6", grid (1, 1, 1); RoPE's heads)
  before:  %x = "tile.load"(%X, %t, %c0, %c0) {tile_shape = array<i64: 1, 64, 64>}
  after:   %u = "tile.bid"() {axis = 2}  %h = arith.addi(arith.muli(%c0, %c8), %u)
           %x = "tile.load"(%X, %t, %h, %c0) {tile_shape = array<i64: 1, 8, 64>}
"""

from mlir import ir

from tileir.backend.layout.retile import GRID_SCALE_ATTR
from tileir.backend.layout.split import small_grid_wish, split

FLAG = "tile-split-blocks"
SUMMARY = "split a small grid's tiles across more blocks along an element-wise dim"


def run(module: ir.Module) -> None:
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or "tile.kernel" not in op.attributes or \
                GRID_SCALE_ATTR in op.attributes:       # (tile-cluster-rows took the grid)
            continue
        wish = small_grid_wish(op)
        if wish is not None and "free" in wish:
            with op.location:
                split(op, int(wish["split"]), int(wish["free"]))
