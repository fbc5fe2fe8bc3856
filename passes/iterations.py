"""Which loops' iterations touch memory that no other iteration touches.

A loop `for k in range(lb, ub, step)` whose every memory access is a `tile.load`
or `tile.store` indexed at one position d by one value j(k) (the counter, or the
counter plus or minus loop-invariant values, or times a nonzero constant:
one-to-one in k) and elsewhere by
values defined outside the loop, each tile of the same extent along d, reads and
writes only slab j(k) along d of the arrays it accesses in iteration k.  Its iterations may
then run in any order, and a later iteration's loads may be issued before an
earlier one's stores: the loop is a map over slabs.

    for k in range(n):                      # a softmax's second pass: a map
        t = load(x, (row, k), (1, C))
        store(y, (row, k), (1, C), f(t))

Like the loop pipeliner's, the reasoning takes two arrays to be the same array
(an in-place launch passes one tensor twice: then slab k is the same tiles in
both) or disjoint ones; two overlapping views of one buffer passed as different
arguments are not supported by the tile passes.

Used by `tile-reverse-rereads` (a map may run backwards) and by the register
prefetch (a map's next loads may run ahead of its stores).
"""

from __future__ import annotations

from mlir import ir

from .effects import Effect, Effects, ops_under

MEMORY_OPS = {"tile.load": 1, "tile.store": 2}     # op -> position of its first index


def map_dim(loop: ir.Operation, effects: Effects | None = None) -> int | None:
    """The dim d along which `loop` (an scf.for) is a map over slabs, or None when it
    is not one: some op other than a load or store reads or writes memory, an access
    is not indexed by the bare counter at one position d with invariant other
    indices, the tiles' extents along d differ, or the loop accesses no memory."""
    effects = effects or Effects()
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    dim, extent, slab = None, None, None
    for op in ops_under(loop):
        if op.name in MEMORY_OPS:
            first = MEMORY_OPS[op.name]
            index = list(op.operands)[first:]
            varying = [p for p, v in enumerate(index) if not defined_outside(v, loop)]
            if len(varying) != 1 or not follows_counter(index[varying[0]], iv, loop):
                return None
            d = varying[0]
            tile = op.results[0] if op.name == "tile.load" else op.operands[1]
            ext = ir.RankedTensorType(tile.type).shape[d]
            if dim is None:
                dim, extent, slab = d, ext, index[d]
            elif (dim, extent) != (d, ext) or index[d] != slab:
                return None
        elif op.regions:
            continue                         # its nested ops are visited themselves
        elif effects.of(op) != Effect.PURE:
            return None
    return dim


def constant_int(v: ir.Value) -> int | None:
    """The value of `v` when an `arith.constant` integer defines it (a loop bound), else None."""
    owner = v.owner
    owner = owner.operation if isinstance(owner, ir.OpView) else owner
    if isinstance(owner, ir.Operation) and owner.name == "arith.constant" and \
            isinstance(owner.attributes["value"], ir.IntegerAttr):
        return ir.IntegerAttr(owner.attributes["value"]).value
    return None


def follows_counter(v: ir.Value, iv: ir.Value, loop: ir.Operation) -> bool:
    """Whether `v` is the counter `iv`, or an `arith.addi` / `arith.subi` of such a value
    and a value defined outside `loop`, or an `arith.muli` of such a value and a
    nonzero constant (tile-split-blocks' `k * s + bid`): one-to-one in the counter."""
    while v != iv:
        owner = v.owner
        owner = owner.operation if isinstance(owner, ir.OpView) else owner
        if not isinstance(owner, ir.Operation) or owner.name not in ("arith.addi",
                                                                     "arith.subi",
                                                                     "arith.muli"):
            return False
        a, b = owner.operands
        if owner.name == "arith.muli":
            if constant_int(b) not in (None, 0):
                v = a
            elif constant_int(a) not in (None, 0):
                v = b
            else:
                return False
        elif defined_outside(b, loop):
            v = a
        elif defined_outside(a, loop):
            v = b
        else:
            return False
    return True


def defined_outside(v: ir.Value, loop: ir.Operation) -> bool:
    """Whether `v` is defined outside `loop` (so the same in every iteration)."""
    owner = v.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    op = op.operation if isinstance(op, ir.OpView) else op
    while op is not None:
        if op == loop:
            return False
        op = op.parent
        op = op.operation if isinstance(op, ir.OpView) else op
    return True
