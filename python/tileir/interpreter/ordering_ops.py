"""`tile.fence`: the interpreter runs one block at a time, every access in program
order, so every order cuTile names holds already; a fence does nothing here.  (A
relaxed `tile.load` / `tile.store` is a plain one for the same reason.)"""

from __future__ import annotations

from .compiler import CompileContext, Step, rule


@rule("tile.fence")
def _fence(op, cx: CompileContext) -> Step:
    def step(frame):
        return None
    return step
