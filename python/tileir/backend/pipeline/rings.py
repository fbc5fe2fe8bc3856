"""What a ring of tile-pipeline-loops (dialect/ring.py) may copy and hold.

The pipeliner (software_pipeline.py) builds the rings; the passes before it ask the
same questions of the kernel: cluster pairs share only the loads a ring copies
(`async_capable`), and a persistent kernel's rings across tiles (persistent.py) take
the same stage limits and producer warps as a ring inside one tile.
"""

from __future__ import annotations

from mlir import ir

from tileir.dialect.layout import tile_layout
from tileir.dialect.types import bitwidth
from tileir.dialect.verifier import arg_has
from tileir.backend.layout.mma_layouts import TMA_MAX_BOX, Shared

PRODUCER_WARPS_ATTR = "tile.producer_warps"
PRODUCER_WARPS = 4            # one warpgroup: setmaxnreg works per warpgroup
PRODUCER_REGISTERS = 40
MAX_DEFAULT_STAGES = 4
# A launch whose grid gives at most one block to every two SMs (the launcher's
# "narrow" grid wish, tileir.backend.layout.grid_wish): one block per SM, and a loop that
# waits on memory, so the ring takes all the stages one block's shared memory holds.
MAX_SMALL_GRID_STAGES = 8
ASYNC_PADDINGS = ("zero", "undetermined")


def async_capable(func: ir.Operation, chip: str, load: ir.Operation) -> bool:
    """Whether `chip` can copy `load`'s tile asynchronously (TMA on sm_90a, cp.async on
    sm_80): a shared-memory tile of an aligned kernel argument, zero padding."""
    t = load.results[0].type
    lay = tile_layout(t)
    if not isinstance(lay, Shared):
        return False
    if ir.StringAttr(load.attributes["padding"]).value not in ASYNC_PADDINGS:
        return False
    array = load.operands[0]
    if not isinstance(array.owner, ir.Block) or array.owner != func.regions[0].blocks[0]:
        return False
    if not arg_has(func, array.arg_number, "tile.aligned"):
        return False
    eb = max(1, bitwidth(t.element_type) // 8)
    inner = t.shape[-1] * eb
    if lay.order[0] != t.rank - 1 or inner < 16:
        return False
    if chip.startswith("sm_90"):
        # TMA: boxes of at most 256 per dim, the fastest dim one swizzle row (or <=
        # 256 elements unswizzled), elements of 1, 2, 4 or 8 bytes
        box_inner = lay.box_elems(tuple(t.shape), eb)
        return all(d <= TMA_MAX_BOX for d in t.shape[:-1]) and box_inner <= TMA_MAX_BOX
    return inner % 16 == 0           # cp.async: 16-byte chunks
