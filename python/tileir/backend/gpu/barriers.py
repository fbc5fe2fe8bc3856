"""The named barriers of a block (16 on sm_80 and sm_90): which ids each lowering takes.

0 is the block's (`bar.sync 0`), 1 the consumer warps' (LoweringContext.barrier); from
GROUP_BARRIER_BASE, one a group of the TMA store's warp groups (two warps or more each,
num_warps // 2 ids at most: tma_store.py); then the consumer warpgroups' two turns
(`tile.turn`, rules/control.py: warpgroup w waits on the turn barrier of w, the other
arrives on it); then the owner warpgroup's hand-offs, empty and full (owner_runs.py)."""

from __future__ import annotations

NAMED_BARRIERS = 16
GROUP_BARRIER_BASE = 2       # named barriers 2, 3, ...: one per group (1 is the consumers')


def turn_barrier(num_warps: int) -> int:
    """The first of the two turn barriers of a kernel of `num_warps` consumer warps."""
    return GROUP_BARRIER_BASE + num_warps // 2


def handoff_barriers(num_warps: int) -> tuple[int, int]:
    """(empty, full): the owner warpgroup's hand-off barriers, after the turns."""
    base = turn_barrier(num_warps) + 2
    return base, base + 1
