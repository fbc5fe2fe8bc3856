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
PRODUCER_REGISTERS = 40       # what the producer keeps when the consumers' share allows
PRODUCER_REGISTERS_MIN = 24   # setmaxnreg's least
REGISTER_FILE = 65536         # 32-bit registers of an SM, and so of a block's launch
MAX_THREAD_REGISTERS = 240    # the consumers' most (a thread addresses 255; FA3's most)
MAX_DEFAULT_STAGES = 4
# A launch whose grid gives at most one block to every two SMs (the launcher's
# "narrow" grid wish, tileir.backend.layout.grid_wish): one block per SM, and a loop that
# waits on memory, so the ring takes all the stages one block's shared memory holds.
MAX_SMALL_GRID_STAGES = 8
ASYNC_PADDINGS = ("zero", "undetermined")


def launch_registers(threads: int) -> int:
    """The registers a thread of a kernel with `setmaxnreg` launches with: ptxas gives
    such a kernel the most its `.maxntid` threads can have in one SM's register file, in
    the allocation's steps of 8 (384 threads: 168; 640: 96)."""
    return min(255, REGISTER_FILE // threads) // 8 * 8


def register_shares(warps: int) -> tuple[int, int]:
    """(producer, consumers): the `setmaxnreg` counts of a block of one producer
    warpgroup and `warps` consumer warps, balanced so that they can be met.

    The registers a `setmaxnreg.dec` releases go to a pool of the block's own, and a
    `setmaxnreg.inc` waits until the pool holds what it asks (PTX ISA, setmaxnreg):
    the consumers may grow only by what the producer gave back, never into the SM's
    free registers.  Asking more hangs the block for good.  The consumers' count is
    the register file split between them once the producer keeps PRODUCER_REGISTERS
    (at most MAX_THREAD_REGISTERS); the producer then keeps the most of 40, 32, 24
    whose release pays for it, and where even 24 does not, the consumers take what 24
    releases.  384 threads (two consumer warpgroups): 40 and 232, launched at 168 (the
    pool exactly spent); 640 (four): 32 and 112, launched at 96 (40 would release 7 168
    registers for the consumers' 8 192)."""
    producer_threads, consumer_threads = 32 * PRODUCER_WARPS, 32 * warps
    launch = launch_registers(producer_threads + consumer_threads)
    want = (REGISTER_FILE - producer_threads * PRODUCER_REGISTERS) // consumer_threads
    want = min(MAX_THREAD_REGISTERS, want // 8 * 8)
    for producer in range(PRODUCER_REGISTERS, PRODUCER_REGISTERS_MIN - 1, -8):
        if consumer_threads * (want - launch) <= producer_threads * (launch - producer):
            return producer, want
    producer = PRODUCER_REGISTERS_MIN
    return producer, launch + producer_threads * (launch - producer) // consumer_threads // 8 * 8


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
