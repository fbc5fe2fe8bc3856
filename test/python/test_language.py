"""Python language constructs cuTile kernels use, in tileir: chained comparisons,
compile-time strings, enums, None and dtypes (arguments, globals, comparisons), `...`
and `np.newaxis` in tile subscripts, the builtins divmod/pow, tuple slicing, `in`,
comprehensions and loop-carried tuples, static_eval arithmetic on runtime values,
f-string static_assert messages, what print shows, and frozen dataclasses.

Each runs in the interpreter, in the GPU code the simulator runs (sm_90a and sm_80)
and as a cubin (`run_everywhere`), against NumPy references; errors are checked by
their message and the user's line.
"""

from __future__ import annotations

import dataclasses
import enum
import re

import numpy as np
import pytest

import tileir as ct
from test_cutile_api import TARGETS, run_everywhere
from tileir.errors import (TileStaticAssertionError, TileStaticEvalError, TileTypeError,
                           TileUnsupportedFeatureError, TileValueError)
from tileir.sim import simulate

HERE = __file__.rsplit("/", 1)[-1]


def line_of(fn, text: str) -> int:
    """The file line of the first line of `fn`'s source containing `text`."""
    import inspect
    lines, first = inspect.getsourcelines(getattr(fn, "fn", fn))
    return first + next(i for i, line in enumerate(lines) if text in line)


def raises_at(cls, message: str, fn, text: str):
    """pytest.raises for `cls` whose message is `message` at the line of `fn` holding
    `text`."""
    return pytest.raises(cls, match=rf"{HERE}:{line_of(fn, text)}:\d+: error: "
                                    rf"{re.escape(message)}")


# ---------------------------------------------------------------------------
# Chained comparisons
# ---------------------------------------------------------------------------
@ct.kernel
def chained(x, counts, out, N: ct.Constant[int]):
    i = ct.bid(0)
    t = ct.load(x, (0,), shape=(8,))
    inside = ct.where(-2 <= t < 3, 1, 0)                      # element-wise on tiles
    # each operand is evaluated once: the atomic in the middle runs once per block
    once = 0 <= ct.atomic_add(counts, (0,), 1) < 1000
    scalar = 0 < i < 2                                        # runtime scalars
    static = 1 if 0 < N < 10 else 2                           # compile time
    # a compile-time False ends the chain: the division by zero is never compiled
    skipped = 1 if N < 0 < 1 // 0 else 3
    mixed = 0 < N < 10 and not (i > 0) or N == 42
    r = inside * 1000 + ct.where(once, 100, 0) + ct.where(scalar, 10, 0)
    r = r + static + skipped + ct.where(mixed, 10000, 0)
    ct.store(out, (i, 0), ct.reshape(r, (1, 8)))


def test_chained_comparisons_and_each_operand_once():
    x = np.arange(8, dtype=np.int32) - 4
    args = (x, np.zeros(1, np.int32), np.zeros((3, 8), np.int32), 4)
    inside = ((x >= -2) & (x < 3)) * 1000
    want = np.stack([inside + 100 + 10 * (0 < i < 2) + 4 + 10000 * (i == 0)
                     for i in range(3)])
    for got in run_everywhere(chained, (3,), args, 2):
        np.testing.assert_array_equal(got, want)
    for got in run_everywhere(chained, (3,), args, 1):
        np.testing.assert_array_equal(got, [3])


@ct.kernel
def chain_in_if(x, out):
    t = ct.load(x, (0,), shape=(4,))
    if 0 < t < 3:
        ct.store(out, (0,), t)


def test_a_chain_of_tiles_is_not_an_if_condition():
    with raises_at(TileTypeError, "an 'if' condition must be a scalar, got a bool_ tile of "
                   "shape (4,)", chain_in_if, "if 0 < t < 3"):
        chain_in_if.compile((np.zeros(4, np.int32), np.zeros(4, np.int32)), stage="frontend")


# ---------------------------------------------------------------------------
# Compile-time strings, enums, None and dtypes
# ---------------------------------------------------------------------------
class Mode(enum.Enum):
    ADD = 1
    MUL = 2


