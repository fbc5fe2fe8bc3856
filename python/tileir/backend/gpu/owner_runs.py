"""Ops one warpgroup owns, run by it alone (stage `gpu`; tile-split-warpgroups' marks).

tile-split-warpgroups marks the ops of a two-product loop that one consumer warpgroup
(the owner, 0) runs (`tile.owner`), and tile-assign-layouts gives them layouts of that
warpgroup's four warps, which the other warpgroup holds as replicas.  Where the kernel
asks for the owner to run them alone (`owner_only`), the lowering of a block gathers
its owned ops into one run and emits it under `if warp < 4`:

    %s = mma(q, c^T) {owner}              scf.if %is_owner -> (P, alpha, m, l) {
    %p = exp2(...) {owner}          ->       wgmmas, softmax ...; yield P, alpha, m, l
    %pb = truncf %p {owner, handoff}      } else { yield undef, ... }
    %o = mma(convert(%pb), c, acc)        %o = mma(exchange(P: owner writes), c, acc)

A block's pure ops between its first and last owned op that do not read the run's
values move above it; those that do (and no later owned op reads) move below it.  The
run's results are the owner's alone (`LoweringContext.owner_only`): in the other
warpgroup they are undefined, and so is whatever is computed from them outside a run,
until a conversion or broadcast into a layout both warpgroups hold: that exchange
through shared memory is written by the owner's warps only (rules/shape.py), and a
store of an owner-only value is the owner's (lower_owned_store).  Nothing that needs
both warpgroups (a consumer barrier) may run inside a run: `LoweringContext.barrier`
refuses it.  A block whose owned ops cannot be gathered (an op with effects between
them) runs them in both warpgroups, replicas as before: correct, not faster.

With the kernel option `early_rescale` (`rescales`), a multiply of a value defined
before the run (O) by the broadcast of one the run hands off (alpha) is lowered
twice: at the end of the owner's run, from the owner's own registers (the broadcast
moves nothing there), and for the other warpgroup alone right after the hand-off
(`if warp >= 4`, the owner passing its product through).  The owner's 128 multiplies
of O's rescale then sit in the basic block of the softmax's exponentials, where
ptxas fills the MUFU pipe's gaps with them, instead of between P's hand-off and `P c`
in both warpgroups:

    if owner { S, softmax, P ; O' = O * alpha } else { O' = O }
    alpha handed over ; if not owner { O' = O' * alpha } ; P handed over ; O' += P c
"""

from __future__ import annotations

import contextlib

from mlir import ir
from mlir.dialects import arith, llvm, scf, vector

from tileir.dialect import TileIRError
from tileir.backend.layout import layouts as L
from tileir.backend.layout.mma_layouts import Shared, choose_swizzle
from tileir.backend.layout.warpgroup_split import OWNER, OWNER_ATTR, PLAN_ATTR

from . import barriers
from .context import Frag, LoweringContext, _bits, lin_of, same_warps
from .shared import SmemTile, load_frag, store_frag

OWNER_WARPS = 4            # warpgroup 0: warps 0-3 of the consumer warps
_WAIT_TICKS = 0x989680      # try_wait's suspend-time hint (ns), as rules/ring.py's
_PURE_PREFIXES = ("arith.", "math.")
_PURE = frozenset({"tile.iota", "tile.broadcast", "tile.reshape", "tile.permute",
                   "tile.reduce", "tile.convert_layout", "tensor.splat", "tensor.extract",
                   "tile.extract_slice", "tile.concat"})


def is_owner(cx: LoweringContext, owner: int = OWNER) -> ir.Value:
    """i1: this thread is one of warpgroup `owner`'s (0: warps 0-3, 1: warps 4-7 of the
    consumer warps)."""
    _, _, warp = cx.thread_ids()
    if owner == OWNER:
        return arith.cmpi(arith.CmpIPredicate.ult, warp, cx.const(OWNER_WARPS))
    return arith.cmpi(arith.CmpIPredicate.uge, warp, cx.const(OWNER_WARPS))


@contextlib.contextmanager
def only_in(cx: LoweringContext, on: int | None):
    """Code emitted inside runs in warpgroup `on` only; in all threads when None."""
    if on is None:
        yield
        return
    branch = scf.IfOp(is_owner(cx, on))
    with ir.InsertionPoint(branch.then_block):
        yield
        scf.YieldOp([])


