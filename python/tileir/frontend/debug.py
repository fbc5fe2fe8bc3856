"""Trace-time rules of the debugging calls: `printf`, `print` (and the builtin
`print` in kernels), `assert_` — cuTile's names and semantics.

`printf(format, *args)` keeps the user's C conversions; `print(*args, sep, end)`
builds one as cuTile does, by `str()` of each argument:

* a tile or scalar prints with `%d` (ints, bools) or `%f` (floats); in an f-string
  `{t:>6.3f}` maps the Python spec to printf (`[<>^][+- ][#][0][width][.prec][type]`:
  `<` is printf's `-`, `>` and `^` right-align, as cuTile maps them);
* a tuple prints as Python shows one, `(a, b)`, its items by `repr()` (runtime
  ones formatted), a dataclass instance as its generated repr `Cfg(a=..., b=...)`,
  a dtype as `float32`;
* other compile-time values print their Python `str()`, except that in an f-string
  a number is formatted as printf would (cuTile's constants are scalars there:
  `{0.5}` shows `0.500000`, `{True}` shows `1`).

Both become one `tile.print`: once per block, a tile as `[v, v, ...]`.
`assert_(cond, message)` becomes `tile.assert` with the message prefixed by the
user's file:line, which the GPU prints before it traps.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from .. import dtypes as dt
from ..errors import TileTypeError
from tileir.dialect import debug as debug_ops
from tileir.dialect.debug import PRINTF_CONVERSION
from .emit import as_value, cast, is_number, loc, python_dtype, type_error
from .intrinsics import rule
from .values import HANDLES, DataclassValue, TileValue, describe

# A Python format spec printf can follow (cuTile's PrintfValidator._py_spec_pattern)
_SPEC = re.compile(r"(?P<align>[<>^])?(?P<sign>[+ -])?(?P<alt>#)?(?P<zero>0)?(?P<width>\d+)?"
                   r"(?:\.(?P<precision>\d+))?(?P<kind>[diouxXeEfFgGaA])?")


def _printable(v) -> TileValue:
    if is_number(v):
        v = as_value(v)
    if not isinstance(v, TileValue):
        raise type_error(f"only tiles and scalars print at run time, got {describe(v)}")
    if v.dtype.restricted:
        raise type_error(f"{v.dtype.name} does not print; astype it to float32 first")
    return v


def conversion_for(v: TileValue, spec: str = "") -> str:
    """The C conversion printing `v` for a Python format spec ('' -> %d / %f)."""
    return _conversion(v.dtype, spec, v.describe())


def _conversion(d: dt.DType, spec: str, what: str) -> str:
    m = _SPEC.fullmatch(spec)
    if m is None:
        raise type_error(f"format spec {spec!r} has no printf equivalent (use "
                         f"[<>^][+- ][#][0][width][.precision][type], type one of "
                         f"diouxXeEfFgGaA)")
    flags = ("-" if m["align"] == "<" else "") + (m["sign"] if m["sign"] in ("+", " ") else "")
    flags += (m["alt"] or "") + ("0" if m["zero"] and m["align"] != "<" else "")
    precision = f".{m['precision']}" if m["precision"] is not None else ""
    kind = m["kind"] or ("f" if d.is_float else "d")
    if kind in "diuoxX" and d.is_float:
        raise type_error(f"format spec {spec!r} prints integers, got {what}")
    if kind in "eEfFgGaA" and not d.is_float:
        raise type_error(f"format spec {spec!r} prints floats, got {what}")
    return f"%{flags}{m['width'] or ''}{precision}{kind}"


def _literal(text: str) -> str:
    return text.replace("%", "%%")


def emit_print(fmt: str, values: list[TileValue]) -> None:
    """`tile.print` ops for `fmt`: one per conversion (with its value), then the rest of
    the text; all but the last say `more`."""
    pieces, pos = [], 0
    for m in re.finditer(PRINTF_CONVERSION + "|%%", fmt):
        if m.group(0) != "%%":
            pieces.append(fmt[pos:m.end()])
            pos = m.end()
    if len(pieces) != len(values):
        raise type_error(f"format {fmt!r} has {len(pieces)} conversions for {len(values)} "
                         f"values")
    tail = fmt[pos:]
    for k, (piece, v) in enumerate(zip(pieces, values)):
        if v.dtype.is_bool:
            v = cast(v, dt.int32)
        last = k == len(pieces) - 1 and not tail
        debug_ops.PrintOp(piece, [v.value], more=not last)
    if tail or not pieces:
        debug_ops.PrintOp(tail, [], more=False)


@rule("printf")
def _printf(format, args):
    if not isinstance(format, str):
        raise type_error(f"printf's format must be a compile-time string, got {describe(format)}")
    values = [_printable(a) for a in args]
    convs = re.findall(PRINTF_CONVERSION + "|%%", format)
    convs = [c for c in convs if c != "%%"]
    if len(convs) != len(values):
        raise type_error(f"printf format {format!r} has {len(convs)} conversions for "
                         f"{len(values)} values")
    for c, v in zip(convs, values):
        if c[-1] in "diuoxX" and v.dtype.is_float or c[-1] in "eEfFgGaA" and not v.dtype.is_float:
            raise type_error(f"conversion {c} does not print {v.describe()}")
    emit_print(format, values)
    return None


class Text:
    """A printed text being built: a printf format (literal text escaped) and the
    runtime values its conversions print."""

    def __init__(self):
        self.format: list[str] = []
        self.values: list[TileValue] = []

    def literal(self, text: str) -> None:
        self.format.append(_literal(text))

    def value(self, v: TileValue, spec: str = "") -> None:
        self.values.append(_printable(v))
        self.format.append(conversion_for(v, spec))

    def put_str(self, v) -> None:
        """`str(v)`, as cuTile's print shows each argument."""
        if isinstance(v, str):
            self.literal(v)
        elif isinstance(v, (tuple, DataclassValue, TileValue)):
            self.put_repr(v)
        else:
            self.literal(str(_compile_time(v)))

    def put_repr(self, v) -> None:
        """`repr(v)`: how a tuple shows its items (runtime values formatted)."""
        if isinstance(v, TileValue):
            self.value(v)
        elif isinstance(v, tuple):
            self.literal("(")
            for i, item in enumerate(v):
                self.literal(", " if i else "")
                self.put_repr(item)
            self.literal(",)" if len(v) == 1 else ")")
        elif isinstance(v, DataclassValue):
            self.put_dataclass(v)
        elif isinstance(v, (bool, int, float)):
            self.literal(str(v))                  # cuTile shows constants' str() here
        elif isinstance(v, dt.DType):
            self.literal(f"<DType '{v.name}'>")   # (cuTile's repr of a dtype)
        else:
            self.literal(repr(_compile_time(v)))

    def put_dataclass(self, v: DataclassValue) -> None:
        cls = v.cls
        custom = [m for m in ("__repr__", "__str__") if m in cls.__dict__ and
                  not (m == "__repr__" and cls.__dataclass_params__.repr)]
        if custom:
            raise type_error(f"{cls.__qualname__} defines {custom[0]}, which print cannot run "
                             f"in a kernel; it shows dataclass instances as their generated "
                             f"repr")
        if not cls.__dataclass_params__.repr:
            return self.literal(f"<{cls.__qualname__} object>")
        self.literal(f"{cls.__qualname__}(")
        shown = [(f, x) for f, x in zip(dataclasses.fields(cls), v.fields) if f.repr]
        for i, (f, x) in enumerate(shown):
            self.literal(f"{', ' if i else ''}{f.name}=")
            self.put_repr(x)
        self.literal(")")

    def put_format(self, v, spec: str, conversion: int) -> None:
        """An f-string's `{v!c:spec}`."""
        if conversion in (ord("s"), ord("r")) and isinstance(v, TileValue) and spec:
            raise type_error(f"an f-string cannot apply both !{chr(conversion)} and a format "
                             f"spec to {v.describe()}")
        if conversion == ord("r"):
            return self.put_repr(v) if not spec else self.literal(
                _python_format(repr(_compile_time(v)), spec))
        if conversion == ord("a"):
            raise type_error("f-string conversion !a is not supported in kernels")
        if isinstance(v, TileValue):
            return self.value(v, spec) if conversion != ord("s") else self.put_str(v)
        if conversion != ord("s") and isinstance(v, (bool, int, float)):
            return self.literal(_printf_constant(v, spec))
        if not spec:
            return self.put_str(v)
        self.literal(_python_format(str(v) if conversion == ord("s") else _compile_time(v),
                                    spec))

    def emit(self) -> None:
        emit_print("".join(self.format), self.values)


