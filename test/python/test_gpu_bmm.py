"""GPU tests of the batched GEMM with the batch on a grid axis (test_bmm.py's kernels,
written as cuTile's BatchMatMul sample writes them) against a float64 torch
reference: ragged batched sizes with the batch on each grid axis, bf16 and fp16, the
sample's 128 x 256 x 128 tiles, the benchmark's and LLM-shaped launches (retiled,
persistent, in cluster pairs, stored by TMA), four-dimensional arrays and an
epilogue on the (1, M, N) tile, and the candidates bench/bmm.py --schedules times
(L2 lookahead, stream-K).  Fresh random inputs, outputs poisoned with NaN.
Marked `gpu`: skipped cleanly without an NVIDIA GPU."""

from __future__ import annotations

import pytest
from conftest import lazy_import

import tileir as ct
from tileir.examples.bmm import bmm, bmm_grid

from test_bmm import bmm_heads, bmm_residual

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")

# relative Frobenius error: one rounding of the output plus the f32 sums
TOL = {"bfloat16": 8e-3, "float16": 2e-3}

def tol(dtype):
    """TOL of a torch dtype."""
    return TOL[str(dtype).removeprefix("torch.")]


def _rel_err(out, ref) -> float:
    assert not out.isnan().any(), "some output elements were not written"
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _bmm(batch, m, n, k, dtype, tiles, axis):
    a = torch.randn(batch, m, k, device="cuda", dtype=dtype)
    b = torch.randn(batch, k, n, device="cuda", dtype=dtype)
    c = torch.full((batch, m, n), float("nan"), device="cuda", dtype=dtype)
    ct.launch(None, bmm_grid(batch, m, n, tiles[0], tiles[1], axis), bmm, (a, b, c, *tiles, axis))
    torch.cuda.synchronize()
    return c, torch.bmm(a.double(), b.double())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("batch,m,n,k", [(1, 1, 8, 8), (3, 17, 136, 72), (5, 300, 264, 200),
                                         (4, 257, 1000, 1032), (2, 127, 24, 4104)])
def test_batched_gemm_ragged(dtype, axis, batch, m, n, k):
    dtype = getattr(torch, dtype)
    c, ref = _bmm(batch, m, n, k, dtype, (128, 128, 64), axis)
    assert _rel_err(c, ref) < tol(dtype)


@pytest.mark.parametrize("batch,m,n,k", [(4, 512, 1024, 256), (3, 300, 520, 136),
                                         (8, 2048, 2048, 1024)])
def test_batched_gemm_at_the_samples_tiles(batch, m, n, k):
    """cuTile's BatchMatMul: fp16, 128 x 256 x 128 tiles, the batch on grid axis 0."""
    c, ref = _bmm(batch, m, n, k, torch.float16, (128, 256, 128), 0)
    assert _rel_err(c, ref) < tol(torch.float16)


@pytest.mark.parametrize("axis", [0, 2])
@pytest.mark.parametrize("batch,m,n,k", [(32, 1024, 1024, 1024), (8, 4096, 4096, 1024),
                                         (64, 128, 4096, 128), (64, 128, 128, 4096)])
def test_batched_gemm_as_benchmarked(axis, batch, m, n, k):
    """bench/bmm.py's launches: persistent, in cluster pairs where the grid allows, the
    epilogue by TMA; and the LLM-shaped products (one row tile a batch)."""
    c, ref = _bmm(batch, m, n, k, torch.bfloat16, (128, 128, 64), axis)
    assert _rel_err(c, ref) < tol(torch.bfloat16)


@pytest.mark.parametrize("candidate", ["l2 ahead 8", "l2 ahead 16", "stream-K"])
@pytest.mark.parametrize("batch,m,n,k", [(32, 1024, 1024, 1024), (5, 300, 264, 200),
                                         (3, 1000, 1032, 520)])
def test_batched_gemm_schedule_candidates(candidate, batch, m, n, k, monkeypatch):
    """bench/bmm.py --schedules' compiler candidates, each in a kernel of its own (the
    module knob is no part of a specialization's key) with the disk cache off."""
    from tileir.backend.pipeline import persistent
    monkeypatch.setenv("TILEIR_CACHE", "0")
    options = {"stream_k": True} if candidate == "stream-K" else {}
    if candidate.startswith("l2 ahead"):
        monkeypatch.setattr(persistent, "L2_AHEAD", int(candidate.split()[-1]))
    kernel = ct.kernel(bmm.fn, **options)
    a = torch.randn(batch, m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(batch, k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.full((batch, m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    ct.launch(None, bmm_grid(batch, m, n, 128, 128, 0), kernel, (a, b, c, 128, 128, 64, 0))
    torch.cuda.synchronize()
    assert _rel_err(c, torch.bmm(a.double(), b.double())) < tol(torch.bfloat16)


def test_batched_gemm_unaligned():
    """Rows of 200 and 520 bytes: no TMA, the register path, the same result."""
    c, ref = _bmm(3, 200, 260, 100, torch.bfloat16, (128, 128, 64), 0)
    assert _rel_err(c, ref) < tol(torch.bfloat16)


def test_batched_epilogue():
    a = torch.randn(6, 1000, 328, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(6, 328, 776, device="cuda", dtype=torch.bfloat16)
    d = torch.randn(6, 1000, 776, device="cuda", dtype=torch.bfloat16)
    c = torch.full_like(d, float("nan"))
    ct.launch(None, (ct.cdiv(1000, 128), ct.cdiv(776, 128), 6), bmm_residual,
              (a, b, d, c, 0.5, 128, 128, 64))
    torch.cuda.synchronize()
    ref = 0.5 * torch.bmm(a.double(), b.double()) + d.double()
    assert _rel_err(c, ref) < tol(torch.bfloat16)


def test_four_dimensional_scores():
    """S = Q K^T per (batch, head), (1, 1, TM, TN) tiles of 4-d arrays."""
    q = torch.randn(2, 8, 1000, 128, device="cuda", dtype=torch.float16)
    k = torch.randn(2, 8, 1000, 128, device="cuda", dtype=torch.float16)
    s = torch.full((2, 8, 1000, 1000), float("nan"), device="cuda", dtype=torch.float16)
    ct.launch(None, (ct.cdiv(1000, 128), ct.cdiv(1000, 128), 16), bmm_heads,
              (q, k, s, 8, 128, 128, 64))
    torch.cuda.synchronize()
    assert _rel_err(s, q.double() @ k.double().transpose(-1, -2)) < tol(torch.float16)
