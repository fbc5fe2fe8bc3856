"""cuTile's public names in tileir: each one in the interpreter, in the GPU code the
simulator runs (sm_90a and sm_80) and in a cubin, against NumPy references.

GPU launches of the same kernels are in test_gpu.py's cuTile section.
"""

from __future__ import annotations

import operator
import os
import re
import typing

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.errors import (StaticException, TileError, TileInternalError, TileRecursionError,
                           TileStaticAssertionError, TileStaticEvalError, TileTypeError,
                           TileUnsupportedFeatureError, TileValueError)
from tileir.sim import simulate
from tileir.dialect import TileIRError

from conftest import full_tier, refused_at_the_line

TARGETS = ("sm_90a", "sm_80")

# `cuda.tile.__all__` of cuTile Python 1.7.0 (NVIDIA/cutile-python, src/cuda/tile/__init__.py):
# its 155 names.
CUTILE_ALL = """
launch ByTarget MemoryOrder MemoryScope PaddingMode RoundingMode DType bfloat16 bool_
float4_e2m1fn float8_e4m3fn float8_e5m2 float8_e8m0fnu float8_e5m3fnu float16 float32 float64
int8 int16 int32 int64 tfloat32 uint8 uint16 uint32 uint64 TileCompilerExecutionError
TileCompilerTimeoutError TileError TileInternalError TileRecursionError
TileStaticAssertionError TileStaticEvalError TileSyntaxError TileTypeError
TileUnsupportedFeatureError TileValueError StaticException Array ArrayAnnotation Constant
ConstantAnnotation IndexedWithInt64 ListAnnotation Scalar ScalarInt64 Slice Tile TiledView abs
add arange argmax argmin assert_ assume_divisible_by astile astype atan2 atomic_add atomic_and
atomic_cas atomic_max atomic_min atomic_or atomic_xchg atomic_xor bitwise_and bitwise_lshift
bitwise_not bitwise_or bitwise_rshift bitwise_xor bid bitcast broadcast_to cat cdiv ceil cos
cosh cumprod cumsum divmod ensure_constant equal exp exp2 expand_dims extract floor floordiv full
gather greater greater_equal insert less less_equal load load_advanced_indexing log log2 matmul
max maximum min minimum mma mma_scaled mod mul negative isnan not_equal num_blocks num_tiles ones
pack_to_bytes permute pow printf print prod reduce reshape rsqrt scan scatter sin sinh sqrt
static_assert static_eval static_exception static_iter store store_advanced_indexing sub sum tan
tanh transpose truediv unpack_from_bytes where zeros grid_dependency_control_wait
grid_dependency_control_launch_dependents compiler_timeout tune function kernel compilation
foreign_pointer_dtype
""".split()


def test_the_cutile_names_tileir_has():
    """The names still missing are exactly these (docs/frontend.md lists each one's status)."""
    assert len(CUTILE_ALL) == len(set(CUTILE_ALL)) == 155
    missing = {n for n in CUTILE_ALL if not hasattr(ct, n)}
    assert missing == set(NOT_YET), sorted(missing ^ set(NOT_YET))
    doc = open(__file__.replace("test/python/test_cutile_api.py", "docs/frontend.md")).read()
    for name in CUTILE_ALL:
        assert f"`{name}`" in doc, f"docs/frontend.md does not mention `{name}`"


NOT_YET: list[str] = []


def run_everywhere(kernel, grid, args, out_index, stages=TARGETS, cubins=None):
    """Runs `kernel` in the interpreter and, for each target, its gpu-stage code in the
    simulator, and compiles its cubin for each target (ptxas takes the PTX) in the full
    tier or with `cubins=True` (conftest.full_tier: the fast tier keeps the simulator's
    runs of every kernel, and the API's ptxas check on both targets in
    test_functional_float_operators_run_correctly); returns the outputs [interpreter,
    *targets]."""
    cubins = full_tier() if cubins is None else cubins
    outs = []
    fresh = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    ct.launch(None, grid, kernel, tuple(fresh))
    outs.append(fresh[out_index])
    for target in stages:
        fresh = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        ck = kernel.compile(tuple(fresh), stage="gpu", target=target)
        simulate(ck, grid, tuple(fresh))
        outs.append(fresh[out_index])
        if cubins:
            kernel.compile(tuple(fresh), stage="cubin", target=target)
    return outs


