"""Element-indexed memory: `tile.gather`, `tile.scatter`, `tile.atomic_rmw`,
`tile.atomic_cas`.

Each register is one element: its address is the array base plus the sum of its
indices times the strides (64-bit), and it acts where its mask holds and, with
`check_bounds`, where every index lies in [0, dim).  A gather is a guarded scalar
load (the padding elsewhere), a scatter a guarded store.

Atomics are inline PTX, one `atom` per active element: PTX names the memory
order (`.relaxed .acquire .release .acq_rel`) and scope (`.cta .gpu .sys`) of each
cuTile order/scope pair directly, where LLVM's `atomicrmw` would leave the scope
to syncscope names this MLIR's NVPTX backend does not all map.  A tile atomic is
the block's, while an element's `atom` is one thread's, so the block gathers at a
barrier before a release (or acq_rel) atomic, ordering every thread's earlier
accesses before it (a barrier is cumulative at block scope: a split K's partial
stored by all threads, then one ticket), and after an acquire (or acq_rel) one,
ordering what any thread does next after it (the barrier that shares a replicated
element's old value serves).  16-bit float adds
take `atom.add.noftz.f16` (sm_70+) and `.bf16` (sm_90+); a bfloat16 add on sm_80,
which has no such instruction, is a compare-and-swap loop on the aligned 32-bit
word holding the element (`_bf16_add_by_cas`).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, memref, scf

from tileir.dialect import TileIRError

from ..context import I64, Frag, LoweringContext, _bits, index, lin_of, reg_type
from ..memory import PTX_SCOPE, gep
from .registry import rule
from .shape import _flat_index, _row_major


def _i1(t: ir.Type) -> bool:
    return isinstance(t, ir.IntegerType) and t.width == 1


def _element(cx: LoweringContext, op, r: int, check: bool) -> tuple[ir.Value, ir.Value]:
    """(pointer, acts) of register r of the op's index tiles."""
    arr = cx.arrays[op.array]
    mask = cx.frag(op.mask).regs[r]
    offset = None
    acts = mask
    for k, v in enumerate(op.indices):
        i = cx.frag(v).regs[r]
        i64 = arith.extsi(I64(), i) if i.type.width < 64 else i
        term = arith.muli(i64, arr.strides[k])
        offset = term if offset is None else arith.addi(offset, term)
        if check:
            dim = arith.extsi(I64(), arr.dims[k])
            inside = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, i64, cx.const(0, I64())),
                                arith.cmpi(arith.CmpIPredicate.slt, i64, dim))
            acts = arith.andi(acts, inside)
    store_t = ir.IntegerType.get_signless(8) if _i1(arr.elem) else reg_type(arr.elem)
    return gep(arr.ptr, offset, store_t), acts


def _owner(cx: LoweringContext, lin) -> ir.Value | None:
    """True in the one thread that owns each element of `lin`: where a layout holds an
    element in several threads (a lane or warp bit with a zero basis), only the
    thread with that bit clear writes it, so an atomic happens once per element.
    None when no element is replicated."""
    bases = [b for b in lin.regs + lin.lanes + lin.warps if any(b)]
    if len(set(bases)) != len(bases):
        raise TileIRError("internal error: a layout maps two thread bits to one element "
                          "coordinate; element-indexed writes need one owner per element",
                          ir.Location.current)
    _, lane, warp = cx.thread_ids()
    mask = 0
    for k, b in enumerate(lin.lanes):
        mask |= (not any(b)) << k
    for k, b in enumerate(lin.warps):
        mask |= (not any(b)) << (5 + k)
    if not mask:
        return None
    tid = arith.ori(lane, arith.shli(warp, cx.const(5)))
    return arith.cmpi(arith.CmpIPredicate.eq, arith.andi(tid, cx.const(mask)), cx.const(0))


def _guarded(acts: ir.Value, t: ir.Type | None, then, otherwise=None) -> ir.Value | None:
    if_op = scf.IfOp(acts, [t] if t is not None else [], has_else=t is not None)
    with ir.InsertionPoint(if_op.then_block):
        scf.YieldOp([then()] if t is not None else [])
    if t is not None:
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp([otherwise()])
        return if_op.results[0]
    return None


