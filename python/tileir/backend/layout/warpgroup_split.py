"""Which ops of a two-product loop one consumer warpgroup owns (sm_90a, the kernel
option `warpgroup_split`): the plan of FlashMLA's and TileLang's MLA split.

A loop of chained products, `S = Q K^T` (a chain of products, each onto the previous
one's result, as MLA's `q_nope c^T` then `q_rope r^T`) and `O = P V + O * alpha`, on
two consumer warpgroups that split the output O by columns (MLA decode: a (64, 512)
f32 accumulator, 256 columns a warpgroup), splits the scores by columns too: each
warpgroup reads all of Q for half of S's columns, and the softmax combines its row
maxima and P's halves through shared memory.  Owned instead, the scores, the softmax
and the running row statistics belong to one warpgroup (the owner, 0), which computes
S whole (m64nN), and hands the other warpgroup, once a step, only what O's update
reads from them: P (the second product's A operand) and the row scale alpha (a
(M, 1) tile broadcast onto O).  The scores' wgmmas then read A once, not once a
warpgroup (MLA, a 64-key step: 144 KB of operands instead of 216), no row maxima
cross the warpgroups, and the owner's softmax of step j + 1 can run beside the other
warpgroup's `P c` of step j.

This module plans that split and writes the plan into the IR (it changes no op;
`tile-assign-layouts` reads the marks).  For each qualifying `scf.for`:

* the score products: the `tile.mma`s of the loop body, other than the second product,
  from whose results the second product's A operand is computed;
* owned: the ops computed from the score products' results (and from the carried
  values they update: the row maxima m, the row sums l) that the second product's A
  operand or those carried values need, and the pure ops (the mask's iota and
  compare, a guard's scalar test) whose every use is an owned op;  a loop-carried
  value is owned when the loop yields an owned value for it;
* hand-offs: the owned values an op that is not owned reads (P; alpha, broadcast
  onto O): what crosses to the other warpgroup through shared memory each step;
* owned results: the loop's owned results used after the loop (m and l for O's
  normalization and the log-sum-exp): crossing once.

Marks: `tile.owner = 0 : i64` on each owned op (the score products included),
`tile.handoff = array<i64: ...>` (result numbers) on an owned op whose results are
handed off, and on the loop `tile.warpgroup_split`, a dictionary: `owner`, the
bytes handed off a step (`handoff_bytes`), the score operands' shared-memory bytes
a step split by columns and owned (`score_bytes = array<i64: split, owned>`) and
`owned_results`.  The layout stage's warp count (`tile.num_warps`, 8: two consumer
warpgroups) and the products' wgmma plans (`mma_plan.plan`) decide whether a loop
qualifies: the second product's accumulator split by columns over two warpgroups,
the score products' M one warpgroup's 64 rows, every owned op pure (no load,
store or atomic: the owner runs them alone; the score products' operands stay the
ring's, read by both).  Anything else is left unmarked, with the reason `plan_loop`
gives in `tile.warpgroup_split_skipped` on the loop (TILEIR_DUMP_IR shows it).

What reads the plan: `tile-assign-layouts` plans each owned product for one
warpgroup's four warps (m64nN: the whole score tile), so the owned ops get layouts of
four warps, which the other warpgroup holds as replicas; the pipeliner keeps the mark
on an owned chain's `mma_async`/`mma_wait`; the gpu stage runs the owned ops of a
block under `warp < 4` alone and passes the hand-offs through shared memory written by
the owner's threads (backend/gpu/owner_runs.py), unless the kernel asks for replicas
(`split_replicas`: both warpgroups run the owned ops, P and alpha stay in registers,
no exchange).  The owner's hand-offs are pairs of named barriers (empty, full), so it
runs up to a step ahead of the other warpgroup (docs/attention.md, "The warpgroup
split").

With the kernel option `alternate_owners` (`unroll_pairs`) a planned loop becomes a
loop over pairs of steps, the first owned by warpgroup 0 and the second by warpgroup
1, and a loop of the last step of an odd count; each owner keeps the row sums of its
own steps (docs/attention.md, "Alternating owners").

    before:  %s = "tile.mma"(%q, %kt, %z)
             %p = arith.truncf %e
             %o = "tile.mma"(%p, %v, %acc)
    after:   %s = "tile.mma"(%q, %kt, %z) {tile.owner = 0}
             %p = arith.truncf %e {tile.handoff = array<i64: 0>, tile.owner = 0}
             %o = "tile.mma"(%p, %v, %acc)
"""

