"""Splitting a block's tiles across more blocks, for grids smaller than the GPU.

A decode step launches its element-wise kernels over 1 to 64 tokens: RoPE, written
with one block per token holding all its heads, runs 1 to 16 blocks on 132 SMs,
and each block waits on its loads alone.  When a kernel's tiles along some dim
only flow through element-wise ops (no reduction, product or extraction runs
along it), a block's work splits along that dim.  Take a grid axis `u` the kernel
does not use (extent 1 in the launch): every load and store whose tile follows
the dim takes tile index `i * s + bid(u)` with extent `E / s` instead of index `i`
with extent `E`, and the grid's axis `u` becomes `s`.  Block `b` along `u` then
computes the slice `[b E/s, (b + 1) E/s)` of each tile the one block computed, so
the `s` blocks together compute the same elements, each once.  Ragged edges stay
as they were: the slices of a tile that reaches past the array's end are padded
or clipped like the whole tile was.

Which tensors follow the dim is the retiling analysis (backend/layout/retile.py), seeded
with one load's or store's dim instead of a block index; every load and store it
reaches is re-indexed along the dim it reaches.  Refused, with the reason: a
reduction, product, extraction or an op unknown to the analysis along the dim; an
iota or a non-splat constant along it (its values would have to shift); a store
whose tile does not follow the dim (each of the `s` blocks would write it); a
kernel with products (retiling gives those narrower tiles instead).

Which dim and how many blocks (`choose`): dims that are not the innermost of any
array they index come first (a slice of an innermost dim shortens the rows each
warp reads contiguously), then the dims whose tiles move the most bytes.  `s` is
the largest power of two at most the launch's wish (blocks that keep the grid
within the GPU), dividing every tile's extent along the dim, that leaves each
block at least MIN_BLOCK_BYTES of the tiles that follow the dim and, along an
innermost dim, rows of at least MIN_ROW_BYTES; a block that moves at most
SPLIT_ABOVE bytes stays whole (measured: such a block is not slower than its
slices).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from mlir import ir
from mlir.dialects import arith

from .retile import (GRID_SCALE_ATTR, NotRetileable, Tied, _fixed, _NONE, _ops, _shape,
                     _Tags, note_grid_rewrite, read_wish, refuse_per_block_effects, scale_dims,
                     settle)
from .mma_layouts import tile_bytes

# Measured on the H100 (bench/RESULTS.md, "Small grids split"): RoPE and SwiGLU at 1,
# 16 and 64 tokens, blocks keeping 512 B to 32 KB.  With bounds-checked accesses a
# block moving 16 KB or less ran as fast whole as split, one moving 32 KB gained 8-16 %
# from slices of 8 KB.  Once tile-version-bounds took the checks off the blocks whose
# tiles fit (bench/RESULTS.md, "Two versions"), 8B's RoPE (16 KB a token) gained 10 %
# at 1 token and 7 % at 16 from slices of 4 KB, lost 3.5 % at 64; SwiGLU's 6 KB tiles
# still ran best whole.
SPLIT_ABOVE = 8192            # a block moving at most this many bytes stays whole
MIN_BLOCK_BYTES = 4096        # bytes of loaded and stored tiles a split block keeps at least
MIN_ROW_BYTES = 128           # a split innermost dim keeps rows of one 128-byte line


@dataclasses.dataclass
class Split:
    """The tensors that follow one dim of the kernel's tiles, and its memory ops."""

    tied: Tied
    memory: list[tuple[ir.Operation, int]]      # (load or store, its tied dim)
    innermost: bool                             # some tied dim is its array's last

    def extents(self) -> set[int]:
        return self.tied.sizes()

    def nbytes(self) -> int:
        """Bytes the kernel's tied loads and stores move (once each, as written)."""
        return sum(tile_bytes(_shape(_tile_of(op)), _elem(_tile_of(op)))
                   for op, _ in self.memory)

    def key(self) -> frozenset:
        return frozenset(self.tied.dims.items())


def _tile_of(op: ir.Operation) -> ir.Value:
    return op.results[0] if op.name == "tile.load" else op.operands[1]


def _elem(v: ir.Value) -> ir.Type:
    return ir.RankedTensorType(v.type).element_type


def _index_base(op: ir.Operation) -> int:
    return 1 if op.name == "tile.load" else 2


# ---------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------
def analyze(func: ir.Operation, seed: ir.Operation, dim: int) -> Split:
    """The tensors of `func` that follow dim `dim` of the tile `seed` (a load or a
    store) loads or stores, or NotRetileable."""
    ops = _ops(func)
    refuse_per_block_effects(ops)
    for op in ops:
        if op.name in ("tile.mma", "tile.matmul"):
            raise NotRetileable("the kernel multiplies tiles (retiling's, not splitting's)",
                                op.location)
    tags = _Tags()
    tags.set(_tile_of(seed), dim, seed)
    for op in ops:
        if _fixed(op):
            tags.set(op.results[0], _NONE, op)
    settle(ops, tags)
    dims = {v: d for v, d in tags.of.items() if d != _NONE}
    memory = []
    innermost = False
    for op in ops:
        if op.name not in ("tile.load", "tile.store"):
            continue
        d = dims.get(_tile_of(op))
        if d is None:
            if op.name == "tile.store":
                raise NotRetileable("a store's tile does not follow the split dim (every "
                                    "block would store it)", op.location)
            continue
        memory.append((op, d))
        innermost |= d == len(_shape(_tile_of(op))) - 1
    return Split(Tied(-1, dims, [], sum(op.name == "tile.store" for op, _ in memory)),
                 memory, innermost)


