"""tile-assign-layouts: give every tile a distribution over lanes and warps (stage `layout`).

Flag:          --tile-assign-layouts
Input/output:  Tile IR -> the same ops, every tile (`tensor`) type carrying a
               `#tile.blocked` or `#tile.slice` encoding, `tile.convert_layout`
               where a producer and its consumer disagree, and the attribute
               `tile.num_warps` (i32) on each `tile.kernel` function.
Precondition:  verified IR after the `tile` stage (helpers inlined; only
               `tile.kernel` functions are assigned).  The policy
               (tileir.backend.layout.assign): every tile shape that is loaded or
               stored gets a coalesced layout, 16 bytes per thread along the
               last dim for the narrowest element type accessed at that shape;
               element-wise ops keep their first operand's layout, broadcasts
               their source's when no data must move, reductions give
               `#tile.slice`, permutes and reshapes that add or drop unit dims
               derive theirs for free; a store, a second operand, a
               loop-carried value or an scf.if branch that disagrees gets a
               conversion.  num_warps is the kernel's own `tile.num_warps`
               (a power of two <= 32) or enough warps that each thread
               streams about two 16-byte vectors, at most 16: the streamed
               bytes are those of the loads at block-dependent indices (a
               block-invariant load, such as a weight row, is not counted;
               a kernel without such loads counts its largest tile).
               Products get tensor-core layouts (docs/tensor-cores.md).
               Rejected at the op: a tile that needs more than 1024 registers a
               thread at the chosen num_warps.

Example:
  before:  %t = "tile.load"(%a, %i) {...} : (...) -> tensor<1024xf32>
  after:   %t = "tile.load"(%a, %i) {...} : (...) -> tensor<1024xf32,
               #tile.blocked<array<i64: 4>, array<i64: 32>, array<i64: 4>, array<i64: 0>>>
           (4 floats per thread, 32 lanes, 4 warps: the kernel gets tile.num_warps = 4)
"""

from mlir import ir

from tileir.backend.layout.assign import assign_layouts

FLAG = "tile-assign-layouts"
SUMMARY = "choose a lane/warp layout for every tile and insert layout conversions"


def run(module: ir.Module) -> None:
    assign_layouts(module)
