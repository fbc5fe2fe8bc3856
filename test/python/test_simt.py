"""Deviceless GPU tests: `gpu`-stage code run by tileir.sim against NumPy references.

This tier runs the lowering's own output (addresses, TMA coordinates, mbarrier
phases, wgmma descriptors, ldmatrix rows, shuffles) with the hardware modelled
from the PTX ISA, so it catches what a compile-only test cannot, on any machine.
The last tests show that it does: a wrong transaction count hangs, a swizzle
that disagrees with the hardware's gives wrong numbers.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.examples import layernorm, rmsnorm, softmax, transpose, vector_add
from tileir.kernel import hardware_grid
from tileir.dialect import TileIRError
from tileir.sim import SimError, simulate

from mlir_kernels import GROW, PICK, compile_mlir, table_kernel
from test_tensor_cores import (accumulate_ab, accumulate_awt, attention, batched_tiles, bgemm,
                               gemm, gemm_accumulate, gemm_f16_acc, gemm_i32, gemm_nt,
                               gemm_widened_a, lower_gemm, row_logsumexp, scaled_gemm)

BF16 = ml_dtypes.bfloat16
TARGETS = ("sm_90a", "sm_80")
# The slowest cases of the sweeps below (several seconds each on a 2-core machine) run
# in the full tier only (`tile-check --full`); the fast tier keeps a case of every test.
SLOW = pytest.mark.slow


def _gemm(kernel, target, m, n, k, tiles, dtype, rng, nt=False, aligned=True, blocks=None):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = (rng.standard_normal((n, k)) if nt else rng.standard_normal((k, n))).astype(dtype)
    if not aligned:              # a row stride that is not a multiple of 16 bytes
        a = np.ascontiguousarray(np.pad(a, ((0, 0), (0, 1)))[:, :k])
        a = np.lib.stride_tricks.as_strided(a, (m, k), (a.strides[0], a.strides[1]))
    c = np.full((m, n), np.nan, dtype)
    args = (a, b, c, *tiles)
    ck = kernel.compile(args, stage="gpu", target=target)
    grid = (ct.cdiv(m, tiles[0]), ct.cdiv(n, tiles[1]))
    simulate(ck, grid, args, blocks=blocks)
    ref = a.astype(np.float64) @ (b.astype(np.float64).T if nt else b.astype(np.float64))
    return c.astype(np.float64), ref


def _simulate_mlir(text: str, args, grid, target: str) -> str:
    """A hand-written kernel (mlir_kernels) through the gpu stage, run by the simulator
    on NumPy `args`; returns the gpu-stage IR."""
    import types
    artifacts, meta = compile_mlir(text, target, "gpu")
    compiled = types.SimpleNamespace(meta=meta, runtime_params=list(range(len(args))),
                                     artifacts=artifacts)
    simulate(compiled, grid, args)
    return artifacts["gpu"]


def _close(got, ref, k):
    scale = np.abs(ref).max() + 1
    return np.abs(got - ref).max() <= 1e-2 * scale


# the fast tier: the first shape on each target; the GEMM grid in `tile-check --full`
# (B transposed runs in the fast tier in test_fp8_and_tf32_gemm_run_correctly)
@pytest.mark.sweep(keep=("target",))
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel,m,n,k,tiles,dtype,nt", [
    (gemm, 64, 64, 64, (64, 64, 64), BF16, False),          # one block, one iteration
    pytest.param(gemm, 130, 72, 200, (64, 64, 64), BF16, False,     # ragged in M, N and K
                 marks=SLOW),
    (gemm, 128, 128, 192, (128, 128, 64), np.float16, False),   # two warpgroups / 2 x 4 warps
    (gemm_nt, 72, 130, 96, (64, 64, 32), BF16, True),        # B as a transposed (N, K) weight
    (gemm, 1, 8, 64, (64, 64, 64), BF16, False),             # M = 1: a decode row
])
def test_gemm_runs_correctly(target, kernel, m, n, k, tiles, dtype, nt, rng):
    got, ref = _gemm(kernel, target, m, n, k, tiles, dtype, rng, nt=nt)
    assert _close(got, ref, k), np.abs(got - ref).max()


# Since session 24 (the policy: a kernel family's default configuration once or twice
# in the simulator, each option's simulator proof in --full): sm_80 in --full; [sm_90a]
# keeps the synchronous path through registers in the fast tier
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
def test_gemm_with_an_unaligned_operand_runs_correctly(target, rng):
    """Rows of 37 elements: no TMA or cp.async, the synchronous path through registers."""
    got, ref = _gemm(gemm, target, 100, 60, 37, (64, 64, 32), BF16, rng)
    assert _close(got, ref, 37)


# Since session 24 (the policy: a kernel family's default configuration once or twice
# in the simulator, each option's simulator proof in --full): in --full; the
# unaligned operand's synchronous staging runs in the fast tier in
# test_gemm_with_an_unaligned_operand_runs_correctly[sm_90a]
@SLOW
def test_an_unaligned_operand_staged_in_slabs_of_four_rows_runs_correctly(rng):
    # 4 warps stage a 32 x 256 tile of an unaligned B in slabs of 4 rows: the
    # swizzle of rows 4-7 of each 8 is an xor into the slab's offsets, not a sum
    k, n = 96, 300
    a = rng.standard_normal((70, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    c = np.full((70, n), np.nan, BF16)
    args = (a, b, c, 128, 256, 32)
    ck = ct.kernel(gemm.fn, num_warps=4).compile(args, stage="gpu", target="sm_90a")
    simulate(ck, (1, 2), args)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert _close(c.astype(np.float64), ref, k)


# sm_80 in --full: the batched kernel's sm_90a code runs here, test_bmm runs it at
# ragged sizes, and sm_80's mma.sync GEMM is test_gemm_runs_correctly's.
# Since session 24 (the policy: a kernel family's default configuration once or twice
# in the simulator, each option's simulator proof in --full): sm_90a
# too: the batched GEMM's simulator runs are test_bmm's (test_batched_gemm_runs_correctly
# there, its fast cases at ragged sizes)
@pytest.mark.parametrize("target", [pytest.param("sm_90a", marks=SLOW),
                                    pytest.param("sm_80", marks=SLOW)])
def test_batched_gemm_runs_correctly(target, rng):
    """3-d arrays, a batch index from the grid: 3-d TMA boxes, unit dims reshaped away."""
    batch, m, n, k = 3, 70, 80, 96
    a = rng.standard_normal((batch, m, k)).astype(BF16)
    b = rng.standard_normal((batch, k, n)).astype(BF16)
    c = np.full((batch, m, n), np.nan, BF16)
    args = (a, b, c, 64, 64, 32)
    simulate(bgemm.compile(args, stage="gpu", target=target), (2, 2, batch), args)
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    assert _close(c.astype(np.float64), ref, k)


@ct.kernel
def one_tile_matmul(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """`a @ b` of one tile each (no loop, no accumulator): matmul as an mma into zero."""
    i = ct.bid(0)
    j = ct.bid(1)
    ta = ct.load(a, index=(i, 0), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
    tb = ct.load(b, index=(0, j), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(i, j), tile=ta @ tb)


# Since session 24 (the policy: a kernel family's default configuration once or twice
# in the simulator, each option's simulator proof in --full): sm_80 in --full; [sm_90a]
# keeps the loop-free product in the fast tier (and sm_80's mma.sync runs in
# test_gemm_runs_correctly[...sm_80])
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
def test_matmul_without_a_loop_runs_correctly(target, rng):
    a = rng.standard_normal((100, 50)).astype(np.float16)
    b = rng.standard_normal((50, 70)).astype(np.float16)
    c = np.full((100, 70), np.nan, np.float16)
    args = (a, b, c, 64, 64, 64)
    simulate(one_tile_matmul.compile(args, stage="gpu", target=target), (2, 2), args)
    assert _close(c.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64), 50)


F8 = ml_dtypes.float8_e4m3fn


@pytest.mark.parametrize("target,dtype,out,tiles", [
    pytest.param("sm_90a", np.float16, np.float16, (8, 32, 64),  # M = 8: no instruction
                 marks=SLOW),     # fits (test_backend's fma-units test compiles it)
    # since session 24 (the simulator proofs of a family's options in --full) f64 and
    # fp8 on sm_80 too: the FMA units' path is compiled on both targets in the fast tier
    # by test_backend's test_an_mma_no_tensor_core_fits_runs_on_the_fma_units, its numbers
    # are the interpreter's
    pytest.param("sm_90a", np.float64, np.float64, (32, 32, 64), marks=SLOW),    # f64
    pytest.param("sm_80", np.int8, np.int32, (32, 32, 64), marks=SLOW),   # i8 -> i32, exact
    pytest.param("sm_80", F8, np.float32, (64, 64, 64),   # fp8 on sm_80: decoded in
                 marks=SLOW),                             # software
])
def test_products_no_tensor_core_fits_run_on_the_fma_units(target, dtype, out, tiles, rng):
    m, n, k = 40, 50, 37
    if np.dtype(dtype).kind == "i":
        a = rng.integers(-128, 128, (m, k)).astype(dtype)
        b = rng.integers(-128, 128, (k, n)).astype(dtype)
    else:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
    c = np.zeros((m, n), out)
    args = (a, b, c, *tiles)                          # one tile along K: BK = 64 covers k
    # `a @ b` of fp8 is fp8, which sm_80 cannot round to: an f32 accumulator instead
    kernel = gemm if dtype == F8 else one_tile_matmul
    ck = kernel.compile(args, stage="gpu", target=target)
    assert "wgmma" not in ck.artifacts["gpu"] and "mma.sync" not in ck.artifacts["gpu"]
    simulate(ck, (ct.cdiv(m, tiles[0]), ct.cdiv(n, tiles[1])), args)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if np.dtype(out).kind == "i":
        assert (c == ref.astype(np.int64).astype(out)).all()
    else:
        assert np.abs(c.astype(np.float64) - ref).max() <= 2e-3 * np.abs(ref).max()


@pytest.mark.parametrize("kernel,nt,m,n,k,tiles,target", [
    pytest.param(gemm, False, 100, 72, 80, (64, 64, 32), "sm_80",   # B row-major: (k, n)
                 marks=SLOW),                                       # words
    # since session 24 (the simulator proofs of a family's options in --full) these two
    # too: tf32 products run in the fast tier on wgmma
    # (test_fp8_and_tf32_gemm_run_correctly's f32 cases,
    # test_a_computed_f32_operand_of_wgmma_goes_through_shared_memory)
    pytest.param(gemm_nt, True, 130, 40, 48, (64, 32, 16), "sm_80",   # B as an (N, K)
                 marks=SLOW),                                         # weight
    pytest.param(gemm, False, 40, 72, 80, (32, 64, 32), "sm_90a",     # M = 32: mma.sync
                 marks=SLOW),                                         # on Hopper
    pytest.param(scaled_gemm, False, 100, 72, 80, (64, 64, 32), "sm_80",  # A computed in
                 marks=SLOW),                                             # registers
])
def test_f32_products_run_on_tf32_mma_sync(kernel, nt, m, n, k, tiles, target, rng):
    """f32 operands on mma.sync as tf32 (m16n8k8: one f32 a register, the PTX ISA's
    fragments), read from shared memory one k step at a time; results to tf32
    precision (the simulator truncates the operands as the tensor core does)."""
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = (rng.standard_normal((n, k)) if nt else rng.standard_normal((k, n))).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    args = (a, b, c, *tiles)
    ck = kernel.compile(args, stage="gpu", target=target)
    assert "shape = #nvvm.shape<m = 16, n = 8, k = 8>" in ck.artifacts["gpu"]
    assert "multiplicandAPtxType = #nvvm.mma_type<tf32>" in ck.artifacts["gpu"]
    simulate(ck, (ct.cdiv(m, tiles[0]), ct.cdiv(n, tiles[1])), args)
    ref = a.astype(np.float64) @ (b.astype(np.float64).T if nt else b.astype(np.float64))
    if kernel is scaled_gemm:
        ref *= 2
        assert "#tile.mma_operand<0 : i64, #tile.mma_acc<2" in ck.artifacts["layout"]
    err = np.abs(c - ref).max() / np.abs(ref).max()
    assert err < 3e-3, err                 # tf32: 10 mantissa bits
    assert err > 1e-6                      # and not f32 products: the operands were cut


def test_a_computed_f32_operand_of_wgmma_goes_through_shared_memory(rng):
    """wgmma takes a register operand A in 16-bit types only: an f32 A computed in
    registers (2 * A) is written to K-major shared memory and read from there as tf32
    (this was a located error before)."""
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    c = np.full((128, 64), np.nan, np.float32)
    args = (a, b, c, 64, 64, 32)
    ck = scaled_gemm.compile(args, stage="gpu", target="sm_90a")
    assert "#tile.shared" in ck.artifacts["layout"] and "tile.convert_layout" in \
        ck.artifacts["layout"]
    assert "<tf32>" in ck.artifacts["gpu"]
    simulate(ck, (2, 1), args)
    ref = 2 * a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c - ref).max() / np.abs(ref).max()
    assert 1e-6 < err < 3e-3, err          # tf32: operands cut to 10 mantissa bits


@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
def test_attention_runs_correctly(target, rng):
    """An mma in a loop with other work, and P @ V with P computed in registers (wgmma
    with operand A from registers on sm_90a)."""
    seq, d = 128, 64
    q, k, v = (rng.standard_normal((seq, d)).astype(BF16) for _ in range(3))
    o = np.full((seq, d), np.nan, np.float32)
    args = (q, k, v, o, 0.125, 64, 64, d)
    # the launch's grid of 2 blocks is "narrow": on sm_90a the loop is warp-specialized,
    # on sm_80 the query blocks are retiled to 16 rows (8 blocks)
    grid = (seq // 64, 1, 1)
    ck = attention.compile(args, stage="gpu", target=target, grid=grid, sm_count=132)
    if target == "sm_90a":
        assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in ck.artifacts["gpu"]
        assert "tile.is_producer" in ck.artifacts["pipeline"]
    else:
        assert ck.meta["grid_scale"] == [0, 1, 4]
    simulate(ck, hardware_grid(ck.meta, grid), args)
    s = q.astype(np.float64) @ k.astype(np.float64).T * 0.125
    p = np.exp(s - s.max(1, keepdims=True))
    ref = p / p.sum(1, keepdims=True) @ v.astype(np.float64)
    assert np.abs(o - ref).max() < 1e-2


@pytest.mark.parametrize("kernel,nt,k,out,tol", [
    (gemm_nt, True, 128, BF16, 1e-2),      # K-major operands: straight from TMA to wgmma
    (gemm, False, 128, BF16, 1e-2),        # a row-major B, turned K-major through registers
    # rows of 72 bytes: the synchronous path; in --full since session 24:
    # test_gemm_with_an_unaligned_operand_runs_correctly[sm_90a] runs that path
    pytest.param(gemm_nt, True, 72, BF16, 1e-2, marks=SLOW),
    (gemm_nt, True, 128, F8, 7e-2),        # an fp8 result (3 mantissa bits)
    (gemm_nt, True, 64, np.float32, 2e-3),     # f32 operands through tf32
    (gemm, False, 64, np.float32, 2e-3),
])
def test_fp8_and_tf32_gemm_run_correctly(kernel, nt, k, out, tol, rng):
    operand = np.float32 if out == np.float32 else F8
    m, n = 96, 80
    a = rng.standard_normal((m, k)).astype(operand)
    b = (rng.standard_normal((n, k)) if nt else rng.standard_normal((k, n))).astype(operand)
    c = np.full((m, n), np.nan, out)
    args = (a, b, c, 64, 64, 32 if operand == np.float32 else 64)
    simulate(kernel.compile(args, stage="gpu", target="sm_90a"), (2, 2), args)
    ref = a.astype(np.float64) @ (b.astype(np.float64).T if nt else b.astype(np.float64))
    assert np.abs(c.astype(np.float64) - ref).max() <= tol * np.abs(ref).max()


@pytest.mark.parametrize("warps,tiles,nt", [(8, (128, 128, 64), False),
                                            pytest.param(4, (64, 64, 64), True, marks=SLOW)])
def test_warp_specialized_gemm_runs_correctly(warps, tiles, nt, rng):
    """A producer warpgroup issuing the copies, consumers multiplying: the two sides
    wait on each other's mbarriers (the simulator runs them as coroutines)."""
    kernel = ct.kernel((gemm_nt if nt else gemm).fn, warp_specialize=True, num_warps=warps)
    got, ref = _gemm(kernel, "sm_90a", 200, 136, 320, tiles, BF16, rng, nt=nt)
    assert _close(got, ref, 320)


