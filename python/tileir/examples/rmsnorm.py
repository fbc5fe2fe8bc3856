"""RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, one row per block, f32 math."""

import numpy as np

import tileir as ct

from . import next_pow2


@ct.kernel
def rmsnorm(x, w, y, eps, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    n = x.shape[1]
    t = ct.load(x, index=(row, 0), shape=(1, TILE_N), padding_mode=ct.PaddingMode.ZERO)
    t = ct.astype(t, ct.float32)
    g = ct.load(w, index=(0,), shape=(TILE_N,), padding_mode=ct.PaddingMode.ZERO)
    ms = ct.sum(t * t, axis=1, keepdims=True) / n
    out = t * ct.rsqrt(ms + eps) * ct.astype(g, ct.float32)
    ct.store(y, index=(row, 0), tile=ct.astype(out, y.dtype))


def run(rng, m=29, n=777, dtype=np.float32, eps=1e-6):
    x = rng.standard_normal((m, n)).astype(dtype)
    w = rng.standard_normal(n).astype(dtype)
    y = np.full((m, n), np.nan, dtype)
    ct.launch(None, (m,), rmsnorm, (x, w, y, eps, next_pow2(n)))
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps) * w.astype(np.float64)
    return y, ref, 1e-5 if dtype == np.float32 else 1e-2, 1e-5
