"""How a function's parameters become IR: each parameter's kind (`specialization.py`:
an array, a scalar, a list, a tuple, a view's parts or a compile-time value), the IR
arguments of its leaves and their names, and the values a body sees for them; the
same for a helper's arguments at a call.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from .. import dtypes as dt
from ..specialization import (ArrayParam, ListParam, Param, ScalarParam, TableListParam,
                              TupleParam)
from . import emit, structured, views
from .values import (ArrayValue, ForeignPointerValue, ListValue, TableListValue, TileValue,
                     describe)


def result_item(x: Any) -> Any:
    """A function result's item in its template: numbers become results, and so does a
    foreign pointer (its i64, `_as_pointer` in the caller); other compile-time values
    stay in the template."""
    if emit.is_number(x):
        return emit.as_value(x)
    if isinstance(x, ForeignPointerValue):
        return TileValue(x.value, x.dtype, ())
    return x


def arg_attrs(kind: "Param") -> ir.DictAttr:
    attrs = {}
    if isinstance(kind, ArrayParam):
        for flag in ("aligned", "large"):
            if getattr(kind, flag):
                attrs[f"tile.{flag}"] = ir.UnitAttr.get()
    return ir.DictAttr.get(attrs)


def classify_value(v: Any) -> Any:
    """How a traced value enters a helper: as IR arguments (an array, a scalar, or a
    view's parts) or as a compile-time value."""
    view = views.param_kind(v, array_kind)
    if view is not None:
        return view
    if isinstance(v, ArrayValue):
        return array_kind(v)
    if isinstance(v, TableListValue):
        return TableListParam(v.element)
    if isinstance(v, ListValue):
        return ListParam(tuple(array_kind(a) for a in v.elements))
    if isinstance(v, TileValue):
        return ScalarParam(v.dtype, v.shape)
    if isinstance(v, ForeignPointerValue):      # an i64 argument of its pointer dtype
        return ScalarParam(v.dtype)
    kind = structured.lift(v, classify_value)
    if kind is not None:
        return kind
    if not emit.is_hashable(v):
        raise emit.type_error(f"{describe(v)} cannot be passed to a helper")
    return v


def array_kind(a: ArrayValue) -> ArrayParam:
    return ArrayParam(a.dtype, a.ndim, static_shape=a.static_shape,
                      static_strides=a.static_strides)


def leaves(kind: Any) -> list[Param]:
    """The IR arguments a parameter of `kind` takes (none for a compile-time value)."""
    if isinstance(kind, Param):
        return [kind]
    if isinstance(kind, ListParam):
        return list(kind.elements)
    if isinstance(kind, TableListParam):
        return [kind.table]
    if isinstance(kind, (views.SliceParam, views.TiledViewParam)):
        return views.leaves(kind)
    if isinstance(kind, TupleParam):
        return [leaf for k in kind.items for leaf in leaves(k)]
    return [x for k in structured.part_kinds(kind) for x in leaves(k)]


def leaf_names(kind: Any, pname: str) -> list[str]:
    """The names of the IR arguments `leaves(kind)`: a kernel's list elements and tuple
    items as the launch's errors name them (`xs[1]`, `t[0][1]`), else `pname`."""
    if isinstance(kind, ListParam):
        return [f"{pname}[{i}]" for i in range(len(kind.elements))]
    if isinstance(kind, TupleParam):
        return [n for i, k in enumerate(kind.items) for n in leaf_names(k, f"{pname}[{i}]")]
    return [pname] * len(leaves(kind))


def leaf_values(v: Any, kind: Any) -> list[ir.Value]:
    """The IR values a helper's argument `v` of `kind` passes (`leaves(kind)`)."""
    if not leaves(kind):
        return []
    if isinstance(kind, structured.KINDS):
        return [x for sv, sk in zip(structured.parts(v), structured.part_kinds(kind))
                for x in leaf_values(sv, sk)]
    if isinstance(v, TableListValue):
        return [v.table.value]
    if isinstance(v, ListValue):
        return [a.value for a in v.elements]
    return views.leaf_values(v)


def argument(kind: Any, pname: str, args) -> Any:
    """The value of a parameter of `kind` over the function's next arguments."""
    def array(k: ArrayParam, value: ir.Value) -> ArrayValue:
        return ArrayValue(value, k.dtype, k.ndim, pname, k.static_shape, k.static_strides)
    if isinstance(kind, ArrayParam):
        return array(kind, next(args))
    if isinstance(kind, ScalarParam):
        if kind.dtype.is_foreign_pointer:           # (an i64 argument)
            return ForeignPointerValue(next(args), kind.dtype)
        return TileValue(next(args), kind.dtype, kind.shape)
    if isinstance(kind, ListParam):
        return ListValue(tuple(ArrayValue(next(args), k.dtype, k.ndim, f"{pname}[{i}]",
                                          k.static_shape, k.static_strides)
                               for i, k in enumerate(kind.elements)), pname)
    if isinstance(kind, TableListParam):
        return TableListValue((), pname, table=ArrayValue(next(args), dt.int64, 2, pname),
                              element=kind.element)
    if isinstance(kind, (views.SliceParam, views.TiledViewParam)):
        return views.rebuild(kind, args, array)
    if isinstance(kind, structured.KINDS):
        return structured.rebuild(kind, lambda k: argument(k, pname, args))
    if isinstance(kind, TupleParam):    # a kernel's tuple argument: a tuple, as any other
        return tuple(argument(k, f"{pname}[{i}]", args) for i, k in enumerate(kind.items))
    return kind
