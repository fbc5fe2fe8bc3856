"""Shape ops and layout conversions: `tile.broadcast/reshape/permute/convert_layout`.

A shape op whose result layout holds the same elements in the same threads is
free (registers renamed); anything else is an exchange through shared memory
(`smem_exchange`), bracketed by barriers so every exchange can start at the
scratch buffer's offset.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref


from tileir.dialect.layout import tile_layout

from tileir.backend.layout import layouts as L
from tileir.backend.layout.mma_layouts import Shared, choose_swizzle
from ..context import Frag, LoweringContext, _bits, index, lin_of, same_warps
from ..owner_runs import handoff_buffer, only_in, skewed, skewed_handoff
from ..shared import SmemTile, load_frag, new_tile, staging_linear, store_frag, write_shared
from .registry import rule


def _reg_index(lin: L.Linear) -> dict[tuple[int, ...], int]:
    return {lin.reg_coord(r): r for r in range(lin.num_regs)}


@rule("tile.broadcast")
def _broadcast(cx, op):
    src = cx.frag(op.source)
    res_lin = lin_of(op.result.type)
    r = L.restrict(res_lin, src.shape)
    owned = cx.owner_only.get(op.source)     # its warpgroup, or None
    moved = _owner_widened(cx, op.source, src.lin, r) or r.lanes != src.lin.lanes or \
        not same_warps(r.warps, src.lin.warps) or not set(r.regs) <= set(src.lin.regs)
    if moved:
        # the source elements each thread needs, in the result layout's arrangement (a
        # value one warpgroup holds alone: its threads write, owner_runs.py)
        src = swizzled_exchange(cx, src, r, owned) if _bits(src.elem) >= 8 else \
            smem_exchange(cx, src, r, _row_major(src.shape), _row_major(src.shape), owned)
    where = _reg_index(src.lin)
    regs = []
    for i in range(res_lin.num_regs):
        c = tuple(v if v < s else 0 for v, s in zip(res_lin.reg_coord(i), src.shape))
        regs.append(src.regs[where[c]])
    cx.values[op.result] = Frag(res_lin, src.elem, regs)
    _still_owned(cx, op, None if moved else owned)


def _still_owned(cx: LoweringContext, op, owned: int | None) -> None:
    """A result computed in registers from one warpgroup's value is that warpgroup's
    too; one read back from an exchange its threads wrote is everyone's."""
    if owned is not None:
        cx.owner_only[op.result] = owned


def _owner_widened(cx: LoweringContext, value: ir.Value, src: L.Linear,
                   res: L.Linear) -> bool:
    """Whether `value` is one warpgroup's alone (owner_runs.py) and `res` names more
    warps than its layout: the other warpgroup's share must come from the owner."""
    return value in cx.owner_only and len(res.warps) > len(src.warps)


def _squeeze(lin: L.Linear) -> tuple:
    keep = [d for d, s in enumerate(lin.shape) if s != 1]
    pick = lambda c: tuple(c[d] for d in keep)  # noqa: E731
    return (pick(lin.shape), tuple(map(pick, lin.regs)), tuple(map(pick, lin.lanes)),
            tuple(map(pick, lin.warps)))


@rule("tile.reshape")
def _reshape(cx, op):
    if isinstance(cx.get(op.source), SmemTile):          # unit dims: the same bytes
        tile = cx.get(op.source)
        t = op.result.type
        cx.values[op.result] = SmemTile(tile_layout(t), tuple(t.shape), tile.elem, tile.base,
                                        tile.xor)
        return
    src = cx.frag(op.source)
    res_lin = lin_of(op.result.type)
    owned = cx.owner_only.get(op.source)     # its warpgroup, or None
    if _squeeze(src.lin) == _squeeze(res_lin):          # only unit dims change: free
        cx.values[op.result] = Frag(res_lin, src.elem, list(src.regs))
        _still_owned(cx, op, owned)
        return
    # row-major order is what reshape preserves: exchange through shared memory
    cx.values[op.result] = smem_exchange(cx, src, res_lin, _row_major(src.shape),
                                         _row_major(res_lin.shape), owned)


