"""Structured control flow: `scf.for`, `scf.while` and `scf.if` carry one scalar per
register of each tile they carry."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, nvvm, scf

from tileir.dialect import TileIRError

from .. import owner_runs
from ..context import Frag, LoweringContext, lin_of
from ..barriers import NAMED_BARRIERS, turn_barrier
from .registry import lower_block, rule


def _flatten(cx: LoweringContext, values) -> list[ir.Value]:
    out = []
    for v in values:
        m = cx.get(v)
        out.extend(m.regs if isinstance(m, Frag) else [m])
    return out


def _unflatten(cx: LoweringContext, originals, flat) -> None:
    it = iter(flat)
    for v in originals:
        if isinstance(v.type, ir.RankedTensorType):
            lin = lin_of(v.type)
            cx.values[v] = Frag(lin, v.type.element_type, [next(it) for _ in range(lin.num_regs)])
        else:
            cx.values[v] = next(it)


@rule("scf.for")
def _for(cx, op):
    lb, ub, step = (cx.get(v) for v in list(op.operands)[:3])
    inits = list(op.operands)[3:]
    flat = _flatten(cx, inits)
    loop = scf.ForOp(lb, ub, step, flat)
    body = op.regions[0].blocks[0]
    cx.loop_depth += 1
    if _contains_store(body):
        cx.stores_seen = True     # a store in iteration i precedes the loads of i + 1
    top, holds = cx.smem_top, cx.fresh_holds
    with ir.InsertionPoint(loop.body):
        cx.values[body.arguments[0]] = loop.induction_variable
        _unflatten(cx, list(body.arguments)[1:], list(loop.inner_iter_args))
        term = lower_block(cx, body)
        scf.YieldOp(_flatten(cx, list(term.operands)))
    cx.loop_depth -= 1
    _unflatten(cx, list(op.results), list(loop.results))
    _release_body_tiles(cx, body, top, holds)


def _release_body_tiles(cx: LoweringContext, body: ir.Block, top: int, holds: int) -> None:
    """The shared tiles a loop body placed (a ring-less loop's K and V, copied in by
    the threads) are dead after the loop: what follows (an epilogue's exchange) may
    reuse their bytes.  Not when the body held memory for a cluster's peers, or left
    tensor-core work in flight that may still read them."""
    if cx.fresh_holds == holds and not _contains(body, "tile.mma_async"):
        cx.release_above(top)


@rule("scf.while")
def _while(cx, op):
    flat = _flatten(cx, list(op.operands))
    loop = scf.WhileOp(_flat_types(op.results), flat)
    before, after = (r.blocks[0] for r in op.regions)
    new_before = loop.before.blocks.append(*[v.type for v in flat])
    new_after = loop.after.blocks.append(*_flat_types(op.results))
    cx.loop_depth += 1
    if _contains_store(before) or _contains_store(after):
        cx.stores_seen = True
    top, holds = cx.smem_top, cx.fresh_holds
    with ir.InsertionPoint(new_before):
        _unflatten(cx, list(before.arguments), list(new_before.arguments))
        cond = lower_block(cx, before)
        scf.ConditionOp(cx.get(cond.operands[0]), _flatten(cx, list(cond.operands)[1:]))
    with ir.InsertionPoint(new_after):
        _unflatten(cx, list(after.arguments), list(new_after.arguments))
        term = lower_block(cx, after)
        scf.YieldOp(_flatten(cx, list(term.operands)))
    cx.loop_depth -= 1
    _unflatten(cx, list(op.results), list(loop.results))
    if not _contains(before, "tile.mma_async"):
        _release_body_tiles(cx, after, top, holds)


@rule("scf.if")
def _if(cx, op):
    types = _flat_types(op.results)
    new = scf.IfOp(cx.get(op.operands[0]), types, has_else=True)
    cond = op.operands[0].owner
    # the branches of a warp-specialized kernel: barriers and copies follow the role
    roles = ("producer", "consumer") if not isinstance(cond, ir.Block) and \
        cond.name == "tile.is_producer" else (cx.role, cx.role)
    outer = cx.role
    for region, blk, role in zip(op.regions, (new.then_block, new.else_block), roles):
        cx.role = role
        handing = cx.handoffs
        with ir.InsertionPoint(blk):
            if len(region.blocks):
                cx.handoffs = False
                term = lower_block(cx, region.blocks[0])
                if role == "consumer" and role != outer and cx.handoffs:
                    # the owner's hand-offs ran ahead: balance their barriers
                    owner_runs.open_handoffs(cx, blk)
                    owner_runs.close_handoffs(cx)
                cx.handoffs = cx.handoffs or handing
                scf.YieldOp(_flatten(cx, list(term.operands)) if term is not None else [])
            else:
                scf.YieldOp([])
    cx.role = outer
    _unflatten(cx, list(op.results), list(new.results))


@rule("tile.is_producer")
def _is_producer(cx, op):
    _, _, warp = cx.thread_ids()
    cx.values[op.result] = arith.cmpi(arith.CmpIPredicate.uge, warp, cx.const(cx.num_warps))


@rule("tile.set_max_registers")
def _set_max_registers(cx, op):
    llvm.inline_asm(None, [], f"setmaxnreg.{op.action}.sync.aligned.u32 {op.count};", "",
                    has_side_effects=True)


@rule("tile.turn")
def _turn(cx, op):
    """`bar.sync turn(w), 256` to wait for warpgroup w's turn at the tensor cores,
    `bar.arrive turn(1 - w), 256` to hand it to the other (`tile-pingpong`): each of the
    two barriers completes with one warpgroup waiting and the other arriving."""
    base = turn_barrier(cx.num_warps)
    if cx.role != "consumer" or cx.num_warps != 8 or base + 1 >= NAMED_BARRIERS:
        raise TileIRError(f"internal error: tile.turn needs the consumer branch of two "
                          f"warpgroups (role {cx.role}, {cx.num_warps} warps)",
                          ir.Location.current)
    _, _, warp = cx.thread_ids()
    wg = arith.shrui(warp, cx.const(2))
    count = cx.const(256)
    mine = op.kind == "wait"
    if op.warpgroup < 0:
        # the barrier of this warpgroup's turn (wait) or of the other's (pass)
        bar = arith.addi(wg, cx.const(base)) if mine else \
            arith.subi(cx.const(base + 1), wg)
        _turn_barrier(mine, bar, count)
        return
    only = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, wg, cx.const(op.warpgroup)))
    with ir.InsertionPoint(only.then_block):
        _turn_barrier(mine, cx.const(base + (op.warpgroup if mine else 1 - op.warpgroup)),
                      count)
        scf.YieldOp([])


def _turn_barrier(wait: bool, bar: ir.Value, count: ir.Value) -> None:
    if wait:
        nvvm.barrier(None, barrier_id=bar, number_of_threads=count)
    else:
        nvvm.barrier_arrive(count, barrier_id=bar)


def _contains_store(block: ir.Block) -> bool:
    return _contains(block, "tile.store")


def _contains(block: ir.Block, name: str) -> bool:
    found = False

    def visit(op):
        nonlocal found
        found = found or op.name == name
        return ir.WalkResult.ADVANCE

    for op in block.operations:
        op.operation.walk(visit)
    return found


def _flat_types(results) -> list[ir.Type]:
    out: list[ir.Type] = []
    for v in results:
        if isinstance(v.type, ir.RankedTensorType):
            out.extend([v.type.element_type] * lin_of(v.type).num_regs)
        else:
            out.append(v.type)
    return out
