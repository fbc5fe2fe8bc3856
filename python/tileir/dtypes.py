"""Element types of tiles and arrays, as the user names them (`tileir.float16`, ...).

A `DType` knows its MLIR type, its NumPy dtype and its signedness.  MLIR integer
types in Tile IR are signless; signedness lives here and in `!tile.array`
element types, and the frontend picks signed or unsigned ops from it.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np


@dataclasses.dataclass(frozen=True)
class DType:
    name: str
    mlir: str          # signless MLIR spelling used in tiles: "f16", "i32", "i1"
    kind: str          # "float", "int", "uint", "bool"
    bits: int
    # cuTile's restricted floats: storage and tensor-core operands only (astype, bitcast,
    # load/store, mma/mma_scaled); arithmetic and implicit promotion refuse them
    restricted: bool = False
    # a foreign pointer's (`foreign_pointer_dtype`): the dtype of what it points to
    pointee: "DType | None" = None

    @property
    def bitwidth(self) -> int:
        """Bits of one element as cuTile counts them: a bool takes a byte (8), a foreign
        pointer 64; `bits` is the IR's width (1 for bool)."""
        return 8 if self.kind == "bool" else self.bits

    @property
    def is_foreign_pointer(self) -> bool:
        return self.kind == "foreign_pointer"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def array_mlir(self) -> str:
        """Spelling in `!tile.array<...>`: carries the signedness of unsigned ints."""
        return f"ui{self.bits}" if self.kind == "uint" else self.mlir

    @property
    def numpy(self) -> np.dtype:
        if self.name in _ML_DTYPES:
            import ml_dtypes
            return np.dtype(getattr(ml_dtypes, self.name))
        return np.dtype({"bool_": "bool"}.get(self.name, self.name))

    def __repr__(self) -> str:
        return f"tileir.{self.name}"

    def __str__(self) -> str:            # as cuTile's: print(x.dtype) shows float32
        return self.name

    def __call__(self, value):  # allow `ct.float32(x)` inside kernels like a cast
        raise TypeError(f"{self!r} can only be called inside a @kernel or @function")


bool_ = DType("bool_", "i1", "bool", 1)
int8 = DType("int8", "i8", "int", 8)
int16 = DType("int16", "i16", "int", 16)
int32 = DType("int32", "i32", "int", 32)
int64 = DType("int64", "i64", "int", 64)
uint8 = DType("uint8", "i8", "uint", 8)
uint16 = DType("uint16", "i16", "uint", 16)
uint32 = DType("uint32", "i32", "uint", 32)
uint64 = DType("uint64", "i64", "uint", 64)
float16 = DType("float16", "f16", "float", 16)
bfloat16 = DType("bfloat16", "bf16", "float", 16)
float32 = DType("float32", "f32", "float", 32)
float64 = DType("float64", "f64", "float", 64)
# 8-bit floats (OCP FP8): tensor-core operands on sm_90a; loads, stores and casts elsewhere
float8_e4m3fn = DType("float8_e4m3fn", "f8E4M3FN", "float", 8)
float8_e5m2 = DType("float8_e5m2", "f8E5M2", "float", 8)

# Microscaling formats (block-scaled `mma_scaled` operands and their scales)
float4_e2m1fn = DType("float4_e2m1fn", "f4E2M1FN", "float", 4, restricted=True)
float8_e8m0fnu = DType("float8_e8m0fnu", "f8E8M0FNU", "float", 8, restricted=True)
# no MLIR type and no NumPy type for it yet: named, refused where used
float8_e5m3fnu = DType("float8_e5m3fnu", "f8E5M3FNU", "float", 8, restricted=True)
# TensorFloat-32: a float32 whose mantissa is rounded to 10 bits; tiles only (mma operands),
# held as f32 in the IR (`astype` to it rounds)
tfloat32 = DType("tfloat32", "f32", "float", 32, restricted=True)

ALL = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16,
       float32, float64, float8_e4m3fn, float8_e5m2, float4_e2m1fn, float8_e8m0fnu)
# dtypes NumPy holds through ml_dtypes
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu")
BY_NAME = {d.name: d for d in ALL + (tfloat32, float8_e5m3fnu)}
BY_NAME["bool"] = bool_


def foreign_pointer_dtype(pointee_dtype: DType) -> DType:
    """The dtype of a foreign pointer to `pointee_dtype` elements (cuTile's
    `foreign_pointer_dtype`): a 64-bit value named `foreign_pointer[<pointee>]`, what
    `Array.foreign_pointer` gives in a kernel.  One object per pointee."""
    if not isinstance(pointee_dtype, DType):
        raise TypeError(f"pointee_dtype must be a tileir dtype, got "
                        f"{type(pointee_dtype).__name__} {pointee_dtype!r}")
    if pointee_dtype.is_foreign_pointer:
        raise TypeError("nested foreign pointer dtypes are not supported")
    return _foreign_pointer(pointee_dtype)


@functools.lru_cache(maxsize=None)
def _foreign_pointer(pointee: DType) -> DType:
    return DType(f"foreign_pointer[{pointee.name}]", "i64", "foreign_pointer", 64,
                 pointee=pointee)


def from_any(x) -> DType | None:
    """A DType from ours, a NumPy dtype/type, a torch dtype, or a name; None otherwise."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        return BY_NAME.get(x)
    if x is bool:
        return bool_
    if x is int:
        return int32
    if x is float:
        return float32
    mod = type(x).__module__
    if mod.startswith("torch"):
        return BY_NAME.get(str(x).removeprefix("torch."))
    try:
        dt = np.dtype(x)
    except TypeError:
        return None
    return from_numpy(dt)


def is_foreign(x) -> bool:
    """Whether `x` is another library's dtype: a NumPy dtype or scalar type, a torch dtype
    (cuTile's "foreign dtype" constants, which kernels see as ours)."""
    if isinstance(x, np.dtype):
        return True
    if isinstance(x, type) and issubclass(x, np.generic):
        return True
    return type(x).__module__.startswith("torch") and type(x).__name__ == "dtype"


def from_numpy(dt: np.dtype) -> DType | None:
    return BY_NAME.get(dt.name)


def from_mlir(spelling: str) -> DType:
    """A DType from an MLIR element type spelling (signless and `si` ints are signed)."""
    if spelling.startswith("ui"):
        return BY_NAME[f"uint{spelling[2:]}"]
    if spelling.startswith("si"):
        return BY_NAME[f"int{spelling[2:]}"]
    for d in ALL:           # tfloat32 is held as f32: an f32 is a float32
        if d.mlir == spelling and d.kind != "uint":
            return d
    raise ValueError(f"no tileir dtype for MLIR type {spelling}")


def promote(a: DType, b: DType) -> DType:
    """The common type of two tile/scalar dtypes (NumPy-like, 16-bit floats meet at f32)."""
    if a == b:
        return a
    for d in (a, b):
        if d.restricted:
            raise TypeError(f"{d.name} is a restricted float (storage and mma operands): "
                            f"implicit promotion of it needs an explicit astype")
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if a.bits == b.bits or max(a.bits, b.bits) <= 16:
                return float32       # f16 and bf16, or fp8s: no common narrow type
            return a if a.bits > b.bits else b
            return a if a.bits > b.bits else b
        return a if a.is_float else b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    bits = max(a.bits, b.bits)
    signed = a.is_signed or b.is_signed
    return BY_NAME[f"{'' if signed else 'u'}int{bits}"]
