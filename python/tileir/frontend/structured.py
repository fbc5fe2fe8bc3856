"""Helper arguments that are Python structures: tuples (`*args`, a kernel's tuple
arguments), dataclass instances, dicts (`**kwargs`), nested functions and lambdas (with
what they capture), `Slice`s, bound methods and an array's raw memory.

A `@function` helper is its own `func.func`: a runtime value of the caller used in
its body must enter it as an argument, or the body uses a value of another region
(MLIR: "using value defined outside the region").  So an argument's *kind* keeps
the structure (and its compile-time parts, which specialize the helper) and lists
its runtime parts as IR arguments, in order; the helper rebuilds the structure over
its own arguments.

    f(t, s=2)  with  def f(*args, **kw)   ->  args: TupleKind((ScalarParam(i32, (4,)),))
                                              kw:   DictKind((("s", 2),))
    func.func @f(%arg0: tensor<4xi32>)        (the 2 is compiled in)

The leaves (`Param`s, lists, views) are the compiler's: each function here takes the
compiler's function for them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..annotations import Slice
from .closures import Closure, Frame, captures
from .emit import type_error
from .values import BoundMethod, DataclassValue, MethodValue, RawMemoryValue


@dataclasses.dataclass(frozen=True)
class TupleKind:
    items: tuple


@dataclasses.dataclass(frozen=True)
class DataclassKind:
    """An instance of a frozen dataclass (aggregates.py): its class, its fields' kinds."""

    cls: type
    items: tuple


@dataclasses.dataclass(frozen=True)
class DictKind:
    items: tuple                # ((key, kind), ...) in the dict's order


@dataclasses.dataclass(frozen=True)
class SliceKind:
    start: Any
    length: Any


@dataclasses.dataclass(frozen=True)
class MethodKind:
    """A bound method (`tile.astype`, `view.load`): its receiver is an argument."""

    name: str
    receiver: Any


@dataclasses.dataclass(frozen=True)
class DataclassMethodKind:
    """A dataclass instance's method (`cfg.scaled`): its function and its receiver."""

    function: Any
    receiver: Any


@dataclasses.dataclass(frozen=True)
class RawMemoryKind:
    """An array's raw memory (`get_raw_memory()`): its 1-d raw array is the argument."""

    array: Any


@dataclasses.dataclass(frozen=True, eq=False)
class _Node:
    """An AST node compared by identity (a kind must hash)."""

    node: Any

    def __eq__(self, other):
        return isinstance(other, _Node) and other.node is self.node

    def __hash__(self):
        return id(self.node)


@dataclasses.dataclass(frozen=True)
class ClosureKind:
    """A nested function: its code, and the kinds of its defaults and of the names it
    reads from the function it was defined in (their values at the call)."""

    node: _Node
    src: Any
    defaults: tuple
    kw_defaults: tuple          # ((name, kind), ...)
    captured: tuple             # ((name, kind), ...)


KINDS = (TupleKind, DataclassKind, DictKind, SliceKind, MethodKind, DataclassMethodKind,
         ClosureKind, RawMemoryKind)


def lift(v: Any, classify: Callable[[Any], Any], _active: tuple = ()) -> Any:
    """The kind of a structured value `v`, its parts classified by `classify`; None
    when `v` is not one.  A tuple of compile-time values stays itself (as before)."""
    def sub(x):
        return classify(x) if not isinstance(x, Closure) else lift(x, classify, _active)
    if isinstance(v, tuple):
        items = tuple(sub(x) for x in v)
        return v if all(k is x for k, x in zip(items, v)) else TupleKind(items)
    if isinstance(v, DataclassValue):       # (always a kind: instances compare by identity)
        return DataclassKind(v.cls, tuple(sub(x) for x in v.fields))
    if isinstance(v, dict):
        return DictKind(tuple((k, sub(x)) for k, x in v.items()))
    if isinstance(v, Slice):
        return SliceKind(sub(v.start), sub(v.length))
    if isinstance(v, BoundMethod):
        return MethodKind(v.name, sub(v.receiver))
    if isinstance(v, MethodValue):
        return DataclassMethodKind(v.function, sub(v.receiver))
    if isinstance(v, RawMemoryValue):
        return RawMemoryKind(classify(v.array))
    if isinstance(v, Closure):
        if v in _active:
            raise type_error(f"{v.describe()} refers to itself: a recursive nested function "
                             f"cannot be passed to a helper")
        inner = _active + (v,)

        def part(x):
            return classify(x) if not isinstance(x, Closure) else lift(x, classify, inner)
        return ClosureKind(_Node(v.node), v.src, tuple(part(x) for x in v.defaults),
                           tuple((k, part(x)) for k, x in v.kw_defaults),
                           tuple((k, part(x)) for k, x in captures(v)))
    return None


