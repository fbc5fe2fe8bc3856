"""tile-opt's input: bytes -> checked text -> split chunks -> parsed modules.

The MLIR wheel is built with assertions and a finite stack, so text reaches
MLIR's parser only after the checks here: it must be UTF-8 (not bytecode), free
of NUL bytes, non-empty, and nested at most `MAX_NESTING` brackets deep (deeper
nesting overflows the parser's stack: a segfault, not an error).  Every
problem is a located `TileIRError`.

Chunks of a `-split-input-file` input are parsed on their own, preceded by as
many newlines as there are lines before them, so that line numbers in
diagnostics are those of the original file.
"""

from __future__ import annotations

import dataclasses
import re
from typing import BinaryIO

from mlir import ir

from tileir.dialect import DIALECT, Diagnostic, TileIRError
from tileir.dialect.diagnostics import from_mlir_error, map_locations

SPLIT_MARKER = "// -----"
MAX_NESTING = 256
BYTECODE_MAGIC = b"ML\xefR"
STDIN_NAME = "<stdin>"
# The buffer name MLIR's `Module.parse` gives to text; we put the real name back.
_MLIR_BUFFER_NAME = "-"


@dataclasses.dataclass(frozen=True)
class Chunk:
    name: str        # the file name shown in diagnostics
    text: str        # the chunk, padded with newlines to its line in the file
    first_line: int  # line of the chunk's first line in the file (1-based)


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------
def read_source(path: str, stdin: BinaryIO, context: ir.Context) -> tuple[str, str]:
    """Reads `path` ("-" for stdin); returns (display name, text)."""
    if path == "-":
        name, data = STDIN_NAME, stdin.read()
    else:
        name = path
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise TileIRError(f"cannot read '{path}': {e.strerror or e}") from None
    return name, decode(data, name, context)


def decode(data: bytes, name: str, context: ir.Context) -> str:
    if data.startswith(BYTECODE_MAGIC):
        raise _error(name, 1, 1, "MLIR bytecode is not supported: tile-opt reads textual IR",
                     context)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = _line_col(data, e.start)
        raise _error(name, line, col, f"the input is not valid UTF-8 (byte 0x{data[e.start]:02x});"
                     f" is it a binary file?", context) from None
    nul = text.find("\0")
    if nul >= 0:
        line, col = _line_col(text, nul)
        raise _error(name, line, col, "the input contains a NUL byte; is it a binary file?",
                     context)
    return text


def _line_col(text: str | bytes, offset: int) -> tuple[int, int]:
    newline = "\n" if isinstance(text, str) else b"\n"
    line = text.count(newline, 0, offset) + 1
    return line, offset - (text.rfind(newline, 0, offset) + 1) + 1


def _error(name: str, line: int, col: int, message: str, context: ir.Context) -> TileIRError:
    return TileIRError([Diagnostic(ir.Location.file(name, line, col, context=context), message)])


# --------------------------------------------------------------------------
# Splitting
# --------------------------------------------------------------------------
def split(name: str, text: str, enabled: bool) -> list[Chunk]:
    """The whole text as one chunk, or the chunks between `// -----` lines."""
    if not enabled:
        return [Chunk(name, text, 1)]
    chunks, current, first = [], [], 1
    for number, line in enumerate(lines(text), start=1):
        if line.startswith(SPLIT_MARKER):
            chunks.append(Chunk(name, "\n" * (first - 1) + "\n".join(current), first))
            current, first = [], number + 1
        else:
            current.append(line)
    chunks.append(Chunk(name, "\n" * (first - 1) + "\n".join(current), first))
    return chunks


def lines(text: str) -> list[str]:
    """The lines of `text` as MLIR counts them: separated by '\n' only.

    (`str.splitlines` also splits at '\r', '\f', '\x1c', ..., which would put
    line numbers out of step with MLIR's diagnostics.)
    """
    return text.split("\n")


# --------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------
# Strings, comments and arrows come first so that their brackets do not count.
_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|->|>=|<=|[({\[<]|[)}\]>]')
_OPENING, _CLOSING = frozenset("({[<"), frozenset(")}]>")


# Unranked tensors and memrefs: not Tile IR, and some of MLIR's own verifiers assert
# (abort the process) on them, e.g. arith.sitofp to tensor<*xf32> (found by the fuzzer).
_UNRANKED = re.compile(r"\b(?:tensor|memref)<\s*\*")
# A dense array attribute of anything but integers or floats: MLIR's parser asserts on
# it (`array<index>`, found by the fuzzer), where it should report an error.
_ARRAY_ATTR = re.compile(r"(?<![\w.!])array<\s*(?!(?:[su]?i\d+|bf16|tf32|f\d+\w*)\s*[:>])")


