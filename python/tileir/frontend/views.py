"""Trace-time rules of array views: `Array.slice`, `Array.tiled_view` and the
`TiledView` methods, with cuTile's names and semantics.

A view is a compile-time object over the kernel's array (Tile IR has no op that
makes one array from another): a slice is the `ArrayValue` with a window (per
axis its first element and extent, ints where the bounds are compile-time, as
cuTile specializes them), a tiled view an array or slice with a tile shape, a
padding mode and traversal steps.  Loads and stores through them are those of
`load`/`store` with that shape; `windows` turns the ones a plain `tile.load`
cannot express into element-indexed ops.

Views enter helpers as their runtime parts (the array, the window's run-time
bounds) plus compile-time kinds (`SliceParam`, `TiledViewParam`).
"""

from __future__ import annotations

import dataclasses

from .. import dtypes as dt
from ..annotations import Array, TiledView
from ..specialization import ArrayParam, ScalarParam
from . import compute, windows
from .emit import as_value, broadcast_to, cast, is_number, reshape, type_error, value_error
from .indexed import ATOMIC_DTYPES
from .intrinsics import (access_order, array_arg, array_dim, const_int, const_shape,
                         latency_arg, method, padding_arg, scalar_int)
from .values import ArrayValue, TileValue, TiledViewValue, describe


# ---------------------------------------------------------------------------
# Array.slice
# ---------------------------------------------------------------------------
def _array_axis(axis, ndim: int, what: str) -> int:
    axis = const_int(axis, "axis")
    if not -ndim <= axis < ndim:
        raise value_error(f"axis {axis} is out of range for {what} of rank {ndim} (expected "
                          f"{-ndim} <= axis < {ndim})")
    return axis % ndim


def _bound(x, what: str):
    """A slice bound: a Python int, or a signed integer scalar as int32."""
    if isinstance(x, int) and not isinstance(x, bool):
        if x < 0:
            raise value_error(f"slice {what} must be >= 0, got {x}")
        return x
    if isinstance(x, TileValue) and x.is_scalar and x.dtype.is_int and x.dtype.is_signed:
        return cast(x, dt.int32)
    raise type_error(f"slice {what} must be a signed integer scalar, got {describe(x)}")


@method(Array, "slice")
def _slice(self, axis, start, stop):
    a = array_arg(self, "the sliced value")
    axis = _array_axis(axis, a.ndim, "an array")
    start, stop = _bound(start, "start"), _bound(stop, "stop")
    if is_number(start) and is_number(stop) and stop < start:
        raise value_error(f"slice stop {stop} is below its start {start} (stop == start "
                          f"gives an empty slice)")
    dim = windows.extent(a, axis)
    if dim is None:
        dim = dict(a.static_shape).get(axis)        # known at compile time, or not checked
    if is_number(dim) and is_number(stop) and stop > dim:
        raise value_error(f"slice stop {stop} is past the end of axis {axis} (size {dim})")
    offsets = list(a.offsets) if a.is_slice else [0] * a.ndim
    extents = list(a.extents) if a.is_slice else [None] * a.ndim
    offsets[axis] = start if is_number(offsets[axis]) and offsets[axis] == 0 else \
        compute.binary("+", offsets[axis], start)
    extents[axis] = compute.binary("-", stop, start) if not (is_number(start) and start == 0) \
        else stop
    return dataclasses.replace(a, offsets=tuple(offsets), extents=tuple(extents))


# ---------------------------------------------------------------------------
# Array.tiled_view and the TiledView methods
# ---------------------------------------------------------------------------
def _steps(steps, ndim: int) -> tuple[int, ...]:
    if isinstance(steps, int) and not isinstance(steps, bool):
        steps = (steps,)
    if not isinstance(steps, tuple):
        raise type_error(f"traversal_steps must be a tuple of compile-time ints, got "
                         f"{describe(steps)}")
    steps = tuple(const_int(s, "traversal_steps entry") for s in steps)
    if len(steps) != ndim:
        raise type_error(f"traversal_steps {steps} has {len(steps)} entries, the array has "
                         f"{ndim} dims (one step per axis)")
    for axis, s in enumerate(steps):
        if s < 1:
            raise value_error(f"traversal_steps {steps} must be positive; got {s} in axis "
                              f"{axis}")
    return steps


@method(Array, "tiled_view")
def _tiled_view(self, tile_shape, padding_mode, traversal_steps):
    a = array_arg(self, "the viewed value")
    shape = () if tile_shape == () else const_shape(tile_shape)
    if shape and len(shape) != a.ndim:
        raise type_error(f"tile shape {shape} has {len(shape)} dims, the array has {a.ndim} "
                         f"(or give () for single elements)")
    padding_arg(padding_mode, a)
    full = shape or (1,) * a.ndim
    steps = full if traversal_steps is None else _steps(traversal_steps, a.ndim)
    return TiledViewValue(a, shape, padding_mode, steps)


def _view(x) -> TiledViewValue:
    if not isinstance(x, TiledViewValue):
        raise type_error(f"expected a tiled view, got {describe(x)}")
    return x


def _tile_index(index, tv: TiledViewValue) -> list[TileValue]:
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) != tv.ndim:
        raise type_error(f"index has {len(index)} entries but the tiled view has {tv.ndim} "
                         f"dims (one tile index per dim)")
    return [scalar_int(i, f"index entry {k}") for k, i in enumerate(index)]


