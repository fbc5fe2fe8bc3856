"""Kernels fit the chip: shared memory is a budget the compiler spends (backend/layout/budget.py),
and a large tile a loop only reduces afterwards is reduced in the loop
(passes/reassociate_reductions.py).

The kernels are the shapes of two cuTile samples that cuTile compiles and tileir used
to refuse, written here in our own words: a batched GEMM of 128 x 256 x 128 tiles
(fp16, and fp8 summed into f32) with the batch on the grid's first axis, and
LayerNorm's backward dW/dB reduction (two (32, 1024) f32 accumulators) on a grid of
two blocks; and the plain 2-d GEMM of 128 x 256 x 128 fp16 tiles on sm_80."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.dialect import TileIRError
from tileir.sim import simulate
from tileir.tools import aot

ZERO = ct.PaddingMode.ZERO
LIMIT = {"sm_90a": 232448, "sm_80": 166912}


@ct.kernel
def batched(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    z, i, j = ct.bid(0), ct.bid(1), ct.bid(2)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[2], TK)):
        a = ct.load(A, index=(z, i, k), shape=(1, TM, TK), padding_mode=ZERO)
        b = ct.load(B, index=(z, k, j), shape=(1, TK, TN), padding_mode=ZERO)
        acc = ct.mma(ct.reshape(a, (TM, TK)), ct.reshape(b, (TK, TN)), acc=acc)
    ct.store(C, index=(z, i, j), tile=ct.reshape(ct.astype(acc, C.dtype), (1, TM, TN)))


@ct.kernel
def gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
        b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(i, j), tile=acc.astype(C.dtype))


@ct.kernel
def column_sums(DW, DB, SW, SB, TM: ct.Constant[int], TN: ct.Constant[int]):
    """Partial gradients (rows of DW, DB) summed per column, TM rows at a time."""
    j = ct.bid(0)
    dw = ct.zeros((TM, TN), dtype=ct.float32)
    db = ct.zeros((TM, TN), dtype=ct.float32)
    for i in range(ct.num_tiles(DW, axis=0, shape=(TM, TN))):
        dw += ct.load(DW, index=(i, j), shape=(TM, TN), padding_mode=ZERO)
        db += ct.load(DB, index=(i, j), shape=(TM, TN), padding_mode=ZERO)
    ct.store(SW, index=(j,), tile=ct.sum(dw, axis=0).astype(SW.dtype))
    ct.store(SB, index=(j,), tile=ct.sum(db, axis=0).astype(SB.dtype))


@ct.kernel
def transpose_huge(X, Y, T: ct.Constant[int]):
    t = ct.load(X, index=(0, 0), shape=(T, T))
    ct.store(Y, index=(0, 0), tile=ct.transpose(t))


def _no_spills(ck) -> bool:
    return ck.spills == (0, 0)


@pytest.mark.parametrize("dtype,out", [pytest.param(np.float16, np.float16, marks=pytest.mark.slow),
                                       (ml_dtypes.float8_e4m3fn, np.float32)])
def test_the_batched_sample_fits_sm90a_with_its_epilogue(dtype, out):
    # cuTile's BatchMatMul sample: batch 4, 512 x 256 @ 256 x 1024, 128 x 256 x 128
    # tiles, grid (4, 4, 4).  The fp8 ring was planned 7 deep beside 81 KiB that only
    # lowering knew of (an operand staged for wgmma, the epilogue's exchange).
    a = np.zeros((4, 512, 256), dtype)
    b = np.zeros((4, 256, 1024), dtype)
    c = np.zeros((4, 512, 1024), out)
    ck = batched.compile((a, b, c, 128, 256, 128), target="sm_90a", grid=(4, 4, 4),
                         sm_count=132)
    assert ck.meta["shared_bytes"] <= LIMIT["sm_90a"]
    assert ck.cubin and _no_spills(ck), ck.ptxas_report
    if dtype is not np.float16:
        assert "stages" in ck.meta["fit"] and "232448" in ck.meta["fit"]


@pytest.mark.parametrize("kernel,shape", [(gemm, 2),
                                          pytest.param(batched, 3, marks=pytest.mark.slow)])
def test_sm80_k_tiles_are_split_when_two_stages_do_not_fit(kernel, shape):
    # 2 x (128 x 128 + 128 x 256) fp16 = 192 KiB > 163 KiB: K tiles of 64, 3 stages
    # (a grid of several waves: a small one would get narrower tiles first)
    a = np.zeros((8,) * (shape - 2) + (1024, 1024) if shape == 3 else (4096, 4096),
                 np.float16)
    grid = (32, 16, 1) if shape == 2 else (8, 8, 4)
    ck = kernel.compile((a, a, a, 128, 256, 128), target="sm_80", grid=grid, sm_count=132)
    assert "K tiles 2 times shorter" in ck.meta["fit"]
    assert ck.meta["shared_bytes"] == 3 * (128 * 64 + 64 * 256) * 2
    assert _no_spills(ck), ck.ptxas_report


# in --full: test_sm80_k_tiles_are_split_when_two_stages_do_not_fit keeps the fit, and
# test_aot's test_tile_compile_fills_the_cache_for_each_target keeps tile-compile
@pytest.mark.slow
def test_tile_compile_builds_the_sm80_gemm_that_did_not_fit(tmp_path, capsys):
    assert aot.main([f"{__name__}:gemm", "--args", "f16[2],f16[2],f16[2],128,256,128",
                     "--target", "sm_80", "--cache-dir", str(tmp_path)]) == 0
    assert "sm_80" in capsys.readouterr().out


def test_num_stages_is_a_hint_the_budget_bounds():
    a = np.zeros((1024, 1024), ml_dtypes.bfloat16)
    ck = ct.kernel(gemm.fn, num_stages=8).compile((a, a, a, 128, 256, 64), target="sm_90a")
    assert ck.meta["shared_bytes"] <= LIMIT["sm_90a"]
    assert "a ring of 8 x 49152 B" in ck.meta["fit"], ck.meta["fit"]


@pytest.mark.parametrize("target", [pytest.param("sm_90a", marks=pytest.mark.slow), "sm_80"])
def test_the_fitted_gemm_computes_the_product_in_the_simulator(target):
    # one 128 x 256 block over K = 256: four 64-long K tiles on sm_80 (split), two
    # 128-long ones on sm_90a; ragged M and N leave padding in the tile
    rng = np.random.default_rng()
    a = rng.standard_normal((100, 256)).astype(np.float16)
    b = rng.standard_normal((256, 200)).astype(np.float16)
    c = np.full((100, 200), np.nan, np.float32)
    ck = gemm.compile((a, b, c, 128, 256, 128), stage="gpu", target=target)
    if target == "sm_80":
        assert "K tiles 2 times shorter" in ck.meta["fit"]
    simulate(ck, (1, 1), (a, b, c, 128, 256, 128))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=pytest.mark.slow)])
def test_column_sums_on_a_two_block_grid_compile_and_compute(target):
    # cuTile's LayerNorm backward dW/dB shape: (32, 1024) accumulators, N = 2048 (2
    # blocks).  It asked 2 359 296 bytes of shared memory before the reassociation.
    rng = np.random.default_rng()
    dw = rng.standard_normal((100, 2048)).astype(np.float32)
    db = rng.standard_normal((100, 2048)).astype(np.float32)
    sw, sb = np.full(2048, np.nan, np.float32), np.full(2048, np.nan, np.float32)
    args = (dw, db, sw, sb, 32, 1024)
    ck = column_sums.compile(args, target=target, grid=(2,), sm_count=132)
    assert ck.meta["shared_bytes"] <= LIMIT[target]
    ct.launch(None, (2,), column_sums, args)            # the interpreter
    np.testing.assert_allclose(sw, dw.sum(0), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(sb, db.sum(0), rtol=1e-5, atol=1e-4)


def test_a_kernel_no_choice_fits_is_refused_with_the_numbers_and_the_knobs():
    x = np.zeros((512, 512), np.float32)
    with pytest.raises(TileIRError) as info:
        transpose_huge.compile((x, x, 512), target="sm_90a")
    text = str(info.value)
    assert "test_budget.py" in text.splitlines()[0], text
    assert "kernel 'transpose_huge' needs" in text and "sm_90a has 232448" in text
    assert "use smaller tiles" in text


@ct.kernel
def gemm_residual(A, B, R, C, TM: ct.Constant[int], TN: ct.Constant[int],
                  TK: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[1], TK)):
        a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
        b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
        acc = ct.mma(a, b, acc=acc)
    r = ct.astype(ct.load(R, index=(i, j), shape=(TM, TN), padding_mode=ZERO), ct.float32)
    ct.store(C, index=(i, j), tile=ct.astype(acc + r, C.dtype))


def test_rings_are_planned_again_for_the_blocks_ptxas_registers_allow():
    # The residual epilogue of a 128 x 128 x 64 GEMM: the estimate (the accumulator and
    # OTHER_REGS a thread) lets two blocks share an SM, so the rings got half its shared
    # memory (3 stages); ptxas gives ~150 registers a thread x 256 threads, one block.
    # The driver sees it after `cubin` and plans the rings again for one block (4
    # stages), saying so in the kernel's `fit`; the plain GEMM keeps its plan.
    bf = ml_dtypes.bfloat16
    m, n, k = 2048, 4096, 4096
    a, b, c = np.zeros((m, k), bf), np.zeros((k, n), bf), np.zeros((m, n), bf)
    grid = (m // 128, n // 128, 1)
    cases = ((gemm_residual, (a, b, c, c, 128, 128, 64)), (gemm, (a, b, c, 128, 128, 64)))
    fits = []
    for kernel, args in cases:
        ck = kernel.compile(args, target="sm_90a", grid=grid, sm_count=132)
        regs = int(re.search(r"Used (\d+) registers", ck.ptxas_report).group(1))
        blocks = 65536 // (-(-regs // 8) * 8 * ck.meta["num_threads"])
        stages = int(re.search(r"stages = (\d+)", ck.artifacts["pipeline"]).group(1))
        fits.append((blocks, stages, ck.meta.get("fit") or "", ck.meta["shared_bytes"]))
    (blocks, stages, note, smem), (plain_blocks, plain_stages, plain_note, _) = fits
    assert blocks == 1 and stages == 4, fits
    assert "registers: ptxas gave" in note and "planned again for 1" in note, note
    assert smem <= LIMIT["sm_90a"]
    assert plain_blocks == 2 and plain_stages == 3 and "registers" not in plain_note, fits
