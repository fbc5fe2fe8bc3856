"""Thread-block clusters: `tile.cluster_gather`, with a cluster's blocks run side by side.

The interpreter runs a grid's blocks one after another, but a gather needs every
block of its cluster to have reached it.  So a kernel with a `tile.cluster`
attribute (passes/cluster_rows.py) runs each cluster's blocks in threads of their
own (clusters still one after another), each with its own frame and `Launch`, and
a gather is an exchange between them: every block posts its operands, waits for
the others, reads all of them stacked by rank, and waits again so that no block
posts the next round before all have read this one.  A block that fails breaks
the barrier, so its cluster stops instead of hanging, and the failure is reported.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading

import numpy as np

from .compiler import LAUNCH_SLOT, CompileContext, Step, execute, rule
from .errors import Fault

# A gather waits this long for the rest of its cluster: far longer than any block
# takes to reach it, short enough that a kernel whose blocks cannot all get there
# (a gather under control flow that differs between blocks) ends in an error.
WAIT_SECONDS = 600.0

_KEYS = itertools.count()          # one exchange slot per gather op compiled


class ClusterExchange:
    """What the blocks of one cluster share: a barrier and the posted operands."""

    def __init__(self, size: int):
        self.size = size
        self.barrier = threading.Barrier(size)
        self.posted: dict[int, list] = {}

    def exchange(self, key: int, rank: int, values: list[np.ndarray]) -> list[np.ndarray]:
        self.posted.setdefault(key, [None] * self.size)[rank] = values
        self._wait()
        slots = self.posted[key]
        out = [np.stack([slots[r][i] for r in range(self.size)]) for i in range(len(values))]
        self._wait()
        return out

    def _wait(self) -> None:
        try:
            self.barrier.wait(WAIT_SECONDS)
        except threading.BrokenBarrierError:
            raise Fault("another block of the cluster stopped before this gather (or the "
                        f"cluster's {self.size} blocks did not all reach it)") from None


@rule("tile.cluster_gather")
def _cluster_gather(op, cx: CompileContext) -> Step:
    ins = cx.slots(op.values)
    outs = cx.define_all(op.gathered)
    axis, size = op.axis, op.size
    key = next(_KEYS)

    def step(frame):
        launch = frame[LAUNCH_SLOT]
        if launch.cluster is None or launch.cluster.size != size:
            raise Fault(f"a gather over clusters of {size} blocks along grid axis {axis} in a "
                        f"launch without such clusters (the kernel's tile.cluster attribute "
                        f"sets them)")
        rank = int(launch.bid[axis]) % size
        got = launch.cluster.exchange(key, rank, [np.asarray(frame[s]) for s in ins])
        for o, v in zip(outs, got):
            frame[o] = v
    return step


def run_clusters(body, frame, launch, grid: tuple[int, int, int],
                 dims: tuple[int, int, int]) -> None:
    """Runs every block of `grid`, the blocks of each cluster of shape `dims` at once."""
    for cz in range(0, grid[2], dims[2]):
        for cy in range(0, grid[1], dims[1]):
            for cx_ in range(0, grid[0], dims[0]):
                blocks = [(cx_ + x, cy + y, cz + z) for z in range(dims[2])
                          for y in range(dims[1]) for x in range(dims[0])]
                _run_cluster(body, frame, launch, blocks)


def _run_cluster(body, frame, launch, blocks) -> None:
    exchange = ClusterExchange(len(blocks))
    errors: list[BaseException] = []

    def block(bid):
        own = dataclasses.replace(launch, bid=tuple(np.int32(b) for b in bid), cluster=exchange)
        mine = list(frame)
        mine[LAUNCH_SLOT] = own
        try:
            with np.errstate(all="ignore"):
                execute(body, mine)
        except BaseException as e:          # reported below, after the others stop
            errors.append(e)
            exchange.barrier.abort()

    threads = [threading.Thread(target=block, args=(bid,), daemon=True) for bid in blocks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        first = [e for e in errors if "another block of the cluster" not in str(e)]
        raise (first or errors)[0]
