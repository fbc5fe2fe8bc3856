"""What a traced kernel computes with: tiles/scalars and arrays, as IR values with a dtype.

Compile-time values (Python ints, floats, bools, tuples, dtypes, `Constant`
parameters) stay Python objects and fold in Python; only runtime values are
IR.  A `TileValue` of shape () is a scalar (an MLIR scalar, never a rank-0
tensor), so reductions to rank 0 and `bid()` both give scalars.
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from ..dtypes import DType


@dataclasses.dataclass(frozen=True)
class TileValue:
    value: ir.Value
    dtype: DType
    shape: tuple[int, ...]

    @property
    def is_scalar(self) -> bool:
        return self.shape == ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def describe(self) -> str:
        if self.is_scalar:
            return f"a {self.dtype.name} scalar"
        return f"a {self.dtype.name} tile of shape {self.shape}"


@dataclasses.dataclass(frozen=True)
class ArrayValue:
    """A kernel's global array argument: an `!tile.array` value plus its dtype and rank."""

    value: ir.Value
    dtype: DType
    ndim: int
    name: str
    # (axis, value) of shape and stride entries known at compile time (ArrayAnnotation)
    static_shape: tuple[tuple[int, int], ...] = ()
    static_strides: tuple[tuple[int, int], ...] = ()

    def describe(self) -> str:
        return f"a {self.ndim}-d {self.dtype.name} array"


def describe(x) -> str:
    """How errors name a value the user passed."""
    if isinstance(x, (TileValue, ArrayValue)):
        return x.describe()
    if isinstance(x, bool):
        return f"the constant {x}"
    if isinstance(x, (int, float)):
        return f"the constant {x!r}"
    if isinstance(x, tuple):
        return f"a tuple of {len(x)}"
    if x is None:
        return "None"
    return f"{type(x).__name__} {x!r}"
