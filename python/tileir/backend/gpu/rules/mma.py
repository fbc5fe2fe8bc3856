"""Tensor-core rules: `tile.mma`, `tile.mma_async` and `tile.mma_wait`.

The accumulator is a `Frag` in an `#tile.mma_acc` layout, so register r of
instruction (mi, ni) is fragment element d[r] of that instruction (see
`mma_layouts`).

* wgmma (version 3, sm_90a): per k step, per instruction of the warpgroup's
  block, `wgmma.mma_async` with shared-memory descriptors for A and B (A may
  come from registers instead: `#tile.mma_operand<0, ...>`); one
  `wgmma.fence` before and one `commit_group` after the batch.  `tile.mma`
  then waits for it (`wgmma.wait_group 0`); `tile.mma_async` leaves it in
  flight and a later `tile.mma_wait {pending = n}` waits.  Each wait passes
  the accumulator registers through an inline-asm statement tied to them, so
  nothing that reads them can be scheduled before the wait.
* mma.sync (version 2): `mma.sync.m16n8k16` per (instruction, k step) on
  register operands; synchronous, so `mma_wait` passes values through.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, math, nvvm, scf

from tileir.dialect import TileIRError
from tileir.dialect.layout import tile_layout
from tileir.dialect.tile import promotes_sums
from tileir.backend.layout.mma_layouts import DotOperand, Mma, Shared
from tileir.backend.layout.mma_plan import K_STEP
from tileir.backend.pipeline.copy_parts import boxes_read
from tileir.backend.pipeline.product_rotation import FENCE_ATTR

from ..context import I32, I64, Frag, LoweringContext, _bits, is_fp8, reg_type
from ..shared import SmemTile, load_frag
from .registry import rule

_WGMMA_TYPE = {"f16": "f16", "bf16": "bf16", "f32": "tf32", "f8E4M3FN": "e4m3",
               "f8E5M2": "e5m2"}
_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


@rule("tile.mma")
def _mma(cx, op):
    if not isinstance(tile_layout(op.acc.type), Mma):
        cx.values[op.result] = _mma_fma(cx, op)
        return
    acc = _issue(cx, op)
    cx.values[op.result] = _wait(cx, acc, 0, _version(op))


@rule("tile.mma_async")
def _mma_async(cx, op):
    packed: list[ir.Value] = []
    cx.values[op.result] = _issue(cx, op, packed)
    cx.in_flight_acc.add(op.result)
    a = cx.get(op.a)
    if isinstance(a, Frag) and _version(op) == 3:
        # the packed registers the wgmma reads, not the A values they were packed from:
        # those die at the fence, so no copy of them is made while wgmmas are in flight
        # (ptxas would serialize every wgmma: C7513)
        cx.in_flight_a[op.result] = Frag(a.lin, a.elem, packed)


@rule("tile.mma_wait")
def _mma_wait(cx, op):
    lay = tile_layout(op.operands[0].type)
    version = lay.version if isinstance(lay, Mma) else 2
    if FENCE_ATTR in op.operation.attributes and version == 3:
        # a rotated product's wait (product_rotation.FENCE_ATTR): ptxas places a
        # wgmma wait as early as it may, above the ALU work before it, but not above a
        # memory fence; with the fence the exponentials before it stay before it, beside
        # the product in flight (MLA decode's and prefill attention's SASS)
        llvm.inline_asm(None, [], "fence.acq_rel.cta;", "", has_side_effects=True)
    a = cx.in_flight_a.pop(op.operands[0], None)
    if a is not None and version == 3:
        # the A registers pass through the wait too: nothing may reuse them before it
        # (ptxas would otherwise serialize the wgmma: C7510)
        cx.values[op.result] = _wait_many(cx, [cx.frag(op.operands[0]), a], op.pending)[0]
        return
    cx.values[op.result] = _wait(cx, cx.frag(op.operands[0]), op.pending, version)


def _version(op) -> int:
    lay = tile_layout(op.acc.type)
    if not isinstance(lay, Mma):
        raise TileIRError(f"{op.operation.name} needs its accumulator in a #tile.mma_acc layout "
                          f"(the layout stage assigns one); got {op.acc.type}", op.location)
    return lay.version


def _issue(cx: LoweringContext, op, packed: list | None = None) -> Frag:
    """The product's instructions; `packed` receives the 32-bit registers a wgmma's A
    operand from registers was packed into."""
    lay = tile_layout(op.acc.type)
    _version(op)
    acc = cx.frag(op.acc)
    a, b = cx.get(op.a), cx.get(op.b)
    elem = str(op.a.type.element_type)
    if str(acc.elem) != "f32":
        raise TileIRError(f"tensor-core accumulators are f32 on the GPU; got "
                          f"{acc.elem}", op.location)
    if lay.version == 3:
        if promotes_sums(op.operation):
            return _wgmma_promoted(cx, lay, a, b, acc, elem, str(op.b.type.element_type))
        return _wgmma(cx, lay, a, b, acc, elem, str(op.b.type.element_type),
                      chained=op.acc in cx.in_flight_acc, packed_out=packed)
    return _mma_sync(cx, lay, a, b, acc, elem, op)


# ---------------------------------------------------------------------------
# wgmma
# ---------------------------------------------------------------------------
def _group_origin(cx: LoweringContext, lay: Mma, shape) -> tuple[ir.Value, ir.Value]:
    """(row, column) where this thread's warpgroup block starts, as i32."""
    _, _, warp = cx.thread_ids()
    gm, gn = lay.groups
    bm, bn = lay.block(shape)
    g = arith.shrui(warp, cx.const(2))
    gi = arith.andi(g, cx.const(gm - 1))
    gj = arith.shrui(g, cx.const(gm.bit_length() - 1))
    return arith.muli(gi, cx.const(bm)), arith.muli(gj, cx.const(bn))


