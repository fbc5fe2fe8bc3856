"""Trace-time rules of the functional operator forms (`add`, `less`, `bitwise_and`,
...) and of the math functions and float options cuTile adds to the operators.

They are the operators of `compute` under cuTile's names, plus what an operator
cannot say: a rounding mode (`tileir.RoundingMode`) and `flush_to_zero`, which
become the attributes `tile.rounding` / `tile.ftz` on the float op.  The GPU
rules and the interpreter read them (docs/frontend.md, "Float options").
The directed roundings RZ, RM and RP of add/sub/mul/truediv/sqrt round the exact
result once (interpreter/directed.py is the oracle; PTX `add.rz` and the like on
the GPU); RA, which cuTile takes on no arithmetic op, is refused as cuTile refuses it.
"""

from __future__ import annotations

import math as pymath

from mlir import ir
from mlir.dialects import arith, math

from .. import dtypes as dt
from ..semantics import RoundingMode
from . import compute
from .emit import cast, is_number, type_error, unify, weak_dtype, wrap
from .intrinsics import RULES, rule, tile_arg
from .values import TileValue, describe

RN, FULL, APPROX = RoundingMode.RN, RoundingMode.FULL, RoundingMode.APPROX
_IEEE = (RN, RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP)
# The modes each op accepts (cuTile's table).
MODES = {"add": _IEEE, "sub": _IEEE, "mul": _IEEE, "truediv": _IEEE + (FULL, APPROX),
         "sqrt": _IEEE + (APPROX,), "tanh": (FULL, APPROX), "exp": (FULL, APPROX)}
FTZ_OPS = ("add", "sub", "mul", "truediv", "maximum", "minimum", "exp2", "sqrt", "rsqrt")


def float_options(name: str, d: dt.DType, rounding_mode, flush_to_zero,
                  what: str | None = None) -> dict[str, str]:
    """The `tile.rounding` / `tile.ftz` attributes for op `name` on dtype `d`, after
    cuTile's checks: which modes an op takes, FULL/APPROX and ftz only on float32.
    `what`: the function the messages name (a reduction of op `name`), `name` if None."""
    attrs: dict[str, str] = {}
    shown = what or name
    if rounding_mode is not None:
        if not isinstance(rounding_mode, RoundingMode):
            raise type_error(f"rounding_mode must be a tileir.RoundingMode, got "
                             f"{describe(rounding_mode)}")
        if rounding_mode not in MODES.get(name, ()):
            raise type_error(f"Rounding mode {rounding_mode.name} is not supported for {shown}")
        if not d.is_float or d.bits < 16:
            raise type_error(f"rounding_mode applies to float16/bfloat16/float32/float64 "
                             f"operands, {shown} got {d.name}")
        if rounding_mode in (FULL, APPROX) and d != dt.float32:
            raise type_error(f"rounding mode {rounding_mode.name} needs float32 operands, "
                             f"{shown} got {d.name}")
        attrs["tile.rounding"] = rounding_mode.name.lower()
    if flush_to_zero:
        if not isinstance(flush_to_zero, bool):
            raise type_error(f"flush_to_zero must be a compile-time bool, got "
                             f"{describe(flush_to_zero)}")
        if name not in FTZ_OPS:
            raise type_error(f"flush_to_zero is not supported for {shown}")
        if d != dt.float32:
            raise type_error(f"flush_to_zero needs float32 operands, {shown} got {d.name}")
        attrs["tile.ftz"] = "true"
    return attrs


def mark(v, attrs: dict[str, str]):
    """Puts the float-option attributes on the op that defined `v`."""
    if attrs and isinstance(v, TileValue):
        op = v.value.owner
        for k, val in attrs.items():
            op.attributes[k] = ir.StringAttr.get(val)
    return v


def _result_dtype(name: str, x, y) -> dt.DType:
    """The dtype `x op y` computes in (what `unify` picks), without emitting anything."""
    if isinstance(x, TileValue) and isinstance(y, TileValue):
        d = dt.promote(x.dtype, y.dtype)
    else:
        t, n = (x, y) if isinstance(x, TileValue) else (y, x)
        d = dt.promote(t.dtype, weak_dtype(n, t.dtype))
    return dt.float32 if name == "truediv" and not d.is_float else d


_OPERATOR = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}


def _arith(name: str):
    def fn(x, y, rounding_mode, flush_to_zero):
        if is_number(x) and is_number(y):
            return compute.binary(_OPERATOR[name], x, y)
        attrs = float_options(name, _result_dtype(name, x, y), rounding_mode, flush_to_zero)
        return mark(compute.binary(_OPERATOR[name], x, y), attrs)
    return fn


for _name in _OPERATOR:
    RULES[_name] = _arith(_name)

_BINARY = {"floordiv": "//", "mod": "%", "equal": "==", "not_equal": "!=", "less": "<",
           "less_equal": "<=", "greater": ">", "greater_equal": ">=", "bitwise_lshift": "<<",
           "bitwise_rshift": ">>"}


