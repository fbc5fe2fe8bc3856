"""Trace-time rules of the debugging calls: `printf`, `print` (and the builtin
`print` in kernels), `assert_` — cuTile's names and semantics.

`printf(format, *args)` keeps the user's C conversions; `print(*args, sep, end)`
builds one: a tile or scalar prints with `%d` (ints, bools) or `%f` (floats), an
f-string's `{t:.3f}` with `%.3f`, and compile-time values as their Python text.
Both become one `tile.print`: once per block, a tile as `[v, v, ...]`.
`assert_(cond, message)` becomes `tile.assert` with the message prefixed by the
user's file:line, which the GPU prints before it traps.
"""

from __future__ import annotations

import ast
import re

from .. import dtypes as dt
from ..errors import TileTypeError
from tileir.dialect import debug as debug_ops
from tileir.dialect.debug import PRINTF_CONVERSION
from .emit import as_value, cast, is_number, loc, type_error
from .intrinsics import rule
from .values import TileValue, describe

_SPEC = re.compile(r"^([-+ #0]*)(\d*)(?:\.(\d+))?([diuoxXeEfFgGaA]?)$")


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
    m = _SPEC.match(spec)
    if m is None:
        raise type_error(f"format spec {spec!r} has no printf equivalent (use flags, width, "
                         f".precision and one of diuoxXeEfFgGaA)")
    flags, width, precision, kind = m.groups()
    kind = kind or ("f" if v.dtype.is_float else "d")
    if kind in "diuoxX" and v.dtype.is_float:
        raise type_error(f"format spec {spec!r} prints integers, got {v.describe()}")
    if kind in "eEfFgGaA" and not v.dtype.is_float:
        raise type_error(f"format spec {spec!r} prints floats, got {v.describe()}")
    return f"%{flags}{width}{'.' + precision if precision else ''}{kind}"


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
    pieces: list[str] = []
    values: list[TileValue] = []
    for arg in node.args:
        text = []
        parts = arg.values if isinstance(arg, ast.JoinedStr) else [arg]
        for part in parts:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                text.append(_literal(part.value))
                continue
            expr = part.value if isinstance(part, ast.FormattedValue) else part
            spec = ""
            if isinstance(part, ast.FormattedValue) and part.format_spec is not None:
                spec = "".join(str(compiler.expr(s.value)) if isinstance(s, ast.FormattedValue)
                               else s.value for s in part.format_spec.values)
            with compiler.at(expr):
                v = compiler.expr(expr)
                if isinstance(v, TileValue):
                    values.append(_printable(v))
                    text.append(conversion_for(v, spec))
                else:                                  # compile-time: its Python text
                    text.append(_literal(format(v, spec) if spec else str(v)))
        pieces.append("".join(text))
    with compiler.at(node):
        emit_print(_literal(options["sep"]).join(pieces) + _literal(options["end"]), values)


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
