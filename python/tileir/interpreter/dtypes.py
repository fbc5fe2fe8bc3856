"""How Tile IR element types live in NumPy.

Every value has a *storage* dtype (what the environment holds) and a *compute*
dtype (what arithmetic runs in).  They differ only for bf16, which NumPy cannot
compute in: bf16 values are held as `ml_dtypes.bfloat16`, computed in float32
and rounded back after every op that produces bf16 (docs/tile-ir.md).  f16 is
plain `numpy.float16`, whose ufuncs round every result to f16.

Integers are signless in Tile IR: an `iN` value is held as NumPy `intN` and
unsigned ops reinterpret the bits as `uintN` (a view, never a conversion).
`i1` is held as `numpy.bool_`; arithmetic on it goes through int8 so that it
wraps like a 1-bit integer (true is -1 when signed, 1 when unsigned).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import ml_dtypes
import numpy as np
from mlir import ir

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


@dataclasses.dataclass(frozen=True)
class Elem:
    """A Tile IR element type as the interpreter sees it."""

    name: str            # MLIR spelling of the signless type: "f32", "bf16", "i8", "i1", "index"
    bits: int
    storage: np.dtype    # what values are held as
    compute: np.dtype    # what arithmetic runs in (float32 for bf16, int8 for i1)
    signed: np.dtype | None = None    # integers: the dtype of the signed interpretation
    unsigned: np.dtype | None = None  # integers: the dtype of the unsigned interpretation

    @property
    def is_float(self) -> bool:
        return self.storage.kind == "f" or self.compute.kind == "f"

    @property
    def is_bool(self) -> bool:
        return self.bits == 1

    @property
    def is_int(self) -> bool:
        return not self.is_float

    @property
    def int_range(self) -> tuple[int, int]:
        """The signed range of an integer type (i1 holds -1 and 0)."""
        return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1

    @property
    def uint_max(self) -> int:
        return (1 << self.bits) - 1

    def scalar(self, value) -> np.generic:
        """`value` (already in range) as a scalar of the storage dtype."""
        return np.array(value, dtype=self.storage)[()]


def _float(name: str, dtype, compute=None) -> Elem:
    dtype = np.dtype(dtype)
    return Elem(name, dtype.itemsize * 8, dtype, np.dtype(compute or dtype))


def _int(bits: int) -> Elem:
    if bits == 1:
        return Elem("i1", 1, np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.int8),
                    np.dtype(np.uint8))
    signed, unsigned = np.dtype(f"int{bits}"), np.dtype(f"uint{bits}")
    return Elem(f"i{bits}", bits, signed, signed, signed, unsigned)


ELEMS: dict[str, Elem] = {
    "f16": _float("f16", np.float16),
    "bf16": _float("bf16", BF16, np.float32),
    # fp8 like bf16: held in ml_dtypes, computed in f32, rounded back after each op
    "f8E4M3FN": _float("f8E4M3FN", ml_dtypes.float8_e4m3fn, np.float32),
    "f8E5M2": _float("f8E5M2", ml_dtypes.float8_e5m2, np.float32),
    # microscaling formats: storage, casts and mma_scaled operands only
    "f4E2M1FN": _float("f4E2M1FN", ml_dtypes.float4_e2m1fn, np.float32),
    "f8E8M0FNU": _float("f8E8M0FNU", ml_dtypes.float8_e8m0fnu, np.float32),
    "f32": _float("f32", np.float32),
    "f64": _float("f64", np.float64),
    **{f"i{b}": _int(b) for b in (1, 8, 16, 32, 64)},
    # `index` only appears around tensor.extract indices; it is 64-bit here.
    "index": dataclasses.replace(_int(64), name="index"),
}


def elem_of(t: ir.Type) -> Elem:
    """The element type of a tile, or a scalar's own type, as an `Elem`."""
    if isinstance(t, ir.ShapedType):
        t = t.element_type
    if isinstance(t, ir.IntegerType):
        key = f"i{t.width}"
    elif isinstance(t, ir.IndexType):
        key = "index"
    elif isinstance(t, ir.BF16Type):
        key = "bf16"
    elif isinstance(t, ir.F16Type):
        key = "f16"
    elif isinstance(t, ir.F32Type):
        key = "f32"
    elif isinstance(t, ir.F64Type):
        key = "f64"
    elif str(t) in ("f8E4M3FN", "f8E5M2", "f4E2M1FN", "f8E8M0FNU"):
        key = str(t)
    else:
        key = None
    if key not in ELEMS:
        raise ValueError(f"type {t} has no NumPy representation in the interpreter "
                         f"(supported: {', '.join(ELEMS)})")
    return ELEMS[key]


