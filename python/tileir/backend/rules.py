"""Per-op lowering rules of the `gpu` stage: layout-annotated Tile IR -> per-thread code.

One function per op, registered by name; each runs under the op's location.
Element-wise `arith`/`math` ops on tiles become the same op on each register;
data movement between threads uses shuffles (reductions) or shared memory
(`smem_exchange`), always bracketed by barriers so every buffer can share
offset 0.
"""

from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, llvm, memref, scf

from tileir.dialect import TileIRError
from tileir.dialect.layout import tile_layout
from . import layouts as L
from .context import I32, Frag, LoweringContext, _bits, index, lin_of
from .memory import lower_load, lower_store

RULES: dict[str, Callable] = {}


def rule(*names: str):
    def deco(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return deco


def lower_block(cx: LoweringContext, block: ir.Block) -> ir.Operation | None:
    """Lowers every op of `block`; returns its terminator (for the parent rule)."""
    for op in block.operations:
        op = op.operation
        if op.name in ("scf.yield", "func.return"):
            return op
        lower_op(cx, op)
    return None


def lower_op(cx: LoweringContext, op: ir.Operation) -> None:
    name = op.name
    fn = RULES.get(name)
    if fn is None and name.startswith(("arith.", "math.")):
        fn = elementwise
    if fn is None:
        raise TileIRError(f"no GPU lowering for '{name}'", op.location)
    with op.location:
        fn(cx, op.opview if name.startswith("tile.") else op)


# ---------------------------------------------------------------------------
# Element-wise
# ---------------------------------------------------------------------------
def _attrs(op: ir.Operation) -> dict:
    return {name: op.attributes[name] for name in op.attributes}


_UPCAST_MATH = ("f16", "bf16")


def elementwise(cx: LoweringContext, op: ir.Operation) -> None:
    name = op.name
    if name == "arith.constant" and isinstance(op.results[0].type, ir.RankedTensorType):
        return splat_constant(cx, op)
    operands = [cx.get(v) for v in op.operands]
    frags = [f for f in operands if isinstance(f, Frag)]
    if not frags:
        new = ir.Operation.create(name, results=[r.type for r in op.results],
                                  operands=operands, attributes=_attrs(op))
        for old, res in zip(op.results, new.results):
            cx.values[old] = res
        return
    lin = frags[0].lin
    if any(f.lin != lin for f in frags):
        raise TileIRError(f"internal error: operands of '{name}' have different layouts",
                          op.location)
    elems = [r.type.element_type for r in op.results]
    out: list[list[ir.Value]] = [[] for _ in elems]
    attrs = _attrs(op)
    for r in range(lin.num_regs):
        args = [f.regs[r] if isinstance(f, Frag) else f for f in operands]
        for k, res in enumerate(_scalar_op(name, elems, args, attrs)):
            out[k].append(res)
    for old, regs, elem in zip(op.results, out, elems):
        cx.values[old] = Frag(lin, elem, regs)


# GPU precision (docs/gpu-backend.md): exp/exp2 use the hardware ex2.approx
# (what Triton's tl.exp does), f32 division div.full.f32 (2 ulp over the full
# range); everything else is IEEE or libdevice-accurate.
_FAST_EXP = ("math.exp", "math.exp2")


def _scalar_op(name: str, elems: list[ir.Type], args: list[ir.Value], attrs: dict):
    if name == "arith.divf" and isinstance(elems[0], ir.F32Type):
        return [llvm.inline_asm(elems[0], args, "div.full.f32 $0, $1, $2;", "=f,f,f")]
    if name in _FAST_EXP:
        attrs = dict(attrs, fastmath=ir.Attribute.parse("#arith.fastmath<afn>"))
    # libdevice has no 16-bit transcendental functions: compute those in f32.
    if name.startswith("math.") and len(elems) == 1 and str(elems[0]) in _UPCAST_MATH:
        f32 = ir.F32Type.get()
        wide = [arith.extf(f32, a) if str(a.type) in _UPCAST_MATH else a for a in args]
        r = ir.Operation.create(name, results=[f32], operands=wide, attributes=attrs).results[0]
        return [arith.truncf(elems[0], r)]
    return list(ir.Operation.create(name, results=elems, operands=args,
                                    attributes=attrs).results)


def splat_constant(cx: LoweringContext, op: ir.Operation) -> None:
    t = op.results[0].type
    value = ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()
    scalar = arith.ConstantOp(t.element_type, value).result
    lin = lin_of(t)
    cx.values[op.results[0]] = Frag(lin, t.element_type, [scalar] * lin.num_regs)


@rule("tensor.splat")
def _splat(cx, op):
    t = op.results[0].type
    lin = lin_of(t)
    cx.values[op.results[0]] = Frag(lin, t.element_type, [cx.get(op.operands[0])] * lin.num_regs)


@rule("tensor.extract")
def _extract(cx, op):
    src = cx.frag(op.operands[0])
    if len(src.shape) != 0:
        raise TileIRError("extracting elements of a tile with indices is not lowered to the "
                          "GPU; reduce to a scalar instead", op.location)
    cx.values[op.results[0]] = src.regs[0]


@rule("tensor.from_elements")
def _from_elements(cx, op):
    t = op.results[0].type
    if t.rank != 0:
        raise TileIRError("tensor.from_elements of more than one element is not lowered to the "
                          "GPU", op.location)
    lin = lin_of(t)
    cx.values[op.results[0]] = Frag(lin, t.element_type, [cx.get(op.operands[0])])


# ---------------------------------------------------------------------------
# Grid and arrays
# ---------------------------------------------------------------------------
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
    lower_load(cx, op)


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


# ---------------------------------------------------------------------------
# Shape ops and layout conversions
# ---------------------------------------------------------------------------
def _reg_index(lin: L.Linear) -> dict[tuple[int, ...], int]:
    return {lin.reg_coord(r): r for r in range(lin.num_regs)}


@rule("tile.broadcast")
def _broadcast(cx, op):
    src = cx.frag(op.source)
    res_lin = lin_of(op.result.type)
    r = L.restrict(res_lin, src.shape)
    if r.lanes != src.lin.lanes or r.warps != src.lin.warps:
        raise TileIRError("internal error: broadcast between incompatible layouts", op.location)
    where = _reg_index(src.lin)
    regs = []
    for i in range(res_lin.num_regs):
        c = tuple(v if v < s else 0 for v, s in zip(res_lin.reg_coord(i), src.shape))
        regs.append(src.regs[where[c]])
    cx.values[op.result] = Frag(res_lin, src.elem, regs)


def _squeeze(lin: L.Linear) -> tuple:
    keep = [d for d, s in enumerate(lin.shape) if s != 1]
    pick = lambda c: tuple(c[d] for d in keep)  # noqa: E731
    return (pick(lin.shape), tuple(map(pick, lin.regs)), tuple(map(pick, lin.lanes)),
            tuple(map(pick, lin.warps)))


@rule("tile.reshape")
def _reshape(cx, op):
    src = cx.frag(op.source)
    res_lin = lin_of(op.result.type)
    if _squeeze(src.lin) == _squeeze(res_lin):          # only unit dims change: free
        cx.values[op.result] = Frag(res_lin, src.elem, list(src.regs))
        return
    # row-major order is what reshape preserves: exchange through shared memory
    cx.values[op.result] = smem_exchange(cx, src, res_lin, _row_major(src.shape),
                                         _row_major(res_lin.shape))


@rule("tile.permute")
def _permute(cx, op):
    src = cx.frag(op.source)
    perm = op.permutation
    res_lin = lin_of(op.result.type)
    moved = lambda c: tuple(c[p] for p in perm)  # noqa: E731
    if (tuple(map(moved, src.lin.regs)), tuple(map(moved, src.lin.lanes)),
            tuple(map(moved, src.lin.warps))) == (res_lin.regs, res_lin.lanes, res_lin.warps):
        cx.values[op.result] = Frag(res_lin, src.elem, list(src.regs))
        return
    res_shape = res_lin.shape
    strides = _row_major(res_shape)
    # source element c lands at result coordinate (c[perm[0]], c[perm[1]], ...)
    inv = [perm.index(d) for d in range(len(perm))]
    src_flat = [strides[inv[d]] for d in range(len(perm))]
    cx.values[op.result] = smem_exchange(cx, src, res_lin, src_flat, strides)


@rule("tile.convert_layout")
def _convert(cx, op):
    src = cx.frag(op.source)
    res_lin = lin_of(op.result.type)
    if src.lin == res_lin:
        cx.values[op.result] = Frag(res_lin, src.elem, list(src.regs))
        return
    strides = _row_major(res_lin.shape)
    cx.values[op.result] = smem_exchange(cx, src, res_lin, strides, strides)


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
                  res_strides) -> Frag:
    """Writes `src` to shared memory at sum(coord * src_strides) and reads `res_lin`'s
    elements back at sum(coord * res_strides)."""
    n = 1
    for s in res_lin.shape:
        n *= s
    is_i1 = isinstance(src.elem, ir.IntegerType) and src.elem.width == 1
    mem_t = ir.IntegerType.get_signless(8) if is_i1 else src.elem
    buf = cx.smem(n, mem_t)
    cx.smem_barrier_before()            # earlier readers of the shared buffer are done
    for r in range(src.lin.num_regs):
        v = arith.extui(mem_t, src.regs[r]) if is_i1 else src.regs[r]
        memref.store(v, buf, [index(_flat_index(cx, src.lin, r, src_strides))])
    gpu.barrier()
    regs = []
    for r in range(res_lin.num_regs):
        v = memref.load(buf, [index(_flat_index(cx, res_lin, r, res_strides))])
        if is_i1:
            v = arith.cmpi(arith.CmpIPredicate.ne, v, cx.const(0, mem_t))
        regs.append(v)
    return Frag(res_lin, src.elem, regs)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------
