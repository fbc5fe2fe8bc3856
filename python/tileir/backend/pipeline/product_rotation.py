"""Rotation of a chained product: an iteration's second product overlaps the next
iteration's first (stage `pipeline`, sm_90a; part of `tile-pipeline-loops`).

Contract.  A loop that the pipeliner gives a ring (software_pipeline.py: its threads
issue their own copies, or, by default for such a loop, a producer warpgroup does)
and whose body holds two wgmma products,

    S   = mma(x, B1, c)           M1: its result feeds what follows (the scores); it
                                      may be a chain of products, each accumulating into
                                      the one before (MLA: q_nope c^T, then q_rope r^T)
    acc = mma(A, B2, f(acc'))     M2: the loop carries its result (iter arg acc') and
                                      yields nothing else of it; its accumulator is
                                      computed from the carried one (a rescale), A is in
                                      registers, B2 is read from this iteration's slot

-- attention's `S = Q Kᵀ`, online softmax, `O = P V + O * alpha` -- is rotated so that
M2 of iteration j runs in iteration j + 1, on the tensor cores while the CUDA cores
compute the softmax of iteration j + 1 (FlashAttention-3's intra-warpgroup pipelining):

    prologue  (one trip of the body, M2 left out):    A_0, acc_in_0 = f(acc_init)
    for j = lb + s .. ub  iter_args(..., acc_in, A):
        wait slot j
        S   = mma_async(x, K_j, c)                    M1
        acc = mma_async(A, V_{j-1}, acc_in)           M2 of iteration j - 1 (slot j - 1)
        S   = mma_wait(S, pending 1)                  M1 done; M2 still running ...
        <the softmax of S>; A' = ...                  ... while this runs
        acc = mma_wait(acc, pending 0); release slot j - 1; copies of iteration j + S - 1
        acc_in' = f(acc)                              (the ops that read the carried value
                                                       move here, after the wait)
    if the loop ran:  acc = mma(A, V_last, acc_in)    the last iteration's M2

Before: S and P V each waited for right after their issue, the tensor cores idle
during the softmax (on the H200 the rotation with the producer warpgroup took the
tutorial attention from 0.74-0.80x to 0.84-0.91x cuDNN, bench/RESULTS.md).  The slot of iteration j - 1 is released once its M2 is done, and
the copies of iteration j + S - 1 (which refill that slot) are issued after that.
The rotation costs A's registers (P: 16-bit, a quarter of the scores') carried across
iterations and kept until M2 is done; it is skipped where the estimate of registers
passes the budget (`fits_registers`), and where the kernel says `product_rotation=False`
(a 2-stage ring: rotated, the copy of iteration j + 1 waits for M2 of j - 1, mid-
iteration j).  A loop left unrotated still issues a chain like M1's as one group with
one wait (`issue_chains`).
"""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, scf

from tileir.dialect.layout import tile_layout
from tileir.dialect.ring import MmaAsyncOp, MmaWaitOp, RingReleaseOp, RingViewOp
from tileir.dialect.tile import MmaOp, promotes_sums
from tileir.dialect.types import bitwidth, is_float
from tileir.backend.layout.mma_layouts import Mma, Shared
from tileir.backend.layout.warpgroup_split import OWNER_ATTR

from .pure_slices import clone_ops

# On the wait for M2 (`tile.mma_wait`), where the kernel asks for it (`rotation_fence`):
# the gpu stage puts `fence.acq_rel.cta` before the wait.  ptxas otherwise schedules
# the wait as early as it may, right after the last barrier or shared-memory access
# before it, so the softmax's exponentials run after M2 instead of beside it; a memory
# fence is what it does not move the wait above (found on its SASS: rules/mma.py)
FENCE_ATTR = "tile.fence"

# Registers a consumer thread may hold: 255 less what addresses, descriptors, the
# row statistics and loop state take (an estimate; ptxas has the last word).
REGISTER_BUDGET = 255 - 40


@dataclasses.dataclass
class Chain:
    m1: ir.Operation          # the first product (its result feeds the rest)
    m2: ir.Operation          # the carried product
    carried: int              # M2's result is the loop's iter arg / result at this index
    before: list = dataclasses.field(default_factory=list)
    # products M1 accumulates onto, in order (each the accumulator of the next, M1's the
    # last): they are issued with it, all of them before M2


def _wgmma(op: ir.Operation) -> bool:
    if op.name != "tile.mma":
        return False
    lay = tile_layout(op.results[0].type)
    return isinstance(lay, Mma) and lay.version == 3 and not promotes_sums(op)


