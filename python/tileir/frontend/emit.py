"""Typed IR construction for the frontend: constants, casts, broadcasting, arithmetic.

Every function builds at the current insertion point and `ir.Location`, which
the AST compiler sets to the user's file:line:col.  Errors raise the
`tileir.errors` classes at that location.

Typing rules (documented in docs/frontend.md):
* Python numbers are *weak*: `tile_f16 + 1.5` stays f16; an int tile meeting a
  Python float becomes f32.
* Runtime values meet by `dtypes.promote` (NumPy-like; f16 and bf16 meet at f32).
* Tiles broadcast NumPy-style; scalars splat.
"""

from __future__ import annotations

import math as pymath

from mlir import ir
from mlir.dialects import arith, math, tensor

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import TileTypeError, TileUnsupportedFeatureError, TileValueError
from tileir.dialect import tile
from .values import TileValue, describe


def loc() -> ir.Location:
    return ir.Location.current


def type_error(msg: str) -> TileTypeError:
    return TileTypeError(msg, loc())


def value_error(msg: str) -> TileValueError:
    return TileValueError(msg, loc())


def mlir_type(d: DType) -> ir.Type:
    return ir.Type.parse(d.mlir)


def tensor_type(shape, d: DType) -> ir.Type:
    return ir.RankedTensorType.get(list(shape), mlir_type(d)) if shape else mlir_type(d)


def wrap(value: ir.Value, d: DType) -> TileValue:
    t = value.type
    shape = tuple(t.shape) if isinstance(t, ir.RankedTensorType) else ()
    return TileValue(value, d, shape)


# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------
def _int_range(d: DType) -> tuple[int, int]:
    if d.is_bool:
        return 0, 1
    if d.is_signed:
        return -(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1
    return 0, (1 << d.bits) - 1


def scalar_attr(x, d: DType) -> ir.Attribute:
    t = mlir_type(d)
    if d.is_float:
        return ir.FloatAttr.get(t, float(x))
    if isinstance(x, float):
        if not pymath.isfinite(x) or x != int(x):
            raise type_error(f"cannot represent {x!r} as {d.name}")
        x = int(x)
    lo, hi = _int_range(d)
    if not lo <= int(x) <= hi:
        raise value_error(f"constant {x} is out of range for {d.name} ({lo}..{hi})")
    x = int(x)
    if d.bits > 1 and x >= 1 << (d.bits - 1):   # unsigned: store the two's-complement bits
        x -= 1 << d.bits
    return ir.IntegerAttr.get(t, x)


def constant(x, d: DType, shape=()) -> TileValue:
    attr = scalar_attr(x, d)
    if shape:
        attr = ir.DenseElementsAttr.get_splat(tensor_type(shape, d), attr)
    return wrap(arith.ConstantOp(tensor_type(shape, d), attr).result, d)


def python_dtype(x) -> DType:
    if isinstance(x, bool):
        return dt.bool_
    if isinstance(x, int):
        return dt.int32 if -(1 << 31) <= x < (1 << 31) else dt.int64
    if isinstance(x, float):
        return dt.float32
    raise type_error(f"expected a number, got {describe(x)}")


def is_number(x) -> bool:
    return isinstance(x, (bool, int, float))


def is_compile_time(x) -> bool:
    """A number, a string, None or a tuple of them."""
    if isinstance(x, tuple):
        return all(map(is_compile_time, x))
    return is_number(x) or isinstance(x, str) or x is None


def is_hashable(x) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def as_value(x, like: DType | None = None) -> TileValue:
    """A runtime value from a TileValue or a Python number (weakly typed towards `like`)."""
    if isinstance(x, TileValue):
        return x
    if is_number(x):
        return constant(x, weak_dtype(x, like))
    raise type_error(f"expected a tile or a number, got {describe(x)}")


def weak_dtype(x, like: DType | None) -> DType:
    """The dtype a Python number takes next to a runtime value of dtype `like`."""
    if like is None:
        return python_dtype(x)
    if isinstance(x, bool):
        return like
    if isinstance(x, int):
        return like if not like.is_bool else dt.int32
    # a float meets a float dtype as that dtype, an int/bool dtype as f32
    return like if like.is_float else dt.float32


# ---------------------------------------------------------------------------
# Casts and shapes
# ---------------------------------------------------------------------------
def check_arithmetic(d: DType) -> None:
    """Restricted floats (tfloat32, fp4, e8m0) are storage and mma operands only."""
    if d.restricted:
        raise type_error(f"{d.name} is a restricted float: it can be loaded, stored, cast "
                         f"(astype/bitcast) and fed to mma, not computed with; astype it to "
                         f"float32 first")


def cast(v: TileValue, to: DType) -> TileValue:
    src = v.dtype
    if src == to:
        return v
    if to == dt.float8_e5m3fnu or src == dt.float8_e5m3fnu:
        raise TileUnsupportedFeatureError("float8_e5m3fnu has no MLIR type in this build: "
                                          "tileir cannot convert to or from it", loc())
    if to == dt.tfloat32:                         # f32 rounded to 10 mantissa bits
        return _round_to_tf32(cast(v, dt.float32))
    if src == dt.tfloat32:                        # a tf32 is an f32: exact
        return cast(TileValue(v.value, dt.float32, v.shape), to)
    if src.mlir == to.mlir:                       # int32 <-> uint32: only the view changes
        return TileValue(v.value, to, v.shape)
    out_t = tensor_type(v.shape, to)
    x = v.value
    if to.is_bool:
        zero = constant(0, src, v.shape).value
        if src.is_float:
            r = arith.CmpFOp(arith.CmpFPredicate.UNE, x, zero).result
        else:
            r = arith.CmpIOp(arith.CmpIPredicate.ne, x, zero).result
        return wrap(r, to)
    if src.is_float and to.is_float:
        if to.bits == src.bits:   # f16 <-> bf16, e4m3 <-> e5m2: through f32 (exact there)
            return cast(cast(v, dt.float32), to)
        r = arith.ExtFOp(out_t, x) if to.bits > src.bits else arith.TruncFOp(out_t, x)
        return wrap(r.result, to)
    if to.is_float:
        op = arith.SIToFPOp if src.is_signed else arith.UIToFPOp
        return wrap(op(out_t, x).result, to)
    if src.is_float:
        op = arith.FPToSIOp if to.is_signed else arith.FPToUIOp
        return wrap(op(out_t, x).result, to)
    if to.bits > src.bits:
        op = arith.ExtSIOp if src.is_signed else arith.ExtUIOp
        return wrap(op(out_t, x).result, to)
    return wrap(arith.TruncIOp(out_t, x).result, to)


def _round_to_tf32(v: TileValue) -> TileValue:
    """Rounds f32 to TensorFloat-32 (10 mantissa bits), to nearest even, by bits:
    what cvt.rn.tf32.f32 does (NaN and infinity keep their class)."""
    i32 = dt.int32
    bits = wrap(arith.BitcastOp(tensor_type(v.shape, i32), v.value).result, i32)
    c = lambda x: constant(x, i32, v.shape).value          # noqa: E731
    lsb = arith.AndIOp(arith.ShRUIOp(bits.value, c(13)).result, c(1)).result
    rounded = arith.AddIOp(bits.value, arith.AddIOp(c(0xFFF), lsb).result).result
    kept = arith.AndIOp(rounded, c(-(1 << 13))).result
    finite = arith.CmpFOp(arith.CmpFPredicate.ORD, v.value, v.value).result
    inf = arith.CmpFOp(arith.CmpFPredicate.OEQ, math.AbsFOp(v.value).result,
                       constant(float("inf"), dt.float32, v.shape).value).result
    special = arith.OrIOp(arith.XOrIOp(finite, constant(True, dt.bool_, v.shape).value)
                          .result, inf).result
    out = arith.SelectOp(special, bits.value, kept).result
    return wrap(arith.BitcastOp(tensor_type(v.shape, dt.tfloat32), out).result, dt.tfloat32)


def splat(v: TileValue, shape) -> TileValue:
    if not shape:
        return v
    return wrap(tensor.SplatOp(tensor_type(shape, v.dtype), v.value, []).result, v.dtype)


def reshape(v: TileValue, shape) -> TileValue:
    shape = tuple(shape)
    if shape == v.shape:
        return v
    if v.is_scalar:
        return splat(v, shape)
    if not shape:
        return extract_scalar(_reshape_to_0d(v))
    return wrap(tile.ReshapeOp(v.value, tensor_type(shape, v.dtype)).result, v.dtype)


def _reshape_to_0d(v: TileValue) -> TileValue:
    return wrap(tile.ReshapeOp(v.value, ir.RankedTensorType.get([], mlir_type(v.dtype))).result,
                v.dtype)


def extract_scalar(v: TileValue) -> TileValue:
    """A rank-0 tensor value as a scalar."""
    return TileValue(tensor.ExtractOp(v.value, []).result, v.dtype, ())


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != y and x != 1 and y != 1:
            raise type_error(f"shapes {a} and {b} do not broadcast: dim {-1 - i} has sizes "
                             f"{x} and {y}")
        out.append(max(x, y))
    return tuple(reversed(out))


def broadcast_to(v: TileValue, shape) -> TileValue:
    shape = tuple(shape)
    if v.shape == shape:
        return v
    if v.is_scalar:
        return splat(v, shape)
    if len(v.shape) > len(shape) or broadcast_shapes(v.shape, shape) != shape:
        raise type_error(f"cannot broadcast {v.describe()} to shape {shape}")
    if len(v.shape) < len(shape):
        v = reshape(v, (1,) * (len(shape) - len(v.shape)) + v.shape)
    if v.shape == shape:
        return v
    return wrap(tile.BroadcastOp(v.value, tensor_type(shape, v.dtype)).result, v.dtype)


def unify(a, b, *, want: DType | None = None) -> tuple[TileValue, TileValue]:
    """Two operands converted to one dtype and one shape."""
    if not isinstance(a, TileValue) and not isinstance(b, TileValue):
        d = want or dt.promote(python_dtype(a), python_dtype(b))
        return constant(a, d), constant(b, d)
    if not isinstance(a, TileValue):
        a = as_value(a, b.dtype)
    if not isinstance(b, TileValue):
        b = as_value(b, a.dtype)
    d = want or dt.promote(a.dtype, b.dtype)
    check_arithmetic(d)
    a, b = cast(a, d), cast(b, d)
    shape = broadcast_shapes(a.shape, b.shape)
    return broadcast_to(a, shape), broadcast_to(b, shape)