def check(chunk: Chunk, context: ir.Context) -> None:
    """Rejects chunks MLIR's parser must not see: empty ones, too-deep nesting,
    unranked shaped types and dense arrays of other element types."""
    if all(not line.strip() or line.lstrip().startswith("//") for line in lines(chunk.text)):
        raise _error(chunk.name, chunk.first_line, 1,
                     "nothing to parse: expected operations (e.g. a func.func), found only "
                     "blank lines and comments", context)
    depth = 0
    for token in _TOKENS.finditer(chunk.text):
        symbol = token.group()
        if symbol in _OPENING:
            depth += 1
            if depth > MAX_NESTING:
                line, col = _line_col(chunk.text, token.start())
                raise _error(chunk.name, line, col,
                             f"brackets nested more than {MAX_NESTING} deep; this is not "
                             f"Tile IR (and would overflow the parser's stack)", context)
        elif symbol in _CLOSING:
            depth = max(depth - 1, 0)  # a stray '>' (as in an affine set) must not go below 0
    for number, line in enumerate(lines(chunk.text)):
        code = _STRING.sub(lambda m: " " * len(m.group()), line).split("//", 1)[0]
        m = _UNRANKED.search(code)
        if m:
            raise _error(chunk.name, number + 1, m.start() + 1,
                         "unranked tensor and memref types are not Tile IR (tiles have "
                         "static shapes)", context)
        m = _ARRAY_ATTR.search(code)
        if m:
            raise _error(chunk.name, number + 1, m.start() + 1,
                         "a dense array attribute holds integers or floats (array<i64: 1, "
                         "2>, array<f32: ...>)", context)


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------
def parse(chunk: Chunk, context: ir.Context) -> ir.Module:
    """Parses a checked chunk; raises `TileIRError` located in the original file."""
    check(chunk, context)
    try:
        module = ir.Module.parse(chunk.text, context)
    except ir.MLIRError as e:
        raise TileIRError(_parse_diagnostics(e, chunk, context)) from None
    _rename_locations(module.operation, chunk.name)
    return module


def _parse_diagnostics(err: ir.MLIRError, chunk: Chunk, context: ir.Context) -> list[Diagnostic]:
    if not err.error_diagnostics:
        return [_silent_failure(chunk, context)]
    diagnostics = from_mlir_error(err)
    for d in diagnostics:
        d.location = _renamed(d.location, chunk.name)
        for note in d.notes:
            note.location = _renamed(note.location, chunk.name)
    return diagnostics


_CUSTOM_FORM = re.compile(rf"(?<![\w.!#@%^$\"]){re.escape(DIALECT.namespace)}\.\w+")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _silent_failure(chunk: Chunk, context: ir.Context) -> Diagnostic:
    # MLIR's IRDL dialects reject the custom form of their ops without saying
    # anything, so find the first op written that way ourselves.
    for number, line in enumerate(lines(chunk.text), start=1):
        code = _STRING.sub(lambda m: " " * len(m.group()), line).split("//", 1)[0]
        # Only op names count: `tile.kernel` in an attribute dictionary is fine.
        match = next((m for m in _CUSTOM_FORM.finditer(code) if m.group() in DIALECT.ops), None)
        if match:
            op = match.group()
            loc = ir.Location.file(chunk.name, number, match.start() + 1, context=context)
            return Diagnostic(loc, f"'{op}' must be written in the generic form, e.g. "
                                   f"%r = \"{op}\"(%x) {{attr = ...}} : (operand types) -> "
                                   f"result type (IRDL ops have no custom assembly)")
    loc = ir.Location.file(chunk.name, chunk.first_line, 1, context=context)
    return Diagnostic(loc, "the input could not be parsed (MLIR gave no reason)")


def _renamed(loc: ir.Location | None, name: str) -> ir.Location | None:
    """`loc` with MLIR's buffer name "-" replaced by `name` (through call sites and names)."""
    if loc is None:
        return None
    if loc.is_a_file():
        if loc.filename != _MLIR_BUFFER_NAME:
            return loc
        return ir.Location.file(name, loc.start_line, loc.start_col, context=loc.context)
    if loc.is_a_callsite():
        return ir.Location.callsite(_renamed(loc.callee, name), [_renamed(loc.caller, name)],
                                    context=loc.context)
    if loc.is_a_name():
        return ir.Location.name(loc.name_str, _renamed(loc.child_loc, name),
                                context=loc.context)
    return loc


def _rename_locations(root: ir.Operation, name: str) -> None:
    map_locations(root, lambda loc: _renamed(loc, name))