def _align(t: ir.Type) -> int:
    return max(1, _bits(t) // 8)


@rule("tile.gather")
def _gather(cx, op):
    arr = cx.arrays[op.array]
    pad = cx.frag(op.padding)
    lin = lin_of(op.result.type)
    regs = []
    for r in range(lin.num_regs):
        ptr, acts = _element(cx, op, r, op.check_bounds)
        if _i1(arr.elem):
            i8 = ir.IntegerType.get_signless(8)
            byte = _guarded(acts, i8, lambda: llvm.load(i8, ptr, alignment=1),
                            lambda: arith.extui(i8, pad.regs[r]))
            regs.append(arith.cmpi(arith.CmpIPredicate.ne, byte, cx.const(0, i8)))
        else:
            t = pad.regs[r].type
            regs.append(_guarded(acts, t, lambda: llvm.load(t, ptr, alignment=_align(t)),
                                 lambda: pad.regs[r]))
    cx.values[op.result] = Frag(lin, pad.elem, regs)


@rule("tile.scatter")
def _scatter(cx, op):
    cx.stores_seen = True
    arr = cx.arrays[op.array]
    value = cx.frag(op.value)
    owner = _owner(cx, value.lin)
    for r in range(value.lin.num_regs):
        ptr, acts = _element(cx, op, r, op.check_bounds)
        if owner is not None:
            acts = arith.andi(acts, owner)
        v = value.regs[r]
        if _i1(arr.elem):
            v = arith.extui(ir.IntegerType.get_signless(8), v)
        if_op = scf.IfOp(acts, [], has_else=False)
        with ir.InsertionPoint(if_op.then_block):
            llvm.store(v, ptr, alignment=_align(v.type))
            scf.YieldOp([])


_SEM = {"relaxed": "relaxed", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}


def _ptx_type(kind: str, elem: ir.Type, signed: bool) -> str:
    bits = _bits(elem)
    if kind in ("exch", "cas"):                  # compare and move bits, floats too
        return f"b{bits}"
    if isinstance(elem, ir.F32Type):
        return "f32"
    if isinstance(elem, ir.F64Type):
        return "f64"
    if isinstance(elem, ir.F16Type):
        return "noftz.f16"
    if isinstance(elem, ir.BF16Type):
        return "noftz.bf16"
    if kind in ("and", "or", "xor"):
        return f"b{bits}"
    if kind == "add" and bits == 64:   # PTX has no atom.add.s64; two's complement: .u64
        return "u64"
    return f"{'s' if signed else 'u'}{bits}"


def _constraint(t: ir.Type) -> str:
    if isinstance(t, ir.F32Type):
        return "f"
    if isinstance(t, ir.F64Type):
        return "d"
    if _bits(t) == 16:
        return "h"
    return "l" if _bits(t) == 64 else "r"


def _atom(cx, op, kind: str, signed: bool, operands_of) -> None:
    cx.stores_seen = True
    arr = cx.arrays[op.array]
    elem = arr.elem
    sem, scope = _SEM[op.memory_order], PTX_SCOPE[op.memory_scope]
    by_cas = isinstance(elem, ir.BF16Type) and cx.chip == "sm_80"
    if by_cas and kind != "add":
        raise TileIRError(f"atomic {kind} on bfloat16 is not supported on sm_80", op.location)
    ptx_t = _ptx_type(kind, elem, signed)
    fallback = cx.frag(op.operands[1])            # update (rmw) or expected (cas)
    owner = _owner(cx, fallback.lin)
    if sem in ("release", "acq_rel"):
        # a tile atomic is the block's: its release covers what every thread wrote
        # before it, so a barrier first (cumulative at block scope), as a release
        # fence does (rules/ordering.py); one thread's atom would publish its own
        # writes alone
        cx.barrier()
    regs = []
    for r in range(fallback.lin.num_regs):
        ptr, acts = _element(cx, op, r, op.check_bounds)
        if owner is not None:
            acts = arith.andi(acts, owner)
        values = operands_of(r)
        c = _constraint(elem)
        args = ", ".join(f"${k + 2}" for k in range(len(values)))
        asm = f"atom.{sem}.{scope}.global.{kind}.{ptx_t} $0, [$1], {args};"
        cons = f"={c},l," + ",".join(c for _ in values)

        def then(ptr=ptr, values=values, asm=asm, cons=cons):
            if by_cas:
                return _bf16_add_by_cas(ptr, values[0], sem, scope)
            return llvm.inline_asm(elem, [ptr, *values], asm, cons, has_side_effects=True)
        regs.append(_guarded(acts, elem, then, lambda r=r: fallback.regs[r]))
    if owner is not None:                 # the replicas learn the owners' old values
        regs = _from_owners(cx, fallback.lin, elem, regs, owner)   # (ends with a barrier)
    elif sem in ("acquire", "acq_rel"):
        # the mirror image: no thread reads what the acquire guards before every
        # atom of the block is done
        cx.barrier()
    cx.values[op.result] = Frag(fallback.lin, elem, regs)


def _bf16_add_by_cas(ptr: ir.Value, update: ir.Value, sem: str, scope: str) -> ir.Value:
    """`*ptr += update` for a bfloat16 element on sm_80, returning the old value: the
    32-bit word holding it is read, the element's half replaced by the rounded sum,
    and `atom.cas.b32` retried until no other thread changed the word in between."""
    i32, i64, i16 = (ir.IntegerType.get_signless(w) for w in (32, 64, 16))
    f32, bf16 = ir.F32Type.get(), ir.BF16Type.get()
    c = lambda v, t=i32: arith.constant(t, v)       # noqa: E731
    addr = llvm.ptrtoint(i64, ptr)
    word = llvm.inttoptr(ptr.type, arith.andi(addr, c(-4, i64)))
    shift = arith.trunci(i32, arith.shli(arith.andi(addr, c(2, i64)), c(3, i64)))
    keep = arith.xori(arith.shli(c(0xFFFF), shift), c(-1))
    first = llvm.load(i32, word, alignment=4)
    loop = scf.WhileOp([i32, i32], [first, first])
    before = loop.before.blocks.append(i32, i32)
    with ir.InsertionPoint(before):
        cur = before.arguments[0]
        half = arith.trunci(i16, arith.shrui(cur, shift))
        total = arith.addf(arith.extf(f32, arith.bitcast(bf16, half)), arith.extf(f32, update))
        bits = arith.extui(i32, arith.bitcast(i16, arith.truncf(bf16, total)))
        new = arith.ori(arith.andi(cur, keep), arith.shli(bits, shift))
        got = llvm.inline_asm(i32, [word, cur, new],
                              f"atom.{sem}.{scope}.global.cas.b32 $0, [$1], $2, $3;",
                              "=r,l,r,r", has_side_effects=True)
        scf.ConditionOp(arith.cmpi(arith.CmpIPredicate.ne, got, cur), [got, cur])
    after = loop.after.blocks.append(i32, i32)
    with ir.InsertionPoint(after):
        scf.YieldOp([after.arguments[0], after.arguments[0]])
    old = arith.trunci(i16, arith.shrui(loop.results[1], shift))
    return arith.bitcast(bf16, old)


def _from_owners(cx: LoweringContext, lin, elem: ir.Type, regs, owner: ir.Value) -> list:
    """Every thread's registers replaced by what the owner of each element holds,
    through a scratch buffer in shared memory (owners write, a barrier, all read)."""
    n = 1
    for s in lin.shape:
        n *= s
    strides = _row_major(lin.shape)
    buf = cx.smem(n, elem)
    cx.smem_barrier_before()
    if_op = scf.IfOp(owner, [], has_else=False)
    with ir.InsertionPoint(if_op.then_block):
        for r, v in enumerate(regs):
            memref.store(v, buf, [index(_flat_index(cx, lin, r, strides))])
        scf.YieldOp([])
    cx.barrier()
    return [memref.load(buf, [index(_flat_index(cx, lin, r, strides))])
            for r in range(len(regs))]


_RMW_PTX = {"add": ("add", True), "and": ("and", True), "or": ("or", True),
            "xor": ("xor", True), "min": ("min", True), "max": ("max", True),
            "umin": ("min", False), "umax": ("max", False), "xchg": ("exch", True)}


@rule("tile.atomic_rmw")
def _atomic_rmw(cx, op):
    kind, signed = _RMW_PTX[op.kind]
    update = cx.frag(op.update)
    _atom(cx, op, kind, signed, lambda r: [update.regs[r]])


@rule("tile.atomic_cas")
def _atomic_cas(cx, op):
    expected, desired = cx.frag(op.expected), cx.frag(op.desired)
    _atom(cx, op, "cas", True, lambda r: [expected.regs[r], desired.regs[r]])
