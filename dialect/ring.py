"""Ops of the `pipeline` stage: rings of shared-memory stages, asynchronous loads into
them, and asynchronous tensor-core products.

`tile-pipeline-loops` rewrites a loop whose loads feed shared memory into a
producer/consumer ring (docs/tensor-cores.md draws the schedule):

    %r = tile.ring_alloc {stages = S, tiles = [T0, T1, ...]}   S slots, each holding
                                                                one tile of each type
    tile.ring_acquire %r, %slot, %parity, %pred   producer: wait until the slot is free
    tile.ring_load %r, %slot, %pred, %array, %i.. {buffer = b}  async copy into it
    tile.ring_commit %r                           close this iteration's group of loads
    tile.prefetch_l2 %pred, %array, %i.. {tile = T}  a ring load's boxes into L2 only
    tile.ring_wait %r, %slot, %parity             consumer: the slot's data has landed
    %t = tile.ring_view %r, %slot {buffer = b}    the slot's tile b (a shared-memory view)
    tile.ring_release %r, %slot, %pred            consumer: done reading the slot
    tile.ring_free %r                             after the loop: the memory is reused

A slot's n-th use (n = 0, 1, ...) waits for phase parity `n % 2`; a producer's
n-th acquire of a slot waits for the release of its (n-1)-th use, parity
`(n % 2) ^ 1` (a fresh slot passes parity 1 at once).  On sm_90a a slot has a
"full" and an "empty" mbarrier and the loads are TMA copies; on sm_80 they are
cp.async copies counted by commit groups, and the consumer's wait includes the
block barrier that makes the oldest slot reusable.

`tile.mma_async` starts an mma without waiting for it; `tile.mma_wait
{pending = n}` returns its operand once at most n started products are still
running (wgmma's commit groups; synchronous mma.sync passes values through).
"""

from __future__ import annotations

from mlir import ir

from .ods import Arg, Spec, TileOpView, VerifyError
from .tile import DIALECT, ProductOp, _check_matmul_shapes, _tensor, array_info, signless

DIALECT.type("ring", "shared-memory stages of a software-pipelined loop")

MAX_STAGES = 8


def ring_type(context: ir.Context | None = None) -> ir.Type:
    return ir.Type.parse("!tile.ring", context)


def _ring_alloc_of(ring: ir.Value) -> "RingAllocOp":
    owner = ring.owner
    if isinstance(owner, ir.Block) or owner.name != "tile.ring_alloc":
        raise VerifyError("the ring operand must come from tile.ring_alloc")
    return owner.opview


def _i32(v: ir.Value, what: str) -> None:
    if v.type != ir.IntegerType.get_signless(32):
        raise VerifyError(f"{what} must be i32, got {v.type}")


def _i1(v: ir.Value, what: str) -> None:
    if v.type != ir.IntegerType.get_signless(1):
        raise VerifyError(f"{what} must be i1, got {v.type}")


