"""Row softmax: one whole row per block, padded to a power of two with -inf."""

import numpy as np

import tileir as ct

from . import next_pow2


@ct.kernel
def softmax(x, y, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, TILE_N), padding_mode=ct.PaddingMode.NEG_INF)
    t = ct.astype(t, ct.float32)
    t = t - ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t)
    out = e / ct.sum(e, axis=1, keepdims=True)
    ct.store(y, index=(row, 0), tile=ct.astype(out, y.dtype))


def run(rng, m=37, n=1000, dtype=np.float32):
    x = (rng.standard_normal((m, n)) * 3).astype(dtype)
    y = np.full((m, n), np.nan, dtype)
    ct.launch(None, (m,), softmax, (x, y, next_pow2(n)))
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    return y, ref, 1e-5 if dtype == np.float32 else 1e-2, 1e-6
