"""What a traced kernel computes with: tiles/scalars and arrays (and views of arrays),
as IR values with a dtype.

Compile-time values (Python ints, floats, bools, tuples, dtypes, `Constant`
parameters) stay Python objects and fold in Python; only runtime values are
IR.  A `TileValue` of shape () is a scalar (an MLIR scalar, never a rank-0
tensor), so reductions to rank 0 and `bid()` both give scalars.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mlir import ir

from ..dtypes import DType


@dataclasses.dataclass(frozen=True)
class BoundMethod:
    """`tile.astype` etc.: an intrinsic with its first argument bound."""

    name: str
    receiver: Any


@dataclasses.dataclass(frozen=True)
class MethodValue:
    """`obj.method` of a dataclass instance: the method's function and its receiver
    (compiled as a call of the function with the receiver first)."""

    function: Any
    receiver: Any


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
    """A kernel's global array argument (or a slice of one): an `!tile.array` value plus
    its dtype and rank."""

    value: ir.Value
    dtype: DType
    ndim: int
    name: str
    # (axis, value) of shape and stride entries known at compile time (ArrayAnnotation)
    static_shape: tuple[tuple[int, int], ...] = ()
    static_strides: tuple[tuple[int, int], ...] = ()
    # A slice's window of `value` (`Array.slice`), one entry per axis, empty for the
    # whole array: the first element (an int or an int32 scalar TileValue) and the
    # extent (None: the array's dim, an int or an int32 scalar TileValue).
    offsets: tuple = ()
    extents: tuple = ()
    # A whole array chosen at run time among others (choices.Choice), or None
    chosen: Any = dataclasses.field(default=None, compare=False)

    @property
    def is_slice(self) -> bool:
        return bool(self.offsets)

    def describe(self) -> str:
        what = "a slice of a" if self.is_slice else "a"
        return f"{what} {self.ndim}-d {self.dtype.name} array"


@dataclasses.dataclass(frozen=True)
class TiledViewValue:
    """`array.tiled_view(...)`: an array (or a slice) seen as a grid of tiles, all of it
    known at compile time but the array itself."""

    array: ArrayValue
    tile_shape: tuple[int, ...]         # as given: () reads single elements
    padding_mode: Any                   # a tileir.PaddingMode
    traversal_steps: tuple[int, ...]    # one per axis

    @property
    def dtype(self) -> DType:
        return self.array.dtype

    @property
    def ndim(self) -> int:
        return self.array.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the tiles it moves: `tile_shape`, or all 1s for `()`."""
        return self.tile_shape or (1,) * self.ndim

    def describe(self) -> str:
        return f"a tiled view of {self.array.describe()} in tiles of {self.tile_shape}"


@dataclasses.dataclass(frozen=True)
class ListValue:
    """A list-of-arrays parameter (cuTile's `ListAnnotation`): one array per element,
    all of one dtype and rank.  `len()` and a constant index are compile time; a
    run-time index selects with `tile.select_array`."""

    elements: tuple[ArrayValue, ...]
    name: str

    @property
    def dtype(self) -> DType:
        return self.elements[0].dtype

    @property
    def ndim(self) -> int:
        return self.elements[0].ndim

    def describe(self) -> str:
        return f"a list of {len(self.elements)} {self.ndim}-d {self.dtype.name} arrays"


@dataclasses.dataclass(frozen=True)
class TableListValue(ListValue):
    """A list of arrays whose length is known at launch only (`TableListParam`): its
    table (an int64 array, one row per element) and what every element is.  `len()`
    is the table's dim 0; `xs[i]` and `for a in xs` read rows (`tile.list_get`)."""

    table: ArrayValue | None = None
    element: Any = None                 # the specialization's ArrayParam of every element

    @property
    def dtype(self) -> DType:
        return self.element.dtype

    @property
    def ndim(self) -> int:
        return self.element.ndim

    def describe(self) -> str:
        return f"a list of {self.ndim}-d {self.dtype.name} arrays (its length known at launch)"


@dataclasses.dataclass(frozen=True, eq=False)
class DataclassValue:
    """An instance of a frozen dataclass built in kernel code (cuTile's aggregate): its
    class and its fields' values, in `dataclasses.fields` order; each is anything a
    kernel computes with (tiles, arrays, constants, tuples, other instances)."""

    cls: type
    fields: tuple

    def field(self, name: str) -> Any:
        names = [f.name for f in dataclasses.fields(self.cls)]
        return self.fields[names.index(name)]

    def describe(self) -> str:
        return f"a {self.cls.__qualname__} instance"


@dataclasses.dataclass(frozen=True)
class ForeignPointerValue:
    """`array.foreign_pointer`: the address of an array's first element (an `i64`
    `tile.array_address`), of dtype `foreign_pointer[T]`.  No arithmetic: it becomes an
    array again (`Array.from_foreign`) or enters helpers."""

    value: ir.Value
    dtype: DType                        # dtypes.foreign_pointer_dtype(T)

    def describe(self) -> str:
        return f"a foreign pointer ({self.dtype.name})"


@dataclasses.dataclass(frozen=True)
class RawMemoryValue:
    """`array.get_raw_memory()`: the memory from the array's first element on, as the
    1-d unit-stride array `tile.raw_memory` makes; offsets index it unchecked."""

    array: ArrayValue

    @property
    def dtype(self) -> DType:
        return self.array.dtype

    def describe(self) -> str:
        return f"the raw memory of a {self.dtype.name} array"


# runtime values that are not IR values of their own kind: a loop does not carry them
# and a runtime `if` does not choose between them (the choice is made at compile time)
HANDLES = (ArrayValue, TiledViewValue, ListValue, RawMemoryValue, ForeignPointerValue)


def describe(x) -> str:
    """How errors name a value the user passed."""
    if isinstance(x, (TileValue, ArrayValue, TiledViewValue, ListValue, DataclassValue,
                      ForeignPointerValue, RawMemoryValue)):
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
