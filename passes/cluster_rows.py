"""tile-cluster-rows: a small grid's reducing loops split across the blocks of a cluster.

Flag:          --tile-cluster-rows
Input/output:  Tile IR -> Tile IR with `tile.cluster_gather` (dialect/cluster.py).
               Applied on sm_90a to kernels the launcher compiles with a free grid
               axis u (extent 1 in the launch, not read by the kernel; `tile.grid_wish`
               "...free:<mask>", tileir.backend.layout.grid_wish): for a small grid ("split:<s>"
               in the wish) u becomes a cluster of C = min(s, MAX_CLUSTER) blocks; for
               a larger grid, a cluster of LARGE_GRID_CLUSTER blocks, and only for a
               kernel whose later loop re-reads an array an earlier loop read.  The
               kernel attributes `tile.grid_scale = [u, 1, C]` (the launch's grid along
               u times C) and `tile.cluster = [cx, cy, cz]` (the cluster's shape,
               `.reqnctapercluster` in the PTX) say so.
Precondition:  verified Tile IR.  Every loop of the kernel's top level
               - counts 0, 1, ..., n - 1 (constant bounds 0 and step 1);
               - carries only reductions of 16-, 32- or 64-bit elements (what
                 `tile.cluster_gather` moves): a sum (`s' = s + x`, init a splat 0), a max or
                 min (`m' = max(m, x)`, any splat init but NaN for maxnumf/minnumf),
                 or an online softmax's (m, s) pair (tile-defer-online-reductions'
                 recurrence), each carried value used by its update alone, each
                 update only yielded; the partials combine by the update's kind
                 (maxnumf: `tile.reduce` maxnum, NaN ignored) with its float options;
               - writes only slabs of the counter (a store in it is indexed by the
                 counter at one position and loop-invariant values elsewhere, as a
                 map's is: passes/iterations.py) and has no other effect;
               at least one loop carries a reduction that is used after it; the
               kernel has no per-block effects (atomics, scatter, print), and its
               stores outside those loops write arrays the kernel does not read.
               Otherwise: no change.

Why: at decode sizes a vocabulary's log-sum-exp or softmax runs 1 to 64 rows,
one block a row; the block streams 128k columns alone while the GPU idles (0.5-0.6x
torch.compile, bench/RESULTS.md).  With the row's chunks dealt to the C blocks of a
cluster (block r takes chunks r, r + C, ...), each block reduces a C-th of the row;
one `tile.cluster_gather` after the loop hands every block all C partials through
distributed shared memory, and ordinary tile ops combine them (a sum's partials
add, an online softmax's rescale by exp(m_r - m)).  Every block then holds the
row's values, so what follows the loop runs in each block alike: a second loop (the
softmax's normalization) is dealt out the same way, and a store after the loops
writes the same bytes from each block.  A loop that `tile-reverse-rereads` runs
backwards (`k = n - 1 - i`) takes its block's chunks backwards too, so the chunk
the block read last in the first loop is the first it re-reads.

On a large grid the same rewrite shortens re-reads: a prefill softmax's block reads
its whole 256 KB row, then reads it again, and with a few blocks on each of 132 SMs
most of the row has left L2 by then (0.67x copy bandwidth).  Dealt to 4 blocks, a
block re-reads 64 KB it read moments before.  Measured on the H100 (8192 x 128256
bf16, bench/RESULTS.md): clusters of 2, 4 and 8 blocks ran 9 % and 18 % faster and
10 % slower than one block a row; hence LARGE_GRID_CLUSTER.

Example: (C = 8, u = 2)
  before:  %r:2 = scf.for %k = %c0 to %n step %c1 iter_args(%s = %z, %m = %lo) {
             ... load(%X, %row, %k) ... }
  after:   %b = tile.bid {axis = 2} ; %cnt = (%n - %b + 7) / 8
           %r:2 = scf.for %j = %c0 to %cnt step %c1 iter_args(...) { %k = %b + %j * 8 ; ... }
           %g:2 = tile.cluster_gather %r#1, %r#0 {axis = 2, size = 8}    (8x1 each)
           %m = tile.reduce %g#0 {max, axis 0}
           %s = tile.reduce (%g#1 * exp(%g#0 - bcast(%m))) {sum, axis 0}
"""

