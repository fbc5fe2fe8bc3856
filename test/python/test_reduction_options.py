"""cuTile's reductions with their options: max/min/argmax/argmin ignore NaN unless
`propagate_nan`, sum/prod take `rounding_mode` and `flush_to_zero`, max/min take
`flush_to_zero`.  Each in the interpreter, in the GPU code the simulator runs (sm_90a
and sm_80) and in a cubin, against NumPy references (rational arithmetic for the
directed roundings)."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.errors import TileTypeError

from test_cutile_api import run_everywhere

RZ, RM, RP = ct.RoundingMode.RZ, ct.RoundingMode.RM, ct.RoundingMode.RP
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


# ---------------------------------------------------------------------------
# NaN: ignored by default, propagated when asked
# ---------------------------------------------------------------------------
@ct.kernel
def extremes(x, v, i, T: ct.Constant[int], PROP: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(8, T))
    p = PROP == 1
    ct.store(v, index=(0, 0), tile=ct.reshape(ct.max(t, axis=1, propagate_nan=p), (1, 8)))
    ct.store(v, index=(1, 0), tile=ct.reshape(ct.min(t, axis=1, propagate_nan=p), (1, 8)))
    ct.store(i, index=(0, 0), tile=ct.reshape(ct.argmax(t, axis=1, propagate_nan=p), (1, 8)))
    ct.store(i, index=(1, 0), tile=ct.reshape(ct.argmin(t, axis=1, propagate_nan=p), (1, 8)))
    ct.store(v, index=(2, 0), tile=ct.reshape(ct.max(t, propagate_nan=p), (1, 1)))
    ct.store(i, index=(2, 0), tile=ct.reshape(ct.argmin(t, propagate_nan=p), (1, 1)))


def _rows(rng, n: int) -> np.ndarray:
    nan, inf = np.nan, np.inf
    x = rng.standard_normal((8, n))
    x[1, [3, 9]] = nan                                     # NaN among numbers
    x[2] = nan                                             # all NaN
    x[3] = -inf
    x[3, 0] = nan                                          # NaN first, then -inf
    x[4] = [-0.0, 0.0] * (n // 2)                          # zeros of both signs tie
    x[4, 2] = nan
    x[5] = [0.0, -0.0] * (n // 2)
    x[6] = np.arange(n) % 3                                # ties: the first one wins
    x[6, 0] = nan
    x[7] = 1.0
    x[7, [0, 5]] = [nan, inf]
    x[7, 9] = -inf
    return x


def _ignoring(x: np.ndarray, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """max/min of the non-NaN elements of each row (NaN if none) and the first index
    holding it (0 if none)."""
    m = (np.fmax if largest else np.fmin).reduce(x, axis=-1)
    idx = np.argmax(x == m[..., None], axis=-1)
    return m, idx


def _propagating(x: np.ndarray, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    return (np.max if largest else np.min)(x, axis=-1), \
        (np.argmax if largest else np.argmin)(x, axis=-1)


# the fast tier: each option with the first dtype; the other dtypes in `tile-check --full`
@pytest.mark.sweep(keep=("prop",))
@pytest.mark.parametrize("prop", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_max_min_and_their_indices_ignore_nan_unless_asked(dtype, prop, rng):
    """cuTile's default (propagate_nan=False) ignores NaN: an all-NaN row gives NaN and
    index 0, a row of NaN then -inf gives -inf at index 1; with propagate_nan a NaN is
    the extreme (the first NaN's index).  -0 and +0 tie (the first one wins)."""
    n = 16
    t = DTYPES[dtype]
    x = _rows(rng, n).astype(t)
    xf = x.astype(np.float32)
    ref = _propagating if prop else _ignoring
    (mx, amx), (mn, amn) = ref(xf, True), ref(xf, False)
    whole_max, _ = ref(xf.reshape(-1), True)
    _, whole_argmin = ref(xf.reshape(-1), False)
    args = (x, np.zeros((3, 8), t), np.zeros((3, 8), np.int32), n, prop)
    for v, i in zip(run_everywhere(extremes, (1,), args, 1),
                    run_everywhere(extremes, (1,), args, 2)):
        np.testing.assert_array_equal(v[0].astype(np.float32), mx)
        np.testing.assert_array_equal(v[1].astype(np.float32), mn)
        np.testing.assert_array_equal(i[0], amx)
        np.testing.assert_array_equal(i[1], amn)
        np.testing.assert_array_equal(v[2, 0].astype(np.float32), whole_max)
        assert i[2, 0] == whole_argmin
    if not prop:                       # the reference's own cases, spelled out
        assert np.isnan(mx[2]) and amx[2] == 0 and mx[3] == -np.inf and amx[3] == 1
        assert amx[4] == 0 and amn[4] == 0 and amx[5] == 0 and amn[5] == 0
        assert mx[7] == np.inf and amx[7] == 5 and mn[7] == -np.inf and amn[7] == 9


@ct.kernel
def zero_signs(x, v, T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    ct.store(v, index=(0,), tile=ct.reshape(ct.max(t), (1,)))
    ct.store(v, index=(1,), tile=ct.reshape(ct.min(t), (1,)))


def test_interpreter_orders_minus_zero_below_plus_zero_as_maxnumf_does():
    """The NaN-ignoring max of zeros of both signs is +0, the min -0 (the interpreter's
    arith.maxnumf rule, interpreter/arith_float.py); the GPU's max.f32 compares them
    equal, so elsewhere only the value is checked (above)."""
    x = np.array([-0.0, np.nan, 0.0, -0.0] * 4, np.float32)
    v = np.full(2, np.nan, np.float32)
    ct.launch(None, (1,), zero_signs, (x, v, 16))
    assert v[0] == 0 and not np.signbit(v[0])
    assert v[1] == 0 and np.signbit(v[1])


@ct.kernel
def int_extremes(x, o, T: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(4, T))
    ct.store(o, index=(0, 0), tile=ct.reshape(ct.max(t, axis=1), (1, 4)))
    ct.store(o, index=(1, 0), tile=ct.reshape(ct.max(t, axis=1, propagate_nan=True), (1, 4)))
    ct.store(o, index=(2, 0), tile=ct.reshape(ct.argmin(t, axis=1), (1, 4)))
    ct.store(o, index=(3, 0), tile=ct.reshape(ct.argmin(t, 1, propagate_nan=True), (1, 4)))


def test_integer_extremes_do_not_depend_on_propagate_nan(rng):
    x = rng.integers(-50, 50, (4, 32)).astype(np.int32)
    want = np.stack([x.max(1), x.max(1), x.argmin(1), x.argmin(1)]).astype(np.int32)
    for got in run_everywhere(int_extremes, (1,), (x, np.zeros((4, 4), np.int32), 32), 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def combine_extremes(x, v, w, T: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(4, T))
    ct.store(v, index=(0, 0), tile=ct.reshape(ct.reduce(t, 1, ct.maximum, -np.inf), (1, 4)))
    ct.store(v, index=(1, 0), tile=ct.reshape(ct.reduce(t, 1, ct.minimum, np.inf), (1, 4)))
    ct.store(v, index=(2, 0), tile=ct.reshape(ct.reduce(t, 1, max, -np.inf), (1, 4)))
    ct.store(v, index=(3, 0), tile=ct.reshape(ct.reduce(t, 1, min, np.inf), (1, 4)))
    s = ct.load(x, index=(0, 1), shape=(4, T))
    ct.store(w, index=(0, 0), tile=max(t, s))
    ct.store(w, index=(1, 0), tile=min(t, s, 0.5))
    ct.store(w, index=(2, 0), tile=ct.maximum(t, s, propagate_nan=True))


def test_python_max_and_ct_maximum_ignore_nan_in_reduce_and_element_wise(rng):
    """cuTile's `max(a, b)` on tiles is ct.maximum with its default (NaN ignored), and
    `ct.reduce(t, axis, max or ct.maximum, ...)` the built-in reduction with the same
    rule; `propagate_nan=True` propagates."""
    x = rng.standard_normal((4, 32)).astype(np.float32)
    x[0, 3] = x[2, :16] = x[1, 20] = np.nan
    t, s = x[:, :16], x[:, 16:]
    want = np.stack([np.fmax.reduce(t, 1), np.fmin.reduce(t, 1)] * 2)
    elementwise = np.stack([np.fmax(t, s), np.fmin(np.fmin(t, s), np.float32(0.5)),
                            np.maximum(t, s)])
    args = (x, np.zeros((4, 4), np.float32), np.zeros((12, 16), np.float32), 16)
    for v, w in zip(run_everywhere(combine_extremes, (1,), args, 1),
                    run_everywhere(combine_extremes, (1,), args, 2)):
        np.testing.assert_array_equal(v, want)
        np.testing.assert_array_equal(w.reshape(3, 4, 16), elementwise)


# ---------------------------------------------------------------------------
# sum / prod with directed rounding, flush to zero
# ---------------------------------------------------------------------------
@ct.kernel
def rounded_sums(x, o, T: ct.Constant[int], PROD: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(4, T))
    modes = (ct.RoundingMode.RN, ct.RoundingMode.RZ, ct.RoundingMode.RM, ct.RoundingMode.RP)
    for k in ct.static_iter(range(4)):
        if PROD == 1:
            r = ct.prod(t, axis=1, rounding_mode=modes[k])
        else:
            r = ct.sum(t, axis=1, rounding_mode=modes[k])
        ct.store(o, index=(k, 0), tile=ct.reshape(r, (1, 4)))


def _exact(row, prod: bool) -> Fraction:
    acc = Fraction(1 if prod else 0)
    for v in row:
        acc = acc * Fraction(float(v)) if prod else acc + Fraction(float(v))
    return acc


# the fast tier: sum and product in the first dtype; the other dtypes in `--full`
@pytest.mark.sweep(keep=("prod",))
@pytest.mark.parametrize("prod", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_directed_sums_and_products_round_every_step_their_way(dtype, prod, rng):
    """Every step rounds toward zero, -inf or +inf, so (monotonic rounding, whatever
    the order of the steps) the RM result <= the exact value <= the RP one; RZ is RM
    for positive rows and RP for negative ones (each partial has the row's sign), bit
    for bit; RN is near the exact value.  Random values carry more bits than the results keep,
    so some step is inexact."""
    x = directed_rows(dtype, prod, rng)
    args = (x, np.zeros((4, 4), DTYPES[dtype]), 16, prod)
    for got in run_everywhere(rounded_sums, (1,), args, 1):
        check_directed(got, x, prod)


def directed_rows(dtype: str, prod: int, rng) -> np.ndarray:
    t = DTYPES[dtype]
    if prod:                      # positive factors: every partial has the row's sign
        return rng.uniform(0.9, 1.1, (4, 16)).astype(t)
    x = (rng.uniform(1.0, 2.0, (4, 16)) * np.array([1, -1, 1, -1])[:, None]).astype(t)
    x[2, :8] *= t(3e-3)                                    # mixed magnitudes
    return x


def check_directed(got: np.ndarray, x: np.ndarray, prod: int) -> None:
    """rounded_sums' rows (RN, RZ, RM, RP) bracket the exact sums/products of x's rows."""
    rn, rz, rm, rp = (got[k].astype(np.float64) for k in range(4))
    eps = float(ml_dtypes.finfo(got.dtype).eps)
    for r in range(4):
        exact = _exact(x[r], bool(prod))
        assert Fraction(rm[r]) <= exact <= Fraction(rp[r]), (r, rm[r], exact, rp[r])
        assert rm[r] < rp[r]                               # some step was inexact
        assert rz[r] == (rm[r] if exact > 0 else rp[r])
        # (RN, the default, may add in another order: near the exact value, not between)
        assert abs(rn[r] - float(exact)) <= 16 * eps * abs(float(exact))


@ct.kernel
def flushing(x, o, T: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(4, T))
    ct.store(o, index=(0, 0), tile=ct.reshape(ct.sum(t, axis=1, flush_to_zero=True), (1, 4)))
    ct.store(o, index=(1, 0), tile=ct.reshape(ct.sum(t, axis=1), (1, 4)))
    ct.store(o, index=(2, 0), tile=ct.reshape(ct.max(t, axis=1, flush_to_zero=True), (1, 4)))
    ct.store(o, index=(3, 0), tile=ct.reshape(ct.min(t, axis=1, flush_to_zero=True), (1, 4)))
    r = ct.prod(t, axis=1, flush_to_zero=True, rounding_mode=ct.RoundingMode.RZ)
    ct.store(o, index=(4, 0), tile=ct.reshape(r, (1, 4)))


def test_flush_to_zero_flushes_every_step_of_a_reduction():
    """Subnormal elements count as zeros (of their sign) and a subnormal partial result
    is flushed: a row of subnormals sums to 0 (to 16 of them without flushing), its
    max with ftz is a zero; products of normals that underflow flush to zero."""
    for got in run_everywhere(flushing, (1,), (FLUSH_ROWS, np.zeros((5, 4), np.float32), 16),
                              1):
        check_flushed(got)


TINY = np.float32(1e-40)                                    # subnormal in f32
FLUSH_ROWS = np.zeros((4, 16), np.float32)
FLUSH_ROWS[0] = TINY
FLUSH_ROWS[1] = -TINY
FLUSH_ROWS[1, 0] = -1.0
FLUSH_ROWS[2] = 1e-20                                       # products underflow
FLUSH_ROWS[3] = [1.5, -2.0] * 8


def check_flushed(got: np.ndarray) -> None:
    """flushing's outputs over FLUSH_ROWS."""
    assert got[0][0] == 0 and got[0][1] == -1.0 and got[0][3] == -4.0
    np.testing.assert_allclose(got[0][2], 16 * np.float32(1e-20), rtol=1e-6)
    np.testing.assert_allclose(got[1][:2], [16 * TINY, -1.0], rtol=1e-6)
    assert got[1][0] > 0                                    # not flushed without ftz
    assert got[2][0] == 0 and got[2][1] == 0 and got[3][0] == 0 and got[3][1] == -1.0
    assert got[4][2] == 0 and got[4][3] == np.float32(1.5 ** 8 * 2.0 ** 8)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------
@ct.kernel
def bad_reduction(x, MODE: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(4, 16))
    if MODE == 0:
        r = ct.sum(ct.astype(t, ct.int32), 1, rounding_mode=RZ)
        ct.store(x, index=(0, 0), tile=ct.reshape(ct.astype(r, ct.float32), (4, 1)))
    elif MODE == 1:
        r = ct.sum(t, 1, rounding_mode=ct.RoundingMode.APPROX)
        ct.store(x, index=(0, 0), tile=ct.reshape(r, (4, 1)))
    elif MODE == 2:
        r = ct.max(ct.astype(t, ct.float16), 1, flush_to_zero=True)
        ct.store(x, index=(0, 0), tile=ct.reshape(ct.astype(r, ct.float32), (4, 1)))
    elif MODE == 3:
        ct.store(x, index=(0, 0), tile=ct.reshape(ct.max(t, 1, rounding_mode=RZ), (4, 1)))
    elif MODE == 4:
        r = ct.argmax(t, 1, propagate_nan=ct.bid(0) > 0)
        ct.store(x, index=(0, 0), tile=ct.reshape(ct.astype(r, ct.float32), (4, 1)))
    elif MODE == 5:
        r = ct.argmin(t, (0, 1))
        ct.store(x, index=(0, 0), tile=ct.reshape(ct.astype(r, ct.float32), (1, 1)))
    else:
        r = ct.argmax(t, 1, flush_to_zero=True)
        ct.store(x, index=(0, 0), tile=ct.reshape(ct.astype(r, ct.float32), (4, 1)))


@pytest.mark.parametrize("mode,message", [
    (0, "rounding_mode applies to float16/bfloat16/float32/float64 operands, sum got int32"),
    (1, "Rounding mode APPROX is not supported for sum"),
    (2, "flush_to_zero needs float32 operands, max got float16"),
    (3, "got an unexpected keyword argument 'rounding_mode'"),
    (4, "propagate_nan must be a compile-time bool"),
    (5, "argmin takes one axis or None, not a tuple of axes (0, 1)"),
    (6, "got an unexpected keyword argument 'flush_to_zero'"),
])
def test_reduction_options_are_checked_at_the_line(mode, message):
    x = np.zeros((4, 16), np.float32)
    with pytest.raises(TileTypeError) as info:
        bad_reduction.compile((x, mode), stage="frontend")
    assert message in str(info.value)
    assert "test_reduction_options.py" in str(info.value)


# ---------------------------------------------------------------------------
# Passes that rebuild reductions keep their NaN behaviour
# ---------------------------------------------------------------------------
def test_a_cluster_s_partial_maxima_ignore_nan_as_the_loop_did():
    """tile-cluster-rows deals a row's chunks to the blocks of a cluster and combines
    their partial maxima with the loop's own kind: ct.maximum(m, ct.max(t)) ignores
    NaN, so the row's maximum is that of its numbers even when a block saw only NaN."""
    from test_cluster_rows import _run_rewritten, row_stats
    rng = np.random.default_rng(11)
    x = rng.standard_normal((5, 1000)).astype(np.float32) + 2
    x[1, 5] = np.nan
    x[2, 128:256] = np.nan                                  # a whole chunk
    x[3, ::7] = np.nan
    out = np.full((5, 3), np.nan, np.float32)
    assert _run_rewritten(row_stats, (x, out, 128), 5) > 1
    xp = np.pad(x, ((0, 0), (0, 24)))                       # the padded last chunk
    np.testing.assert_allclose(out[:, 1], np.fmax.reduce(xp, 1), rtol=1e-6)
    np.testing.assert_allclose(out[:, 2], np.fmin.reduce(xp, 1), rtol=1e-6)
    assert np.isnan(out[1:4, 0]).all() and not np.isnan(out[[0, 4], 0]).any()
