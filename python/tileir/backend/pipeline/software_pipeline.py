"""Software pipelining of loops that load tiles into shared memory (stage `pipeline`).

A `scf.for` whose body loads tiles into shared memory (`tile.load` with a
`#tile.shared` result, from an array the target can copy asynchronously: TMA on
sm_90a, cp.async on sm_80) becomes a ring of S stages (dialect/ring.py):

    ring_alloc; prologue: loads of iterations 0 .. S-2 into slots 0 .. S-2
    for i:  wait(slot i % S)  ->  the body on the slot's tiles
            [async mma: mma_async; mma_wait(pending 1); release(slot (i-1) % S)]
            acquire + loads of iteration i + S - 1 into slot (i + S - 1) % S
            [sync consumers: release(slot i % S) at the end]
    [mma_wait(pending 0)]; ring_free

so the loads of S - 1 iterations are in flight while iteration i computes.  An
`mma` whose accumulator the loop carries (and only yields) becomes asynchronous
on wgmma targets: at most one product is in flight, and the slot it read is
released once the next iteration's wait shows it done.  (Not when the product's A
is a register tile the body makes: the next iteration would write those registers
while the product still reads them; it stays synchronous.)  Loads of later
iterations compute their indices by cloning the index computation with the
loop counter advanced; a load whose index depends on anything but the counter
and loop-invariant values is left alone.

Stages: the kernel's `tile.num_stages` (`@kernel(num_stages=...)`), else as many
as fit the shared memory a block gets when two share an SM (when registers allow
it: one block's epilogue then overlaps the other's loop), 2 to 4; for a launch
whose grid leaves SMs idle (`tile.grid_wish` "narrow"), as many as fit one block's
shared memory, 2 to 8 (the loop then waits on memory: more bytes in flight).
Either way at most the kernel's `tile.stage_cap`, which the stage driver sets when
a plan overflowed the shared memory at lowering (backend/layout/budget.py); a cap of 1
leaves the loop without a ring.

A loop whose loads go to registers instead (a chunked reduction) has them issued
one iteration ahead (`register_prefetch.py`).

Warp specialization (sm_90a): one loop of the kernel -- as the kernel asks
(`warp_specialize`), by default for a grid smaller than the GPU, and by default for
a loop of chained products (attention) -- gets a producer warpgroup that issues the
ring's copies while the consumers compute (`loop_specialized`).  The loop is at the
kernel's top level, or under `scf.if` guards (`guards`) that

  - branch on a value uniform across the block: pure ops on the kernel's arguments,
    block ids and loads from arrays no op of the kernel writes (`uniform`), so the
    producer and the consumer warps take the same way, and the block barriers
    inside (the ring's initialization) wait for all of them or none;
  - have no results and nothing after them but their block's end.

The split happens where the loop is, inside the guards:

    if c:  (empty)                     if c:  (empty)
    else:  pre; for ...; post    ->    else:  pre; ring_alloc
                                              if is_producer:  for: acquire, loads, commit
                                              else:            for: wait, body; post; ring_free

and the consumer branch recomputes the tiles and loaded values it uses of `pre`'s
(`rematerialize`: ptxas spills what is live across the register change).  Any
other loop (inside another loop, under a guard that fails these) keeps its copies
in the consumers' hands.

Early loads (sm_90a, the kernel option `early_loads`: arrays W the author promises
no kernel before this one in the stream writes, a model's weights; `load_early`).
The first ring the kernel's body builds starts at the kernel's top, before the
grid-dependency wait that tile-programmatic-launch places later in the stage:

    ring_alloc                                   (top of the kernel)
    for p < S - 1:  acquire(slot p, parity 1, k_p < ub); loads of W into slot p
    -- wait; launch_dependents --                (programmatic.py `_wait_point`)
    ...; for p < S - 1:  loads of the other arrays into slot p (k_p < ub); commit
    for i: ... as without the option

  - The contract with the wait: `_wait_point` puts it after the last ring load in the
    body's leading run of pure ops, ring allocations and acquires, L2 prefetches and
    ring loads of W; a load of any other array ends the run.  So the only memory read
    before the wait is of W, and W is never an array the kernel writes
    (`early_arrays` refuses one, at its write: the kernel's next launch would be an
    earlier kernel that writes it).  Barriers and shared memory (the ring's
    initialization, the clipped rows it zeroes) are the block's own.
  - A slot's full barrier expects the whole slot's bytes from the acquire on, so it
    completes only once the loads after the wait land too: a consumer never sees a
    slot with W's tile and not the rest.  The predicate is the prologue's, k_p < ub,
    at both halves of the slot (an iteration past a short K run loads nothing, and its
    acquire announces nothing).
  - Warp-specialized rings: the producer branch issues the other arrays' loads of
    rounds 0 .. S - 2 (no acquire: taken at the top), then its loop from round S - 1;
    the top's copies are issued by the block's thread 0 (any thread may arrive on the
    barrier and issue TMA; the consumers' waits do not care who did).
  - Launched without programmatic stream serialization, or with its wait a no-op, the
    kernel starts after the previous one ends and the order in its body changes
    nothing; compiled without the wait (`programmatic_launch=False`, the author's own
    grid-dependency ops, sm_80), nothing moves (`overlaps`).
  - Only the first ring: a later loop's starts long after the wait, and its ring
    would take its shared memory beside the first's from the kernel's top.
"""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, scf

from tileir.dialect import TileIRError
from tileir.dialect.layout import tile_layout
from tileir.dialect.tile import promotes_sums
from tileir.dialect.verifier import kernel_functions
from tileir.dialect.ring import (IsProducerOp, MmaAsyncOp, MmaWaitOp, PrefetchL2Op,
                                 RingAcquireOp, RingAllocOp, RingCommitOp, RingFreeOp, RingLoadOp,
                                 RingReleaseOp, RingViewOp, SetMaxRegistersOp, RingWaitOp)
from tileir.backend.layout.budget import STAGE_CAP_ATTR
from tileir.backend.layout.warpgroup_split import PLAN_ATTR
from tileir.backend.layout.mma_layouts import DotOperand, Mma, Shared, smem_tile_bytes

from . import owner_pairs
from .cluster_pairs import MULTICAST_ATTR
from .copy_parts import PARTS_ATTR, asked as parts_asked, products_only
from .persistent import flatten_tile_loop, specialize_tile_loop
from .product_rotation import find_chain, fits_registers, issue_chains, rotate
from .programmatic import early_arrays, overlaps
from .pure_slices import clone_ops, defined_in, pure_slice, written_args
from .register_prefetch import prefetch_loop
from .rings import (MAX_DEFAULT_STAGES, MAX_SMALL_GRID_STAGES, PRODUCER_WARPS,
                    PRODUCER_WARPS_ATTR, async_capable, register_shares)

