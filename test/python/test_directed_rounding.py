"""cuTile's directed roundings (RoundingMode RZ, RM, RP) of add, sub, mul, truediv and
sqrt: the interpreter's exact oracle (interpreter/directed.py) against rational
arithmetic, then kernels in the interpreter, the simulator of both targets' code
and ptxas, bit for bit."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.interpreter import directed
from tileir.sim import simulate

DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "bfloat16": ml_dtypes.bfloat16}
EXACT = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "div": lambda a, b: a / b}


def _values(rng, n, dtype):
    x = rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))
    x[:6] = [1.0, -1.0, 0.0, -0.0, 3.0, 1e-3]
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", EXACT)
def test_the_oracle_brackets_the_exact_value(dtype, name):
    """rm <= exact <= rp, one step apart unless exact; rz is the one toward zero."""
    t = DTYPES[dtype]
    rng = np.random.default_rng(len(dtype) * 7 + len(name))
    a, b = _values(rng, 200, t), _values(rng, 200, t)[::-1].copy()
    b[b == 0] = t(0.5)
    lo, hi = directed.binary(name, "rm", a, b, t), directed.binary(name, "rp", a, b, t)
    zero = directed.binary(name, "rz", a, b, t)
    top = Fraction(float(np.finfo(t).max)) if t is not ml_dtypes.bfloat16 else \
        Fraction(float(ml_dtypes.finfo(t).max))
    for i in range(200):
        exact = EXACT[name](Fraction(float(a[i])), Fraction(float(b[i])))
        if abs(exact) > top:                      # beyond the largest finite number
            assert (np.isinf(hi[i]) and lo[i] == top) if exact > 0 else \
                (np.isinf(lo[i]) and hi[i] == -top)
            continue
        low, high = Fraction(float(lo[i])), Fraction(float(hi[i]))
        assert low <= exact <= high
        if low == high:
            assert low == exact
        else:
            assert np.nextafter(float(lo[i]), np.inf, dtype=np.float64) <= float(hi[i])
            assert directed._step(lo[i], np.dtype(t), up=True) == hi[i]
        assert zero[i] == (lo[i] if exact > 0 else hi[i])


@pytest.mark.parametrize("dtype", DTYPES)
def test_square_roots_bracket_and_special_values_follow_ieee(dtype):
    t = DTYPES[dtype]
    x = np.abs(_values(np.random.default_rng(3), 100, t))
    lo, hi = directed.sqrt("rm", x, t), directed.sqrt("rp", x, t)
    for i in range(100):
        assert Fraction(float(lo[i])) ** 2 <= Fraction(float(x[i])) <= \
            Fraction(float(hi[i])) ** 2
    big = np.finfo(np.float32).max
    f32 = np.float32
    assert np.signbit(directed.binary("add", "rm", f32(1), f32(-1), f32))      # -0 toward -inf
    assert not np.signbit(directed.binary("add", "rz", f32(1), f32(-1), f32))
    assert directed.binary("add", "rz", f32(big), f32(big), f32) == big        # no overflow
    assert np.isinf(directed.binary("add", "rp", f32(big), f32(big), f32))
    assert np.isnan(directed.sqrt("rz", f32(-1), f32))
    assert np.isinf(directed.binary("div", "rz", f32(1), f32(0), f32))


@ct.kernel
def rounded(a, b, out, MODE: ct.Constant[int], T: ct.Constant[int]):
    x = ct.load(a, index=(0,), shape=(T,))
    y = ct.load(b, index=(0,), shape=(T,))
    m = (ct.RoundingMode.RZ, ct.RoundingMode.RM, ct.RoundingMode.RP)[MODE]
    ct.store(out, index=(0, 0), tile=ct.reshape(ct.add(x, y, rounding_mode=m), (1, T)))
    ct.store(out, index=(1, 0), tile=ct.reshape(ct.sub(x, y, rounding_mode=m), (1, T)))
    ct.store(out, index=(2, 0), tile=ct.reshape(ct.mul(x, y, rounding_mode=m), (1, T)))
    ct.store(out, index=(3, 0), tile=ct.reshape(ct.truediv(x, y, rounding_mode=m), (1, T)))
    ct.store(out, index=(4, 0), tile=ct.reshape(ct.sqrt(ct.abs(x), rounding_mode=m), (1, T)))


# In --full (0.4 s each): RM on float32 and float64, RP and bfloat16 everywhere.  f32
# and f64 take the PTX instruction with the mode as its suffix (elementwise._directed),
# one rule whatever the mode: the fast tier keeps [0-float32] and [0-float64] (RZ) for
# it; the 16-bit types narrow an f32 result in the direction asked (narrow_directed),
# and [0-float16] and [1-float16] keep that for the directions toward zero and -inf.
# Since session 24 (the policy: each rule once in the fast tier) [0-float64] and
# [0-float16] in --full too: [0-float32] keeps the suffixed instruction's rule, [1-float16]
# the narrowing's (in the direction that is not truncation)
@pytest.mark.parametrize("mode,dtype", [
    pytest.param(m, d, marks=pytest.mark.slow)
    if d == "bfloat16" or m == 2 or (m == 1 and d in ("float32", "float64"))
    or (m == 0 and d in ("float64", "float16")) else (m, d)
    for d in DTYPES for m in (0, 1, 2)])
def test_kernels_round_the_same_in_the_interpreter_and_on_both_targets(dtype, mode):
    t, n = DTYPES[dtype], 64
    rng = np.random.default_rng(mode)
    a, b = _values(rng, n, t), _values(rng, n, t)[::-1].copy()
    want = np.full((5, n), np.nan, t)
    ct.launch(None, (1,), rounded, (a, b, want, mode, n))
    ops = [("add", a, b), ("sub", a, b), ("mul", a, b), ("div", a, b)]
    names = ("rz", "rm", "rp")
    for row, (name, x, y) in enumerate(ops):
        np.testing.assert_array_equal(want[row], directed.binary(name, names[mode], x, y, t))
    np.testing.assert_array_equal(want[4], directed.sqrt(names[mode], np.abs(a), t))
    for target in ("sm_90a", "sm_80"):
        out = np.full((5, n), np.nan, t)
        ck = rounded.compile((a, b, out, mode, n), stage="gpu", target=target)
        simulate(ck, (1, 1, 1), (a, b, out, mode, n))
        np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))
        ptx = rounded.compile((a, b, out, mode, n), target=target).artifacts["ptx"]
        assert f"add.{names[mode]}.f" in ptx
