"""Rules for the `pipeline` stage's ops: rings of stages, async loads, async products.

The interpreter runs a block's ops in program order, so an asynchronous copy is
done when it is issued and a started product is finished at once; what it adds
is a check of the ring *protocol* the GPU relies on (dialect/ring.py), per slot:

* the n-th `ring_acquire` of a slot waits with parity `(n % 2) ^ 1` and comes
  after the slot's (n-1)-th use was released;
* the n-th `ring_wait` waits with parity `n % 2`, after the slot's n-th acquire;
* `ring_view` reads a slot that was waited for and not released since, and a
  buffer that was loaded for that use;
* `ring_release` releases a use that was waited for.

A violation is a located error: on the GPU it would be a hang or a race.  So
running pipeline-stage IR here checks `tile-pipeline-loops` without a GPU.
"""

from __future__ import annotations

from .compiler import CompileContext, Step, pure, rule
from .dtypes import elem_of
from .errors import Fault
from .tile_ops import _load_tile, _mma_fn


class _Ring:
    def __init__(self, stages: int, buffers: int):
        self.stages = stages
        self.data = [[None] * buffers for _ in range(stages)]
        self.loaded = [[-1] * buffers for _ in range(stages)]   # use each buffer holds
        self.acquired = [0] * stages
        self.waited = [0] * stages
        self.released = [0] * stages

    def slot(self, s) -> int:
        s = int(s)
        if not 0 <= s < self.stages:
            raise Fault(f"slot {s} out of range for a ring of {self.stages} stages")
        return s


@rule("tile.ring_alloc")
def _ring_alloc(op, cx: CompileContext) -> Step:
    out = cx.define(op.result)
    stages, buffers = op.stages, len(op.tiles)

    def step(frame):
        frame[out] = _Ring(stages, buffers)
    return step


@rule("tile.ring_acquire")
def _ring_acquire(op, cx: CompileContext) -> Step:
    ring_slot, s_slot, p_slot, pred_slot = cx.slots(op.operands)

    def step(frame):
        if not frame[pred_slot]:
            return
        ring = frame[ring_slot]
        s = ring.slot(frame[s_slot])
        n = ring.acquired[s]
        want = (n % 2) ^ 1
        if int(frame[p_slot]) != want:
            raise Fault(f"acquire #{n} of slot {s} waits for parity {int(frame[p_slot])}, "
                        f"but the release it needs completes parity {want}")
        if ring.released[s] < n:
            raise Fault(f"acquire #{n} of slot {s} before use #{n - 1} was released "
                        f"(the producer would overwrite tiles still being read)")
        ring.acquired[s] = n + 1
    return step


@rule("tile.ring_load")
def _ring_load(op, cx: CompileContext) -> Step:
    t = op.tile_type()
    load = _load_tile(elem_of(t), tuple(t.shape), "zero", op.array.type)
    ring_slot, s_slot, pred_slot, array_slot = cx.slots(list(op.operands)[:4])
    index_slots = cx.slots(op.index)
    buffer = op.buffer

    def step(frame):
        if not frame[pred_slot]:
            return
        ring = frame[ring_slot]
        s = ring.slot(frame[s_slot])
        use = ring.acquired[s] - 1
        if use < ring.waited[s]:
            raise Fault(f"load into slot {s} without an acquire for its next use")
        ring.data[s][buffer] = load(frame[array_slot], [frame[i] for i in index_slots])
        ring.loaded[s][buffer] = use
    return step


@rule("tile.ring_commit", "tile.ring_free")
def _ring_no_data(op, cx: CompileContext) -> Step:
    return lambda frame: None


@rule("tile.prefetch_l2")
def _prefetch_l2(op, cx: CompileContext) -> Step:
    """A hint to the L2 cache: here memory has no caches."""
    return lambda frame: None


@rule("tile.ring_wait")
def _ring_wait(op, cx: CompileContext) -> Step:
    ring_slot, s_slot, p_slot = cx.slots(op.operands)

    def step(frame):
        ring = frame[ring_slot]
        s = ring.slot(frame[s_slot])
        n = ring.waited[s]
        if int(frame[p_slot]) != n % 2:
            raise Fault(f"wait #{n} of slot {s} for parity {int(frame[p_slot])}; its loads "
                        f"complete parity {n % 2}")
        if ring.acquired[s] <= n:
            raise Fault(f"wait #{n} of slot {s} for loads never issued (the GPU would hang)")
        ring.waited[s] = n + 1
    return step


@rule("tile.ring_view")
def _ring_view(op, cx: CompileContext) -> Step:
    ring_slot, s_slot = cx.slots(op.operands)
    out = cx.define(op.result)
    buffer = op.buffer

    def step(frame):
        ring = frame[ring_slot]
        s = ring.slot(frame[s_slot])
        use = ring.waited[s] - 1
        if use < ring.released[s]:
            raise Fault(f"view of slot {s} outside a wait ... release window")
        if ring.loaded[s][buffer] != use:
            raise Fault(f"view of buffer {buffer} of slot {s}: not loaded for use #{use}")
        frame[out] = ring.data[s][buffer]
    return step


@rule("tile.ring_release")
def _ring_release(op, cx: CompileContext) -> Step:
    ring_slot, s_slot, pred_slot = cx.slots(op.operands)

    def step(frame):
        if not frame[pred_slot]:
            return
        ring = frame[ring_slot]
        s = ring.slot(frame[s_slot])
        if ring.released[s] >= ring.waited[s]:
            raise Fault(f"release of slot {s} that has no waited use to release")
        ring.released[s] += 1
    return step


@rule("tile.is_producer")
def _is_producer(op, cx: CompileContext) -> Step:
    def step(frame):
        raise Fault("a warp-specialized kernel runs its producer and consumer warps at once, "
                    "each waiting on the other; the interpreter runs one sequence of ops per "
                    "block. Interpret it before the pipeline stage (TILEIR_LAUNCH_STAGE="
                    "layout), or run its gpu stage in tileir.sim")
    return step


@rule("tile.set_max_registers")
def _set_max_registers(op, cx: CompileContext) -> Step:
    return lambda frame: None            # registers are the GPU's concern


@rule("tile.turn")
def _turn(op, cx: CompileContext) -> Step:
    """The consumer warpgroups' turns at the tensor cores order when products are
    issued, not what they compute; only warp-specialized code holds them (its
    tile.is_producer faults here first)."""
    return lambda frame: None


@rule("tile.mma_async")
def _mma_async(op, cx: CompileContext) -> Step:
    return pure(op, cx, _mma_fn(op))


@rule("tile.mma_wait")
def _mma_wait(op, cx: CompileContext) -> Step:
    return pure(op, cx, lambda x: x)