def _dyn_offset(cx: LoweringContext, tile: SmemTile, dim: int, value: ir.Value,
                lo: int, hi: int) -> ir.Value:
    """The byte offset of coordinate `value` along `dim` (a multiple of `lo`, below
    `hi`): xor of the offsets of its set bits (offsets are GF(2)-linear)."""
    acc = None
    bit = lo
    while bit < hi:
        unit = tuple(bit if d == dim else 0 for d in range(len(tile.shape)))
        off = tile.offset(unit)
        if off:
            b = arith.andi(arith.shrui(value, cx.const(bit.bit_length() - 1)), cx.const(1))
            term = arith.muli(b, cx.const(off))
            acc = term if acc is None else arith.xori(acc, term)
        bit <<= 1
    return acc if acc is not None else cx.const(0)


class _Desc:
    """wgmma shared-memory descriptors of one operand tile.

    Bits 0-13: start address >> 4 (its low 18 bits); 16-29: leading byte offset
    >> 4; 32-45: stride byte offset >> 4; 62-63: swizzle (1: 128 B, 2: 64 B, 3:
    32 B).  For a K-major
    operand the leading offset is unused and the stride offset is 8 rows; for an
    M/N-major one the leading offset steps from one box (`swizzle` bytes of M/N)
    to the next.  Sub-matrix starts are pattern-aligned (8-row multiples), so the
    unswizzled offset is the start address."""

    def __init__(self, cx: LoweringContext, tile: SmemTile, k_dim: int,
                 dyn_dim: int | None = None, dyn_value: ir.Value | None = None,
                 dyn_range: tuple[int, int] = (1, 1), narrow: bool = False):
        lay, eb = tile.layout, tile.elem_bytes
        if lay.swizzle not in _SWIZZLE_MODE:    # (a hand-written or mutated layout)
            raise TileIRError(f"a wgmma operand in shared memory needs a swizzle of "
                              f"{', '.join(map(str, sorted(_SWIZZLE_MODE)))} bytes; its layout "
                              f"has {lay.swizzle}", ir.Location.current)
        self.tile = tile
        self.k_major = lay.order[0] == k_dim
        row_bytes = lay.row_bytes(tile.shape, eb)
        lbo = 1 if self.k_major else lay.box_bytes(tile.shape, eb)
        sbo = 8 * row_bytes
        const = ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | \
            _SWIZZLE_MODE[lay.swizzle] << 62
        base = tile.base if not isinstance(tile.base, int) else cx.const(tile.base)
        if dyn_value is not None:
            base = arith.addi(base, _dyn_offset(cx, tile, dyn_dim, dyn_value, *dyn_range))
        # 14 bits of address: in a cluster launch a block's shared addresses carry its
        # rank above bit 17, which would otherwise spill into the leading offset
        addr = arith.andi(arith.shrui(cx.smem_addr(base), cx.const(4)), cx.const(0x3FFF))
        if cx.alternating and cx.loop_depth > 0:
            # alternating owners' loops issue two score chains a trip: LLVM hoisted the
            # descriptors of a loop-invariant tile (Q) out of the loop, 36 64-bit values
            # live across it, and the consumers spilled them; through a volatile move
            # they are made where the chain is issued (owner_runs.py)
            addr = llvm.inline_asm(I32(), [addr], "mov.b32 $0, $1;", "=r,r",
                                   has_side_effects=True)
        self.const = const        # the fields but the address (a 64-bit pattern)
        self.narrow = narrow
        self.desc0 = arith.ori(arith.extui(I64(), addr), cx.const(_signed64(const), I64()))
        if narrow:
            # the low word (address, leading offset) is all that varies; the high word
            # (stride offset, swizzle) is a constant (the address stays below 2^14
            # units of 16 bytes: a sub-tile's offset never carries out of its field)
            self.lo0 = arith.ori(addr, cx.const(const & 0xFFFFFFFF))
            self.hi = cx.const(_signed64(const & ~0xFFFFFFFF), I64())

    def at(self, cx: LoweringContext, coord) -> ir.Value:
        """The descriptor of the sub-tile at `coord`.  `narrow`: its offset added to the
        low word alone (32 bits), for a product of many k steps: ptxas keeps a few
        descriptors in uniform registers and steps them with 64-bit uniform adds, but
        past those registers (MLA's 576-deep scores: 36 k steps, A's and B's) it moves
        them to ordinary ones, where each 64-bit add costs a carry, two copies and four
        moves back per wgmma, and the registers spill."""
        off = self.tile.offset(coord)
        if not self.narrow:
            return self.desc0 if not off else \
                arith.addi(self.desc0, arith.ConstantOp(I64(), off >> 4).result)
        lo = arith.addi(self.lo0, cx.const(off >> 4)) if off else self.lo0
        return arith.ori(arith.extui(I64(), lo), self.hi)


