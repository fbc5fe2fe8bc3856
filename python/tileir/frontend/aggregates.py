"""Aggregates in kernel code: tuples and frozen dataclass instances (cuTile's aggregates).

An aggregate is a Python tuple or a `DataclassValue` whose items are anything a kernel
computes with: tiles and scalars, arrays and views, compile-time values, other
aggregates.  They are never IR values themselves; what crosses an IR boundary are
their runtime *leaves*:

* a helper's parameter holding runtime values is a `structured.TupleKind` or
  `DataclassKind` (each item's kind), its leaves passed as IR arguments and the
  aggregate rebuilt in the helper;
* a helper's result is flattened the same way, numbers made runtime scalars as for
  any result, other compile-time items (None, strings, dtypes) kept in the template;
* a loop carries an aggregate's runtime leaves (numbers made runtime first); its
  compile-time items must come out of each trip as they went in;
* a runtime `if` (and the guard after a runtime `break`/`return`, control.py) yields
  the runtime leaves that differ between its paths; a returned aggregate's leaves
  are the names `$retval.i` (`control.flatten`).

Dataclasses follow cuTile (`typing_support.get_dataclass_info`): frozen, with the
`__init__` the dataclasses module generates, no `default_factory` and no `init=False`
fields.  Kernels build them, read fields, pass them to helpers, get them back, use
`dataclasses.replace` and compare them with the generated `==`.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Iterator

from mlir import ir

from .emit import type_error
from .values import HANDLES, DataclassValue, TileValue, describe

RUNTIME = (TileValue, *HANDLES)


def is_aggregate(x: Any) -> bool:
    return isinstance(x, (tuple, DataclassValue))


def items_of(x: tuple | DataclassValue) -> tuple:
    return x.fields if isinstance(x, DataclassValue) else x


def like(x: tuple | DataclassValue, items) -> tuple | DataclassValue:
    """An aggregate of `x`'s type over `items`."""
    if isinstance(x, DataclassValue):
        return DataclassValue(x.cls, tuple(items))
    return tuple(items)


def is_runtime(x: Any) -> bool:
    """Whether `x` is or holds a value known only when the kernel runs."""
    if isinstance(x, RUNTIME):
        return True
    return is_aggregate(x) and any(is_runtime(i) for i in items_of(x))


def transform(x: Any, fn: Callable[[Any], Any]) -> Any:
    """`x` with `fn` applied to every item that is not an aggregate."""
    if is_aggregate(x):
        return like(x, (transform(i, fn) for i in items_of(x)))
    return fn(x)


def tile_leaves(x: Any) -> list[TileValue]:
    """The TileValues in `x`, depth first."""
    out: list[TileValue] = []
    transform(x, lambda v: out.append(v) if isinstance(v, TileValue) else None)
    return out


def with_values(template: Any, values: Iterator[ir.Value]) -> Any:
    """`template` with each TileValue replaced by one over the next of `values`."""
    return transform(template, lambda v: TileValue(next(values), v.dtype, v.shape)
                     if isinstance(v, TileValue) else v)


def rebind(templates: list, values) -> list:
    """`with_values` of each template over one sequence of IR values, in order."""
    it = iter(values)
    return [with_values(t, it) for t in templates]


def ir_values(templates: list) -> list[ir.Value]:
    return [v.value for t in templates for v in tile_leaves(t)]


def path_name(name: str, path: tuple) -> str:
    """`st`, `st[1]` or `cfg.acc`: how errors name a part of a variable."""
    return name + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def part_names(x: tuple | DataclassValue) -> list:
    if isinstance(x, DataclassValue):
        return [f.name for f in dataclasses.fields(x.cls)]
    return list(range(len(x)))


def match(template: Any, value: Any, leaf: Callable[[TileValue, Any, tuple], TileValue],
          path: tuple = ()) -> Any:
    """`value` checked against `template` (same structure, same compile-time items); its
    runtime leaves made to match by `leaf(template_leaf, value_leaf, path)`.  Raises
    `StructureError` naming the first difference."""
    if isinstance(template, TileValue):
        return leaf(template, value, path)
    if is_aggregate(template):
        same = type(value) is type(template) and (
            value.cls is template.cls if isinstance(value, DataclassValue)
            else len(value) == len(template))
        if not same:
            raise StructureError(path, template, value)
        return like(template, (match(t, v, leaf, path + (p,)) for t, v, p in
                               zip(items_of(template), items_of(value), part_names(template))))
    if value is template or (type(value) is type(template) and equal(value, template)):
        return template
    raise StructureError(path, template, value)


def match_items(a: tuple | DataclassValue, b: Any) -> tuple[tuple, tuple, list]:
    """The items of `a` and `b` and their parts, for aggregates of one structure;
    raises StructureError for others."""
    same = type(b) is type(a) and (b.cls is a.cls if isinstance(a, DataclassValue)
                                   else len(b) == len(a))
    if not same:
        raise StructureError((), a, b)
    return items_of(a), items_of(b), part_names(a)


def equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:             # an object without a usable ==
        return False