def shape_of(t: ir.Type) -> tuple[int, ...]:
    return tuple(t.shape) if isinstance(t, ir.ShapedType) else ()


def wrap_int(value: int, bits: int) -> int:
    """Python int `value` reduced to a signed `bits`-bit integer (two's complement)."""
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half


# ---------------------------------------------------------------------------
# Lifting NumPy functions to element types
# ---------------------------------------------------------------------------
Fn = Callable[..., object]


def in_compute(e: Elem, fn: Fn) -> Fn:
    """`fn` applied in `e`'s compute dtype, its result rounded back to `e`.

    Only bf16 needs the round trip; for other floats NumPy already computes in
    (and rounds to) the storage dtype, so `fn` is returned unchanged.
    """
    if e.compute == e.storage:
        return fn
    compute, storage = e.compute, e.storage
    return lambda *xs: fn(*(x.astype(compute) for x in xs)).astype(storage)


def as_signed(e: Elem, x):
    """The signed interpretation of integer `x` (i1: true is -1)."""
    if e.is_bool:
        return np.negative(x, dtype=np.int8)
    return x


def as_unsigned(e: Elem, x):
    """The unsigned interpretation of integer `x`: a bit view, no conversion."""
    if e.is_bool:
        return x.astype(np.uint8)
    return x.view(e.unsigned)


def from_int(e: Elem, r):
    """Wraps an integer result computed in `e.signed` or `e.unsigned` back to `e`."""
    if e.is_bool:
        return (r & 1).astype(np.bool_)
    return r.view(e.storage)


def signed_op(e: Elem, fn: Fn) -> Fn:
    """Integer `fn` over signed interpretations, wrapped back to `e`."""
    if not e.is_bool:
        return fn
    return lambda *xs: from_int(e, fn(*(as_signed(e, x) for x in xs)))


def unsigned_op(e: Elem, fn: Fn) -> Fn:
    """Integer `fn` over unsigned interpretations, wrapped back to `e`."""
    return lambda *xs: from_int(e, fn(*(as_unsigned(e, x) for x in xs)))


# ---------------------------------------------------------------------------
# Correct rounding where NumPy double-rounds
# ---------------------------------------------------------------------------
FP8 = (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))


def to_fp8(x, storage: np.dtype):
    """f32 (or narrower) `x` rounded to an fp8 type to nearest even, saturating as the
    GPU's `cvt.rn.satfinite` does (PTX has no other rounding to fp8): beyond the
    largest finite value, infinities included, the result is that value with the
    sign; NaN stays NaN.  (ml_dtypes gives NaN, or inf for e5m2, instead.)"""
    top = float(ml_dtypes.finfo(storage).max)
    with np.errstate(invalid="ignore"):
        return np.clip(np.asarray(x), -top, top).astype(storage)


def f64_to(e: Elem, x):
    """Rounds float64 `x` to float type `e`, to nearest even, in one rounding (to fp8
    saturating, as `to_fp8` says).

    NumPy and ml_dtypes convert f64 -> bf16 (and fp8) through f32, which rounds
    twice and is off by one ulp in rare ties.  Rounding to f32 *toward odd* first
    keeps the information the second rounding needs (f32 has far more than the two
    extra bits that requires), so the f32 -> bf16 step is then exact RNE.
    """
    if e.storage != BF16 and e.storage not in FP8:
        with np.errstate(over="ignore"):  # overflow to inf is the IEEE result
            return np.asarray(x, dtype=F64).astype(e.storage)[()]
    x = np.asarray(x, dtype=F64)
    with np.errstate(over="ignore"):  # beyond f32: inf, stepped back to f32 max below
        t = x.astype(F32)
    # Truncate toward zero: step back where RNE rounded away from zero.
    t = np.where(np.abs(t.astype(F64)) > np.abs(x), np.nextafter(t, F32.type(0)), t)
    sticky = (t.astype(F64) != x) & np.isfinite(x)
    bits = t.view(np.uint32) | sticky.astype(np.uint32)
    odd = bits.view(F32)
    if e.storage in FP8:
        return to_fp8(odd, e.storage)[()]
    return odd.astype(BF16)[()]