def _combine(kind: str, t: ir.Type) -> Callable:
    """How two partials combine.  A partial is a tuple: `(value,)`, or for argmax and
    argmin `(value, index)`."""
    if kind in ("argmax", "argmin"):
        return _arg_combine(kind, t)
    is_f = not isinstance(t, ir.IntegerType)
    table = {"sum": (arith.addf, arith.addi), "prod": (arith.mulf, arith.muli),
             "max": (arith.maximumf, arith.maxsi), "min": (arith.minimumf, arith.minsi)}
    f = table[kind][0 if is_f else 1]
    return lambda a, b: (f(a[0], b[0]),)


def _arg_combine(kind: str, t: ir.Type) -> Callable:
    """The winner of two (value, index) partials, as the interpreter decides it: the
    extreme value (a NaN counts as the extreme), on a tie the lower index.  Indices
    are distinct, so the winner does not depend on the order of combination and
    every replica of a result agrees."""
    is_f = not isinstance(t, ir.IntegerType)
    if is_f:
        better = arith.CmpFPredicate.OGT if kind == "argmax" else arith.CmpFPredicate.OLT
    else:
        better = arith.CmpIPredicate.sgt if kind == "argmax" else arith.CmpIPredicate.slt

    def comb(a, b):
        (va, ia), (vb, ib) = a, b
        lower = arith.cmpi(arith.CmpIPredicate.slt, ib, ia)
        if is_f:
            nan_a = arith.cmpf(arith.CmpFPredicate.UNO, va, va)
            nan_b = arith.cmpf(arith.CmpFPredicate.UNO, vb, vb)
            # b wins: b is NaN and a is not, or b is better, or the two tie
            # (equal, or both NaN) and b comes first
            tie = arith.ori(arith.cmpf(arith.CmpFPredicate.OEQ, va, vb),
                            arith.andi(nan_a, nan_b))
            take = arith.ori(arith.ori(arith.andi(nan_b, _not(nan_a)),
                                       arith.cmpf(better, vb, va)),
                             arith.andi(tie, lower))
        else:
            tie = arith.cmpi(arith.CmpIPredicate.eq, va, vb)
            take = arith.ori(arith.cmpi(better, vb, va), arith.andi(tie, lower))
        return arith.select(take, vb, va), arith.select(take, ib, ia)
    return comb


