"""Cluster pairs: two blocks of a cluster share the operand tiles they both load (sm_90a).

A persistent GEMM's neighbouring tiles (i, j) and (i + 1, j) read the same B tiles.
Run as the two blocks of a (2, 1, 1) cluster, each copies *half* of such a tile
(every other TMA box, or half the rows of its one box) with TMA multicast into
the shared memory of both, so L2 serves each B tile once per pair instead of once
per block (a third fewer lookups for 128 x 256 tiles).  The decision is made
here, before the kernel becomes persistent:

* `choose(func, target)` picks grid axis `a` whose neighbouring tiles pair: the
  launch's grid is even along it (the wish's "wide" mask, an axis retiling did not
  coarsen), the kernel is a persistent, not warp-specialized, not stream-K kernel on
  sm_90a, every loop's bounds are the same for both tiles of a pair (they do not
  depend on `bid(a)`: both blocks run the same ring iterations), and some load in a
  loop that TMA can copy reads a tile of at least `MIN_SHARED_BYTES` whose index
  does not depend on `bid(a)` and which the two blocks can copy half each of
  (`split`: whole boxes, or rows on swizzle-atom boundaries).
* `mark` records it: `tile.cluster_pairs = a` and a (2, 1, 1) `tile.cluster` on the
  kernel, `tile.multicast` on each such load.
* A kernel launched as written may ask for pairs (the kernel option `pair_axis = a`,
  `REQUEST_ATTR`): `requested` runs the same checks for that axis, warp roles
  allowed and no size floor, and refuses with the reason where they fail; its
  clusters are the pair's two blocks along `a` itself (for a = 1: (1, 2, 1)).  MLA
  decode's two head blocks of a token read the same latent pages.  A
  warp-specialized kernel's producer warps meet the consumers' closing cluster
  barrier after their own loop (`software_pipeline.producer_branch`).

Then `persistent.py` walks pairs of tiles (block rank r of cluster c takes tile
`2 p + r` along `a` of the pair tile p it decodes from c), the pipeliner turns the
marked loads into ring buffers listed in the ring's `tile.multicast`, and the ring
rules (`rules/ring.py`) issue each half with `.multicast::cluster`, count both
blocks' warps on every empty barrier and release each slot in both blocks.
`ENABLED = False` switches pairing off (bench/gemm_schedules.py's A/B).
"""

from __future__ import annotations

from mlir import ir

from tileir.dialect import TileIRError
from tileir.dialect.types import bitwidth
from tileir.dialect.verifier import kernel_functions, module_chip
from tileir.backend.layout.mma_layouts import Shared, tile_bytes, tma_box, tma_clip_dim
from tileir.backend.layout.retile import (CLUSTER_ATTR, GRID_SCALE_ATTR, PERM_ATTR,
                                          PERSISTENT_ATTR, WARP_SPECIALIZE_ATTR, read_wish)
from .block_order import in_loop
from .rings import async_capable

PAIRS_ATTR = "tile.cluster_pairs"     # i64: the grid axis whose neighbouring tiles pair
REQUEST_ATTR = "tile.pair_axis"       # i32: the kernel option `pair_axis` (asked, not chosen)
MULTICAST_ATTR = "tile.multicast"     # unit on a tile.load; dense i64 array on a ring
ENABLED = True
SPLIT = "auto"                        # "rows": halve rows even where boxes would do (A/B)
ATOM_BYTES = 1024                     # a half must start on a swizzle atom (8 x 128 B)
# The least a shared tile saves per ring stage for pairing to pay: the two blocks of
# a pair wait on each other's releases every stage.  H100, 2026-11-26: a bf16
# 256 x 64 B tile (32 KB) gains 1.5-4 %, an fp8 one (16 KB, twice the K steps per
# byte) loses 13 % (bench/RESULTS.md, "Cluster pairs").
MIN_SHARED_BYTES = 32 * 1024
# A tile copied in half rows reads its array through a tensor map of its own box (half
# the rows): with ROWS_BESIDE_OTHERS it may share its array with other loads whose
# copies use other boxes (MLA's RoPE box, 8 of a step's 72 KB, beside the latent's
# 64-column boxes of the same cache); without, such a tile is not shared, as before
# (`_own_tensor_map`).  Off until the GPU measures it (bench/decode_attention.py
# --mla-variants, "RoPE shared too").
ROWS_BESIDE_OTHERS = False