@rule("tile.permute")
def _permute(cx, op):
    perm = op.permutation
    if isinstance(cx.get(op.source), SmemTile):          # the same bytes, viewed permuted
        cx.values[op.result] = cx.get(op.source).permuted(perm)
        return
    src = cx.frag(op.source)
    res_lin = lin_of(op.result.type)
    moved = lambda c: tuple(c[p] for p in perm)  # noqa: E731
    owned = cx.owner_only.get(op.source)     # its warpgroup, or None
    if (tuple(map(moved, src.lin.regs)), tuple(map(moved, src.lin.lanes)),
            tuple(map(moved, src.lin.warps))) == (res_lin.regs, res_lin.lanes, res_lin.warps):
        cx.values[op.result] = Frag(res_lin, src.elem, list(src.regs))
        _still_owned(cx, op, owned)
        return
    res_shape = res_lin.shape
    strides = _row_major(res_shape)
    # source element c lands at result coordinate (c[perm[0]], c[perm[1]], ...)
    inv = [perm.index(d) for d in range(len(perm))]
    src_flat = [strides[inv[d]] for d in range(len(perm))]
    cx.values[op.result] = smem_exchange(cx, src, res_lin, src_flat, strides, owned)


@rule("tile.convert_layout")
def _convert(cx, op):
    t = op.result.type
    dst = tile_layout(t)
    src = cx.get(op.source)
    if isinstance(src, SmemTile):
        if isinstance(dst, Shared):            # a shared tile in another arrangement
            src = load_frag(cx, src, staging_linear(cx, t.shape, t.element_type, dst))
        else:
            cx.values[op.result] = load_frag(cx, src, lin_of(t))
            return
    if isinstance(dst, Shared):
        tile = new_tile(cx, dst, t.shape, t.element_type)
        write_shared(cx, src, tile, async_reader=True)
        cx.values[op.result] = tile
        return
    src = cx.frag(op.source)
    res_lin = lin_of(op.result.type)
    owned = cx.owner_only.get(op.source)     # its warpgroup, or None
    if _is_splat(op.source):                      # one block-uniform value: free anywhere
        cx.values[op.result] = Frag(res_lin, src.elem, [src.regs[0]] * res_lin.num_regs)
        _still_owned(cx, op, owned)
        return
    # one warpgroup's value wanted by both goes through shared memory, the owner's
    # threads writing it (owner_runs.py)
    if not _owner_widened(cx, op.source, src.lin, res_lin) and \
            (src.lin == res_lin or _same_but_replicas(src.lin, res_lin)):
        cx.values[op.result] = Frag(res_lin, src.elem, list(src.regs))
        _still_owned(cx, op, owned)
        return
    if _bits(src.elem) >= 8:
        cx.values[op.result] = swizzled_exchange(cx, src, res_lin, owned)
        return
    strides = _row_major(res_lin.shape)
    cx.values[op.result] = smem_exchange(cx, src, res_lin, strides, strides, owned)


def _same_but_replicas(a: L.Linear, b: L.Linear) -> bool:
    """Whether two layouts put every element in the same registers of the same lanes
    and warps, one of them naming more warps, which hold replicas (zero bases): one
    warpgroup's product (tile-split-warpgroups) read as an operand that both
    warpgroups hold whole."""
    return a.shape == b.shape and a.regs == b.regs and a.lanes == b.lanes and \
        same_warps(a.warps, b.warps)


def _is_splat(value: ir.Value) -> bool:
    """Whether every element of the tile `value` is the same block-uniform scalar (a
    splat constant or `tensor.splat`: scalars are uniform across a block).  Equal
    registers within one thread say nothing about the other threads."""
    from tileir.passes.effects import defining_op
    owner = defining_op(value)          # (an OpView's op: `value.owner` is the view)
    if owner is None:
        return False
    if owner.name == "tensor.splat":
        return True
    if owner.name == "arith.constant":
        attr = owner.attributes["value"]
        return isinstance(attr, ir.DenseElementsAttr) and attr.is_splat
    return False