from __future__ import annotations

import dataclasses
import math

from mlir import ir

from tileir.dialect.types import bitwidth
from tileir.dialect.verifier import kernel_functions

from .mma_plan import plan as mma_plan

SPLIT_ATTR = "tile.warpgroup_split"     # the kernel option (a bool on the function)
PLAN_ATTR = "tile.warpgroup_split"      # the plan (a dictionary on the scf.for)
REPLICAS_ATTR = "tile.split_replicas"   # the kernel option: both warpgroups run them
RESCALE_ATTR = "tile.early_rescale"     # the kernel option: O rescaled where alpha is
MBARRIER_ATTR = "tile.mbarrier_handoffs"    # the kernel option: hand-offs on mbarriers
SKEW_ATTR = "tile.skewed_handoffs"      # the kernel option (default True): the owner ahead
MERGE_ATTR = "tile.merged_handoffs"     # the kernel option: one wait and signal a step
ALTERNATE_ATTR = "tile.alternate_owners"    # the kernel option: owners 0, 1 by step parity
SKIPPED_ATTR = "tile.warpgroup_split_skipped"   # on a loop left alone: the reason
OWNER_ATTR = "tile.owner"
OWNERS_KEY = "owners"                   # in a pair loop's plan: the owners in turn
CROSS_ATTR = "tile.owner_handoff"       # results the other owner reads (alternation)
HANDOFF_ATTR = "tile.handoff"
OWNER = 0
CONSUMER_WARPS = 8                      # two consumer warpgroups
_PURE_PREFIXES = ("arith.", "math.")
_PURE_OPS = frozenset({"tile.iota", "tile.broadcast", "tile.reshape", "tile.permute",
                       "tile.reduce", "tile.extract_slice", "tile.concat", "tensor.splat",
                       "tensor.extract", "scf.if", "scf.yield"})


@dataclasses.dataclass
class Plan:
    loop: ir.Operation
    scores: list[ir.Operation]          # the score products (tile.mma)
    second: ir.Operation                # the product whose A operand is P
    owned: list[ir.Operation]           # in walk order, the score products included
    handoffs: list[ir.Value]            # owned values read by ops that are not owned
    owned_results: list[int]            # loop results owned and used after the loop
    score_bytes: tuple[int, int]        # score operands a step: split by columns, owned

    @property
    def handoff_bytes(self) -> int:
        return sum(_tile_bytes(v.type) for v in self.handoffs)


def owner_alone(func: ir.Operation) -> bool:
    """Whether the owned ops run in the owner warpgroup alone (the gpu stage,
    backend/gpu/owner_runs.py): a split kernel that does not ask for replicas
    (`split_replicas`, which keeps both warpgroups running them)."""
    return _flag(func, SPLIT_ATTR) and not _flag(func, REPLICAS_ATTR)


def early_rescale(func: ir.Operation) -> bool:
    """Whether each warpgroup rescales its part of the second product's accumulator as
    soon as it holds the row scale (the kernel option `early_rescale`,
    backend/gpu/owner_runs.py `rescales`): the owner inside its run, the other right
    after the hand-off, instead of both after all the hand-offs."""
    return owner_alone(func) and _flag(func, RESCALE_ATTR)


def mbarrier_handoffs(func: ir.Operation) -> bool:
    """Whether the owner's hand-offs signal through two mbarriers (.release arrivals
    of every thread, .acquire waits) instead of named barriers (the kernel option
    `mbarrier_handoffs`, backend/gpu/owner_runs.py `prepare_handoffs`)."""
    return owner_alone(func) and _flag(func, MBARRIER_ATTR)


def skewed_handoffs(func: ir.Operation) -> bool:
    """Whether a hand-off whose layouts allow it may leave the owner a step ahead (the
    kernel option `skewed_handoffs`, True unless set False: backend/gpu/owner_runs.py
    `skewed`); False puts every hand-off between barriers of both warpgroups."""
    return owner_alone(func) and (SKEW_ATTR not in func.attributes
                                  or _flag(func, SKEW_ATTR))