def _compile_time(v):
    if isinstance(v, HANDLES):
        raise type_error(f"only tiles, scalars and compile-time values print, got "
                         f"{describe(v)}")
    return v


def _python_format(v, spec: str) -> str:
    try:
        return format(v, spec)
    except (TypeError, ValueError) as e:
        raise type_error(f"cannot format {describe(v)} with spec {spec!r}: {e}") from None


def _printf_constant(v, spec: str) -> str:
    """A compile-time number in an f-string, as printf shows it (cuTile prints such a
    constant as a scalar): `{n:>4d}` -> `%4d` applied to n."""
    conversion = _conversion(python_dtype(v), spec, describe(v))
    return conversion % (int(v) if isinstance(v, bool) else v)


def compile_print(compiler, node: ast.Call) -> None:
    """`print(*args, sep=' ', end='\\n')` in a kernel (builtin or tileir's)."""
    options = {"sep": " ", "end": "\n"}
    for k in node.keywords:
        if k.arg not in options:
            raise compiler.error(TileTypeError, k, f"print() takes sep= and end=, not {k.arg}=")
        value = compiler.expr(k.value)
        if not isinstance(value, str):
            raise compiler.error(TileTypeError, k, f"print's {k.arg} must be a compile-time "
                                 f"string, got {describe(value)}")
        options[k.arg] = value
    text = Text()
    for i, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred):
            raise compiler.error(TileTypeError, arg, "print(*args) is not supported in kernels")
        text.literal(options["sep"] if i else "")
        if isinstance(arg, ast.JoinedStr):
            put_fstring(compiler, text, arg)
        else:
            value = compiler.expr(arg)
            with compiler.at(arg):
                text.put_str(value)
    text.literal(options["end"])
    with compiler.at(node):
        text.emit()


