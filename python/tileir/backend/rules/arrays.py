"""Grid queries, array queries and global memory: `tile.bid/num_blocks/dim/stride`,
`tile.load/store` (through `backend.memory`) and `tile.iota`."""

from __future__ import annotations

from mlir.dialects import arith, gpu

from tileir.dialect.layout import tile_layout

from ..context import I32, Frag, lin_of
from ..memory import load_tile, lower_load, lower_store
from ..mma_layouts import Shared
from ..shared import new_tile, staging_linear, write_shared
from .registry import rule


_DIMS = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)


@rule("tile.bid")
def _bid(cx, op):
    cx.values[op.result] = arith.index_castui(I32(), gpu.block_id(_DIMS[op.axis]))


@rule("tile.num_blocks")
def _num_blocks(cx, op):
    cx.values[op.result] = arith.index_castui(I32(), gpu.grid_dim(_DIMS[op.axis]))


@rule("tile.dim")
def _dim(cx, op):
    cx.values[op.result] = cx.arrays[op.array].dims[op.axis]


@rule("tile.stride")
def _stride(cx, op):
    cx.values[op.result] = arith.trunci(I32(), cx.arrays[op.array].strides[op.axis])


@rule("tile.load")
def _load(cx, op):
    lay = tile_layout(op.result.type)
    if not isinstance(lay, Shared):
        return lower_load(cx, op)
    # into shared memory, synchronously: through registers (a pipelined loop loads
    # with TMA or cp.async instead: see the ring rules)
    t = op.result.type
    tile = new_tile(cx, lay, t.shape, t.element_type)
    frag = load_tile(cx, cx.arrays[op.array], [cx.get(i) for i in op.index],
                     staging_linear(cx, t.shape, t.element_type, lay), op.padding)
    write_shared(cx, frag, tile, async_reader=True)
    cx.values[op.result] = tile


@rule("tile.store")
def _store(cx, op):
    lower_store(cx, op)


@rule("tile.iota")
def _iota(cx, op):
    t = op.result.type
    lin = lin_of(t)
    (tc,) = cx.thread_coords(lin)
    regs = []
    for r in range(lin.num_regs):
        (s,) = lin.reg_coord(r)
        v = arith.addi(tc, cx.const(s)) if s else tc
        if t.element_type.width > 32:
            v = arith.extui(t.element_type, v)
        elif t.element_type.width < 32:
            v = arith.trunci(t.element_type, v)
        regs.append(v)
    cx.values[op.result] = Frag(lin, t.element_type, regs)