def merged_handoffs(func: ir.Operation) -> bool:
    """Whether a step's consecutive hand-offs (alpha, then P) share one wait on *empty*
    and one signal on *full* (the kernel option `merged_handoffs`, with skewed
    named-barrier hand-offs: backend/gpu/owner_runs.py `merged_handoffs`)."""
    return owner_alone(func) and _flag(func, MERGE_ATTR)


def alternate_owners(func: ir.Operation) -> bool:
    """Whether the steps of a split loop alternate between two owners (the kernel
    option `alternate_owners`, FlashMLA's alternation: `unroll_pairs`)."""
    return owner_alone(func) and _flag(func, ALTERNATE_ATTR)


def _flag(func: ir.Operation, name: str) -> bool:
    return name in func.attributes and ir.BoolAttr(func.attributes[name]).value


def asked(func: ir.Operation, chip: str) -> bool:
    """Whether the kernel asks for the split on a target with warpgroups."""
    return chip.startswith("sm_90") and SPLIT_ATTR in func.attributes and \
        ir.BoolAttr(func.attributes[SPLIT_ATTR]).value


def split_warpgroups(module: ir.Module, chip: str) -> list[Plan | str]:
    """Plans and marks every loop of the kernels that ask; returns each loop's plan
    or the reason it was left alone, in walk order."""
    out: list[Plan | str] = []
    for func in kernel_functions(module):
        if not asked(func, chip):
            continue
        warps = ir.IntegerAttr(func.attributes["tile.num_warps"]).value \
            if "tile.num_warps" in func.attributes else 4
        for loop in _loops(func):
            plan = plan_loop(loop, chip, warps)
            if isinstance(plan, Plan):
                mark(plan)
                if alternate_owners(func):
                    out.extend(unroll_pairs(plan, chip, warps))
                    continue
            else:       # what the kernel asked for and did not get, and why (IR dumps)
                loop.attributes[SKIPPED_ATTR] = ir.StringAttr.get(plan)
            out.append(plan)
    return out


def _loops(func: ir.Operation) -> list[ir.Operation]:
    from tileir.passes import effects       # (passes import the backend: not at load)
    return [op for op in effects.ops_under(func) if op.name == "scf.for"]


def plan_loop(loop: ir.Operation, chip: str, num_warps: int) -> Plan | str:
    """The ownership plan of one `scf.for`, or why it has none."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    if num_warps != CONSUMER_WARPS:
        return f"{num_warps} warps: the split needs two consumer warpgroups (8 warps)"
    body = loop.regions[0].blocks[0]
    inside = effects.ops_under(loop)
    products = [op for op in inside if op.name == "tile.mma"]
    carried = list(body.arguments)[1:]
    seconds = [op for op in products if _carried_acc(op, carried, inside)]
    if len(seconds) != 1:
        return f"{len(seconds)} products accumulate onto a carried value; the split takes one"
    second = seconds[0]
    feeding = _backward(second.operands[0], inside)
    scores = [op for op in products if op != second and op in feeding]
    if not scores:
        return "the second product's A operand is not computed from a product of the loop"
    acc = second.operands[2].type
    plan2 = _plan(second, chip, num_warps)
    if plan2 is None or plan2.acc.groups != (1, 2):
        return (f"the second product's accumulator {list(acc.shape)} is not split by "
                f"columns over two warpgroups")
    for op in scores:
        m = ir.RankedTensorType(op.results[0].type).shape[0]
        if m != 64 or _plan(op, chip, num_warps) is None:
            return f"a score product of {m} rows: one warpgroup owns 64"
    owned_vals, owned_ops = _owned(loop, body, scores, second, inside)
    bad = [op for op in owned_ops if op not in scores and not _pure(op)]
    if bad:
        return f"an owned op has effects: {bad[0].name} (the owner would run it alone)"
    for op in owned_ops:
        for r in op.results:
            for u in r.uses:
                reader = effects.user(u)
                if reader in inside and reader not in owned_ops and reader != second and \
                        not _pure(reader):
                    return (f"{reader.name} reads an owned value inside the loop (the "
                            f"split hands over only what the second product's step reads)")
    handoffs: list[ir.Value] = []
    for op in owned_ops:
        for r in op.results:
            if any(effects.user(u) not in owned_ops and effects.user(u) in inside and
                   effects.user(u).name != "scf.yield" for u in r.uses):
                handoffs.append(r)
    results = [i for i, (arg, res) in enumerate(zip(carried, loop.results))
               if arg in owned_vals and any(True for _ in res.uses)]
    split_bytes = owned_bytes = 0
    for op in scores:
        a, b = (_tile_bytes(v.type) for v in op.operands[:2])
        split_bytes += 2 * a + b                 # each warpgroup reads all of A
        owned_bytes += a + b
    return Plan(loop, scores, second, owned_ops, handoffs, results, (split_bytes, owned_bytes))


def mark(plan: Plan) -> None:
    """Writes `plan` into its loop (see the contract)."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    i64 = ir.IntegerType.get_signless(64)
    for op in plan.owned:
        op.attributes[OWNER_ATTR] = ir.IntegerAttr.get(i64, OWNER)
    by_op: dict[ir.Operation, list[int]] = {}
    for v in plan.handoffs:
        by_op.setdefault(effects.defining_op(v), []).append(ir.OpResult(v).result_number)
    for op, numbers in by_op.items():
        op.attributes[HANDOFF_ATTR] = ir.DenseI64ArrayAttr.get(sorted(numbers))
    plan.loop.attributes[PLAN_ATTR] = ir.DictAttr.get({
        "owner": ir.IntegerAttr.get(i64, OWNER),
        "handoff_bytes": ir.IntegerAttr.get(i64, plan.handoff_bytes),
        "score_bytes": ir.DenseI64ArrayAttr.get(list(plan.score_bytes)),
        "owned_results": ir.DenseI64ArrayAttr.get(plan.owned_results),
    })