@pytest.mark.parametrize("target,ws,warps,tiles,nt", [
    pytest.param("sm_90a", False, 4, (64, 64, 64), False,   # each tile's K loop pipelined
                 marks=SLOW),                               # in place
    pytest.param("sm_90a", True, 4, (64, 64, 64), False,    # the producer runs across tiles
                 marks=SLOW),
    ("sm_90a", True, 8, (128, 128, 64), True),     # two consumer warpgroups, setmaxnreg
    pytest.param("sm_80", False, 4, (64, 64, 32), False, marks=SLOW),  # cp.async, mma.sync
])
def test_persistent_gemm_runs_correctly(target, ws, warps, tiles, nt, rng):
    """3 blocks walk every tile of the grid (4 to 12 tiles, ragged edges); with warp
    specialization the ring's slots and phases continue from tile to tile."""
    kernel = ct.kernel((gemm_nt if nt else gemm).fn, persistent=True, retile=False,
                       warp_specialize=ws, num_warps=warps)
    got, ref = _gemm(kernel, target, 200, 136, 200, tiles, BF16, rng, nt=nt)
    assert _close(got, ref, 200)


@pytest.mark.parametrize("target,dtype", [
    ("sm_90a", np.float16),
    pytest.param("sm_80", np.float16, marks=SLOW),
    pytest.param("sm_90a", ml_dtypes.float8_e4m3fn, marks=SLOW),
    pytest.param("sm_80", ml_dtypes.float8_e4m3fn, marks=SLOW),   # fp8 decoded in software
])
def test_f16_accumulator_gemm_matches_the_interpreter(target, dtype, rng):
    """mma into a float16 accumulator (f16 and fp8 operands: cuTile allows both): the
    simulator's run of the compiled code against the interpreter, which rounds to f16
    once per mma call as the GPU code does (within one f16 rounding: f32 sums in
    another order)."""
    m, n, k = 200, 136, 200
    a = (rng.standard_normal((m, k)) * 0.5).astype(dtype)
    b = (rng.standard_normal((k, n)) * 0.5).astype(dtype)
    c = np.full((m, n), np.nan, np.float16)
    args = (a, b, c, 64, 64, 64)
    ck = gemm_f16_acc.compile(args, stage="gpu", target=target)
    grid = (ct.cdiv(m, 64), ct.cdiv(n, 64))
    simulate(ck, grid, args)
    want = np.full((m, n), np.nan, np.float16)
    ct.launch(None, grid, gemm_f16_acc, (a, b, want, 64, 64, 64))    # NumPy: the interpreter
    assert not np.isnan(c).any()
    assert np.abs(c.astype(np.float64) - want).max() <= 2 ** -10 * (np.abs(want).max() + 1)


