"""Compile-time evaluation in kernels: `static_eval`, `static_iter`, `static_exception`.

`static_eval(expr)` runs `expr` as plain Python while the kernel is compiled, in
the kernel's scope: compile-time values (constants, shapes, dtypes, tuples) are
themselves, runtime values (tiles, arrays) appear as `RuntimeProxy`s whose
`shape`, `dtype` and `ndim` can be read.  A proxy may be the result, which then
is the runtime value again.  `static_iter(iterable)` drains such an evaluation
into at most `MAX_ITEMS` items and the `for` body is compiled once per item.
An exception raised inside becomes a located `TileStaticEvalError`; `raise
static_exception(exc)` raises `exc` at compile time as `StaticException`.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import StaticException, TileStaticEvalError
from .values import ArrayValue, TileValue

MAX_ITEMS = 1000


class RuntimeProxy:
    """A runtime value seen from compile-time Python: its shape and dtype, nothing else."""

    __slots__ = ("_value",)

    def __init__(self, value: TileValue | ArrayValue):
        object.__setattr__(self, "_value", value)

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def shape(self):
        if isinstance(self._value, ArrayValue):
            raise TypeError("an array's shape is known only at run time")
        return self._value.shape

    def __getattr__(self, name):
        raise TypeError(f"a runtime value ({self._value.describe()}) has no compile-time "
                        f"attribute '{name}' (shape, dtype and ndim are known)")

    def __bool__(self):
        raise TypeError(f"the truth of a runtime value ({self._value.describe()}) is not "
                        f"known at compile time")

    def __repr__(self) -> str:
        return f"<runtime {self._value.describe()}>"


def _to_python(v: Any) -> Any:
    if isinstance(v, (TileValue, ArrayValue)):
        return RuntimeProxy(v)
    if isinstance(v, tuple):
        return tuple(_to_python(x) for x in v)
    return v


def _from_python(v: Any) -> Any:
    if isinstance(v, RuntimeProxy):
        return v._value
    if isinstance(v, (tuple, list)):
        return tuple(_from_python(x) for x in v)
    return v


def evaluate(node: ast.expr, scope: dict[str, Any], globals_: dict[str, Any], where: str,
             loc) -> Any:
    """`node` evaluated as Python at compile time, runtime values as proxies."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.NamedExpr):
            raise TileStaticEvalError(f"assignment expressions are not allowed in {where}", loc)
    code = compile(ast.Expression(body=node), "<static_eval>", "eval")
    local = {k: _to_python(v) for k, v in scope.items()}
    try:
        return _from_python(eval(code, globals_, local))     # noqa: S307 (the user's own code)
    except TileStaticEvalError:
        raise
    except Exception as e:                                    # the user's Python raised
        raise TileStaticEvalError(f"Exception was raised inside {where} "
                                  f"({type(e).__name__}: {e})", loc) from None


def iterate(node: ast.expr, scope, globals_, loc) -> list[Any]:
    """The items of `static_iter(node)`: at most MAX_ITEMS."""
    it = evaluate(node, scope, globals_, "static_iter", loc)
    try:
        iterator = iter(it)
    except TypeError:
        raise TileStaticEvalError(f"static_iter needs an iterable, got {type(it).__name__}",
                                  loc) from None
    items = []
    for x in iterator:
        if len(items) == MAX_ITEMS:
            raise TileStaticEvalError(f"static_iter stops at {MAX_ITEMS} items", loc)
        items.append(_from_python(x))
    return items


def raise_static(exc: Any, loc) -> None:
    """`raise static_exception(exc)`: `exc` raised at compile time as StaticException."""
    if isinstance(exc, type) and issubclass(exc, BaseException):
        exc = exc()
    if not isinstance(exc, BaseException):
        raise TileStaticEvalError(f"static_exception needs an exception, got "
                                  f"{type(exc).__name__}", loc)
    text = str(exc)
    raise StaticException(f"Exception was raised at compile time ({type(exc).__name__}"
                          f"{': ' + text if text else ''})", loc)