def _not(p: ir.Value) -> ir.Value:
    return arith.xori(p, arith.ConstantOp(p.type, ir.IntegerAttr.get(p.type, 1)).result)


def _work_type(t: ir.Type) -> ir.Type:
    """Reductions run in f32 for 16-bit floats (one rounding at the end) and in i32 for
    narrow ints (shuffles move 32 bits; the final truncation wraps like the element type)."""
    if str(t) in ("f16", "bf16"):
        return ir.F32Type.get()
    if isinstance(t, ir.IntegerType) and t.width < 32:
        return I32()
    return t


def _widen(v: ir.Value, t: ir.Type) -> ir.Value:
    if v.type == t:
        return v
    return arith.extf(t, v) if isinstance(t, ir.F32Type) else arith.extsi(t, v)


def _narrow(v: ir.Value, t: ir.Type) -> ir.Value:
    if v.type == t:
        return v
    return arith.truncf(t, v) if not isinstance(t, ir.IntegerType) else arith.trunci(t, v)


@rule("tile.reduce")
def _reduce(cx, op):
    kind, axis = op.kind, op.axis
    src = cx.frag(op.source)
    res_t = op.result.type
    res_lin = lin_of(res_t)
    work = _work_type(src.elem)
    comb = _combine(kind, work)
    arg = kind in ("argmax", "argmin")
    along = cx.thread_coords(src.lin)[axis] if arg else None
    drop = lambda c: c[:axis] + c[axis + 1:]  # noqa: E731
    groups: dict[tuple, tuple] = {}
    for r in range(src.lin.num_regs):       # 1. within the thread
        coord = src.lin.reg_coord(r)
        v = (_widen(src.regs[r], work),)
        if arg:                             # the element's index along the axis
            v += (arith.addi(along, cx.const(coord[axis])) if coord[axis] else along,)
        key = drop(coord)
        groups[key] = comb(groups[key], v) if key in groups else v
    lane_bits = [i for i, b in enumerate(src.lin.lanes) if b[axis]]
    for key in groups:                      # 2. across lanes: butterfly shuffles
        for bit in lane_bits:
            groups[key] = comb(groups[key], _shuffle_xor(cx, groups[key], 1 << bit))
    warp_bits = [i for i, b in enumerate(src.lin.warps) if b[axis]]
    if warp_bits:                           # 3. across warps: through shared memory
        whole_warp = all(not any(b) or (b[axis] and not any(drop(b)))
                         for b in src.lin.lanes)
        if whole_warp and len(warp_bits) >= LANE_COMBINE_MIN_WARP_BITS:
            groups = _cross_warp_by_lanes(cx, groups, warp_bits, comb)
        else:
            groups = _cross_warp(cx, groups, warp_bits, comb)
    regs = [_narrow(groups[res_lin.reg_coord(j)][-1], res_t.element_type)
            for j in range(res_lin.num_regs)]
    cx.values[op.result] = Frag(res_lin, res_t.element_type, regs)


