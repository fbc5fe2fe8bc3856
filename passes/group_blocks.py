"""tile-group-blocks: let a 2-d grid's blocks take their tiles in grouped order.

Flag:          --tile-group-blocks
Input/output:  Tile IR -> the same, with every `tile.bid` of axis 0 and 1 replaced
               by a grouped order of the hardware's linear block order
               (tileir.backend.pipeline.block_order: groups of 8 axis-0 tiles walked
               along axis 1, a bijection of the grid), so blocks resident at once
               share operand panels in L2.
Precondition:  verified Tile IR of a kernel.  Applied where the kernel's
               `tile.block_order` is "grouped" (`@kernel(block_order=...)`), or,
               without that attribute, where the kernel multiplies with tensor
               cores in a loop and uses grid axes 0 and 1; "linear" keeps the
               hardware order.  Blocks are independent, so the results do not
               change.

Example:
  before:  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
           %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  after:   %pid = b1 * G0 + b0; %first = pid / (8 * G1) * 8; %size = min(G0 - first, 8)
           %i = first + pid mod (8 * G1) mod size;  %j = pid mod (8 * G1) / size
"""

from mlir import ir

from tileir.backend.pipeline.block_order import group_blocks

FLAG = "tile-group-blocks"
SUMMARY = "reorder a 2-d grid's blocks in groups along axis 0 (L2 reuse of operand panels)"


def run(module: ir.Module) -> None:
    group_blocks(module)