@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
@pytest.mark.parametrize("batch", [1, pytest.param(2, marks=SLOW)])
def test_a_batched_mma_of_tiles_runs_on_the_gpu_path(target, batch, rng):
    """3-d product tiles (a batch of 1 too) become one 2-d product a batch in the
    frontend, so the GPU path takes them; exact with small-integer operands."""
    a = rng.integers(-2, 3, (batch, 100, 96)).astype(BF16)
    b = rng.integers(-2, 3, (batch, 96, 64)).astype(BF16)
    c = np.full((batch, 100, 64), np.nan, np.float32)
    args = (a, b, c, batch, 64, 64, 32)
    ck = batched_tiles.compile(args, stage="gpu", target=target)
    simulate(ck, (2, 1, 1), args)
    ref = np.einsum("zmk,zkn->zmn", a.astype(np.float64), b.astype(np.float64))
    assert np.array_equal(c, ref)


# Since session 24 (the policy: a kernel family's default configuration once or twice
# in the simulator, each option's simulator proof in --full): sm_80 in --full; [sm_90a]
# keeps the promoted operand (through K-major shared memory) in the fast tier
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
def test_a_promoted_operand_made_in_registers_feeds_the_tensor_cores(target, rng):
    """An f16 A converted to f32 in registers times f32 B: on sm_90a wgmma cannot take
    a tf32 A from registers, so A goes through K-major shared memory; exact with
    small-integer operands."""
    m, n, k = 100, 70, 96
    a = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b = rng.integers(-2, 3, (k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    args = (a, b, c, 64, 64, 32)
    ck = gemm_widened_a.compile(args, stage="gpu", target=target)
    simulate(ck, (2, 2), args)
    assert np.array_equal(c, a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
@pytest.mark.parametrize("da,db", [(np.uint8, np.uint8),
                                   pytest.param(np.int8, np.uint8, marks=SLOW),
                                   pytest.param(np.uint8, np.int8, marks=SLOW)])
def test_uint8_mma_is_exact(target, da, db, rng):
    """uint8 x uint8, int8 x uint8 and uint8 x int8 -> int32 (cuTile's forms; it mixes
    only these) through the signed int8 product and row or column sums: exact over the
    whole range, in the interpreter and in the simulator; ragged M, N and K (the zero
    padding is a 0 of either type)."""
    m, n, k = 100, 70, 150

    def draw(shape, d):
        info = np.iinfo(d)
        return rng.integers(info.min, info.max + 1, shape).astype(d)
    a, b = draw((m, k), da), draw((k, n), db)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    want = np.full((m, n), -3, np.int32)
    ct.launch(None, (2, 2), gemm_i32, (a, b, want, 64, 64, 32))    # NumPy: the interpreter
    assert np.array_equal(want, ref)
    got = np.full((m, n), -3, np.int32)
    ck = gemm_i32.compile((a, b, got, 64, 64, 32), stage="gpu", target=target)
    simulate(ck, (2, 2), (a, b, got, 64, 64, 32))
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
def test_e4m3_times_e5m2_is_one_product(target, rng):
    """An e4m3 x e5m2 mma is not promoted (as in cuTile): one wgmma of the two types on
    sm_90a (QGMMA.*.E4M3.E5M2), the FMA units on sm_80; exact against the interpreter
    up to f32 sums."""
    m, n, k = 200, 136, 256
    a = rng.standard_normal((m, k)).astype(ml_dtypes.float8_e4m3fn)
    w = (rng.standard_normal((n, k)) * 4).astype(ml_dtypes.float8_e5m2)
    c = np.full((m, n), np.nan, np.float32)
    args = (a, w, c, 64, 64, 64)
    ck = gemm_nt.compile(args, stage="gpu", target=target)
    assert "f8E5M2" in ck.artifacts["layout"] and "arith.extf" not in ck.artifacts["layout"]
    grid = (ct.cdiv(m, 64), ct.cdiv(n, 64))
    simulate(ck, grid, args)
    want = np.full((m, n), np.nan, np.float32)
    ct.launch(None, grid, gemm_nt, (a, w, want, 64, 64, 64))       # NumPy: the interpreter
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    assert np.abs(c - ref).max() <= 1e-6 * np.abs(ref).max()
    assert np.abs(want - ref).max() <= 1e-6 * np.abs(ref).max()


@pytest.mark.parametrize("nt,m,n,k,sms", [
    pytest.param(True, 500, 1000, 328, 2, marks=SLOW),   # 4 x 4 tiles of 128 x 256 (2 x 4
                                                         # pairs) on one cluster
    pytest.param(False, 500, 1000, 328, 2, marks=SLOW),  # B (K, N): four 64-column boxes,
                                                         # each halved
    pytest.param(True, 1000, 504, 200, 4, marks=SLOW),   # two clusters; ragged M, N and K
    # K under a tile: B's whole boxes clipped alike.  In --full since session 24 (the
    # simulator proofs of the schedules' options): the fast tier compiles the cluster
    # pairs (test_tensor_cores' test_cluster_pairs_where_they_pay, its SASS) and runs the
    # schedules' family in the simulator (test_persistent_gemm_runs_correctly)
    pytest.param(False, 500, 1000, 40, 2, marks=SLOW),
])
def test_cluster_pair_gemm_runs_correctly(nt, m, n, k, sms, rng):
    """The plain GEMM as launched on a grid even along M with 4+ blocks an SM: retiled
    128 x 256, persistent, row tiles in pairs of a (2, 1, 1) cluster, each block
    multicasting its half of the B tile into both; the simulator checks the barrier
    protocol (a release missing in the peer hangs, an extra one is an error)."""
    from tileir.runtime.launcher import persistent_grid
    kernel = gemm_nt if nt else gemm
    a = rng.standard_normal((m, k)).astype(BF16)
    b = (rng.standard_normal((n, k)) if nt else rng.standard_normal((k, n))).astype(BF16)
    c = np.full((m, n), np.nan, BF16)
    args = (a, b, c, 128, 128, 64)
    grid = (ct.cdiv(m, 128), ct.cdiv(n, 128), 1)
    ck = kernel.compile(args, stage="gpu", target="sm_90a", grid=grid, sm_count=sms)
    assert ck.meta["cluster"] == [2, 1, 1] and ck.meta["persistent"]
    assert "multicast_mask" in ck.artifacts["gpu"]
    assert persistent_grid(ck.meta, hardware_grid(ck.meta, grid), sms) == (sms // 2 * 2, 1, 1)
    simulate(ck, hardware_grid(ck.meta, grid), args, sm_count=sms)
    ref = a.astype(np.float64) @ (b.astype(np.float64).T if nt else b.astype(np.float64))
    assert _close(c.astype(np.float64), ref, k)


@ct.kernel(persistent=True, num_warps=4)
def syrk(x, c, BM: ct.Constant[int], BK: ct.Constant[int]):
    """C = X @ X^T: both operands from one array."""
    acc = accumulate_awt(x, x, ct.zeros((BM, BM), dtype=ct.float32), ct.bid(0), ct.bid(1),
                         BM, BM, BK)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gemm_n_first(a, w, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """bid(0) walks N, bid(1) walks M: retiling widens axis 0, so pairs form along 1."""
    j = ct.bid(0)
    i = ct.bid(1)
    acc = accumulate_awt(a, w, ct.zeros((BM, BN), dtype=ct.float32), i, j, BM, BN, BK)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel(persistent=True, num_warps=8)
def guarded_gemm(a, w, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    """A product only where i * BM >= j * 64: the two row tiles of a pair may differ."""
    i = ct.bid(0)
    j = ct.bid(1)
    if i * BM >= j * 64:
        acc = accumulate_awt(a, w, ct.zeros((BM, BN), dtype=ct.float32), i, j, BM, BN, BK)
        ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel(persistent=True, num_warps=8)
def stolen_gemm(a, w, c, counter, NN: ct.Constant[int], BM: ct.Constant[int],
                BN: ct.Constant[int], BK: ct.Constant[int]):
    """Tiles taken from an atomic counter: the blocks of a pair would take others."""
    t = ct.atomic_add(counter, (0,), 1)
    i = t // NN
    j = t % NN
    acc = accumulate_awt(a, w, ct.zeros((BM, BN), dtype=ct.float32), i, j, BM, BN, BK)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@SLOW
def test_cluster_pairs_cover_one_array_twice_and_pairs_along_axis_1(rng):
    """X @ X^T pairs (B split by whole boxes keeps the same tensor map and clip as A);
    a grid whose axis 0 retiling widened pairs along axis 1; both exact in the
    simulator (small-integer operands)."""
    from tileir.kernel import hardware_grid
    x = rng.integers(-2, 3, (512, 256)).astype(BF16)
    c = np.full((512, 512), np.nan, np.float32)
    ck = syrk.compile((x, c, 128, 128), stage="gpu", target="sm_90a", grid=(4, 4, 1),
                      sm_count=2)
    assert ck.meta["cluster"] == [2, 1, 1]
    simulate(ck, hardware_grid(ck.meta, (4, 4, 1)), (x, c, 128, 128), sm_count=2)
    assert np.array_equal(c, x.astype(np.float64) @ x.astype(np.float64).T)
    a = rng.integers(-2, 3, (500, 136)).astype(BF16)
    w = rng.integers(-2, 3, (1000, 136)).astype(BF16)
    c = np.full((500, 1000), np.nan, np.float32)
    grid = (8, 4, 1)                                        # (N tiles, M tiles)
    args = (a, w, c, 128, 128, 64)
    ck = gemm_n_first.compile(args, stage="gpu", target="sm_90a", grid=grid, sm_count=2)
    assert ck.meta["cluster"] == [2, 1, 1] and ck.meta["grid_scale"] == [0, 2, 1]
    assert "tile.cluster_pairs = 1" in ck.artifacts["pipeline"]
    simulate(ck, hardware_grid(ck.meta, grid), args, sm_count=2)
    assert np.array_equal(c, a.astype(np.float64) @ w.astype(np.float64).T)


@SLOW
def test_no_cluster_pairs_where_the_two_blocks_could_differ(rng):
    """A branch around the K loop that depends on the row tile, and tiles taken from an
    atomic counter, are not paired (found by review: the first hung, the second mixed
    the blocks' tiles); both still run correctly."""
    from tileir.kernel import hardware_grid
    a = rng.integers(-2, 3, (512, 128)).astype(BF16)
    w = rng.integers(-2, 3, (1024, 128)).astype(BF16)
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    c = np.zeros((512, 1024), np.float32)
    args = (a, w, c, 128, 256, 64)
    ck = guarded_gemm.compile(args, stage="gpu", target="sm_90a", grid=(4, 4, 1), sm_count=2)
    assert "cluster" not in ck.meta
    simulate(ck, hardware_grid(ck.meta, (4, 4, 1)), args, sm_count=2)
    rows = np.arange(512)[:, None] // 128 * 128 >= np.arange(1024)[None, :] // 256 * 64
    assert np.array_equal(c, np.where(rows, ref, 0))
    c = np.zeros((512, 1024), np.float32)
    counter = np.zeros((1,), np.int32)
    args = (a, w, c, counter, 4, 128, 256, 64)
    ck = stolen_gemm.compile(args, stage="gpu", target="sm_90a", grid=(4, 4, 1), sm_count=2)
    assert "cluster" not in ck.meta
    simulate(ck, hardware_grid(ck.meta, (4, 4, 1)), args, sm_count=2)
    assert np.array_equal(c, ref) and counter[0] == 16


@pytest.mark.parametrize("target,m,n,k,sms", [
    pytest.param("sm_90a", 200, 136, 200, 5, marks=SLOW),  # 12 tiles of 4 K trips on 5
                                                           # blocks: 5 whole, 7 split
    pytest.param("sm_90a", 200, 136, 330, 7, marks=SLOW),  # 6 trips; 7 blocks: all 12 tiles
                                                           # in the split runs
    # 6 tiles of 3 trips (a ragged K tile) on 4 blocks.  In --full since session 24:
    # the fast tier keeps stream-K's workspace and partial sums in the IR
    # (test_stream_k_is_asked_for) and its batched walk in the simulator (test_bmm's
    # test_stream_k_walks_the_batch_last[0])
    pytest.param("sm_90a", 100, 136, 130, 4, marks=SLOW),
    pytest.param("sm_90a", 200, 136, 200, 3, marks=SLOW),  # 12 tiles on 3 blocks: whole
                                                           # waves, no split
    pytest.param("sm_80", 200, 136, 200, 5, marks=SLOW),   # cp.async rings, mma.sync
])
def test_stream_k_gemm_runs_correctly(target, m, n, k, sms, rng):
    """Stream-K: the tiles of the last waves are split along K between neighbouring
    blocks; a block stores its tail's partial sum, the block before adds it to the
    head it computed and stores the tile (blocks run last to first here, which is
    what the GPU's waits allow in any order)."""
    kernel = ct.kernel(gemm.fn, persistent=True, retile=False, num_warps=4, stream_k=True)
    tiles = (64, 64, 64 if target == "sm_90a" else 32)
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    c = np.full((m, n), np.nan, BF16)
    args = (a, b, c, *tiles)
    ck = kernel.compile(args, stage="gpu", target=target)
    assert ck.meta["workspace"] == 64 * 64 * 4 and "tile.partial_add" in ck.artifacts["pipeline"]
    simulate(ck, (ct.cdiv(m, 64), ct.cdiv(n, 64)), args, sm_count=sms)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert _close(c.astype(np.float64), ref, k)


def test_stream_k_is_asked_for():
    """Off by default (contiguous K runs cost the last waves their L2 reuse on the H100:
    docs/tensor-cores.md); `stream_k=True` turns it on for a qualifying kernel."""
    a = np.zeros((200, 200), BF16)
    args = (a, a, a, 64, 64, 64)
    on = ct.kernel(gemm.fn, persistent=True, retile=False, num_warps=4, stream_k=True)
    assert "workspace" in on.compile(args, stage="gpu", target="sm_90a").meta
    for off in (ct.kernel(gemm.fn, persistent=True, retile=False, num_warps=4),
                ct.kernel(gemm.fn, persistent=True, retile=False, num_warps=4, stream_k=False)):
        ck = off.compile(args, stage="gpu", target="sm_90a")
        assert "workspace" not in ck.meta and "tile.partial" not in ck.artifacts["pipeline"]


# Since session 24 (the policy: a kernel family's default configuration once or twice
# in the simulator, each option's simulator proof in --full): [grouped-sm_90a] too:
# test_persistent_gemm_runs_correctly[sm_90a-True-8-...] keeps a persistent ring running
# across tiles in the fast tier
@SLOW
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
@pytest.mark.parametrize("order", ["grouped", pytest.param("linear", marks=SLOW)])
def test_persistent_ring_runs_across_tiles_of_different_lengths(target, order, rng):
    """Without warp specialization a persistent kernel's ring runs on from tile to
    tile (the next tile's first copies are issued during this tile's last
    iterations): tiles of 1 to 6 trips, fewer than the ring's depth and more, each
    block's next tile longer or shorter than its current one."""
    m, n = 6 * 64, 3 * 64
    a = rng.standard_normal((m, m)).astype(BF16)
    b = rng.standard_normal((m, n)).astype(BF16)
    c = np.full((m, n), np.nan, BF16)
    args = (a, b, c, 64, 64, 64)
    kernel = ct.kernel(lower_gemm.fn, persistent=True, retile=False, num_warps=4,
                       block_order=order)
    ck = kernel.compile(args, stage="gpu", target=target)
    pipeline = ck.artifacts["pipeline"]
    assert pipeline.count("tile.ring_alloc") == 1 and "tile.is_producer" not in pipeline
    simulate(ck, (m // 64, n // 64), args)
    mask = np.kron(np.tril(np.ones((6, 6))), np.ones((64, 64)))
    ref = (a.astype(np.float64) * mask) @ b.astype(np.float64)
    assert _close(c.astype(np.float64), ref, m)


@pytest.mark.parametrize("target,t,dtype", [
    (target, t, dtype) for target in TARGETS
    for t, dtype in (("f32", np.float32), ("bf16", BF16), ("i32", np.int32), ("i1", np.bool_))
] + [("sm_90a", "f8E4M3FN", F8)])         # fp8 arithmetic rounds with sm_89+ instructions
def test_tile_constants_with_different_elements_run_correctly(target, t, dtype):
    """A non-splat constant is a table in global memory that every thread reads its
    elements from (2 warps over 32 x 16: elements in several registers a thread)."""
    table = np.arange(32 * 16).reshape(32, 16) % 7 - 3
    if t == "i1":
        table = table > 0
    x = np.ones((32, 16), dtype)
    y = np.zeros((32, 16), dtype)
    gpu = _simulate_mlir(table_kernel(t, table), [x, y], (1,), target)
    assert "llvm.mlir.global internal constant @__tile_table_0" in gpu
    want = ~table if t == "i1" else table.astype(np.float64) + 1
    assert (y.astype(np.float64) == np.asarray(want, np.float64)).all()


@pytest.mark.parametrize("target", TARGETS)
def test_an_element_at_run_time_indices_reaches_every_thread(target, rng):
    """tensor.extract with indices: the threads holding the element share it."""
    x = rng.standard_normal((32, 64)).astype(np.float32)
    for i, j in [(0, 0), (5, 17), (31, 63)]:
        y = np.full(64, np.nan, np.float32)
        _simulate_mlir(PICK, [x, y, np.int32(i), np.int32(j)], (1,), target)
        assert (y == x[i, j]).all()


@pytest.mark.parametrize("target", TARGETS)
def test_a_while_loop_carrying_tiles_runs_correctly(target, rng):
    """scf.while carrying a tile and a counter: doubles the tile until its first
    element passes a bound (a data-dependent trip count)."""
    x = (np.abs(rng.standard_normal(256)) + 0.5).astype(np.float32)
    x[0] = 1.0
    y = np.full(256, np.nan, np.float32)
    n = np.zeros(1, np.int32)
    gpu = _simulate_mlir(GROW, [x, y, n, np.float32(40.0)], (1,), target)
    assert "scf.while" in gpu
    assert n[0] == 6 and np.array_equal(y, x * 64)          # 1, 2, ..., 64 >= 40


def test_wide_wgmma_tile_runs_correctly(rng):
    got, ref = _gemm(gemm, "sm_90a", 128, 256, 128, (128, 256, 64), BF16, rng)
    assert _close(got, ref, 128)


@pytest.mark.parametrize("tiles,out,options", [
    ((128, 256, 64), BF16, {}),                     # 4 slabs of 64 columns in 2 buffers
    pytest.param((64, 64, 32), np.float32, {}, marks=SLOW),  # f32: slabs of 32 columns
    pytest.param((64, 128, 64), BF16, {"num_warps": 8},     # warpgroups split N: the
                 marks=SLOW),                                # tile, box by box
    pytest.param((128, 256, 64), BF16, {"persistent": True},   # stores in flight as the
                 marks=SLOW),                                   # next ring fills
    pytest.param((128, 256, 64), BF16, {"persistent": True, "warp_specialize": True},
                 marks=SLOW),
    # by warpgroups: 64-row boxes, bar.sync 2/3; in --full since session 24 (the
    # simulator proofs of an option's variants): tiles0 keeps the TMA store epilogue
    pytest.param((128, 256, 64), BF16, {"group": 4}, marks=SLOW),
    pytest.param((128, 256, 64), BF16, {"group": 4, "persistent": True,
                                        "warp_specialize": True}, marks=SLOW),
    pytest.param((128, 256, 64), BF16, {"gated": True},     # warps signal mbarriers,
                 marks=SLOW),                                # thread 0 stores
    pytest.param((128, 256, 64), BF16, {"gated": True, "persistent": True}, marks=SLOW),
    pytest.param((128, 256, 64), BF16, {"gated": True, "persistent": True,
                                        "warp_specialize": True}, marks=SLOW),
])
def test_tma_store_epilogue_runs_correctly(tiles, out, options, rng, monkeypatch):
    """The accumulator stored by TMA from shared memory (stmatrix for 16-bit results):
    ragged M and N (TMA drops what lies outside C), several tiles a block."""
    from tileir.backend.layout import tma_store
    options = dict(options)
    if "group" in options:
        monkeypatch.setattr(tma_store, "GROUP_WARPS", options.pop("group"))
    if "gated" in options:
        monkeypatch.setattr(tma_store, "GATED", options.pop("gated"))
    m, n, k = 200, 600, 128
    a = rng.standard_normal((m, k)).astype(BF16)
    w = rng.standard_normal((n, k)).astype(BF16)
    c = np.full((m, n), np.nan, out)
    args = (a, w, c, *tiles)
    kernel = ct.kernel(gemm_nt.fn, retile=False, **options)
    ck = kernel.compile(args, stage="gpu", target="sm_90a")
    assert "nvvm.cp.async.bulk.tensor.global.shared.cta" in ck.artifacts["gpu"]
    assert ("nvvm.stmatrix" in ck.artifacts["gpu"]) == (out == BF16)
    boxes = [tm["box"] for tm in ck.meta["tensor_maps"] if tm["param"] == 2]
    if tma_store.GROUP_WARPS == 4:
        assert [64, 64] in boxes
    if tma_store.GATED:
        assert boxes == [[128, 64]] and "nvvm.mbarrier.try_wait.parity" in ck.artifacts["gpu"]
    simulate(ck, (ct.cdiv(m, tiles[0]), ct.cdiv(n, tiles[1])), args)
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    assert _close(c.astype(np.float64), ref, k)


@ct.kernel
def two_products(a, b, c, d, BM: ct.Constant[int], BN: ct.Constant[int],
                 BK: ct.Constant[int]):
    """C = A @ B, then D = 2 A @ B again: the second loop's ring takes the shared
    memory the first store's TMA buffers used."""
    i = ct.bid(0)
    j = ct.bid(1)
    trips = ct.num_tiles(a, axis=1, shape=(BM, BK))
    acc = accumulate_ab(a, b, ct.zeros((BM, BN), dtype=ct.float32), i, j, trips, BM, BN, BK)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))
    acc2 = accumulate_ab(a, b, ct.zeros((BM, BN), dtype=ct.float32), i, j, trips, BM, BN, BK)
    ct.store(d, index=(i, j), tile=ct.astype(acc2 * 2.0, d.dtype))


# 40: clipped rows zeroed at the allocation.  In --full (0.6 s): 200 (a full block and a
# clipped one); [40] keeps the second ring's wait on the first store's bulk reads (one
# block, its rows clipped) in the fast tier
# Since session 24 [40] in --full too: the fast tier keeps the TMA store epilogue
# (test_tma_store_epilogue_runs_correctly[tiles0-...]) and the simulator's report of a
# buffer overwritten before the store's bulk reads
# (test_a_tma_store_buffer_overwritten_before_it_is_read_is_reported)
@pytest.mark.parametrize("m", [pytest.param(40, marks=SLOW),
                               pytest.param(200, marks=pytest.mark.slow)])
def test_a_ring_after_a_tma_store_waits_for_its_reads(m, rng):
    """The second ring's barriers and zeroed rows land where the first store's buffers
    were: its allocation waits for the bulk reads first (the simulator reports an
    overwrite of bytes a TMA store may still read otherwise)."""
    n, k = 256, 128
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    c = np.full((m, n), np.nan, BF16)
    d = np.full((m, n), np.nan, BF16)
    args = (a, b, c, d, 128, 256, 64)
    ck = ct.kernel(two_products.fn, retile=False).compile(args, stage="gpu", target="sm_90a")
    assert ck.artifacts["gpu"].count("cp.async.bulk.tensor.global.shared.cta") == 8
    simulate(ck, (ct.cdiv(m, 128), 1), args)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert _close(c.astype(np.float64), ref, k) and _close(d.astype(np.float64), 2 * ref, k)


def test_an_output_the_kernel_also_reads_is_stored_from_registers(rng):
    """C += A @ B loads C: its store keeps the register path (a later load would need
    the TMA store's global writes done), and the result is right."""
    m, n, k = 130, 72, 96
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    c = rng.standard_normal((m, n)).astype(BF16)
    ref = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    args = (a, b, c, 64, 64, 32)
    ck = gemm_accumulate.compile(args, stage="gpu", target="sm_90a")
    assert "cp.async.bulk.tensor.global.shared.cta" not in ck.artifacts["gpu"]
    simulate(ck, (ct.cdiv(m, 64), ct.cdiv(n, 64)), args)
    assert _close(c.astype(np.float64), ref, k)


def test_a_tma_store_buffer_overwritten_before_it_is_read_is_reported(monkeypatch, rng):
    """Without the waits, slab 2 of a 128 x 256 tile overwrites the buffer the store of
    slab 0 may still be reading."""
    from tileir.backend.gpu import context
    monkeypatch.setattr(context.LoweringContext, "wait_bulk_reads",
                        lambda self, pending=0: None)
    with pytest.raises(SimError, match="a TMA store may still be reading"):
        _gemm(ct.kernel(gemm.fn, retile=False), "sm_90a", 128, 256, 64, (128, 256, 64), BF16,
              rng)


# Since session 24 (the policy: a kernel family's default configuration once or twice
# in the simulator, each option's simulator proof in --full): sm_80 in --full;
# [sm_90a] keeps the examples' compiled code in the simulator, and test_backend compiles
# them for sm_80 (test_no_local_memory_spills[...-sm_80-...])
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
def test_memory_bound_examples_run_correctly(target, rng):
    m, n = 3, 1000
    x = (rng.standard_normal((m, n)) + 1).astype(np.float32)
    w, b = rng.standard_normal((2, n)).astype(np.float32)
    x64 = x.astype(np.float64)

    def run(kernel, args, grid):
        simulate(kernel.compile(args, stage="gpu", target=target), grid, args)

    y = np.full((m, n), np.nan, np.float32)
    run(softmax.softmax, (x, y, 1024), (m,))
    e = np.exp(x64 - x64.max(1, keepdims=True))
    assert np.allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    run(rmsnorm.rmsnorm, (x, w, y, 1e-6, 1024), (m,))
    assert np.allclose(y, x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True) + 1e-6) * w,
                       rtol=1e-5, atol=1e-5)
    run(layernorm.layernorm, (x, w, b, y, 1e-5, 1024), (m,))
    mu = x64.mean(1, keepdims=True)
    ref = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(1, keepdims=True) + 1e-5) * w + b
    assert np.allclose(y, ref, rtol=1e-5, atol=1e-5)
    a, c = rng.standard_normal((2, 2500)).astype(np.float32)
    out = np.full_like(a, np.nan)
    run(vector_add.vector_add, (a, c, out, 1024), (3,))
    assert (out == a + c).all()
    t = rng.standard_normal((100, 77)).astype(np.float32)
    tt = np.full((77, 100), np.nan, np.float32)
    run(transpose.transpose, (t, tt, 64, 64), (2, 2))
    assert (tt == t.T).all()


@ct.kernel
def shifted_copy(x, y, SHIFT: ct.Constant[int], TILE: ct.Constant[int]):
    """y's tile i is x's tile i - SHIFT, -inf where x has none."""
    i = ct.bid(0)
    t = ct.load(x, index=(i - SHIFT,), shape=(TILE,), padding_mode=ct.PaddingMode.NEG_INF)
    ct.store(y, index=(i,), tile=t)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype, n", [(np.float32, 1000), (np.float32, 1003),
                                      (ml_dtypes.bfloat16, 7168), (ml_dtypes.bfloat16, 7170)])
def test_loads_at_the_edge_pad_groups_partly_or_wholly_outside(target, dtype, n, rng):
    """Groups (16-byte vectors) of a tile past the array's end: whole ones read the
    padding without per-element masks, straddling ones are masked per element; a tile
    index below 0 reads padding too."""
    x = rng.standard_normal(n).astype(dtype)
    tile = 1024 if n < 2000 else 8192
    blocks = -(-n // tile) + 1
    for shift in (0, 1):
        y = np.zeros(blocks * tile, dtype)
        args = (x, y, shift, tile)
        assert shifted_copy.classify(args, gpu=True)[0][1].aligned   # 16-byte groups
        simulate(shifted_copy.compile(args, stage="gpu", target=target), (blocks,), args)
        ref = np.full(blocks * tile, -np.inf)
        ref[shift * tile:shift * tile + n] = x.astype(np.float64)
        np.testing.assert_array_equal(y.astype(np.float64), ref)


@ct.kernel
def pair_copy(x, y, TM: ct.Constant[int]):
    """Tiles two columns wide: a thread's group is a vector of two elements."""
    i, j = ct.bid(0), ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(TM, 2), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(i, j), tile=t)


@ct.kernel
def pair_copy_unpadded(x, y):
    i = ct.bid(0)
    ct.store(y, index=(i, 0), tile=ct.load(x, index=(i, 0), shape=(64, 2)))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int8, np.float64])
