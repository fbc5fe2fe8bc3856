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

A batched product (cuTile's BatchMatMul: `bid(0)` the batch, `bid(1)` and `bid(2)`
the row and column tiles) has a *batch axis* (`batch_axis`): one that indexes only
unit dims of the tiles it loads and stores.  Tiles of different batches share no
operand, so the batch is walked slowest and the other two axes grouped within it:

    pid = bid(0) + G0 * (bid(1) + G1 * bid(2))
    bid(b)' = pid / (Gx * Gy);  (bid(x)', bid(y)') = grouped(pid mod (Gx * Gy))

(x < y the other axes).  A persistent kernel walks its tiles in the same order
(persistent.py).

`block_order = "reversed"` walks the same order from its last tile (pid' = G0 G1 - 1 -
pid; with a batch axis, over all three): causal attention's blocks of the last Q
tiles run the most key tiles, and the grouped order starts them last, so the
longest blocks make the launch's tail; reversed, they start first and the short
ones fill the tail (a greedy model of 132 SMs: 2.9 % above the mean load -> 1.0 % at
S4096, docs/attention.md).  Persistent kernels walk their tiles themselves.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from tileir.dialect.tile import BidOp, NumBlocksOp
from tileir.dialect.verifier import kernel_functions

GROUP = 8
ORDER_ATTR = "tile.block_order"      # "grouped", "linear" or "reversed" (the kernel's)


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


def walk_order(func: ir.Operation) -> tuple[int, int, int]:
    """(x, y, z): the grid axes as tiles are walked, grouped over (x, y), z slowest:
    the batch axis last, else (0, 1, 2)."""
    b = batch_axis(func)
    if b is None:
        return (0, 1, 2)
    x, y = (a for a in range(3) if a != b)
    return (x, y, b)


def batch_axis(func: ir.Operation) -> int | None:
    """The grid axis of a batched GEMM (its loops' products multiply loaded tiles)
    whose block id only indexes unit dims of the tiles loaded and stored, when exactly
    one axis does and another indexes longer dims; else None.  (Attention, whose
    second product multiplies a computed tile, keeps its order.)"""
    kinds: dict[int, set] = {}        # axis -> per use: "unit", "tile" or "other"
    products = []

    def extent(use) -> int | None:
        owner, k = use.owner, use.operand_number
        if owner.name == "tile.load" and k >= 1:
            return list(ir.DenseI64ArrayAttr(owner.attributes["tile_shape"]))[k - 1]
        if owner.name == "tile.store" and k >= 2:
            return ir.RankedTensorType(owner.operands[1].type).shape[k - 2]
        return None

    def loaded(v: ir.Value) -> bool:
        while not isinstance(v.owner, ir.Block) and v.owner.name in ("tile.reshape",
                                                                      "tile.permute"):
            v = v.owner.operands[0]
        return not isinstance(v.owner, ir.Block) and v.owner.name == "tile.load"

    def visit(op):
        if op.name == "tile.bid":
            seen = kinds.setdefault(ir.IntegerAttr(op.attributes["axis"]).value, set())
            for use in op.results[0].uses:
                e = extent(use)
                seen.add("other" if e is None else "unit" if e == 1 else "tile")
        elif op.name == "tile.mma" and in_loop(op):
            products.append(loaded(op.operands[0]) and loaded(op.operands[1]))
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    batch = [a for a, k in kinds.items() if k == {"unit"}]
    if not products or not all(products) or len(batch) != 1 or \
            not any("tile" in k for k in kinds.values()):
        return None
    return batch[0]


def _wanted(func: ir.Operation) -> bool:
    """The kernel's `block_order`, else: grouped when it multiplies with tensor cores
    in a loop and uses both grid axes 0 and 1; never for a persistent kernel or one
    launched as cluster pairs."""
    if "tile.persistent" in func.attributes and ir.BoolAttr(
            func.attributes["tile.persistent"]).value:
        return False              # its tile loop orders the tiles itself (persistent.py)
    if "tile.cluster_pairs" in func.attributes:
        # launched as written in clusters of two (the kernel option `pair_axis`): the
        # hardware pairs blocks by their ids, so a pair's blocks must keep theirs (a
        # regrouped id would give them different tiles along the other axes)
        return False
    if ORDER_ATTR in func.attributes:
        return ir.StringAttr(func.attributes[ORDER_ATTR]).value in ("grouped", "reversed")
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
    x, y, z = walk_order(func)
    bids = {x: [], y: []} if z == 2 else {0: [], 1: [], 2: []}

    def visit(op):
        if op.name == "tile.bid":
            axis = ir.IntegerAttr(op.attributes["axis"]).value
            if axis in bids:
                bids[axis].append(op.operation)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    entry = func.regions[0].blocks[0]
    reverse = ORDER_ATTR in func.attributes and \
        ir.StringAttr(func.attributes[ORDER_ATTR]).value == "reversed"
    with ir.InsertionPoint.at_block_begin(entry), func.location:
        if z == 2:              # each plane of axis 2 apart (the hardware walks it last)
            b0, b1 = BidOp(0).result, BidOp(1).result
            g0, g1 = NumBlocksOp(0).result, NumBlocksOp(1).result
            pid = arith.addi(arith.muli(b1, g0), b0)
            if reverse:
                pid = _from_the_end(pid, arith.muli(g0, g1))
            new = dict(zip((0, 1), grouped(pid, g0, g1)))
        else:                   # the batch axis z slowest, x and y grouped in its planes
            b = [BidOp(a).result for a in range(3)]
            g = [NumBlocksOp(a).result for a in range(3)]
            pid = arith.addi(b[0], arith.muli(g[0], arith.addi(b[1], arith.muli(g[1], b[2]))))
            if reverse:
                pid = _from_the_end(pid, arith.muli(g[0], arith.muli(g[1], g[2])))
            plane = arith.muli(g[x], g[y])
            new = dict(zip((x, y), grouped(arith.remui(pid, plane), g[x], g[y])))
            new[z] = arith.divui(pid, plane)
    for axis, value in new.items():
        for op in bids[axis]:
            op.results[0].replace_all_uses_with(value)
            op.erase()


def _from_the_end(pid: ir.Value, total: ir.Value) -> ir.Value:
    """total - 1 - pid: the walk from its last tile (block_order "reversed")."""
    one = arith.ConstantOp(ir.IntegerType.get_signless(32), 1).result
    return arith.subi(arith.subi(total, one), pid)
