"""Attention forward as the cuTile and Triton tutorials write it.

One block computes BM rows of one head's output: it loads its Q tile once, then
walks the keys and values BN at a time with an online softmax in fp32 (the row
max `m` and sum `l` carried, the running output rescaled by exp2(m_old - m_new)),
and divides by `l` at the end.  Q is (batch, heads, seq, D); K and V are
(batch, heads // GROUP, seq_kv, D): GROUP query heads share a key/value head
(grouped-query attention).  A sequence need not be a multiple of the tiles: Q rows
past its end are zero padding that is never stored, and key columns past it are
masked to -inf.  With CAUSAL, query row r sees keys 0..r, and the loop stops at
the block's last row.

Launch: grid (cdiv(seq, BM), batch * heads).
"""

import math

import numpy as np

import tileir as ct

LOG2E = 1.0 / math.log(2.0)


@ct.kernel
def attention(Q, K, V, O, scale: float, H: ct.Constant[int], GROUP: ct.Constant[int],
              BM: ct.Constant[int], BN: ct.Constant[int], D: ct.Constant[int],
              CAUSAL: ct.Constant[bool]):
    mb = ct.bid(0)
    b = ct.bid(1) // H
    h = ct.bid(1) % H
    kvh = h // GROUP
    q = ct.load(Q, index=(b, h, mb, 0), shape=(1, 1, BM, D),
                padding_mode=ct.PaddingMode.ZERO).reshape((BM, D))
    qk_scale = scale * LOG2E                       # exp(x * scale) = exp2(x * qk_scale)
    m = ct.full((BM, 1), -np.inf, dtype=np.float32)
    l = ct.zeros((BM, 1), dtype=np.float32)
    acc = ct.zeros((BM, D), dtype=np.float32)
    rows = mb * BM + ct.arange(BM, dtype=np.int32)[:, None]
    n_kv = K.shape[2]
    if CAUSAL:
        trips = ct.cdiv(min((mb + 1) * BM, n_kv), BN)
    else:
        trips = ct.cdiv(n_kv, BN)
    for j in range(trips):
        k = ct.load(K, index=(b, kvh, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        s = ct.mma(q, ct.transpose(k), ct.zeros((BM, BN), dtype=np.float32))
        cols = j * BN + ct.arange(BN, dtype=np.int32)[None, :]
        keep = cols < n_kv
        if CAUSAL:
            keep = keep & (rows >= cols)
        s = ct.where(keep, s, -np.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True) * qk_scale)
        # (flushed to zero as cuTile's attention sample asks: a probability below
        # 2^-126 of a row whose largest is 1 changes neither the row's sum nor P V)
        p = ct.exp2(s * qk_scale - m_new, flush_to_zero=True)
        alpha = ct.exp2(m - m_new, flush_to_zero=True)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(b, kvh, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        acc = ct.mma(p.astype(Q.dtype), v, acc * alpha)
        m = m_new
    out = (acc / l).reshape((1, 1, BM, D)).astype(O.dtype)
    ct.store(O, index=(b, h, mb, 0), tile=out)


def grid(q, bm: int) -> tuple[int, int, int]:
    batch, heads, seq, _ = q.shape
    return (ct.cdiv(seq, bm), batch * heads, 1)


def reference(q, k, v, scale: float, causal: bool) -> np.ndarray:
    """float64 attention of NumPy arrays (batch, heads, seq, D), keys grouped."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sq)[:, None] >= np.arange(sk)[None, :], s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def run(rng, batch=1, heads=4, kv_heads=2, seq=77, d=64, causal=True):
    """The interpreter's run of a small ragged case (bf16 would be slow in NumPy: f32)."""
    q = rng.standard_normal((batch, heads, seq, d)).astype(np.float32)
    k = rng.standard_normal((batch, kv_heads, seq, d)).astype(np.float32)
    v = rng.standard_normal((batch, kv_heads, seq, d)).astype(np.float32)
    o = np.full_like(q, np.nan)
    scale = 1.0 / math.sqrt(d)
    ct.launch(None, grid(q, 32), attention,
              (q, k, v, o, scale, heads, heads // kv_heads, 32, 32, d, causal))
    return o, reference(q, k, v, scale, causal), 1e-4, 1e-5
