"""Retiling a grid axis: blocks that each compute `num/den` of the tiles they were written for.

A cuTile kernel picks its tile shape and its grid together: `bid(1)` is the tile
index along N of a (BM, BN) output tile, and the grid has cdiv(N, BN) blocks on
that axis.  When the kernel uses `bid(a)` only as a tile index of loads and
stores, the block's work along that axis can be rescaled without changing what
the kernel computes: with every tile dim that follows `bid(a)` scaled by
`num/den` and the grid axis by `den/num`, block `b` loads and stores tile `b` of
the new size, which is exactly the union (num > den) or a part (num < den) of the
tiles the original blocks `b * num/den ...` computed.  The K loop, the products
and the epilogue are the same code on wider or narrower tiles.  The compiler
uses this to give a GEMM written with 128 x 128 tiles the 128 x 256 tiles that
Hopper runs fastest when the grid is large, and a decode-sized GEMM (48 blocks)
the narrower tiles that put every SM to work reading the weight.

Which dims follow `bid(a)` ("tied" dims) is a dataflow analysis over the tensors
of the kernel: a load or store indexed by `bid(a)` at position p ties dim p of its
tile; element-wise ops, loops and branches tie their tensors together; permute,
reshape (unit dims only), broadcast and reduce move the tied dim; an `mma` ties
A's M with the accumulator's rows or B's N with its columns, never K.  Splat
constants take whatever shape they meet.  Anything else refuses, with the reason:
`bid(a)` used in arithmetic, in a loop bound or twice in one index; a reduction
or a K dim along the tied dim; an iota or a load not indexed by `bid(a)` whose
tile would have to grow; `num_blocks(a)` (the grid changes).

The rescaled kernel must see the same tiles: a grid axis is coarsened only when
the launch's grid is a multiple of the factor there (the caller checks), so no
block computes a tile the original grid did not cover.  A kernel coarsened for a
grid of many waves also becomes persistent (`tile.persistent`, unless the kernel
sets `persistent` or asks for warp specialization): one block per SM walks the
tiles, its ring running on from one tile to the next (backend/pipeline/persistent.py).
So does a kernel whose tiles are written as wide as a block holds (128 x 256, one
product) on such a grid, its K slots halved to at most WIDE_SLOT bytes (a deeper
ring of the same bytes in flight).

Two rescalings keep the grid:
- *short axes* (`_shrink_short_axes`): when every array dim that follows `bid(a)`
  has at most 64 elements in this launch (the wish's "short" item: a decode step's
  1 to 64 rows), tiles longer than 64 along it shrink to 64 — block 0 still holds
  the whole array there, and the other blocks' tiles lie past its end before and
  after.  A decode GEMM's 128-row tiles become one warpgroup's 64 rows, and its
  shared memory goes to the ring instead of rows of zeros;
- *K loops* (`analyze_loop`, `apply_loop`): a loop `for k in range(cdiv(X, T))`
  whose counter only indexes zero-padded loads feeding products' K dims may run
  cdiv(X, s T) trips over tiles s times longer.  When the grid's tiles become s
  times narrower on sm_90a, the K tiles become up to s times longer (at most 256, a TMA
  box, and a ring slot of at most twice the bytes written): the same bytes in
  flight per slot, a quarter of the trips.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from mlir import ir

from tileir.dialect import TileIRError
from tileir.dialect.tile import SCOPE_ATTR, promotes_sums

from .budget import K_SPLIT_ATTR
from .grid_wish import SHORT, parse as parse_wish
from .mma_layouts import tile_bytes

PERSISTENT_ATTR = "tile.persistent"          # (backend/pipeline/persistent.py)
WARP_SPECIALIZE_ATTR = "tile.warp_specialize"
GRID_SCALE_ATTR = "tile.grid_scale"        # [axis, num, den] after retiling (for the metadata)
RETILE_ATTR = "tile.retile"                # [axis, num, den] asked for (kernel option)
WISH_ATTR = "tile.grid_wish"               # "wide:<even axes mask>" or "narrow:<s>" (launcher)
# the passes that rewrote the kernel for the launch's grid (for the metadata: a
# variant none rewrote is the kernel as written, whatever the wish)
GRID_REWRITES_ATTR = "tile.grid_rewrites"
# set by the layout stage's other grid rewrites, read by the stages after it
CLUSTER_ATTR = "tile.cluster"          # [x, y, z] blocks a cluster (passes/cluster_rows.py)
PERM_ATTR = "tile.grid_perm"           # launch axes as the kernel reads them (launch_order.py)


def read_wish(func: ir.Operation) -> dict[str, str]:
    """`func`'s parsed grid wish ({} without one); a located error for a malformed one."""
    if WISH_ATTR not in func.attributes:
        return {}
    attr = func.attributes[WISH_ATTR]
    try:
        if not isinstance(attr, ir.StringAttr):
            raise ValueError(f"it must be a string, got {attr}")
        return parse_wish(ir.StringAttr(attr).value)
    except ValueError as e:
        raise TileIRError(f"{WISH_ATTR}: {e}", func.location) from None


