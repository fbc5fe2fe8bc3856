"""Thread-block clusters: `tile.cluster_gather`, with a cluster's blocks run side by side.

The interpreter runs a grid's blocks one after another, but a gather needs every
block of its cluster to have reached it.  So a kernel with a `tile.cluster`
attribute (passes/cluster_rows.py) runs each cluster's blocks in threads of their
own (clusters still one after another), each with its own frame and `Launch`, and
a gather is an exchange between them: every block posts its operands, waits for
the others, reads all of them stacked by rank, and waits again so that no block
posts the next round before all have read this one.  A block that fails breaks
the exchange, and so does a block that ends without reaching a gather the others
wait at: the cluster stops with an error instead of hanging.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading

import numpy as np

from .compiler import LAUNCH_SLOT, CompileContext, Step, execute, rule
from .errors import Fault

_KEYS = itertools.count()          # one exchange slot per gather op compiled


class ClusterExchange:
    """What the blocks of one cluster share: a barrier and the posted operands.

    The barrier counts the blocks that arrive; a block that waits while another has
    already ended, or failed, can never be released (on the GPU: a hang), so its wait
    ends in an error instead."""

    def __init__(self, size: int):
        self.size = size
        self.posted: dict[int, list] = {}
        self._cv = threading.Condition()
        self._arrived = 0
        self._round = 0
        self._ended = 0
        self._failed = False

    def exchange(self, key: int, rank: int, values: list[np.ndarray]) -> list[np.ndarray]:
        self.posted.setdefault(key, [None] * self.size)[rank] = values
        self._wait()
        slots = self.posted[key]
        out = [np.stack([slots[r][i] for r in range(self.size)]) for i in range(len(values))]
        self._wait()
        return out

    def end(self, failed: bool = False) -> None:
        """A block of the cluster left the kernel (or stopped with an error)."""
        with self._cv:
            self._ended += 1
            self._failed |= failed
            self._cv.notify_all()

    def _wait(self) -> None:
        with self._cv:
            this = self._round
            self._arrived += 1
            if self._arrived == self.size:
                self._arrived, self._round = 0, self._round + 1
                self._cv.notify_all()
                return
            while self._round == this:
                if self._failed:
                    raise Fault("another block of the cluster stopped before this gather")
                if self._ended:
                    raise Fault(f"a block of the cluster of {self.size} ended without reaching "
                                f"this gather (on the GPU the cluster would hang)")
                self._cv.wait(0.05)


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
            exchange.end(failed=True)
        else:
            exchange.end()

    threads = [threading.Thread(target=block, args=(bid,), daemon=True) for bid in blocks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        first = [e for e in errors if "another block of the cluster" not in str(e)
                 and "ended without reaching" not in str(e)] or \
            [e for e in errors if "ended without reaching" in str(e)]
        raise (first or errors)[0]
