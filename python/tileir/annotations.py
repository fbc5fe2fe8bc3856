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
import functools
import typing
from typing import Annotated, Any, Protocol, TypeVar, Union

from . import dtypes as dt
from .api import PaddingMode
from .errors import TileError
from .semantics import MemoryOrder, MemoryScope
from .specialization import Constant, ConstantAnnotation

T = TypeVar("T")


def _in_kernels(fn):
    """A method of a kernel's value: its signature is what the frontend binds calls
    against (`inspect.signature` follows `__wrapped__`); called by Python it raises."""
    @functools.wraps(fn)
    def outside(*args, **kwargs):
        raise TileError(f"{fn.__qualname__}() can only be used inside a @kernel or @function "
                        f"body (it is translated to Tile IR, not run by Python)")
    return outside


class Array:
    """A global array parameter (any DLPack / CUDA Array Interface object): `a: ct.Array`.

    In a kernel an array has `shape`, `strides`, `dtype`, `ndim` and the methods below.
    """

    @_in_kernels
    def slice(self, axis, start, stop):
        """The view of elements `[start, stop)` along `axis` (compile-time; negative counts
        from the end), the same memory, nothing copied: `a.slice(0, s, e)` is NumPy's
        `a[s:e]`.  `start`, `stop`: signed integer scalars, `0 <= start <= stop <= dim`.
        Loads past the slice read the padding, stores past it are dropped."""

    @_in_kernels
    def tiled_view(self, tile_shape, *, padding_mode=PaddingMode.UNDETERMINED,
                   traversal_steps=None):
        """The array as a grid of `tile_shape` tiles (a compile-time shape of the array's
        rank, or `()` for one element), read with `padding_mode` past its edges; tile
        `i` starts at element `i * traversal_steps` (default: the tile shape; smaller
        steps overlap tiles, larger ones leave gaps)."""

    @_in_kernels
    def get_raw_memory(self):
        """The array's memory addressed by element offset from its base (its first
        element; a slice's first element), with no shape, strides or bounds: a
        `RawArrayMemory`."""

    @property
    @_in_kernels
    def foreign_pointer(self):
        """The base pointer (the first element's address) as a foreign pointer, of dtype
        `foreign_pointer_dtype(dtype)`: no arithmetic; `Array.from_foreign` makes an
        array of it."""

    @staticmethod
    @_in_kernels
    def from_foreign(pointer, shape, strides):
        """The array at a foreign pointer, of its pointee dtype, with `shape` and `strides`
        (in elements): equal-length tuples of non-negative signed integers, compile-time
        or scalars."""


