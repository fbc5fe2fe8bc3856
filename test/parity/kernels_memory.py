"""Data movement as a cuTile user writes it: an embedding lookup with `gather`, a row
permutation with `scatter`, MoE-style token gathering with advanced indexing, array
slices and tiled views, column-major loads, and a grouped copy over a list of arrays."""

import numpy as np

import cuda.tile as ct
from harness import Case

ConstInt = ct.Constant[int]


@ct.kernel
def embedding(table, ids, out, TN: ConstInt, D: ConstInt):
    b = ct.bid(0)
    rows = ct.load(ids, index=(b,), shape=(TN,), padding_mode=ct.PaddingMode.ZERO)
    cols = ct.arange(D, dtype=ct.int32)
    vals = ct.gather(table, (rows[:, None], cols[None, :]))
    ct.store(out, index=(b, 0), tile=vals)


@ct.kernel
def permute_rows(x, perm, y, TN: ConstInt, D: ConstInt):
    b = ct.bid(0)
    t = ct.load(x, index=(b, 0), shape=(TN, D))
    dest = ct.load(perm, index=(b,), shape=(TN,), padding_mode=ct.PaddingMode.ZERO)
    row_ids = b * TN + ct.arange(TN, dtype=ct.int32)
    ok = row_ids < x.shape[0]
    cols = ct.arange(D, dtype=ct.int32)
    ct.scatter(y, (dest[:, None], cols[None, :]), t, mask=ok[:, None])


@ct.kernel
def masked_gather(x, idx, out, fill: float, T: ConstInt):
    b = ct.bid(0)
    i = ct.load(idx, index=(b,), shape=(T,))
    v = ct.gather(x, i, mask=i >= 0, padding_value=fill)
    ct.store(out, index=(b,), tile=v)


@ct.kernel
def gather_tokens(x, token_ids, out, TT: ConstInt, TD: ConstInt):
    b, d = ct.bid(0), ct.bid(1)
    ids = ct.load(token_ids, index=(b,), shape=(TT,), padding_mode=ct.PaddingMode.ZERO)
    t = ct.load_advanced_indexing(x, (ids, ct.Slice(d * TD, TD)),
                                  padding_mode=ct.PaddingMode.ZERO)
    ct.store_advanced_indexing(out, (b * TT + ct.arange(TT, dtype=ct.int32),
                                     ct.Slice(d * TD, TD)), t)


@ct.kernel
def sliced_copy(x, y, start: int, stop: int, T: ConstInt):
    b = ct.bid(0)
    view = x.slice(axis=0, start=start, stop=stop)
    t = ct.load(view, index=(b,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(b,), tile=t)


@ct.kernel
def window_sums(x, y, T: ConstInt):
    b = ct.bid(0)
    windows = x.tiled_view((T,), padding_mode=ct.PaddingMode.ZERO, traversal_steps=(T // 2,))
    t = windows.load((b,))
    ct.store(y, index=(b,), tile=ct.sum(t, axis=0))


@ct.kernel
def column_major(x, y, TM: ConstInt, TN: ConstInt):
    i, j = ct.bid(0), ct.bid(1)
    # t[a, b] = x[i * TM + b, j * TN + a]: the transpose of x's tile (i, j)
    t = ct.load(x, index=(j, i), shape=(TN, TM), order="F")
    ct.store(y, index=(j, i), tile=t)


@ct.kernel
def grouped_scale(xs, ys, scales, T: ConstInt):
    g, b = ct.bid(0), ct.bid(1)
    x, y = xs[g], ys[g]
    s = ct.load(scales, index=(g,), shape=(1,))
    t = ct.load(x, index=(b,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(b,), tile=t * s)


def cases(rng):
    table = rng.standard_normal((500, 64)).astype(np.float32)
    ids = rng.integers(0, 500, 45).astype(np.int32)
    yield Case("embedding", embedding, (3,), [table, ids, np.empty((48, 64), np.float32), 16, 64],
               [2], None)
    # Rows past the 45 ids read table row 0 (ids padded with zeros): check the first 45.
    yield Case("embedding_rows", embedding, (3,),
               [table, ids, np.empty((45, 64), np.float32), 16, 64], [2],
               lambda t, i, *_: [t[i]])

    x = rng.standard_normal((50, 32)).astype(np.float32)
    perm = rng.permutation(50).astype(np.int32)
    yield Case("permute_rows", permute_rows, (4,), [x, perm, np.empty_like(x), 16, 32], [2],
               lambda x, p, *_: [_scattered(x, p)])

    x = rng.standard_normal(300).astype(np.float32)
    idx = rng.integers(-1, 300, 256).astype(np.int32)
    yield Case("masked_gather", masked_gather, (2,), [x, idx, np.empty(256, np.float32), -7.0, 128],
               [2], lambda x, i, o, f, t: [np.where(i >= 0, x[np.maximum(i, 0)], f)])

    x = rng.standard_normal((100, 96)).astype(np.float16)
    tok = rng.integers(0, 100, 64).astype(np.int32)
    yield Case("gather_tokens", gather_tokens, (4, 3),
               [x, tok, np.empty((64, 96), np.float16), 16, 32], [2],
               lambda x, t, *_: [x[t]])

    x = rng.standard_normal(1000).astype(np.float32)
    yield Case("sliced_copy", sliced_copy, (4,), [x, np.empty(256, np.float32), 100, 321, 64],
               [1], lambda x, y, s, e, t: [np.concatenate([x[s:e], np.zeros(256 - (e - s))])])

    x = rng.standard_normal(200).astype(np.float32)
    yield Case("window_sums", window_sums, (13,), [x, np.empty(13, np.float32), 32], [1],
               lambda x, *_: [np.array([x[16 * b:16 * b + 32].sum() for b in range(13)])],
               rtol=1e-5, atol=1e-5)

    x = rng.standard_normal((96, 64)).astype(np.float32)   # read as its transpose
    yield Case("column_major", column_major, (3, 2), [x, np.empty((64, 96), np.float32), 32, 32],
               [1], lambda x, *_: [x.T])

    xs = [rng.standard_normal(n).astype(np.float32) for n in (100, 37, 256)]
    ys = [np.zeros_like(v) for v in xs]        # (not poisoned here: the run function does)
    scales = rng.standard_normal(3).astype(np.float32)
    yield Case("grouped_scale", grouped_scale, (3, 4), [xs, ys, scales, 64], [], None,
               run=_grouped(xs, ys, scales))


def _scattered(x, p):
    y = np.empty_like(x)
    y[p] = x
    return y


def _grouped(xs, ys, scales):
    """Lists of arrays are not single arguments the harness poisons: this case moves them
    itself and checks its own outputs."""
    def run(ct, stream, args):
        if stream is None:
            outs = [np.full_like(y, np.nan) for y in ys]
            ct.launch(None, (3, 4), grouped_scale, (list(xs), outs, scales, 64))
        else:
            import torch
            dx = [torch.from_numpy(v).cuda() for v in xs]
            dy = [torch.full_like(v, float("nan")) for v in dx]
            ct.launch(stream, (3, 4), grouped_scale, (dx, dy, torch.from_numpy(scales).cuda(), 64))
            torch.cuda.synchronize()
            outs = [v.cpu().numpy() for v in dy]
        for x, y, s in zip(xs, outs, scales):
            np.testing.assert_allclose(y, x * s, rtol=1e-6)
    return run