def _shuffle_xor(cx, partial: tuple, mask: int) -> tuple:
    """The partial of the lane `mask` away (xor), every component shuffled."""
    return tuple(gpu.shuffle(c, cx.const(mask), cx.const(32), gpu.ShuffleMode.XOR)[0]
                 for c in partial)


def _publish_partials(cx, groups: dict, slot: ir.Value, slots: int) -> list[ir.Value]:
    """Writes each key's partial at `slot * K + j` (K keys; one shared buffer per
    component, side by side) between the exchange's barriers; returns the buffers."""
    keys = list(groups)
    bufs, offset = [], 0
    for c in groups[keys[0]]:
        bufs.append(cx.smem(slots * len(keys), c.type, offset))
        offset += (slots * len(keys) * max(1, _bits(c.type) // 8) + 15) // 16 * 16
    cx.smem_barrier_before()
    for j, key in enumerate(keys):
        at = index(arith.addi(arith.muli(slot, cx.const(len(keys))), cx.const(j)))
        for buf, c in zip(bufs, groups[key]):
            memref.store(c, buf, [at])
    gpu.barrier()
    return bufs


# Combining the per-warp partials of a reduction across 2^k warps: with k at least
# this, and every lane of a warp holding the same partials, one shared-memory load
# per lane plus k shuffles replaces 2^k loads per thread.
LANE_COMBINE_MIN_WARP_BITS = 4


def _cross_warp_by_lanes(cx, groups, warp_bits, comb) -> dict:
    """Cross-warp combine when all 32 lanes of a warp hold the same partials: each
    warp writes its K partials once (every lane writes the same value to the same
    word), then lane l of every warp loads the partial of warp `base | spread(l)`
    and a butterfly over the low k lane bits combines the 2^k of them.  The
    butterfly gives every lane, and every warp of a group, the same bits."""
    keys = list(groups)
    _, lane, warp = cx.thread_ids()
    nk = cx.const(len(keys))
    bufs = _publish_partials(cx, groups, warp, cx.num_warps)
    mask = sum(1 << b for b in warp_bits)
    src_warp = arith.andi(warp, cx.const(~mask & 0x7FFFFFFF))
    for k, b in enumerate(warp_bits):       # lane bit k selects warp bit b
        bit = arith.andi(arith.shrui(lane, cx.const(k)), cx.const(1))
        src_warp = arith.ori(src_warp, arith.shli(bit, cx.const(b)))
    out = {}
    for j, key in enumerate(keys):
        at = index(arith.addi(arith.muli(src_warp, nk), cx.const(j)))
        acc = tuple(memref.load(buf, [at]) for buf in bufs)
        for k in range(len(warp_bits)):
            acc = comb(acc, _shuffle_xor(cx, acc, 1 << k))
        out[key] = acc
    return out


def _cross_warp(cx, groups, warp_bits, comb) -> dict:
    keys = list(groups)
    tid, lane, warp = cx.thread_ids()
    nk = cx.const(len(keys))
    bufs = _publish_partials(cx, groups, tid, 32 * cx.num_warps)
    mask = sum(1 << b for b in warp_bits)
    base = arith.andi(warp, cx.const(~mask & 0x7FFFFFFF))
    out = {}
    for j, key in enumerate(keys):
        acc = None
        # every thread combines the partials in the same (absolute warp) order, so
        # replicas of one result element agree to the last bit
        for combo in range(1 << len(warp_bits)):
            bits = sum(((combo >> k) & 1) << b for k, b in enumerate(warp_bits))
            w = arith.ori(base, cx.const(bits)) if bits else base
            t = arith.addi(arith.muli(w, cx.const(32)), lane)
            at = index(arith.addi(arith.muli(t, nk), cx.const(j)))
            v = tuple(memref.load(buf, [at]) for buf in bufs)
            acc = v if acc is None else comb(acc, v)
        out[key] = acc
    return out


# ---------------------------------------------------------------------------
# Control flow
# ---------------------------------------------------------------------------
def _flatten(cx: LoweringContext, values) -> list[ir.Value]:
    out = []
    for v in values:
        m = cx.get(v)
        out.extend(m.regs if isinstance(m, Frag) else [m])
    return out


def _unflatten(cx: LoweringContext, originals, flat) -> None:
    it = iter(flat)
    for v in originals:
        if isinstance(v.type, ir.RankedTensorType):
            lin = lin_of(v.type)
            cx.values[v] = Frag(lin, v.type.element_type, [next(it) for _ in range(lin.num_regs)])
        else:
            cx.values[v] = next(it)


@rule("scf.for")
def _for(cx, op):
    lb, ub, step = (cx.get(v) for v in list(op.operands)[:3])
    inits = list(op.operands)[3:]
    flat = _flatten(cx, inits)
    loop = scf.ForOp(lb, ub, step, flat)
    body = op.regions[0].blocks[0]
    cx.loop_depth += 1
    if _contains_store(body):
        cx.stores_seen = True     # a store in iteration i precedes the loads of i + 1
    with ir.InsertionPoint(loop.body):
        cx.values[body.arguments[0]] = loop.induction_variable
        _unflatten(cx, list(body.arguments)[1:], list(loop.inner_iter_args))
        term = lower_block(cx, body)
        scf.YieldOp(_flatten(cx, list(term.operands)))
    cx.loop_depth -= 1
    _unflatten(cx, list(op.results), list(loop.results))


@rule("scf.if")
def _if(cx, op):
    types = _flat_types(op.results)
    new = scf.IfOp(cx.get(op.operands[0]), types, has_else=True)
    for region, blk in zip(op.regions, (new.then_block, new.else_block)):
        with ir.InsertionPoint(blk):
            if len(region.blocks):
                term = lower_block(cx, region.blocks[0])
                scf.YieldOp(_flatten(cx, list(term.operands)) if term is not None else [])
            else:
                scf.YieldOp([])
    _unflatten(cx, list(op.results), list(new.results))


def _contains_store(block: ir.Block) -> bool:
    found = False

    def visit(op):
        nonlocal found
        found = found or op.name == "tile.store"
        return ir.WalkResult.ADVANCE

    for op in block.operations:
        op.operation.walk(visit)
    return found


def _flat_types(results) -> list[ir.Type]:
    out: list[ir.Type] = []
    for v in results:
        if isinstance(v.type, ir.RankedTensorType):
            out.extend([v.type.element_type] * lin_of(v.type).num_regs)
        else:
            out.append(v.type)
    return out
