"""C = A @ B with a K loop of `mma` into a float32 accumulator; `product_nt`, the step of
a GEMM whose weight is stored (N, K), on the tensor cores or exactly in f32."""

import numpy as np

import tileir as ct


@ct.function
def product_nt(a, w, acc, EXACT: ct.Constant[bool]):
    """acc + a @ w^T for a (BM, BK) and w (BN, BK).  EXACT sums f32 products on the FMA
    units (the tensor cores would round f32 operands to tf32): a float32 model's
    reference mode."""
    if EXACT:
        bm, bk = a.shape
        bn = w.shape[0]
        prod = ct.reshape(ct.astype(a, ct.float32), (bm, 1, bk)) \
            * ct.reshape(ct.astype(w, ct.float32), (1, bn, bk))
        return acc + ct.sum(prod, axis=2)
    return ct.mma(a, ct.transpose(w), acc)


@ct.kernel
def matmul(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, j), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


def run(rng, m=200, n=136, k=300, dtype=np.float16, bm=64, bn=64, bk=32):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = np.full((m, n), np.nan, dtype)
    ct.launch(None, (ct.cdiv(m, bm), ct.cdiv(n, bn)), matmul, (a, b, c, bm, bn, bk))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return c, ref, 2e-3 if dtype == np.float16 else 1e-5, 5e-2 if dtype == np.float16 else 1e-4
