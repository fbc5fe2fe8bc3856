"""LayerNorm with weight and bias; padded columns are masked out of the variance."""

import numpy as np

import tileir as ct

from . import next_pow2


@ct.kernel
def layernorm(x, w, b, y, eps, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    n = x.shape[1]
    t = ct.astype(ct.load(x, index=(row, 0), shape=(1, TILE_N),
                          padding_mode=ct.PaddingMode.ZERO), ct.float32)
    mean = ct.sum(t, axis=1, keepdims=True) / n
    cols = ct.arange(TILE_N, dtype=ct.int32)[None, :]
    d = ct.where(cols < n, t - mean, 0.0)
    var = ct.sum(d * d, axis=1, keepdims=True) / n
    g = ct.astype(ct.load(w, index=(0,), shape=(TILE_N,), padding_mode=ct.PaddingMode.ZERO),
                  ct.float32)
    beta = ct.astype(ct.load(b, index=(0,), shape=(TILE_N,), padding_mode=ct.PaddingMode.ZERO),
                     ct.float32)
    out = d * ct.rsqrt(var + eps) * g + beta
    ct.store(y, index=(row, 0), tile=ct.astype(out, y.dtype))


def run(rng, m=23, n=1500, dtype=np.float32, eps=1e-5):
    x = (rng.standard_normal((m, n)) + 2.0).astype(dtype)
    w = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    y = np.full((m, n), np.nan, dtype)
    ct.launch(None, (m,), layernorm, (x, w, b, y, eps, next_pow2(n)))
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mu) ** 2).mean(axis=1, keepdims=True)
    ref = (x64 - mu) / np.sqrt(var + eps) * w.astype(np.float64) + b.astype(np.float64)
    return y, ref, 1e-5 if dtype == np.float32 else 1e-2, 1e-5
