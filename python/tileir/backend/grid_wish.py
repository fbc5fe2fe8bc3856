"""What a launch's grid asks of retiling (tileir.backend.retile), without MLIR.

The launcher computes this for every launch of a kernel that may retile, so it
is a few integer operations on the grid and the GPU's SM count:

- "wide:<mask>": the grid has 4 or more blocks per SM, so tiles twice as wide
  still leave 2 or more waves; the mask has bit a set where grid axis a is even
  (only those axes can be coarsened without covering tiles the grid does not);
- "narrow:<s>": the grid has at most one block for every two SMs; tiles up to s
  times narrower (s = 2 or 4, the most that keeps one block per SM: the loop of
  such a grid waits on memory, and its ring takes as many stages as one block's
  shared memory holds);
- None: the grid fills the GPU as written.
"""

from __future__ import annotations

from typing import Sequence


def grid_wish(grid: Sequence[int], sm_count: int) -> str | None:
    if sm_count < 1:
        return None
    total = grid[0] * grid[1] * grid[2]
    if total >= 4 * sm_count:
        mask = sum(1 << a for a in range(3) if grid[a] % 2 == 0)
        return f"wide:{mask}" if mask else None
    if 2 * total <= sm_count:
        s = 2
        while s < 4 and total * s * 2 <= sm_count:
            s *= 2
        return f"narrow:{s}"
    return None