def plan(module: ir.Module) -> None:
    target = module_chip(module, default="")
    for op in kernel_functions(module):
        found = choose(op, target)
        if found is not None:
            mark(op, *found)


def choose(func: ir.Operation, target: str) -> tuple[int, list[ir.Operation]] | None:
    """(axis, loads to multicast) for a kernel whose tiles may run in pairs, else None.
    A kernel that asks (`pair_axis`) gets its axis on sm_90a or a located error saying
    why not; below sm_90a (no TMA multicast) the option is ignored, as the other sm_90a
    options are."""
    if REQUEST_ATTR in func.attributes and PAIRS_ATTR not in func.attributes:
        if not target.startswith("sm_90"):
            return None
        return requested(func, target, ir.IntegerAttr(func.attributes[REQUEST_ATTR]).value)
    if not (ENABLED and target.startswith("sm_90") and _flag(func, PERSISTENT_ATTR)) or \
            _flag(func, WARP_SPECIALIZE_ATTR) or _flag(func, "tile.stream_k") or \
            CLUSTER_ATTR in func.attributes or PAIRS_ATTR in func.attributes:
        return None
    wish = read_wish(func)
    if "wide" not in wish:
        return None
    even = int(wish["wide"])
    scaled = set()                   # [axis, num, den]: the axis retiling coarsened
    if GRID_SCALE_ATTR in func.attributes:
        axis_, num, den = ir.DenseI64ArrayAttr(func.attributes[GRID_SCALE_ATTR])
        if num != den:
            scaled.add(axis_)
    for axis in (0, 1):
        if not (even >> axis) & 1 or axis in scaled:
            continue
        found = _shared_loads(func, target, axis, MIN_SHARED_BYTES)
        if isinstance(found, list):
            return axis, found
    return None


def requested(func: ir.Operation, target: str, axis: int) -> tuple[int, list[ir.Operation]]:
    """The kernel option `pair_axis` on sm_90a: the pair along `axis` of a kernel
    launched as written (not persistent, the axis not retiled; any warp roles), with
    the tiles both blocks load alike in one loop multicast (no size floor: the author
    asked), or a located error naming why not."""
    def refuse(why: str):
        raise TileIRError(f"kernel option pair_axis={axis}: {why}", func.location)

    if _flag(func, PERSISTENT_ATTR):
        refuse("not for a persistent kernel (its blocks walk tiles instead of being "
               "launched one a tile; the compiler makes a kernel persistent on a grid of "
               "many waves: pass persistent=False with pair_axis)")
    if _flag(func, "tile.stream_k"):
        refuse("not for a stream-K kernel")
    if CLUSTER_ATTR in func.attributes:
        refuse("the kernel already runs clusters")
    if PERM_ATTR in func.attributes:
        refuse("the launch order swapped the grid's axes for this kernel (tile-launch-"
               "order), so the hardware's blocks along the axis are not the launch's")
    if GRID_SCALE_ATTR in func.attributes:
        axis_, num, den = ir.DenseI64ArrayAttr(func.attributes[GRID_SCALE_ATTR])
        if axis_ == axis and num != den:
            refuse(f"retiling made the tiles {num}/{den} as wide along grid axis {axis}, "
                   f"so the hardware's blocks along it are not the launch's: pass "
                   f"retile=False with pair_axis")
    found = _shared_loads(func, target, axis, 0)
    if isinstance(found, str):
        refuse(found)
    # one ring a kernel: a warp-specialized kernel's producer warps close the ring of
    # the loop they fill (software_pipeline.producer_branch); a second paired ring
    # would close with the consumers alone
    loop = _loop_of(found[0])
    return axis, [ld for ld in found if _loop_of(ld) == loop]


def _loop_of(op: ir.Operation) -> ir.Operation:
    p = op.parent
    while p.name != "scf.for":
        p = p.parent
    return p


