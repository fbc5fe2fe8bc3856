"""Addresses of arrays: `tile.array_address`, `tile.make_array`, `tile.raw_memory`
(docs/tile-ir.md).  cuTile's foreign pointers (`Array.foreign_pointer`,
`Array.from_foreign`) and raw array memory (`Array.get_raw_memory`) are built on them.

An address is an `i64`: the location of one element of an array (element
`index`, one i32 per dim: all zeros for element 0, a slice's first element for a
slice).  Nothing computes with one (the frontend has no arithmetic on a foreign
pointer); it only turns back into an array:

    %p = "tile.array_address"(%a, %c0, %c0) : (!tile.array<f32, 2 : i64>, i32, i32) -> i64
    %v = "tile.make_array"(%p, %d0, %d1, %s0, %s1)
        : (i64, i64, i64, i64, i64) -> !tile.array<f32, 2 : i64>
    %m = "tile.raw_memory"(%p) : (i64) -> !tile.array<f32, 1 : i64>

`make_array` is the array at `address` with the given dims and strides (in
elements; `rank` dims, then `rank` strides, all i64: a variadic group has one
type); its dims must be >= 0 and below 2^31 (they become the ABI's i32 dims), and
its elements must lie in memory the kernel may access, else the result is
undefined (the interpreter stops).  `raw_memory` is the memory from `address` on as
a 1-D array of unit stride and unknown length: element `i` is at `address + i *
sizeof(T)`; only the element-indexed ops without bounds checks (`tile.gather`,
`tile.scatter`, `tile.atomic_rmw`, `tile.atomic_cas` with `check_bounds = 0`) may
use it, and an element outside the memory the address is in is undefined.  All
three are pure (no memory is read).  Registered with the tile dialect.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from .ods import Arg, Spec, TileOpView, VerifyError
from .tile import DIALECT, _array


def _i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


def _check_i64(value: ir.Value, what: str) -> None:
    if value.type != _i64():
        raise VerifyError(f"{what} must be an i64, got {value.type}")


@DIALECT.op
class ArrayAddressOp(TileOpView):
    """The address of element `index` of an array (a foreign pointer's value); the
    index is not checked against the dims."""

    OPERATION_NAME = "tile.array_address"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("index", "i32", variadic=True)),
                results=(Arg("result", "any"),))

    def __init__(self, array: ir.Value, index: Sequence[ir.Value], *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[_i64()],
                                             operands=[array, *index], loc=loc, ip=ip))

    array = property(lambda self: self.operands[0])
    index = property(lambda self: list(self.operands)[1:])

    def verify(self) -> None:
        rank = _array(self.array).rank
        if len(self.index) != rank:
            raise VerifyError(f"expected {rank} indices (one per array dim), got "
                              f"{len(self.index)}")
        _check_i64(self.result, "the result")


@DIALECT.op
class MakeArrayOp(TileOpView):
    """The array at `address` with `rank` dims and then `rank` strides (elements)."""

    OPERATION_NAME = "tile.make_array"
    SPEC = Spec(operands=(Arg("address", "any"), Arg("extents", "any", variadic=True)),
                results=(Arg("result", "array"),))

    def __init__(self, result: ir.Type, address: ir.Value, dims: Sequence[ir.Value],
                 strides: Sequence[ir.Value], *, loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[result], operands=[address, *dims, *strides],
            loc=loc, ip=ip))

    address = property(lambda self: self.operands[0])

    @property
    def dims(self) -> list[ir.Value]:
        rank = _array(self.result).rank
        return list(self.operands)[1:1 + rank]

    @property
    def strides(self) -> list[ir.Value]:
        rank = _array(self.result).rank
        return list(self.operands)[1 + rank:]

    def verify(self) -> None:
        rank = _array(self.result).rank
        _check_i64(self.address, "the address")
        extents = list(self.operands)[1:]
        if len(extents) != 2 * rank:
            raise VerifyError(f"expected {rank} dims and {rank} strides for a rank-{rank} "
                              f"array, got {len(extents)} operands after the address")
        for k, v in enumerate(extents):
            _check_i64(v, f"{'dim' if k < rank else 'stride'} {k % rank if rank else k}")


@DIALECT.op
class RawMemoryOp(TileOpView):
    """The memory from `address` on, as a 1-D array of unit stride and unknown length."""

    OPERATION_NAME = "tile.raw_memory"
    SPEC = Spec(operands=(Arg("address", "any"),), results=(Arg("result", "array"),))

    def __init__(self, result: ir.Type, address: ir.Value, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[result],
                                             operands=[address], loc=loc, ip=ip))

    address = property(lambda self: self.operands[0])

    def verify(self) -> None:
        _check_i64(self.address, "the address")
        if _array(self.result).rank != 1:
            raise VerifyError(f"raw memory is a 1-d array, got {self.result.type}")


__all__ = ["ArrayAddressOp", "MakeArrayOp", "RawMemoryOp"]
