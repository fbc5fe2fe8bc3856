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

from tileir.backend.layout import layouts as L
from tileir.backend.layout.mma_layouts import Shared, smem_tile_bytes
from .context import Frag, LoweringContext, _bits, reg_type


@dataclasses.dataclass
class SmemTile:
    layout: Shared
    shape: tuple[int, ...]
    elem: ir.Type
    base: ir.Value | int        # byte offset into the dynamic shared memory (i32 or int)
    # a sub-tile: xor of its origin's offset into every element offset (offsets are
    # GF(2)-linear in the coordinate bits, so a sub-tile is a constant xor)
    xor: int = 0

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
                        self.elem, self.base, self.xor)

    def at(self, origin) -> "SmemTile":
        """The same tile seen from `origin` (whose coordinates have bits disjoint from
        those the reader adds)."""
        return SmemTile(self.layout, self.shape, self.elem, self.base,
                        self.xor ^ self.offset(origin))


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
    roff ^= tile.xor
    off = arith.xori(toff, cx.const(roff)) if roff else toff
    return cx.smem_ptr(arith.addi(_base_value(cx, tile), off))


def store_frag(cx: LoweringContext, frag: Frag, tile: SmemTile) -> None:
    """Writes every element of `frag` (replicas write the same bytes) into `tile`
    (stmatrix where `frag` is an mma fragment of 16-bit elements and the target has
    it, else vector stores)."""
    if cx.chip.startswith("sm_90") and _stmatrix(cx, frag, tile):
        return
    lin = frag.lin
    toff = thread_offset(cx, tile, lin)
    v = _groups(tile, lin)
    vt = ir.VectorType.get([v], reg_type(tile.elem))
    for r0 in range(0, lin.num_regs, v):
        ptr = _address(cx, tile, toff, tile.offset(lin.reg_coord(r0)))
        value = vector.from_elements(vt, frag.regs[r0:r0 + v]) if v > 1 else frag.regs[r0]
        llvm.store(value, ptr, alignment=v * tile.elem_bytes)


def load_frag(cx: LoweringContext, tile: SmemTile, lin: L.Linear) -> Frag:
    """Reads the elements of layout `lin` from `tile` into registers (ldmatrix where
    `lin` is an mma fragment of 16-bit elements, else vector loads)."""
    frag = _ldmatrix(cx, tile, lin)
    if frag is not None:
        return frag
    toff = thread_offset(cx, tile, lin)
    v = _groups(tile, lin)
    rt = reg_type(tile.elem)
    vt = ir.VectorType.get([v], rt)
    regs: list[ir.Value] = []
    for r0 in range(0, lin.num_regs, v):
        ptr = _address(cx, tile, toff, tile.offset(lin.reg_coord(r0)))
        if v == 1:
            regs.append(llvm.load(rt, ptr, alignment=tile.elem_bytes))
        else:
            vec = llvm.load(vt, ptr, alignment=v * tile.elem_bytes)
            regs.extend(vector.extract(vec, [], [j]) for j in range(v))
    return Frag(lin, tile.elem, regs)


# The lanes of an mma.sync fragment: lane bits 0-1 step the register pair's axis by 2
# and 4 elements, bits 2-4 the other axis by 1, 2, 4 (A, accumulator: pairs along
# columns; B: pairs along rows).  ldmatrix hands out exactly this pattern.
def _fragment_axes(lin: L.Linear) -> tuple[int, int] | None:
    """(pair axis, row axis) when `lin` is an mma fragment ldmatrix can fill."""
    if len(lin.shape) != 2 or lin.num_regs < 2 or len(lin.lanes) != 5:
        return None
    pair = next((d for d in range(2) if lin.regs[0][d] == 1), None)
    if pair is None or lin.regs[0][1 - pair] != 0:
        return None
    other = 1 - pair
    unit = lambda d, v: tuple(v if i == d else 0 for i in range(2))  # noqa: E731
    want = (unit(pair, 2), unit(pair, 4), unit(other, 1), unit(other, 2), unit(other, 4))
    return (pair, other) if tuple(lin.lanes) == want else None


@dataclasses.dataclass
class _Matrices:
    """How a warp moves an mma fragment of 16-bit elements with ldmatrix/stmatrix:
    `num` 8 x 8 matrices per instruction (x4, x2, x1), lane l pointing at row
    l % 8 of matrix l // 8 (this thread's `toff`), matrix j of a group holding
    register pair j; `trans` when the pairs run across the tile's contiguous dim."""

    num: int
    trans: bool
    toff: ir.Value

    @property
    def layout(self) -> ir.Attribute:
        return ir.Attribute.parse(f"#nvvm.mma_layout<{'col' if self.trans else 'row'}>")