@DIALECT.op
class RingAllocOp(TileOpView):
    """Shared memory for `stages` slots, each holding one tile of each of `tiles`."""

    OPERATION_NAME = "tile.ring_alloc"
    SPEC = Spec(attributes=(("stages", "int_attr"), ("tiles", "any")),
                results=(Arg("ring", "ring"),))

    def __init__(self, stages: int, tiles: list[ir.Type], *, loc=None, ip=None):
        attrs = {"stages": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), stages),
                 "tiles": ir.ArrayAttr.get([ir.TypeAttr.get(t) for t in tiles])}
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[ring_type()],
                                             attributes=attrs, loc=loc, ip=ip))

    @property
    def stages(self) -> int:
        return self.int_attr("stages")

    @property
    def tiles(self) -> list[ir.Type]:
        return [ir.TypeAttr(a).value for a in ir.ArrayAttr(self.operation.attributes["tiles"])]

    def verify(self) -> None:
        if not 2 <= self.stages <= MAX_STAGES:
            raise VerifyError(f"a ring has 2 to {MAX_STAGES} stages, got {self.stages}")
        attr = self.operation.attributes["tiles"]
        if not isinstance(attr, ir.ArrayAttr) or not len(attr) or \
                not all(isinstance(a, ir.TypeAttr) for a in ir.ArrayAttr(attr)):
            raise VerifyError(f"'tiles' must be a non-empty array of tile types, got {attr}")
        from .layout import check_layout, tile_layout
        from tileir.backend.layout.mma_layouts import Shared
        for t in self.tiles:
            if not isinstance(t, ir.RankedTensorType) or \
                    not isinstance(tile_layout(t), Shared):
                raise VerifyError(f"ring tiles live in shared memory (#tile.shared); got {t}")
            check_layout(t, "a ring tile")
        self._verify_multicast()

    def _verify_multicast(self) -> None:
        """`tile.multicast` (optional): the buffers a cluster pair shares, each a tile
        the two blocks copy half each of (backend/pipeline/cluster_pairs.split)."""
        from tileir.backend.pipeline.cluster_pairs import MULTICAST_ATTR, halves
        if MULTICAST_ATTR not in self.operation.attributes:
            return
        attr = self.operation.attributes[MULTICAST_ATTR]
        if not isinstance(attr, ir.DenseI64ArrayAttr):
            raise VerifyError(f"'{MULTICAST_ATTR}' must be an array<i64> of buffers, got {attr}")
        buffers = list(attr)
        tiles = self.tiles
        if len(set(buffers)) != len(buffers) or \
                not all(0 <= b < len(tiles) for b in buffers):
            raise VerifyError(f"'{MULTICAST_ATTR}' lists buffers {buffers}: each once, "
                              f"among the ring's {len(tiles)}")
        for b in buffers:
            if not halves(tiles[b]):
                raise VerifyError(f"buffer {b} ({tiles[b]}) cannot be multicast in two "
                                  f"halves: it needs an even number of TMA boxes, or rows "
                                  f"that split evenly on 1024-byte boundaries")


class _RingOp(TileOpView):
    """An op on the whole ring (its only operand)."""

    SPEC = Spec(operands=(Arg("ring", "ring"),))

    def __init__(self, ring, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, operands=[ring],
                                             loc=loc, ip=ip))

    def verify(self) -> None:
        _ring_alloc_of(self.operands[0])


class _SlotOp(TileOpView):
    @property
    def ring(self) -> ir.Value:
        return self.operands[0]

    @property
    def slot(self) -> ir.Value:
        return self.operands[1]

    def _check_ring(self) -> "RingAllocOp":
        _i32(self.slot, "the slot")
        return _ring_alloc_of(self.ring)


@DIALECT.op
class RingAcquireOp(_SlotOp):
    """Producer side: wait (if `pred`) until `slot` was released `parity`-wise."""

    OPERATION_NAME = "tile.ring_acquire"
    SPEC = Spec(operands=(Arg("ring", "ring"), Arg("slot", "i32"), Arg("parity", "i32"),
                          Arg("pred", "i1")))

    def __init__(self, ring, slot, parity, pred, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME,
                                             operands=[ring, slot, parity, pred],
                                             loc=loc, ip=ip))

    @property
    def parity(self) -> ir.Value:
        return self.operands[2]

    @property
    def pred(self) -> ir.Value:
        return self.operands[3]

    def verify(self) -> None:
        self._check_ring()
        _i32(self.parity, "the parity")
        _i1(self.pred, "the predicate")


