"""The frontend's calls: the tileir API, Python builtins, operator functions, tuple and
dict methods, dataclass constructors, comprehensions, and `@function` helpers
(specialized `func.func`s, or inlined) -- everything else refused at the call site
(`library.py`).  A mixin of `compiler.FunctionCompiler`.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import operator
import types
import typing
from typing import Any

from mlir import ir
from mlir.dialects import func

from .. import api
from .. import dtypes as dt
from ..errors import (TileError, TileRecursionError, TileSyntaxError, TileTypeError,
                      TileUnsupportedFeatureError, TileValueError)
from ..annotations import Slice
from ..function import Function, KernelEntry, is_plain_helper, plain_helper
from . import (aggregates, comprehensions, compute, control, debug, emit, intrinsics, library,
               static, structured)
from .closures import Closure, Frame, own_names
from .params import classify_value, leaf_values
from .values import (BoundMethod, DataclassValue, ForeignPointerValue, ListValue, MethodValue,
                     TableListValue, TileValue, describe)

# a helper compiled inline at every call (ModuleBuilder.helpers)
_INLINE = object()

_OPERATOR_FUNCTIONS = {operator.add: "+", operator.sub: "-", operator.mul: "*",
                       operator.truediv: "/", operator.floordiv: "//", operator.mod: "%",
                       operator.pow: "**", operator.and_: "&", operator.or_: "|",
                       operator.xor: "^", operator.lshift: "<<", operator.rshift: ">>",
                       operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
                       operator.eq: "==", operator.ne: "!="}


class Calls:
    """Call expressions and what they may call."""

    def expr_Call(self, node: ast.Call) -> Any:
        fn = self.expr(node.func)
        if fn is api.print or fn is builtins.print:      # f-strings: from the AST
            return debug.compile_print(self, node)
        if fn is api.static_eval:
            return static.evaluate(self._one_arg(node, "static_eval"), self.static_scope(),
                                   self.src.globals, "static_eval", self.loc_of(node))
        if fn is api.static_assert and not node.keywords and 1 <= len(node.args) <= 2 and \
                not any(isinstance(a, ast.Starred) for a in node.args):
            return self.static_assert(node)
        if fn is builtins.tuple and len(node.args) == 1 and not node.keywords and \
                isinstance(node.args[0], ast.GeneratorExp):
            return self.comprehension(node.args[0])
        if fn is api.static_iter or fn is api.static_exception:
            usage = ("for ... in static_iter(...)" if fn is api.static_iter else
                     "raise static_exception(...)")
            raise self.error(TileSyntaxError, node, f"{fn.__name__} is only allowed as "
                             f"'{usage}'")
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.expr(a.value)
                if not isinstance(v, tuple):
                    raise self.error(TileTypeError, a, f"cannot unpack {describe(v)}")
                args.extend(v)
            else:
                args.append(self.expr(a))
        kwargs = {}
        for k in node.keywords:
            more = {k.arg: self.expr(k.value)} if k.arg is not None else self.expr(k.value)
            if not isinstance(more, dict) or not all(isinstance(n, str) for n in more):
                raise self.error(TileTypeError, k.value, f"the argument after ** must be a "
                                 f"dict with str keys, got {describe(more)}")
            for n in more:
                if n in kwargs:
                    raise self.error(TileTypeError, k, f"got multiple values for keyword "
                                     f"argument '{n}'")
            kwargs.update(more)
        return self.call(fn, args, kwargs, node)

    def call(self, fn: Any, args: list, kwargs: dict, node: ast.AST) -> Any:
        if isinstance(fn, BoundMethod) and isinstance(fn.receiver, dict):
            return _dict_method(fn, args, kwargs)
        if isinstance(fn, BoundMethod):
            return intrinsics.call(fn.name, (fn.receiver, *args), kwargs)
        name = _api_name(fn)
        if name is None and emit.is_hashable(fn):            # `tileir.TiledView.load(tv, ...)`
            name = intrinsics.METHOD_NAMES.get(fn)
        if name in intrinsics.CALLBACK_RULES:
            apply = lambda f, xs: self.apply_callable(f, xs, node)  # noqa: E731
            return intrinsics.call(name, tuple(args), kwargs, {"_apply": apply})
        if name is not None:
            return intrinsics.call(name, tuple(args), kwargs)
        if isinstance(fn, Closure):
            return self.call_closure(fn, args, kwargs, node)
        if isinstance(fn, dt.DType):
            if len(args) != 1 or kwargs:
                raise self.error(TileTypeError, node, f"{fn!r}(x) takes one argument")
            return intrinsics.call("astype", (args[0], fn), {})
        if isinstance(fn, Function):
            return self.call_helper(fn, args, kwargs, node)
        if isinstance(fn, MethodValue):
            return self.call(fn.function, [fn.receiver, *args], kwargs, node)
        if aggregates.is_dataclass_type(fn):
            return self.build_dataclass(fn, args, kwargs, node)
        if fn is dataclasses.replace:
            if len(args) != 1:
                raise self.error(TileTypeError, node, "dataclasses.replace(obj, /, **changes) "
                                 "takes one positional argument")
            return self.run_post_init(aggregates.replace(args[0], kwargs), node)
        if _is_str_join(fn):
            return fn(*args, **kwargs)
        if _is_tuple_method(fn):
            return self.tuple_method(fn, args, kwargs, node)
        if fn is Slice:                          # a dense dim of advanced indexing
            return self.make_slice(args, kwargs, node)
        if is_plain_helper(fn):                  # cuTile inlines undecorated helpers too
            return self.call_helper(plain_helper(fn), args, kwargs, node)
        if isinstance(fn, KernelEntry):
            raise self.error(TileUnsupportedFeatureError, node,
                             f"kernel '{fn.name}' cannot be called from a kernel; make the "
                             f"shared code a @tileir.function")
        builtin = _BUILTINS.get(fn) if emit.is_hashable(fn) else None
        if builtin is not None:
            return builtin(self, args, kwargs, node)
        if fn is builtins.range:
            raise self.error(TileSyntaxError, node, "range() is only allowed as a for-loop "
                             "iterable")
        op = _OPERATOR_FUNCTIONS.get(fn) if emit.is_hashable(fn) else None
        if op is not None:                       # `operator.add(a, b)`, as cuTile takes it
            if len(args) != 2 or kwargs:
                raise self.error(TileTypeError, node, f"operator.{fn.__name__} takes 2 "
                                 f"arguments, got {len(args) + len(kwargs)}")
            return self.binop(op, args[0], args[1], node)
        raise self.refused_call(fn, args, kwargs, node)

    def refused_call(self, fn: Any, args: list, kwargs: dict, node: ast.AST) -> TileError:
        """The error for a call the kernel cannot compile, at the kernel's line: a
        function of NumPy, `math`, the standard library or another installed package
        (`library.py`: host code, never compiled inline, so no error points into its
        source), a lambda defined outside kernel code, or anything else."""
        name = library.qualified_name(fn, self.spelled_module_path(node))
        if library.is_library_function(fn):
            constant = all(map(emit.is_compile_time, (*args, *kwargs.values())))
            return self.error(TileUnsupportedFeatureError, node,
                              library.refusal(name, constant))
        if isinstance(fn, types.FunctionType) and fn.__name__ == "<lambda>":
            code = fn.__code__
            spelled = ast.unparse(node.func) if isinstance(node, ast.Call) else "<lambda>"
            return self.error(TileUnsupportedFeatureError, node,
                              f"cannot call the lambda '{spelled}' (defined at "
                              f"{code.co_filename}:{code.co_firstlineno}) inside a kernel: a "
                              f"lambda compiles where kernel code defines it (in the kernel "
                              f"or a helper); define it there, or make it a def")
        return self.error(TileUnsupportedFeatureError, node,
                          f"cannot call {name if callable(fn) else describe(fn)} inside a "
                          f"kernel; only the tileir API, the builtins kernels take and your "
                          f"own functions (plain or @tileir.function) can be called")

    def spelled_module_path(self, node: ast.AST) -> str | None:
        """`numpy.ones` for a call spelled `np.ones(...)` (its dotted name, the first part
        a module), else None."""
        func_node = node.func if isinstance(node, ast.Call) else None
        parts = []
        while isinstance(func_node, ast.Attribute):
            parts.append(func_node.attr)
            func_node = func_node.value
        if not parts or not isinstance(func_node, ast.Name):
            return None
        found, root = self.frame.find(func_node.id)
        if not found:
            found, root = self.src.resolve_global(func_node.id)
        if not isinstance(root, types.ModuleType):
            return None
        return ".".join([root.__name__, *reversed(parts)])

    def tuple_method(self, fn, args: list, kwargs: dict, node: ast.AST) -> Any:
        """`tp.index(x)` and `tp.count(x)` of a tuple of compile-time items."""
        items = (*fn.__self__, *args, *kwargs.values())
        if not all(emit.is_compile_time(x) or isinstance(x, dt.DType) for x in items):
            raise self.error(TileTypeError, node, f"tuple.{fn.__name__}() in a kernel "
                             f"needs a tuple and arguments of compile-time values")
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise self.error(TileValueError, node, f"tuple.{fn.__name__}: {e}") from None

    def static_assert(self, node: ast.Call) -> None:
        """`static_assert(cond, message)`: the message is evaluated only when `cond` is
        False, by static_eval's rules (so an f-string may show any name), then str()."""
        cond = self.expr(node.args[0])
        if emit.is_number(cond) and cond:
            return None
        message = None
        if emit.is_number(cond) and len(node.args) == 2:
            value = static.evaluate(node.args[1], self.static_scope(), self.src.globals,
                                    "static_assert's message", self.loc_of(node.args[1]),
                                    python=True)
            message = "" if value is None else str(value)
        with self.at(node):
            return intrinsics.call("static_assert", (cond, message), {})  # checks, fails

    def build_dataclass(self, cls: type, args: list, kwargs: dict, node: ast.AST) -> Any:
        return self.run_post_init(aggregates.construct(cls, args, kwargs), node)

    def run_post_init(self, obj: DataclassValue, node: ast.AST) -> DataclassValue:
        """Runs the class's `__post_init__` (static checks, prints) as tile code."""
        post_init = getattr(obj.cls, "__post_init__", None)
        if post_init is not None:
            self.call(post_init, [obj], {}, node)
        return obj

    def apply_callable(self, fn: Any, args, node: ast.AST, kwargs: dict | None = None) -> Any:
        """`fn(*args)` for a function value a rule was given (reduce's combine): a
        lambda of the kernel, an `operator` function, or anything a call can name."""
        if isinstance(fn, Closure):
            return self.call_closure(fn, list(args), dict(kwargs or {}), node)
        return self.call(fn, list(args), dict(kwargs or {}), node)

    def make_slice(self, args, kwargs, node) -> Slice:
        if kwargs or len(args) != 2:
            raise self.error(TileTypeError, node, "Slice(start, length) takes two positional "
                             "arguments")
        start, length = args
        if isinstance(length, bool) or not isinstance(length, int) or length < 1 or \
                length & (length - 1):
            raise self.error(TileTypeError, node, f"a Slice's length must be a compile-time "
                             f"power of two, got {describe(length)}")
        if not (isinstance(start, int) and not isinstance(start, bool) or
                isinstance(start, TileValue) and start.is_scalar and start.dtype.is_int):
            raise self.error(TileTypeError, node, f"a Slice's start must be an integer scalar, "
                             f"got {describe(start)}")
        return Slice(start, length)

    def expr_GeneratorExp(self, node: ast.GeneratorExp) -> Any:
        raise self.error(TileUnsupportedFeatureError, node, "a generator expression in a "
                         "kernel must build a tuple: tuple(... for ... in ...)")

    def expr_ListComp(self, node: ast.ListComp) -> tuple:
        return self.comprehension(node)          # (lists in kernels are tuples)

    def comprehension(self, node: ast.GeneratorExp | ast.ListComp) -> tuple:
        return comprehensions.unroll(self, node)

    def call_helper(self, fn, args, kwargs, node) -> Any:
        """`fn(*args, **kwargs)` as a `func.call` of its specialization for the arguments'
        kinds (built on first use); its result rebuilt from the helper's template.  A
        helper that returns an array (a slice, a tiled view, a list of arrays, raw
        memory) is compiled inline instead, as a nested function is: a call passes
        tiles and scalars only."""
        bound = fn.bind_helper_args(args, kwargs, lambda msg: self.error(TileTypeError, node, msg))
        bound = {p: aggregates.from_python(v) for p, v in bound.items()}     # (defaults)
        with self.at(node):
            params = [(pname, classify_value(v)) for pname, v in bound.items()]
        key = (id(fn), tuple((p, structured.spec_key(k)) for p, k in params))
        known = self.mb.helpers.get(key)
        if known is _INLINE:
            return self.inline_helper(fn, bound, node)
        if known is None:
            self.enter_helper(fn, node)
            name = self.mb.unique_name(fn.name)
            try:
                sub = type(self)(self.mb, fn.source())
                with ir.InsertionPoint(self.mb.module.body), self.call_site(fn.name, node):
                    sub.build(name, params, kernel=False)
            except control.ReturnsHandle:
                self.mb.erase_function(name)
                self.mb.helpers[key] = _INLINE
                known = _INLINE
            finally:
                self.mb.active.pop()
            if known is _INLINE:
                return self.inline_helper(fn, bound, node)
            known = self.mb.helpers[key] = (name, ([(r.dtype, r.shape) for r in
                                                    sub.result_values], sub.result_template))
        name, (kinds, template) = known
        operands = [x for (p, k), v in zip(params, bound.values()) for x in leaf_values(v, k)]
        res_types = [emit.tensor_type(shape, d) for d, shape in kinds]
        call = func.CallOp(res_types, ir.FlatSymbolRefAttr.get(name), operands)
        return aggregates.transform(aggregates.with_values(template, iter(call.results)),
                                    _as_pointer)

    def enter_helper(self, fn, node) -> None:
        """Marks `fn` as being compiled (leave with `self.mb.active.pop()`); a call of a
        helper already being compiled is recursion, an error."""
        if fn.name in self.mb.active:
            raise self.error(TileRecursionError, node,
                             f"recursive call to helper '{fn.name}': kernels inline every "
                             f"call, so recursion cannot be compiled")
        self.mb.active.append(fn.name)

    def inline_helper(self, fn, bound: dict, node) -> Any:
        """The helper's body compiled where it is called, in a frame of its own over the
        argument values themselves."""
        src = fn.source()
        frame = Frame(src, fn.name, inline=True, vars=dict(bound), own=own_names(src.tree))
        self.enter_helper(fn, node)
        with self.call_site(fn.name, node):
            outer, self.frame = self.frame, frame
            try:
                self.block(src.tree.body)
                return self.function_result(src.tree.body[-1])
            finally:
                self.frame = outer
                self.mb.active.pop()


