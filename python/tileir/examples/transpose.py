"""y = x.T with 2-D tiles: load tile (i, j), store its transpose at (j, i)."""

import numpy as np

import tileir as ct


@ct.kernel
def transpose(x, y, TM: ct.Constant[int], TN: ct.Constant[int]):
    i = ct.bid(0)
    j = ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(j, i), tile=ct.transpose(t))


def run(rng, m=300, n=170, dtype=np.float32, tm=64, tn=32):
    x = rng.standard_normal((m, n)).astype(dtype)
    y = np.full((n, m), np.nan, dtype)
    ct.launch(None, (ct.cdiv(m, tm), ct.cdiv(n, tn)), transpose, (x, y, tm, tn))
    return y, x.T.astype(np.float64), 0.0, 0.0
