"""`--verify-diagnostics`: check produced diagnostics against `expected-*` comments.

The comment syntax is MLIR's:

    // expected-error {{text}}          on this line
    // expected-error @+1 {{text}}      on the next line (@-2, @above, @below too)
    // expected-note  {{text}}

`text` must be a substring of the diagnostic's message.  Every error and
warning produced must be expected, and every expectation must be met; notes are
checked only when expected (MLIR attaches "see current operation" notes that
tests should not have to spell out).
"""

from __future__ import annotations

import dataclasses
import re

from mlir import ir

from tileir.dialect import Diagnostic
from tileir.dialect.diagnostics import file_line_col

from .source import Chunk, lines

_EXPECTED = re.compile(
    r"expected-(?P<severity>error|warning|note|remark)\s*"
    r"(?:@(?P<offset>[+-]\d+|above|below))?\s*\{\{(?P<text>.*?)\}\}")


@dataclasses.dataclass
class Expectation:
    severity: str
    line: int            # where the diagnostic is expected
    comment_line: int    # where the expectation is written
    column: int
    text: str
    met: bool = False


def expectations(chunk: Chunk) -> list[Expectation]:
    found = []
    for number, line in enumerate(lines(chunk.text), start=1):
        for m in _EXPECTED.finditer(line):
            found.append(Expectation(m.group("severity"), _target_line(number, m.group("offset")),
                                     number, m.start() + 1, m.group("text")))
    return found


def _target_line(line: int, offset: str | None) -> int:
    if offset is None:
        return line
    if offset in ("above", "below"):
        return line - 1 if offset == "above" else line + 1
    return line + int(offset)


def check(chunk: Chunk, produced: list[Diagnostic], context: ir.Context) -> list[Diagnostic]:
    """Diagnostics describing every mismatch (empty when the chunk passes)."""
    expected = expectations(chunk)
    problems = []
    for diagnostic in _flatten(produced):
        if _meet(diagnostic, expected):
            continue
        if diagnostic.severity != "note":
            problems.append(Diagnostic(diagnostic.location,
                                       f"unexpected {diagnostic.severity}: {diagnostic.message}"))
    for e in expected:
        if not e.met:
            where = ir.Location.file(chunk.name, e.comment_line, e.column, context=context)
            problems.append(Diagnostic(where, f"expected {e.severity} \"{e.text}\" was not "
                                              f"produced"))
    return problems


def _flatten(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    flat = []
    for d in diagnostics:
        flat.append(d)
        flat.extend(d.notes)
    return flat


def _meet(diagnostic: Diagnostic, expected: list[Expectation]) -> bool:
    where = file_line_col(diagnostic.location)
    line = where[1] if where else None
    for e in expected:
        if not e.met and e.severity == diagnostic.severity and e.line == line and \
                e.text in diagnostic.message:
            e.met = True
            return True
    return False
