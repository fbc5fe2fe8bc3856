"""tileir.dialect: the Tile IR dialect, defined in Python on the MLIR bindings.

Use `context()` to get an MLIR context with the dialect loaded, `parse()` to
read Tile IR text with verification, and the op classes in `tile` to build IR.
"""

from __future__ import annotations

from mlir import ir
from mlir._mlir_libs import _mlir

from . import (cluster, debug, indexed, layout, lists, ordering, pieces,  # noqa: F401
               pointers, ring, stream_k, tile)  # (registration)
from .diagnostics import Diagnostic, TileIRError, describe_location, from_mlir_error
from .tile import DIALECT
from .types import array_info, array_type
from .verifier import FUNCTION_ATTR, KERNEL_ATTR, verify

# `op.opview` finds our op classes as `tileir.dialect.tile`.
if "tileir.dialect" not in _mlir.globals.dialect_search_modules:
    _mlir.globals.append_dialect_search_prefix("tileir.dialect")


def load(ctx: ir.Context) -> ir.Context:
    """Loads the tile dialect into `ctx` (safe to call repeatedly)."""
    DIALECT.load(ctx)
    return ctx


def context() -> ir.Context:
    """A fresh MLIR context with every upstream dialect and the tile dialect."""
    return load(ir.Context())


def parse(text: str, ctx: ir.Context | None = None, *, filename: str | None = None,
          do_verify: bool = True) -> ir.Module:
    """Parses Tile IR text; raises `TileIRError` with located diagnostics on failure."""
    ctx = ctx or ir.Context.current
    load(ctx)
    try:
        if filename is not None:
            module = ir.Module.parseFile(filename, ctx)
        else:
            module = ir.Module.parse(text, ctx)
    except ir.MLIRError as e:
        raise TileIRError(from_mlir_error(e)) from None
    if do_verify:
        verify(module)
    return module


__all__ = ["Diagnostic", "TileIRError", "DIALECT", "FUNCTION_ATTR", "KERNEL_ATTR", "tile",
           "array_info", "array_type", "context", "describe_location", "load", "parse",
           "verify"]
