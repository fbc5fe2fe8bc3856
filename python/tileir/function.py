"""`@function` helpers and the base of `@kernel` entry points.

Both the frontend compiler (which inlines helpers and rejects kernel calls) and
`tileir.kernel` (which defines `Kernel`) need these classes; keeping them here,
below both, is what keeps the two from importing each other.
"""

from __future__ import annotations

import inspect
import types
import weakref
from typing import Any, Callable

from .errors import TileError
from .frontend.source import SourceInfo


class KernelEntry:
    """What the frontend needs to know of a `@kernel`: that it is one, and its name.
    `tileir.kernel.Kernel` is the one subclass."""

    name: str


class Function:
    """A `@function` helper: compiled per call-site specialization, inlined by tile-inline."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        self._source: SourceInfo | None = None
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def source(self) -> SourceInfo:
        if self._source is None:
            self._source = SourceInfo(self.fn)
        return self._source

    def bind_helper_args(self, args, kwargs, make_error) -> dict[str, Any]:
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise make_error(f"bad arguments to @function '{self.name}{self.signature}': {e}")
        bound.apply_defaults()
        return dict(bound.arguments)

    def __call__(self, *args, **kwargs):
        raise TileError(f"@function '{self.name}' can only be called from a @kernel or "
                        f"another @function")


def function(fn: Callable) -> Function:
    """Marks a helper callable from kernels (`@tileir.function`)."""
    return Function(fn)


_PLAIN_HELPERS: "weakref.WeakKeyDictionary[Callable, Function]" = weakref.WeakKeyDictionary()


def is_plain_helper(fn: Any) -> bool:
    """An undecorated Python function of the user's, which kernels call inline as cuTile
    does (not a lambda, not tileir's own)."""
    return isinstance(fn, types.FunctionType) and fn.__name__ != "<lambda>" and \
        not (fn.__module__ or "").startswith("tileir")


def plain_helper(fn: Callable) -> Function:
    """The `Function` a plain helper is compiled as (one per Python function)."""
    helper = _PLAIN_HELPERS.get(fn)
    if helper is None:
        helper = _PLAIN_HELPERS[fn] = Function(fn)
    return helper
