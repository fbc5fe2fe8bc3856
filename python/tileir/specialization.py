"""How a kernel's arguments become a specialization — without MLIR.

A specialization is one `(name, kind)` per kernel parameter: an `ArrayParam`
(dtype, rank, alignment), a `ScalarParam` (dtype), a `ListParam` (a list of
arrays: its length and each element's `ArrayParam`), a `TupleParam` (a tuple: each
item's kind), or the Python value of a `Constant[...]` parameter, which is compiled
in.  It names one compiled variant
of a kernel, in memory and in the on-disk compile cache, so everything here
must work on a GPU host that has no MLIR.

The *argument spec* syntax (`SPEC_SYNTAX`) writes a specialization on a
command line: `tile-compile --args`, and the hint printed when the cache misses.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import re
from typing import Any, Sequence

import numpy as np

from . import dtypes as dt
from .errors import TileTypeError, TileUnsupportedFeatureError, TileValueError


# ---------------------------------------------------------------------------
# Parameter kinds
# ---------------------------------------------------------------------------
class Param:
    """A runtime parameter of a kernel or helper specialization (an IR argument)."""


@dataclasses.dataclass(frozen=True)
class ArrayParam(Param):
    dtype: dt.DType
    ndim: int
    # 16-byte aligned base, unit last-dim stride, 16-byte multiple other strides:
    # the GPU backend may then use 16-byte vector accesses (docs/gpu-backend.md).
    aligned: bool = False
    # Many times the GPU's L2 cache (runtime.arrays.large): the array streams from
    # DRAM whatever the cache does, and the backend picks its L2 policy for that.
    large: bool = False
    # (axis, value) of shape and stride entries compiled in (cuTile's ArrayAnnotation
    # static_shape_dims / static_stride_dims)
    static_shape: tuple[tuple[int, int], ...] = ()
    static_strides: tuple[tuple[int, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class ScalarParam(Param):
    dtype: dt.DType
    shape: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class ListParam:
    """A list of arrays (cuTile's `ListAnnotation`, or a plain Python list): one IR
    array argument per element, all of one dtype, rank and compiled-in shape and
    stride entries; each keeps its own alignment.  The kernel specializes on the
    length."""

    elements: tuple[ArrayParam, ...]

    @property
    def element(self) -> ArrayParam:
        return self.elements[0]

    def __len__(self) -> int:
        return len(self.elements)


@dataclasses.dataclass(frozen=True)
class TableListParam:
    """A list of arrays whose length is not compiled in (an exported kernel's
    `ListConstraint`): one IR argument, the list's *table*, an int64 array of shape
    (length, 1 + 2 ndim) whose row i is element i's address, dims and strides (in
    elements), as the kernel ABI passes an array (`tile.list_get`).  Every element
    is described by `element` (its `aligned` promised of all of them)."""

    element: ArrayParam

    @property
    def table(self) -> ArrayParam:
        return ArrayParam(dt.int64, 2)


def typed_key(value: Any) -> Any:
    """A compile-time value as a key that tells apart what Python's `==` merges: 1, True
    and 1.0, -0.0 and 0.0 (floats by their bits; every NaN one key), an IntEnum member
    and its value, a NumPy scalar type and its dtype (others by type and value), also
    inside tuples and `TupleParam`s."""
    cls = value.__class__
    if cls is bool or cls is int:
        return (cls.__name__, value)
    if cls is float:
        return ("float", value.hex())
    if cls is tuple:
        return ("tuple", tuple(typed_key(i) for i in value))
    if cls is TupleParam:
        return value._key()
    return (cls, value)       # np.int32 and np.dtype("int32") are equal, of two types


@dataclasses.dataclass(frozen=True, eq=False)
class TupleParam:
    """A tuple passed at launch (cuTile 1.7's tuple arguments, nested ones too): one kind
    per item, an `ArrayParam`, a `ScalarParam`, a `ListParam`, a `TupleParam`, or the
    value of a `Constant` item, compiled in.  Its runtime leaves become IR arguments
    (named `t[0]`, `t[1][0]`, ...: `leaf_params`), and the kernel sees a Python tuple of
    their values.  Equal when the items are, constants by type too (1, True and 1.0
    differ, as at the top level)."""

    items: tuple

    def _key(self) -> tuple:
        return ("TupleParam", tuple(typed_key(i) for i in self.items))

    def __eq__(self, other) -> bool:
        return isinstance(other, TupleParam) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(("TupleParam", self._key()))


RUNTIME_KINDS = (Param, ListParam, TableListParam, TupleParam)


def leaf_params(kind: Any, name: str) -> list[tuple[str, Param]]:
    """The IR arguments a launch argument of `kind` named `name` becomes, with their
    names: an array or scalar one; a list one per element (`xs[1]`); a list passed as
    a table its table; a tuple its items' (`t[0]`, `t[1][0]`); a constant none."""
    if isinstance(kind, Param):
        return [(name, kind)]
    if isinstance(kind, ListParam):
        return [(f"{name}[{i}]", k) for i, k in enumerate(kind.elements)]
    if isinstance(kind, TableListParam):
        return [(name, kind.table)]
    if isinstance(kind, TupleParam):
        return [leaf for i, k in enumerate(kind.items) for leaf in leaf_params(k, f"{name}[{i}]")]
    return []


def leaf_values(kind: Any, value: Any) -> list[Any]:
    """The launch's values of `leaf_params(kind, ...)`, in order: `value` itself, a list's
    elements, a tuple's items' leaves (its constants dropped)."""
    if isinstance(kind, ListParam):
        return list(value)
    if isinstance(kind, TupleParam):
        return [leaf for k, v in zip(kind.items, value) for leaf in leaf_values(k, v)]
    if isinstance(kind, (Param, TableListParam)):
        return [value]
    return []


@dataclasses.dataclass(frozen=True)
class ConstantAnnotation:
    """Marks a parameter compile-time: `Constant[int]`, or cuTile's
    `Annotated[T, ConstantAnnotation()]` (any int, bool or float when `type` is None)."""

    type: type | None = None

    def __repr__(self) -> str:
        return f"Constant[{self.type.__name__}]" if self.type else "Constant"


class Constant:
    """`Constant[int]` / `Constant[bool]`: a parameter fixed at compile time (specialized)."""

    def __class_getitem__(cls, t):
        # Constant[int|bool|float] checks the value's type; any other T (a dtype, a
        # tuple) takes any compile-time value
        return ConstantAnnotation(t if t in (int, bool, float) else None)


ConstInt = Constant[int]
ConstBool = Constant[bool]


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """An array argument described without data, for compiling ahead of time.

    `aligned=True` promises what docs/gpu-backend.md calls aligned: a 16-byte
    aligned base, unit last-dim stride and 16-byte multiple other strides.
    `large=True` says the array will be many times the GPU's L2 cache (what
    `launch` decides from its size: `runtime.arrays.large`).
    """

    dtype: Any
    ndim: int
    aligned: bool = True
    large: bool = False


# ---------------------------------------------------------------------------
# Classifying arguments
# ---------------------------------------------------------------------------
MAX_DIM = (1 << 31) - 1          # the kernel ABI passes each array dim as an i32


def classify_arg(kname: str, pname: str, annotation: Any, value: Any, gpu: bool) -> Any:
    """The kind of argument `value` for parameter `pname` of kernel `kname`.

    `gpu`: arrays specialize on alignment and size (only the GPU backend uses them;
    the interpreter's variants stay plain so they are shared by all arrays).
    """
    if isinstance(annotation, ConstantAnnotation):
        return _constant_arg(kname, pname, annotation, value)
    from .annotations import (ArrayAnnotation, ListAnnotation, ScalarAnnotation,  # (cycle)
                              TupleAnnotation)
    what = f"argument '{pname}' of kernel '{kname}'"
    if isinstance(value, (tuple, TupleParam)) or isinstance(annotation, TupleAnnotation):
        return _tuple_arg(kname, pname, annotation, value, gpu)
    if isinstance(value, (list, ListParam)) or isinstance(annotation, ListAnnotation):
        return _list_arg(kname, pname, annotation, value, gpu)
    kind = _runtime_kind(kname, pname, value, gpu)
    if annotation is None:
        return kind
    if isinstance(annotation, ScalarAnnotation):     # ScalarInt64
        if not (isinstance(kind, ScalarParam) and kind.dtype.is_int):
            raise TileTypeError(f"{what} is annotated as an integer scalar "
                                f"({annotation.dtype.name}) but is {type(value).__name__}")
        return ScalarParam(annotation.dtype)
    if isinstance(annotation, ArrayAnnotation):
        if not isinstance(kind, ArrayParam):
            raise TileTypeError(f"{what} is annotated as an array but is "
                                f"{type(value).__name__}")
        return _static_dims(what, kind, annotation, value)
    raise TileUnsupportedFeatureError(f"{what}: annotation {annotation!r} is not one tileir "
                                      f"knows")


def _tuple_arg(kname: str, pname: str, annotation: Any, value: Any, gpu: bool) -> TupleParam:
    """A tuple: each item classified as an argument of its own, named `t[i]`, under its
    item annotation (`tuple[int, Constant[int]]`, `tuple[Array, ...]`, or none)."""
    from .annotations import TupleAnnotation
    what = f"argument '{pname}' of kernel '{kname}'"
    if isinstance(value, TupleParam):            # a specialization given back
        return value
    if annotation is not None and not isinstance(annotation, TupleAnnotation):
        raise TileTypeError(f"{what} is a tuple, but its annotation {annotation!r} is not a "
                            f"tuple type; annotate it tuple[...] (or Constant[tuple[...]] "
                            f"to compile its values in), or not at all")
    if not isinstance(value, tuple):
        raise TileTypeError(f"{what} is annotated as a tuple ({annotation!r}) but is "
                            f"{type(value).__name__}; pass a Python tuple")
    if annotation is None:
        items = [None] * len(value)
    elif annotation.each is not None or annotation.items is None:
        items = [annotation.each] * len(value)
    else:
        items = list(annotation.items)
        if len(items) != len(value):
            raise TileTypeError(f"{what} is a tuple of {len(value)} items, but its annotation "
                                f"{annotation!r} has {len(items)}")
    return TupleParam(tuple(classify_arg(kname, f"{pname}[{i}]", a, v, gpu)
                            for i, (a, v) in enumerate(zip(items, value))))


def _list_arg(kname: str, pname: str, annotation: Any, value: Any, gpu: bool) -> ListParam:
    """A list of arrays: every element classified as an array parameter (annotated by the
    ListAnnotation's element, if any), all of one dtype, rank and static entries."""
    from .annotations import ListAnnotation
    what = f"argument '{pname}' of kernel '{kname}'"
    if isinstance(value, ListParam):             # a specialization given back (helpers)
        return value
    if annotation is not None and not isinstance(annotation, ListAnnotation):
        raise TileTypeError(f"{what} is a list, but its annotation {annotation!r} is not a "
                            f"ListAnnotation; lists of arrays are annotated "
                            f"Annotated[list, ListAnnotation(element=ArrayAnnotation(...))] "
                            f"or not at all")
    if not isinstance(value, list):
        raise TileTypeError(f"{what} is annotated as a list of arrays (ListAnnotation) but is "
                            f"{type(value).__name__}; pass a Python list of arrays")
    if not value:
        raise TileValueError(f"{what} is an empty list; a list of arrays needs at least one "
                             f"array (its dtype and rank specialize the kernel)")
    element = annotation.element if annotation is not None else None
    if element is not None and not (element.static_shape_dims or element.static_stride_dims):
        element = None
    kinds = []
    for i, v in enumerate(value):
        if isinstance(v, (list, tuple)) or not (
                isinstance(v, (ArraySpec, ArrayParam))
                or (hasattr(v, "dtype") and hasattr(v, "shape") and not isinstance(v, np.generic))):
            raise TileTypeError(f"{what}: element {i} is {type(v).__name__}; a list argument "
                                f"holds arrays only (NumPy, torch, cupy), all of one dtype "
                                f"and rank")
        kind = _runtime_kind(kname, f"{pname}[{i}]", v, gpu)
        if element is not None:
            kind = _static_dims(f"{what}, element {i}", kind, element, v)
        kinds.append(kind)
    first = kinds[0]
    for i, k in enumerate(kinds[1:], 1):
        if (k.dtype, k.ndim) != (first.dtype, first.ndim):
            raise TileTypeError(f"{what}: element {i} is a {k.ndim}-d {k.dtype.name} array but "
                                f"element 0 is a {first.ndim}-d {first.dtype.name} one; the "
                                f"arrays of a list share one dtype and rank")
        for field, name in (("static_shape", "shape"), ("static_strides", "stride")):
            a, b = dict(getattr(first, field)), dict(getattr(k, field))
            for axis in sorted(a):
                if a[axis] != b.get(axis):
                    raise TileValueError(f"{what}: the arrays vary in static {name} at axis "
                                         f"{axis} (element 0: {a[axis]}, element {i}: "
                                         f"{b.get(axis)}); static_{name}_dims entries are "
                                         f"compiled in, once for the whole list")
    return ListParam(tuple(kinds))


def _static_dims(what: str, kind: ArrayParam, ann: Any, value: Any) -> ArrayParam:
    """An array parameter whose annotated shape and stride entries are compiled in."""
    if not (ann.static_shape_dims or ann.static_stride_dims):
        return kind
    if isinstance(value, (ArraySpec, ArrayParam)):
        raise TileValueError(f"{what}: static_shape_dims/static_stride_dims specialize on "
                             f"the array's own shape and strides; give an array, not a "
                             f"description")
    from .runtime import arrays
    info = arrays.describe(value)

    def pick(dims, values, field):
        out = {}
        for d in dims:
            if not -kind.ndim <= d < kind.ndim:
                raise TileValueError(f"{what}: {field} names dim {d} of a {kind.ndim}-d array")
            out[d % kind.ndim] = int(values[d])
        return tuple(sorted(out.items()))

    return dataclasses.replace(
        kind, static_shape=pick(ann.static_shape_dims, info.shape, "static_shape_dims"),
        static_strides=pick(ann.static_stride_dims, info.strides, "static_stride_dims"))


def _constant_arg(kname: str, pname: str, ann: ConstantAnnotation, value: Any) -> Any:
    """The compile-time value of a Constant parameter, as the kernel sees it (and as it
    keys the specialization): NumPy scalars become Python numbers, foreign dtypes
    (`np.int32`, `np.dtype("f2")`, `torch.float16`) become ours."""
    if isinstance(value, np.generic):
        value = value.item()
    _refuse_dataclass(kname, pname, value)
    if ann.type is None:
        value = _native_dtypes(kname, pname, value)
        ok = _compile_time_value(value)
    else:
        ok = isinstance(value, ann.type) and (ann.type is bool or not isinstance(value, bool)) \
            or (ann.type is float and isinstance(value, int) and not isinstance(value, bool))
    if not ok:
        raise TileTypeError(f"argument '{pname}' of kernel '{kname}' is {ann!r} but got "
                            f"{type(value).__name__} {value!r}")
    return value


def _compile_time_value(value: Any) -> bool:
    """What a Constant parameter without a type may be (cuTile's `classify_constant`):
    numbers, strings, None, enum members, dtypes and tuples of those (what kernels
    compute with at compile time)."""
    if isinstance(value, tuple):
        return all(_compile_time_value(v) for v in value)
    return value is None or isinstance(value, (int, bool, float, str, enum.Enum, dt.DType))


def _native_dtypes(kname: str, pname: str, value: Any) -> Any:
    """`value` with each foreign dtype in it replaced by ours."""
    if isinstance(value, tuple):
        return tuple(_native_dtypes(kname, pname, v) for v in value)
    if not dt.is_foreign(value):
        return value
    d = dt.from_any(value)
    if d is None:
        raise TileTypeError(f"argument '{pname}' of kernel '{kname}' is the dtype {value!r}, "
                            f"which has no tileir dtype")
    return d


def _refuse_dataclass(kname: str, pname: str, value: Any) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and \
            not type(value).__module__.startswith("tileir"):      # (a DType is one)
        raise TileTypeError(f"argument '{pname}' of kernel '{kname}' is a "
                            f"{type(value).__qualname__} dataclass instance; kernels do not "
                            f"take dataclass arguments (cuTile 1.7 refuses them too): pass "
                            f"its fields as separate arguments, or build it in the kernel")


def _runtime_kind(kname: str, pname: str, value: Any, gpu: bool) -> Any:
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return ScalarParam(dt.bool_)
    if isinstance(value, int):
        return ScalarParam(dt.int32 if -(1 << 31) <= value < (1 << 31) else dt.int64)
    if isinstance(value, float):
        return ScalarParam(dt.float32)
    if isinstance(value, np.generic):
        d = dt.from_numpy(value.dtype)
        if d is None:
            raise TileTypeError(f"argument '{pname}' of kernel '{kname}': unsupported scalar "
                                f"dtype {value.dtype}")
        return ScalarParam(d)
    if isinstance(value, ScalarParam) and value.shape == ():
        return value
    _refuse_dataclass(kname, pname, value)
    if isinstance(value, (ArraySpec, ArrayParam)):
        return _described_array(kname, pname, value, gpu)
    if hasattr(value, "dtype") and hasattr(value, "shape") and not isinstance(value, type):
        d = dt.from_any(value.dtype)
        if d is None:
            raise TileTypeError(f"argument '{pname}' of kernel '{kname}': arrays of "
                                f"{value.dtype} are not supported")
        aligned = large = False
        if gpu:
            for axis, n in enumerate(value.shape):
                if n > MAX_DIM:
                    raise TileValueError(
                        f"argument '{pname}' of kernel '{kname}': dim {axis} has {n} "
                        f"elements; a kernel indexes an array dim with 32 bits (at most "
                        f"{MAX_DIM}): split the array, or launch over a view of it")
            from .runtime import arrays
            info = arrays.describe(value)
            aligned, large = arrays.aligned(info), arrays.large(info)
        return ArrayParam(d, len(value.shape), aligned, large)
    raise TileTypeError(f"argument '{pname}' of kernel '{kname}' is {type(value).__name__}; "
                        f"kernels take arrays (NumPy, torch, cupy), Python lists of arrays, "
                        f"Python numbers, tuples of those and Constant[...] values")


def _described_array(kname: str, pname: str, spec: ArraySpec | ArrayParam,
                     gpu: bool) -> ArrayParam:
    """An array given by its description (ahead-of-time compiles): no data to inspect."""
    d = dt.from_any(spec.dtype)
    if d is None:
        raise TileTypeError(f"argument '{pname}' of kernel '{kname}': unknown dtype "
                            f"{spec.dtype!r}")
    if isinstance(spec.ndim, bool) or not isinstance(spec.ndim, int) or spec.ndim < 0:
        raise TileValueError(f"argument '{pname}' of kernel '{kname}': an array's ndim must "
                             f"be an int >= 0, got {spec.ndim!r}")
    return ArrayParam(d, spec.ndim, bool(spec.aligned) and gpu,
                      bool(getattr(spec, "large", False)) and gpu)


# ---------------------------------------------------------------------------
# Argument specs (the command-line spelling of a specialization)
# ---------------------------------------------------------------------------
def _short_name(d: dt.DType) -> str:
    if d.is_bool:
        return "bool"
    return f"u{d.bits}" if d.kind == "uint" else d.mlir


SPEC_DTYPES = {_short_name(d): d for d in dt.ALL}
SPEC_SYNTAX = f"""\
argument specs, one per kernel parameter, separated by commas:
  bf16[2]          an array: dtype[ndim], aligned (16-byte base and row strides)
  f32[1]!u         an array that is not aligned (the kernel takes its scalar path)
  bf16[2]!L        an array many times the GPU's L2 cache (launch() says `!L` for
                   those: at least 4x the L2 size); flags combine: f32[1]!uL
  [bf16[2]]*3      a list of 3 arrays (a list parameter); [f32[1];f32[1]!u] spells
                   out each element
  (i32;f32[1];8)   a tuple (a tuple parameter): its items' specs, separated by ';'
                   (nested tuples too: (i32;(f32[1];f32[1])))
  i64              a runtime scalar of that dtype
  8192, 0.5, True  a Python literal: the value of a Constant[...] parameter, or a
                   runtime scalar typed as launch() types it (int: i32, or i64 if
                   it does not fit; float: f32; bool: bool)
dtypes: {', '.join(SPEC_DTYPES)}
(or their long names: float32, bfloat16, ...).
"""
_SPEC_NAMES = {**dt.BY_NAME, **SPEC_DTYPES}
_ARRAY_SPEC = re.compile(r"(?P<dtype>\w+)\s*\[\s*(?P<ndim>\d+)\s*\]\s*(?:!(?P<flags>\w*))?")
_LIST_SPEC = re.compile(r"\[(?P<items>[^\[\]]*(?:\[\s*\d+\s*\][^\[\];]*)"
                        r"(?:;[^\[\]]*\[\s*\d+\s*\][^\[\];]*)*)\]\s*(?:\*\s*(?P<count>\d+))?")
_NON_FINITE = {"inf": float("inf"), "+inf": float("inf"), "-inf": float("-inf"),
               "nan": float("nan")}


class ArgSpecError(TileValueError):
    """An argument spec that does not parse; the message shows the spec with a caret."""

    def __init__(self, message: str, text: str, column: int):
        self.text, self.column = text, column
        super().__init__(f"{message}\n    {text}\n    {' ' * column}^")


def format_arg_specs(params: Sequence[tuple[str, Any]]) -> str:
    """The argument spec of a specialization (as `Kernel.classify` returns it)."""
    return ",".join(_format_one(kind) for _, kind in params)


def _format_one(kind: Any) -> str:
    if isinstance(kind, ArrayParam):
        flags = ("" if kind.aligned else "u") + ("L" if kind.large else "")
        return f"{_short_name(kind.dtype)}[{kind.ndim}]{'!' + flags if flags else ''}"
    if isinstance(kind, ScalarParam):
        return _short_name(kind.dtype)
    if isinstance(kind, ListParam):
        specs = {_format_one(k) for k in kind.elements}
        if len(specs) == 1:
            return f"[{specs.pop()}]*{len(kind)}"
        return "[" + ";".join(_format_one(k) for k in kind.elements) + "]"
    if isinstance(kind, TupleParam):
        return "(" + ";".join(_format_one(k) for k in kind.items) + ")"
    if isinstance(kind, tuple):            # a Constant tuple
        return "(" + ";".join(_format_one(k) for k in kind) + ")"
    return repr(kind)                      # a Constant's value: True, 1024, 0.5, inf


def parse_arg_specs(text: str) -> list[Any]:
    """Kernel arguments for `text`: `ArraySpec`s, `ScalarParam`s and Python values, which
    `Kernel.compile(..., target=...)` classifies like the arguments they stand for."""
    if not text.strip():
        return []
    out, start = [], 0
    for piece in text.split(","):      # no spec contains a comma
        column = start + len(piece) - len(piece.lstrip())
        out.append(_parse_one(piece.strip(), len(out) + 1, text, column))
        start += len(piece) + 1
    return out


def _split_items(inner: str, error) -> list[str]:
    """A tuple spec's items: split at the ';' outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth < 0:
                raise error(f"'({inner})': a ')' or ']' without its opening one")
        elif c == ";" and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    if depth:
        raise error(f"'({inner})': a '(' or '[' without its closing one")
    return parts + [inner[start:]]


def _parse_one(token: str, number: int, text: str, column: int) -> Any:
    def error(message: str) -> ArgSpecError:
        return ArgSpecError(f"argument spec {number}: {message}", text, column)

    if not token:
        raise error("empty (two commas in a row?)")
    if token.startswith("(") and token.endswith(")"):
        inner = token[1:-1].strip()
        parts = _split_items(inner, error) if inner else []
        return tuple(_parse_one(t.strip(), number, text, column) for t in parts)
    listed = _LIST_SPEC.fullmatch(token)
    if listed:
        items = [_parse_one(t.strip(), number, text, column)
                 for t in listed["items"].split(";")]
        if not all(isinstance(i, ArraySpec) for i in items):
            raise error(f"'{token}': a list holds array specs only, e.g. [bf16[2]]*3")
        return items * int(listed["count"] or 1)
    array = _ARRAY_SPEC.fullmatch(token)
    if array:
        d = _SPEC_NAMES.get(array["dtype"])
        if d is None:
            raise error(f"unknown dtype '{array['dtype']}'; dtypes are "
                        f"{', '.join(SPEC_DTYPES)} (or their long names, e.g. float32)")
        flags = array["flags"]
        if flags is not None and (not flags or set(flags) - set("uL")
                                  or len(set(flags)) != len(flags)):
            raise error(f"unknown array flags '!{flags}': write !u (not aligned), !L (many "
                        f"times the L2 cache) or both (!uL)")
        flags = flags or ""
        return ArraySpec(d, int(array["ndim"]), aligned="u" not in flags, large="L" in flags)
    if token in _SPEC_NAMES:
        return ScalarParam(_SPEC_NAMES[token])
    if token.lower() in _NON_FINITE:
        return _NON_FINITE[token.lower()]
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, (bool, int, float)):
        return value
    raise error(f"'{token}' is not one: write dtype[ndim] for an array (dtype[ndim]!u if it "
                f"is not aligned, !L if it is many times the L2 cache), a dtype for a "
                f"scalar, or a number, True or False")
