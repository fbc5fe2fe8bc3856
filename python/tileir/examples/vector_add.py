"""c = a + b, one 1-D tile per block."""

import numpy as np

import tileir as ct


@ct.kernel
def vector_add(a, b, c, TILE: ct.Constant[int]):
    pid = ct.bid(0)
    x = ct.load(a, index=(pid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    y = ct.load(b, index=(pid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(pid,), tile=x + y)


def run(rng, n=10_007, dtype=np.float32, tile=1024):
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    c = np.full(n, np.nan, dtype)
    ct.launch(None, (ct.cdiv(n, tile),), vector_add, (a, b, c, tile))
    ref = a.astype(np.float64) + b.astype(np.float64)
    return c, ref, 1e-6 if dtype == np.float32 else 2e-3, 1e-6
