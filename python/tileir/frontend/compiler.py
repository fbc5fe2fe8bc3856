"""Stage `frontend`: the Python AST of a `@kernel` / `@function` body -> Tile IR.

One `FunctionCompiler` translates one function specialization: this module holds its
statements, expressions and entry point; its loops are `loops.py`'s, its attributes
and subscripts `access.py`'s, its calls `calls.py`'s, its parameters `params.py`'s,
its control-flow flags `control.py`'s and its nested functions `closures.py`'s.  Every op it
builds carries the user's file:line:col (`with self.at(node)`).  Compile-time
values (numbers, tuples, dtypes, `Constant` parameters) are Python objects and
fold in Python; runtime values are `TileValue` / `ArrayValue`.

Control flow:
* `for i in range(...)` -> `scf.for` over i32; names assigned in the body that
  exist before the loop are loop-carried (`iter_args`) and must keep their type.
* `if` on a compile-time condition compiles only the taken branch (this is how
  `Constant[bool]` specializes); on a runtime scalar it becomes `scf.if`
  yielding every name either branch assigns.
* `while cond` -> `scf.while`.  `break`, `continue` and `return` are flags among the
  names (`control.py`): the statements after them run under a guard, and a loop
  that may break or return becomes an `scf.while` that stops on them.
* `@function` helpers become private `func.func`s called with `func.call`
  (inlined later by `tile-inline`), specialized per argument types/constants;
  tuples, dicts and nested functions passed to them are `structured.py`'s.
* Nested `def`s and lambdas are compiled inline where called (`closures.py`).
* Tuples and frozen dataclass instances (`aggregates.py`) are carried by loops,
  merged by runtime `if`s, returned (early too) and passed to helpers by their
  runtime leaves; their compile-time items stay Python values.
"""

from __future__ import annotations

import ast
import contextlib
from typing import Any

from mlir import ir
from mlir.dialects import func

from .. import api
from .. import dtypes as dt
from ..errors import (Diagnostic, TileError, TileStaticAssertionError, TileSyntaxError,
                      TileTypeError, TileUnsupportedFeatureError)
from ..specialization import ArrayParam
from tileir.dialect import FUNCTION_ATTR, KERNEL_ATTR, array_type
from . import aggregates, choices, compare, compute, emit, static
from .access import Access
from .calls import Calls
from .closures import Frame, NestedFunctions
from .control import ControlFlow, Unbound
from .loops import Loops
from .params import arg_attrs, argument, leaf_names, leaves, result_item
from .source import SourceInfo
from .values import HANDLES, TileValue, describe

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
           ast.LShift: "<<", ast.RShift: ">>"}


class ModuleBuilder:
    """Owns the MLIR module being built and the helper specializations in it."""

    def __init__(self, ctx: ir.Context):
        self.ctx = ctx
        self.module = ir.Module.create(ir.Location.unknown(ctx))
        self.helpers: dict[tuple, tuple[str, list]] = {}
        self.active: list[str] = []
        self.active_closures: list[ast.AST] = []     # nested functions being inlined
        self.bounded_loops: set[ast.AST] = set()      # loops carrying slices' bounds
        self.slotted_names: set[tuple] = set()        # (loop, name): arrays in aggregates

    def erase_function(self, name: str) -> None:
        """Erases the function `name` (a helper whose compilation was abandoned)."""
        for op in self.module.body.operations:
            if "sym_name" in op.attributes and \
                    ir.StringAttr(op.attributes["sym_name"]).value == name:
                op.erase()
                return

    def unique_name(self, base: str) -> str:
        names = {str(ir.StringAttr(op.attributes["sym_name"]).value)
                 for op in self.module.body.operations if "sym_name" in op.attributes}
        name, i = base, 0
        while name in names:
            i += 1
            name = f"{base}_{i}"
        return name


