"""Tensor-core layouts: MMA accumulators, register operands, shared-memory tiles.

Three encodings join `#tile.blocked`/`#tile.slice` (tileir.backend.layout.layouts):

* `#tile.mma_acc<version : i64, array<i64: wm, wn>, array<i64: im, in>>` — the
  accumulator of a tensor-core product, `wm x wn` warps over (M, N).
  - version 2, instr (16, 8): `mma.sync.m16n8k16` fragments (sm_80).  Warp
    (i, j) owns the contiguous (M/wm) x (N/wn) block, tiled by 16 x 8
    instructions, N first.
  - version 3, instr (64, n): `wgmma.mma_async.m64nNk16` fragments (sm_90a).
    Four consecutive warps form a warpgroup owning a (M/(wm/4)) x (N/wn) block,
    tiled by 64 x n instructions, N first; warp w of a group owns rows 16w..16w+15
    of each instruction.
  Both are linear layouts: a thread's register r of instruction t holds
  d[r] of the PTX fragment (bit 0: column + 1, bit 1: row + 8, higher bits:
  column + 8, 16, ...), so element-wise ops, reductions and conversions work on
  them like on any distributed layout.
  With leading 1s in both arrays (`array<i64: 1, wm, wn>, array<i64: 1, im, in>`)
  it is the same accumulator with leading unit dims (`lead`): a batched product's
  (1, M, N) tile reshaped from its (M, N) accumulator, in the same registers.
* `#tile.mma_operand<index : i64, #tile.mma_acc<...>, kwidth : i64>` — operand A
  (index 0, M x K) or B (index 1, K x N) of that product held in registers, in
  the fragment order of `mma.sync` (A, B) or of wgmma's register A operand;
  kwidth is the K elements one 32-bit register holds (2 for 16-bit types: k16
  fragments; 1 for tf32: mma.sync.m16n8k8).  Warps that do not partition the
  operand's rows hold replicas.
* `#tile.shared<swizzle : i64, array<i64: order...>>` — a tile in shared memory,
  not in registers.  The fastest dim (`order[0]`) is cut into boxes of
  `swizzle` bytes (the whole dim when 0); boxes follow each other, each one row
  after row; inside a box the 16-byte chunks of row r are permuted by
  `chunk ^ ((r * swizzle / 128) % (swizzle / 16))` — the TMA/wgmma 32/64/128-byte
  swizzles (address bits [4, 4+b) xor bits [7, 7+b)).  Boxes start at multiples
  of 1024 bytes (a swizzle period).
"""

from __future__ import annotations

import dataclasses
import math
import re

from tileir.dialect.types import bitwidth
from .layouts import Coord, Linear, _log2, restrict

LANES_V2 = ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))      # accumulator / A fragment lanes
LANES_V2_B = ((2, 0), (4, 0), (0, 1), (0, 2), (0, 4))    # B fragment lanes (k, n)
LANES_TF32_A = ((0, 1), (0, 2), (1, 0), (2, 0), (4, 0))  # tf32 (m16n8k8) A lanes (m, k)
LANES_TF32_B = ((1, 0), (2, 0), (0, 1), (0, 2), (0, 4))  # tf32 B lanes (k, n)
SWIZZLES = (0, 32, 64, 128)
TMA_MAX_BOX = 256            # a TMA box spans at most 256 elements along each dim


