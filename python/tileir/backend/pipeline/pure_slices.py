"""Pure slices of a kernel's ops: the pure ops that compute some values, and their clones.

The pipeliner recomputes a load's index for a later iteration (software_pipeline.py),
a persistent kernel's rings recompute the next tile's K bounds and indices
(persistent.py), stream-K and versioned kernels clone the index math they need
(stream_k.py, version_bounds.py): each finds the ops with `pure_slice` and copies
them with `clone_ops`.
"""

from __future__ import annotations

from mlir import ir


def pure_slice(owner: ir.Operation, values, given, before: ir.Operation | None = None,
               reads=None):
    """The ops of `owner`'s body (before op `before`, if given) that compute `values`
    from what `given(value)` accepts, in body order; None if some value depends on
    anything else: an argument of the body, an op with effects or regions.  A load
    that `reads(op)` accepts counts as pure (memory nothing in the kernel writes: a
    paged cache's block table, read for a later iteration's page)."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    classify = effects.Effects()            # asked of region-free ops: nothing memoized
    body = owner.regions[0].blocks[0]
    order = [op.operation for op in body.operations]
    stop = order.index(before) if before is not None else len(order)
    needed: set = set()
    ok = True

    def need(v: ir.Value) -> None:
        nonlocal ok
        if given(v):
            return
        op = v.owner
        if isinstance(op, ir.Block):
            ok = False                   # a value the body carries
            return
        op = op.operation if hasattr(op, "operation") else op
        pure = classify.of(op) == effects.Effect.PURE or (reads is not None and reads(op))
        if op.parent != owner or order.index(op) > stop or not pure or len(op.regions):
            ok = False
            return
        if op not in needed:
            needed.add(op)
            for x in op.operands:
                need(x)

    for v in values:
        need(v)
    return [op for op in order if op in needed] if ok else None


def defined_in(v: ir.Value, loop: ir.Operation) -> bool:
    """Whether `v` is defined inside `loop` (its body's arguments included)."""
    owner = v.owner
    op = owner.owner if isinstance(owner, ir.Block) else \
        (owner.operation if hasattr(owner, "operation") else owner)
    while op is not None:
        if op == loop:
            return True
        op = op.parent
    return False


def clone_ops(ops: list[ir.Operation], mapping: dict) -> None:
    """Clones `ops` at the insertion point, their operands renamed by `mapping`, which
    learns each result's clone."""
    for op in ops:
        new = op.clone()
        for i, x in enumerate(op.operands):
            if x in mapping:
                new.operands[i] = mapping[x]
        for old_r, new_r in zip(op.results, new.results):
            mapping[old_r] = new_r


# the ops that write the array of their first operand
WRITES = frozenset({"tile.store", "tile.scatter", "tile.atomic_rmw", "tile.atomic_cas"})


def written_args(func: ir.Operation) -> set[int]:
    """The argument numbers of the arrays some op of `func` writes: loads from the
    others read memory nothing in the kernel changes (the `reads` of `pure_slice`)."""
    return set(first_writes(func))


def first_writes(func: ir.Operation) -> dict[int, ir.Operation]:
    """The first op (in program order) writing each array argument `func` writes, by
    the argument's number."""
    first: dict[int, ir.Operation] = {}

    def visit(o):
        o = o.operation
        if o.name in WRITES and isinstance(o.operands[0].owner, ir.Block):
            first.setdefault(o.operands[0].arg_number, o)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return first
