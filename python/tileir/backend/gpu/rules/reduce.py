"""Reductions: `tile.reduce` in registers, then xor shuffles across lanes, then shared
memory across warps; argmax/argmin carry (value, index) pairs through the same steps.
A thread's own elements meet in a tree (pairs, then pairs of pairs) wherever the
order cannot change the result (all but float sums and products, which keep their
chain in register order: their rounding follows it), so 16 elements of a row are 4
dependent steps, not 15."""

from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, memref

from tileir.dialect.tile import ARG_KINDS, ROUNDING_ATTR

from ..context import I32, Frag, _bits, index, is_fp8, lin_of
from .elementwise import _scalar_op, narrow_directed
from .registry import rule


_FLOAT_COMBINE = {"sum": "arith.addf", "prod": "arith.mulf", "max": "arith.maximumf",
                  "min": "arith.minimumf", "maxnum": "arith.maxnumf", "minnum": "arith.minnumf"}
_INT_COMBINE = {"sum": arith.addi, "prod": arith.muli, "max": arith.maxsi, "min": arith.minsi}


def _combine(kind: str, t: ir.Type, source: ir.Type, options: dict[str, str]) -> Callable:
    """How two partials of work type `t` combine.  A partial is a tuple: `(value,)`, or
    for the arg kinds `(value, index)`.  A float combine is the element-wise rule's op
    with the reduction's float options (`options`), so `tile.ftz` and a directed
    `tile.rounding` pick the same instructions as on `add`/`max`; a 16-bit `source`
    reduced in f32 with a directed rounding rounds every step back to 16 bits in that
    direction (one rounding of the exact result: see elementwise._directed)."""
    if kind in ARG_KINDS:
        return _arg_combine(kind, t)
    if isinstance(t, ir.IntegerType):
        f = _INT_COMBINE[kind]
        return lambda a, b: (f(a[0], b[0]),)
    name = _FLOAT_COMBINE[kind]
    attrs = {k: ir.StringAttr.get(v) for k, v in options.items()}
    mode = options.get(ROUNDING_ATTR)
    if mode is not None and source != t:
        def step(a, b):
            wide = _scalar_op(name, [t], [a[0], b[0]], attrs)[0]
            return (arith.extf(t, narrow_directed(wide, source, mode)),)
        return step
    return lambda a, b: (_scalar_op(name, [t], [a[0], b[0]], attrs)[0],)