@dataclasses.dataclass(frozen=True)
class Mma:
    version: int                 # 2: mma.sync (sm_80), 3: wgmma (sm_90a)
    warps: tuple[int, int]       # warps along M and N
    instr: tuple[int, int]       # (m, n) of one instruction
    # unit dims before M and N: the (1, M, N) tile of a batched product (a reshape of
    # the accumulator that only adds them moves no data)
    lead: int = 0

    @property
    def rank(self) -> int:
        return 2 + self.lead

    def with_lead(self, lead: int) -> "Mma":
        """This accumulator layout with `lead` leading unit dims."""
        return dataclasses.replace(self, lead=lead)

    @property
    def num_warps(self) -> int:
        return self.warps[0] * self.warps[1]

    @property
    def groups(self) -> tuple[int, int]:
        """Units along (M, N) that own a block: warps (v2) or warpgroups (v3)."""
        wm, wn = self.warps
        return (wm // 4, wn) if self.version == 3 else (wm, wn)

    def block(self, shape) -> tuple[int, int]:
        """Rows and columns of the block one warp (v2) or warpgroup (v3) owns."""
        gm, gn = self.groups
        return shape[-2] // gm, shape[-1] // gn

    def reps(self, shape) -> tuple[int, int]:
        """Instructions along M and N inside one block."""
        bm, bn = self.block(shape)
        return bm // self.instr[0], bn // self.instr[1]

    def attr(self) -> str:
        one = "1, " * self.lead
        return (f"#tile.mma_acc<{self.version} : i64, array<i64: {one}{self.warps[0]}, "
                f"{self.warps[1]}>, array<i64: {one}{self.instr[0]}, {self.instr[1]}>>")

    def coverage(self) -> tuple[int, int]:
        """The smallest tile one instruction per block covers."""
        gm, gn = self.groups
        return self.instr[0] * gm, self.instr[1] * gn

    def linear(self, shape) -> Linear:
        """The linear form over `shape`; a tile smaller than the layout's coverage
        (a (64, 1) column of row values, say) holds the elements the covering tile
        would at those coordinates, replicated across the threads of the rest."""
        shape = tuple(shape)
        if self.lead:
            if len(shape) != self.rank or any(d != 1 for d in shape[:self.lead]):
                raise ValueError(f"{self.attr()} needs a tile of shape (1, ..., M, N) of "
                                 f"rank {self.rank}, got {list(shape)}")
            lin = self.with_lead(0).linear(shape[self.lead:])
            pad = lambda c: (0,) * self.lead + c  # noqa: E731
            return Linear(shape, tuple(map(pad, lin.regs)), tuple(map(pad, lin.lanes)),
                          tuple(map(pad, lin.warps)))
        cov = tuple(max(s, c) for s, c in zip(shape, self.coverage()))
        if cov != shape:
            return restrict(self._linear(cov), shape)
        return self._linear(shape)

    def _linear(self, shape) -> Linear:
        bm, bn = self.block(shape)
        im, inn = self.instr
        regs: list[Coord] = [(0, 1), (8, 0)]
        regs += [(0, 8 << i) for i in range(_log2(inn // 8))]      # within one instruction
        regs += [(0, inn << i) for i in range(_log2(bn // inn))]   # instruction reps along N
        regs += [(im << i, 0) for i in range(_log2(bm // im))]     # then along M
        warps: list[Coord] = [(16, 0), (32, 0)] if self.version == 3 else []
        gm, gn = self.groups
        warps += [(bm << i, 0) for i in range(_log2(gm))]
        warps += [(0, bn << i) for i in range(_log2(gn))]
        return Linear(shape, tuple(regs), LANES_V2, tuple(warps))

    def instr_regs(self) -> int:
        """Accumulator registers of one instruction per thread."""
        return self.instr[0] * self.instr[1] // (128 if self.version == 3 else 32)

    def check(self, shape, elem_bits: int = 32) -> str | None:
        """Why this layout cannot hold an accumulator of `shape`, or None."""
        if len(shape) != self.rank or any(d != 1 for d in shape[:self.lead]):
            return (f"an mma layout needs a 2-d tile{' after leading unit dims' * bool(self.lead)}"
                    f", got shape {list(shape)}")
        shape = tuple(shape)[self.lead:]
        msg = verify_mma(self)
        if msg:
            return msg
        bm, bn = self.block(shape)
        gm, gn = self.groups
        if shape[0] % gm or shape[1] % gn or bm % self.instr[0] or bn % self.instr[1]:
            return (f"tile {list(shape)} does not split into {gm} x {gn} blocks of whole "
                    f"{self.instr[0]} x {self.instr[1]} instructions")
        return None


def verify_mma(m: Mma) -> str | None:
    wm, wn = m.warps
    if any(w < 1 or w & (w - 1) for w in m.warps):
        return f"warps {list(m.warps)} must be powers of two"
    if m.version == 2:
        if m.instr != (16, 8):
            return f"version 2 (mma.sync) has instruction shape [16, 8], not {list(m.instr)}"
    elif m.version == 3:
        if wm % 4:
            return f"version 3 (wgmma) needs whole warpgroups along M: warps {list(m.warps)}"
        if m.instr[0] != 64 or not (8 <= m.instr[1] <= 256 and m.instr[1] % 8 == 0) \
                or m.instr[1] & (m.instr[1] - 1):
            return (f"version 3 (wgmma) has instruction shape [64, n] with n a power of two "
                    f"in 8..256, not {list(m.instr)}")
    else:
        return f"mma version {m.version} is not 2 (mma.sync) or 3 (wgmma)"
    if wm * wn > 32:
        return f"{wm * wn} warps exceed the 1024-thread block limit"
    return None


@dataclasses.dataclass(frozen=True)
class DotOperand:
    index: int                   # 0: A (M x K), 1: B (K x N)
    parent: Mma
    # elements of K one 32-bit register holds: 2 for 16-bit types (k16 fragments),
    # 1 for tf32 (m16n8k8: the same lanes, K counted in 32-bit words)
    kwidth: int = 2

    rank = 2

    @property
    def num_warps(self) -> int:
        return self.parent.num_warps

    @property
    def k_step(self) -> int:
        """K of one instruction's fragment."""
        return 8 * self.kwidth

    def attr(self) -> str:
        return f"#tile.mma_operand<{self.index} : i64, {self.parent.attr()}, {self.kwidth} : i64>"

    def linear(self, shape) -> Linear:
        """Registers of one k step come first (the fragment), then k steps, then the
        M (A) or N (B) instruction reps of the warp's block.  The fragments are the
        PTX ISA's: A (kwidth 2) a0..a3 = pairs at (g, 2t), (g + 8, 2t), (g, 2t + 8),
        (g + 8, 2t + 8); A (kwidth 1, tf32) a0..a3 at (g, t), (g + 8, t), (g, t + 4),
        (g + 8, t + 4); B (kwidth 2) pairs at (2t, g), (2t + 8, g); B (kwidth 1)
        at (t, g), (t + 4, g) (g = lane / 4, t = lane % 4)."""
        shape = tuple(shape)
        p = self.parent
        gm, gn = p.groups
        step = self.k_step
        word = (0, 1) if self.kwidth == 2 else None        # the pair within a register
        if self.index == 0:
            m, k = shape
            bm = m // gm
            im = p.instr[0]
            regs: list[Coord] = ([word] if word else []) + [(8, 0), (0, step // 2)]
            regs += [(0, step << i) for i in range(_log2(k // step))]
            regs += [(im << i, 0) for i in range(_log2(bm // im))]
            warps: list[Coord] = [(16, 0), (32, 0)] if p.version == 3 else []
            warps += [(bm << i, 0) for i in range(_log2(gm))]
            warps += [(0, 0)] * _log2(gn)
            lanes = LANES_V2 if word else LANES_TF32_A
            return Linear(shape, tuple(regs), lanes, tuple(warps))
        if p.version == 3:
            raise ValueError("wgmma reads operand B from shared memory only")
        k, n = shape
        bn = n // gn
        regs = ([(1, 0)] if word else []) + [(step // 2, 0)]
        regs += [(step << i, 0) for i in range(_log2(k // step))]
        regs += [(0, 8 << i) for i in range(_log2(bn // 8))]
        warps = [(0, 0)] * _log2(gm) + [(0, bn << i) for i in range(_log2(gn))]
        return Linear(shape, tuple(regs), LANES_V2_B if word else LANES_TF32_B, tuple(warps))


@dataclasses.dataclass(frozen=True)
class Shared:
    swizzle: int                 # bytes: 0 (none), 32, 64, 128
    order: tuple[int, ...]       # dims, fastest first

    @property
    def rank(self) -> int:
        return len(self.order)

    def attr(self) -> str:
        return (f"#tile.shared<{self.swizzle} : i64, array<i64: "
                f"{', '.join(map(str, self.order))}>>")

    def permuted(self, perm) -> "Shared":
        """The layout of `permute(x, perm)` for x in this layout (same bytes)."""
        inv = {p: i for i, p in enumerate(perm)}
        return Shared(self.swizzle, tuple(inv[d] for d in self.order))

    def without_dim(self, dim: int) -> "Shared":
        """The layout after a reshape drops unit dim `dim` (the same bytes)."""
        return Shared(self.swizzle, tuple(d - (d > dim) for d in self.order if d != dim))

    def with_unit_dim(self, dim: int) -> "Shared":
        """The layout after a reshape inserts a unit dim at `dim` (the same bytes)."""
        return Shared(self.swizzle, tuple(d + (d >= dim) for d in self.order) + (dim,))

    def box_elems(self, shape, elem_bytes: int) -> int:
        """Elements of the fastest dim per box."""
        inner = shape[self.order[0]]
        return inner if self.swizzle == 0 else min(inner, self.swizzle // elem_bytes)

    def row_bytes(self, shape, elem_bytes: int) -> int:
        return self.box_elems(shape, elem_bytes) * elem_bytes

    def box_bytes(self, shape, elem_bytes: int) -> int:
        """Bytes of one box: all the other dims' elements times one box row."""
        rows = math.prod(shape) // shape[self.order[0]]
        return _round_up(rows * self.row_bytes(shape, elem_bytes), 1024 if self.swizzle else 16)

    def num_boxes(self, shape, elem_bytes: int) -> int:
        return shape[self.order[0]] // self.box_elems(shape, elem_bytes)

    def size_bytes(self, shape, elem_bytes: int) -> int:
        return self.num_boxes(shape, elem_bytes) * self.box_bytes(shape, elem_bytes)

    def offset(self, coord, shape, elem_bytes: int) -> int:
        """Byte offset of element `coord` (the reference the lowering and tests share)."""
        inner = self.order[0]
        w = self.box_elems(shape, elem_bytes)
        row = 0
        for d in reversed(self.order[1:]):          # slowest dim first
            row = row * shape[d] + coord[d]
        c = coord[inner]
        off = row * w * elem_bytes + (c % w) * elem_bytes
        return (c // w) * self.box_bytes(shape, elem_bytes) + swizzle_bits(off, self.swizzle)


def smem_tile_bytes(layout: Shared, shape, elem) -> int:
    """Bytes of a tile of MLIR element type `elem` in shared-memory layout `layout`."""
    return layout.size_bytes(tuple(shape), max(1, bitwidth(elem) // 8))


def tile_bytes(shape, elem) -> int:
    """Bytes of a tile's elements (no layout's padding)."""
    n = max(1, bitwidth(elem) // 8)
    for d in shape:
        n *= d
    return n


def tma_box(lay: Shared, shape, eb: int) -> tuple[int, ...]:
    """The TMA box of one copy, in tile dim order: the tile, its fastest dim cut to one
    swizzle row."""
    box = list(shape)
    box[lay.order[0]] = lay.box_elems(shape, eb)
    return tuple(box)


def tma_clip_dim(lay: Shared, shape) -> int | None:
    """The tile dim a TMA box may be cut short along (`runtime.tensor_maps.clipped_box`):
    the slowest dim longer than 1, so that the rows the cut box leaves out are the
    end of each box's shared memory; None when only the fastest dim is longer than 1."""
    for d in reversed(lay.order[1:]):
        if shape[d] > 1:
            return d
    return None


def swizzle_bits(offset: int, swizzle: int) -> int:
    """Address bits [4, 4+b) xor bits [7, 7+b), b = log2(swizzle / 16)."""
    if swizzle == 0:
        return offset
    b = _log2(swizzle // 16)
    mask = (1 << b) - 1
    return offset ^ (((offset >> 7) & mask) << 4)


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def choose_swizzle(inner_bytes: int) -> int:
    """The widest swizzle whose 16-byte chunks fit in one row of `inner_bytes`."""
    for s in (128, 64, 32):
        if inner_bytes >= s:
            return s
    return 0


def verify_shared(s: Shared) -> str | None:
    if s.swizzle not in SWIZZLES:
        return f"swizzle {s.swizzle} is not one of {', '.join(map(str, SWIZZLES))} bytes"
    if sorted(s.order) != list(range(len(s.order))):
        return f"order {list(s.order)} is not a permutation of 0..{len(s.order) - 1}"
    return None


# ---------------------------------------------------------------------------
# Printed forms
# ---------------------------------------------------------------------------
_A = r"array<i64(?::\s*([-\d,\s]*))?>"
_MMA_RE = re.compile(r"#tile\.mma_acc<(\d+) : i64,\s*" + _A + r",\s*" + _A + r">")
_DOT_RE = re.compile(r"#tile\.mma_operand<(\d+) : i64,\s*(#tile\.mma_acc<.*?>>),"
                     r"\s*(\d+) : i64>$")
_SHARED_RE = re.compile(r"#tile\.shared<(\d+) : i64,\s*" + _A + r">$")


def _ints(s: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in s.split(",")) if s and s.strip() else ()


def parse(text: str):
    """An Mma, DotOperand or Shared from its printed form, or None if `text` is none."""
    m = _MMA_RE.fullmatch(text)
    if m:
        warps, instr = _ints(m.group(2)), _ints(m.group(3))
        lead = len(warps) - 2
        if lead < 0 or len(instr) != len(warps) or any(v != 1 for v in warps[:lead] +
                                                          instr[:lead]):
            raise ValueError(f"malformed mma layout {text}: warps and instr take 2 entries "
                             f"(after as many leading 1s, for leading unit dims)")
        return Mma(int(m.group(1)), warps[lead:], instr[lead:], lead)
    m = _DOT_RE.match(text)
    if m:
        return DotOperand(int(m.group(1)), parse(m.group(2)), int(m.group(3)))
    m = _SHARED_RE.match(text)
    if m:
        return Shared(int(m.group(1)), _ints(m.group(2)))
    return None


def verify(layout) -> str | None:
    if isinstance(layout, Mma):
        return verify_mma(layout)
    if isinstance(layout, DotOperand):
        if layout.index not in (0, 1):
            return f"dot operand index {layout.index} is not 0 (A) or 1 (B)"
        if layout.index == 1 and layout.parent.version == 3:
            return "wgmma (mma version 3) reads operand B from shared memory, not registers"
        if layout.kwidth not in (1, 2):
            return f"dot operand kwidth {layout.kwidth} is not 1 (tf32) or 2 (16-bit types)"
        if layout.kwidth == 1 and layout.parent.version != 2:
            return "kwidth 1 (tf32 fragments in registers) is an mma.sync (version 2) layout"
        return verify_mma(layout.parent)
    if isinstance(layout, Shared):
        return verify_shared(layout)
    return None


def check_operand(op: DotOperand, shape) -> str | None:
    """Why a register operand of `shape` cannot have layout `op`, or None."""
    p = op.parent
    k_step = op.k_step
    gm, gn = p.groups
    if op.index == 0:
        m, k = shape
        if m % (gm * p.instr[0]) or k % k_step:
            return f"operand A {list(shape)} does not split into whole fragments of {p.attr()}"
    else:
        k, n = shape
        if n % (gn * 8) or k % k_step:
            return f"operand B {list(shape)} does not split into whole fragments of {p.attr()}"
    return None


__all__ = ["Mma", "DotOperand", "Shared", "swizzle_bits", "choose_swizzle", "parse", "verify",
           "check_operand"]