class StructureError(Exception):
    """Where a value differs from the template it must match, for the caller's message."""

    def __init__(self, path: tuple, template: Any, value: Any):
        super().__init__(path)
        self.path, self.template, self.value = path, template, value


def leaves_and_dataclasses(x: Any) -> Iterator[Any]:
    """The items of `x` that are not tuples, depth first (dataclass instances whole)."""
    if type(x) is tuple:
        for i in x:
            yield from leaves_and_dataclasses(i)
    else:
        yield x


def leaf_paths(x: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """(path, item) of every item of `x` that is not an aggregate."""
    if is_aggregate(x):
        for p, i in zip(part_names(x), items_of(x)):
            yield from leaf_paths(i, path + (p,))
    else:
        yield path, x


# ---------------------------------------------------------------------------
# Dataclasses
# ---------------------------------------------------------------------------
def is_dataclass_type(x: Any) -> bool:
    """A user's dataclass (tileir's own, `Slice` and such, are not built this way)."""
    return isinstance(x, type) and dataclasses.is_dataclass(x) and not _ours(x)


def field_names(cls: type) -> list[str]:
    """The fields of a dataclass kernels can build, after cuTile's checks."""
    name = cls.__qualname__
    params = cls.__dataclass_params__
    if not params.frozen:
        raise type_error(f"dataclass {name} is not frozen; kernels build frozen dataclasses "
                         f"only (@dataclasses.dataclass(frozen=True)): their values cannot "
                         f"change")
    if "__dataclass_params__" not in cls.__dict__:
        raise type_error(f"{name} subclasses a dataclass without being one itself; kernels "
                         f"build dataclasses only")
    if not _generated_init(cls):
        raise type_error(f"dataclass {name} has an __init__ of its own; kernels build "
                         f"dataclasses through the __init__ the dataclasses module generates")
    if cls.__new__ is not object.__new__:
        raise type_error(f"dataclass {name} has a custom __new__, which kernels cannot run")
    names = []
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            raise type_error(f"field '{f.name}' of dataclass {name} has a default_factory, "
                             f"which kernels cannot run; give it a default value or pass it")
        if not f.init:
            raise type_error(f"field '{f.name}' of dataclass {name} is init=False; kernels "
                             f"build dataclasses whose fields are all given to __init__")
        names.append(f.name)
    return names


def _generated_init(cls: type) -> bool:
    if not cls.__dataclass_params__.init:
        return False
    code = getattr(cls.__init__, "__code__", None)
    return code is not None and (code.co_filename == "<string>" or
                                 code.co_qualname.startswith("__create_fn__"))


def construct(cls: type, args: list, kwargs: dict) -> DataclassValue:
    """`cls(*args, **kwargs)` in a kernel (the generated __init__'s binding)."""
    names = field_names(cls)
    signature = inspect.signature(cls)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:
        raise type_error(f"bad arguments to {cls.__qualname__}{signature}: {e}") from None
    bound.apply_defaults()
    return DataclassValue(cls, tuple(from_python(bound.arguments[n]) for n in names))


def replace(obj: Any, changes: dict) -> DataclassValue:
    """`dataclasses.replace(obj, **changes)`."""
    if not isinstance(obj, DataclassValue):
        raise type_error(f"dataclasses.replace() needs a dataclass instance, got "
                         f"{describe(obj)}")
    names = field_names(obj.cls)
    for n in changes:
        if n not in names:
            raise type_error(f"dataclass {obj.cls.__qualname__} has no field '{n}' (its "
                             f"fields: {', '.join(names)})")
    return construct(obj.cls, [], {**dict(zip(names, obj.fields)), **changes})


def from_python(x: Any) -> Any:
    """A compile-time Python value as kernels hold it: frozen dataclass instances (a
    global's, a field default's) become `DataclassValue`s."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and \
            x.__dataclass_params__.frozen and not _ours(type(x)):
        return DataclassValue(type(x), tuple(from_python(getattr(x, f.name))
                                             for f in dataclasses.fields(x)))
    if type(x) is tuple:
        items = tuple(from_python(i) for i in x)
        return x if all(a is b for a, b in zip(items, x)) else items   # (`is` keeps working)
    return x


def _ours(cls: type) -> bool:
    """tileir's own dataclasses (values, annotations), which are not the user's data."""
    return (cls.__module__ or "").split(".")[0] == "tileir"


def equality(symbol: str, a: DataclassValue, b: Any, compare_items) -> Any:
    """`a == b` / `a != b` by the generated `__eq__`: another class compares unequal,
    the same class field by field (`compare_items(x_tuple, y_tuple)` for ==)."""
    cls = a.cls
    eq = cls.__dict__.get("__eq__")
    if not cls.__dataclass_params__.eq or eq is None or not _generated(eq):
        raise type_error(f"{cls.__qualname__} instances compare only with the __eq__ the "
                         f"dataclasses module generates (eq=True)")
    if not isinstance(b, DataclassValue) or b.cls is not cls:
        return symbol == "!="
    return compare_items(symbol, a.fields, b.fields)


def _generated(fn: Any) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and (code.co_filename == "<string>" or
                                 code.co_qualname.startswith("__create_fn__"))
