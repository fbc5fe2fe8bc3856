"""The rule for `tile.reduce`: every kind, with cuTile's float options.

- sum/prod: integers wrap in their own width; 16-bit floats accumulate in f32
  and round once.  With `tile.rounding` (rz, rm, rp) or `tile.ftz` every combining
  step is the arith op with that option (directed.py rounds each step exactly, in
  the element type; ftz flushes the step's f32 operands and result): the steps
  pair neighbours, log2(n) rounds of them, an order of combination as
  implementation-defined as the GPU's.
- max/min propagate NaN (NumPy's max/min), argmax/argmin give the first
  occurrence of the extreme, a NaN counting as the extreme (NumPy's too).
- maxnum/minnum ignore NaN elements (an all-NaN slice gives NaN), ordering -0
  below +0 as `arith.maxnumf` does here (arith_float.maxnum); argmaxnum/argminnum
  give the first index whose value equals that extreme (a zero of either sign
  ties with the other), 0 for an all-NaN slice.
- Integer max/min are signed.
"""

from __future__ import annotations

import numpy as np

from tileir.dialect.tile import FTZ_ATTR, float_options_of

from . import directed
from .compiler import CompileContext, Step, pure, rule
from .dtypes import F32, Elem, elem_of
from .errors import Fault

_F32_TINY = np.finfo(np.float32).tiny


def _accumulating(e: Elem, reduce_fn):
    """sum/prod: ints wrap in their own width; 16-bit floats accumulate in f32."""
    if e.is_int:
        return lambda x, axis: reduce_fn(x, axis=axis, dtype=e.storage)
    acc = F32 if e.bits == 16 else e.storage
    return lambda x, axis: np.asarray(reduce_fn(x.astype(acc), axis=axis, dtype=acc)
                                      ).astype(e.storage)


def _ordering(e: Elem, reduce_fn):
    """max/min: exact in any dtype; bf16 goes through f32, where NumPy can order it."""
    if e.compute == e.storage:
        return lambda x, axis: reduce_fn(x, axis=axis)
    return lambda x, axis: np.asarray(reduce_fn(x.astype(e.compute), axis=axis)).astype(
        e.storage)


def _extreme_number(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """max (`largest`) or min of the non-NaN elements along `axis` (NaN when there
    are none), -0 below +0."""
    with np.errstate(invalid="ignore"):
        r = (np.fmax if largest else np.fmin).reduce(x, axis=axis)
    zero = np.asarray(r == 0)
    if zero.any():                       # the sign of a zero result: any +0 wins a max
        wanted = (x == 0) & (np.signbit(x) != largest)
        signed = np.where(np.any(wanted, axis=axis), 0.0 if largest else -0.0,
                          -0.0 if largest else 0.0)
        r = np.where(zero, signed.astype(x.dtype), r)
    return np.asarray(r)


def _ignoring_nan(kind: str, e: Elem):
    """maxnum/minnum/argmaxnum/argminnum (see the module docstring)."""
    largest = kind in ("maxnum", "argmaxnum")

    def extreme(x, axis):
        return _extreme_number(x.astype(e.compute), axis, largest)

    if kind in ("maxnum", "minnum"):
        return lambda x, axis: extreme(x, axis).astype(e.storage)

    def arg(x, axis):
        m = np.expand_dims(extreme(x, axis), axis)
        # the first element equal to the extreme; none (all NaN): argmax of all-False is 0
        return np.argmax(x.astype(e.compute) == m, axis=axis).astype(np.int32)
    return arg


def _flush(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < _F32_TINY, np.copysign(np.zeros_like(x), x), x)


def _stepwise(kind: str, e: Elem, mode: str | None, ftz: bool):
    """sum/prod whose every step is the arith op with the float options: neighbours
    combined pairwise, log2(n) times (an odd element left over joins the next round)."""
    name = "add" if kind == "sum" else "mul"
    ufunc = np.add if kind == "sum" else np.multiply

    def combine(a, b):
        if ftz:
            a, b = _flush(a), _flush(b)
        if mode is not None:
            r = directed.binary(name, mode, a, b, e.storage)
        else:
            with np.errstate(all="ignore"):
                r = ufunc(a.astype(e.compute), b.astype(e.compute)).astype(e.storage)
        return _flush(r) if ftz else r

    def fn(x, axis):
        x = np.moveaxis(np.asarray(x, e.storage), axis, -1)
        if ftz and x.shape[-1] == 1:
            x = _flush(x)
        while x.shape[-1] > 1:
            odd = x[..., -1:] if x.shape[-1] % 2 else None
            pairs = x[..., :x.shape[-1] - (odd is not None)]
            x = combine(pairs[..., 0::2], pairs[..., 1::2])
            if odd is not None:
                x = np.concatenate([x, odd], axis=-1)
        return x[..., 0]
    return fn


def reduction(kind: str, e: Elem, options: dict[str, str] | None = None):
    """The NumPy function `f(x, axis)` for `tile.reduce` of `kind` over `e` values with
    the float `options` (`tile.rounding`, `tile.ftz`) the op carries."""
    options = options or {}
    mode = directed.rounding_of_options(options)
    ftz = FTZ_ATTR in options
    if kind in ("sum", "prod"):
        if mode is not None or ftz:
            return _stepwise(kind, e, mode, ftz)
        return _accumulating(e, np.sum if kind == "sum" else np.prod)
    if kind in ("max", "min"):
        fn = _ordering(e, np.max if kind == "max" else np.min)
    elif kind in ("maxnum", "minnum", "argmaxnum", "argminnum"):
        fn = _ignoring_nan(kind, e)
    elif kind in ("argmax", "argmin"):
        arg = np.argmax if kind == "argmax" else np.argmin
        compute = e.compute if e.is_float else e.storage
        fn = lambda x, axis: arg(x.astype(compute), axis=axis).astype(np.int32)  # noqa: E731
    else:
        raise Fault(f"unknown reduction kind '{kind}'")
    if ftz:                          # max/min of flushed operands: the result is one of them
        return lambda x, axis: fn(_flush(x), axis)
    return fn


@rule("tile.reduce")
def _reduce(op, cx: CompileContext) -> Step:
    fn = reduction(op.kind, elem_of(op.source.type), float_options_of(op.operation))
    axis = op.axis
    return pure(op, cx, lambda x: fn(x, axis))
