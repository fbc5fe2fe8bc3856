"""Rules for `arith` conversions and `arith.select`.

Float -> int conversions truncate toward zero (docs/tile-ir.md).  Where MLIR
leaves them undefined (NaN, out of range) the interpreter saturates like the
GPU's `cvt.rzi`: NaN -> 0, too large -> the max, too small -> the min.
Float -> float narrowing rounds to nearest even in a single rounding (or by its
directed `roundingmode`, exactly: directed.py); to fp8 it saturates as the GPU's
`cvt.rn.satfinite` does (beyond the largest finite value, infinities included:
that value with the sign; NaN stays NaN).
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith

from . import directed
from .compiler import CompileContext, Step, pure, rule
from .dtypes import F64, FP8, Elem, as_signed, as_unsigned, elem_of, f64_to, from_int, to_fp8
from .errors import Fault


def _io(op) -> tuple[Elem, Elem]:
    return elem_of(op.operands[0].type), elem_of(op.result.type)


def resize_int(value, dst: Elem):
    """An integer (in a wide signed or unsigned dtype) wrapped to `dst`."""
    if dst.is_bool:
        return from_int(dst, value)
    return value.astype(dst.storage)


# ---------------------------------------------------------------------------
# Integer <-> integer
# ---------------------------------------------------------------------------
@rule("arith.extsi", "arith.trunci", "arith.index_cast")
def _int_signed_resize(op, cx: CompileContext) -> Step:
    src, dst = _io(op)
    return pure(op, cx, lambda x: resize_int(as_signed(src, x), dst))


@rule("arith.extui", "arith.index_castui")
def _int_unsigned_resize(op, cx: CompileContext) -> Step:
    src, dst = _io(op)
    if dst.is_bool:
        return pure(op, cx, lambda x: resize_int(as_unsigned(src, x), dst))
    # Zero-extend in the unsigned domain, then view the bits as signless.
    return pure(op, cx, lambda x: as_unsigned(src, x).astype(dst.unsigned).view(dst.storage))


# ---------------------------------------------------------------------------
# Float <-> float
# ---------------------------------------------------------------------------
@rule("arith.extf")
def _extf(op, cx: CompileContext) -> Step:
    _, dst = _io(op)
    return pure(op, cx, lambda x: x.astype(dst.storage))  # exact


# arith's directed rounding modes (cuTile's astype RZ, RM, RP), as directed.py names them
_DIRECTED = {arith.RoundingMode.toward_zero: "rz", arith.RoundingMode.downward: "rm",
             arith.RoundingMode.upward: "rp"}


@rule("arith.truncf")
def _truncf(op, cx: CompileContext) -> Step:
    src, dst = _io(op)
    mode = op.attributes["roundingmode"] if "roundingmode" in op.attributes else None
    mode = None if mode is None else arith.RoundingMode(ir.IntegerAttr(mode).value)
    if mode in _DIRECTED and dst.storage not in FP8:
        # one directed rounding of the exact value (every float is exact in float64)
        return pure(op, cx, lambda x: directed.convert(_DIRECTED[mode], x, dst.storage)[()])
    if mode not in (None, arith.RoundingMode.to_nearest_even):
        raise Fault(f"rounding mode {mode.name} of a conversion to {dst.name} is not "
                    f"supported; the interpreter rounds to nearest even, and toward zero, "
                    f"-inf or +inf into f16, bf16, f32 and f64")
    if src.name == "f64":
        return pure(op, cx, lambda x: f64_to(dst, x))  # NumPy would round f64 -> bf16 twice
    if dst.storage in FP8:
        return pure(op, cx, lambda x: to_fp8(x, dst.storage))
    return pure(op, cx, lambda x: x.astype(dst.storage))


# ---------------------------------------------------------------------------
# Int <-> float
# ---------------------------------------------------------------------------
def _int_to_float(dst: Elem, view):
    if dst.compute != dst.storage:
        # To bf16 through f64 (exact up to 2**53), then one correct rounding;
        # ml_dtypes would go through f32 and round twice.
        return lambda x: f64_to(dst, view(x).astype(F64))
    return lambda x: view(x).astype(dst.storage)


@rule("arith.sitofp")
def _sitofp(op, cx: CompileContext) -> Step:
    src, dst = _io(op)
    return pure(op, cx, _int_to_float(dst, lambda x: as_signed(src, x)))


@rule("arith.uitofp")
def _uitofp(op, cx: CompileContext) -> Step:
    src, dst = _io(op)
    return pure(op, cx, _int_to_float(dst, lambda x: as_unsigned(src, x)))


def float_to_int(dst: Elem, signed: bool):
    """Truncation toward zero, saturating, NaN -> 0 (see the module docstring)."""
    lo, hi = dst.int_range if signed else (0, dst.uint_max)
    target = dst.signed if signed else dst.unsigned

    def fn(x):
        t = np.trunc(x.astype(F64))  # every f16/bf16/f32 value is exact in f64
        # float(hi) may round up (2**63 - 1 -> 2**63), which is still the right threshold.
        low, high = t <= lo, t >= hi
        safe = np.where(np.isnan(t) | low | high, 0, t).astype(target)
        return from_int(dst, np.where(high, hi, np.where(low, lo, safe)).astype(target))
    return fn


@rule("arith.fptosi", "arith.fptoui")
def _fptoint(op, cx: CompileContext) -> Step:
    _, dst = _io(op)
    return pure(op, cx, float_to_int(dst, signed=op.operation.name == "arith.fptosi"))


# ---------------------------------------------------------------------------
# Bits and selection
# ---------------------------------------------------------------------------
@rule("arith.bitcast")
def _bitcast(op, cx: CompileContext) -> Step:
    _, dst = _io(op)
    return pure(op, cx, lambda x: x.view(dst.storage))


@rule("arith.select")
def _select(op, cx: CompileContext) -> Step:
    if isinstance(op.operands[0].type, ir.ShapedType):
        return pure(op, cx, np.where)
    # A scalar condition picks a whole operand: no need to touch elements.
    return pure(op, cx, lambda c, a, b: a if c else b)