def lower_block(cx: LoweringContext, ops: list[ir.Operation], lower_op) -> bool:
    """Lowers a block's ops (terminator excluded) with its owned ops in one run; False
    when it has none or they cannot be gathered (the caller lowers the ops as they
    are)."""
    if cx.alternating:
        return lower_alternating(cx, ops, lower_op)
    plan = schedule(ops)
    if plan is None:
        return False
    before, run, after = plan
    for op in before:
        lower_op(cx, op)
    pairs = rescales(run, after) if cx.owner_rescale else []
    early = lower_run(cx, run, lower_op, pairs)
    merged = merged_handoffs(cx, after, early)
    for op in after:
        if op in early:
            _other_rescale(cx, op, early[op], lower_op)
            continue
        if cx.handoff_open is not None and op not in merged[1]:
            signal_handoff(cx)          # (a hand-off of the group lowered as no hand-off)
        cx.handoff_defer = op in merged[0]
        lower_op(cx, op)
        cx.handoff_defer = False
    if cx.handoff_open is not None:
        signal_handoff(cx)
    return True


# -- merged hand-offs (the kernel option `merged_handoffs`) ----------------------------
# A step of the split hands off alpha, then P, each with its own pair of signals: the
# owner waits on *empty*, writes alpha, arrives on *full*, and before it writes P waits
# on *empty* again, until the other warpgroup has woken, read alpha and arrived: a
# named-barrier round trip on the owner's path between its exponentials and `P c`.
# Merged, the hand-offs of a group (consecutive in a block, only the other
# warpgroup's early rescale between them) share one pair: the owner waits on *empty*
# once, writes each value into its own bytes of the scratch area (side by side), and
# arrives on *full* after the last; the other waits on *full* once, reads each value
# where it needs it, and arrives on *empty* after the last read.  Between two hand-offs
# of a group only elementwise ops (O's rescale) run, which wait for no one.


def merged_handoffs(cx: LoweringContext, after: list[ir.Operation],
                    early: dict) -> tuple[set, set]:
    """(deferred, grouped): the ops of `after` that hand off an owner-only value and
    are followed in their group by another (their signals wait for the group's last),
    and all ops from a group's first hand-off to its last (the group stays open over
    them).  Empty unless the kernel asks (`cx.owner_merge`)."""
    if not cx.owner_merge:
        return set(), set()
    deferred, grouped = set(), set()
    group: list = []                    # the open group's ops, hand-offs and between

    def close():
        handoffs = [i for i, op in enumerate(group) if op in hands]
        if len(handoffs) > 1:
            deferred.update(group[i] for i in handoffs[:-1])
            grouped.update(group[:handoffs[-1] + 1])
        group.clear()

    hands = set()
    for op in after:
        reads_owned = any(v in cx.owner_only for v in op.operands)
        if op.name in ("tile.broadcast", "tile.convert_layout") and reads_owned:
            hands.add(op)
            group.append(op)
        elif op in early or (op.name.startswith(_PURE_PREFIXES) and not op.regions and
                             not reads_owned):
            if group:                   # (the other's rescale, elementwise ops: no
                group.append(op)        # waits between two hand-offs)
        else:
            close()
    close()
    return deferred, grouped


def handoff_buffer(cx: LoweringContext, align: int = 16) -> int:
    """Where the next hand-off's buffer starts, in bytes into the scratch area: past
    the bytes an open group's earlier hand-offs wrote (merged hand-offs), else 0."""
    if cx.handoff_open is None:
        return 0
    return (cx.handoff_open + align - 1) // align * align


