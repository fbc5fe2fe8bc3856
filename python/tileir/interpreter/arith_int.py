"""Rules for integer `arith` ops (on scalars and on tiles alike).

Integers wrap (two's complement), as in MLIR.  Where MLIR leaves a result
undefined (poison or UB), the interpreter defines one, chosen to match what
NVIDIA GPUs compute so that the oracle and the hardware agree:

* division by zero: the quotient is all ones (-1 signed, the max unsigned) and
  the remainder is the dividend;
* `INT_MIN / -1` wraps to `INT_MIN`, remainder 0;
* shifts by the bit width or more (the amount read as unsigned): `shli` and
  `shrui` give 0, `shrsi` fills with the sign bit.
"""

from __future__ import annotations

import numpy as np
from mlir.dialects import arith

from .compiler import CompileContext, Step, pure, rule
from .dtypes import Elem, as_signed, as_unsigned, elem_of, from_int, signed_op, unsigned_op


def _guard_zero(b):
    """(b == 0, b with zeros replaced by 1); the zero lanes are patched afterwards."""
    zero = b == 0
    return zero, np.where(zero, 1, b).astype(b.dtype)


def _guard_signed(a, b):
    """Like `_guard_zero`, and INT_MIN / -1 becomes INT_MIN / 1, its wrapped result."""
    zero, b = _guard_zero(b)
    overflow = (a == np.iinfo(a.dtype).min) & (b == -1)
    return zero, np.where(overflow, 1, b).astype(b.dtype)


def divsi(a, b):
    zero, b = _guard_signed(a, b)
    quotient = (a - np.fmod(a, b)) // b  # exact division: rounds toward zero
    return np.where(zero, -1, quotient).astype(a.dtype)


def remsi(a, b):
    zero, b = _guard_signed(a, b)
    return np.where(zero, a, np.fmod(a, b)).astype(a.dtype)  # sign of the dividend


def floordivsi(a, b):
    zero, b = _guard_signed(a, b)
    return np.where(zero, -1, a // b).astype(a.dtype)


def ceildivsi(a, b):
    zero, b = _guard_signed(a, b)
    floor = a // b
    quotient = floor + (a - floor * b != 0).astype(a.dtype)
    return np.where(zero, -1, quotient).astype(a.dtype)


def divui(a, b):
    zero, b = _guard_zero(b)
    return np.where(zero, np.iinfo(a.dtype).max, a // b).astype(a.dtype)


def remui(a, b):
    zero, b = _guard_zero(b)
    return np.where(zero, a, a % b).astype(a.dtype)


def ceildivui(a, b):
    zero, b = _guard_zero(b)
    floor = a // b
    quotient = floor + (a - floor * b != 0).astype(a.dtype)
    return np.where(zero, np.iinfo(a.dtype).max, quotient).astype(a.dtype)


# Applied to the signed interpretation (wrapped back to the op's type).
SIGNED = {
    "arith.addi": np.add,
    "arith.subi": np.subtract,
    "arith.muli": np.multiply,
    "arith.divsi": divsi,
    "arith.remsi": remsi,
    "arith.floordivsi": floordivsi,
    "arith.ceildivsi": ceildivsi,
    "arith.maxsi": np.maximum,
    "arith.minsi": np.minimum,
}

UNSIGNED = {
    "arith.divui": divui,
    "arith.remui": remui,
    "arith.ceildivui": ceildivui,
    "arith.maxui": np.maximum,
    "arith.minui": np.minimum,
}

# Bitwise ops need no interpretation: NumPy's work on bools as on ints.
BITWISE = {
    "arith.andi": np.bitwise_and,
    "arith.ori": np.bitwise_or,
    "arith.xori": np.bitwise_xor,
}


@rule(*SIGNED)
def _signed(op, cx: CompileContext) -> Step:
    return pure(op, cx, signed_op(elem_of(op.result.type), SIGNED[op.operation.name]))


@rule(*UNSIGNED)
def _unsigned(op, cx: CompileContext) -> Step:
    return pure(op, cx, unsigned_op(elem_of(op.result.type), UNSIGNED[op.operation.name]))


@rule(*BITWISE)
def _bitwise(op, cx: CompileContext) -> Step:
    return pure(op, cx, BITWISE[op.operation.name])


# ---------------------------------------------------------------------------
# Shifts
# ---------------------------------------------------------------------------
def _logical_shift(e: Elem, shift):
    def fn(a, b):
        bits = as_unsigned(e, a)
        amount = as_unsigned(e, b)
        too_far = amount >= e.bits
        r = shift(bits, np.where(too_far, 0, amount).astype(bits.dtype))
        return from_int(e, np.where(too_far, 0, r).astype(bits.dtype))
    return fn


def _arithmetic_shift(e: Elem):
    def fn(a, b):
        value = as_signed(e, a)
        # Shifting by width-1 already fills every bit with the sign.
        amount = np.minimum(as_unsigned(e, b), e.bits - 1).astype(value.dtype)
        return from_int(e, np.right_shift(value, amount))
    return fn


@rule("arith.shli", "arith.shrui", "arith.shrsi")
def _shift(op, cx: CompileContext) -> Step:
    e = elem_of(op.result.type)
    if op.operation.name == "arith.shrsi":
        return pure(op, cx, _arithmetic_shift(e))
    shift = np.left_shift if op.operation.name == "arith.shli" else np.right_shift
    return pure(op, cx, _logical_shift(e, shift))


# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------
CMPI = {  # keyed by the names of `arith.CmpIPredicate`
    "eq": np.equal, "ne": np.not_equal,
    "slt": np.less, "sle": np.less_equal, "sgt": np.greater, "sge": np.greater_equal,
    "ult": np.less, "ule": np.less_equal, "ugt": np.greater, "uge": np.greater_equal,
}


@rule("arith.cmpi")
def _cmpi(op, cx: CompileContext) -> Step:
    predicate = arith.CmpIPredicate(op.predicate.value).name
    compare, e = CMPI[predicate], elem_of(op.lhs.type)
    if predicate in ("eq", "ne"):
        return pure(op, cx, compare)
    view = as_unsigned if predicate.startswith("u") else as_signed
    return pure(op, cx, lambda a, b: compare(view(e, a), view(e, b)))