@dataclasses.dataclass
class PairPlan:
    """The loop of `unroll_pairs`: steps 2i (owner 0) and 2i + 1 (owner 1) a trip."""
    loop: ir.Operation                  # over pairs of steps
    copies: tuple[list, list]           # each step's ops, in order (nested ones too)
    last: ir.Operation                  # the loop of the last step of an odd count
    row_sums: list[int]                 # carried sums kept by each owner (both halves)
    crossings: list[ir.Value]           # owned values the other owner reads in a trip
    carried_owners: list[int]           # a carried value's owner at the back edge (-1)


def unroll_pairs(plan: Plan, chip: str, num_warps: int) -> list[PairPlan]:
    """Replaces the marked loop of `plan` by two for alternating owners: a loop over
    pairs of steps, the first step of a pair owned by warpgroup 0 (the marks as
    `mark` wrote them), the second by warpgroup 1 (`tile.owner = 1`, hand-off marks
    as they were), then a loop of the last step when the trip count is odd (at most
    one trip, owner 0's).  The owned layouts do not change (the other warpgroup holds
    them as replicas), only whose test the gpu stage runs them under:

        scf.for %j = %lb to %ub step %s  ->  %e = %lb + (ceildiv(%ub - %lb, %s) / 2) * 2 %s
                                             scf.for %i = %lb to %e step 2 %s {
                                               body(%i) {owner 0}; body(%i + %s) {owner 1} }
                                             scf.for %j = %e to %ub step %s { body(%j) }

    A carried row sum (`l = l * broadcast(alpha) + p`, owned: `_row_sums`) would cross
    from one owner to the other twice a trip (MLA: the (64, 64) f32 sums by column,
    16 KB).  One summed along its rows after the loop (`_summed_by_row`, MLA's) is
    carried as (M, 1) row sums (`_by_rows`), which cross like m.  Any other: each owner
    keeps the sum of its own steps, rescaled by every alpha
    (its own and the other's, which it is handed anyway), and the two are added once
    after the last step (the sum is linear in its terms):

        l0 = l0 * a0 + p0 {owner 0}; l1 = l1 * a0 {owner 1}
        l1 = l1 * a1 + p1 {owner 1}; l0 = l0 * a1 {owner 0}      ...  l = l0 + l1

    (warpgroup 1's rescale by step 2i's alpha sits just before step 2i + 1's score
    product, among its owned ops: one run in the gpu stage).  What then crosses between
    the owners (`_crossings`): step 2i's m (and row sums by row) to step 2i + 1, each
    step's alpha to the other owner's rescale of a sum kept apart (P and alpha also go
    to both warpgroups, as in the split), and step 2i + 1's m, carried, to the next
    pair's step 2i and to the last step: marked `tile.owner_handoff` (result numbers) on the op that makes each,
    and on the loops the owner of each carried value at the back edge
    (`carried_owners`, -1 for none) and the split sums (`row_sums`).  Returns the
    pair plan."""
    from mlir.dialects import arith, scf
    loop = plan.loop
    lb, ub, step = list(loop.operands)[:3]
    inits = list(loop.operands)[3:]
    n = len(inits)
    rows = _summed_by_row(loop)
    sums = [i for i in _row_sums(loop) if i not in rows]
    with ir.InsertionPoint(loop), loop.location:
        two = arith.ConstantOp(step.type, 2).result
        trips = arith.ceildivsi(arith.subi(ub, lb), step)
        step2 = arith.muli(step, two)
        end = arith.addi(lb, arith.muli(arith.divsi(trips, two), step2))
        for i, (red, shape) in rows.items():
            inits[i] = _reduced_like(red, shape, inits[i])
        zeros = [arith.ConstantOp(inits[i].type, ir.DenseElementsAttr.get_splat(
            inits[i].type, ir.FloatAttr.get(
                ir.RankedTensorType(inits[i].type).element_type, 0.0))).result
            for i in sums]
        pairs = scf.ForOp(lb, end, step2, inits + zeros)
    with ir.InsertionPoint(pairs.body), loop.location:
        args = list(pairs.inner_iter_args)
        iv = pairs.induction_variable
        second = arith.addi(iv, step)
        ops_a, ya = _inline_step(loop, iv, args[:n])
        for i in rows:
            ya[i] = _by_rows(ops_a, args[i])
        # owner 1's sums, rescaled by step 2i's alpha before its step adds to them
        carried_b = list(ya)
        moved = []
        for k, i in enumerate(sums):
            carried_b[i], made = _rescale_like(ops_a, args[i], args[n + k], 1)
            moved += made
        ops_b, yb = _inline_step(loop, second, carried_b)
        _mark_owner(ops_b, 1)
        for i in rows:
            yb[i] = _by_rows(ops_b, carried_b[i])
        # (among step 2i + 1's owned ops: one run of warpgroup 1's in the gpu stage)
        first_owned = next(op for op in ops_b if OWNER_ATTR in op.attributes)
        for op in moved:
            op.move_before(first_owned)
        # owner 0's sums, rescaled by step 2i + 1's alpha
        yields = list(yb) + [yb[i] for i in sums]
        for i in sums:
            yields[i], _ = _rescale_like(ops_b, carried_b[i], ya[i], 0)
        scf.YieldOp(yields)
    # the last step of an odd count: a loop of at most one trip from where the pairs
    # end, owner 0's step; the sums stay apart (warpgroup 1's rescaled by its alpha)
    # and are added after it, once the ring is gone (16 KB a sum cross the warpgroups)
    with ir.InsertionPoint(loop), loop.location:
        last = scf.ForOp(end, ub, step, list(pairs.results))
    with ir.InsertionPoint(last.body), loop.location:
        args = list(last.inner_iter_args)
        ops_r, yr = _inline_step(loop, last.induction_variable, args[:n])
        for i in rows:
            yr[i] = _by_rows(ops_r, args[i])
        yields = list(yr)
        for k, i in enumerate(sums):
            yields.append(_rescale_like(ops_r, args[i], args[n + k], 1)[0])
        scf.YieldOp(yields)
    results = list(last.results)
    with ir.InsertionPoint(loop), loop.location:
        for k, i in enumerate(sums):
            results[i] = arith.addf(results[i], results[n + k])
    for i, (red, shape) in rows.items():
        shape.results[0].replace_all_uses_with(results[i])
        shape.erase()
        red.erase()
    for i, (old, new) in enumerate(zip(loop.results, results[:n])):
        if i not in rows:
            old.replace_all_uses_with(new)
    crossings, carried_owners = _crossings(pairs.operation)
    # the plans: a step's (its bytes, its owned results), with the owners in turn
    step_plan = {a.name: a.attr for a in ir.DictAttr(loop.attributes[PLAN_ATTR])}
    sums_attr = ir.DenseI64ArrayAttr.get(sums)
    last.operation.attributes[PLAN_ATTR] = ir.DictAttr.get({
        **step_plan, "row_sums": sums_attr,
        "carried_owners": ir.DenseI64ArrayAttr.get(_crossings(last.operation)[1])})
    del step_plan["owner"]
    pairs.operation.attributes[PLAN_ATTR] = ir.DictAttr.get({
        **step_plan, OWNERS_KEY: ir.DenseI64ArrayAttr.get([OWNER, 1 - OWNER]),
        "row_sums": sums_attr, "carried_owners": ir.DenseI64ArrayAttr.get(carried_owners)})
    loop.erase()
    return [PairPlan(pairs.operation, (ops_a, ops_b), last.operation, sums, crossings,
                     carried_owners)]


