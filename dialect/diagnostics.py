"""Diagnostics with source locations, shared by the verifier, passes and tools.

Every error we report names a place: `file:line:col: error: message`, followed
by the offending source line and a caret when the file is readable.

`Diagnostic`, `TileIRError` and the location helpers are defined in
`tileir.errors`, which needs no MLIR (a GPU host without it still imports
tileir and renders errors); they are re-exported here for the dialect, the
passes and the tools.  This module adds the bridge from MLIR's diagnostics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tileir.errors import (Diagnostic, TileIRError, describe_location, file_line_col,
                           source_snippet)

if TYPE_CHECKING:
    from mlir import ir


def from_mlir_error(err: ir.MLIRError) -> list[Diagnostic]:
    """Converts the diagnostics carried by an `MLIRError` into ours."""
    diags = []
    for d in err.error_diagnostics:
        notes = [Diagnostic(n.location, n.message, "note") for n in d.notes]
        diags.append(Diagnostic(d.location, d.message, "error", notes))
    if not diags:
        diags.append(Diagnostic(None, str(err)))
    return diags


__all__ = ["Diagnostic", "TileIRError", "describe_location", "file_line_col", "from_mlir_error",
           "source_snippet"]


def map_locations(root, fn) -> None:
    """Replaces the location of every op and block argument under `root` by `fn(loc)`."""
    from mlir import ir

    def visit(op: ir.Operation) -> ir.WalkResult:
        op.location = fn(op.location)
        for region in op.regions:
            for block in region.blocks:
                for argument in block.arguments:
                    argument.set_location(fn(argument.location))
        return ir.WalkResult.ADVANCE

    root.walk(visit)
