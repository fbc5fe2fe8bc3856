"""The rule registry of the `gpu` stage and the walk that applies it.

A rule is a function `(cx, op)` registered for one or more op names with
`@rule(...)`; `@prefix_rule("arith.")` registers the default for a whole
dialect (element-wise ops).  `lower_op` runs the rule under the op's location;
an op without a rule is a located error.
"""

from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import scf

from tileir.dialect import TileIRError

from .. import owner_runs
from ..context import LoweringContext

# stores whose value may be one warpgroup's alone (owner_runs.py): that warpgroup stores
OWNER_STORES = frozenset({"tile.store"})

RULES: dict[str, Callable] = {}
PREFIX_RULES: dict[str, Callable] = {}


def rule(*names: str):
    def deco(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return deco


def prefix_rule(*prefixes: str):
    def deco(fn):
        for p in prefixes:
            PREFIX_RULES[p] = fn
        return fn
    return deco


def lower_block(cx: LoweringContext, block: ir.Block) -> ir.Operation | None:
    """Lowers every op of `block`; returns its terminator (for the parent rule).  Ops
    one warpgroup owns run as one run under its predicate (owner_runs.py)."""
    ops = [op.operation for op in block.operations]
    term = None
    if ops and ops[-1].name in ("scf.yield", "scf.condition", "func.return"):
        term = ops.pop()
    if cx.owner_exec and not cx.owner_run and owner_runs.lower_block(cx, ops, lower_op):
        return term
    for op in ops:
        lower_op(cx, op)
    return term


def lower_op(cx: LoweringContext, op: ir.Operation) -> None:
    name = op.name
    fn = RULES.get(name)
    if fn is None:
        fn = next((f for p, f in PREFIX_RULES.items() if name.startswith(p)), None)
    if fn is None:
        raise TileIRError(f"no GPU lowering for '{name}'", op.location)
    with op.location:
        owned = [cx.owner_only[v] for v in op.operands if v in cx.owner_only] \
            if cx.owner_only and not cx.owner_run and name in OWNER_STORES else []
        if owned:
            # an owner-only value stored: by the owner's threads (the others hold none)
            with ir.InsertionPoint(scf.IfOp(owner_runs.is_owner(cx, owned[0])).then_block):
                fn(cx, op.opview)
                scf.YieldOp([])
            return
        fn(cx, op.opview if name.startswith("tile.") else op)
    if cx.owner_only and not cx.owner_run:
        owner_runs.taint(cx, op)
