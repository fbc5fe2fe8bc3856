"""Comprehensions in kernels: `tuple(e for x in it if c)` and `[e for x in it]`.

cuTile builds a tuple from a generator expression over `static_iter(...)` iterables
(`_static_tuple_comprehension`); tileir takes those and any other iterable known
while compiling: a `range` of constants, a tuple, a list of arrays, and `enumerate`,
`zip` or `reversed` of those.  The comprehension is unrolled while compiling: `e` is
compiled once per item whose conditions (compile-time too) hold, in a scope where
the loop variables are visible, and they are gone after it, as in Python.  A list
comprehension gives a tuple (lists in kernels are tuples).

    ts = tuple(ct.load(x, (i,), shape=(4,)) for i in range(3) if i != 1)
      -> (load at 0, load at 2)
"""

from __future__ import annotations

import ast
import builtins
import itertools
from typing import Any

from .. import api
from ..errors import TileSyntaxError, TileTypeError, TileValueError
from . import static
from .aggregates import is_runtime
from .values import ListValue, TableListValue, describe

ITERATORS = (builtins.range, builtins.enumerate, builtins.zip, builtins.reversed)


def unroll(c, node: ast.GeneratorExp | ast.ListComp) -> tuple:
    """The tuple `node` builds, compiled by the FunctionCompiler `c`."""
    saved = dict(c.vars)
    out: list = []

    def generate(k: int) -> None:
        if k == len(node.generators):
            out.append(c.expr(node.elt))
            if len(out) > static.MAX_ITEMS:
                raise c.error(TileValueError, node, f"a comprehension in a kernel makes at "
                              f"most {static.MAX_ITEMS} items")
            return
        gen = node.generators[k]
        if gen.is_async:
            raise c.error(TileSyntaxError, gen, "async comprehensions are not supported in "
                          "kernels")
        for item in _items(c, gen.iter):
            c.assign(gen.target, item)
            if all(_condition(c, cond) for cond in gen.ifs):     # (stops at a False)
                generate(k + 1)
    try:
        generate(0)
    finally:
        c.vars = saved
    return tuple(out)


def _items(c, node: ast.expr) -> list:
    """The items of a comprehension's iterable (all known while compiling)."""
    fn = c.expr(node.func) if isinstance(node, ast.Call) else None
    if fn is api.static_iter:
        return static.iterate(c._one_arg(node, "static_iter"), c.static_scope(),
                              c.src.globals, c.loc_of(node))
    if any(fn is f for f in ITERATORS):
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise c.error(TileSyntaxError, node, f"{fn.__name__}() in a comprehension takes "
                          f"positional arguments only")
        args = [c.expr(a) for a in node.args]
        if fn is builtins.range:
            for a, arg in zip(node.args, args):
                if isinstance(arg, bool) or not isinstance(arg, int):
                    raise c.error(TileTypeError, a, f"range() in a comprehension needs "
                                  f"compile-time ints, got {describe(arg)}")
        else:
            args = [_iterable(c, a, arg) for a, arg in zip(node.args, args)]
        items = fn(*args)
    else:
        items = _iterable(c, node, c.expr(node))
    items = list(itertools.islice(items, static.MAX_ITEMS + 1))
    if len(items) > static.MAX_ITEMS:
        raise c.error(TileValueError, node, f"a comprehension in a kernel iterates over at "
                      f"most {static.MAX_ITEMS} items")
    return items


def _iterable(c, node: ast.expr, value: Any) -> Any:
    if isinstance(value, (tuple, range, str)):
        return value
    if isinstance(value, ListValue) and not isinstance(value, TableListValue):
        return value.elements
    raise c.error(TileTypeError, node, f"a comprehension iterates over compile-time values "
                  f"(static_iter(...), a range of constants, a tuple, enumerate or zip of "
                  f"those), got {describe(value)}")


def _condition(c, node: ast.expr) -> bool:
    cond = c.expr(node)
    if is_runtime(cond):
        raise c.error(TileTypeError, node, f"a comprehension's condition must be known at "
                      f"compile time, got {describe(cond)}")
    return bool(cond)
