"""Comparisons in kernels: `==`, `<`, ..., `is`, `in`, and chains of them (cuTile's rules).

* Tiles, scalars and numbers compare element-wise (`compute.binary`), giving bool tiles.
* Compile-time values (strings, enum members, None, dtypes, tuples, numbers) compare by
  Python's rules while the kernel is compiled: `if act == "relu":` picks a branch.
  A dtype compares with `==`/`!=` to ours or to a NumPy/torch dtype.
* Tuples compare `==`/`!=` item by item; items that are runtime scalars give a runtime
  bool (the items' comparisons and-ed), as cuTile does.
* `x in tup` is `x == item` or-ed over the items (a compile-time True stops it); the
  comparisons must be compile-time or scalar.  `k in kw` of a dict (a helper's
  `**kwargs`) looks a compile-time key up.  `not in` is their negation.
* `a < b < c` is `a < b and b < c` with `b` evaluated once; a compile-time False ends
  the chain (the rest is not compiled), runtime results are and-ed (element-wise for
  tiles, where cuTile asks for scalars).
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from .. import dtypes as dt
from . import aggregates, compute
from .aggregates import is_runtime
from .emit import cast, is_number, type_error
from .values import DataclassValue, TileValue, describe

SYMBOLS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
           ast.NotEq: "!="}
_PYTHON = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne}


def compare(op: ast.cmpop, lhs: Any, rhs: Any) -> Any:
    """`lhs op rhs` for one comparison operator of the AST."""
    if isinstance(op, (ast.Is, ast.IsNot)):
        same = lhs is rhs
        return same if isinstance(op, ast.Is) else not same
    if isinstance(op, (ast.In, ast.NotIn)):
        found = contains(lhs, rhs)
        return found if isinstance(op, ast.In) else logical_not(found)
    symbol = SYMBOLS.get(type(op))
    if symbol is None:
        raise type_error(f"comparison '{type(op).__name__}' is not supported")
    return compare_symbol(symbol, lhs, rhs)


def compare_symbol(symbol: str, lhs: Any, rhs: Any) -> Any:
    if isinstance(lhs, dt.DType) or isinstance(rhs, dt.DType):
        if symbol not in ("==", "!="):
            raise type_error("dtypes only compare with == and !=")
        eq = dt.from_any(lhs) == dt.from_any(rhs)
        return eq if symbol == "==" else not eq
    if isinstance(lhs, tuple) and isinstance(rhs, tuple):
        return _compare_tuples(symbol, lhs, rhs)
    if isinstance(lhs, DataclassValue) or isinstance(rhs, DataclassValue):
        if symbol not in ("==", "!="):
            raise type_error(f"operator '{symbol}' does not compare dataclass instances "
                             f"(== and != do)")
        a, b = (lhs, rhs) if isinstance(lhs, DataclassValue) else (rhs, lhs)
        return aggregates.equality(symbol, a, b, _compare_tuples)
    numeric = [is_number(x) or isinstance(x, TileValue) for x in (lhs, rhs)]
    if all(numeric):
        return compute.binary(symbol, lhs, rhs)
    if not is_runtime(lhs) and not is_runtime(rhs):
        return _fold(symbol, lhs, rhs)
    bad = lhs if not numeric[0] else rhs
    raise type_error(f"operator '{symbol}' does not apply to {describe(bad)}")


def _fold(symbol: str, lhs: Any, rhs: Any) -> bool:
    """A comparison of compile-time values, by Python's rules."""
    try:
        return bool(_PYTHON[symbol](lhs, rhs))
    except TypeError:
        raise type_error(f"operator '{symbol}' does not apply to {describe(lhs)} and "
                         f"{describe(rhs)}") from None


def _compare_tuples(symbol: str, lhs: tuple, rhs: tuple) -> Any:
    if not any(is_runtime(x) or isinstance(x, DataclassValue)
               for x in aggregates.leaves_and_dataclasses((lhs, rhs))):
        return _fold(symbol, lhs, rhs)
    if symbol not in ("==", "!="):
        raise type_error(f"operator '{symbol}' does not compare tuples of runtime values "
                         f"(== and != do)")
    if len(lhs) != len(rhs):
        return symbol == "!="
    equal: Any = True
    for a, b in zip(lhs, rhs):
        equal = logical_and(equal, _scalar_result(compare_symbol("==", a, b), "tuple ==",
                                                  a, b))
        if equal is False:
            break
    return equal if symbol == "==" else logical_not(equal)


def _scalar_result(result: Any, what: str, a: Any, b: Any) -> Any:
    if isinstance(result, TileValue) and not result.is_scalar:
        raise type_error(f"{what} compares scalars, but {describe(a)} and {describe(b)} "
                         f"compare element-wise to {result.describe()}")
    return result


def contains(x: Any, container: Any) -> Any:
    """`x in container`: a tuple's items compared with `==`, a dict's keys (a helper's
    `**kwargs`: `"k" in kw`), or a substring test."""
    if isinstance(container, str) and isinstance(x, str):
        return x in container
    if isinstance(container, dict):
        if is_runtime(x) or isinstance(x, DataclassValue):
            raise type_error(f"a dict's keys are compile-time: 'in' needs a compile-time "
                             f"key, got {describe(x)}")
        try:
            return x in container
        except TypeError:           # unhashable
            raise type_error(f"{describe(x)} cannot be a dict key") from None
    if not isinstance(container, tuple):
        raise type_error(f"'in' needs a tuple, a dict or a string on its right, got "
                         f"{describe(container)}")
    found: Any = False
    for item in container:
        eq = _scalar_result(compare_symbol("==", x, item), "'in'", x, item)
        if eq is True:
            return True
        found = logical_or(found, eq)
    return found


def logical_and(a: Any, b: Any) -> Any:
    """`a and b` of comparison results: compile-time values fold, runtime ones and."""
    if not isinstance(a, TileValue):
        return b if a else a
    if not isinstance(b, TileValue):
        return a if b else compute.binary("&", _bool(a), False)
    return compute.binary("&", _bool(a), _bool(b))


def logical_or(a: Any, b: Any) -> Any:
    if not isinstance(a, TileValue):
        return a if a else b
    if not isinstance(b, TileValue):
        return compute.binary("|", _bool(a), True) if b else a
    return compute.binary("|", _bool(a), _bool(b))


def logical_not(a: Any) -> Any:
    if isinstance(a, TileValue):
        return compute.logical_not(a)
    return not a


def _bool(v: TileValue) -> TileValue:
    return v if v.dtype.is_bool else cast(v, dt.bool_)
