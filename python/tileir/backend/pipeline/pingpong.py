"""Ping-pong of the two consumer warpgroups: they take turns at the tensor cores
(stage `pipeline`, sm_90a; the pass `tile-pingpong`, after tile-pipeline-loops).

Contract.  In a kernel that asks for it (`@ct.kernel(pingpong=True)`: the attribute
`tile.pingpong`), a loop of the consumer branch of a warp-specialized kernel (the else
side of `scf.if tile.is_producer`, software_pipeline.py) with two consumer warpgroups
(`tile.num_warps` 8), rotated by product_rotation.py -- its body issues its products
as one run of `tile.mma_async` (the scores of iteration j, then P V of j - 1) and
waits for the first with `pending = 1` and for the rest with `pending = 0` later on
-- whose products give each warpgroup its own rows (wgmma accumulators of warps
(8, 1): each warpgroup's softmax reads its own 64 rows only), and whose bounds every
thread of the block computes alike (pure ops on the kernel's arguments, block ids and
arrays the kernel never writes: the causal trip count differs between blocks, never
between the warpgroups of one) gets FlashAttention-3's inter-warpgroup schedule:

    tile.turn pass {warpgroup = 1}       warpgroup 1 lets warpgroup 0 go first
    scf.for ... {
      ring_wait; ...
      tile.turn wait                     bar.sync turn(w), 256: my turn
      mma_async S_j; mma_async P_{j-1} V_{j-1}
      tile.turn pass                     bar.arrive turn(1 - w), 256: the other's turn
      mma_wait 1; <softmax of S_j>; mma_wait 0; ...
    }
    tile.turn wait {warpgroup = 0}       takes warpgroup 1's last hand-over

so warpgroup 0 issues its products while warpgroup 1 runs its softmax, then they swap.
Each barrier completes with one warpgroup waiting (128 threads) and the other arriving
(128): warpgroup 0 waits on turn(0) as often as warpgroup 1 passes to it (once before
the loop, once an iteration), and warpgroup 1 on turn(1) as often as warpgroup 0
passes (once an iteration): balanced for any trip count, 0 included, since both run
the same trips.  Only `tile.mma_async`s lie between a wait and its pass: no barrier
of both warpgroups (an exchange through shared memory) can be reached inside a turn,
where the other warpgroup would wait on it for ever.  Barriers of both warpgroups
elsewhere in the body are safe (each warpgroup passes its turn before it reaches
them) but resynchronize the two.  Each loop that qualifies gets its own start and
end, so two such loops in one kernel alternate each on its own.  The barrier ids are
the gpu stage's (rules/control.py, `turn_barrier`: after the consumers' barrier 1 and
the TMA store's group barriers).  Loops that do not qualify are left as they are.
"""

from __future__ import annotations

from mlir import ir

from tileir.dialect.layout import tile_layout
from tileir.dialect.ring import TurnOp
from tileir.dialect.verifier import kernel_functions
from tileir.backend.layout.mma_layouts import Mma

from .pure_slices import written_args

PINGPONG_ATTR = "tile.pingpong"
CONSUMER_WARPS = 8                 # two warpgroups


def pingpong_loops(module: ir.Module, chip: str) -> int:
    """Brackets the product issue of every qualifying loop (see the contract) with
    turns; returns how many loops got them."""
    if not chip.startswith("sm_90"):
        return 0
    done = 0
    for func in kernel_functions(module):
        attrs = func.attributes
        if PINGPONG_ATTR not in attrs or not ir.BoolAttr(attrs[PINGPONG_ATTR]).value:
            continue
        warps = ir.IntegerAttr(attrs["tile.num_warps"]).value \
            if "tile.num_warps" in attrs else 4
        if warps != CONSUMER_WARPS:
            continue
        uniform = _Uniform(func)
        for loop in _consumer_loops(func):
            issue = _issue_run(loop)
            if issue is not None and uniform.bounds(loop):
                _take_turns(loop, *issue)
                done += 1
    return done


def _consumer_loops(func: ir.Operation) -> list[ir.Operation]:
    """The `scf.for`s directly in the consumer branch of a warp-specialized split (not
    inside another loop or branch: those run once per enclosing trip or only where
    their condition holds, which would need the condition checked as well)."""
    out = []

    def visit(op):
        op = op.operation
        if op.name == "scf.if" and not isinstance(op.operands[0].owner, ir.Block) and \
                op.operands[0].owner.name == "tile.is_producer":
            blocks = op.regions[1].blocks
            if len(blocks):
                out.extend(o.operation for o in blocks[0].operations
                           if o.operation.name == "scf.for")
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return out


def _issue_run(loop: ir.Operation) -> tuple[ir.Operation, ir.Operation] | None:
    """(first, last) of the body's run of `tile.mma_async`s when the body is a rotated
    one (the contract's shape), else None."""
    ops = [op.operation for op in loop.regions[0].blocks[0].operations]
    starts = [k for k, op in enumerate(ops) if op.name == "tile.mma_async"]
    waits = [op for op in ops if op.name == "tile.mma_wait"]
    if len(starts) < 2 or starts != list(range(starts[0], starts[-1] + 1)):
        return None                    # not one run of issues (nothing else inside a turn)
    pending = [ir.IntegerAttr(w.attributes["pending"]).value for w in waits]
    if not pending or pending[0] != 1 or 0 not in pending or \
            ops.index(waits[0]) < starts[-1]:
        return None                    # not the rotation: scores waited first, P V later
    for k in starts:
        lay = tile_layout(ops[k].results[0].type)
        if not isinstance(lay, Mma) or lay.version != 3 or \
                tuple(lay.warps) != (CONSUMER_WARPS, 1):
            return None                # a warpgroup's softmax would need the other's rows
    return ops[starts[0]], ops[starts[-1]]


def _take_turns(loop: ir.Operation, first: ir.Operation, last: ir.Operation) -> None:
    loc = loop.location
    with loc:
        TurnOp("wait", ip=ir.InsertionPoint(first))
        TurnOp("pass", ip=ir.InsertionPoint.after(last))
        TurnOp("pass", 1, ip=ir.InsertionPoint(loop))         # warpgroup 0 goes first
        TurnOp("wait", 0, ip=ir.InsertionPoint.after(loop))   # warpgroup 1's last pass


class _Uniform:
    """Whether values are the same in every thread of a block: made by pure ops from the
    kernel's arguments, block ids, constants and loads from arrays no op of the kernel
    writes (so no store of another block lands between two threads' reads)."""

    def __init__(self, func: ir.Operation):
        self.entry = func.regions[0].blocks[0]
        self.written = written_args(func)
        self.memo: dict = {}

    def bounds(self, loop: ir.Operation) -> bool:
        return all(self.value(v) for v in list(loop.operands)[:3])

    def value(self, v: ir.Value) -> bool:
        from tileir.passes import effects       # (passes import the backend: not at load)
        owner = v.owner
        if isinstance(owner, ir.Block):
            return owner == self.entry
        op = owner.operation if hasattr(owner, "operation") else owner
        if op in self.memo:
            return self.memo[op]
        self.memo[op] = False                    # (SSA has no cycles: a guard only)
        if len(op.regions):
            return False
        pure = effects.Effects().of(op) == effects.Effect.PURE
        read_only = op.name == "tile.load" and isinstance(op.operands[0].owner, ir.Block) \
            and op.operands[0].owner == self.entry \
            and op.operands[0].arg_number not in self.written
        self.memo[op] = (pure or read_only) and all(self.value(x) for x in op.operands)
        return self.memo[op]
