"""Register prefetch: a loop's loads into registers issued one iteration ahead (stage `pipeline`).

Contract.  A `scf.for` whose body loads tiles into registers (`tile.load` with a
distributed layout) at indices computed from the loop counter and loop-invariant
values only, and either writes nothing (no `tile.store` or other op with effects
anywhere in its body, `passes/effects.py`) or is a map over slabs (each iteration
loads and stores only slab k of its arrays, `passes/iterations.py`: no store can
change what a later iteration's load reads), is rotated so that the loads
of iteration k + 1 are in flight while iteration k computes:

    x_0 = load(index(lb))                                    before the loop
    for k = lb to ub step s  iter_args(..., x = x_0):
        x_next = load(index(k + s))                          first: in flight ...
        <the body, reading x where it read load(index(k))>   ... while this runs
        yield ..., x_next

A chunked reduction over a long row (a vocabulary softmax, a log-sum-exp) then
streams, and so does a softmax's second pass, which loads and stores slab k: without it each chunk's loads wait for the previous chunk's math (a
load's registers are only waited for where they are used, so issuing the next
chunk's loads first is enough).  The load past the last iteration reads what its
index gives: padding outside the array (loads are bounds-checked), a tile nobody
uses inside it; no predicate is needed.  The cost is one more copy of each loaded
tile in registers: loops whose loaded tiles exceed PREFETCH_REGISTERS a thread
are left alone, as are loops the shared-memory pipeliner took (their loads are
already ahead) and loads whose index depends on anything carried by the loop.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from tileir.dialect.layout import tile_layout
from tileir.dialect.types import bitwidth
from tileir.backend.layout.mma_layouts import Shared

PREFETCH_REGISTERS = 64       # 32-bit registers a thread may spend on the copies


def prefetch_loop(loop: ir.Operation, num_warps: int, index_slice, clone_slice) -> bool:
    """Rotates `loop` as described above; False (and no change) where it does not
    apply.  `index_slice(loop, values)` gives the body ops computing `values` from
    the counter and invariants (or None); `clone_slice` clones them (both from the
    shared-memory pipeliner)."""
    from tileir.passes import effects, iterations   # (passes import the backend: not at load)
    body = loop.regions[0].blocks[0]
    eff = effects.Effects()
    if eff.may_write(loop) and iterations.map_dim(loop, eff) is None:
        return False
    loads, words = [], 0
    for op in body.operations:
        op = op.operation
        if op.name != "tile.load" or isinstance(tile_layout(op.results[0].type), Shared):
            continue
        # the array too: one a list selects in the body (tile.select_array) is
        # selected again for the iteration prefetched
        sl = index_slice(loop, list(op.operands))
        if sl is None:
            continue
        t = op.results[0].type
        n = 1
        for d in t.shape:
            n *= d
        words += -(-n * max(32, bitwidth(t.element_type)) // 32) // (32 * num_warps)
        loads.append((op, sl))
    if not loads or words > PREFETCH_REGISTERS:
        return False
    lb, ub, step = list(loop.operands)[:3]
    inits = list(loop.operands)[3:]
    loc = loop.location
    with ir.InsertionPoint(loop), loc:
        first = [_load_at(op, sl, loop, lb, clone_slice) for op, sl in loads]
        new = scf.ForOp(lb, ub, step, inits + first)
    new_body = new.body
    n_old = len(inits)
    with ir.InsertionPoint(new_body), loc:
        new_yield = scf.YieldOp([])
    old_yield = list(body.operations)[-1]
    for op in list(body.operations)[:-1]:
        op.move_before(new_yield.operation)
    body.arguments[0].replace_all_uses_with(new.induction_variable)
    for i in range(n_old):
        body.arguments[i + 1].replace_all_uses_with(new.inner_iter_args[i])
    with ir.InsertionPoint.at_block_begin(new_body), loc:
        k_next = arith.addi(new.induction_variable, step)
        nexts = [_load_at(op, sl, new.operation, k_next, clone_slice) for op, sl in loads]
    for (op, _), cur in zip(loads, list(new.inner_iter_args)[n_old:]):
        op.results[0].replace_all_uses_with(cur)
        op.erase()
    new_yield.operation.erase()
    with ir.InsertionPoint(new_body), loc:
        scf.YieldOp(list(old_yield.operands) + nexts)
    for i, r in enumerate(loop.results):
        r.replace_all_uses_with(new.results[i])
    loop.erase()
    return True


def _load_at(op: ir.Operation, sl, loop: ir.Operation, k: ir.Value, clone_slice) -> ir.Value:
    """The load `op` of iteration `k` at the insertion point: the slice of its array
    and indices cloned with the counter at `k`."""
    operands = clone_slice(sl, loop, k, list(op.operands))
    new = op.clone()
    for i, v in enumerate(operands):
        new.operands[i] = v
    return new.results[0]