MODE = Mode.MUL
NAME = "relu"


@ct.kernel
def activation(x, y, act: ct.Constant[str], mode: ct.Constant, bias: ct.Constant,
               dtype: ct.Constant):
    t = ct.load(x, (0,), shape=(8,))
    if act == "relu":
        t = ct.maximum(t, 0.0)
    elif act in ("neg", "minus") and act != "relu":
        t = -t
    if mode == ct.RoundingMode.RN and mode.name == "RN" and mode.value == "nearest_even":
        t = t * 2.0
    if bias is not None and bias > 0.0:       # (a None bias is never compared)
        t = t + bias
    if MODE == Mode.ADD:
        t = t + 1000.0
    elif MODE is Mode.MUL and NAME == "relu" and ",".join(("a", "b")) == "a,b":
        t = t + MODE.value
    ct.store(y, (0,), t.astype(dtype))


@pytest.mark.parametrize("act,bias,dtype", [("relu", None, np.int32),
                                            ("neg", 0.5, np.dtype("float16")),
                                            ("gelu", 3.0, ct.float32)])
def test_str_enum_none_and_dtype_constants_fold(act, bias, dtype):
    x = np.arange(8, dtype=np.float32) - 4
    t = np.maximum(x, 0) if act == "relu" else -x if act == "neg" else x
    want = (t * 2 + (bias or 0) + 2).astype(np.dtype(dtype) if dtype is not ct.float32
                                            else np.float32)
    y = np.zeros(8, want.dtype)
    for got in run_everywhere(activation, (1,), (x, y, act, ct.RoundingMode.RN, bias, dtype), 1):
        np.testing.assert_array_equal(got, want)


