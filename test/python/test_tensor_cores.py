"""CPU tests of the tensor-core path: layouts, swizzles, descriptors, the pipeline
stage, compiled GEMMs' SASS, and the TMA runtime's arguments.

The fragment and shared-memory models below are written from the PTX ISA's
descriptions (register fragments of mma.m16n8k16 and wgmma.m64nNk16, the
32/64/128-byte swizzle modes, the canonical K-major and MN-major layouts a wgmma
descriptor names), independently of the lowering's code, and the lowering's
layouts must agree with them element by element.
"""

from __future__ import annotations

import collections
import ctypes
import os
import re

import ml_dtypes
import numpy as np
import pytest
from conftest import sass_text

import tileir as ct
from tileir.backend.layout.mma_layouts import DotOperand, Mma, Shared, swizzle_bits
from tileir.dialect import TileIRError
from tileir.interpreter import InterpreterError
from tileir.kernel import spill_bytes
from tileir.runtime import tensor_maps
from tileir.runtime.arrays import DeviceArrayInfo

BF16 = ml_dtypes.bfloat16


@ct.kernel
def gemm(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, j), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gemm_nt(a, w, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """C = A @ W^T with W stored (N, K), the way a linear layer holds its weight."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tw = ct.load(w, index=(j, k), shape=(BN, BK), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, ct.transpose(tw), acc)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gemm_nt_fast_acc(a, w, c, BM: ct.Constant[int], BN: ct.Constant[int],
                     BK: ct.Constant[int]):
    """gemm_nt with fp8 products summed on the tensor cores across the K loop (cuTile's
    `use_fast_acc=True`)."""
    acc = accumulate_awt(a, w, ct.zeros((BM, BN), dtype=ct.float32), ct.bid(0), ct.bid(1),
                         BM, BN, BK, True)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, c.dtype))


@ct.function
def accumulate_ab(a, b, acc, i, j, trips, BM, BN, BK):
    """acc + A[i, :trips] @ B[:trips, j] in (BM, BK) x (BK, BN) tiles: the K loop of the
    test kernels below that vary what surrounds it."""
    for k in range(trips):
        ta = ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, j), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    return acc


@ct.function
def accumulate_awt(a, w, acc, i, j, BM, BN, BK, fast=False):
    """acc + A[i] @ W[j]^T over all of K, in (BM, BK) x (BN, BK) tiles (W held as (N, K));
    `fast`: mma's use_fast_acc."""
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tw = ct.load(w, index=(j, k), shape=(BN, BK), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, ct.transpose(tw), acc, use_fast_acc=fast)
    return acc


@ct.kernel
def gemm_f16_acc(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """The plain GEMM into a float16 accumulator (f16 or fp8 operands, as cuTile allows)."""
    acc = ct.zeros((BM, BN), dtype=ct.float16)
    acc = accumulate_ab(a, b, acc, ct.bid(0), ct.bid(1),
                        ct.num_tiles(a, axis=1, shape=(BM, BK)), BM, BN, BK)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=acc)


@ct.kernel
def lower_gemm(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """C = tril-blocked(A) @ B: tile row i sums K tiles 0..i (BM == BK), so every tile
    row has its own trip count (1, 2, 3, ...)."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = accumulate_ab(a, b, ct.zeros((BM, BN), dtype=ct.float32), i, j, i + 1, BM, BN, BK)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel
def scaled_gemm(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """C = (2 A) @ B: operand A is computed in registers (a register fragment of the
    product's layout, not a shared tile)."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, j), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta * 2.0, tb, acc)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel
def row_logsumexp(x, out, TM: ct.Constant[int], C: ct.Constant[int]):
    """log(sum(exp(x))) of each row, C columns at a time (an online max and sum):
    the loop's loads go to registers."""
    i = ct.bid(0)
    m = ct.full((TM,), -1e30, dtype=ct.float32)
    s = ct.zeros((TM,), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(TM, C))):
        t = ct.load(x, index=(i, k), shape=(TM, C), padding_mode=ct.PaddingMode.NEG_INF)
        m_new = ct.maximum(m, ct.max(t, axis=1))
        s = s * ct.exp(m - m_new) + ct.sum(ct.exp(t - ct.reshape(m_new, (TM, 1))), axis=1)
        m = m_new
    ct.store(out, index=(i,), tile=m + ct.log(s))


@ct.kernel
def gemm_accumulate(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int],
                    BK: ct.Constant[int]):
    """C += A @ B: the output is also an input."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.astype(ct.load(c, index=(i, j), shape=(BM, BN), padding_mode=ct.PaddingMode.ZERO),
                    ct.float32)
    acc = accumulate_ab(a, b, acc, i, j, ct.num_tiles(a, axis=1, shape=(BM, BK)), BM, BN, BK)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel
def linear_silu(x, w, bias, y, alpha: float, BM: ct.Constant[int], BN: ct.Constant[int],
                BK: ct.Constant[int]):
    """y = silu(alpha * x @ w^T + bias): an epilogue fused after the K loop."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(BM, BK))):
        tx = ct.load(x, index=(i, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tw = ct.load(w, index=(j, k), shape=(BN, BK), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(tx, ct.transpose(tw), acc)
    b = ct.load(bias, index=(j,), shape=(BN,), padding_mode=ct.PaddingMode.ZERO)
    h = acc * alpha + ct.astype(ct.reshape(b, (1, BN)), ct.float32)
    ct.store(y, index=(i, j), tile=ct.astype(h / (1.0 + ct.exp(-h)), y.dtype))


@ct.kernel
def bgemm(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """Batched: C[z] = A[z] @ B[z], the batch index from the third grid axis."""
    i = ct.bid(0)
    j = ct.bid(1)
    z = ct.bid(2)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=2, shape=(1, BM, BK))):
        ta = ct.load(a, index=(z, i, k), shape=(1, BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(z, k, j), shape=(1, BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ct.reshape(ta, (BM, BK)), ct.reshape(tb, (BK, BN)), acc)
    ct.store(c, index=(z, i, j), tile=ct.reshape(ct.astype(acc, c.dtype), (1, BM, BN)))


@ct.kernel
def attention(q, k, v, o, scale: float, BM: ct.Constant[int], BN: ct.Constant[int],
              D: ct.Constant[int]):
    """Flash-style attention of one BM-row query block over the whole sequence: an mma
    in a loop with other work (an online softmax), and P @ V with P computed in
    registers."""
    i = ct.bid(0)
    tq = ct.load(q, index=(i, 0), shape=(BM, D), padding_mode=ct.PaddingMode.ZERO)
    m = ct.full((BM, 1), -1e30, dtype=ct.float32)
    l = ct.zeros((BM, 1), dtype=ct.float32)
    acc = ct.zeros((BM, D), dtype=ct.float32)
    for j in range(ct.num_tiles(k, axis=0, shape=(BN, D))):
        tk = ct.load(k, index=(j, 0), shape=(BN, D), padding_mode=ct.PaddingMode.ZERO)
        s = ct.mma(tq, ct.transpose(tk), ct.zeros((BM, BN), dtype=ct.float32)) * scale
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp(s - m_new)
        alpha = ct.exp(m - m_new)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        tv = ct.load(v, index=(j, 0), shape=(BN, D), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ct.astype(p, ct.bfloat16), tv, acc * alpha)
        m = m_new
    ct.store(o, index=(i, 0), tile=ct.astype(acc / l, o.dtype))


# ---------------------------------------------------------------------------
# Register fragments, from the PTX ISA
# ---------------------------------------------------------------------------
def _owners(lin) -> dict[tuple, set]:
    """coordinate -> {(warp, lane, register)} of a linear layout: a hardware index's
    coordinate is the sum of the bases of its set bits, the lane's, the warp's and the
    register's (each part summed once per index, not once per element)."""
    def coords(n: int, bases) -> list[tuple]:
        out = []
        for bits in range(n):
            c = [0] * len(lin.shape)
            for i, b in enumerate(bases):
                if bits >> i & 1:
                    c = [x + y for x, y in zip(c, b)]
            out.append(tuple(c))
        return out

    lanes, warps, regs = (coords(32, lin.lanes), coords(lin.num_warps, lin.warps),
                          coords(lin.num_regs, lin.regs))
    out = collections.defaultdict(set)
    for w, cw in enumerate(warps):
        for lane, cl in enumerate(lanes):
            base = [x + y for x, y in zip(cw, cl)]
            for r, cr in enumerate(regs):
                out[tuple(x + y for x, y in zip(base, cr))].add((w, lane, r))
    return out


def _ptx_accumulator(m: Mma, shape) -> dict:
    """(warp, lane, register) -> element, from the PTX fragment figures."""
    out = {}
    rm, rn = m.reps(shape)
    bm, bn = m.block(shape)
    gm, gn = m.groups
    im, inn = m.instr
    per = m.instr_regs()
    for w in range(m.num_warps):
        unit = w // 4 if m.version == 3 else w
        gi, gj = unit % gm, unit // gm
        for lane in range(32):
            g, q = lane // 4, lane % 4
            for mi in range(rm):
                for ni in range(rn):
                    for i in range(per):
                        if m.version == 3:    # wgmma .m64nNk16 accumulator D
                            row = 16 * (w % 4) + g + 8 * ((i // 2) % 2)
                            col = 8 * (i // 4) + 2 * q + i % 2
                        else:                 # mma .m16n8k16 accumulator C/D
                            row = g + 8 * (i // 2)
                            col = 2 * q + i % 2
                        r = (ni + mi * rn) * per + i
                        out[(w, lane, r)] = (gi * bm + mi * im + row, gj * bn + ni * inn + col)
    return out


@ct.kernel
def batched_tiles(a, b, c, NB: ct.Constant[int], BM: ct.Constant[int], BN: ct.Constant[int],
                  BK: ct.Constant[int]):
    """A 3-d (batched) mma of (NB, BM, BK) x (NB, BK, BN) tiles."""
    i = ct.bid(0)
    acc = ct.zeros((NB, BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=2, shape=(NB, BM, BK))):
        ta = ct.load(a, index=(0, i, k), shape=(NB, BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(0, k, 0), shape=(NB, BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(0, i, 0), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gemm_i32(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """An integer GEMM into an int32 accumulator (int8 or uint8 operands)."""
    acc = accumulate_ab(a, b, ct.zeros((BM, BN), dtype=ct.int32), ct.bid(0), ct.bid(1),
                        ct.num_tiles(a, axis=1, shape=(BM, BK)), BM, BN, BK)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=acc)


@ct.kernel
def gemm_widened_a(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """f16 A widened to f32 in registers, times f32 B (mma does not promote: cuTile's)."""
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, j), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ct.astype(ta, ct.float32), tb, acc)
    ct.store(c, index=(i, j), tile=acc)


@pytest.mark.parametrize("m,shape", [
    (Mma(2, (2, 4), (16, 8)), (128, 128)),
    (Mma(2, (1, 1), (16, 8)), (16, 8)),
    (Mma(2, (4, 2), (16, 8)), (128, 64)),
    (Mma(3, (4, 1), (64, 64)), (64, 64)),
    (Mma(3, (8, 1), (64, 128)), (128, 128)),
    (Mma(3, (4, 2), (64, 64)), (128, 128)),
    (Mma(3, (8, 1), (64, 256)), (128, 256)),
])
def test_accumulator_layouts_are_the_ptx_fragments(m, shape):
    lin = m.linear(shape)
    owners = _owners(lin)
    assert sorted(owners) == sorted(np.ndindex(*shape))       # every element, once
    assert all(len(v) == 1 for v in owners.values())
    want = _ptx_accumulator(m, shape)
    got = {t: c for c, ts in owners.items() for t in ts}
    assert got == want


def _ptx_operand(op: DotOperand, shape) -> dict:
    """(warp, lane, register) -> element of an A (m16k16) or B (k16n8) fragment, or with
    kwidth 1 of a tf32 A (m16k8) or B (k8n8) fragment (PTX ISA, mma.m16n8k8)."""
    if op.kwidth == 1:
        return _ptx_operand_tf32(op, shape)
    p = op.parent
    gm, gn = p.groups
    out = {}
    for w in range(p.num_warps):
        unit = w // 4 if p.version == 3 else w
        gi, gj = unit % gm, unit // gm
        for lane in range(32):
            g, q = lane // 4, lane % 4
            if op.index == 0:
                m, k = shape
                bm = m // gm
                rows0 = gi * bm + (16 * (w % 4) if p.version == 3 else 0)
                reps_m = bm // p.instr[0]
                for mi in range(reps_m):
                    for kk in range(k // 16):
                        for i in range(8):
                            row = g + 8 * ((i // 2) % 2)
                            col = 2 * q + i % 2 + 8 * (i // 4)
                            r = (kk + mi * (k // 16)) * 8 + i
                            out[(w, lane, r)] = (rows0 + mi * p.instr[0] + row, kk * 16 + col)
            else:
                k, n = shape
                bn = n // gn
                for ni in range(bn // 8):
                    for kk in range(k // 16):
                        for i in range(4):
                            r = (kk + ni * (k // 16)) * 4 + i
                            out[(w, lane, r)] = (kk * 16 + 2 * q + i % 2 + 8 * (i // 2),
                                                 gj * bn + ni * 8 + g)
    return out


def _ptx_operand_tf32(op: DotOperand, shape) -> dict:
    p = op.parent
    gm, gn = p.groups
    out = {}
    for w in range(p.num_warps):
        gi, gj = w % gm, w // gm
        for lane in range(32):
            g, q = lane // 4, lane % 4
            if op.index == 0:            # a0..a3: (g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4)
                m, k = shape
                bm = m // gm
                for mi in range(bm // 16):
                    for kk in range(k // 8):
                        for i in range(4):
                            r = (kk + mi * (k // 8)) * 4 + i
                            out[(w, lane, r)] = (gi * bm + mi * 16 + g + 8 * (i % 2),
                                                 kk * 8 + q + 4 * (i // 2))
            else:                        # b0, b1: (q, g), (q + 4, g)
                k, n = shape
                bn = n // gn
                for ni in range(bn // 8):
                    for kk in range(k // 8):
                        for i in range(2):
                            r = (kk + ni * (k // 8)) * 2 + i
                            out[(w, lane, r)] = (kk * 8 + q + 4 * i, gj * bn + ni * 8 + g)
    return out


@pytest.mark.parametrize("op,shape", [
    (DotOperand(0, Mma(2, (2, 4), (16, 8)), 1), (128, 32)),     # tf32
    (DotOperand(1, Mma(2, (2, 4), (16, 8)), 1), (32, 128)),
    (DotOperand(0, Mma(2, (1, 1), (16, 8)), 1), (16, 8)),
    (DotOperand(1, Mma(2, (1, 2), (16, 8)), 1), (8, 16)),
    (DotOperand(0, Mma(2, (2, 4), (16, 8))), (128, 64)),
    (DotOperand(1, Mma(2, (2, 4), (16, 8))), (64, 128)),
    (DotOperand(0, Mma(2, (1, 1), (16, 8))), (16, 16)),
    (DotOperand(1, Mma(2, (1, 2), (16, 8))), (32, 16)),
    (DotOperand(0, Mma(3, (4, 1), (64, 64))), (64, 32)),
    (DotOperand(0, Mma(3, (8, 1), (64, 128))), (128, 64)),
])
def test_operand_layouts_are_the_ptx_fragments(op, shape):
    lin = op.linear(shape)
    owners = _owners(lin)
    assert sorted(owners) == sorted(np.ndindex(*shape))
    got = {t: c for c, ts in owners.items() for t in ts}
    assert got == _ptx_operand(op, shape)


def test_operand_layouts_print_and_parse_with_their_kwidth():
    from tileir.backend.layout import mma_layouts
    acc = Mma(2, (2, 4), (16, 8))
    for op in (DotOperand(0, acc), DotOperand(1, acc, 1)):
        assert mma_layouts.parse(op.attr()) == op
        assert mma_layouts.verify(op) is None
    assert DotOperand(0, acc).attr() == f"#tile.mma_operand<0 : i64, {acc.attr()}, 2 : i64>"
    assert DotOperand(1, acc, 1).attr() == f"#tile.mma_operand<1 : i64, {acc.attr()}, 1 : i64>"
    assert "kwidth 3" in mma_layouts.verify(DotOperand(0, acc, 3))
    assert "mma.sync" in mma_layouts.verify(DotOperand(0, Mma(3, (4, 1), (64, 64)), 1))


# ---------------------------------------------------------------------------
# Shared memory: the TMA swizzle modes and the wgmma canonical layouts
# ---------------------------------------------------------------------------
def _tma_offset(coord, shape, elem_bytes, swizzle, inner_dim):
    """Where TMA writes element `coord` of a row-major 2-d tile copied box by box:
    boxes of `swizzle` bytes of the inner dim, rows of a box `swizzle` bytes apart,
    16-byte chunk c of row r at chunk c ^ (r / (128 / swizzle) mod (swizzle / 16))."""
    rows = shape[1 - inner_dim]
    w = swizzle // elem_bytes
    r, c = coord[1 - inner_dim], coord[inner_dim]
    box, c = divmod(c, w)
    chunk, byte = divmod(c * elem_bytes, 16)
    period = 128 // swizzle
    chunk ^= (r // period) % (swizzle // 16)
    box_bytes = max(1024, rows * swizzle)
    return box * box_bytes + r * swizzle + chunk * 16 + byte


@pytest.mark.parametrize("swizzle", [32, 64, 128])
@pytest.mark.parametrize("shape,inner,eb", [((64, 64), 1, 2), ((64, 128), 1, 2),
                                            ((128, 64), 0, 2), ((32, 128), 1, 1),
                                            ((64, 32), 1, 4)])
def test_shared_layouts_are_the_tma_swizzles(swizzle, shape, inner, eb):
    if shape[inner] * eb < swizzle:
        pytest.skip("the inner dim is narrower than the swizzle")
    lay = Shared(swizzle, (inner, 1 - inner))
    seen = set()
    for coord in np.ndindex(*shape):
        off = lay.offset(coord, shape, eb)
        assert off == _tma_offset(coord, shape, eb, swizzle, inner), coord
        seen.add(off // eb)
    assert len(seen) == shape[0] * shape[1]                      # no two elements collide
    assert max(seen) * eb < lay.size_bytes(shape, eb)


def test_swizzle_is_an_xor_of_address_bits():
    assert swizzle_bits(0x80, 128) == 0x90          # row 1: chunk 0 -> 1
    assert swizzle_bits(0x380 + 0x10, 128) == 0x380 + 0x60   # row 7, chunk 1 -> 6
    assert swizzle_bits(0x100, 64) == 0x120         # row 4 of 64-byte rows: chunk ^ 2
    assert swizzle_bits(0x80, 32) == 0x90
    assert swizzle_bits(0x1234, 0) == 0x1234


def _desc_fields(desc: int) -> dict:
    return {"start": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4,
            "sbo": ((desc >> 32) & 0x3FFF) << 4, "swizzle": desc >> 62}


def _canonical(desc: int, mn: int, k: int, k_major: bool, eb: int) -> int:
    """The byte a wgmma reads for element (mn, k) of the 64 x k-step (or N x k-step)
    sub-matrix a descriptor names, in the canonical layouts of the PTX ISA: K-major,
    8-row groups SBO apart with rows of `swizzle` bytes; MN-major, `swizzle` bytes
    of MN per row, 8-row (k) groups SBO apart and swizzle-wide MN chunks LBO apart;
    then the swizzle on the address bits."""
    f = _desc_fields(desc)
    swz = {1: 128, 2: 64, 3: 32}[f["swizzle"]]
    if k_major:
        addr = f["start"] + (mn // 8) * f["sbo"] + (mn % 8) * swz + k * eb
    else:
        w = swz // eb
        addr = f["start"] + (mn // w) * f["lbo"] + (k // 8) * f["sbo"] + (k % 8) * swz + \
            (mn % w) * eb
    return swizzle_bits(addr, swz)


@pytest.mark.parametrize("which,shape,order", [
    ("a", (128, 64), (1, 0)),     # A, K-major (row-major M x K)
    ("a", (64, 128), (1, 0)),     # a wider K: two boxes along K
    ("b", (64, 128), (1, 0)),     # B, N-major (row-major K x N)
    ("b", (64, 128), (0, 1)),     # B, K-major (a transposed (N, K) weight)
])
def test_wgmma_descriptors_address_the_shared_layout(which, shape, order):
    """The descriptor fields the lowering computes (rules.mma._Desc) make wgmma read
    exactly where the shared layout put each element."""
    from mlir import ir
    from tileir.backend.gpu.context import LoweringContext
    from tileir.backend.gpu.rules import mma as mma_rules
    from tileir.backend.gpu.shared import SmemTile
    from tileir.dialect import context
    eb = 2
    inner = shape[order[0]] * eb
    lay = Shared(min(128, inner), order)
    k_dim = 1 if which == "a" else 0
    tile = SmemTile(lay, shape, None, 0)
    tile.elem = None
    with context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            cx = LoweringContext(4, module.body)
            tile.elem = ir.BF16Type.get()
            desc = mma_rules._Desc(cx, tile, k_dim)
    base = desc.const
    step = 16
    mn_size = shape[1 - k_dim]
    for mn0 in range(0, mn_size, 64 if which == "a" else mn_size):
        for k0 in range(0, shape[k_dim], step):
            origin = (mn0, k0) if which == "a" else (k0, mn0)
            start = tile.offset(origin)
            d = base | (start >> 4)
            for mn in range(min(64, mn_size) if which == "a" else mn_size):
                for k in range(step):
                    coord = (mn0 + mn, k0 + k) if which == "a" else (k0 + k, mn0 + mn)
                    assert _canonical(d, mn, k, desc.k_major, eb) == tile.offset(coord), \
                        (origin, mn, k)


# ---------------------------------------------------------------------------
# Compiled GEMMs: the instructions each target needs, and no local memory
# ---------------------------------------------------------------------------
def _sass_text(cubin: bytes, tmp_path) -> str:
    return sass_text(cubin, tmp_path)            # (disassembled once a run: conftest)


def _sass(cubin: bytes, tmp_path) -> collections.Counter:
    """Opcodes (without modifiers) and how often each occurs."""
    return collections.Counter(re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?"
                                          r"([A-Z][A-Z0-9_]+)", _sass_text(cubin, tmp_path),
                                          re.M))


# sm_90a: TMA loads, mbarriers, wgmma, and the epilogue's stmatrix + TMA store
NEEDS = {"sm_90a": ("HGMMA", "UTMALDG", "SYNCS", "STSM", "UTMASTG"),
         "sm_80": ("HMMA", "LDGSTS", "LDSM")}


# the fast tier: the 128 x 128 x 64 fp16 GEMM on sm_80 (its instructions, no spills);
# bf16, narrower tiles and a transposed B in `tile-check --full` (the simulator's fast
# cases run the last two).  In --full (0.9 s): sm_90a; the same check of every sm_90a
# instruction (HGMMA, UTMALDG, SYNCS, STSM, UTMASTG), no local memory and wgmma not
# serialized is kept on the GEMM by test_gemms_as_launched_use_tensor_cores_and_no_local_memory
# [sm_90a-4096-4096-4096-options2-grid2] (its 128 x 256 tiles: the most registers) and
# [sm_90a-16-4096-4096-options0-grid0]
@pytest.mark.sweep(keep=("target",))
@pytest.mark.parametrize("target", [pytest.param("sm_90a", marks=pytest.mark.slow), "sm_80"])
@pytest.mark.parametrize("kernel,dtype,tiles", [
    pytest.param(gemm, BF16, (128, 128, 64), marks=pytest.mark.slow),
    (gemm, np.float16, (128, 128, 64)), (gemm, BF16, (64, 64, 32)),
    pytest.param(gemm, BF16, (128, 256, 64), marks=pytest.mark.slow),
    (gemm_nt, BF16, (128, 128, 64)),
])
def test_compiled_gemm_uses_tensor_cores_and_no_local_memory(target, kernel, dtype, tiles,
                                                             tmp_path):
    spec = ct.ArraySpec(dtype, 2)
    ck = kernel.compile((spec, spec, spec, *tiles), target=target)
    ops = _sass(ck.cubin, tmp_path)
    for need in NEEDS[target]:
        assert any(op.startswith(need) for op in ops), (need, sorted(ops))
    assert not any(op in ("LDL", "STL") for op in ops), ops
    report = ck.ptxas_report
    assert spill_bytes(report) == (0, 0), report
    assert "C7520" not in report and "C7519" not in report, report   # wgmma not serialized


# Since session 24 (the policy: a kernel family's first SASS check on each target in the
# fast tier, the others in --full) the decode case too: [sm_90a-4096-4096-4096-options2-
# grid2] keeps the GEMM's sm_90a SASS (its 128 x 256 tiles: the most registers),
# test_compiled_gemm_uses_tensor_cores_and_no_local_memory's first sm_80 case the sm_80
# SASS, and test_simt's test_warp_specialized_gemm_runs_correctly the warp-specialized
# decode schedule's code in the simulator
@pytest.mark.parametrize("target,m,n,k,options,grid", [
    pytest.param("sm_90a", 16, 4096, 4096, {}, (1, 32),    # decode: 64 x 32 x 256,
                 marks=pytest.mark.slow),                  # warp-specialized
    pytest.param("sm_90a", 64, 28672, 4096, {}, (1, 224),   # rows shrunk to 64: 64 x 128
                 marks=pytest.mark.slow),                   # x 64 (test_llm_kernels' 64 rows)
    ("sm_90a", 4096, 4096, 4096, {}, (32, 32)),      # wide: 128 x 256
    pytest.param("sm_90a", 4096, 4096, 4096, {"persistent": True}, (32, 32),
                 marks=pytest.mark.slow),
    pytest.param("sm_90a", 4096, 4096, 4096, {"persistent": True, "warp_specialize": True},
                 (32, 32), marks=pytest.mark.slow),
    pytest.param("sm_80", 16, 4096, 4096, {}, (1, 32),  # decode on mma.sync
                 marks=pytest.mark.slow),
])
def test_gemms_as_launched_use_tensor_cores_and_no_local_memory(target, m, n, k, options,
                                                                  grid, tmp_path):
    """The plain source as the launcher compiles it for a grid on 132 SMs (retiled,
    clipped, persistent): the same instructions, no spills, wgmma not serialized."""
    a, w, c = np.empty((m, k), BF16), np.empty((n, k), BF16), np.empty((m, n), BF16)
    kernel = ct.kernel(gemm_nt.fn, **options) if options else gemm_nt
    ck = kernel.compile((a, w, c, 128, 128, 64), target=target, grid=grid, sm_count=132)
    ops = _sass(ck.cubin, tmp_path)
    for need in NEEDS[target]:
        assert any(op.startswith(need) for op in ops), (need, sorted(ops))
    assert not any(op in ("LDL", "STL") for op in ops), ops
    assert ck.spills == (0, 0), ck.ptxas_report
    assert "C7520" not in ck.ptxas_report and "C7519" not in ck.ptxas_report


@pytest.mark.parametrize("dtype,grid,paired", [
    (BF16, (32, 32), True),                        # 4096^2: pairs of row tiles share B
    pytest.param(np.float16, (32, 32), True, marks=pytest.mark.slow),
    # a 16 KB fp8 B tile: pairing loses.  In --full since session 24 (the schedules'
    # SASS beyond their first): the first case keeps the pairs' SASS, lit the pass's
    # grids left alone (cluster-pairs.mlir, @odd), fp8 products run in the simulator
    # (test_simt's test_fp8_and_tf32_gemm_run_correctly, e4m3 x e5m2)
    pytest.param(ml_dtypes.float8_e4m3fn, (32, 32), False, marks=pytest.mark.slow),
    pytest.param(BF16, (31, 32), False,            # an odd number of row tiles
                 marks=pytest.mark.slow),
])
def test_cluster_pairs_where_they_pay(dtype, grid, paired, tmp_path):
    """The plain GEMM as launched for a many-wave grid: in (2, 1, 1) clusters sharing B
    by TMA multicast (cluster_pairs.py) where the grid is even along M and the shared
    tile saves 32 KB a stage; HGMMA, multicast TMA loads and cluster barriers in the
    SASS; as written otherwise."""
    m, n, k = grid[0] * 128, grid[1] * 128, 4096
    a, w, c = np.empty((m, k), dtype), np.empty((n, k), dtype), np.empty((m, n), BF16)
    ck = gemm_nt.compile((a, w, c, 128, 128, 64), target="sm_90a", grid=grid, sm_count=132)
    assert (ck.meta.get("cluster") == [2, 1, 1]) == paired
    assert ("multicast_mask" in ck.artifacts["gpu"]) == paired
    assert ck.spills == (0, 0)
    text = _sass_text(ck.cubin, tmp_path)
    assert "GMMA" in text                      # HGMMA (16-bit), QGMMA (fp8)
    assert ("UTMALDG.2D.MULTICAST" in text) == paired and ("UCGABAR_ARV" in text) == paired


# fp8 in --full: the f16 accumulator's path is the float16 case's; fp8 on wgmma is kept
# by test_simt's fp8 simulator runs (test_fp8_and_tf32_gemm_run_correctly,
# test_e4m3_times_e5m2_is_one_product).  The float16 case in --full too
# (1.1 s, a cubin of its own): test_simt's test_f16_accumulator_gemm_matches_the_interpreter
# [sm_90a-float16] runs the widened accumulator's code (gpu stage) in the simulator in the
# fast tier, and the GEMM's sm_90a SASS is checked by
# test_gemms_as_launched_use_tensor_cores_and_no_local_memory
@pytest.mark.parametrize("target,dtype", [pytest.param("sm_90a", np.float16,
                                                       marks=pytest.mark.slow),
                                          pytest.param("sm_80", np.float16, marks=pytest.mark.slow),
                                          pytest.param("sm_90a", ml_dtypes.float8_e4m3fn,
                                                       marks=pytest.mark.slow)])
def test_an_f16_accumulator_runs_on_tensor_cores_in_f32(target, dtype, tmp_path):
    """An f16 accumulator is widened for the tensor cores (f32 sums, one rounding to
    f16 per mma): the K loop carries it in the accumulator layout, so the casts need
    no exchange, and the code has no local memory."""
    spec = ct.ArraySpec(dtype, 2)
    ck = gemm_f16_acc.compile((spec, spec, ct.ArraySpec(np.float16, 2), 64, 64, 64),
                              target=target)
    layout = ck.artifacts["layout"]
    loop = layout[layout.index("scf.for"):layout.index("scf.yield")]
    # no conversion of the accumulator (fp8 B is re-laid K-major, sm_80 converts to store)
    assert not [line for line in loop.splitlines() if "tile.convert_layout" in line and
                ("xf16" in line or "xf32" in line)], loop
    assert "arith.extf" in loop and "arith.truncf" in loop
    text = _sass_text(ck.cubin, tmp_path)
    assert "GMMA" in text if target == "sm_90a" else "HMMA" in text
    assert ck.spills == (0, 0)


def test_a_fused_epilogue_converts_its_scalars_for_free():
    """`alpha * acc + bias` then silu on a 128 x 256 accumulator as launched (retiled,
    persistent): the splats of alpha and 1.0 take the accumulator's layout without a
    trip through shared memory (each once needed 128 KB, more than the GPU has beside
    the ring): they are made in it, not converted."""
    m, n, k = 4096, 3072, 1000
    x, w = np.empty((m, k), BF16), np.empty((n, k), BF16)
    bias, y = np.empty((n,), BF16), np.empty((m, n), BF16)
    ck = linear_silu.compile((x, w, bias, y, 0.5, 128, 128, 64), stage="gpu", target="sm_90a",
                             grid=(32, 24), sm_count=132)
    assert ck.meta["shared_bytes"] <= 232448
    layout = ck.artifacts["layout"]
    assert "tile.convert_layout" not in layout
    assert "tensor.splat %arg4 : tensor<128x256xf32, #tile.mma_acc" in layout


# in --full (1.5 s of CPU): tf32 mma.sync on sm_80 is kept by test_simt's
# test_f32_products_run_on_tf32_mma_sync (gemm_nt, sm_80), run in the simulator
@pytest.mark.slow
@pytest.mark.parametrize("kernel", [gemm, gemm_nt])
def test_sm80_f32_gemm_runs_on_tf32_tensor_cores(kernel, tmp_path):
    """f32 operands on sm_80: mma.sync.m16n8k8 as tf32 (HMMA.1688.F32.TF32), fed by a
    cp.async ring, no local memory."""
    spec = ct.ArraySpec(np.float32, 2)
    ck = kernel.compile((spec, spec, spec, 64, 64, 32), target="sm_80")
    assert "HMMA.1688.F32.TF32" in _sass_text(ck.cubin, tmp_path)
    ops = _sass(ck.cubin, tmp_path)
    assert ops["LDGSTS"], sorted(ops)
    assert not any(op in ("LDL", "STL") for op in ops), ops
    assert ck.spills == (0, 0)


# In --full (1.2 s, a cubin of its own): the fast tier runs the warp-specialized GEMM in
# the simulator (test_simt's test_warp_specialized_gemm_runs_correctly[8-tiles0-False]),
# and the setmaxnreg pair of a producer warpgroup in the SASS is checked by test_attention's
# test_128x128_attention_runs_on_tma_and_wgmma_without_local_memory[False] (USETMAXREG)
@pytest.mark.slow
def test_warp_specialized_gemm_gives_registers_to_the_consumers(tmp_path):
    spec = ct.ArraySpec(BF16, 2)
    kernel = ct.kernel(gemm.fn, warp_specialize=True)
    ck = kernel.compile((spec, spec, spec, 128, 128, 64), target="sm_90a")
    assert ck.meta["num_threads"] == 384                   # 2 consumer + 1 producer warpgroup
    ops = _sass(ck.cubin, tmp_path)
    assert ops["USETMAXREG"] == 2 and ops["HGMMA"] and ops["UTMALDG"]
    assert "C7507" not in ck.ptxas_report and "C7508" not in ck.ptxas_report   # not ignored
    assert ck.spills == (0, 0)


def test_tensor_maps_are_grid_constant_parameters_in_the_ptx():
    # compiled to the PTX stage: what is checked is the PTX and the launch metadata,
    # ptxas adds nothing to either
    spec = ct.ArraySpec(BF16, 2)
    ck = gemm.compile((spec, spec, spec, 128, 128, 64), "ptx", target="sm_90a")
    maps = ck.meta["tensor_maps"]
    # A in one 128 x 64 box; B (64 x 128) in two boxes of 64 columns, one map; C stored
    # by TMA in slabs of 64 columns, each warp its own 16 rows of a slab
    assert [(m["param"], m["box"], m["swizzle"]) for m in maps] == \
        [(0, [128, 64], 128), (1, [64, 64], 128), (2, [16, 64], 128)]
    ptx = ck.artifacts["ptx"]
    for m in maps:
        assert f".param .align 64 .b8 gemm_param_{m['slot']}[128]" in ptx
    assert "cvta.param" in ptx and "cp.async.bulk.tensor.2d" in ptx
    assert "tensor_maps" not in gemm.compile((spec, spec, spec, 128, 128, 64), "ptx",
                                             target="sm_80").meta


# ---------------------------------------------------------------------------
# The pipeline stage, run by the interpreter (which checks the ring protocol)
# ---------------------------------------------------------------------------
@pytest.fixture
def pipeline_stage(monkeypatch):
    monkeypatch.setenv("TILEIR_LAUNCH_STAGE", "pipeline")


@pytest.mark.parametrize("target_note", ["sm_90a"])
@pytest.mark.parametrize("m,n,k", [(256, 256, 256), (200, 136, 320), (1, 64, 64), (130, 8, 528),
                                   (64, 64, 0), (64, 192, 64 * 9)])
def test_the_pipelined_gemm_computes_the_product(pipeline_stage, target_note, m, n, k):
    rng = np.random.default_rng(m * 1000 + n + k)
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    c = np.full((m, n), np.nan, BF16)
    ct.launch(None, (ct.cdiv(m, 64), ct.cdiv(n, 64)), gemm, (a, b, c, 64, 64, 64))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(c.astype(np.float64), ref, rtol=1e-2, atol=1e-2 * max(1, k) ** 0.5)


def test_the_pipeline_stage_of_a_gemm_has_a_ring(pipeline_stage):
    spec = ct.ArraySpec(BF16, 2)
    text = gemm.compile((spec, spec, spec, 128, 128, 64), stage="pipeline",
                        target="sm_90a").ir()
    # 8 warps, 64 accumulator registers a thread: two blocks fit an SM, each with 3
    # stages of 32 KB
    assert '"tile.ring_alloc"() {stages = 3 : i64' in text
    assert text.count('"tile.mma_async"') == 1 and '{pending = 1 : i64}' in text
    unaligned = ct.ArraySpec(BF16, 2, aligned=False)
    text = gemm.compile((unaligned, spec, spec, 128, 128, 64), stage="pipeline",
                        target="sm_90a").ir()
    assert "tile.ring_load" in text and text.count('"tile.load"') == 1   # A stays synchronous


RING_IR = """
#s = #tile.shared<128 : i64, array<i64: 1, 0>>
func.func @k(%a: !tile.array<f32, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %true = arith.constant true
  %r = "tile.ring_alloc"() {stages = 2 : i64, tiles = [tensor<8x32xf32, #s>]} : () -> !tile.ring
  "tile.ring_acquire"(%r, %c0, %ACQ_PARITY, %true) : (!tile.ring, i32, i32, i1) -> ()
  "tile.ring_load"(%r, %c0, %true, %a, %c0, %c0) {buffer = 0 : i64} : (!tile.ring, i32, i1, !tile.array<f32, 2 : i64>, i32, i32) -> ()
  "tile.ring_commit"(%r) : (!tile.ring) -> ()
  "tile.ring_wait"(%r, %c0, %WAIT_PARITY) : (!tile.ring, i32, i32) -> ()
  %t = "tile.ring_view"(%r, %c0) {buffer = 0 : i64} : (!tile.ring, i32) -> tensor<8x32xf32, #s>
  RELEASE
  ACQUIRE2
  "tile.store"(%c, %t, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<8x32xf32, #s>, i32, i32) -> ()
  return
}
"""


@pytest.mark.parametrize("edit,message", [
    ({}, None),
    ({"%ACQ_PARITY": "%c0"}, "acquire #0 of slot 0 waits for parity 0"),
    ({"%WAIT_PARITY": "%c1"}, "wait #0 of slot 0 for parity 1"),
    ({"ACQUIRE2": '"tile.ring_acquire"(%r, %c0, %c0, %true) : (!tile.ring, i32, i32, i1) -> ()',
      "RELEASE": ""}, "acquire #1 of slot 0 before use #0 was released"),
    ({"RELEASE": '"tile.ring_release"(%r, %c0, %true) : (!tile.ring, i32, i1) -> ()\n'
                 '  "tile.ring_release"(%r, %c0, %true) : (!tile.ring, i32, i1) -> ()'},
     "release of slot 0 that has no waited use"),
])
def test_the_interpreter_checks_the_ring_protocol(edit, message):
    from tileir.dialect import context, parse
    from tileir.interpreter import run
    text = RING_IR
    edit = {"%ACQ_PARITY": "%c1", "%WAIT_PARITY": "%c0", "RELEASE": "", "ACQUIRE2": "",
            **edit}
    for k, v in edit.items():
        text = text.replace(k, v)
    with context() as ctx:
        module = parse(text, ctx)
    a = np.arange(8 * 32, dtype=np.float32).reshape(8, 32)
    c = np.zeros_like(a)
    if message is None:
        run(module, "k", (1,), [a, c])
        assert (c == a).all()
        return
    with pytest.raises(InterpreterError, match=re.escape(message)):
        run(module, "k", (1,), [a, c])


# ---------------------------------------------------------------------------
# The TMA runtime: what goes into cuTensorMapEncodeTiled, and the launch ABI
# ---------------------------------------------------------------------------
def _info(shape, strides, dtype="bfloat16", ptr=0x7F0000000000):
    return DeviceArrayInfo(ptr, tuple(shape), tuple(strides), ct.dtypes.BY_NAME[dtype],
                           ("cuda", 0))


def test_tensor_map_arguments_are_innermost_first_in_bytes():
    args = tensor_maps.encode_args(_info((4096, 1000), (1024, 1)), (128, 64), 128)
    assert args["data_type"] == "BFLOAT16" and args["rank"] == 2
    assert args["dims"] == [1000, 4096]          # innermost first
    assert args["strides"] == [2048]             # bytes, the innermost dim's omitted
    assert args["box"] == [64, 128]
    assert args["element_strides"] == [1, 1] and args["swizzle"] == "128B"
    # a dim of size 0 or 1: a valid map all the same
    args = tensor_maps.encode_args(_info((1, 0), (7, 1)), (128, 64), 128)
    assert args["dims"] == [1, 1] and args["strides"] == [16]


@pytest.mark.parametrize("info,box,swizzle,message", [
    (_info((64, 33), (33, 1)), (64, 64), 128, "multiples of 16 bytes"),
    (_info((64, 64), (64, 1), ptr=0x1008), (64, 64), 128, "16-byte aligned"),
    (_info((64, 64), (64, 1)), (512, 64), 128, "1 to 256 per dim"),
    (_info((64, 64), (64, 1)), (64, 64), 48, "swizzle 48"),
])
def test_tensor_map_arguments_are_checked(info, box, swizzle, message):
    with pytest.raises(ct.TileValueError, match=message):
        tensor_maps.encode_args(info, box, swizzle, "k", "a")


class _Dev:
    """A device array as the launcher sees one (no GPU needed)."""

    def __init__(self, shape):
        self.shape = shape
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": "<f4", "data": (0x7F0000001000, False),
            "strides": None, "version": 3}


def _map_launch(monkeypatch, tensor_map: dict):
    """(meta of a kernel taking one f32 matrix through `tensor_map`, the encodings
    asked of the driver: (parameter, box) each)."""
    calls = []

    def fake_encode(args, kernel, param):
        calls.append((param, args["box"]))
        tm = tensor_maps.TensorMap()
        tm.words[0] = len(calls)
        return tm

    monkeypatch.setattr(tensor_maps, "_encode", fake_encode)
    monkeypatch.setattr("tileir.runtime.arrays._cai_device", lambda x, ptr: 0)
    tensor_maps.clear_cache()
    meta = {"name": "k", "num_threads": 128, "shared_bytes": 0, "target": "sm_90a",
            "params": [{"kind": "array", "name": "a", "dtype": "f32", "ndim": 2,
                        "aligned": True}],
            "tensor_maps": [{"slot": 5, "param": 0, "swizzle": 128, **tensor_map}]}
    return meta, calls


def test_launch_packs_one_tensor_map_per_metadata_entry(monkeypatch):
    from tileir.runtime import launcher
    meta, calls = _map_launch(monkeypatch, {"box": [32, 32]})
    bound = launcher.bind_args(meta, [_Dev((100, 64))])
    raw = bound.params.raw()
    assert len(raw) == 6 and len(raw[5]) == 128           # 5 ABI slots of the array, the map
    assert int.from_bytes(raw[5][:8], "little") == 1
    launcher.bind_args(meta, [_Dev((100, 64))])
    assert calls == [("a", [32, 32])]                     # the second launch hit the cache


def test_a_clipped_box_is_cut_to_the_arrays_rows(monkeypatch):
    """A map with a clip dim is encoded with the box cut to the array's extent there
    (what the kernel's transaction bytes count), never below 1 nor above the box."""
    from tileir.runtime import launcher
    assert tensor_maps.clipped_box([128, 64], 0, (16, 4096)) == [16, 64]
    assert tensor_maps.clipped_box([128, 64], 0, (4096, 16)) == [128, 64]
    assert tensor_maps.clipped_box([128, 64], 0, (0, 16)) == [1, 64]
    assert tensor_maps.clipped_box([128, 64], None, (16, 16)) == [128, 64]
    meta, calls = _map_launch(monkeypatch, {"box": [64, 32], "clip": 0})
    launcher.bind_args(meta, [_Dev((5, 64))])
    launcher.bind_args(meta, [_Dev((100, 64))])
    assert calls == [("a", [32, 5]), ("a", [32, 64])]     # innermost first, as encoded


def test_a_persistent_launch_runs_one_block_per_sm_and_passes_its_grid(monkeypatch):
    from tileir.runtime import launcher
    meta = {"name": "k", "persistent": True, "params": [
        {"kind": "scalar", "name": "n", "dtype": "i32"}]}
    assert launcher.persistent_grid(meta, (10, 20, 1), 132) == (132, 1, 1)
    assert launcher.persistent_grid(meta, (2, 3, 1), 132) == (6, 1, 1)
    assert launcher.persistent_grid({"name": "k"}, (10, 20, 1), 132) == (10, 20, 1)
    raw = launcher.bind_args(meta, [7], (10, 20, 1)).params.raw()
    assert [int.from_bytes(r, "little") for r in raw] == [7, 10, 20, 1]
    with pytest.raises(ct.TileValueError, match="persistent: its launch needs the grid"):
        launcher.bind_args(meta, [7])
    with pytest.raises(ct.TileValueError, match="option persistent must be True or False"):
        ct.kernel(gemm.fn, persistent=1).compile(
            (np.zeros((64, 64), ml_dtypes.bfloat16),) * 3 + (64, 64, 64), stage="tile")


def test_tensor_map_structure_is_128_bytes_aligned_for_the_driver():
    assert ctypes.sizeof(tensor_maps.TensorMap) == 128


@pytest.mark.skipif(not os.environ.get("TILEIR_TEST_ALL_SHAPES"), reason="slow; "
                    "TILEIR_TEST_ALL_SHAPES=1")
def test_pipelined_gemm_many_shapes(pipeline_stage):
    rng = np.random.default_rng(1)
    for m, n, k in [(17, 127, 4097), (4097, 17, 64), (3, 5, 7)]:
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = np.zeros((m, n), np.float16)
        ct.launch(None, (ct.cdiv(m, 64), ct.cdiv(n, 64)), gemm, (a, b, c, 64, 64, 64))
        assert np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-2, atol=0.5)


@pytest.mark.parametrize("g0,g1", [(1, 1), (3, 5), (8, 8), (17, 3), (64, 65), (9, 1)])
def test_grouped_block_order_is_a_bijection(g0, g1):
    from tileir.backend.pipeline.block_order import GROUP
    seen = set()
    for b1 in range(g1):
        for b0 in range(g0):
            pid = b1 * g0 + b0
            per_group = GROUP * g1
            first = pid // per_group * GROUP
            size = min(g0 - first, GROUP)
            seen.add((first + pid % per_group % size, pid % per_group // size))
    assert seen == {(i, j) for i in range(g0) for j in range(g1)}


def test_fp8_products_sum_in_f32_unless_fast_acc():
    """cuTile's default: fp8 products into f32 are summed in f32.  Each chunk of 64
    columns sums one tile's K on the tensor cores from zero (wgmma scale-d 0), is waited
    for and added to the accumulator; the loop's product stays synchronous, and the
    tile is not widened past 128 x 128 (spills).  `use_fast_acc=True`: the async wgmma
    chain across the loop, as for 16-bit operands."""
    f8 = ml_dtypes.float8_e4m3fn
    a, w, c = np.empty((4096, 512), f8), np.empty((4096, 512), f8), np.empty((4096, 4096), BF16)
    args = (a, w, c, 128, 128, 64)
    precise = gemm_nt.compile(args, target="sm_90a", grid=(32, 32), sm_count=132)
    fast = gemm_nt_fast_acc.compile(args, target="sm_90a", grid=(32, 32), sm_count=132)
    assert "D[<f32>, <zero>]" in precise.artifacts["gpu"]              # scale-d 0
    assert "tile.mma_async" not in precise.artifacts["pipeline"]
    assert "grid_scale" not in precise.meta
    assert "D[<f32>, <zero>]" not in fast.artifacts["gpu"]
    assert "tile.mma_async" in fast.artifacts["pipeline"]
    for ck in (precise, fast):
        assert ck.spills == (0, 0), ck.ptxas_report


@ct.kernel
def f16_acc_fp8(a, b, c, FAST: ct.Constant[int]):
    acc = ct.zeros((64, 64), dtype=ct.float16)
    for k in range(ct.num_tiles(a, axis=1, shape=(64, 64))):
        ta = ct.load(a, index=(ct.bid(0), k), shape=(64, 64), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(ct.bid(1), k), shape=(64, 64), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, ct.transpose(tb), acc, use_fast_acc=FAST == 1)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=acc)


def test_an_f16_accumulator_keeps_use_fast_acc():
    """The layout stage widens an f16 accumulator to f32 for the tensor cores (a new
    product op): `use_fast_acc=True` stays on it (found by review: it was dropped, so
    the product took the promoted path)."""
    f8 = ml_dtypes.float8_e4m3fn
    a, c = np.empty((128, 256), f8), np.empty((128, 128), np.float16)
    for fast, promoted in ((1, False), (0, True)):
        gpu = f16_acc_fp8.compile((a, a, c, fast), stage="gpu", target="sm_90a").artifacts["gpu"]
        assert ("D[<f32>, <zero>]" in gpu) == promoted
