"""Python as cuTile users write it in kernels: early exits, `break` and `continue`,
nested helper functions, helpers that return arrays (chosen at run time too), arrays
swapped in loops, chained comparisons, string constants, tuples as arguments and in
code, `...` in subscripts, the builtin `divmod`, a run-time conditional expression of
tuples, and frozen dataclasses."""

import dataclasses

import numpy as np

import cuda.tile as ct
from harness import KEEP, Case

ConstInt = ct.Constant[int]


@ct.kernel
def guarded_copy(x, y, n_rows: int, T: ConstInt):
    row = ct.bid(0)
    if row >= n_rows:
        return                      # blocks past the rows asked for do nothing
    ct.store(y, index=(row, 0), tile=ct.load(x, index=(row, 0), shape=(1, T)) * 2)


@ct.kernel
def first_tile_over(x, out, limit: float, T: ConstInt):
    # The index of the first tile whose sum passes `limit`, and the sum before it.
    found = -1
    before = 0.0
    for j in range(ct.num_tiles(x, axis=0, shape=(T,))):
        s = ct.sum(ct.load(x, index=(j,), shape=(T,), padding_mode=ct.PaddingMode.ZERO))
        if s > limit:
            found = j
            break
        before = before + s
    ct.store(out, index=(0,), tile=ct.full((2,), 0.0, ct.float32)
             + ct.where(ct.arange(2, dtype=ct.int32) == 0, found, before))


