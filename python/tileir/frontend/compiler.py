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
import builtins
import contextlib
import dataclasses
import enum
import inspect
import operator
import types
import typing
from typing import Any

from mlir import ir
from mlir.dialects import func, scf

from .. import api
from .. import dtypes as dt
from ..errors import (Diagnostic, TileError, TileRecursionError, TileStaticAssertionError,
                      TileSyntaxError, TileTypeError, TileUnsupportedFeatureError,
                      TileValueError)
from ..annotations import Slice
from ..function import Function, KernelEntry, is_plain_helper, plain_helper
from ..specialization import (ArrayParam, ListParam, Param, ScalarParam, TableListParam,
                              TupleParam)
from tileir.dialect import FUNCTION_ATTR, KERNEL_ATTR, array_type, lists
from . import (aggregates, choices, compare, comprehensions, compute, control, debug, emit,
               intrinsics, library, pointers, static, structured, views)
from .closures import Closure, Frame, NestedFunctions, own_names
from .control import ControlFlow, Unbound, assigned_names
from .source import SourceInfo
from .values import (HANDLES, ArrayValue, BoundMethod, DataclassValue, ForeignPointerValue,
                     ListValue, MethodValue, RawMemoryValue,
                     TableListValue, TiledViewValue, TileValue, describe)

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


