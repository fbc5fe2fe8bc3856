"""The order in which a 2-d grid's blocks take their tiles: grouped, for L2 reuse.

Blocks of one launch are independent, so which hardware block computes which
tile `(bid(0), bid(1))` is the compiler's choice as long as every tile is
computed once.  The hardware starts blocks with `bid(0)` fastest; for a GEMM
whose `bid(0)` picks the row panel of A and `bid(1)` the column panel of B, the
blocks resident at once then read as many A panels as there are SMs and one or
two B panels.  Grouped order walks groups of GROUP row tiles column by column
(Triton's "super-grouping", CUTLASS's rasterization swizzle), so resident
blocks share a few panels of each operand and L2 serves them:

    pid = bid(1) * G0 + bid(0)                      (the hardware's linear order)
    group = pid / (GROUP * G1);  first = group * GROUP
    size = min(G0 - first, GROUP)
    bid(0)' = first + (pid mod (GROUP * G1)) mod size
    bid(1)' = (pid mod (GROUP * G1)) / size

a bijection of the grid onto itself (the last group may be narrower).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from tileir.dialect.tile import BidOp, NumBlocksOp
from tileir.dialect.verifier import kernel_functions

GROUP = 8
ORDER_ATTR = "tile.block_order"      # "grouped" or "linear" (the kernel's block_order)


def group_blocks(module: ir.Module) -> None:
    for op in kernel_functions(module):
        if _wanted(op):
            _regroup(op)


def grouped(pid: ir.Value, g0: ir.Value, g1: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(axis-0, axis-1) tile of linear block `pid` of a g0 x g1 grid, in grouped order."""
    i32 = ir.IntegerType.get_signless(32)
    group = arith.ConstantOp(i32, GROUP).result
    per_group = arith.muli(group, g1)
    first = arith.muli(arith.divui(pid, per_group), group)
    size = arith.minui(arith.subi(g0, first), group)
    within = arith.remui(pid, per_group)
    return arith.addi(first, arith.remui(within, size)), arith.divui(within, size)


def _wanted(func: ir.Operation) -> bool:
    """The kernel's `block_order`, else: grouped when it multiplies with tensor cores
    in a loop and uses both grid axes 0 and 1."""
    if "tile.persistent" in func.attributes and ir.BoolAttr(
            func.attributes["tile.persistent"]).value:
        return False              # its tile loop orders the tiles itself (persistent.py)
    if ORDER_ATTR in func.attributes:
        return ir.StringAttr(func.attributes[ORDER_ATTR]).value == "grouped"
    axes, products = set(), False

    def visit(op):
        nonlocal products
        if op.name == "tile.bid":
            axes.add(ir.IntegerAttr(op.attributes["axis"]).value)
        elif op.name in ("tile.mma", "tile.mma_async") and in_loop(op):
            products = True
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return products and {0, 1} <= axes


def in_loop(op: ir.Operation) -> bool:
    """Whether `op` sits inside an `scf.for` of its function."""
    p = op.parent
    while p is not None and p.name != "func.func":
        if p.name == "scf.for":
            return True
        p = p.parent
    return False


def _regroup(func: ir.Operation) -> None:
    bids = {0: [], 1: []}

    def visit(op):
        if op.name == "tile.bid":
            axis = ir.IntegerAttr(op.attributes["axis"]).value
            if axis in bids:
                bids[axis].append(op.operation)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    entry = func.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(entry), func.location:
        b0, b1 = BidOp(0).result, BidOp(1).result
        g0, g1 = NumBlocksOp(0).result, NumBlocksOp(1).result
        row, col = grouped(arith.addi(arith.muli(b1, g0), b0), g0, g1)
    for axis, value in ((0, row), (1, col)):
        for op in bids[axis]:
            op.results[0].replace_all_uses_with(value)
            op.erase()
