"""What cuTile 1.7 added, as its users write it: raw array memory addressed by element
offsets (loads, stores, atomics), `arange` with a start and a step, reductions taking
`propagate_nan` / `flush_to_zero` / `rounding_mode`, `num_tiles` with an order, arrays
rebuilt from a foreign pointer, `DType.bitwidth`, host-and-tile functions, and
`launch(..., programmatic_dependent_launch=True)`."""

import numpy as np

import cuda.tile as ct
from harness import Case

ConstInt = ct.Constant[int]


@ct.kernel
def raw_memory(x, y, counts, T: ConstInt):
    b = ct.bid(0)
    src, dst = x.get_raw_memory(), y.get_raw_memory()
    # y[i] = x[n - 1 - i] by element offsets, masked at the end
    i = b * T + ct.arange(T, dtype=ct.int32)
    inside = i < x.shape[0]
    v = src.load_offset(x.shape[0] - 1 - i, mask=inside, padding_value=-1.0)
    dst.store_offset(i, v * 2, mask=inside)
    old = counts.get_raw_memory().atomic_add_offset(i % 4, 1, mask=inside)
    counts.get_raw_memory().atomic_max_offset(4 + i % 4, old, mask=inside)


@ct.kernel
def ranges(out, T: ConstInt):
    up = ct.arange(T, dtype=ct.int32, start=5, step=3)
    down = ct.arange(T, dtype=ct.int32, start=T - 1, step=-1)
    ct.store(out, index=(0, 0), tile=ct.reshape(up, (1, T)))
    ct.store(out, index=(1, 0), tile=ct.reshape(down, (1, T)))


@ct.kernel
def nan_reductions(x, out, T: ConstInt):
    r = ct.bid(0)
    t = ct.load(x, index=(r, 0), shape=(1, T))
    ct.store(out, index=(r, 0), tile=ct.reshape(ct.max(t, axis=1), (1, 1)))
    ct.store(out, index=(r, 1), tile=ct.reshape(ct.max(t, axis=1, propagate_nan=True), (1, 1)))
    ct.store(out, index=(r, 2), tile=ct.reshape(ct.min(t, axis=1, flush_to_zero=True), (1, 1)))
    ct.store(out, index=(r, 3), tile=ct.reshape(
        ct.astype(ct.argmin(t, axis=1, propagate_nan=True), ct.float32), (1, 1)))


@ct.kernel
def rounded_sums(x, out, T: ConstInt):
    r = ct.bid(0)
    t = ct.load(x, index=(r, 0), shape=(1, T))
    ct.store(out, index=(r, 0), tile=ct.reshape(
        ct.sum(t, axis=1, rounding_mode=ct.RoundingMode.RZ), (1, 1)))
    ct.store(out, index=(r, 1), tile=ct.reshape(
        ct.prod(ct.abs(t) + 0.5, axis=1, flush_to_zero=True), (1, 1)))


@ct.kernel
def tiles_in_order(x, out, TM: ConstInt, TN: ConstInt):
    c = ct.num_tiles(x, axis=0, shape=(TM, TN))
    f = ct.num_tiles(x, axis=0, shape=(TM, TN), order="F")
    both = ct.arange(2, dtype=ct.int32) * (f - c) + c          # [c, f]
    ct.store(out, index=(0,), tile=both)


@ct.kernel
def foreign_view(x, y, T: ConstInt):
    p = x.foreign_pointer
    view = ct.Array.from_foreign(p, x.shape, x.strides)
    ct.store(y, index=(0,), tile=ct.load(view, index=(0,), shape=(T,)) + 1)


@ct.function(host=True)
def axpy(a, x, y):
    return a * x + y


@ct.kernel
def widths(x, out, BITS: ConstInt):
    t = ct.load(x, index=(0,), shape=(4,))
    ct.store(out, index=(0,), tile=ct.astype(axpy(2, t, BITS), ct.int32))


@ct.kernel
def chained(x, y, T: ConstInt):
    ct.grid_dependency_control_wait()
    b = ct.bid(0)
    ct.store(y, index=(b,), tile=ct.load(x, index=(b,), shape=(T,)) * 3)
    ct.grid_dependency_control_launch_dependents()


def pdl_chain(ct, stream, args):
    x, y, z = args
    grid = (ct.cdiv(x.shape[0], 128),)
    ct.launch(stream, grid, chained, (x, y, 128))
    ct.launch(stream, grid, chained, (y, z, 128), programmatic_dependent_launch=True)


def cases(rng):
    x = rng.standard_normal(300).astype(np.float32)
    counts = np.zeros(8, np.int32)
    yield Case("raw_memory", raw_memory, (3,), [x, np.zeros(384, np.float32), counts, 128],
               [1, 2], lambda x, y, c, t: [_raw(x), np.array([75] * 4 + [74] * 4, np.int32)],
               poison=0)

    yield Case("ranges", ranges, (1,), [np.empty((2, 16), np.int32), 16], [0],
               lambda o, t: [np.stack([5 + 3 * np.arange(16),
                                       np.arange(16)[::-1]]).astype(np.int32)])

    x = rng.standard_normal((4, 64)).astype(np.float32)
    x[1, 7] = np.nan
    x[2, 3] = 1e-40          # a subnormal: flushed to zero where asked
    x[2] = np.abs(x[2])
    yield Case("nan_reductions", nan_reductions, (4,), [x, np.empty((4, 4), np.float32), 64], [1],
               lambda x, o, t: [_nan_ref(x)])

    x = rng.standard_normal((3, 64)).astype(np.float32)
    yield Case("rounded_sums", rounded_sums, (3,), [x, np.empty((3, 2), np.float32), 64], [1],
               lambda x, o, t: [np.stack([x.astype(np.float64).sum(1),
                                          (np.abs(x.astype(np.float64)) + 0.5).prod(1)], 1)],
               rtol=1e-5, atol=1e-5)

    yield Case("tiles_in_order", tiles_in_order, (1,),
               [np.zeros((100, 40), np.float32), np.empty(2, np.int32), 16, 8], [1],
               lambda *_: [np.array([7, 3], np.int32)])

    x = rng.standard_normal(64).astype(np.float32)
    yield Case("foreign_view", foreign_view, (1,), [x, np.empty(64, np.float32), 64], [1],
               lambda x, *_: [x + 1])

    bits = ct.float16.bitwidth + len(ct.bfloat16.name)      # on the host: 16 + 8
    x = np.arange(4, dtype=np.float16)
    yield Case("widths", widths, (1,), [x, np.empty(4, np.int32), axpy(1, bits, 0)], [1],
               lambda x, o, b: [(2 * x + 24).astype(np.int32)])

    x = rng.standard_normal(1000).astype(np.float32)
    yield Case("pdl_chain", chained, (8,), [x, np.empty_like(x), np.empty_like(x)], [1, 2],
               lambda x, *_: [x * 3, x * 9], run=pdl_chain)


def _raw(x):
    y = np.zeros(384, np.float32)
    y[:300] = x[::-1] * 2
    return y


def _nan_ref(x):
    out = np.empty((4, 4), np.float32)
    for r in range(4):
        row = x[r].astype(np.float32)
        clean = row[~np.isnan(row)]
        out[r, 0] = clean.max()
        out[r, 1] = np.nan if np.isnan(row).any() else row.max()
        flushed = np.where(np.abs(row) < np.finfo(np.float32).tiny, 0, row)
        out[r, 2] = np.nanmin(flushed)
        out[r, 3] = int(np.argmax(np.isnan(row))) if np.isnan(row).any() else int(np.argmin(row))
    return out