def put_fstring(compiler, text: Text, node: ast.JoinedStr) -> None:
    for part in node.values:
        if isinstance(part, ast.Constant):
            text.literal(str(part.value))
            continue
        spec = ""
        if part.format_spec is not None:
            spec = "".join(str(compiler.expr(s.value)) if isinstance(s, ast.FormattedValue)
                           else s.value for s in part.format_spec.values)
        value = compiler.expr(part.value)
        with compiler.at(part.value):
            text.put_format(value, spec, part.conversion)


@rule("assert_")
def _assert(cond, message):
    if message is not None and not isinstance(message, str):
        raise type_error(f"assert_'s message must be a compile-time string, got "
                         f"{describe(message)}")
    if isinstance(cond, bool):
        c = as_value(cond)
    elif isinstance(cond, TileValue) and cond.dtype.is_bool:
        c = cond
    else:
        raise type_error(f"assert_ needs a bool tile, got {describe(cond)}")
    where = loc()
    prefix = ""
    if where.is_a_file():
        prefix = f"{where.filename}:{where.start_line}: "
    debug_ops.AssertOp(c.value, f"{prefix}assertion failed{': ' + message if message else ''}")
    return None


@rule("grid_dependency_control_wait")
def _gdc_wait():
    debug_ops.GridDependencyOp("wait")
    return None


@rule("grid_dependency_control_launch_dependents")
def _gdc_launch():
    debug_ops.GridDependencyOp("launch_dependents")
    return None