def _arg_combine(kind: str, t: ir.Type) -> Callable:
    """The winner of two (value, index) partials, as the interpreter decides it: the
    extreme value, on a tie the lower index.  For argmax/argmin a NaN counts as the
    extreme; for argmaxnum/argminnum as the worst value (two NaNs tie), so a NaN wins
    only over NaNs.  Indices are distinct, so the winner does not depend on the order
    of combination and every replica of a result agrees."""
    is_f = not isinstance(t, ir.IntegerType)
    high = kind in ("argmax", "argmaxnum")
    if is_f:
        better = arith.CmpFPredicate.OGT if high else arith.CmpFPredicate.OLT
    else:
        better = arith.CmpIPredicate.sgt if high else arith.CmpIPredicate.slt
    nan_wins = kind in ("argmax", "argmin")

    def comb(a, b):
        (va, ia), (vb, ib) = a, b
        lower = arith.cmpi(arith.CmpIPredicate.slt, ib, ia)
        if is_f:
            nan_a = arith.cmpf(arith.CmpFPredicate.UNO, va, va)
            nan_b = arith.cmpf(arith.CmpFPredicate.UNO, vb, vb)
            # b wins: b is better, or the two tie (equal, or both NaN) and b comes
            # first, or b is NaN and a is not (NaN the extreme) / a is NaN and b is
            # not (NaN the worst)
            tie = arith.ori(arith.cmpf(arith.CmpFPredicate.OEQ, va, vb),
                            arith.andi(nan_a, nan_b))
            lone_nan = arith.andi(nan_b, _not(nan_a)) if nan_wins else \
                arith.andi(nan_a, _not(nan_b))
            take = arith.ori(arith.ori(lone_nan, arith.cmpf(better, vb, va)),
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
    from .elementwise import f32_to_fp8, fp8_to_f32
    kind, axis = op.kind, op.axis
    src = cx.frag(op.source)
    res_t = op.result.type
    res_lin = lin_of(res_t)
    fp8 = is_fp8(src.elem)          # registers hold the bits: reduced in f32
    work = ir.F32Type.get() if fp8 else _work_type(src.elem)
    comb = _combine(kind, work, src.elem, op.options)
    arg = kind in ARG_KINDS
    along = cx.thread_coords(src.lin)[axis] if arg else None
    drop = lambda c: c[:axis] + c[axis + 1:]  # noqa: E731
    partials: list[tuple[tuple, tuple]] = []     # (key, partial), in register order
    for r in range(src.lin.num_regs):       # 1. within the thread
        coord = src.lin.reg_coord(r)
        v = (fp8_to_f32(cx, src.regs[r], src.elem) if fp8 else _widen(src.regs[r], work),)
        if arg:                             # the element's index along the axis
            v += (arith.addi(along, cx.const(coord[axis])) if coord[axis] else along,)
        partials.append((drop(coord), v))
    groups = _tree(partials, comb) if _exact(kind, work) else _chain(partials, comb)
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
    out = res_t.element_type
    regs = [f32_to_fp8(cx, groups[res_lin.reg_coord(j)][-1], out) if is_fp8(out) else
            _narrow(groups[res_lin.reg_coord(j)][-1], out) for j in range(res_lin.num_regs)]
    cx.values[op.result] = Frag(res_lin, res_t.element_type, regs)


def _exact(kind: str, work: ir.Type) -> bool:
    """Whether any order of combination gives the same bits: all but a float sum or
    product, whose roundings depend on it (max and min pick an operand; integers
    wrap; the arg kinds' winner does not depend on the order, `_arg_combine`)."""
    return kind not in ("sum", "prod") or isinstance(work, ir.IntegerType)


def _chain(partials: list, comb) -> dict:
    """Each key's partials combined left to right in register order (a float sum's
    rounding order)."""
    groups: dict[tuple, tuple] = {}
    for key, v in partials:
        groups[key] = comb(groups[key], v) if key in groups else v
    return groups


def _tree(partials: list, comb) -> dict:
    """Each key's partials combined pairwise, level by level over all keys: the 16 of
    a row are 4 dependent steps instead of a chain of 15 (the MLA owner's row maxima,
    docs/attention.md), and each level's steps are independent of each other."""
    level: dict[tuple, list] = {}
    for key, v in partials:
        level.setdefault(key, []).append(v)
    while any(len(vs) > 1 for vs in level.values()):
        for key, vs in level.items():
            level[key] = [comb(vs[i], vs[i + 1]) if i + 1 < len(vs) else vs[i]
                          for i in range(0, len(vs), 2)]
    return {key: vs[0] for key, vs in level.items()}


def _shuffle_xor(cx, partial: tuple, mask: int) -> tuple:
    """The partial of the lane `mask` away (xor), every component shuffled."""
    return tuple(gpu.shuffle(c, cx.const(mask), cx.const(32), gpu.ShuffleMode.XOR)[0]
                 for c in partial)


def _publish_partials(cx, groups: dict, slot: ir.Value, slots: int) -> list[ir.Value]:
    """Writes each key's partial at `slot * K + j` (K keys; one shared buffer per
    component, side by side) between the exchange's barriers; returns the buffers."""
    keys = list(groups)
    base = offset = cx.scratch_after_last_reads()     # apart from the previous reads
    bufs = []
    for c in groups[keys[0]]:
        bufs.append(cx.smem(slots * len(keys), c.type, offset))
        offset += (slots * len(keys) * max(1, _bits(c.type) // 8) + 15) // 16 * 16
    cx.smem_barrier_before(writes=(base, offset))
    for j, key in enumerate(keys):
        at = index(arith.addi(arith.muli(slot, cx.const(len(keys))), cx.const(j)))
        for buf, c in zip(bufs, groups[key]):
            memref.store(c, buf, [at])
    cx.barrier()
    cx.exchange_reads(base, offset)
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


