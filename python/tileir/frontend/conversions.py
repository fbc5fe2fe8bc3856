"""Trace-time rule of `astype` with cuTile's `rounding_mode` (function and tile method).

Which float-to-float conversions take which rounding mode is cuTile 1.7's table
(`_FTOF_ROUNDING_ROWS`): RN to every type but e8m0; RZ to f64, f32, tf32, f16, bf16
(and e8m0); RM and RP to f64, to f32 (but from e8m0), to f16 from the 16- and
fewer-bit types; RA to f64, to f32 and tf32 (but from f64 and e8m0), to f16 as RM.
A pair outside it is a TileTypeError with cuTile's message.

What a directed mode (RZ toward zero, RM toward -inf, RP toward +inf) does:
- a conversion that cannot round (to a type holding every value of the source:
  f64, f32 from 16-bit and 8-bit types, tf32 from 16-bit types, f16 from fp8) is the
  plain one (bf16 from fp8 too);
- one that rounds is one `arith.truncf` with that `roundingmode`, from f32 or f64
  (a 16-bit source widened to f32 first, exactly): the interpreter rounds it exactly
  (interpreter/directed.py), the GPU with `cvt.rz.f32.f64` and kin (f16 and bf16
  targets through f32 in the same direction, which rounds once: the 16-bit numbers
  are f32 numbers, so the nearest one below a value is the nearest one below its
  f32 rounding down; likewise up and toward zero);
- to tf32 toward zero the low 13 bits of the f32 go (NaN stays NaN).
RA (ties away from zero) is taken where the conversion cannot round; where it
rounds it is refused by name.
"""

from __future__ import annotations

from mlir.dialects import arith

from .. import dtypes as dt
from ..errors import TileUnsupportedFeatureError
from ..semantics import RoundingMode
from .emit import as_value, cast, constant, loc, tensor_type, type_error, wrap
from .intrinsics import dtype_arg, rule
from .values import TileValue, describe

RN, RZ, RM, RP, RA = (RoundingMode.RN, RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP,
                      RoundingMode.RA)
_NARROW = (dt.float64, dt.float32, dt.tfloat32, dt.float8_e8m0fnu, dt.float8_e5m3fnu)
_ARITH_MODE = {RZ: arith.RoundingMode.toward_zero, RM: arith.RoundingMode.downward,
               RP: arith.RoundingMode.upward}


def rounding_modes(src: dt.DType, dst: dt.DType) -> tuple[RoundingMode, ...]:
    """The modes cuTile takes for a float conversion from `src` to `dst`."""
    modes = []
    if dst != dt.float8_e8m0fnu:
        modes.append(RN)
    if dst in (dt.float64, dt.float32, dt.tfloat32, dt.float16, dt.bfloat16,
               dt.float8_e8m0fnu):
        modes.append(RZ)
    if dst == dt.float64 or (dst == dt.float32 and src != dt.float8_e8m0fnu) or \
            (dst == dt.float16 and src not in _NARROW):
        modes += [RM, RP]
    elif dst == dt.float8_e8m0fnu:
        modes.append(RP)
    if dst == dt.float64 or (dst in (dt.float32, dt.tfloat32) and
                             src not in (dt.float64, dt.float8_e8m0fnu)) or \
            (dst == dt.float16 and src not in _NARROW):
        modes.append(RA)
    return tuple(modes)


def holds_every_value(dst: dt.DType, src: dt.DType) -> bool:
    """Whether every `src` value is a `dst` value (the conversion cannot round)."""
    if dst == src or dst == dt.float64:
        return True
    if dst in (dt.float32, dt.tfloat32):
        return src.bits <= 16
    return dst in (dt.float16, dt.bfloat16) and src.bits <= 8 and src != dt.float8_e8m0fnu


@rule("astype")
def _astype(x, dtype, rounding_mode):
    d = dtype_arg(dtype)
    v = as_value(x, d)
    if rounding_mode is None:
        return cast(v, d)
    if not isinstance(rounding_mode, RoundingMode):
        raise type_error(f"rounding_mode must be a tileir.RoundingMode, got "
                         f"{describe(rounding_mode)}")
    if not (v.dtype.is_float and d.is_float):
        raise type_error("rounding_mode is only valid for float to float conversions")
    if v.dtype == d:
        return v
    modes = rounding_modes(v.dtype, d)
    if rounding_mode not in modes:
        raise type_error(f"rounding_mode={rounding_mode.name} is not supported for "
                         f"conversion from {v.dtype.name} to {d.name}, supported rounding "
                         f"modes for this conversion are "
                         f"({', '.join(m.name for m in modes)})")
    if rounding_mode == RN or holds_every_value(d, v.dtype):
        return cast(v, d)
    if rounding_mode == RA or d == dt.float8_e8m0fnu:
        raise TileUnsupportedFeatureError(
            f"astype from {v.dtype.name} to {d.name} with rounding mode "
            f"{rounding_mode.name} is not supported by tileir (it rounds to nearest even, "
            f"toward zero, -inf or +inf into float16/bfloat16/tfloat32/float32/float64)",
            loc())
    return directed_cast(v, d, rounding_mode)


def directed_cast(v: TileValue, to: dt.DType, mode: RoundingMode) -> TileValue:
    """`v` (a float tile) rounded to float type `to` by a directed `mode` (RZ, RM, RP),
    once (see the module docstring)."""
    src = v.dtype
    if src == dt.tfloat32:
        v, src = TileValue(v.value, dt.float32, v.shape), dt.float32
    if to == dt.tfloat32:                    # cuTile's table: RZ only
        return _truncate_to_tf32(directed_cast(v, dt.float32, mode) if src == dt.float64
                                 else cast(v, dt.float32))
    if src.bits < 32:                        # f16 <-> bf16: through f32, exact there
        v = cast(v, dt.float32)
    op = arith.TruncFOp(tensor_type(v.shape, to), v.value, roundingmode=_ARITH_MODE[mode])
    return wrap(op.result, to)


def _truncate_to_tf32(v: TileValue) -> TileValue:
    """f32 rounded toward zero to TensorFloat-32 (10 mantissa bits): the low 13 bits
    dropped; a NaN keeps its bits (dropping them could leave an infinity)."""
    i32 = dt.int32
    bits = arith.BitcastOp(tensor_type(v.shape, i32), v.value).result
    kept = arith.AndIOp(bits, constant(-(1 << 13), i32, v.shape).value).result
    nan = arith.CmpFOp(arith.CmpFPredicate.UNO, v.value, v.value).result
    out = arith.SelectOp(nan, bits, kept).result
    return wrap(arith.BitcastOp(tensor_type(v.shape, dt.tfloat32), out).result, dt.tfloat32)
