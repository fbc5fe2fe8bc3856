"""Stage `frontend`: the Python AST of a `@kernel` / `@function` body -> Tile IR.

One `FunctionCompiler` translates one function specialization.  Every op it
builds carries the user's file:line:col (`with self.at(node)`).  Compile-time
values (numbers, tuples, dtypes, `Constant` parameters) are Python objects and
fold in Python; runtime values are `TileValue` / `ArrayValue`.

Control flow:
* `for i in range(...)` -> `scf.for` over i32; names assigned in the body that
  exist before the loop are loop-carried (`iter_args`) and must keep their type.
* `if` on a compile-time condition compiles only the taken branch (this is how
  `Constant[bool]` specializes); on a runtime scalar it becomes `scf.if`
  yielding every name either branch assigns.
* `@function` helpers become private `func.func`s called with `func.call`
  (inlined later by `tile-inline`), specialized per argument types/constants.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import operator
import types
from typing import Any

from mlir import ir
from mlir.dialects import func, scf

from .. import api
from .. import dtypes as dt
from ..errors import (TileError, TileRecursionError, TileStaticAssertionError,
                      TileSyntaxError, TileTypeError, TileUnsupportedFeatureError,
                      TileValueError)
from ..annotations import Slice
from ..function import Function, KernelEntry, is_plain_helper, plain_helper
from ..specialization import (ArrayParam, ListParam, Param, ScalarParam, TableListParam,
                              TupleParam)
from tileir.dialect import FUNCTION_ATTR, KERNEL_ATTR, array_type, lists
from . import compute, debug, emit, intrinsics, pointers, static, views
from .source import SourceInfo
from .values import (ArrayValue, ForeignPointerValue, ListValue, RawMemoryValue,
                     TableListValue, TiledViewValue, TileValue, describe)

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
           ast.LShift: "<<", ast.RShift: ">>"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
           ast.NotEq: "!="}


@dataclasses.dataclass(frozen=True)
class BoundMethod:
    """`tile.astype` etc.: an intrinsic with its first argument bound."""

    name: str
    receiver: Any


class _LoopLocal:
    """Marks a name defined only inside a loop or one branch: unusable afterwards."""

    def __init__(self, why: str):
        self.why = why


class ModuleBuilder:
    """Owns the MLIR module being built and the helper specializations in it."""

    def __init__(self, ctx: ir.Context):
        self.ctx = ctx
        self.module = ir.Module.create(ir.Location.unknown(ctx))
        self.helpers: dict[tuple, tuple[str, list]] = {}
        self.active: list[str] = []

    def unique_name(self, base: str) -> str:
        names = {str(ir.StringAttr(op.attributes["sym_name"]).value)
                 for op in self.module.body.operations if "sym_name" in op.attributes}
        name, i = base, 0
        while name in names:
            i += 1
            name = f"{base}_{i}"
        return name


class FunctionCompiler:
    def __init__(self, mb: ModuleBuilder, source: SourceInfo):
        self.mb = mb
        self.src = source
        self.vars: dict[str, Any] = {}
        self.returned: Any = None
        self.has_return = False

    # -- locations and errors ------------------------------------------------
    def loc_of(self, node: ast.AST) -> ir.Location:
        line, col = self.src.position(node)
        return ir.Location.file(self.src.filename, line, col, self.mb.ctx)

    def at(self, node: ast.AST) -> ir.Location:
        return self.loc_of(node)

    def error(self, cls, node: ast.AST, msg: str) -> TileError:
        return cls(msg, self.loc_of(node))

    # -- entry points --------------------------------------------------------
    def build(self, name: str, params: list[tuple[str, Any]], *, kernel: bool) -> func.FuncOp:
        """Builds `func.func @name` for parameters given as (name, kind) where kind is an
        `ArrayParam`, a `ScalarParam` or a compile-time Python value."""
        fdef = self.src.tree
        arg_types, arg_names = [], []
        for pname, kind in params:
            # a list's elements and a tuple's items are named as the launch's errors name
            # them: xs[1], t[0][1]
            for leaf, leaf_name in zip(_leaves(kind), _leaf_names(kind, pname)):
                if isinstance(leaf, ArrayParam):
                    arg_types.append(array_type(ir.Type.parse(leaf.dtype.array_mlir), leaf.ndim))
                else:
                    arg_types.append(emit.tensor_type(leaf.shape, leaf.dtype))
                arg_names.append(leaf_name)
        with self.at(fdef), ir.InsertionPoint(self.mb.module.body):
            fn = func.FuncOp(name, ir.FunctionType.get(arg_types, []))
            fn.attributes[KERNEL_ATTR if kernel else FUNCTION_ATTR] = ir.UnitAttr.get()
            fn.attributes["tile.arg_names"] = ir.ArrayAttr.get(
                [ir.StringAttr.get(n) for n in arg_names])
            if not kernel:
                fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
            fn.arg_attrs = ir.ArrayAttr.get([_arg_attrs(leaf) for _, k in params
                                             for leaf in _leaves(k)])
            block = fn.add_entry_block()
        args = iter(block.arguments)
        for pname, kind in params:
            self.vars[pname] = _argument(kind, pname, args)
        with ir.InsertionPoint(block):
            self.block(fdef.body, top=True)
            with self.at(fdef.body[-1]):
                results = self._return_values(kernel)
                func.ReturnOp([r.value for r in results])
        fn.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [r.value.type for r in results]))
        self.result_values = results
        return fn

    def _return_values(self, kernel: bool) -> list[TileValue]:
        r = self.returned
        if r is None:
            return []
        if kernel:
            raise self.error(TileSyntaxError, self.return_node,
                             "a kernel cannot return a value; store results into an array")
        items = list(r) if isinstance(r, tuple) else [r]
        out = []
        for x in items:
            if isinstance(x, (ArrayValue, TiledViewValue, ListValue, RawMemoryValue)):
                raise self.error(TileTypeError, self.return_node,
                                 f"a @function cannot return an array, a slice or a tiled "
                                 f"view (got {describe(x)}); make it in the caller and pass "
                                 f"it in")
            if isinstance(x, ForeignPointerValue):      # its i64, the caller rewraps it
                out.append(TileValue(x.value, x.dtype, ()))
                continue
            out.append(emit.as_value(x))
        return out

    # -- statements ----------------------------------------------------------
    def block(self, stmts: list[ast.stmt], top: bool = False) -> None:
        for i, s in enumerate(stmts):
            if self.has_return:
                raise self.error(TileSyntaxError, s, "code after 'return' is not allowed")
            self.stmt(s, last=top and i == len(stmts) - 1)

    def stmt(self, node: ast.stmt, last: bool = False) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise self.error(TileUnsupportedFeatureError, node,
                             f"'{type(node).__name__}' statements are not supported in tile "
                             f"kernels; use assignments, for-range loops, if/else and calls")
        with self.at(node):
            if isinstance(node, ast.Return):
                method(node, last)
            else:
                method(node)

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return                                             # docstring
        self.expr(node.value)

    def stmt_Pass(self, node: ast.Pass) -> None:
        return None

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise self.error(TileSyntaxError, node, "a bare annotation declares nothing; "
                             "assign a value")
        self.assign(node.target, self.expr(node.value))

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(TileUnsupportedFeatureError, node,
                             "augmented assignment only works on plain names")
        cur = self.lookup(node.target.id, node.target)
        self.vars[node.target.id] = self.binop(_BINOPS[type(node.op)], cur,
                                               self.expr(node.value), node)

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.vars[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise self.error(TileTypeError, target,
                                 f"cannot unpack {describe(value)} into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        else:
            raise self.error(TileUnsupportedFeatureError, target,
                             "only names and tuples of names can be assigned (tiles are "
                             "immutable: build a new tile with where/full instead)")

    def stmt_Return(self, node: ast.Return, last: bool) -> None:
        if not last:
            raise self.error(TileUnsupportedFeatureError, node,
                             "'return' is only supported as the last statement of a function")
        self.returned = self.expr(node.value) if node.value is not None else None
        self.return_node = node
        self.has_return = True

    def stmt_Assert(self, node: ast.Assert) -> None:
        cond = self.expr(node.test)
        if not emit.is_number(cond):
            raise self.error(TileUnsupportedFeatureError, node,
                             "assert on runtime values is not supported; use "
                             "tileir.static_assert for compile-time checks")
        if not cond:
            msg = self.expr(node.msg) if node.msg is not None else "assertion failed"
            raise self.error(TileStaticAssertionError, node, f"Static assertion failed: {msg}")

    def stmt_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and self.expr(exc.func) is api.static_exception:
            value = static.evaluate(self._one_arg(exc, "static_exception"), self.static_scope(),
                                    self.src.globals, "static_exception", self.loc_of(exc))
            static.raise_static(value, self.loc_of(node))
        raise self.error(TileUnsupportedFeatureError, node,
                         "'raise' in a kernel is only 'raise static_exception(exc)' (raised "
                         "while compiling); use assert_ to stop at run time")

    def static_scope(self) -> dict[str, Any]:
        """What compile-time Python sees of the kernel's names (static_eval)."""
        scope = dict(self.src.nonlocals)
        scope.update((k, v) for k, v in self.vars.items() if not isinstance(v, _LoopLocal))
        return scope

    def _one_arg(self, node: ast.Call, name: str) -> ast.expr:
        if len(node.args) != 1 or node.keywords or isinstance(node.args[0], ast.Starred):
            raise self.error(TileSyntaxError, node, f"{name}() takes exactly one argument")
        return node.args[0]

    def static_for(self, node: ast.For) -> None:
        """`for x in static_iter(...)`: the body compiled once per item."""
        items = static.iterate(self._one_arg(node.iter, "static_iter"), self.static_scope(),
                               self.src.globals, self.loc_of(node.iter))
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Break, ast.Continue, ast.Return)):
                raise self.error(TileSyntaxError, sub, f"'{type(sub).__name__.lower()}' is "
                                 f"not allowed in a static_iter loop")
        for item in items:
            self.assign(node.target, item)
            self.block(node.body)

    def list_for(self, node: ast.For, xs: ListValue) -> None:
        """`for a in xs` over a list of arrays: the body compiled once per element (the
        list's length is part of the specialization), or for a list whose length is
        known at launch only, once in a loop over its table's rows."""
        if isinstance(xs, TableListValue):
            return self.table_for(node, xs)
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Break, ast.Continue, ast.Return)):
                raise self.error(TileSyntaxError, sub, f"'{type(sub).__name__.lower()}' is "
                                 f"not allowed in a loop over a list of arrays")
        for element in xs.elements:
            self.assign(node.target, element)
            self.block(node.body)

    def table_for(self, node: ast.For, xs: TableListValue) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(TileUnsupportedFeatureError, node.target,
                             "the loop variable must be a single name")
        with self.at(node):
            lb, st = emit.constant(0, dt.int32), emit.constant(1, dt.int32)
            ub = intrinsics.array_dim(xs.table, 0)

        def element(counter: TileValue) -> ArrayValue:
            with self.at(node):
                return self.table_element(xs, counter)
        self.range_loop(node, lb, ub, st, element)

    # -- for loops -----------------------------------------------------------
    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(TileUnsupportedFeatureError, node, "for/else is not supported")
        if isinstance(node.iter, ast.Call) and self.expr(node.iter.func) is api.static_iter:
            return self.static_for(node)
        if isinstance(node.iter, ast.Name) and \
                isinstance(self.vars.get(node.iter.id), ListValue):
            return self.list_for(node, self.vars[node.iter.id])
        if not isinstance(node.target, ast.Name):
            raise self.error(TileUnsupportedFeatureError, node.target,
                             "the loop variable must be a single name")
        it = node.iter
        if not (isinstance(it, ast.Call) and self.expr(it.func) is builtins.range):
            raise self.error(TileUnsupportedFeatureError, it,
                             "only 'for ... in range(...)' loops are supported")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(TileSyntaxError, it, "range() takes 1 to 3 positional arguments")
        bounds = [self.expr(a) for a in it.args]
        start, stop, step = ([0, bounds[0], 1] if len(bounds) == 1 else
                             [*bounds, 1] if len(bounds) == 2 else bounds)
        if emit.is_number(step) and step <= 0:
            raise self.error(TileUnsupportedFeatureError, it.args[-1],
                             f"range step must be positive, got {step}")
        lb, ub, st = (self.index_value(x, a) for x, a in
                      zip((start, stop, step), (it, it, it)))
        self.range_loop(node, lb, ub, st, lambda counter: counter)

    def range_loop(self, node: ast.For, lb: TileValue, ub: TileValue, st: TileValue,
                   bind) -> None:
        """`node`'s body as an scf.for from lb to ub by st, its target bound to
        `bind(counter)` in each trip; the names it assigns that exist before it are
        carried."""
        carried, inits = self.carried_values(node, exclude=node.target.id)
        loop = scf.ForOp(lb.value, ub.value, st.value, [v.value for v in inits])
        before = dict(self.vars)
        with ir.InsertionPoint(loop.body):
            self.vars[node.target.id] = bind(TileValue(loop.induction_variable, dt.int32, ()))
            for n, arg, init in zip(carried, loop.inner_iter_args, inits):
                self.vars[n] = TileValue(arg, init.dtype, init.shape)
            self.block(node.body)
            if self.has_return:
                raise self.error(TileUnsupportedFeatureError, node,
                                 "'return' inside a loop is not supported")
            self.yield_carried(node, carried, inits)
        self.close_loop(node, before, carried, inits, loop.results)
        # (Python leaves it at its last value: the loop's IR has no such value)
        self.vars[node.target.id] = _LoopLocal(
            f"'{node.target.id}' is the variable of the loop at line "
            f"{self.src.position(node)[0]} and is not available after it; keep what you "
            f"need of it in a name assigned before the loop")

    def carried_values(self, node: ast.AST, exclude: str | None = None):
        """The names a loop body assigns that exist before it (the loop carries them),
        and their values before the loop, as runtime values."""
        body = node.body
        carried = [n for n in _assigned_names(body)
                   if n in self.vars and not isinstance(self.vars[n], _LoopLocal)
                   and n != exclude]
        for n in carried:
            v = self.vars[n]
            if isinstance(v, (ArrayValue, TiledViewValue, ListValue, RawMemoryValue,
                              ForeignPointerValue)):
                raise self.error(TileUnsupportedFeatureError, node,
                                 f"'{n}' ({describe(v)}) cannot be reassigned inside a loop "
                                 f"(arrays, slices, tiled views, raw memory and foreign "
                                 f"pointers are not loop-carried); give the value a new name "
                                 f"in the loop body")
            self.vars[n] = emit.as_value(v) if not isinstance(v, TileValue) else v
            if not isinstance(self.vars[n], TileValue):
                raise self.error(TileTypeError, node, f"'{n}' ({describe(v)}) cannot be "
                                 f"carried through a loop")
        return carried, [self.vars[n] for n in carried]

    def yield_carried(self, node: ast.AST, carried, inits) -> None:
        yields = [self.coerce_carried(n, self.vars[n], init, node)
                  for n, init in zip(carried, inits)]
        scf.YieldOp([y.value for y in yields])

    def close_loop(self, node: ast.AST, before: dict, carried, inits, results) -> None:
        """After a loop: names first defined inside it are out of scope, the carried ones
        are the loop's results."""
        inner = self.vars
        self.vars = before
        for n in inner:
            if n not in before:
                self.vars[n] = _LoopLocal(f"'{n}' is defined inside the loop at line "
                                          f"{self.src.position(node)[0]} and is not available "
                                          f"after it; assign it before the loop")
        for n, res, init in zip(carried, results, inits):
            self.vars[n] = TileValue(res, init.dtype, init.shape)

    # -- while loops ---------------------------------------------------------
    def stmt_While(self, node: ast.While) -> None:
        """`while cond: body` -> scf.while: the names the body assigns that exist before
        the loop are carried; the condition (which may have effects, an atomic spin
        lock's compare-and-swap) runs before every trip."""
        if node.orelse:
            raise self.error(TileUnsupportedFeatureError, node, "while/else is not supported")
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Break, ast.Continue, ast.Return)):
                raise self.error(TileUnsupportedFeatureError, sub,
                                 f"'{type(sub).__name__.lower()}' inside a while loop is not "
                                 f"supported; fold it into the loop's condition")
        carried, inits = self.carried_values(node)
        types = [v.value.type for v in inits]
        loop = scf.WhileOp(types, [v.value for v in inits])
        before_block = loop.before.blocks.append(*types)
        after_block = loop.after.blocks.append(*types)
        outer = dict(self.vars)
        with ir.InsertionPoint(before_block):
            for n, arg, init in zip(carried, before_block.arguments, inits):
                self.vars[n] = TileValue(arg, init.dtype, init.shape)
            cond = self.expr(node.test)
            with self.at(node.test):
                if emit.is_number(cond):
                    cond = emit.constant(bool(cond), dt.bool_)
                if not isinstance(cond, TileValue) or not cond.is_scalar:
                    raise self.error(TileTypeError, node.test, f"a while condition must be a "
                                     f"scalar, got {describe(cond)}")
                cond = emit.cast(cond, dt.bool_)
                scf.ConditionOp(cond.value, list(before_block.arguments))
        self.vars = dict(outer)
        with ir.InsertionPoint(after_block):
            for n, arg, init in zip(carried, after_block.arguments, inits):
                self.vars[n] = TileValue(arg, init.dtype, init.shape)
            self.block(node.body)
            self.yield_carried(node, carried, inits)
        self.close_loop(node, outer, carried, inits, loop.results)

    def coerce_carried(self, name: str, v: Any, init: TileValue, node: ast.AST) -> TileValue:
        if emit.is_number(v):
            v = emit.constant(v, init.dtype, init.shape)
        if not isinstance(v, TileValue) or v.dtype != init.dtype or v.shape != init.shape:
            raise self.error(TileTypeError, node,
                             f"'{name}' is {init.describe()} before the loop/branch but "
                             f"{describe(v)} after it; a loop-carried or branch-assigned "
                             f"value must keep its dtype and shape (convert with astype, or "
                             f"give it its final type first, e.g. with zeros(..., dtype=...))")
        return v

    def index_value(self, x: Any, node: ast.AST) -> TileValue:
        if emit.is_number(x) and not isinstance(x, float):
            return emit.constant(int(x), dt.int32)
        if isinstance(x, TileValue) and x.is_scalar and x.dtype.is_int:
            return emit.cast(x, dt.int32)
        raise self.error(TileTypeError, node, f"range bounds must be integer scalars, got "
                         f"{describe(x)}")

    # -- if/else -------------------------------------------------------------
    def stmt_If(self, node: ast.If) -> None:
        cond = self.expr(node.test)
        if emit.is_number(cond) or cond is None or isinstance(cond, (tuple, dt.DType)):
            self.block(node.body if cond else node.orelse)     # compile-time branch
            return
        if not isinstance(cond, TileValue) or not cond.is_scalar:
            raise self.error(TileTypeError, node.test,
                             f"an 'if' condition must be a scalar, got {describe(cond)}; use "
                             f"where(cond, x, y) to select element-wise")
        c = emit.cast(cond, dt.bool_)
        before = dict(self.vars)
        # Branch result types are unknown until both are compiled: compile into a
        # result-less scf.if, then move the ops into the real one.
        tmp = scf.IfOp(c.value, [], has_else=True)
        branch_vars = []
        for blk, body in ((tmp.then_block, node.body), (tmp.else_block, node.orelse)):
            self.vars = dict(before)
            with ir.InsertionPoint(blk):
                self.block(body)
            if self.has_return:
                raise self.error(TileUnsupportedFeatureError, node,
                                 "'return' inside a runtime 'if' is not supported")
            branch_vars.append(self.vars)
        self.vars = before
        names = [n for n in dict.fromkeys([*branch_vars[0], *branch_vars[1]])
                 if any(n not in before or bv.get(n) is not before.get(n) for bv in branch_vars)]
        yielded, types_ = [], []
        for n in names:
            vals = [bv.get(n) for bv in branch_vars]
            if any(v is None or isinstance(v, _LoopLocal) for v in vals):
                self.vars[n] = _LoopLocal(f"'{n}' is assigned in only one branch of the 'if' "
                                          f"at line {self.src.position(node)[0]}; assign it "
                                          f"before the 'if' or in both branches")
                continue
            if all(emit.is_number(v) for v in vals) and vals[0] == vals[1]:
                self.vars[n] = vals[0]
                continue
            if any(isinstance(v, (ArrayValue, TiledViewValue, ListValue, RawMemoryValue,
                                  ForeignPointerValue)) for v in vals):
                raise self.error(TileUnsupportedFeatureError, node,
                                 f"'{n}' cannot be (re)assigned an array, a slice or a tiled "
                                 f"view inside a runtime 'if', nor raw memory or a foreign "
                                 f"pointer (their choice must be known at compile time: "
                                 f"branch on a Constant, or compute the slice bounds with "
                                 f"where())")
            like = next((v for v in vals if isinstance(v, TileValue)), None)
            if like is None:
                d = dt.promote(emit.python_dtype(vals[0]), emit.python_dtype(vals[1]))
                like = TileValue(None, d, ())
            yielded.append((n, like))
            types_.append(emit.tensor_type(like.shape, like.dtype))
        real = scf.IfOp(c.value, types_, has_else=True)
        for k, blk in enumerate((real.then_block, real.else_block)):
            src_blk = (tmp.then_block, tmp.else_block)[k]
            for op in list(src_blk.operations):
                _move_to_end(op, blk)
            with ir.InsertionPoint(blk), self.at(node):
                vals = [self.coerce_carried(n, branch_vars[k][n], like, node)
                        for n, like in yielded]
                scf.YieldOp([v.value for v in vals])
        tmp.operation.erase()
        for (n, like), res in zip(yielded, real.results):
            self.vars[n] = TileValue(res, like.dtype, like.shape)

    # -- expressions ---------------------------------------------------------
    def expr(self, node: ast.expr) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise self.error(TileUnsupportedFeatureError, node,
                             f"'{type(node).__name__}' expressions are not supported in tile "
                             f"kernels")
        with self.at(node):
            try:
                return method(node)
            except TileError:
                raise
            except (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError,
                    OverflowError, AttributeError) as e:
                # Python-level folding of compile-time values failed: report it here.
                raise self.error(TileTypeError, node, f"{type(e).__name__}: {e}") from None

    def expr_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        raise self.error(TileTypeError, node, f"constant {node.value!r} is not supported")

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.vars:
            v = self.vars[name]
            if isinstance(v, _LoopLocal):
                raise self.error(TileSyntaxError, node, v.why)
            return v
        found, v = self.src.resolve_global(name)
        if not found:
            raise self.error(TileSyntaxError, node, f"name '{name}' is not defined")
        return v

    def expr_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.expr(e) for e in node.elts)

    expr_List = expr_Tuple

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        obj = self.expr(node.value)
        attr = node.attr
        if isinstance(obj, ArrayValue):
            return self.array_attr(obj, attr, node)
        if isinstance(obj, TiledViewValue):
            return self.tiled_view_attr(obj, attr, node)
        if isinstance(obj, (RawMemoryValue, ForeignPointerValue)):
            found = pointers.attribute(obj, attr)      # a value, or a method's rule name
            return BoundMethod(found, obj) if isinstance(found, str) else found
        if isinstance(obj, TileValue):
            if attr == "shape":
                return obj.shape
            if attr == "dtype":
                return obj.dtype
            if attr == "ndim":
                return obj.ndim
            if attr == "T":
                return intrinsics.call("transpose", (obj,), {})
            if attr in intrinsics.TILE_METHODS:
                return BoundMethod(intrinsics.TILE_METHODS[attr], obj)
            raise self.error(TileTypeError, node, f"tiles have no attribute '{attr}'")
        if isinstance(obj, types.ModuleType) or isinstance(obj, type) or \
                isinstance(obj, dt.DType):
            try:
                return getattr(obj, attr)
            except AttributeError:
                raise self.error(TileSyntaxError, node,
                                 f"'{getattr(obj, '__name__', obj)}' has no attribute "
                                 f"'{attr}'") from None
        if isinstance(obj, tuple) and attr in ("index", "count"):
            return getattr(obj, attr)
        raise self.error(TileTypeError, node, f"{describe(obj)} has no attribute '{attr}' "
                         f"usable in a kernel")

    def array_attr(self, a: ArrayValue, attr: str, node: ast.AST) -> Any:
        if attr == "shape":
            return tuple(intrinsics.array_dim(a, i) for i in range(a.ndim))
        if attr == "strides":
            return tuple(intrinsics.array_stride(a, i) for i in range(a.ndim))
        if attr == "dtype":
            return a.dtype
        if attr == "ndim":
            return a.ndim
        if attr in ("slice", "tiled_view", "get_raw_memory"):
            return BoundMethod(f"Array.{attr}", a)
        if attr == "foreign_pointer":
            return intrinsics.call("Array.foreign_pointer", (a,), {})
        raise self.error(TileTypeError, node, f"arrays have no attribute '{attr}' in kernels "
                         f"(use shape, strides, dtype, ndim, slice, tiled_view, "
                         f"get_raw_memory, foreign_pointer)")

    def tiled_view_attr(self, tv: TiledViewValue, attr: str, node: ast.AST) -> Any:
        if attr == "dtype":
            return tv.dtype
        if attr == "tile_shape":
            return tv.tile_shape
        if attr == "traversal_steps":
            return tv.traversal_steps
        if attr in _TILED_VIEW_METHODS:
            return BoundMethod(f"TiledView.{attr}", tv)
        raise self.error(TileTypeError, node, f"tiled views have no attribute '{attr}' (use "
                         f"dtype, tile_shape, traversal_steps, "
                         f"{', '.join(_TILED_VIEW_METHODS)})")

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        obj = self.expr(node.value)
        if isinstance(obj, tuple):
            idx = self.expr(node.slice)
            if not isinstance(idx, int):
                raise self.error(TileTypeError, node.slice,
                                 f"tuple index must be a compile-time int, got {describe(idx)}")
            return obj[idx]
        if isinstance(obj, TileValue):
            return self.tile_subscript(obj, node)
        if isinstance(obj, ListValue):
            return self.list_subscript(obj, node)
        raise self.error(TileTypeError, node, f"cannot subscript {describe(obj)}")

    def list_subscript(self, xs: ListValue, node: ast.Subscript) -> ArrayValue:
        """`arrays[i]`: a compile-time `i` picks the argument; a run-time integer scalar
        (or 0-d tile) selects among them (`tile.select_array`); a list whose length is
        known at launch only reads row `i` of its table (`tile.list_get`)."""
        idx = self.expr(node.slice)
        if isinstance(xs, TableListValue):
            if isinstance(idx, bool) or not (
                    isinstance(idx, int) or isinstance(idx, TileValue) and idx.is_scalar
                    and idx.dtype.is_int and not idx.dtype.is_bool):
                raise self.error(TileTypeError, node.slice,
                                 f"a list of arrays is indexed by an int, an integer scalar "
                                 f"or a 0-d integer tile, got {describe(idx)}")
            with self.at(node):
                if isinstance(idx, int):        # from the end: len(xs) + idx
                    idx = emit.constant(idx, dt.int32) if idx >= 0 else compute.binary(
                        "+", intrinsics.array_dim(xs.table, 0), emit.constant(idx, dt.int32))
                return self.table_element(xs, idx)
        n = len(xs.elements)
        if isinstance(idx, int) and not isinstance(idx, bool):
            if not -n <= idx < n:
                raise self.error(TileValueError, node.slice,
                                 f"index {idx} is out of range for {xs.describe()} "
                                 f"('{xs.name}'): expected -{n} <= index < {n}")
            return xs.elements[idx]
        if not (isinstance(idx, TileValue) and idx.is_scalar and idx.dtype.is_int
                and not idx.dtype.is_bool):
            raise self.error(TileTypeError, node.slice,
                             f"a list of arrays is indexed by an int, an integer scalar or a "
                             f"0-d integer tile, got {describe(idx)}")
        if n == 1:
            return xs.elements[0]
        first = xs.elements[0]
        with self.at(node):
            index = emit.cast(idx, dt.int32).value if idx.dtype != dt.int32 else idx.value
            value = lists.SelectArrayOp(index, [a.value for a in xs.elements]).result
        return dataclasses.replace(first, value=value, name=f"{xs.name}[...]")

    def table_element(self, xs: TableListValue, idx: TileValue) -> ArrayValue:
        """Element `idx` of a list passed as a table (at the current location); an index
        beyond int32 becomes -1, outside the list as it is (an empty array)."""
        e = xs.element
        if idx.dtype.bits > 32 or (idx.dtype.bits == 32 and not idx.dtype.is_signed):
            wide = emit.cast(idx, dt.int64)
            fits = compute.binary("&", compute.compare(">=", wide, -2**31),
                                  compute.compare("<", wide, 2**31))
            idx = compute.select(fits, emit.cast(wide, dt.int32), emit.constant(-1, dt.int32))
        index = emit.cast(idx, dt.int32).value if idx.dtype != dt.int32 else idx.value
        result = array_type(ir.Type.parse(e.dtype.array_mlir), e.ndim)
        value = lists.ListGetOp(result, xs.table.value, index, e.aligned).result
        return ArrayValue(value, e.dtype, e.ndim, f"{xs.name}[...]", e.static_shape,
                          e.static_strides)

    def tile_subscript(self, t: TileValue, node: ast.Subscript) -> TileValue:
        """`t[:, None]` / `t[None, :]`: insert size-1 dims (the only indexing of tiles)."""
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        shape, dim = [], 0
        for it in items:
            if isinstance(it, ast.Constant) and it.value is None:
                shape.append(1)
            elif isinstance(it, ast.Slice) and it.lower is it.upper is it.step is None:
                if dim >= t.ndim:
                    raise self.error(TileTypeError, node, f"too many indices for {t.describe()}")
                shape.append(t.shape[dim])
                dim += 1
            else:
                raise self.error(TileUnsupportedFeatureError, it,
                                 "tiles can only be indexed with ':' and None (to add dims); "
                                 "use load/extract patterns for elements")
        shape.extend(t.shape[dim:])
        return emit.reshape(t, tuple(shape))

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        lhs, rhs = self.expr(node.left), self.expr(node.right)
        if isinstance(node.op, ast.MatMult):
            return compute.matmul(lhs, rhs)
        return self.binop(_BINOPS[type(node.op)], lhs, rhs, node)

    def binop(self, op: str, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        if isinstance(lhs, tuple) and isinstance(rhs, tuple) and op == "+":
            return lhs + rhs
        for side in (lhs, rhs):
            if not (emit.is_number(side) or isinstance(side, TileValue)):
                raise self.error(TileTypeError, node,
                                 f"operator '{op}' does not apply to {describe(side)}")
        return compute.binary(op, lhs, rhs)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.expr(node.operand)
        if not (emit.is_number(v) or isinstance(v, TileValue)):
            raise self.error(TileTypeError, node, f"unary operator on {describe(v)}")
        if isinstance(node.op, ast.USub):
            return compute.negate(v)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert):
            return compute.invert(v)
        return compute.logical_not(v)

    def expr_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise self.error(TileUnsupportedFeatureError, node,
                             "chained comparisons are not supported; combine with '&'")
        lhs, rhs = self.expr(node.left), self.expr(node.comparators[0])
        op = node.ops[0]
        if isinstance(op, (ast.Is, ast.IsNot)):
            same = lhs is rhs
            return same if isinstance(op, ast.Is) else not same
        if type(op) not in _CMPOPS:
            raise self.error(TileUnsupportedFeatureError, node,
                             f"comparison '{type(op).__name__}' is not supported")
        if isinstance(lhs, dt.DType) or isinstance(rhs, dt.DType):
            if type(op) not in (ast.Eq, ast.NotEq):
                raise self.error(TileTypeError, node, "dtypes only compare with == and !=")
            eq = dt.from_any(lhs) == dt.from_any(rhs)
            return eq if isinstance(op, ast.Eq) else not eq
        if isinstance(lhs, tuple) and isinstance(rhs, tuple):      # compile-time shapes
            return compute._PY_FOLD[_CMPOPS[type(op)]](lhs, rhs)
        return self.binop(_CMPOPS[type(op)], lhs, rhs, node)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        vals = [self.expr(v) for v in node.values]
        is_and = isinstance(node.op, ast.And)
        if all(emit.is_number(v) for v in vals):
            out = vals[0]
            for v in vals[1:]:
                out = (out and v) if is_and else (out or v)
            return out
        acc = None
        for v in vals:
            b = emit.cast(emit.as_value(v, dt.bool_), dt.bool_) if not emit.is_number(v) \
                else bool(v)
            acc = b if acc is None else compute.binary("&" if is_and else "|", acc, b)
        return acc

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.expr(node.test)
        if emit.is_number(cond):
            return self.expr(node.body if cond else node.orelse)
        body, orelse = self.expr(node.body), self.expr(node.orelse)
        if any(isinstance(v, (ArrayValue, TiledViewValue, ListValue)) for v in (body, orelse)):
            raise self.error(TileUnsupportedFeatureError, node,
                             "a runtime condition cannot choose between arrays, slices or "
                             "tiled views (the choice must be known at compile time: "
                             "condition on a Constant, or compute the slice bounds with "
                             "where())")
        return compute.select(cond, body, orelse)

    def expr_Call(self, node: ast.Call) -> Any:
        fn = self.expr(node.func)
        if fn is api.print or fn is builtins.print:      # f-strings: from the AST
            return debug.compile_print(self, node)
        if fn is api.static_eval:
            return static.evaluate(self._one_arg(node, "static_eval"), self.static_scope(),
                                   self.src.globals, "static_eval", self.loc_of(node))
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
            if k.arg is None:
                raise self.error(TileUnsupportedFeatureError, k, "'**kwargs' is not supported")
            kwargs[k.arg] = self.expr(k.value)
        return self.call(fn, args, kwargs, node)

    def call(self, fn: Any, args: list, kwargs: dict, node: ast.AST) -> Any:
        if isinstance(fn, BoundMethod):
            return intrinsics.call(fn.name, (fn.receiver, *args), kwargs)
        name = _api_name(fn)
        if name is None and _hashable(fn):            # `tileir.TiledView.load(tv, ...)`
            name = intrinsics.METHOD_NAMES.get(fn)
        if name in intrinsics.CALLBACK_RULES:
            apply = lambda f, xs: self.apply_callable(f, xs, node)  # noqa: E731
            return intrinsics.call(name, tuple(args), kwargs, {"_apply": apply})
        if name is not None:
            return intrinsics.call(name, tuple(args), kwargs)
        if isinstance(fn, LambdaValue):
            return self.apply_callable(fn, args, node, kwargs)
        if isinstance(fn, dt.DType):
            if len(args) != 1 or kwargs:
                raise self.error(TileTypeError, node, f"{fn!r}(x) takes one argument")
            return intrinsics.call("astype", (args[0], fn), {})
        if isinstance(fn, Function):
            return self.call_helper(fn, args, kwargs, node)
        if fn is Slice:                          # a dense dim of advanced indexing
            return self.make_slice(args, kwargs, node)
        if is_plain_helper(fn):                  # cuTile inlines undecorated helpers too
            return self.call_helper(plain_helper(fn), args, kwargs, node)
        if isinstance(fn, KernelEntry):
            raise self.error(TileUnsupportedFeatureError, node,
                             f"kernel '{fn.name}' cannot be called from a kernel; make the "
                             f"shared code a @tileir.function")
        builtin = _BUILTINS.get(fn) if _hashable(fn) else None
        if builtin is not None:
            return builtin(self, args, kwargs, node)
        if fn is builtins.range:
            raise self.error(TileSyntaxError, node, "range() is only allowed as a for-loop "
                             "iterable")
        raise self.error(TileUnsupportedFeatureError, node,
                         f"cannot call {getattr(fn, '__name__', describe(fn))!s} inside a "
                         f"kernel; only the tileir API and @tileir.function helpers can be "
                         f"called")

    def apply_callable(self, fn: Any, args, node: ast.AST, kwargs: dict | None = None) -> Any:
        """`fn(*args)` for a function value a rule was given (reduce's combine): a
        lambda of the kernel, an `operator` function, or anything a call can name."""
        if isinstance(fn, LambdaValue):
            params = fn.node.args
            if params.vararg or params.kwarg or params.kwonlyargs or params.defaults or \
                    params.posonlyargs:
                raise self.error(TileUnsupportedFeatureError, fn.node,
                                 "lambdas in kernels take plain positional parameters only")
            if kwargs or len(args) != len(params.args):
                raise self.error(TileTypeError, node, f"the lambda takes {len(params.args)} "
                                 f"arguments, got {len(args)}")
            saved = self.vars
            self.vars = dict(fn.scope)
            self.vars.update((p.arg, a) for p, a in zip(params.args, args))
            try:
                with self.at(fn.node.body):
                    return self.expr(fn.node.body)
            finally:
                self.vars = saved
        op = _OPERATOR_FUNCTIONS.get(fn) if _hashable(fn) else None
        if op is not None:
            if len(args) != 2:
                raise self.error(TileTypeError, node, f"operator.{fn.__name__} takes 2 "
                                 f"arguments, got {len(args)}")
            return self.binop(op, args[0], args[1], node)
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

    def expr_Lambda(self, node: ast.Lambda) -> "LambdaValue":
        return LambdaValue(node, {k: v for k, v in self.vars.items()
                                  if not isinstance(v, _LoopLocal)})

    def call_helper(self, fn, args, kwargs, node) -> Any:
        bound = fn.bind_helper_args(args, kwargs, lambda msg: self.error(TileTypeError, node, msg))
        params = [(pname, classify_value(v)) for pname, v in bound.items()]
        key = (id(fn), tuple((p, k if not isinstance(k, (int, float, bool, str)) else
                              ("const", type(k).__name__, k)) for p, k in params))
        if key in self.mb.helpers:
            name, result_kinds = self.mb.helpers[key]
        else:
            if fn.name in self.mb.active:
                raise self.error(TileRecursionError, node,
                                 f"recursive call to helper '{fn.name}': kernels inline every "
                                 f"call, so recursion cannot be compiled")
            name = self.mb.unique_name(fn.name)
            self.mb.active.append(fn.name)
            try:
                sub = FunctionCompiler(self.mb, fn.source())
                with ir.InsertionPoint(self.mb.module.body):
                    sub.build(name, params, kernel=False)
            finally:
                self.mb.active.pop()
            result_kinds = [(r.dtype, r.shape) for r in sub.result_values]
            result_kinds = (result_kinds, isinstance(sub.returned, tuple))
            self.mb.helpers[key] = (name, result_kinds)
        kinds, is_tuple = result_kinds
        operands = [x for (p, k), v in zip(params, bound.values()) if _leaves(k)
                    for x in _leaf_values(v)]
        res_types = [emit.tensor_type(shape, d) for d, shape in kinds]
        call = func.CallOp(res_types, ir.FlatSymbolRefAttr.get(name), operands)
        outs = [ForeignPointerValue(r, d) if d.is_foreign_pointer else TileValue(r, d, shape)
                for r, (d, shape) in zip(call.results, kinds)]
        if is_tuple:
            return tuple(outs)
        return outs[0] if outs else None


