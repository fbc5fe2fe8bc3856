"""Thread-block clusters: `tile.cluster_gather` through distributed shared memory (sm_90a).

Each block writes its operands, row-major, into shared memory that no exchange of
the kernel uses (above the high-water mark of the scratch area, held to the end);
a cluster barrier (arrive.release, wait.acquire) makes those writes visible to the
cluster; every thread then reads the elements its result registers hold straight
from the owning block's shared memory (`mapa` turns a local address into that
block's, `ld.shared::cluster` reads it).  A block must not exit, or write that
memory again, while another still reads it: after the reads every thread arrives
at a second cluster barrier, and waits on it just before the kernel returns (or
before the next gather, whichever comes first; inside a loop, at once).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, memref

from ..context import I32, Frag, LoweringContext, _bits, index, lin_of
from ..memory import PTX_REGISTER
from .registry import rule
from .shape import _flat_index, _row_major


def cluster_arrive(cx: LoweringContext) -> None:
    llvm.inline_asm(ir.Type.parse("!llvm.void"), [], "barrier.cluster.arrive.release.aligned;",
                    "", has_side_effects=True)


def cluster_wait(cx: LoweringContext) -> None:
    llvm.inline_asm(ir.Type.parse("!llvm.void"), [], "barrier.cluster.wait.acquire.aligned;",
                    "", has_side_effects=True)
    cx.cluster_wait_pending = False


def cluster_sync(cx: LoweringContext) -> None:
    """Every thread of the cluster arrives (release) and waits (acquire)."""
    cluster_arrive(cx)
    cluster_wait(cx)


def mapa(addr: ir.Value, rank: ir.Value) -> ir.Value:
    """The shared::cluster address of this block's shared address `addr` (i32) in the
    block of rank `rank`."""
    return llvm.inline_asm(I32(), [addr, rank], "mapa.shared::cluster.u32 $0, $1, $2;",
                           "=r,r,r")


def finish_cluster(cx: LoweringContext) -> None:
    """Before the kernel returns: the wait of the last gather's closing barrier."""
    if cx.cluster_wait_pending:
        cluster_wait(cx)


@rule("tile.cluster_gather")
def _cluster_gather(cx, op):
    finish_cluster(cx)                  # the previous gather's readers are done
    published = []
    for v in op.values:
        src = cx.frag(v)
        shape = tuple(v.type.shape)
        n = 1
        for s in shape:
            n *= s
        start, buf = cx.hold_fresh_smem(n, src.elem)
        strides = _row_major(shape)
        for r in range(src.lin.num_regs):
            memref.store(src.regs[r], buf, [index(_flat_index(cx, src.lin, r, strides))])
        published.append((start, n, src.elem))
    cluster_sync(cx)
    for res, (start, n, elem) in zip(op.gathered, published):
        lin = lin_of(res.type)
        strides = _row_major(tuple(res.type.shape))
        width = _bits(elem)
        reg, move = PTX_REGISTER[width]
        word = ir.IntegerType.get_signless(width)
        base = cx.smem_addr(start)
        regs = []
        for r in range(lin.num_regs):
            flat = _flat_index(cx, lin, r, strides)
            rank = arith.divui(flat, cx.const(n))
            at = arith.addi(base, arith.muli(arith.remui(flat, cx.const(n)),
                                             cx.const(width // 8)))
            remote = mapa(at, rank)
            bits = llvm.inline_asm(word, [remote], f"ld.shared::cluster.{move} $0, [$1];",
                                   f"={reg},r", has_side_effects=True)
            regs.append(bits if elem == word else arith.bitcast(elem, bits))
        cx.values[res] = Frag(lin, res.type.element_type, regs)
    cluster_arrive(cx)
    cx.cluster_wait_pending = True
    if cx.loop_depth:                   # the next iteration writes the same bytes
        cluster_wait(cx)