@DIALECT.op
class RingLoadOp(_SlotOp):
    """Starts copying (if `pred`) the tile at tile index `index` of `array` into buffer
    `buffer` of `slot`; out-of-range elements read zero."""

    OPERATION_NAME = "tile.ring_load"
    SPEC = Spec(operands=(Arg("ring", "ring"), Arg("slot", "i32"), Arg("pred", "i1"),
                          Arg("array", "array"), Arg("index", "i32", variadic=True)),
                attributes=(("buffer", "int_attr"),))

    def __init__(self, ring, slot, pred, array, index, buffer: int, *, loc=None, ip=None):
        attrs = {"buffer": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), buffer)}
        super().__init__(ir.Operation.create(self.OPERATION_NAME,
                                             operands=[ring, slot, pred, array, *index],
                                             attributes=attrs, loc=loc, ip=ip))

    @property
    def pred(self) -> ir.Value:
        return self.operands[2]

    @property
    def array(self) -> ir.Value:
        return self.operands[3]

    @property
    def index(self) -> list[ir.Value]:
        return list(self.operands)[4:]

    @property
    def buffer(self) -> int:
        return self.int_attr("buffer")

    def tile_type(self) -> ir.RankedTensorType:
        return _ring_alloc_of(self.ring).tiles[self.buffer]

    def verify(self) -> None:
        alloc = self._check_ring()
        _i1(self.pred, "the predicate")
        tiles = alloc.tiles
        if not 0 <= self.buffer < len(tiles):
            raise VerifyError(f"buffer {self.buffer} out of range: the ring holds "
                              f"{len(tiles)} tiles per slot")
        info = array_info(self.array.type)
        if info is None:
            raise VerifyError(f"expected an array, got {self.array.type}")
        t = tiles[self.buffer]
        if not isinstance(t, ir.RankedTensorType):    # (tile.ring_alloc reports it too)
            raise VerifyError(f"buffer {self.buffer} of the ring is not a tile: {t}")
        if t.rank != info.rank or len(self.index) != info.rank:
            raise VerifyError(f"a rank-{info.rank} array takes {info.rank} indices and a "
                              f"rank-{info.rank} tile; got {len(self.index)} and {t}")
        if t.element_type != signless(info.element_type):
            raise VerifyError(f"buffer {self.buffer} holds {t.element_type}, the array "
                              f"{info.element_type}")


@DIALECT.op
class PrefetchL2Op(TileOpView):
    """Starts bringing (if `pred`) the tile at tile index `index` of `array` into the L2
    cache, copied as a `ring_load` of a `tile` buffer copies it (the same TMA boxes);
    no shared memory, no barrier, nothing waits for it.  It reads nothing into the
    kernel, so it may run before the kernel's grid-dependency wait (a prefetch of data
    the previous kernel still writes is a wasted fetch, never a wrong value)."""

    OPERATION_NAME = "tile.prefetch_l2"
    SPEC = Spec(operands=(Arg("pred", "i1"), Arg("array", "array"),
                          Arg("index", "i32", variadic=True)),
                attributes=(("tile", "any"),))

    def __init__(self, pred, array, index, tile: ir.Type, *, loc=None, ip=None):
        attrs = {"tile": ir.TypeAttr.get(tile)}
        super().__init__(ir.Operation.create(self.OPERATION_NAME,
                                             operands=[pred, array, *index],
                                             attributes=attrs, loc=loc, ip=ip))

    @property
    def pred(self) -> ir.Value:
        return self.operands[0]

    @property
    def array(self) -> ir.Value:
        return self.operands[1]

    @property
    def index(self) -> list[ir.Value]:
        return list(self.operands)[2:]

    def tile_type(self) -> ir.RankedTensorType:
        return ir.TypeAttr(self.operation.attributes["tile"]).value

    def verify(self) -> None:
        _i1(self.pred, "the predicate")
        for i in self.index:
            _i32(i, "an index")
        attr = self.operation.attributes["tile"]
        if not isinstance(attr, ir.TypeAttr) or \
                not isinstance(attr.value, ir.RankedTensorType):
            raise VerifyError(f"'tile' must be a tile type, got {attr}")
        from .layout import tile_layout
        from tileir.backend.layout.mma_layouts import Shared
        t = self.tile_type()
        if not isinstance(tile_layout(t), Shared):
            raise VerifyError(f"the tile's boxes are those of a shared-memory tile "
                              f"(#tile.shared); got {t}")
        info = array_info(self.array.type)
        if info is None:
            raise VerifyError(f"expected an array, got {self.array.type}")
        if t.rank != info.rank or len(self.index) != info.rank:
            raise VerifyError(f"a rank-{info.rank} array takes {info.rank} indices and a "
                              f"rank-{info.rank} tile; got {len(self.index)} and {t}")
        if t.element_type != signless(info.element_type):
            raise VerifyError(f"the tile holds {t.element_type}, the array "
                              f"{info.element_type}")


