"""Parameter annotations of kernels, named as in cuTile: what a parameter is
(`Array`, `Tile`, `Scalar`), which are compile-time (`Constant`,
`ConstantAnnotation`), and how arrays and integers are indexed and specialized
(`ArrayAnnotation`, `IndexedWithInt64`, `ScalarInt64`, `ListAnnotation`).

`param_annotation` reads any of these spellings, bare or inside
`typing.Annotated`, into the one object `tileir.specialization` acts on.
Nothing here imports MLIR.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any, Protocol, TypeVar, Union

from . import dtypes as dt
from .specialization import Constant, ConstantAnnotation

T = TypeVar("T")


class Array:
    """A global array parameter (any DLPack / CUDA Array Interface object): `a: ct.Array`."""


class Tile:
    """A tile: an immutable array of compile-time, power-of-two shape (0-d: a scalar)."""


class TiledView:
    """An array seen as a grid of tiles (cuTile's `Array.tiled_view`)."""


class Slice:
    """`Slice(start, length)`: a dense dim of `load/store_advanced_indexing`, `length`
    elements (a compile-time power of two) from element `start`."""

    def __init__(self, start, length, /):
        self.start, self.length = start, length


class ScalarProtocol(Protocol):
    """What a scalar supports in kernels: indexing and arithmetic."""

    def __index__(self) -> int: ...


Scalar = Union[int, float, ScalarProtocol]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ArrayAnnotation:
    """How an array parameter is indexed and specialized: `index_dtype` (int32 or
    int64), and dims whose shape (`static_shape_dims`) or stride
    (`static_stride_dims`) entries become compile-time constants, specialized on the
    launch's values (negative dims count from the end)."""

    index_dtype: dt.DType = dt.int32
    static_shape_dims: tuple[int, ...] = ()
    static_stride_dims: tuple[int, ...] = ()

    def __post_init__(self):
        if self.index_dtype not in (dt.int32, dt.int64):
            raise ValueError(f"index_dtype must be int32 or int64, got {self.index_dtype!r}")
        for name in ("static_shape_dims", "static_stride_dims"):
            dims = getattr(self, name)
            if not isinstance(dims, tuple):
                raise TypeError(f"{name} must be a tuple of ints, got {dims!r}")
            for d in dims:
                if isinstance(d, bool) or not isinstance(d, int):
                    raise TypeError(f"{name} must be a tuple of ints, got {dims!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScalarAnnotation:
    """An integer scalar parameter's dtype (`ScalarInt64`)."""

    dtype: dt.DType

    def __post_init__(self):
        if self.dtype not in (dt.int32, dt.int64):
            raise ValueError(f"a scalar annotation's dtype must be int32 or int64, got "
                             f"{self.dtype!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListAnnotation:
    """A parameter that is a list of arrays, each described by `element` (an
    ArrayAnnotation, or an Annotated type holding one such as IndexedWithInt64)."""

    element: Any

    def __post_init__(self):
        element = self.element
        if not isinstance(element, ArrayAnnotation):
            found = [m for m in getattr(element, "__metadata__", ()) if
                     isinstance(m, ArrayAnnotation)]
            if len(found) != 1:
                raise TypeError(f"ListAnnotation's element must be an ArrayAnnotation or an "
                                f"Annotated type with one, got {element!r}")
            object.__setattr__(self, "element", found[0])


IndexedWithInt64 = Annotated[T, ArrayAnnotation(index_dtype=dt.int64)]
ScalarInt64 = Annotated[T, ScalarAnnotation(dtype=dt.int64)]

_CONSTANT_TYPES = (int, bool, float)


def param_annotation(ann: Any) -> Any:
    """The annotation of a kernel parameter that matters to tileir: a
    ConstantAnnotation, ArrayAnnotation, ScalarAnnotation or ListAnnotation, or None."""
    if ann is Constant:
        return ConstantAnnotation()
    if isinstance(ann, (ConstantAnnotation, ArrayAnnotation, ScalarAnnotation,
                        ListAnnotation)):
        return ann
    if typing.get_origin(ann) is Annotated:
        base, *meta = typing.get_args(ann)
        for m in meta:
            if isinstance(m, ConstantAnnotation):
                t = m.type if m.type is not None else base if base in _CONSTANT_TYPES \
                    else None
                return ConstantAnnotation(t)
            if isinstance(m, (ArrayAnnotation, ScalarAnnotation, ListAnnotation)):
                return m
        return param_annotation(base)
    return None
