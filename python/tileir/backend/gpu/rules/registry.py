"""The rule registry of the `gpu` stage and the walk that applies it.

A rule is a function `(cx, op)` registered for one or more op names with
`@rule(...)`; `@prefix_rule("arith.")` registers the default for a whole
dialect (element-wise ops).  `lower_op` runs the rule under the op's location;
an op without a rule is a located error.
"""

from __future__ import annotations

from typing import Callable

from mlir import ir

from tileir.dialect import TileIRError

from ..context import LoweringContext

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
    """Lowers every op of `block`; returns its terminator (for the parent rule)."""
    for op in block.operations:
        op = op.operation
        if op.name in ("scf.yield", "scf.condition", "func.return"):
            return op
        lower_op(cx, op)
    return None


def lower_op(cx: LoweringContext, op: ir.Operation) -> None:
    name = op.name
    fn = RULES.get(name)
    if fn is None:
        fn = next((f for p, f in PREFIX_RULES.items() if name.startswith(p)), None)
    if fn is None:
        raise TileIRError(f"no GPU lowering for '{name}'", op.location)
    with op.location:
        fn(cx, op.opview if name.startswith("tile.") else op)