def _as_pointer(x: Any) -> Any:
    """A helper's result item: a foreign pointer crossed the call as its i64 scalar."""
    if isinstance(x, TileValue) and x.dtype.is_foreign_pointer:
        return ForeignPointerValue(x.value, x.dtype)
    return x


def _dict_method(m: BoundMethod, args, kwargs) -> Any:
    """`kw.get(k, default)`; `keys()`/`values()`/`items()` as tuples."""
    name = m.name.split(".")[1]
    try:
        result = getattr(m.receiver, name)(*args, **kwargs)
    except TypeError as e:
        raise emit.type_error(f"dict.{name}: {e}") from None
    return tuple(result) if name != "get" else result


def _is_tuple_method(fn) -> bool:
    """`tp.index` or `tp.count` (the attributes a tuple gives kernel code)."""
    return isinstance(getattr(fn, "__self__", None), tuple) and \
        getattr(fn, "__name__", None) in ("index", "count")


def _is_str_join(fn) -> bool:
    """`",".join` of a compile-time string (folded in Python)."""
    return isinstance(getattr(fn, "__self__", None), str) and \
        getattr(fn, "__name__", None) == "join"


def _api_name(fn) -> str | None:
    name = getattr(fn, "__name__", None)
    if name in api.SIGNATURES and getattr(api, name, None) is fn:
        return name
    return None