@dataclasses.dataclass(frozen=True, eq=False)
class LambdaValue:
    """A lambda written in a kernel: compiled where it is applied, in its scope."""

    node: ast.Lambda
    scope: dict


_TILED_VIEW_METHODS = ("num_tiles", "load", "store", "atomic_store_add", "atomic_store_max",
                       "atomic_store_min", "atomic_store_and", "atomic_store_or",
                       "atomic_store_xor")

_OPERATOR_FUNCTIONS = {operator.add: "+", operator.sub: "-", operator.mul: "*",
                       operator.truediv: "/", operator.floordiv: "//", operator.mod: "%",
                       operator.pow: "**", operator.and_: "&", operator.or_: "|",
                       operator.xor: "^", operator.lshift: "<<", operator.rshift: ">>",
                       operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
                       operator.eq: "==", operator.ne: "!="}


def _move_to_end(op: ir.Operation, block: ir.Block) -> None:
    """Moves `op` to the end of `block`."""
    op.detach_from_parent()
    ir.InsertionPoint(block).insert(op)


def _assigned_names(stmts: list[ast.stmt]) -> list[str]:
    names: list[str] = []
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.append(n.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                names.append(n.target.id)
    return list(dict.fromkeys(names))


def _hashable(x) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def _api_name(fn) -> str | None:
    name = getattr(fn, "__name__", None)
    if name in api.SIGNATURES and getattr(api, name, None) is fn:
        return name
    return None


# ---------------------------------------------------------------------------
# Python builtins usable in kernels
# ---------------------------------------------------------------------------
def _builtin_minmax(kind):
    def fn(c: FunctionCompiler, args, kwargs, node):
        if kwargs or len(args) < 2:
            raise c.error(TileTypeError, node, f"{kind}() in a kernel takes two or more "
                          f"values (use tileir.{kind}(tile, axis) to reduce a tile)")
        out = args[0]
        for a in args[1:]:
            out = compute.binary(kind, out, a)
        return out
    return fn


def _builtin_cast(d: dt.DType, pytype):
    def fn(c: FunctionCompiler, args, kwargs, node):
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
    if len(args) == 1 and isinstance(args[0], tuple):
        return len(args[0])
    if len(args) == 1 and isinstance(args[0], TableListValue):
        with c.at(node):
            return intrinsics.array_dim(args[0].table, 0)
    if len(args) == 1 and isinstance(args[0], ListValue):
        return len(args[0].elements)
    if len(args) == 1 and isinstance(args[0], TileValue) and args[0].ndim:
        return args[0].shape[0]
    raise c.error(TileTypeError, node, f"len() needs a tuple, a list of arrays or a tile, got "
                  f"{describe(args[0]) if args else 'nothing'}")


_BUILTINS = {builtins.min: _builtin_minmax("min"), builtins.max: _builtin_minmax("max"),
             builtins.abs: _builtin_abs, builtins.len: _builtin_len,
             builtins.int: _builtin_cast(dt.int32, int),
             builtins.float: _builtin_cast(dt.float32, float),
             builtins.bool: _builtin_cast(dt.bool_, bool)}


def _arg_attrs(kind: "Param") -> ir.DictAttr:
    attrs = {}
    if isinstance(kind, ArrayParam):
        for flag in ("aligned", "large"):
            if getattr(kind, flag):
                attrs[f"tile.{flag}"] = ir.UnitAttr.get()
    return ir.DictAttr.get(attrs)


def classify_value(v: Any) -> Any:
    """How a traced value enters a helper: as IR arguments (an array, a scalar, or a
    view's parts) or as a compile-time value."""
    view = views.param_kind(v, _array_kind)
    if view is not None:
        return view
    if isinstance(v, ArrayValue):
        return _array_kind(v)
    if isinstance(v, TableListValue):
        return TableListParam(v.element)
    if isinstance(v, ListValue):
        return ListParam(tuple(_array_kind(a) for a in v.elements))
    if isinstance(v, TileValue):
        return ScalarParam(v.dtype, v.shape)
    if isinstance(v, ForeignPointerValue):      # an i64 argument of its pointer dtype
        return ScalarParam(v.dtype)
    if isinstance(v, RawMemoryValue):
        return pointers.RawMemoryParam(_array_kind(v.array))
    if isinstance(v, tuple):            # runtime items (a tuple parameter's) enter as such
        items = tuple(classify_value(x) for x in v)
        if any(_leaves(k) for k in items):
            return TupleParam(items)
    return v


def _array_kind(a: ArrayValue) -> ArrayParam:
    return ArrayParam(a.dtype, a.ndim, static_shape=a.static_shape,
                      static_strides=a.static_strides)


def _leaves(kind: Any) -> list[Param]:
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
        return [leaf for k in kind.items for leaf in _leaves(k)]
    if isinstance(kind, pointers.RawMemoryParam):
        return [kind.array]
    return []


def _leaf_names(kind: Any, pname: str) -> list[str]:
    """The names of the IR arguments `_leaves(kind)` (`xs[1]`, `t[0][1]`, else `pname`)."""
    if isinstance(kind, ListParam):
        return [f"{pname}[{i}]" for i in range(len(kind.elements))]
    if isinstance(kind, TupleParam):
        return [n for i, k in enumerate(kind.items) for n in _leaf_names(k, f"{pname}[{i}]")]
    return [pname] * len(_leaves(kind))


def _leaf_values(v: Any) -> list[ir.Value]:
    """The IR values a helper's argument `v` passes (`_leaves` of its kind)."""
    if isinstance(v, TableListValue):
        return [v.table.value]
    if isinstance(v, ListValue):
        return [a.value for a in v.elements]
    if isinstance(v, tuple):
        return [x for item in v if _leaves(classify_value(item)) for x in _leaf_values(item)]
    if isinstance(v, RawMemoryValue):
        return [v.array.value]
    return views.leaf_values(v)


def _argument(kind: Any, pname: str, args) -> Any:
    """The value of a parameter of `kind` over the function's next arguments."""
    def array(k: ArrayParam, value: ir.Value) -> ArrayValue:
        return ArrayValue(value, k.dtype, k.ndim, pname, k.static_shape, k.static_strides)
    if isinstance(kind, ArrayParam):
        return array(kind, next(args))
    if isinstance(kind, ScalarParam):
        if kind.dtype.is_foreign_pointer:
            return ForeignPointerValue(next(args), kind.dtype)
        return TileValue(next(args), kind.dtype, kind.shape)
    if isinstance(kind, pointers.RawMemoryParam):
        return RawMemoryValue(array(kind.array, next(args)))
    if isinstance(kind, ListParam):
        return ListValue(tuple(ArrayValue(next(args), k.dtype, k.ndim, f"{pname}[{i}]",
                                          k.static_shape, k.static_strides)
                               for i, k in enumerate(kind.elements)), pname)
    if isinstance(kind, TableListParam):
        return TableListValue((), pname, table=ArrayValue(next(args), dt.int64, 2, pname),
                              element=kind.element)
    if isinstance(kind, (views.SliceParam, views.TiledViewParam)):
        return views.rebuild(kind, args, array)
    if isinstance(kind, TupleParam):    # a tuple of the items' values (constants as such)
        return tuple(_argument(k, f"{pname}[{i}]", args) for i, k in enumerate(kind.items))
    return kind
