"""Early exits in structured IR: `break`, `continue` and `return` as flags.

Tile IR's loops and branches are structured (`scf.for`, `scf.while`, `scf.if`): no
region can jump out of itself.  So while it compiles, the frontend keeps, among the
names of the function, whether the path it is compiling has left:

* `$break` / `$continue`: the innermost loop, its current iteration;
* `$return`: the function (its value in the leaves `$retval.0`, `$retval.1`, ...: a
  tuple or dataclass instance gives one per item, `flatten`);
* `$exit`: any of the three (their or).

Each is a Python bool while it is known at compile time and an i1 scalar once a
runtime `if` sets it on one path only.  Being names, `if` merges them and loops
carry them like any other name (and like any other name, a tuple or dataclass
instance merges and is carried by its runtime leaves: aggregates.py).  Three rules
follow:

* A statement after an exit does not run: after a compile-time exit it is not
  compiled (Python never runs it, and `if x is None: return t` costs nothing); after
  a runtime one the rest of the block is compiled under `scf.if (!$exit)`, its
  stores and atomics included (`ControlFlow.guard`).
* A loop whose body may `break` or `return` becomes an `scf.while` that carries
  `$break`, `$return` and the returned values (their runtime leaves: a compile-time
  leaf is the same in every return) and whose condition stops on them: it stops
  iterating, and what it carries keeps its value at the exit::

      for i in range(n):            %r:3 = scf.while (%i = 0, %acc = .., %brk = false)
          if i == k: break            cond: %i < %n and !%brk (the user's condition
          acc = acc + 1                 of a `while` is not evaluated after a break)
                                      body: %b = (%i == %k); %a = scf.if !%b {%acc+1}
                                            yield %i + 1, %a, %b
  A `for` whose exits all fold away at compile time (`if DEBUG: break`) is rebuilt
  as the scf.for it would otherwise be (`FunctionCompiler.as_for_loop`).
* At a merge, a branch that has left the loop or the function does not constrain
  the names only the code after it would read (`ControlFlow.merge_names`).

Loops unrolled at compile time (`static_iter`, lists of arrays) guard their later
copies the same way.  `continue` needs no loop change: it ends the iteration's
remaining statements only.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any, Callable

from mlir import ir
from mlir.dialects import scf

from .. import dtypes as dt
from ..annotations import Slice
from ..errors import TileSyntaxError, TileTypeError, TileUnsupportedFeatureError
from . import aggregates, choices, compute, emit
from .values import (HANDLES, ArrayValue, BoundMethod, ForeignPointerValue, ListValue,
                     MethodValue, RawMemoryValue, TiledViewValue, TileValue, describe)

BREAK, CONTINUE, RETURN, EXIT = "$break", "$continue", "$return", "$exit"
FLAGS = (BREAK, CONTINUE, RETURN, EXIT)
LIVE = {BREAK: False, CONTINUE: False, RETURN: False, EXIT: False}
_RETVAL = "$retval."


def retval_name(i: int) -> str:
    return f"{_RETVAL}{i}"


def is_hidden(name: str) -> bool:
    """Names of this module's bookkeeping (never a Python identifier)."""
    return name.startswith("$")


class Unbound:
    """Marks a name defined only inside a loop or one branch: unusable afterwards."""

    def __init__(self, why: str):
        self.why = why


# ---------------------------------------------------------------------------
# What a body contains (syntax only)
# ---------------------------------------------------------------------------
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.For, ast.While, ast.AsyncFor)


def scope_nodes(stmts: list[ast.stmt], *, into_loops: bool = True):
    """The nodes of `stmts` in this function's scope: not inside nested functions
    (their `def` and default values are), nor inside nested loops unless `into_loops`."""
    todo = list(reversed(stmts))
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, _SCOPES):
            if not isinstance(node, ast.ClassDef):
                args = node.args
                todo.extend([*getattr(node, "decorator_list", []), *args.defaults,
                             *(d for d in args.kw_defaults if d is not None)])
            continue
        if isinstance(node, _LOOPS) and not into_loops:
            todo.append(node.iter if isinstance(node, ast.For) else node.test)
            continue
        todo.extend(reversed(list(ast.iter_child_nodes(node))))