def candidates(func: ir.Operation) -> list[Split]:
    """Every dim of the kernel's tiles that may split, outer dims first, then the
    most bytes first."""
    found: dict[frozenset, Split] = {}
    for op in _ops(func):
        if op.name not in ("tile.load", "tile.store"):
            continue
        shape = _shape(_tile_of(op))
        for d, n in enumerate(shape):
            if n < 2:
                continue
            try:
                split = analyze(func, op, d)
            except NotRetileable:
                continue
            found.setdefault(split.key(), split)
    return sorted(found.values(), key=lambda s: (s.innermost, -s.nbytes()))


def factor(split: Split, wish: int) -> int:
    """The blocks one block becomes: 1 for a block moving at most SPLIT_ABOVE bytes,
    else at most `wish`, dividing every tied extent, each keeping MIN_BLOCK_BYTES (and
    rows of MIN_ROW_BYTES along an innermost dim)."""
    s = 1
    total = split.nbytes()
    if total <= SPLIT_ABOVE:
        return s
    while s * 2 <= wish:
        t = s * 2
        if any(n % t for n in split.extents()) or total // t < MIN_BLOCK_BYTES:
            break
        if any(d == len(_shape(_tile_of(op))) - 1 and
               tile_bytes([_shape(_tile_of(op))[d] // t], _elem(_tile_of(op))) < MIN_ROW_BYTES
               for op, d in split.memory):
            break
        s = t
    return s


# ---------------------------------------------------------------------------
# Rewrite
# ---------------------------------------------------------------------------
def apply(func: ir.Operation, split: Split, axis: int, s: int) -> None:
    """Splits the tied dim `s` ways across grid axis `axis` (unused by the kernel)."""
    scale_dims(split.tied, Fraction(1, s))
    entry = func.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(entry), func.location:
        bid_op = ir.Operation.create("tile.bid", results=[ir.IntegerType.get_signless(32)],
                                     attributes={"axis": ir.IntegerAttr.get(
                                         ir.IntegerType.get_signless(64), axis)})
    bid = bid_op.results[0]
    # one new index per old one, made where the old one is (so it dominates all its
    # uses): accesses that shared an index still do (what passes/iterations.py
    # recognizes a map over slabs by)
    made: dict[ir.Value, ir.Value] = {}
    for op, d in split.memory:
        pos = _index_base(op) + d
        index = op.operands[pos]
        if index not in made:
            with _right_after(index, bid_op), op.location:
                scaled = arith.muli(index, arith.constant(index.type, s))
                made[index] = arith.addi(scaled, bid)
        op.operands[pos] = made[index]
    func.attributes[GRID_SCALE_ATTR] = ir.DenseI64ArrayAttr.get([axis, 1, s])
    note_grid_rewrite(func, "tile-split-blocks")


def _right_after(v: ir.Value, bid: ir.Operation) -> ir.InsertionPoint:
    """An insertion point right after `v`'s definition: after the op defining it, at
    the start of the block whose argument it is, but after `bid` (the split's block
    index, first in the entry block) for an argument of the kernel."""
    owner = v.owner
    at = bid if isinstance(owner, ir.Block) and owner == bid.block else owner
    if isinstance(at, ir.Block):
        return ir.InsertionPoint.at_block_begin(at)
    at = at.operation if isinstance(at, ir.OpView) else at
    ops = [o.operation for o in at.block.operations]
    return ir.InsertionPoint(ops[ops.index(at) + 1])


def free_axes(func: ir.Operation, mask: int) -> list[int]:
    """The grid axes in `mask` (extent 1 in the launch) the kernel does not read."""
    used = {ir.IntegerAttr(op.attributes["axis"]).value for op in _ops(func)
            if op.name in ("tile.bid", "tile.num_blocks", "tile.grid_size")}
    return [a for a in (2, 1, 0) if mask >> a & 1 and a not in used]


def split(func: ir.Operation, wish: int, mask: int) -> int | None:
    """Splits the best dim of `func`'s tiles across a free grid axis as the launch's
    wish allows; returns the number of blocks each became (None: no split)."""
    axes = free_axes(func, mask)
    if not axes:
        return None
    for cand in candidates(func):
        s = factor(cand, wish)
        if s > 1:
            apply(func, cand, axes[0], s)
            return s
    return None


def small_grid_wish(func: ir.Operation) -> dict[str, str] | None:
    """The parsed grid wish of a kernel compiled for a small grid (at most one block for
    every two SMs: the wish asks for a split, backend/layout/grid_wish.py), else None."""
    wish = read_wish(func)
    return wish if "split" in wish else None


def small_grid(func: ir.Operation) -> bool:
    return small_grid_wish(func) is not None