# ---------------------------------------------------------------------------
# Python builtins usable in kernels
# ---------------------------------------------------------------------------
def _builtin_minmax(kind):
    def fn(c, args, kwargs, node):
        if kwargs or len(args) < 2:
            raise c.error(TileTypeError, node, f"{kind}() in a kernel takes two or more "
                          f"values (use tileir.{kind}(tile, axis) to reduce a tile)")
        out = args[0]
        for a in args[1:]:
            out = compute.binary(kind, out, a)
        return out
    return fn


def _builtin_cast(d: dt.DType, pytype):
    def fn(c, args, kwargs, node):
        if len(args) != 1 or kwargs:
            raise c.error(TileTypeError, node, f"{pytype.__name__}() takes one argument")
        x = args[0]
        if emit.is_number(x):
            return pytype(x)
        if not isinstance(x, TileValue) or not x.is_scalar:
            raise c.error(TileTypeError, node, f"{pytype.__name__}() needs a scalar, got "
                          f"{describe(x)}; use astype for tiles")
        return emit.cast(x, d)
    return fn


def _builtin_abs(c, args, kwargs, node):
    return compute.absolute(args[0])


def _builtin_len(c, args, kwargs, node):
    if len(args) == 1 and isinstance(args[0], (tuple, dict)):
        return len(args[0])
    if len(args) == 1 and isinstance(args[0], TableListValue):
        with c.at(node):
            return intrinsics.array_dim(args[0].table, 0)
    if len(args) == 1 and isinstance(args[0], ListValue):
        return len(args[0].elements)
    if len(args) == 1 and isinstance(args[0], TileValue) and args[0].ndim:
        return args[0].shape[0]
    what = describe(args[0]) if args else "nothing"
    raise c.error(TileTypeError, node, f"len() needs a tuple, a list of arrays or a tile of "
                  f"rank 1 or more, got {what}; the dims of a tile or an array are its "
                  f".shape")


