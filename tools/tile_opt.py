"""tile-opt: read Tile IR, verify it, run passes or stages, print the result.

    tile-opt kernel.mlir --tile-canonicalize --tile-cse
    tile-opt kernel.mlir --pass-pipeline='builtin.module(tile-inline,canonicalize,cse)'
    tile-opt kernel.mlir --stop-after=tile
    tile-opt kernel.mlir --target=sm_80 --stop-after=ptx --emit=ptx -o kernel.ptx
    tile-opt kernel.mlir --stop-after=cubin --emit=cubin -o kernel.cubin
    tile-opt -split-input-file --verify-diagnostics invalid.mlir

Like mlir-opt (`-verify-each`), it verifies the IR between every two passes, so that
a pass that breaks it is named (a compile through `@kernel` verifies each stage's
input and output only, unless TILEIR_VERIFY_EACH=1).  Like MLIR's tools, options
may be spelled with one dash or two.  Exit status:
0 on success, 1 if any input (or split chunk) failed, 2 on bad usage.  Errors
are printed as `file:line:col: error: message`; a Python traceback is never
shown unless `--traceback` is given for an internal error.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import traceback
from typing import Sequence

from mlir import ir
from mlir.dialects import gpu

from tileir import dialect
from tileir.backend.target.toolchain import TARGETS
from tileir.dialect import Diagnostic, TileIRError
from tileir.errors import file_line_col
from tileir.passes import (PASSES, STAGES, InternalError, current_stage, ir_printer,
                           parse_pipeline, run_passes, run_stage, run_stages, validate_pipeline)
from tileir.dialect.verifier import TARGET_ATTR
from tileir.passes.lower_to_llvm import module_target

from . import expected, source

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# What --emit writes: the printed IR, or the artifact a `gpu.binary` holds at
# the stage of the same name.
EMIT_MLIR = "mlir"
EMIT_FORMATS = {"ptx": gpu.CompilationTarget.Assembly, "cubin": gpu.CompilationTarget.Binary}
EMIT_WHAT = {"ptx": "PTX text", "cubin": "cubin"}
# The first stage whose output depends on the target: from there on a module
# cannot be retargeted.
TARGETED_STAGE = "llvm"


@dataclasses.dataclass(frozen=True)
class Options:
    input: str
    output: str | None
    passes: tuple[str, ...]
    stop_after: str | None
    run_stage: str | None
    target: str | None
    emit: str
    split_input_file: bool
    verify_diagnostics: bool
    print_ir_after_all: bool
    debug_info: bool
    generic: bool
    traceback: bool


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------
class _AppendPasses(argparse.Action):
    """Collects pass flags and --pass-pipeline elements in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        passes = list(getattr(namespace, self.dest) or [])
        if self.const is not None:
            passes.append(self.const)
        else:
            try:
                passes.extend(parse_pipeline(values))
            except TileIRError as e:
                parser.error(str(e.diagnostics[0].message))
        setattr(namespace, self.dest, passes)


