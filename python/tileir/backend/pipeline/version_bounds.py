"""Two versions of a straight-line kernel: one for blocks whose tiles lie inside their arrays.

Contract.  A `tile.kernel` without loops or block-wide reductions (and without
the tensor-core, ring, cluster or stream-K ops, which only kernels with loops
carry) whose top-level
`tile.load`s and `tile.store`s have tile indices and arrays computed by pure ops
from the kernel's arguments and block indices becomes

    %ok = <every such access's tile inside its array>
    scf.if %ok { <the body, those accesses marked tile.in_bounds> }
    else       { <the body as it was> }

A tile with index `i` and extent `s` along a dim of size `d` lies inside it when
`0 <= i` and `(i + 1) * s <= d`; tile extents are powers of two, so that is one
unsigned compare, `i <u d >> log2(s)` (a negative index is a large unsigned one).
The condition is block-uniform: every thread of a block takes the same version.
Accesses marked `tile.in_bounds` lower to plain vector loads and stores with no
per-thread bounds checks, so the version most blocks run is straight-line code
that issues all its loads back to back (backend/gpu/memory.py).

Accesses left out of the condition (an index loaded from memory, a relaxed
access, an access inside a branch) stay checked in both versions.  Kernels with
no access to mark are left unchanged.  Where the kernel waits for the previous
kernel in the stream (`tile.grid_dependency`) or fences, only the ops after the last
such op are versioned, the condition computed after it: the dims and list tables it
reads may be that kernel's output.

Why: a kernel that runs as one block per token at decode is as long as its
instruction path.  RoPE at one token spent ~200 instructions a warp, most of them
64-bit bounds arithmetic and the branches around each access; without them it
ran 0.77 -> 0.87x torch.compile (8B) and 0.82 -> 0.94x (70B) on the H100
(bench/RESULTS.md).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from tileir.dialect.layout import tile_layout
from tileir.dialect.tile import IN_BOUNDS_ATTR, SCOPE_ATTR, DimOp
from tileir.dialect.verifier import kernel_functions

from tileir.backend.layout.mma_layouts import Shared
from .persistent import PERSISTENT_ATTR
from .pure_slices import clone_ops

ACCESSES = ("tile.load", "tile.store")

# Ops whose kernels are not versioned: loops (whose accesses move with the loop
# counter), what only kernels with loops carry, and block-wide reductions.  Kernels
# that reduce hold whole rows in registers across the reduction's barriers; their
# straight-line version took more registers than the checked one (LayerNorm at 8192
# wide: 80 registers and 100 bytes of spills against 80 and none, bf16 on sm_90a;
# 8 bytes of spills on sm_80), and rows of that size are not latency-bound.
REFUSED = frozenset({"scf.for", "scf.while", "scf.parallel", "tile.cluster_gather",
                     "tile.mma", "tile.matmul", "tile.mma_async", "tile.mma_wait",
                     "tile.partial_store", "tile.partial_add", "tile.is_producer",
                     "tile.set_max_registers", "tile.reduce"})


def version_kernels(module: ir.Module) -> None:
    for op in kernel_functions(module):
        version(op)


def version(func: ir.Operation) -> bool:
    """Versions `func` in place (see the module's contract); whether it did."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    if _refused(func):
        return False
    entry = func.regions[0].blocks[0]
    ops = effects.ops_of(entry)[:-1]            # all but the return
    # Only what follows the last wait for the previous kernel (or fence) is versioned:
    # the condition reads dims (and lists' tables) that kernel may have written.
    start = 1 + max((k for k, op in enumerate(ops) if _orders_reads(op)), default=-1)
    before, body = ops[:start], ops[start:]
    if not body:
        return False
    position = {op: k for k, op in enumerate(body)}
    earlier = set(before)
    marked, slice_ops = [], set()
    for k, op in enumerate(body):
        if op.name not in ACCESSES or SCOPE_ATTR in op.attributes:
            continue
        if op.name == "tile.load" and isinstance(tile_layout(op.results[0].type), Shared):
            continue
        needed = _slice(_operands(op), position, earlier)
        if needed is None:
            continue
        marked.append(k)
        slice_ops |= needed
    if not marked:
        return False
    # The copy that becomes the fast version, its accesses marked.
    copy = func.clone(ip=False)
    copy_entry = copy.regions[0].blocks[0]
    for copied, argument in zip(copy_entry.arguments, entry.arguments):
        copied.replace_all_uses_with(argument)
    copied = effects.ops_of(copy_entry)[:-1]
    for original, duplicate in zip(before, copied[:start]):
        for r, d in zip(original.results, duplicate.results):
            d.replace_all_uses_with(r)          # the copy uses what comes before as is
    for duplicate in reversed(copied[:start]):
        duplicate.erase()
    fast = copied[start:]
    for k in marked:
        fast[k].attributes[IN_BOUNDS_ATTR] = ir.UnitAttr.get()
    first = body[0]
    with ir.InsertionPoint(first), body[marked[0]].location:
        mapping: dict = {}
        clone_ops(sorted(slice_ops, key=position.__getitem__), mapping)
        ok = _condition([body[k] for k in marked], mapping)
        if_op = scf.IfOp(ok, [], has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            then_end = scf.YieldOp([])
        with ir.InsertionPoint(if_op.else_block):
            else_end = scf.YieldOp([])
    for op in fast:
        op.move_before(then_end)
    for op in body:
        op.move_before(else_end)
    copy.erase()
    return True


def _orders_reads(op: ir.Operation) -> bool:
    """Whether memory read after `op` may differ from memory read before it: a wait for
    the previous kernel in the stream, or a fence.  Versioning starts after it."""
    if op.name == "tile.fence":
        return True
    return op.name == "tile.grid_dependency" and \
        ir.StringAttr(op.attributes["kind"]).value == "wait"


def _refused(func: ir.Operation) -> bool:
    if PERSISTENT_ATTR in func.attributes and ir.BoolAttr(func.attributes[PERSISTENT_ATTR]).value:
        return True
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        name = op.name
        if name in REFUSED or name.startswith("tile.ring_") or IN_BOUNDS_ATTR in op.attributes:
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return found


def _operands(access: ir.Operation) -> list[ir.Value]:
    """An access's array and tile indices (a store's stored tile is not needed)."""
    operands = list(access.operands)
    return [operands[0]] + operands[(2 if access.name == "tile.store" else 1):]


def _slice(values: list[ir.Value], position: dict, earlier: set) -> set | None:
    """The versioned top-level ops `values` are computed by, when all are pure and
    region-free and reach back only to the kernel's arguments and to the ops before
    the versioned part (`earlier`, computed once before the branch); else None."""
    from tileir.passes import effects
    needed: set = set()
    work = list(values)
    effect_of = effects.Effects()
    while work:
        owner = work.pop().owner
        if isinstance(owner, ir.Block):
            parent = owner.owner
            if parent is None or parent.operation.name != "func.func":
                return None               # a block argument of a nested region
            continue
        op = owner.operation if hasattr(owner, "operation") else owner
        if op in needed or op in earlier:
            continue
        if op not in position or len(op.regions) or effect_of.of(op) != effects.Effect.PURE:
            return None
        needed.add(op)
        work.extend(op.operands)
    return needed


def _condition(accesses: list[ir.Operation], mapping: dict) -> ir.Value:
    """Whether every access's tile lies inside its array (see the contract): one
    compare per (index, bound), where of constant indices against one bound only the
    largest counts, and-ed as a balanced tree (its depth, not its size, is what the
    block waits for before its first load)."""
    bounds: dict = {}
    checks: dict = {}
    largest: dict = {}                    # bound -> the largest constant index against it
    for access in accesses:
        array, *index = [mapping.get(v, v) for v in _operands(access)]
        shape = (access.results[0].type if access.name == "tile.load"
                 else access.operands[1].type).shape
        for axis, (i, extent) in enumerate(zip(index, shape)):
            key = (array, axis, extent)
            if key not in bounds:
                dim = DimOp(array, axis).result
                if extent & (extent - 1):         # (the frontend's tiles are powers of two)
                    bounds[key] = arith.divui(dim, arith.constant(dim.type, extent))
                else:
                    shift = extent.bit_length() - 1
                    bounds[key] = arith.shrui(dim, arith.constant(dim.type, shift)) \
                        if shift else dim
            bound = bounds[key]
            c = _constant(i)
            if c is not None and c >= 0:
                if bound not in largest or c > largest[bound][0]:
                    largest[bound] = (c, i)
            else:
                checks[(i, bound)] = None
    for bound, (_, i) in largest.items():
        checks[(i, bound)] = None
    terms = [arith.cmpi(arith.CmpIPredicate.ult, i, bound) for i, bound in checks]
    if not terms:                   # only rank-0 arrays: one element, always there
        return arith.constant(ir.IntegerType.get_signless(1), 1)
    while len(terms) > 1:
        terms = [arith.andi(terms[k], terms[k + 1]) if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0]


def _constant(v: ir.Value) -> int | None:
    """The value of an `arith.constant` integer, else None."""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.operation.attributes["value"]).value
