"""Run-time choices between handles: arrays, slices, tiled views, raw memory and
foreign pointers (`a if n > 0 else b`, a runtime `if` that assigns one or the other,
a helper that returns either), as cuTile allows.

A handle is not one IR value (a slice is its array plus offsets and extents, a tiled
view adds compile-time parts), so the choice is made part by part from an int32
index: the arrays by `tile.select_array` (its ABI values selected on the GPU), the
offsets and extents of slices and foreign pointers by `arith.select`.  Compile-time
parts must agree.  Loads and stores through the chosen array take the register path
(no TMA or cp.async ring, which need a kernel argument), as for a list's element
chosen at run time.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from tileir.dialect import lists

from .. import dtypes as dt
from . import aggregates, compute, emit, intrinsics
from .values import (ArrayValue, DataclassValue, ForeignPointerValue, RawMemoryValue,
                     TiledViewValue, TileValue, describe)


class CannotChoose(Exception):
    """The handles cannot be chosen between at run time; the message says why (the
    caller adds where): a `TileTypeError` there."""


class MadeInside(CannotChoose):
    """An array to choose from is made inside the 'if' (a `TileUnsupportedFeatureError`:
    cuTile takes it)."""


def index_of(cond: Any) -> TileValue:
    """The int32 index (0 where `cond` holds, else 1) of a two-way choice."""
    if not (isinstance(cond, TileValue) and cond.is_scalar):
        raise CannotChoose(f"the condition of a run-time choice between arrays must be a "
                           f"scalar, got {describe(cond)}")
    return emit.cast(compute.select(cond, 0, 1), dt.int32)


def choose(index: TileValue, options: list) -> Any:
    """`options[index]` for handles of one kind (at the current location)."""
    first = options[0]
    if any(type(o) is not type(first) for o in options):
        raise CannotChoose(f"{describe(first)} and {describe(_odd(options))} are not of "
                           f"one kind")
    if isinstance(first, ArrayValue):
        return _arrays(index, options)
    if isinstance(first, TiledViewValue):
        parts = lambda v: (v.tile_shape, v.padding_mode, v.traversal_steps)  # noqa: E731
        if any(parts(o) != parts(first) for o in options):
            raise CannotChoose("tiled views chosen at run time must have the same tile "
                               "shape, padding mode and traversal steps")
        return dataclasses.replace(first, array=_arrays(index, [o.array for o in options]))
    if isinstance(first, RawMemoryValue):
        return RawMemoryValue(_arrays(index, [o.array for o in options]))
    if isinstance(first, ForeignPointerValue):
        if any(o.dtype != first.dtype for o in options):
            raise CannotChoose(f"foreign pointers of different dtypes ({first.dtype.name}, "
                               f"{_odd(options, 'dtype').dtype.name})")
        chosen = _pick(index, [TileValue(o.value, dt.int64, ()) for o in options])
        return ForeignPointerValue(chosen.value, first.dtype)
    raise CannotChoose(f"{describe(first)} cannot be chosen at run time (choose an element "
                       f"with a run-time index instead)")


def _odd(options: list, attr: str | None = None) -> Any:
    first = options[0]
    return next(o for o in options if (type(o) is not type(first) if attr is None
                                       else getattr(o, attr) != getattr(first, attr)))


def _arrays(index: TileValue, arrays: list[ArrayValue]) -> ArrayValue:
    first = arrays[0]
    for a in arrays[1:]:
        if (a.dtype, a.ndim) != (first.dtype, first.ndim):
            raise CannotChoose(f"arrays chosen at run time must have one dtype and rank, "
                               f"got {first.describe()} and {a.describe()}")
    bases = [a.value for a in arrays]
    if all(b == bases[0] for b in bases):
        base = bases[0]
    else:
        base = lists.SelectArrayOp(index.value, bases).result
    offsets = extents = ()
    if any(a.is_slice for a in arrays):
        offsets = tuple(_pick(index, [a.offsets[ax] if a.is_slice else 0 for a in arrays])
                        for ax in range(first.ndim))
        extents = tuple(_extent(index, arrays, ax) for ax in range(first.ndim))
    names = list(dict.fromkeys(a.name for a in arrays))
    return ArrayValue(base, first.dtype, first.ndim, " or ".join(names),
                      _common(a.static_shape for a in arrays),
                      _common(a.static_strides for a in arrays), offsets, extents)


def _extent(index: TileValue, arrays: list[ArrayValue], axis: int) -> Any:
    """A slice's extent along `axis`: None (the array's dim) where no option is a slice
    bounding it; else each option's extent (a whole array's: its dim), chosen."""
    given = [a.extents[axis] if a.is_slice else None for a in arrays]
    if all(e is None for e in given):
        return None
    return _pick(index, [e if e is not None else intrinsics.array_dim(a, axis)
                         for a, e in zip(arrays, given)])


def _pick(index: TileValue, values: list) -> Any:
    """`values[index]` of ints and int32 scalars: the value itself where all agree."""
    first = values[0]
    if all(v is first or emit.is_number(v) and emit.is_number(first) and v == first
           for v in values):
        return first
    out = None
    for j, v in reversed(list(enumerate(values))):
        v = emit.cast(emit.as_value(v, dt.int32), dt.int32) if emit.is_number(v) else v
        out = v if out is None else compute.select(compute.compare("==", index, j), v, out)
    return out


def _common(entries) -> tuple:
    """The (axis, value) entries every option has."""
    sets = [set(e) for e in entries]
    return tuple(sorted(set.intersection(*sets)))


# ---------------------------------------------------------------------------
# A runtime 'if' that leaves a name one handle or another
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Parts:
    """What a runtime 'if' yields for a handle chosen by it: which option (int32), the
    chosen slice's offsets and extents (int32, per axis; empty when no option is a
    slice), a foreign pointer's address (i64)."""

    index: Any
    offsets: tuple
    extents: tuple
    address: Any