# k steps of one product past which its descriptors take the 32-bit form (_Desc.at): at
# 8 (attention at D = 128) the 64-bit one in uniform registers is shorter, at 36 (MLA)
# the 32-bit one is (SASS of both, 2026-11-28)
NARROW_DESC_STEPS = 16


def _signed64(v: int) -> int:
    """A 64-bit pattern as the signed value an i64 attribute holds."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _struct(n: int, t: str = "f32") -> ir.Type:
    return ir.Type.parse("!llvm.struct<(" + ", ".join([t] * n) + ")>")


def _pack(values: list[ir.Value], st: ir.Type) -> ir.Value:
    s = llvm.UndefOp(st).result
    for i, v in enumerate(values):
        s = llvm.insertvalue(s, v, ir.DenseI64ArrayAttr.get([i]))
    return s


def _unpack(s: ir.Value, n: int, t: ir.Type) -> list[ir.Value]:
    return [llvm.extractvalue(t, s, ir.DenseI64ArrayAttr.get([i])) for i in range(n)]


def _wgmma(cx: LoweringContext, lay: Mma, a, b, acc: Frag, elem: str,
           elem_b: str | None = None, chained: bool = False,
           packed_out: list | None = None) -> Frag:
    shape = acc.shape
    m, n = shape
    k = (a.shape if isinstance(a, SmemTile) else a.shape)[1]
    step = K_STEP[elem]
    rm, rn = lay.reps(shape)
    im, inn = lay.instr
    per = inn // 2
    row0, col0 = _group_origin(cx, lay, shape)
    bm, bn = lay.block(shape)
    if not isinstance(b, SmemTile):
        raise TileIRError("internal error: wgmma operand B must be in shared memory",
                          ir.Location.current)
    narrow = k // step > NARROW_DESC_STEPS
    db = _Desc(cx, b, 0, 1, col0, (bn, n), narrow=narrow)
    da = _Desc(cx, a, 1, 0, row0, (bm, m), narrow=narrow) if isinstance(a, SmemTile) else None
    f32 = ir.F32Type.get()
    # The fence orders earlier register writes before the wgmmas read them; tied to
    # the accumulator, it keeps LLVM from materializing those registers (a zero
    # accumulator, say) after it, which ptxas answers with a serializing
    # warpgroup.arrive of its own (C7519/C7520).
    # A from registers: its 16-bit values packed in pairs before the fence, so no
    # register a wgmma reads is written after it (ptxas would otherwise insert a
    # warpgroup.arrive before each wgmma, C7519, and where wgmmas are in flight across
    # a branch serialize every wgmma of the kernel, C7520)
    if isinstance(a, Frag) and elem not in ("f16", "bf16"):
        raise TileIRError(f"wgmma with operand A in registers takes f16/bf16, not {elem}",
                          ir.Location.current)
    # `chained`: the accumulator is an earlier wgmma's, still in flight (a chain of
    # products issued together, backend/pipeline/product_rotation.py).  Accesses of one
    # accumulator by wgmmas of the same shape are ordered without a fence, and tying
    # its registers to one would define them between the two wgmmas: ptxas then
    # serializes every wgmma of the kernel (C7513)
    a_regs = _pairs(list(a.regs)) if isinstance(a, Frag) else []
    if chained:
        regs = list(acc.regs)
        packed = _tied(a_regs, "wgmma.fence.sync.aligned;") if a_regs else []
    else:
        tied = _tied(list(acc.regs) + a_regs, "wgmma.fence.sync.aligned;")
        regs = tied[:len(acc.regs)]
        packed = tied[len(acc.regs):]
    if packed_out is not None:
        packed_out.extend(packed)
    for kk in range(k // step):
        # a ring view copied in parts: this k step's boxes waited for, before it reads them
        _wait_parts(cx, a, 1, (kk * step, (kk + 1) * step))
        _wait_parts(cx, b, 0, (kk * step, (kk + 1) * step))
        for mi in range(rm):
            for ni in range(rn):
                base = (ni + mi * rn) * per
                desc_b = db.at(cx, (kk * step, ni * inn))
                if da is not None:
                    desc_a = da.at(cx, (mi * im, kk * step))
                    out = _wgmma_ss(regs[base:base + per], desc_a, desc_b, inn, elem,
                                    da.k_major, db.k_major, f32, elem_b or elem)
                else:
                    # instruction row mi, k step kk: 8 values (DotOperand order), paired
                    at = (kk + mi * (k // step)) * 4
                    out = _wgmma_rs(regs[base:base + per], packed[at:at + 4], desc_b, inn,
                                    elem, db.k_major)
                regs[base:base + per] = out
    nvvm.wgmma_commit_group_sync_aligned()
    return Frag(acc.lin, acc.elem, regs)


def _wait_parts(cx: LoweringContext, tile, k_dim: int, ks: tuple[int, int] | None = None):
    """Waits for the boxes of a ring view copied in parts (rules/ring.py `Parts`) that
    elements [k0, k1) = `ks` of the product's K (dim `k_dim` of the operand tile) read
    (`copy_parts.boxes_read`); all its boxes without `ks`."""
    if not isinstance(tile, SmemTile) or isinstance(tile.base, int):
        return
    parts = cx.smem_parts.get(tile.base)
    if parts is None:
        return
    # (a sub-tile's coordinates are offset from the view's: all its boxes)
    parts.wait(cx, boxes_read(tile.layout.order, k_dim, None if tile.xor else ks,
                              parts.box_elems, len(parts.barriers)))


# Accumulator columns one promoted chunk sums (its partial sums: 32 registers a thread)
PROMOTE_COLUMNS = 64


def _wgmma_promoted(cx: LoweringContext, lay: Mma, a, b, acc: Frag, elem: str,
                    elem_b: str) -> Frag:
    """`a @ b + acc` of fp8 operands summed into f32 (`promotes_sums`): for each chunk of
    PROMOTE_COLUMNS accumulator columns, its products over the tile's K are summed on
    the tensor cores into registers of their own, from zero (the first k step scales D
    by 0), then waited for and added to the accumulator with f32 adds.  The tensor
    cores' fp8 sums, which keep fewer bits than f32, then span one tile's K, not the
    loop's.  Chunks go in turn, each waited for before the next: one chunk's partial
    sums live beside the accumulator.  (Measured on the H100, fp8 at 4096^3 and 8192^3:
    0.62-0.63x cuBLAS's f32-summing fp8 GEMM, against 0.49-0.50 for the whole tile's
    sums before the adds and 0.50-0.51 for chunk c + 1 issued before chunk c is added.)"""
    m, n = acc.shape
    k = a.shape[1]
    step = K_STEP[elem]
    rm, rn = lay.reps(acc.shape)
    im, inn = lay.instr
    per = inn // 2
    row0, col0 = _group_origin(cx, lay, acc.shape)
    bm, bn = lay.block(acc.shape)
    if not isinstance(a, SmemTile) or not isinstance(b, SmemTile):
        raise TileIRError("internal error: promoted fp8 wgmma takes both operands from shared "
                          "memory", ir.Location.current)
    db = _Desc(cx, b, 0, 1, col0, (bn, n))
    da = _Desc(cx, a, 1, 0, row0, (bm, m))
    _wait_parts(cx, a, 1)            # (ring views copied in parts: all their boxes)
    _wait_parts(cx, b, 0)
    f32 = ir.F32Type.get()
    width = min(inn, PROMOTE_COLUMNS)
    regs = list(acc.regs)
    undef = llvm.UndefOp(f32).result
    chunks = [((ni + mi * rn) * per + j * (width // 2), mi, ni * inn + j * width)
              for mi in range(rm) for ni in range(rn) for j in range(inn // width)]

    def issue(mi: int, col: int) -> list[ir.Value]:
        part = _tied([undef] * (width // 2), "wgmma.fence.sync.aligned;")
        for kk in range(k // step):
            part = _wgmma_ss(part, da.at(cx, (mi * im, kk * step)),
                             db.at(cx, (kk * step, col)), width, elem, da.k_major,
                             db.k_major, f32, elem_b, accumulate=kk > 0)
        nvvm.wgmma_commit_group_sync_aligned()
        return part

    def add(base: int, part: list[ir.Value], pending: int) -> None:
        part = _tied_wait(part, pending)
        regs[base:base + width // 2] = [arith.addf(r, p) for r, p in
                                        zip(regs[base:base + width // 2], part)]

    for base, mi, col in chunks:
        add(base, issue(mi, col), 0)
    return Frag(acc.lin, acc.elem, regs)


def _wgmma_ss(d: list[ir.Value], desc_a, desc_b, n: int, elem: str, a_k_major: bool,
              b_k_major: bool, f32, elem_b: str, accumulate: bool = True) -> list[ir.Value]:
    """wgmma with both operands in shared memory; B's type may differ from A's (e4m3 x
    e5m2).  Without `accumulate`, D = A * B (its input is not read)."""
    st = _struct(len(d))
    t = ir.Attribute.parse(f"#nvvm.wgmma_type<{_WGMMA_TYPE[elem]}>")
    tb = ir.Attribute.parse(f"#nvvm.wgmma_type<{_WGMMA_TYPE[elem_b]}>")
    one_in = ir.Attribute.parse("#nvvm.wgmma_scale_in<one>")
    # K-major A is "row", K-major B is "col" (BLAS's non-transposed operands)
    lay_a = ir.Attribute.parse(f"#nvvm.mma_layout<{'row' if a_k_major else 'col'}>")
    lay_b = ir.Attribute.parse(f"#nvvm.mma_layout<{'col' if b_k_major else 'row'}>")
    r = nvvm.WgmmaMmaAsyncOp(
        st, _pack(d, st), desc_a, desc_b,
        ir.Attribute.parse(f"#nvvm.shape<m = 64, n = {n}, k = {K_STEP[elem]}>"), t, tb,
        ir.Attribute.parse("#nvvm.wgmma_type<f32>"),
        ir.Attribute.parse(f"#nvvm.wgmma_scale_out<{'one' if accumulate else 'zero'}>"),
        one_in, one_in, lay_a, lay_b).result
    return _unpack(r, len(d), f32)


def _pairs(values: list[ir.Value]) -> list[ir.Value]:
    """16-bit values packed two per 32-bit register (low half first)."""
    out = []
    vt = ir.VectorType.get([2], values[0].type)
    for i in range(0, len(values), 2):
        v = llvm.UndefOp(vt).result
        v = llvm.insertelement(v, values[i], arith.ConstantOp(I32(), 0).result)
        v = llvm.insertelement(v, values[i + 1], arith.ConstantOp(I32(), 1).result)
        out.append(llvm.bitcast(I32(), v))
    return out


def _wgmma_rs(d: list[ir.Value], a: list[ir.Value], desc_b, n: int, elem: str,
              b_k_major: bool) -> list[ir.Value]:
    """wgmma with A from registers (four 32-bit registers, each a packed pair of 16-bit
    values): inline PTX, the NVVM op takes descriptors only."""
    nd = len(d)
    dregs = ", ".join(f"${i}" for i in range(nd))
    aregs = ", ".join(f"${nd + nd + i}" for i in range(4))
    bdesc = f"${nd + nd + 4}"
    one = f"${nd + nd + 5}"
    # scale-d is a predicate operand: accumulate (d = a * b + d)
    asm = (f"{{\n.reg .pred p;\nsetp.ne.b32 p, {one}, 0;\n"
           f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{elem}.{elem} {{{dregs}}}, "
           f"{{{aregs}}}, {bdesc}, p, 1, 1, {0 if b_k_major else 1};\n}}")
    cons = ",".join(["=f"] * nd + [str(i) for i in range(nd)] + ["r"] * 4 + ["l", "r"])
    r = llvm.inline_asm(_struct(nd), [*d, *a, desc_b, arith.ConstantOp(I32(), 1).result], asm,
                        cons, has_side_effects=True)
    return _unpack(r, nd, ir.F32Type.get())


def _wait_many(cx: LoweringContext, frags: list[Frag], pending: int) -> list[Frag]:
    regs = [r for f in frags for r in f.regs]
    tied = _tied_wait(regs, pending)
    out, i = [], 0
    for f in frags:
        out.append(Frag(f.lin, f.elem, tied[i:i + len(f.regs)]))
        i += len(f.regs)
    return out


def _wait(cx: LoweringContext, acc: Frag, pending: int, version: int) -> Frag:
    if version != 3:
        return acc
    return _wait_many(cx, [acc], pending)[0]


def _tied_wait(regs: list[ir.Value], pending: int) -> list[ir.Value]:
    """`wgmma.wait_group.sync.aligned pending`, the registers passed through it."""
    return _tied(regs, f"wgmma.wait_group.sync.aligned {pending};")


_CONSTRAINT = {"f32": "f", "i32": "r", "f16": "h", "bf16": "h"}


def _tied(regs: list[ir.Value], asm: str) -> list[ir.Value]:
    """`asm` (a side-effecting statement) with `regs` passed through it: whatever reads
    the results comes after it, whatever wrote the operands before it."""
    n = len(regs)
    if n == 0:
        llvm.inline_asm(None, [], asm, "", has_side_effects=True)
        return []
    types = [r.type for r in regs]
    st = ir.Type.parse("!llvm.struct<(" + ", ".join(str(t) for t in types) + ")>")
    outs = ",".join("=" + _CONSTRAINT.get(str(t), "r") for t in types)
    cons = outs + "," + ",".join(str(i) for i in range(n))
    r = llvm.inline_asm(st, regs, asm, cons, has_side_effects=True)
    return [llvm.extractvalue(t, r, ir.DenseI64ArrayAttr.get([i])) for i, t in enumerate(types)]


# ---------------------------------------------------------------------------
# mma.sync
# ---------------------------------------------------------------------------
def _mma_sync(cx: LoweringContext, lay: Mma, a, b, acc: Frag, elem: str, op) -> Frag:
    """mma.sync per (k step, instruction): m16n8k16 for f16/bf16, m16n8k8 for f32 as
    tf32 (fragments of one f32 a register: `DotOperand.kwidth` 1).  An operand in
    shared memory is read one k step at a time (ldmatrix for 16-bit types, 4-byte
    loads for tf32: what keeps the fragments of a whole K slice out of the
    registers); one in registers must be an `#tile.mma_operand`."""
    if elem not in ("f16", "bf16", "f32"):
        raise TileIRError(f"mma.sync on {elem} operands is not lowered yet (f16/bf16 and "
                          f"f32 as tf32 are)", op.location)
    for v, index in ((op.a, 0), (op.b, 1)):
        got = tile_layout(v.type)
        if not (isinstance(got, Shared) or (isinstance(got, DotOperand) and
                                            got.index == index)):
            raise TileIRError(f"internal error: mma.sync operand {index} has layout {got}",
                              op.location)
    kwidth = 1 if elem == "f32" else 2
    opa, opb = DotOperand(0, lay, kwidth), DotOperand(1, lay, kwidth)
    step = opa.k_step
    m, n = acc.shape
    k = a.shape[1]
    rm, rn = lay.reps(acc.shape)
    nk = k // step
    f32 = ir.F32Type.get()
    st = _struct(4)
    regs = list(acc.regs)
    t = ir.Attribute.parse(f"#nvvm.mma_type<{'tf32' if elem == 'f32' else elem}>")
    shape = ir.Attribute.parse(f"#nvvm.shape<m = 16, n = 8, k = {step}>")
    per_a, per_b = 4 * kwidth, 2 * kwidth          # elements of one fragment
    for kk in range(nk):
        # this k step's fragments: (registers, k steps they hold)
        fa, ka = (_step_fragment(cx, a, opa, (m, step), (0, kk * step)), 1) \
            if isinstance(a, SmemTile) else (a, nk)
        fb, kb = (_step_fragment(cx, b, opb, (step, n), (kk * step, 0)), 1) \
            if isinstance(b, SmemTile) else (b, nk)
        ia = 0 if ka == 1 else kk
        ib = 0 if kb == 1 else kk
        for mi in range(rm):
            at = (ia + mi * ka) * per_a
            a_regs = _registers(fa.regs[at:at + per_a], elem)
            for ni in range(rn):
                bt = (ib + ni * kb) * per_b
                b_regs = _registers(fb.regs[bt:bt + per_b], elem)
                base = (ni + mi * rn) * 4
                r = nvvm.mma_sync(st, shape, ir.Attribute.parse("#nvvm.mma_layout<row>"),
                                  ir.Attribute.parse("#nvvm.mma_layout<col>"),
                                  a_regs, b_regs, regs[base:base + 4],
                                  multiplicand_a_ptx_type=t, multiplicand_b_ptx_type=t)
                regs[base:base + 4] = _unpack(r, 4, f32)
    return Frag(acc.lin, acc.elem, regs)


def _step_fragment(cx, tile: SmemTile, layout: DotOperand, shape, origin) -> Frag:
    """The fragment of one k step of a shared operand (ldmatrix where it fits)."""
    return load_frag(cx, tile.at(origin), layout.linear(shape))


# ---------------------------------------------------------------------------
# The FMA units: products no tensor-core instruction fits
# ---------------------------------------------------------------------------
def _mma_fma(cx: LoweringContext, op) -> Frag:
    """`a @ b + acc` on the FMA units: each thread accumulates its own elements of the
    accumulator (its layout's), reading a row of A and a column of B from the
    row-major shared operands one k at a time (f32 for 8- and 16-bit floats, f64,
    i32 for i8), then rounds once to the accumulator type."""
    acc = cx.frag(op.acc)
    a, b = cx.get(op.a), cx.get(op.b)
    if not (isinstance(a, SmemTile) and isinstance(b, SmemTile)) or a.layout.swizzle or \
            b.layout.swizzle:
        raise TileIRError(f"tile.mma with a {tile_layout(op.acc.type).attr()} accumulator runs "
                          f"on the FMA units and needs both operands in unswizzled shared "
                          f"memory (#tile.shared<0 : i64, ...>), as the layout stage assigns "
                          f"them; got {op.a.type} and {op.b.type}", op.location)
    elem = op.a.type.element_type
    work = _fma_type(elem)
    lin = acc.lin
    k = a.shape[1]
    tc = cx.thread_coords(lin)
    ea, eb = a.elem_bytes, b.elem_bytes
    sa = [a.offset((1, 0)), a.offset((0, 1))]           # byte strides (no swizzle: linear)
    sb = [b.offset((1, 0)), b.offset((0, 1))]
    coords = [lin.reg_coord(r) for r in range(lin.num_regs)]
    rows = sorted({c[0] for c in coords})
    cols = sorted({c[1] for c in coords})

    def base(tile, dim_value, stride):
        start = tile.base if not isinstance(tile.base, int) else cx.const(tile.base)
        return arith.addi(start, arith.muli(dim_value, cx.const(stride)))

    a_rows = {m: base(a, arith.addi(tc[0], cx.const(m)), sa[0]) for m in rows}
    b_cols = {n: base(b, arith.addi(tc[1], cx.const(n)), sb[1]) for n in cols}
    init = [_cast_to(v, work) for v in acc.regs]
    loop = scf.ForOp(cx.const(0), cx.const(k), cx.const(1), init)
    with ir.InsertionPoint(loop.body):
        kk = loop.induction_variable
        av = {m: _read_elem(cx, arith.addi(p, arith.muli(kk, cx.const(sa[1]))), a, ea, work)
              for m, p in a_rows.items()}
        bv = {n: _read_elem(cx, arith.addi(p, arith.muli(kk, cx.const(sb[0]))), b, eb, work)
              for n, p in b_cols.items()}
        out = []
        for (m, n), c in zip(coords, loop.inner_iter_args):
            if isinstance(work, ir.IntegerType):
                out.append(arith.addi(c, arith.muli(av[m], bv[n])))
            else:                                       # one rounding per step: FFMA
                out.append(math.fma(av[m], bv[n], c))
        scf.YieldOp(out)
    regs = [_cast_to(v, acc.elem) for v in loop.results]
    return Frag(lin, acc.elem, regs)


def _fma_type(elem: ir.Type) -> ir.Type:
    s = str(elem)
    if s == "f64":
        return ir.F64Type.get()
    if isinstance(elem, ir.IntegerType):
        return I32()
    return ir.F32Type.get()


def _read_elem(cx, offset, tile: SmemTile, nbytes: int, work: ir.Type) -> ir.Value:
    from .elementwise import fp8_to_f32
    rt = reg_type(tile.elem)
    v = llvm.load(rt, cx.smem_ptr(offset), alignment=nbytes)
    if is_fp8(tile.elem):
        return fp8_to_f32(cx, v, tile.elem)
    return _cast_to(v, work)


def _cast_to(v: ir.Value, t: ir.Type) -> ir.Value:
    """`v` as `t`, of the same kind: extended when `t` is wider, truncated when narrower."""
    if v.type == t:
        return v
    wider = _bits(t) > _bits(v.type)
    if isinstance(t, ir.IntegerType):
        return arith.extsi(t, v) if wider else arith.trunci(t, v)
    return arith.extf(t, v) if wider else arith.truncf(t, v)


def _registers(values: list[ir.Value], elem: str) -> list[ir.Value]:
    """A fragment's elements as nvvm.mma.sync takes them: packed pairs, i32 for bf16
    and vector<2xf16> for f16; one f32's bits (i32) per register for tf32."""
    if elem == "f32":
        return [arith.bitcast(ir.IntegerType.get_signless(32), v) for v in values]
    packed = _pairs(values)
    if elem == "bf16":
        return packed
    vt = ir.VectorType.get([2], ir.Type.parse(elem))
    return [llvm.bitcast(vt, p) for p in packed]
