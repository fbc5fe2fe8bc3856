"""Atomics as a cuTile user writes them: a histogram, per-bucket extremes, bit sets, a
split-K GEMM accumulating with `atomic_add`, the old values atomics return, and
ordered accesses with memory order and scope."""

import numpy as np

import cuda.tile as ct
from harness import KEEP, Case

ConstInt = ct.Constant[int]


@ct.kernel
def histogram(x, counts, T: ConstInt, BINS: ConstInt):
    b = ct.bid(0)
    v = ct.load(x, index=(b,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    i = b * T + ct.arange(T, dtype=ct.int32)
    bucket = ct.minimum(ct.astype(v * BINS, ct.int32), BINS - 1)
    # Padding past the end goes to an index out of bounds, which the atomic skips.
    bucket = ct.where(i < x.shape[0], bucket, BINS)
    ct.atomic_add(counts, bucket, 1, memory_order=ct.MemoryOrder.RELAXED)


@ct.kernel
def bucket_extremes(x, keys, hi, lo, T: ConstInt):
    b = ct.bid(0)
    v = ct.load(x, index=(b,), shape=(T,))
    k = ct.load(keys, index=(b,), shape=(T,))
    ct.atomic_max(hi, k, v)
    ct.atomic_min(lo, k, v, memory_scope=ct.MemoryScope.DEVICE)


@ct.kernel
def bitsets(x, words, T: ConstInt):
    b = ct.bid(0)
    v = ct.load(x, index=(b,), shape=(T,))
    ct.atomic_or(words, v // 32, ct.bitwise_lshift(1, v % 32))
    ct.atomic_xor(words, v // 32 + 4, ct.bitwise_lshift(1, v % 32))


@ct.kernel
def splitk_matmul(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    bm, bn, split = ct.bid(0), ct.bid(1), ct.bid(2)
    kx = a.shape[1] // TK // ct.num_blocks(2)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(split * kx, (split + 1) * kx):
        acc = ct.mma(ct.load(a, index=(bm, k), shape=(TM, TK)),
                     ct.load(b, index=(k, bn), shape=(TK, TN)), acc)
    rows = bm * TM + ct.arange(TM, dtype=ct.int32)
    cols = bn * TN + ct.arange(TN, dtype=ct.int32)
    ct.atomic_add(c, (rows[:, None], cols[None, :]), acc)


@ct.kernel
def claim_slots(slots, wins, T: ConstInt):
    # Every block tries to claim every slot; exactly one succeeds per slot.
    b = ct.bid(0)
    i = ct.arange(T, dtype=ct.int32)
    old = ct.atomic_cas(slots, i, 0, b + 1)
    ct.atomic_add(wins, i, ct.where(old == 0, 1, 0))


@ct.kernel
def exchange(x, old_out, T: ConstInt):
    # One block: the old values atomic_xchg returns are the array's before.
    i = ct.arange(T, dtype=ct.int32)
    old = ct.atomic_xchg(x, i, i * 10)
    ct.store(old_out, index=(0,), tile=old)


@ct.kernel
def publish(data, flag, out, T: ConstInt):
    # Block 0 writes data then releases a flag; every block waits for it (acquire).
    b = ct.bid(0)
    if b == 0:
        ct.store(data, index=(0,), tile=ct.arange(T, dtype=ct.int32) * 3)
        ct.atomic_xchg(flag, 0, 1, memory_order=ct.MemoryOrder.RELEASE)
    seen = ct.atomic_add(flag, 0, 0, memory_order=ct.MemoryOrder.ACQUIRE)
    while seen == 0:
        seen = ct.atomic_add(flag, 0, 0, memory_order=ct.MemoryOrder.ACQUIRE)
    ct.store(out, index=(b, 0), tile=ct.reshape(ct.load(data, index=(0,), shape=(T,)), (1, T)))


def cases(rng):
    x = rng.random(3000).astype(np.float32)
    yield Case("histogram", histogram, (3,), [x, np.zeros(16, np.int32), 1024, 16], [1],
               lambda x, c, t, bins: [np.bincount(np.minimum((x * bins).astype(int), bins - 1),
                                                  minlength=bins).astype(np.int32)],
               poison=0)

    x = rng.integers(-10**9, 10**9, 512).astype(np.int32)
    keys = rng.integers(0, 8, 512).astype(np.int32)
    big = np.iinfo(np.int32)
    yield Case("bucket_extremes", bucket_extremes, (4,),
               [x, keys, np.full(8, big.min, np.int32), np.full(8, big.max, np.int32), 128],
               [2, 3], lambda x, k, *_: [np.array([x[k == i].max() for i in range(8)]),
                                         np.array([x[k == i].min() for i in range(8)])],
               poison=KEEP)

    v = rng.integers(0, 128, 256).astype(np.int32)
    yield Case("bitsets", bitsets, (4,), [v, np.zeros(8, np.int32), 64], [1],
               lambda v, *_: [_bits(v)], poison=0)

    a = rng.standard_normal((128, 256)).astype(np.float16)
    b = rng.standard_normal((256, 64)).astype(np.float16)
    yield Case("splitk_matmul", splitk_matmul, (2, 1, 4),
               [a, b, np.zeros((128, 64), np.float32), 64, 64, 32], [2],
               lambda a, b, *_: [a.astype(np.float64) @ b.astype(np.float64)],
               rtol=1e-3, atol=1e-2, poison=0)

    yield Case("claim_slots", claim_slots, (16,),
               [np.zeros(64, np.int32), np.zeros(64, np.int32), 64], [1],
               lambda *_: [np.ones(64, np.int32)], poison=0)

    x = rng.integers(-100, 100, 32).astype(np.int32)
    yield Case("exchange", exchange, (1,), [x.copy(), np.empty(32, np.int32), 32], [1],
               lambda x, *_: [x])

    yield Case("publish", publish, (8,),
               [np.zeros(16, np.int32), np.zeros(1, np.int32), np.empty((8, 16), np.int32), 16],
               [2], lambda *_: [np.tile(np.arange(16, dtype=np.int32) * 3, (8, 1))])


def _bits(v):
    w = np.zeros(8, np.int64)
    for e in v:
        w[e // 32] |= 1 << (e % 32)
        w[e // 32 + 4] ^= 1 << (e % 32)
    return w.astype(np.uint32).view(np.int32)
