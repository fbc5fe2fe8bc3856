"""cuTile's array views in tileir: `Array.slice`, `Array.tiled_view` and the `TiledView`
methods, in the interpreter, in the GPU code the simulator runs (sm_90a and sm_80)
and in a cubin, against NumPy references.

GPU launches of the same kernels are in test_gpu_cutile.py.
"""

from __future__ import annotations

import re
import typing

import numpy as np
import pytest

import tileir as ct
from tileir.errors import TileTypeError, TileUnsupportedFeatureError, TileValueError

from test_cutile_api import run_everywhere

ConstInt = ct.Constant[int]


# ---------------------------------------------------------------------------
# Array.slice
# ---------------------------------------------------------------------------
@ct.kernel
def slice_copy_1d(x, y, start, stop, T: ConstInt):
    sub_x = x.slice(0, start, stop)
    sub_y = y.slice(-1, start, stop)
    for i in range(ct.num_tiles(sub_x, 0, (T,))):
        ct.store(sub_y, (i,), ct.load(sub_x, (i,), (T,)) + 1.0)


@pytest.mark.parametrize("n,start,stop", [(20, 2, 7), (20, 4, 4), (20, 4, 5), (37, 3, 37),
                                          (16, 0, 16)])
def test_slice_reads_and_writes_only_its_window(n, start, stop, rng):
    x = rng.standard_normal(n).astype(np.float32)
    want = np.zeros(n, np.float32)
    want[start:stop] = x[start:stop] + 1
    for got in run_everywhere(slice_copy_1d, (1,), (x, np.zeros(n, np.float32), start, stop,
                                                    8), 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def ragged_rows(a, b, indptr, TM: ConstInt, TN: ConstInt):
    seg = ct.bid(0)
    start = ct.load(indptr, index=seg, shape=())
    end = ct.load(indptr, index=seg + 1, shape=())
    sub_a = a.slice(axis=0, start=start, stop=end)
    sub_b = b.slice(axis=0, start=start, stop=end)
    m, n = sub_a.shape
    j = ct.bid(1)
    for i in range(ct.cdiv(m, TM)):
        t = ct.load(sub_a, (i, j), (TM, TN), padding_mode=ct.PaddingMode.NEG_INF)
        ct.store(sub_b, (i, j), t * 2.0 + ct.astype(seg, ct.float32))    # -inf: dropped


def test_ragged_segments_of_rows_each_in_its_own_slice(rng):
    a = rng.standard_normal((12, 20)).astype(np.float32)
    indptr = np.array([0, 4, 7, 12], np.int32)
    want = np.zeros_like(a)
    for s in range(3):
        want[indptr[s]:indptr[s + 1]] = a[indptr[s]:indptr[s + 1]] * 2 + s
    args = (a, np.zeros_like(a), indptr, 4, 8)
    for got in run_everywhere(ragged_rows, (3, 3), args, 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def grouped_gemm(a, b, c, indptr, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    g = ct.bid(0)
    start = ct.load(indptr, index=g, shape=())
    end = ct.load(indptr, index=g + 1, shape=())
    rows_a, rows_c = a.slice(0, start, end), c.slice(0, start, end)
    j = ct.bid(1)
    for i in range(ct.num_tiles(rows_a, 0, (TM, TK))):
        acc = ct.zeros((TM, TN), ct.float32)
        for k in range(ct.num_tiles(a, 1, (TM, TK))):
            x = ct.load(rows_a, (i, k), (TM, TK), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(x, ct.load(b, (k, j), (TK, TN), padding_mode=ct.PaddingMode.ZERO), acc)
        ct.store(rows_c, (i, j), ct.astype(acc, ct.float16))


# 5-8 s of CPU (64 x 64 x 32 tensor-core tiles simulated on both targets): the fast tier
# keeps ragged groups on the tensor cores (test_cutile_lists.py's grouped GEMM) and
# row slices at run-time bounds (above); this, both at once, in `tile-check --full`
@pytest.mark.slow
def test_a_grouped_gemm_over_ragged_row_slices_uses_the_tensor_cores(rng):
    a = rng.standard_normal((100, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    indptr = np.array([0, 10, 70, 100], np.int32)
    want = a.astype(np.float32) @ b.astype(np.float32)
    args = (a, b, np.zeros((100, 64), np.float16), indptr, 64, 64, 32)
    for got in run_everywhere(grouped_gemm, (3, 1), args, 2):
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-2, atol=5e-2)
    for target, instruction in (("sm_90a", "wgmma"), ("sm_80", "mma.sync")):
        assert instruction in grouped_gemm.compile(args, stage="ptx",
                                                   target=target).artifacts["ptx"]


@ct.kernel
def slice_columns(x, y, start, stop, TM: ConstInt, TN: ConstInt):
    sub_x = x.slice(axis=1, start=start, stop=stop)
    sub_y = y.slice(axis=1, start=start, stop=stop)
    m, n = sub_x.shape
    for i in range(ct.cdiv(m, TM)):
        for j in range(ct.cdiv(n, TN)):
            t = ct.load(sub_x, (j, i), (TN, TM), order="F")      # the transposed tile space
            ct.store(sub_y, (j, i), t, order="F")


def test_column_slices_of_strided_arrays_in_the_transposed_tile_space(rng):
    base = rng.standard_normal((24, 34)).astype(np.float32)
    x = base[::2, ::2]                                   # non-unit strides
    want = np.zeros((12, 17), np.float32)
    want[:, 4:15] = x[:, 4:15]
    y = np.zeros((12, 17), np.float32)
    ct.launch(None, (1,), slice_columns, (x, y, 4, 15, 4, 8))
    np.testing.assert_array_equal(y, want)
    args = (np.ascontiguousarray(x), np.zeros((12, 17), np.float32), 4, 15, 4, 8)
    for got in run_everywhere(slice_columns, (1,), args, 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def chained_slices(x, y, T: ConstInt):
    sub1 = x.slice(axis=0, start=4, stop=16)
    sub2 = sub1.slice(axis=0, start=2, stop=ct.astype(8, ct.int64))   # x[6:12]
    sub_y = y.slice(axis=0, start=ct.astype(6, ct.int8), stop=12)
    ct.static_assert(sub1.shape[0] == 12)          # compile-time bounds: a compile-time dim
    n = sub1.slice(0, 0, 8).shape[0]
    ct.store(sub_y, (0,), ct.load(sub2, (0,), (T,)))
    ct.store(y.slice(0, 12, 20), (0,), ct.load(x, (0,), (n,)) * 0.0 - 1.0)
    ct.store(y.slice(0, 0, 6), (0,), ct.load(sub2, (1,), (4,), padding_mode=ct.PaddingMode.ZERO))


def test_slices_of_slices_and_compile_time_extents():
    x = np.arange(20, dtype=np.float32)
    want = np.zeros(20, np.float32)
    want[6:12] = x[6:12]
    want[12:20] = -1
    want[0:2] = x[10:12]                            # tile 1 of x[6:12] in 4s: 2 inside
    for got in run_everywhere(chained_slices, (1,), (x, np.zeros(20, np.float32), 8), 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def indexed_on_slices(x, hist, out, lo, hi, T: ConstInt):
    s = x.slice(0, lo, hi)
    i = ct.arange(T, dtype=ct.int32)
    g = ct.gather(s, i - 2, padding_value=-1.0)             # indices count from `lo`
    ct.store(out, (0,), g)
    ct.atomic_add(hist.slice(0, 2, 6), i % 8, 1)             # 4..7 fall outside the slice
    ct.scatter(out.slice(0, T, 2 * T), i * 2, g)
    rows = ct.arange(4, dtype=ct.int32)
    t = ct.load_advanced_indexing(s, (rows,), padding_mode=ct.PaddingMode.NAN)
    ct.store(out.slice(0, 2 * T, 3 * T), (0,), t)


def test_gather_scatter_atomics_and_advanced_indexing_on_slices():
    n, lo, hi, t = 20, 3, 10, 16
    x = np.arange(n, dtype=np.float32)
    i = np.arange(t) - 2
    inside = (i >= 0) & (i < hi - lo)
    g = np.where(inside, x[np.clip(i + lo, 0, n - 1)], -1).astype(np.float32)
    want_out = np.zeros(3 * t, np.float32)
    want_out[:t] = g
    want_out[t:2 * t:2] = g[:t // 2]
    want_out[2 * t:2 * t + 4] = x[lo:lo + 4]
    want_hist = np.zeros(12, np.int32)
    want_hist[2:6] = 2
    args = (x, np.zeros(12, np.int32), np.zeros(3 * t, np.float32), lo, hi, t)
    for got in run_everywhere(indexed_on_slices, (1,), args, 2):
        np.testing.assert_array_equal(got, want_out)
    for got in run_everywhere(indexed_on_slices, (1,), args, 1):
        np.testing.assert_array_equal(got, want_hist)


# ---------------------------------------------------------------------------
# Array.tiled_view and TiledView
# ---------------------------------------------------------------------------
@ct.kernel
def tiled_copy(x, y, n, TM: ConstInt, TN: ConstInt):
    bm, bn = ct.bid(0), ct.bid(1)
    tx = x.tiled_view((TM, TN), padding_mode=ct.PaddingMode.POS_INF)
    ty = y.tiled_view((TM, TN))
    ct.static_assert(tx.tile_shape == (TM, TN) and tx.dtype == x.dtype)
    ct.static_assert(tx.traversal_steps == (TM, TN))
    t = tx.load((bm, bn))
    ty.store((bm, bn), ct.where(t == np.inf, 0.0, t))
    tn = n.tiled_view(())
    if bm == 0 and bn == 0:
        tn.store(0, tx.num_tiles(0))
        tn.store(1, tx.num_tiles(-1))


def test_tiled_view_copies_a_ragged_array_tile_by_tile(rng):
    x = rng.standard_normal((19, 37)).astype(np.float32)
    args = (x, np.zeros_like(x), np.zeros(2, np.int32), 8, 16)
    for got in run_everywhere(tiled_copy, (3, 3), args, 1):
        np.testing.assert_array_equal(got, x)
    for got in run_everywhere(tiled_copy, (3, 3), args, 2):
        np.testing.assert_array_equal(got, [3, 3])
    ir = tiled_copy.tile_ir(*args)
    assert '"tile.load"' in ir and "gather" not in ir      # a whole array: plain tile loads


@ct.kernel
def padded(x, z, T: ConstInt, P: ConstInt):
    mode = ct.PaddingMode.ZERO
    if P == 1:
        mode = ct.PaddingMode.NEG_ZERO
    elif P == 2:
        mode = ct.PaddingMode.NAN
    elif P == 3:
        mode = ct.PaddingMode.POS_INF
    elif P == 4:
        mode = ct.PaddingMode.NEG_INF
    ct.store(z, (0,), x.tiled_view(T, padding_mode=mode).load(1))
    ct.store(z, (1,), x.slice(0, 10, 90).tiled_view(T, padding_mode=mode).load(1))


# In --full (0.2 s each): POS_INF and NEG_INF, constants of the path that [2-nan] keeps in
# the fast tier (a padding other than zero), their sign as [1--0.0]'s
@pytest.mark.parametrize("mode,value", [
    pytest.param(m, v, marks=pytest.mark.slow) if np.isinf(v) else (m, v)
    for m, v in enumerate([0.0, -0.0, np.nan, np.inf, -np.inf])])
def test_tiled_views_pad_with_their_padding_mode(mode, value, rng):
    x = rng.standard_normal(100).astype(np.float32)
    for got in run_everywhere(padded, (1,), (x, np.zeros(128, np.float32), 64, mode), 1):
        np.testing.assert_array_equal(got[:36], x[64:])
        np.testing.assert_array_equal(got[64:80], x[74:90])
        for pad in (got[36:64], got[80:]):
            np.testing.assert_array_equal(pad, np.full(pad.shape, value, np.float32))
            assert np.all(np.signbit(pad) == np.signbit(value))


@ct.kernel
def broadcast_store(x, y, SA: ConstInt, SB: ConstInt, DA: ConstInt, DB: ConstInt):
    t = x.tiled_view((SA, SB)).load((0, 0))
    y.tiled_view((DA, DB)).store((0, 0), t)


@pytest.mark.parametrize("src,dst", [((1, 16), (32, 16)), ((16, 1), (16, 64)),
                                     ((1, 1), (32, 16))])
def test_tiled_view_stores_broadcast_to_the_tile_shape(src, dst, rng):
    x = rng.standard_normal(src).astype(np.float32)
    for got in run_everywhere(broadcast_store, (1,), (x, np.zeros(dst, np.float32), *src, *dst),
                              1):
        np.testing.assert_array_equal(got, np.broadcast_to(x, dst))


@ct.kernel
def sliding(x, out, T: ConstInt, STEP: ConstInt):
    tv = x.tiled_view(T, traversal_steps=STEP)
    tv_out = out.tiled_view(T, traversal_steps=STEP)
    ct.static_assert(tv.traversal_steps == (STEP,))
    for i in range(tv.num_tiles(0)):
        tv_out.store(i, tv.load(i) * 2.0)


@pytest.mark.parametrize("tile,step,n", [(4, 2, 8), (4, 8, 16), (4, 3, 13), (8, 5, 29)],
                         ids=["overlapping", "gaps", "non_power_of_two", "ragged"])
def test_traversal_steps_move_tile_origins(tile, step, n, rng):
    x = rng.standard_normal(n).astype(np.float32)
    want = np.zeros(n, np.float32)
    for s in range(0, n, step):                       # num_tiles: cdiv(n, step)
        want[s:s + tile] = x[s:s + tile] * 2
    for got in run_everywhere(sliding, (1,), (x, np.zeros(n, np.float32), tile, step), 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def box_filter(x, out, KH: ConstInt, KW: ConstInt, OH: ConstInt, OW: ConstInt):
    windows = x.tiled_view((KH, KW), traversal_steps=(1, 1))
    cells = out.tiled_view(())
    for i in range(OH):
        for j in range(OW):
            cells.store(i * OW + j, ct.sum(windows.load((i, j))))


def test_overlapping_tiles_as_a_sliding_window(rng):
    x = rng.integers(0, 10, (6, 7)).astype(np.int32)
    want = np.array([[x[i:i + 2, j:j + 4].sum() for j in range(4)] for i in range(5)])
    for got in run_everywhere(box_filter, (1,), (x, np.zeros(20, np.int32), 2, 4, 5, 4), 1):
        np.testing.assert_array_equal(got, want.ravel())


@ct.kernel
def elements(x, out, SH: ConstInt, SW: ConstInt, NH: ConstInt, NW: ConstInt):
    tv = x.tiled_view((), traversal_steps=(SH, SW))
    cells = out.tiled_view(())
    ct.static_assert(tv.tile_shape == () and cells.traversal_steps == (1,))
    for i in range(NH):
        for j in range(NW):
            cells.store(i * NW + j, tv.load((i, j)))


@pytest.mark.parametrize("sh,sw", [(2, 3), (1, 1)])
def test_single_element_tiles_with_steps(sh, sw):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    nh, nw = 4 // sh, 6 // sw
    args = (x, np.zeros(nh * nw, np.float32), sh, sw, nh, nw)
    for got in run_everywhere(elements, (1,), args, 1):
        np.testing.assert_array_equal(got, x[::sh, ::sw].ravel())


@ct.kernel
def atomic_tiles(x, y, b, TM: ConstInt, TN: ConstInt, SM: ConstInt, SN: ConstInt):
    bm, bn = ct.bid(0), ct.bid(1)
    tx = x.tiled_view((TM, TN), traversal_steps=(SM, SN))
    u = y.tiled_view((TM, TN), traversal_steps=(SM, SN)).load((bm, bn))
    tx.atomic_store_add((bm, bn), u)
    tb = b.tiled_view((TM, TN))
    tb.atomic_store_xor((bm, bn), u)
    tb.atomic_store_max((bm, bn), 3)
    tb.atomic_store_min((bm, bn), ct.full((TN,), 4, ct.int32))
    tb.atomic_store_or((bm, bn), ct.astype(bm, ct.int32) << 8)
    ct.TiledView.atomic_store_and(tb, (bm, bn), ct.full((TM, TN), -1, ct.int32))


@pytest.mark.slow
def test_atomic_stores_of_tiled_views_with_and_without_steps(rng):
    shape, tile, steps = (50, 60), (32, 32), (20, 40)      # overlapping rows, gapped columns
    x, y, b = (rng.integers(-5, 5, shape).astype(np.int32) for _ in range(3))
    grid = (-(-shape[0] // steps[0]), -(-shape[1] // steps[1]))
    want_x, want_b = x.copy(), b.copy()
    for i in range(grid[0]):
        for j in range(grid[1]):
            rows = slice(i * steps[0], i * steps[0] + tile[0])
            cols = slice(j * steps[1], j * steps[1] + tile[1])
            want_x[rows, cols] += y[rows, cols]
            u = np.zeros(tile, np.int32)
            part = y[rows, cols]
            u[:part.shape[0], :part.shape[1]] = part
            cell = want_b[i * tile[0]:(i + 1) * tile[0], j * tile[1]:(j + 1) * tile[1]]
            h, w = cell.shape
            cell ^= u[:h, :w]
            cell[...] = np.minimum(np.maximum(cell, 3), 4) | (i << 8)
    args = (x, y, b, *tile, *steps)
    for got in run_everywhere(atomic_tiles, grid, args, 0):
        np.testing.assert_array_equal(got, want_x)
    for got in run_everywhere(atomic_tiles, grid, args, 2):
        np.testing.assert_array_equal(got, want_b)


@ct.kernel
def half_adds(x, y, T: ConstInt):
    x.tiled_view(T).atomic_store_add(0, ct.full((T,), 1.5, ct.float16))
    y.slice(0, 1, 9).tiled_view(T).atomic_store_add(0, 0.25)


def test_float_atomic_stores_including_16_bit():
    x, y = np.ones(16, np.float16), np.zeros(12, np.float32)
    for got in run_everywhere(half_adds, (1,), (x, y, 16), 0):
        np.testing.assert_array_equal(got, np.full(16, 2.5, np.float16))
    for got in run_everywhere(half_adds, (1,), (x, y, 16), 1):
        np.testing.assert_array_equal(got, [0] + [0.25] * 8 + [0] * 3)


# ---------------------------------------------------------------------------
# Views as helper arguments
# ---------------------------------------------------------------------------
@ct.function
def copy_tile(src, dst, i):
    dst.store(i, src.load(i))


def plain_copy(src, dst, i, T):                   # an undecorated helper, compiled inline
    ct.store(dst, (i,), ct.load(src, (i,), (T,)))


@ct.kernel
def through_helpers(x, y, z, start, stop, T: ConstInt):
    src = x.slice(0, start, stop).tiled_view(T, padding_mode=ct.PaddingMode.ZERO)
    dst = y.tiled_view(T)
    for i in range(src.num_tiles(0)):
        copy_tile(src, dst, i)
    plain_copy(x.slice(0, start, stop), z.slice(0, 1, 9), 0, T)
    plain_copy(x.slice(0, 2, 6), z.slice(0, 12, stop), 0, T)


def test_slices_and_tiled_views_pass_to_helpers():
    x = np.arange(20, dtype=np.float32)
    want_y = np.zeros(20, np.float32)
    want_y[:11] = x[3:14]
    want_z = np.zeros(20, np.float32)
    want_z[1:9] = x[3:11]
    want_z[12:14] = x[2:4]                          # 8 loaded, 4 inside x[2:6], 2 in z[12:14]
    args = (x, np.zeros(20, np.float32), np.zeros(20, np.float32), 3, 14, 8)
    for got in run_everywhere(through_helpers, (1,), args, 1):
        np.testing.assert_array_equal(got, want_y)
    for got in run_everywhere(through_helpers, (1,), args, 2):
        np.testing.assert_array_equal(got, want_z)


def test_views_called_outside_kernels_raise():
    with pytest.raises(ct.TileError, match="only be used inside a @kernel"):
        ct.TiledView().load(0)
    with pytest.raises(ct.TileError, match="only be used inside a @kernel"):
        ct.Array().slice(0, 0, 1)


# ---------------------------------------------------------------------------
# Misuse
# ---------------------------------------------------------------------------
@ct.function
def make_view(a, T, u):
    if u > 0:
        return a.tiled_view(T)
    return a


@ct.kernel
def bad_views(x, u, MODE: ConstInt):
    if MODE == 0:
        x.tiled_view((1, 2))
    elif MODE == 1:
        x.tiled_view(4).store(0, ct.zeros((8,), ct.float32))
    elif MODE == 2:
        x.tiled_view(4, traversal_steps=(2, 2))
    elif MODE == 3:
        x.tiled_view(4, traversal_steps=0)
    elif MODE == 4:
        x.slice(0, ct.astype(u, ct.uint32), 5)
    elif MODE == 5:
        x.slice(0, 1.0, 5.0)
    elif MODE == 6:
        x.slice(1, 0, 5)
    elif MODE == 7:
        x.slice(0, -1, 5)
    elif MODE == 8:
        x.slice(0, 5, 3)
    elif MODE == 9:
        tv = x.tiled_view(4)
        for i in range(3):
            tv = x.tiled_view(8)
    elif MODE == 10:
        x.tiled_view(4).shape
    elif MODE == 11:
        make_view(x, 4, u)
    elif MODE == 12:
        x.tiled_view(4).atomic_store_and(0, 1)
    elif MODE == 13:
        x.tiled_view(4).load((0, 0))
    elif MODE == 14:
        x.tiled_view(3)
    elif MODE == 15:
        x.tiled_view(4, padding_mode=ct.PaddingMode.NAN).num_tiles(1)
    elif MODE == 16:
        ct.TiledView.load(x, 0)
    elif MODE == 17:
        s = x.tiled_view(4) if u > 0 else x.tiled_view(8)
        s.store(0, 1.0)
    elif MODE == 18:
        if u > 0:
            s = x.slice(0, 0, 4)
        else:
            s = ct.astype(ct.full((4,), u, ct.int32), ct.float32)
        ct.store(x, (0,), s)
    else:
        x.tiled_view(4, padding_mode=3)


@pytest.mark.parametrize("mode,exc,message", [
    (0, TileTypeError, "tile shape (1, 2) has 2 dims, the array has 1"),
    (1, TileTypeError, "the stored tile has shape (8,), which does not broadcast to the tiled "
                       "view's tile shape (4,)"),
    (2, TileTypeError, "traversal_steps (2, 2) has 2 entries, the array has 1 dims"),
    (3, TileValueError, "traversal_steps (0,) must be positive; got 0 in axis 0"),
    (4, TileTypeError, "slice start must be a signed integer scalar, got a uint32 scalar"),
    (5, TileTypeError, "slice start must be a signed integer scalar, got the constant 1.0"),
    (6, TileValueError, "axis 1 is out of range for an array of rank 1"),
    (7, TileValueError, "slice start must be >= 0, got -1"),
    (8, TileValueError, "slice stop 3 is below its start 5"),
    (9, TileTypeError, "'tv' is a tiled view of a 1-d float32 array in tiles of (4,) before "
                       "the loop and a tiled view of a 1-d float32 array in tiles of (8,) after "
                       "a trip: tiled views chosen at run time must have the same tile shape"),
    (10, TileTypeError, "tiled views have no attribute 'shape'"),
    (11, TileTypeError, "the returns of 'make_view' may give different arrays, views, raw "
                        "memory or foreign pointers, but of one kind"),
    (12, TileTypeError, "atomic_store_and does not take a tiled view of float32"),
    (13, TileTypeError, "index has 2 entries but the tiled view has 1 dims"),
    (14, TileValueError, "tile shape (3,) must have power-of-two dims"),
    (15, TileValueError, "axis 1 is out of range for a tiled view of rank 1"),
    (16, TileTypeError, "expected a tiled view, got a 1-d float32 array"),
    (17, TileTypeError, "tiled views chosen at run time must have the same tile shape, "
                        "padding mode and traversal steps"),
    (18, TileTypeError, "'s' is a slice of a 1-d float32 array after one branch of a runtime "
                        "'if' and a float32 tile of shape (4,) after the other"),
    (19, TileTypeError, "padding_mode must be a tileir.PaddingMode, got the constant 3"),
])
def test_view_misuse_is_reported_at_the_line(mode, exc, message):
    with pytest.raises(exc) as info:
        bad_views.compile((np.zeros(16, np.float32), 1, mode), stage="frontend")
    assert message in str(info.value)
    assert "test_cutile_views.py" in str(info.value)


@ct.kernel
def slice_static(x: typing.Annotated[ct.Array, ct.ArrayAnnotation(static_shape_dims=(0,))],
                 y, STOP: ConstInt):
    s = x.slice(0, 2, STOP)
    ct.static_assert(s.shape[0] == STOP - 2)
    ct.store(y, (0,), ct.load(s, (0,), (16,)))


def test_a_constant_stop_past_a_compile_time_dim_is_refused():
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    ct.launch(None, (1,), slice_static, (x, y, 16))
    np.testing.assert_array_equal(y, np.concatenate([x[2:], [0, 0]]))
    with pytest.raises(TileValueError, match=re.escape("slice stop 20 is past the end of axis 0 "
                                                       "(size 16)")):
        slice_static.compile((x, y, 20), stage="frontend")