@ct.kernel
def even_tiles(x, out, T: ConstInt):
    acc = ct.zeros((T,), dtype=ct.float32)
    j = 0
    while j < ct.num_tiles(x, axis=0, shape=(T,)):
        t = ct.load(x, index=(j,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
        j += 1
        if (j - 1) % 2 == 1:
            continue
        acc += t
    ct.store(out, index=(0,), tile=acc)


@ct.kernel
def norms(x, out, T: ConstInt):
    def sq(v):
        return v * v

    def combine(a, b):
        return ct.maximum(a, b)

    t = ct.load(x, index=(ct.bid(0), 0), shape=(1, T))
    ct.store(out, index=(ct.bid(0), 0),
             tile=ct.cat((ct.reshape(ct.sum(sq(t), axis=1), (1, 1)),
                          ct.reshape(ct.reduce(ct.abs(t), 1, combine, 0.0), (1, 1))), axis=1))


KINDS = ("none", "relu", "square")


def activate(t, kind):
    if kind == "relu":
        return ct.maximum(t, 0.0)
    if kind == "square":
        return t * t
    return t


@ct.kernel
def activation(x, y, MODE: ConstInt, T: ConstInt):
    # cuTile takes no str kernel argument: the string is a compile-time value in code
    b = ct.bid(0)
    t = ct.load(x, index=(b,), shape=(T,))
    ct.store(y, index=(b,), tile=activate(t, KINDS[MODE]))


@ct.kernel
def band(x, y, lo: int, hi: int, T: ConstInt):
    b = ct.bid(0)
    i = b * T + ct.arange(T, dtype=ct.int32)
    t = ct.load(x, index=(b,), shape=(T,))
    inside = (i >= lo) & (i < hi)
    if 0 <= lo < hi:
        t = ct.where(inside, t, 0.0)
    ct.store(y, index=(b,), tile=t)


@ct.kernel
def affine_pair(xs, params, ys, T: ConstInt):
    x0, x1 = xs
    scale, shift = params
    b = ct.bid(0)
    ct.store(ys[0], index=(b,), tile=ct.load(x0, index=(b,), shape=(T,)) * scale + shift)
    ct.store(ys[1], index=(b,), tile=ct.load(x1, index=(b,), shape=(T,)) * scale + shift)


@ct.kernel
def int_builtins(x, y, q, r, p, T: ConstInt):
    b = ct.bid(0)
    a = ct.load(x, index=(b,), shape=(T,))
    d = ct.load(y, index=(b,), shape=(T,))
    qq, rr = divmod(a, d)
    ct.store(q, index=(b,), tile=qq)
    ct.store(r, index=(b,), tile=rr)
    ct.store(p, index=(b,), tile=ct.astype(a % 7, ct.float32) ** 2.0)


@ct.kernel
def outer(x, y, out, T: ConstInt):
    a = ct.load(x, index=(0,), shape=(T,))
    c = ct.load(y, index=(0,), shape=(T,))
    rows = x.shape[1:] + (T,)         # () + (T,)
    ct.static_assert(len(rows) == 1)
    ct.store(out, index=(0, 0), tile=a[..., None] * c[None, ...])


@dataclasses.dataclass(frozen=True)
class Affine:
    scale: object
    shift: object


def apply(f, t):
    return t * f.scale + f.shift


@ct.kernel
def with_dataclass(x, y, T: ConstInt):
    b = ct.bid(0)
    t = ct.load(x, index=(b,), shape=(T,))
    f = Affine(ct.full((T,), 2.0, ct.float32), 1.0)
    g = dataclasses.replace(f, shift=-1.0)
    ct.store(y, index=(b,), tile=apply(f, t) + apply(g, t))


def source_of(a, b, use_a):
    return a if use_a else b


def rows_from(a, start, T):
    return a.slice(0, start, start + T)


@ct.kernel
def helper_arrays(a, b, out, start: int, USE_A: ConstInt, T: ConstInt):
    src = source_of(a, b, USE_A)
    head = ct.load(src, index=(0,), shape=(T,))
    window = ct.load(rows_from(src, start, T), index=(0,), shape=(T,))
    ct.store(out, index=(ct.bid(0),), tile=head + window * (ct.bid(0) + 1))


def source_at_run_time(a, b, use_a):
    if use_a:
        return a
    return b


@ct.kernel
def runtime_arrays(a, b, out, start: int, T: ConstInt):
    # which array each block reads is known only when it runs
    src = source_at_run_time(a, b, ct.bid(0) % 2 == 0)
    window = a.slice(0, start, start + T) if ct.bid(0) < 2 else b
    t = ct.load(src, index=(0,), shape=(T,)) + ct.load(window, index=(0,), shape=(T,))
    ct.store(out, index=(ct.bid(0),), tile=t)


@ct.kernel
def swapped_buffers(x, y, out, steps: int, T: ConstInt):
    # one block ping-pongs between two buffers; a slice chosen in a loop
    src, dst = x, y
    for i in range(steps):
        ct.store(dst, index=(0,), tile=ct.load(src, index=(0,), shape=(T,)) * 0.5 + 1.0)
        src, dst = dst, src
    window = x
    for k in range(steps):
        window = x.slice(0, k, k + T) if k % 2 == 1 else y
    ct.store(out, index=(0,), tile=ct.load(src, index=(0,), shape=(T,)))
    ct.store(out, index=(1,), tile=ct.load(window, index=(0,), shape=(T,)))


@ct.kernel
def pair_ternary(x, out, n: int, T: ConstInt):
    t = ct.load(x, index=(ct.bid(0),), shape=(T,))
    lo, (hi, w) = (t, (t + 1.0, 2.0)) if n > ct.bid(0) else (t * 3.0, (t - 1.0, 0.5))
    ct.store(out, index=(ct.bid(0),), tile=(lo + hi) * w)


def cases(rng):
    x = rng.standard_normal((8, 64)).astype(np.float32)
    y = np.full((8, 64), 7.0, np.float32)
    yield Case("guarded_copy", guarded_copy, (8,), [x, y, 5, 64], [1],
               lambda x, y, n, t: [np.concatenate([x[:5] * 2, np.full((3, 64), 7.0)])],
               poison=KEEP)

    x = rng.uniform(0, 1, 1000).astype(np.float32)
    yield Case("first_tile_over", first_tile_over, (1,), [x, np.empty(2, np.float32), 20.0, 64],
               [1], lambda x, o, lim, t: [_first_over(x, lim, t)], rtol=1e-5, atol=1e-4)
    yield Case("first_tile_never", first_tile_over, (1,), [x, np.empty(2, np.float32), 1e9, 64],
               [1], lambda x, o, lim, t: [_first_over(x, lim, t)], rtol=1e-5, atol=1e-3)

    x = rng.standard_normal(700).astype(np.float32)
    yield Case("even_tiles", even_tiles, (1,), [x, np.empty(64, np.float32), 64], [1],
               lambda x, o, t: [_even(x, t)], rtol=1e-5, atol=1e-5)

    x = rng.standard_normal((4, 32)).astype(np.float32)
    yield Case("norms", norms, (4,), [x, np.empty((4, 2), np.float32), 32], [1],
               lambda x, *_: [np.stack([(x * x).sum(1), np.abs(x).max(1)], 1)],
               rtol=1e-5, atol=1e-5)

    x = rng.standard_normal(128).astype(np.float32)
    for kind, ref in (("relu", lambda v: np.maximum(v, 0)), ("square", lambda v: v * v),
                      ("none", lambda v: v)):
        yield Case(f"activation_{kind}", activation, (2,),
                   [x, np.empty_like(x), KINDS.index(kind), 64], [1],
                   lambda x, y, k, t, ref=ref: [ref(x)])

    x = rng.standard_normal(256).astype(np.float32)
    i = np.arange(256)
    yield Case("band", band, (4,), [x, np.empty_like(x), 30, 200, 64], [1],
               lambda x, y, lo, hi, t: [np.where((i >= lo) & (i < hi), x, 0)])
    yield Case("band_empty", band, (4,), [x, np.empty_like(x), 50, 20, 64], [1],
               lambda x, *_: [x])

    a, b = rng.standard_normal(128).astype(np.float32), rng.standard_normal(128).astype(np.float32)
    ya, yb = np.empty_like(a), np.empty_like(b)
    yield Case("affine_pair", affine_pair, (2,), [a, b, ya, yb, 64], [2, 3], None,
               run=_affine_pair(a, b))

    p = rng.integers(-1000, 1000, 128).astype(np.int32)
    q = (rng.integers(1, 30, 128) * rng.choice([-1, 1], 128)).astype(np.int32)
    z = np.empty(128, np.int32)
    yield Case("int_builtins", int_builtins, (2,),
               [p, q, z, z.copy(), np.empty(128, np.float32), 64], [2, 3, 4],
               lambda p, q, *_: [p // q, p % q, ((p % 7) ** 2).astype(np.float32)])

    u, v = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    yield Case("outer", outer, (1,), [u, v, np.empty((32, 32), np.float32), 32], [2],
               lambda u, v, *_: [np.outer(u, v)], rtol=1e-6, atol=1e-6)

    x = rng.standard_normal(128).astype(np.float32)
    yield Case("with_dataclass", with_dataclass, (2,), [x, np.empty_like(x), 64], [1],
               lambda x, *_: [(x * 2 + 1) + (x * 2 - 1)], rtol=1e-6, atol=1e-6)

    a, b = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    for use_a in (0, 1):
        yield Case(f"helper_arrays_{use_a}", helper_arrays, (2,),
                   [a, b, np.empty(64, np.float32), 37, use_a, 32], [2], _helper_arrays,
                   rtol=1e-6, atol=1e-6)

    yield Case("runtime_arrays", runtime_arrays, (4,), [a, b, np.empty(128, np.float32), 21, 32],
               [2], _runtime_arrays, rtol=1e-6, atol=1e-6)

    x, y = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    yield Case("swapped_buffers", swapped_buffers, (1,), [x, y, np.empty(64, np.float32), 5, 32],
               [0, 1, 2], _swapped_buffers, rtol=1e-6, atol=1e-6, poison=KEEP)

    x = rng.standard_normal(128).astype(np.float32)
    yield Case("pair_ternary", pair_ternary, (4,), [x, np.empty_like(x), 2, 32], [1],
               _pair_ternary, rtol=1e-6, atol=1e-6)


def _helper_arrays(a, b, out, start, use_a, t):
    src = a if use_a else b
    return [np.concatenate([src[:t] + src[start:start + t] * (k + 1) for k in range(2)])]


def _runtime_arrays(a, b, out, start, t):
    return [np.concatenate([(a if k % 2 == 0 else b)[:t] +
                            (a[start:start + t] if k < 2 else b[:t]) for k in range(4)])]


def _swapped_buffers(x, y, out, steps, t):
    x, y = x.copy(), y.copy()
    src, dst = x, y
    for i in range(steps):
        dst[:t] = src[:t] * 0.5 + 1
        src, dst = dst, src
    window = x
    for k in range(steps):
        window = x[k:k + t] if k % 2 == 1 else y
    return [x, y, np.concatenate([src[:t], window[:t]])]


def _pair_ternary(x, out, n, t):
    rows = []
    for k in range(len(x) // t):
        v = x[k * t:(k + 1) * t]
        lo, hi, w = (v, v + 1, 2) if n > k else (v * 3, v - 1, 0.5)
        rows.append((lo + hi) * w)
    return [np.concatenate(rows)]


def _first_over(x, limit, t):
    before = 0.0
    for j in range(-(-len(x) // t)):
        s = float(x[j * t:(j + 1) * t].astype(np.float64).sum())
        if s > limit:
            return np.array([j, before], np.float32)
        before += s
    return np.array([-1, before], np.float32)


def _even(x, t):
    padded = np.zeros(-(-len(x) // t) * t, np.float64)
    padded[:len(x)] = x
    return padded.reshape(-1, t)[::2].sum(0)


def _affine_pair(a, b):
    """Tuples of arrays and of scalars as kernel arguments: a case that moves them."""
    def run(ct, stream, args):
        if stream is None:
            outs = [np.full_like(a, np.nan), np.full_like(b, np.nan)]
            ct.launch(None, (2,), affine_pair, ((a, b), (3.0, 0.5), outs, 64))
        else:
            import torch
            da, db = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
            dev = [torch.full_like(da, float("nan")), torch.full_like(db, float("nan"))]
            ct.launch(stream, (2,), affine_pair, ((da, db), (3.0, 0.5), tuple(dev), 64))
            torch.cuda.synchronize()
            outs = [t.cpu().numpy() for t in dev]
        # (x * 3 + 0.5 may be one fused multiply-add: one rounding, not two)
        np.testing.assert_allclose(outs[0], a * 3.0 + 0.5, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(outs[1], b * 3.0 + 0.5, rtol=1e-6, atol=1e-6)
    return run
