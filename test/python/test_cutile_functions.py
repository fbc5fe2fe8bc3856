"""cuTile 1.7 signatures of `arange`, `num_tiles`, `astype`, `matmul` and `bitcast`:
`arange(size, *, dtype, start, step)`, `num_tiles(..., order=)`, `astype(...,
rounding_mode=)` with the directed modes, 1-D `matmul` operands and `bitcast` of a
Python number.  Each in the interpreter, the simulator of both targets' GPU code and a
cubin (run_everywhere), against NumPy references."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.errors import TileTypeError, TileUnsupportedFeatureError, TileValueError
from tileir.interpreter import directed

from conftest import refused_at_the_line
from test_cutile_api import run_everywhere

RN, RZ, RM, RP, RA = (ct.RoundingMode.RN, ct.RoundingMode.RZ, ct.RoundingMode.RM,
                      ct.RoundingMode.RP, ct.RoundingMode.RA)


# ---------------------------------------------------------------------------
# arange
# ---------------------------------------------------------------------------
@ct.kernel
def ranges(o, f, b, start, step):
    ct.store(o, index=(0, 0), tile=ct.reshape(ct.arange(8, dtype=ct.int32), (1, 8)))
    ct.store(o, index=(1, 0), tile=ct.reshape(ct.arange(8, dtype=ct.int32, start=2), (1, 8)))
    ct.store(o, index=(2, 0), tile=ct.reshape(ct.arange(8, dtype=ct.int32, start=7, step=-1),
                                              (1, 8)))
    ct.store(o, index=(3, 0), tile=ct.reshape(ct.arange(8, start=start, step=step,
                                                        dtype=ct.int32), (1, 8)))
    ct.store(o, index=(4, 0), tile=ct.reshape(ct.arange(8, dtype=ct.int32, step=3), (1, 8)))
    ct.store(f, index=(0,), tile=ct.arange(8, dtype=ct.float32, start=0.5, step=-0.25))
    ct.store(b, index=(0,), tile=ct.arange(8, dtype=ct.int8, start=120, step=2))


def test_arange_takes_start_and_step_constant_or_at_run_time():
    """start + i * step in the dtype (int8 wraps, as its arithmetic does)."""
    i = np.arange(8)
    want = np.stack([i, 2 + i, 7 - i, -5 + 3 * i, 3 * i]).astype(np.int32)
    args = (np.zeros((5, 8), np.int32), np.zeros(8, np.float32), np.zeros(8, np.int8), -5, 3)
    outs = zip(*(run_everywhere(ranges, (1,), args, k) for k in range(3)))
    for o, f, b in outs:
        np.testing.assert_array_equal(o, want)
        np.testing.assert_array_equal(f, (0.5 - 0.25 * i).astype(np.float32))
        np.testing.assert_array_equal(b, (120 + 2 * i).astype(np.int64).astype(np.int8))


@ct.kernel
def bad_arange(o, MODE: ct.Constant[int]):
    if MODE == 0:
        r = ct.arange(6, dtype=ct.int32)
    elif MODE == 1:
        r = ct.arange(8, dtype=ct.int32, start=ct.arange(8, dtype=ct.int32))
    elif MODE == 2:
        r = ct.arange(8, ct.int32)
    else:
        r = ct.arange(8, dtype=ct.int8, step=300)
    ct.store(o, index=(0,), tile=ct.astype(r, ct.int32))


@pytest.mark.parametrize("mode,exc,message", [
    (0, TileValueError, "power-of-two dims"),
    (1, TileTypeError, "arange start must be a scalar"),
    (2, TileTypeError, "arange(size, /, *, dtype=None, start=0, step=1): too many positional"),
    (3, TileValueError, "arange step 300 is out of range of int8"),
])
def test_arange_arguments_are_checked_at_the_line(mode, exc, message):
    refused_at_the_line(bad_arange, (np.zeros(8, np.int32), mode), exc, message,
                        "test_cutile_functions.py")


# ---------------------------------------------------------------------------
# num_tiles with order
# ---------------------------------------------------------------------------
@ct.kernel
def counts(x, n):
    ct.store(n, index=(0,), tile=ct.full((1,), ct.num_tiles(x, 0, (4, 2, 8)), ct.int32))
    ct.store(n, index=(1,), tile=ct.full((1,), ct.num_tiles(x, 0, (4, 2, 8), order="F"),
                                         ct.int32))
    ct.store(n, index=(2,), tile=ct.full((1,), ct.num_tiles(x, 2, (4, 2, 8), order="F"),
                                         ct.int32))
    ct.store(n, index=(3,), tile=ct.full((1,), ct.num_tiles(x, 1, (4, 2, 8),
                                                            order=(2, 0, 1)), ct.int32))
    ct.store(n, index=(4,), tile=ct.full((1,), ct.num_tiles(x, -1, (4, 2, 8),
                                                            order=(1, 2, 0)), ct.int32))
    ct.store(n, index=(5,), tile=ct.full((1,), ct.num_tiles(x, 1, ()), ct.int32))


def test_num_tiles_counts_the_tile_space_of_the_permuted_array():
    """Tile-space axis i is array axis order[i], as load/store take `order`."""
    x = np.zeros((5, 9, 33), np.float32)
    cdiv = lambda a, b: -(-a // b)                                  # noqa: E731
    want = [cdiv(5, 4), cdiv(33, 4), cdiv(5, 8), cdiv(5, 2), cdiv(5, 8), 9]
    for got in run_everywhere(counts, (1,), (x, np.zeros(6, np.int32)), 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def transposed_copy(x, y, T0: ct.Constant[int], T1: ct.Constant[int]):
    # walk x's tile space in "F" order (axes swapped): tile (i, j) covers x[j-tile, i-tile]
    for i in range(ct.num_tiles(x, 0, (T0, T1), order="F")):
        for j in range(ct.num_tiles(x, 1, (T0, T1), order="F")):
            t = ct.load(x, index=(i, j), shape=(T0, T1), order="F",
                        padding_mode=ct.PaddingMode.ZERO)
            ct.store(y, index=(i, j), tile=t)


def test_num_tiles_and_load_agree_on_order():
    """Looping over num_tiles(order="F") and loading with order="F" visits every element
    of x once: y is x transposed."""
    x = np.arange(6 * 20, dtype=np.float32).reshape(6, 20)
    for got in run_everywhere(transposed_copy, (1,), (x, np.zeros((20, 6), np.float32), 8, 4),
                              1):
        np.testing.assert_array_equal(got, x.T)


# ---------------------------------------------------------------------------
# astype with a rounding mode
# ---------------------------------------------------------------------------
@ct.kernel
def converted(x, o, M: ct.Constant[int], METHOD: ct.Constant[int], T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    m = (ct.RoundingMode.RZ, ct.RoundingMode.RM, ct.RoundingMode.RP, ct.RoundingMode.RN)[M]
    if METHOD == 1:
        ct.store(o, index=(0,), tile=t.astype(o.dtype, rounding_mode=m))
    else:
        ct.store(o, index=(0,), tile=ct.astype(t, o.dtype, rounding_mode=m))


F16, BF16, F32, F64 = np.float16, ml_dtypes.bfloat16, np.float32, np.float64
# the pairs that round, with the modes cuTile 1.7 takes for them
PAIRS = [(F32, F16, "rz"), (F64, F16, "rz"), (F64, F32, "rz rm rp"), (F32, BF16, "rz"),
         (F64, BF16, "rz"), (F16, BF16, "rz"), (BF16, F16, "rz rm rp")]


def _edge_values(src, dst, rng, n=64) -> np.ndarray:
    """Random values across the target's range and its edges: NaN, infinities, signed
    zeros, the largest finite value and beyond it, the smallest subnormal and below,
    values halfway between two targets and one source step off halfway."""
    fd = ml_dtypes.finfo(dst)
    top, tiny = float(fd.max), float(fd.smallest_subnormal)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))
    one_up = float(np.nextafter(dst(1.0).astype(np.float64), 2, dtype=np.float64)) \
        if dst is not BF16 else 1.0 + 2.0 ** -7
    half = (1.0 + one_up) / 2
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, top, -top, top * 1.5, -top * 1.5, tiny,
             -tiny, tiny / 3, -tiny / 3, half, -half]
    x[:len(edges)] = edges
    with np.errstate(over="ignore"):               # (bf16's range is beyond f16's)
        x = x.astype(src)
    x[len(edges)] = np.nextafter(src(half), src(2))               # a source step above
    x[len(edges) + 1] = np.nextafter(src(half), src(0))           # and below halfway
    return x


# method 1 (the Tile.astype spelling) in the fast tier through the spelled-out edges
# below; its sweep over the pairs in `tile-check --full`.  In --full too (0.3 s each):
# float64-bfloat16 and float16-bfloat16, whose lowerings are steps the fast pairs take
# (elementwise._directed_truncf): cvt.rz.f32.f64 (float64-float32, and float64-float16
# after it), the exact widening of a 16-bit source (bfloat16-float16) and the bf16
# rounding by bits (float32-bfloat16)
_IN_FULL = {(F64, BF16), (F16, BF16)}


@pytest.mark.parametrize("method", [0, pytest.param(1, marks=pytest.mark.slow)])
@pytest.mark.parametrize("src,dst,modes", [
    pytest.param(*p, marks=pytest.mark.slow) if p[:2] in _IN_FULL else p for p in PAIRS],
    ids=[f"{np.dtype(s).name}-{np.dtype(d).name}" for s, d, _ in PAIRS])
def test_astype_rounds_once_in_the_direction_asked(src, dst, modes, method, rng):
    """Bit for bit the exact value rounded toward zero, -inf or +inf (directed.py's
    oracle, rational arithmetic): on the GPU f64 -> f32 is `cvt.rz.f32.f64`, 16-bit
    targets go through f32 in the same direction (one rounding), bf16 by bits."""
    x = _edge_values(src, dst, rng)
    bits = {2: np.uint16, 4: np.uint32}[np.dtype(dst).itemsize]
    for m, mode in enumerate(("rz", "rm", "rp")):
        if mode not in modes.split():
            continue
        want = directed.convert(mode, x.astype(np.float64), dst)
        with np.errstate(over="ignore"):
            nearest = x.astype(np.float64).astype(np.float32).astype(dst)
        assert (want != nearest).any()                  # the mode makes a difference here
        args = (x, np.zeros(64, dst), m, method, 64)
        for got in run_everywhere(converted, (1,), args, 1):
            same = (got.view(bits) == want.view(bits)) | (np.isnan(got) & np.isnan(want))
            assert same.all(), (mode, x[~same], got[~same], want[~same])


def test_astype_directed_edges_spelled_out():
    """A few results by hand: f32 -> f16 toward zero stops at 65504 and drops below the
    smallest subnormal; bf16 -> f16 rounds a value between two f16 subnormals down or
    up; RN is to nearest even."""
    x = np.array([70000.0, -70000.0, 1e-8, -1e-8, 1.0 + 2.0 ** -11] + [0.0] * 11, np.float32)
    got = run_everywhere(converted, (1,), (x, np.zeros(16, F16), 0, 0, 16), 1)
    for g in got:
        assert list(g[:4]) == [65504.0, -65504.0, 0.0, 0.0] and np.signbit(g[3])
        assert g[4] == 1.0
    b = np.array([2.0 ** -24 * 1.5] * 16, BF16)                   # 1.5 f16 subnormal units
    for m, want in ((1, 2.0 ** -24), (2, 2.0 ** -23), (3, 2.0 ** -23)):
        for g in run_everywhere(converted, (1,), (b, np.zeros(16, F16), m, 1, 16), 1):
            np.testing.assert_array_equal(g, np.full(16, want, F16))


@ct.kernel
def exact_conversions(x, o, p, T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    ct.store(o, index=(0,), tile=ct.astype(t, ct.float32, rounding_mode=ct.RoundingMode.RM))
    ct.store(p, index=(0,), tile=t.astype(ct.float64, rounding_mode=ct.RoundingMode.RA))
    ct.store(o, index=(1,), tile=ct.astype(ct.astype(t, ct.float32), ct.tfloat32,
                                           rounding_mode=ct.RoundingMode.RZ).astype(ct.float32))


def test_astype_modes_of_exact_conversions_and_tf32_toward_zero():
    """Widening never rounds (every mode gives the value); f32 -> tf32 toward zero drops
    the 13 low bits (NaN stays NaN)."""
    x = np.array([1.0 + 2.0 ** -10, -3.0, np.nan, np.inf] * 4, F16)
    want_tf32 = x.astype(np.float32)
    for o in run_everywhere(exact_conversions, (1,), (x, np.zeros(32, F32), np.zeros(16, F64),
                                                      16), 1):
        np.testing.assert_array_equal(o[:16], x.astype(np.float32))
        np.testing.assert_array_equal(o[16:], want_tf32)            # f16 fits in tf32
    y = np.array([1.0 + 2.0 ** -11 + 2.0 ** -20, -(1.0 + 2.0 ** -12), np.nan, 3.0] * 4, F32)
    truncated = (y.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    for o in run_everywhere(exact_conversions, (1,), (y, np.zeros(32, F32), np.zeros(16, F64),
                                                      16), 1):
        np.testing.assert_array_equal(o[16:], np.where(np.isnan(y), y, truncated))
        assert o[16] == 1.0 and o[17] == -1.0


@ct.kernel
def bad_astype(x, MODE: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(16,))
    if MODE == 0:
        r = ct.astype(t, ct.float16, rounding_mode=ct.RoundingMode.RM)
    elif MODE == 1:
        r = ct.astype(t, ct.float8_e4m3fn, rounding_mode=ct.RoundingMode.RZ)
    elif MODE == 2:
        r = ct.astype(ct.astype(t, ct.int32), ct.float16, rounding_mode=ct.RoundingMode.RZ)
    elif MODE == 3:
        r = ct.astype(ct.astype(t, ct.bfloat16), ct.float16, rounding_mode=ct.RoundingMode.RA)
    elif MODE == 4:
        r = ct.astype(t, ct.bfloat16, rounding_mode=ct.RoundingMode.APPROX)
    else:
        r = t.astype(ct.float16, rounding_mode=1)
    ct.store(x, index=(0,), tile=ct.astype(r, ct.float32))


@pytest.mark.parametrize("mode,exc,message", [
    (0, TileTypeError, "rounding_mode=RM is not supported for conversion from float32 to "
                       "float16, supported rounding modes for this conversion are (RN, RZ)"),
    (1, TileTypeError, "supported rounding modes for this conversion are (RN)"),
    (2, TileTypeError, "rounding_mode is only valid for float to float conversions"),
    (3, TileUnsupportedFeatureError, "with rounding mode RA is not supported by tileir"),
    (4, TileTypeError, "rounding_mode=APPROX is not supported"),
    (5, TileTypeError, "rounding_mode must be a tileir.RoundingMode"),
])
def test_astype_rounding_modes_are_checked_at_the_line(mode, exc, message):
    refused_at_the_line(bad_astype, (np.zeros(16, np.float32), mode), exc, message,
                        "test_cutile_functions.py")


# ---------------------------------------------------------------------------
# matmul of 1-D operands
# ---------------------------------------------------------------------------
@ct.kernel
def vector_products(a, b, c, o0, o1, o2, o3, o4):
    x = ct.load(a, index=(0,), shape=(16,))
    y = ct.load(b, index=(0, 0), shape=(16, 32))
    z = ct.load(c, index=(0, 0, 0), shape=(2, 16, 32))
    ct.store(o0, index=(0,), tile=ct.reshape(x @ x, (1,)))                  # 0-d
    ct.store(o1, index=(0,), tile=x @ y)                                     # (32,)
    ct.store(o2, index=(0,), tile=ct.matmul(ct.transpose(y), x))             # (32,)
    ct.store(o3, index=(0, 0), tile=x @ z)                                   # (2, 32)
    ct.store(o4, index=(0, 0), tile=ct.permute(z, (0, 2, 1)) @ x)            # (2, 32)


@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow), "float16"])
def test_matmul_takes_1d_operands_as_numpy_does(dtype, rng):
    """1-D @ 1-D is a dot product (a 0-d result), 1-D @ 2-D a row times a matrix,
    2-D @ 1-D a matrix times a column, and either with a batch of matrices."""
    t = np.dtype(dtype)
    a = rng.standard_normal(16).astype(t)
    b = rng.standard_normal((16, 32)).astype(t)
    c = rng.standard_normal((2, 16, 32)).astype(t)
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    want = [np.array([a64 @ a64]), a64 @ b64, b64.T @ a64, a64 @ c64,
            np.transpose(c64, (0, 2, 1)) @ a64]
    outs = [np.zeros(w.shape, t) for w in want]
    tol = 1e-5 if dtype == "float32" else 1e-2
    for k in range(5):
        for got in run_everywhere(vector_products, (1,), (a, b, c, *outs), 3 + k):
            np.testing.assert_allclose(got.astype(np.float64), want[k], rtol=tol, atol=tol)


@ct.kernel
def bad_matmul(a, MODE: ct.Constant[int]):
    x = ct.load(a, index=(0,), shape=(16,))
    if MODE == 0:
        r = x @ ct.zeros((8, 4), ct.float32)
    elif MODE == 1:
        r = ct.zeros((4, 8), ct.float32) @ x
    else:
        r = ct.matmul(ct.zeros((1, 1, 1, 16), ct.float32), x)
    ct.store(a, index=(0,), tile=ct.reshape(r, (-1,)))


@pytest.mark.parametrize("mode,message", [
    (0, "a has shape (16,), b has shape (8, 4) (a.shape[-1] must equal b.shape[-2])"),
    (1, "a has shape (4, 8), b has shape (16,) (a.shape[-1] must equal b.shape[0])"),
    (2, "matmul operand a must be a 1-D, 2-D or 3-D tile"),
])
def test_1d_matmul_shapes_are_checked(mode, message):
    with pytest.raises(TileTypeError) as info:
        bad_matmul.compile((np.zeros(16, np.float32), mode), stage="frontend")
    assert message in str(info.value)


# ---------------------------------------------------------------------------
# bitcast of a Python number
# ---------------------------------------------------------------------------
@ct.kernel
def scalar_bits(o, f, MODE: ct.Constant[int]):
    ct.store(o, index=(0,), tile=ct.reshape(ct.bitcast(1.0, ct.uint32), (1,)))
    ct.store(o, index=(1,), tile=ct.reshape(ct.bitcast(-1, ct.uint32), (1,)))
    ct.store(f, index=(0,), tile=ct.reshape(ct.bitcast(0x40490FDB, ct.float32), (1,)))
    if MODE == 1:
        ct.store(o, index=(2,), tile=ct.reshape(ct.astype(ct.bitcast(1.0, ct.uint16),
                                                          ct.uint32), (1,)))


def test_bitcast_of_a_python_number_reads_its_default_dtype_s_bits():
    """cuTile's docstring example: bitcast(1.0, uint32) is 0x3f800000 (1.0 a float32,
    -1 an int32)."""
    args = (np.zeros(2, np.uint32), np.zeros(1, np.float32), 0)
    for o, f in zip(run_everywhere(scalar_bits, (1,), args, 0),
                    run_everywhere(scalar_bits, (1,), args, 1)):
        assert list(o) == [0x3F800000, 0xFFFFFFFF]
        assert f[0] == np.float32(np.pi)
    with pytest.raises(TileTypeError) as info:
        scalar_bits.compile((*args[:2], 1), stage="frontend")
    assert "bitcast keeps the bit width: float32 has 32 bits, uint16 16" in str(info.value)
