"""Shared memory as a budget the compiler spends, not a limit the user meets.

The `pipeline` stage picks a ring depth from what it can count (the ring's tiles,
the shared tiles its loop holds), but the `gpu` stage adds what only lowering
knows: exchanges between register layouts, operands staged for the tensor cores,
an epilogue's store buffers.  When lowering finds the total past the block's
limit it raises `SharedMemoryOverflow` with the numbers; the stage driver
(`tileir.passes.run_stages`) then rewinds to the module as it was before the
`pipeline` stage, caps the rings' depth on the kernel (`tile.stage_cap`) by as
many stages as the overflow takes, and runs `pipeline` and `gpu` again:

    4 stages x 48 KiB + 81 KiB beside the ring = 273 KiB > 227 KiB
      -> cap 3: 3 x 48 KiB + 81 KiB = 225 KiB, fits

When even two stages do not fit, the K tiles become 2, then 4 times shorter
(`tile.k_split`, applied by tile-retile-blocks in the `layout` stage, which the
driver then reruns too); last, a cap of 1 leaves the loop without a ring (its
shared tiles are copied in each iteration by the threads: slower, but it runs;
they are freed after the loop, so an epilogue's exchange reuses them: attention
at D = 256 with 128 x 128 tiles, 192 KiB).  What was chosen and why
is the module attribute `tile.fit`, in every later stage's IR (TILEIR_DUMP_IR),
`tile-opt`'s remarks and the kernel's metadata (`meta["fit"]`).  Only when no
depth fits (an overflow beside a ring-less kernel) is the kernel refused, with
the numbers and the knobs that change them.
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from tileir.dialect import TileIRError

from .mma_layouts import smem_tile_bytes

STAGE_CAP_ATTR = "tile.stage_cap"      # on the kernel: the most stages any ring may take
K_SPLIT_ATTR = "tile.k_split"          # on the kernel: K tiles this many times shorter
FIT_ATTR = "tile.fit"                  # on the module: what the budget chose, in words


class SharedMemoryOverflow(TileIRError):
    """A kernel whose lowering needs more shared memory than a block has."""

    def __init__(self, name: str, needed: int, limit: int, chip: str, loc=None):
        self.kernel, self.needed, self.limit, self.chip = name, needed, limit, chip
        self.loc = loc
        super().__init__(f"kernel '{name}' needs {needed} bytes of shared memory a block; "
                         f"{chip} has {limit}", loc)


@dataclasses.dataclass(frozen=True)
class RingPlan:
    """One ring the `pipeline` stage made: its depth and the bytes of one stage."""

    stages: int
    stage_bytes: int


def rings_of(module: ir.Module) -> list[RingPlan]:
    """The rings of a pipelined module, in walk order."""
    from tileir.dialect.layout import tile_layout
    found: list[RingPlan] = []

    def visit(op):
        if op.name == "tile.ring_alloc":
            view = op.opview
            per = sum(-(-smem_tile_bytes(tile_layout(t), tuple(t.shape), t.element_type)
                        // 1024) * 1024 for t in view.tiles)
            found.append(RingPlan(view.stages, per))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


MAX_K_SPLIT = 4               # K tiles at most this many times shorter


class Budget:
    """The choices tried for one kernel, most preferred first:

    1. shallower rings, down to 2 stages (`tile.stage_cap`): fewer copies in flight;
    2. K tiles 2, then 4 times shorter (`tile.k_split`, rings as deep as they fit
       again): the same bytes in flight in smaller slots, more trips;
    3. no ring (`tile.stage_cap` 1): the threads copy each iteration's tiles.

    `next` answers an overflow with the stage to rewind to and the kernel
    attributes to set, or None when nothing is left to try."""

    def __init__(self):
        self.rings: list[RingPlan] = []
        self.cap: int | None = None
        self.split = 1
        self.split_helps = True
        self.slot_before_split: int | None = None
        self.notes: list[str] = []

    def pipelined(self, rings: list[RingPlan]) -> None:
        """The rings the `pipeline` stage just made."""
        if self.slot_before_split is not None:
            # a split that left the slots as they were could not shorten the K tiles
            self.split_helps = _largest_slot(rings) < self.slot_before_split
            self.slot_before_split = None
        self.rings = rings

    def next(self, overflow: SharedMemoryOverflow, can_relayout: bool
             ) -> tuple[str, dict[str, int]] | None:
        if not self.rings:
            return None
        deepest = max(self.rings, key=lambda r: r.stages * r.stage_bytes)
        excess = overflow.needed - overflow.limit
        cap = deepest.stages - max(1, -(-excess // max(1, deepest.stage_bytes)))
        if cap >= 2:
            choice = ("pipeline", {STAGE_CAP_ATTR: cap}, f"{cap} stages")
        elif can_relayout and self.split_helps and self.split < MAX_K_SPLIT:
            self.split *= 2
            self.slot_before_split = _largest_slot(self.rings)
            choice = ("layout", {K_SPLIT_ATTR: self.split},
                      f"K tiles {self.split} times shorter")
        elif deepest.stages > 1:
            cap = 1
            choice = ("pipeline", {STAGE_CAP_ATTR: 1, K_SPLIT_ATTR: self.split},
                      "no ring (the threads copy each iteration's tiles)")
        else:
            return None
        beside = max(0, overflow.needed - deepest.stages * deepest.stage_bytes)
        self.notes.append(f"{overflow.chip}: a ring of {deepest.stages} x "
                          f"{deepest.stage_bytes} B with {beside} B beside it needs "
                          f"{overflow.needed} B of shared memory, over the block's "
                          f"{overflow.limit}: {choice[2]}")
        return choice[0], choice[1]


def _largest_slot(rings: list[RingPlan]) -> int:
    return max((r.stage_bytes for r in rings), default=0)


def refusal(overflow: SharedMemoryOverflow, rings: list[RingPlan], notes: list[str]) -> str:
    """The message of a kernel no choice fits: the numbers, and the knobs."""
    tried = "; ".join(notes)
    what = "without a ring" if rings == [] or all(r.stages <= 1 for r in rings) else \
        f"with rings of {', '.join(f'{r.stages} x {r.stage_bytes} B' for r in rings)}"
    return (f"kernel '{overflow.kernel}' needs {overflow.needed} bytes of shared memory "
            f"a block {what}; {overflow.chip} has {overflow.limit}"
            + (f" (tried: {tried})" if tried else "") +
            ": use smaller tiles (the shape= of the loads and of the tiles the loop "
            "carries), or fewer num_warps")
