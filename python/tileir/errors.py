"""User-facing errors, named as in cuTile so ported code catches the same things,
and the located diagnostics they render.

Each error carries one or more diagnostics and renders `file:line:col: error:
message`, the offending source line with a caret, and what to do.

Nothing here imports MLIR, so that `import tileir` and launching kernels from
the compile cache work on a GPU host without it.  A diagnostic's location is an
MLIR `ir.Location`, read only through its own methods (no MLIR import needed to
render one), a `SourceLocation` for places outside IR, or None.
`tileir.dialect.diagnostics` re-exports these names and adds the bridge from
MLIR's diagnostics.
"""

from __future__ import annotations

import dataclasses
import linecache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlir import ir


@dataclasses.dataclass(frozen=True)
class SourceLocation:
    """file:line:col of something that is not in IR (a Python syntax error, say)."""

    filename: str
    line: int
    col: int


@dataclasses.dataclass
class Diagnostic:
    location: ir.Location | SourceLocation | None
    message: str
    severity: str = "error"
    notes: list["Diagnostic"] = dataclasses.field(default_factory=list)

    def render(self, with_source: bool = True) -> str:
        where = describe_location(self.location)
        head = f"{where}: {self.severity}: {self.message}" if where else \
            f"{self.severity}: {self.message}"
        parts = [head]
        if with_source:
            snippet = source_snippet(self.location)
            if snippet:
                parts.append(snippet)
        for note in self.notes:
            parts.append(note.render(with_source=False))
        return "\n".join(parts)


class TileIRError(Exception):
    """An error with one or more located diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic] | str,
                 location: ir.Location | SourceLocation | None = None):
        if isinstance(diagnostics, str):
            diagnostics = [Diagnostic(location, diagnostics)]
        self.diagnostics = diagnostics
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


def file_line_col(loc: ir.Location | SourceLocation | None) -> tuple[str, int, int] | None:
    """The innermost user-facing file:line:col of a location, if it has one."""
    if loc is None:
        return None
    if isinstance(loc, SourceLocation):
        return loc.filename, loc.line, loc.col
    if loc.is_a_file():
        return loc.filename, loc.start_line, loc.start_col
    if loc.is_a_callsite():
        return file_line_col(loc.callee)
    if loc.is_a_name():
        return file_line_col(loc.child_loc)
    if loc.is_a_fused():
        for sub in loc.locations:
            found = file_line_col(sub)
            if found:
                return found
    return None


def describe_location(loc: ir.Location | SourceLocation | None) -> str | None:
    """`file:line:col`, plus `(inlined from file:line:col)` for call sites."""
    flc = file_line_col(loc)
    if flc is None:
        return None
    text = f"{flc[0]}:{flc[1]}:{flc[2]}"
    if loc is not None and not isinstance(loc, SourceLocation) and loc.is_a_callsite():
        caller = file_line_col(loc.caller)
        if caller:
            text += f" (inlined from {caller[0]}:{caller[1]}:{caller[2]})"
    return text


def source_snippet(loc: ir.Location | SourceLocation | None) -> str | None:
    """The source line of a location with a caret under its column."""
    flc = file_line_col(loc)
    if flc is None:
        return None
    filename, line, col = flc
    text = linecache.getline(filename, line)
    if not text:
        return None
    text = text.rstrip("\n")
    caret = " " * max(col - 1, 0) + "^"
    return f"    {text}\n    {caret}"


class TileError(TileIRError):
    """Base of all errors raised while compiling or running a tile kernel."""


class TileSyntaxError(TileError):
    """Python syntax the tile language does not accept."""


class TileTypeError(TileError):
    """Operands of the wrong dtype, shape or kind."""


class TileValueError(TileError):
    """A value out of its allowed range (axis, shape, padding mode, ...)."""


class KernelOptionError(TileValueError, ValueError):
    """A kernel option out of its range.  cuTile raises a plain `ValueError` for its
    options (`num_ctas`, `occupancy`, `opt_level`, `num_worker_warps`): this is one
    too, so `except ValueError` catches it as ported code expects, and a
    `TileValueError` as tileir's other errors."""


class TileUnsupportedFeatureError(TileError):
    """Valid Python the compiler does not support yet."""


class TileRecursionError(TileError):
    """A helper function calls itself (directly or through others): kernels inline
    every call, so recursion has no end."""


class TileInternalError(TileError):
    """Something inside the compiler went wrong rather than in the user's code."""


class TileCompilerExecutionError(TileInternalError):
    """A compiler stage or external tool failed, or no compiler is there to run."""


class TileCompilerTimeoutError(TileInternalError):
    """Compiling took longer than `tileir.compiler_timeout` allows."""


class TileStaticAssertionError(TileError):
    """`static_assert` failed, or `ensure_constant` got a value known only at run time."""


class TileStaticEvalError(TileError):
    """A compile-time evaluation (`static_eval`, `static_iter`) broke its rules or raised."""


class StaticException(TileStaticEvalError):
    """An exception the kernel raised at compile time (`raise static_exception(e)`)."""


class TileCacheWarning(UserWarning):
    """The compile cache could not be used as asked (unwritable, full, unreadable or
    damaged entries): tileir compiled in memory or again, and says so."""


__all__ = ["Diagnostic", "KernelOptionError", "SourceLocation", "TileIRError", "TileError",
           "TileSyntaxError",
           "TileCacheWarning", "TileTypeError", "TileValueError", "TileUnsupportedFeatureError",
           "TileRecursionError", "TileInternalError", "TileCompilerExecutionError",
           "TileCompilerTimeoutError", "TileStaticAssertionError", "TileStaticEvalError",
           "StaticException", "describe_location", "file_line_col", "source_snippet"]