def _binary(name: str):
    def fn(x, y):
        if name.startswith("bitwise_"):
            _require_ints(name, x, y)
        return compute.binary(_BINARY[name], x, y)
    return fn


for _name in _BINARY:
    RULES[_name] = _binary(_name)


def _require_ints(name: str, *xs, bools: bool = False) -> None:
    for x in xs:
        d = x.dtype if isinstance(x, TileValue) else \
            dt.bool_ if isinstance(x, bool) else dt.float32 if isinstance(x, float) else dt.int32
        if not (d.is_int or (bools and d.is_bool)):
            raise type_error(f"{name} needs integer{' or boolean' if bools else ''} operands, "
                             f"got {describe(x)}")


def _logical(name: str, op: str):
    def fn(x, y):
        _require_ints(name, x, y, bools=True)
        if isinstance(x, TileValue) and isinstance(y, TileValue) and \
                x.dtype.is_bool != y.dtype.is_bool:
            raise type_error(f"{name} does not mix booleans with integers ({describe(x)}, "
                             f"{describe(y)}); convert with astype first")
        return compute.binary(op, x, y)
    return fn


for _name, _op in (("bitwise_and", "&"), ("bitwise_or", "|"), ("bitwise_xor", "^")):
    RULES[_name] = _logical(_name, _op)


@rule("bitwise_not")
def _bitwise_not(x):
    _require_ints("bitwise_not", x, bools=True)
    return compute.invert(x)


@rule("divmod")
def _divmod(x, y):
    for v in (x, y):
        if isinstance(v, TileValue) and v.dtype.is_float:
            raise type_error("divmod() is not implemented for floating point values; use "
                             "floordiv and mod")
        if isinstance(v, TileValue) and v.dtype.is_bool or isinstance(v, bool):
            raise type_error("divmod() does not apply to booleans")
    if is_number(x) and is_number(y):
        return divmod(x, y)
    return compute.binary("//", x, y), compute.binary("%", x, y)


@rule("negative")
def _negative(x):
    if isinstance(x, TileValue) and x.dtype.is_bool:
        x = cast(x, dt.int32)
    return compute.negate(x)


@rule("isnan")
def _isnan(x):
    if is_number(x):
        return isinstance(x, float) and pymath.isnan(x)
    t = tile_arg(x, "x")
    if not t.dtype.is_float:
        raise type_error(f"isnan needs a float tile, got {t.describe()}")
    return wrap(arith.CmpFOp(arith.CmpFPredicate.UNO, t.value, t.value).result, dt.bool_)


_PY_UNARY = {"sinh": pymath.sinh, "cosh": pymath.cosh}


def _unary(name: str, opclass):
    def fn(x):
        if is_number(x):
            return _PY_UNARY[name](x)
        t = tile_arg(x, "x")
        if not t.dtype.is_float:
            t = cast(t, dt.float32)
        return wrap(opclass(t.value).result, t.dtype)
    return fn


RULES["sinh"] = _unary("sinh", math.SinhOp)
RULES["cosh"] = _unary("cosh", math.CoshOp)


@rule("atan2")
def _atan2(x1, x2):
    if is_number(x1) and is_number(x2):
        return pymath.atan2(x1, x2)
    a, b = unify(x1, x2)
    if not a.dtype.is_float:
        a, b = cast(a, dt.float32), cast(b, dt.float32)
    return wrap(math.Atan2Op(a.value, b.value).result, a.dtype)


# ---------------------------------------------------------------------------
# Options cuTile adds to existing functions
# ---------------------------------------------------------------------------
def _math_with_options(name: str, takes_rounding: bool):
    base = RULES[name]

    def fn(x, rounding_mode=None, flush_to_zero=False):
        if is_number(x):
            return base(x)
        t = tile_arg(x, "x")
        d = t.dtype if t.dtype.is_float else dt.float32
        attrs = float_options(name, d, rounding_mode if takes_rounding else None,
                              flush_to_zero)
        return mark(base(t), attrs)
    return fn


for _name, _rounds in (("exp", True), ("exp2", False), ("sqrt", True), ("rsqrt", False),
                       ("tanh", True)):
    RULES[_name] = _math_with_options(_name, _rounds)


def _extremum(name: str):
    def fn(x, y, flush_to_zero=False, propagate_nan=False):
        if not isinstance(propagate_nan, bool):
            raise type_error(f"propagate_nan must be a compile-time bool, got "
                             f"{describe(propagate_nan)}")
        if is_number(x) and is_number(y):
            return compute.binary(name[:3], x, y)
        a, b = unify(x, y)
        attrs = float_options(name, a.dtype, None, flush_to_zero)
        if not a.dtype.is_float or not propagate_nan:
            return mark(compute.binary(name[:3], a, b), attrs)      # maxnumf for floats
        opclass = arith.MaximumFOp if name == "maximum" else arith.MinimumFOp
        return mark(wrap(opclass(a.value, b.value).result, a.dtype), attrs)
    return fn


RULES["maximum"] = _extremum("maximum")
RULES["minimum"] = _extremum("minimum")
del _name