def _epilog() -> str:
    width = max(map(len, STAGES))
    lines = ["stages, in order (--stop-after runs from the input's stage up to the one named):"]
    for stage, names in STAGES.items():
        listed = ", ".join(names) or "(no passes: what @kernel produces)"
        lines.append(f"  {stage:<{width}}  {listed}")
    lines.append("")
    lines.append("--pass-pipeline also accepts upstream MLIR passes, e.g. "
                 "'builtin.module(tile-inline,canonicalize,cse)'.")
    lines.append("")
    lines.append("emitting code (--emit=ptx|cubin alone runs the stages up to it):")
    lines.append("  tile-opt k.mlir --target=sm_80 --stop-after=ptx --emit=ptx -o k.ptx")
    lines.append("  tile-opt k.mlir --stop-after=cubin --emit=cubin -o k.cubin")
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tile-opt", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Verify Tile IR, run tile and MLIR passes on it, print the result.",
        epilog=_epilog())
    p.add_argument("input", nargs="?", default="-", help="input .mlir file ('-' or none: stdin)")
    p.add_argument("-o", dest="output", metavar="FILE", help="write the output to FILE")
    p.add_argument("--target", choices=TARGETS, metavar="CHIP",
                   help=f"the GPU to compile for ({' or '.join(TARGETS)}): sets the module "
                        f"attribute {TARGET_ATTR}, which the '{TARGETED_STAGE}' stage reads "
                        f"(default: the input's, else sm_90a)")
    p.add_argument("--emit", choices=[EMIT_MLIR, *EMIT_FORMATS], default=EMIT_MLIR,
                   metavar="KIND",
                   help="what to write: 'mlir' (the IR, default), 'ptx' (the PTX text of a "
                        "module at stage 'ptx') or 'cubin' (the cubin bytes of a module at "
                        "stage 'cubin'; never to a terminal)")
    p.add_argument("--pass-pipeline", dest="passes", action=_AppendPasses, metavar="PIPELINE",
                   help="'builtin.module(p1,p2,...)' or 'p1,p2,...': tile or upstream passes")
    group = p.add_argument_group("tile passes (run in command-line order)")
    for info in PASSES.values():
        group.add_argument(f"--{info.name}", dest="passes", action=_AppendPasses, nargs=0,
                           const=info.name, help=info.summary)
    stages = p.add_mutually_exclusive_group()
    stages.add_argument("--stop-after", choices=list(STAGES), metavar="STAGE",
                        help="run every stage after the input's, up to and including STAGE")
    stages.add_argument("--run-stage", choices=list(STAGES), metavar="STAGE",
                        help="run the passes of STAGE only")
    p.add_argument("--split-input-file", action="store_true",
                   help="process each '// -----' separated chunk on its own")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check diagnostics against 'expected-error {{...}}' comments")
    p.add_argument("--print-ir-after-all", action="store_true",
                   help="print the IR to stderr after every pass")
    p.add_argument("--mlir-print-debuginfo", dest="debug_info", action="store_true",
                   help="print locations")
    p.add_argument("--mlir-print-op-generic", dest="generic", action="store_true",
                   help="print every op in the generic form")
    p.add_argument("--traceback", action="store_true",
                   help="show the Python traceback of internal errors (for tileir developers)")
    return p


_SINGLE_DASH_LONG = re.compile(r"^-[A-Za-z][\w-]+(=.*)?$")


def _two_dashes(argv: Sequence[str]) -> list[str]:
    """`-split-input-file` -> `--split-input-file`, as MLIR tools accept both."""
    out, options_done = [], False
    for arg in argv:
        if arg == "--":
            options_done = True
        out.append("-" + arg if not options_done and _SINGLE_DASH_LONG.match(arg) else arg)
    return out


def parse_args(argv: Sequence[str] | None = None) -> Options:
    parser = _parser()
    args = parser.parse_args(_two_dashes(sys.argv[1:] if argv is None else argv))
    passes = tuple(args.passes or ())
    if passes and (args.stop_after or args.run_stage):
        parser.error("give either passes or a stage (--stop-after/--run-stage), not both")
    stop_after = args.stop_after
    if args.emit != EMIT_MLIR:
        _check_emit(parser, args)
        if args.passes is None and not args.run_stage and not stop_after:
            stop_after = args.emit        # `--emit=ptx` alone: compile up to PTX
    return Options(args.input, args.output, passes, stop_after, args.run_stage, args.target,
                   args.emit, args.split_input_file, args.verify_diagnostics,
                   args.print_ir_after_all, args.debug_info, args.generic, args.traceback)