def has_jump(stmts: list[ast.stmt], kind: type) -> bool:
    """Whether a `break` / `continue` of `kind` in `stmts` belongs to their loop."""
    return any(isinstance(n, kind) for n in scope_nodes(stmts, into_loops=False))


def has_return(stmts: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Return) for n in scope_nodes(stmts))


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """The names `stmts` bind in this scope (assignments, loop targets, `def`s)."""
    names: list[str] = []
    for n in scope_nodes(stmts):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.append(n.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            names.append(n.target.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(n.name)
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------------------
# Flags and returned values
# ---------------------------------------------------------------------------
def flag_or(a, b):
    """`a or b` of two flags (Python bools fold)."""
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    return compute.binary("|", a, b)


def flag_not(a):
    return (not a) if isinstance(a, bool) else compute.logical_not(a)


@dataclasses.dataclass(frozen=True)
class Leaf:
    """What one returned leaf is: a tile's dtype and shape, a Python number (weak:
    it takes the other returns' type), or, in a nested function compiled inline,
    any compile-time value (`static`)."""

    dtype: Any = None
    shape: tuple = ()
    number: bool = False
    static: Any = None
    chosen: type | None = None      # returns give different handles of this kind

    @staticmethod
    def of(v: Any) -> "Leaf":
        if isinstance(v, TileValue):
            return Leaf(v.dtype, v.shape)
        if emit.is_number(v):
            return Leaf(emit.python_dtype(v), (), number=True)
        return Leaf(static=v)

    @property
    def handle(self) -> type | None:
        """The kind of handle (array, view, ...) the returns give here, if they do."""
        return self.chosen or (type(self.static) if isinstance(self.static, _VIEWS) else None)

    def fits(self, other: "Leaf") -> bool:
        if self.handle is not None or other.handle is not None:
            return self.handle is other.handle      # (a runtime 'if' chooses between them)
        if self.static is not None or other.static is not None:
            return _same(self.static, other.static)
        return self.number or other.number or (self.dtype, self.shape) == \
            (other.dtype, other.shape)

    def join(self, other: "Leaf") -> "Leaf":
        """The leaf of two returns that `fits`: a number is weak (a tile returned
        elsewhere gives the leaf its type); numbers promote; different handles are
        chosen at run time (read from the merged names, not compiled in)."""
        if self.handle is not None and (self.chosen or other.chosen or
                                        self.static is not other.static):
            return Leaf(chosen=self.handle)
        if self.number and other.number:
            return Leaf(dt.promote(self.dtype, other.dtype), (), number=True)
        return other if self.number else self


LEAF = "leaf"


def flatten(value: Any) -> tuple[Any, list]:
    """(structure, leaves) of a returned value: None, LEAF, or an aggregate (a tuple,
    a dataclass instance) of structures."""
    if value is None:
        return None, []
    if aggregates.is_aggregate(value):
        parts = [flatten(v) for v in aggregates.items_of(value)]
        return (aggregates.like(value, (s for s, _ in parts)),
                [x for _, xs in parts for x in xs])
    return LEAF, [value]


def rebuild(structure: Any, leaves) -> Any:
    it = iter(leaves)

    def build(s):
        if s is None or s is LEAF:
            return None if s is None else next(it)
        return aggregates.like(s, (build(x) for x in aggregates.items_of(s)))
    return build(structure)


def same_structure(a: Any, b: Any) -> bool:
    """Whether two `flatten` structures are one (dataclass instances compare by class)."""
    if a is None or a is LEAF or b is None or b is LEAF:
        return a is b
    if type(a) is not type(b):
        return False
    if not isinstance(a, tuple) and a.cls is not b.cls:
        return False
    xs, ys = aggregates.items_of(a), aggregates.items_of(b)
    return len(xs) == len(ys) and all(same_structure(x, y) for x, y in zip(xs, ys))


def describe_structure(structure: Any, leaves: list) -> str:
    if structure is None:
        return "None"
    return describe(rebuild(structure, leaves))


@dataclasses.dataclass
class ReturnForm:
    """What a function's returns give: every `return` must agree (`check_return`)."""

    structure: Any
    leaves: list[Leaf]
    values: list            # the first return's leaves, for messages
    line: int


def placeholder(like: TileValue) -> TileValue:
    """A value of `like`'s type for a path where the name's value is never read."""
    return emit.constant(False if like.dtype.is_bool else 0, like.dtype, like.shape)


def _runtime_like(v: Any) -> TileValue | None:
    if isinstance(v, TileValue):
        return TileValue(None, v.dtype, v.shape)
    if emit.is_number(v):
        return TileValue(None, emit.python_dtype(v), ())
    return None


class ReturnsHandle(Exception):
    """A helper compiled as a function returns an array (a slice, a tiled view, a list
    of arrays, raw memory): its caller abandons the function and compiles the helper
    inline (`FunctionCompiler.call_helper`)."""


class ControlFlow:
    """The part of `FunctionCompiler` that compiles exits and merges paths (a mixin:
    it uses the compiler's `vars`, `frame`, `block`, `expr`, `at` and `error`)."""

    vars: dict
    frame: Any

    # -- exits ---------------------------------------------------------------
    def stmt_Break(self, node: ast.Break) -> None:
        self.vars[BREAK] = self.vars[EXIT] = True

    def stmt_Continue(self, node: ast.Continue) -> None:
        self.vars[CONTINUE] = self.vars[EXIT] = True

    def stmt_Return(self, node: ast.Return) -> None:
        f = self.frame
        value = self.expr(node.value) if node.value is not None else None
        if f.kernel and value is not None:
            raise self.error(TileSyntaxError, node,
                             "a kernel cannot return a value; store results into an array")
        structure, leaves = flatten(value)
        if not f.inline:
            for x in leaves:
                self.check_helper_result(x, node)
        self.check_return(structure, leaves, node)
        for i, x in enumerate(leaves):
            self.vars[retval_name(i)] = x
        self.vars[RETURN] = self.vars[EXIT] = True

    def check_return(self, structure, leaves: list, node: ast.Return) -> None:
        """Every return of a function gives the same structure and leaf types."""
        f = self.frame
        kinds = [Leaf.of(x) for x in leaves]
        if f.returns is None:
            f.returns = ReturnForm(structure, kinds, leaves, self.src.position(node)[0])
            return
        first = f.returns
        same = same_structure(structure, first.structure)
        if same and all(a.fits(b) for a, b in zip(kinds, first.leaves)):
            first.leaves = [b.join(a) for a, b in zip(kinds, first.leaves)]
            return
        odd = next((i for i, (a, b) in enumerate(zip(kinds, first.leaves))
                    if not a.fits(b) and (a.static is not None or b.static is not None)), None)
        if same and odd is not None and any(isinstance(v, _VIEWS) for v in
                                            (leaves[odd], first.values[odd])):
            raise self.error(TileTypeError, node,
                             f"this return gives {describe(leaves[odd])} where the return at "
                             f"line {first.line} gives {describe(first.values[odd])}; the "
                             f"returns of '{f.name}' may give different arrays, views, raw "
                             f"memory or foreign pointers, but of one kind")
        if same and odd is not None:
            raise self.error(TileTypeError, node,
                             f"this return gives {describe(leaves[odd])} where the return at "
                             f"line {first.line} gives {describe(first.values[odd])}; every "
                             f"return of '{f.name}' must give the same compile-time items "
                             f"(strings, dtypes, arrays, ...) in its result")
        raise self.error(TileTypeError, node,
                         f"this return gives {describe_structure(structure, leaves)} but the "
                         f"return at line {first.line} gives "
                         f"{describe_structure(first.structure, first.values)}; every return "
                         f"of '{f.name}' must give the same dtypes and shapes (convert with "
                         f"astype, or broadcast_to)")

    def check_helper_result(self, x: Any, node: ast.AST) -> None:
        if isinstance(x, (ArrayValue, TiledViewValue, ListValue, RawMemoryValue)):
            raise ReturnsHandle()       # the caller compiles the helper inline
        from .closures import Closure       # (closures.py imports this module)
        if isinstance(x, (Closure, BoundMethod, MethodValue, Slice, dict)):
            raise self.error(TileTypeError, node,
                             f"a @function returns tiles, scalars, numbers and compile-time "
                             f"values such as strings and dtypes (or tuples and dataclass "
                             f"instances of them), got "
                             f"{x.describe() if isinstance(x, Closure) else describe(x)}")

    def function_result(self, end: ast.AST) -> Any:
        """The value the function returns once its body is compiled: None when no
        return gives a value; an error when some path can reach the end (which
        returns None) while a return gives a value."""
        f = self.frame
        ret = self.vars.get(RETURN, False)
        if ret is False or f.returns is None or f.returns.structure is None:
            return None
        if ret is not True:
            what = describe_structure(f.returns.structure, f.returns.values)
            raise self.error(TileTypeError, end,
                             f"'{f.name}' returns {what} (line {f.returns.line}) but can also "
                             f"reach its end, which returns None; return a value on every "
                             f"path")
        # a compile-time leaf every return agrees on is not among the names (loops
        # do not carry it)
        return rebuild(f.returns.structure,
                       [kind.static if kind.static is not None else self.vars[retval_name(i)]
                        for i, kind in enumerate(f.returns.leaves)])

    # -- blocks and guards ---------------------------------------------------
    def block(self, stmts: list[ast.stmt]) -> None:
        """Compiles `stmts`; after an exit the rest is dropped (compile-time exit) or
        compiled under a guard (runtime exit)."""
        for i, s in enumerate(stmts):
            self.stmt(s)
            exited = self.vars.get(EXIT, False)
            if exited is False:
                continue
            rest = stmts[i + 1:]
            if exited is not True and rest:
                self.guard(exited, lambda: self.block(rest), rest[0])
            return

    def guard(self, exited: TileValue, compile_rest: Callable[[], None],
              node: ast.AST, loose: dict | None = None) -> None:
        """`compile_rest()` under `scf.if (!exited)`: there no exit has happened; on
        the other path one has, which `merge_names` knows from `$exit` (and which
        one, when only one can be set: outside loops, a return)."""
        on_exit = {EXIT: True}
        maybe = [f for f in (BREAK, CONTINUE, RETURN) if self.vars.get(f, False) is not False]
        if len(maybe) == 1:
            on_exit[maybe[0]] = True
        with self.at(node):
            self.runtime_if(flag_not(exited), node, compile_rest, lambda: None,
                            then_vars=LIVE, else_vars=on_exit, loose=loose)

    # -- runtime if ----------------------------------------------------------
    def runtime_if(self, cond: TileValue, node: ast.AST, then: Callable[[], None],
                   orelse: Callable[[], None], *, then_vars: dict | None = None,
                   else_vars: dict | None = None, loose: dict | None = None) -> None:
        """`scf.if cond`, each branch compiled by its callable from the current names
        (updated by `then_vars` / `else_vars`); the names a branch changed become the
        if's results (a tuple or dataclass instance: its runtime leaves).  Their types
        are known once both branches are compiled, so the branches are compiled into a
        result-less scf.if whose ops then move over.  `loose` maps names that may end
        up unusable (rather than an error) to why."""
        before = dict(self.vars)
        tmp = scf.IfOp(cond.value, [], has_else=True)
        branches = []
        for blk, body, preset in ((tmp.then_block, then, then_vars),
                                  (tmp.else_block, orelse, else_vars)):
            self.vars = dict(before)
            self.vars.update(preset or {})
            with ir.InsertionPoint(blk):
                body()
            branches.append(self.vars)
        self.vars = before
        yielded = self.merge_names(before, branches, node, loose or {}, tmp.operation)
        real = scf.IfOp(cond.value, [emit.tensor_type(like.shape, like.dtype)
                                     for _, template, _ in yielded
                                     for like in aggregates.tile_leaves(template)],
                        has_else=True)
        for k, (src, blk) in enumerate(((tmp.then_block, real.then_block),
                                        (tmp.else_block, real.else_block))):
            for op in list(src.operations):
                op.detach_from_parent()
                ir.InsertionPoint(blk).insert(op)
            with ir.InsertionPoint(blk), self.at(node):
                scf.YieldOp(aggregates.ir_values(
                    [self.branch_value(n, template, branches[k], used[k], node)
                     for n, template, used in yielded]))
        tmp.operation.erase()
        templates = [t for _, t, _ in yielded]
        with self.at(node):
            merged = [choices.from_parts(t, v) for t, v in
                      zip(templates, aggregates.rebind(templates, real.results))]
        self.vars.update(zip([n for n, _, _ in yielded], merged))

    def merge_names(self, before: dict, branches: list[dict], node: ast.AST,
                    loose: dict, branch_op: ir.Operation) -> list:
        """Sets the names after a runtime if from its `branches`' names; returns the
        ones the if yields as (name, template, which branches' values are read), the
        template being the name's value after the if with TileValues standing for the
        if's results (`branch_template`).

        A branch's value is *read* unless the path left: after a `return` no name
        but the flags is read; after a `break`/`continue` a name is read only if the
        branch defines it (a loop-carried name is: it exists before the loop).  A
        `$retval` leaf is read where the branch returned.  `branch_op` is the scf.if
        the branches were compiled into."""
        yielded = []
        names = dict.fromkeys([*before, *(n for bv in branches for n in bv)])
        for n in names:
            vals = [_get(bv, n) for bv in branches]
            if all(v is _get(before, n) for v in vals):
                continue
            used = [_reads(bv, n, v) for bv, v in zip(branches, vals)]
            if any(u and (v is None or isinstance(v, Unbound)) for u, v in zip(used, vals)):
                self.vars[n] = Unbound(f"'{n}' is assigned in only one branch of the 'if' "
                                       f"at line {self.src.position(node)[0]}; assign it "
                                       f"before the 'if' or in both branches")
                continue
            read = [v for u, v in zip(used, vals) if u]
            if not read:                              # no path that goes on reads it
                if n in before:
                    self.vars[n] = before[n]
                else:
                    self.vars.pop(n, None)
                continue
            first = read[0]
            if all(v is first for v in read) and (first is _get(before, n) or
                                                  not aggregates.is_runtime(first)):
                self.vars[n] = first
                continue
            if n in loose and any(_new_views(v, _get(before, n)) for v in read):
                self.vars[n] = Unbound(loose[n])
                continue
            if len(read) == 1:
                # only one path goes on: its value; a handle made inside the branch
                # leaves it as the if's results (a foreign pointer; an array cannot)
                template = self.leaving_template(n, first, node, branch_op)
            else:
                template = self.branch_template(n, read, node, branch_op)
            if not aggregates.tile_leaves(template):
                self.vars[n] = template               # the same compile-time value
                continue
            yielded.append((n, template, used))
        return yielded

    def leaving_template(self, name: str, v: Any, node: ast.AST, branch_op: ir.Operation,
                         path: tuple = ()) -> Any:
        """The template of `name` when only one path of a runtime 'if' goes on with `v`:
        `v`, its handles made inside the branch as choices of one (`choices.slot`)."""
        if aggregates.is_aggregate(v):
            return aggregates.like(v, (self.leaving_template(name, x, node, branch_op,
                                                             path + (p,))
                                       for x, p in zip(aggregates.items_of(v),
                                                       aggregates.part_names(v))))
        if isinstance(v, _VIEWS) and _made_inside(v, branch_op):
            try:
                return choices.slot([v], lambda x: _made_inside(x, branch_op))
            except choices.CannotChoose:
                raise self.error(TileUnsupportedFeatureError, node,
                                 f"{_what(aggregates.path_name(name, path))} "
                                 f"{_NOT_CHOSEN}") from None
        return v

    def branch_template(self, name: str, vals: list, node: ast.AST, branch_op: ir.Operation,
                        path: tuple = ()) -> Any:
        """What `name` is after a runtime 'if' whose two paths leave it `vals`: what both
        agree on stays (a value from before the 'if', a compile-time value); tuples
        and dataclass instances merge item by item; two handles (arrays, views, ...)
        become a choice between them (`choices.slot`); the rest is yielded, typed by a
        TileValue like the paths' (numbers made runtime, their dtypes promoted)."""
        a, b = vals
        if a is b or not aggregates.is_runtime(a) and not aggregates.is_runtime(b) and \
                not aggregates.is_aggregate(a) and _same(a, b):
            return a
        if aggregates.is_aggregate(a) and aggregates.is_aggregate(b):
            try:
                return aggregates.like(a, (
                    self.branch_template(name, [x, y], node, branch_op, path + (p,))
                    for x, y, p in zip(*aggregates.match_items(a, b))))
            except aggregates.StructureError:
                pass
        where = _what(aggregates.path_name(name, path))
        if all(isinstance(v, _VIEWS) for v in vals):
            try:
                return choices.slot(vals, lambda x: _made_inside(x, branch_op))
            except choices.CannotChoose as e:
                cls = TileUnsupportedFeatureError if isinstance(e, choices.MadeInside) \
                    else TileTypeError
                raise self.error(cls, node, f"{where} is {describe(a)} after one "
                                 f"branch of a runtime 'if' and {describe(b)} after the "
                                 f"other: {e}") from None
        like = next((v for v in vals if isinstance(v, TileValue)), None)
        if like is not None and all(isinstance(v, TileValue) or emit.is_number(v)
                                    for v in vals):
            return like
        if all(emit.is_number(v) for v in vals):
            return TileValue(None, dt.promote(emit.python_dtype(a), emit.python_dtype(b)), ())
        raise self.error(TileTypeError, node, f"{where} is {describe(a)} after one "
                         f"branch of a runtime 'if' and {describe(b)} after the other; "
                         f"what a runtime 'if' assigns must be tiles or numbers, or "
                         f"arrays, views, raw memory or foreign pointers of one kind (or "
                         f"tuples and dataclasses of them) in both branches, or the same "
                         f"compile-time value")

    def branch_value(self, name: str, template: Any, bv: dict, used: bool,
                     node: ast.AST) -> Any:
        """What a branch yields for `name`: its value (converted to `template`'s leaf
        types), or where no path that goes on reads it, its leaves that fit and
        placeholders for the others."""
        v = choices.to_parts(template, _get(bv, name))

        def leaf(like: TileValue, x: Any, path: tuple) -> TileValue:
            where = aggregates.path_name(name, path)
            fits = _runtime_like(x)
            if used or fits is not None and (emit.is_number(x) or (fits.dtype, fits.shape)
                                             == (like.dtype, like.shape)):
                return self.coerce_carried(where, x, like, node)
            return placeholder(like)
        try:
            return aggregates.match(template, v, leaf)
        except aggregates.StructureError:
            if used:             # (branch_template made the template from this value)
                raise
            return aggregates.transform(template, lambda x: placeholder(x)
                                        if isinstance(x, TileValue) else x)

    # -- loops ---------------------------------------------------------------
    def loop_stops(self, node: ast.AST) -> list[str]:
        """The flags that end loop `node` early ($break, $return) and the returned
        leaves it carries (tiles and numbers: a compile-time leaf is the same in every
        return, `check_return`, so it needs no carrying).  A function whose returns are
        not seen yet has its loop compiled once to see them (`learn_return_form`)."""
        stops = [BREAK] if has_jump(node.body, ast.Break) else []
        if not has_return(node.body):
            return stops
        f = self.frame
        if f.returns is None and not f.kernel and not f.learning:
            self.learn_return_form(node)
        stops.append(RETURN)
        if f.returns is not None and f.returns.structure is not None:
            stops.extend(retval_name(i) for i, kind in enumerate(f.returns.leaves)
                         if kind.static is None)
        return stops

    def learn_return_form(self, node: ast.AST) -> None:
        """Compiles loop `node` once, without carrying returned values, to learn what
        its returns give (a loop must carry them, so must know their types before
        its body is compiled), then erases what that built."""
        f = self.frame
        blk = ir.InsertionPoint.current.block
        mark = len(list(blk.operations))
        saved = dict(self.vars)
        f.learning = True
        made = None
        try:
            self.stmt(node)
            built = list(blk.operations)[mark:]
            # a handle the loop makes (a slice, a pointer) leaves it as a run-time
            # choice the loop carries (its parts: choices.py); a list cannot
            leaves = f.returns.leaves if f.returns else []
            for i, k in enumerate(leaves):
                if any(_made_inside(k.static, op) for op in built):
                    if not choices.is_handle(k.static):
                        made = k.static
                    else:
                        leaves[i] = Leaf(chosen=type(k.static))
        finally:
            f.learning = False
            self.vars = saved
            for op in reversed(list(blk.operations)[mark:]):
                op.erase()
        if made is not None:
            raise self.error(TileUnsupportedFeatureError, node,
                             f"a loop cannot carry the returned value {describe(made)} "
                             f"it makes; {handle_what(made)} returned from inside a loop "
                             f"must exist before the loop")

    def stop_inits(self, stops: list[str], node: ast.AST) -> list[TileValue]:
        """The values the stop flags and returned leaves enter a loop with."""
        out = []
        for n in stops:
            if n in FLAGS:
                out.append(emit.constant(False, dt.bool_))
                continue
            i = int(n[len(_RETVAL):])
            kind = self.frame.returns.leaves[i]
            if kind.chosen is not None:
                out.append(self.chosen_return_init(n, self.frame.returns.values[i], node))
                continue
            like = TileValue(None, kind.dtype, kind.shape)
            v = self.vars.get(n)
            fits = _runtime_like(v)
            ok = fits is not None and (fits.dtype, fits.shape) == (like.dtype, like.shape)
            out.append(self.coerce_carried(n, v, like, node) if ok else placeholder(like))
        return out

    def chosen_return_init(self, name: str, first: Any, node: ast.AST) -> Any:
        """What a loop carries for a returned leaf that is one handle or another (its
        parts, `choices.py`), before the loop: the value returned so far, or where none
        is, any the choice can hold.  `first` (the first return's) gives the kind."""
        visible = self.visible_values()
        v = self.vars.get(name)
        bounds = node in self.mb.bounded_loops or None
        with self.at(node):
            if choices.is_handle(v):
                template = choices.slot([v], lambda o: False,
                                        more=choices.loop_options(v, visible), bounds=bounds)
                return choices.parts_of(template, v)
            # nothing returned yet (the parts are read only once a return sets them);
            # `first` may be of the pass that learned the returns: only its kind is used
            options = choices.loop_options(first, visible)
            if isinstance(first, (ArrayValue, TiledViewValue)):
                if not options:
                    raise self.error(TileUnsupportedFeatureError, node,
                                     f"'{self.frame.name}' returns {describe(first)} from "
                                     f"inside this loop, and no array of its dtype and rank "
                                     f"exists before the loop")
                first = options[0] if isinstance(first, ArrayValue) else \
                    dataclasses.replace(first, array=options[0])
            template = choices.slot([first], lambda o: False, more=options, bounds=bounds)
            return choices.unset_parts(template)

    def visible_values(self) -> list:
        """The values of every name the frame sees (a nested function's outer frames
        too): what a loop's run-time choice of arrays may hold."""
        out, frame = [], self.frame
        while frame is not None:
            out += frame.vars.values()
            frame = frame.parent
        return out

    def stop_condition(self, stops: list[str], values: list[TileValue]):
        """False once a stop flag among `values` (the loop's carried stops) is set."""
        go = True
        for n, v in zip(stops, values):
            if n in FLAGS:
                go = compute.binary("&", go, flag_not(v)) if go is not True else flag_not(v)
        return go

    def enter_iteration(self) -> None:
        """At the top of a loop body no exit has happened (the condition checked)."""
        self.vars.update(LIVE)

    def leave_loop(self, returned=None) -> None:
        """After a loop: its break is consumed; a return inside it is the function's."""
        self.vars[BREAK] = self.vars[CONTINUE] = False
        ret = self.vars.get(RETURN, False) if returned is None else returned
        self.vars[RETURN] = self.vars[EXIT] = ret

    def unrolled_loop(self, node: ast.For, items: list, bind: Callable[[Any], None]) -> None:
        """A loop unrolled at compile time: one copy of the body per item; an exit in
        one copy guards the copies after it."""
        self._unroll(node, list(items), bind)
        self.leave_loop()

    def _unroll(self, node: ast.For, items: list, bind) -> None:
        for k, item in enumerate(items):
            bind(item)
            self.block(node.body)
            self.vars[CONTINUE] = False
            with self.at(node):
                stop = flag_or(self.vars.get(BREAK, False), self.vars.get(RETURN, False))
            self.vars[EXIT] = stop
            if stop is False:
                continue
            rest = items[k + 1:]
            if stop is not True and rest:
                line = self.src.position(node)[0]
                loose = {n.id: f"'{n.id}' is the variable of the loop at line {line}, which "
                               f"may stop at any of its arrays: not available after it"
                         for n in ast.walk(node.target) if isinstance(n, ast.Name)}
                self.guard(stop, lambda: self._unroll(node, rest, bind), node, loose)
            return


def _get(bv: dict, n: str):
    return bv.get(n, False) if n in FLAGS else bv.get(n)


def _reads(bv: dict, n: str, v) -> bool:
    """Whether code after the merge can read branch `bv`'s value of `n`."""
    if n in FLAGS:
        return True
    if n.startswith(_RETVAL):
        return bv.get(RETURN, False) is not False
    if bv.get(RETURN, False) is True:
        return False
    if bv.get(EXIT, False) is True:
        return v is not None and not isinstance(v, Unbound)
    return True


def _same(a, b) -> bool:
    """Equal compile-time values (of one type: 1 and True differ)."""
    try:
        return a is b or (type(a) is type(b) and bool(a == b))
    except Exception:         # a value whose == is not a plain bool
        return False


_VIEWS = HANDLES

_NOT_CHOSEN = ("is made inside a runtime 'if' that only this path leaves; an array, a "
               "slice's array, a tiled view, raw memory or a foreign pointer that leaves a "
               "runtime 'if' must be made before it")


def _pointer_like(v: Any) -> bool:
    return isinstance(v, (RawMemoryValue, ForeignPointerValue))


def handle_what(v: Any) -> str:
    """How messages name the sort of `HANDLES` value `v` is."""
    return "raw memory or a foreign pointer" if _pointer_like(v) else \
        "an array, a slice or a tiled view"


def not_carried(v: Any) -> str:
    """`handle_what`, plural: what loops do not carry."""
    return "raw memory and foreign pointers" if _pointer_like(v) else \
        "arrays, slices and tiled views"


def _is_runtime(v) -> bool:
    return isinstance(v, (TileValue, *_VIEWS))


def _what(name: str) -> str:
    """How errors name a name: quoted, or what a hidden one holds."""
    return "the returned value" if is_hidden(name) else f"'{name}'"


def _made_inside(value: Any, op: ir.Operation) -> bool:
    """Whether an array, slice, tiled view, list, raw memory or foreign pointer in `value`
    is made of IR values defined inside `op` (which cannot be used outside it)."""
    def ir_values(x) -> list:
        if isinstance(x, ArrayValue):
            return [x.value, *(i.value for i in (*x.offsets, *x.extents)
                               if isinstance(i, TileValue))]
        if isinstance(x, TiledViewValue):
            return ir_values(x.array)
        if isinstance(x, ListValue):
            table = [x.table] if getattr(x, "table", None) is not None else []
            return [v for a in (*x.elements, *table) for v in ir_values(a)]
        if isinstance(x, RawMemoryValue):
            return ir_values(x.array)
        if isinstance(x, ForeignPointerValue):
            return [x.value]
        return []

    for _, leaf in aggregates.leaf_paths(value):
        for v in ir_values(leaf):
            owner = v.owner.owner if isinstance(v.owner, ir.Block) else v.owner
            while owner is not None:
                if owner.operation == op:
                    return True
                owner = owner.operation.parent
    return False


def _new_views(value: Any, old: Any) -> bool:
    """Whether `value` holds an array, slice or tiled view that `old` (the name's value
    before a runtime 'if') does not hold at the same place."""
    if isinstance(value, _VIEWS):
        return value is not old
    if not aggregates.is_aggregate(value):
        return False
    try:
        olds = aggregates.match_items(value, old)[1]
    except aggregates.StructureError:
        olds = (None,) * len(aggregates.items_of(value))
    return any(_new_views(x, y) for x, y in zip(aggregates.items_of(value), olds))