from __future__ import annotations

import dataclasses
import math as pymath

from mlir import ir
from mlir.dialects import arith, math

from tileir.backend.layout.retile import CLUSTER_ATTR, GRID_SCALE_ATTR, NotRetileable, \
    note_grid_rewrite, read_wish, refuse_per_block_effects
from tileir.backend.layout.split import free_axes
from tileir.dialect import tile
from tileir.dialect.cluster import ClusterGatherOp

from .defer_online_reductions import match_pair
from .effects import Effect, Effects, defining_op, op_after, ops_of, ops_under, user
from .iterations import constant_int, defined_outside, follows_counter, map_dim
from .lower_to_llvm import module_target

FLAG = "tile-cluster-rows"
SUMMARY = "split a small grid's reducing loops across the blocks of a cluster (sm_90a)"

MAX_CLUSTER = 8               # the portable cluster size: any H100/H200 GPC runs 8 blocks
LARGE_GRID_CLUSTER = 4        # blocks a row on a larger grid (measured: see above)

_SUM = {"arith.addf", "arith.addi"}
_MAX = {"arith.maximumf", "arith.maxnumf", "arith.maxsi"}
_MIN = {"arith.minimumf", "arith.minnumf", "arith.minsi"}


@dataclasses.dataclass
class Carried:
    """How one loop's carried values combine across blocks."""

    kind: str                 # a tile.reduce kind (sum, max, maxnum...) or "online"
    indices: tuple[int, ...]  # the carried value(s): (i,), or (m, s) for "online"
    options: dict[str, str] = dataclasses.field(default_factory=dict)   # of the update op
    max_kind: str = "max"     # "online": the reduce kind of its m (max or maxnum)


@dataclasses.dataclass
class Loop:
    op: ir.Operation
    carried: list[Carried]
    reversed_use: ir.Operation | None     # `n - 1 - k` of a backwards loop


def run(module: ir.Module) -> None:
    if not module_target(module).chip.startswith("sm_90"):
        return                              # clusters: sm_90 and later
    for op in module.body.operations:
        func = op.operation
        if func.name != "func.func" or "tile.kernel" not in func.attributes or \
                GRID_SCALE_ATTR in func.attributes:
            continue
        wish = read_wish(func)
        if "free" not in wish or wish.keys() - {"split", "free", "swap"}:
            continue
        small = "split" in wish
        size = min(MAX_CLUSTER, int(wish["split"])) if small else LARGE_GRID_CLUSTER
        axes = free_axes(func, int(wish["free"]))
        if size < 2 or not axes:
            continue
        loops = plan(func)
        if loops and (small or rereads(loops)):
            apply(func, loops, axes[0], size)


# ---------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------
def plan(func: ir.Operation) -> list[Loop] | None:
    """The kernel's top-level loops, each with its reductions, or None when the
    kernel does not qualify (see the precondition)."""
    entry = func.regions[0].blocks[0]
    every = ops_under(func)
    try:
        refuse_per_block_effects(every)
    except NotRetileable:
        return None
    if any(op.name in ("tile.print", "tile.grid_dependency", "tile.cluster_gather",
                       "tile.mma", "tile.matmul") for op in every):
        return None
    effects = Effects()
    loops = []
    for op in ops_of(entry):
        if op.name == "scf.for":
            loop = _loop(op, effects)
            if loop is None:
                return None
            loops.append(loop)
        elif op.name in ("scf.while", "scf.if") and _has_loop(op):
            return None                      # a loop not at the top level
    inside = [op for lp in loops for op in ops_under(lp.op) if op.name == "tile.store"]
    loaded = [op.operands[0] for op in every if op.name == "tile.load"]
    for op in every:
        if op.name == "tile.store" and op not in inside and op.operands[0] in loaded:
            return None                      # a block would read another block's write
    if not any(_used(lp.op, i) for lp in loops for c in lp.carried for i in c.indices):
        return None
    return loops


def rereads(loops: list[Loop]) -> bool:
    """Whether a loop loads an array an earlier loop loaded (a softmax's second pass)."""
    seen: set = set()
    for lp in loops:
        mine = {_key(op.operands[0]) for op in ops_under(lp.op) if op.name == "tile.load"}
        if mine & seen:
            return True
        seen |= mine
    return False


