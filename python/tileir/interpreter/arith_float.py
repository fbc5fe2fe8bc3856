"""Rules for floating-point `arith` ops (on scalars and on tiles alike).

Each op is its NumPy ufunc, run in the element type's compute dtype and
rounded back (`dtypes.in_compute`: only bf16 needs that), so f16 and bf16
results are rounded after every op, as docs/tile-ir.md requires.
"""

from __future__ import annotations

import numpy as np
from mlir.dialects import arith

from . import directed
from .compiler import CompileContext, Step, pure, rule
from .dtypes import elem_of, in_compute


def maximum(a, b):
    """IEEE 754-2019 maximum: NaN propagates and -0 < +0 (np.maximum ignores the sign of 0)."""
    return np.where(a == b, np.where(np.signbit(a), b, a), np.maximum(a, b))


def minimum(a, b):
    """IEEE 754-2019 minimum: NaN propagates and -0 < +0."""
    return np.where(a == b, np.where(np.signbit(a), a, b), np.minimum(a, b))


def maxnum(a, b):
    """IEEE maxNum: a NaN operand is ignored; zeros ordered as in `maximum`."""
    return np.where(a == b, np.where(np.signbit(a), b, a), np.fmax(a, b))


def minnum(a, b):
    """IEEE minNum: a NaN operand is ignored; zeros ordered as in `minimum`."""
    return np.where(a == b, np.where(np.signbit(a), a, b), np.fmin(a, b))


ELEMENTWISE = {
    "arith.addf": np.add,
    "arith.subf": np.subtract,
    "arith.mulf": np.multiply,
    "arith.divf": np.divide,
    "arith.remf": np.fmod,  # C fmod: the result has the sign of the dividend
    "arith.negf": np.negative,
    "arith.maximumf": maximum,
    "arith.minimumf": minimum,
    "arith.maxnumf": maxnum,
    "arith.minnumf": minnum,
}


@rule(*ELEMENTWISE)
def _elementwise(op, cx: CompileContext) -> Step:
    e = elem_of(op.result.type)
    mode = directed.rounding_of(op)
    if mode is not None:                    # cuTile's RZ / RM / RP (directed.py)
        return pure(op, cx, flushing(op, directed.rounded(op.operation.name, mode, e.storage)))
    fn = in_compute(e, ELEMENTWISE[op.operation.name])
    return pure(op, cx, flushing(op, fn))


_F32_TINY = np.finfo(np.float32).tiny


def flushing(op, fn):
    """`fn` with f32 subnormal operands and results flushed to (signed) zero when the
    op carries `tile.ftz` (cuTile's flush_to_zero)."""
    if "tile.ftz" not in op.operation.attributes:
        return fn

    def flush(x):
        x = np.asarray(x)
        return np.where(np.abs(x) < _F32_TINY, np.copysign(np.zeros_like(x), x), x)[()]

    return lambda *args: flush(fn(*(flush(a) for a in args)))


def _unordered(a, b):
    return np.isnan(a) | np.isnan(b)


# Keyed by the names of `arith.CmpFPredicate`.  NumPy comparisons are the
# ordered ones (false on NaN) except `!=`, which is unordered (true on NaN).
CMPF = {
    "AlwaysFalse": lambda a, b: np.zeros(np.broadcast(a, b).shape, dtype=np.bool_),
    "OEQ": np.equal,
    "OGT": np.greater,
    "OGE": np.greater_equal,
    "OLT": np.less,
    "OLE": np.less_equal,
    "ONE": lambda a, b: np.less(a, b) | np.greater(a, b),
    "ORD": lambda a, b: ~_unordered(a, b),
    "UEQ": lambda a, b: np.equal(a, b) | _unordered(a, b),
    "UGT": lambda a, b: ~np.less_equal(a, b),
    "UGE": lambda a, b: ~np.less(a, b),
    "ULT": lambda a, b: ~np.greater_equal(a, b),
    "ULE": lambda a, b: ~np.greater(a, b),
    "UNE": np.not_equal,
    "UNO": _unordered,
    "AlwaysTrue": lambda a, b: np.ones(np.broadcast(a, b).shape, dtype=np.bool_),
}


@rule("arith.cmpf")
def _cmpf(op, cx: CompileContext) -> Step:
    predicate = arith.CmpFPredicate(op.predicate.value).name
    compare = CMPF[predicate]
    compute = elem_of(op.lhs.type).compute  # bf16 compares exactly in f32
    if compute == elem_of(op.lhs.type).storage:
        return pure(op, cx, compare)
    return pure(op, cx, lambda a, b: compare(a.astype(compute), b.astype(compute)))
