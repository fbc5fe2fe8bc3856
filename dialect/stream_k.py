"""Ops of stream-K GEMMs: `tile.partial_store` and `tile.partial_add` (docs/tile-ir.md).

`tile-persistent-tiles` balances the last waves of a persistent tensor-core
kernel by splitting tiles along K between neighbouring blocks
(backend/pipeline/stream_k.py): a tile whose K range block `b` begins and block `b + 1`
ends is summed by both, and block `b + 1` hands its part over in a workspace
slot of its own:

    "tile.partial_store"(%acc, %slot, %pred)          block b + 1: slot b + 1 <- acc
    %sum = "tile.partial_add"(%acc, %slot, %pred)     block b: acc + slot b + 1

Each op does nothing when `%pred` is false (`partial_add` then returns `%acc`).
`partial_store` writes the block's whole tile and then publishes it (release);
`partial_add` waits until slot `%slot` was published (acquire), adds it and marks
the slot empty again for the next launch.  A slot is written once per launch.
The workspace is the kernel's own (the runtime passes it: metadata `workspace`,
layout in tileir.runtime.workspace);
on the GPU a `partial_add` whose slot no block fills waits forever, so the
interpreter and the simulator stop with an error there instead.
"""

from __future__ import annotations

from mlir import ir

from .ods import Arg, Spec, TileOpView, VerifyError
from .tile import DIALECT, _tensor


def _check(op: TileOpView, acc: ir.Value) -> None:
    t = _tensor(acc, "the accumulator")
    if str(t.element_type) != "f32" or t.rank != 2:
        raise VerifyError(f"the accumulator must be a 2-d f32 tile, got {t}")


@DIALECT.op
class PartialStoreOp(TileOpView):
    """When `pred`: the block's tile `acc` goes to workspace slot `slot`, published."""

    OPERATION_NAME = "tile.partial_store"
    SPEC = Spec(operands=(Arg("acc", "tensor"), Arg("slot", "i32"), Arg("pred", "i1")))

    def __init__(self, acc: ir.Value, slot: ir.Value, pred: ir.Value, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[], operands=[acc, slot, pred], loc=loc, ip=ip))

    acc = property(lambda self: self.operands[0])
    slot = property(lambda self: self.operands[1])
    pred = property(lambda self: self.operands[2])

    def verify(self) -> None:
        _check(self, self.acc)


@DIALECT.op
class PartialAddOp(TileOpView):
    """When `pred`: `acc` plus the tile published in workspace slot `slot` (waited for),
    the slot emptied; else `acc`."""

    OPERATION_NAME = "tile.partial_add"
    SPEC = Spec(operands=(Arg("acc", "tensor"), Arg("slot", "i32"), Arg("pred", "i1")),
                results=(Arg("sum", "tensor"),))

    def __init__(self, acc: ir.Value, slot: ir.Value, pred: ir.Value, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[acc.type], operands=[acc, slot, pred],
            loc=loc, ip=ip))

    acc = property(lambda self: self.operands[0])
    slot = property(lambda self: self.operands[1])
    pred = property(lambda self: self.operands[2])
    sum = property(lambda self: self.results[0])

    def verify(self) -> None:
        _check(self, self.acc)
        if self.sum.type != self.acc.type:
            raise VerifyError(f"the result must have the accumulator's type {self.acc.type}, "
                              f"got {self.sum.type}")


__all__ = ["PartialAddOp", "PartialStoreOp"]