def note_grid_rewrite(func: ir.Operation, flag: str) -> None:
    """Records on `func` that pass `flag` rewrote it for the launch's grid."""
    old = [ir.StringAttr(a).value for a in ir.ArrayAttr(func.attributes[GRID_REWRITES_ATTR])] \
        if GRID_REWRITES_ATTR in func.attributes else []
    if flag not in old:
        func.attributes[GRID_REWRITES_ATTR] = ir.ArrayAttr.get(
            [ir.StringAttr.get(f) for f in old + [flag]])


class NotRetileable(Exception):
    """Why an axis cannot be retiled, and where."""

    def __init__(self, reason: str, location: ir.Location | None = None):
        super().__init__(reason)
        self.reason = reason
        self.location = location


@dataclasses.dataclass
class Tied:
    """The tensors of a kernel whose dim follows `bid(axis)`."""

    axis: int
    dims: dict[ir.Value, int]              # tensor value -> its tied dim
    # the products whose accumulators are tied: "M" (rows) or "N" (columns) each
    mma_dims: list[str]
    stores: int                            # stores of tied tiles

    def sizes(self) -> set[int]:
        return {ir.RankedTensorType(v.type).shape[d] for v, d in self.dims.items()}


# ---------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------
_NONE = -1               # an explicitly untied tensor (a tag; unknown tensors are absent)


def _is_tensor(v: ir.Value) -> bool:
    return isinstance(v.type, ir.RankedTensorType)


def _shape(v: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(v.type).shape)


