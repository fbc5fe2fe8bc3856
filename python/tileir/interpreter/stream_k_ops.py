"""Stream-K partial sums (dialect/stream_k.py): a workspace of the launch's own.

`tile.partial_store` posts the block's tile in a slot of the launch, and
`tile.partial_add` takes it out and adds it.  The interpreter runs one block at a
time, so a slot must be filled before the block that adds it runs; one that is not
is an error (on the GPU that block would wait for it forever, or for a block that
never runs).  The interpreter runs the user's grid, one tile a block, where
stream-K never splits a tile: these run for IR written or rewritten by hand.
"""

from __future__ import annotations

import numpy as np

from .compiler import LAUNCH_SLOT, CompileContext, Step, rule
from .errors import Fault


@rule("tile.partial_store")
def _partial_store(op, cx: CompileContext) -> Step:
    acc, slot, pred = cx.slots(list(op.operands))

    def step(frame):
        if frame[pred]:
            posted = frame[LAUNCH_SLOT].partials
            key = int(frame[slot])
            if key in posted:
                raise Fault(f"stream-K slot {key} written twice in one launch")
            posted[key] = np.array(frame[acc], np.float32)
    return step


@rule("tile.partial_add")
def _partial_add(op, cx: CompileContext) -> Step:
    acc, slot, pred = cx.slots(list(op.operands))
    out = cx.define(op.results[0])

    def step(frame):
        if not frame[pred]:
            frame[out] = frame[acc]
            return
        key = int(frame[slot])
        part = frame[LAUNCH_SLOT].partials.pop(key, None)
        if part is None:
            raise Fault(f"stream-K slot {key} is added before any block wrote it (on the GPU "
                        f"this block would wait for it forever)")
        frame[out] = (np.asarray(frame[acc], np.float32) + part).astype(np.float32)
    return step