@DIALECT.op
class RingCommitOp(_RingOp):
    """Closes the group of loads issued since the last commit (one group per iteration)."""

    OPERATION_NAME = "tile.ring_commit"


@DIALECT.op
class RingWaitOp(_SlotOp):
    """Consumer side: waits until the loads of `slot`'s use with `parity` landed."""

    OPERATION_NAME = "tile.ring_wait"
    SPEC = Spec(operands=(Arg("ring", "ring"), Arg("slot", "i32"), Arg("parity", "i32")))

    def __init__(self, ring, slot, parity, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME,
                                             operands=[ring, slot, parity], loc=loc, ip=ip))

    @property
    def parity(self) -> ir.Value:
        return self.operands[2]

    def verify(self) -> None:
        self._check_ring()
        _i32(self.parity, "the parity")


@DIALECT.op
class RingViewOp(_SlotOp):
    """Tile `buffer` of `slot`: a view of the shared memory (read it after a wait)."""

    OPERATION_NAME = "tile.ring_view"
    SPEC = Spec(operands=(Arg("ring", "ring"), Arg("slot", "i32")),
                attributes=(("buffer", "int_attr"),), results=(Arg("tile", "tensor"),))

    def __init__(self, ring, slot, buffer: int, *, loc=None, ip=None):
        t = _ring_alloc_of(ring).tiles[buffer]
        attrs = {"buffer": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), buffer)}
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[t],
                                             operands=[ring, slot], attributes=attrs,
                                             loc=loc, ip=ip))

    @property
    def buffer(self) -> int:
        return self.int_attr("buffer")

    def verify(self) -> None:
        tiles = self._check_ring().tiles
        if not 0 <= self.buffer < len(tiles):
            raise VerifyError(f"buffer {self.buffer} out of range: the ring holds "
                              f"{len(tiles)} tiles per slot")
        if self.result.type != tiles[self.buffer]:
            raise VerifyError(f"result {self.result.type} must be the ring's tile "
                              f"{tiles[self.buffer]}")


@DIALECT.op
class RingReleaseOp(_SlotOp):
    """Consumer side: done reading `slot` (if `pred`); its producer may refill it."""

    OPERATION_NAME = "tile.ring_release"
    SPEC = Spec(operands=(Arg("ring", "ring"), Arg("slot", "i32"), Arg("pred", "i1")))

    def __init__(self, ring, slot, pred, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, operands=[ring, slot, pred],
                                             loc=loc, ip=ip))

    def verify(self) -> None:
        self._check_ring()
        _i1(self.operands[2], "the predicate")


@DIALECT.op
class RingFreeOp(_RingOp):
    """The ring's memory is no longer used (every load issued into it was consumed)."""

    OPERATION_NAME = "tile.ring_free"


@DIALECT.op
class MmaAsyncOp(ProductOp):
    """Starts `a @ b + acc` (as `tile.mma`); the result is valid after a `tile.mma_wait`."""

    OPERATION_NAME = "tile.mma_async"
    SPEC = Spec(operands=(Arg("a", "tensor"), Arg("b", "tensor"), Arg("acc", "tensor")),
                results=(Arg("result", "tensor"),))

    def verify(self) -> None:
        a, b = _tensor(self.a, "a"), _tensor(self.b, "b")
        acc = _tensor(self.acc, "acc")
        _check_matmul_shapes(a, b, acc.shape, "accumulator")
        if self.result.type != acc:
            raise VerifyError(f"result type {self.result.type} must equal the accumulator "
                              f"type {acc}")


