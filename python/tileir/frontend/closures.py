"""Nested functions (`def` and `lambda` in kernel code) and the frames they run in.

A nested function is compiled inline where it is called, as cuTile does, in a new
`Frame` whose parent is the frame it was defined in.  Names resolve as in Python:
its parameters and the names its body assigns are its own (read before assignment:
an error); any other name is read from the defining frame *as it is at the call*
(late binding, like a Python closure cell), then from the module's globals.  Default
values are evaluated once, at the `def`.

Passed to a `@function` helper (a separate `func.func`), a nested function takes
along the values of the names it reads (`captures`): `structured.ClosureKind` makes
their runtime parts arguments of the helper.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import Any

from ..errors import TileRecursionError, TileTypeError, TileUnsupportedFeatureError
from .control import Unbound, assigned_names, is_hidden


@dataclasses.dataclass(eq=False)
class Frame:
    """One function being compiled: a kernel, a helper, or a nested function compiled
    inline into its caller (`inline`)."""

    src: Any                                # its SourceInfo: positions and globals
    name: str = ""
    kernel: bool = False
    inline: bool = False
    vars: dict = dataclasses.field(default_factory=dict)
    parent: "Frame | None" = None           # where a nested function was defined
    own: frozenset | None = None            # a nested function's parameters and locals
    returns: Any = None                     # control.ReturnForm of its returns
    learning: bool = False                  # compiling a loop only to see its returns

    def find(self, name: str) -> tuple[bool, Any]:
        """(found, value) of `name` in this frame or the frames it was defined in."""
        frame = self
        while frame is not None:
            if name in frame.vars:
                return True, frame.vars[name]
            if frame.own is not None and name in frame.own:
                return True, Unbound(f"'{name}' is used before it is assigned in "
                                     f"'{frame.name}'")
            frame = frame.parent
        return False, None

    def visible(self) -> dict[str, Any]:
        """Every name this frame sees (outer frames first), for static_eval."""
        chain = []
        frame = self
        while frame is not None:
            chain.append(frame)
            frame = frame.parent
        out: dict[str, Any] = {}
        for frame in reversed(chain):
            out.update((k, v) for k, v in frame.vars.items()
                       if not is_hidden(k) and not isinstance(v, Unbound))
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class Closure:
    """A `def` or `lambda` of kernel code: its AST, its source, the frame it was
    defined in and its default values."""

    node: ast.FunctionDef | ast.Lambda
    src: Any
    frame: Frame
    defaults: tuple = ()
    kw_defaults: tuple = ()                 # ((name, value), ...)

    @property
    def name(self) -> str:
        return "lambda" if isinstance(self.node, ast.Lambda) else self.node.name

    def describe(self) -> str:
        line = self.src.position(self.node)[0]
        what = "the lambda" if isinstance(self.node, ast.Lambda) else \
            f"the nested function '{self.name}'"
        return f"{what} at line {line}"

    def __repr__(self) -> str:
        return f"<{self.describe()}>"

    def signature(self) -> inspect.Signature:
        a = self.node.args
        P = inspect.Parameter
        positional = [*a.posonlyargs, *a.args]
        first_default = len(positional) - len(self.defaults)
        params = []
        for i, p in enumerate(positional):
            kind = P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD
            default = self.defaults[i - first_default] if i >= first_default else P.empty
            params.append(P(p.arg, kind, default=default))
        if a.vararg:
            params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
        kw = dict(self.kw_defaults)
        params.extend(P(p.arg, P.KEYWORD_ONLY, default=kw.get(p.arg, P.empty))
                      for p in a.kwonlyargs)
        if a.kwarg:
            params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
        return inspect.Signature(params)

    def plain(self) -> bool:
        """Only positional parameters without defaults (a lambda's usual form)."""
        a = self.node.args
        return not (a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults)


def own_names(node: ast.FunctionDef | ast.Lambda) -> frozenset:
    """A nested function's parameters and the names its body assigns."""
    a = node.args
    params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    params += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    body = node.body if isinstance(node, ast.FunctionDef) else []
    return frozenset([*params, *assigned_names(body)])


def free_names(node: ast.FunctionDef | ast.Lambda) -> list[str]:
    """The names a nested function reads that are not its own (nested functions in
    it included): where a closure reads its defining frame."""
    body = node.body if isinstance(node, ast.FunctionDef) else [node.body]
    own = own_names(node)
    loads = [n.id for stmt in body for n in ast.walk(stmt)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in own]
    return list(dict.fromkeys(loads))


def captures(c: Closure) -> list[tuple[str, Any]]:
    """The names `c` reads from the frames it was defined in, with their values now."""
    out = []
    for name in free_names(c.node):
        found, v = c.frame.find(name)
        if found and not isinstance(v, Unbound):
            out.append((name, v))
    return out


class NestedFunctions:
    """The part of `FunctionCompiler` that defines and calls nested functions (a
    mixin: it uses the compiler's `frame`, `vars`, `expr`, `block`, `at`, `error`,
    `call_site`)."""

    def stmt_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.decorator_list:
            raise self.error(TileUnsupportedFeatureError, d,
                             "a nested function takes no decorator (it is compiled inline "
                             "where it is called, like a @function)")
        self.vars[node.name] = self.make_closure(node)

    def expr_Lambda(self, node: ast.Lambda) -> Closure:
        return self.make_closure(node)

    def make_closure(self, node) -> Closure:
        a = node.args
        defaults = tuple(self.expr(d) for d in a.defaults)
        kw = tuple((p.arg, self.expr(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)
                   if d is not None)
        return Closure(node, self.src, self.frame, defaults, kw)

    def call_closure(self, c: Closure, args: list, kwargs: dict, node: ast.AST) -> Any:
        """Compiles `c(*args, **kwargs)` inline: its body in a new frame."""
        sig = c.signature()
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            if c.plain() and not kwargs:
                n = len(c.node.args.args)
                what = "the lambda" if isinstance(c.node, ast.Lambda) else \
                    f"the nested function '{c.name}'"
                raise self.error(TileTypeError, node, f"{what} takes {n} arguments, got "
                                 f"{len(args)}") from None
            raise self.error(TileTypeError, node, f"bad arguments to {c.describe()} "
                             f"{c.name}{sig}: {e}") from None
        bound.apply_defaults()
        active = self.mb.active_closures
        if c.node in active:
            raise self.error(TileRecursionError, node,
                             f"recursive call to {c.describe()}: kernels inline every call, "
                             f"so recursion cannot be compiled")
        frame = Frame(c.src, c.name, inline=True, vars=dict(bound.arguments), parent=c.frame,
                      own=own_names(c.node))
        with self.call_site(c.name, node):
            outer = self.frame
            self.frame = frame
            active.append(c.node)
            try:
                if isinstance(c.node, ast.Lambda):
                    with self.at(c.node.body):
                        return self.expr(c.node.body)
                self.block(c.node.body)
                return self.function_result(c.node.body[-1])
            finally:
                active.pop()
                self.frame = outer
