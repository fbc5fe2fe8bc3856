"""State of one kernel's lowering to per-thread code (stage `gpu`).

A tile value becomes a `Frag`: its layout in linear form and one SSA scalar per
register the thread holds.  Scalars stay scalars.  `LoweringContext` owns the
value map, the kernel's ABI values, the thread coordinates of each layout and
shared memory.
"""

from __future__ import annotations

import dataclasses
from mlir import ir
from mlir.dialects import arith, gpu, llvm, memref, nvvm, scf

from tileir.dialect import TileIRError
from tileir.dialect.types import by_type
from tileir.backend.layout import layouts as L
from tileir.backend.layout.mma_layouts import Shared
from tileir.dialect.layout import tile_layout

I32 = lambda: ir.IntegerType.get_signless(32)   # noqa: E731
I64 = lambda: ir.IntegerType.get_signless(64)   # noqa: E731


@dataclasses.dataclass
class Frag:
    """A distributed tile: `regs[r]` is this thread's element at `lin.reg_coord(r)` + thread part."""

    lin: L.Linear
    elem: ir.Type
    regs: list[ir.Value]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.lin.shape


@dataclasses.dataclass
class ArrayABI:
    ptr: ir.Value              # !llvm.ptr<1>
    dims: list[ir.Value]       # i32
    strides: list[ir.Value]    # i64, in elements
    elem: ir.Type              # signless element type of tiles
    aligned: bool
    large: bool = False        # many times the L2 cache (specialization.ArrayParam)