def issue_chains(loop: ir.Operation) -> int:
    """In a loop that is not rotated: each chain of wgmma products in its body (a
    product read only as the next one's accumulator, both reading A and B from shared
    memory) is issued as one group and waited for once, after its last product (MLA's
    q_nope c^T, then q_rope r^T onto it: 36 wgmmas and a wait, not 32, a wait, 4 and
    a wait, the tensor cores drained in between).  Returns the chains made."""
    body = loop.regions[0].blocks[0]
    products = [op.operation for op in body.operations if _wgmma(op.operation) and all(
        isinstance(tile_layout(v.type), Shared) for v in list(op.operation.operands)[:2])]

    def next_of(op):                   # the product reading op only as its accumulator
        uses = list(op.results[0].uses)
        if len(uses) != 1 or uses[0].operand_number != 2:
            return None
        user = uses[0].owner
        user = user.operation if hasattr(user, "operation") else user
        return user if user in products else None

    followers = [n for p in products if (n := next_of(p)) is not None]
    chains = []
    for head in [p for p in products if p not in followers]:
        chain = [head]
        while (n := next_of(chain[-1])) is not None:
            chain.append(n)
        if len(chain) > 1:
            chains.append(chain)
    for chain in chains:
        head, last = chain[0], chain[-1]
        with ir.InsertionPoint(last), last.location:
            acc = head.operands[2]
            made = []
            for p in chain:
                made.append(MmaAsyncOp(p.operands[0], p.operands[1], acc).operation)
                acc = made[-1].results[0]
            waited = MmaWaitOp(acc, 0)
            # a chain one warpgroup owns (tile-split-warpgroups) stays its own
            if all(OWNER_ATTR in p.attributes for p in chain):
                for op in made + [waited.operation]:
                    op.attributes[OWNER_ATTR] = chain[0].attributes[OWNER_ATTR]
        last.results[0].replace_all_uses_with(waited.results[0])
        for p in reversed(chain):
            p.erase()
    return len(chains)


def _reads(op: ir.Operation) -> set:
    """The values `op` reads, in its nested regions too."""
    seen = set()

    def collect(o):
        for x in o.operands:
            seen.add(x)
        return ir.WalkResult.ADVANCE

    op.walk(collect)
    return seen


def _depends_on(v: ir.Value, root: ir.Value, memo: dict) -> bool:
    """Whether `v` is computed from `root` (a block argument)."""
    if v == root:
        return True
    if v in memo:
        return memo[v]
    owner = v.owner
    memo[v] = False
    if isinstance(owner, ir.Block):
        return False
    op = owner.operation if hasattr(owner, "operation") else owner
    memo[v] = any(_depends_on(x, root, memo) for x in _reads(op))
    return memo[v]


def find_chain(loop: ir.Operation, loads) -> Chain | None:
    """The loop's (M1, M2) pair as the contract describes, or None.  `loads` are the
    loads the ring takes (`_Load`s): M2's B must be one of them, reshaped at most."""
    body = loop.regions[0].blocks[0]
    ops = [op.operation for op in body.operations]
    yield_op = ops[-1]
    products = [op for op in ops if _wgmma(op)]
    if len(products) < 2:
        return None
    *firsts, m2 = products
    m1, before = firsts[-1], firsts[:-1]
    # the products before M1: a chain, each read only as the next one's accumulator
    for op, nxt in zip(before, firsts[1:]):
        uses = list(op.results[0].uses)
        if nxt.operands[2] != op.results[0] or len(uses) != 1 or uses[0].owner != nxt:
            return None
    res = m2.results[0]
    uses = list(res.uses)
    if len(uses) != 1 or uses[0].owner != yield_op:
        return None
    carried = uses[0].operand_number
    arg = body.arguments[carried + 1]
    acc_in = m2.operands[2]
    if acc_in == arg or isinstance(acc_in.owner, ir.Block):
        return None                    # a plain accumulation: make_async's case
    a = m2.operands[0]
    if isinstance(tile_layout(a.type), Shared):
        return None                    # a shared tile cannot wait an iteration in its slot
    # M1's result must not depend on the carried accumulator (it runs before M2's wait)
    memo: dict = {}
    if any(_depends_on(x, arg, memo) for p in firsts for x in p.operands) or \
            _depends_on(a, arg, memo):
        return None
    if ops.index(m1) > ops.index(m2):
        return None
    ringed = [ld.op.results[0] for ld in loads]
    if not any(_slice_to(m2.operands[1], r) is not None for r in ringed):
        return None
    return Chain(m1, m2, carried, before)


