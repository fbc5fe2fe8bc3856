"""The ring of an alternating owners' loop: two steps an iteration, a slot each (stage
`pipeline`; the kernel option `alternate_owners`, docs/attention.md "Alternating owners").

tile-split-warpgroups' `unroll_pairs` leaves a loop over pairs of steps (step 2i owned by
warpgroup 0, 2i + 1 by warpgroup 1) and, after it, the loop itself for the last step of
an odd count.  Each step loads the same tiles (MLA: a page's latent and RoPE rows, 72 KB
at 64 rows): a ring whose slot held a pair's four tiles would take twice the shared
memory, and a slot would be freed only once both steps are done.  So the ring's slot is
one step's tiles, and the steps of both loops count through it as one sequence g = 0, 1,
2, ... (the pairs' 2i and 2i + 1, then the remainder's): step g waits for slot g % S at
the parity of round g / S and releases it once its last reader is done (`P c`, a
product of both warpgroups: the ring's empty barrier counts every consumer warp), so
step g + S's copy starts while steps g + 1 .. g + S - 1 compute.  A producer warpgroup
issues the copies in one loop over all the steps:

    ring_alloc (S slots of one step's tiles)
    if is_producer:  for k = lb to ub step s:  acquire slot g % S, step k's loads, commit
    else:            for pairs i:  wait(2i); step 2i; release(2i)
                                   wait(2i + 1); step 2i + 1; release(2i + 1)
                     l = l0 + l1;  for the last step:  wait(g); the step; release(g)
                     ring_free; the rest of the kernel

Each step's score chain is issued as one group (product_rotation.issue_chains); no
product is left in flight across a release (they are not made asynchronous here: a
step's `P c` is waited for before its slot is released).

Preconditions (refused otherwise, at the user's loop): a target with a producer
warpgroup (sm_90a, the loop where `loop_specialized` may split, the kernel's one such
loop), products not rotated, no copies in parts, a stage cap of 2 or more, and loads
the ring can take in every step alike.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from tileir.dialect import TileIRError
from tileir.dialect.layout import tile_layout
from tileir.dialect.ring import RingFreeOp, RingReleaseOp, RingViewOp, RingWaitOp
from tileir.backend.layout.mma_layouts import Shared
from tileir.backend.layout.warpgroup_split import OWNERS_KEY, PLAN_ATTR

from .product_rotation import issue_chains
from .rings import (MAX_DEFAULT_STAGES, MAX_SMALL_GRID_STAGES, PRODUCER_WARPS,
                    PRODUCER_WARPS_ATTR)

_VIEW_OPS = frozenset({"tile.reshape", "tile.permute", "tile.extract_slice"})


def is_pair_loop(loop: ir.Operation) -> bool:
    """Whether `loop` is the loop over pairs of steps that `unroll_pairs` made."""
    return loop.name == "scf.for" and PLAN_ATTR in loop.attributes and \
        isinstance(loop.attributes[PLAN_ATTR], ir.DictAttr) and \
        OWNERS_KEY in ir.DictAttr(loop.attributes[PLAN_ATTR])


def remainder_of(loop: ir.Operation) -> ir.Operation | None:
    """The loop of the last step after the pair loop `loop`: the next `scf.for` of its
    block that starts where the pairs end."""
    ops = [op.operation for op in loop.block.operations]
    for op in ops[ops.index(loop) + 1:]:
        if op.name == "scf.for" and op.operands[0] == loop.operands[1]:
            return op
    return None


def pipeline(pl, loop: ir.Operation, loads: list) -> ir.Operation:
    """Rings the pair loop `loop` and its remainder (module docstring), with `pl` (the
    function's `_Pipeliner`) and `loop`'s ring loads `loads`; returns the remainder,
    which the pipeliner then leaves alone."""
    rem = remainder_of(loop)
    if rem is None:
        raise TileIRError("internal error: the alternating owners' loop has no loop of "
                          "its last step after it", loop.location)
    why = _refusal(pl, loop)
    if why:
        raise TileIRError(f"alternate_owners=True: {why}", loop.location)
    rem_loads = [ld for ld in pl.candidates(rem)]
    half = len(loads) // 2
    steps = [loads[:half], loads[half:], rem_loads]
    types = [[ld.op.results[0].type for ld in group] for group in steps]
    if len(loads) % 2 or not half or types[0] != types[1] or types[0] != types[2]:
        raise TileIRError(f"alternate_owners=True: the ring takes one step's tiles a slot, "
                          f"but the steps' loads differ ({[len(t) for t in types]} tiles: "
                          f"a load the ring cannot copy asynchronously in one of them?)",
                          loop.location)
    stages = pl.stages_opt or pl.num_stages_for(
        types[0], 1, MAX_SMALL_GRID_STAGES if pl.small_grid else MAX_DEFAULT_STAGES)
    lb, _, step2 = list(loop.operands)[:3]
    ub, step = rem.operands[1], rem.operands[2]
    c = pl.const
    loc = loop.location
    block_ops = [op.operation for op in loop.block.operations]
    after = block_ops[block_ops.index(loop) + 1:-1]
    warps = pl.num_warps()
    with ir.InsertionPoint(loop), loc:
        ring = pl.ring_alloc(stages, steps[0])
    # the producer copies every step, the pairs' and the last, by the single step: step
    # k's indices are the first step of a pair's at the pair loop's counter k
    branch, done = pl.producer_branch(loop, ring, steps[0], stages, ub, warps, step=step)
    loop.move_before(done.operation)
    for op in after:
        op.move_before(done.operation)
    # the consumers: steps 2i and 2i + 1 of the pairs, then the remainder's step
    body = loop.regions[0].blocks[0]
    with ir.InsertionPoint(list(body.operations)[0]), loc:
        pair = arith.divui(arith.subi(body.arguments[0], lb), step2)
        first = arith.muli(pair, c(2))
        second = arith.addi(first, c(1))
    _consume(ring, steps[0], first, stages, c)
    _consume(ring, steps[1], second, stages, c)
    rem_body = rem.regions[0].blocks[0]
    with ir.InsertionPoint(list(rem_body.operations)[0]), rem.location:
        before = arith.divui(arith.subi(rem.operands[0], lb), step)    # the pairs' steps
        g = arith.addi(before, arith.divui(arith.subi(rem_body.arguments[0],
                                                      rem.operands[0]), step))
    _consume(ring, steps[2], g, stages, c)
    for lp in (loop, rem):
        issue_chains(lp)
        for slot, views in _slots(lp):
            _release_after_readers(ring, slot, views, lp)
    with ir.InsertionPoint.after(rem), loc:
        RingFreeOp(ring)
    pl.rematerialize(branch.operation, branch.else_block)
    pl.func.attributes[PRODUCER_WARPS_ATTR] = ir.IntegerAttr.get(
        ir.IntegerType.get_signless(32), PRODUCER_WARPS)
    return rem


def _refusal(pl, loop: ir.Operation) -> str | None:
    if not pl.chip.startswith("sm_90"):
        return f"the alternation needs warpgroups and a producer warpgroup (sm_90a), not {pl.chip}"
    if pl.specialized or pl.guards(loop) is None or \
            not (pl.specialize or pl.chains_specialize):
        return ("the loop of pairs needs its own producer warpgroup (the kernel's one "
                "warp-specialized loop, at its top level or under block-uniform guards; "
                "not warp_specialize=False, not occupancy > 1)")
    if pl.copy_parts:
        return "copies in parts (copy_parts=True) of a pair's slots are not built"
    if pl.rotate:
        return ("rotated products (product_rotation=True) are not built for a loop of "
                "pairs; compile with product_rotation=False")
    if pl.cap < 2:
        # (the stage driver's answer to shared memory the rings overflowed)
        return ("its ring of one step's tiles a slot needs 2 slots beside the kernel's "
                "other buffers, and they do not fit the block's shared memory")
    return None


def _consume(ring, loads: list, g: ir.Value, stages: int, c) -> None:
    """Before the first of `loads` (one step's): the wait for step `g`'s slot and its
    views, which replace the loads."""
    first = loads[0].op
    with ir.InsertionPoint(first), first.location:
        slot = arith.remui(g, c(stages))
        parity = arith.andi(arith.divui(g, c(stages)), c(1))
        wait = RingWaitOp(ring, slot, parity)
        views = [RingViewOp(ring, slot, b).result for b in range(len(loads))]
    for v in views:
        # (the slot of step 2i is 0 for LLVM: its descriptors would leave the loop)
        v.owner.attributes["tile.opaque_slot"] = ir.UnitAttr.get()
    wait.operation.attributes["tile.step_views"] = ir.IntegerAttr.get(
        ir.IntegerType.get_signless(64), len(loads))
    for ld, view in zip(loads, views):
        ld.op.results[0].replace_all_uses_with(view)
        ld.op.erase()


def _slots(loop: ir.Operation) -> list[tuple[ir.Value, list[ir.Value]]]:
    """(slot, views) of each step's wait in `loop`'s body (`_consume` marked them and put
    their views right after them)."""
    out = []
    ops = [op.operation for op in loop.regions[0].blocks[0].operations]
    for k, op in enumerate(ops):
        if op.name != "tile.ring_wait" or "tile.step_views" not in op.attributes:
            continue
        n = ir.IntegerAttr(op.attributes["tile.step_views"]).value
        del op.attributes["tile.step_views"]
        views = [o.results[0] for o in ops[k + 1:k + 1 + n]]
        if [o.name for o in ops[k + 1:k + 1 + n]] != ["tile.ring_view"] * n:
            raise TileIRError("internal error: a step's ring views do not follow its wait",
                              op.location)
        out.append((op.operands[1], views))
    return out


def _release_after_readers(ring, slot: ir.Value, views: list, loop: ir.Operation) -> None:
    """The release of `slot` after the last op of `loop`'s body that reads its tiles:
    through views of views (reshape, permute: shared memory still), to the products
    that read them (an asynchronous one: to its wait)."""
    body = loop.regions[0].blocks[0]
    shared = set(views)
    work = list(views)
    readers = []
    while work:
        v = work.pop()
        for use in v.uses:
            user = use.owner
            user = user.operation if hasattr(user, "operation") else user
            if user.name in _VIEW_OPS and isinstance(tile_layout(user.results[0].type), Shared):
                if user.results[0] not in shared:
                    shared.add(user.results[0])
                    work.append(user.results[0])
            else:
                readers.append(user)
    # an asynchronous product reads its operands until its wait
    work = [r for r in readers if r.name == "tile.mma_async"]
    while work:
        op = work.pop()
        for use in op.results[0].uses:
            user = use.owner
            user = user.operation if hasattr(user, "operation") else user
            readers.append(user)
            if user.name == "tile.mma_async":
                work.append(user)
    top = [_in_body(r, body) for r in readers]
    order = [op.operation for op in body.operations]
    last = max(top, key=order.index)
    with ir.InsertionPoint.after(last), loop.location:
        RingReleaseOp(ring, slot, arith.ConstantOp(ir.IntegerType.get_signless(1), 1).result)


def _in_body(op: ir.Operation, body: ir.Block) -> ir.Operation:
    """The op of `body` that is or holds `op`."""
    while op.block != body:
        op = op.parent
        op = op.operation if hasattr(op, "operation") else op
    return op