def test_two_element_groups_at_the_edge_compile_and_pad(target, dtype, rng):
    """A two-element group straddling the array's end is read element by element:
    LLVM 22's NVPTX aborted the process on some two-element masked loads with a
    passthru (here: the unpadded copy of a one-column array).  Both kernels reach
    PTX on both targets, and the simulator gives the padding and the elements."""
    # rows of 16 elements: 16-byte aligned, so the groups are two-element vectors
    x = (rng.standard_normal((37, 16)) * 10 + 20).astype(dtype)       # no zeros
    # y one column wider than x takes the padding; as wide, the store is masked too
    for kernel, cols, ycols, grid, args in [
            (pair_copy, 5, 6, (2, 3), lambda x, y: (x, y, 32)),
            (pair_copy_unpadded, 1, 1, (1,), lambda x, y: (x, y))]:
        xv = x[:, :cols]
        y = np.full((37, 16), 7, dtype)
        a = args(xv, y[:, :ycols])
        assert kernel.classify(a, gpu=True)[0][1].aligned
        ck = kernel.compile(a, stage="ptx", target=target)
        assert ".entry" in ck.artifacts["ptx"]
        simulate(ck, grid, a)
        ref = np.full((37, 16), 7.0)
        ref[:, :cols] = xv.astype(np.float64)
        ref[:, cols:ycols] = 0                  # the padding of the straddling group
        np.testing.assert_array_equal(y.astype(np.float64), ref)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [1000, 4096, 300])
