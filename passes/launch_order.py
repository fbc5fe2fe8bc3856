"""tile-launch-order: the grid axis that walks contiguous memory launches fastest.

Flag:          --tile-launch-order
Input/output:  Tile IR -> the same, for kernels the launcher compiles with a wish
               that allows it ("...;swap:1": grid axes 0 and 1 both longer than 1,
               axis 0 short enough to become axis 1, tileir.backend.layout.grid_wish).
               When the loads and stores that bid(1) indexes at their array's
               innermost dim (and bid(0) at an outer one) move more of the kernel's
               bytes than those indexed the other way round, every `tile.bid` and
               `tile.num_blocks` of axis 0 reads axis 1 and vice versa, and the
               kernel attribute `tile.grid_perm = [1, 0, 2]` tells the launcher to
               swap the grid's first two axes (metadata `grid_perm`).
Precondition:  verified Tile IR.  Kernels with products (their block order is
               retiling's and block_order's) and persistent kernels are left alone.

Why: the GPU starts blocks in order of their linear id, x fastest.  SwiGLU written
as a user writes it, grid (rows, column tiles) with `bid(0)` the row, starts
blocks down a column: consecutive blocks read 2 KB pieces 28 KB apart, and the
DRAM pages each opens serve one piece.  Started along the row, consecutive blocks
read consecutive pieces.  Measured on the H100 (8192 rows, bf16, bench/RESULTS.md):
SwiGLU 14336 / 18432 / 28672 wide 4-5 % faster, from 0.97x torch.compile to 1.01x.
Blocks are independent, so the order is free to choose: nothing else changes.

Example: (grid (8192, 14, 1))
  before:  %i = "tile.bid"() {axis = 0} ; %j = "tile.bid"() {axis = 1} ; load(%g, %i, %j)
  after:   %i = "tile.bid"() {axis = 1} ; %j = "tile.bid"() {axis = 0} ; load(%g, %i, %j)
           {tile.grid_perm = array<i64: 1, 0, 2>}
"""

from __future__ import annotations

from mlir import ir

from tileir.backend.layout.retile import PERM_ATTR, note_grid_rewrite, read_wish
from tileir.backend.layout.mma_layouts import tile_bytes

from .effects import ops_under

FLAG = "tile-launch-order"
SUMMARY = "launch the grid axis that walks contiguous memory fastest (swap axes 0 and 1)"

_AXIS_OPS = ("tile.bid", "tile.num_blocks")


def run(module: ir.Module) -> None:
    for op in module.body.operations:
        func = op.operation
        if func.name != "func.func" or "tile.kernel" not in func.attributes or \
                PERM_ATTR in func.attributes or "swap" not in read_wish(func):
            continue
        if _prefers_axis_1(func):
            _swap(func)


def _axis_of(v: ir.Value, depth: int = 0) -> int | None:
    """The grid axis whose block id `v` is (directly, or offset or scaled by values
    that are not block ids), else None."""
    owner = v.owner
    if isinstance(owner, ir.Block) or depth > 8:
        return None
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    if op.name == "tile.bid":
        return ir.IntegerAttr(op.attributes["axis"]).value
    if op.name in ("arith.addi", "arith.muli", "arith.subi"):
        axes = {_axis_of(x, depth + 1) for x in op.operands} - {None}
        return axes.pop() if len(axes) == 1 else None
    return None


def _prefers_axis_1(func: ir.Operation) -> bool:
    """Whether more bytes are accessed with bid(1) at the innermost dim and bid(0) at an
    outer one than the other way round."""
    ops = ops_under(func)
    if any(op.name in ("tile.mma", "tile.matmul", "tile.grid_size") for op in ops):
        return False
    score = 0
    for op in ops:
        if op.name not in ("tile.load", "tile.store"):
            continue
        tile = op.results[0] if op.name == "tile.load" else op.operands[1]
        first = 1 if op.name == "tile.load" else 2
        index = list(op.operands)[first:]
        if len(index) < 2:
            continue
        axes = [_axis_of(v) for v in index]
        t = ir.RankedTensorType(tile.type)
        nbytes = tile_bytes(list(t.shape), t.element_type)
        inner, outer = axes[-1], axes[:-1]
        if inner == 1 and 0 in outer:
            score += nbytes
        elif inner == 0 and 1 in outer:
            score -= nbytes
    return score > 0


def _swap(func: ir.Operation) -> None:
    for op in ops_under(func):
        if op.name in _AXIS_OPS:
            axis = ir.IntegerAttr(op.attributes["axis"]).value
            if axis in (0, 1):
                op.attributes["axis"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                           1 - axis)
    func.attributes[PERM_ATTR] = ir.DenseI64ArrayAttr.get([1, 0, 2])
    note_grid_rewrite(func, FLAG)