@dataclasses.dataclass(frozen=True, eq=False)
class Slot(DataclassValue):
    """The template of a name that a runtime 'if' leaves one of `options` (handles made
    before the 'if'): `_Parts` of TileValues standing for the if's results."""

    options: tuple = ()


def slot(options: list, made_inside: Callable[[Any], bool]) -> Slot:
    """The template of a choice between `options` (handles of one kind) at a runtime
    'if'.  Arrays (a slice's, a view's, raw memory's) must exist before the 'if': the
    chosen one is selected after it; a slice's bounds and a pointer may be computed
    inside."""
    options = [o for i, o in enumerate(options) if all(o is not p for p in options[:i])]
    first = options[0]
    if any(type(o) is not type(first) for o in options):
        raise CannotChoose(f"{describe(first)} and {describe(_odd(options))} are not of "
                           f"one kind")
    if isinstance(first, ForeignPointerValue):
        if any(o.dtype != first.dtype for o in options):
            raise CannotChoose(f"foreign pointers of different dtypes ({first.dtype.name}, "
                               f"{_odd(options, 'dtype').dtype.name})")
        return Slot(_Parts, (None, (), (), TileValue(None, dt.int64, ())), tuple(options))
    arrays = [_array_of(o) for o in options]
    if isinstance(first, TiledViewValue):
        parts = lambda v: (v.tile_shape, v.padding_mode, v.traversal_steps)  # noqa: E731
        if any(parts(o) != parts(first) for o in options):
            raise CannotChoose("tiled views chosen at run time must have the same tile "
                               "shape, padding mode and traversal steps")
    for a in arrays[1:]:
        if (a.dtype, a.ndim) != (arrays[0].dtype, arrays[0].ndim):
            raise CannotChoose(f"arrays chosen at run time must have one dtype and rank, "
                               f"got {arrays[0].describe()} and {a.describe()}")
    inside = next((o for o, a in zip(options, arrays) if made_inside(_whole(a))), None)
    if inside is not None:
        raise MadeInside(f"{describe(inside)} is made inside the 'if'; the arrays a "
                         f"run-time choice picks from must exist before it (their slices' "
                         f"bounds may be computed inside)")
    ndim = arrays[0].ndim
    bounds = any(a.is_slice for a in arrays)
    i32 = TileValue(None, dt.int32, ())
    return Slot(_Parts, (i32, (i32,) * ndim if bounds else (), (i32,) * ndim if bounds
                         else (), None), tuple(options))


