"""Diagnostics with source locations, shared by the verifier, passes and tools.

Every error we report names a place: `file:line:col: error: message`, followed
by the offending source line and a caret when the file is readable.
"""

from __future__ import annotations

import dataclasses
import linecache

from mlir import ir


@dataclasses.dataclass
class Diagnostic:
    location: ir.Location | None
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

    def __init__(self, diagnostics: list[Diagnostic] | str, location: ir.Location | None = None):
        if isinstance(diagnostics, str):
            diagnostics = [Diagnostic(location, diagnostics)]
        self.diagnostics = diagnostics
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


def file_line_col(loc: ir.Location | None) -> tuple[str, int, int] | None:
    """The innermost user-facing file:line:col of a location, if it has one."""
    if loc is None:
        return None
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


def describe_location(loc: ir.Location | None) -> str | None:
    """`file:line:col`, plus `(inlined from file:line:col)` for call sites."""
    flc = file_line_col(loc)
    if flc is None:
        return None
    text = f"{flc[0]}:{flc[1]}:{flc[2]}"
    if loc is not None and loc.is_a_callsite():
        caller = file_line_col(loc.caller)
        if caller:
            text += f" (inlined from {caller[0]}:{caller[1]}:{caller[2]})"
    return text


def source_snippet(loc: ir.Location | None) -> str | None:
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


def from_mlir_error(err: ir.MLIRError) -> list[Diagnostic]:
    """Converts the diagnostics carried by an `MLIRError` into ours."""
    diags = []
    for d in err.error_diagnostics:
        notes = [Diagnostic(n.location, n.message, "note") for n in d.notes]
        diags.append(Diagnostic(d.location, d.message, "error", notes))
    if not diags:
        diags.append(Diagnostic(None, str(err)))
    return diags