def _regs(t: ir.Type, threads: int) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return -(-n * bitwidth(t.element_type) // 32) // threads


def fits_registers(chain: Chain, threads: int) -> bool:
    """The rotated loop's big tiles, a thread's share: the carried accumulator, the
    scores, and A twice (the carried one, still read by M2, and the next)."""
    acc = _regs(chain.m2.results[0].type, threads)
    scores = _regs(chain.m1.results[0].type, threads)
    a = _regs(chain.m2.operands[0].type, threads)
    return acc + scores + 2 * a <= REGISTER_BUDGET


def _users_closure(body: ir.Block, root: ir.Value) -> list[ir.Operation]:
    """The body's ops (top level, in order) that read `root`, directly or through other
    such ops or through ops nested in them."""
    ops = [op.operation for op in body.operations][:-1]
    tainted = {root}
    out = []
    for op in ops:
        if any(x in tainted for x in _reads(op)):
            out.append(op)
            tainted.update(op.results)
    return out


def _slice_to(value: ir.Value, view: ir.Value) -> list[ir.Operation] | None:
    """The ops computing `value` from the ring view `view` alone (reshapes, permutes),
    in order; [] when `value` is the view; None when it is anything else."""
    chain = []
    v = value
    while v != view:
        owner = v.owner
        if isinstance(owner, ir.Block):
            return None
        op = owner.operation if hasattr(owner, "operation") else owner
        if op.name not in ("tile.reshape", "tile.permute") or len(op.operands) != 1:
            return None
        chain.append(op)
        v = op.operands[0]
    return list(reversed(chain))


def rotate(pl, loop: ir.Operation, chain: Chain, ring: ir.Value, loads, stages: int,
           issue: bool = True) -> ir.Operation:
    """Rotates `loop` (its ring allocated; with `issue`, its threads issue the copies, the
    prologue's already issued; without, a producer warp does) as the contract says.
    Returns the op after which the ring may be freed.  `pl` is the pipeliner
    (constants, consume, issue)."""
    c = pl.const
    loc = loop.location
    body = loop.regions[0].blocks[0]
    lb, ub, step = list(loop.operands)[:3]
    inits = list(loop.operands)[3:]
    m1, m2, t = chain.m1, chain.m2, chain.carried
    it, _, views = pl.consume(loop, ring, loads, stages)
    b2 = m2.operands[1]
    view_index = next(i for i, v in enumerate(views) if _slice_to(b2, v) is not None)
    b2_slice = _slice_to(b2, views[view_index])

    # R0: the body without M2, carrying M2's accumulator operand and its A
    a_type = m2.operands[0].type
    with ir.InsertionPoint(loop), loc:
        a_init = arith.ConstantOp(a_type, ir.DenseElementsAttr.get_splat(
            a_type, _zero(a_type.element_type))).result
        rot = scf.ForOp(lb, ub, step, inits + [a_init])
    new_body = rot.body
    old_yield = list(body.operations)[-1]
    with ir.InsertionPoint(new_body), loc:
        new_yield = scf.YieldOp([])
    for op in list(body.operations)[:-1]:
        op.move_before(new_yield.operation)
    body.arguments[0].replace_all_uses_with(rot.induction_variable)
    for i in range(len(inits)):
        body.arguments[i + 1].replace_all_uses_with(rot.inner_iter_args[i])
    yields = list(old_yield.operands)
    yields[t] = m2.operands[2]
    a_value = m2.operands[0]
    new_yield.operation.erase()
    old_yield.erase()
    with ir.InsertionPoint(new_body), loc:
        rot_yield = scf.YieldOp(yields + [a_value])
    m2.erase()
    carried_arg = rot.inner_iter_args[t]
    # the ops reading the carried accumulator go last (after M2's wait, in the rotated
    # loop); nothing else reads them (their results feed M2's accumulator and the yield)
    late = _users_closure(new_body, carried_arg)
    for op in late:
        op.move_before(rot_yield.operation)
    first_late = late[0] if late else rot_yield.operation
    # the copies of iteration j + S - 1 (into slot j - 1's place: after its release)
    issue_start = first_late
    if issue:
        with ir.InsertionPoint(first_late), loc:
            k = arith.addi(rot.induction_variable, arith.muli(c(stages - 1), step))
            pred = arith.cmpi(arith.CmpIPredicate.slt, k, ub)
            # (the loads' index values may be the old counter itself: both map to k)
            pl.issue(ring, loads, *pl.producer_slot(arith.addi(it, c(stages - 1)), stages),
                     pred, k, loop, {rot.induction_variable: k})
        issue_start = k.owner.operation if hasattr(k.owner, "operation") else k.owner

    # the prologue: one trip of R0 (M2 never ran: the carried accumulator is the init)
    with ir.InsertionPoint(rot.operation), loc:
        first_ub = arith.minsi(ub, arith.addi(lb, step))
    pro = rot.operation.clone(ir.InsertionPoint(rot.operation))
    pro.operands[1] = first_ub

    # the main loop from the second iteration, M2 of the previous one first
    with ir.InsertionPoint(rot.operation), loc:
        rot.operation.operands[0] = arith.addi(lb, step)
    for i in range(len(inits) + 1):
        rot.operation.operands[3 + i] = pro.results[i]
    with ir.InsertionPoint.after(m1), loc:
        prev = arith.remui(arith.addi(it, c(stages - 1)), c(stages))
        b_prev = _view_of(ring, prev, view_index, b2_slice)
        # M1 and the products it accumulates onto, in flight one after the other (an
        # accumulator in flight may feed the next wgmma); one wait covers them all
        acc1 = chain.before[0].operands[2] if chain.before else m1.operands[2]
        for p in chain.before + [m1]:
            acc1 = MmaAsyncOp(p.operands[0], p.operands[1], acc1).result
        started2 = MmaAsyncOp(rot.inner_iter_args[len(inits)], b_prev, carried_arg)
        waited1 = MmaWaitOp(acc1, 1)
    m1.results[0].replace_all_uses_with(waited1.results[0])
    m1.erase()
    for p in reversed(chain.before):
        p.erase()
    with ir.InsertionPoint(issue_start), loc:
        waited2 = MmaWaitOp(started2.result, 0)
        if pl.rotation_fence:
            waited2.operation.attributes[FENCE_ATTR] = ir.UnitAttr.get()
        RingReleaseOp(ring, prev, c(1, 1))
    carried_arg.replace_all_uses_except(waited2.results[0], started2.operation)
    # the next A, when it is exchanged through shared memory (`_exchanged`), is read
    # into registers after M2 is done: read before, it lands in the registers the
    # in-flight M2 reads (the loop carries both in the same ones), and ptxas then
    # serializes every wgmma of the kernel (C7513)
    a_def = a_value.owner
    if _exchanged(a_value) and a_def.operation.parent == rot.operation:
        a_def.operation.move_before(rot_yield.operation)

    # the last iteration's M2, where the loop ran; then the ring is done
    with ir.InsertionPoint.after(rot.operation), loc:
        ran = arith.cmpi(arith.CmpIPredicate.slt, lb, ub)
        tail = scf.IfOp(ran, [yields[t].type], has_else=True)
        with ir.InsertionPoint(tail.then_block):
            span = arith.subi(ub, lb)
            n = arith.divui(arith.addi(span, arith.subi(step, c(1))), step)
            last = arith.remui(arith.subi(n, c(1)), c(stages))
            b_last = _view_of(ring, last, view_index, b2_slice)
            done = MmaOp(rot.results[len(inits)], b_last, rot.results[t])
            scf.YieldOp([done.result])
        with ir.InsertionPoint(tail.else_block):
            scf.YieldOp([rot.results[t]])
    for i, r in enumerate(loop.results):
        r.replace_all_uses_with(tail.results[0] if i == t else rot.results[i])
    loop.erase()
    for op in list(reversed(b2_slice)) + [views[view_index].owner]:
        op = op.operation if hasattr(op, "operation") else op
        if not any(True for r in op.results for _ in r.uses):
            op.erase()              # the body's own view of M2's B: M2 reads slot j - 1's
    return tail.operation


def _exchanged(a: ir.Value) -> bool:
    """Whether `a` (M2's A operand in registers) is made by a layout conversion from an
    accumulator whose rows are split over warpgroups (8 warps on a 64-row tile: each
    holds some columns), which goes through shared memory."""
    owner = a.owner
    if isinstance(owner, ir.Block):
        return False
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name != "tile.convert_layout":
        return False
    src = tile_layout(op.operands[0].type)
    return isinstance(src, Mma) and src.groups[1] > 1


def _view_of(ring, slot, view_index: int, b_slice) -> ir.Value:
    """M2's B operand read from ring slot `slot`: its view and the reshapes on it."""
    v = RingViewOp(ring, slot, view_index).result
    if not b_slice:
        return v
    mapping = {b_slice[0].operands[0]: v}
    clone_ops(b_slice, mapping)
    return mapping[b_slice[-1].results[0]]


def _zero(elem: ir.Type) -> ir.Attribute:
    if is_float(elem):
        return ir.FloatAttr.get(elem, 0.0)
    return ir.IntegerAttr.get(elem, 0)