def _summed_by_row(loop: ir.Operation) -> dict[int, tuple]:
    """The row sums of `loop` (`_row_sums`) that are only summed along their rows after
    it (`tile.reduce` sum over the last axis, then a reshape to (M, 1): MLA's `l`, kept
    by column): {carried number: (that reduce, that reshape)}.  The alternation carries
    them as (M, 1) row sums (`_by_rows`), which cross between the owners like m."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    out = {}
    for i in _row_sums(loop):
        users = [effects.user(u) for u in loop.results[i].uses]
        if len(users) != 1 or users[0].name != "tile.reduce" or \
                ir.StringAttr(users[0].attributes["kind"]).value != "sum":
            continue
        red = users[0]
        t = ir.RankedTensorType(loop.results[i].type)
        if ir.IntegerAttr(red.attributes["axis"]).value != t.rank - 1:
            continue
        shapes = [effects.user(u) for u in red.results[0].uses]
        if len(shapes) != 1 or shapes[0].name != "tile.reshape" or \
                list(ir.RankedTensorType(shapes[0].results[0].type).shape) != \
                list(t.shape[:-1]) + [1]:
            continue
        out[i] = (red, shapes[0])
    return out


def _reduced_like(red: ir.Operation, shape: ir.Operation, value: ir.Value) -> ir.Value:
    """`value` summed along its rows by copies of `red` and `shape`, at the insertion
    point."""
    r = red.clone(ir.InsertionPoint.current)
    r.operands[0] = value
    s = shape.clone(ir.InsertionPoint.current)
    s.operands[0] = r.results[0]
    return s.results[0]


def _by_rows(ops: list, carried: ir.Value) -> ir.Value:
    """In a step's ops (`_inline_step`'s, given the (M, 1) `carried` for a row sum kept
    by column), `x = carried * broadcast(a); y = x + p` rewritten as
    `carried * a + sum(p, rows)` (the sum by the step's own row maxima's reduce and
    reshape, cloned as a sum), with y's owner; returns the new sum.  Summed by rows a
    step instead of once after the loop: the same terms, added in another order."""
    from mlir.dialects import arith
    from tileir.passes import effects       # (passes import the backend: not at load)
    mul = next(op for op in ops if op.name == "arith.mulf" and carried in list(op.operands))
    side = 0 if mul.operands[0] == carried else 1
    scale = effects.defining_op(mul.operands[1 - side])
    add = next(effects.user(u) for u in mul.results[0].uses)
    p = add.operands[1] if add.operands[0] == mul.results[0] else add.operands[0]
    red = next(op for op in ops if op.name == "tile.reduce" and OWNER_ATTR in op.attributes
               and ir.StringAttr(op.attributes["kind"]).value == "maxnum")
    shape = next(effects.user(u) for u in red.results[0].uses)
    owner = add.attributes[OWNER_ATTR]
    with ir.InsertionPoint(add), add.location:
        scaled = arith.mulf(carried, scale.operands[0])
        r = red.clone(ir.InsertionPoint(add))
        r.operands[0] = p
        r.attributes["kind"] = ir.StringAttr.get("sum")
        rs = shape.clone(ir.InsertionPoint(add))
        rs.operands[0] = r.results[0]
        new = arith.addf(scaled, rs.results[0])
    for v in (scaled, new):
        effects.defining_op(v).attributes[OWNER_ATTR] = owner
    add.results[0].replace_all_uses_with(new)
    add.erase()
    mul.erase()
    if not list(scale.results[0].uses):
        scale.erase()
    return new


def _row_sums(loop: ir.Operation) -> list[int]:
    """The carried values of `loop` (their numbers among its iteration arguments)
    updated as an owned `x * broadcast(a) + p` whose only use of `x` is that multiply."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    body = loop.regions[0].blocks[0]
    yields = list(list(body.operations)[-1].operands)
    out = []
    for i, (arg, y) in enumerate(zip(list(body.arguments)[1:], yields)):
        users = [effects.user(u) for u in arg.uses]
        if len(users) != 1 or users[0].name != "arith.mulf" or \
                OWNER_ATTR not in users[0].attributes:
            continue
        mul = users[0]
        scale = effects.defining_op(mul.operands[1] if mul.operands[0] == arg
                                    else mul.operands[0])
        add = effects.defining_op(y)
        if scale is None or scale.name != "tile.broadcast" or add is None or \
                add.name != "arith.addf" or OWNER_ATTR not in add.attributes or \
                mul.results[0] not in list(add.operands) or \
                len(list(mul.results[0].uses)) != 1:
            continue
        out.append(i)
    return out


