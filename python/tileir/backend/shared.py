"""Tiles in shared memory (`#tile.shared`) during the `gpu` stage.

A tile whose layout is `#tile.shared` lowers to a `SmemTile`: where its bytes
start (an i32 offset into the dynamic shared memory) and how elements map to
bytes (`mma_layouts.Shared.offset`).  Registers move in and out of it with
vector accesses: the byte offset of an element is GF(2)-linear in its
coordinate bits (power-of-two shapes, boxes of a power-of-two size, a swizzle
that xors address bits), so a thread's element r sits at
`offset(thread part) ^ offset(register part)`, the second a constant.
"""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, llvm, nvvm, vector

from . import layouts as L
from .context import Frag, LoweringContext, _bits
from .mma_layouts import Shared


@dataclasses.dataclass
class SmemTile:
    layout: Shared
    shape: tuple[int, ...]
    elem: ir.Type
    base: ir.Value | int        # byte offset into the dynamic shared memory (i32 or int)

    @property
    def elem_bytes(self) -> int:
        return max(1, _bits(self.elem) // 8)

    @property
    def nbytes(self) -> int:
        return self.layout.size_bytes(self.shape, self.elem_bytes)

    def offset(self, coord) -> int:
        return self.layout.offset(coord, self.shape, self.elem_bytes)

    def permuted(self, perm) -> "SmemTile":
        return SmemTile(self.layout.permuted(perm), tuple(self.shape[p] for p in perm),
                        self.elem, self.base)


def smem_tile_bytes(layout: Shared, shape, elem: ir.Type) -> int:
    return layout.size_bytes(tuple(shape), max(1, _bits(elem) // 8))


def _base_value(cx: LoweringContext, tile: SmemTile) -> ir.Value:
    return cx.const(tile.base) if isinstance(tile.base, int) else tile.base


def thread_offset(cx: LoweringContext, tile: SmemTile, lin: L.Linear) -> ir.Value:
    """The byte offset (i32, relative to the tile) of this thread's register-0 element:
    the xor of the offsets of its set lane and warp bits."""
    _, lane, warp = cx.thread_ids()
    acc = None
    for src, bases in ((lane, lin.lanes), (warp, lin.warps)):
        for bit, basis in enumerate(bases):
            off = tile.offset(basis)
            if off == 0:
                continue
            b = arith.andi(arith.shrui(src, cx.const(bit)), cx.const(1))
            term = arith.muli(b, cx.const(off))
            acc = term if acc is None else arith.xori(acc, term)
    return acc if acc is not None else cx.const(0)


def _groups(tile: SmemTile, lin: L.Linear) -> int:
    """Registers per vector access: consecutive along the fastest dim, within 16 bytes."""
    inner = tile.layout.order[0]
    v = lin.contiguous_regs(inner)
    return max(1, min(v, 16 // tile.elem_bytes, tile.layout.box_elems(tile.shape,
                                                                      tile.elem_bytes)))


def _address(cx, tile, toff, roff: int) -> ir.Value:
    off = arith.xori(toff, cx.const(roff)) if roff else toff
    return cx.smem_ptr(arith.addi(_base_value(cx, tile), off))


def store_frag(cx: LoweringContext, frag: Frag, tile: SmemTile) -> None:
    """Writes every element of `frag` (replicas write the same bytes) into `tile`."""
    lin = frag.lin
    toff = thread_offset(cx, tile, lin)
    v = _groups(tile, lin)
    vt = ir.VectorType.get([v], tile.elem)
    for r0 in range(0, lin.num_regs, v):
        ptr = _address(cx, tile, toff, tile.offset(lin.reg_coord(r0)))
        value = vector.from_elements(vt, frag.regs[r0:r0 + v]) if v > 1 else frag.regs[r0]
        llvm.store(value, ptr, alignment=v * tile.elem_bytes)


def load_frag(cx: LoweringContext, tile: SmemTile, lin: L.Linear) -> Frag:
    """Reads the elements of layout `lin` from `tile` into registers."""
    toff = thread_offset(cx, tile, lin)
    v = _groups(tile, lin)
    vt = ir.VectorType.get([v], tile.elem)
    regs: list[ir.Value] = []
    for r0 in range(0, lin.num_regs, v):
        ptr = _address(cx, tile, toff, tile.offset(lin.reg_coord(r0)))
        if v == 1:
            regs.append(llvm.load(tile.elem, ptr, alignment=tile.elem_bytes))
        else:
            vec = llvm.load(vt, ptr, alignment=v * tile.elem_bytes)
            regs.extend(vector.extract(vec, [], [j]) for j in range(v))
    return Frag(lin, tile.elem, regs)


def fence_async_proxy() -> None:
    """Orders this thread's shared-memory writes before reads by the async proxy
    (wgmma, TMA stores): PTX `fence.proxy.async.shared::cta`."""
    nvvm.fence_proxy(ir.Attribute.parse("#nvvm.proxy_kind<async.shared>"),
                     space=ir.Attribute.parse("#nvvm.shared_space<cta>"))




# ---------------------------------------------------------------------------
# Moving tiles into and out of shared memory (the synchronous path)
# ---------------------------------------------------------------------------
def staging_linear(cx: LoweringContext, tile_shape, elem: ir.Type, layout: Shared) -> L.Linear:
    """A coalesced register layout for filling a shared tile: 16-byte vectors along the
    tile's fastest dim, as a global load of it would have."""
    shape = tuple(tile_shape)
    order = layout.order
    perm = list(reversed(order))                      # slowest first: row-major in `perm`
    rm_shape = tuple(shape[d] for d in perm)
    b = L.coalesced(rm_shape, max(1, _bits(elem) // 8), cx.num_warps)
    inv = [perm.index(d) for d in range(len(shape))]
    return L.to_linear(b.permuted(inv), shape)


def write_shared(cx: LoweringContext, frag: Frag, tile: SmemTile, *, async_reader: bool) -> None:
    """Stores `frag` into `tile` between barriers: earlier readers of the buffer are done
    before the first write, every write is visible after the last one (and to the
    async proxy, for wgmma and TMA, when `async_reader`)."""
    cx.smem_barrier_before()
    store_frag(cx, frag, tile)
    if async_reader:
        fence_async_proxy()
    from mlir.dialects import gpu
    gpu.barrier()


def new_tile(cx: LoweringContext, layout: Shared, shape, elem: ir.Type) -> SmemTile:
    """A shared tile in a buffer of its own, live for the rest of the kernel."""
    shape = tuple(shape)
    start = cx.alloc_smem(smem_tile_bytes(layout, shape, elem))
    return SmemTile(layout, shape, elem, start)