NUM_STAGES_ATTR = "tile.num_stages"
WARP_SPECIALIZE_ATTR = "tile.warp_specialize"
# The kernel option `l2_prefetch` (kernel.py): the first tiles into L2 before the
# grid-dependency wait (`prefetch_first`)
L2_PREFETCH_ATTR = "tile.l2_prefetch"
# A producer warpgroup computes a step's ring indices (a block table's element among
# them) before it waits for the step's slot (`producer_branch`); False: after, as before
# session 27 (bench/decode_attention.py's A/B row; read when a kernel is compiled, a
# compile cache keyed without it: TILEIR_CACHE=0 when changing it)
INDICES_FIRST = True
# The kernel option `l2_ahead` (kernel.py): a producer warpgroup's L2 lookahead, D
# iterations past each copy it issues (`producer_branch`)
L2_AHEAD_ATTR = "tile.l2_ahead"
# The kernel option `product_rotation` (kernel.py): False keeps a chain of products in
# its iteration (no rotation); absent or True: rotated where it fits (product_rotation.py)
PRODUCT_ROTATION_ATTR = "tile.product_rotation"
# The kernel option `rotation_fence` (kernel.py): the rotated product's wait gets a fence
# before it (product_rotation.py, FENCE_ATTR)
ROTATION_FENCE_ATTR = "tile.rotation_fence"
# Shared memory of one SM (what its blocks share) and registers of one SM.
SMEM_PER_SM = {"sm_90a": 228 * 1024, "sm_80": 164 * 1024}
REGS_PER_SM = 65536
# Registers a thread of a tensor-core loop needs besides its accumulators (addresses,
# descriptors, loop state): an estimate for choosing stages, not a limit.
OTHER_REGS = 48
# The blocks an SM holds by the registers ptxas gave an earlier compile of this kernel,
# where that was fewer than the estimate planned for (passes/pipeline.py, `_Fit`): the
# rings are planned again for that many.
REGISTER_BLOCKS_ATTR = "tile.register_blocks"
# What `blocks_per_sm` planned for (the most over the kernel's loops), for that check.
PLANNED_BLOCKS_ATTR = "tile.planned_blocks"


def pipeline_loops(module: ir.Module, chip: str) -> None:
    for op in kernel_functions(module):
        _Pipeliner(op, chip).run()


@dataclasses.dataclass
class _Load:
    op: ir.Operation                 # the tile.load (erased once the ring replaces it)
    array: ir.Value
    index: list[ir.Value]
    slice: list[ir.Operation]        # body ops computing the index from the counter
    multicast: bool = False          # shared by a cluster pair (backend/pipeline/cluster_pairs.py)