def _key(v: ir.Value):
    """A hashable name of a kernel argument (arrays are the entry block's arguments)."""
    return v.arg_number if isinstance(v.owner, ir.Block) else id(v)


def _loop(op: ir.Operation, effects: Effects) -> Loop | None:
    if constant_int(op.operands[0]) != 0 or constant_int(op.operands[2]) != 1:
        return None
    body = op.regions[0].blocks[0]
    iv = body.arguments[0]
    inner = ops_under(op)
    stores = [o for o in inner if o.name == "tile.store"]
    for o in inner:
        if o.name in ("tile.load", "tile.store") or o.regions:
            continue
        if effects.of(o) != Effect.PURE:
            return None
    if stores and not _slab_stores(op, stores, iv):
        return None
    carried = _carried(op)
    if carried is None:
        return None
    return Loop(op, carried, _reversed_use(op))


def _slab_stores(loop: ir.Operation, stores: list[ir.Operation], iv: ir.Value) -> bool:
    """Each store writes a slab of the counter (so blocks taking different counters
    write different bytes): as map_dim asks of a map, for the stores alone."""
    if map_dim(loop) is not None:
        return True
    for op in stores:
        index = list(op.operands)[2:]
        varying = [v for v in index if not defined_outside(v, loop)]
        if len(varying) != 1 or not follows_counter(varying[0], iv, loop):
            return False
    return len({tuple(ir.RankedTensorType(op.operands[1].type).shape) for op in stores}) == 1


def _carried(loop: ir.Operation) -> list[Carried] | None:
    body = loop.regions[0].blocks[0]
    yields = list(body.operations)[-1]
    args = list(body.arguments)[1:]
    if any(_gather_bits(a.type) not in GATHER_BITS for a in args):
        return None                  # tile.cluster_gather moves 16-, 32- and 64-bit elements
    out: list[Carried] = []
    done: set[int] = set()
    for i, m_arg in enumerate(args):
        found = match_pair(loop, yields, args, i, m_arg)
        if found is not None and not {found.m_index, found.s_index} & done:
            out.append(Carried("online", (found.m_index, found.s_index),
                               max_kind=found.max_kind))
            done |= {found.m_index, found.s_index}
    for i, arg in enumerate(args):
        if i in done:
            continue
        kind = _simple(loop, yields, i, arg)
        if kind is None:
            return None
        options = tile.float_options_of(defining_op(yields.operands[i]))
        if options.get(tile.ROUNDING_ATTR) not in (None, *tile.DIRECTED_MODES):
            del options[tile.ROUNDING_ATTR]      # rn: a reduction's default
        out.append(Carried(kind, (i,), options))
    return out


GATHER_BITS = (16, 32, 64)


def _gather_bits(t: ir.Type) -> int | None:
    if not isinstance(t, ir.RankedTensorType):
        return None
    e = t.element_type
    return e.width if isinstance(e, ir.IntegerType) else \
        ir.FloatType(e).width if isinstance(e, ir.FloatType) else None


def _simple(loop: ir.Operation, yields: ir.Operation, i: int, arg: ir.Value) -> str | None:
    """The tile.reduce kind that combines carried value i across blocks when it is a
    sum, max or min (maxnum/minnum: NaN ignored, as by maxnumf/minnumf), else None."""
    new = yields.operands[i]
    op = defining_op(new)
    uses = list(arg.uses)
    if op is None or len(uses) != 1 or user(uses[0]) != op or arg not in op.operands:
        return None
    if [user(u) for u in new.uses] != [yields] or \
            sum(1 for v in yields.operands if v == new) != 1:
        return None
    init = _splat(loop.operands[3 + i])
    if init is None:
        return None
    if op.name in _SUM:
        return "sum" if init == 0 else None
    if op.name in _MAX | _MIN:
        if op.name in ("arith.maxnumf", "arith.minnumf"):
            return None if pymath.isnan(init) else \
                "maxnum" if op.name == "arith.maxnumf" else "minnum"
        return "max" if op.name in _MAX else "min"
    return None


