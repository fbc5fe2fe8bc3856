"""Debugging and launch-order ops: `tile.print` (device printf, once per block),
`tile.assert` (a printed message and a trap), `tile.grid_dependency` (PTX
`griddepcontrol`).

A printed tile is gathered into thread 0 through shared memory (each element
written by its owner thread, a barrier, thread 0 reads them all); thread 0 then
makes one `gpu.printf` (vprintf) with the format's conversions expanded to
`[v, v, ...]`.  vprintf takes C varargs: integers narrower than 32 bits widen to
i32, 64-bit ones get the `ll` length, 16-bit floats widen to f32 (gpu.printf makes
f32 a double).  An assert checks each thread's elements; a thread that finds a
false one prints the message with its block and thread and executes `trap`.
"""

from __future__ import annotations

import re

from mlir import ir
from mlir.dialects import arith, gpu, llvm, memref, scf

from tileir.dialect.debug import printf_spans

from ..context import Frag, LoweringContext, _bits, index, lin_of
from .indexed import _owner
from .registry import rule
from .shape import _flat_index, _row_major

_LENGTH = re.compile(r"(hh|h|ll|l|z|j|t)(?=[diuoxXeEfFgGaA]$)")


def _to_thread0(cx: LoweringContext, frag: Frag, elem: ir.Type) -> list[ir.Value]:
    """All elements of `frag`, row-major, as values valid in thread 0."""
    lin = frag.lin
    n = 1
    for s in lin.shape:
        n *= s
    strides = _row_major(lin.shape)
    mem_t = ir.IntegerType.get_signless(8) if _bits(elem) == 1 else elem
    buf = cx.smem(n, mem_t)
    cx.smem_barrier_before()
    owner = _owner(cx, lin)
    if_op = scf.IfOp(owner, [], has_else=False) if owner is not None else None
    with ir.InsertionPoint(if_op.then_block) if if_op else _nullcontext():
        for r, v in enumerate(frag.regs):
            if mem_t != elem:
                v = arith.extui(mem_t, v)
            memref.store(v, buf, [index(_flat_index(cx, lin, r, strides))])
        if if_op:
            scf.YieldOp([])
    cx.barrier()
    return [memref.load(buf, [index(cx.const(k))]) for k in range(n)]


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _vararg(v: ir.Value, conv: str) -> tuple[ir.Value, str]:
    """A value as vprintf wants it, and its conversion (with `ll` for 64-bit ints)."""
    t = v.type
    if isinstance(t, ir.IntegerType):
        if t.width < 32:
            signed = conv[-1] in "di"
            v = (arith.extsi if signed else arith.extui)(ir.IntegerType.get_signless(32), v)
        elif t.width == 64 and not _LENGTH.search(conv):
            conv = conv[:-1] + "ll" + conv[-1]
        return v, conv
    if _bits(t) < 32:                                  # f16, bf16 (fp8 tiles: as f32 too)
        v = arith.extf(ir.F32Type.get(), v)
    return v, conv


def _expanded(conv: str, shape: tuple[int, ...]) -> str:
    if not shape:
        return conv
    inner = _expanded(conv, shape[1:])
    return "[" + ", ".join([inner] * shape[0]) + "]"


@rule("tile.print")
def _print(cx, op):
    fmt = op.format
    pieces, args, pos = [], [], 0
    for conv_match, value in zip(printf_spans(fmt), op.values):
        start, end, conv = conv_match
        pieces.append(fmt[pos:start])
        pos = end
        t = value.type
        if isinstance(t, ir.RankedTensorType):
            frag = cx.frag(value)
            elems = _to_thread0(cx, frag, t.element_type)
            shape = tuple(t.shape)
        else:
            elems, shape = [cx.get(value)], ()
        widened = [_vararg(e, conv) for e in elems]
        args.extend(w for w, _ in widened)
        pieces.append(_expanded(widened[0][1] if widened else conv, shape))
    pieces.append(fmt[pos:])
    pending = cx.print_pending or ([], [])
    pending[0].extend(pieces)
    pending[1].extend(args)
    if op.more:                           # the line goes on in the next tile.print
        cx.print_pending = pending
        return
    cx.print_pending = None
    pieces, args = pending
    tid, _, _ = cx.thread_ids()
    first = arith.cmpi(arith.CmpIPredicate.eq, tid, cx.const(0))
    if_op = scf.IfOp(first, [], has_else=False)
    with ir.InsertionPoint(if_op.then_block):
        gpu.printf("".join(pieces), *args)
        scf.YieldOp([])


@rule("tile.assert")
def _assert(cx, op):
    t = op.cond.type
    if isinstance(t, ir.RankedTensorType):
        regs = cx.frag(op.cond).regs
    else:
        regs = [cx.get(op.cond)]
    ok = regs[0]
    for r in regs[1:]:
        ok = arith.andi(ok, r)
    failed = arith.xori(ok, arith.ConstantOp(ok.type, ir.IntegerAttr.get(ok.type, -1)).result)
    if isinstance(t, ir.RankedTensorType):
        owner = _owner(cx, lin_of(t))            # a replicated element reports once
        if owner is not None:
            failed = arith.andi(failed, owner)
    if_op = scf.IfOp(failed, [], has_else=False)
    with ir.InsertionPoint(if_op.then_block):
        tid, _, _ = cx.thread_ids()
        bx, by, bz = (arith.index_castui(ir.IntegerType.get_signless(32), gpu.block_id(d))
                      for d in (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z))
        message = op.message.replace("%", "%%")
        gpu.printf(f"{message} (block [%d,%d,%d], thread %d)\n", bx, by, bz, tid)
        llvm.inline_asm(ir.Type.parse("!llvm.void"), [], "trap;", "", has_side_effects=True)
        scf.YieldOp([])


@rule("tile.grid_dependency")
def _grid_dependency(cx, op):
    """`griddepcontrol.wait` / `.launch_dependents` on sm_90+; sm_80 has no programmatic
    dependent launch, so its kernels run strictly after each other: nothing to emit."""
    if cx.chip == "sm_80":
        return
    if op.kind != "wait":
        llvm.inline_asm(ir.Type.parse("!llvm.void"), [], f"griddepcontrol.{op.kind};", "",
                        has_side_effects=True)
        return
    # The wait yields a token: pure policy loads after it take it as an operand, so LLVM
    # cannot hoist them above it.  A wait inside a branch or a loop has no token that
    # dominates what follows: pure loads stop there (as after a store).
    i32 = ir.IntegerType.get_signless(32)
    token = llvm.inline_asm(i32, [], "griddepcontrol.wait;\n\tmov.u32 $0, 0;", "=r",
                            has_side_effects=True)
    if op.operation.parent.name == "func.func":
        cx.wait_token = token
    else:
        cx.stores_seen = True
