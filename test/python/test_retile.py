"""Retiling a grid axis (tile-retile-blocks, tileir.backend.layout.retile): the launcher's
grid wish, the kernel option, the analysis on real kernels, the grid mapping, and
retiled GEMMs run in the simulator against a float64 reference."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.backend.layout.grid_wish import grid_wish, short_dims
from tileir.errors import TileValueError
from tileir.examples import softmax
from tileir.kernel import hardware_grid, mlir_context
from tileir.sim import simulate

from test_tensor_cores import gemm, gemm_nt, linear_silu

BF16 = ml_dtypes.bfloat16


# ---------------------------------------------------------------------------
# What a grid asks for
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("grid,wish", [
    ((32, 32, 1), "wide:3"),        # 1024 blocks on 132 SMs: wider tiles, both axes even
    ((33, 32, 1), "wide:2"),        # only axis 1 can be coarsened
    ((33, 33, 1), None),            # no even axis: nothing to coarsen without new tiles
    ((16, 16, 1), None),            # 256 blocks: about two waves, as written
    ((1, 48, 1), "narrow:2"),       # a decode GEMM: 96 blocks still one per SM
    ((1, 32, 1), "narrow:4"),
    ((1, 66, 1), "narrow:2"),
    ((1, 67, 1), None),
])
def test_the_grid_says_what_it_wants(grid, wish):
    assert grid_wish(grid, 132) == wish


def test_short_arrays_ask_for_shorter_tiles():
    """Dims of at most 64 elements are named in the wish (any extent up to 64 gives the
    same item, so decode batches of 1 to 64 rows share one compiled variant)."""
    assert short_dims(["a", "b", "n"], [(64, 4096), (65, 3), None]) == ["a.0", "b.1"]
    assert grid_wish((1, 32, 1), 132, ["a.0", "c.0"]) == "narrow:4;short:a.0,c.0"
    assert grid_wish((16, 16, 1), 132, ["a.0"]) == "short:a.0"
    w = np.zeros((4096, 4096), BF16)
    for m in (1, 16, 64):
        a = np.zeros((m, 4096), BF16)
        assert gemm_nt.grid_wish((1, 32, 1), 132, (a, w, a, 128, 128, 64)) == \
            "narrow:4;short:a.0,c.0"
    a = np.zeros((65, 4096), BF16)
    assert gemm_nt.grid_wish((1, 32, 1), 132, (a, w, a, 128, 128, 64)) == "narrow:4"


def test_only_kernels_that_multiply_retile(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    # (element-wise kernels name their free grid axes: tile-cluster-rows may use one)
    assert softmax.softmax.grid_wish((1000, 1, 1), 132) == "free:6"
    assert softmax.softmax.grid_wish((1000, 2, 3), 132) == "swap:1"
    assert softmax.softmax.grid_wish((1, 1, 1), 0) is None
    assert gemm.grid_wish((32, 32, 1), 132) == "wide:3"
    ck = softmax.softmax.compile((x, x, 8), target="sm_90a", stage="gpu", grid=(1000,))
    assert "grid_scale" not in ck.meta


@pytest.mark.parametrize("bad", [(1, 3), (3, 2), (1, 1), (1, 16), (True, 2), (1, True), 2,
                                 (1, 0.3), "wide"])
def test_the_retile_option_is_checked(bad):
    k = ct.kernel(gemm.fn, retile=bad)
    a = np.zeros((64, 64), BF16)
    with pytest.raises(TileValueError, match="option retile must be"):
        k.compile((a, a, a, 64, 64, 64), stage="layout", target="sm_90a")


# ---------------------------------------------------------------------------
# What the compiler does with it
# ---------------------------------------------------------------------------
def _scale(kernel, grid, target="sm_90a", sms=132, tiles=(128, 128, 64)):
    a = np.zeros((4096, 4096), BF16)
    ck = kernel.compile((a, a, a, *tiles), stage="gpu", target=target, grid=grid,
                        sm_count=sms)
    return ck.meta.get("grid_scale")


def test_gemms_take_wider_tiles_on_large_grids_and_narrower_on_small_ones():
    assert _scale(gemm, (32, 32)) == [1, 2, 1]              # N: 128 -> 256
    assert _scale(gemm_nt, (32, 32)) == [1, 2, 1]           # B as an (N, K) weight
    assert _scale(gemm, (32, 31)) == [0, 2, 1]              # only M can grow
    assert _scale(gemm, (1, 48)) == [1, 1, 2]               # decode: N 128 -> 64
    assert _scale(gemm, (1, 32)) == [1, 1, 4]               # N 128 -> 32
    assert _scale(gemm, (16, 16)) is None
    assert _scale(gemm, (32, 32), tiles=(128, 256, 64)) is None   # already 128 x 256
    assert _scale(gemm, (32, 32), target="sm_80") is None   # mma.sync tiles that wide spill
    assert _scale(gemm, (1, 32), target="sm_80") == [1, 1, 4]
    assert _scale(ct.kernel(gemm.fn, retile=False), (32, 32)) is None
    # 4 warps asked for: a 128 x 256 accumulator would be 256 registers a thread
    # (ptxas spilled 5.7 KB, 0.06x cuBLAS on the H100); 64-row tiles may still widen
    assert _scale(ct.kernel(gemm.fn, num_warps=4), (32, 32)) is None
    assert _scale(ct.kernel(gemm.fn, num_warps=4), (64, 32), tiles=(64, 128, 64)) == [1, 2, 1]


def test_an_explicit_retile_applies_without_a_grid():
    a = np.zeros((256, 256), BF16)
    ck = ct.kernel(gemm.fn, retile=(1, 0.5)).compile((a, a, a, 64, 64, 64), stage="gpu",
                                                     target="sm_90a")
    assert ck.meta["grid_scale"] == [1, 1, 2]
    assert "tensor<64x32xf32" in ck.artifacts["layout"]


def test_the_launch_grid_maps_to_the_hardware_grid():
    meta = {"name": "k", "grid_scale": [1, 2, 1]}
    assert hardware_grid(meta, (3, 8, 1)) == (3, 4, 1)
    assert hardware_grid({"name": "k", "grid_scale": [0, 1, 4]}, (3, 5, 1)) == (12, 5, 1)
    assert hardware_grid({"name": "k"}, (3, 5, 1)) == (3, 5, 1)
    with pytest.raises(TileValueError, match="axis 1 .* must be a multiple of 2"):
        hardware_grid(meta, (3, 7, 1))


# ---------------------------------------------------------------------------
# Retiled kernels compute the same numbers
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("target,sms,kernel,nt,m,n,scale", [
    ("sm_90a", 1, gemm, False, 130, 500, [1, 2, 1]),         # wide; the last tile ragged
    ("sm_90a", 24, gemm_nt, True, 70, 500, [1, 1, 2]),       # narrow, (N, K) weight
    pytest.param("sm_80", 32, gemm_nt, True, 70, 250, [1, 1, 4],   # narrow on mma.sync
                 marks=pytest.mark.slow),
])
def test_retiled_gemms_run_correctly(target, sms, kernel, nt, m, n, scale, rng):
    k = 96
    tiles = (64, 128, 32)
    a = rng.standard_normal((m, k)).astype(BF16)
    b = (rng.standard_normal((n, k)) if nt else rng.standard_normal((k, n))).astype(BF16)
    c = np.full((m, n), np.nan, BF16)
    args = (a, b, c, *tiles)
    grid = (ct.cdiv(m, tiles[0]), ct.cdiv(n, tiles[1]), 1)
    ck = kernel.compile(args, stage="gpu", target=target, grid=grid, sm_count=sms)
    assert ck.meta.get("grid_scale") == scale
    simulate(ck, hardware_grid(ck.meta, grid), args)
    ref = a.astype(np.float64) @ (b.astype(np.float64).T if nt else b.astype(np.float64))
    assert np.abs(c.astype(np.float64) - ref).max() <= 1e-2 * (np.abs(ref).max() + 1)


def test_a_retiled_epilogue_broadcasts_the_wider_bias(rng):
    m, n, k = 64, 256, 64
    x = rng.standard_normal((m, k)).astype(BF16)
    w = rng.standard_normal((n, k)).astype(BF16)
    bias = rng.standard_normal(n).astype(BF16)
    y = np.full((m, n), np.nan, BF16)
    args = (x, w, bias, y, 0.5, 64, 64, 64)
    grid = (1, 4, 1)
    ck = ct.kernel(linear_silu.fn, retile=(1, 2)).compile(args, stage="gpu",
                                                           target="sm_90a", grid=grid)
    assert ck.meta["grid_scale"] == [1, 2, 1]
    simulate(ck, hardware_grid(ck.meta, grid), args)
    h = 0.5 * x.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64)
    ref = h / (1 + np.exp(-h))
    assert np.abs(y.astype(np.float64) - ref).max() <= 1e-2 * (np.abs(ref).max() + 1)


# ---------------------------------------------------------------------------
# Decode GEMMs: rows shrunk to the array, N narrowed, K lengthened
# ---------------------------------------------------------------------------
def _layout(kernel, m, n, k, tiles=(128, 128, 64), target="sm_90a", sms=132):
    a = np.zeros((m, k), BF16)
    w = np.zeros((n, k), BF16)
    c = np.zeros((m, n), BF16)
    grid = (ct.cdiv(m, tiles[0]), ct.cdiv(n, tiles[1]), 1)
    ck = kernel.compile((a, w, c, *tiles), stage="gpu", target=target, grid=grid,
                        sm_count=sms)
    return ck


@pytest.mark.parametrize("m,n,acc,a_tile,w_tile", [
    (16, 4096, "64x32", "64x256", "32x256"),      # 32 blocks: N / 4, K x 4, rows 64
    (1, 6144, "64x64", "64x128", "64x128"),       # 48 blocks: N / 2, K x 2
    (64, 28672, "64x128", "64x64", "128x64"),     # 224 blocks fill the GPU: rows only
    (65, 4096, "128x32", "128x128", "32x128"),    # 65 rows: 128-row tiles; K x 2 only
])
def test_decode_gemms_take_the_tiles_of_their_launch(m, n, acc, a_tile, w_tile):
    """What a plain 128 x 128 x 64 GEMM becomes on the launches of a decode step (the
    tiles the sweep in bench/RESULTS.md found fastest on the H100)."""
    text = _layout(gemm_nt, m, n, 4096).artifacts["layout"]
    assert f"tensor<{acc}xf32" in text
    assert f"-> tensor<{a_tile}xbf16" in text and f"-> tensor<{w_tile}xbf16" in text


@pytest.mark.parametrize("target,m,n,k", [
    ("sm_90a", 1, 256, 328),       # K = 328: two 256-wide K tiles, the second ragged
    ("sm_90a", 17, 200, 200),      # ragged N too
    pytest.param("sm_80", 5, 256, 200, marks=pytest.mark.slow),  # mma.sync, cp.async: K
                                                                 # tiles as written
])
def test_decode_gemms_retiled_for_their_launch_run_correctly(target, m, n, k, rng):
    a = rng.standard_normal((m, k)).astype(BF16)
    w = rng.standard_normal((n, k)).astype(BF16)
    c = np.full((m, n), np.nan, BF16)
    args = (a, w, c, 128, 128, 64)
    grid = (1, ct.cdiv(n, 128), 1)
    ck = gemm_nt.compile(args, stage="gpu", target=target, grid=grid, sm_count=132)
    assert ck.meta["grid_scale"] == [1, 1, 4]
    assert "tensor<64x32xf32" in ck.artifacts["layout"]
    # K tiles of 256 where TMA copies them; cp.async copies of 256-long tiles spill
    k_tile = 256 if target == "sm_90a" else 64
    assert f"tensor<64x{k_tile}xbf16" in ck.artifacts["layout"]
    simulate(ck, hardware_grid(ck.meta, grid), args)
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    assert np.abs(c.astype(np.float64) - ref).max() <= 1e-2 * (np.abs(ref).max() + 1)


@ct.kernel
def gemm_fixed_trips(a, w, c, trips: int, BM: ct.Constant[int], BN: ct.Constant[int],
                     BK: ct.Constant[int]):
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(trips):
        ta = ct.load(a, index=(ct.bid(0), k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tw = ct.load(w, index=(ct.bid(1), k), shape=(BN, BK), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, ct.transpose(tw), acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gemm_unpadded(a, w, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(ct.bid(0), k), shape=(BM, BK))
        tw = ct.load(w, index=(ct.bid(1), k), shape=(BN, BK))
        acc = ct.mma(ta, ct.transpose(tw), acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gemm_even_tiles(a, w, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK)) // 2):
        ta = ct.load(a, index=(ct.bid(0), 2 * k), shape=(BM, BK),
                     padding_mode=ct.PaddingMode.ZERO)
        tw = ct.load(w, index=(ct.bid(1), 2 * k), shape=(BN, BK),
                     padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, ct.transpose(tw), acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, c.dtype))


@pytest.mark.parametrize("kernel,extra,reason", [
    (gemm_nt, (), None),
    (gemm_fixed_trips, (8,), "trip count is not cdiv"),
    (gemm_unpadded, (), "not zero-padded"),
    (gemm_even_tiles, (), "counter is used by 'arith.muli'"),
])
def test_k_loops_lengthen_only_when_the_longer_tiles_cover_the_same_k(kernel, extra, reason):
    from mlir import ir
    from tileir.backend.layout import retile
    a = np.zeros((16, 512), BF16)
    ck = kernel.compile((a, a, a, *extra, 64, 64, 64), stage="tile", target="sm_90a")
    with mlir_context(), ir.Location.unknown():
        module = ir.Module.parse(ck.artifacts["tile"])
        func = module.body.operations[0]
        loop = next(op for op in retile._ops(func) if op.name == "scf.for")
        if reason is None:
            assert retile.analyze_loop(func, loop).tile == 64
        else:
            with pytest.raises(retile.NotRetileable, match=reason):
                retile.analyze_loop(func, loop)
