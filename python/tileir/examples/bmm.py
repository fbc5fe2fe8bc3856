"""Batched GEMM with the batch on a grid axis, as cuTile's BatchMatMul sample writes it:
(1, TM, TK) and (1, TK, TN) loads reshaped to 2-d for `mma`, the accumulator cast and
reshaped to a (1, TM, TN) store.  The compiler gives it what the 2-d GEMM gets: the
TMA ring, the epilogue stored by TMA, cluster pairs, persistence (docs/tensor-cores.md).
"""

import numpy as np

import tileir as ct

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def bmm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int],
        BATCH_AXIS: ct.Constant[int]):
    """C[z] = A[z] @ B[z]; the batch z is grid axis BATCH_AXIS, the row and column
    tiles the next two."""
    z = ct.bid(BATCH_AXIS)
    i = ct.bid((BATCH_AXIS + 1) % 3)
    j = ct.bid((BATCH_AXIS + 2) % 3)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[2], TK)):
        a = ct.load(A, index=(z, i, k), shape=(1, TM, TK), padding_mode=ZERO).reshape((TM, TK))
        b = ct.load(B, index=(z, k, j), shape=(1, TK, TN), padding_mode=ZERO).reshape((TK, TN))
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(z, i, j), tile=acc.astype(C.dtype).reshape((1, TM, TN)))


def bmm_grid(batch: int, m: int, n: int, tm: int, tn: int, axis: int) -> tuple[int, ...]:
    """The launch grid: `batch` on grid axis `axis`, row and column tiles on the next two."""
    grid = [0, 0, 0]
    grid[axis], grid[(axis + 1) % 3], grid[(axis + 2) % 3] = batch, ct.cdiv(m, tm), ct.cdiv(n, tn)
    return tuple(grid)


def run(rng, batch=3, m=100, n=72, k=130, dtype=np.float32, axis=0, tiles=(32, 32, 32)):
    """The interpreter's run of a ragged batch (float32: bf16 would be slow in NumPy)."""
    a = rng.standard_normal((batch, m, k)).astype(dtype)
    b = rng.standard_normal((batch, k, n)).astype(dtype)
    c = np.full((batch, m, n), np.nan, dtype)
    ct.launch(None, bmm_grid(batch, m, n, tiles[0], tiles[1], axis), bmm, (a, b, c, *tiles, axis))
    return c, a.astype(np.float64) @ b.astype(np.float64), 1e-5, 1e-4