def test_a_chunked_row_reduction_loads_one_chunk_ahead(target, n, rng):
    """The loop's loads into registers are issued one iteration ahead (the pipeline
    stage rotates the loop: the next chunk's load before this chunk's math); the
    results are the same, ragged last chunk (-inf padding) and one chunk included."""
    x = rng.standard_normal((8, n)).astype(np.float32)
    out = np.full(8, np.nan, np.float32)
    args = (x, out, 4, 512)
    ck = row_logsumexp.compile(args, stage="gpu", target=target)
    pipeline = ck.artifacts["pipeline"]
    loop = pipeline[pipeline.index("scf.for"):]
    assert loop.index('"tile.load"') < loop.index("math.exp")   # the next chunk first
    assert pipeline.count('"tile.load"') == 2                    # before and in the loop
    simulate(ck, (2,), args)
    ref = np.log(np.exp(x.astype(np.float64)).sum(1))
    assert np.allclose(out, ref, rtol=1e-5, atol=1e-5)


@ct.kernel
def row_sums(x, out, TM: ct.Constant[int], TN: ct.Constant[int]):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(i,), tile=ct.sum(t, axis=1))


@pytest.mark.parametrize("target", TARGETS)
def test_row_statistics_reach_their_own_rows(target, rng):
    # one warp per row and one register per thread: the sums change layout through
    # shared memory (a thread's registers being equal says nothing of other threads')
    x = rng.standard_normal((32, 512)).astype(np.float32)
    out = np.full(32, np.nan, np.float32)
    args = (x, out, 16, 512)
    simulate(row_sums.compile(args, stage="gpu", target=target), (2,), args)
    assert np.allclose(out, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------
# The tier catches what it should
# ---------------------------------------------------------------------------
def _fresh(kernel):
    """The same kernel with nothing compiled yet (a mutation must reach the compiler)."""
    return ct.kernel(kernel.fn)


def test_a_wrong_transaction_count_would_hang(monkeypatch, rng):
    from mlir.dialects import arith
    from tileir.backend.gpu.rules import ring
    real = ring.Ring.tx_value
    monkeypatch.setattr(ring.Ring, "tx_value",
                        lambda self, cx: arith.addi(real(self, cx), cx.const(16)))
    with pytest.raises(SimError, match="would hang"):
        _gemm(_fresh(gemm), "sm_90a", 64, 64, 64, (64, 64, 64), BF16, rng)


def test_rows_a_clipped_box_leaves_out_must_be_zeroed(monkeypatch, rng):
    """A 17-row A in a 64-row tile: the box is cut to 17 rows; without the ring's
    zeroing of rows 17..63 the product reads shared memory nothing wrote."""
    from tileir.backend.gpu.rules import ring
    monkeypatch.setattr(ring, "_zero_clipped_rows", lambda cx, r, clips: None)
    with pytest.raises(SimError, match="reads bytes nothing wrote"):
        _gemm(_fresh(gemm), "sm_90a", 17, 64, 64, (64, 64, 64), BF16, rng)


def test_a_box_the_kernel_does_not_expect_would_hang(monkeypatch, rng):
    """The runtime and the kernel cut the box the same way: a runtime that did not cut
    it would deliver more bytes than the slot's barrier expects."""
    from tileir.runtime import tensor_maps
    monkeypatch.setattr(tensor_maps, "clipped_box", lambda box, clip, shape: list(box))
    with pytest.raises(SimError, match="would hang"):
        _gemm(_fresh(gemm), "sm_90a", 17, 64, 64, (64, 64, 64), BF16, rng)


def test_a_swizzle_the_hardware_does_not_use_gives_wrong_numbers(monkeypatch, rng):
    """Shared tiles written by threads with a wrong swizzle: wgmma, which swizzles in
    hardware, reads other elements.  (TMA copies swizzle in hardware too, so an
    operand that arrives by TMA is right whatever the compiler thinks.)"""
    from tileir.backend.layout import mma_layouts
    monkeypatch.setattr(mma_layouts, "swizzle_bits", lambda off, swz: off)
    got, ref = _gemm(_fresh(gemm), "sm_90a", 64, 64, 37, (64, 64, 64), BF16, rng)  # unaligned
    assert not _close(got, ref, 37)


def test_an_access_outside_the_arrays_is_reported(monkeypatch, rng):
    """A store that forgets the array's edge writes past it."""
    from tileir.backend.gpu import memory
    monkeypatch.setattr(memory._Addressing, "thread_in_bounds",
                        lambda self: memory.arith.ConstantOp(
                            memory.ir.IntegerType.get_signless(1), 1).result)
    with pytest.raises(SimError, match="outside every argument array"):
        x = np.ones(100, np.float32)
        y = np.zeros(100, np.float32)
        simulate(_fresh(vector_add.vector_add).compile((x, x, y, 128), stage="gpu",
                                                       target="sm_90a"), (1,), (x, x, y, 128))


# Since session 24 (the policy: a kernel family's default configuration once or twice
# in the simulator, each option's simulator proof in --full): sm_80 in --full;
# [sm_90a] keeps the LLM-layer examples' compiled code in the simulator
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=SLOW)])
def test_llm_ops_run_correctly(target, rng):
    """The LLM-layer examples (examples/llm_ops.py) as compiled: RoPE's broadcast
    cos / sin rows loaded replicated, SwiGLU, the fused residual RMSNorm, the
    vocabulary-wide online softmax and log-sum-exp (two chunked loops)."""
    from tileir.examples import llm_ops
    m, n, heads, half = 3, 200, 4, 16

    def run(kernel, grid, args):
        simulate(kernel.compile(args, stage="gpu", target=target), grid, args)

    x, r = rng.standard_normal((m, n)).astype(BF16), rng.standard_normal((m, n)).astype(BF16)
    w = rng.standard_normal(n).astype(BF16)
    y = np.full((m, n), np.nan, BF16)
    h = x.astype(np.float64) + r.astype(np.float64)
    run(llm_ops.add_rmsnorm, (m,), (x, r, w, y, 1e-6, 256))
    want = h / np.sqrt((h * h).mean(1, keepdims=True) + 1e-6) * w.astype(np.float64)
    np.testing.assert_allclose(r.astype(np.float64), h, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2e-2, atol=2e-2)

    q = rng.standard_normal((m, heads, 2 * half)).astype(BF16)
    angle = rng.uniform(0, 6.3, (m, half))
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    out = np.full_like(q, np.nan)
    run(llm_ops.rope, (m,), (q, cos, sin, out, heads, half))
    q64 = q.astype(np.float64)
    x1, x2, c, s = q64[..., :half], q64[..., half:], cos[:, None, :], sin[:, None, :]
    want = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-2, atol=2e-2)

    v = (rng.standard_normal((m, 3 * n + 7)) * 4).astype(BF16)
    lse = np.full(m, np.nan, np.float32)
    sm = np.full_like(v, np.nan)
    run(llm_ops.vocab_logsumexp, (m,), (v, lse, 128))
    run(llm_ops.vocab_softmax, (m,), (v, sm, 128))
    v64 = v.astype(np.float64)
    e = np.exp(v64 - v64.max(1, keepdims=True))
    np.testing.assert_allclose(lse, v64.max(1) + np.log(e.sum(1)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sm.astype(np.float64), e / e.sum(1, keepdims=True),
                               rtol=2e-2, atol=1e-4)


def test_a_shared_store_onto_a_live_mbarrier_is_reported():
    """Stores of many offsets at once (a TMA box's) are checked against each barrier's
    8 bytes: touching them is an error, the bytes either side are not."""
    from tileir.sim import hardware as hw
    shared = hw.Shared(256)
    shared.barriers[64] = hw.Barrier(1, 1)
    data = np.zeros((3, 8), np.uint8)
    shared.write(np.array([0, 56, 72]), data)                    # up to 63, from 72 on
    for touching in ([0, 57, 200], [71, 8, 16], [64, 64, 64]):
        with pytest.raises(SimError, match="overwrites a live mbarrier"):
            shared.write(np.array(touching), data)
    del shared.barriers[64]                                      # invalidated
    shared.write(np.array([64, 0, 8]), data)


# ---------------------------------------------------------------------------
# named barriers, replayed per warp as the hardware counts them (hardware.NamedBarriers)
# ---------------------------------------------------------------------------
class _At:
    """An op's stand-in: what the replay's messages name."""

    def __init__(self, where: str):
        self.location = where


def _warps(*warps) -> np.ndarray:
    mask = np.zeros(8 * 32, bool)
    for w in warps:
        mask[32 * w:32 * (w + 1)] = True
    return mask


def _turns(named, rounds: int, start: bool = True, end: bool = True):
    """Two warpgroups of 4 warps taking `rounds` turns each at barriers 6 + w: wait for
    mine, pass to the other's; warpgroup 1 passes first, warpgroup 0 takes its last."""
    wg0, wg1 = _warps(0, 1, 2, 3), _warps(4, 5, 6, 7)
    if start:
        named.record("arrive", np.full(256, 6), 256, wg1, _At("start"))
    for _ in range(rounds):
        named.record("sync", np.repeat([6, 7], 128), 256, wg0 | wg1, _At("wait"))
        named.record("arrive", np.repeat([7, 6], 128), 256, wg0 | wg1, _At("pass"))
    if end:
        named.record("sync", np.full(256, 6), 256, wg0, _At("end"))


@pytest.mark.parametrize("rounds", [0, 1, 5])
def test_named_barriers_taken_in_turns_complete(rounds):
    from tileir.sim.hardware import NamedBarriers
    named = NamedBarriers()
    _turns(named, rounds)
    named.record("sync", np.ones(256, int), 256, _warps(*range(8)), _At("exchange"))
    assert named.check() is None


def test_a_value_asked_to_be_uniform_is_the_active_threads_one_value(rng):
    """rules.uniform (a loop's bounds, a wgmma descriptor): the value all active threads
    hold; threads that differ, or none active, are an error naming the values."""
    from tileir.sim.rules import uniform
    x = rng.integers(-5, 5, 256)
    mask = np.zeros(256, bool)
    mask[rng.choice(256, 40, replace=False)] = True
    x[mask] = 9
    assert uniform(x, mask, "a bound") == 9 and type(uniform(x, mask, "a bound")) is int
    x[np.nonzero(mask)[0][-1]] = -3                 # the last active thread differs
    with pytest.raises(SimError, match=r"a bound differs between threads: \[-3  9\]"):
        uniform(x, mask, "a bound")
    with pytest.raises(SimError, match=r"a bound differs between threads: \[\]"):
        uniform(x, np.zeros(256, bool), "a bound")


def test_named_barrier_arrivals_are_recorded_per_warp_and_id_in_order(rng):
    """`record` keeps, for each warp in order and each barrier id its active threads
    reach in order, how many arrive: threads of one warp at different ids (a divergent
    `bar.sync id`) are counted apart, inactive threads not at all."""
    from tileir.sim.hardware import NamedBarriers
    ids = rng.integers(0, 16, 256)
    mask = rng.random(256) < 0.7
    mask[64:96] = False                         # warp 2 does not take part
    named = NamedBarriers()
    named.record("sync", ids, 192, mask, _At("here"))
    want = {}
    for t in np.nonzero(mask)[0]:
        key = (int(t) // 32, int(ids[t]))
        want[key] = want.get(key, 0) + 1
    got = [(w, bar, n) for w, events in named.events.items()
           for kind, bar, count, n, at in events]
    assert got == [(w, bar, n) for (w, bar), n in sorted(want.items())]
    assert list(named.events) == sorted({w for w, _ in want}) and 2 not in named.events
    assert all(e[0] == "sync" and e[2] == 192 and e[4].location == "here"
               for events in named.events.values() for e in events)


@pytest.mark.parametrize("change,error", [
    ({"start": False}, r"warp 0 waits at barrier 6 \(wait\) with 128 of its 256"),
    ({"end": False}, "barrier 6 is left with 128 of 256 arrivals"),
    ({"exchange": 6}, r"barrier 6 is used for 256 threads at \w+ and for 128 at exchange")])
def test_named_barriers_that_hang_or_collide_are_reported(change, error):
    # the start or the end left out; or warpgroup 1 syncing its own 128 threads on
    # barrier 6 after its turns (an exchange given a turn's id), whose phase then
    # mixes with a turn's
    from tileir.sim.hardware import NamedBarriers
    named = NamedBarriers()
    change = dict(change)
    bar = change.pop("exchange", None)
    _turns(named, 2, **change)
    if bar is not None:
        named.record("sync", np.full(256, bar), 128, _warps(4, 5, 6, 7), _At("exchange"))
    assert re.search(error, named.check() or ""), named.check()
