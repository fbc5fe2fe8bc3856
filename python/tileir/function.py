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
from .frontend.library import is_library_function
from .frontend.source import SourceInfo


class KernelEntry:
    """What the frontend needs to know of a `@kernel`: that it is one, and its name.
    `tileir.kernel.Kernel` is the one subclass."""

    name: str


class Function:
    """A `@function` helper: compiled per call-site specialization, inlined by tile-inline.

    `host` (cuTile's execution spaces): Python may call it too, and gets the plain
    function's result; `tile=False`: kernels may not call it (a host-only function)."""

    def __init__(self, fn: Callable, *, host: bool = False, tile: bool = True):
        self.fn = fn
        self.name = fn.__name__
        self.host, self.tile = host, tile
        self.signature = inspect.signature(fn)
        self._source: SourceInfo | None = None
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.__module__ = getattr(fn, "__module__", None)
        self.__wrapped__ = fn

    def source(self) -> SourceInfo:
        if self._source is None:
            self._source = SourceInfo(self.fn)
        return self._source

    def bind_helper_args(self, args, kwargs, make_error) -> dict[str, Any]:
        if not self.tile:
            from .errors import TileUnsupportedFeatureError
            from .frontend.emit import loc          # (compiling: MLIR is there)
            raise TileUnsupportedFeatureError(
                f"{self.name}() is a host function (@function(tile=False)): kernels and "
                f"@functions cannot call it; drop tile=False to compile it into kernels", loc())
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise make_error(f"bad arguments to @function '{self.name}{self.signature}': {e}")
        bound.apply_defaults()
        return dict(bound.arguments)

    def __call__(self, *args, **kwargs):
        if self.host:
            return self.fn(*args, **kwargs)
        raise TileError(f"@function '{self.name}' can only be called from a @kernel or "
                        f"another @function (mark it @function(host=True) to call it from "
                        f"Python too)")


def function(func: Callable | None = None, /, *, host: bool = False,
             tile: bool = True) -> Function | Callable[[Callable], Function]:
    """Marks a helper callable from kernels (cuTile's `function(func=None, /, *,
    host=False, tile=True)`): `@tileir.function`, `@tileir.function()`, or with the
    execution spaces it may be called from: `host=True` lets Python call it as well
    (the plain function runs), `tile=False` keeps it out of kernels."""
    for name, flag in (("host", host), ("tile", tile)):
        if not isinstance(flag, bool):
            raise TypeError(f"function(): {name} must be True or False, got {flag!r}")

    def decorate(fn: Callable) -> Function:
        if not callable(fn) or isinstance(fn, (Function, KernelEntry)) or \
                not hasattr(fn, "__name__"):
            raise TypeError(f"`function` decorator must be applied to a Python function, got "
                            f"{type(fn).__name__} {fn!r}")
        return Function(fn, host=host, tile=tile)

    return decorate if func is None else decorate(func)


_PLAIN_HELPERS: "weakref.WeakKeyDictionary[Callable, Function]" = weakref.WeakKeyDictionary()


def is_plain_helper(fn: Any) -> bool:
    """An undecorated Python function of the user's, which kernels call inline as cuTile
    does (not a lambda, not tileir's own, not a library's: NumPy's `ones` is host code,
    refused at the kernel's call, `frontend/library.py`)."""
    return isinstance(fn, types.FunctionType) and fn.__name__ != "<lambda>" and \
        not (fn.__module__ or "").startswith("tileir") and not is_library_function(fn)


def plain_helper(fn: Callable) -> Function:
    """The `Function` a plain helper is compiled as (one per Python function)."""
    helper = _PLAIN_HELPERS.get(fn)
    if helper is None:
        helper = _PLAIN_HELPERS[fn] = Function(fn)
    return helper
