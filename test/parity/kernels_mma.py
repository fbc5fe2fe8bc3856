"""Tensor-core kernels as a cuTile user writes them: a GEMM with a plain K loop (f16,
bf16, tf32), the same GEMM picked by `ct.tune.exhaustive_search`, a batched GEMM over
3-d arrays, and a small flash-attention forward with an online softmax."""

import math
from types import SimpleNamespace

import numpy as np

import cuda.tile as ct
from harness import Case

ConstInt = ct.Constant[int]


@ct.kernel(num_ctas=ct.ByTarget(sm_100=2, default=1))
def matmul(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
        x = ct.load(a, index=(bm, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(k, bn), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        if x.dtype == ct.float32:
            x, y = ct.astype(x, ct.tfloat32), ct.astype(y, ct.tfloat32)
        acc = ct.mma(x, y, acc)
    ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))


@ct.kernel
def batched_matmul(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    batch, bm, bn = ct.bid(0), ct.bid(1), ct.bid(2)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[2], TK)):
        x = ct.load(a, index=(batch, bm, k), shape=(1, TM, TK), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(batch, k, bn), shape=(1, TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ct.reshape(x, (TM, TK)), ct.reshape(y, (TK, TN)), acc)
    ct.store(c, index=(batch, bm, bn), tile=ct.reshape(ct.astype(acc, c.dtype), (1, TM, TN)))


@ct.kernel
def attention(q, k, v, o, scale: float, TQ: ConstInt, TKV: ConstInt, D: ConstInt):
    head, qb = ct.bid(0), ct.bid(1)
    qt = ct.load(q, index=(head, qb, 0), shape=(1, TQ, D))
    qt = ct.reshape(qt, (TQ, D))
    m = ct.full((TQ, 1), -math.inf, dtype=ct.float32)
    denom = ct.zeros((TQ, 1), dtype=ct.float32)
    acc = ct.zeros((TQ, D), dtype=ct.float32)
    log2e = 1.4426950408889634
    for j in range(ct.cdiv(k.shape[1], TKV)):
        kt = ct.reshape(ct.load(k, index=(head, j, 0), shape=(1, TKV, D)), (TKV, D))
        vt = ct.reshape(ct.load(v, index=(head, j, 0), shape=(1, TKV, D)), (TKV, D))
        s = ct.mma(qt, ct.transpose(kt), ct.zeros((TQ, TKV), dtype=ct.float32)) * (scale * log2e)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp2(s - m_new)
        alpha = ct.exp2(m - m_new)
        denom = denom * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, vt.dtype), vt, acc * alpha)
        m = m_new
    out = acc / denom
    ct.store(o, index=(head, qb, 0), tile=ct.reshape(ct.astype(out, o.dtype), (1, TQ, D)))


def tuned_matmul(ct, stream, args):
    """`ct.tune.exhaustive_search` over tile shapes, then a launch with the best."""
    a, b, c = args[:3]
    m, n = a.shape[0], b.shape[1]
    configs = [SimpleNamespace(tm=64, tn=64, tk=32), SimpleNamespace(tm=128, tn=64, tk=64),
               SimpleNamespace(tm=64, tn=128, tk=32)]
    result = ct.tune.exhaustive_search(
        configs, stream,
        grid_fn=lambda cfg: (ct.cdiv(m, cfg.tm), ct.cdiv(n, cfg.tn), 1),
        kernel=matmul,
        args_fn=lambda cfg: (a, b, c, cfg.tm, cfg.tn, cfg.tk),
        quiet=True)
    best = result.best.config
    ct.launch(stream, (ct.cdiv(m, best.tm), ct.cdiv(n, best.tn), 1), matmul,
              (a, b, c, best.tm, best.tn, best.tk))


def _mm(a, b):
    return [a.astype(np.float64) @ b.astype(np.float64)]


def _bf16(x):
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16)


def _attention_ref(q, k, v, scale):
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    s = q @ k.transpose(0, 2, 1) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


def cases(rng):
    m, n, k = 300, 200, 136
    a16 = rng.standard_normal((m, k)).astype(np.float16)
    b16 = rng.standard_normal((k, n)).astype(np.float16)
    c = np.empty((m, n), np.float32)
    grid = (math.ceil(m / 64), math.ceil(n / 64), 1)
    yield Case("matmul_f16", matmul, grid, [a16, b16, c, 64, 64, 32], [2],
               lambda a, b, *_: _mm(a, b), rtol=1e-3, atol=1e-2)
    yield Case("matmul_bf16_out", matmul, grid,
               [_bf16(a16), _bf16(b16), _bf16(np.zeros((m, n), np.float32)), 64, 64, 32], [2],
               lambda a, b, *_: _mm(a, b), rtol=2e-2, atol=5e-2)
    a32 = rng.standard_normal((m, k)).astype(np.float32)
    b32 = rng.standard_normal((k, n)).astype(np.float32)
    yield Case("matmul_tf32", matmul, grid, [a32, b32, c, 64, 64, 32], [2],
               lambda a, b, *_: _mm(a, b), rtol=2e-2, atol=5e-2)
    yield Case("matmul_tuned", matmul, grid, [a16, b16, c, 0, 0, 0], [2],
               lambda a, b, *_: _mm(a, b), rtol=1e-3, atol=1e-2, run=tuned_matmul)

    ab = rng.standard_normal((3, 70, 50)).astype(np.float16)
    bb = rng.standard_normal((3, 50, 90)).astype(np.float16)
    yield Case("batched_matmul", batched_matmul, (3, 3, 3),
               [ab, bb, np.empty((3, 70, 90), np.float32), 32, 32, 32], [2],
               lambda a, b, *_: [np.matmul(a.astype(np.float64), b.astype(np.float64))],
               rtol=1e-3, atol=1e-2)

    h, s, d = 4, 256, 64
    q, kk, v = (rng.standard_normal((h, s, d)).astype(np.float16) for _ in range(3))
    scale = 1 / math.sqrt(d)
    yield Case("attention", attention, (h, s // 64),
               [q, kk, v, np.empty((h, s, d), np.float16), scale, 64, 64, d], [3],
               lambda q, k, v, o, sc, *_: [_attention_ref(q, k, v, sc)], rtol=1e-2, atol=1e-2)
