"""GPU tests of the tutorial attention kernel (tileir.examples.attention) against fp32
attention: batch, query and key/value heads (GQA), ragged lengths, head dims 64 and
128, causal or not, at the tile shapes users write (64 x 64 to 128 x 128).  Fresh
random inputs, poisoned outputs.  Marked `gpu`: skipped cleanly without one."""

from __future__ import annotations

import itertools
import math

import pytest
from conftest import lazy_import

import tileir as ct
from tileir.examples import attention as example

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")


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


# ---------------------------------------------------------------------------
# variable-length batches (flash_attention_varlen), the log-sum-exp, head dim 256
# ---------------------------------------------------------------------------
def _varlen_reference(q, k, v, cu_q, cu_k, causal):
    """fp32 (out, lse) of each sequence from plain products, causal aligned
    bottom-right; rows that see no key: zeros and -inf."""
    group = q.shape[1] // k.shape[1]
    out = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), device=q.device)
    scale = 1.0 / math.sqrt(q.shape[-1])
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        lq, lk = q1 - q0, k1 - k0
        if lq == 0:
            continue
        qs = q[q0:q1].float().transpose(0, 1)
        ks, vs = (x[k0:k1].float().transpose(0, 1).repeat_interleave(group, dim=0)
                  for x in (k, v))
        s = qs @ ks.transpose(-1, -2) * scale
        if causal:
            i = torch.arange(lq, device=q.device)[:, None]
            j = torch.arange(lk, device=q.device)[None, :]
            s = s.masked_fill(j > i + lk - lq, float("-inf"))
        row_lse = torch.logsumexp(s, dim=-1)                     # -inf where no key
        seen = torch.isfinite(row_lse)[..., None]
        p = torch.exp(s - torch.where(seen, row_lse[..., None], 0.0))   # softmax; 0 unseen
        out[q0:q1] = (p @ vs).transpose(0, 1)
        lse[:, q0:q1] = row_lse
    return out, lse


def _cu(lengths):
    return torch.tensor([0] + list(itertools.accumulate(lengths)), dtype=torch.int32,
                        device="cuda")


# (query lengths, key lengths): empty and one-token sequences, q shorter than k
# (chunked prefill against a cache), lengths that are and are not tile multiples
VARLEN = [([0, 1, 77, 5, 400, 1000], [3, 1, 60, 0, 900, 1000]),
          ([128, 256, 129, 1], [128, 256, 129, 1]),
          ([1, 9, 0, 33, 2048], [1, 200, 0, 33, 4096]),
          ([5, 3], [7, 2])]                         # arrays shorter than a tile


# bf16 over every combination; fp16 at one head grouping (each (heads, group, D,
# causal, dtype) is a compile)
SWEEP = [(lengths, h, hkv, d, causal, "bfloat16") for lengths in VARLEN
         for h, hkv in ((8, 8), (8, 2), (6, 1)) for d in (64, 128, 256)
         for causal in (False, True)] + \
        [(lengths, 8, 2, d, causal, "float16") for lengths in VARLEN
         for d in (64, 128, 256) for causal in (False, True)]


@pytest.mark.parametrize("lengths,h,hkv,d,causal,dtype", SWEEP)
def test_varlen_matches_fp32(lengths, h, hkv, d, causal, dtype):
    from tileir.examples.attention import flash_attention_varlen
    dt = getattr(torch, dtype)
    lq, lk = lengths
    cu_q, cu_k = _cu(lq), _cu(lk)
    q = torch.randn(sum(lq), h, d, device="cuda", dtype=dt)
    k = torch.randn(sum(lk), hkv, d, device="cuda", dtype=dt)
    v = torch.randn(sum(lk), hkv, d, device="cuda", dtype=dt)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((h, sum(lq)), float("nan"), device="cuda")
    got = flash_attention_varlen(q, k, v, cu_q, cu_k, max(lq), max(lk), 1.0 / math.sqrt(d),
                                 causal=causal, out=o, lse=lse)
    assert got is o
    ref, ref_lse = _varlen_reference(q, k, v, cu_q, cu_k, causal)
    assert torch.isfinite(o).all()
    err = (torch.linalg.norm(o.float() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2, err
    assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))
    seen = torch.isfinite(ref_lse)
    assert (lse[seen] - ref_lse[seen]).abs().max().item() < 1e-2