class TorchDType:
    """What a torch dtype (`torch.int32`) looks like to tileir: a `torch.dtype`."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


TorchDType.__module__, TorchDType.__name__ = "torch", "dtype"


def test_constants_key_the_specialization():
    x, y = np.zeros(8, np.float32), np.zeros(8, np.int32)
    spec = activation.classify((x, y, "relu", ct.RoundingMode.RN, None, np.int32))
    assert [k for _, k in spec[2:]] == ["relu", ct.RoundingMode.RN, None, ct.int32]
    # foreign dtypes are ours once classified: one specialization for all spellings
    for d in (np.int32, np.dtype("int32"), ct.int32, TorchDType("int32")):
        assert activation.classify((x, y, "relu", ct.RoundingMode.RN, None, d))[-1][1] \
            is ct.int32
    # every value compiles its own kernel, keyed in the compile cache too
    for act in ("relu", "neg"):
        ck = activation.compile((x, y, act, ct.RoundingMode.RZ, None, np.int32),
                                stage="cubin", target="sm_90a")
        assert ck.artifacts["cubin"]
    a = activation.compile((x, y, "relu", ct.RoundingMode.RN, None, np.int32), stage="tile")
    b = activation.compile((x, y, "neg", ct.RoundingMode.RN, None, np.int32), stage="tile")
    assert a is not b and str(a.module) != str(b.module)


@dataclasses.dataclass(frozen=True)
class Pair:
    a: object
    b: object = 2


@pytest.mark.parametrize("value,message", [
    (Pair(1, 2), "argument 'bias' of kernel 'activation' is a Pair dataclass instance; "
                 "kernels do not take dataclass arguments (cuTile 1.7 refuses them too): "
                 "pass its fields as separate arguments, or build it in the kernel"),
    ([1], "argument 'bias' of kernel 'activation' is Constant but got list [1]"),
])
def test_constants_that_are_not_compile_time_values_are_refused(value, message):
    x = np.zeros(8, np.float32)
    with pytest.raises(TileTypeError, match=re.escape(message)):
        activation.classify((x, x, "relu", ct.RoundingMode.RN, value, np.float32))
    with pytest.raises(TileTypeError, match=re.escape("argument 'dtype' of kernel "
                                                      "'activation' is the dtype "
                                                      "dtype('complex64'), which has no "
                                                      "tileir dtype")):
        activation.classify((x, x, "relu", ct.RoundingMode.RN, None, np.dtype("complex64")))


@ct.kernel
def dataclass_arg(x, p):
    ct.store(x, (0,), ct.full((1,), 1, ct.int32))


def test_dataclass_arguments_are_refused_clearly():
    with pytest.raises(TileTypeError, match=re.escape(
            "argument 'p' of kernel 'dataclass_arg' is a Pair dataclass instance; kernels do "
            "not take dataclass arguments")):
        ct.launch(None, (1,), dataclass_arg, (np.zeros(1, np.int32), Pair(1, 2)))


@ct.kernel
def bad_constant_compare(x, act: ct.Constant[str]):
    if act < 3:
        ct.store(x, (0,), ct.full((1,), 1, ct.int32))


def test_compile_time_values_compare_by_python_rules():
    with raises_at(TileTypeError, "operator '<' does not apply to str 'relu' and the "
                   "constant 3", bad_constant_compare, "act < 3"):
        bad_constant_compare.compile((np.zeros(1, np.int32), "relu"), stage="frontend")


# ---------------------------------------------------------------------------
# `...` and np.newaxis in tile subscripts
# ---------------------------------------------------------------------------
@ct.kernel
def new_axes(x, y, z):
    t = ct.load(x, (0,), shape=(8,))
    a = t[..., None] + t[None, ...] + t[None] + t[:, np.newaxis] * 0 + t[np.newaxis, :] * 0
    ct.store(y, (0, 0), a)
    m = ct.reshape(t, (2, 4))
    flat = ct.reshape(m[None, None, ...], (2, 1, 4, 1))
    ct.store(z, (0, 0, 0, 0), m[:, None, ..., None] + flat * 0)


def test_ellipsis_and_newaxis_add_dims():
    x = np.arange(8, dtype=np.float32)
    m = x.reshape(2, 4)
    args = (x, np.zeros((8, 8), np.float32), np.zeros((2, 1, 4, 1), np.float32))
    for got in run_everywhere(new_axes, (1,), args, 1):
        np.testing.assert_array_equal(got, x[:, None] + 2 * x[None, :])
    for got in run_everywhere(new_axes, (1,), args, 2):
        np.testing.assert_array_equal(got, m[:, None, :, None])


@ct.kernel
def bad_subscript(x, MODE: ct.Constant[int]):
    t = ct.load(x, (0,), shape=(8,))
    if MODE == 0:
        u = t[..., None, ...]
    elif MODE == 1:
        u = t[1:]
    else:
        u = t[:, :]
    ct.store(x, (0,), u)


@pytest.mark.parametrize("mode,cls,message,text", [
    (0, TileTypeError, "an index can have only one ellipsis ('...')", "t[..., None, ...]"),
    (1, TileUnsupportedFeatureError, "tiles can only be indexed with ':', None (np.newaxis) "
     "and '...' (to add dims); use load/extract patterns for elements", "t[1:]"),
    (2, TileTypeError, "too many indices for a float32 tile of shape (8,): 2 ':' for 1 dims",
     "t[:, :]"),
])
def test_bad_tile_subscripts_are_refused(mode, cls, message, text):
    with raises_at(cls, message, bad_subscript, text):
        bad_subscript.compile((np.zeros(8, np.float32), mode), stage="frontend")


# ---------------------------------------------------------------------------
# Builtins divmod and pow
# ---------------------------------------------------------------------------
@ct.kernel
def builtin_math(x, y, q, r, p):
    t = ct.load(x, (0,), shape=(8,))
    u = ct.load(y, (0,), shape=(8,))
    a, b = divmod(t, u)
    c, d = divmod(17, 5)                              # compile time, as Python
    ct.store(q, (0,), a * 10 + c)
    ct.store(r, (0,), b * 10 + d)
    ct.store(p, (0,), pow(t, 2) + pow(3, 2) + t ** 3)


@ct.kernel
def builtin_float_pow(y, f):
    u = ct.load(y, (0,), shape=(8,))
    ct.store(f, (0,), pow(2.0, u) + pow(u.astype(ct.float32), 2.0))


def test_builtin_divmod_and_pow_match_the_operators():
    x = np.arange(8, dtype=np.int32) - 4
    y = np.array([3, -3, 2, 5, 7, -2, 4, 1], np.int32)
    args = (x, y, np.zeros(8, np.int32), np.zeros(8, np.int32), np.zeros(8, np.int32))
    for got in run_everywhere(builtin_math, (1,), args, 2):
        np.testing.assert_array_equal(got, (x // y) * 10 + 3)
    for got in run_everywhere(builtin_math, (1,), args, 3):
        np.testing.assert_array_equal(got, (x % y) * 10 + 2)
    for got in run_everywhere(builtin_math, (1,), args, 4):
        np.testing.assert_array_equal(got, x ** 2 + 9 + x ** 3)
    # (float powers: the simulator has no model of math.powf; the interpreter and ptxas)
    f = np.zeros(8, np.float32)
    ct.launch(None, (1,), builtin_float_pow, (y, f))
    np.testing.assert_allclose(f, 2.0 ** y + y.astype(np.float32) ** 2, rtol=1e-6)
    for target in TARGETS:
        builtin_float_pow.compile((y, f), stage="cubin", target=target)


@ct.kernel
def bad_builtins(x, MODE: ct.Constant[int]):
    t = ct.load(x, (0,), shape=(8,))
    if MODE == 0:
        u = pow(t, 2, 3)
    else:
        u, _ = divmod(t.astype(ct.float32), 2)
    ct.store(x, (0,), u)


@pytest.mark.parametrize("mode,message,text", [
    (0, "pow() in a kernel takes two arguments (base, exp); the three-argument modular "
        "form is not supported", "pow(t, 2, 3)"),
    (1, "divmod() is not implemented for floating point values", "divmod(t.astype"),
])
def test_builtin_divmod_and_pow_errors(mode, message, text):
    with raises_at(TileTypeError, message, bad_builtins, text):
        bad_builtins.compile((np.zeros(8, np.int32), mode), stage="frontend")


# ---------------------------------------------------------------------------
# Tuples: slicing, `in`, comprehensions, loop-carried
# ---------------------------------------------------------------------------
@ct.kernel
def tuples(x, m, y, M: ct.Constant[int]):
    i = ct.bid(0)
    rest = m.shape[1:]                                 # runtime dims
    tp = (1, 2, 3, 4)
    s = tp[::-1][0] * 1000 + tp[-2:][0] * 100 + len(tp[1:3]) * 10 + tp[:-3][0]
    flag = 1 if M in (1, 2, 4) else 0
    flag = flag + (2 if M not in (8, 16) else 0)
    picked = ct.where(i in (0, 2), 1, 0)               # a runtime scalar `in`
    loads = tuple(ct.load(x, (k,), shape=(4,)) for k in range(4) if k != 1)
    squares = [k * k for k in range(3)]
    pairs = tuple(a * b for a, b in zip(tp, tp[1:]))
    nested = tuple(a + b for a in range(2) for b in ct.static_iter((10, 20)) if a != b)
    indexed = tuple(k * v for k, v in enumerate(tp))
    r = loads[0] + loads[1] + loads[2] + s + rest[0] + flag * 100000 + picked * 1000000
    r = r + squares[2] + pairs[2] + nested[3] + indexed[3] + len(nested) * 10000000
    ct.store(y, (i, 0), ct.reshape(r, (1, 4)))


def test_tuple_slicing_membership_and_comprehensions():
    x = np.arange(16, dtype=np.int32)
    m = np.zeros((2, 5), np.float32)
    args = (x, m, np.zeros((3, 4), np.int32), 4)
    base = x[0:4] + x[8:12] + x[12:16] + 4000 + 300 + 20 + 1 + 5 + 3 * 100000
    extra = 4 + 12 + 21 + 12 + 4 * 10000000
    want = np.stack([base + extra + 1000000 * (i in (0, 2)) for i in range(3)])
    for got in run_everywhere(tuples, (3,), args, 2):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def carried(x, y, z, n):
    st = (ct.zeros((4,), ct.int32), ct.ones((4,), ct.int32), 0)
    for i in range(3):
        a, b, c = st
        st = (a + b, b * 2, c + i)
    k = 0
    pair = (ct.full((4,), 1, ct.int32), ct.float32)
    while k < n:
        acc, d = pair
        pair = (acc * 3, d)
        k += 1
    if ct.bid(0) == 0:
        chosen = (st[0], 5, pair[1])
    else:
        chosen = (st[1], 7, pair[1])
    ct.store(y, (0,), st[0] + st[1] + st[2] + pair[0])
    ct.store(z, (0,), (chosen[0] + chosen[1]).astype(chosen[2]))


def test_tuples_are_carried_through_loops_and_branches():
    args = (np.zeros(4, np.int32), np.zeros(4, np.int32), np.zeros(4, np.float32), 2)
    for got in run_everywhere(carried, (1,), args, 1):
        np.testing.assert_array_equal(got, np.full(4, 7 + 8 + 3 + 9))
    for got in run_everywhere(carried, (1,), args, 2):
        np.testing.assert_array_equal(got, np.full(4, 12.0))


@ct.kernel
def bad_tuples(x, n, MODE: ct.Constant[int]):
    t = ct.load(x, (0,), shape=(4,))
    st = (t, 1)
    if MODE == 0:
        for i in range(2):
            st = (t, t, t)
    elif MODE == 1:
        for j in range(2):
            st = (t, ct.float32)
    elif MODE == 2:
        u = tuple(t for k in range(n))
    elif MODE == 3:
        u = tuple(t for k in range(4) if t > 0)
    elif MODE == 4:
        u = t in (1, 2)
    elif MODE == 5:
        u = (t for k in range(4))
    elif MODE == 7:
        if ct.bid(0) == 0:
            st = (t, t)
        else:
            st = (t,)
        u = st
    else:
        u = st[2]
    print(u)                            # (every mode fails before)


@pytest.mark.parametrize("mode,cls,message,text", [
    (0, TileTypeError, "'st' is a tuple of 2 before the loop but a tuple of 3 after a trip; "
     "a loop-carried tuple or dataclass keeps its structure and its compile-time items",
     "for i in range(2):"),
    (1, TileTypeError, "'st[1]' is a int32 scalar before the loop/branch but DType "
     "tileir.float32 after it", "for j in range(2):"),
    (2, TileTypeError, "range() in a comprehension needs compile-time ints, got a int32 "
     "scalar", "range(n))"),
    (3, TileTypeError, "a comprehension's condition must be known at compile time, got a "
     "bool_ tile of shape (4,)", "if t > 0)"),
    (4, TileTypeError, "'in' compares scalars, but a int32 tile of shape (4,) and the "
     "constant 1 compare element-wise to a bool_ tile of shape (4,)", "t in (1, 2)"),
    (5, TileUnsupportedFeatureError, "a generator expression in a kernel must build a tuple: "
     "tuple(... for ... in ...)", "(t for k in range(4))"),
    (6, TileValueError, "tuple index 2 is out of range for a tuple of 2", "st[2]"),
    (7, TileTypeError, "'st' is a tuple of 2 after one branch of a runtime 'if' and a tuple "
     "of 1 after the other; what a runtime 'if' assigns must be tiles or numbers, or arrays, "
     "views, raw memory or foreign pointers of one kind (or tuples and dataclasses of them) in "
     "both branches, or the same compile-time value",
     "if ct.bid(0) == 0:"),
])
def test_tuple_errors(mode, cls, message, text):
    with raises_at(cls, message, bad_tuples, text):
        bad_tuples.compile((np.zeros(4, np.int32), 2, mode), stage="frontend")


# ---------------------------------------------------------------------------
# static_eval arithmetic, static_assert messages
# ---------------------------------------------------------------------------
@ct.kernel
def static_arith(x, y, N: ct.Constant[int]):
    t = ct.load(x, (0,), shape=(4,))
    u = t * 10
    r = ct.static_eval(t + 1 if N % 2 == 0 else u - 1)
    r = r + ct.static_eval(ct.maximum(t, 2) * (N // 2) + -t + (2 ** t if N > 100 else 0))
    ct.static_assert(N < 100, f"N={N} and {1 // 0}")     # (message unused: not evaluated)
    ct.store(y, (0,), r)


@pytest.mark.parametrize("n", [4, 5])
def test_static_eval_builds_expressions_of_runtime_values(n):
    x = np.arange(4, dtype=np.int32)
    picked = x + 1 if n % 2 == 0 else x * 10 - 1
    want = picked + np.maximum(x, 2) * (n // 2) - x
    for got in run_everywhere(static_arith, (1,), (x, np.zeros(4, np.int32), n), 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def static_messages(x, N: ct.Constant[int]):
    t = ct.load(x, (0,), shape=(4,))
    if N == 0:
        ct.static_assert(N % 2 == 1, f"N={N} must be odd, t is {t}")
    elif N == 2:
        ct.static_assert(N > 10, None)
    elif N == 4:
        ct.static_eval(ct.load(x, (0,), shape=(4,)))
    else:
        ct.static_assert(N > 10, t.shape)


@pytest.mark.parametrize("n,cls,message,text", [
    (0, TileStaticAssertionError, "Static assertion failed: N=0 must be odd, t is "
     "<tile[int32, (4,)]>", "must be odd"),
    (2, TileStaticAssertionError, "Static assertion failed", "N > 10, None"),
    (4, TileStaticEvalError, "load() cannot be called inside static_eval; it can build "
     "expressions with operators and add", "ct.static_eval(ct.load"),
    (6, TileStaticAssertionError, "Static assertion failed: (4,)", "t.shape)"),
])
def test_static_assert_messages_are_static_evaluated(n, cls, message, text):
    with raises_at(cls, message, static_messages, text):
        static_messages.compile((np.zeros(4, np.int32), n), stage="frontend")


# ---------------------------------------------------------------------------
# print
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Shown:
    t: object
    name: str
    n: int


@ct.kernel
def printed(x, y):
    t = ct.load(x, (0,), shape=(4,))
    s = ct.sum(t).astype(ct.int32)
    print("shape", x.shape, "dtype", x.dtype, t.shape, t.dtype)
    print((s, s + 1), (s,), ("a", 2, 0.5, True, None, ct.int8))
    print(f"{s, s * 2}|{x.dtype}|{ct.bid(0)!r}|{'q'!r}|{'ab':>4}")
    print(f"[{s:>4d}] [{s:<4}] [{s:^4}] [{s:+d}] [{s:04}] [{s:#x}] [{t:.1f}]")
    print(f"{7:>3} {0.5} {True} {2.5:.2f}", 0.5, True, sep="/")
    print(Shown(s, "x", 3), end="!\n")
    ct.store(y, (0,), t)


WANT = ("shape (4,) dtype float32 (4,) float32\n"
        "(6, 7) (6,) ('a', 2, 0.5, True, None, <DType 'int8'>)\n"
        "(6, 12)|float32|{b}|'q'|  ab\n"
        "[   6] [6   ] [   6] [+6] [0006] [0x6] [[0.0, 1.0, 2.0, 3.0]]\n"
        "  7 0.500000 1 2.50/0.5/True\n"
        "Shown(t=6, name='x', n=3)!\n")


def test_print_shows_values_as_cutile_does(capsys):
    x = np.arange(4, dtype=np.float32)
    args = (x, np.zeros(4, np.float32))
    want = WANT.format(b=0) + WANT.format(b=1)
    ct.launch(None, (2,), printed, args)
    assert capsys.readouterr().out == want
    for target in TARGETS:
        ck = printed.compile(args, stage="gpu", target=target)
        simulate(ck, (2,), args)
        assert capsys.readouterr().out == want
        printed.compile(args, stage="cubin", target=target)


def test_dtypes_str_as_cutile_names_them():
    assert str(ct.float32) == "float32" and f"{ct.bfloat16}" == "bfloat16"
    assert repr(ct.float32) == "tileir.float32"


@ct.kernel
def bad_print(x, MODE: ct.Constant[int]):
    t = ct.load(x, (0,), shape=(4,))
    if MODE == 0:
        print(f"{t:=4}")
    elif MODE == 1:
        print(f"{t:x}")
    elif MODE == 2:
        print("array", x)
    else:
        print(f"{(1, 2):>4}")


@pytest.mark.parametrize("mode,message,text", [
    (0, "format spec '=4' has no printf equivalent", "t:=4"),
    (1, "format spec 'x' prints integers, got a float32 tile of shape (4,)", "t:x"),
    (2, "only tiles, scalars and compile-time values print, got a 1-d float32 array",
     'print("array", x)'),
    (3, "cannot format a tuple of 2 with spec '>4'", "(1, 2):>4"),
])
def test_print_errors(mode, message, text):
    with raises_at(TileTypeError, message, bad_print, text):
        bad_print.compile((np.zeros(4, np.float32), mode), stage="frontend")


# ---------------------------------------------------------------------------
# Frozen dataclasses
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Cfg:
    acc: object
    scale: object = 2
    dtype: object = ct.float32

    def scaled(self, k):
        return self.acc * self.scale * k

    @property
    def doubled(self):
        return self.acc * 2


@dataclasses.dataclass(frozen=True)
class Checked:
    scale: object

    def __post_init__(self):           # runs as tile code when a kernel builds one
        ct.static_assert(self.scale != 0, "scale must not be 0")


@dataclasses.dataclass(frozen=True)
class Wrap:
    cfg: Cfg
    pair: tuple


DEFAULT = Cfg(0, 5)


@ct.function
def use(c):
    return c.acc * c.scale


@ct.function
def rebuild(c, t):
    return Wrap(dataclasses.replace(c, acc=t + c.acc), (t, c.scale))


@ct.kernel
def dataclasses_in_kernels(x, y, z):
    t = ct.load(x, (0,), shape=(4,))
    b = ct.bid(0)
    c = Cfg(t, 3)
    c2 = dataclasses.replace(c, scale=4)
    w = rebuild(c2, t)
    r = use(c) + use(c2) + w.cfg.acc + w.pair[0] * w.pair[1] + c.scaled(10) + c.doubled
    r = r + DEFAULT.scale + Checked(2).scale
    # == field by field: scalars give a runtime bool, compile-time fields fold
    r = r + ct.where(Cfg(b, 3) == Cfg(b, 3), 1, 0) + ct.where(Cfg(b, 3) != Cfg(b, 4), 10, 0)
    same = Cfg(DEFAULT.acc, 5) == DEFAULT and Cfg(1) != Pair(1)
    for i in range(2):
        c = Cfg(c.acc + 1, c.scale, c.dtype)
    ct.store(y, (0,), r + (100 if same else 0))
    ct.store(z, (0,), c.acc.astype(c.dtype))


def test_frozen_dataclasses_in_kernel_code():
    x = np.arange(4, dtype=np.int32)
    args = (x, np.zeros(4, np.int32), np.zeros(4, np.float32))
    want = x * 3 + x * 4 + 2 * x + x * 4 + x * 30 + x * 2 + 5 + 2 + 1 + 10 + 100
    for got in run_everywhere(dataclasses_in_kernels, (1,), args, 1):
        np.testing.assert_array_equal(got, want)
    for got in run_everywhere(dataclasses_in_kernels, (1,), args, 2):
        np.testing.assert_array_equal(got, x + 2.0)


@dataclasses.dataclass(frozen=True)
class State:
    src: object
    acc: object


@ct.kernel
def state_in_loop(x, other, y, MODE: ct.Constant[int]):
    s = State(x, ct.zeros((4,), ct.float32))
    for i in range(3):
        s = State(s.src if MODE == 0 else other, s.acc + ct.load(s.src, (i,), shape=(4,)))
    ct.store(y, (0,), s.acc)


@pytest.mark.parametrize("mode", [0, 1])
def test_dataclasses_holding_arrays_are_carried_by_their_runtime_fields(mode):
    """A dataclass instance (or tuple) is carried by its runtime leaves; an array in it
    stays as it is (MODE 0: no choice in the IR) unless a trip replaces it (MODE 1: the
    loop is compiled again carrying it as a run-time choice)."""
    x = np.arange(12, dtype=np.float32)
    other = x[::-1].copy()
    args = (x, other, np.zeros(4, np.float32), mode)
    rows = [x[0:4], other[4:8], other[8:12]] if mode else [x[0:4], x[4:8], x[8:12]]
    for got in run_everywhere(state_in_loop, (1,), args, 2):
        np.testing.assert_array_equal(got, sum(rows))
    chosen = "tile.select_array" in str(state_in_loop.compile(args, stage="frontend").module)
    assert chosen == bool(mode)


@dataclasses.dataclass(frozen=True)
class Scale:
    k: int = 3

    @ct.function
    def times(self, t):
        return t * self.k

    @staticmethod
    def plus(t):
        return t + 100


FIVE = Scale(5)


def scaled_sum(t, cfg=FIVE):              # a frozen default, as a compile-time value
    return cfg.times(t) + Scale.plus(t) + cfg.plus(t) + Scale().times(t)


@ct.kernel
def dataclass_defaults(x, y):
    t = ct.load(x, (0,), shape=(4,))
    ct.store(y, (0,), scaled_sum(t))


def test_dataclass_defaults_methods_and_static_methods():
    x = np.arange(4, dtype=np.int32)
    for got in run_everywhere(dataclass_defaults, (1,), (x, np.zeros(4, np.int32)), 1):
        np.testing.assert_array_equal(got, 5 * x + 2 * (x + 100) + 3 * x)


@dataclasses.dataclass
class Mutable:
    a: object


@dataclasses.dataclass(frozen=True)
class Factory:
    a: object = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class OwnInit:
    a: object

    def __init__(self, a):
        object.__setattr__(self, "a", a)


@ct.kernel
def bad_dataclasses(x, MODE: ct.Constant[int]):
    t = ct.load(x, (0,), shape=(4,))
    if MODE == 0:
        u = Mutable(t)
    elif MODE == 1:
        u = Factory()
    elif MODE == 2:
        u = OwnInit(t)
    elif MODE == 3:
        u = dataclasses.replace(Cfg(t), bias=1)
    elif MODE == 4:
        u = Checked(0)
    elif MODE == 5:
        u = Cfg(t).missing
    else:
        u = Cfg(t) < Cfg(t)
    print(u)                            # (every mode fails before)


@pytest.mark.parametrize("mode,cls,message,text", [
    (0, TileTypeError, "dataclass Mutable is not frozen; kernels build frozen dataclasses "
     "only (@dataclasses.dataclass(frozen=True)): their values cannot change", "Mutable(t)"),
    (1, TileTypeError, "field 'a' of dataclass Factory has a default_factory, which kernels "
     "cannot run; give it a default value or pass it", "Factory()"),
    (2, TileTypeError, "dataclass OwnInit has an __init__ of its own; kernels build "
     "dataclasses through the __init__ the dataclasses module generates", "OwnInit(t)"),
    (3, TileTypeError, "dataclass Cfg has no field 'bias' (its fields: acc, scale, dtype)",
     "bias=1"),
    (4, TileStaticAssertionError, "Static assertion failed: scale must not be 0",
     "scale must not be 0"),
    (5, TileTypeError, "a Cfg instance has no attribute 'missing' (its fields: acc, scale, "
     "dtype)", ".missing"),
    (6, TileTypeError, "operator '<' does not compare dataclass instances (== and != do)",
     "Cfg(t) < Cfg(t)"),
])
def test_dataclass_errors(mode, cls, message, text):
    with raises_at(cls, message, bad_dataclasses if mode != 4 else Checked.__post_init__,
                   text):
        bad_dataclasses.compile((np.zeros(4, np.int32), mode), stage="frontend")
