"""A tile's layout encoding, whichever of the five kinds: its printed form read back,
checked, and whether the tile lives in registers.

`#tile.blocked` and `#tile.slice` are layouts.py's; `#tile.mma_acc`,
`#tile.mma_operand` and `#tile.shared` are mma_layouts.py's, which builds on
layouts.py's linear forms.  What asks of every kind at once lives here, above both.
"""

from __future__ import annotations

import re

from . import mma_layouts
from .layouts import Blocked, Layout, Slice


def is_distributed(layout) -> bool:
    """Whether tiles with `layout` live in registers (blocked, slice, mma, dot operand)."""
    return layout is not None and not isinstance(layout, mma_layouts.Shared)


_ARR = r"array<i64(?::\s*([-\d,\s]*))?>"
_BLOCKED_RE = re.compile(r"#tile\.blocked<" + r",\s*".join([_ARR] * 4) + r">")
_SLICE_RE = re.compile(r"#tile\.slice<(\d+) : i64, (#tile\.(?:blocked|mma_acc)<.*>)>$")


def _ints(s: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in s.split(",")) if s and s.strip() else ()


def parse(text: str) -> Layout:
    """A layout from its encoding attribute's printed form.

    IRDL attributes expose no parameters to Python (shared/STACK.md), so this
    one function reads the printed form we wrote ourselves.
    """
    text = text.strip()
    m = _SLICE_RE.match(text)
    if m:
        parent = parse(m.group(2))
        if not isinstance(parent, (Blocked, mma_layouts.Mma)):
            raise ValueError(f"malformed layout {text}")
        return Slice(int(m.group(1)), parent)
    m = _BLOCKED_RE.fullmatch(text)
    if not m:
        other = mma_layouts.parse(text)
        if other is None:
            raise ValueError(f"not a tile layout: {text}")
        return other
    return Blocked(*(_ints(g) for g in m.groups()))


def verify(layout: Layout) -> str | None:
    """A message if the layout's parameters are inconsistent, else None."""
    if isinstance(layout, Slice) and not isinstance(layout.parent, Blocked):
        msg = mma_layouts.verify(layout.parent)
        if msg is None and not 0 <= layout.dim < layout.parent.rank:
            msg = f"slice dim {layout.dim} out of range for a rank-{layout.parent.rank} parent"
        return msg
    if not isinstance(layout, (Blocked, Slice)):
        return mma_layouts.verify(layout)
    b = layout.parent if isinstance(layout, Slice) else layout
    r = b.rank
    if not (len(b.size_per_thread) == len(b.threads_per_warp) == len(b.warps_per_block) == r):
        return "blocked layout parameters must all have one entry per dim"
    if sorted(b.order) != list(range(r)):
        return f"order {list(b.order)} is not a permutation of 0..{r - 1}"
    for name, vals in (("size_per_thread", b.size_per_thread),
                       ("threads_per_warp", b.threads_per_warp),
                       ("warps_per_block", b.warps_per_block)):
        if any(v < 1 or v & (v - 1) for v in vals):
            return f"{name} {list(vals)} must be powers of two"
    lanes = 1
    for t in b.threads_per_warp:
        lanes *= t
    if lanes != 32:
        return f"threads_per_warp {list(b.threads_per_warp)} must multiply to 32, not {lanes}"
    if b.num_warps > 32:
        return f"{b.num_warps} warps exceed the 1024-thread block limit"
    if isinstance(layout, Slice) and not 0 <= layout.dim < r:
        return f"slice dim {layout.dim} out of range for a rank-{r} parent"
    return None


def verify_shape(layout: Layout, shape) -> str | None:
    """A message if a well-formed `layout` cannot describe a tile of `shape` (beyond its
    rank): an accumulator's leading unit dims must have extent 1."""
    if isinstance(layout, mma_layouts.Mma) and any(d != 1 for d in shape[:layout.lead]):
        return (f"{layout.attr()} has {layout.lead} leading unit dim(s); the tile's shape "
                f"{list(shape)} does not")
    return None