def test_varlen_without_lse_on_a_side_stream_returns_a_new_output():
    from tileir.examples.attention import flash_attention_varlen
    lq = [300, 17, 1]
    cu = _cu(lq)
    q = torch.randn(sum(lq), 4, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(sum(lq), 2, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                   # launched on torch's current stream
        o = flash_attention_varlen(q, k, v, cu, cu, 300, 300, 1.0 / math.sqrt(128))
    side.synchronize()
    assert o.dtype == q.dtype and o.shape == q.shape
    ref, _ = _varlen_reference(q, k, v, cu, cu, True)
    err = (torch.linalg.norm(o.float() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2, err


@pytest.mark.parametrize("b,h,hkv,s,d", [(2, 8, 2, 1000, 128), (1, 4, 4, 300, 256),
                                         (3, 6, 3, 77, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_lse_matches_fp32(b, h, hkv, s, d, causal):
    bm, bn = (128, 64) if d == 256 else (128, 128)
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b, h, s), float("nan"), device="cuda")
    ct.launch(None, example.grid(q, bm), example.attention_lse,
              (q, k, v, o, lse, 1.0 / math.sqrt(d), h, h // hkv, bm, bn, d, causal))
    ref = _reference(q, k, v, causal)
    err = (torch.linalg.norm(o.float() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2, err
    group = h // hkv
    sc = q.float() @ k.float().repeat_interleave(group, dim=1).transpose(-1, -2) / math.sqrt(d)
    if causal:
        sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1),
                            float("-inf"))
    assert (lse - torch.logsumexp(sc, dim=-1)).abs().max().item() < 1e-2


@pytest.mark.parametrize("bm,bn", [(128, 64), (64, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_at_head_dim_256_matches_fp32(bm, bn, causal):
    b, h, hkv, s, d = 2, 4, 2, 700, 256
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
    o = torch.full_like(q, float("nan"))
    ct.launch(None, example.grid(q, bm), example.attention,
              (q, k, v, o, 1.0 / math.sqrt(d), h, h // hkv, bm, bn, d, causal))
    ref = _reference(q, k, v, causal)
    err = (torch.linalg.norm(o.float() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2, err


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_sm80_code_through_the_ptx_jit(d, causal):
    """attention_varlen compiled for sm_80 at its sm_80 tiles (cp.async, ldmatrix,
    mma.sync) and run from its PTX, which the driver compiles for this GPU."""
    from tileir.examples.attention import attention_varlen, varlen_grid, varlen_tiles
    from tileir.runtime import launcher
    lq, lk = [0, 1, 300, 77], [3, 1, 500, 77]
    cu_q, cu_k = _cu(lq), _cu(lk)
    h, hkv = 8, 2
    q = torch.randn(sum(lq), h, d, device="cuda", dtype=torch.float16)
    k = torch.randn(sum(lk), hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(sum(lk), hkv, d, device="cuda", dtype=torch.float16)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((h, sum(lq)), float("nan"), device="cuda")
    bm, bn = varlen_tiles(d, "sm_80")
    args = (q, k, v, o, lse, cu_q, cu_k, 1.0 / math.sqrt(d), h, h // hkv, bm, bn, d, causal,
            True)
    ck = attention_varlen.compile(args, target="sm_80")
    assert ".target sm_80" in ck.artifacts["ptx"]
    launcher.launch(ck.artifacts["ptx"].encode(), ck.meta, varlen_grid(max(lq), len(lq), h, bm),
                    [args[i] for i in ck.runtime_params])
    torch.cuda.synchronize()
    ref, ref_lse = _varlen_reference(q, k, v, cu_q, cu_k, causal)
    assert torch.isfinite(o).all()
    err = (torch.linalg.norm(o.float() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2, err
    seen = torch.isfinite(ref_lse)
    assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))
    assert (lse[seen] - ref_lse[seen]).abs().max().item() < 1e-2
