"""tile-retile-blocks: rescale the tiles a grid axis's blocks compute (128 x 128 -> 128 x 256).

Flag:          --tile-retile-blocks
Input/output:  Tile IR -> the same, with every tensor dim that follows `bid(a)`
               scaled by a factor f (tileir.backend.layout.retile: tiles of loads and
               stores indexed by `bid(a)`, and what flows from and into them) and
               the kernel attribute `tile.grid_scale = [a, num, den]`, which the
               `gpu` stage hands to the launcher (the grid's axis a becomes
               a * den / num).
Precondition:  verified Tile IR of a kernel.  Applied where the kernel asks with
               `tile.retile = [a, num, den]` (`@kernel(retile=(a, f))`; an axis
               that cannot be retiled is an error naming the op), or where the
               launcher's `tile.grid_wish` asks for wider tiles ("wide:<mask of
               axes whose grid is even>", a grid of several waves: sm_90a only,
               tiles at most 256 along a dim, at most 128 accumulator registers
               a thread at the kernel's num_warps, 8 by default)
               or narrower ones ("narrow:<s>", a grid smaller than the GPU: at
               most s times narrower, N tiles of 32 or more).  Only axes whose
               tied tiles hold a product's accumulator and a stored tile, those
               tied to N first.  The wish's "short:<arg>.<dim>,..." (array dims of
               at most 64 in this launch) first shrinks an axis's tiles to 64 where
               every array it indexes is short (grid unchanged); after a narrowing
               by s on sm_90a, a K loop of cdiv(dim, T) trips over zero-padded, aligned loads
               takes tiles up to s times longer along K (cdiv(dim, s T) trips).
               Without either attribute: no change.  Then a `tile.k_split` s (set by
               the stage driver when no ring depth fits the shared memory,
               backend/layout/budget.py) makes such K loops' tiles s times shorter, in s
               times more trips.

Example: (wish "wide:2", grid (32, 32) -> (32, 16))
  before:  %b = "tile.load"(%B, %k, %j) {tile_shape = array<i64: 64, 128>} -> tensor<64x128xbf16>
           %acc = arith.constant dense<0.0> : tensor<128x128xf32>
  after:   %b = "tile.load"(%B, %k, %j) {tile_shape = array<i64: 64, 256>} -> tensor<64x256xbf16>
           %acc = arith.constant dense<0.0> : tensor<128x256xf32>
"""

from mlir import ir

from tileir.backend.layout.retile import retile, split_k
from tileir.dialect.verifier import kernel_functions, module_chip

FLAG = "tile-retile-blocks"
SUMMARY = "rescale the tiles of a grid axis (wider for large grids, narrower for small ones)"


def run(module: ir.Module) -> None:
    target = module_chip(module)
    for op in kernel_functions(module):
        with op.location:
            retile(op, target)
            split_k(op)
