"""Lowering of `tile.load` / `tile.store` to per-thread global memory accesses.

Each thread walks its registers in groups of `v` consecutive elements along the
last dim.  For arrays specialized as aligned (docs/gpu-backend.md) a group is
one 16-byte (or narrower) vector access: a fully in-bounds group takes the
plain vector path; a group straddling the array edge takes a masked access
(NVPTX predicates it per element).  Unaligned arrays use predicated scalar
accesses.  Out-of-range loads read the padding value; out-of-range stores are
dropped.  An access marked `tile.in_bounds` (tile-version-bounds: its whole tile
lies inside the array) takes the plain path alone, with no bounds checks.  `i1`
tiles live in memory as bytes.  16-byte loads from arrays many times the L2 cache carry an L2 evict_last policy (`_wants_l2_policy`); 16-byte
stores to such arrays are streaming (`st.global.cs`).
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, llvm, scf, vector

from tileir.dialect.tile import IN_BOUNDS_ATTR, access_scope

from tileir.backend.layout import layouts as L
from .context import I64, ArrayABI, Frag, LoweringContext, _bits, lin_of, reg_type

_DYNAMIC_INDEX = -2147483648     # llvm.getelementptr's marker for a dynamic index


def storage_type(elem: ir.Type) -> ir.Type:
    """How elements sit in memory and in load/store vectors: i1 as bytes, fp8 as its bits."""
    return ir.IntegerType.get_signless(8) if _is_i1(elem) else reg_type(elem)


def _is_i1(t: ir.Type) -> bool:
    return isinstance(t, ir.IntegerType) and t.width == 1


def gep(ptr: ir.Value, offset: ir.Value, elem: ir.Type) -> ir.Value:
    return llvm.GEPOp(ptr.type, ptr, [offset], ir.DenseI32ArrayAttr.get([_DYNAMIC_INDEX]),
                      ir.TypeAttr.get(elem), None).result


def padding_value(mode: str, elem: ir.Type) -> ir.Value:
    if isinstance(elem, ir.IntegerType):
        return arith.ConstantOp(elem, ir.IntegerAttr.get(elem, 0)).result
    value = {"zero": 0.0, "undetermined": 0.0, "neg_zero": -0.0, "neg_inf": -math.inf,
             "pos_inf": math.inf, "nan": math.nan}[mode]
    return arith.ConstantOp(elem, ir.FloatAttr.get(elem, value)).result


class _Addressing:
    """Element coordinates, offsets and bounds for one tile access.

    Everything per element is derived from the thread's base coordinate (tile
    origin + thread offset, one i64 per dim) and the pointer to that element:
    a group adds compile-time register offsets to them.  Per-element masks are
    built only on the edge path, where they are used, so nothing per element
    stays live across the kernel.
    """

    def __init__(self, cx: LoweringContext, arr: ArrayABI, index: list[ir.Value],
                 lin: L.Linear):
        self.cx, self.arr, self.lin = cx, arr, lin
        thread = cx.thread_coords(lin)
        origin = [arith.muli(arith.extsi(I64(), i), cx.const(s, I64()))
                  for i, s in zip(index, lin.shape)]
        self.base = [arith.addi(o, arith.extsi(I64(), t)) for o, t in zip(origin, thread)]
        self.dims64 = [arith.extsi(I64(), d) for d in arr.dims]
        # (a rank-0 array: its one element, at the pointer)
        self.base_ptr = gep(arr.ptr, self.offset(self.base), storage_type(arr.elem)) \
            if self.base else arr.ptr

    def coords(self, r: int) -> list[ir.Value]:
        return [arith.addi(b, self.cx.const(s, I64())) if s else b
                for b, s in zip(self.base, self.lin.reg_coord(r))]

    def offset(self, coords: list[ir.Value]) -> ir.Value:
        off = None
        last = len(coords) - 1
        for d, (c, st) in enumerate(zip(coords, self.arr.strides)):
            # aligned arrays have a unit last-dim stride (the specialization's
            # promise): the column offset then folds into the address immediate
            term = c if (d == last and self.arr.aligned) else arith.muli(c, st)
            off = term if off is None else arith.addi(off, term)
        return off

    def ptr(self, r: int) -> ir.Value:
        """The address of register `r`'s element: the thread's base pointer plus the
        register's static offset (an address immediate on the unit-stride dim)."""
        static = self.lin.reg_coord(r)
        if not any(static):
            return self.base_ptr
        return gep(self.base_ptr, self.offset([self.cx.const(s, I64()) for s in static]),
                   storage_type(self.arr.elem))

    def in_bounds(self, coords: list[ir.Value], dims: range) -> ir.Value | None:
        cond = None
        for d in dims:
            ok = arith.cmpi(arith.CmpIPredicate.ult, coords[d], self.dims64[d])
            cond = ok if cond is None else arith.andi(cond, ok)
        return cond

    def element_in_bounds(self, r: int) -> ir.Value:
        """Whether register `r`'s element is inside the array (always, at rank 0)."""
        ok = self.in_bounds(self.coords(r), range(len(self.lin.shape)))
        return ok if ok is not None else \
            arith.constant(ir.IntegerType.get_signless(1), 1)

    def thread_in_bounds(self) -> ir.Value:
        """Whether every element this thread touches is inside the array: its largest
        coordinate per dim is (unsigned compare: a negative origin fails too)."""
        cond = None
        for d in range(len(self.lin.shape)):
            top = max(self.lin.reg_coord(r)[d] for r in range(self.lin.num_regs))
            hi = arith.addi(self.base[d], self.cx.const(top, I64())) if top else self.base[d]
            ok = arith.andi(arith.cmpi(arith.CmpIPredicate.ult, hi, self.dims64[d]),
                            arith.cmpi(arith.CmpIPredicate.ult, self.base[d], self.dims64[d]))
            cond = ok if cond is None else arith.andi(cond, ok)
        return cond

    def vector_width(self, elem: ir.Type) -> int:
        if not self.arr.aligned:
            return 1
        last = len(self.lin.shape) - 1
        return max(1, min(self.lin.contiguous_regs(last), 16 // max(1, _bits(elem) // 8)))

    def element_masks(self, coords: list[ir.Value], v: int) -> list[ir.Value]:
        """Whether each of the `v` elements from `coords` along the last dim is in bounds."""
        last = len(coords) - 1
        other = self.in_bounds(coords, range(last))
        per = []
        for j in range(v):
            c = arith.addi(coords[last], self.cx.const(j, I64())) if j else coords[last]
            ok = arith.cmpi(arith.CmpIPredicate.ult, c, self.dims64[last])
            per.append(arith.andi(other, ok) if other is not None else ok)
        return per

    def group_touches(self, coords: list[ir.Value], per: list[ir.Value]) -> ir.Value:
        """Whether an element of a group along the last dim (per-element masks `per`)
        may be in bounds: its first is, or it starts below 0 (a negative tile index:
        the group may then reach into the array).  A group that starts at or past the
        end, or whose other coordinates are outside, lies wholly outside: False.
        (`per[-1]` adds nothing to the answer but measured faster: with it LayerNorm at
        7168 wide ran at 0.912x copy on the H100, without it 0.898; bench/RESULTS.md.)"""
        below = arith.cmpi(arith.CmpIPredicate.slt, coords[len(coords) - 1],
                           self.cx.const(0, I64()))
        return arith.ori(arith.ori(per[0], per[-1]), below)


# A 16-byte load with an L2 cache policy operand (`createpolicy`).
_POLICY_LOAD = "ld.global.L2::cache_hint.v4.b32 {$0, $1, $2, $3}, [$4], $5;"


def _wants_l2_policy(cx: LoweringContext, arr: ArrayABI) -> bool:
    """Loads of an array many times the L2 cache stream from DRAM in any case; marking
    them L2 `evict_last` measured faster on an H200 (bench/RESULTS.md; the DRAM bytes
    are the same either way, so presumably the cache's write-back order changes).
    For arrays that fit, the same policy measured slower: they lose their reuse
    between kernels."""
    return arr.large if cx.cache_hints is None else cx.cache_hints


def lower_load(cx: LoweringContext, op) -> None:
    lin = lin_of(op.result.type)
    arr, index = cx.arrays[op.array], [cx.get(i) for i in op.index]
    cx.loaded_arrays.add(id(arr))
    scope = access_scope(op.operation)
    cx.values[op.result] = relaxed_load(cx, arr, index, lin, op.padding, scope) \
        if scope else load_tile(cx, arr, index, lin, op.padding,
                                checked=IN_BOUNDS_ATTR not in op.operation.attributes)


# cuTile's memory scopes as PTX's (relaxed accesses, fences)
PTX_SCOPE = {"block": "cta", "device": "gpu", "sys": "sys"}
# an element of this many bits in inline PTX: (register constraint, move type)
PTX_REGISTER = {8: ("h", "b8"), 16: ("h", "b16"), 32: ("r", "b32"), 64: ("l", "b64")}


def relaxed_load(cx: LoweringContext, arr: ArrayABI, index: list[ir.Value], lin: L.Linear,
                 padding: str, scope: str) -> Frag:
    """A load whose every element is a relaxed (strong) read at `scope`
    (`ld.relaxed.<scope>.global`: coherent at that scope, never served stale from L1):
    cuTile's memory_order RELAXED and ACQUIRE (flags, and partial results handed
    between blocks, such as split-KV's outputs that the last block merges).  32-bit
    elements that sit four in a row in a thread's registers (an aligned array) are
    read 16 bytes at a time where the thread's whole tile is inside the array
    (`ld.relaxed.<scope>.global.v4.b32`: PTX takes a vector access as one relaxed
    read of each element), else one element at a time, each where it is in bounds."""
    addr = _Addressing(cx, arr, index, lin)
    store_t = storage_type(arr.elem)
    pad = padding_value(padding, store_t)
    bits = max(8, _bits(store_t))
    reg, width = PTX_REGISTER[bits]
    word = ir.IntegerType.get_signless(16 if bits == 8 else bits)
    sem = f"ld.relaxed.{PTX_SCOPE[scope]}.global"

    def elements() -> list[ir.Value]:
        regs = []
        for r in range(lin.num_regs):
            if_op = scf.IfOp(addr.element_in_bounds(r), [store_t], has_else=True)
            with ir.InsertionPoint(if_op.then_block):
                v = llvm.inline_asm(word, [addr.ptr(r)], f"{sem}.{width} $0, [$1];",
                                    f"={reg},l", has_side_effects=True)
                v = arith.trunci(store_t, v) if bits == 8 else v
                scf.YieldOp([v if v.type == store_t else arith.bitcast(store_t, v)])
            with ir.InsertionPoint(if_op.else_block):
                scf.YieldOp([pad])
            regs.append(if_op.results[0])
        return regs

    if bits != 32 or not lin.shape or addr.vector_width(store_t) != 4:
        regs = elements()
    else:
        i32 = ir.IntegerType.get_signless(32)
        if_op = scf.IfOp(addr.thread_in_bounds(), [store_t] * lin.num_regs, has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            out = []
            for r0 in range(0, lin.num_regs, 4):
                words = _four_words(f"{sem}.v4.b32 {{$0, $1, $2, $3}}, [$4];", [addr.ptr(r0)],
                                    "l", side_effects=True)
                out += [w if store_t == i32 else arith.bitcast(store_t, w) for w in words]
            scf.YieldOp(out)
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp(elements())
        regs = list(if_op.results)
    if _is_i1(arr.elem):
        zero = cx.const(0, store_t)
        regs = [arith.cmpi(arith.CmpIPredicate.ne, r, zero) for r in regs]
    return Frag(lin, arr.elem, regs)


def _relaxed_store(cx: LoweringContext, addr: "_Addressing", frag: Frag, regs: list,
                   store_t: ir.Type, scope: str) -> None:
    """Each element in bounds written by `st.relaxed.<scope>.global` (see relaxed_load)."""
    bits = max(8, _bits(store_t))
    reg, width = PTX_REGISTER[bits]
    word = ir.IntegerType.get_signless(16 if bits == 8 else bits)
    for r in range(frag.lin.num_regs):
        if_op = scf.IfOp(addr.element_in_bounds(r), [], has_else=False)
        with ir.InsertionPoint(if_op.then_block):
            v = regs[r] if regs[r].type == word or bits == 8 else arith.bitcast(word, regs[r])
            v = arith.extui(word, v) if bits == 8 else v
            llvm.inline_asm(ir.Type.parse("!llvm.void"), [addr.ptr(r), v],
                            f"st.relaxed.{PTX_SCOPE[scope]}.global.{width} [$0], $1;",
                            f"l,{reg}", has_side_effects=True)
            scf.YieldOp([])


def load_tile(cx: LoweringContext, arr: ArrayABI, index: list[ir.Value], lin: L.Linear,
              padding: str, checked: bool = True) -> Frag:
    """The tile at tile index `index` of `arr`, in registers laid out as `lin`
    (`checked=False`: the caller knows the whole tile lies inside the array)."""
    addr = _Addressing(cx, arr, index, lin)
    store_t = storage_type(arr.elem)
    pad = padding_value(padding, store_t)
    v = addr.vector_width(store_t)
    vt = ir.VectorType.get([v], store_t)
    starts = range(0, lin.num_regs, v)
    ptrs = [addr.ptr(r0) for r0 in starts]
    # Policy loads are inline PTX that LLVM may reorder like pure code: only safe
    # while no store can come before them in program order (stores stay in order), and
    # after a wait for the previous kernel only through the wait's token (an operand).
    policy = None
    if _wants_l2_policy(cx, arr) and not cx.stores_seen and \
            v * max(1, _bits(store_t) // 8) == 16:
        policy = cx.l2_evict_last()

    def plain() -> list[ir.Value]:
        return [_policy_load(vt, p, policy, cx.wait_token) if policy else _plain_load(vt, p)
                for p in ptrs]

    if checked and lin.shape:        # (a rank-0 array's one element is always there)
        # One branch per tile, not per group: interior tiles (the common case) run
        # straight-line 16-byte loads that the scheduler can issue back to back.
        if_op = scf.IfOp(addr.thread_in_bounds(), [vt] * len(ptrs), has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            scf.YieldOp(plain())
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp([_edge_load(addr, addr.coords(r0), p, vt, pad)
                         for r0, p in zip(starts, ptrs)])
        vectors = list(if_op.results)
    else:
        vectors = plain()
    regs: list[ir.Value] = []
    for res in vectors:
        regs.extend(vector.extract(res, [], [j]) for j in range(v))
    if _is_i1(arr.elem):
        zero = cx.const(0, store_t)
        regs = [arith.cmpi(arith.CmpIPredicate.ne, r, zero) for r in regs]
    return Frag(lin, arr.elem, regs)


def _plain_load(vt: ir.VectorType, ptr: ir.Value) -> ir.Value:
    return llvm.load(vt, ptr, alignment=vt.shape[0] * max(1, _bits(vt.element_type) // 8))


def _policy_load(vt: ir.VectorType, ptr: ir.Value, policy: ir.Value,
                 after: ir.Value | None = None) -> ir.Value:
    """`after`: a value the load must follow (the wait's token), an unused operand."""
    i32 = ir.IntegerType.get_signless(32)
    # pure: the scheduler batches these loads like ordinary ones (callers ensure no
    # store precedes them)
    if after is not None:
        words = _four_words(_POLICY_LOAD, [ptr, policy, after], "l,l,r")
    else:
        words = _four_words(_POLICY_LOAD, [ptr, policy], "l,l")
    return vector.bitcast(vt, vector.from_elements(ir.VectorType.get([4], i32), words))


def _four_words(asm: str, operands: list, constraints: str,
                side_effects: bool = False) -> list[ir.Value]:
    """The four i32 results of a 16-byte inline-PTX load (`{$0, $1, $2, $3}` first)."""
    i32 = ir.IntegerType.get_signless(32)
    st = ir.Type.parse("!llvm.struct<(i32, i32, i32, i32)>")
    r = llvm.inline_asm(st, operands, asm, "=r,=r,=r,=r," + constraints,
                        has_side_effects=side_effects)
    return [llvm.extractvalue(i32, r, ir.DenseI64ArrayAttr.get([i])) for i in range(4)]


def _edge_load(addr: "_Addressing", coords, ptr, vt: ir.VectorType, pad: ir.Value) -> ir.Value:
    """A group at the array's edge: the whole vector if it is in bounds, the padding if
    none of it is (one more check: a group wholly past the edge, as the last groups of
    a 7168-wide row in an 8192-long tile are, skips the per-element masks), else per
    element."""
    v = vt.shape[0]
    per = addr.element_masks(coords, v)
    # first and last: a negative tile index can put the group's start below 0
    full = arith.andi(per[0], per[-1]) if v > 1 else per[0]
    i1v = ir.VectorType.get([v], ir.IntegerType.get_signless(1))
    if v == 1:
        return vector.from_elements(vt, [_guarded_scalar_load(ptr, full, pad, vt.element_type)])
    if_op = scf.IfOp(full, [vt], has_else=True)
    with ir.InsertionPoint(if_op.then_block):
        scf.YieldOp([_plain_load(vt, ptr)])
    with ir.InsertionPoint(if_op.else_block):
        part = scf.IfOp(addr.group_touches(coords, per), [vt], has_else=True)
        with ir.InsertionPoint(part.then_block):
            if v == 2:
                # LLVM 22's NVPTX aborts on a 2-element masked load with a passthru
                # (it lowers those to one load with a used-bytes mask, which takes no
                # passthru): two guarded element loads instead
                scf.YieldOp([_element_loads(vt, ptr, per, pad)])
            else:
                mask = vector.from_elements(i1v, per)
                align = v * max(1, _bits(vt.element_type) // 8)
                scf.YieldOp([llvm.intr_masked_load(vt, ptr, mask, align,
                                                   pass_thru=vector.broadcast(vt, pad))])
        with ir.InsertionPoint(part.else_block):
            scf.YieldOp([vector.broadcast(vt, pad)])
        scf.YieldOp([part.results[0]])
    return if_op.results[0]


def _element_loads(vt: ir.VectorType, ptr, masks, pad) -> ir.Value:
    """A vector of `vt` at `ptr` read element by element, each where its mask holds,
    else `pad`."""
    t, i64 = vt.element_type, ir.IntegerType.get_signless(64)
    elems = [_guarded_scalar_load(ptr if j == 0 else gep(ptr, arith.constant(i64, j), t),
                                  m, pad, t) for j, m in enumerate(masks)]
    return vector.from_elements(vt, elems)


def _guarded_scalar_load(ptr, cond, pad, t) -> ir.Value:
    if_op = scf.IfOp(cond, [t], has_else=True)
    with ir.InsertionPoint(if_op.then_block):
        scf.YieldOp([llvm.load(t, ptr, alignment=max(1, _bits(t) // 8))])
    with ir.InsertionPoint(if_op.else_block):
        scf.YieldOp([pad])
    return if_op.results[0]


def replicated(lin) -> bool:
    """Whether the layout holds some element in several threads (a lane or warp bit
    that moves no coordinate): a small tile in a block sized for a larger one."""
    return any(not any(b) for b in lin.lanes + lin.warps)


def lower_store(cx: LoweringContext, op) -> None:
    cx.stores_seen = True
    arr = cx.arrays[op.array]
    frag = cx.frag(op.tile)
    if id(arr) in cx.loaded_arrays and replicated(frag.lin):
        # A tile store follows the block's earlier loads of its array (tile order).
        # Every copy of a replicated element stores it, and one thread's store may
        # overwrite an element before another copy's load of it has run: an update
        # in place would read its own result (RoPE rotated twice).  The block gathers
        # first; each thread has its loaded values in registers by then.
        cx.barrier()
    addr = _Addressing(cx, arr, [cx.get(i) for i in op.index], frag.lin)
    store_t = storage_type(arr.elem)
    regs = frag.regs
    if _is_i1(arr.elem):
        regs = [arith.extui(store_t, r) for r in regs]
    scope = access_scope(op.operation)
    if scope:
        _relaxed_store(cx, addr, frag, regs, store_t, scope)
        return
    v = addr.vector_width(store_t)
    vt = ir.VectorType.get([v], store_t)
    align = v * max(1, _bits(store_t) // 8)
    groups = [(r0, addr.ptr(r0), vector.from_elements(vt, regs[r0:r0 + v]))
              for r0 in range(0, frag.lin.num_regs, v)]
    streaming = align == 16 and _wants_l2_policy(cx, arr)

    def plain() -> None:
        for _, ptr, value in groups:
            if streaming:
                _streaming_store(ptr, value)
            else:
                llvm.store(value, ptr, alignment=align)

    if IN_BOUNDS_ATTR in op.operation.attributes or not frag.lin.shape:   # all inside
        plain()
        return
    if_op = scf.IfOp(addr.thread_in_bounds(), [], has_else=True)
    with ir.InsertionPoint(if_op.then_block):        # interior: straight-line stores
        plain()
        scf.YieldOp([])
    with ir.InsertionPoint(if_op.else_block):        # edge: each group checked
        for r0, ptr, value in groups:
            _edge_store(addr, addr.coords(r0), ptr, value, v, align)
        scf.YieldOp([])


# A 16-byte store marked as streaming (`.cs`: evicted first from L1 and L2).
_STREAMING_STORE = "st.global.cs.v4.b32 [$0], {$1, $2, $3, $4};"


def _streaming_store(ptr: ir.Value, value: ir.Value) -> None:
    """Stores to an array many times the L2 cache (`_wants_l2_policy`) stream past it:
    the output is not read again by this kernel, and lines it would otherwise keep
    push out inputs that are (a softmax's row, re-read by its second loop: 2 % faster
    at 8192 x 128256 on the H100, bench/RESULTS.md; kernels that read once unchanged)."""
    i32 = ir.IntegerType.get_signless(32)
    words = vector.bitcast(ir.VectorType.get([4], i32), value)
    llvm.inline_asm(ir.Type.parse("!llvm.void"),
                    [ptr] + [vector.extract(words, [], [j]) for j in range(4)],
                    _STREAMING_STORE, "l,r,r,r,r", has_side_effects=True)


def _edge_store(addr: "_Addressing", coords, ptr, value, v: int, align: int) -> None:
    per = addr.element_masks(coords, v)
    full = arith.andi(per[0], per[-1]) if v > 1 else per[0]
    if_op = scf.IfOp(full, [], has_else=v > 1)
    with ir.InsertionPoint(if_op.then_block):
        llvm.store(value, ptr, alignment=align)
        scf.YieldOp([])
    if v > 1:
        with ir.InsertionPoint(if_op.else_block):
            mask = vector.from_elements(
                ir.VectorType.get([v], ir.IntegerType.get_signless(1)), per)
            llvm.intr_masked_store(value, ptr, mask, align)
            scf.YieldOp([])
