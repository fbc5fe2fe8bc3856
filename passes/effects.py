"""What the tile passes know about side effects.

IRDL ops carry no memory-effect information, so MLIR treats every `tile` op as
"may do anything": upstream canonicalize/CSE never erase or merge them.  This
module is the one place where our passes learn which ops are safe to erase,
merge or hoist.  Unknown ops are always treated as writing memory: being
conservative only costs optimizations, never correctness.
"""

from __future__ import annotations

import enum
from typing import Iterator

from mlir import ir

from tileir.dialect.tile import SCOPE_ATTR


class Effect(enum.IntEnum):
    """Ordered from harmless to harmful, so effects combine with `max`."""

    PURE = 0   # reads and writes nothing: erasable when unused, mergeable
    READ = 1   # reads memory (tile.load): erasable when unused
    WRITE = 2  # may write memory or do anything else: keep


# Every op of the tile dialect is classified here, by name: a new op is not
# silently assumed pure (test_passes.py fails until it is listed).
READ_OPS = frozenset({"tile.load", "tile.gather"})
# The `pipeline` stage's ops order producers and consumers of shared memory and
# tensor-core work in flight: none may be erased, merged or moved.
WRITE_OPS = frozenset({"tile.store", "tile.scatter", "tile.atomic_rmw", "tile.atomic_cas",
                       "tile.print", "tile.assert", "tile.grid_dependency",
                       "tile.cluster_gather", "tile.fence",
                       "tile.partial_store", "tile.partial_add",
                       "tile.ring_alloc", "tile.ring_acquire", "tile.ring_load",
                       "tile.ring_commit", "tile.ring_wait", "tile.ring_view", "tile.ring_release",
                       "tile.ring_free", "tile.prefetch_l2", "tile.mma_async", "tile.mma_wait",
                       "tile.is_producer", "tile.set_max_registers", "tile.turn"})
PURE_TILE_OPS = frozenset({
    "tile.bid", "tile.num_blocks", "tile.dim", "tile.stride", "tile.iota", "tile.broadcast",
    "tile.reshape", "tile.permute", "tile.extract_slice", "tile.insert_slice", "tile.concat",
    "tile.reduce", "tile.mma", "tile.matmul",
    "tile.convert_layout",  # value semantics: a register shuffle, not a memory effect
    "tile.grid_size",
    "tile.select_array",   # picks one of its array operands: no memory access
    "tile.list_get",       # reads a list's table, which nothing writes while the kernel runs
    "tile.array_address",  # an array's address, as a value
    "tile.make_array",     # an array from an address: no memory access
    "tile.raw_memory",
})

# Every arith and math op is free of side effects.
PURE_PREFIXES = ("arith.", "math.")
# Region-free tensor ops: value semantics, no memory.
PURE_TENSOR_OPS = frozenset({
    "tensor.splat", "tensor.extract", "tensor.from_elements", "tensor.empty", "tensor.cast",
    "tensor.expand_shape", "tensor.collapse_shape", "tensor.extract_slice",
    "tensor.insert_slice", "tensor.insert", "tensor.reshape", "tensor.dim", "tensor.rank",
    "tensor.bitcast", "tensor.concat", "ub.poison",
})
# Terminators are effect-free for the analysis of their region but are never
# erased, merged or moved.
TERMINATORS = frozenset({"func.return", "scf.yield", "scf.condition"})
# Region ops whose effect is the union of their bodies' effects.  `scf.while`
# may not terminate, so it is never considered removable (see `removable`).
REGION_OPS = frozenset({"scf.for", "scf.if", "scf.while", "scf.execute_region"})

# Pure ops that are undefined for some operand values (division by zero,
# out-of-bounds indices): they must not be executed speculatively, e.g. hoisted
# out of a loop that might run zero times.
NOT_SPECULATABLE = frozenset({
    "arith.divsi", "arith.divui", "arith.ceildivsi", "arith.ceildivui", "arith.floordivsi",
    "arith.remsi", "arith.remui", "tensor.extract", "tensor.insert", "tensor.extract_slice",
    "tensor.insert_slice", "tensor.dim", "tensor.cast", "tensor.reshape",
    "tile.select_array",   # an index outside the list is undefined (the interpreter stops)
    "tile.list_get",       # reads the table only at an index inside it (else: empty)
})


def ops_of(block: ir.Block) -> list[ir.Operation]:
    """The ops of `block` as plain `Operation`s.

    Iterating a block yields OpViews, and some override `.name` (a FuncOp's
    `.name` is its symbol), so always compare the names of `.operation`s.
    """
    return [op.operation for op in block.operations]