def _shared_loads(func: ir.Operation, target: str, axis: int,
                  min_bytes: int) -> list[ir.Operation] | str:
    """The pipelined loads the two blocks of a pair along `axis` can share (at least
    `min_bytes` each), or why there are none: both blocks must run the same ring
    iterations, and a shared load's index must not depend on `bid(axis)`."""
    loops, guards, loads = [], [], []
    written = _written_arrays(func)

    def visit(op):
        if op.name == "scf.for":
            loops.append(op.operation)
        elif op.name in ("scf.if", "scf.while"):
            guards.append(op.operation)
        elif op.name == "tile.load" and in_loop(op.operation):
            loads.append(op.operation)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    # both blocks of a pair must run the same ring iterations: loop bounds, and
    # any branch or while loop around a loop, the same for both tiles
    if any(_depends_on_bid(v, axis, written) for lp in loops for v in list(lp.operands)[:3]):
        return f"a loop's bounds may depend on bid({axis}): the pair's blocks would run " \
               f"different iterations of the ring they share"
    if any(_encloses_loop(g) and _guard_depends(g, axis, written) for g in guards):
        return f"a branch or while loop around a loop may depend on bid({axis})"
    shared = [ld for ld in loads if halves(ld.results[0].type) and
              tile_bytes(ld.results[0].type.shape, ld.results[0].type.element_type) >= min_bytes
              and async_capable(func, target, ld) and
              not any(_depends_on_bid(v, axis, written) for v in list(ld.operands)[1:])
              and _own_tensor_map(ld, loads)]
    return shared or f"no tile loaded in a loop is the same for both blocks of a pair " \
                     f"along axis {axis} and copied by TMA in halves"


def _encloses_loop(op: ir.Operation) -> bool:
    found = []

    def visit(inner):
        if inner.name == "scf.for":
            found.append(True)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner.operation.walk(visit)
    return bool(found)


def _guard_depends(op: ir.Operation, axis: int, written) -> bool:
    """Whether an `scf.if`'s condition or an `scf.while`'s trip count may depend on
    `bid(axis)` (a while loop: its operands and whatever its condition region reads)."""
    if op.name == "scf.if":
        return _depends_on_bid(op.operands[0], axis, written)
    return True                          # a while loop around a K loop: not paired


def _own_tensor_map(ld: ir.Operation, loads: list[ir.Operation]) -> bool:
    """A load copied in half rows needs a tensor map of its own (the maps are keyed by
    array, box and swizzle, and a half-row copy is never clipped, where a whole box
    may be): no other load of the kernel reads its array, or, with ROWS_BESIDE_OTHERS,
    none whose copies could use the same box."""
    t = ld.results[0].type
    if _split_of(t) != "rows":
        return True
    others = [o for o in loads if o != ld and o.operands[0] == ld.operands[0]]
    if not ROWS_BESIDE_OTHERS:
        return not others
    half = _boxes(t)[-1]
    return not any(half in _boxes(o.results[0].type) for o in others)