def signal_handoff(cx: LoweringContext) -> None:
    """Closes an open group of merged hand-offs: the owner arrives on *full*, the
    other warpgroup on *empty*."""
    from mlir.dialects import nvvm
    empty, full = handoff_barriers(cx)
    count = cx.const(32 * cx.num_warps)
    branch = scf.IfOp(is_owner(cx), [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        nvvm.barrier_arrive(count, barrier_id=cx.const(full))
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        nvvm.barrier_arrive(count, barrier_id=cx.const(empty))
        scf.YieldOp([])
    cx.handoff_open = None


# -- alternating owners (the kernel option `alternate_owners`) ------------------------
# tile-split-warpgroups' loop of pairs marks step 2i's owned ops `tile.owner = 0` and
# step 2i + 1's `1`.  A block's owned ops are gathered into runs, each of one owner's ops
# between effects (the rings' waits and releases, the products of both warpgroups), each
# under its owner's test; what a run reads that the other warpgroup holds alone (step
# 2i's m and alpha in step 2i + 1's run, and back) crosses first (`cross`: its holder's
# threads write their registers, both warpgroups read them, the same layout), and so
# does a carried value the other warpgroup reads in the next trip (the last step's m).
# P and alpha reach both warpgroups as in the split, written by the warpgroup that made
# them.  Every exchange here waits for both warpgroups (no hand-off leaves one ahead),
# and a run is not cut around the hand-off it waits for: the plain alternation
# (docs/attention.md, "Alternating owners": what is built and what is not).


def lower_alternating(cx: LoweringContext, ops: list[ir.Operation], lower_op) -> bool:
    """Lowers a block's ops (terminator excluded) with each owner's ops in runs; also a
    block with no owned ops, whose ops may read values one warpgroup holds alone."""
    if cx.owner_rescale or cx.owner_mbarriers:
        block_op = ops[0].parent if ops else None
        raise TileIRError("alternate_owners=True with early_rescale or mbarrier_handoffs: "
                          "the alternating owners' runs do not take them yet",
                          block_op.location if block_op is not None else ir.Location.current)
    for segment in schedule_runs(ops):
        if isinstance(segment, tuple):
            owner, run = segment
            cross(cx, [v for v in _read_from_outside(run)
                       if v in cx.owner_only and cx.owner_only[v] != owner])
            lower_run(cx, run, lower_op, owner=owner)
        else:
            settle(cx, segment)
            lower_op(cx, segment)
    if ops:
        _settle_carried(cx, ops[0].block)
    return True


def schedule_runs(ops: list[ir.Operation]) -> list:
    """The block's ops in order, each owner's consecutive owned ops gathered into a run
    `(owner, [ops])` (the pure ops between them moved above or below it, `schedule`); a
    run ends at an op with effects or at another owner's op."""
    out: list = []
    i = 0
    while i < len(ops):
        if OWNER_ATTR not in ops[i].attributes:
            out.append(ops[i])
            i += 1
            continue
        owner = _owner(ops[i])
        last = j = i
        while j + 1 < len(ops):
            nxt = ops[j + 1]
            if OWNER_ATTR in nxt.attributes:
                if _owner(nxt) != owner:
                    break
                last = j + 1
            elif not _pure(nxt):
                break
            j += 1
        plan = schedule(ops[i:last + 1])
        if plan is None:
            raise TileIRError("internal error: the owned ops of an alternating owner cannot "
                              "be gathered into one run", ops[i].location)
        before, run, after = plan
        out += before + [(owner, run)] + after
        i = last + 1
    return out


def settle(cx: LoweringContext, op: ir.Operation) -> None:
    """Before an op outside runs: the values it reads that one warpgroup holds alone
    cross to both, unless the op's rule takes them as they are (an exchange its holder
    writes, a store its holder makes, a pure op on one warpgroup's values, whose
    result is that warpgroup's too: `taint`)."""
    owned = [v for v in op.operands if v in cx.owner_only]
    if not owned:
        return
    if op.name == "scf.for":
        # an initial value only its holder's ops read in the body stays its holder's
        body = op.regions[0].blocks[0]
        inits = list(op.operands)[3:]
        cross(cx, [v for arg, v in zip(list(body.arguments)[1:], inits)
                   if v in cx.owner_only and not _read_by(arg, body, cx.owner_only[v])])
        return
    if len({cx.owner_only[v] for v in owned}) == 1 and \
            (_pure(op) or op.name in ("tile.store",)):
        return
    cross(cx, owned)


def _read_by(arg: ir.Value, block: ir.Block, owner: int) -> bool:
    """Whether only ops of warpgroup `owner` read `arg` in `block`."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    readers = [_in_block(effects.user(u), block) for u in arg.uses]
    return all(r is not None and OWNER_ATTR in r.attributes and _owner(r) == owner
               for r in readers)


def _settle_carried(cx: LoweringContext, block: ir.Block) -> None:
    """At the end of a loop's body: a value it carries that one warpgroup holds alone
    crosses to both where an op of the other warpgroup (or of both) reads it in the
    next trip (the pair loop's m, made by step 2i + 1's owner, read by step 2i's)."""
    loop = block.owner
    loop = loop.operation if hasattr(loop, "operation") else loop
    if loop is None or loop.name != "scf.for":
        return
    yields = list(list(block.operations)[-1].operands)
    cross(cx, [v for arg, v in zip(list(block.arguments)[1:], yields)
               if v in cx.owner_only and not _read_by(arg, block, cx.owner_only[v])])
    _share_row_sums(cx, loop, yields)


def _share_row_sums(cx: LoweringContext, loop: ir.Operation, yields: list) -> None:
    """The two owners' row sums of an alternating loop (its plan's `row_sums`: sum i
    and its partner n + k, each held by one warpgroup and read only by it) carried in
    the same registers: each warpgroup yields its own in both places, so the two
    loop-carried values are equal in every thread and LLVM keeps one (with both, the
    consumers of DeepSeek's launch hold 32 registers a thread more than they use)."""
    if PLAN_ATTR not in loop.attributes or \
            not isinstance(loop.attributes[PLAN_ATTR], ir.DictAttr) or \
            "row_sums" not in ir.DictAttr(loop.attributes[PLAN_ATTR]):
        return
    sums = list(ir.DenseI64ArrayAttr(ir.DictAttr(loop.attributes[PLAN_ATTR])["row_sums"]))
    n = len(yields) - len(sums)
    for k, i in enumerate(sums):
        a, b = yields[i], yields[n + k]
        if a not in cx.owner_only or b not in cx.owner_only or \
                cx.owner_only[a] == cx.owner_only[b] or \
                len(list(a.uses)) != 1 or len(list(b.uses)) != 1:
            continue
        fa, fb = cx.get(a), cx.get(b)
        if not isinstance(fa, Frag) or not isinstance(fb, Frag) or fa.lin != fb.lin:
            continue
        mine = is_owner(cx, cx.owner_only[a])
        regs = [arith.select(mine, x, y) for x, y in zip(fa.regs, fb.regs)]
        cx.values[a] = Frag(fa.lin, fa.elem, regs)
        cx.values[b] = Frag(fb.lin, fb.elem, list(regs))


def cross(cx: LoweringContext, values: list[ir.Value]) -> None:
    """`values`, each held by one warpgroup alone, held by both: each holder's threads
    write their registers to shared memory, both warpgroups read them back into the
    same layouts (a replica's registers are its counterpart's); all of one exchange,
    between one pair of barriers of both warpgroups (m and l of a step together)."""
    values = list(dict.fromkeys(values))
    if not values:
        return
    frags = []
    for v in values:
        got = cx.get(v)
        if not isinstance(got, Frag):
            raise TileIRError("alternate_owners=True: a scalar one warpgroup computes alone "
                              "is read by the other (only tiles cross between the owners)",
                              ir.Location.current)
        frags.append(got)
    tiles, offset = [], 0
    for f in frags:
        eb = max(1, _bits(f.elem) // 8)
        shape = f.lin.shape
        layout = Shared(choose_swizzle(shape[-1] * eb), tuple(reversed(range(len(shape)))))
        tile = SmemTile(layout, shape, f.elem, 0)
        tiles.append((tile, offset))
        offset = (offset + tile.nbytes + 127) // 128 * 128
    base = cx.scratch(offset, align=128)
    cx.smem_barrier_before()                 # earlier readers of the scratch are done
    for v, f, (tile, at) in zip(values, frags, tiles):
        tile.base = base + at
        with only_in(cx, cx.owner_only[v]):
            store_frag(cx, f, tile)
    cx.barrier()
    for v, f, (tile, _) in zip(values, frags, tiles):
        cx.values[v] = load_frag(cx, tile, f.lin)
        del cx.owner_only[v]


def _read_from_outside(run: list[ir.Operation]) -> list[ir.Value]:
    """The values the ops of `run` (nested ones too) read that no op of it defines."""
    inside: set = set()
    for op in run:
        for o in [op] + _nested(op):
            inside.update(o.results)
            for region in o.regions:
                for block in region.blocks:
                    inside.update(block.arguments)
    out: list[ir.Value] = []
    for op in run:
        for o in [op] + _nested(op):
            for v in o.operands:
                if v not in inside and v not in out:
                    out.append(v)
    return out


def _nested(op: ir.Operation) -> list[ir.Operation]:
    out = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                out.append(inner.operation)
                out.extend(_nested(inner.operation))
    return out


def _in_block(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
    """The op of `block` that is or holds `op` (None: outside it)."""
    while op is not None and op.block != block:
        op = op.parent
        op = op.operation if hasattr(op, "operation") else op
        if op is not None and op.name in ("func.func", "gpu.func", "builtin.module"):
            return None
    return op


def _owner(op: ir.Operation) -> int:
    return ir.IntegerAttr(op.attributes[OWNER_ATTR]).value


def rescales(run: list[ir.Operation], after: list[ir.Operation]) -> list[tuple]:
    """(broadcast, multiply, factor) of `after`: a pure `arith.mulf` of a value defined
    before the run (the factor: O) by the `tile.broadcast` of a value the run hands
    off (alpha), both after the run, where the broadcast moves nothing in the owner's
    threads (its layouts differ only in the warps that hold replicas); `lower_run`
    lowers them in the owner's run too."""
    produced = {r for op in run for r in op.results}
    later = set(after)
    out = []
    for b in after:
        if b.name != "tile.broadcast" or b.operands[0] not in produced or \
                not _local_broadcast(b):
            continue
        for use in b.results[0].uses:
            m = _user(use)
            if m.name != "arith.mulf" or m not in later or m.regions:
                continue
            x = m.operands[1 - use.operand_number]
            if x in produced or _producer(x) in later:
                continue
            out.append((b, m, x))
    return out


def _local_broadcast(b: ir.Operation) -> bool:
    """Whether the broadcast `b` finds every element a thread needs in its own
    registers, up to replicas (rules/shape.py's test for an exchange)."""
    src = lin_of(b.operands[0].type)
    r = L.restrict(lin_of(b.results[0].type), src.shape)
    return r.lanes == src.lanes and same_warps(r.warps, src.warps) and \
        set(r.regs) <= set(src.regs)


def _producer(v: ir.Value):
    owner = v.owner
    owner = owner.operation if isinstance(owner, ir.OpView) else owner
    return owner if isinstance(owner, ir.Operation) else None


def _other_rescale(cx: LoweringContext, m: ir.Operation, owners: list, lower_op) -> None:
    """The multiply `m` for the other warpgroup alone, from the run's results `owners`
    (there: its factor as it was); the owner passes its product (`owners`) through."""
    x = next(v for v in m.operands if _producer(v) is None or
             _producer(v).name != "tile.broadcast")
    saved = cx.values[x]
    other = arith.xori(is_owner(cx), cx.const(1, ir.IntegerType.get_signless(1)))
    probe = scf.IfOp(other, [], has_else=False)
    cx.values[x] = Frag(saved.lin, saved.elem, owners)
    try:
        with ir.InsertionPoint(probe.then_block):
            cx.owner_run = True         # (no barrier of both warpgroups in a branch)
            try:
                lower_op(cx, m)
            finally:
                cx.owner_run = False
    finally:
        cx.values[x] = saved
    got = cx.get(m.results[0])
    new = scf.IfOp(other, [r.type for r in got.regs], has_else=True)
    with ir.InsertionPoint(new.then_block):
        yield_op = scf.YieldOp(list(got.regs))
    for op in list(probe.then_block.operations):
        op.operation.move_before(yield_op.operation)
    with ir.InsertionPoint(new.else_block):
        scf.YieldOp(owners)
    probe.operation.erase()
    cx.values[m.results[0]] = Frag(got.lin, got.elem, list(new.results))


def schedule(ops: list[ir.Operation]) -> tuple[list, list, list] | None:
    """(before, run, after): the block's ops (terminator excluded) with its owned ops
    gathered into one run; None when the block has none or they cannot be gathered."""
    owned = [i for i, op in enumerate(ops) if OWNER_ATTR in op.attributes]
    if not owned:
        return None
    first, last = owned[0], owned[-1]
    run_ops = [op for op in ops[first:last + 1] if OWNER_ATTR in op.attributes]
    run_set = set(run_ops)
    produced = {r for op in run_ops for r in op.results}
    up, down = [], []
    for op in ops[first:last + 1]:
        if op in run_set:
            continue
        if not _pure(op):
            return None
        reads = _reads(op)
        if reads & produced or any(x in down for x in _producers(reads)):
            # reads the run: below it, unless a later owned op reads it too
            if any(r in _reads_of(run_ops) for r in op.results):
                return None
            down.append(op)
            produced |= set(op.results)      # (what reads it goes below too)
        else:
            up.append(op)
    return ops[:first] + up, run_ops, down + ops[last + 1:]


def lower_run(cx: LoweringContext, run: list[ir.Operation], lower_op,
              pairs: list[tuple] = (), owner: int = OWNER) -> dict:
    """Lowers `run` under `if warp < 4`; its values read outside it become the
    results of the if (undefined in the other warpgroup, `cx.owner_only`).  Each
    (broadcast, multiply, factor) of `pairs` is lowered at the end of the run too,
    and the if yields the product (the other warpgroup: the factor as it is);
    returns {multiply: those results} (`_other_rescale` finishes them)."""
    inside = set(run)
    escaping = [r for op in run for r in op.results
                if any(_user(u) not in inside for u in r.uses)]
    cond = is_owner(cx, owner)
    # the types of the escaping registers are known once lowered: lower into a first
    # if without results, then move its ops into the one that yields them
    probe = scf.IfOp(cond, [], has_else=True)
    with ir.InsertionPoint(probe.then_block):
        cx.owner_run = True
        try:
            for op in run:
                lower_op(cx, op)
            products = []
            for b, m, x in pairs:
                # the owner's rescale: from its own registers of the handed-off value
                lower_op(cx, b)
                lower_op(cx, m)
                products.append((m, list(cx.get(m.results[0]).regs), list(cx.get(x).regs)))
        finally:
            cx.owner_run = False
    flat = []
    with ir.InsertionPoint(probe.then_block):
        for v in escaping:
            got = cx.get(v)
            if isinstance(got, Frag):
                # 16-bit values leave the run packed in pairs: half the registers live
                # across the branch (P: 16, not 32)
                flat.extend(_packed(got.regs))
            elif isinstance(got, ir.Value):
                flat.append(got)
            else:
                raise TileIRError(f"internal error: an owned value that is not a tile or "
                                  f"a scalar ({type(got).__name__}) is read outside its run",
                                  v.owner.location)
    types = [v.type for v in flat]
    mine = [r for _, regs, _ in products for r in regs]
    new = scf.IfOp(cond, types + [r.type for r in mine], has_else=True)
    with ir.InsertionPoint(new.then_block):
        yield_op = scf.YieldOp(flat + mine)
    for op in list(probe.then_block.operations):
        op.operation.move_before(yield_op.operation)
    with ir.InsertionPoint(new.else_block):
        scf.YieldOp([llvm.UndefOp(t).result for t in types] +
                    [r for _, _, old in products for r in old])
    probe.operation.erase()
    it = iter(new.results[len(types):])
    early = {m: [next(it) for _ in regs] for m, regs, _ in products}
    it = iter(new.results)
    for v in escaping:
        got = cx.get(v)
        if isinstance(got, Frag):
            words = [next(it) for _ in range(_packed_count(got.regs))]
            cx.values[v] = Frag(got.lin, got.elem, _unpacked(words, got.regs))
        else:
            cx.values[v] = next(it)
        cx.owner_only[v] = owner
    return early


def _sixteen(regs: list) -> bool:
    return bool(regs) and len(regs) % 2 == 0 and str(regs[0].type) in ("bf16", "f16")


def _packed_count(regs: list) -> int:
    return len(regs) // 2 if _sixteen(regs) else len(regs)


def _packed(regs: list) -> list:
    """16-bit registers in pairs, each an i32 (low half first); others as they are."""
    if not _sixteen(regs):
        return list(regs)
    i32 = ir.IntegerType.get_signless(32)
    vt = ir.VectorType.get([2], regs[0].type)
    out = []
    for i in range(0, len(regs), 2):
        v = llvm.UndefOp(vt).result
        v = llvm.insertelement(v, regs[i], arith.ConstantOp(i32, 0).result)
        v = llvm.insertelement(v, regs[i + 1], arith.ConstantOp(i32, 1).result)
        out.append(llvm.bitcast(i32, v))
    return out


def _unpacked(words: list, like: list) -> list:
    """The registers `_packed` made of `like`, unpacked."""
    if not _sixteen(like):
        return list(words)
    vt = ir.VectorType.get([2], like[0].type)
    out = []
    for w in words:
        v = llvm.bitcast(vt, w)
        out.extend(vector.extract(v, [], [j]) for j in (0, 1))
    return out


def taint(cx: LoweringContext, op: ir.Operation) -> None:
    """After `op` is lowered outside a run: its results are owner-only where it read an
    owner-only value (a loop or if: where its regions yield one)."""
    if op.name in ("scf.for", "scf.if"):
        for region in op.regions:
            for block in region.blocks:
                ops = list(block.operations)
                if not ops:
                    continue
                for i, v in enumerate(ops[-1].operands):
                    if v in cx.owner_only and i < len(op.results):
                        cx.owner_only[op.results[i]] = cx.owner_only[v]
        return
    if op.name in ("tile.convert_layout", "tile.broadcast", "tile.reshape", "tile.permute"):
        return                      # (rules/shape.py: owner-written where they exchange)
    owners = [cx.owner_only[v] for v in op.operands if v in cx.owner_only]
    if owners:
        for r in op.results:
            cx.owner_only[r] = owners[0]


def _pure(op: ir.Operation) -> bool:
    return (op.name.startswith(_PURE_PREFIXES) or op.name in _PURE) and not op.regions


def _reads(op: ir.Operation) -> set:
    return set(op.operands)


def _reads_of(ops: list[ir.Operation]) -> set:
    out: set = set()
    for op in ops:
        out |= set(op.operands)
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    out |= _reads_of([inner.operation])
    return out


def _producers(values: set) -> list:
    out = []
    for v in values:
        owner = v.owner
        owner = owner.operation if isinstance(owner, ir.OpView) else owner
        if isinstance(owner, ir.Operation):
            out.append(owner)
    return out


def _user(use) -> ir.Operation:
    owner = use.owner
    return owner.operation if isinstance(owner, ir.OpView) else owner


# -- hand-offs: the owner a step ahead -----------------------------------------------
# In the consumer branch of a warp-specialized kernel a hand-off (an exchange of an
# owner-only value into a layout both warpgroups hold) that leaves the owner's own
# registers as they are needs no barrier of both warpgroups: the owner waits until the
# other has read the previous hand-off (*empty*), writes, and arrives (*full*) without
# waiting; the other waits for *full*, reads, and arrives on *empty*.  So the owner runs
# ahead into the next step (its half of P c, the next scores) while the other reads P
# and runs its half of P c (FlashMLA's and TileLang's schedule).  Two named barriers
# after the ping-pong's turns (rules/control.py); the other warpgroup arrives on empty
# once when the branch opens and the owner waits on it once when it closes
# (`open_handoffs`, `close_handoffs`), so every wait meets its arrivals.


def handoff_barriers(cx: LoweringContext) -> tuple[int, int]:
    """(empty, full): the named barrier ids of the hand-offs (barriers.py)."""
    return barriers.handoff_barriers(cx.num_warps)


def skewed(cx: LoweringContext, src: Frag, res) -> bool:
    """Whether a hand-off of `src` into layout `res` may leave the owner ahead: the
    consumer branch of two warpgroups, and the owner's own registers already the
    result's (the layouts differ only in the warps that hold replicas)."""
    return cx.owner_skew and not cx.alternating and cx.role == "consumer" and \
        cx.num_warps == 2 * OWNER_WARPS and \
        src.lin.regs == res.regs and src.lin.lanes == res.lanes and \
        same_warps(src.lin.warps, res.warps)


def skewed_handoff(cx: LoweringContext, src: Frag, res, write, read, end: int = 0) -> Frag:
    """The hand-off of `src` into layout `res` (see above): `write()` stores the owner's
    registers into the exchange buffer, `read()` returns the other warpgroup's `Frag`;
    `end`: the buffer's end, in bytes into the scratch area (`handoff_buffer`).  In a
    group of merged hand-offs only the first waits and only the last signals."""
    from mlir.dialects import nvvm
    empty, full = handoff_barriers(cx)
    count = cx.const(32 * cx.num_warps)
    mbar = cx.handoff_mbarriers is not None
    first = cx.handoff_open is None
    last = not cx.handoff_defer
    cx.handoff_defer = False
    if mbar and not (first and last):
        raise TileIRError("internal error: merged hand-offs on mbarriers", ir.Location.current)
    if mbar:
        parity = _mbarrier_parity(cx)
        empty_at, full_at = (cx.smem_ptr(o) for o in cx.handoff_mbarriers)
    cx.handoffs = True
    types = [r.type for r in src.regs]
    branch = scf.IfOp(is_owner(cx), types, has_else=True)
    with ir.InsertionPoint(branch.then_block):
        if mbar:
            nvvm.mbarrier_try_wait_parity(empty_at, parity, cx.const(_WAIT_TICKS))
        elif first:
            nvvm.barrier(None, barrier_id=cx.const(empty), number_of_threads=count)
        write()
        if mbar:
            nvvm.mbarrier_arrive(ir.IntegerType.get_signless(64), full_at)
        elif last:
            nvvm.barrier_arrive(count, barrier_id=cx.const(full))
        scf.YieldOp(list(src.regs))
    with ir.InsertionPoint(branch.else_block):
        if mbar:
            nvvm.mbarrier_try_wait_parity(full_at, parity, cx.const(_WAIT_TICKS))
        elif first:
            nvvm.barrier(None, barrier_id=cx.const(full), number_of_threads=count)
        got = read()
        if [r.type for r in got.regs] != types:
            raise TileIRError("internal error: a hand-off reads registers of other types "
                              "than the owner's", ir.Location.current)
        if mbar:
            nvvm.mbarrier_arrive(ir.IntegerType.get_signless(64), empty_at)
        elif last:
            nvvm.barrier_arrive(count, barrier_id=cx.const(empty))
        scf.YieldOp(list(got.regs))
    cx.handoff_open = None if last else end
    # every later exchange waits for both warpgroups again (the buffer is the hand-off's)
    cx.smem_uses += 1
    cx.last_reads = None
    return Frag(res, src.elem, list(branch.results))


def open_handoffs(cx: LoweringContext, block: ir.Block) -> None:
    """At the top of a consumer branch that hands off: the other warpgroup's first
    arrival on *empty* (the buffer starts empty)."""
    from mlir.dialects import nvvm
    empty, _ = handoff_barriers(cx)
    with ir.InsertionPoint.at_block_begin(block):
        other = scf.IfOp(arith.xori(is_owner(cx), cx.const(1, ir.IntegerType.get_signless(1))))
        with ir.InsertionPoint(other.then_block):
            if cx.handoff_mbarriers is not None:
                nvvm.mbarrier_arrive(ir.IntegerType.get_signless(64),
                                     cx.smem_ptr(cx.handoff_mbarriers[0]))
            else:
                nvvm.barrier_arrive(cx.const(32 * cx.num_warps), barrier_id=cx.const(empty))
            scf.YieldOp([])


def close_handoffs(cx: LoweringContext) -> None:
    """At the end of that branch (before its yield): the owner takes the last arrival
    on *empty*, the other warpgroup's read of the last hand-off."""
    from mlir.dialects import nvvm
    empty, _ = handoff_barriers(cx)
    last = _mbarrier_parity(cx, count=False) if cx.handoff_mbarriers is not None else None
    owner = scf.IfOp(is_owner(cx))
    with ir.InsertionPoint(owner.then_block):
        if last is not None:
            nvvm.mbarrier_try_wait_parity(cx.smem_ptr(cx.handoff_mbarriers[0]), last,
                                          cx.const(_WAIT_TICKS))
        else:
            nvvm.barrier(None, barrier_id=cx.const(empty),
                         number_of_threads=cx.const(32 * cx.num_warps))
        scf.YieldOp([])


# -- hand-offs on mbarriers (the kernel option `mbarrier_handoffs`) --------------------
# Instead of the named barriers `empty` and `full` (`bar.sync` by the waiting side,
# `bar.arrive` by the other), the same protocol on two mbarriers of one warpgroup's 128 arrivals each: the owner
# waits for *empty*'s phase k (completed by the other warpgroup's first arrival, then by
# its read of hand-off k - 1), writes, and every owner thread arrives on *full*
# (.release); the other waits for *full*'s phase k (.acquire), reads, and arrives on
# *empty*.  Phase k's parity is k's: the hand-offs are counted in the order they are
# lowered, which is the order they run as long as a loop body hands off an even number
# of times an iteration and none is conditional (checked: `_mbarrier_parity`), so the
# parities are constants.


def prepare_handoffs(cx: LoweringContext) -> None:
    """At the kernel's entry, before any buffer (all threads of the block): where the
    kernel asks for `mbarrier_handoffs` (`cx.owner_mbarriers`), the two mbarriers, at
    the bottom of the shared memory (the rings above them stay free to be reused by
    the epilogue's exchanges once freed), initialized by the first thread and
    published to the block by a barrier."""
    from mlir.dialects import nvvm
    if not cx.owner_mbarriers or cx.handoff_mbarriers is not None:
        return
    base = cx.alloc_smem(16, align=8)
    cx.handoff_mbarriers = (base, base + 8)            # (empty, full)
    cx.handoff_count = 0
    cx.handoff_loops = {}
    first = scf.IfOp(cx.first_thread(), [], has_else=False)
    with ir.InsertionPoint(first.then_block):
        for offset in cx.handoff_mbarriers:
            nvvm.mbarrier_init(cx.smem_ptr(offset), cx.const(32 * OWNER_WARPS))
        nvvm.fence_mbarrier_init()
        scf.YieldOp([])
    cx.barrier()


def _mbarrier_parity(cx: LoweringContext, count: bool = True) -> ir.Value:
    """The parity of the next hand-off's phase (`count`: and count it), i32; refuses a
    hand-off whose count an iteration cannot be told statically."""
    k = cx.handoff_count
    if count:
        # the consumer branch's if around it, at most one loop, nothing else
        enclosing = _enclosing(ir.InsertionPoint.current.block)
        loops = [op for op in enclosing if op.name in ("scf.for", "scf.while")]
        ifs = [op for op in enclosing if op.name == "scf.if"]
        if len(loops) > 1 or len(ifs) > 1:
            raise TileIRError("hand-offs on mbarriers (mbarrier_handoffs=True) need each "
                              "hand-off outside conditionals and in at most one loop",
                              ir.Location.current)
        cx.handoff_count += 1
        if loops:
            cx.handoff_loops[loops[0]] = cx.handoff_loops.get(loops[0], 0) + 1
    else:
        odd = [n for n in cx.handoff_loops.values() if n % 2]
        if odd:
            raise TileIRError(f"hand-offs on mbarriers (mbarrier_handoffs=True) need an even "
                              f"number of hand-offs a loop iteration; a loop has {odd[0]}",
                              ir.Location.current)
    return cx.const(k % 2)


def _enclosing(block: ir.Block) -> list[ir.Operation]:
    """The ops around `block` up to the kernel's function (innermost first)."""
    out = []
    op = block.owner
    while op is not None:
        op = op.operation if isinstance(op, ir.OpView) else op
        if op.name in ("gpu.func", "func.func", "llvm.func", "builtin.module"):
            break
        out.append(op)
        parent = op.parent
        op = parent if parent is not None else None
    return out
