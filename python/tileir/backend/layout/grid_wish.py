"""What a launch asks of retiling (tileir.backend.layout.retile), without MLIR.

The launcher computes this for every launch of a kernel that may retile, so it
is a few integer operations on the grid, the GPU's SM count and the arrays'
shapes.  A wish is items joined by ';':

- "wide:<mask>": the grid has 4 or more blocks per SM, so tiles twice as wide
  still leave 2 or more waves; the mask has bit a set where grid axis a is even
  (only those axes can be coarsened without covering tiles the grid does not);
- "narrow:<s>": the grid has at most one block for every two SMs; tiles up to s
  times narrower (s = 2 or 4, the most that keeps one block per SM: the loop of
  such a grid waits on memory, and its ring takes as many stages as one block's
  shared memory holds);
- "short:<name>.<dim>,...": the array arguments' dims of at most SHORT elements
  (a decode GEMM's 1 to 64 rows): a tile longer than that along such a dim covers
  the whole array there, so the compiler may shrink it to SHORT without changing
  the grid.  Any extent up to SHORT gives the same item, so decode batches of 1 to
  64 rows share one compiled variant.

None when there is nothing to ask: the grid fills the GPU as written and no array
is short.

Kernels without products ask `split_wish` instead (tileir.backend.layout.split):
"split:<s>;free:<mask>" for a grid of at most one block for every two SMs, where
`s` (a power of two, at most MAX_SPLIT) blocks per block keep the grid within the
GPU and the mask has bit a set where grid axis a is 1 (an axis the split may use);
"free:<mask>" alone for a larger grid with such an axis (passes/cluster_rows.py may
deal a re-reading kernel's rows to clusters along it); and ";swap:1" where grid axes
0 and 1 may trade places (passes/launch_order.py: both longer than 1, axis 0 within
axis 1's limit).
"""

from __future__ import annotations

from typing import Sequence

SHORT = 64        # the rows of one warpgroup's wgmma: tiles shrink to this, not below
MAX_SPLIT = 64    # blocks one block of an element-wise kernel may become
MAX_GRID_Y = 65535    # the hardware's limit of grid axes 1 and 2


def grid_wish(grid: Sequence[int], sm_count: int,
              short: Sequence[str] = ()) -> str | None:
    items = []
    total = grid[0] * grid[1] * grid[2]
    if sm_count >= 1 and total >= 4 * sm_count:
        mask = sum(1 << a for a in range(3) if grid[a] % 2 == 0)
        if mask:
            items.append(f"wide:{mask}")
    elif sm_count >= 1 and 2 * total <= sm_count:
        s = 2
        while s < 4 and total * s * 2 <= sm_count:
            s *= 2
        items.append(f"narrow:{s}")
    if short:
        items.append("short:" + ",".join(short))
    return ";".join(items) or None


def split_wish(grid: Sequence[int], sm_count: int) -> str | None:
    total = grid[0] * grid[1] * grid[2]
    free = sum(1 << a for a in range(3) if grid[a] == 1)
    # axes 0 and 1 may trade places (passes/launch_order.py): both longer than 1, and
    # axis 0 within the limit of axis 1
    swap = ";swap:1" if grid[0] > 1 and 1 < grid[1] and grid[0] <= MAX_GRID_Y else ""
    if sm_count < 1 or not (free or swap):
        return None
    free_item = f";free:{free}" if free else ""
    if 2 * total > sm_count or not free:
        return (free_item + swap)[1:]
    s = 2
    while s < MAX_SPLIT and total * s * 2 <= sm_count:
        s *= 2
    return f"split:{s}{free_item}{swap}"


def short_dims(names: Sequence[str], shapes: Sequence[Sequence[int] | None]) -> list[str]:
    """"<name>.<dim>" for each dim of at most SHORT elements (and at least 1) of the
    array arguments (`shapes[i]` is None for a non-array argument)."""
    out = []
    for name, shape in zip(names, shapes):
        if shape is not None:
            out.extend(f"{name}.{d}" for d, n in enumerate(shape) if 1 <= n <= SHORT)
    return out


_INT_ITEMS = ("wide", "narrow", "split", "free", "swap")


def parse(wish: str | None) -> dict[str, str]:
    """{"wide" | "narrow" | "short" | "split" | "free" | "swap": argument} of a wish string;
    ValueError naming the item for one that is unknown or malformed (a wish written
    by hand into IR)."""
    out = {}
    for item in (wish or "").split(";"):
        if item:
            kind, _, arg = item.partition(":")
            if kind not in _INT_ITEMS + ("short",):
                raise ValueError(f"unknown grid wish item '{item}'")
            if kind in _INT_ITEMS and not (arg.isdigit() and 0 < int(arg) < 1 << 16):
                raise ValueError(f"grid wish item '{item}' needs a positive int")
            out[kind] = arg
    return out
