"""Stream-K rules: `tile.partial_store` and `tile.partial_add` (dialect/stream_k.py).

The workspace (the kernel's `!llvm.ptr<1>` parameter after the walked grid,
metadata `workspace`) holds `WORKSPACE_FLAG_SLOTS` i32 flags, then one slot of
partial sums per block.  A slot is the block's accumulator registers as each
thread holds them: 16-byte chunk c of thread t at `(c * threads + t) * 16`, so
the writes and the reads of a warp are contiguous, and the reader (the same
layout, the same thread count) adds them register by register.

    partial_store:  every thread st.global.v4 its chunks; block barrier;
                    thread 0: fence.acq_rel.gpu; st.relaxed.gpu flag = 1
    partial_add:    thread 0: spin on ld.acquire.gpu flag until 1; flag = 0;
                    block barrier; every thread ld.global.cg.v4 its chunks (L2:
                    never a stale L1 line) and adds them

The release is the usual pattern (a barrier, then one thread's fence and flag
write: cumulative over the block's writes), and so is the acquire (one thread's
acquiring read, then a barrier).  The flag returns to 0 when read, so the next
launch finds every flag clear; the runtime zeroes a new workspace once.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, scf

from tileir.dialect import TileIRError
from ..context import I64, Frag
from ..memory import gep
from tileir.runtime.workspace import WORKSPACE_FLAG_SLOTS
from .registry import rule

_F32 = ir.F32Type.get


def _void() -> ir.Type:
    return ir.Type.parse("!llvm.void")


def _layout(cx, op, frag: Frag) -> tuple[int, ir.Value]:
    """(chunks a thread moves, this thread's slot base pointer) for accumulator `frag`."""
    if cx.workspace is None:
        raise TileIRError("internal error: stream-K partials in a kernel without a "
                          "workspace parameter", op.location)
    if frag.lin.num_regs % 4:
        raise TileIRError(f"internal error: a stream-K partial of {frag.lin.num_regs} "
                          f"registers a thread (a multiple of 4 is moved)", op.location)
    threads = 32 * cx.num_warps
    slot_bytes = frag.lin.num_regs * 4 * threads
    cx.workspace_bytes = max(cx.workspace_bytes, slot_bytes)
    tid, _, _ = cx.thread_ids()
    slot = arith.extui(I64(), cx.get(op.slot))
    off = arith.addi(cx.const(WORKSPACE_FLAG_SLOTS * 4, I64()),
                     arith.muli(slot, cx.const(slot_bytes, I64())))
    off = arith.addi(off, arith.muli(arith.extui(I64(), tid), cx.const(16, I64())))
    return frag.lin.num_regs // 4, gep(cx.workspace, off, ir.IntegerType.get_signless(8))


def _flag(cx, op) -> ir.Value:
    off = arith.muli(arith.extui(I64(), cx.get(op.slot)), cx.const(4, I64()))
    return gep(cx.workspace, off, ir.IntegerType.get_signless(8))


def _chunk(cx, base: ir.Value, c: int) -> ir.Value:
    return gep(base, cx.const(c * 32 * cx.num_warps * 16, I64()), ir.IntegerType.get_signless(8))


@rule("tile.partial_store")
def _partial_store(cx, op):
    frag: Frag = cx.get(op.acc)
    if_op = scf.IfOp(cx.get(op.pred), [], has_else=False)
    with ir.InsertionPoint(if_op.then_block):
        chunks, base = _layout(cx, op, frag)
        for c in range(chunks):
            llvm.inline_asm(_void(), [_chunk(cx, base, c)] + frag.regs[4 * c:4 * c + 4],
                            "st.global.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f",
                            has_side_effects=True)
        cx.barrier()
        first = scf.IfOp(cx.first_thread(), [], has_else=False)
        with ir.InsertionPoint(first.then_block):
            flag = _flag(cx, op)
            llvm.inline_asm(_void(), [flag, cx.const(1)],
                            "fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.b32 [$0], $1;",
                            "l,r", has_side_effects=True)
            scf.YieldOp([])
        scf.YieldOp([])


# thread 0's wait: an acquiring read of the flag until it is 1, then the flag cleared
_WAIT = ("{\n\t.reg .pred %p;\n\t.reg .b32 %v;\n"
         "SK_WAIT_${:uid}:\n\tld.acquire.gpu.global.b32 %v, [$0];\n"
         "\tsetp.ne.b32 %p, %v, 1;\n\t@%p bra SK_WAIT_${:uid};\n"
         "\tst.relaxed.gpu.global.b32 [$0], 0;\n}")


@rule("tile.partial_add")
def _partial_add(cx, op):
    frag: Frag = cx.get(op.acc)
    f32 = _F32()
    if_op = scf.IfOp(cx.get(op.pred), [f32] * frag.lin.num_regs, has_else=True)
    with ir.InsertionPoint(if_op.then_block):
        chunks, base = _layout(cx, op, frag)
        first = scf.IfOp(cx.first_thread(), [], has_else=False)
        with ir.InsertionPoint(first.then_block):
            llvm.inline_asm(_void(), [_flag(cx, op)], _WAIT, "l", has_side_effects=True)
            scf.YieldOp([])
        cx.barrier()
        quad = ir.Type.parse("!llvm.struct<(f32, f32, f32, f32)>")
        out = []
        for c in range(chunks):
            got = llvm.inline_asm(quad, [_chunk(cx, base, c)],
                                  "ld.global.cg.v4.f32 {$0, $1, $2, $3}, [$4];",
                                  "=f,=f,=f,=f,l", has_side_effects=True)
            for j in range(4):
                part = llvm.extractvalue(f32, got, ir.DenseI64ArrayAttr.get([j]))
                out.append(arith.addf(frag.regs[4 * c + j], part))
        scf.YieldOp(out)
    with ir.InsertionPoint(if_op.else_block):
        scf.YieldOp(list(frag.regs))
    cx.values[op.sum] = Frag(frag.lin, frag.elem, list(if_op.results))


__all__: list[str] = []
