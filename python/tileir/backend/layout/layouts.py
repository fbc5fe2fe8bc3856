"""Distributed layouts of tiles over a thread block, as linear maps.

Every tile dim is a power of two, so a layout is a linear map (over bit fields)
from (register index, lane, warp) to an element coordinate: each set bit of the
register index, lane or warp adds a fixed *basis* coordinate.  A basis has one
non-zero dim (a power of two) or is zero: a zero lane/warp basis means those
threads hold replicas, a zero register basis a duplicate register (dropped).
This is Triton's LinearLayout idea restricted to what tiles need.

Readable forms in the IR:
* `#tile.blocked<spt, tpw, wpb, order>` (size_per_thread, threads_per_warp,
  warps_per_block, order fastest-first), Triton-style;
* `#tile.slice<dim : i64, #tile.blocked<...>>`: a blocked parent with `dim`
  removed (what a reduction along `dim` leaves; replicated across that dim's threads).

Element (coords) of a tile with shape S under blocked(spt, tpw, wpb, order):
thread (lane, warp) holds, per dim d, `rep * C[d] + (tid_d * spt[d]) % min(S[d], C[d]) + e`
with `C = spt * tpw * wpb`, `rep < max(1, S[d] / C[d])`, `e < min(spt[d], S[d])`.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

Coord = tuple[int, ...]


def _log2(n: int) -> int:
    return n.bit_length() - 1


@dataclasses.dataclass(frozen=True)
class Blocked:
    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_block: tuple[int, ...]
    order: tuple[int, ...]            # dims, fastest varying first

    @property
    def rank(self) -> int:
        return len(self.order)

    @property
    def num_warps(self) -> int:
        n = 1
        for w in self.warps_per_block:
            n *= w
        return n

    def permuted(self, perm: Sequence[int]) -> "Blocked":
        """The layout of `permute(x, perm)` for x in this layout (no data movement)."""
        inv = {p: i for i, p in enumerate(perm)}
        return Blocked(tuple(self.size_per_thread[p] for p in perm),
                       tuple(self.threads_per_warp[p] for p in perm),
                       tuple(self.warps_per_block[p] for p in perm),
                       tuple(inv[d] for d in self.order))

    def with_unit_dim(self, dim: int) -> "Blocked":
        """This layout with a new size-1 dim inserted at `dim` (no threads along it)."""
        order = tuple(d + (d >= dim) for d in self.order) + (dim,)
        ins = lambda t: t[:dim] + (1,) + t[dim:]  # noqa: E731
        return Blocked(ins(self.size_per_thread), ins(self.threads_per_warp),
                       ins(self.warps_per_block), order)

    def attr(self) -> str:
        f = lambda t: "array<i64: " + ", ".join(map(str, t)) + ">"  # noqa: E731
        return (f"#tile.blocked<{f(self.size_per_thread)}, {f(self.threads_per_warp)}, "
                f"{f(self.warps_per_block)}, {f(self.order)}>")


@dataclasses.dataclass(frozen=True)
class Slice:
    dim: int
    parent: "Blocked"                 # or an mma_layouts.Mma: any distributed layout

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    @property
    def num_warps(self) -> int:
        return self.parent.num_warps

    def attr(self) -> str:
        return f"#tile.slice<{self.dim} : i64, {self.parent.attr()}>"


Layout = "Blocked | Slice | Mma | DotOperand | Shared"   # the latter three: mma_layouts


# ---------------------------------------------------------------------------
# Linear form
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Linear:
    """A layout over a concrete shape: basis coordinates per register/lane/warp bit.

    `regs` keeps only non-zero register bases (duplicates removed), so a thread
    holds `2 ** len(regs)` distinct elements, register r holding the sum of the
    bases of r's set bits, plus its lane and warp parts.
    """

    shape: tuple[int, ...]
    regs: tuple[Coord, ...]
    lanes: tuple[Coord, ...]          # 5 bases (32 lanes)
    warps: tuple[Coord, ...]          # log2(num_warps) bases

    @property
    def num_regs(self) -> int:
        return 1 << len(self.regs)

    @property
    def num_warps(self) -> int:
        return 1 << len(self.warps)

    def reg_coord(self, r: int) -> Coord:
        return _combine(self.regs, r, len(self.shape))

    def contiguous_regs(self, dim: int) -> int:
        """How many leading registers hold consecutive elements along `dim`."""
        n = 0
        for i, b in enumerate(self.regs):
            want = tuple((1 << i) if d == dim else 0 for d in range(len(self.shape)))
            if b != want:
                break
            n += 1
        return 1 << n


def _combine(bases: Sequence[Coord], bits: int, rank: int) -> Coord:
    out = [0] * rank
    i = 0
    while bits:
        if bits & 1:
            for d, v in enumerate(bases[i]):
                out[d] += v
        bits >>= 1
        i += 1
    return tuple(out)


def _unit(rank: int, dim: int, value: int) -> Coord:
    return tuple(value if d == dim else 0 for d in range(rank))


def _mask(basis: Coord, shape: Sequence[int]) -> Coord:
    # A coordinate bit at or above the dim's size wraps to zero (replication).
    return tuple(v if v < s else 0 for v, s in zip(basis, shape))


def blocked_linear(b: Blocked, shape: Sequence[int]) -> Linear:
    shape = tuple(shape)
    rank = len(shape)
    regs: list[Coord] = []
    # registers: element bits of every dim (fastest dim first), then repetition bits
    for d in b.order:
        for i in range(_log2(min(b.size_per_thread[d], shape[d]))):
            regs.append(_unit(rank, d, 1 << i))
    for d in b.order:
        cover = b.size_per_thread[d] * b.threads_per_warp[d] * b.warps_per_block[d]
        for i in range(_log2(max(1, shape[d] // cover))):
            regs.append(_unit(rank, d, cover << i))
    lanes: list[Coord] = []
    for d in b.order:
        for i in range(_log2(b.threads_per_warp[d])):
            lanes.append(_mask(_unit(rank, d, b.size_per_thread[d] << i), shape))
    warps: list[Coord] = []
    for d in b.order:
        step = b.size_per_thread[d] * b.threads_per_warp[d]
        for i in range(_log2(b.warps_per_block[d])):
            warps.append(_mask(_unit(rank, d, step << i), shape))
    return Linear(shape, tuple(regs), tuple(lanes), tuple(warps))


def drop_dim(lin: Linear, dim: int) -> Linear:
    """The layout of a reduction along `dim` (that dim's bases vanish)."""
    drop = lambda c: c[:dim] + c[dim + 1:]  # noqa: E731
    shape = drop(lin.shape)
    regs = tuple(drop(c) for c in lin.regs if c[dim] == 0)
    return Linear(shape, regs, tuple(drop(c) for c in lin.lanes),
                  tuple(drop(c) for c in lin.warps))


def to_linear(layout: Layout, shape: Sequence[int]) -> Linear:
    """The linear form of a distributed layout over `shape` (not of a shared one)."""
    if isinstance(layout, Slice):
        parent_shape = tuple(shape[:layout.dim]) + (1,) + tuple(shape[layout.dim:])
        return drop_dim(to_linear(layout.parent, parent_shape), layout.dim)
    if layout.rank != len(shape):
        raise ValueError(f"layout of rank {layout.rank} for a tile of shape {tuple(shape)}")
    if isinstance(layout, Blocked):
        return blocked_linear(layout, shape)
    if not hasattr(layout, "linear"):
        raise ValueError(f"{layout.attr()} is a shared-memory layout, not a distribution")
    return layout.linear(shape)


def restrict(lin: Linear, shape: Sequence[int]) -> Linear:
    """`lin` viewed on a smaller shape (dims shrunk to 1 for broadcasting sources)."""
    shape = tuple(shape)
    regs = tuple(m for m in (_mask(c, shape) for c in lin.regs) if any(m))
    return Linear(shape, regs, tuple(_mask(c, shape) for c in lin.lanes),
                  tuple(_mask(c, shape) for c in lin.warps))


# ---------------------------------------------------------------------------
# Choosing layouts
# ---------------------------------------------------------------------------
def coalesced(shape: Sequence[int], elem_bytes: int, num_warps: int,
              vector_bytes: int = 16) -> Blocked:
    """The layout for global accesses to a row-major tile: 16-byte vectors per thread
    along the last dim, lanes then warps filling the fastest dims first (warps prefer
    the slowest dims, so a warp's accesses stay contiguous)."""
    rank = len(shape)
    if rank == 0:
        raise ValueError("rank-0 tiles have no blocked layout")
    order = tuple(reversed(range(rank)))
    spt = [1] * rank
    spt[-1] = max(1, min(vector_bytes // elem_bytes, shape[-1]))
    tpw = [1] * rank
    lanes = 32
    for d in order:
        take = min(lanes, max(1, shape[d] // spt[d]))
        tpw[d] = take
        lanes //= take
    tpw[order[0]] *= lanes                        # leftover lanes replicate
    wpb = [1] * rank
    warps = num_warps
    for d in range(rank):                         # slowest dim first
        room = max(1, shape[d] // (spt[d] * tpw[d]))
        take = min(warps, room)
        wpb[d] = take
        warps //= take
    wpb[0] *= warps                               # leftover warps replicate
    return Blocked(tuple(spt), tuple(tpw), tuple(wpb), order)
