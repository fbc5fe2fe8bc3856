"""tile-compile: compile kernels ahead of time into the compile cache.

    tile-compile tileir.examples.vector_add:vector_add --args 'f32[1],f32[1],f32[1],1024'
    tile-compile my_kernels.py:scale --args 'bf16[2],bf16[2]!u,f32,4096' \
        --target sm_80 --target sm_90a --cache-dir ./tileir-cache

Run it where MLIR and ptxas are installed (no GPU needed), then copy the cache
directory to the GPU host, which launches the kernels without MLIR
(docs/runtime.md, "Ahead-of-time").  A specialization already in the cache is
reported, not compiled again.

Exit status: 0 when every target is in the cache, 1 when something failed
(import, kernel, compile), 2 on a malformed command line.  Errors are printed
as diagnostics, `file:line:col: error: ...` with the source line and a caret
when they have a place; a traceback only with --traceback, for internal errors.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import sys
import traceback
import types
from pathlib import Path
from typing import Sequence

from tileir.cache import Cache, format_size
from tileir.errors import Diagnostic, SourceLocation, TileError, TileIRError
from tileir.kernel import DEFAULT_TARGET, CompiledKernel, Kernel, spill_bytes
from tileir.specialization import SPEC_SYNTAX, ArgSpecError, parse_arg_specs

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PROG = "tile-compile"

KERNEL_HELP = """
KERNEL is MODULE:NAME, MODULE a dotted module name (tileir.examples.softmax) or a
path to a .py file (its directory goes first on sys.path, as with `python file.py`).
The cache key covers the module name of whatever the kernel references in its
module, so name a module in a package the way the GPU host imports it.
"""


class UsageError(Exception):
    """A malformed command line: reported like argparse's own errors (exit 2)."""


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compile a @tileir.kernel ahead of time into the compile cache, for each "
                    "target, and print the entries.", epilog=SPEC_SYNTAX + KERNEL_HELP)
    p.add_argument("kernel", metavar="KERNEL", help="MODULE:NAME of the @tileir.kernel")
    p.add_argument("--args", required=True, metavar="SPECS",
                   help="the specialization, e.g. 'bf16[2],bf16[2],8192' (see below)")
    p.add_argument("--target", action="append", dest="targets", metavar="TARGET",
                   help=f"GPU target, repeatable (sm_80, sm_90a; default {DEFAULT_TARGET})")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="the cache to fill (default: TILEIR_CACHE_DIR, else ~/.cache/tileir)")
    p.add_argument("--traceback", action="store_true",
                   help="show the Python traceback of an internal error")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)        # exits 2 on a malformed command line
    try:
        return _run(options)
    except KeyboardInterrupt:
        return 130
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except TileIRError as e:
        _report(e.diagnostics)
        return EXIT_USAGE if isinstance(e, ArgSpecError) else EXIT_FAILED
    except Exception as e:  # a bug in tileir, not in the input: no traceback unless asked
        if options.traceback:
            traceback.print_exception(e, file=sys.stderr)
        print(f"{PROG}: internal error: {type(e).__name__}: {_first_line(e)} (this is a bug "
              f"in tileir; rerun with --traceback to see where)", file=sys.stderr)
        return EXIT_FAILED


def _run(options: argparse.Namespace) -> int:
    cache = Cache(options.cache_dir)
    _check_enabled(cache)
    args = parse_arg_specs(options.args)          # a malformed command line before any import
    kernel = load_kernel(options.kernel)
    compiled = [kernel.compile(args, target=target, cache=cache)
                for target in options.targets or [DEFAULT_TARGET]]
    print(format_compiled(compiled, cache.root))
    return EXIT_OK


def _check_enabled(cache: Cache) -> None:
    try:
        enabled = cache.enabled
    except ValueError as e:           # a malformed TILEIR_CACHE
        raise TileIRError(str(e)) from None
    if not enabled:
        raise TileIRError("the compile cache is disabled (TILEIR_CACHE=0), so nothing would be "
                          "stored; unset TILEIR_CACHE to fill it")