# ---------------------------------------------------------------------------
# Functional operators
# ---------------------------------------------------------------------------
@ct.kernel
def float_functions(x, y, out, T: ct.Constant[int]):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    b = ct.load(y, index=(i,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    r = ct.add(a, b) * 1.0
    r = r + ct.sub(a, b) * 2.0 + ct.mul(a, b) * 3.0 + ct.truediv(a, b)
    r = r + ct.floordiv(a, b) + ct.mod(a, b) + ct.negative(a)
    r = r + ct.atan2(a, b) + ct.sinh(a) + ct.cosh(b)
    r = r + ct.where(ct.equal(a, b), 1.0, 0.0) + ct.where(ct.not_equal(a, b), 2.0, 0.0)
    r = r + ct.where(ct.less(a, b), 4.0, 0.0) + ct.where(ct.less_equal(a, b), 8.0, 0.0)
    r = r + ct.where(ct.greater(a, b), 16.0, 0.0) + ct.where(ct.greater_equal(a, 0.0), 32.0, 0.0)
    ct.store(out, index=(i,), tile=r)


def test_functional_float_operators_run_correctly(rng):
    n = 100
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) + 3.0
    b[:5] = a[:5]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = ((a64 + b64) + (a64 - b64) * 2 + a64 * b64 * 3 + a64 / b64 + np.floor(a64 / b64)
            + np.mod(a64, b64) - a64 + np.arctan2(a64, b64) + np.sinh(a64) + np.cosh(b64)
            + (a == b) + 2 * (a != b) + 4 * (a < b) + 8 * (a <= b) + 16 * (a > b)
            + 32 * (a >= 0))
    out = np.full(n, np.nan, np.float32)
    # cubins=True: the cuTile API's ptxas check on both targets in the fast tier
    for got in run_everywhere(float_functions, (ct.cdiv(n, 32),), (a, b, out, 32), 2,
                              cubins=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@ct.kernel
def int_functions(x, y, out, T: ct.Constant[int]):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    b = ct.load(y, index=(i,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    q, m = ct.divmod(a, b)
    r = ct.bitwise_and(a, b) + ct.bitwise_or(a, 7) * 3 + ct.bitwise_xor(a, b) * 5
    r = r + ct.bitwise_lshift(a, 2) + ct.bitwise_rshift(a, 1) + ct.bitwise_not(b) * 11
    r = r + q * 13 + m * 17 + ct.floordiv(a, b) * 19 + ct.mod(a, b) * 23
    flags = ct.bitwise_and(ct.greater(a, 0), ct.bitwise_not(ct.less(b, 0)))
    r = r + ct.astype(flags, ct.int32) * 29
    ct.store(out, index=(i,), tile=r)


def test_functional_integer_operators_run_correctly(rng):
    n = 100
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    b = rng.integers(1, 50, n).astype(np.int32) * rng.choice([-1, 1], n).astype(np.int32)
    want = ((a & b) + (a | 7) * 3 + (a ^ b) * 5 + (a << 2) + (a >> 1) + (~b) * 11
            + (a // b) * 13 + (a % b) * 17 + (a // b) * 19 + (a % b) * 23
            + ((a > 0) & ~(b < 0)) * 29)
    out = np.zeros(n, np.int32)
    for got in run_everywhere(int_functions, (ct.cdiv(n, 32),), (a, b, out, 32), 2):
        np.testing.assert_array_equal(got, want.astype(np.int32))


@ct.kernel
def nan_handling(x, y, out, T: ct.Constant[int]):
    a = ct.load(x, index=(0,), shape=(T,))
    b = ct.load(y, index=(0,), shape=(T,))
    m = ct.maximum(a, b) + ct.minimum(a, b) * 2.0
    p = ct.maximum(a, b, propagate_nan=True)
    flag = ct.where(ct.isnan(a), 100.0, 0.0)
    ct.store(out, index=(0,), tile=ct.where(ct.isnan(p), m + flag, 1000.0 + m + flag))


def test_maximum_ignores_nan_unless_asked_and_isnan_finds_it():
    a = np.array([1, np.nan, 3, -np.nan] * 8, np.float32)
    b = np.array([2, 5, np.nan, -1] * 8, np.float32)
    m = np.fmax(a, b) + np.fmin(a, b) * 2
    want = np.where(np.isnan(a) | np.isnan(b), m + np.isnan(a) * 100, 1000 + m)
    out = np.zeros(32, np.float32)
    for got in run_everywhere(nan_handling, (1,), (a, b, out, 32), 2):
        np.testing.assert_array_equal(got, want.astype(np.float32))


@ct.kernel
def float_options(x, y, out, T: ct.Constant[int]):
    a = ct.load(x, index=(0,), shape=(T,))
    b = ct.load(y, index=(0,), shape=(T,))
    r = ct.add(a, b, flush_to_zero=True)
    r = r + ct.truediv(a, b, rounding_mode=ct.RoundingMode.RN)
    r = r + ct.truediv(a, b, rounding_mode=ct.RoundingMode.APPROX)
    r = r + ct.sqrt(ct.abs(a), rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    r = r + ct.tanh(a, rounding_mode=ct.RoundingMode.APPROX) + ct.exp2(b, flush_to_zero=True)
    ct.store(out, index=(0,), tile=r)


def test_rounding_modes_and_flush_to_zero_run_and_pick_the_instructions(rng):
    a = rng.standard_normal(32).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32) + 4
    want = a + b + 2 * (a / b) + np.sqrt(np.abs(a)) + np.tanh(a) + np.exp2(b)
    out = np.zeros(32, np.float32)
    for got in run_everywhere(float_options, (1,), (a, b, out, 32), 2):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ptx = float_options.compile((a, b, out, 32), stage="ptx", target="sm_90a").artifacts["ptx"]
    for inst in ("add.rn.ftz.f32", "div.rn.f32", "div.approx.f32", "sqrt.approx.ftz.f32",
                 "tanh.approx.f32", "ex2.approx.ftz.f32"):
        assert inst in ptx, inst


@ct.kernel
def flushes(x, out, T: ct.Constant[int]):
    a = ct.load(x, index=(0,), shape=(T,))
    ct.store(out, index=(0,), tile=ct.add(a, 0.0, flush_to_zero=True) + ct.mul(a, 1.0))


def test_flush_to_zero_flushes_subnormals():
    tiny = np.float32(1e-40)                         # subnormal in f32
    a = np.array([tiny, -tiny, 1.0, 0.0] * 8, np.float32)
    out = np.zeros(32, np.float32)
    want = np.array([tiny, -tiny, 2.0, 0.0] * 8, np.float32)     # flushed + kept
    for got in run_everywhere(flushes, (1,), (a, out, 32), 1):
        np.testing.assert_array_equal(got, want)


def _compile_error(body_kernel, args):
    with pytest.raises(TileError) as info:
        body_kernel.compile(args, stage="frontend")
    return info


@ct.kernel
def bad_mode(x, MODE: ct.Constant[int]):
    a = ct.load(x, index=(0,), shape=(16,))
    if MODE == 0:
        ct.store(x, index=(0,), tile=ct.add(a, a, rounding_mode=ct.RoundingMode.RA))
    elif MODE == 1:
        ct.store(x, index=(0,), tile=ct.add(a, a, rounding_mode=ct.RoundingMode.FULL))
    elif MODE == 2:
        h = ct.astype(a, ct.float16)
        ct.store(x, index=(0,), tile=ct.truediv(h, h, rounding_mode=ct.RoundingMode.APPROX))
    elif MODE == 3:
        ct.store(x, index=(0,), tile=ct.add(ct.astype(a, ct.float16), 1.0, flush_to_zero=True))
    elif MODE == 4:
        ct.store(x, index=(0,), tile=ct.bitwise_and(a, 1))
    elif MODE == 5:
        ct.store(x, index=(0,), tile=ct.divmod(a, a)[0])
    else:
        ct.store(x, index=(0,), tile=ct.isnan(ct.astype(a, ct.int32)))


@pytest.mark.parametrize("mode,exc,message", [
    (0, TileTypeError, "Rounding mode RA is not supported for add"),   # (as cuTile says)
    (1, TileTypeError, "Rounding mode FULL is not supported for add"),
    (2, TileTypeError, "needs float32 operands"),
    (3, TileTypeError, "flush_to_zero needs float32 operands"),
    (4, TileTypeError, "bitwise_and needs integer or boolean operands"),
    (5, TileTypeError, "divmod() is not implemented for floating point values"),
    (6, TileTypeError, "isnan needs a float tile"),
])
def test_float_options_and_operand_kinds_are_checked_at_the_line(mode, exc, message):
    x = np.zeros(16, np.float32)
    with pytest.raises(exc) as info:
        bad_mode.compile((x, mode), stage="frontend")
    assert message in str(info.value)
    assert "test_cutile_api.py" in str(info.value)


# ---------------------------------------------------------------------------
# Options, exceptions, annotations
# ---------------------------------------------------------------------------
def test_by_target_resolves_per_architecture():
    v = ct.ByTarget(sm_90=2, sm_80=4, default=1)
    assert v.resolve("sm_90a") == 2 and v.resolve("sm_80") == 4 and v.resolve("sm_100") == 1
    assert ct.ByTarget(sm_90=3).resolve("sm_80", "fallback") == "fallback"
    assert repr(ct.ByTarget(sm_100=8, default=2)) == "ByTarget(sm_100=8, default=2)"
    assert ct.ByTarget(sm_90=1) == ct.ByTarget(sm_90=1) != ct.ByTarget(sm_90=2)
    with pytest.raises(ValueError, match="Invalid GPU architecture name"):
        ct.ByTarget(hopper=1)


@ct.kernel(occupancy=ct.ByTarget(sm_90=2, sm_80=3), num_ctas=ct.ByTarget(sm_100=2),
           opt_level=3)
def occupied(x, T: ct.Constant[int]):
    ct.store(x, index=(0,), tile=ct.load(x, index=(0,), shape=(T,)) + 1.0)


def test_by_target_kernel_options_are_checked_and_resolved_per_target():
    x = np.zeros(64, np.float32)
    for target, occupancy in (("sm_90a", 2), ("sm_80", 3)):
        text = occupied.compile((x, 64), stage="frontend", target=target).ir()
        assert f"tile.occupancy = {occupancy} : i32" in text
    with pytest.raises(TileValueError, match="num_ctas must be a power of 2"):
        ct.kernel(num_ctas=ct.ByTarget(sm_100=3))(occupied.fn)
    with pytest.raises(TileValueError, match="occupancy must be an int in"):
        ct.kernel(occupancy=33)(occupied.fn)
    faster = occupied.replace_hints(occupancy=1)
    assert faster is not occupied and faster.options["occupancy"] == 1
    assert "tile.occupancy = 1 : i32" in faster.compile((x, 64), stage="frontend",
                                                        target="sm_90a").ir()


def test_kernel_option_errors_are_value_errors_as_in_cutile():
    """cuTile checks its options when the kernel is made and raises ValueError; tileir's
    KernelOptionError is one, and a TileValueError."""
    for bad in ({"num_ctas": 3}, {"occupancy": 0}, {"opt_level": 4}, {"num_worker_warps": 3},
                {"num_worker_warps": 64}, {"num_worker_warps": ct.ByTarget(sm_100=12)}):
        with pytest.raises(ValueError, match="kernel option") as caught:
            ct.kernel(**bad)(occupied.fn)
        assert isinstance(caught.value, TileValueError)
    for n in (1, 2, 4, 8, 16, 32):              # cuTile 1.7: a power of 2 in [1, 32]
        ct.kernel(num_worker_warps=n)(occupied.fn)
    k = ct.kernel(num_worker_warps=ct.ByTarget(sm_100=16, sm_120=2, default=1))(occupied.fn)
    assert k.options["num_worker_warps"].resolve("sm_100") == 16
    with pytest.raises(ValueError, match=r"num_worker_warps must be a power of 2 in \[1, 32\] "
                       r"\(or a tileir.ByTarget of such\), got 3"):
        ct.kernel(num_worker_warps=3)(occupied.fn)
    with pytest.raises(ValueError, match="option num_stages must be 2 to 8"):   # tileir's
        ct.kernel(num_stages=9)(occupied.fn).compile((np.zeros(64, np.float32), 64),
                                                     stage="frontend", target="sm_90a")
    for bad in (True, -1, 17, 2.0):            # tileir's producer L2 lookahead, in steps
        with pytest.raises(ValueError, match=r"option l2_ahead must be an int from 0 to 16"):
            ct.kernel(l2_ahead=bad)(occupied.fn).compile((np.zeros(64, np.float32), 64),
                                                         stage="frontend", target="sm_90a")


def test_kernels_are_made_from_functions_and_launched_not_called():
    """cuTile's TypeErrors: `kernel` on something that is not a function, and a kernel
    called like a function."""
    with pytest.raises(TypeError) as caught:
        ct.kernel(42)
    assert str(caught.value) == "`kernel` decorator must be applied to a Python function"
    with pytest.raises(TypeError, match="must be applied to a Python function"):
        ct.kernel(num_ctas=2)(occupied)            # a Kernel, not a function
    with pytest.raises(TypeError, match=r"^tile kernels cannot be called directly: kernel "
                       r"'occupied' is launched with tileir.launch\(stream, grid, occupied, "
                       r"args\)$"):
        occupied(np.zeros(64, np.float32), 64)


@ct.kernel
def cluster_scoped(x, KIND: ct.Constant[int]):
    if KIND == 0:
        t = ct.load(x, (0,), shape=(4,), memory_order=ct.MemoryOrder.ACQUIRE,
                    memory_scope=ct.MemoryScope.CLUSTER)
        ct.store(x, (0,), t)
    else:
        ct.atomic_add(x, 0, 1, memory_scope=ct.MemoryScope.CLUSTER)


def test_memory_scope_cluster_is_refused_by_name():
    """`MemoryScope.CLUSTER` exists (cuda.lang's) but no cuTile operation takes it."""
    x = np.zeros(4, np.int32)
    with pytest.raises(TileTypeError, match=r"Invalid memory scope for tile_load. Got "
                       r"MemoryScope.CLUSTER, expected one of MemoryScope.NONE, "
                       r"MemoryScope.BLOCK, MemoryScope.DEVICE, MemoryScope.SYS"):
        cluster_scoped.compile((x, 0), stage="frontend")
    with pytest.raises(TileTypeError, match=r"atomics take memory_scope BLOCK, DEVICE or SYS, "
                       r"got .*CLUSTER.* \(CLUSTER is cuda.lang's, not cuTile's\)"):
        cluster_scoped.compile((x, 1), stage="frontend")


def test_exceptions_are_cutile_s_hierarchy():
    assert issubclass(ct.TileCompilerExecutionError, TileInternalError)
    assert issubclass(ct.TileCompilerTimeoutError, TileInternalError)
    assert issubclass(TileInternalError, TileError)
    assert issubclass(StaticException, TileStaticEvalError)
    for cls in (TileRecursionError, TileStaticAssertionError, TileStaticEvalError):
        assert issubclass(cls, TileError)
    assert ct.MemoryOrder.ACQ_REL.value == "acq_rel" and ct.MemoryScope.DEVICE.value == "device"
    assert ct.RoundingMode.RN.value == "nearest_even" and ct.RoundingMode.APPROX.value == "approx"


@ct.kernel
def annotated(x: ct.Array, out: typing.Annotated[ct.Array, ct.ArrayAnnotation(
        static_shape_dims=(0,), static_stride_dims=(-1,))],
        n: ct.ScalarInt64, T: typing.Annotated[int, ct.ConstantAnnotation()],
        SCALE: ct.Constant):
    ct.static_assert(out.shape[0] == 64 and out.strides[0] == 1)
    ct.static_assert(n.dtype == ct.int64)
    t = ct.load(x, index=(0,), shape=(T,)) * SCALE
    ct.store(out, index=(0,), tile=t + ct.astype(n, ct.float32))


def test_cutile_annotations_specialize_as_cutile_does():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    ct.launch(None, (1,), annotated, (x, out, 5, 64, 2.0))
    np.testing.assert_array_equal(out, x * 2 + 5)
    text = annotated.compile((x, out, 5, 64, 2.0), stage="frontend").ir()
    assert "i64" in text
    with pytest.raises(TileStaticAssertionError, match="Static assertion failed"):
        annotated.compile((x, np.zeros(32, np.float32), 5, 64, 2.0), stage="frontend")
    with pytest.raises(TileTypeError, match="annotated as an integer scalar"):
        annotated.compile((x, out, 1.5, 64, 2.0), stage="frontend")
    with pytest.raises(ValueError, match="index_dtype must be int32 or int64"):
        ct.ArrayAnnotation(index_dtype=ct.float32)
    assert ct.ListAnnotation(element=ct.IndexedWithInt64).element.index_dtype == ct.int64


@ct.kernel
def listed(xs: typing.Annotated[list, ct.ListAnnotation(element=ct.ArrayAnnotation())]):
    pass


def test_list_annotated_parameters_take_lists_of_arrays():
    """(test_cutile_lists.py runs them)"""
    text = listed.compile(([np.zeros(4), np.zeros(4)],), stage="frontend").ir()
    assert 'tile.arg_names = ["xs[0]", "xs[1]"]' in text
    with pytest.raises(TileTypeError, match="annotated as a list of arrays"):
        listed.compile((np.zeros(4),), stage="frontend")


# ---------------------------------------------------------------------------
# Tuples as kernel arguments
# ---------------------------------------------------------------------------
@ct.function
def tuple_sum(arrs, i):
    """A tuple parameter passed on to a helper: its arrays enter as arguments of it."""
    return ct.load(arrs[0], (i,), shape=(8,)) + ct.load(arrs[1][1], (i,), shape=(8,))


@ct.kernel
def tupled(out, arrs: tuple[ct.Array, ...], t: tuple[int, ct.Constant[int]], plain):
    x, (w, z) = arrs
    a, B = t
    ct.static_assert(B == 3 and len(plain) == 3)
    s, flag, nested = plain
    i = ct.bid(0)
    acc = ct.load(x, (i,), shape=(8,)) * a + ct.load(w, (i,), shape=(8,)) * B
    acc = acc + tuple_sum(arrs, i) * nested[0] + ct.where(flag, s, 0.0)
    ct.store(out, (i,), acc + ct.astype(nested[1], ct.float32))


def test_tuples_are_kernel_arguments_everywhere(rng):
    """cuTile 1.7: tuples (nested too) of arrays, scalars and constants, annotated
    `tuple[Array, ...]`, `tuple[int, Constant[int]]` or not at all; each runtime leaf is
    an argument (`arrs[1][0]`), the kernel rebuilds the tuple."""
    x, w, z = (rng.standard_normal(16).astype(np.float32) for _ in range(3))
    args = (np.zeros(16, np.float32), (x, (w, z)), (2, 3), (0.5, True, (1.5, 7)))
    want = x * 2 + w * 3 + (x + z) * 1.5 + 0.5 + 7
    for got in run_everywhere(tupled, (2,), args, 0):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    text = tupled.compile(args, stage="frontend").ir()
    assert 'tile.arg_names = ["out", "arrs[0]", "arrs[1][0]", "arrs[1][1]", "t[0]", ' \
           '"plain[0]", "plain[1]", "plain[2][0]", "plain[2][1]"]' in text
    params = dict(tupled.classify(args))
    TP, SP = ct.specialization.TupleParam, ct.specialization.ScalarParam
    assert params["t"] == TP((SP(ct.int32), 3))
    # the Constant item specializes: another value compiles another kernel; 1, True and
    # 1.0 differ, as they do for a Constant parameter
    assert tupled.classify((*args[:2], (2, 5), args[3]))[2][1] != params["t"]
    assert len({TP((1,)), TP((True,)), TP((1.0,)), TP((TP((1,)),))}) == 4
    assert TP((1, (2,))) == TP((1, (2,))) and hash(TP((1,))) == hash(TP((1,)))
    with pytest.raises(TileStaticAssertionError):
        tupled.compile((*args[:2], (2, 4), args[3]), stage="frontend")


@ct.kernel
def bad_tuples(out, t: tuple[int, ct.Constant[int]], u: tuple[ct.Array, ...]):
    pass


def test_tuple_arguments_are_checked_against_their_annotations():
    out = np.zeros(4, np.float32)
    with pytest.raises(TileTypeError, match=r"argument 't' of kernel 'bad_tuples' is a tuple "
                       r"of 3 items, but its annotation tuple\[None, Constant\[int\]\] has 2"):
        bad_tuples.compile((out, (1, 2, 3), (out,)), stage="frontend")
    with pytest.raises(TileTypeError, match=r"argument 't\[1\]' of kernel 'bad_tuples' is "
                       r"Constant\[int\] but got float 2.5"):
        bad_tuples.compile((out, (1, 2.5), (out,)), stage="frontend")
    with pytest.raises(TileTypeError, match=r"argument 't' of kernel 'bad_tuples' is annotated "
                       r"as a tuple \(tuple\[None, Constant\[int\]\]\) but is int"):
        bad_tuples.compile((out, 1, (out,)), stage="frontend")
    with pytest.raises(TileTypeError, match=r"argument 'u\[1\]' of kernel 'bad_tuples' is str"):
        bad_tuples.compile((out, (1, 2), (out, "x")), stage="frontend")
    with pytest.raises(TileTypeError, match=r"argument 'out' of kernel 'array_annotated' is a "
                       r"tuple, but its annotation ArrayAnnotation\(.*\) is not a tuple type"):
        ct.kernel(array_annotated).compile(((out,),), stage="frontend")


def array_annotated(out: typing.Annotated[ct.Array, ct.ArrayAnnotation()]):
    pass


# ---------------------------------------------------------------------------
# Compile-time helpers, plain helpers
# ---------------------------------------------------------------------------
def scale_of(n):
    return n * 2 + 1


def twice(t, k):
    return t * k + plain_const(k)


def plain_const(k):
    return k - 1


def recurse(t):
    return recurse(t)


@ct.kernel
def compile_time(x, out, T: ct.Constant[int], MODE: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    k = ct.static_eval(scale_of(T) if t.shape[0] == T else 0)
    acc = ct.zeros((T,), ct.float32)
    trips = ct.ensure_constant(T // 4 - 1)
    for j in ct.static_iter(range(trips)):
        acc = acc + t * j
    for name, w in ct.static_iter((("a", 1.0), ("b", 10.0))):
        acc = acc + w
    n = ct.assume_divisible_by(ct.num_tiles(x, 0, (T,)) * 4, 4)
    if MODE == 1:
        raise ct.static_exception(ValueError(f"bad T {T}"))
    if MODE == 2:
        ct.ensure_constant(ct.bid(0))
    if MODE == 3:
        ct.static_eval(T // 0)
    if MODE == 4:
        acc = recurse(acc)
    ct.store(out, index=(0,), tile=twice(acc, k) + ct.astype(n, ct.float32))


def test_static_eval_iter_exception_and_plain_helpers():
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    ct.launch(None, (1,), compile_time, (x, out, 16, 0))
    acc = x * 3 + 11.0
    np.testing.assert_array_equal(out, acc * 33 + 32 + 4)
    with pytest.raises(StaticException, match=r"raised at compile time \(ValueError: bad T 16\)"):
        compile_time.compile((x, out, 16, 1), stage="frontend")
    with pytest.raises(TileStaticAssertionError, match="not a compile-time constant"):
        compile_time.compile((x, out, 16, 2), stage="frontend")
    with pytest.raises(TileStaticEvalError, match="ZeroDivisionError"):
        compile_time.compile((x, out, 16, 3), stage="frontend")
    with pytest.raises(TileRecursionError, match="recursive call to helper 'recurse'"):
        compile_time.compile((x, out, 16, 4), stage="frontend")


@ct.function
def fn_bare(t):
    return t + 1


@ct.function()
def fn_called(t):
    return t * 2


@ct.function(host=True)
def fn_host(t, k=3):
    return t * k


@ct.function(host=True, tile=False)
def fn_host_only(t):
    return t - 1


@ct.kernel
def function_forms(x, out, USE_HOST_ONLY: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(8,))
    t = fn_host(fn_called(fn_bare(t)), k=fn_host(2))    # host functions fold constants too
    if USE_HOST_ONLY == 1:
        t = fn_host_only(t)
    ct.store(out, index=(0,), tile=t)


def test_function_decorator_forms_and_execution_spaces():
    """cuTile's `function(func=None, /, *, host=False, tile=True)`."""
    x = np.arange(8, dtype=np.float32)
    for got in run_everywhere(function_forms, (1,), (x, np.zeros(8, np.float32), 0), 1):
        np.testing.assert_array_equal(got, (x + 1) * 2 * 6)
    assert fn_host(5) == 15 and fn_host(2, k=4) == 8 and fn_host_only(7) == 6   # from Python
    assert fn_host.__name__ == "fn_host" and fn_host.__wrapped__(1) == 3
    with pytest.raises(TileError, match="@function 'fn_called' can only be called from a "
                       r"@kernel or another @function \(mark it @function\(host=True\)"):
        fn_called(1)
    with pytest.raises(TileUnsupportedFeatureError,
                       match=r"fn_host_only\(\) is a host function \(@function\(tile=False\)\): "
                       "kernels and @functions cannot call it") as caught:
        function_forms.compile((x, np.zeros(8, np.float32), 1), stage="frontend")
    assert "t = fn_host_only(t)" in str(caught.value)          # located at the call
    with pytest.raises(TypeError, match="host must be True or False, got 1"):
        ct.function(host=1)
    with pytest.raises(TypeError, match="`function` decorator must be applied to a Python "
                       "function, got int 3"):
        ct.function(3)


@ct.kernel
def misused_static(x):
    it = ct.static_iter(range(3))


def test_static_iter_outside_a_for_is_a_syntax_error():
    with pytest.raises(ct.TileSyntaxError, match="only allowed as 'for ... in static_iter"):
        misused_static.compile((np.zeros(4),), stage="frontend")


def test_a_plain_helper_s_source_enters_the_cache_key():
    from tileir.cache import kernel_sources
    texts = [s["text"] for s in kernel_sources(compile_time)]
    assert any("def twice" in t for t in texts) and any("def plain_const" in t for t in texts)


# ---------------------------------------------------------------------------
# DType's bitwidth and name, foreign pointer dtypes
# ---------------------------------------------------------------------------
# (dtype, bitwidth, name) as cuTile 1.7 gives them: a bool is a byte
CUTILE_DTYPES = [("bool_", 8), ("uint8", 8), ("uint16", 16), ("uint32", 32), ("uint64", 64),
                 ("int8", 8), ("int16", 16), ("int32", 32), ("int64", 64), ("float16", 16),
                 ("float32", 32), ("float64", 64), ("bfloat16", 16), ("tfloat32", 32),
                 ("float8_e4m3fn", 8), ("float8_e5m2", 8), ("float8_e8m0fnu", 8),
                 ("float8_e5m3fnu", 8), ("float4_e2m1fn", 4)]


def test_dtype_bitwidth_and_name_are_cutile_s():
    for name, bits in CUTILE_DTYPES:
        d = getattr(ct, name)
        assert (d.bitwidth, d.name) == (bits, name)
    assert ct.float16.bitwidth == 16 and ct.bfloat16.name == "bfloat16"


def test_foreign_pointer_dtype_on_the_host():
    p = ct.foreign_pointer_dtype(ct.float32)
    assert isinstance(p, ct.DType) and p is ct.foreign_pointer_dtype(ct.float32)
    assert (p.name, p.bitwidth, p.pointee) == ("foreign_pointer[float32]", 64, ct.float32)
    assert p != ct.foreign_pointer_dtype(ct.int32) and p != ct.int64
    for name, _ in CUTILE_DTYPES:                  # any pointee, as in cuTile
        assert ct.foreign_pointer_dtype(getattr(ct, name)).name == f"foreign_pointer[{name}]"
    with pytest.raises(TypeError, match="pointee_dtype must be a tileir dtype, got type"):
        ct.foreign_pointer_dtype(np.float32)
    with pytest.raises(TypeError, match="^nested foreign pointer dtypes are not supported$"):
        ct.foreign_pointer_dtype(p)


# ---------------------------------------------------------------------------
# Restricted floats: tfloat32, fp4, e8m0
# ---------------------------------------------------------------------------
@ct.kernel
def to_tf32(x, out, T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    ct.store(out, index=(0,), tile=ct.astype(ct.astype(t, ct.tfloat32), ct.float32))


def _tf32_reference(x: np.ndarray) -> np.ndarray:
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
    out = (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return np.where(np.isfinite(x), out, x)


def test_astype_tfloat32_rounds_to_ten_mantissa_bits(rng):
    x = rng.standard_normal(64).astype(np.float32) * 1000
    x[:4] = [np.inf, -np.inf, np.nan, np.float32(1 + 2**-11)]     # a tie rounds to even
    out = np.zeros(64, np.float32)
    want = _tf32_reference(x)
    for got in run_everywhere(to_tf32, (1,), (x, out, 64), 1):
        np.testing.assert_array_equal(got, want)
    assert want[3] == 1.0


def _nearest(x: np.ndarray, dtype) -> np.ndarray:
    """Each finite in-range value of `x` rounded once to nearest `dtype` (an 8-bit
    float), ties to the even bit pattern: by search over all its values (ml_dtypes
    converts f64 through f32, rounding twice)."""
    bits = np.arange(256, dtype=np.uint8)
    vals = bits.view(dtype).astype(np.float64)
    ok = np.isfinite(vals)
    bits, vals = bits[ok], vals[ok]
    out = []
    for v in x:
        dist = np.abs(vals - v)
        best = np.flatnonzero(dist == dist.min())
        pick = [b for b in best if bits[b] % 2 == 0] or list(best)
        out.append(bits[pick[0]])
    return np.array(out, np.uint8).view(dtype)


@ct.kernel
def float_casts(x, y, T: ct.Constant[int]):
    ct.store(y, index=(0,), tile=ct.astype(ct.load(x, index=(0,), shape=(T,)), y.dtype))


@pytest.mark.parametrize("src,dst", [
    ("float16", "bfloat16"), ("bfloat16", "float16"),               # same width: via f32
    ("float8_e4m3fn", "float8_e5m2"), ("float8_e5m2", "float8_e4m3fn"),
    ("float64", "float8_e4m3fn"), ("float64", "float8_e5m2")])      # f64: rounded once
def test_float_casts_between_any_two_widths(src, dst, rng):
    """Casts that once built invalid IR (a truncf between types of one width; f64 to
    fp8, which the GPU rounds from f32 only).  f64 goes through f32 rounded to odd, so
    a value just past an fp8 tie rounds away from it, as one rounding does (to nearest
    f32 first, it would land on the tie and round to even)."""
    s, d = (getattr(ml_dtypes, n, None) or np.dtype(n) for n in (src, dst))
    x = (rng.standard_normal(32) * 4).astype(s)
    if src == "float64":           # around the tie between 1 and the next value up
        up = float(np.nextafter(np.array(1.0, d), np.array(2.0, d)))
        tie = (1.0 + up) / 2
        x[:4] = [tie + 2**-30, -(tie + 2**-30), tie - 2**-30, tie]
    want = _nearest(x.astype(np.float64), d) if src == "float64" else \
        x.astype(np.float32).astype(d)
    if src == "float64":
        assert want[0] == up and want[1] == -up and want[2] == 1.0 and want[3] == 1.0
    outs = run_everywhere(float_casts, (1,), (x, np.zeros(32, d), 32), 1, stages=("sm_90a",))
    for got in outs:
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@ct.kernel
def tf32_product(a, b, c, M: ct.Constant[int]):
    x = ct.astype(ct.load(a, index=(0, 0), shape=(M, M)), ct.tfloat32)
    y = ct.astype(ct.load(b, index=(0, 0), shape=(M, M)), ct.tfloat32)
    acc = ct.mma(x, y, ct.zeros((M, M), ct.float32))
    ct.store(c, index=(0, 0), tile=acc)


def test_tfloat32_operands_multiply_as_rounded_float32(rng):
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 16)).astype(np.float32)
    c = np.zeros((16, 16), np.float32)
    ct.launch(None, (1,), tf32_product, (a, b, c, 16))
    want = _tf32_reference(a).astype(np.float64) @ _tf32_reference(b).astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


@ct.kernel
def restricted_math(x, MODE: ct.Constant[int]):
    t = ct.astype(ct.load(x, index=(0,), shape=(16,)), ct.tfloat32)
    if MODE == 0:
        ct.store(x, index=(0,), tile=t + t)
    elif MODE == 1:
        ct.store(x, index=(0,), tile=ct.exp(t))
    else:
        ct.store(x, index=(0,), tile=ct.astype(t, ct.float8_e5m3fnu))


def test_restricted_floats_refuse_arithmetic():
    x = np.zeros(16, np.float32)
    with pytest.raises(TileTypeError, match="tfloat32 is a restricted float"):
        restricted_math.compile((x, 0), stage="frontend")
    with pytest.raises(TileTypeError, match="tfloat32 is a restricted float"):
        restricted_math.compile((x, 1), stage="frontend")
    with pytest.raises(TileUnsupportedFeatureError, match="float8_e5m3fnu has no MLIR type"):
        restricted_math.compile((x, 2), stage="frontend")


@ct.kernel
def microscaling_casts(x, f4, e8m0, back, T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    a = ct.astype(t, ct.float4_e2m1fn)
    s = ct.astype(ct.abs(t), ct.float8_e8m0fnu)
    ct.store(f4, index=(0,), tile=a)
    ct.store(e8m0, index=(0,), tile=s)
    ct.store(back, index=(0,), tile=ct.astype(a, ct.float32) + ct.astype(s, ct.float32))


def test_fp4_and_e8m0_cast_in_the_interpreter_and_are_refused_on_the_gpu(rng):
    x = (rng.standard_normal(32) * 3).astype(np.float32)
    f4 = np.zeros(32, ml_dtypes.float4_e2m1fn)
    e8 = np.zeros(32, ml_dtypes.float8_e8m0fnu)
    back = np.zeros(32, np.float32)
    ct.launch(None, (1,), microscaling_casts, (x, f4, e8, back, 32))
    want_f4 = x.astype(ml_dtypes.float4_e2m1fn)
    want_e8 = np.abs(x).astype(ml_dtypes.float8_e8m0fnu)
    np.testing.assert_array_equal(f4.astype(np.float32), want_f4.astype(np.float32))
    np.testing.assert_array_equal(e8.astype(np.float32), want_e8.astype(np.float32))
    np.testing.assert_array_equal(back, want_f4.astype(np.float32) + want_e8.astype(np.float32))
    with pytest.raises(TileIRError, match="float4_e2m1fn tiles are not lowered to the GPU"):
        microscaling_casts.compile((x, f4, e8, back, 32), stage="gpu", target="sm_90a")


# ---------------------------------------------------------------------------
# Pieces of tiles and their bytes
# ---------------------------------------------------------------------------
@ct.kernel
def pieces(x, y, out, raw, back, T: ct.Constant[int]):
    i = ct.bid(0)
    a = ct.load(x, index=(0, 0), shape=(T, T))
    c = ct.load(y, index=(0, 0), shape=(T, T))
    w = ct.cat((a, c), 1)                                  # (T, 2T)
    e = ct.extract(w, (1, i), (T // 2, T))                 # lower half, block i's side
    f = ct.insert(a, (0, 1), ct.extract(c, (0, 0), (T, T // 2)))
    g = f + e.sum() + a.extract((0, 0), ()).item() + ct.astile(((1.0, 2.0), (3.0, 4.0))).sum()
    g = g + ct.sum(ct.astile((ct.bid(0), 5, 7, 9), dtype=ct.float32))
    g = ct.bitcast(ct.bitcast(g, ct.int32) ^ 0, ct.float32)
    ct.store(out, index=(i, 0), tile=g)                    # each block its own rows
    packed = ct.pack_to_bytes(ct.reshape(g, (T * T,)))
    ct.store(raw, index=(i,), tile=packed)
    ct.store(back, index=(i,), tile=ct.unpack_from_bytes(packed, ct.float32))


def pieces_reference(x, y, blocks: int) -> np.ndarray:
    t = x.shape[0]
    w = np.concatenate([x, y], 1)
    f = x.copy()
    f[:, t // 2:] = y[:, :t // 2]
    return np.concatenate([f + w[t // 2:, b * t:(b + 1) * t].sum() + x[0, 0] + 10 + (b + 21)
                           for b in range(blocks)])


def pieces_args(x, y, blocks: int):
    t = x.shape[0]
    return (x, y, np.full((blocks * t, t), np.nan, np.float32),
            np.zeros(blocks * t * t * 4, np.uint8), np.zeros(blocks * t * t, np.float32), t)


def test_cat_extract_insert_astile_bitcast_and_bytes_run_correctly(rng):
    t, blocks = 16, 2
    x = rng.standard_normal((t, t)).astype(np.float32)
    y = rng.standard_normal((t, t)).astype(np.float32)
    want = pieces_reference(x, y, blocks)
    outs = [run_everywhere(pieces, (blocks,), pieces_args(x, y, blocks), k) for k in (2, 3, 4)]
    for got, raw, back in zip(*outs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(raw, np.frombuffer(got.tobytes(), np.uint8))
        np.testing.assert_array_equal(back, got.ravel())


@ct.kernel
def byte_order(x, raw, back, T: ct.Constant[int]):
    v = ct.load(x, index=(0,), shape=(T,))
    p = ct.pack_to_bytes(v)
    ct.store(raw, index=(0,), tile=p)
    ct.store(back, index=(0,), tile=ct.unpack_from_bytes(p, ct.int64))


def test_bytes_are_little_endian_for_every_width():
    x = np.array([0x0807060504030201, -2] * 4, np.int64)
    raw = np.zeros(64, np.uint8)
    back = np.zeros(8, np.int64)
    for k, got in enumerate(run_everywhere(byte_order, (1,), (x, raw, back, 8), 1)):
        assert list(got[:8]) == [1, 2, 3, 4, 5, 6, 7, 8]
        np.testing.assert_array_equal(got, np.frombuffer(x.tobytes(), np.uint8))
    for got in run_everywhere(byte_order, (1,), (x, raw, back, 8), 2):
        np.testing.assert_array_equal(got, x)


@ct.kernel
def bad_pieces(x, MODE: ct.Constant[int]):
    a = ct.load(x, index=(0,), shape=(16,))
    if MODE == 0:
        ct.store(x, index=(0,), tile=ct.cat((a, a, a), 0))
    elif MODE == 1:
        ct.store(x, index=(0,), tile=ct.extract(a, (4,), (4,)))
    elif MODE == 2:
        ct.store(x, index=(0,), tile=ct.extract(a, (0,), (3,)))
    elif MODE == 3:
        ct.store(x, index=(0,), tile=ct.insert(a, (0,), ct.astype(a, ct.float16)))
    elif MODE == 4:
        ct.store(x, index=(0,), tile=ct.bitcast(a, ct.float16))
    elif MODE == 5:
        ct.store(x, index=(0,), tile=ct.cat((a, ct.reshape(a, (4, 4))), 0))
    else:
        ct.store(x, index=(0,), tile=ct.bitcast(a > 0, ct.int8))


@pytest.mark.parametrize("mode,exc,message", [
    (0, TileTypeError, "cat joins at most 2 tiles"),
    (1, TileValueError, "index 4 is out of range for dim 0"),
    (2, TileValueError, "must have power-of-two dims"),
    (3, TileTypeError, "insert needs a value of the tile's dtype float32"),
    (4, TileTypeError, "bitcast keeps the bit width"),
    (5, TileTypeError, "cat needs tiles of one rank"),
    (6, TileTypeError, "bitcast does not take booleans"),
])
def test_pieces_are_checked_at_the_line(mode, exc, message):
    refused_at_the_line(bad_pieces, (np.zeros(16, np.float32), mode), exc, message,
                        "test_cutile_api.py")


# ---------------------------------------------------------------------------
# Reductions and scans with combine functions
# ---------------------------------------------------------------------------
def pick_first(a, b):
    """The first non-zero: associative, not commutative."""
    return ct.where(a != 0, a, b)


@ct.kernel
def scans(x, o1, o2, o3, o4, o5, o6, T: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(T, T))
    ct.store(o1, index=(0, 0), tile=ct.cumsum(t, axis=1))
    ct.store(o2, index=(0, 0), tile=ct.cumprod(t * 0.5 + 1.0, axis=0, reverse=True))
    ct.store(o3, index=(0,), tile=ct.reduce(t, 1, lambda a, b: ct.maximum(a, b), -1e30))
    s, i = ct.reduce((t, ct.broadcast_to(ct.arange(T)[None, :], (T, T))), 1,
                     lambda a, ia, b, ib: (ct.where(b > a, b, a), ct.where(b > a, ib, ia)),
                     (-1e30, 0))
    ct.store(o4, index=(0,), tile=ct.astype(i, ct.float32) * 1000.0 + s)
    ct.store(o5, index=(0, 0), tile=ct.scan(ct.where(t > 0.5, t, 0.0), 1, pick_first, 0.0))
    ct.store(o6, index=(0,), tile=ct.reduce(t, 0, operator.add, 0.0)
             + ct.reduce(t, 0, max, -1e30)
             + ct.reshape(ct.reduce(t, 0, pick_first, 0.0, keepdims=True), (T,)))


def _first_nonzero(row):
    out, cur = np.zeros_like(row), 0.0
    for j, v in enumerate(row):
        cur = v if cur == 0 else cur
        out[j] = cur
    return out


@pytest.mark.slow
def test_reduce_scan_cumsum_cumprod_with_combine_functions(rng):
    t = 16
    x = rng.standard_normal((t, t)).astype(np.float32)
    picked = np.where(x > 0.5, x, 0)
    want = [np.cumsum(x, 1), np.flip(np.cumprod(np.flip(x * 0.5 + 1, 0), 0), 0), x.max(1),
            x.argmax(1) * 1000.0 + x.max(1), np.stack([_first_nonzero(r) for r in picked]),
            x.sum(0) + x.max(0) + np.array([_first_nonzero(c)[-1] for c in x.T])]
    outs = [np.zeros(w.shape, np.float32) for w in want]
    args = (x, *outs, t)
    for k, w in enumerate(want):
        for got in run_everywhere(scans, (1,), args, 1 + k):
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


@ct.kernel
def int_scans(x, o, T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    total = ct.reduce(t, 0, lambda a, b: a ^ b, 0)
    ct.store(o, index=(0,), tile=ct.cumsum(t, reverse=True) + ct.scan(t, 0, max, -2**31) + total)


def test_integer_scans_wrap_and_keep_their_dtype(rng):
    x = rng.integers(-2**30, 2**30, 32).astype(np.int32)
    want = (np.flip(np.cumsum(np.flip(x.astype(np.int64)))) + np.maximum.accumulate(x)
            + np.bitwise_xor.reduce(x)).astype(np.int64)
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)
    for got in run_everywhere(int_scans, (1,), (x, np.zeros(32, np.int32), 32), 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def int_abs_pow(x, n, a, p, T: ct.Constant[int]):
    v = ct.load(x, index=(0,), shape=(T,))
    ct.store(a, index=(0,), tile=ct.abs(v))
    ct.store(p, index=(0,), tile=v ** ct.load(n, index=(0,), shape=(T,)))


# the fast tier: int8 (where the power wraps soonest); the wider ones in `--full`
@pytest.mark.sweep
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_integer_abs_and_power_of_every_width(dtype, rng):
    """`abs` and `**` of ints lower for every width (math.absi reached LLVM only for
    i32, math.ipowi for none): wrapping, INT_MIN's abs, negative and zero exponents."""
    info = np.iinfo(dtype)
    x = rng.integers(-9, 10, 64).astype(dtype)
    n = rng.integers(-3, 12, 64).astype(dtype)
    x[:6] = [info.min, 0, 1, -1, -1, 0]
    n[:6] = [1, -2, -5, -3, -4, 0]
    want_p = np.array([_int_pow(int(a), int(k), info) for a, k in zip(x, n)], dtype)
    args = (x, n, np.zeros(64, dtype), np.zeros(64, dtype), 64)
    for got_a, got_p in zip(run_everywhere(int_abs_pow, (1,), args, 2),
                            run_everywhere(int_abs_pow, (1,), args, 3)):
        np.testing.assert_array_equal(got_a, np.abs(x))          # abs(min) wraps to min
        np.testing.assert_array_equal(got_p, want_p)


def _int_pow(a: int, k: int, info) -> int:
    if k < 0:
        return 1 if a == 1 else (1 if k % 2 == 0 else -1) if a == -1 else -1 if a == 0 else 0
    r = pow(a, k, 1 << info.bits)
    return r - (1 << info.bits) if r > info.max else r


@ct.kernel
def fp8_reductions(x, s, m, i, T: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(4, T))
    ct.store(s, index=(0,), tile=ct.astype(ct.sum(t, axis=1), ct.float32))
    ct.store(m, index=(0,), tile=ct.astype(ct.max(t, axis=1), ct.float32))
    ct.store(i, index=(0,), tile=ct.argmin(t, axis=1))
    ct.store(s, index=(4,), tile=ct.reshape(ct.astype(ct.sum(t), ct.float32), (1,)))


def test_fp8_reductions_run_in_f32():
    """fp8 tiles reduce in f32 (their registers hold the bits: widening them as ints
    once built invalid IR); a sum rounds once to fp8.  Small integers: exact."""
    x = np.tile(np.array([1, 0, 2, 1, 3, 1, 0, 2] * 4, ml_dtypes.float8_e4m3fn), (4, 1))
    x[1] *= np.array(-1, ml_dtypes.float8_e4m3fn)
    args = (x, np.zeros(5, np.float32), np.zeros(4, np.float32), np.zeros(4, np.int32), 32)
    xf = x.astype(np.float64)
    for s, m, i in zip(*(run_everywhere(fp8_reductions, (1,), args, k, stages=("sm_90a",))
                         for k in (1, 2, 3))):
        np.testing.assert_array_equal(s, np.append(xf.sum(1), xf.sum()))
        np.testing.assert_array_equal(m, xf.max(1))
        np.testing.assert_array_equal(i, xf.argmin(1))


@pytest.mark.parametrize("dst", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("src", ["float32", "float64", "bfloat16"])
def test_rounding_to_fp8_saturates_as_the_gpu_does(src, dst):
    """Past the largest finite fp8 value, infinities included, a cast gives that value
    with its sign (the GPU's cvt.rn.satfinite, the only rounding to fp8 PTX has; the
    kernel fuzzer found the interpreter giving NaN, as ml_dtypes does); NaN stays NaN."""
    s = getattr(ml_dtypes, src, None) or np.dtype(src)
    d = getattr(ml_dtypes, dst)
    top = float(ml_dtypes.finfo(d).max)
    vals = [np.inf, -np.inf, np.nan, 1000.0, -1000.0, 449.0, 464.0, 470.0, 1e5, -7e4,
            top, -top, 1.5, -0.0] + [0.25] * 18
    x = np.array(vals, np.float64).astype(s)
    want = np.clip(x.astype(np.float32), -top, top).astype(d)
    for got in run_everywhere(float_casts, (1,), (x, np.zeros(32, d), 32), 1,
                              stages=("sm_90a",)):
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    assert want[0] == top and want[1] == -top and np.isnan(want[2].astype(np.float32))


# In --full (1.7 s): float32, whose bounds are all finite; float16 keeps
# elementwise._float_to_int in the fast tier with both kinds of bound (finite for 8-bit
# targets, infinity where its range ends first)
@pytest.mark.parametrize("src", [pytest.param("float32", marks=pytest.mark.slow), "float16",
                                 pytest.param("bfloat16", marks=pytest.mark.slow),
                                 pytest.param("float64", marks=pytest.mark.slow)])
def test_float_to_int_saturates_everywhere(src):
    """Truncation toward zero, saturating, NaN to 0 (docs/interpreter.md) on the GPU
    too: the lowering clamps before LLVM's fptosi/fptoui, whose out-of-range results
    are poison (the simulator refuses those)."""
    s = getattr(ml_dtypes, src, None) or np.dtype(src)
    vals = [np.nan, np.inf, -np.inf, 1e30, -1e30, -0.5, -1.0, -1.5, 0.9, 127.9, 128.0,
            -128.5, 255.9, 256.0, 65504.0, -65504.0, 3e9, -3e9, 2.0**31, -2.0**31, 2.0**63,
            2.0**64, 7.0, -7.0] + [0.0] * 8
    with np.errstate(over="ignore"):           # 1e30 and the like: inf in float16
        x = np.array(vals, np.float64).astype(s)
    for dst in ("int8", "uint8", "int32", "uint32", "int64", "uint64"):
        d = np.dtype(dst)
        info = np.iinfo(d)
        want = np.array([0 if np.isnan(v) else info.max if v >= info.max else
                         info.min if v <= info.min else int(v)
                         for v in x.astype(np.float64)], d)
        for got in run_everywhere(float_casts, (1,), (x, np.zeros(32, d), 32), 1):
            np.testing.assert_array_equal(got, want, err_msg=f"{src} -> {dst}")


@ct.kernel
def fp8_scan(x, o, T: ct.Constant[int]):
    ct.store(o, index=(0,), tile=ct.cumsum(ct.load(x, index=(0,), shape=(T,)), axis=0))


def test_fp8_scans_move_their_bits_through_shared_memory():
    """An fp8 tile's steps go through shared memory as its bits (a buffer typed fp8
    once failed to verify).  Small integers, exact in e4m3 at every step; sm_90a
    rounds to fp8 (sm_80 cannot: a clear error)."""
    import ml_dtypes
    x = np.array([1, 0, 2, 1, 0, 1, 1, 2] * 2, ml_dtypes.float8_e4m3fn)
    outs = run_everywhere(fp8_scan, (1,), (x, np.zeros(16, ml_dtypes.float8_e4m3fn), 16), 1,
                          stages=("sm_90a",))
    want = np.cumsum(x.astype(np.float64))
    for got in outs:
        np.testing.assert_array_equal(got.astype(np.float64), want)
    with pytest.raises(TileIRError, match="needs sm_89 or later"):
        fp8_scan.compile((x, x.copy(), 16), target="sm_80")


@ct.kernel
def bad_scan(x, MODE: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(16,))
    if MODE == 0:
        ct.store(x, index=(0,), tile=ct.reduce(t, 0, lambda a, b: a + b, (0.0, 1.0)))
    elif MODE == 1:
        ct.store(x, index=(0,), tile=ct.scan(t, 0, lambda a, b: ct.astype(a + b, ct.float16), 0))
    else:
        ct.store(x, index=(0,), tile=ct.scan(t, 0, lambda a: a, 0.0))


@pytest.mark.parametrize("mode,message", [
    (0, "identity must be one compile-time scalar"),
    (1, "it must keep each operand's dtype"),
    (2, "the lambda takes 1 arguments, got 2"),
])
def test_combine_functions_are_checked(mode, message):
    with pytest.raises(TileTypeError, match=message):
        bad_scan.compile((np.zeros(16, np.float32), mode), stage="frontend")


# ---------------------------------------------------------------------------
# compiler_timeout
# ---------------------------------------------------------------------------
@ct.kernel
def timed(x, T: ct.Constant[int]):
    ct.store(x, index=(0,), tile=ct.exp(ct.load(x, index=(0,), shape=(T,))))


def test_compiler_timeout_stops_a_long_compile(monkeypatch):
    x = np.zeros(64, np.float32)
    with ct.compiler_timeout(1e-6):
        with pytest.raises(ct.TileCompilerTimeoutError, match="past the compiler_timeout"):
            timed.compile((x, 64), stage="cubin", target="sm_90a")
    timed.compile((x, 64), stage="cubin", target="sm_90a")          # no limit outside
    monkeypatch.setenv("TILEIR_COMPILER_TIMEOUT_SEC", "1e-6")
    with pytest.raises(ct.TileCompilerTimeoutError):
        timed.compile((x, 128), stage="ptx", target="sm_80")
    with ct.compiler_timeout(600):                  # the context wins over the variable
        timed.compile((x, 128), stage="ptx", target="sm_80")
    with pytest.raises(ValueError, match="seconds > 0"):
        with ct.compiler_timeout(0):
            pass
    # cuTile's variable is an alias; tileir's wins where both are set
    monkeypatch.delenv("TILEIR_COMPILER_TIMEOUT_SEC")
    monkeypatch.setenv("CUDA_TILE_COMPILER_TIMEOUT_SEC", "1e-6")
    with pytest.raises(ct.TileCompilerTimeoutError):
        timed.compile((x, 256), stage="ptx", target="sm_80")
    monkeypatch.setenv("TILEIR_COMPILER_TIMEOUT_SEC", "600")
    timed.compile((x, 256), stage="ptx", target="sm_80")
    monkeypatch.delenv("TILEIR_COMPILER_TIMEOUT_SEC")
    monkeypatch.setenv("CUDA_TILE_COMPILER_TIMEOUT_SEC", "-1")
    with pytest.raises(ValueError, match="CUDA_TILE_COMPILER_TIMEOUT_SEC must be a number of "
                       "seconds > 0, got '-1'"):
        timed.compile((x, 512), stage="ptx", target="sm_80")


def test_cutile_s_logs_and_temp_dir_variables(monkeypatch, capsys, tmp_path):
    """CUDA_TILE_LOGS=TILEIR (or CUTILEIR) prints the IR as TILEIR_DUMP_IR=1 does;
    CUDA_TILE_TEMP_DIR is TILEIR_TEMP_DIR, where ptxas' scratch files go."""
    from tileir import knobs
    x = np.zeros(64, np.float32)
    monkeypatch.delenv("TILEIR_DUMP_IR", raising=False)
    monkeypatch.setenv("CUDA_TILE_LOGS", "cutileir, TILEIR")
    assert knobs.dump_ir()
    timed.compile((x, 1024), stage="tile")
    assert "Tile IR after stage 'frontend'" in capsys.readouterr().err
    monkeypatch.setenv("TILEIR_DUMP_IR", "0")          # tileir's knob wins
    assert not knobs.dump_ir()
    monkeypatch.delenv("TILEIR_DUMP_IR")
    monkeypatch.setenv("CUDA_TILE_LOGS", "TILEIR,BYTECODE")
    with pytest.raises(ValueError, match="CUDA_TILE_LOGS='TILEIR,BYTECODE': unexpected value "
                       "'BYTECODE'; supported values are CUTILEIR, TILEIR"):
        knobs.dump_ir()
    monkeypatch.delenv("CUDA_TILE_LOGS")
    assert not knobs.dump_ir()
    scratch = tmp_path / "made" / "here"
    monkeypatch.setenv("CUDA_TILE_TEMP_DIR", str(scratch))
    assert knobs.temp_dir() == str(scratch) and scratch.is_dir()
    monkeypatch.setenv("TILEIR_TEMP_DIR", str(tmp_path / "tileir"))
    assert knobs.temp_dir() == str(tmp_path / "tileir")
    monkeypatch.setenv("TILEIR_CACHE", "0")
    import tempfile
    made = []

    class Recorded(tempfile.TemporaryDirectory):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self.name)
    monkeypatch.setattr(tempfile, "TemporaryDirectory", Recorded)
    timed.compile((x, 2048), stage="cubin", target="sm_80")      # ptxas ran in there
    assert [os.path.dirname(d) for d in made] == [str(tmp_path / "tileir")]
    assert not list((tmp_path / "tileir").iterdir())             # and cleaned up


# ---------------------------------------------------------------------------
# gather, scatter, atomics
# ---------------------------------------------------------------------------
@ct.kernel
def indexed(x, idx, out, hist, stats, olds, T: ct.Constant[int]):
    i = ct.bid(0)
    j = ct.load(idx, index=(i,), shape=(T,))
    g = ct.gather(x, j, mask=j % 3 != 0, padding_value=-1.0)
    ct.store(out, index=(i,), tile=g)
    ct.scatter(out, j + 100000, g * 2.0)                # every index out of bounds: dropped
    old = ct.atomic_add(hist, j % 8, 1)
    ct.atomic_max(stats, (0,), j)
    ct.atomic_min(stats, 1, j, memory_order=ct.MemoryOrder.RELAXED,
                  memory_scope=ct.MemoryScope.BLOCK)
    ct.atomic_add(stats, 2, 1)
    ct.atomic_or(stats, 3, ct.bitwise_lshift(1, i))
    ct.atomic_xor(stats, 4, 1)
    ct.atomic_and(stats, 5, ct.full((T,), -1, ct.int32) ^ i)
    ct.atomic_xchg(stats, 6, i + 7)
    swapped = ct.atomic_cas(stats, 7, 0, i + 1)            # only the first block swaps
    ct.store(olds, index=(i,), tile=old * 0 + ct.where(swapped == 0, 1, 0))


def test_gather_scatter_and_atomics_run_correctly(rng):
    n, t, blocks = 100, 32, 2
    x = rng.standard_normal(n).astype(np.float32)
    idx = rng.integers(-5, n + 5, t * blocks).astype(np.int32)
    ok = (idx >= 0) & (idx < n) & (idx % 3 != 0)
    want_out = np.where(ok, x[np.clip(idx, 0, n - 1)], -1.0).astype(np.float32)
    want_hist = np.bincount(idx % 8, minlength=8)
    args = (x, idx, np.zeros(t * blocks, np.float32), np.zeros(8, np.int32),
            np.array([-10**9, 10**9, 0, 0, 0, -1, 0, 0], np.int32),
            np.zeros(t * blocks, np.int32), t)
    outs = [run_everywhere(indexed, (blocks,), args, k) for k in (2, 3, 4, 5)]
    for out, hist, stats, olds in zip(*outs):
        np.testing.assert_array_equal(out, want_out)
        np.testing.assert_array_equal(hist, want_hist)
        assert stats[0] == idx.max() and stats[1] == idx.min()
        assert stats[2] == blocks and stats[3] == 0b11 and stats[4] == 0   # a scalar: once a block
        assert stats[5] == (-1 ^ 0) & (-1 ^ 1) and stats[6] in (7, 8) and stats[7] in (1, 2)
        assert olds.sum() == t                  # one block's elements saw 0 (one swapped)


@ct.kernel
def atomic_floats(acc, out, T: ct.Constant[int]):
    v = ct.arange(T, dtype=ct.float32) * 0.5
    old = ct.atomic_add(acc, ct.arange(T) % 4, v)
    prev = ct.atomic_cas(acc, T, 0.0, 3.0)                        # index T: out of bounds
    ct.store(out, index=(0,), tile=old * 0.0 + prev)


def test_float_atomics_and_an_out_of_bounds_cas_return_the_right_values():
    t = 32
    accs = run_everywhere(atomic_floats, (1,), (np.zeros(4, np.float32),
                                                np.full(t, 9.0, np.float32), t), 0)
    outs = run_everywhere(atomic_floats, (1,), (np.zeros(4, np.float32),
                                                np.full(t, 9.0, np.float32), t), 1)
    want = np.array([sum(0.5 * k for k in range(t) if k % 4 == r) for r in range(4)])
    for acc, out in zip(accs, outs):
        np.testing.assert_allclose(acc, want)
        np.testing.assert_array_equal(out, np.zeros(t))     # inactive cas returns `expected`


@ct.kernel
def atomic_bf16(acc, out, T: ct.Constant[int]):
    v = ct.astype(ct.arange(T, dtype=ct.float32) * 0.25 + 0.25, ct.bfloat16)
    old = ct.atomic_add(acc, ct.arange(T) % 6, v)          # neighbours share 32-bit words
    ct.store(out, index=(0,), tile=old)


def test_bfloat16_atomic_adds_on_both_targets():
    """sm_90a adds with atom.add.noftz.bf16; sm_80 with a compare-and-swap loop on the
    word holding the element (both halves of a word contended by the same warp)."""
    import ml_dtypes
    t = 32
    args = (np.zeros(6, ml_dtypes.bfloat16), np.zeros(t, ml_dtypes.bfloat16), t)
    accs = run_everywhere(atomic_bf16, (2,), args, 0)
    olds = run_everywhere(atomic_bf16, (1,), args, 1)
    want = np.array([2 * sum(0.25 * k + 0.25 for k in range(t) if k % 6 == r)
                     for r in range(6)])
    for acc in accs:
        np.testing.assert_allclose(acc.astype(np.float64), want, rtol=1e-2)
    for old in olds:                       # every element saw the sum of those before it
        got = sorted(old.astype(np.float64)[k] for k in range(t) if k % 6 == 0)
        assert got[0] == 0.0 and len(set(got)) == len(got)
    ptx80 = atomic_bf16.compile(args, target="sm_80").artifacts["ptx"]
    assert ".global.cas.b32" in ptx80 and "noftz.bf16" not in ptx80
    assert ".global.add.noftz.bf16" in atomic_bf16.compile(args, target="sm_90a").artifacts["ptx"]


@ct.kernel
def atomic_every_kind(acc, vals, T: ct.Constant[int], KIND: ct.Constant[int]):
    """Kind KIND of the commutative atomics into acc[0..3]; xchg and cas into acc[4]."""
    v = ct.load(vals, index=(0,), shape=(T,))
    slot = ct.arange(T, dtype=ct.int32) % 4
    if KIND == 0:
        ct.atomic_add(acc, slot, v)
    elif KIND == 1:
        ct.atomic_min(acc, slot, v)
    elif KIND == 2:
        ct.atomic_max(acc, slot, v)
    elif KIND == 3:
        ct.atomic_and(acc, slot, v)
    elif KIND == 4:
        ct.atomic_or(acc, slot, v)
    elif KIND == 5:
        ct.atomic_xor(acc, slot, v)
    elif KIND == 6:
        ct.atomic_xchg(acc, 4, v)
    else:
        ct.atomic_cas(acc, 4, v * 0, v)


_KINDS = ("add", "min", "max", "and", "or", "xor", "xchg", "cas")
_ATOMIC_INTS = ("int32", "int64", "uint32", "uint64")
_ATOMIC_DTYPES = {"add": _ATOMIC_INTS + ("float32", "float64", "float16", "bfloat16"),
                  "xchg": _ATOMIC_INTS + ("float32", "float64"),
                  "cas": _ATOMIC_INTS + ("float32", "float64"), "min": _ATOMIC_INTS,
                  "max": _ATOMIC_INTS, "and": _ATOMIC_INTS, "or": _ATOMIC_INTS,
                  "xor": _ATOMIC_INTS}        # cuTile's table


# the fast tier: max and and (or and xor take and's path: one atom.<op>.b<n> a dtype)
@pytest.mark.parametrize("kind", [pytest.param(i, marks=pytest.mark.slow)
                                  if k in ("add", "min", "xchg", "cas", "or", "xor") else i
                                  for i, k in enumerate(_KINDS)], ids=_KINDS)
def test_every_atomic_on_every_dtype_it_takes_compiles_and_runs(kind, rng):
    """Each atomic on each array dtype cuTile allows it: the cubin builds for both
    targets (ptxas has no atom.add.s64: a signed 64-bit add once failed there) and the
    simulator of both targets' code ends where the interpreter does (negative values
    for the signed types; floats with integer values, so any order sums exactly)."""
    import ml_dtypes
    t = 32
    for name in _ATOMIC_DTYPES[_KINDS[kind]]:
        dtype = ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)
        # sums stay exact in any order: 16-bit floats hold integers to 256 (bfloat16)
        low, high = (-1, 2) if name in ("float16", "bfloat16") else \
            (0 if name.startswith("uint") else -40, 40)
        vals = rng.integers(low, high, t).astype(dtype)
        acc = np.array([3, 5, 7, 9, 11, 0], dtype)
        args = (acc, vals, t, kind)
        outs = run_everywhere(atomic_every_kind, (2,), args, 0, stages=TARGETS)
        if _KINDS[kind] in ("xchg", "cas"):
            for out in outs:            # one of the values (xchg), or the first swap's
                assert out[4] in vals or out[4] == 11, (name, out)
            continue
        for out in outs[1:]:
            np.testing.assert_array_equal(out.astype(np.float64), outs[0].astype(np.float64),
                                          err_msg=f"{_KINDS[kind]} on {name}")


@ct.kernel
def bad_indexed(x, i, MODE: ct.Constant[int]):
    j = ct.load(i, index=(0,), shape=(16,))
    if MODE == 0:
        ct.gather(x, (j, j))
    elif MODE == 1:
        ct.gather(x, ct.astype(j, ct.float32))
    elif MODE == 2:
        ct.atomic_add(x, j, 1.0, memory_order=ct.MemoryOrder.WEAK)
    elif MODE == 3:
        ct.atomic_and(x, j, 1)
    else:
        ct.atomic_add(x, j, 1.0, memory_scope=ct.MemoryScope.NONE)


@pytest.mark.parametrize("mode,message", [
    (0, "indices has 2 entries but the array has 1 dims"),
    (1, "index 0 must be an integer tile or scalar"),
    (2, "atomics take memory_order RELAXED, ACQUIRE, RELEASE or ACQ_REL"),
    (3, "atomic_and does not take arrays of float32"),
    (4, "atomics take memory_scope BLOCK, DEVICE or SYS"),
])
def test_indexed_memory_is_checked_at_the_line(mode, message):
    with pytest.raises(TileTypeError, match=message):
        bad_indexed.compile((np.zeros(16, np.float32), np.zeros(16, np.int32), mode),
                            stage="frontend")


# ---------------------------------------------------------------------------
# Raw array memory and foreign pointers
# ---------------------------------------------------------------------------
@ct.kernel
def raw_memory(x, hist, out, stats, T: ct.Constant[int]):
    """x: a 2-d float32 array read by flat offset; hist/stats: int32 updated by offset."""
    i = ct.bid(0)
    mem = x.get_raw_memory()
    ct.static_assert(mem.dtype == ct.float32)
    off = ct.arange(T, dtype=ct.int32) * 3 + i * T
    t = mem.load_offset(off, mask=off % 2 == 0, padding_value=-1.0)      # every 3rd element
    two_d = mem.load_offset(ct.reshape(off, (2, T // 2)), latency=2)      # the offset's shape
    ct.store(out, (i, 0), ct.reshape(t + ct.sum(two_d), (1, T)))
    h = hist.get_raw_memory()
    old = h.atomic_add_offset(ct.arange(T, dtype=ct.int32) % 4, 1)        # old values back
    h.store_offset(ct.full((T,), 4 + i, ct.int32), ct.sum(old), mask=ct.arange(T) == 0)
    st = stats.slice(0, 1, 9).get_raw_memory()                           # from the slice's start
    st.atomic_max_offset(0, ct.max(off))
    st.atomic_min_offset(1, ct.min(off), memory_order=ct.MemoryOrder.RELAXED,
                         memory_scope=ct.MemoryScope.BLOCK)
    st.atomic_or_offset(2, ct.bitwise_lshift(1, i))
    st.atomic_xor_offset(3, 1)
    st.atomic_and_offset(4, ct.bitwise_not(i))
    st.atomic_xchg_offset(ct.full((2,), 5, ct.int64), i + 7)
    prev = st.atomic_cas_offset(6, 0, i + 1)                            # one block swaps
    st.atomic_add_offset(7, ct.where(prev == 0, 1, 0))


def test_raw_memory_loads_stores_and_atomics_by_offset(rng):
    """cuTile 1.7's RawArrayMemory: offsets in elements from the base (a slice's first
    element for a slice), results of the offset's shape, masks and padding, every
    atomic returning the old values; interpreter, simulator (sm_90a, sm_80), cubins."""
    t, blocks = 16, 2
    x = rng.standard_normal((8, 16)).astype(np.float32)
    flat = x.reshape(-1)
    stats = np.array([99, -10**9, 10**9, 0, 0, -1, 0, 0, 0, 99], np.int32)
    args = (x, np.zeros(8, np.int32), np.zeros((blocks, t), np.float32), stats, t)
    outs = [run_everywhere(raw_memory, (blocks,), args, k) for k in (1, 2, 3)]
    for hist, out, st in zip(*outs):
        np.testing.assert_array_equal(hist[:4], [2 * t // 4] * 4)
        # each block stored the sum of the old values it saw: 0..3 or 4..7 in each slot
        assert sorted(hist[4:6].tolist()) == [4 * sum(range(4)), 4 * sum(range(4, 8))]
        for i in range(blocks):
            off = np.arange(t) * 3 + i * t
            want = np.where(off % 2 == 0, flat[off], -1.0) + flat[off].sum(dtype=np.float32)
            # (a sum of 16 floats in another order: its absolute error, ~1e-6, shows
            # relatively where the element nearly cancels it)
            np.testing.assert_allclose(out[i], want, rtol=1e-5, atol=1e-5)
        every = np.arange(t) * 3 + np.arange(blocks)[:, None] * t
        assert st[0] == 99 and st[9] == 99                       # outside the slice: kept
        assert st[1] == every.max() and st[2] == every.min() and st[3] == 0b11
        assert st[4] == 0 and st[5] == (-1 ^ 0) & (-1 ^ 1) and st[6] in (7, 8)
        assert st[7] in (1, 2) and st[8] == 1                      # one cas saw 0


@ct.kernel
def raw_scalar_and_unsigned(u, f, out):
    m = u.get_raw_memory()
    old = m.atomic_max_offset(ct.astype(1, ct.uint32), ct.astype(4000000000, ct.uint32))
    fm = f.get_raw_memory()
    prev = fm.atomic_cas_offset(ct.arange(4, dtype=ct.int64), 1.5, -2.0,
                                mask=ct.arange(4, dtype=ct.int32) < 3)
    added = fm.atomic_add_offset(3, 0.25)
    first = fm.load_offset(0)                                   # a scalar offset: a scalar
    ct.store(out, (0,), ct.astype(prev, ct.float32) + first + added +
             ct.astype(old, ct.float32) * 0.0)


def test_raw_memory_scalar_offsets_unsigned_and_float_atomics():
    u = np.array([1, 3000000000, 5], np.uint32)
    f = np.array([1.5, 0.5, 1.5, 8.0], np.float32)
    args = (u, f, np.zeros(4, np.float32))
    us = run_everywhere(raw_scalar_and_unsigned, (1,), args, 0)
    fs = run_everywhere(raw_scalar_and_unsigned, (1,), args, 1)
    outs = run_everywhere(raw_scalar_and_unsigned, (1,), args, 2)
    for uu, ff, out in zip(us, fs, outs):
        np.testing.assert_array_equal(uu, [1, 4000000000, 5])     # unsigned max
        np.testing.assert_array_equal(ff, [-2.0, 0.5, -2.0, 8.25])
        # cas's old values (masked off: expected), + f[0] after the cas, + add's old value
        np.testing.assert_array_equal(out, np.array([1.5, 0.5, 1.5, 1.5]) - 2.0 + 8.0)


@ct.function
def sum_of_view(p, n, step):
    v = ct.Array.from_foreign(p, (n,), (step,))
    return ct.sum(ct.load(v, (0,), shape=(8,), padding_mode=ct.PaddingMode.ZERO))


@ct.kernel
def foreign(x, out, n):
    p = x.foreign_pointer
    ct.static_assert(p.dtype == ct.foreign_pointer_dtype(x.dtype))
    same = ct.Array.from_foreign(p, x.shape, x.strides)                 # run-time metadata
    ct.store(out, (0, 0), ct.load(same, (0, 0), shape=(1, 8)))
    transposed = ct.Array.from_foreign(p, (x.shape[1], x.shape[0]), (1, x.strides[0]))
    ct.store(out, (1, 0), ct.load(transposed, (0, 0), shape=(1, 8),
                                  padding_mode=ct.PaddingMode.ZERO))
    fixed = ct.Array.from_foreign(p, (2, 4), (8, 2))                    # compile-time
    ct.static_assert(fixed.shape == (2, 4) and fixed.strides == (8, 2))
    ct.store(out, (2, 0), ct.reshape(ct.load(fixed, (0, 0), shape=(2, 4)), (1, 8)))
    row = x.slice(0, 1, 2).foreign_pointer                              # a slice's first
    ct.store(out, (3, 0), ct.full((1, 8), sum_of_view(row, n, 1), ct.float32))


def test_foreign_pointers_make_arrays_of_memory():
    """`foreign_pointer` and `Array.from_foreign`: the same array, a transposed view,
    compile-time shape and strides (compiled in), a slice's pointer, a pointer passed
    to a helper with a run-time length."""
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    args = (x, np.zeros((4, 8), np.float32), 5)
    for out in run_everywhere(foreign, (1,), args, 1):
        np.testing.assert_array_equal(out[0], x[0])
        np.testing.assert_array_equal(out[1, :4], x[:, 0])
        np.testing.assert_array_equal(out[1, 4:], 0)          # past the transposed dim
        np.testing.assert_array_equal(out[2], x.reshape(-1)[[0, 2, 4, 6, 8, 10, 12, 14]])
        np.testing.assert_array_equal(out[3], x[1, :5].sum())
    text = foreign.compile(args, stage="frontend").ir()
    assert '"tile.array_address"' in text and '"tile.make_array"' in text


@ct.kernel
def bad_pointers(x, n, MODE: ct.Constant[int]):
    p = x.foreign_pointer
    if MODE == 0:
        ct.Array.from_foreign(x, x.shape, x.strides)
    elif MODE == 1:
        ct.Array.from_foreign(p, (4, 4), (1,))
    elif MODE == 2:
        ct.Array.from_foreign(p, (-1,), (1,))
    elif MODE == 3:
        ct.Array.from_foreign(p, (4.0,), (1,))
    elif MODE == 4:
        ct.Array.from_foreign(p, (ct.astype(n, ct.uint32),), (1,))
    elif MODE == 5:
        p + 1
    elif MODE == 6:
        p.shape
    elif MODE == 7:
        x.get_raw_memory().atomic_max_offset(0, 1.0)
    elif MODE == 8:
        x.get_raw_memory().load_offset(ct.arange(4, dtype=ct.int32),
                                       mask=ct.full((8,), True, ct.bool_))
    elif MODE == 9:
        x.get_raw_memory().load_offset(1.5)
    elif MODE == 10:
        x.get_raw_memory().store_offset(0, 1.0, latency=11)
    elif MODE == 11:
        x.get_raw_memory().gather(0)
    elif MODE == 12:
        x.get_raw_memory().atomic_add_offset(0, 1.0, memory_scope=ct.MemoryScope.CLUSTER)
    elif MODE == 13:
        for i in range(n):
            p = ct.zeros((4,), ct.float32)
    else:
        ct.Array.from_foreign(p, (1 << 31,), (1,))


@pytest.mark.parametrize("mode,cls,message", [
    (0, TileTypeError, r"Array.from_foreign needs a scalar foreign pointer \(an array's "
                       r"foreign_pointer\), got a 1-d float32 array"),
    (1, TileTypeError, "shape and strides must have the same rank, got 2 dims and 1 strides"),
    (2, TileValueError, r"shape\[0\] must be non-negative, got -1"),
    (3, TileTypeError, r"shape\[0\] must be an integer, got the constant 4.0"),
    (4, TileTypeError, r"shape\[0\] must be a signed integer, got a uint32 scalar"),
    (5, TileTypeError, r"operator '\+' does not apply to a foreign pointer "
                       r"\(foreign_pointer\[float32\]\)"),
    (6, TileTypeError, "a foreign pointer has no attribute 'shape': it has its dtype"),
    (7, TileTypeError, "atomic_max_offset does not take the raw memory of a float32 array"),
    (8, TileTypeError, r"the mask shape \(8,\) is not broadcastable to the offset shape "
                       r"\(4,\)"),
    (9, TileTypeError, "the offset must be an integer scalar or tile, got the constant 1.5"),
    (10, TileTypeError, "latency must be an int in 1..10, got the constant 11"),
    (11, TileTypeError, r"RawArrayMemory has no attribute 'gather' \(it has dtype, "
                        r"load_offset, store_offset, atomic_cas_offset"),
    (12, TileTypeError, r"atomics take memory_scope BLOCK, DEVICE or SYS, got .*CLUSTER"),
    (13, TileTypeError, r"'p' is a foreign pointer \(foreign_pointer\[float32\]\) before "
                        r"the loop and a float32 tile of shape \(4,\) after a trip; a "
                        r"loop-carried array, view, raw memory or foreign pointer stays one "
                        r"of its kind"),
    (14, TileValueError, r"shape\[0\] is 2147483648: tileir indexes an array dim with 32 "
                         r"bits"),
])
def test_foreign_pointers_and_raw_memory_are_checked_at_the_line(mode, cls, message):
    with pytest.raises(cls, match=message) as caught:
        bad_pointers.compile((np.zeros(16, np.float32), 4, mode), stage="frontend")
    assert "test_cutile_api.py" in str(caught.value)


@ct.kernel
def raw_out_of_bounds(x, off, n):
    v = ct.Array.from_foreign(x.foreign_pointer, (n,), (1,))
    ct.store(x, (0,), ct.load(v, (0,), shape=(4,)) +
             x.get_raw_memory().load_offset(ct.full((4,), off, ct.int32)))


def test_the_interpreter_stops_at_memory_outside_the_arrays():
    """Undefined on the GPU; a located error in the interpreter: an offset or a
    from_foreign array outside the memory the kernel's arrays are in."""
    from tileir.interpreter import InterpreterError
    base = np.zeros(32, np.float32)
    x = base[8:16]                        # a view: its allocation is all of `base`
    ct.launch(None, (1,), raw_out_of_bounds, (x, 23, 8))     # inside base: fine
    with pytest.raises(InterpreterError, match="an index lies outside the array and "
                       "check_bounds is off") as caught:
        ct.launch(None, (1,), raw_out_of_bounds, (x, 24, 8))
    assert "load_offset" in str(caught.value)
    with pytest.raises(InterpreterError, match=r"the array at address 0x[0-9a-f]+ with dims "
                       r"\(25,\) and strides \(1,\) \(elements\) reaches outside the "
                       r"memory of the array the address came from"):
        ct.launch(None, (1,), raw_out_of_bounds, (x, 0, 25))
    with pytest.raises(InterpreterError, match="'tile.gather': an index lies outside the "
                       "array and check_bounds is off"):     # before the base: refused here
        ct.launch(None, (1,), raw_out_of_bounds, (x, -1, 8))


@ct.kernel
def empty_view(x, y):
    v = ct.Array.from_foreign(x.foreign_pointer, x.shape, x.strides)
    ct.store(y, (0,), ct.load(v, (0,), shape=(4,), padding_mode=ct.PaddingMode.ZERO) + 1.0)


def test_an_empty_array_s_pointer_makes_an_empty_array():
    """(In the interpreter its address is one past its allocation's end.)"""
    for got in run_everywhere(empty_view, (1,), (np.zeros(0, np.float32),
                                                 np.zeros(4, np.float32)), 1):
        np.testing.assert_array_equal(got, np.ones(4))


def test_atomics_keep_their_grid():
    """Retiling or splitting would change how many blocks run the atomics."""
    hist, idx = np.zeros(8, np.int32), np.zeros(64, np.int32)
    ck = indexed.compile((np.zeros(100, np.float32), idx, np.zeros(64, np.float32), hist,
                          np.zeros(8, np.int32), np.zeros(64, np.int32), 32),
                         stage="cubin", target="sm_90a", grid=(2,), sm_count=132)
    assert not ck.meta.get("grid_rewrites")


# ---------------------------------------------------------------------------
# printf, print, assert_
# ---------------------------------------------------------------------------
@ct.kernel
def debugged(x, T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))
    i = ct.bid(0)
    ct.printf("block %d: %5.2f %x %%\n", i, ct.sum(t), ct.astype(t, ct.int32))
    print(f"T={T} t={t:.1f}", "sum", ct.sum(t), sep="|")
    ct.print(ct.reshape(t > 1.0, (2, T // 2)), end="!\n")
    ct.assert_(t < 100.0, "values are small")


WANT_PRINTED = ("block {b}:  6.00 [0, 1, 2, 3] %\n"
                "T=4 t=[0.0, 1.0, 2.0, 3.0]|sum|6.000000\n"
                "[[0, 0], [1, 1]]!\n")


def test_printf_and_print_print_once_per_block(capsys):
    x = np.arange(4, dtype=np.float32)
    ct.launch(None, (2,), debugged, (x, 4))
    assert capsys.readouterr().out == WANT_PRINTED.format(b=0) + WANT_PRINTED.format(b=1)
    for target in TARGETS:
        ck = debugged.compile((x, 4), stage="gpu", target=target)
        simulate(ck, (2,), (x, 4))
        assert capsys.readouterr().out == WANT_PRINTED.format(b=0) + WANT_PRINTED.format(b=1)
        ptx = debugged.compile((x, 4), stage="ptx", target=target).artifacts["ptx"]
        assert "vprintf" in ptx and "trap;" in ptx


def test_a_failed_assert_stops_with_the_user_s_line(capsys):
    x = np.array([1, 2, 1000, 3], np.float32)
    with pytest.raises(TileIRError, match=r"test_cutile_api.py:\d+: assertion failed: "
                                          r"values are small \(block \(0, 0, 0\)\)"):
        ct.launch(None, (1,), debugged, (x, 4))
    ck = debugged.compile((x, 4), stage="gpu", target="sm_90a")
    with pytest.raises(Exception, match="the kernel trapped"):
        simulate(ck, (1,), (x, 4))
    out = capsys.readouterr().out
    assert out.count("assertion failed: values are small (block [0,0,0], thread") == 1


@ct.kernel
def bad_debug(x, MODE: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(4,))
    if MODE == 0:
        ct.printf("%d\n", t)
    elif MODE == 1:
        ct.printf("%f %f\n", t)
    elif MODE == 2:
        ct.assert_(t)
    else:
        print(f"{t:q}")


@pytest.mark.parametrize("mode,message", [
    (0, "conversion %d does not print a float32 tile"),
    (1, "has 2 conversions for 1 values"),
    (2, "assert_ needs a bool tile"),
    (3, "format spec 'q' has no printf equivalent"),
])
def test_debug_calls_are_checked(mode, message):
    with pytest.raises(TileTypeError, match=re.escape(message)):
        bad_debug.compile((np.zeros(4, np.float32), mode), stage="frontend")


# ---------------------------------------------------------------------------
# Advanced indexing, block-scaled products, programmatic dependent launch
# ---------------------------------------------------------------------------
@ct.kernel
def advanced(x, rows, out, out2, T: ct.Constant[int]):
    i = ct.bid(0)
    r = ct.load(rows, index=(0,), shape=(8,))
    t = ct.load_advanced_indexing(x, (r, ct.Slice(i * T, T)), padding_mode=ct.PaddingMode.NEG_INF)
    ct.store(out, index=(0, i), tile=t)
    ct.store_advanced_indexing(out2, (r, ct.Slice(i * T, T)), t * 2.0)
    ct.grid_dependency_control_wait()
    ct.grid_dependency_control_launch_dependents()


def test_advanced_indexing_reads_and_writes_rows_by_index():
    x = np.arange(10 * 40, dtype=np.float32).reshape(10, 40)
    rows = np.array([0, 3, 9, 12, -1, 5, 7, 2], np.int32)          # 12 and -1: outside
    want = np.full((8, 48), -np.inf, np.float32)
    want2 = np.zeros((10, 40), np.float32)
    for k, r in enumerate(rows):
        if 0 <= r < 10:
            want[k, :40] = x[r]
            want2[r] = 2 * x[r]
    args = (x, rows, np.zeros((8, 48), np.float32), np.zeros((10, 40), np.float32), 16)
    for got in run_everywhere(advanced, (3,), args, 2):
        np.testing.assert_array_equal(got, want)
    for got in run_everywhere(advanced, (3,), args, 3):
        np.testing.assert_array_equal(got, want2)
    ck = advanced.compile(args, stage="ptx", target="sm_90a")
    ptx = ck.artifacts["ptx"]
    assert "griddepcontrol.wait;" in ptx and "griddepcontrol.launch_dependents;" in ptx
    assert ck.meta["programmatic_on_request"]       # by cuLaunchKernelEx where asked
    assert "programmatic_launch" not in ck.meta
    # a kernel without them gets both at its top (tile-programmatic-launch), unless
    # its option says not to
    ordered_args = (x, np.zeros((2, 2), np.float32), np.zeros((4, 4), np.float32),
                    np.zeros(1, np.float32))
    assert ordered.compile(ordered_args, stage="gpu", target="sm_90a").meta[
        "programmatic_launch"]
    in_order = ct.kernel(programmatic_launch=False)(ordered.__wrapped__)
    assert "programmatic_launch" not in in_order.compile(ordered_args, stage="gpu",
                                                         target="sm_90a").meta
    assert "griddepcontrol" not in advanced.compile(args, stage="ptx",
                                                    target="sm_80").artifacts["ptx"]


@ct.kernel
def bad_advanced(x, rows, MODE: ct.Constant[int]):
    r = ct.load(rows, index=(0,), shape=(8,))
    if MODE == 0:
        ct.load_advanced_indexing(x, (ct.Slice(0, 8), ct.Slice(0, 8)))
    elif MODE == 1:
        ct.load_advanced_indexing(x, (r, ct.Slice(0, 6)))
    else:
        ct.store_advanced_indexing(x, (r, ct.Slice(0, 8)), ct.zeros((8, 4), ct.float32))


@pytest.mark.parametrize("mode,message", [
    (0, "needs exactly one 1-D integer index tile"),
    (1, "a Slice's length must be a compile-time power of two"),
    (2, "the indices give (8, 8)"),
])
def test_advanced_indexing_is_checked(mode, message):
    with pytest.raises(TileTypeError, match=re.escape(message)):
        bad_advanced.compile((np.zeros((8, 8), np.float32), np.zeros(8, np.int32), mode),
                             stage="frontend")


@ct.kernel
def block_scaled(a, sa, b, sb, c, M: ct.Constant[int], K: ct.Constant[int], B: ct.Constant[int]):
    x = ct.load(a, index=(0, 0), shape=(M, K))
    xs = ct.load(sa, index=(0, 0), shape=(M, K // B))
    y = ct.load(b, index=(0, 0), shape=(K, M))
    ys = ct.load(sb, index=(0, 0), shape=(K // B, M))
    ct.store(c, index=(0, 0), tile=ct.mma_scaled(x, xs, y, ys, ct.full((M, M), 1.0, ct.float32)))


@pytest.mark.parametrize("operand,scale,block", [
    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu, 32),
    (ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu, 32),
    (ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu, 16),
    (ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn, 16),
])
def test_mma_scaled_is_the_exact_block_scaled_product(operand, scale, block, rng):
    m, k = 16, 64
    a = (rng.standard_normal((m, k)) * 2).astype(operand)
    b = (rng.standard_normal((k, m)) * 2).astype(operand)
    pick = lambda *s: (2.0 ** rng.integers(-3, 3, s) if scale == ml_dtypes.float8_e8m0fnu  # noqa
                       else rng.choice([0.5, 0.75, 1.0, 1.5, 3.0], s)).astype(scale)
    sa, sb = pick(m, k // block), pick(k // block, m)
    c = np.zeros((m, m), np.float32)
    ct.launch(None, (1,), block_scaled, (a, sa, b, sb, c, m, k, block))
    f = lambda v: v.astype(np.float64)                                           # noqa: E731
    x, y = f(a) * np.repeat(f(sa), block, 1), f(b) * np.repeat(f(sb), block, 0)
    want = x @ y + 1
    # each product of the scaled operands is exact in f32; the k sums are not: f32
    # accumulation in any order is within (k + 1) units of 2^-24 of the sum of the
    # terms' magnitudes (a fixed atol failed where terms of ~100 cancelled to ~1)
    bound = (k + 1) * 2.0 ** -24 * (np.abs(x) @ np.abs(y) + 1)
    assert np.all(np.abs(c - want) <= bound), np.max(np.abs(c - want) / bound)
    with pytest.raises(TileIRError, match="tiles are not lowered to the GPU"):
        block_scaled.compile((a, sa, b, sb, c, m, k, block), stage="gpu", target="sm_90a")


@ct.kernel
def one_mma(a, b, c, FAST: ct.Constant[int]):
    x = ct.load(a, index=(0, 0), shape=(16, 16))
    y = ct.load(b, index=(0, 0), shape=(16, 16))
    ct.store(c, index=(0, 0), tile=ct.mma(x, y, ct.load(c, index=(0, 0), shape=(16, 16)),
                                          use_fast_acc=FAST == 1))


@ct.kernel
def mma_fast_acc_of(a, c, flag):
    x = ct.load(a, index=(0, 0), shape=(16, 16))
    ct.store(c, index=(0, 0), tile=ct.mma(x, x, ct.zeros((16, 16), ct.float32),
                                          use_fast_acc=flag))


def test_mma_takes_cutiles_dtypes_and_use_fast_acc(rng):
    """cuTile's mma does not promote: one dtype, but for int8 / uint8 pairs (and, here,
    the two fp8 types); `use_fast_acc` only for fp8, a compile-time bool, marking the
    product `tile.fast_acc`; the interpreter sums in f32 either way."""
    z = np.zeros((16, 16), np.float32)
    f16, bf16 = np.zeros((16, 16), np.float16), np.zeros((16, 16), ml_dtypes.bfloat16)
    with pytest.raises(TileTypeError, match="mma operands must have one dtype.*got float16 "
                       "and bfloat16"):
        one_mma.compile((f16, bf16, z, 0), stage="frontend")
    with pytest.raises(TileTypeError, match="got float32 and float16"):
        one_mma.compile((z, f16, z, 0), stage="frontend")
    with pytest.raises(TileTypeError, match="use_fast_acc is only supported for fp8 input "
                       "dtypes"):
        one_mma.compile((f16, f16, z, 1), stage="frontend")
    f8 = np.zeros((16, 16), ml_dtypes.float8_e4m3fn)
    with pytest.raises(TileTypeError, match="use_fast_acc must be a compile-time bool"):
        mma_fast_acc_of.compile((f8, z, True), stage="frontend")
    assert "tile.fast_acc" in str(one_mma.compile((f8, f8, z, 1), stage="frontend").module)
    assert "tile.fast_acc" not in str(one_mma.compile((f8, f8, z, 0), stage="frontend").module)
    a = rng.integers(-4, 5, (16, 16)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.integers(-4, 5, (16, 16)).astype(ml_dtypes.float8_e5m2)
    for fast in (0, 1):
        c = np.ones((16, 16), np.float32)
        ct.launch(None, (1,), one_mma, (a, b, c, fast))
        np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64) + 1)


def test_mma_scaled_checks_formats_and_blocks(rng):
    m, k = 16, 64
    a = np.zeros((m, k), ml_dtypes.float8_e4m3fn)
    b = np.zeros((k, m), ml_dtypes.float8_e4m3fn)
    sa = np.zeros((m, k // 16), ml_dtypes.float8_e8m0fnu)
    sb = np.zeros((k // 16, m), ml_dtypes.float8_e8m0fnu)
    c = np.zeros((m, m), np.float32)
    with pytest.raises(TileTypeError, match="takes blocks of 32 K elements, got 16"):
        block_scaled.compile((a, sa, b, sb, c, m, k, 16), stage="frontend")
    with pytest.raises(TileTypeError, match="does not take float16 operands"):
        block_scaled.compile((a.astype(np.float16), sa, b.astype(np.float16), sb, c, m, k, 16),
                             stage="frontend")


# ---------------------------------------------------------------------------
# What cuTile's own kernels use: load/store order, one-element loads, while loops,
# batched matmul broadcasting
# ---------------------------------------------------------------------------
@ct.kernel
def ordered(x, y, z, s):
    t = ct.load(x, index=(0, 1), shape=(2, 2), order=(1, 0))      # a tile of x.T
    ct.store(y, index=(0, 0), tile=t)
    ct.store(z, index=(1, 0), tile=t, order="F", allow_tma=False, latency=1, check_bounds=True)
    ct.store(s, index=(0,), tile=ct.load(x, index=(1, 2), shape=()))


def test_load_and_store_orders_and_one_element_loads():
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    want_z = np.zeros((4, 4), np.float32)
    want_z[0:2, 2:4] = [[8, 9], [12, 13]]
    args = (x, np.zeros((2, 2), np.float32), np.zeros((4, 4), np.float32),
            np.zeros(1, np.float32))
    for y, z, s in zip(*(run_everywhere(ordered, (1,), args, k) for k in (1, 2, 3))):
        np.testing.assert_array_equal(y, [[8, 12], [9, 13]])
        np.testing.assert_array_equal(z, want_z)
        assert s[0] == 6


@ct.kernel
def spin_lock(lock, hits, counter):
    while ct.atomic_cas(lock, 0, 0, 1, memory_order=ct.MemoryOrder.ACQUIRE) == 1:
        pass
    c = ct.load(counter, index=(0,), shape=(1,))
    ct.store(counter, index=(0,), tile=c + 1)                   # the critical section
    ct.store(hits, index=(ct.bid(0),), tile=ct.full((1,), 1, dtype=ct.int32))
    ct.atomic_xchg(lock, 0, 0, memory_order=ct.MemoryOrder.RELEASE)


@ct.kernel
def doubling(x, y, n, bound):
    t = ct.load(x, index=(0,), shape=(64,))
    i = 0
    while ct.max(t) < bound:
        t = t * 2.0
        i = i + 1
    ct.store(y, index=(0,), tile=t)
    ct.store(n, index=(0,), tile=i)


def test_while_loops_carry_values_and_spin_on_atomics():
    args = (np.zeros(1, np.int32), np.zeros(4, np.int32), np.zeros(1, np.int32))
    for lock, hits, counter in zip(*(run_everywhere(spin_lock, (4,), args, k)
                                     for k in (0, 1, 2))):
        assert lock[0] == 0 and hits.sum() == 4 and counter[0] == 4
    x = np.ones(64, np.float32)
    args = (x, np.zeros(64, np.float32), np.zeros(1, np.int32), 40.0)
    for y, n in zip(*(run_everywhere(doubling, (1,), args, k) for k in (1, 2))):
        assert n[0] == 6 and (y == 64).all()


@ct.kernel
def broadcast_batches(a, b, y, BS: ct.Constant[int], T: ct.Constant[int]):
    s = ct.load(a, index=(0, 0, 0), shape=(1, T, T))
    u = ct.load(b, index=(0, 0, 0), shape=(BS, T, T))
    ct.store(y, index=(0, 0, 0), tile=ct.matmul(s, u) + ct.matmul(ct.reshape(s, (T, T)), u))


def test_matmul_broadcasts_batch_dims(rng):
    a = rng.standard_normal((1, 16, 16)).astype(np.float32)
    b = rng.standard_normal((2, 16, 16)).astype(np.float32)
    y = np.zeros((2, 16, 16), np.float32)
    ct.launch(None, (1,), broadcast_batches, (a, b, y, 2, 16))
    np.testing.assert_allclose(y, 2 * (a.astype(np.float64) @ b), rtol=1e-5, atol=1e-4)


@ct.kernel
def ragged_sum(x, y, T: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(T,))                    # default padding
    ct.store(y, index=(0,), tile=ct.reshape(ct.sum(t), (1,)))


def test_the_default_padding_reads_zero_as_on_the_gpu():
    x = np.ones(5, np.float32)
    for got in run_everywhere(ragged_sum, (1,), (x, np.zeros(1, np.float32), 8), 1):
        assert got[0] == 5