def _int_attr(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _ops(func: ir.Operation) -> list[ir.Operation]:
    out: list[ir.Operation] = []

    def visit(op):
        out.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return out


class _Tags:
    """Tied dims of tensor values, filled in by propagation; a conflict refuses.  With
    `k`, the dims follow a K loop's counter: a product ties its operands' K dims
    together and unties its result (`_propagate_mma`)."""

    def __init__(self, k: bool = False):
        self.of: dict[ir.Value, int] = {}
        self.changed = False
        self.k = k

    def get(self, v: ir.Value) -> int | None:
        return self.of.get(v)

    def set(self, v: ir.Value, dim: int, op: ir.Operation) -> None:
        old = self.of.get(v)
        if old is None:
            self.of[v] = dim
            self.changed = True
        elif old != dim:
            raise NotRetileable(
                f"'{op.name}' would need a tensor to follow the block index along dim "
                f"{_say(dim)} and along dim {_say(old)}", op.location)


def _say(dim: int) -> str:
    return "none" if dim == _NONE else str(dim)


# Ops whose effect counts once per block: a kernel with them must keep its grid.
PER_BLOCK_EFFECTS = ("tile.scatter", "tile.atomic_rmw", "tile.atomic_cas", "tile.print")


def refuse_per_block_effects(ops: list[ir.Operation]) -> None:
    """Retiling and splitting change how many blocks run: refused for kernels that
    write memory at element indices (an atomic add done by twice the blocks counts
    twice), print (each block prints its tiles: a split block would print pieces) or
    order memory between blocks (relaxed accesses and fences)."""
    for op in ops:
        if op.name == "tile.print":
            raise NotRetileable("'tile.print' prints what each block holds (the blocks are "
                                "part of the output)", op.location)
        if op.name == "tile.fence" or SCOPE_ATTR in op.attributes:
            raise NotRetileable(f"'{op.name}' orders memory between blocks (which accesses "
                                f"a block makes is part of what it does)", op.location)
        if op.name in PER_BLOCK_EFFECTS:
            raise NotRetileable(f"'{op.name}' writes memory at element indices (the number "
                                f"of blocks is part of what it does)", op.location)


def analyze(func: ir.Operation, axis: int) -> Tied:
    """The tied dims of `func`'s tensors for grid axis `axis`, or NotRetileable."""
    ops = _ops(func)
    refuse_per_block_effects(ops)
    bids = [op.results[0] for op in ops
            if op.name == "tile.bid" and _int_attr(op, "axis") == axis]
    if not bids:
        raise NotRetileable(f"the kernel does not use bid({axis})")
    for op in ops:
        if op.name == "tile.num_blocks" and _int_attr(op, "axis") == axis:
            raise NotRetileable(f"num_blocks({axis}) is used (the grid would change)",
                                op.location)
    for b in bids:
        for use in b.uses:
            owner = use.owner
            if not ((owner.name == "tile.load" and use.operand_number >= 1) or
                    (owner.name == "tile.store" and use.operand_number >= 2)):
                raise NotRetileable(f"bid({axis}) is used by '{owner.name}', not only as a "
                                    f"tile index of loads and stores", owner.location)
    return _tie(ops, bids, axis, _Tags())


def _tie(ops: list[ir.Operation], index: list[ir.Value], axis: int, tags: "_Tags") -> Tied:
    """Tied dims from the loads and stores that `index` (block ids or a loop counter)
    indexes, propagated through the kernel."""
    bids = index
    stores = 0
    for op in ops:                                       # seeds: loads, stores, iota
        if op.name == "tile.load":
            tied = _bid_positions(op, list(op.operands)[1:], bids)
            tags.set(op.results[0], tied, op)
        elif op.name == "tile.store":
            tied = _bid_positions(op, list(op.operands)[2:], bids)
            tags.set(op.operands[1], tied, op)
            stores += tied != _NONE
        elif _fixed(op):
            tags.set(op.results[0], _NONE, op)
    settle(ops, tags)
    dims = {v: d for v, d in tags.of.items() if d != _NONE}
    for v, d in dims.items():
        if _shape(v)[d] == 1:
            raise NotRetileable("a tile of extent 1 follows the block index",
                                _location_of(v))
    mma_dims = []
    for op in ops:
        if op.name in ("tile.mma", "tile.matmul"):
            d = tags.get(op.results[0])
            rank = len(_shape(op.results[0]))
            if tags.k and tags.get(op.operands[0]) == rank - 1:
                mma_dims.append("K")
            elif d is not None and d != _NONE:
                mma_dims.append("M" if d == rank - 2 else "N")
    return Tied(axis, dims, mma_dims, stores)


def _fixed(op: ir.Operation) -> bool:
    """An op whose tensor's values depend on their position (an iota, a non-splat
    constant): it cannot follow a rescaled or split dim."""
    return op.name == "tile.iota" or (op.name == "arith.constant" and
                                      _is_tensor(op.results[0]) and not _splat(op))


def settle(ops: list[ir.Operation], tags: "_Tags") -> None:
    """Propagates the seeded tags through `ops` to a fixed point, marks the tensors
    never reached untied, and checks every rule once more against those (a conflict
    raises NotRetileable)."""
    tags.changed = True
    while tags.changed:
        tags.changed = False
        for op in ops:
            _propagate(op, tags)
    for op in ops:                                       # unknown tensors are untied
        for v in list(op.results) + [a for r in op.regions for b in r.blocks
                                     for a in b.arguments]:
            if _is_tensor(v) and tags.get(v) is None:
                tags.of[v] = _NONE
    tags.changed = True                                  # check every rule once more
    while tags.changed:
        tags.changed = False
        for op in ops:
            _propagate(op, tags)


def _location_of(v: ir.Value) -> ir.Location | None:
    owner = v.owner
    return None if isinstance(owner, ir.Block) else owner.location   # block args: none


def _splat(op: ir.Operation) -> bool:
    attr = op.attributes["value"]
    return isinstance(attr, ir.DenseElementsAttr) and attr.is_splat


def _bid_positions(op: ir.Operation, index: list[ir.Value], bids: list[ir.Value]) -> int:
    hits = [p for p, v in enumerate(index) if any(v == b for b in bids)]
    if len(hits) > 1:
        raise NotRetileable(f"'{op.name}' indexes {len(hits)} dims with the same block index",
                            op.location)
    return hits[0] if hits else _NONE


def _propagate(op: ir.Operation, tags: _Tags) -> None:
    name = op.name
    tensors = [v for v in list(op.operands) + list(op.results) if _is_tensor(v)]
    if not tensors and name not in ("scf.for", "scf.if", "scf.while"):
        return
    if name == "tile.permute":
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        src, res = op.operands[0], op.results[0]
        s, r = tags.get(src), tags.get(res)
        if s is not None:
            tags.set(res, _NONE if s == _NONE else perm.index(s), op)
        if r is not None:
            tags.set(src, _NONE if r == _NONE else perm[r], op)
    elif name == "tile.reduce":
        axis = _int_attr(op, "axis")
        src, res = op.operands[0], op.results[0]
        s, r = tags.get(src), tags.get(res)
        if s == axis:
            raise NotRetileable("a reduction runs along the dim that follows the block index",
                                op.location)
        if s is not None:
            tags.set(res, _NONE if s == _NONE else s - (s > axis), op)
        if r is not None:
            tags.set(src, _NONE if r == _NONE else r + (r >= axis), op)
    elif name in ("tile.broadcast", "tile.reshape"):
        _propagate_shape(op, tags)
    elif name in ("tile.mma", "tile.matmul"):
        _propagate_mma(op, tags)
    elif name == "scf.for":
        n = len(op.results)
        body = op.regions[0].blocks[0]
        yields = list(body.operations)[-1]
        for i in range(n):
            _unify([op.operands[3 + i], body.arguments[1 + i], yields.operands[i],
                    op.results[i]], tags, op)
    elif name == "scf.while":         # (a loop that breaks or returns: frontend/control.py)
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        forwarded = list(list(before.operations)[-1].operands)[1:]     # scf.condition's
        yields = list(after.operations)[-1]
        n = len(op.operands)
        if not (len(before.arguments) == len(yields.operands) == n and
                len(forwarded) == len(after.arguments) == len(op.results)):
            raise NotRetileable("a while loop whose regions carry different values",
                                op.location)
        for i in range(n):               # the init, the condition's argument, the yield
            _unify([op.operands[i], before.arguments[i], yields.operands[i]], tags, op)
        for i in range(len(forwarded)):  # what the condition forwards: body and results
            _unify([forwarded[i], after.arguments[i], op.results[i]], tags, op)
    elif name == "scf.if":
        for i in range(len(op.results)):
            group = [op.results[i]]
            for region in op.regions:
                if region.blocks:
                    group.append(list(region.blocks[0].operations)[-1].operands[i])
            _unify(group, tags, op)
    elif name in ("scf.yield", "scf.condition", "tile.load", "tile.store", "tile.iota",
                  "arith.constant", "tensor.splat"):
        pass                                   # seeded, or tied through their parents
    elif name.startswith(("arith.", "math.")) and _elementwise(op):
        _unify(tensors, tags, op)
    else:
        if any(tags.get(v) not in (None, _NONE) for v in tensors):
            raise NotRetileable(f"'{name}' does not take part in retiling", op.location)


def _elementwise(op: ir.Operation) -> bool:
    shapes = {tuple(_shape(v)) for v in list(op.operands) + list(op.results) if _is_tensor(v)}
    return len(shapes) == 1


def _unify(values: list[ir.Value], tags: _Tags, op: ir.Operation) -> None:
    values = [v for v in values if _is_tensor(v)]
    known = [tags.get(v) for v in values if tags.get(v) is not None]
    if known:
        for v in values:
            tags.set(v, known[0], op)


def _propagate_shape(op: ir.Operation, tags: _Tags) -> None:
    """broadcast (trailing dims aligned, 1 -> n) and reshape (unit dims in or out)."""
    src, res = op.operands[0], op.results[0]
    ss, rs = _shape(src), _shape(res)
    if op.name == "tile.broadcast":
        lead = len(rs) - len(ss)
        kept = {d: d + lead for d in range(len(ss)) if ss[d] == rs[d + lead]}
    else:
        ks = [d for d in range(len(ss)) if ss[d] != 1]
        kr = [d for d in range(len(rs)) if rs[d] != 1]
        kept = dict(zip(ks, kr)) if [ss[d] for d in ks] == [rs[d] for d in kr] else {}
    back = {r: s for s, r in kept.items()}
    s, r = tags.get(src), tags.get(res)
    if s is not None and s != _NONE:
        if s not in kept:
            raise NotRetileable(f"'{op.name}' does not keep the dim that follows the block "
                                f"index", op.location)
        tags.set(res, kept[s], op)
    elif s == _NONE and op.name == "tile.reshape":
        tags.set(res, _NONE, op)
    if r is not None:
        if r == _NONE or (op.name == "tile.broadcast" and r not in back):
            tags.set(src, _NONE, op)          # broadcast along the tied dim: source untied
        elif r in back:
            tags.set(src, back[r], op)
        else:
            raise NotRetileable(f"'{op.name}' does not keep the dim that follows the block "
                                f"index", op.location)


def _propagate_mma(op: ir.Operation, tags: _Tags) -> None:
    """A (.., M, K) @ B (.., K, N) [+ acc (.., M, N)]: M ties A and the accumulator's rows,
    N ties B and its columns; K and batch dims never follow the block index."""
    a, b = op.operands[0], op.operands[1]
    outs = [op.results[0]] + ([op.operands[2]] if op.name == "tile.mma" else [])
    rank = len(_shape(op.results[0]))
    m, n = rank - 2, rank - 1
    ta, tb = tags.get(a), tags.get(b)
    if tags.k:                                      # A's K is dim n, B's dim m
        for t, k_dim in ((ta, n), (tb, m)):
            if t not in (None, _NONE, k_dim):
                raise NotRetileable("an M, N or batch dim of a product would follow the "
                                    "loop counter", op.location)
        if ta is not None:
            tags.set(b, m if ta == n else _NONE, op)
        if tb is not None:
            tags.set(a, n if tb == m else _NONE, op)
        _unify_to(outs, _NONE, tags, op)
        return
    for t, k_dim in ((ta, n), (tb, m)):             # K: A's last dim, B's first
        if t == k_dim:
            raise NotRetileable("the K dim of a product would follow the block index",
                                op.location)
    for t in [ta, tb] + [tags.get(v) for v in outs]:
        if t is not None and t != _NONE and t < m:
            raise NotRetileable("a batch dim of a product would follow the block index",
                                op.location)
    if ta == m:
        _unify_to(outs, m, tags, op)
    if tb == n:
        _unify_to(outs, n, tags, op)
    if ta == _NONE and tb == _NONE:
        _unify_to(outs, _NONE, tags, op)
    _unify(outs, tags, op)
    o = tags.get(outs[0])
    if o is not None:
        tags.set(a, m if o == m else _NONE, op)
        tags.set(b, n if o == n else _NONE, op)


def _unify_to(values: list[ir.Value], dim: int, tags: _Tags, op: ir.Operation) -> None:
    for v in values:
        tags.set(v, dim, op)


@dataclasses.dataclass
class KLoop:
    """A K loop whose tiles along K may be rescaled: `for k in range(cdiv(X, T))`."""

    loop: ir.Operation
    tied: Tied                             # dims that follow the counter (size T each)
    bound: ir.Operation                    # floordivsi(addi(X, T - 1), T): the trip count
    tile: int                              # T

    def stage_bytes(self, factor: int = 1) -> int:
        """Bytes of the tiles the loop's body loads per iteration (a ring slot)."""
        total = 0
        for op in self.loop.regions[0].blocks[0].operations:
            if op.name == "tile.load":
                t = ir.RankedTensorType(op.results[0].type)
                n = tile_bytes(t.shape, t.element_type)
                total += n * factor if op.results[0] in self.tied.dims else n
        return total


def analyze_loop(func: ir.Operation, loop: ir.Operation) -> KLoop:
    """The dims of `func`'s tensors that follow the counter of `loop`, a K loop whose
    products may take s times longer K tiles in s times fewer iterations, or
    NotRetileable.

    What makes that the same computation: the counter starts at 0, steps by 1, and
    is only a tile index of zero-padded loads; the trip count is cdiv(X, T) with T
    the tiles' extent along the counter; the tied tiles reach only the K dims of
    products (which sum over K, so the result does not follow the counter); and
    every product has an operand loaded (through permutes and casts) from the
    array X measures, along that dim.  The longer tiles then cover K up to
    cdiv(X, s T) s T >= X: the tiles past X are that operand's zero padding, and
    each product adds zeros for them whatever its other operand holds."""
    # (imported here: tileir.passes imports the backend, which imports this module)
    from tileir.passes.iterations import constant_int
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    lb, ub, step = (constant_int(loop.operands[i]) for i in range(3))
    if lb != 0 or step != 1:
        raise NotRetileable("the loop does not count 0, 1, 2, ...", loop.location)
    for use in iv.uses:
        owner = use.owner
        if owner.name != "tile.load" or use.operand_number < 1:
            raise NotRetileable(f"the loop counter is used by '{owner.name}', not only as a "
                                f"tile index of loads", owner.location)
        if ir.StringAttr(owner.attributes["padding"]).value != "zero":
            raise NotRetileable("a load the loop counter indexes is not zero-padded",
                                owner.location)
    tied = _tie(_ops(func), [iv], -1, _Tags(k=True))
    if not tied.mma_dims or set(tied.mma_dims) != {"K"}:
        raise NotRetileable("the loop's tiles do not reach a product's K dim", loop.location)
    sizes = tied.sizes()
    if len(sizes) != 1:
        raise NotRetileable(f"the loop's tiles have extents {sorted(sizes)} along it",
                            loop.location)
    tile = next(iter(sizes))
    bound = loop.operands[1].owner
    bound = bound.operation if isinstance(bound, ir.OpView) else bound
    measured = None
    if isinstance(bound, ir.Operation) and bound.name == "arith.floordivsi" and \
            constant_int(bound.operands[1]) == tile:
        add = bound.operands[0].owner
        if isinstance(add, ir.OpView):
            add = add.operation
        if isinstance(add, ir.Operation) and add.name == "arith.addi" and \
                constant_int(add.operands[1]) == tile - 1:
            dim = add.operands[0].owner
            dim = dim.operation if isinstance(dim, ir.OpView) else dim
            if isinstance(dim, ir.Operation) and dim.name == "tile.dim":
                measured = (dim.operands[0], _int_attr(dim, "axis"))
    if measured is None:
        raise NotRetileable(f"the loop's trip count is not cdiv(dim, {tile})", loop.location)
    for op in body.operations:
        if op.name in ("tile.mma", "tile.matmul"):
            if measured not in (_loaded_from(op.operands[0], iv),
                                _loaded_from(op.operands[1], iv)):
                raise NotRetileable("a product has no operand loaded from the array the "
                                    "trip count measures, along that dim", op.location)
    return KLoop(loop, tied, bound, tile)


def unit_dims_only(src, res) -> bool:
    """Whether a reshape from shape `src` to `res` only adds or drops dims of extent 1
    (a batched load's (1, M, K) tile as (M, K); one head's (1, 1, M, D) as (M, D))."""
    src, res = list(src), list(res)
    return src != res and [d for d in src if d != 1] == [d for d in res if d != 1]


def _loaded_from(v: ir.Value, iv: ir.Value) -> tuple[ir.Value, int] | None:
    """(array, dim) of the load `v` comes from through permutes, casts and reshapes of
    unit dims, the dim the loop counter indexes; None otherwise."""
    perm = None                           # v's dims -> the load's dims
    while True:
        owner = v.owner
        owner = owner.operation if isinstance(owner, ir.OpView) else owner
        if not isinstance(owner, ir.Operation):
            return None
        if owner.name == "tile.permute":
            p = list(ir.DenseI64ArrayAttr(owner.attributes["permutation"]))
            perm = p if perm is None else [p[i] for i in perm]
            v = owner.operands[0]
        elif owner.name in ("arith.extf", "arith.truncf") or \
                owner.name == "tile.reshape" and unit_dims_only(
                    _shape(owner.operands[0]), _shape(owner.results[0])):
            v = owner.operands[0]       # (the dim returned is the load's own)
        elif owner.name == "tile.load":
            index = list(owner.operands)[1:]
            hits = [d for d, x in enumerate(index) if x == iv]
            return (owner.operands[0], hits[0]) if len(hits) == 1 else None
        else:
            return None


# ---------------------------------------------------------------------------
# Rewrite
# ---------------------------------------------------------------------------
def apply(func: ir.Operation, tied: Tied, factor: Fraction, grid: bool = True) -> None:
    """Scales every tied dim by `factor` in place and, with `grid`, records the grid
    scale (a shrink that keeps the grid records none)."""
    scale_dims(tied, factor)
    if grid:
        func.attributes[GRID_SCALE_ATTR] = ir.DenseI64ArrayAttr.get(
            [tied.axis, factor.numerator, factor.denominator])


def scale_dims(tied: Tied, factor: Fraction) -> None:
    """Every tied dim times `factor`: value types, loads' `tile_shape`, splat constants."""
    for v, d in tied.dims.items():
        shape = _shape(v)
        new = Fraction(shape[d]) * factor
        if new.denominator != 1 or new < 1:
            raise NotRetileable(f"a tile of extent {shape[d]} cannot be scaled by {factor}",
                                _location_of(v))
    constants = []
    for v, d in tied.dims.items():
        t = ir.RankedTensorType(v.type)
        shape = list(t.shape)
        shape[d] = int(shape[d] * factor)
        new_t = ir.RankedTensorType.get(shape, t.element_type, t.encoding)
        owner = v.owner
        if isinstance(owner, ir.OpView):
            owner = owner.operation
        if isinstance(owner, ir.Operation) and owner.name == "arith.constant":
            constants.append((owner, new_t))
            continue
        v.set_type(new_t)
        if isinstance(owner, ir.Operation) and owner.name == "tile.load":
            owner.attributes["tile_shape"] = ir.DenseI64ArrayAttr.get(shape)
    for op, new_t in constants:
        value = ir.DenseElementsAttr(op.attributes["value"])
        op.attributes["value"] = ir.DenseElementsAttr.get_splat(new_t, value.get_splat_value())
        op.results[0].set_type(new_t)


def apply_loop(k: KLoop, factor: int | Fraction) -> None:
    """Tiles `factor` times longer along the loop's counter (shorter for a factor
    under 1), and cdiv(X, factor T) iterations (a new trip count: the old one's
    values may have other users)."""
    from mlir.dialects import arith
    scale_dims(k.tied, Fraction(factor))
    add = k.bound.operands[0].owner
    add = add.operation if isinstance(add, ir.OpView) else add
    t = int(factor * k.tile)
    with ir.InsertionPoint(k.loop), k.loop.location:
        i32 = k.bound.results[0].type
        top = arith.addi(add.operands[0], arith.constant(i32, t - 1))
        k.loop.operands[1] = arith.floordivsi(top, arith.constant(i32, t))


def refused(func: ir.Operation, err: NotRetileable, what: str) -> TileIRError:
    return TileIRError(f"{what}: {err.reason}", err.location or func.location)


# ---------------------------------------------------------------------------
# Policy: what the pass applies
# ---------------------------------------------------------------------------
MAX_BOX = 256                 # a TMA box and a wgmma N are at most 256 along a dim
ACC_PER_THREAD = 128          # accumulator registers a thread may hold (128 x 256 tiles
                              # on 8 warps; more spills)
# ... and when the product sums fp8 into f32 in full precision (its partial sums live
# beside the accumulator, rules/mma.py): 128 x 256 fp8 tiles spilled at 255 registers,
# 128 x 128 ones fit
PROMOTED_ACC_PER_THREAD = 64
DEFAULT_WIDE_WARPS = 8        # the warps of a 128-row wgmma accumulator (mma_plan)
WIDE_SLOT = 64 * 1024         # the most bytes a K slot of tiles written wide keeps (a
                              # 128 x 256 x 64 slot is 48 KB: four fit beside the epilogue)


def retile(func: ir.Operation, target: str) -> Fraction | None:
    """Applies the kernel's `tile.retile` (raising where it cannot), or what its
    `tile.grid_wish` asks for where the kernel allows; returns the grid's factor."""
    if RETILE_ATTR in func.attributes:
        attr = func.attributes[RETILE_ATTR]
        vals = list(ir.DenseI64ArrayAttr(attr)) if isinstance(attr, ir.DenseI64ArrayAttr) \
            else []
        if len(vals) != 3 or not 0 <= vals[0] < 3 or vals[1] < 1 or vals[2] < 1:
            raise TileIRError(f"{RETILE_ATTR} must be array<i64: axis, num, den> with axis "
                              f"0..2 and num, den >= 1; got {attr}", func.location)
        axis, num, den = vals
        factor = Fraction(num, den)
        what = f"retile=({axis}, {factor})"
        _split_splats(func)
        try:
            tied = analyze(func, axis)
            apply(func, tied, factor)
        except NotRetileable as e:
            raise refused(func, e, f"kernel option {what} cannot be applied") from None
        return factor
    if WISH_ATTR not in func.attributes:
        return None
    wish = read_wish(func)
    if not {"wide", "narrow", "short"} & wish.keys():
        return None                                  # (a split wish: tile-split-blocks')
    _split_splats(func)
    written = [(k.loop, k.stage_bytes()) for k in _k_loops(func)]
    if "short" in wish:
        _shrink_short_axes(func, set(wish["short"].split(",")))
    applied = None
    warps = ir.IntegerAttr(func.attributes["tile.num_warps"]).value \
        if "tile.num_warps" in func.attributes else None       # the kernel's option
    for kind in ("wide", "narrow"):
        if kind not in wish:
            continue
        for tied in _candidates(func):
            factor = _factor(tied, kind, int(wish[kind]), target, warps)
            if factor is not None:
                apply(func, tied, factor)
                applied = factor
                break
    written_wide = applied is None and "wide" in wish and any(
        _at_widest(t, int(wish["wide"]), target, warps) for t in _candidates(func))
    if (written_wide or applied is not None and applied > 1) and \
            PERSISTENT_ATTR not in func.attributes and not _asks(func, WARP_SPECIALIZE_ATTR):
        # a grid of many waves of the wider tiles runs persistent: one block per SM
        # whose ring runs on from tile to tile (measured 0.3-3.8 % faster on the H100);
        # so do tiles written as wide as a block holds (cuTile's BatchMatMul sample,
        # 128 x 256 x 128: 0.60x torch.bmm as one block a tile, H200 2026-11-29)
        func.attributes[PERSISTENT_ATTR] = ir.BoolAttr.get(True)
    if written_wide and target == "sm_90a":
        # ... and their K slots at most WIDE_SLOT bytes: the sample's 96 KB slots left a
        # ring of 2; half-long K tiles make it 4 of the same bytes in flight
        for k in _k_loops(func):
            if _ring_fed(func, k) and not _sums_promoted(k) and \
                    k.stage_bytes() > WIDE_SLOT and k.tile // 2 >= MIN_SPLIT_K:
                apply_loop(k, Fraction(1, 2))
    if applied is not None and applied < 1 and target == "sm_90a":
        # narrower tiles, longer K: a ring slot keeps about the bytes it had (TMA: one
        # copy per box; cp.async's per-thread copies of 256-long tiles spill on sm_80)
        for k in _k_loops(func):
            if not _ring_fed(func, k) or _sums_promoted(k):
                continue
            budget = 2 * next((b for loop, b in written if loop == k.loop), 0)
            s = applied.denominator
            while s > 1 and (s * k.tile > MAX_BOX or k.stage_bytes(s) > budget):
                s //= 2
            if s > 1:
                apply_loop(k, s)
    return applied


MIN_SPLIT_K = 32              # the shortest K tile a split leaves (two k16 products)


def split_k(func: ir.Operation) -> bool:
    """The kernel's `tile.k_split` s applied: every K loop takes tiles s times shorter
    along K in s times more trips (a ring slot of 1/s the bytes), where its tiles
    stay at least MIN_SPLIT_K long.  Returns whether any loop was split."""
    if K_SPLIT_ATTR not in func.attributes:
        return False
    s = ir.IntegerAttr(func.attributes[K_SPLIT_ATTR]).value
    split = False
    for k in _k_loops(func):
        if k.tile % s == 0 and k.tile // s >= MIN_SPLIT_K:
            apply_loop(k, Fraction(1, s))
            split = True
    return split


def _asks(func: ir.Operation, attr: str) -> bool:
    return attr in func.attributes and ir.BoolAttr(func.attributes[attr]).value


def _sums_promoted(k: KLoop) -> bool:
    """Whether the loop's products sum fp8 into f32 in full precision: the tensor cores'
    partial sums (kept with fewer bits) then span one K tile, so a longer tile is a
    less precise product (cuBLAS's f32-summing fp8 GEMM promotes every 128 of K, as
    the tiles written here do; a sample that compares with it at f32 tolerance
    measured 3e-3 apart with 256-long tiles)."""
    return any(op.name == "tile.mma" and promotes_sums(op.operation)
               for op in k.loop.regions[0].blocks[0].operations)


def _ring_fed(func: ir.Operation, k: KLoop) -> bool:
    """Whether the loop's tied loads read aligned arrays (what the pipeliner's rings
    copy asynchronously: longer tiles then deepen the copies in flight; tiles the
    threads load themselves would only hold more registers)."""
    attrs = ir.ArrayAttr(func.attributes["arg_attrs"]) if "arg_attrs" in func.attributes \
        else None
    for op in k.loop.regions[0].blocks[0].operations:
        if op.name == "tile.load" and op.results[0] in k.tied.dims:
            array = op.operands[0]
            if not isinstance(array.owner, ir.Block) or attrs is None or \
                    "tile.aligned" not in ir.DictAttr(attrs[array.arg_number]):
                return False
    return True


def _k_loops(func: ir.Operation) -> list[KLoop]:
    out = []
    for op in _ops(func):
        if op.name == "scf.for":
            try:
                out.append(analyze_loop(func, op))
            except NotRetileable:
                pass
    return out


def _shrink_short_axes(func: ir.Operation, short: set[str]) -> None:
    """Tiles longer than SHORT along an axis whose every tied load and store reads an
    array dim of at most SHORT elements (the launch's `short` dims) shrink to SHORT,
    the grid unchanged: block 0 still covers the whole array along that dim (all of
    it lies in [0, SHORT)), and the other blocks' tiles lay past the array's end
    before and after."""
    names = [ir.StringAttr(n).value for n in ir.ArrayAttr(func.attributes["tile.arg_names"])]
    for tied in _candidates(func):
        sizes = tied.sizes()
        if max(sizes) <= SHORT or any(n % (max(sizes) // SHORT) for n in sizes):
            continue
        reads = []
        for op in _ops(func):
            if op.name in ("tile.load", "tile.store"):
                tile = op.results[0] if op.name == "tile.load" else op.operands[1]
                if tile in tied.dims:
                    array = op.operands[0]
                    if not isinstance(array.owner, ir.Block):
                        reads = []
                        break
                    reads.append(f"{names[array.arg_number]}.{tied.dims[tile]}")
        if reads and all(r in short for r in reads):
            apply(func, tied, Fraction(SHORT, max(sizes)), grid=False)


def _candidates(func: ir.Operation) -> list[Tied]:
    """Axes whose tied tiles include the accumulator of a product and a stored tile,
    those tied to N (the columns: B's panel) first."""
    out = []
    for axis in range(3):
        try:
            tied = analyze(func, axis)
        except NotRetileable:
            continue
        if tied.stores and tied.mma_dims and len(set(tied.mma_dims)) == 1:
            out.append(tied)
    return sorted(out, key=lambda t: t.mma_dims[0] != "N")


def _factor(tied: Tied, kind: str, arg: int, target: str,
            warps: int | None = None) -> Fraction | None:
    sizes = tied.sizes()
    # the products' results live together (attention's scores beside its output
    # accumulator): their registers add up
    products = sum(_elements(v) for v in tied.dims if _is_product(v))
    acc = max(products, max(_elements(v) for v, _ in tied.dims.items()))
    if kind == "wide":
        if target != "sm_90a" or not arg >> tied.axis & 1:
            return None                            # mma.sync tiles this wide spill
        if sum(1 for v in tied.dims if _is_product(v)) > 1:
            # chained products (attention: scores, then P @ V) keep the rows written:
            # 128 x 64 tiles at D = 64 widened to 256 rows and made persistent ran at
            # 184 TFLOP/s on the H200, the 128-row kernel at 350 (bench/attention.py)
            return None
        threads = 32 * (warps or DEFAULT_WIDE_WARPS)
        budget = PROMOTED_ACC_PER_THREAD if _promotes(tied) else ACC_PER_THREAD
        if max(sizes) * 2 <= MAX_BOX and acc * 2 <= budget * threads:
            return Fraction(2)
        return None
    if kind == "narrow":
        least = (32 if tied.mma_dims[0] == "N" else 64) if target == "sm_90a" else 16
        s = arg
        while s > 1:
            if all(n % s == 0 and n // s >= least for n in sizes):
                return Fraction(1, s)
            s //= 2
    return None


def _at_widest(tied: Tied, arg: int, target: str, warps: int | None) -> bool:
    """Whether the axis could be widened for a wide grid (sm_90a, one product, an even
    grid axis) but its tiles are already as wide as a block holds (a TMA box, or the
    accumulator registers of its threads)."""
    return (target == "sm_90a" and bool(arg >> tied.axis & 1)
            and sum(1 for v in tied.dims if _is_product(v)) == 1
            and _factor(tied, "wide", arg, target, warps) is None)


def _is_product(v: ir.Value) -> bool:
    owner = v.owner
    return not isinstance(owner, ir.Block) and owner.operation.name in ("tile.mma",
                                                                        "tile.matmul")


def _promotes(tied: Tied) -> bool:
    """Whether a product among the tied tensors sums fp8 into f32 in full precision."""
    for v in tied.dims:
        owner = v.owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "tile.mma" and \
                promotes_sums(owner.operation):
            return True
    return False


def _elements(v: ir.Value) -> int:
    n = 1
    for d in _shape(v):
        n *= d
    return n


def _split_splats(func: ir.Operation) -> None:
    """One splat tensor constant per use, so each use may take its own shape."""
    for op in _ops(func):
        if op.name != "arith.constant" or not _is_tensor(op.results[0]) or not _splat(op):
            continue
        uses = list(op.results[0].uses)
        for use in uses[1:]:
            owner = use.owner
            owner = owner.operation if isinstance(owner, ir.OpView) else owner
            clone = op.clone(ir.InsertionPoint(op))
            owner.operands[use.operand_number] = clone.results[0]
