"""Grid queries, array queries and global memory: `tile.bid/num_blocks/grid_size/dim/stride`,
`tile.select_array`, `tile.list_get`, `tile.load/store` (through `backend.gpu.memory`, or TMA:
`backend.layout.tma_store` plans, `backend.gpu.tma_store` writes) and `tile.iota`."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, llvm, scf

from tileir.dialect.layout import tile_layout
from tileir.dialect.types import array_info, signless

from tileir.backend.layout import tma_store
from tileir.backend.layout.mma_layouts import Shared
from ..tma_store import lower as lower_tma_store
from ..context import I32, ArrayABI, Frag, _bits, lin_of
from ..memory import gep, load_tile, lower_load, lower_store
from ..shared import fence_async_proxy, new_tile, staging_linear, store_frag
from .registry import rule


_DIMS = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)


@rule("tile.bid")
def _bid(cx, op):
    cx.values[op.result] = arith.index_castui(I32(), gpu.block_id(_DIMS[op.axis]))


@rule("tile.num_blocks")
def _num_blocks(cx, op):
    cx.values[op.result] = arith.index_castui(I32(), gpu.grid_dim(_DIMS[op.axis]))


@rule("tile.grid_size")
def _grid_size(cx, op):
    # a persistent kernel's user grid: parameters after the user's (lower.py)
    cx.values[op.result] = cx.grid_size[op.axis]


@rule("tile.dim")
def _dim(cx, op):
    cx.values[op.result] = cx.arrays[op.array].dims[op.axis]


@rule("tile.stride")
def _stride(cx, op):
    cx.values[op.result] = arith.trunci(I32(), cx.arrays[op.array].strides[op.axis])


@rule("tile.select_array")
def _select_array(cx, op):
    # every ABI value of the chosen array (base, dims, strides) by a chain of selects,
    # array 0 where no other matches: an index outside the list (undefined, but a
    # prefetch one iteration past a loop over the list computes one) still names
    # real memory, and the loads' bounds checks hold against its dims
    arrays = [cx.arrays[a] for a in op.arrays]
    index = cx.get(op.index)
    ptr, dims, strides = arrays[0].ptr, list(arrays[0].dims), list(arrays[0].strides)
    for j, arr in enumerate(arrays[1:], 1):
        hit = arith.cmpi(arith.CmpIPredicate.eq, index, arith.constant(I32(), j))
        ptr = arith.select(hit, arr.ptr, ptr)
        dims = [arith.select(hit, d, o) for d, o in zip(arr.dims, dims)]
        strides = [arith.select(hit, s, o) for s, o in zip(arr.strides, strides)]
    cx.arrays[op.result] = ArrayABI(ptr, dims, strides, arrays[0].elem,
                                    all(a.aligned for a in arrays),
                                    any(a.large for a in arrays))


@rule("tile.list_get")
def _list_get(cx, op):
    # row `index` of the table: the element's address, dims and strides as the kernel
    # ABI passes an array, one int64 word each (every thread reads the same words).
    # An index outside the table reads nothing and gives an empty array (dims 0), so
    # loads of it read padding and stores write nothing: a prefetch one iteration past
    # a loop over the list (register_prefetch.py), or before a loop over an empty one,
    # computes such an index.  So does a table whose rows are too short for the rank.
    table = cx.arrays[op.table]
    i64 = ir.IntegerType.get_signless(64)
    index = arith.extsi(i64, cx.get(op.index))
    rank = array_info(op.result.type).rank
    inside = arith.andi(
        arith.cmpi(arith.CmpIPredicate.ult, index, arith.extui(i64, table.dims[0])),
        arith.cmpi(arith.CmpIPredicate.sge, table.dims[1], cx.const(1 + 2 * rank)))
    fetch = scf.IfOp(inside, [i64] * (1 + 2 * rank), has_else=True)
    with ir.InsertionPoint(fetch.then_block):
        row = arith.muli(index, table.strides[0])
        words = []
        for k in range(1 + 2 * rank):
            at = arith.addi(row, arith.muli(arith.constant(i64, k), table.strides[1]))
            words.append(llvm.load(i64, gep(table.ptr, at, i64), alignment=8))
        scf.YieldOp(words)
    with ir.InsertionPoint(fetch.else_block):
        scf.YieldOp([arith.constant(i64, 0)] * (1 + 2 * rank))
    words = list(fetch.results)
    ptr = llvm.inttoptr(table.ptr.type, words[0])
    dims = [arith.trunci(I32(), w) for w in words[1:1 + rank]]
    cx.arrays[op.result] = ArrayABI(ptr, dims, words[1 + rank:],
                                    signless(array_info(op.result.type).element_type),
                                    op.opview.aligned)


@rule("tile.load")
def _load(cx, op):
    lay = tile_layout(op.result.type)
    if not isinstance(lay, Shared):
        return lower_load(cx, op)
    # into shared memory, synchronously: through registers (a pipelined loop loads
    # with TMA or cp.async instead: see the ring rules)
    t = op.result.type
    tile = new_tile(cx, lay, t.shape, t.element_type)
    cx.values[op.result] = tile
    arr = cx.arrays[op.array]
    cx.loaded_arrays.add(id(arr))
    index = [cx.get(i) for i in op.index]
    slow = lay.order[-1]                               # slabs along the slowest dim
    slabs = _slabs(cx, t, lay, arr.aligned)
    shape = list(t.shape)
    shape[slow] //= slabs
    cx.smem_barrier_before()                           # earlier readers are done
    for s in range(slabs):
        # slab s of the tile is tile index (index * slabs + s) of slab-shaped tiles
        at = list(index)
        at[slow] = arith.addi(arith.muli(index[slow], cx.const(slabs)), cx.const(s))
        frag = load_tile(cx, arr, at, staging_linear(cx, shape, t.element_type, lay),
                         op.padding)
        origin = [s * shape[d] if d == slow else 0 for d in range(len(shape))]
        store_frag(cx, frag, tile.at(origin))   # a xor: the swizzle sees the slab's rows
    fence_async_proxy(cx)
    cx.barrier()


# Elements each thread stages per slab of a synchronous load into shared memory:
# what keeps the registers of the staging apart from those of an accumulator.
STAGED_PER_THREAD = {True: 16, False: 8}


def _slabs(cx, t, lay, aligned: bool) -> int:
    n = 1
    for d in t.shape:
        n *= d
    per_thread = n // (32 * cx.num_warps)
    slabs = 1
    while per_thread // slabs > STAGED_PER_THREAD[aligned] and \
            t.shape[lay.order[-1]] // (slabs * 2) >= 1:
        slabs *= 2
    return slabs


@rule("tile.store")
def _store(cx, op):
    t = op.tile.type
    p = tma_store.plan(tile_layout(t), tuple(t.shape), _bits(t.element_type),
                       cx.arrays[op.array].aligned, cx.chip, cx.tma_store)
    if p is not None and not tma_store.reads(op.array):
        lower_tma_store(cx, op, p)
    else:
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