class RawArrayMemory:
    """An array's memory by element offset from its base (`Array.get_raw_memory`).

    Offsets are integer scalars or tiles; the result has the offset's shape, which the
    mask and the value, update, expected and desired operands broadcast to.  There are
    no bounds checks: an offset outside the array's memory is undefined (the
    interpreter stops)."""

    @property
    @_in_kernels
    def dtype(self):
        """The array's dtype."""

    @_in_kernels
    def load_offset(self, offset, /, *, mask=None, padding_value=0, latency=None):
        """The elements at `offset`; `padding_value` where `mask` is False."""

    @_in_kernels
    def store_offset(self, offset, value, /, *, mask=None, latency=None):
        """Stores `value` (converted to the dtype) at `offset` where `mask` holds."""

    @_in_kernels
    def atomic_cas_offset(self, offset, expected, desired, /, *, mask=None,
                          memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
        """Compare-and-swap per element; the old values (`expected` where masked off)."""

    @_in_kernels
    def atomic_xchg_offset(self, offset, update, /, *, mask=None,
                           memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
        """Exchange per element; the old values."""

    @_in_kernels
    def atomic_add_offset(self, offset, update, /, *, mask=None,
                          memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
        """Atomic add per element; the old values."""

    @_in_kernels
    def atomic_max_offset(self, offset, update, /, *, mask=None,
                          memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
        """Atomic maximum per element (integers); the old values."""

    @_in_kernels
    def atomic_min_offset(self, offset, update, /, *, mask=None,
                          memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
        """Atomic minimum per element (integers); the old values."""

    @_in_kernels
    def atomic_and_offset(self, offset, update, /, *, mask=None,
                          memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
        """Atomic AND per element (integers of the dtype); the old values."""

    @_in_kernels
    def atomic_or_offset(self, offset, update, /, *, mask=None,
                         memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
        """Atomic OR per element (integers of the dtype); the old values."""

    @_in_kernels
    def atomic_xor_offset(self, offset, update, /, *, mask=None,
                          memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
        """Atomic XOR per element (integers of the dtype); the old values."""


class Tile:
    """A tile: an immutable array of compile-time, power-of-two shape (0-d: a scalar)."""


class TiledView:
    """An array seen as a grid of equal tiles (`Array.tiled_view`), loaded and stored by
    tile index as `load`/`store` with that shape and padding do."""

    @property
    @_in_kernels
    def dtype(self):
        """The array's dtype."""

    @property
    @_in_kernels
    def tile_shape(self):
        """The shape of every tile (a compile-time tuple)."""

    @property
    @_in_kernels
    def traversal_steps(self):
        """Elements between the origins of neighbouring tiles, per axis (compile-time)."""

    @_in_kernels
    def num_tiles(self, axis):
        """The number of tiles along `axis` (compile-time): cdiv(dim, step)."""

    @_in_kernels
    def load(self, index, *, check_bounds=True, latency=None, allow_tma=None):
        """The tile at tile index `index`; elements past the array read the padding."""

    @_in_kernels
    def store(self, index, tile, *, check_bounds=True, latency=None, allow_tma=None):
        """Stores `tile` (broadcast to the tile shape, converted to the dtype) at `index`;
        elements past the array are dropped."""

    @_in_kernels
    def atomic_store_add(self, index, update, /):
        """Atomically adds `update` to the tile at `index` (relaxed, device scope)."""

    @_in_kernels
    def atomic_store_max(self, index, update, /):
        """Atomically takes the maximum with `update` (integers)."""

    @_in_kernels
    def atomic_store_min(self, index, update, /):
        """Atomically takes the minimum with `update` (integers)."""

    @_in_kernels
    def atomic_store_and(self, index, update, /):
        """Atomically ANDs `update` in (integers of the view's dtype)."""

    @_in_kernels
    def atomic_store_or(self, index, update, /):
        """Atomically ORs `update` in (integers of the view's dtype)."""

    @_in_kernels
    def atomic_store_xor(self, index, update, /):
        """Atomically XORs `update` in (integers of the view's dtype)."""


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class TupleAnnotation:
    """A tuple parameter's annotation, `tuple[...]` (cuTile 1.7): each item's own
    (`items`: `tuple[int, Constant[int]]`), or one for every item (`each`:
    `tuple[Array, ...]`); what tileir acts on of each, as `param_annotation` reads it."""

    items: tuple | None = None
    each: Any = None

    def __repr__(self) -> str:
        if self.items is None:
            return f"tuple[{self.each!r}, ...]"
        return f"tuple[{', '.join(repr(i) for i in self.items)}]"


IndexedWithInt64 = Annotated[T, ArrayAnnotation(index_dtype=dt.int64)]
ScalarInt64 = Annotated[T, ScalarAnnotation(dtype=dt.int64)]

_CONSTANT_TYPES = (int, bool, float)


def param_annotation(ann: Any) -> Any:
    """The annotation of a kernel parameter that matters to tileir: a
    ConstantAnnotation, ArrayAnnotation, ScalarAnnotation, ListAnnotation or
    TupleAnnotation, or None."""
    if ann is Constant:
        return ConstantAnnotation()
    if isinstance(ann, (ConstantAnnotation, ArrayAnnotation, ScalarAnnotation,
                        ListAnnotation, TupleAnnotation)):
        return ann
    if typing.get_origin(ann) is tuple:
        args = typing.get_args(ann)
        if len(args) == 2 and args[1] is Ellipsis:
            return TupleAnnotation(each=param_annotation(args[0]))
        return TupleAnnotation(items=tuple(param_annotation(a) for a in args))
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


@dataclasses.dataclass(frozen=True)
class EachConstant:
    """`tuple_constness` of a `tuple[X, ...]`: every item's is `constness`."""

    constness: Any


def tuple_constness(ann: Any) -> Any:
    """Which leaves of a tuple parameter are compile-time, by its annotation (as
    `param_annotation` reads it), for the launch fast path's key: True (a Constant:
    all of it), None (none of it), a tuple of the items' (`tuple[int, Constant[int]]`)
    or an `EachConstant` (`tuple[Constant[int], ...]`)."""
    if isinstance(ann, ConstantAnnotation):
        return True
    if not isinstance(ann, TupleAnnotation):
        return None
    if ann.items is None:
        each = tuple_constness(ann.each)
        return None if each is None else EachConstant(each)
    items = tuple(tuple_constness(a) for a in ann.items)
    return None if all(c is None for c in items) else items