def parts_of(template: Slot, v: Any) -> Slot:
    """Branch value `v` (one of the template's options) as the parts the 'if' yields
    (at the branch's insertion point)."""
    index = next(i for i, o in enumerate(template.options) if o is v)
    if isinstance(v, ForeignPointerValue):
        return Slot(_Parts, (None, (), (), TileValue(v.value, dt.int64, ())), template.options)
    a = _array_of(v)
    bounds = template.fields[1] != ()
    offsets = tuple(_i32(a.offsets[ax] if a.is_slice else 0) for ax in range(a.ndim)) \
        if bounds else ()
    extents = tuple(_i32(a.extents[ax] if a.is_slice and a.extents[ax] is not None
                         else intrinsics.array_dim(_whole(a), ax))
                    for ax in range(a.ndim)) if bounds else ()
    return Slot(_Parts, (emit.constant(index, dt.int32), offsets, extents, None),
                template.options)


def realize(template: Slot, merged: DataclassValue) -> Any:
    """The handle after the 'if' from its merged parts (ops at the current point)."""
    index, offsets, extents, address = merged.fields
    first = template.options[0]
    if isinstance(first, ForeignPointerValue):
        return ForeignPointerValue(address.value, first.dtype)
    arrays = [_array_of(o) for o in template.options]
    whole = _arrays(index, [_whole(a) for a in arrays])
    if offsets:
        # a compile-time bound every option shares stays one (`shape` folds)
        whole = dataclasses.replace(
            whole, offsets=tuple(_shared(o, [a.offsets[ax] if a.is_slice else 0
                                             for a in arrays])
                                 for ax, o in enumerate(offsets)),
            extents=tuple(_shared(e, [a.extents[ax] if a.is_slice else None for a in arrays])
                          for ax, e in enumerate(extents)))
    if isinstance(first, TiledViewValue):
        return dataclasses.replace(first, array=whole)
    if isinstance(first, RawMemoryValue):
        return RawMemoryValue(whole)
    return whole


def to_parts(template: Any, v: Any) -> Any:
    """`v` with the handles at the template's Slots replaced by their parts."""
    if isinstance(template, Slot):
        known = any(o is v for o in template.options)
        return parts_of(template, v) if known else v      # (else: a path that left)
    if aggregates.is_aggregate(template) and aggregates.is_aggregate(v) and \
            type(v) is type(template):
        items = aggregates.items_of(v)
        if len(items) == len(aggregates.items_of(template)):
            return aggregates.like(v, (to_parts(t, x) for t, x in
                                       zip(aggregates.items_of(template), items)))
    return v


def from_parts(template: Any, v: Any) -> Any:
    """`v` (the if's results over `template`) with each Slot's parts made a handle."""
    if isinstance(template, Slot):
        return realize(template, v)
    if aggregates.is_aggregate(template):
        return aggregates.like(v, (from_parts(t, x) for t, x in
                                   zip(aggregates.items_of(template), aggregates.items_of(v))))
    return v


def _array_of(h: Any) -> ArrayValue:
    return h if isinstance(h, ArrayValue) else h.array


def _whole(a: ArrayValue) -> ArrayValue:
    """The array a slice is a window of."""
    return dataclasses.replace(a, offsets=(), extents=()) if a.is_slice else a


def _shared(merged: TileValue, given: list) -> Any:
    """A bound every option gives as the same int stays that int; else the merged one."""
    first = given[0]
    if emit.is_number(first) and all(emit.is_number(g) and g == first for g in given):
        return first
    return merged


def _i32(v: Any) -> TileValue:
    if emit.is_number(v):
        return emit.constant(int(v), dt.int32)
    return v if v.dtype == dt.int32 else emit.cast(v, dt.int32)