def _rescale_like(ops: list, read: ir.Value, value: ir.Value,
                  owner: int) -> tuple[ir.Value, list]:
    """`value` times the broadcast scale the sum's multiply among `ops` (the one that
    reads `read`) applies, by copies of that broadcast and multiply owned by `owner`,
    at the insertion point: (the product, [the two ops])."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    mul = next(op for op in ops if op.name == "arith.mulf" and read in list(op.operands))
    side = 0 if mul.operands[0] == read else 1
    scale = effects.defining_op(mul.operands[1 - side])
    b = scale.clone(ir.InsertionPoint.current)
    m = mul.clone(ir.InsertionPoint.current)
    m.operands[side] = value
    m.operands[1 - side] = b.results[0]
    _mark_owner([b, m], owner)
    return m.results[0], [b, m]


def _mark_owner(ops: list, owner: int) -> None:
    i64 = ir.IntegerType.get_signless(64)
    for op in ops:
        if OWNER_ATTR in op.attributes:
            op.attributes[OWNER_ATTR] = ir.IntegerAttr.get(i64, owner)


def _crossings(loop: ir.Operation) -> tuple[list, list[int]]:
    """(the owned values of `loop`'s body read by ops of the other owner, marked
    `tile.owner_handoff` on their ops; the owner of each carried value at the back
    edge, -1 where it is not owned)."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    inside = effects.ops_under(loop)
    owner = {op: ir.IntegerAttr(op.attributes[OWNER_ATTR]).value
             for op in inside if OWNER_ATTR in op.attributes}
    crossings: list[ir.Value] = []
    for op in inside:
        if op not in owner:
            continue
        for v in op.operands:
            d = effects.defining_op(v)
            if d in owner and owner[d] != owner[op] and v not in crossings:
                crossings.append(v)
    by_op: dict[ir.Operation, list[int]] = {}
    for v in crossings:
        by_op.setdefault(effects.defining_op(v), []).append(ir.OpResult(v).result_number)
    for op, numbers in by_op.items():
        op.attributes[CROSS_ATTR] = ir.DenseI64ArrayAttr.get(sorted(numbers))
    body = loop.regions[0].blocks[0]
    carried = [owner.get(effects.defining_op(y), -1)
               for y in list(body.operations)[-1].operands]
    return crossings, carried