def swizzled_exchange(cx: LoweringContext, src: Frag, res_lin: L.Linear,
                      owner_writes: int | None = None) -> Frag:
    """A layout conversion through a scratch tile in shared memory, laid out row by
    row with the widest swizzle the rows allow: both sides move vectors (up to 16
    bytes), and the rows one warp touches at once fall on different banks.
    `owner_writes`: only that warpgroup's threads write (owner_runs.py)."""
    shape = res_lin.shape
    eb = max(1, _bits(src.elem) // 8)
    layout = Shared(choose_swizzle(shape[-1] * eb), tuple(reversed(range(len(shape)))))
    tile = SmemTile(layout, shape, src.elem, 0)
    handoff = owner_writes is not None and skewed(cx, src, res_lin)
    # (a merged hand-off after others of its group: past their bytes, swizzle-aligned)
    skip = handoff_buffer(cx, 1024) if handoff else 0
    tile.base = cx.scratch(skip + tile.nbytes) + skip
    if handoff:
        return skewed_handoff(cx, src, res_lin, lambda: store_frag(cx, src, tile),
                              lambda: load_frag(cx, tile, res_lin),
                              end=tile.base - cx.smem_top + tile.nbytes)
    cx.smem_barrier_before()                       # earlier readers of the scratch are done
    with only_in(cx, owner_writes):
        store_frag(cx, src, tile)
    cx.barrier()
    return load_frag(cx, tile, res_lin)


def _row_major(shape) -> list[int]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return list(reversed(out))


def _flat_index(cx: LoweringContext, lin: L.Linear, r: int, strides) -> ir.Value:
    tc = cx.thread_coords(lin)
    static = lin.reg_coord(r)
    flat = cx.const(sum(s * st for s, st in zip(static, strides)))
    for d, st in enumerate(strides):
        if any(b[d] for b in lin.lanes + lin.warps):
            flat = arith.addi(flat, arith.muli(tc[d], cx.const(st)))
    return flat


def smem_exchange(cx: LoweringContext, src: Frag, res_lin: L.Linear, src_strides,
                  res_strides, owner_writes: int | None = None) -> Frag:
    """Writes `src` to shared memory at sum(coord * src_strides) and reads `res_lin`'s
    elements back at sum(coord * res_strides)."""
    n = 1
    for s in res_lin.shape:
        n *= s
    is_i1 = isinstance(src.elem, ir.IntegerType) and src.elem.width == 1
    mem_t = ir.IntegerType.get_signless(8) if is_i1 else src.elem
    handoff = owner_writes and src_strides == res_strides and skewed(cx, src, res_lin)
    skip = handoff_buffer(cx) if handoff else 0
    buf = cx.smem(n, mem_t, skip)

    def write():
        for r in range(src.lin.num_regs):
            v = arith.extui(mem_t, src.regs[r]) if is_i1 else src.regs[r]
            memref.store(v, buf, [index(_flat_index(cx, src.lin, r, src_strides))])

    def read() -> Frag:
        regs = []
        for r in range(res_lin.num_regs):
            v = memref.load(buf, [index(_flat_index(cx, res_lin, r, res_strides))])
            if is_i1:
                v = arith.cmpi(arith.CmpIPredicate.ne, v, cx.const(0, mem_t))
            regs.append(v)
        return Frag(res_lin, src.elem, regs)

    if handoff:
        return skewed_handoff(cx, src, res_lin, write, read,
                              end=skip + n * max(1, _bits(mem_t) // 8))
    cx.smem_barrier_before()            # earlier readers of the shared buffer are done
    with only_in(cx, owner_writes):
        write()
    cx.barrier()
    return read()