def _reversed_use(loop: ir.Operation) -> ir.Operation | None:
    """The counter's only use when it is `(n - 1) - k` with n the loop's bound (a loop
    tile-reverse-rereads turned around), else None."""
    iv = loop.regions[0].blocks[0].arguments[0]
    uses = list(iv.uses)
    if len(uses) != 1:
        return None
    sub = user(uses[0])
    if sub.name != "arith.subi" or sub.operands[1] != iv:
        return None
    last = defining_op(sub.operands[0])
    if last is None or last.name != "arith.subi" or last.operands[0] != loop.operands[1] or \
            constant_int(last.operands[1]) != 1:
        return None
    return sub


# ---------------------------------------------------------------------------
# Rewrite
# ---------------------------------------------------------------------------
def apply(func: ir.Operation, loops: list[Loop], axis: int, size: int) -> None:
    entry = func.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(entry), func.location:
        rank = tile.BidOp(axis).result
    for lp in loops:
        _split(lp, rank, size)
        _combine(lp, axis, size)
    dims = [1, 1, 1]
    dims[axis] = size
    func.attributes[GRID_SCALE_ATTR] = ir.DenseI64ArrayAttr.get([axis, 1, size])
    func.attributes[CLUSTER_ATTR] = ir.DenseI64ArrayAttr.get(dims)
    note_grid_rewrite(func, FLAG)


def _split(lp: Loop, rank: ir.Value, size: int) -> None:
    """Block `rank` runs iterations rank, rank + size, ... (backwards for a loop that
    counts down its chunks)."""
    loop = lp.op
    n = loop.operands[1]
    t = n.type
    with ir.InsertionPoint(loop), loop.location:
        c = arith.constant(t, size)
        count = arith.divsi(arith.addi(arith.subi(n, rank), arith.constant(t, size - 1)), c)
        last = arith.subi(count, arith.constant(t, 1)) if lp.reversed_use is not None else None
    loop.operands[1] = count
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    with ir.InsertionPoint.at_block_begin(body), loop.location:
        # the block's chunks; backwards, last first (invariant terms outside the loop,
        # so that passes/iterations.py sees the chunk index as one-to-one in the counter)
        step = iv if last is None else arith.subi(last, iv)
        k = arith.addi(rank, arith.muli(step, c))
    if lp.reversed_use is not None:
        lp.reversed_use.results[0].replace_all_uses_with(k)
        lp.reversed_use.erase()
    else:
        iv.replace_all_uses_except(k, defining_op(defining_op(k).operands[1]))


def _combine(lp: Loop, axis: int, size: int) -> None:
    """After the loop: every block's partials gathered, combined, and put where the
    loop's results were used."""
    loop = lp.op
    used = [c for c in lp.carried if any(_used(loop, i) for i in c.indices)]
    if not used:
        return
    indices = [i for c in used for i in c.indices]
    uses = {i: [(user(u), u.operand_number) for u in loop.results[i].uses]
            for i in indices}
    with ir.InsertionPoint(op_after(loop)), loop.location:
        gather = ClusterGatherOp([loop.results[i] for i in indices], axis, size)
        got = dict(zip(indices, gather.results))
        combined = {}
        for c in used:
            if c.kind == "online":
                mi, si = c.indices
                m = tile.ReduceOp(got[mi], c.max_kind, 0).result
                mt = ir.RankedTensorType(got[mi].type)
                ones = ir.RankedTensorType.get([1] + list(mt.shape)[1:], mt.element_type)
                mb = tile.BroadcastOp(tile.ReshapeOp(m, ones).result, mt).result
                w = math.exp(arith.subf(got[mi], mb))
                combined[mi] = m
                combined[si] = tile.ReduceOp(arith.mulf(got[si], w), "sum", 0).result
            else:
                i = c.indices[0]
                combined[i] = tile.ReduceOp(got[i], c.kind, 0, options=c.options).result
    for i, targets in uses.items():
        for owner, n in targets:
            owner.operands[n] = combined[i]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def _used(loop: ir.Operation, i: int) -> bool:
    return any(True for _ in loop.results[i].uses)


def _splat(v: ir.Value) -> float | None:
    op = defining_op(v)
    if op is None or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    value = attr.get_splat_value()
    return float(ir.FloatAttr(value).value) if isinstance(value, ir.FloatAttr) \
        else float(ir.IntegerAttr(value).value)


def _has_loop(op: ir.Operation) -> bool:
    return any(o.name in ("scf.for", "scf.while") for o in ops_under(op))
