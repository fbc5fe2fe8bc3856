"""Compile-time evaluation in kernels: `static_eval`, `static_iter`, `static_exception`.

`static_eval(expr)` runs `expr` as plain Python while the kernel is compiled, in
the kernel's scope: compile-time values (constants, shapes, dtypes, tuples) are
themselves, runtime values (tiles, arrays) appear as `RuntimeProxy`s whose
`shape`, `dtype` and `ndim` can be read, and dataclass instances are instances of
their class over such values.  As in cuTile, proxies also build expressions with
basic arithmetic: the operators (`+ - * / // % ** & | ^ << >> @`, comparisons,
unary `-` and `~`, `divmod`) and the tileir functions that compute them (`add`,
`minimum`, `less`, ...: `STATIC_EVAL_FUNCTIONS`) emit the runtime ops at the
static_eval's location, so `static_eval(x + 1 if N % 2 == 0 else y - 1)` picks
one expression and compiles only it.  A proxy may be the result, which then is
the runtime value again.  `static_iter(iterable)` drains such an evaluation
into at most `MAX_ITEMS` items and the `for` body is compiled once per item.
An exception raised inside becomes a located `TileStaticEvalError`; `raise
static_exception(exc)` raises `exc` at compile time as `StaticException`.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
from typing import Any

from mlir import ir

from .. import api
from ..errors import StaticException, TileError, TileStaticEvalError
from . import aggregates, compute
from .values import ArrayValue, DataclassValue, TileValue

MAX_ITEMS = 1000

# cuTile's `static_eval_ok` stubs: what a static_eval may call on runtime values
STATIC_EVAL_FUNCTIONS = frozenset(
    "add sub mul truediv floordiv pow mod divmod bitwise_and bitwise_or bitwise_xor "
    "bitwise_lshift bitwise_rshift bitwise_not minimum maximum cdiv greater greater_equal "
    "less less_equal equal not_equal negative matmul".split())


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

    def __repr__(self) -> str:              # as cuTile shows its proxies
        v = self._value
        if isinstance(v, ArrayValue):
            return f"<array[{v.dtype.name}, {v.ndim}-d]>"
        return f"<tile[{v.dtype.name}, {v.shape}]>"

    __hash__ = object.__hash__          # (== builds an expression)


def _operand(x: Any) -> Any:
    """The traced value of an operand of a proxy's operator; None if it cannot be one
    (Python then tries the other side, as for cuTile's Tile)."""
    if isinstance(x, RuntimeProxy):
        return x._value
    if isinstance(x, (bool, int, float)):
        return x
    return None


def _binary(symbol: str, reflected: bool = False):
    def method(self, other):
        y = _operand(other)
        if y is None:
            return NotImplemented
        a, b = (y, self._value) if reflected else (self._value, y)
        if symbol == "@":
            return _proxy(compute.matmul(a, b))
        if symbol == "divmod":
            return _proxy(api_call("divmod", (a, b), {}))
        return _proxy(compute.binary(symbol, a, b))
    return method


for _symbol, _name in (("+", "add"), ("-", "sub"), ("*", "mul"), ("/", "truediv"),
                       ("//", "floordiv"), ("%", "mod"), ("**", "pow"), ("&", "and"),
                       ("|", "or"), ("^", "xor"), ("<<", "lshift"), (">>", "rshift"),
                       ("@", "matmul"), ("divmod", "divmod")):
    setattr(RuntimeProxy, f"__{_name}__", _binary(_symbol))
    setattr(RuntimeProxy, f"__r{_name}__", _binary(_symbol, reflected=True))
for _symbol, _name in (("<", "lt"), ("<=", "le"), (">", "gt"), (">=", "ge"), ("==", "eq"),
                       ("!=", "ne")):
    setattr(RuntimeProxy, f"__{_name}__", _binary(_symbol))
RuntimeProxy.__neg__ = lambda self: _proxy(compute.negate(self._value))
RuntimeProxy.__invert__ = lambda self: _proxy(compute.invert(self._value))
del _symbol, _name


def api_call(name: str, args: tuple, kwargs: dict) -> Any:
    from . import intrinsics            # (cycle: intrinsics' rules import this module)
    return intrinsics.call(name, args, kwargs)


def _static_call(name: str, args: tuple, kwargs: dict) -> Any:
    """A tileir function called inside a static_eval: those of STATIC_EVAL_FUNCTIONS
    compute on proxies, the others cannot run there."""
    if name not in STATIC_EVAL_FUNCTIONS:
        raise TileStaticEvalError(f"{name}() cannot be called inside static_eval; it can "
                                  f"build expressions with operators and "
                                  f"{', '.join(sorted(STATIC_EVAL_FUNCTIONS))}",
                                  ir.Location.current)
    values = tuple(_from_python(a) for a in args)
    return _to_python(api_call(name, values, {k: _from_python(v) for k, v in kwargs.items()}))


def _proxy(v: Any) -> Any:
    return _to_python(v)


def _to_python(v: Any) -> Any:
    if isinstance(v, (TileValue, ArrayValue)):
        return RuntimeProxy(v)
    if isinstance(v, tuple):
        return tuple(_to_python(x) for x in v)
    if isinstance(v, DataclassValue):           # an instance of its class, over proxies
        obj = object.__new__(v.cls)
        for f, x in zip(dataclasses.fields(v.cls), v.fields):
            object.__setattr__(obj, f.name, _to_python(x))
        return obj
    return v


def _from_python(v: Any) -> Any:
    if isinstance(v, RuntimeProxy):
        return v._value
    if isinstance(v, (tuple, list)):
        return tuple(_from_python(x) for x in v)
    if aggregates.is_dataclass_type(type(v)) and v.__dataclass_params__.frozen:
        return DataclassValue(type(v), tuple(_from_python(getattr(v, f.name))
                                             for f in dataclasses.fields(v)))
    return v


def evaluate(node: ast.expr, scope: dict[str, Any], globals_: dict[str, Any], where: str,
             loc, python: bool = False) -> Any:
    """`node` evaluated as Python at compile time, runtime values as proxies; the result
    as the kernel holds it, or with `python` as Python made it (proxies and all)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.NamedExpr):
            raise TileStaticEvalError(f"assignment expressions are not allowed in {where}", loc)
    code = compile(ast.Expression(body=node), "<static_eval>", "eval")
    local = {k: _to_python(v) for k, v in scope.items()}
    try:
        with _calls_allowed():
            value = eval(code, globals_, local)     # noqa: S307 (the user's own code)
            return value if python else _from_python(value)
    except TileError:
        raise
    except Exception as e:                                    # the user's Python raised
        raise TileStaticEvalError(f"Exception was raised inside {where} "
                                  f"({type(e).__name__}: {e})", loc) from None


@contextlib.contextmanager
def _calls_allowed():
    token = api.STATIC_CALL.set(_static_call)
    try:
        yield
    finally:
        api.STATIC_CALL.reset(token)


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