class FunctionCompiler(Loops, Access, Calls, ControlFlow, NestedFunctions):
    def __init__(self, mb: ModuleBuilder, source: SourceInfo):
        self.mb = mb
        # the function being compiled: a nested function's call replaces it for a while
        self.frame = Frame(source)

    @property
    def vars(self) -> dict[str, Any]:
        """The names of the frame being compiled (reassigned at branches and loops)."""
        return self.frame.vars

    @vars.setter
    def vars(self, value: dict[str, Any]) -> None:
        self.frame.vars = value

    @property
    def src(self) -> SourceInfo:
        return self.frame.src

    # -- locations and errors ------------------------------------------------
    def loc_of(self, node: ast.AST) -> ir.Location:
        line, col = self.src.position(node)
        return ir.Location.file(self.src.filename, line, col, self.mb.ctx)

    def at(self, node: ast.AST) -> ir.Location:
        return self.loc_of(node)

    def error(self, cls, node: ast.AST, msg: str) -> TileError:
        return cls(msg, self.loc_of(node))

    @contextlib.contextmanager
    def call_site(self, callee: str, node: ast.AST):
        """Compiling the call of the helper or nested function `callee` at `node`: an
        error from inside it gets a note naming this call, put before the notes of the
        calls inside, so that they read from the kernel's line down to the failing line
        (which the error itself names, first)."""
        where = self.loc_of(node)                 # (in the caller's frame: enter first)
        caller = f"kernel '{self.frame.name}'" if self.frame.kernel else f"'{self.frame.name}'"
        try:
            yield
        except TileError as e:
            e.diagnostics[0].notes.insert(0, Diagnostic(where, f"{caller} calls '{callee}' "
                                                        f"here", "note"))
            e.args = (e.render(),)
            raise

    # -- entry points --------------------------------------------------------
    def build(self, name: str, params: list[tuple[str, Any]], *, kernel: bool) -> func.FuncOp:
        """Builds `func.func @name` for parameters given as (name, kind) where kind is an
        `ArrayParam`, a `ScalarParam` or a compile-time Python value."""
        fdef = self.src.tree
        arg_types, arg_names = [], []
        for pname, kind in params:
            # a list's elements and a tuple's items are named as the launch's errors name
            # them: xs[1], t[0][1]
            for leaf, leaf_name in zip(leaves(kind), leaf_names(kind, pname)):
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
            fn.arg_attrs = ir.ArrayAttr.get([arg_attrs(leaf) for _, k in params
                                             for leaf in leaves(k)])
            block = fn.add_entry_block()
        args = iter(block.arguments)
        self.frame.name, self.frame.kernel = fdef.name, kernel
        for pname, kind in params:
            self.vars[pname] = argument(kind, pname, args)
        with ir.InsertionPoint(block):
            self.block(fdef.body)
            with self.at(fdef.body[-1]):
                # numbers become results; other compile-time values stay in the template
                self.result_template = aggregates.transform(
                    self.function_result(fdef.body[-1]), result_item)
                results = aggregates.tile_leaves(self.result_template)
                func.ReturnOp([r.value for r in results])
        fn.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [r.value.type for r in results]))
        self.result_values = results
        return fn

    # -- statements ----------------------------------------------------------
    def stmt(self, node: ast.stmt) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise self.error(TileUnsupportedFeatureError, node,
                             f"'{type(node).__name__}' statements are not supported in tile "
                             f"kernels; use assignments, for-range loops, if/else and calls")
        with self.at(node):
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

    # -- if/else -------------------------------------------------------------
    def stmt_If(self, node: ast.If) -> None:
        cond = self.expr(node.test)
        if isinstance(cond, (tuple, dict)) or not compare.is_runtime(cond):
            self.block(node.body if cond else node.orelse)     # compile-time branch
            return
        if not isinstance(cond, TileValue) or not cond.is_scalar:
            raise self.error(TileTypeError, node.test,
                             f"an 'if' condition must be a scalar, got {describe(cond)}; use "
                             f"where(cond, x, y) to select element-wise")
        self.runtime_if(emit.cast(cond, dt.bool_), node, lambda: self.block(node.body),
                        lambda: self.block(node.orelse))

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
        if isinstance(node.value, (bool, int, float, str)) or node.value in (None, Ellipsis):
            return node.value
        raise self.error(TileTypeError, node, f"constant {node.value!r} is not supported")

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def lookup(self, name: str, node: ast.AST) -> Any:
        found, v = self.frame.find(name)
        if found:
            if isinstance(v, Unbound):
                raise self.error(TileSyntaxError, node, v.why)
            return v
        found, v = self.src.resolve_global(name)
        if not found:
            raise self.error(TileSyntaxError, node, f"name '{name}' is not defined")
        return aggregates.from_python(v)

    def expr_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.expr(e) for e in node.elts)

    expr_List = expr_Tuple

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
        """`a < b`, and chains `a < b < c` as `a < b and b < c` with each operand
        evaluated once; a compile-time False ends the chain (compare.py)."""
        lhs = self.expr(node.left)
        result: Any = True
        for op, right in zip(node.ops, node.comparators):
            rhs = self.expr(right)
            with self.at(node):
                result = compare.logical_and(result, compare.compare(op, lhs, rhs))
            if result is False:
                break
            lhs = rhs
        return result

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        """`a and b` / `a or b`: compile-time operands decide as in Python, so the rest
        is not compiled (`x is not None and x.dtype == ...`); runtime ones are cast to
        bool and and-ed / or-ed (element-wise on tiles)."""
        is_and = isinstance(node.op, ast.And)
        acc, v = None, None
        for sub in node.values:
            v = self.expr(sub)
            if compare.is_runtime(v):
                with self.at(sub):
                    b = emit.cast(emit.as_value(v, dt.bool_), dt.bool_)
                acc = b if acc is None else compute.binary("&" if is_and else "|", acc, b)
            elif (not v) if is_and else v:      # decides the whole expression
                if acc is None:
                    return v
                with self.at(node):
                    return compute.binary("&" if is_and else "|", acc, bool(v))
        return v if acc is None else acc

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.expr(node.test)
        if isinstance(cond, tuple) or not compare.is_runtime(cond):
            return self.expr(node.body if cond else node.orelse)
        body, orelse = self.expr(node.body), self.expr(node.orelse)
        return self.select_items(cond, body, orelse, node)

    def select_items(self, cond: TileValue, body: Any, orelse: Any, node: ast.IfExp,
                     path: tuple = ()) -> Any:
        """`body if cond else orelse` for a runtime `cond`, item by item through tuples
        and dataclass instances of one structure: runtime items and numbers selected
        element-wise, other compile-time items (strings, dtypes) equal on both sides."""
        if aggregates.is_aggregate(body) or aggregates.is_aggregate(orelse):
            try:
                a, b, parts = aggregates.match_items(body, orelse)
            except aggregates.StructureError:
                raise self.error(TileTypeError, node,
                                 f"a runtime condition chooses between {describe(body)} and "
                                 f"{describe(orelse)}{_at_path(path)}; both sides must have "
                                 f"the same structure") from None
            return aggregates.like(body, (self.select_items(cond, x, y, node, path + (p,))
                                          for x, y, p in zip(a, b, parts)))
        if any(isinstance(v, HANDLES) for v in (body, orelse)):
            if body is orelse:
                return body
            try:
                with self.at(node):
                    return choices.choose(cond, body, orelse)
            except choices.CannotChoose as e:
                raise self.error(TileTypeError, node, f"a runtime condition chooses between "
                                 f"{describe(body)} and {describe(orelse)}"
                                 f"{_at_path(path)}: {e}") from None
        if all(isinstance(v, TileValue) or emit.is_number(v) for v in (body, orelse)):
            with self.at(node):
                return compute.select(cond, body, orelse)
        if type(body) is type(orelse) and aggregates.equal(body, orelse):
            return body
        raise self.error(TileTypeError, node,
                         f"a runtime condition chooses between {describe(body)} and "
                         f"{describe(orelse)}{_at_path(path)}; a compile-time item (a string, "
                         f"a dtype, None, ...) must be the same on both sides")


def _at_path(path: tuple) -> str:
    return f" (at item {aggregates.path_name('', path)})" if path else ""
