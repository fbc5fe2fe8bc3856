"""The element-wise and row-wise ops of an LLM layer, written the plain way.

- `add_rmsnorm`: the residual add fused into RMSNorm (h = x + r is written back to r,
  y = h / rms(h) * w), one row per block;
- `silu_mul`: SwiGLU's silu(gate) * up over (1, TILE) tiles of a 2-D grid;
- `rope`: rotary embedding of (tokens, heads, head_dim) queries or keys, the two
  halves of the head dim rotated by per-token cos / sin (the "rotate half" form);
- `vocab_softmax` and `vocab_logsumexp`: a row as wide as a vocabulary, C columns at
  a time with an online max and sum (softmax then makes a second pass to write).

RMSNorm, LayerNorm and the one-tile softmax are in their own modules.
"""

import numpy as np

import tileir as ct

from . import next_pow2


@ct.kernel
def add_rmsnorm(x, residual, w, y, eps, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    n = x.shape[1]
    h = ct.astype(ct.load(x, index=(row, 0), shape=(1, TILE_N), padding_mode=ct.PaddingMode.ZERO),
                  ct.float32)
    h = h + ct.astype(ct.load(residual, index=(row, 0), shape=(1, TILE_N),
                              padding_mode=ct.PaddingMode.ZERO), ct.float32)
    ct.store(residual, index=(row, 0), tile=ct.astype(h, residual.dtype))
    ms = ct.sum(h * h, axis=1, keepdims=True) / n
    g = ct.astype(ct.load(w, index=(0,), shape=(TILE_N,), padding_mode=ct.PaddingMode.ZERO),
                  ct.float32)
    ct.store(y, index=(row, 0), tile=ct.astype(h * ct.rsqrt(ms + eps) * g, y.dtype))


@ct.kernel
def silu_mul(gate, up, out, TILE: ct.Constant[int]):
    i = ct.bid(0)
    j = ct.bid(1)
    g = ct.astype(ct.load(gate, index=(i, j), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO),
                  ct.float32)
    u = ct.astype(ct.load(up, index=(i, j), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO),
                  ct.float32)
    ct.store(out, index=(i, j), tile=ct.astype(g / (1.0 + ct.exp(-g)) * u, out.dtype))


@ct.kernel
def rope(x, cos, sin, out, HEADS: ct.Constant[int], HALF: ct.Constant[int]):
    t = ct.bid(0)
    x1 = ct.astype(ct.load(x, index=(t, 0, 0), shape=(1, HEADS, HALF)), ct.float32)
    x2 = ct.astype(ct.load(x, index=(t, 0, 1), shape=(1, HEADS, HALF)), ct.float32)
    c = ct.reshape(ct.astype(ct.load(cos, index=(t, 0), shape=(1, HALF)), ct.float32),
                   (1, 1, HALF))
    s = ct.reshape(ct.astype(ct.load(sin, index=(t, 0), shape=(1, HALF)), ct.float32),
                   (1, 1, HALF))
    ct.store(out, index=(t, 0, 0), tile=ct.astype(x1 * c - x2 * s, out.dtype))
    ct.store(out, index=(t, 0, 1), tile=ct.astype(x2 * c + x1 * s, out.dtype))


@ct.kernel
def vocab_logsumexp(x, out, C: ct.Constant[int]):
    row = ct.bid(0)
    m = ct.full((1,), -1e30, dtype=ct.float32)
    s = ct.zeros((1,), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(1, C))):
        t = ct.astype(ct.load(x, index=(row, k), shape=(1, C),
                              padding_mode=ct.PaddingMode.NEG_INF), ct.float32)
        m_new = ct.maximum(m, ct.max(t, axis=1))
        s = s * ct.exp(m - m_new) + ct.sum(ct.exp(t - ct.reshape(m_new, (1, 1))), axis=1)
        m = m_new
    ct.store(out, index=(row,), tile=m + ct.log(s))