def nested_ops(op: ir.Operation) -> Iterator[ir.Operation]:
    """The ops directly inside `op`'s regions (not recursively)."""
    for region in op.regions:
        for block in region.blocks:
            yield from ops_of(block)


def ops_under(root: ir.Operation) -> list[ir.Operation]:
    """Every op nested in `root`, at any depth (not `root` itself), in walk order."""
    out: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op != root:
            out.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return out


def contains(root: ir.Operation, name: str) -> bool:
    """Whether an op named `name` is `root` or nested in it (the walk stops at the first)."""
    found = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return bool(found)


def defining_op(v: ir.Value) -> ir.Operation | None:
    """The op that defines `v` (None for a block argument)."""
    owner = v.owner
    owner = owner.operation if isinstance(owner, ir.OpView) else owner
    return owner if isinstance(owner, ir.Operation) else None


def user(use) -> ir.Operation:
    """The op of an operand use (`Value.uses` yields them)."""
    owner = use.owner
    return owner.operation if isinstance(owner, ir.OpView) else owner


def op_after(op: ir.Operation) -> ir.Operation:
    """The op after `op` in its block (`op` is not its block's terminator)."""
    ops = ops_of(op.block)
    return ops[ops.index(op) + 1]


def blocks_under(root: ir.Operation) -> list[ir.Block]:
    """Every block of every region nested in `root`, outer blocks first."""
    out: list[ir.Block] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        for region in op.regions:
            out.extend(region.blocks)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def has_uses(op: ir.Operation) -> bool:
    return any(True for result in op.results for _ in result.uses)


def symbol_table_of(op: ir.Operation) -> ir.Operation | None:
    """The nearest enclosing module (the symbol table `func.call` resolves in)."""
    parent = op.parent
    while parent is not None and parent.name not in ("builtin.module", "gpu.module"):
        parent = parent.parent
    return parent


def lookup_callee(call: ir.Operation) -> ir.Operation | None:
    """The `func.func` a `func.call` refers to, or None when it cannot be found."""
    table = symbol_table_of(call)
    if table is None:
        return None
    name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
    for candidate in ops_of(table.regions[0].blocks[0]):
        if candidate.name == "func.func" and \
                ir.StringAttr(candidate.attributes["sym_name"]).value == name:
            return candidate
    return None


class Effects:
    """Effect queries for one pass run.

    Function effects are memoized by symbol name (never by op handle: a handle
    of an erased op may alias a new op at the same address).  Create a fresh
    instance per pass run, since passes change function bodies.
    """

    def __init__(self) -> None:
        self._functions: dict[str, Effect] = {}

    def of(self, op: ir.Operation) -> Effect:
        name = op.name
        if name == "tile.load" and SCOPE_ATTR in op.attributes:
            return Effect.WRITE        # a relaxed load: each one reads afresh (a spin loop)
        if name in PURE_TILE_OPS or name in PURE_TENSOR_OPS or name in TERMINATORS or \
                name.startswith(PURE_PREFIXES):
            return Effect.PURE
        if name in READ_OPS:
            return Effect.READ
        if name in WRITE_OPS:
            return Effect.WRITE
        if name in REGION_OPS:
            return max((self.of(inner) for inner in nested_ops(op)), default=Effect.PURE)
        if name == "func.call":
            return self._call(op)
        return Effect.WRITE

    def _call(self, call: ir.Operation) -> Effect:
        callee = lookup_callee(call)
        if callee is None or not callee.regions[0].blocks:
            return Effect.WRITE  # a declaration: its body is unknown
        name = ir.StringAttr(callee.attributes["sym_name"]).value
        if name not in self._functions:
            # Recursion: assume the worst while the body is being examined.
            self._functions[name] = Effect.WRITE
            self._functions[name] = max((self.of(op) for op in nested_ops(callee)),
                                        default=Effect.PURE)
        return self._functions[name]

    def may_write(self, op: ir.Operation) -> bool:
        return self.of(op) == Effect.WRITE

    def removable(self, op: ir.Operation) -> bool:
        """Whether `op` may be erased once its results are unused."""
        if op.name in TERMINATORS or op.name == "scf.while":
            return False
        return self.of(op) != Effect.WRITE

    def speculatable(self, op: ir.Operation) -> bool:
        """Whether `op` may run where it would not have run (e.g. hoisted out of a loop)."""
        return (not op.regions and op.name not in TERMINATORS
                and op.name not in NOT_SPECULATABLE and op.name != "func.call"
                and self.of(op) == Effect.PURE)
