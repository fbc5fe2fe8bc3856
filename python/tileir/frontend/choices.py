"""Run-time choices between handles: arrays, slices, tiled views, raw memory and
foreign pointers (`a if n > 0 else b`, a runtime `if` that assigns one or the other,
a helper that returns either, a loop that reassigns one), as cuTile allows.

A handle is not one IR value (a slice is its array plus offsets and extents, a tiled
view adds compile-time parts), so a choice is made of *parts*, `_Parts`:

* arrays, slices, tiled views: an int32 `index` into `options`, the whole arrays
  (made before the choice) that the chosen one can be, and, when an option is a
  slice, the int32 offsets and extents of each axis;
* raw memory and foreign pointers: the i64 address.

A runtime `if` yields the parts and a loop carries them (`Slot` is the template:
`_Parts` of TileValues, plus the options); a conditional expression selects them.
`realize` turns parts back into a handle: the array by `tile.select_array` over the
options (so loads and stores through it take the register path: no TMA or cp.async
ring, which need a kernel argument), raw memory by a new `tile.raw_memory` of the
address.  A realized array remembers its choice (`ArrayValue.chosen`), so choosing
again between chosen arrays (a swap in a loop) maps their indices.  Compile-time
parts (a tiled view's tile shape, padding and steps) must agree.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from mlir import ir

from tileir.dialect import array_type, lists
from tileir.dialect import pointers as pointer_ops

from .. import dtypes as dt
from . import aggregates, compute, emit, intrinsics
from .values import (ArrayValue, DataclassValue, ForeignPointerValue, ListValue,
                     RawMemoryValue, TiledViewValue, TileValue, describe)


class CannotChoose(Exception):
    """The handles cannot be chosen between at run time; the message says why (the
    caller adds where): a `TileTypeError` there."""


class MadeInside(CannotChoose):
    """An array to choose from is made inside the construct that chooses (a
    `TileUnsupportedFeatureError`)."""


@dataclasses.dataclass(frozen=True)
class Choice:
    """What a realized array was chosen from (`ArrayValue.chosen`)."""

    options: tuple          # whole ArrayValues
    index: TileValue        # int32


@dataclasses.dataclass(frozen=True)
class _Parts:
    """The run-time parts of a chosen handle (the module docstring)."""

    index: Any
    offsets: tuple
    extents: tuple
    address: Any


@dataclasses.dataclass(frozen=True, eq=False)
class Slot(DataclassValue):
    """A chosen handle's parts (TileValues: placeholders in a template, IR values in a
    loop's initial values) and what they choose from: `options`, the whole arrays, and
    `like`, a handle of the kind (for its dtype and compile-time parts)."""

    options: tuple = ()
    like: Any = None


def is_handle(v: Any) -> bool:
    return isinstance(v, (ArrayValue, TiledViewValue, RawMemoryValue, ForeignPointerValue))


# ---------------------------------------------------------------------------
# Templates
# ---------------------------------------------------------------------------
class NeedsCarrying(Exception):
    """A trip of `loop` replaces an array inside the tuple or dataclass instance `name`,
    which the loop carries by its other leaves: the loop is compiled again carrying its
    arrays as choices too (`FunctionCompiler.loop_carrying_bounds`)."""

    def __init__(self, loop: Any, name: str):
        super().__init__(name)
        self.loop, self.name = loop, name


class NeedsBounds(Exception):
    """A loop assigned a slice to a carried array that it carries without bounds: the
    loop is compiled again carrying them (`FunctionCompiler.loop_carrying_bounds`)."""


def slot(handles: list, made_inside: Callable[[Any], bool], more: list = (),
         bounds: bool | None = None) -> Slot:
    """The template of a choice between `handles` (of one kind), whose arrays must not
    be `made_inside` the construct that chooses; `more`: further whole arrays the
    choice may come to hold (a loop's, `loop_options`); `bounds`: whether it carries
    a slice's offsets and extents (by default: whether a handle is a slice)."""
    first = handles[0]
    for h in handles:
        if not is_handle(h):
            raise CannotChoose(f"{describe(h)} cannot be chosen at run time (index a list "
                               f"of arrays with a run-time index instead)")
        _check_same_kind(first, h)
    i64, i32 = TileValue(None, dt.int64, ()), TileValue(None, dt.int32, ())
    if isinstance(first, (ForeignPointerValue, RawMemoryValue)):
        return Slot(_Parts, (None, (), (), i64), (), first)
    options = _distinct([o for h in handles for o in _options_of(_whole(_array_of(h)))]
                        + list(more))
    inside = next((o for o in options if made_inside(o)), None)
    if inside is not None:
        raise MadeInside(f"{describe(inside)} is made inside the 'if' or loop that "
                         f"chooses; the arrays a run-time choice picks from must exist "
                         f"before it (a slice's bounds may be computed inside)")
    ndim = first.ndim if isinstance(first, ArrayValue) else first.array.ndim
    if bounds is None:
        bounds = any(_array_of(h).is_slice for h in handles)
    return Slot(_Parts, (i32, (i32,) * ndim if bounds else (),
                         (i32,) * ndim if bounds else (), None), tuple(options), first)


def loop_options(v: Any, visible: list) -> list:
    """The whole arrays a loop-carried handle `v` may come to hold: those of `visible`
    (the names' values before the loop) of its dtype and rank."""
    if isinstance(v, (ForeignPointerValue, RawMemoryValue)):
        return []
    a = _array_of(v)
    return [o for o in _distinct([w for x in visible for w in _arrays_in(x)])
            if (o.dtype, o.ndim) == (a.dtype, a.ndim)]


def _check_same_kind(a: Any, b: Any) -> None:
    if type(a) is not type(b):
        raise CannotChoose(f"{describe(a)} and {describe(b)} are not of one kind")
    if isinstance(a, ForeignPointerValue) and a.dtype != b.dtype:
        raise CannotChoose(f"foreign pointers of different dtypes ({a.dtype.name}, "
                           f"{b.dtype.name})")
    if isinstance(a, RawMemoryValue) and a.dtype != b.dtype:
        raise CannotChoose(f"raw memory of different dtypes ({a.dtype.name}, "
                           f"{b.dtype.name})")
    if isinstance(a, TiledViewValue) and (a.tile_shape, a.padding_mode, a.traversal_steps) \
            != (b.tile_shape, b.padding_mode, b.traversal_steps):
        raise CannotChoose("tiled views chosen at run time must have the same tile shape, "
                           "padding mode and traversal steps")
    if isinstance(a, (ArrayValue, TiledViewValue)):
        x, y = _array_of(a), _array_of(b)
        if (x.dtype, x.ndim) != (y.dtype, y.ndim):
            raise CannotChoose(f"arrays chosen at run time must have one dtype and rank, "
                               f"got {x.describe()} and {y.describe()}")


# ---------------------------------------------------------------------------
# Parts of a handle, and a handle of parts
# ---------------------------------------------------------------------------
def parts_of(template: Slot, v: Any) -> Slot:
    """`v` (a handle the template can hold) as its parts, at the current point."""
    _check_same_kind(template.like, v)
    if isinstance(v, ForeignPointerValue):
        address = TileValue(v.value, dt.int64, ())
        return Slot(_Parts, (None, (), (), address), (), template.like)
    if isinstance(v, RawMemoryValue):
        return Slot(_Parts, (None, (), (), _raw_address(v)), (), template.like)
    a = _array_of(v)
    index = _index_in(template.options, _whole(a))
    bounds = template.fields[1] != ()
    if a.is_slice and not bounds:
        raise NeedsBounds()
    offsets = tuple(_i32(a.offsets[ax] if a.is_slice else 0) for ax in range(a.ndim)) \
        if bounds else ()
    extents = tuple(_i32(a.extents[ax] if a.is_slice and a.extents[ax] is not None
                         else intrinsics.array_dim(_whole(a), ax))
                    for ax in range(a.ndim)) if bounds else ()
    return Slot(_Parts, (index, offsets, extents, None), template.options, template.like)


def unset_parts(template: Slot) -> Slot:
    """Parts that stand for no handle yet (index 0, zero bounds, address 0): what a
    loop carries for a returned value before any return."""
    index, offsets, extents, address = template.fields
    zero = lambda like: None if like is None else emit.constant(0, like.dtype)  # noqa: E731
    return Slot(_Parts, (zero(index), tuple(map(zero, offsets)), tuple(map(zero, extents)),
                         zero(address)), template.options, template.like)


def realize(template: Slot, merged: DataclassValue) -> Any:
    """The handle of the merged parts (ops at the current point)."""
    index, offsets, extents, address = merged.fields
    like = template.like
    if isinstance(like, ForeignPointerValue):
        return ForeignPointerValue(address.value, like.dtype)
    if isinstance(like, RawMemoryValue):
        raw = pointer_ops.RawMemoryOp(array_type(ir.Type.parse(like.dtype.array_mlir), 1),
                                      address.value)
        return RawMemoryValue(dataclasses.replace(like.array, value=raw.result))
    whole = _select(index, list(template.options))
    if offsets:
        whole = dataclasses.replace(whole, offsets=tuple(offsets), extents=tuple(extents))
    if isinstance(like, TiledViewValue):
        return dataclasses.replace(like, array=whole)
    return whole


def choose(cond: Any, a: Any, b: Any) -> Any:
    """`a if cond else b` for handles and a runtime scalar `cond`."""
    if not (isinstance(cond, TileValue) and cond.is_scalar):
        raise CannotChoose(f"the condition of a run-time choice between arrays must be a "
                           f"scalar, got {describe(cond)}")
    template = slot([a, b], lambda o: False)
    pa, pb = parts_of(template, a), parts_of(template, b)
    merged = aggregates.like(pa, (_select_parts(cond, x, y) for x, y in
                                  zip(pa.fields, pb.fields)))
    return realize(template, merged)


def _select_parts(cond: TileValue, x: Any, y: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(_select_parts(cond, p, q) for p, q in zip(x, y))
    return x if x is None or x is y else compute.select(cond, x, y)


def to_parts(template: Any, v: Any) -> Any:
    """`v` with the handles at the template's Slots replaced by their parts (a value
    that is not such a handle, on a path that left, stays as it is)."""
    if isinstance(template, Slot):
        if not is_handle(v):
            return v
        try:
            return parts_of(template, v)
        except (CannotChoose, NeedsBounds):
            return v
    if aggregates.is_aggregate(template) and aggregates.is_aggregate(v) and \
            type(v) is type(template):
        items = aggregates.items_of(v)
        if len(items) == len(aggregates.items_of(template)):
            return aggregates.like(v, (to_parts(t, x) for t, x in
                                       zip(aggregates.items_of(template), items)))
    return v


def from_parts(template: Any, v: Any) -> Any:
    """`v` (merged or carried parts over `template`) with each Slot's parts a handle."""
    if isinstance(template, Slot):
        return realize(template, v)
    if aggregates.is_aggregate(template):
        return aggregates.like(v, (from_parts(t, x) for t, x in
                                   zip(aggregates.items_of(template), aggregates.items_of(v))))
    return v


def has_slots(template: Any) -> bool:
    if isinstance(template, Slot):
        return True
    return aggregates.is_aggregate(template) and \
        any(has_slots(x) for x in aggregates.items_of(template))


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def _select(index: TileValue, options: list[ArrayValue]) -> ArrayValue:
    """`options[index]`: the option itself when it is the only one."""
    first = options[0]
    if len(options) == 1:
        return first
    value = lists.SelectArrayOp(index.value, [o.value for o in options]).result
    names = list(dict.fromkeys(o.name for o in options))
    return ArrayValue(value, first.dtype, first.ndim, " or ".join(names),
                      _common(o.static_shape for o in options),
                      _common(o.static_strides for o in options),
                      chosen=Choice(tuple(options), index))


def _index_in(options: tuple, whole: ArrayValue) -> TileValue:
    """The int32 index of `whole` among `options` (a chosen array's index mapped)."""
    at = _position(options, whole)
    if at is not None:
        return emit.constant(at, dt.int32)
    if whole.chosen is None or any(_position(options, o) is None
                                   for o in whole.chosen.options):
        raise MadeInside(f"{describe(whole)} is not among the arrays the choice can hold "
                         f"(it is made inside the loop or 'if' that chooses); the arrays a "
                         f"run-time choice picks from must exist before it")
    inner = [_position(options, o) for o in whole.chosen.options]
    if inner == list(range(len(inner))):
        return whole.chosen.index
    out = emit.constant(inner[-1], dt.int32)
    for j in range(len(inner) - 2, -1, -1):
        out = compute.select(compute.compare("==", whole.chosen.index, j),
                             emit.constant(inner[j], dt.int32), out)
    return out


def _position(options: tuple, whole: ArrayValue) -> int | None:
    return next((i for i, o in enumerate(options) if o.value == whole.value), None)


def _options_of(whole: ArrayValue) -> list[ArrayValue]:
    """The whole arrays `whole` stands for: itself, or those it was chosen from."""
    return list(whole.chosen.options) if whole.chosen is not None else [whole]


def _arrays_in(x: Any) -> list[ArrayValue]:
    """The whole arrays a value before a loop holds (through aggregates and lists)."""
    if aggregates.is_aggregate(x):
        return [a for i in aggregates.items_of(x) for a in _arrays_in(i)]
    if isinstance(x, ListValue):
        return [a for e in x.elements for a in _arrays_in(e)]
    if isinstance(x, (ArrayValue, TiledViewValue)):
        return _options_of(_whole(_array_of(x)))
    return []


def _distinct(arrays: list[ArrayValue]) -> list[ArrayValue]:
    out: list[ArrayValue] = []
    for a in arrays:
        if all(a.value != o.value for o in out):
            out.append(a)
    return out


def _raw_address(v: RawMemoryValue) -> TileValue:
    """The i64 address raw memory starts at: the operand of the `tile.raw_memory` that
    made it (the address 0 of a choice not made yet stays 0), or where none is in sight
    (a helper's argument) its raw array's first element."""
    owner = v.array.value.owner
    if not isinstance(owner, ir.Block) and \
            getattr(owner, "operation", owner).name == pointer_ops.RawMemoryOp.OPERATION_NAME:
        return TileValue(owner.operands[0], dt.int64, ())
    from .pointers import first_element_address      # (pointers.py: the API's rules)
    return first_element_address(v.array)


def _array_of(h: Any) -> ArrayValue:
    return h if isinstance(h, ArrayValue) else h.array


def _whole(a: ArrayValue) -> ArrayValue:
    """The array a slice is a window of."""
    return dataclasses.replace(a, offsets=(), extents=()) if a.is_slice else a


def _i32(v: Any) -> TileValue:
    if emit.is_number(v):
        return emit.constant(int(v), dt.int32)
    return v if v.dtype == dt.int32 else emit.cast(v, dt.int32)


def _common(entries) -> tuple:
    """The (axis, value) entries every option has."""
    sets = [set(e) for e in entries]
    return tuple(sorted(set.intersection(*sets)))
