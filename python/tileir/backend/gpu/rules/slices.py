"""Sub-tile ops: `tile.extract_slice`, `tile.insert_slice`, `tile.concat`.

Each is an exchange through a scratch buffer in shared memory holding the whole
larger tile row-major: the sources are written at their element offsets (with a
barrier between writes that may hit the same element, so the later one wins),
then the result's elements are read back in its own layout.  Offsets may be
run-time values (cuTile's `extract(x, index, shape)` with a block-dependent
index): they enter the addresses as one block-uniform term.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref

from ..context import Frag, LoweringContext, index, lin_of
from .registry import rule
from .shape import _flat_index, _row_major


def _offset(cx: LoweringContext, offsets: list[ir.Value | int], strides) -> ir.Value:
    """sum(offset_d * stride_d) as an i32."""
    flat = cx.const(0)
    for off, st in zip(offsets, strides):
        term = cx.const(off * st) if isinstance(off, int) else arith.muli(off, cx.const(st))
        flat = arith.addi(flat, term)
    return flat


def _exchange(cx: LoweringContext, shape, writes, res_lin, res_offsets, elem,
              overlapping: bool = True) -> Frag:
    """Writes each (Frag, element offsets) of `writes` into a row-major scratch tile of
    `shape` (a barrier between `overlapping` writes), reads `res_lin` back from
    `res_offsets`."""
    n = 1
    for s in shape:
        n *= s
    strides = _row_major(shape)
    is_i1 = isinstance(elem, ir.IntegerType) and elem.width == 1
    mem_t = ir.IntegerType.get_signless(8) if is_i1 else elem
    buf = cx.smem(n, mem_t)
    cx.smem_barrier_before()             # earlier readers of the scratch are done
    for k, (src, offsets) in enumerate(writes):
        if k and overlapping:
            cx.barrier()                 # the later write of an element wins
        base = _offset(cx, offsets, strides)
        for r in range(src.lin.num_regs):
            v = arith.extui(mem_t, src.regs[r]) if is_i1 else src.regs[r]
            at = arith.addi(base, _flat_index(cx, src.lin, r, strides))
            memref.store(v, buf, [index(at)])
    cx.barrier()
    base = _offset(cx, res_offsets, strides)
    regs = []
    for r in range(res_lin.num_regs):
        at = arith.addi(base, _flat_index(cx, res_lin, r, strides))
        v = memref.load(buf, [index(at)])
        if is_i1:
            v = arith.cmpi(arith.CmpIPredicate.ne, v, cx.const(0, mem_t))
        regs.append(v)
    return Frag(res_lin, elem, regs)


def _offsets(cx: LoweringContext, values) -> list[ir.Value]:
    return [cx.get(v) for v in values]


@rule("tile.extract_slice")
def _extract_slice(cx, op):
    src = cx.frag(op.source)
    shape = tuple(op.source.type.shape)
    res_lin = lin_of(op.result.type)
    cx.values[op.result] = _exchange(cx, shape, [(src, [0] * len(shape))], res_lin,
                                     _offsets(cx, op.offsets), src.elem)


@rule("tile.insert_slice")
def _insert_slice(cx, op):
    dest, value = cx.frag(op.dest), cx.frag(op.value)
    shape = tuple(op.dest.type.shape)
    res_lin = lin_of(op.result.type)
    writes = [(dest, [0] * len(shape)), (value, _offsets(cx, op.offsets))]
    cx.values[op.result] = _exchange(cx, shape, writes, res_lin, [0] * len(shape), dest.elem)


@rule("tile.concat")
def _concat(cx, op):
    a, b = cx.frag(op.lhs), cx.frag(op.rhs)
    shape = tuple(op.result.type.shape)
    axis = op.axis
    shift = [0] * len(shape)
    shift[axis] = op.lhs.type.shape[axis]
    res_lin = lin_of(op.result.type)
    cx.values[op.result] = _exchange(cx, shape, [(a, [0] * len(shape)), (b, shift)], res_lin,
                                     [0] * len(shape), a.elem, overlapping=False)
