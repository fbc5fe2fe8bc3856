"""The frontend's loops: `for` over a range, an unrolled tuple, a list or a table, and `while`,
as `scf.for` / `scf.while`, with the names they carry (a mixin of
`compiler.FunctionCompiler`).

Names assigned in a loop's body that exist before it are loop-carried (`iter_args`)
and keep their type; tuples and dataclass instances are carried by their runtime
leaves (`aggregates.py`), arrays selected in the loop by their slots.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from mlir import ir
from mlir.dialects import scf

from .. import api
from .. import dtypes as dt
from ..errors import TileSyntaxError, TileTypeError, TileUnsupportedFeatureError
from . import aggregates, choices, compute, control, emit, intrinsics, static
from .control import Unbound, assigned_names
from .values import HANDLES, ArrayValue, ListValue, TableListValue, TileValue, describe


class Loops:
    """`for` and `while` statements, and the values loops carry."""

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