def _check_emit(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.emit == "cubin" and args.split_input_file:
        parser.error("--emit=cubin writes one binary; it cannot be combined with "
                     "--split-input-file")
    to_stdout = args.output is None or args.output == "-"
    if args.emit == "cubin" and to_stdout and sys.stdout.isatty():
        parser.error("refusing to write a cubin to a terminal; give -o FILE or redirect "
                     "stdout")


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    try:
        return _run(options)
    except BrokenPipeError:
        # The reader went away (`tile-opt x.mlir | head`): nothing left to say,
        # and Python's exit-time flush of stdout must not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug outside any one input chunk: no traceback unless asked
        if options.traceback:
            traceback.print_exception(e, file=sys.stderr)
        print(f"tile-opt: internal error: {InternalError.describe(e)} (this is a bug in "
              f"tileir; rerun with --traceback to see where)", file=sys.stderr)
        return EXIT_FAILED


def _run(options: Options) -> int:
    context = dialect.context()
    try:
        validate_pipeline(options.passes, context)
        name, text = source.read_source(options.input, sys.stdin.buffer, context)
    except TileIRError as e:
        _report(e.diagnostics)
        return EXIT_FAILED
    outputs, failed = [], False
    for chunk in source.split(name, text, options.split_input_file):
        output, diagnostics = _process(chunk, options, context)
        if options.verify_diagnostics:
            diagnostics = expected.check(chunk, diagnostics, context)
        if diagnostics:
            _report(diagnostics)
            failed = True
        if output is not None:
            outputs.append(output)
    if options.emit != EMIT_MLIR and failed:
        return EXIT_FAILED    # no partial PTX or cubin for a build to pick up
    if options.emit == "cubin":
        # never split (parse_args refuses): one output, or none when every
        # diagnostic was an expected one
        data = outputs[0] if outputs else b""
    else:
        data = "// -----\n".join(outputs)
    if not _write(data, options.output):
        return EXIT_FAILED
    return EXIT_FAILED if failed else EXIT_OK


def _process(chunk: source.Chunk, options: Options,
             context: ir.Context) -> tuple[str | bytes | None, list[Diagnostic]]:
    """Compiles one chunk: (printed IR, PTX or cubin; or None, diagnostics)."""
    try:
        return _compile(chunk, options, context), []
    except TileIRError as e:
        return None, e.diagnostics
    except Exception as e:  # a bug in tileir, not in the input: say so, without a traceback
        return None, [_internal_error(chunk, e, options.traceback, context)]


def _compile(chunk: source.Chunk, options: Options, context: ir.Context) -> str | bytes:
    module = source.parse(chunk, context)
    dialect.verify(module)
    _set_target(module, options.target, _module_location(module, chunk))
    hook = ir_printer(sys.stderr, debug_info=options.debug_info) \
        if options.print_ir_after_all else None
    if options.stop_after:
        run_stages(module, stop_after=options.stop_after, print_after_all=hook,
                   verify_each=True)
        _fit_remark(module, _module_location(module, chunk))
    elif options.run_stage:
        run_stage(module, options.run_stage, print_after_all=hook, verify_each=True)
    else:
        run_passes(module, options.passes, print_after_all=hook, verify_each=True)
    _pingpong_remark(module, _module_location(module, chunk))
    if options.emit != EMIT_MLIR:
        return _emitted(module, options.emit, _module_location(module, chunk))
    text = module.operation.get_asm(enable_debug_info=options.debug_info,
                                    print_generic_op_form=options.generic)
    return text if text.endswith("\n") else text + "\n"


def _fit_remark(module: ir.Module, loc: ir.Location) -> None:
    """What the shared-memory budget chose (backend/layout/budget.py), as a remark."""
    from tileir.backend.layout.budget import FIT_ATTR
    attrs = module.operation.attributes
    if FIT_ATTR in attrs:
        where = ":".join(map(str, file_line_col(loc) or ("<input>",)))
        print(f"{where}: remark: {ir.StringAttr(attrs[FIT_ATTR]).value}", file=sys.stderr)


def _pingpong_remark(module: ir.Module, loc: ir.Location) -> None:
    """What tile-pingpong decided and why (backend/pipeline/pingpong.py), as a remark."""
    from tileir.backend.pipeline.pingpong import CHOICE_ATTR
    attrs = module.operation.attributes
    if CHOICE_ATTR in attrs:
        where = ":".join(map(str, file_line_col(loc) or ("<input>",)))
        print(f"{where}: remark: {ir.StringAttr(attrs[CHOICE_ATTR]).value}", file=sys.stderr)


# --------------------------------------------------------------------------
# Targets and emitted code
# --------------------------------------------------------------------------
def _module_location(module: ir.Module, chunk: source.Chunk) -> ir.Location:
    """Where module-level errors point: the `module` op, or the chunk's first line when
    the module is implicit (MLIR gives it line 0)."""
    loc = module.operation.location
    if loc.is_a_file() and loc.start_line > 0:
        return loc
    return ir.Location.file(chunk.name, chunk.first_line, 1, context=module.context)


def _set_target(module: ir.Module, target: str | None, loc: ir.Location) -> None:
    """Checks the input's `tile.target` and applies --target to it.

    A module is retargeted only before the 'llvm' stage: from there on its
    code is for the chip it was lowered for.
    """
    attrs = module.operation.attributes
    if TARGET_ATTR in attrs:
        attr = attrs[TARGET_ATTR]
        if not isinstance(attr, ir.StringAttr) or attr.value not in TARGETS:
            raise TileIRError([Diagnostic(loc, f"module attribute {TARGET_ATTR} = {attr} is "
                                               f"not a target; targets: {', '.join(TARGETS)}")])
    if target is None:
        return
    stages = list(STAGES)
    stage = current_stage(module)
    if stages.index(stage) >= stages.index(TARGETED_STAGE):
        lowered_for = module_target(module).chip
        if lowered_for != target:
            raise TileIRError([Diagnostic(loc, f"--target={target}: the input is at stage "
                                               f"'{stage}', already lowered for {lowered_for}; "
                                               f"retarget an input from before stage "
                                               f"'{TARGETED_STAGE}'")])
    with module.context:
        attrs[TARGET_ATTR] = ir.StringAttr.get(target)


def _emitted(module: ir.Module, emit: str, loc: ir.Location) -> str | bytes:
    """The PTX text or cubin bytes held by the module's `gpu.binary`."""
    objects = [gpu.ObjectAttr(obj) for op in module.body.operations
               if op.operation.name == "gpu.binary"
               for obj in ir.ArrayAttr(op.operation.attributes["objects"])]
    found = [obj for obj in objects if obj.format == EMIT_FORMATS[emit]]
    if len(found) == 1:
        data = found[0].object
        if emit == "cubin":
            return bytes(data)
        text = data.decode()
        return text if text.endswith("\n") else text + "\n"
    stages, stage = list(STAGES), current_stage(module)
    if len(found) > 1:
        problem = f"the module holds {len(found)} {EMIT_WHAT[emit]} objects, not one"
    elif stages.index(stage) > stages.index(emit):
        problem = (f"the module is at stage '{stage}', past '{emit}', and holds no "
                   f"{EMIT_WHAT[emit]}; stop there with --stop-after={emit}")
    else:
        problem = (f"the module is at stage '{stage}' and holds no {EMIT_WHAT[emit]} yet; "
                   f"compile it up to that stage with --stop-after={emit}")
    raise TileIRError([Diagnostic(loc, f"--emit={emit}: {problem}")])


def _internal_error(chunk: source.Chunk, error: Exception, show_traceback: bool,
                    context: ir.Context) -> Diagnostic:
    if show_traceback:
        traceback.print_exception(error, file=sys.stderr)
    what = str(error) if isinstance(error, InternalError) else InternalError.describe(error)
    location = ir.Location.file(chunk.name, chunk.first_line, 1, context=context)
    return Diagnostic(location, f"internal error: {what} (this is a bug in tileir, not in "
                                f"the input; rerun with --traceback to see where)")


def _report(diagnostics: list[Diagnostic]) -> None:
    for d in diagnostics:
        # Problems with no place in the input (a missing file, a bad pipeline)
        # are the tool's: say so, as compilers do.
        prefix = "" if d.location is not None else "tile-opt: "
        print(prefix + d.render(), file=sys.stderr)
    sys.stderr.flush()


def _write(data: str | bytes, path: str | None) -> bool:
    binary = isinstance(data, bytes)
    if path is None or path == "-":
        stream = sys.stdout.buffer if binary else sys.stdout
        stream.write(data)
        stream.flush()
        return True
    try:
        with open(path, "wb") if binary else open(path, "w", encoding="utf-8") as f:
            f.write(data)
    except OSError as e:
        _report([Diagnostic(None, f"cannot write '{path}': {e.strerror or e}")])
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