def _typing_cast(c, args, kwargs, node):
    """`typing.cast(T, x)` is `x` (a type checker's hint; compiled inline before the
    standard library was refused)."""
    bound = inspect.signature(typing.cast).bind(*args, **kwargs)
    return bound.arguments["val"]


def _builtin_divmod(c, args, kwargs, node):
    if kwargs or len(args) != 2:
        raise c.error(TileTypeError, node, "divmod() takes two arguments")
    return intrinsics.call("divmod", tuple(args), {})


def _builtin_pow(c, args, kwargs, node):
    if kwargs or len(args) != 2:
        raise c.error(TileTypeError, node, "pow() in a kernel takes two arguments (base, "
                      "exp); the three-argument modular form is not supported")
    return c.binop("**", args[0], args[1], node)


def _builtin_tuple(c, args, kwargs, node):
    if kwargs or len(args) > 1:
        raise c.error(TileTypeError, node, "tuple() takes at most one argument")
    if not args:
        return ()
    if isinstance(args[0], tuple):
        return args[0]
    if isinstance(args[0], ListValue) and not isinstance(args[0], TableListValue):
        return args[0].elements
    raise c.error(TileTypeError, node, f"tuple() in a kernel takes a tuple or a generator "
                  f"expression, got {describe(args[0])}")


_BUILTINS = {builtins.min: _builtin_minmax("min"), builtins.max: _builtin_minmax("max"),
             builtins.abs: _builtin_abs, builtins.len: _builtin_len,
             builtins.divmod: _builtin_divmod, builtins.pow: _builtin_pow,
             builtins.tuple: _builtin_tuple, typing.cast: _typing_cast,
             builtins.int: _builtin_cast(dt.int32, int),
             builtins.float: _builtin_cast(dt.float32, float),
             builtins.bool: _builtin_cast(dt.bool_, bool)}
