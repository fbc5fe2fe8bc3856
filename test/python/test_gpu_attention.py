"""GPU tests of the tutorial attention kernel (tileir.examples.attention) against fp32
attention: batch, query and key/value heads (GQA), ragged lengths, head dims 64 and
128, causal or not, at the tile shapes users write (64 x 64 to 128 x 128).  Fresh
random inputs, poisoned outputs.  Marked `gpu`: skipped cleanly without one."""

from __future__ import annotations

import math

import pytest

import tileir as ct
from tileir.examples import attention as example

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _gpu():
    from tileir.runtime.driver import has_gpu
    if not (has_gpu() and torch.cuda.is_available()):
        pytest.skip("no NVIDIA GPU")


def _reference(q, k, v, causal):
    """fp32 attention from plain products and a softmax (torch's fused fp32 attention
    kernel, which SDPA would pick, races under compute-sanitizer's racecheck)."""
    group = q.shape[1] // k.shape[1]
    k, v = (x.float().repeat_interleave(group, dim=1) for x in (k, v))
    s = q.float() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1),
                          float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("b,h,hkv,s,d", [(1, 4, 4, 128, 64), (2, 8, 2, 1000, 128),
                                         (3, 6, 3, 77, 64), (1, 2, 1, 513, 128)])
@pytest.mark.parametrize("bm,bn", [(64, 64), (128, 64), (128, 128)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_attention_matches_fp32(b, h, hkv, s, d, bm, bn, causal, dtype):
    dt = getattr(torch, dtype)
    q = torch.randn(b, h, s, d, device="cuda", dtype=dt)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
    o = torch.full_like(q, float("nan"))
    ct.launch(None, example.grid(q, bm), example.attention,
              (q, k, v, o, 1.0 / math.sqrt(d), h, h // hkv, bm, bn, d, causal))
    ref = _reference(q, k, v, causal)
    assert torch.isfinite(o).all()
    err = (torch.linalg.norm(o.float() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2, err