def _broadcasts(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    return len(src) <= len(dst) and all(s in (1, d) for s, d in
                                        zip(reversed(src), reversed(dst)))


def _tile_for(tv: TiledViewValue, value, what: str) -> TileValue:
    """`value` broadcast to the view's tile shape, in its array's dtype and rank."""
    t = as_value(value, tv.dtype)
    if not _broadcasts(t.shape, tv.tile_shape):
        raise type_error(f"{what} has shape {t.shape}, which does not broadcast to the tiled "
                         f"view's tile shape {tv.tile_shape}")
    return reshape(broadcast_to(cast(t, tv.dtype), tv.tile_shape), tv.shape)


@method(TiledView, "num_tiles")
def _num_tiles(self, axis):
    tv = _view(self)
    axis = _array_axis(axis, tv.ndim, "a tiled view")
    step = tv.traversal_steps[axis]          # cdiv(dim, step), folded where dim is known
    return compute.binary("//", compute.binary("+", array_dim(tv.array, axis), step - 1), step)


@method(TiledView, "load")
def _load(self, index, check_bounds, latency, allow_tma):
    tv = _view(self)
    access_order(check_bounds, None, None, "tile_load")
    latency_arg(latency)
    t = windows.load(tv.array, _tile_index(index, tv), tv.shape, tv.padding_mode.value,
                     tv.traversal_steps)
    return reshape(t, ()) if tv.tile_shape == () else t


@method(TiledView, "store")
def _store(self, index, tile, check_bounds, latency, allow_tma):
    tv = _view(self)
    access_order(check_bounds, None, None, "tile_store")
    latency_arg(latency)
    idx = _tile_index(index, tv)
    windows.store(tv.array, idx, _tile_for(tv, tile, "the stored tile"), tv.traversal_steps)
    return None


def _atomic_store(name: str):
    def fn(self, index, update):
        tv = _view(self)
        if tv.dtype.name not in ATOMIC_DTYPES[name]:
            raise type_error(f"atomic_store_{name} does not take a tiled view of "
                             f"{tv.dtype.name} (it takes {', '.join(ATOMIC_DTYPES[name])})")
        if name in ("and", "or", "xor") and isinstance(update, TileValue) and \
                update.dtype != tv.dtype:
            raise type_error(f"atomic_store_{name} needs an update of the view's dtype "
                             f"{tv.dtype.name}, got {update.dtype.name}")
        idx = _tile_index(index, tv)
        u = _tile_for(tv, update, "the update")
        kind = "u" + name if name in ("min", "max") and not tv.dtype.is_signed else name
        windows.atomic_update(tv.array, idx, u, kind, tv.traversal_steps)
        return None
    return fn


for _name in ("add", "max", "min", "and", "or", "xor"):
    method(TiledView, f"atomic_store_{_name}")(_atomic_store(_name))


# ---------------------------------------------------------------------------
# Views as helper arguments
# ---------------------------------------------------------------------------
_INDEX = ScalarParam(dt.int32)


@dataclasses.dataclass(frozen=True)
class SliceParam:
    """A slice entering a helper: its array, and per axis the window's offset and
    extent as compile-time ints, None (the extent: the whole axis) or `_INDEX`
    (an int32 argument of the helper)."""

    array: ArrayParam
    offsets: tuple
    extents: tuple


@dataclasses.dataclass(frozen=True)
class TiledViewParam:
    """A tiled view entering a helper: its array's kind (an `ArrayParam` or a
    `SliceParam`) and what is compile-time about it."""

    array: object
    tile_shape: tuple[int, ...]
    padding_mode: object
    traversal_steps: tuple[int, ...]


def _kind_of(x):
    return _INDEX if isinstance(x, TileValue) else x


def param_kind(v, array_kind):
    """The helper-parameter kind of a view `v` (None for anything else);
    `array_kind(a)` gives a whole array's."""
    if isinstance(v, TiledViewValue):
        return TiledViewParam(param_kind(v.array, array_kind) or array_kind(v.array),
                              v.tile_shape, v.padding_mode, v.traversal_steps)
    if isinstance(v, ArrayValue) and v.is_slice:
        return SliceParam(array_kind(v), tuple(map(_kind_of, v.offsets)),
                          tuple(map(_kind_of, v.extents)))
    return None


def leaves(kind) -> list:
    """The IR arguments (ArrayParam/ScalarParam kinds) a view kind passes, in order."""
    if isinstance(kind, TiledViewParam):
        return leaves(kind.array)
    if isinstance(kind, SliceParam):
        return [kind.array, *(k for k in kind.offsets + kind.extents if isinstance(k, ScalarParam))]
    return [kind]


def leaf_values(v) -> list:
    """The runtime values of view `v` that `leaves` describes."""
    if isinstance(v, TiledViewValue):
        return leaf_values(v.array)
    if isinstance(v, ArrayValue) and v.is_slice:
        return [v.value, *(x.value for x in v.offsets + v.extents if isinstance(x, TileValue))]
    return [v.value]


def rebuild(kind, args, make_array):
    """The view of `kind` over the helper's next arguments; `make_array(kind, value)`
    makes a whole array."""
    if isinstance(kind, TiledViewParam):
        a = rebuild(kind.array, args, make_array)
        return TiledViewValue(a, kind.tile_shape, kind.padding_mode, kind.traversal_steps)
    if isinstance(kind, SliceParam):
        a = make_array(kind.array, next(args))
        runtime = lambda k: TileValue(next(args), dt.int32, ()) if isinstance(k, ScalarParam) \
            else k  # noqa: E731
        offsets = tuple(runtime(k) for k in kind.offsets)
        extents = tuple(runtime(k) for k in kind.extents)
        return dataclasses.replace(a, offsets=offsets, extents=extents)
    return make_array(kind, next(args))