def parts(v: Any) -> list:
    """The values inside structured `v`, in the order `lift` lists their kinds."""
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, DataclassValue):
        return list(v.fields)
    if isinstance(v, dict):
        return list(v.values())
    if isinstance(v, Slice):
        return [v.start, v.length]
    if isinstance(v, (BoundMethod, MethodValue)):
        return [v.receiver]
    if isinstance(v, RawMemoryValue):
        return [v.array]
    if isinstance(v, Closure):
        return [*v.defaults, *(x for _, x in v.kw_defaults), *(x for _, x in captures(v))]
    return []


def part_kinds(kind: Any) -> list:
    if isinstance(kind, (TupleKind, DataclassKind)):
        return list(kind.items)
    if isinstance(kind, DictKind):
        return [k for _, k in kind.items]
    if isinstance(kind, SliceKind):
        return [kind.start, kind.length]
    if isinstance(kind, (MethodKind, DataclassMethodKind)):
        return [kind.receiver]
    if isinstance(kind, RawMemoryKind):
        return [kind.array]
    if isinstance(kind, ClosureKind):
        return [*kind.defaults, *(k for _, k in kind.kw_defaults),
                *(k for _, k in kind.captured)]
    return []


def rebuild(kind: Any, argument: Callable[[Any], Any]) -> Any:
    """The value of structured `kind` in the helper, each part from `argument(kind)`."""
    vals = [argument(k) for k in part_kinds(kind)]
    if isinstance(kind, TupleKind):
        return tuple(vals)
    if isinstance(kind, DataclassKind):
        return DataclassValue(kind.cls, tuple(vals))
    if isinstance(kind, DictKind):
        return {k: v for (k, _), v in zip(kind.items, vals)}
    if isinstance(kind, SliceKind):
        return Slice(*vals)
    if isinstance(kind, MethodKind):
        return BoundMethod(kind.name, vals[0])
    if isinstance(kind, DataclassMethodKind):
        return MethodValue(kind.function, vals[0])
    if isinstance(kind, RawMemoryKind):
        return RawMemoryValue(vals[0])
    nd, nk = len(kind.defaults), len(kind.kw_defaults)
    names = [k for k, _ in kind.captured]
    frame = Frame(kind.src, name=kind.node.node.name if hasattr(kind.node.node, "name")
                  else "lambda", vars=dict(zip(names, vals[nd + nk:])))
    return Closure(kind.node.node, kind.src, frame, tuple(vals[:nd]),
                   tuple((k, v) for (k, _), v in zip(kind.kw_defaults, vals[nd:nd + nk])))


def spec_key(kind: Any) -> Any:
    """`kind` as part of a specialization's key: constants tagged with their type, so
    that 1, 1.0 and True (equal in Python) specialize apart."""
    if isinstance(kind, (bool, int, float, str)):
        return ("const", type(kind).__name__, kind)
    if isinstance(kind, tuple):
        return ("tuple", tuple(spec_key(k) for k in kind))
    if isinstance(kind, KINDS):
        parts = tuple(spec_key(k) for k in part_kinds(kind))
        return (type(kind).__name__, _node_key(kind), parts)
    return kind


def _node_key(kind) -> Any:
    if isinstance(kind, ClosureKind):
        return (kind.node, tuple(k for k, _ in kind.kw_defaults),
                tuple(k for k, _ in kind.captured))
    if isinstance(kind, DictKind):
        return tuple(k for k, _ in kind.items)
    if isinstance(kind, MethodKind):
        return kind.name
    if isinstance(kind, DataclassKind):
        return kind.cls
    if isinstance(kind, DataclassMethodKind):
        return kind.function
    return None