class LoweringContext:
    def __init__(self, num_warps: int, block_args_entry: ir.Block,
                 cache_hints: bool | None = None, chip: str = "sm_90a",
                 producer_warps: int = 0):
        # `num_warps` hold the tiles (layouts are over them); a warp-specialized
        # kernel has `producer_warps` more, after them, that only issue copies
        self.num_warps = num_warps
        self.producer_warps = producer_warps
        self.role = None          # "producer" / "consumer" inside a specialized branch
        self.cluster_dims: list[int] | None = None   # the kernel's cluster shape, if any
        # tile-split-warpgroups' owned ops run by the owner warpgroup alone
        # (owner_runs.py): whether the kernel asks, whether a run is being lowered, and
        # the values only one warpgroup's threads hold (undefined in the other): value ->
        # that warpgroup (0, or 1 where owners alternate)
        self.owner_exec = False
        self.owner_run = False
        self.owner_only: dict = {}
        self.alternating = False  # owners 0 and 1 in turn (`alternate_owners`)
        self.handoffs = False     # a hand-off left the owner ahead (owner_runs.py)
        # the kernel option `mbarrier_handoffs`: the hand-offs' mbarriers (empty, full
        # offsets), how many hand-offs were lowered, and how many in each loop
        self.owner_mbarriers = False
        self.handoff_mbarriers: tuple[int, int] | None = None
        self.handoff_count = 0
        self.handoff_loops: dict = {}
        self.owner_rescale = False  # O rescaled in the owner's run (`early_rescale`)
        self.owner_skew = False     # the owner may run ahead (`skewed_handoffs`)
        # `merged_handoffs`: a group of hand-offs shares one wait and one signal; the
        # next hand-off is not the group's last (handoff_defer), and the end of the
        # bytes the group's earlier ones wrote while it is open (owner_runs.py)
        self.owner_merge = False
        self.handoff_defer = False
        self.handoff_open: int | None = None
        self.chip = chip
        # (array argument index, box, swizzle) -> the kernel's CUtensorMap parameter
        self.tensor_maps: dict[tuple, ir.Value] = {}
        # L2 policy on 16-byte loads: True/False for all, None for large arrays only
        self.cache_hints = cache_hints
        self._l2_policy = None
        self.values: dict[ir.Value, object] = {}
        # a register A operand of each `tile.mma_async` in flight, by its result: the
        # wgmma reads it until waited for, so the wait keeps it alive (rules/mma.py)
        self.in_flight_a: dict[ir.Value, object] = {}
        # results of wgmma.mma_async not waited for yet: a product accumulating onto one
        # needs no fence (the same shape's accumulator is ordered by the hardware)
        self.in_flight_acc: set = set()
        # ring views copied in parts whose boxes the products wait for, by the view's
        # shared-memory base (rules/ring.py `Parts`, rules/mma.py)
        self.smem_parts: dict[ir.Value, object] = {}
        self.arrays: dict[ir.Value, ArrayABI] = {}
        self.grid_size: list[ir.Value] = []      # a persistent kernel's grid (i32 x 3)
        # a stream-K kernel's workspace (`!llvm.ptr<1>`) and the bytes of one block's slot
        self.workspace: ir.Value | None = None
        self.workspace_bytes = 0
        self.entry = block_args_entry
        self.smem_bytes = 0       # the high-water mark: the kernel's dynamic shared memory
        self.smem_top = 0         # bytes held by live buffers (rings, shared tiles)
        self.smem_uses = 0        # shared-memory exchanges emitted so far
        self.fresh_holds = 0      # buffers held to the kernel's end (hold_fresh_smem)
        # (block, start, end): the bytes the last exchange's threads read after its
        # barrier, when that exchange was the last use of the scratch area
        self.last_reads: tuple[ir.Block, int, int] | None = None
        self.loop_depth = 0       # > 0 while lowering a loop body
        self.stores_seen = False  # a global store was lowered (or a loop may repeat one)
        # the arrays (ids of their ArrayABI) a tile load has read so far: a store to one
        # of them from a layout that holds an element in several threads waits for the
        # block first (`memory.lower_store`)
        self.loaded_arrays: set[int] = set()
        # the i32 the kernel's top-level `griddepcontrol.wait` yields: pure policy loads
        # take it as an operand, so LLVM cannot hoist them above the wait
        self.wait_token: ir.Value | None = None
        # a tile.cluster_gather's closing cluster barrier was arrived at, not waited on
        self.cluster_wait_pending = False
        # a tile.print line whose text continues in the next tile.print: (pieces, args)
        self.print_pending: tuple[list, list] | None = None
        # the kernel stores by TMA (backend/gpu/tma_store.py): writers of shared memory
        # first wait until those stores have read their buffers
        self.bulk_stores = False
        self.bulk_by_warps = False  # lane 0 of every warp issues TMA stores (tma_store)
        self.tma_store = True     # the kernel option: accumulators may be stored by TMA
        self.globals_before: ir.Operation | None = None   # where constant tables go
        self._tables = 0
        self._thread: dict[tuple, list[ir.Value]] = {}
        self._tid = self._lane = self._warp = None
        self._smem_base = None
        self._smem_ptr = None
        self._epilogue_barriers: int | None = None

    # -- value map -----------------------------------------------------------------
    def get(self, v: ir.Value):
        try:
            return self.values[v]
        except KeyError:
            raise TileIRError(f"internal error: value {v.get_name()} used before its lowering",
                              ir.Location.current) from None

    def frag(self, v: ir.Value) -> Frag:
        f = self.get(v)
        if not isinstance(f, Frag):
            if isinstance(tile_layout(v.type), Shared):
                # IR given at a later stage (tile-opt) can read a shared-memory tile
                # where an op needs registers; the layout stage puts a
                # tile.convert_layout before such a use
                raise TileIRError(f"this op reads a tile in registers, but the tile's "
                                  f"layout keeps it in shared memory ({v.type}): "
                                  f"convert it to a register layout first "
                                  f"(tile.convert_layout)", ir.Location.current)
            raise TileIRError("internal error: expected a tile", ir.Location.current)
        return f

    def tensor_map(self, array: ir.Value, box: tuple[int, ...], swizzle: int) -> ir.Value:
        """The CUtensorMap parameter (`!llvm.ptr` to the by-value parameter) for TMA
        copies of `box` from kernel array argument `array`."""
        key = (array.arg_number, tuple(box), swizzle)
        if key not in self.tensor_maps:
            raise TileIRError(f"internal error: no tensor map for {key}", ir.Location.current)
        return self.tensor_maps[key]

    def constant_table(self, words) -> ir.Value:
        """A `!llvm.ptr<1>` to a constant array of `words` (a 1-d NumPy integer array)
        in global memory: an `llvm.mlir.global` of the kernel's gpu.module."""
        if self.globals_before is None:
            raise TileIRError("internal error: no module for constant tables",
                              ir.Location.current)
        name = f"__tile_table_{self._tables}"
        self._tables += 1
        word = ir.IntegerType.get_signless(words.dtype.itemsize * 8)
        value = ir.DenseElementsAttr.get(words, type=word)
        with ir.InsertionPoint(self.globals_before):
            llvm.GlobalOp(ir.Type.parse(f"!llvm.array<{len(words)} x {word}>"), name,
                          ir.Attribute.parse("#llvm.linkage<internal>"), constant=True,
                          value=value, addr_space=1)
        with ir.InsertionPoint.at_block_begin(self.entry):
            return llvm.AddressOfOp(ir.Type.parse("!llvm.ptr<1>"), name).result

    # -- constants -----------------------------------------------------------------
    @staticmethod
    def const(value: int, t: ir.Type | None = None) -> ir.Value:
        t = t or I32()
        # The op built directly: the same `arith.constant` as `arith.ConstantOp` builds,
        # in half the time (~4.5 us against ~9; a lowering builds hundreds of them)
        attr = ir.IntegerAttr.get(t, value) if isinstance(t, ir.IntegerType) else \
            ir.FloatAttr.get(t, float(value))
        return ir.Operation.create("arith.constant", results=[t],
                                   attributes={"value": attr}).result

    # -- thread coordinates ----------------------------------------------------------
    def thread_ids(self) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(tid, lane, warp) as i32, computed once at the kernel entry."""
        if self._tid is None:
            with ir.InsertionPoint.at_block_begin(self.entry):
                tid = gpu.thread_id(gpu.Dimension.x,
                                    upper_bound=32 * (self.num_warps + self.producer_warps))
                self._tid = arith.index_castui(I32(), tid)
                self._lane = arith.andi(self._tid, self.const(31))
                self._warp = arith.shrui(self._tid, self.const(5))
                self._first_ops = self._warp.owner
        return self._tid, self._lane, self._warp

    def thread_coords(self, lin: L.Linear) -> list[ir.Value]:
        """Per dim, the i32 coordinate offset this thread's lane and warp contribute."""
        key = (lin.shape, lin.lanes, lin.warps)
        if key in self._thread:
            return self._thread[key]
        _, lane, warp = self.thread_ids()
        ip = ir.InsertionPoint.after(self._first_ops)
        coords = []
        with ip:
            for d in range(len(lin.shape)):
                terms = [(lane, i, b[d]) for i, b in enumerate(lin.lanes) if b[d]] + \
                        [(warp, i, b[d]) for i, b in enumerate(lin.warps) if b[d]]
                acc = self.const(0)
                for src, bit, value in terms:
                    # ((src >> bit) & 1) * value, with value a power of two: a shift
                    b = arith.andi(arith.shrui(src, self.const(bit)), self.const(1))
                    shift = value.bit_length() - 1
                    acc = arith.ori(acc, arith.shli(b, self.const(shift)))
                coords.append(acc)
            self._first_ops = coords[-1].owner if coords else self._first_ops
        self._thread[key] = coords
        return coords

    # -- cache policies ----------------------------------------------------------------
    def l2_evict_last(self) -> ir.Value:
        """An L2 cache policy (`createpolicy`, sm_80+): lines stay behind evict_normal
        ones.  Made once, at the kernel entry."""
        if self._l2_policy is None:
            with ir.InsertionPoint.at_block_begin(self.entry):
                self._l2_policy = llvm.inline_asm(
                    I64(), [], "createpolicy.fractional.L2::evict_last.b64 $0, 1.0;", "=l")
        return self._l2_policy

    # -- shared memory -----------------------------------------------------------------
    def barrier(self) -> None:
        """A barrier of the threads that run this code: the block, or in the consumer
        branch of a warp-specialized kernel its consumer warps alone (named barrier 1:
        the producer warps never reach it)."""
        if self.owner_run:
            raise TileIRError("internal error: a barrier of both consumer warpgroups in ops "
                              "one warpgroup runs alone (backend/gpu/owner_runs.py)",
                              ir.Location.current)
        if self.role == "consumer":
            nvvm.barrier(None, barrier_id=self.const(1),
                         number_of_threads=self.const(32 * self.num_warps))
        elif self.role == "producer":
            raise TileIRError("internal error: a block barrier in a producer branch",
                              ir.Location.current)
        else:
            gpu.barrier()

    def epilogue_barriers(self, count: int) -> int:
        """The shared offset of the gated TMA-store epilogue's four mbarriers (full 0/1:
        `count` arrivals, the warps'; free 0/1: one, the issuer's), made and initialized
        once, at the kernel's entry, before a block barrier (backend/gpu/tma_store.py)."""
        if self._epilogue_barriers is None:
            # above everything lowered so far (initialized at the entry: no buffer of
            # the kernel may ever have used these bytes), held to the kernel's end
            off, _ = self.hold_fresh_smem(32, ir.IntegerType.get_signless(8))
            self.thread_ids()
            with ir.InsertionPoint.after(self._first_ops):
                tid, _, _ = self.thread_ids()
                if_op = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, tid, self.const(0)), [],
                                 has_else=False)
                with ir.InsertionPoint(if_op.then_block):
                    for k in range(4):
                        nvvm.mbarrier_init(self.smem_ptr(off + 8 * k),
                                           self.const(count if k < 2 else 1))
                    nvvm.fence_mbarrier_init()
                    scf.YieldOp([])
                done = gpu.barrier()
            self._first_ops = done.operation
            self._epilogue_barriers = off
        return self._epilogue_barriers

    def first_thread(self) -> ir.Value:
        """i1: this thread issues the block's copies (thread 0, or the first producer)."""
        tid, _, _ = self.thread_ids()
        first = 32 * self.num_warps if self.role == "producer" else 0
        return arith.cmpi(arith.CmpIPredicate.eq, tid, self.const(first))

    def smem_barrier_before(self, writes: tuple[int, int] | None = None) -> None:
        """The barrier that lets an exchange overwrite the shared buffer: needed unless
        this is the kernel's first exchange and no loop can bring it round again, or
        unless the exchange `writes` scratch bytes [start, end) apart from what the
        previous exchange reads, lowered into the same block just before it: every
        thread that writes here has passed that exchange's barrier, so every earlier
        reader of these bytes is done (LayerNorm's variance after its mean, a chunk's
        sum after its max: one barrier each instead of two)."""
        last = self.last_reads
        apart = (writes is not None and last is not None and not self.bulk_stores and
                 last[0] == ir.InsertionPoint.current.block and
                 (writes[1] <= last[1] or writes[0] >= last[2]))
        if (self.smem_uses or self.loop_depth) and not apart:
            self.wait_bulk_reads()
            self.barrier()
        self.smem_uses += 1
        self.last_reads = None

    def exchange_reads(self, start: int, end: int) -> None:
        """After an exchange's barrier: its threads now read scratch bytes [start, end)
        (offsets into the scratch area, as `smem` takes them), and nothing else touches
        the scratch area."""
        self.last_reads = (ir.InsertionPoint.current.block, start, end)

    def scratch_after_last_reads(self) -> int:
        """Where an exchange that wants to skip its first barrier places its buffers:
        past the previous exchange's reads when those start at the scratch base, else
        at the base (then `smem_barrier_before` decides by overlap)."""
        last = self.last_reads
        if last is None or last[0] != ir.InsertionPoint.current.block or last[1] != 0:
            return 0
        return (last[2] + 15) // 16 * 16

    def wait_bulk_reads(self, pending: int = 0) -> None:
        """In a kernel that stores by TMA: thread 0 (which issues the stores) waits
        until all but its `pending` youngest bulk groups have read their shared
        memory.  Placed before a barrier, it makes that memory writable for all."""
        if not self.bulk_stores:
            return
        if self.bulk_by_warps:          # bulk groups are per thread: every issuer waits
            _, lane, _ = self.thread_ids()
            issuer = arith.cmpi(arith.CmpIPredicate.eq, lane, self.const(0))
        else:
            issuer = self.first_thread()
        if_op = scf.IfOp(issuer, [], has_else=False)
        with ir.InsertionPoint(if_op.then_block):
            nvvm.cp_async_bulk_wait_group(pending, read=ir.UnitAttr.get())
            scf.YieldOp([])

    def smem(self, count: int, elem: ir.Type, offset: int = 0) -> ir.Value:
        # Upstream lowers gpu.dynamic_shared_memory to a zero-size `.shared` symbol
        # (ptxas reports "1 bytes smem"); the driver places the dynamic region right
        # after it, so the bytes from that symbol cover the `shared_bytes` we request.
        """A scratch buffer of `count` elements, `offset` bytes into the scratch area.

        Every exchange starts and ends its writes with barriers (see
        `smem_exchange`), so all exchanges start at the scratch area, right above
        the buffers live at that point (`smem_top`), and the kernel needs only the
        largest one; an exchange of several values places them side by side with
        `offset`.
        """
        offset += self.smem_top
        self._reach(offset + count * max(1, _bits(elem) // 8))
        return self._view(count, elem, offset)

    def _view(self, count: int, elem: ir.Type, offset: int) -> ir.Value:
        # registers hold fp8 elements as their bits (reg_type), and so does the buffer
        t = ir.MemRefType.get([count], reg_type(elem), memory_space=ir.Attribute.parse(
            "#gpu.address_space<workgroup>"))
        start = arith.ConstantOp(ir.IndexType.get(),
                                 ir.IntegerAttr.get(ir.IndexType.get(), offset))
        return memref.view(t, self._dynamic_smem(), start, [])

    def hold_fresh_smem(self, count: int, elem: ir.Type) -> tuple[int, ir.Value]:
        """(offset, buffer) of `count` elements in bytes no exchange of the kernel has
        touched so far (above the high-water mark), held to the kernel's end: memory
        that other blocks of a cluster read while this block moves on
        (rules/cluster.py), so no barrier of this block guards it."""
        start = (max(self.smem_top, self.smem_bytes) + 15) // 16 * 16
        self.fresh_holds += 1
        self.smem_top = start + count * max(1, _bits(elem) // 8)
        self._reach(self.smem_top)
        self.last_reads = None          # the scratch area moved: offsets mean other bytes
        return start, self._view(count, elem, start)

    def scratch(self, nbytes: int, align: int = 1) -> int:
        """The offset of `nbytes` of exchange scratch (see `smem`), reserved, aligned
        to `align` bytes."""
        start = (self.smem_top + align - 1) // align * align
        self._reach(start + nbytes)
        return start

    def _reach(self, nbytes: int) -> None:
        self.smem_bytes = max(self.smem_bytes, (nbytes + 15) // 16 * 16)

    def _dynamic_smem(self) -> ir.Value:
        if self._smem_base is None:
            with ir.InsertionPoint.at_block_begin(self.entry):
                dyn = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()],
                                        ir.IntegerType.get_signless(8),
                                        memory_space=ir.Attribute.parse(
                                            "#gpu.address_space<workgroup>"))
                self._smem_base = gpu.dynamic_shared_memory(dyn)
        return self._smem_base

    # -- buffers that outlive one exchange (rings, shared tiles) -----------------------
    def alloc_smem(self, nbytes: int, align: int = 1024) -> int:
        """Reserves `nbytes` above the live buffers; returns their offset.  The region
        starts 1024-byte aligned (the dynamic shared memory of a block without static
        shared memory starts at the bottom of its window, so offsets aligned here are
        aligned addresses: what TMA and the wgmma swizzle patterns need)."""
        start = (self.smem_top + align - 1) // align * align
        self.smem_top = start + nbytes
        self._reach(self.smem_top)
        self.last_reads = None          # the scratch area moved: offsets mean other bytes
        return start

    def release_above(self, top: int) -> None:
        """Frees every buffer allocated above `top` since it was the top: the shared
        tiles of a loop body, which no value outside the loop refers to (a loop carries
        registers only).  The next exchange reusing them starts with a barrier."""
        if self.smem_top > top:
            self.smem_top = top
            self.smem_uses = max(self.smem_uses, 1)
            self.last_reads = None

    def free_smem(self, start: int, nbytes: int) -> None:
        """Returns the region from `alloc_smem` when nothing above it is live; the next
        exchange reusing it starts with a barrier."""
        if self.smem_top == start + nbytes:
            self.smem_top = start
        self.smem_uses = max(self.smem_uses, 1)
        self.last_reads = None

    def smem_ptr(self, offset: "int | ir.Value") -> ir.Value:
        """`!llvm.ptr<3>` to byte `offset` (an int or an i32 value) of the dynamic
        shared memory."""
        if self._smem_ptr is None:
            with ir.InsertionPoint.at_block_begin(self.entry):
                base = self._dynamic_smem()
            with ir.InsertionPoint.after(base.owner):
                addr = memref.extract_aligned_pointer_as_index(base)
                self._smem_ptr = llvm.inttoptr(ir.Type.parse("!llvm.ptr<3>"),
                                               arith.index_cast(I64(), addr))
        if isinstance(offset, int):
            if offset == 0:
                return self._smem_ptr
            offset = self.const(offset)
        return llvm.GEPOp(self._smem_ptr.type, self._smem_ptr, [offset],
                          ir.DenseI32ArrayAttr.get([-2147483648]),
                          ir.TypeAttr.get(ir.IntegerType.get_signless(8)), None).result

    def smem_addr(self, offset: "int | ir.Value") -> ir.Value:
        """The i32 shared-window address of byte `offset` (what descriptors, TMA and
        mbarrier operands take)."""
        return llvm.ptrtoint(I32(), self.smem_ptr(offset))


FP8_TYPES = ("f8E4M3FN", "f8E5M2")


def is_fp8(t: ir.Type) -> bool:
    return by_type("fp8", t, lambda t: str(t) in FP8_TYPES)     # (printing a type: ~15 us)


def reg_type(elem: ir.Type) -> ir.Type:
    """The type a register holds for a tile element: fp8 values live as their bits
    (i8), since LLVM has no 8-bit float type; everything else as itself."""
    return ir.IntegerType.get_signless(8) if is_fp8(elem) else elem


def lin_of(t: ir.Type) -> L.Linear:
    """The linear layout of a tile type; a located error if the tile has no layout."""
    from tileir.dialect.layout import tile_layout
    lay = tile_layout(t) if isinstance(t, ir.RankedTensorType) else None
    if lay is None:
        raise TileIRError(f"tile of type {t} has no layout: run the 'layout' stage first",
                          ir.Location.current)
    return L.to_linear(lay, tuple(t.shape))


def _bits(t: ir.Type) -> int:
    return by_type("bits", t, _bits_of)


def _bits_of(t: ir.Type) -> int:
    if isinstance(t, ir.IntegerType):
        return t.width
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8E4M3FN": 8, "f8E5M2": 8}[str(t)]


def index(v: ir.Value) -> ir.Value:
    """An i32/i64 value as `index` (for memref accesses)."""
    return arith.index_cast(ir.IndexType.get(), v)


def same_warps(a: tuple, b: tuple) -> bool:
    """Whether two layouts' warp bases agree, the warps past the shorter list holding
    replicas (zero bases) in the longer."""
    short, long_ = sorted((a, b), key=len)
    return long_[:len(short)] == short and all(not any(w) for w in long_[len(short):])