def _inline_step(loop: ir.Operation, j: ir.Value, carried: list) -> tuple[list, list]:
    """A copy of `loop`'s body at the insertion point, for step `j` with `carried` as
    its iteration arguments: (the copy's ops, nested ones included, in walk order;
    the values it yields)."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    copy = loop.clone(ir.InsertionPoint.current)
    body = copy.regions[0].blocks[0]
    body.arguments[0].replace_all_uses_with(j)
    for arg, v in zip(list(body.arguments)[1:], carried):
        arg.replace_all_uses_with(v)
    ops = [op.operation for op in body.operations]
    yields = list(ops[-1].operands)
    for op in ops[:-1]:
        op.move_before(copy)
    walked = [o for op in ops[:-1] for o in [op] + effects.ops_under(op)]
    copy.erase()
    return walked, yields


def _owned(loop, body, scores, second, inside) -> tuple[set, list[ir.Operation]]:
    """(owned values, owned ops in walk order): the forward closure of the score
    products' results and the owned carried values, cut to what the second product's
    A operand and the owned carried values need, then the pure ops only owned ops use."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    carried = list(body.arguments)[1:]
    yields = list(body.operations)[-1].operands
    seeds = {r for op in scores for r in op.results}
    owned_args: set = set()
    while True:
        reach = _forward(seeds | owned_args, second, inside)
        new = {arg for arg, y in zip(carried, yields)
               if y in reach and effects.defining_op(y) != second}
        if new <= owned_args:
            break
        owned_args |= new
    roots = [second.operands[0]] + [y for arg, y in zip(carried, yields) if arg in owned_args]
    need = _backward_values(roots, inside)
    ops = {op for op in inside if op in scores or
           (any(r in reach and r in need for r in op.results))}
    # the ops of an owned scf.if's regions that its yields need
    for op in list(ops):
        if op.name == "scf.if":
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        inner = inner.operation
                        if inner.name == "scf.yield" or \
                                any(r in need for r in inner.results):
                            ops.add(inner)
    # pure ops every use of which is owned (the mask's iota and compare, a guard's
    # test), but not views of the loaded tiles: those stay the ring's, read by both
    loaded = _forward({r for op in inside if op.name == "tile.load" for r in op.results},
                      second, inside)
    changed = True
    while changed:
        changed = False
        for op in inside:
            if op in ops or not _pure(op) or op.name == "scf.yield" or not op.results or \
                    any(r in loaded for r in op.results):
                continue
            users = [effects.user(u) for r in op.results for u in r.uses]
            if users and all(u in ops for u in users):
                ops.add(op)
                changed = True
    values = set(owned_args) | {r for op in ops for r in op.results}
    return values, [op for op in inside if op in ops]