# --------------------------------------------------------------------------
# Finding the kernel
# --------------------------------------------------------------------------
def load_kernel(reference: str) -> Kernel:
    """The @tileir.kernel named by `MODULE:NAME`."""
    module_ref, colon, name = reference.rpartition(":")
    if not colon or not module_ref or not name.isidentifier():
        raise UsageError(f"KERNEL must be MODULE:NAME (e.g. tileir.examples.softmax:softmax "
                         f"or path/to/kernels.py:softmax), got '{reference}'")
    module = _import(module_ref)
    value = getattr(module, name, None)
    if isinstance(value, Kernel):
        return value
    kernels = sorted(k for k, v in vars(module).items() if isinstance(v, Kernel))
    listed = f"its kernels: {', '.join(kernels)}" if kernels else "it defines no @tileir.kernel"
    if value is None:
        raise TileIRError(f"module '{module_ref}' has no kernel '{name}'; {listed}")
    raise TileIRError(f"'{name}' in module '{module_ref}' is a {type(value).__name__}, not a "
                      f"@tileir.kernel; {listed}")


def _import(module_ref: str) -> types.ModuleType:
    is_path = module_ref.endswith(".py") or os.sep in module_ref
    try:
        return _import_path(Path(module_ref)) if is_path else importlib.import_module(module_ref)
    except TileIRError:
        raise
    except SyntaxError as e:
        raise TileIRError([_syntax_diagnostic(e)]) from None
    except ModuleNotFoundError as e:
        if is_path or not _is_missing(e.name, module_ref):
            raise _import_failed(module_ref, e) from None
        raise TileIRError(f"cannot import module '{module_ref}': {e}; name a module on "
                          f"sys.path, or a .py file by its path") from None
    except Exception as e:  # the user's module failed while running: say so, in one line
        raise _import_failed(module_ref, e) from None


def _import_path(path: Path) -> types.ModuleType:
    if not path.is_file():
        raise TileIRError(f"cannot import '{path}': no such file")
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # As `python path/to/file.py` would: its siblings import, and it is in sys.modules
    # while it runs (dataclasses and pickling look it up there).
    sys.path.insert(0, str(path.resolve().parent))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _is_missing(missing: str | None, module_ref: str) -> bool:
    """Whether the module not found is `module_ref` itself (or a parent package of it)."""
    return missing is not None and (module_ref + ".").startswith(missing + ".")


def _import_failed(module_ref: str, error: Exception) -> TileIRError:
    return TileIRError(f"importing '{module_ref}' raised {type(error).__name__}: "
                       f"{_first_line(error)}")


def _syntax_diagnostic(error: SyntaxError) -> Diagnostic:
    """A SyntaxError as our diagnostics render one: file:line:col, the line, a caret."""
    where = SourceLocation(error.filename, error.lineno, error.offset or 1) \
        if error.filename and error.lineno else None
    return Diagnostic(where, f"syntax error: {error.msg}")


# --------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------
_REGISTERS = re.compile(r"Used (\d+) registers")


def ptxas_resources(report: str | None) -> str:
    """'40 registers, no spills' (or the spilled bytes) from ptxas' `-v` report."""
    registers = _REGISTERS.search(report or "")
    if registers is None:
        return "no ptxas report"
    try:
        stores, loads = spill_bytes(report)
    except TileError:
        return "no ptxas report"
    spilled = "no spills" if stores == loads == 0 else \
        f"spills: {stores} B stored, {loads} B loaded"
    return f"{registers[1]} registers, {spilled}"


def format_compiled(compiled: Sequence[CompiledKernel], root: Path) -> str:
    """One block per entry: kernel, target, what happened, resources, size; key; path."""
    lines = []
    for ck in compiled:
        status = "cached" if ck.loaded_from_cache else "compiled"
        lines.append(f"{ck.name}  {ck.target}  {status}  {ptxas_resources(ck.ptxas_report)}  "
                     f"{format_size(ck.entry.size)}")
        lines.append(f"    key   {ck.entry.key}")
        lines.append(f"    path  {ck.entry.path}")
    lines.append(f"{len(compiled)} {'entry' if len(compiled) == 1 else 'entries'} in {root}")
    return "\n".join(lines)


def _report(diagnostics: Sequence[Diagnostic]) -> None:
    for d in diagnostics:
        # Problems with no place in a file (a missing kernel, a bad --args) are the
        # tool's: say so, as compilers do.
        prefix = "" if d.location is not None else f"{PROG}: "
        print(prefix + d.render(), file=sys.stderr)
    sys.stderr.flush()


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""


if __name__ == "__main__":
    sys.exit(main())