class _Pipeliner:
    def __init__(self, func: ir.Operation, chip: str):
        self.func = func
        self.chip = chip
        self.entry = func.regions[0].blocks[0]
        self.small_grid = "tile.grid_wish" in func.attributes and \
            ir.StringAttr(func.attributes["tile.grid_wish"]).value.startswith("narrow")
        # the stage driver's cap when an earlier plan overflowed shared memory
        # (backend/layout/budget.py): it bounds the author's num_stages too, a hint
        self.cap = ir.IntegerAttr(func.attributes[STAGE_CAP_ATTR]).value \
            if STAGE_CAP_ATTR in func.attributes else MAX_SMALL_GRID_STAGES
        self.stages_opt = min(self.cap, ir.IntegerAttr(func.attributes[NUM_STAGES_ATTR]).value) \
            if NUM_STAGES_ATTR in func.attributes else None
        self.constants: dict[tuple[int, int], ir.Value] = {}
        self._written: set[int] | None = None     # arguments some op writes (read_only_load)
        # warp specialization, on a target with wgmma and setmaxnreg: as asked, and
        # by default for a grid smaller than the GPU (a loop that waits on memory: a
        # producer that only issues copies keeps the ring full; +5-25 % on decode
        # GEMMs, bench/RESULTS.md)
        # -- unless the author asks for blocks sharing an SM (`occupancy`): a producer
        # warpgroup's block takes the SM's registers alone (setmaxnreg), and at two
        # blocks of 384 threads ptxas has 80 registers a thread (cuTile's attention
        # sample, occupancy=2 on a 64-block grid)
        occupancy = ir.IntegerAttr(func.attributes["tile.occupancy"]).value \
            if "tile.occupancy" in func.attributes else 1
        asked = ir.BoolAttr(func.attributes[WARP_SPECIALIZE_ATTR]).value \
            if WARP_SPECIALIZE_ATTR in func.attributes else self.small_grid and occupancy <= 1
        self.specialize = asked and chip.startswith("sm_90")
        # ... and by default for a loop of chained products (attention), on any grid: the
        # consumers' time goes to two products and the math between them, and a
        # producer that keeps the ring full gave +7-9 % on the H200 (bench/RESULTS.md)
        self.chains_specialize = chip.startswith("sm_90") and occupancy <= 1 and \
            WARP_SPECIALIZE_ATTR not in func.attributes
        self.specialized = False
        # rotated on sm_90a unless the author says not: rotation holds an iteration's slot
        # until its second product is done, in the next iteration, so with two stages
        # the copy of iteration j + 1 starts only while iteration j runs (MLA decode's
        # 64-row steps; bench/decode_attention.py --mla-variants times both)
        self.rotate = not (PRODUCT_ROTATION_ATTR in func.attributes and
                           not ir.BoolAttr(func.attributes[PRODUCT_ROTATION_ATTR]).value)
        self.rotation_fence = ROTATION_FENCE_ATTR in func.attributes and \
            ir.BoolAttr(func.attributes[ROTATION_FENCE_ATTR]).value
        # a slot's boxes each with a barrier, waited for by the products that read them
        # (copy_parts.py; the kernel option `copy_parts`)
        self.copy_parts = parts_asked(func, chip)
        self.held = 0                 # bytes of shared memory beside the ring (see loop)
        # L2 prefetches before the wait that tile-programmatic-launch will place (it runs
        # later in the stage): only where it will, since without programmatic launch the
        # kernel starts after the previous one ends and its ring's loads start at once
        self.l2_prefetch = chip.startswith("sm_90") and L2_PREFETCH_ATTR in func.attributes \
            and ir.BoolAttr(func.attributes[L2_PREFETCH_ATTR]).value and overlaps(func)
        self.prefetch_anchor: ir.Operation | None = None   # the prefetches go before it
        # with each copy a producer warpgroup issues, L2 prefetches of the tiles of the
        # iteration this many steps later (`producer_branch`); 0: none
        self.l2_ahead = ir.IntegerAttr(func.attributes[L2_AHEAD_ATTR]).value \
            if chip.startswith("sm_90") and L2_AHEAD_ATTR in func.attributes else 0
        # the arrays of the `early_loads` option (checked on every target: one the kernel
        # writes is refused), loaded early where tile-programmatic-launch places its wait
        # (`load_early`); the first ring of the kernel's body only (`early_done`)
        early = early_arrays(func)
        self.early = early if chip.startswith("sm_90") and overlaps(func) else set()
        self.early_done = False

    def run(self) -> None:
        loops = []

        def visit(op):
            # a persistent kernel's tile loop is not a loop of loads: its K loop is
            # (and the tile loop may be rebuilt around it: taken before any change)
            if op.name == "scf.for" and not _walks_tiles(op.operation):
                loops.append(op.operation)
            return ir.WalkResult.ADVANCE

        self.func.walk(visit)            # post-order: inner loops first
        done: set = set()                # (an alternating owners' last step: with its pairs)
        for loop in loops:
            if loop not in done:
                if owner_pairs.is_pair_loop(loop):
                    done.add(owner_pairs.pipeline(self, loop, self.candidates(loop)))
                    self.specialized = True
                    continue
                self.loop(loop)

    # -- candidates ------------------------------------------------------------------
    def async_capable(self, load: ir.Operation) -> bool:
        return async_capable(self.func, self.chip, load)

    def index_slice(self, loop: ir.Operation, values) -> list[ir.Operation] | None:
        """The body ops computing `values` from the counter and invariants (in body
        order), or None if they depend on anything else."""
        iv = loop.regions[0].blocks[0].arguments[0]
        return pure_slice(loop, values, lambda v: v == iv or not defined_in(v, loop),
                          reads=self.read_only_load)

    def read_only_load(self, op: ir.Operation) -> bool:
        """A load into registers from a kernel argument no op of the kernel writes: the
        ring may issue it for a later iteration (an index read from a table)."""
        if op.name != "tile.load" or isinstance(tile_layout(op.results[0].type), Shared):
            return False
        array = op.operands[0]
        if not isinstance(array.owner, ir.Block) or array.owner != self.func.regions[0].blocks[0]:
            return False
        if self._written is None:
            self._written = written_args(self.func)
        return array.arg_number not in self._written

    # -- the transformation -------------------------------------------------------------
    def candidates(self, loop: ir.Operation) -> list[_Load]:
        """The loads of `loop`'s body a ring can take, in body order."""
        loads = []
        for op in loop.regions[0].blocks[0].operations:
            op = op.operation
            if op.name == "tile.load" and self.async_capable(op):
                sl = self.index_slice(loop, list(op.operands)[1:])
                if sl is not None:
                    loads.append(_Load(op, op.operands[0], list(op.operands)[1:], sl,
                                       MULTICAST_ATTR in op.attributes))
        return loads

    def loop(self, loop: ir.Operation) -> None:
        body = loop.regions[0].blocks[0]
        loads = self.candidates(loop)
        if not loads:
            # no copies to shared memory: loads into registers one iteration ahead
            warps = ir.IntegerAttr(self.func.attributes["tile.num_warps"]).value \
                if "tile.num_warps" in self.func.attributes else 4
            prefetch_loop(loop, warps, self.index_slice,
                          lambda ops, lp, k, values: _clone_slice(ops, lp, k, values))
            return
        if self.cap < 2:
            return          # no depth fits: the threads copy the tiles each iteration
        tiles = [ld.op.results[0].type for ld in loads]
        # shared memory the loop's other tiles hold while the ring is live: loads the
        # ring does not take but that products read from shared memory (staged by
        # the threads: an unaligned operand)
        ringed = {ld.op for ld in loads}
        self.held = sum(smem_tile_bytes(tile_layout(op.results[0].type),
                                        op.results[0].type.shape,
                                        op.results[0].type.element_type)
                        for op in body.operations
                        if op.name == "tile.load" and op.operation not in ringed and
                        isinstance(tile_layout(op.results[0].type), Shared))
        chain = find_chain(loop, loads) if self.chip.startswith("sm_90") else None
        if chain is not None and not fits_registers(chain, 32 * self.num_warps()):
            chain = None
        # a loop of chained products gets its producer warpgroup, rotated or not
        chained = chain is not None and self.chains_specialize
        if not self.rotate or (chain is not None and self.split_not_rotated(loop)):
            chain = None
        # in parts: only where nothing but wgmma operands reads the tiles, not rotated
        # (the rotated product reads the previous slot through a view no wait covers),
        # and with a producer warpgroup: where the consumers issue the copies too, ptxas
        # serialized every wgmma (C7520, MLA decode without the producer)
        parts = self.copy_parts and chain is None and \
            not any(ld.multicast for ld in loads) and \
            all(products_only(ld.op.results[0], loop.regions[0].blocks[0]) for ld in loads)
        if (self.specialize or chained) and \
                not self.specialized and self.guards(loop) is not None:
            self.specialized = True
            return self.loop_specialized(loop, loads, tiles, chain, parts)
        if _walks_tiles(loop.parent) and loop.parent.parent == self.func:
            if self.specialize and not self.specialized:
                if specialize_tile_loop(self, loop, loads, tiles):
                    self.specialized = True
                    return
            elif not self.specialize and flatten_tile_loop(self, loop, loads, tiles):
                return
        stages = self.num_stages(loop, tiles)
        early = self.load_early(loop, loads, stages)
        self.prefetch_first(loop, loads, stages, early)
        lb, ub, step = list(loop.operands)[:3]
        loc = loop.location
        c = self.const

        with ir.InsertionPoint(loop), loc:
            ring = self.ring_alloc(stages, loads) if early is None else early[0]
            for p in range(stages - 1):                       # the prologue
                k = arith.addi(lb, arith.muli(c(p), step)) if p else lb
                pred = arith.cmpi(arith.CmpIPredicate.slt, k, ub)
                if early is None:
                    self.issue(ring, loads, c(p), c(1), pred, k, loop)
                else:            # acquired, its early arrays' tiles on their way
                    self.issue_rest(ring, loads, early[1], c(p), pred, k, loop)

        if chain is not None:
            tail = rotate(self, loop, chain, ring, loads, stages)
            with ir.InsertionPoint.after(tail), loc:
                RingFreeOp(ring)
            return
        iv = body.arguments[0]
        it, at, waits = self.consume_and_release(loop, ring, loads, stages)
        with at, loc:
            k = arith.addi(iv, arith.muli(c(stages - 1), step))
            pred = arith.cmpi(arith.CmpIPredicate.slt, k, ub)
            self.issue(ring, loads, *self.producer_slot(arith.addi(it, c(stages - 1)), stages),
                       pred, k, loop)
        with ir.InsertionPoint.after(waits), loc:          # after the products' waits
            RingFreeOp(ring)

    def prefetch_first(self, loop: ir.Operation, loads, stages: int, early=None) -> None:
        """With the kernel's `l2_prefetch` option: at the top of the kernel, L2 prefetches
        (`tile.prefetch_l2`) of the tiles the ring's first S - 1 iterations load, the
        prologue's (or the producer's first S - 1 rounds'), each under the prologue's
        predicate k < ub.  tile-programmatic-launch then puts its wait after them, so a
        kernel launched early streams its first tiles into L2 while the previous kernel
        runs instead of starting them after it ends.

        Prefetched: every load of the ring, the weights and the activations alike.  The
        kernel cannot tell which arrays the previous kernel writes, and need not.  The
        PTX ISA (cp.async.bulk.prefetch.tensor) calls the instruction a hint that *may*
        start a prefetch into L2, and treats it as a weak memory operation (a weak read):
        racing the previous kernel's writes, it could only read a stale or torn value,
        and it has no destination (no register, no shared memory, no mbarrier), so no
        value of the kernel comes from it.  The ring's loads come after the wait, which
        orders them after the previous kernel's writes, and L2 is the point of coherence
        of global memory (every SM's accesses meet there, and the prefetch fills nothing
        nearer), so they read the final values whatever the prefetch fetched.  At worst,
        a wasted fetch (of an activation tile the previous kernel just wrote, small
        beside the weights').  Left out: a loop not directly in the kernel's body
        (inside another loop or a branch, a persistent kernel's tile loop) or whose
        bounds need more than pure ops on the kernel's arguments, a load whose index
        needs more (a table read: a real load before the wait), and the tiles a cluster
        pair multicasts (their copies are split between the pair's blocks), and with
        `early` (`load_early`'s answer) the loads it issued before the wait (their tiles
        come into the ring itself)."""
        if not self.l2_prefetch or loop.parent != self.func:
            return
        lb, ub, step = list(loop.operands)[:3]
        issued = early[1] if early is not None else set()
        chosen = [ld for b, ld in enumerate(loads) if not ld.multicast and b not in issued
                  and self.hoistable(ld, loop)]
        entry = self.from_arguments(
            [lb, ub, step, *(v for ld in chosen for v in _outside(ld, loop))], loop)
        if not chosen or entry is None:
            return
        c = self.const
        with ir.InsertionPoint(self.top()), loop.location:
            mapping: dict = {}
            clone_ops(entry, mapping)
            lb, ub, step = (mapping.get(v, v) for v in (lb, ub, step))
            for p in range(stages - 1):
                k = arith.addi(lb, arith.muli(c(p), step)) if p else lb
                pred = arith.cmpi(arith.CmpIPredicate.slt, k, ub)
                for ld in chosen:
                    index = _clone_slice(ld.slice, loop, k, ld.index, mapping)
                    PrefetchL2Op(pred, ld.array, index, ld.op.results[0].type)

    def load_early(self, loop: ir.Operation, loads, stages: int,
                   parts: bool = False) -> tuple[ir.Value, set[int]] | None:
        """With the kernel's `early_loads` option (`self.early`: arrays no kernel before
        this one in the stream writes, programmatic.py `early_arrays`): at the top of
        the kernel, the ring (`tile.ring_alloc`), and for each of the prologue's
        iterations p = 0 .. S - 2 (k = lb + p * step, under the prologue's predicate
        k < ub) the acquire of fresh slot p, which announces the whole slot's bytes on
        its full barrier, and the slot's loads of those arrays.  tile-programmatic-launch
        then puts its wait after them (`_wait_point`), so the first S - 1 weight tiles
        of every resident block are in flight while the previous kernel finishes.  The
        slot's other loads (the activation rows the previous kernel wrote) stay where
        the prologue is, after the wait (`issue_rest`): the slot's barrier completes
        only once those bytes land too, so no consumer reads a slot half filled.
        Returns the ring and the buffers loaded early, or None (the ring built as
        without the option).

        Which rings: the first the kernel's body builds, in the non-specialized
        prologue or the warp-specialized producer's first rounds (its loop then starts
        at round S - 1); a later loop starts long after the wait, and a ring that
        lives from the kernel's top holds its shared memory beside every other ring's.
        Only on sm_90a where tile-programmatic-launch will place the wait (`overlaps`):
        without a wait the kernel starts after the previous one ends, and launched
        plainly (no programmatic stream serialization) the wait returns at once: the
        loads then come after the previous kernel as every load does, and the order
        in the body changes nothing.  Left as without the option: a loop not directly
        in the body, whose bounds need more than pure ops on the kernel's arguments,
        or a ring a cluster pair shares; loads whose index needs a memory read."""
        if not self.early or self.early_done or loop.parent != self.func or \
                any(ld.multicast for ld in loads):
            return None
        self.early_done = True     # (a later ring would start long after the wait)
        chosen = {b for b, ld in enumerate(loads) if isinstance(ld.array.owner, ir.Block)
                  and ld.array.arg_number in self.early and self.hoistable(ld, loop)}
        lb, ub, step = list(loop.operands)[:3]
        entry = self.from_arguments(
            [lb, ub, step, *(v for b in chosen for v in _outside(loads[b], loop))], loop)
        if not chosen or entry is None:
            return None
        c = self.const
        with ir.InsertionPoint(self.top()), loop.location:
            mapping: dict = {}
            clone_ops(entry, mapping)
            lb, ub, step = (mapping.get(v, v) for v in (lb, ub, step))
            ring = self.ring_alloc(stages, loads, parts)
            for p in range(stages - 1):
                k = arith.addi(lb, arith.muli(c(p), step)) if p else lb
                pred = arith.cmpi(arith.CmpIPredicate.slt, k, ub)
                RingAcquireOp(ring, c(p), c(1), pred)      # a fresh slot: passes at once
                for b in sorted(chosen):
                    ld = loads[b]
                    RingLoadOp(ring, c(p), pred, ld.array,
                               _clone_slice(ld.slice, loop, k, ld.index, mapping), b)
        return ring, chosen

    def issue_rest(self, ring, loads, early: set[int], slot, pred, k, loop) -> None:
        """The loads of iteration `k` into `slot` that `load_early` left (the buffers not
        in `early`), then the commit: the slot was acquired at the kernel's top."""
        for buffer, ld in enumerate(loads):
            if buffer not in early:
                RingLoadOp(ring, slot, pred, ld.array, _index_at(ld, loop, k), buffer)
        RingCommitOp(ring)

    def hoistable(self, ld: _Load, loop: ir.Operation) -> bool:
        """Whether `ld`'s index for the first iterations can be computed at the kernel's
        top: from pure ops on the kernel's arguments (no table read: a real load)."""
        return not ld.multicast and not any(op.name == "tile.load" for op in ld.slice) \
            and self.from_arguments(_outside(ld, loop), loop) is not None

    def from_arguments(self, values, loop: ir.Operation) -> list[ir.Operation] | None:
        """The ops of the kernel's body before `loop` that compute `values` from the
        kernel's arguments by pure ops, or None."""
        return pure_slice(self.func, values, lambda v: isinstance(v.owner, ir.Block)
                          and v.owner == self.entry, before=loop)

    def top(self) -> ir.Operation:
        """What the ops that run before the grid-dependency wait go before: the first op
        of the kernel's body when the first of them was placed (a later loop's, and the
        early loads after the prefetches, follow the earlier ones)."""
        if self.prefetch_anchor is None:
            self.prefetch_anchor = self.entry.operations[0].operation
        return self.prefetch_anchor

    def ring_alloc(self, stages: int, loads, parts: bool = False) -> ir.Value:
        """A ring of `stages` slots for `loads`' tiles; the buffers of loads a cluster pair
        shares are listed in its `tile.multicast`; `parts`: copied in parts
        (copy_parts.py)."""
        alloc = RingAllocOp(stages, [ld.op.results[0].type for ld in loads])
        if parts:
            alloc.operation.attributes[PARTS_ATTR] = ir.UnitAttr.get()
        shared = [b for b, ld in enumerate(loads) if ld.multicast]
        if shared:
            alloc.operation.attributes[MULTICAST_ATTR] = ir.DenseI64ArrayAttr.get(shared)
        return alloc.result

    def consume_and_release(self, loop: ir.Operation, ring: ir.Value, loads, stages: int,
                            base: ir.Value | None = None):
        """The consumer's side of a ring in `loop` whose threads also issue the copies:
        wait and views (`consume`), async products (sm_90a), each slot released once
        the product after it is issued (or at the end of its iteration), the products
        waited for (pending 0) right after the loop.  Returns the iteration number,
        where the iteration's copy goes (after the last product's wait, or the last
        view) and the last op of the loop's end (its last wait, or the loop)."""
        body = loop.regions[0].blocks[0]
        it, slot, views = self.consume(loop, ring, loads, stages, base)
        if self.chip.startswith("sm_90"):
            issue_chains(loop)
        asyncs = self.make_async(loop) if self.chip.startswith("sm_90") else []
        c = self.const
        with loop.location:
            if asyncs:
                # iteration i - 1's product is done once this iteration's wait returns
                at = ir.InsertionPoint.after(asyncs[-1][1])
                with at:
                    prev = arith.remui(arith.addi(it, c(stages - 1)), c(stages))
                    RingReleaseOp(ring, prev, arith.cmpi(arith.CmpIPredicate.ugt, it, c(0)))
            else:
                at = ir.InsertionPoint.after(views[-1].owner)
                with ir.InsertionPoint(list(body.operations)[-1]):
                    RingReleaseOp(ring, slot, c(1, 1))
            with ir.InsertionPoint.after(loop):
                last = self.wait_products(loop, asyncs)
        return it, at, last or loop

    def wait_products(self, loop: ir.Operation, asyncs) -> ir.Operation | None:
        """At the insertion point: the async products `loop` carries waited for
        (pending 0), their uses after the loop reading the waited values; returns
        the last wait."""
        done = None
        for index, _ in asyncs:
            res = loop.results[index]
            done = MmaWaitOp(res, 0).operation
            res.replace_all_uses_except(done.results[0], done)
        return done

    def producer_slot(self, g: ir.Value, stages: int) -> tuple[ir.Value, ir.Value]:
        """The slot of ring iteration `g` and the parity its acquire waits for (the
        release of iteration g - stages; a fresh slot's first wait passes)."""
        c = self.const
        return (arith.remui(g, c(stages)),
                arith.xori(arith.andi(arith.divui(g, c(stages)), c(1)), c(1)))

    def loop_specialized(self, loop: ir.Operation, loads, tiles, chain=None,
                         parts: bool = False) -> None:
        """The ring with its producer in warps of its own (warp specialization):

            ring_alloc
            if is_producer:   set_max_registers dec; for k: acquire, loads, commit
            else:             set_max_registers inc; for k: wait, views, the body,
                              release; after the loop, the rest of the kernel

        The producer runs ahead by the ring's depth on its own; the consumers never
        issue a copy.  Everything after the loop moves into the consumer branch (the
        producer warps hold no tiles).  A loop under block-uniform guards (`guards`:
        varlen attention's `if <the block has rows>`) splits there, inside them: the
        ring, its barriers' initialization and the branch are reached by every thread
        of a block that enters the guards, and by none of one that does not."""
        warps = ir.IntegerAttr(self.func.attributes["tile.num_warps"]).value \
            if "tile.num_warps" in self.func.attributes else 4
        stages = self.stages_opt or self.num_stages_for(
            tiles, 1, MAX_SMALL_GRID_STAGES if self.small_grid else MAX_DEFAULT_STAGES)
        early = self.load_early(loop, loads, stages, parts)
        self.prefetch_first(loop, loads, stages, early)
        lb, ub, step = list(loop.operands)[:3]
        c = self.const
        loc = loop.location
        # up to the loop's block's terminator: the kernel's return, or the guard's yield
        # (nothing follows the guards themselves: `guards`)
        block_ops = [op.operation for op in loop.block.operations]
        after = block_ops[block_ops.index(loop) + 1:-1]
        with ir.InsertionPoint(loop), loc:
            ring = self.ring_alloc(stages, loads, parts) if early is None else early[0]

        def rest_of_early_rounds():
            # the first S - 1 rounds were acquired at the kernel's top, their early
            # arrays' tiles issued there: the rest of their tiles, then the loop from
            # round S - 1
            for p in range(stages - 1):
                k = arith.addi(lb, arith.muli(c(p), step)) if p else lb
                pred = arith.cmpi(arith.CmpIPredicate.slt, k, ub)
                self.issue_rest(ring, loads, early[1], c(p), pred, k, loop)
            return arith.addi(lb, arith.muli(c(stages - 1), step))

        branch, done = self.producer_branch(
            loop, ring, loads, stages, ub, warps,
            prelude=None if early is None else rest_of_early_rounds)
        loop.move_before(done.operation)
        if chain is not None:         # the products rotated (product_rotation.py)
            rotate(self, loop, chain, ring, loads, stages, issue=False)
        else:
            self.consumer(loop, ring, loads, stages, done.operation)
        with loc, ir.InsertionPoint(done.operation):
            RingFreeOp(ring)
        for op in after:
            op.move_before(done.operation)
        # (the consumers only: what the producer recomputed could need a block barrier,
        # an element of a tile read by all threads, and it reads few values of `pre`)
        self.rematerialize(branch.operation, branch.else_block)
        self.func.attributes[PRODUCER_WARPS_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), PRODUCER_WARPS)

    def split_not_rotated(self, loop: ir.Operation) -> bool:
        """Whether the loop, planned for the warpgroup split (tile-split-warpgroups'
        plan on it), keeps its products unrotated; a kernel that asks for both
        (`product_rotation=True` and `warpgroup_split=True`) is refused.

        Why: rotated in a split loop, the scores' chain is issued with the rotated
        `P c` between its products, so the owner cannot run it alone; both warpgroups
        issue the scores, the owner alone the softmax.  That code is right in the
        simulator, but on the H200 (2026-11-29, MLA decode at 128 heads, contexts of
        700 and 2049, rows a step 64 and 32; bench/RESULTS.md, session 25) it wrote
        non-finite values into 10-40 % of the output, with or without early_rescale
        and fp_fusion, while the rotated loop unsplit and the split loop unrotated
        were right: a hazard of the GPU's that the simulator's in-order wgmmas do not
        show, not found yet."""
        if PLAN_ATTR not in loop.attributes:
            return False
        if PRODUCT_ROTATION_ATTR in self.func.attributes:     # asked for (True)
            raise TileIRError(
                "product_rotation=True with warpgroup_split=True: rotated products are "
                "not built for a loop the warpgroup split plans (on the H200 that code "
                "gave non-finite results); compile with product_rotation=False or "
                "warpgroup_split=False", loop.location)
        return True

    def producer_branch(self, loop: ir.Operation, ring, loads, stages: int, ub: ir.Value,
                        warps: int, step: ir.Value | None = None, prelude=None) -> tuple:
        """Before `loop`: `if is_producer` whose then-branch is the producer warpgroup
        (its registers given back with `setmaxnreg.dec` where the block has two
        consumer warpgroups or more; `prelude()`, if given, issues what comes before
        the loop and returns the index it starts from; then a loop from there to `ub`
        by `step` (`loop`'s unless given), acquiring each step's slot and issuing
        `loads` with their indices at the producer's counter in place of `loop`'s)
        and whose else-branch takes the registers (`setmaxnreg.inc`) and ends in a
        yield, before which the caller moves the consumers' code.  Returns (the if,
        that yield).

        The producer computes a step's indices (a block table's element read among
        them, once for all the step's tiles) before it waits for the step's slot.
        With the kernel's `l2_ahead` = D, before that wait it also issues L2
        prefetches (`tile.prefetch_l2`) of the tiles step k + D * step will copy, where
        k + D * step < ub: a tile that misses L2 (a page of a paged cache, scattered in
        memory, that no other block has read) is on its way from DRAM D steps before
        the ring's slot is free for it, at no cost in shared memory (a tile whose index
        does not move with the counter is in L2 after its first copy and is not
        prefetched).  The index of step k + D * step is computed as the copy's, at k
        itself where k + D * step is past the loop (the prefetch is then off, and
        nothing past the table's row is read)."""
        lb = loop.operands[0]
        step = loop.operands[2] if step is None else step
        c = self.const
        with ir.InsertionPoint(loop), loop.location:
            branch = scf.IfOp(IsProducerOp().result, [], has_else=True)
        shuffle = warps >= 8          # registers move between warpgroups
        with ir.InsertionPoint(branch.then_block), loop.location:
            if shuffle:
                SetMaxRegistersOp(register_shares(warps)[0], "dec")
            start = prelude() if prelude is not None else lb
            producer = scf.ForOp(start, ub, step, [])
            with ir.InsertionPoint(producer.body):
                k = producer.induction_variable
                it = arith.divui(arith.subi(k, lb), step)
                # the step's indices (a block table's element among them) before the
                # wait for its slot, so a table read's latency passes during that wait
                # and the copy issues as soon as the slot is free
                indices = _indices_at(loads, loop, k) if INDICES_FIRST else None
                moving = [ld for ld in loads if _moves(ld, loop)]
                if self.l2_ahead and moving:
                    ahead = arith.addi(k, arith.muli(c(self.l2_ahead), step))
                    pred = arith.cmpi(arith.CmpIPredicate.slt, ahead, ub)
                    for ld, index in zip(moving, _indices_at(
                            moving, loop, arith.select(pred, ahead, k))):
                        PrefetchL2Op(pred, ld.array, index, ld.op.results[0].type)
                self.issue(ring, loads, *self.producer_slot(it, stages), c(1, 1), k, loop,
                           indices=indices)
                scf.YieldOp([])
            if any(ld.multicast for ld in loads):
                # a cluster pair's ring closes with a cluster barrier of every thread
                # of both blocks (rules/ring.py): the producer warps meet the
                # consumers' there, after their last copy, instead of exiting
                RingFreeOp(ring)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block), loop.location:
            if shuffle:
                # what the producer warpgroup gives back, shared by the consumers
                SetMaxRegistersOp(register_shares(warps)[1], "inc")
            done = scf.YieldOp([])
        return branch, done

    def rematerialize(self, branch: ir.Operation, block: ir.Block) -> None:
        """Recomputes in `block` (the consumers' branch of the warp-specialized `branch`,
        after its register change) what it reads of the tiles and loaded values made
        before the branch, where pure ops make them from the kernel's arguments, block
        indices and read-only loads (`recomputable`): varlen attention's iotas (the
        rows and columns it masks) and cu_seqlens bounds.  The originals nothing else
        reads are erased.

        Why: ptxas keeps a value live across `setmaxnreg` within the producer's few
        registers (`register_shares`), and spills what does not fit there (~100 bytes on
        varlen attention, reloaded each iteration); a recomputed one is born after the
        register change.
        Scalars of pure arithmetic on the arguments are left (ptxas recomputes them
        from the parameter bank), and so are the originals' other readers: left in
        place, LLVM would merge the copies back into them."""
        slices: dict = {}
        used: list[ir.Value] = []

        def visit(o):
            for v in o.operands:
                if not defined_in(v, branch) and v not in used:
                    used.append(v)
            return ir.WalkResult.ADVANCE

        for op in block.operations:
            op.operation.walk(visit)
        order: list[ir.Operation] = []
        wanted = []
        for v in used:
            ops = self.recomputable(v, slices)
            if ops and (isinstance(v.type, ir.RankedTensorType) or
                        any(op.name == "tile.load" for op in ops)):
                wanted.append(v)
                order += [op for op in ops if op not in order]
        if not wanted:
            return
        position = {op: k for k, op in enumerate(_ops_in_order(self.func))}
        order.sort(key=position.__getitem__)
        first = [o.operation for o in block.operations][0]
        at = ir.InsertionPoint.after(first) if first.name == "tile.set_max_registers" \
            else ir.InsertionPoint(first)
        mapping: dict = {}
        with at:
            clone_ops(order, mapping)
        for v in wanted:
            for use in list(v.uses):
                if _inside(use.owner, block):
                    use.owner.operands[use.operand_number] = mapping[v]
        for op in reversed(order):
            if all(not list(r.uses) for r in op.results):
                op.erase()

    def recomputable(self, v: ir.Value, memo: dict) -> list[ir.Operation] | None:
        """The ops (constants aside) that compute `v` from the kernel's arguments by pure
        ops and loads from arrays no op of the kernel writes (`read_only_load`), in no
        particular order; None if it needs anything else (a carried value, an op with
        effects or regions).  `memo` maps ops already asked about to their answer."""
        from tileir.passes import effects       # (passes import the backend: not at load)
        owner = v.owner
        if isinstance(owner, ir.Block):
            return [] if owner == self.entry else None
        op = owner.operation if hasattr(owner, "operation") else owner
        if op.name == "arith.constant":
            return []
        if op not in memo:
            memo[op] = None                     # (no cycles in SSA: a guard only)
            if len(op.regions) or not (effects.Effects().of(op) == effects.Effect.PURE or
                                       self.read_only_load(op)):
                return None
            out = [op]
            for x in op.operands:
                ops = self.recomputable(x, memo)
                if ops is None:
                    return None
                out += [o for o in ops if o not in out]
            memo[op] = out
        return memo[op]

    def guards(self, loop: ir.Operation) -> list[ir.Operation] | None:
        """The `scf.if`s between `loop` and the kernel's body, innermost first (none for a
        loop at the top level), when the loop may take a producer warpgroup there;
        else None.  Each must

          - have no results and nothing after it in its block but the terminator (the
            kernel's return, or an enclosing guard's yield): what runs after the loop
            moves into the consumer branch, and the producer warps, whose registers
            went to the consumers, must reach nothing after their branch but the end;
          - branch on a block-uniform condition (`uniform`): the producer and consumer
            warps evaluate it each, and a block barrier inside (the ring's
            initialization, the exchanges before the loop) waits for all of them.

        A loop inside another loop, or under a guard that fails these, keeps its copies
        in the consumers' hands (the ring without a producer)."""
        out = []
        op = loop
        while op.parent != self.func:
            guard = op.parent
            guard = guard.operation if guard is not None else None
            if guard is None or guard.name != "scf.if" or len(guard.results) or \
                    not self.uniform(guard.operands[0]):
                return None
            ops = [o.operation for o in guard.block.operations]
            if ops.index(guard) != len(ops) - 2:        # only the terminator after it
                return None
            out.append(guard)
            op = guard
        return out

    def uniform(self, v: ir.Value) -> bool:
        """Whether every thread of a block computes the same `v`: it is made by pure ops
        from the kernel's arguments, block indices, constants and loads from arrays no
        op of the kernel writes (`recomputable`: cu_seqlens).  No thread index is such
        an op (tile ops compute per block).  A load from an array the kernel writes
        may see another block's store between two of its threads' reads, and a value
        an enclosing loop carries is not considered."""
        return self.recomputable(v, {}) is not None

    def consumer(self, loop: ir.Operation, ring: ir.Value, loads, stages: int,
                 waits_before: ir.Operation | None, base: ir.Value | None = None) -> None:
        """The consumers' side of a warp-specialized ring in `loop`: wait and views
        (`consume`, iterations counted from `base`), async products, each slot released
        once the product after it is issued (or at the end of its iteration), and the
        products waited for (pending 0) before `waits_before`, or right after the loop."""
        body = loop.regions[0].blocks[0]
        it, slot, _ = self.consume(loop, ring, loads, stages, base)
        issue_chains(loop)
        asyncs = self.make_async(loop)
        c = self.const
        with loop.location:
            if asyncs:
                with ir.InsertionPoint.after(asyncs[-1][1]):
                    prev = arith.remui(arith.addi(it, c(stages - 1)), c(stages))
                    RingReleaseOp(ring, prev, arith.cmpi(arith.CmpIPredicate.ugt, it, c(0)))
            else:
                with ir.InsertionPoint(list(body.operations)[-1]):
                    RingReleaseOp(ring, slot, c(1, 1))
            at = ir.InsertionPoint(waits_before) if waits_before is not None \
                else ir.InsertionPoint.after(loop)
            with at:
                self.wait_products(loop, asyncs)

    def num_warps(self) -> int:
        return ir.IntegerAttr(self.func.attributes["tile.num_warps"]).value \
            if "tile.num_warps" in self.func.attributes else 4

    def const(self, value: int, width: int = 32) -> ir.Value:
        """An integer constant at the top of the kernel, one per value and width."""
        key = (value, width)
        if key not in self.constants:
            t = ir.IntegerType.get_signless(width)
            with ir.InsertionPoint.at_block_begin(self.entry), self.func.location:
                self.constants[key] = arith.ConstantOp(t, value).result
        return self.constants[key]

    def issue(self, ring, loads, slot, parity, pred, k, loop, outer=None, alt=None,
              indices=None) -> None:
        """Acquire `slot`, copy the tiles of iteration `k` into it, commit.  `outer` maps
        values of an enclosing loop's body to their copies where this is issued.
        `alt = (cond, k2, outer2)`: where `cond` holds, the tiles of iteration `k2`
        with `outer2`'s values instead (another tile's, in a persistent kernel).
        `indices`: each load's index, computed by the caller (before the acquire)."""
        RingAcquireOp(ring, slot, parity, pred)
        for buffer, ld in enumerate(loads):
            index = indices[buffer] if indices is not None else \
                _index_at(ld, loop, k, outer, alt)
            RingLoadOp(ring, slot, pred, ld.array, index, buffer)
        RingCommitOp(ring)

    def prefetch(self, loads, tiles, pred, k, loop, outer=None, alt=None) -> None:
        """L2 prefetches (`tile.prefetch_l2`, where `pred`) of the tiles (of types
        `tiles`) that `issue` would copy for iteration `k` (the same `outer` and `alt`);
        a multicast tile whole, by both blocks of its pair (the second finds it in
        flight)."""
        for ld, tile in zip(loads, tiles):
            PrefetchL2Op(pred, ld.array, _index_at(ld, loop, k, outer, alt), tile)

    def make_async(self, loop: ir.Operation) -> list[tuple[int, ir.Operation]]:
        """Turns each wgmma accumulation the loop carries into mma_async + mma_wait(1);
        returns (iter-arg index, wait op) for each."""
        body = loop.regions[0].blocks[0]
        yield_op = list(body.operations)[-1]
        out = []
        for op in list(body.operations):
            op = op.operation
            if op.name != "tile.mma" or not isinstance(tile_layout(op.results[0].type), Mma) \
                    or tile_layout(op.results[0].type).version != 3 or promotes_sums(op):
                continue            # (fp8 sums into f32 wait for each chunk: rules/mma.py)
            acc, res = op.operands[2], op.results[0]
            uses = list(res.uses)
            if not (isinstance(acc.owner, ir.Block) and acc.owner == body
                    and acc.arg_number > 0 and len(uses) == 1
                    and uses[0].owner == yield_op
                    and uses[0].operand_number == acc.arg_number - 1):
                continue
            if _registers_made_in(op.operands[0], loop):
                # A in registers, made anew each iteration: the next iteration would
                # overwrite them while this product is still in flight (pending 1
                # does not wait for it), and wgmma reads its A registers until it
                # completes.  The product waits for itself (tile.mma) instead.
                continue
            if any(_staged_in(v, loop) for v in op.operands[:2]):
                # an operand computed in registers and written to shared memory each
                # iteration (a GEMV's normed activation rows as B): the next
                # iteration's write would land while this product still reads it
                continue
            with ir.InsertionPoint(op), op.location:
                started = MmaAsyncOp(op.operands[0], op.operands[1], acc)
                waited = MmaWaitOp(started.result, 1)
            res.replace_all_uses_with(waited.results[0])
            op.erase()
            out.append((acc.arg_number - 1, waited.operation))
        return out

    def consume(self, loop: ir.Operation, ring: ir.Value, loads, stages: int,
                base: ir.Value | None = None):
        """The consumer's side at the top of `loop`'s body: wait for this iteration's
        slot, then read its views where the loads were.  Returns the iteration number
        (counted from `base`: the iterations of earlier runs of the loop), the slot
        and the views."""
        body = loop.regions[0].blocks[0]
        lb, step = loop.operands[0], loop.operands[2]
        c = self.const
        with ir.InsertionPoint(list(body.operations)[0]), loop.location:
            it = arith.divui(arith.subi(body.arguments[0], lb), step)   # the iteration
            if base is not None:
                it = arith.addi(base, it)
            slot = arith.remui(it, c(stages))
            parity = arith.andi(arith.divui(it, c(stages)), c(1))
            wait = RingWaitOp(ring, slot, parity)
            if PARTS_ATTR in getattr(ring.owner, "operation", ring.owner).attributes and \
                    all(products_only(ld.op.results[0], body) for ld in loads):
                # the views' products wait for the boxes they read (copy_parts.py)
                wait.operation.attributes[PARTS_ATTR] = ir.UnitAttr.get()
            views = [RingViewOp(ring, slot, b).result for b in range(len(loads))]
        for ld, tile in zip(loads, views):
            ld.op.results[0].replace_all_uses_with(tile)
            ld.op.erase()
        return it, slot, views

    def num_stages(self, loop: ir.Operation, tiles) -> int:
        """The kernel's `num_stages`; else as many stages as fit the shared memory of
        one block, where a block is what shares an SM with one more when registers
        allow two (so one block's epilogue overlaps the other's loop) or the
        kernel's `occupancy` says how many share it; 2 to 4."""
        if self.stages_opt is not None:
            return self.stages_opt
        if self.small_grid:
            return self.num_stages_for(tiles, 1, MAX_SMALL_GRID_STAGES)
        return self.num_stages_for(tiles, self.blocks_per_sm(loop))

    def num_stages_for(self, tiles, blocks: int, most: int = MAX_DEFAULT_STAGES) -> int:
        per_stage = 0
        for t in tiles:
            per_stage += smem_tile_bytes(tile_layout(t), t.shape, t.element_type)
        chip = "sm_90a" if self.chip.startswith("sm_90") else "sm_80"
        budget = SMEM_PER_SM[chip] // blocks - 1024 - self.held
        return max(2, min(most, self.cap, budget // max(1, per_stage)))

    def blocks_per_sm(self, loop: ir.Operation) -> int:
        """The blocks that share an SM, for the rings' depth: the kernel's `occupancy`;
        else two where the accumulators leave registers for two (an estimate:
        accumulators + OTHER_REGS a thread), else one; at most what ptxas allowed an
        earlier compile (REGISTER_BLOCKS_ATTR).  Records what it planned
        (PLANNED_BLOCKS_ATTR) for the stage driver to check against ptxas."""
        attrs = self.func.attributes
        if "tile.occupancy" in attrs:
            return max(1, ir.IntegerAttr(attrs["tile.occupancy"]).value)
        warps = ir.IntegerAttr(attrs["tile.num_warps"]).value \
            if "tile.num_warps" in attrs else 4
        threads = 32 * warps
        acc = 0
        for op in loop.regions[0].blocks[0].operations:
            op = op.operation
            if op.name == "tile.mma":
                n = 1
                for d in op.results[0].type.shape:
                    n *= d
                acc += n // threads
        regs = acc + OTHER_REGS
        blocks = max(1, min(2, REGS_PER_SM // (regs * threads)))
        if REGISTER_BLOCKS_ATTR in attrs:    # what ptxas allowed an earlier plan
            blocks = max(1, min(blocks, ir.IntegerAttr(attrs[REGISTER_BLOCKS_ATTR]).value))
        planned = ir.IntegerAttr(attrs[PLANNED_BLOCKS_ATTR]).value \
            if PLANNED_BLOCKS_ATTR in attrs else 0
        attrs[PLANNED_BLOCKS_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32),
                                                        max(planned, blocks))
        return blocks


def _walks_tiles(op: ir.Operation) -> bool:
    """Whether `op` is a persistent kernel's tile loop (backend/pipeline/persistent.py)."""
    return op.name == "scf.for" and "tile.persistent_loop" in op.attributes


def _outside(ld: _Load, loop: ir.Operation) -> list[ir.Value]:
    """The values of the kernel's body (defined outside `loop`) that load `ld`'s index is
    computed from, the loop counter aside."""
    iv = loop.regions[0].blocks[0].arguments[0]
    used = [v for op in ld.slice for v in op.operands] + list(ld.index)
    return [v for v in used if v != iv and not defined_in(v, loop)]


def _moves(ld: _Load, loop: ir.Operation) -> bool:
    """Whether load `ld`'s index changes with `loop`'s counter (its slice reads it)."""
    iv = loop.regions[0].blocks[0].arguments[0]
    return any(v == iv for v in ld.index) or \
        any(v == iv for op in ld.slice for v in op.operands)


def _indices_at(loads: list[_Load], loop: ir.Operation, k: ir.Value) -> list[list[ir.Value]]:
    """Each load's index at iteration `k`, the loads' slices cloned together in the
    body's order, so an op two of them share (the block table's read of a page whose
    boxes are two loads) is cloned, and executed, once."""
    ops: list[ir.Operation] = []
    for op in loop.regions[0].blocks[0].operations:
        if any(op.operation == x for ld in loads for x in ld.slice):
            ops.append(op.operation)
    values = _clone_slice(ops, loop, k, [v for ld in loads for v in ld.index])
    out, at = [], 0
    for ld in loads:
        out.append(values[at:at + len(ld.index)])
        at += len(ld.index)
    return out


def _clone_slice(ops: list[ir.Operation], loop: ir.Operation, k: ir.Value,
                 values: list[ir.Value], outer: dict | None = None) -> list[ir.Value]:
    """Clones `ops` at the insertion point with the loop counter replaced by `k` (and
    the values `outer` maps by theirs); returns what `values` become."""
    iv = loop.regions[0].blocks[0].arguments[0]
    mapping = dict(outer or {})
    mapping[iv] = k
    clone_ops(ops, mapping)
    return [mapping.get(v, v) for v in values]


def _index_at(ld, loop, k, outer=None, alt=None) -> list[ir.Value]:
    """The index of load `ld` at iteration `k` (its slice cloned with `outer`'s values);
    `alt = (cond, k2, outer2)`: where `cond` holds, the index at `k2` with `outer2`'s."""
    index = _clone_slice(ld.slice, loop, k, ld.index, outer)
    if alt is None:
        return index
    cond, k2, outer2 = alt
    other = _clone_slice(ld.slice, loop, k2, ld.index, outer2)
    return [arith.select(cond, b, a) if a != b else a for a, b in zip(index, other)]


def _ops_in_order(func: ir.Operation) -> list[ir.Operation]:
    """`func`'s ops, nested ones included, in program order (pre-order)."""
    out = []

    def visit(op):
        out.append(op.operation)
        return ir.WalkResult.ADVANCE
    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def _inside(op, block: ir.Block) -> bool:
    """Whether `op` is in `block` or nested in one of its ops."""
    op = op.operation if hasattr(op, "operation") else op
    while op is not None and op.name != "func.func":
        if op.block == block:
            return True
        op = op.parent
        op = op.operation if op is not None and hasattr(op, "operation") else op
    return False


def _staged_in(v: ir.Value, loop: ir.Operation) -> bool:
    """Whether mma operand `v` is a shared tile that `loop`'s body writes from registers
    (`tile.convert_layout` into `#tile.shared`, one buffer for every iteration) rather
    than a ring's view."""
    owner = v.owner
    return (not isinstance(owner, ir.Block) and owner.name == "tile.convert_layout"
            and isinstance(tile_layout(v.type), Shared) and defined_in(v, loop))


def _registers_made_in(a: ir.Value, loop: ir.Operation) -> bool:
    """Whether mma operand `a` is a register tile (`#tile.mma_operand`) that `loop`'s
    body computes (rather than a shared-memory view, or registers held across it)."""
    return isinstance(tile_layout(a.type), DotOperand) and defined_in(a, loop)