@ct.kernel
def vocab_softmax(x, y, C: ct.Constant[int]):
    row = ct.bid(0)
    m = ct.full((1,), -1e30, dtype=ct.float32)
    s = ct.zeros((1,), dtype=ct.float32)
    chunks = ct.num_tiles(x, axis=1, shape=(1, C))
    for k in range(chunks):
        t = ct.astype(ct.load(x, index=(row, k), shape=(1, C),
                              padding_mode=ct.PaddingMode.NEG_INF), ct.float32)
        m_new = ct.maximum(m, ct.max(t, axis=1))
        s = s * ct.exp(m - m_new) + ct.sum(ct.exp(t - ct.reshape(m_new, (1, 1))), axis=1)
        m = m_new
    inv = ct.reshape(1.0 / s, (1, 1))
    for k in range(chunks):
        t = ct.astype(ct.load(x, index=(row, k), shape=(1, C),
                              padding_mode=ct.PaddingMode.NEG_INF), ct.float32)
        ct.store(y, index=(row, k), tile=ct.astype(ct.exp(t - ct.reshape(m, (1, 1))) * inv,
                                                    y.dtype))


def _softmax64(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run(rng, m=5, n=1000, dtype=np.float32, eps=1e-6):
    """Each kernel once on ragged sizes; the outputs concatenated against float64."""
    outs, refs = [], []
    x = rng.standard_normal((m, n)).astype(dtype)
    r = rng.standard_normal((m, n)).astype(dtype)
    w = rng.standard_normal(n).astype(dtype)
    y = np.full((m, n), np.nan, dtype)
    h = x.astype(np.float64) + r.astype(np.float64)
    ct.launch(None, (m,), add_rmsnorm, (x, r, w, y, eps, next_pow2(n)))
    outs += [r, y]
    refs += [h, h / np.sqrt((h * h).mean(axis=1, keepdims=True) + eps) * w.astype(np.float64)]

    g = rng.standard_normal((m, n)).astype(dtype)
    u = rng.standard_normal((m, n)).astype(dtype)
    o = np.full((m, n), np.nan, dtype)
    ct.launch(None, (m, ct.cdiv(n, 256)), silu_mul, (g, u, o, 256))
    g64 = g.astype(np.float64)
    outs.append(o)
    refs.append(g64 / (1 + np.exp(-g64)) * u.astype(np.float64))

    heads, half = 4, 16
    q = rng.standard_normal((m, heads, 2 * half)).astype(dtype)
    angle = rng.uniform(0, 6.3, (m, half))
    cos, sin = np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)
    qo = np.full_like(q, np.nan)
    ct.launch(None, (m,), rope, (q, cos, sin, qo, heads, half))
    q64 = q.astype(np.float64)
    c64, s64 = cos.astype(np.float64)[:, None, :], sin.astype(np.float64)[:, None, :]
    x1, x2 = q64[..., :half], q64[..., half:]
    outs.append(qo.reshape(m, -1))
    refs.append(np.concatenate([x1 * c64 - x2 * s64, x2 * c64 + x1 * s64], -1).reshape(m, -1))

    v = (rng.standard_normal((m, 3 * n + 7)) * 4).astype(dtype)
    lse = np.full(m, np.nan, np.float32)
    sm = np.full_like(v, np.nan)
    ct.launch(None, (m,), vocab_logsumexp, (v, lse, 256))
    ct.launch(None, (m,), vocab_softmax, (v, sm, 256))
    v64 = v.astype(np.float64)
    mx = v64.max(axis=1)
    outs += [lse[:, None], sm]
    refs += [(mx + np.log(np.exp(v64 - mx[:, None]).sum(axis=1)))[:, None], _softmax64(v64)]
    out = np.concatenate([o.reshape(-1) for o in outs])
    ref = np.concatenate([o.reshape(-1) for o in refs])
    return out, ref, 1e-4 if dtype == np.float32 else 2e-2, 1e-4
