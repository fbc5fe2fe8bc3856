"""Rules for the `math` dialect.

Float functions are NumPy's, run in the compute dtype and rounded back (bf16
through f32; f16 ufuncs compute in f32 and round internally), so results are
within NumPy's accuracy (a few ulp for transcendentals), not correctly rounded.
`erf`, `erfc`, `fma` and `fpowi` have no NumPy ufunc of the right kind: they
compute in float64 and round once to the result type.
"""

from __future__ import annotations

import math

import numpy as np

from .compiler import CompileContext, Step, pure, rule
from . import directed
from .arith_float import flushing
from .dtypes import F64, as_signed, elem_of, f64_to, in_compute, signed_op


def round_half_away(x):
    """C `round`: halves go away from zero (np.round goes to even).

    Adding 0.5 and flooring would be wrong for 0.49999997f, where the sum
    rounds up to 1; the fraction `x - trunc(x)` is exact, so compare that.
    """
    whole = np.trunc(x)
    step = (np.abs(x - whole) >= 0.5).astype(x.dtype)
    return whole + np.copysign(step, x)


FLOAT_FUNCTIONS = {
    "math.absf": np.abs,
    "math.acos": np.arccos,
    "math.acosh": np.arccosh,
    "math.asin": np.arcsin,
    "math.asinh": np.arcsinh,
    "math.atan": np.arctan,
    "math.atanh": np.arctanh,
    "math.atan2": np.arctan2,
    "math.cbrt": np.cbrt,
    "math.ceil": np.ceil,
    "math.copysign": np.copysign,
    "math.cos": np.cos,
    "math.cosh": np.cosh,
    "math.exp": np.exp,
    "math.exp2": np.exp2,
    "math.expm1": np.expm1,
    "math.floor": np.floor,
    "math.log": np.log,
    "math.log10": np.log10,
    "math.log1p": np.log1p,
    "math.log2": np.log2,
    "math.powf": np.power,
    "math.round": round_half_away,
    "math.roundeven": np.rint,  # the default rounding mode is to nearest even
    "math.rsqrt": lambda x: np.reciprocal(np.sqrt(x)),
    "math.sin": np.sin,
    "math.sinh": np.sinh,
    "math.sqrt": np.sqrt,
    "math.tan": np.tan,
    "math.tanh": np.tanh,
    "math.trunc": np.trunc,
}


@rule(*FLOAT_FUNCTIONS)
def _float_function(op, cx: CompileContext) -> Step:
    e = elem_of(op.result.type)
    mode = directed.rounding_of(op)
    if mode is not None and op.operation.name == "math.sqrt":     # RZ / RM / RP
        return pure(op, cx, flushing(op, directed.rounded("math.sqrt", mode, e.storage)))
    fn = in_compute(e, FLOAT_FUNCTIONS[op.operation.name])
    return pure(op, cx, flushing(op, fn))


CLASSIFIERS = {"math.isnan": np.isnan, "math.isinf": np.isinf, "math.isfinite": np.isfinite}


@rule(*CLASSIFIERS)
def _classify(op, cx: CompileContext) -> Step:
    test, compute = CLASSIFIERS[op.operation.name], elem_of(op.operands[0].type).compute
    return pure(op, cx, lambda x: test(x.astype(compute)))


# ---------------------------------------------------------------------------
# Computed in float64, rounded once
# ---------------------------------------------------------------------------
F64_FUNCTIONS = {
    "math.erf": np.vectorize(math.erf, otypes=[F64]),
    "math.erfc": np.vectorize(math.erfc, otypes=[F64]),
}


@rule(*F64_FUNCTIONS)
def _f64_function(op, cx: CompileContext) -> Step:
    e, fn = elem_of(op.result.type), F64_FUNCTIONS[op.operation.name]
    return pure(op, cx, lambda x: f64_to(e, fn(x.astype(F64))))


@rule("math.fma")
def _fma(op, cx: CompileContext) -> Step:
    # For f16/bf16/f32 the product is exact in f64, so this rounds like a fused
    # multiply-add except in rare double-rounding ties; f64 rounds twice
    # (NumPy has no fused multiply-add).
    e = elem_of(op.result.type)
    return pure(op, cx, lambda a, b, c: f64_to(e, a.astype(F64) * b.astype(F64) + c.astype(F64)))


@rule("math.fpowi")
def _fpowi(op, cx: CompileContext) -> Step:
    e, n = elem_of(op.result.type), elem_of(op.operands[1].type)
    return pure(op, cx, lambda x, k: f64_to(e, np.power(x.astype(F64),
                                                         as_signed(n, k).astype(F64))))


# ---------------------------------------------------------------------------
# Integer functions
# ---------------------------------------------------------------------------
def ipow(a, n):
    """Integer power, wrapping.  A negative exponent gives 1/a**|n| truncated:
    1 for a == 1, +-1 for a == -1, 0 for |a| > 1, and for a == 0 the
    division-by-zero value of `arith.divsi`, -1."""
    negative = n < 0
    power = np.power(a, np.where(negative, 0, n).astype(a.dtype))
    inverse = np.where(a == 1, 1,
                       np.where(a == -1, np.where(n % 2 == 0, 1, -1),
                                np.where(a == 0, -1, 0)))
    return np.where(negative, inverse, power).astype(a.dtype)


@rule("math.absi")
def _absi(op, cx: CompileContext) -> Step:
    return pure(op, cx, signed_op(elem_of(op.result.type), np.abs))  # abs(INT_MIN) wraps


@rule("math.ipowi")
def _ipowi(op, cx: CompileContext) -> Step:
    return pure(op, cx, signed_op(elem_of(op.result.type), ipow))