def _forward(seeds: set, stop: ir.Operation, inside: list) -> set:
    """Values of the loop body computed from `seeds`, not through `stop`; a yield of an
    scf.if carries its operands to the if's results (the loop's own yield ends a path)."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    reach = set(seeds)
    work = list(seeds)
    while work:
        v = work.pop()
        for use in v.uses:
            op = effects.user(use)
            if op == stop or op not in inside:
                continue
            if op.name == "scf.yield":
                parent = op.parent
                parent = parent.operation if isinstance(parent, ir.OpView) else parent
                if parent.name != "scf.if":
                    continue
                outs = [parent.results[use.operand_number]]
            else:
                outs = list(op.results)
            for r in outs:
                if r not in reach:
                    reach.add(r)
                    work.append(r)
    return reach


def _backward_values(roots: list, inside: list) -> set:
    """Values of the loop body the `roots` are computed from (through scf.if yields)."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    need: set = set()
    work = list(roots)
    while work:
        v = work.pop()
        if v in need:
            continue
        need.add(v)
        op = effects.defining_op(v)
        if op is None or op not in inside:
            continue
        work.extend(op.operands)
        if op.name == "scf.if":
            n = ir.OpResult(v).result_number
            for region in op.regions:
                for block in region.blocks:
                    work.append(list(block.operations)[-1].operands[n])
    return need


def _backward(v: ir.Value, inside: list) -> set:
    """The ops of the loop body `v` is computed from."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    return {op for op in (effects.defining_op(x) for x in _backward_values([v], inside))
            if op is not None and op in inside}


def _carried_acc(op: ir.Operation, carried: list, inside: list) -> bool:
    """Whether a product's accumulator is computed from a carried value of the loop
    and its result is yielded for that value (an output accumulated across steps)."""
    acc_from = _backward_values([op.operands[2]], inside)
    body = op.parent
    while body is not None and (body.operation if isinstance(body, ir.OpView) else body) \
            .name != "scf.for":
        body = body.parent
    if body is None:
        return False
    yields = list(body.regions[0].blocks[0].operations)[-1].operands
    return any(arg in acc_from and y == op.results[0] for arg, y in zip(carried, yields))


def _plan(op: ir.Operation, chip: str, num_warps: int):
    a, _, acc = (ir.RankedTensorType(v.type) for v in op.operands[:3])
    return mma_plan(tuple(acc.shape), str(acc.element_type), str(a.element_type), chip,
                    num_warps, a.shape[-1])


def _pure(op: ir.Operation) -> bool:
    return op.name.startswith(_PURE_PREFIXES) or op.name in _PURE_OPS


def _tile_bytes(t: ir.Type) -> int:
    t = ir.RankedTensorType(t)
    return math.prod(t.shape) * bitwidth(t.element_type) // 8


