"""Ping-pong of the two consumer warpgroups: they take turns at the tensor cores
(stage `pipeline`, sm_90a; the pass `tile-pingpong`, after tile-pipeline-loops).

Contract.  A loop of the consumer branch of a warp-specialized kernel (the else
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
the gpu stage's (backend/gpu/barriers.py, `turn_barrier`: after the consumers' barrier 1 and
the TMA store's group barriers).  Loops that do not qualify are left as they are.

Who decides.  The kernel option `pingpong` (the attribute `tile.pingpong`): True
gives every qualifying loop its turns, False none.  Without it the compiler chooses,
where the GPU measured a gain: an attention-shaped loop (exactly two products, the
second's A operand the registers of a softmax -- `math.exp2` in the body -- between
them) whose second product is at least MIN_HEAD_DIM columns wide (the head dim: on
an H200, 2026-11-29, D 128 gained 0 to +7 % over eight shapes, D 64 -1.6 to +0.2 %).
What was decided for each qualifying loop, and why, is the module attribute
`tile.pingpong_choice` (in every later stage's IR, TILEIR_DUMP_IR, and a remark of
`tile-opt`); kernels without a qualifying loop (GEMMs, MLA's column-split loop)
get no attribute, so their IR is as before.
"""

from __future__ import annotations

import os

from mlir import ir

from tileir.dialect.layout import tile_layout
from tileir.dialect.ring import TurnOp
from tileir.dialect.verifier import kernel_functions
from tileir.errors import file_line_col
from tileir.backend.layout.mma_layouts import DotOperand, Mma

from .pure_slices import written_args

PINGPONG_ATTR = "tile.pingpong"        # the kernel option: True forces, False forbids
CHOICE_ATTR = "tile.pingpong_choice"   # on the module: what was decided and why, in words
CONSUMER_WARPS = 8                 # two warpgroups
# The narrowest second product (attention's head dim) the compiler gives turns unasked:
# on an H200 (bench/attention.py, 2026-11-29) the turns gained 0 to +7 % at D 128 (four
# shapes, full and causal) and -1.6 to +0.2 % at D 64, where the products are short
# and the softmax's exponentials dominate both warpgroups' time anyway.
MIN_HEAD_DIM = 128


def pingpong_loops(module: ir.Module, chip: str) -> int:
    """Brackets the product issue of every qualifying loop (see the contract) that the
    kernel asks for or the compiler chooses with turns, records why in the module's
    `tile.pingpong_choice`; returns how many loops got turns."""
    if not chip.startswith("sm_90"):
        return 0
    done, said = 0, []
    for func in kernel_functions(module):
        attrs = func.attributes
        asked = ir.BoolAttr(attrs[PINGPONG_ATTR]).value if PINGPONG_ATTR in attrs else None
        warps = ir.IntegerAttr(attrs["tile.num_warps"]).value \
            if "tile.num_warps" in attrs else 4
        if asked is False or warps != CONSUMER_WARPS:
            continue
        uniform = _Uniform(func)
        for loop in _consumer_loops(func):
            issue = _issue_run(loop)
            if issue is None or not uniform.bounds(loop):
                continue
            take, why = _decide(asked, loop, *issue)
            said.append(f"{_where(loop)}: {why}")
            if take:
                _take_turns(loop, *issue)
                done += 1
    if said:
        module.operation.attributes[CHOICE_ATTR] = ir.StringAttr.get("; ".join(said))
    elif CHOICE_ATTR in module.operation.attributes:     # (a rerun of the stage)
        del module.operation.attributes[CHOICE_ATTR]
    return done


def _decide(asked: bool | None, loop: ir.Operation, first: ir.Operation,
            last: ir.Operation) -> tuple[bool, str]:
    """Whether a qualifying loop gets turns, and why, in words."""
    if asked:
        return True, "ping-pong of the two consumer warpgroups (asked: pingpong=True)"
    ops = [op.operation for op in loop.regions[0].blocks[0].operations]
    products = ops[ops.index(first):ops.index(last) + 1]
    softmax = any(op.name == "math.exp2" for op in _walk(loop))
    from_registers = len(products) == 2 and \
        isinstance(tile_layout(products[1].operands[0].type), DotOperand)
    if not (softmax and from_registers):
        return False, ("no ping-pong: not attention-shaped (two products, the second's A "
                       "operand the softmax's registers); pingpong=True forces it")
    width = ir.RankedTensorType(last.results[0].type).shape[-1]
    if width < MIN_HEAD_DIM:
        return False, (f"no ping-pong: head dim {width} < {MIN_HEAD_DIM} (measured on an "
                       f"H200: -1.6 to +0.2 % at 64); pingpong=True forces it")
    return True, (f"ping-pong of the two consumer warpgroups (chosen: an attention loop "
                  f"of head dim {width} >= {MIN_HEAD_DIM}, measured on an H200: 0 to "
                  f"+7 % at 128); pingpong=False turns it off")


def _walk(op: ir.Operation) -> list[ir.Operation]:
    found = []

    def visit(o):
        found.append(o.operation)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def _where(loop: ir.Operation) -> str:
    """The loop's source line, `attention.py:63` (the file's base name: the words stay
    the same wherever the source lies), or its kernel's name where it has none."""
    flc = file_line_col(loop.location)
    if flc is not None:
        return f"{os.path.basename(flc[0])}:{flc[1]}"
    parent = loop.parent
    while parent is not None and parent.name != "func.func":
        parent = parent.parent
    name = ir.StringAttr(parent.attributes["sym_name"]).value if parent is not None else "?"
    return f"kernel '{name}'"


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