def _split_of(t: ir.Type) -> str | None:
    from tileir.dialect.layout import tile_layout
    return split(tile_layout(t), tuple(t.shape), max(1, bitwidth(t.element_type) // 8))


def _boxes(t: ir.Type) -> list[tuple[int, ...]]:
    """The TMA boxes a ring's copies of tile type `t` may use: its whole box (the tile,
    its fastest dim cut to one swizzle row), then, where it halves by rows, the half
    box a cluster pair's block copies (rules/ring.copy_box)."""
    from tileir.dialect.layout import tile_layout
    lay, shape = tile_layout(t), tuple(t.shape)
    if not isinstance(lay, Shared):
        return []
    box = list(tma_box(lay, shape, max(1, bitwidth(t.element_type) // 8)))
    out = [tuple(box)]
    if _split_of(t) == "rows":
        clip = tma_clip_dim(lay, shape)
        box[clip] //= 2
        out.append(tuple(box))
    return out


def _written_arrays(func: ir.Operation) -> set:
    """The kernel's array arguments some op of it may write (stores, scatters, atomics):
    a load from one of them may read different values in the two blocks of a pair."""
    from tileir.passes.effects import WRITE_OPS
    out = set()

    def visit(op):
        if op.name in WRITE_OPS and len(op.operands) and \
                isinstance(op.operands[0].owner, ir.Block):
            out.add(op.operands[0])
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return out


def mark(func: ir.Operation, axis: int, loads: list[ir.Operation]) -> None:
    """A persistent kernel walks its pairs on a 1-d grid of (2, 1, 1) clusters
    (persistent.py); one launched as written runs the pair's two blocks along `axis`
    as its clusters."""
    i64 = ir.IntegerType.get_signless(64)
    func.attributes[PAIRS_ATTR] = ir.IntegerAttr.get(i64, axis)
    dims = [1, 1, 1]
    dims[0 if _flag(func, PERSISTENT_ATTR) else axis] = 2
    func.attributes[CLUSTER_ATTR] = ir.DenseI64ArrayAttr.get(dims)
    for ld in loads:
        ld.attributes[MULTICAST_ATTR] = ir.UnitAttr.get()


def pair_axis(func: ir.Operation) -> int | None:
    return ir.IntegerAttr(func.attributes[PAIRS_ATTR]).value \
        if PAIRS_ATTR in func.attributes else None


def halves(t: ir.Type) -> bool:
    """Whether a tile in shared memory may be copied as two halves along the dim its TMA
    box is cut along (its rows: `mma_layouts.tma_clip_dim`), each half starting on a
    swizzle atom of every box."""
    from tileir.dialect.layout import tile_layout
    if not isinstance(t, ir.RankedTensorType):
        return False
    lay = tile_layout(t)
    if not isinstance(lay, Shared):
        return False
    shape = tuple(t.shape)
    return split(lay, shape, max(1, bitwidth(t.element_type) // 8)) is not None


def split(lay, shape, eb: int) -> str | None:
    """How the two blocks of a pair share the copies of a tile: "boxes" (block r copies
    boxes r, r + 2, ... whole: the tile has an even number of TMA boxes), "rows"
    (block r copies half r of the rows of its one box), None (neither applies)."""
    if lay.num_boxes(shape, eb) % 2 == 0 and SPLIT != "rows":
        return "boxes"
    clip = tma_clip_dim(lay, shape)
    if clip is None or shape[clip] % 2 or half_bytes(lay, shape, eb, clip) % ATOM_BYTES:
        return None
    return "rows"


def half_bytes(lay, shape, eb: int, clip: int) -> int:
    """Bytes, inside one TMA box of the tile, of the first half along dim `clip`."""
    rows = 1                                  # box rows: every dim but the fastest
    for d in lay.order[1:]:
        rows *= shape[d]
    return rows // 2 * lay.row_bytes(shape, eb)


def _flag(func: ir.Operation, name: str) -> bool:
    return name in func.attributes and ir.BoolAttr(func.attributes[name]).value


def _depends_on_bid(v: ir.Value, axis: int, written=frozenset()) -> bool:
    """Whether `v` may differ between the two blocks of a pair along `axis`: it depends
    on `tile.bid(axis)`, or on something the blocks may see differently (a loop's
    iteration arguments, an atomic's result, a load of an array the kernel writes)."""
    from tileir.passes.effects import READ_OPS, WRITE_OPS
    seen: set = set()
    stack = [v]
    while stack:
        x = stack.pop()
        owner = x.owner
        if isinstance(owner, ir.Block):
            parent = owner.owner.operation.name if owner.owner is not None else ""
            if x.arg_number == 0 and parent == "scf.for":
                continue                              # a loop counter
            if parent != "func.func":
                return True                           # carried: unknown
            continue                                  # a kernel argument
        owner = owner.operation
        if owner.name in WRITE_OPS or (owner.name in READ_OPS and
                                       owner.operands[0] in written):
            return True                               # the blocks may see other values
        if owner.name == "tile.bid":
            if ir.IntegerAttr(owner.attributes["axis"]).value == axis:
                return True
            continue
        if x in seen:
            continue
        seen.add(x)
        if owner.regions and len(owner.regions[0].blocks):
            return True                               # a region's result: unknown
        stack.extend(owner.operands)
    return False
