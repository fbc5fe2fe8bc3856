"""Element-wise and row kernels as a cuTile user writes them: vector add, softmax with a
plain helper function, LayerNorm with `ByTarget` options, RMSNorm looping over column
tiles, a transpose, scans and reductions with a combine function."""

import math

import numpy as np

import cuda.tile as ct
from harness import Case

ConstInt = ct.Constant[int]


@ct.kernel
def vector_add(a, b, c, TILE: ConstInt):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    y = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=x + y)


def stable_exp(row):
    # A plain helper: cuTile compiles it inline.
    return ct.exp(row - ct.max(row, axis=-1, keepdims=True))


@ct.kernel(occupancy=ct.ByTarget(sm_90=2, default=1))
def softmax(x, y, TILE_N: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, TILE_N), padding_mode=ct.PaddingMode.NEG_INF)
    t = ct.astype(t, ct.float32)
    e = stable_exp(t)
    out = e / ct.sum(e, axis=-1, keepdims=True)
    ct.store(y, index=(row, 0), tile=ct.astype(out, y.dtype))


@ct.kernel(num_ctas=ct.ByTarget(sm_100=2), opt_level=ct.ByTarget(sm_90=3, default=2))
def layernorm(x, w, b, y, eps: float, TILE_N: ConstInt):
    row = ct.bid(0)
    n = x.shape[1]
    t = ct.astype(ct.load(x, index=(row, 0), shape=(1, TILE_N),
                          padding_mode=ct.PaddingMode.ZERO), ct.float32)
    mean = ct.sum(t, axis=1, keepdims=True) / n
    cols = ct.arange(TILE_N, dtype=ct.int32)
    centered = ct.where(cols[None, :] < n, t - mean, 0.0)
    var = ct.sum(centered * centered, axis=1, keepdims=True) / n
    inv = ct.rsqrt(var + eps)
    wt = ct.load(w, index=(0,), shape=(TILE_N,), padding_mode=ct.PaddingMode.ZERO)
    bt = ct.load(b, index=(0,), shape=(TILE_N,), padding_mode=ct.PaddingMode.ZERO)
    out = centered * inv * wt[None, :] + bt[None, :]
    ct.store(y, index=(row, 0), tile=ct.astype(out, y.dtype))


@ct.kernel
def rmsnorm_looped(x, w, y, eps: float, TILE_N: ConstInt):
    row = ct.bid(0)
    n_tiles = ct.num_tiles(x, axis=1, shape=(1, TILE_N))
    acc = ct.zeros((1, TILE_N), dtype=ct.float32)
    for j in range(n_tiles):
        t = ct.astype(ct.load(x, index=(row, j), shape=(1, TILE_N),
                              padding_mode=ct.PaddingMode.ZERO), ct.float32)
        acc += t * t
    scale = ct.rsqrt(ct.sum(acc, axis=1, keepdims=True) / x.shape[1] + eps)
    for j in range(n_tiles):
        t = ct.astype(ct.load(x, index=(row, j), shape=(1, TILE_N),
                              padding_mode=ct.PaddingMode.ZERO), ct.float32)
        wt = ct.astype(ct.load(w, index=(j,), shape=(TILE_N,),
                               padding_mode=ct.PaddingMode.ZERO), ct.float32)
        ct.store(y, index=(row, j), tile=ct.astype(t * scale * wt[None, :], y.dtype))


@ct.kernel
def transpose(x, y, TM: ConstInt, TN: ConstInt):
    i, j = ct.bid(0), ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(TM, TN))
    ct.store(y, index=(j, i), tile=ct.transpose(t))


@ct.kernel
def scans(x, cs, cp, mx, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(1, T))
    ct.store(cs, index=(i, 0), tile=ct.cumsum(t, axis=1))
    ct.store(cp, index=(i, 0), tile=ct.cumprod(t, axis=1, reverse=True))
    running_max = ct.scan(t, 1, lambda a, b: ct.maximum(a, b), -math.inf)
    ct.store(mx, index=(i, 0), tile=running_max)


def absmax(a, b):
    return ct.maximum(ct.abs(a), ct.abs(b))


@ct.kernel
def reductions(x, out_sum, out_am, out_arg, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(1, T))
    ct.store(out_sum, index=(i,), tile=ct.sum(t, axis=1))
    ct.store(out_am, index=(i,), tile=ct.reduce(t, 1, absmax, 0.0))
    ct.store(out_arg, index=(i,), tile=ct.argmax(t, axis=1))


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _rmsnorm_ref(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(1, keepdims=True) + eps) * w


def _layernorm_ref(x, w, b, eps):
    x = x.astype(np.float64)
    m = x.mean(1, keepdims=True)
    v = ((x - m) ** 2).mean(1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def cases(rng):
    n = 5000
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    yield Case("vector_add", vector_add, (math.ceil(n / 1024),),
               [a, b, np.empty_like(a), 1024], [2], lambda a, b, c, t: [a + b])

    for dtype, tol in ((np.float32, 1e-5), (np.float16, 2e-3)):
        x = rng.standard_normal((37, 1000)).astype(dtype) * 4
        yield Case(f"softmax_{np.dtype(dtype).name}", softmax, (37,),
                   [x, np.empty_like(x), 1024], [1],
                   lambda x, y, t: [_softmax_ref(x).astype(y.dtype)], rtol=tol, atol=tol)

    x = rng.standard_normal((19, 777)).astype(np.float32)
    w = rng.standard_normal(777).astype(np.float32)
    bias = rng.standard_normal(777).astype(np.float32)
    yield Case("layernorm", layernorm, (19,), [x, w, bias, np.empty_like(x), 1e-5, 1024], [3],
               lambda x, w, b, y, eps, t: [_layernorm_ref(x, w, b, eps)], rtol=1e-4, atol=1e-4)

    x = rng.standard_normal((9, 3000)).astype(np.float16)
    w = rng.standard_normal(3000).astype(np.float16)
    yield Case("rmsnorm_looped", rmsnorm_looped, (9,), [x, w, np.empty_like(x), 1e-6, 512], [2],
               lambda x, w, y, eps, t: [_rmsnorm_ref(x, w, eps).astype(np.float16)],
               rtol=2e-3, atol=2e-3)

    x = rng.standard_normal((96, 160)).astype(np.float32)
    yield Case("transpose", transpose, (3, 5), [x, np.empty((160, 96), np.float32), 32, 32], [1],
               lambda x, y, a, b: [x.T])

    x = rng.uniform(0.5, 1.5, (6, 64)).astype(np.float32)
    z = np.empty_like(x)
    yield Case("scans", scans, (6,), [x, z, z.copy(), z.copy(), 64], [1, 2, 3],
               lambda x, *_: [np.cumsum(x, 1), np.cumprod(x[:, ::-1], 1)[:, ::-1],
                              np.maximum.accumulate(x, 1)], rtol=1e-5, atol=1e-5)

    x = rng.standard_normal((8, 128)).astype(np.float32)
    yield Case("reductions", reductions, (8,),
               [x, np.empty(8, np.float32), np.empty(8, np.float32), np.empty(8, np.int32), 128],
               [1, 2, 3],
               lambda x, *_: [x.sum(1), np.abs(x).max(1), x.argmax(1).astype(np.int32)],
               rtol=1e-5, atol=1e-5)