@DIALECT.op
class MmaWaitOp(TileOpView):
    """Returns its operand once at most `pending` started products are running."""

    OPERATION_NAME = "tile.mma_wait"
    SPEC = Spec(operands=(Arg("value", "tensor"),), attributes=(("pending", "int_attr"),),
                results=(Arg("result", "tensor"),))

    def __init__(self, value: ir.Value, pending: int, *, loc=None, ip=None):
        attrs = {"pending": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), pending)}
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[value.type],
                                             operands=[value], attributes=attrs, loc=loc,
                                             ip=ip))

    @property
    def pending(self) -> int:
        return self.int_attr("pending")

    def verify(self) -> None:
        if not 0 <= self.pending <= 7:
            raise VerifyError(f"pending must be 0 to 7, got {self.pending}")
        if self.operands[0].type != self.result.type:
            raise VerifyError("the result must have the operand's type")


@DIALECT.op
class IsProducerOp(TileOpView):
    """Whether this thread is in the kernel's producer warps (a warp-specialized
    kernel: `tile.producer_warps` warps after the ones that hold the tiles)."""

    OPERATION_NAME = "tile.is_producer"
    SPEC = Spec(results=(Arg("result", "i1"),))

    def __init__(self, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME,
                                             results=[ir.IntegerType.get_signless(1)],
                                             loc=loc, ip=ip))


@DIALECT.op
class SetMaxRegistersOp(TileOpView):
    """Gives this warpgroup `count` registers a thread (`action` "inc" or "dec"): the
    producer of a warp-specialized kernel hands its registers to the consumers."""

    OPERATION_NAME = "tile.set_max_registers"
    SPEC = Spec(attributes=(("count", "int_attr"), ("action", "str_attr")))

    def __init__(self, count: int, action: str, *, loc=None, ip=None):
        attrs = {"count": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), count),
                 "action": ir.StringAttr.get(action)}
        super().__init__(ir.Operation.create(self.OPERATION_NAME, attributes=attrs,
                                             loc=loc, ip=ip))

    @property
    def count(self) -> int:
        return self.int_attr("count")

    @property
    def action(self) -> str:
        return self.str_attr("action")

    def verify(self) -> None:
        if self.action not in ("inc", "dec"):
            raise VerifyError(f"action must be 'inc' or 'dec', got '{self.action}'")
        if not 24 <= self.count <= 256 or self.count % 8:
            raise VerifyError(f"count must be a multiple of 8 in 24..256, got {self.count}")


@DIALECT.op
class TurnOp(TileOpView):
    """The tensor cores' turn between the two consumer warpgroups of a warp-specialized
    kernel (`tile-pingpong`, backend/pipeline/pingpong.py): `kind` "wait" waits until
    it is this warpgroup's turn to issue its products, "pass" gives the turn to the
    other warpgroup.  `warpgroup` -1: every consumer warpgroup runs it; 0 or 1: only
    that one (the alternation's start and end)."""

    OPERATION_NAME = "tile.turn"
    SPEC = Spec(attributes=(("kind", "str_attr"), ("warpgroup", "int_attr")))

    def __init__(self, kind: str, warpgroup: int = -1, *, loc=None, ip=None):
        attrs = {"kind": ir.StringAttr.get(kind),
                 "warpgroup": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), warpgroup)}
        super().__init__(ir.Operation.create(self.OPERATION_NAME, attributes=attrs,
                                             loc=loc, ip=ip))

    @property
    def kind(self) -> str:
        return self.str_attr("kind")

    @property
    def warpgroup(self) -> int:
        return self.int_attr("warpgroup")

    def verify(self) -> None:
        if self.kind not in ("wait", "pass"):
            raise VerifyError(f"kind must be 'wait' or 'pass', got '{self.kind}'")
        if self.warpgroup not in (-1, 0, 1):
            raise VerifyError(f"warpgroup must be -1 (each), 0 or 1, got {self.warpgroup}")


__all__ = ["IsProducerOp", "SetMaxRegistersOp", "TurnOp", "RingAllocOp", "RingAcquireOp",
           "RingLoadOp", "PrefetchL2Op", "RingCommitOp", "RingWaitOp",
           "RingViewOp", "RingReleaseOp", "RingFreeOp", "MmaAsyncOp", "MmaWaitOp", "ring_type"]