class FunctionCompiler(ControlFlow, NestedFunctions):
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
        self.frame.name, self.frame.kernel = fdef.name, kernel
        for pname, kind in params:
            self.vars[pname] = _argument(kind, pname, args)
        with ir.InsertionPoint(block):
            self.block(fdef.body)
            with self.at(fdef.body[-1]):
                # numbers become results; other compile-time values stay in the template
                self.result_template = aggregates.transform(
                    self.function_result(fdef.body[-1]), _result_item)
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

    def static_scope(self) -> dict[str, Any]:
        """What compile-time Python sees of the kernel's names (static_eval)."""
        scope = dict(self.src.nonlocals)
        scope.update(self.frame.visible())
        return scope

    def _one_arg(self, node: ast.Call, name: str) -> ast.expr:
        if len(node.args) != 1 or node.keywords or isinstance(node.args[0], ast.Starred):
            raise self.error(TileSyntaxError, node, f"{name}() takes exactly one argument")
        return node.args[0]

    def static_for(self, node: ast.For) -> None:
        """`for x in static_iter(...)`: the body compiled once per item."""
        items = static.iterate(self._one_arg(node.iter, "static_iter"), self.static_scope(),
                               self.src.globals, self.loc_of(node.iter))
        self.unrolled_loop(node, items, lambda item: self.assign(node.target, item))

    def unrolled_for(self, node: ast.For) -> None:
        """`for x in xs` over what is not a range: a list of arrays (`list_for`) or a
        tuple, whose items are known at compile time, so the body is compiled once per
        item (`for x, y in ((a, b), (c, d))` unpacks each).  (cuTile 1.7 loops over
        ranges only; tileir unrolls these as it does `static_iter`.)"""
        xs = self.expr(node.iter)
        if isinstance(xs, ListValue):
            return self.list_for(node, xs)
        if isinstance(xs, tuple):
            return self.unrolled_loop(node, xs, lambda item: self.assign(node.target, item))
        raise self.error(TileUnsupportedFeatureError, node.iter,
                         f"a for loop runs over range(...), a tuple or a list of arrays, got "
                         f"{describe(xs)}")

    def list_for(self, node: ast.For, xs: ListValue) -> None:
        """`for a in xs` over a list of arrays: the body compiled once per element (the
        list's length is part of the specialization), or for a list whose length is
        known at launch only, once in a loop over its table's rows."""
        if isinstance(xs, TableListValue):
            return self.table_for(node, xs)
        self.unrolled_loop(node, xs.elements, lambda a: self.assign(node.target, a))

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
        self.loop_carrying_bounds(node, self.for_loop)

    def loop_carrying_bounds(self, node: ast.For | ast.While, compile_loop) -> None:
        """`compile_loop(node)`; where it turns out that an array the loop carries is
        assigned a slice, or that a trip replaces an array inside a tuple or dataclass
        instance it carries, once more carrying the slice bounds or those arrays (a
        loop that only swaps whole arrays keeps them whole, and one that keeps a
        tuple's arrays does not choose them: their loads and stores stay tile loads)."""
        blk = ir.InsertionPoint.current.block
        mark = len(list(blk.operations))
        saved = dict(self.vars)
        while True:
            try:
                return compile_loop(node)
            except (choices.NeedsBounds, choices.NeedsCarrying) as e:
                if isinstance(e, choices.NeedsBounds):
                    if node in self.mb.bounded_loops:
                        raise
                    self.mb.bounded_loops.add(node)
                elif e.loop is not node:
                    raise                   # an outer loop's name
                else:
                    self.mb.slotted_names.add((node, e.name))
            for op in reversed(list(blk.operations)[mark:]):
                op.erase()
            self.vars = dict(saved)

    def for_loop(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(TileUnsupportedFeatureError, node, "for/else is not supported")
        if isinstance(node.iter, ast.Call) and self.expr(node.iter.func) is api.static_iter:
            return self.static_for(node)
        it = node.iter
        if not (isinstance(it, ast.Call) and self.expr(it.func) is builtins.range):
            return self.unrolled_for(node)
        if not isinstance(node.target, ast.Name):
            raise self.error(TileUnsupportedFeatureError, node.target,
                             "the loop variable must be a single name")
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
        carried.  A body that may break or return makes it an scf.while
        (`range_while`)."""
        stops = self.loop_stops(node)
        if stops:
            self.range_while(node, lb, ub, st, bind, stops)
        else:
            carried, inits = self.carried_values(node, exclude=node.target.id)
            loop = scf.ForOp(lb.value, ub.value, st.value, aggregates.ir_values(inits))
            before = dict(self.vars)
            with ir.InsertionPoint(loop.body):
                self.vars[node.target.id] = bind(TileValue(loop.induction_variable, dt.int32,
                                                           ()))
                self.bind_carried(carried, inits, loop.inner_iter_args, node)
                self.block(node.body)
                self.yield_carried(node, carried, inits)
            self.close_loop(node, before, carried, inits, loop.results)
            self.leave_loop()
        # (Python leaves it at its last value: the loop's IR has no such value)
        self.vars[node.target.id] = Unbound(
            f"'{node.target.id}' is the variable of the loop at line "
            f"{self.src.position(node)[0]} and is not available after it; keep what you "
            f"need of it in a name assigned before the loop")

    def range_while(self, node: ast.For, lb: TileValue, ub: TileValue, st: TileValue, bind,
                    stops: list[str]) -> None:
        """`range_loop` as an scf.while carrying the counter, the names and `stops`
        (control.loop_stops): it runs while counter < ub and no stop flag is set."""
        carried, inits = self.carried_values(node, exclude=node.target.id)
        names = carried + stops
        values = [lb, *inits, *self.stop_inits(stops, node)]
        flat = aggregates.ir_values(values)
        types = [v.type for v in flat]
        loop = scf.WhileOp(types, flat)
        before_block = loop.before.blocks.append(*types)
        after_block = loop.after.blocks.append(*types)
        with ir.InsertionPoint(before_block), self.at(node):
            args = aggregates.rebind(values, before_block.arguments)
            go = compute.binary("&", compute.compare("<", args[0], ub),
                                self.stop_condition(names, args[1:]))
            scf.ConditionOp(go.value, list(before_block.arguments))
        outer = dict(self.vars)
        with ir.InsertionPoint(after_block):
            counter = aggregates.rebind(values[:1], after_block.arguments[:1])[0]
            self.vars[node.target.id] = bind(counter)
            self.bind_carried(names, values[1:], list(after_block.arguments)[1:], node)
            self.enter_iteration()
            self.block(node.body)
            # no break or return compiled (they were under compile-time false ifs)
            counted = all(self.vars.get(f, False) is False for f in stops
                          if f in control.FLAGS)
            if not counted:
                with self.at(node):
                    step = compute.binary("+", counter, st)
                yields = [self.carried_now(n, v, node) for n, v in zip(names, values[1:])]
                scf.YieldOp([step.value] + aggregates.ir_values(yields))
        if counted:
            results = self.as_for_loop(node, loop, lb, ub, st, carried, values[1:])
            names, values = carried, [lb, *inits]
        else:
            results = list(loop.results)[1:]
        self.close_loop(node, outer, names, values[1:], results)
        self.leave_loop()

    def as_for_loop(self, node: ast.For, loop: scf.WhileOp, lb: TileValue, ub: TileValue,
                    st: TileValue, carried: list[str], inits: list) -> list:
        """`range_while`'s loop, whose body turned out to exit nowhere, as the scf.for
        a loop without exits is (what loop passes expect); returns its results.  The
        stop flags' block arguments were never read as flags (the body starts with
        every flag False); any other use takes their initial value."""
        body = loop.after.blocks[0]
        with self.at(node):
            new = scf.ForOp(lb.value, ub.value, st.value,
                            aggregates.ir_values(inits[:len(carried)]))
        args = list(body.arguments)
        news = [new.induction_variable, *new.inner_iter_args,
                *aggregates.ir_values(inits[len(carried):])]
        for old, value in zip(args, news):
            old.replace_all_uses_with(value)
        for op in list(body.operations):
            op.detach_from_parent()
            ir.InsertionPoint(new.body).insert(op)
        with ir.InsertionPoint(new.body):
            self.yield_carried(node, carried, inits[:len(carried)])
        loop.operation.erase()
        return list(new.results)

    def carried_values(self, node: ast.AST, exclude: str | None = None):
        """The names a loop body assigns that exist before it (the loop carries them),
        and their values before the loop with numbers made runtime values.  A tuple or
        dataclass instance is carried by its runtime leaves (aggregates.py); arrays in
        it are not carried, they must stay the same."""
        body = node.body
        carried = [n for n in assigned_names(body)
                   if n in self.vars and not isinstance(self.vars[n], Unbound)
                   and n != exclude]
        visible = self.visible_values()
        bounds = node in self.mb.bounded_loops or None

        def carried_handle(x):
            # the parts of a run-time choice (choices.py) among the arrays before the
            # loop of its dtype and rank
            with self.at(node):
                template = choices.slot([x], lambda o: False,
                                        more=choices.loop_options(x, visible), bounds=bounds)
                return choices.parts_of(template, x)
        for n in carried:
            v = self.vars[n]
            if choices.is_handle(v):
                self.vars[n] = carried_handle(v)
                continue
            # a tuple or dataclass instance: its handles stay as they are, unless a trip
            # replaces one (then the loop is compiled again carrying them)
            slotted = (node, n) in self.mb.slotted_names

            def runtime(x, n=n, v=v, slotted=slotted):
                if slotted and choices.is_handle(x):
                    return carried_handle(x)
                if isinstance(x, HANDLES) and x is v:
                    raise self.error(TileUnsupportedFeatureError, node,
                                     f"'{n}' ({describe(v)}) cannot be reassigned inside a "
                                     f"loop (lists of arrays are not loop-carried); give the "
                                     f"value a new name in the loop body")
                return emit.as_value(x) if emit.is_number(x) else x
            self.vars[n] = aggregates.transform(v, runtime)
            if not isinstance(self.vars[n], TileValue) and not aggregates.is_aggregate(v):
                raise self.error(TileTypeError, node, f"'{n}' ({describe(v)}) cannot be "
                                 f"carried through a loop")
        return carried, [self.vars[n] for n in carried]

    def yield_carried(self, node: ast.AST, carried, inits) -> None:
        yields = [self.carried_now(n, init, node) for n, init in zip(carried, inits)]
        scf.YieldOp(aggregates.ir_values(yields))

    def carried_now(self, name: str, init: Any, node: ast.AST) -> Any:
        """The value of carried `name` at the end of a trip, made to match its value
        before the loop `init` (the same structure, runtime leaves of the same types)."""
        def leaf(t: TileValue, v: Any, path: tuple) -> TileValue:
            return self.coerce_carried(aggregates.path_name(name, path), v, t, node)
        value = self.carried_parts(name, init, self.vars[name], node)
        try:
            return aggregates.match(init, value, leaf)
        except aggregates.StructureError as e:
            where = aggregates.path_name(name, e.path)
            if choices.is_handle(e.template) and e.path and \
                    (node, name) not in self.mb.slotted_names:
                raise choices.NeedsCarrying(node, name) from None
            if isinstance(e.template, HANDLES):
                raise self.error(TileUnsupportedFeatureError, node, f"'{where}' is "
                                 f"{describe(e.template)} that a trip of the loop replaces; "
                                 f"a loop carries {control.not_carried(e.template)} that a "
                                 f"name holds, not items of a tuple or dataclass instance "
                                 f"(give the item a name of its own before the loop)") \
                    from None
            raise self.error(TileTypeError, node, f"'{where}' is {describe(e.template)} before "
                             f"the loop but {describe(e.value)} after a trip; a loop-carried "
                             f"tuple or dataclass keeps its structure and its compile-time "
                             f"items") from None

    def carried_parts(self, name: str, init: Any, value: Any, node: ast.AST,
                      path: tuple = ()) -> Any:
        """`value` at the end of a trip with the handles at `init`'s Slots as parts."""
        if isinstance(init, choices.Slot):
            return self.carried_handle(aggregates.path_name(name, path), init, value, node)
        if aggregates.is_aggregate(init) and aggregates.is_aggregate(value):
            try:
                a, b, parts = aggregates.match_items(init, value)
            except aggregates.StructureError:
                return value                    # (the caller's match says where)
            return aggregates.like(value, (self.carried_parts(name, x, y, node, path + (p,))
                                           for x, y, p in zip(a, b, parts)))
        return value

    def carried_handle(self, name: str, init: Any, value: Any, node: ast.AST) -> Any:
        """The parts of loop-carried handle `name` at the end of a trip."""
        what = f"'{name}' is {describe(init.like)} before the loop and {describe(value)} " \
               f"after a trip"
        if not choices.is_handle(value):
            raise self.error(TileTypeError, node, f"{what}; a loop-carried array, view, raw "
                             f"memory or foreign pointer stays one of its kind")
        try:
            with self.at(node):
                return choices.parts_of(init, value)
        except choices.CannotChoose as e:
            cls = TileUnsupportedFeatureError if isinstance(e, choices.MadeInside) \
                else TileTypeError
            raise self.error(cls, node, f"{what}: {e}") from None

    def bind_carried(self, names: list[str], templates: list, values, node: ast.AST) -> None:
        """Binds `names` to `values` (a loop's block arguments or results) over their
        `templates`, a carried handle made of its parts (at the current point)."""
        with self.at(node):
            self.vars.update(zip(names, [choices.from_parts(t, v) for t, v in zip(
                templates, aggregates.rebind(templates, values))]))

    def close_loop(self, node: ast.AST, before: dict, carried, inits, results) -> None:
        """After a loop: names first defined inside it are out of scope, the carried ones
        are the loop's results."""
        inner = self.vars
        self.vars = before
        for n in inner:
            if n not in before and not control.is_hidden(n):
                self.vars[n] = Unbound(f"'{n}' is defined inside the loop at line "
                                       f"{self.src.position(node)[0]} and is not available "
                                       f"after it; assign it before the loop")
        self.bind_carried(carried, inits, results, node)

    # -- while loops ---------------------------------------------------------
    def stmt_While(self, node: ast.While) -> None:
        self.loop_carrying_bounds(node, self.while_loop)

    def while_loop(self, node: ast.While) -> None:
        """`while cond: body` -> scf.while: the names the body assigns that exist before
        the loop are carried; the condition (which may have effects, an atomic spin
        lock's compare-and-swap) runs before every trip."""
        if node.orelse:
            raise self.error(TileUnsupportedFeatureError, node, "while/else is not supported")
        stops = self.loop_stops(node)
        carried, inits = self.carried_values(node)
        names, values = carried + stops, inits + self.stop_inits(stops, node)
        flat = aggregates.ir_values(values)
        types = [v.type for v in flat]
        loop = scf.WhileOp(types, flat)
        before_block = loop.before.blocks.append(*types)
        after_block = loop.after.blocks.append(*types)
        outer = dict(self.vars)
        with ir.InsertionPoint(before_block):
            self.bind_carried(names, values, before_block.arguments, node)
            with self.at(node.test):
                stop = control.flag_not(self.stop_condition(names,
                                                            [self.vars[n] for n in names]))
            if stop is False:
                cond = self.while_condition(node)
            else:
                # after a break or return the condition is not evaluated (it may have
                # effects: an atomic spin lock's compare-and-swap)
                with self.at(node.test):
                    check = scf.IfOp(stop.value, [emit.mlir_type(dt.bool_)], has_else=True)
                    with ir.InsertionPoint(check.then_block):
                        scf.YieldOp([emit.constant(False, dt.bool_).value])
                    with ir.InsertionPoint(check.else_block):
                        scf.YieldOp([self.while_condition(node).value])
                cond = TileValue(check.result, dt.bool_, ())
            with self.at(node.test):
                scf.ConditionOp(cond.value, list(before_block.arguments))
        self.vars = dict(outer)
        with ir.InsertionPoint(after_block):
            self.bind_carried(names, values, after_block.arguments, node)
            self.enter_iteration()
            self.block(node.body)
            self.yield_carried(node, names, values)
        self.close_loop(node, outer, names, values, loop.results)
        forever = isinstance(node.test, ast.Constant) and bool(node.test.value)
        # `while True` left without a break can only have returned
        self.leave_loop(returned=True if forever and control.RETURN in stops and
                        control.BREAK not in stops else None)

    def while_condition(self, node: ast.While) -> TileValue:
        """The condition of while loop `node` as an i1 scalar."""
        cond = self.expr(node.test)
        with self.at(node.test):
            if emit.is_number(cond):
                cond = emit.constant(bool(cond), dt.bool_)
            if not isinstance(cond, TileValue) or not cond.is_scalar:
                raise self.error(TileTypeError, node.test, f"a while condition must be a "
                                 f"scalar, got {describe(cond)}")
            return emit.cast(cond, dt.bool_)

    def coerce_carried(self, name: str, v: Any, init: TileValue, node: ast.AST) -> TileValue:
        if emit.is_number(v):
            v = emit.constant(v, init.dtype, init.shape)
        if not isinstance(v, TileValue) or v.dtype != init.dtype or v.shape != init.shape:
            what = "the returned value" if control.is_hidden(name) else f"'{name}'"
            raise self.error(TileTypeError, node,
                             f"{what} is {init.describe()} before the loop/branch but "
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
        if isinstance(obj, enum.Enum) and attr in ("name", "value"):
            return getattr(obj, attr)
        if isinstance(obj, str) and attr == "join":         # cuTile's one string method
            return obj.join
        if isinstance(obj, DataclassValue):
            return self.dataclass_attr(obj, attr, node)
        if isinstance(obj, dict) and attr in _DICT_METHODS:
            return BoundMethod(f"dict.{attr}", obj)
        raise self.error(TileTypeError, node, f"{describe(obj)} has no attribute '{attr}' "
                         f"usable in a kernel")

    def dataclass_attr(self, obj: DataclassValue, attr: str, node: ast.AST) -> Any:
        """A field of a dataclass instance, or what its class gives: a method bound to
        it (compiled as a helper), a property's value, a class constant."""
        names = [f.name for f in dataclasses.fields(obj.cls)]
        if attr in names:
            return obj.fields[names.index(attr)]
        try:
            raw = inspect.getattr_static(obj.cls, attr)
        except AttributeError:
            raise self.error(TileTypeError, node, f"{obj.describe()} has no attribute "
                             f"'{attr}' (its fields: {', '.join(names)})") from None
        if isinstance(raw, property):
            return self.call(raw.fget, [obj], {}, node)
        if isinstance(raw, staticmethod):
            return raw.__func__
        if isinstance(raw, classmethod):
            return MethodValue(raw.__func__, obj.cls)
        if isinstance(raw, (types.FunctionType, Function)):
            return MethodValue(raw, obj)
        return aggregates.from_python(getattr(obj.cls, attr))

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
            if isinstance(idx, slice):
                return obj[idx]
            if isinstance(idx, bool) or not isinstance(idx, int):
                raise self.error(TileTypeError, node.slice,
                                 f"tuple index must be a compile-time int or slice, got "
                                 f"{describe(idx)}")
            if not -len(obj) <= idx < len(obj):
                raise self.error(TileValueError, node.slice,
                                 f"tuple index {idx} is out of range for a tuple of "
                                 f"{len(obj)}")
            return obj[idx]
        if isinstance(obj, TileValue):
            return self.tile_subscript(obj, node)
        if isinstance(obj, dict):                   # **kwargs
            key = self.expr(node.slice)
            if not _hashable(key) or key not in obj:
                raise self.error(TileTypeError, node.slice, f"{describe(key)} is not a key of "
                                 f"the dict (its keys: {', '.join(map(repr, obj))})")
            return obj[key]
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
        """`t[:, None]`, `t[None]`, `t[..., None]`, `t[:, np.newaxis]`: insert size-1 dims
        (the only indexing of tiles).  `...` stands for as many ':' as the tile has dims
        the other items do not name."""
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        kinds = [self.tile_index_item(it) for it in items]
        if kinds.count(Ellipsis) > 1:
            raise self.error(TileTypeError, node.slice, "an index can have only one "
                             "ellipsis ('...')")
        named = kinds.count(slice)
        if named > t.ndim:
            raise self.error(TileTypeError, node, f"too many indices for {t.describe()}: "
                             f"{named} ':' for {t.ndim} dims")
        shape, dim = [], 0
        for kind in kinds:
            count = {None: 0, slice: 1, Ellipsis: t.ndim - named}[kind]
            shape.extend([1] if kind is None else t.shape[dim:dim + count])
            dim += count
        shape.extend(t.shape[dim:])
        return emit.reshape(t, tuple(shape))

    def tile_index_item(self, it: ast.expr) -> Any:
        """What one item of a tile's index is: None (a new dim), `slice` (a whole dim,
        ':') or Ellipsis."""
        if isinstance(it, ast.Slice) and it.lower is it.upper is it.step is None:
            return slice
        value = None if isinstance(it, ast.Slice) else self.expr(it)
        if value is None and not isinstance(it, ast.Slice) or value is Ellipsis:
            return value
        raise self.error(TileUnsupportedFeatureError, it,
                         "tiles can only be indexed with ':', None (np.newaxis) and '...' "
                         "(to add dims); use load/extract patterns for elements")

    def expr_Slice(self, node: ast.Slice) -> slice:
        """`a:b:c` in a tuple's index: compile-time ints or None."""
        parts = []
        for part in (node.lower, node.upper, node.step):
            v = None if part is None else self.expr(part)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise self.error(TileTypeError, part, f"slice bounds must be compile-time "
                                 f"ints or None, got {describe(v)}")
            parts.append(v)
        if parts[2] == 0:
            raise self.error(TileValueError, node.step, "slice step cannot be zero")
        return slice(*parts)

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
        if name is None and _hashable(fn):            # `tileir.TiledView.load(tv, ...)`
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
        builtin = _BUILTINS.get(fn) if _hashable(fn) else None
        if builtin is not None:
            return builtin(self, args, kwargs, node)
        if fn is builtins.range:
            raise self.error(TileSyntaxError, node, "range() is only allowed as a for-loop "
                             "iterable")
        op = _OPERATOR_FUNCTIONS.get(fn) if _hashable(fn) else None
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
            constant = all(map(_compile_time, (*args, *kwargs.values())))
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
        if not all(_compile_time(x) or isinstance(x, dt.DType) for x in items):
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
                sub = FunctionCompiler(self.mb, fn.source())
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
        operands = [x for (p, k), v in zip(params, bound.values()) for x in _leaf_values(v, k)]
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


# a helper compiled inline at every call (ModuleBuilder.helpers)
_INLINE = object()


def _at_path(path: tuple) -> str:
    return f" (at item {aggregates.path_name('', path)})" if path else ""


def _as_pointer(x: Any) -> Any:
    """A helper's result item: a foreign pointer crossed the call as its i64 scalar."""
    if isinstance(x, TileValue) and x.dtype.is_foreign_pointer:
        return ForeignPointerValue(x.value, x.dtype)
    return x


_TILED_VIEW_METHODS = ("num_tiles", "load", "store", "atomic_store_add", "atomic_store_max",
                       "atomic_store_min", "atomic_store_and", "atomic_store_or",
                       "atomic_store_xor")

# a dict (a helper's **kwargs) in kernel code: compile-time, like a tuple
_DICT_METHODS = ("get", "keys", "values", "items")


def _dict_method(m: BoundMethod, args, kwargs) -> Any:
    """`kw.get(k, default)`; `keys()`/`values()`/`items()` as tuples."""
    name = m.name.split(".")[1]
    try:
        result = getattr(m.receiver, name)(*args, **kwargs)
    except TypeError as e:
        raise emit.type_error(f"dict.{name}: {e}") from None
    return tuple(result) if name != "get" else result


_OPERATOR_FUNCTIONS = {operator.add: "+", operator.sub: "-", operator.mul: "*",
                       operator.truediv: "/", operator.floordiv: "//", operator.mod: "%",
                       operator.pow: "**", operator.and_: "&", operator.or_: "|",
                       operator.xor: "^", operator.lshift: "<<", operator.rshift: ">>",
                       operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
                       operator.eq: "==", operator.ne: "!="}


def _hashable(x) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def _compile_time(x: Any) -> bool:
    """A number, a string, None or a tuple of them."""
    if isinstance(x, tuple):
        return all(map(_compile_time, x))
    return emit.is_number(x) or isinstance(x, str) or x is None


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


def _result_item(x: Any) -> Any:
    """A function result's item in its template: numbers become results, and so does a
    foreign pointer (its i64, `_as_pointer` in the caller); other compile-time values
    stay in the template."""
    if emit.is_number(x):
        return emit.as_value(x)
    if isinstance(x, ForeignPointerValue):
        return TileValue(x.value, x.dtype, ())
    return x


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
    kind = structured.lift(v, classify_value)
    if kind is not None:
        return kind
    if not _hashable(v):
        raise emit.type_error(f"{describe(v)} cannot be passed to a helper")
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
    return [x for k in structured.part_kinds(kind) for x in _leaves(k)]


def _leaf_names(kind: Any, pname: str) -> list[str]:
    """The names of the IR arguments `_leaves(kind)`: a kernel's list elements and tuple
    items as the launch's errors name them (`xs[1]`, `t[0][1]`), else `pname`."""
    if isinstance(kind, ListParam):
        return [f"{pname}[{i}]" for i in range(len(kind.elements))]
    if isinstance(kind, TupleParam):
        return [n for i, k in enumerate(kind.items) for n in _leaf_names(k, f"{pname}[{i}]")]
    return [pname] * len(_leaves(kind))


def _leaf_values(v: Any, kind: Any) -> list[ir.Value]:
    """The IR values a helper's argument `v` of `kind` passes (`_leaves(kind)`)."""
    if not _leaves(kind):
        return []
    if isinstance(kind, structured.KINDS):
        return [x for sv, sk in zip(structured.parts(v), structured.part_kinds(kind))
                for x in _leaf_values(sv, sk)]
    if isinstance(v, TableListValue):
        return [v.table.value]
    if isinstance(v, ListValue):
        return [a.value for a in v.elements]
    return views.leaf_values(v)


def _argument(kind: Any, pname: str, args) -> Any:
    """The value of a parameter of `kind` over the function's next arguments."""
    def array(k: ArrayParam, value: ir.Value) -> ArrayValue:
        return ArrayValue(value, k.dtype, k.ndim, pname, k.static_shape, k.static_strides)
    if isinstance(kind, ArrayParam):
        return array(kind, next(args))
    if isinstance(kind, ScalarParam):
        if kind.dtype.is_foreign_pointer:           # (an i64 argument)
            return ForeignPointerValue(next(args), kind.dtype)
        return TileValue(next(args), kind.dtype, kind.shape)
    if isinstance(kind, ListParam):
        return ListValue(tuple(ArrayValue(next(args), k.dtype, k.ndim, f"{pname}[{i}]",
                                          k.static_shape, k.static_strides)
                               for i, k in enumerate(kind.elements)), pname)
    if isinstance(kind, TableListParam):
        return TableListValue((), pname, table=ArrayValue(next(args), dt.int64, 2, pname),
                              element=kind.element)
    if isinstance(kind, (views.SliceParam, views.TiledViewParam)):
        return views.rebuild(kind, args, array)
    if isinstance(kind, structured.KINDS):
        return structured.rebuild(kind, lambda k: _argument(k, pname, args))
    if isinstance(kind, TupleParam):    # a kernel's tuple argument: a tuple, as any other
        return tuple(_argument(k, f"{pname}[{i}]", args) for i, k in enumerate(kind.items))
    return kind
