"""User-facing errors, named as in cuTile so ported code catches the same things.

Each carries a location and renders `file:line:col: error: message`, the
offending source line with a caret, and what to do.
"""

from __future__ import annotations

from tileir.dialect.diagnostics import Diagnostic, TileIRError


class TileError(TileIRError):
    """Base of all errors raised while compiling or running a tile kernel."""


class TileSyntaxError(TileError):
    """Python syntax the tile language does not accept."""


class TileTypeError(TileError):
    """Operands of the wrong dtype, shape or kind."""


class TileValueError(TileError):
    """A value out of its allowed range (axis, shape, padding mode, ...)."""


class TileUnsupportedFeatureError(TileError):
    """Valid Python the compiler does not support yet."""


class TileCompilerExecutionError(TileError):
    """A compiler stage or external tool failed."""


__all__ = ["Diagnostic", "TileError", "TileSyntaxError", "TileTypeError", "TileValueError",
           "TileUnsupportedFeatureError", "TileCompilerExecutionError"]
