"""tile-assign-layouts: give every tile a distribution over lanes and warps (stage `layout`).

Input: Tile IR after the `tile` stage (helpers inlined), no layouts.
Output: the same ops, every `tensor` type carrying a `#tile.blocked` or
`#tile.slice` encoding, `tile.convert_layout` where producer and consumer
disagree, and `tile.num_warps` on each kernel.  Global accesses get coalesced
16-byte-per-thread layouts; element-wise chains, broadcasts and reductions
keep them without data movement (tileir.backend.assign explains the policy).

    %t = "tile.load"(...) : (...) -> tensor<1x8192xbf16>
  becomes
    %t = "tile.load"(...) : (...) -> tensor<1x8192xbf16, #tile.blocked<array<i64: 1, 8>,
         array<i64: 1, 32>, array<i64: 1, 8>, array<i64: 1, 0>>>
"""

from mlir import ir

from tileir.backend.assign import assign_layouts

FLAG = "tile-assign-layouts"
SUMMARY = "choose a lane/warp layout for every tile and insert layout conversions"


def run(module: ir.Module) -> None:
    assign_layouts(module)
