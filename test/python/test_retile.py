"""Retiling a grid axis (tile-retile-blocks, tileir.backend.retile): the launcher's
grid wish, the kernel option, the analysis on real kernels, the grid mapping, and
retiled GEMMs run in the simulator against a float64 reference."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.backend.grid_wish import grid_wish
from tileir.errors import TileValueError
from tileir.examples import softmax
from tileir.kernel import hardware_grid
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


def test_only_kernels_that_multiply_retile(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    assert softmax.softmax.grid_wish((1000, 1, 1), 132) is None
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
    ("sm_80", 32, gemm_nt, True, 70, 250, [1, 1, 4]),        # narrow on mma.sync
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