_MATRIX_SHAPE = "#nvvm.ld_st_matrix_shape<m = 8, n = 8>"
_MATRIX_ELT = "#nvvm.ld_st_matrix_elt_type<b16>"


def _matrices(cx: LoweringContext, tile: SmemTile, lin: L.Linear) -> _Matrices | None:
    axes = _fragment_axes(lin)
    if axes is None or tile.elem_bytes != 2 or \
            tile.layout.box_elems(tile.shape, 2) < 8:
        return None
    pair, other = axes
    inner = tile.layout.order[0]
    trans = pair != inner
    # the row each lane points at moves along the tile's non-contiguous dim (8
    # contiguous elements form the row)
    row_axis = other if not trans else pair
    if inner == row_axis:
        return None
    pairs = lin.num_regs // 2
    num = 4 if pairs % 4 == 0 else 2 if pairs % 2 == 0 else 1
    _, lane, warp = cx.thread_ids()
    # lane bits 0-2: the row; bits 3-4: the matrix (register bases 1 and 2)
    unit = lambda d, v: tuple(v if i == d else 0 for i in range(2))  # noqa: E731
    lane_bases = [unit(row_axis, 1), unit(row_axis, 2), unit(row_axis, 4)]
    lane_bases += [lin.regs[1] if num >= 2 else (0, 0), lin.regs[2] if num >= 4 else (0, 0)]
    toff = None
    for src, bases in ((lane, lane_bases), (warp, lin.warps)):
        for bit, basis in enumerate(bases):
            off = tile.offset(basis)
            if off:
                b = arith.andi(arith.shrui(src, cx.const(bit)), cx.const(1))
                term = arith.muli(b, cx.const(off))
                toff = term if toff is None else arith.xori(toff, term)
    return _Matrices(num, trans, toff if toff is not None else cx.const(0))


def _ldmatrix(cx: LoweringContext, tile: SmemTile, lin: L.Linear) -> Frag | None:
    """An mma fragment of 16-bit elements read with ldmatrix (see `_Matrices`)."""
    m = _matrices(cx, tile, lin)
    if m is None:
        return None
    num = m.num
    i32 = ir.IntegerType.get_signless(32)
    st = ir.Type.parse("!llvm.struct<(" + ", ".join(["i32"] * num) + ")>")
    vt = ir.VectorType.get([2], tile.elem)
    shape, elt = ir.Attribute.parse(_MATRIX_SHAPE), ir.Attribute.parse(_MATRIX_ELT)
    regs: list[ir.Value] = []
    for g in range(0, lin.num_regs // 2, num):
        ptr = _address(cx, tile, m.toff, tile.offset(lin.reg_coord(2 * g)))
        r = nvvm.ldmatrix(st if num > 1 else i32, ptr, num, m.layout, shape, elt)
        words = [llvm.extractvalue(i32, r, ir.DenseI64ArrayAttr.get([j])) for j in range(num)] \
            if num > 1 else [r]
        for w in words:
            v = llvm.bitcast(vt, w)
            regs.extend(vector.extract(v, [], [j]) for j in range(2))
    return Frag(lin, tile.elem, regs)


def _stmatrix(cx: LoweringContext, frag: Frag, tile: SmemTile) -> bool:
    """Writes an mma fragment of 16-bit elements with stmatrix (see `_Matrices`);
    False when `frag` is not one."""
    lin = frag.lin
    m = _matrices(cx, tile, lin)
    if m is None:
        return False
    i32 = ir.IntegerType.get_signless(32)
    vt = ir.VectorType.get([2], reg_type(tile.elem))
    shape, elt = ir.Attribute.parse(_MATRIX_SHAPE), ir.Attribute.parse(_MATRIX_ELT)
    for g in range(0, lin.num_regs // 2, m.num):
        ptr = _address(cx, tile, m.toff, tile.offset(lin.reg_coord(2 * g)))
        words = [llvm.bitcast(i32, vector.from_elements(vt, frag.regs[2 * j:2 * j + 2]))
                 for j in range(g, g + m.num)]
        nvvm.stmatrix(ptr, words, m.layout, shape, elt)
    return True


def fence_async_proxy(cx: LoweringContext) -> None:
    """Orders this thread's shared-memory writes before reads by the async proxy
    (wgmma, TMA stores): PTX `fence.proxy.async.shared::cta`.  sm_90 and later only;
    before Hopper nothing reads shared memory through another proxy."""
    if not cx.chip.startswith("sm_90"):
        return
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
        fence_async_proxy(cx)
    cx.barrier()


def new_tile(cx: LoweringContext, layout: Shared, shape, elem: ir.Type) -> SmemTile:
    """A shared tile in a buffer of its own, live for the rest of the kernel."""
    shape = tuple(shape)
    start = cx.alloc_smem(smem_tile_bytes(layout, shape, elem))
    return SmemTile(layout, shape, elem, start)
