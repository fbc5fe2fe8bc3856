"""The source of a kernel or helper: its AST, file positions and global names."""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from typing import Any

from ..errors import TileSyntaxError


class SourceInfo:
    """Parses a Python function once and maps AST nodes back to the user's file."""

    def __init__(self, fn):
        self.fn = fn
        try:
            lines, first = inspect.getsourcelines(fn)
            self.filename = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            raise TileSyntaxError(f"cannot read the source of '{fn.__qualname__}' ({e}); tile "
                                  f"kernels must be defined in a file") from None
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        # Columns in the dedented text are shifted by the removed indentation.
        self.indent = len(lines[0]) - len(lines[0].lstrip()) if dedented != text else 0
        self.first_line = first
        tree = ast.parse(dedented)
        fdefs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not fdefs or isinstance(fdefs[0], ast.AsyncFunctionDef):
            raise TileSyntaxError(f"'{fn.__qualname__}' is not a plain function definition")
        self.tree: ast.FunctionDef = fdefs[0]
        self.text = text
        closure = inspect.getclosurevars(fn)
        self.nonlocals = dict(closure.nonlocals)
        self.globals = fn.__globals__

    def position(self, node: ast.AST) -> tuple[int, int]:
        """1-based (line, column) of `node` in the user's file."""
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        return self.first_line + line - 1, col + self.indent + 1

    def resolve_global(self, name: str) -> tuple[bool, Any]:
        if name in self.nonlocals:
            return True, self.nonlocals[name]
        if name in self.globals:
            return True, self.globals[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None
