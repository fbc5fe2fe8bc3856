"""Errors of the interpreter.

Every error a user sees is a `TileIRError` carrying the location of the op (or
of the kernel function, for argument errors), so it renders as
`file:line:col: error: message` with the source line.  Rules raise the plain
`Fault` at run time; the block executor, which knows which op was running,
turns it into a located `InterpreterError`.
"""

from __future__ import annotations

from mlir import ir

from tileir.dialect.diagnostics import Diagnostic, TileIRError


class InterpreterError(TileIRError):
    """A located error found while compiling or running a kernel."""

    @classmethod
    def at(cls, location: ir.Location | None, message: str) -> "InterpreterError":
        return cls([Diagnostic(location, message)])


class UnsupportedOpError(InterpreterError, NotImplementedError):
    """The IR uses an op (or a form of it) that has no interpreter rule."""


class ArgumentError(InterpreterError, TypeError):
    """`run()` was called with arguments that do not fit the kernel's signature."""


class Fault(Exception):
    """A run-time problem inside one op; the executor adds the op's location."""


def add_note(error: TileIRError, location: ir.Location | None, message: str) -> None:
    """Appends a note (e.g. "called from here") to the last diagnostic of `error`."""
    error.diagnostics[-1].notes.append(Diagnostic(location, message, "note"))
    error.args = (error.render(),)
