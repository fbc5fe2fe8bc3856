"""Ops that take tiles apart and put them together: `tile.extract_slice`,
`tile.insert_slice`, `tile.concat` (docs/tile-ir.md).  Registered with the tile
dialect (`tileir.dialect.tile.DIALECT`): `op.opview` finds them like its own."""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from .ods import Arg, Spec, TileOpView, VerifyError
from .tile import DIALECT, _check_axis, _i64_attr, _shape, _tensor, tile_type


@DIALECT.op
class ExtractSliceOp(TileOpView):
    """The sub-tile of `source` starting at element `offsets` (one i32 per dim, run-time
    values allowed), of the result's shape: result[c] = source[offsets + c].  The
    slice must lie inside the source (the frontend checks constant offsets)."""

    OPERATION_NAME = "tile.extract_slice"
    SPEC = Spec(operands=(Arg("source", "tensor"), Arg("offsets", "i32", variadic=True)),
                results=(Arg("result", "tensor"),))

    def __init__(self, source: ir.Value, offsets: Sequence[ir.Value], result_type: ir.Type, *,
                 loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[result_type],
                                             operands=[source, *offsets], loc=loc, ip=ip))

    @property
    def source(self) -> ir.Value:
        return self.operands[0]

    @property
    def offsets(self) -> list[ir.Value]:
        return list(self.operands)[1:]

    def verify(self) -> None:
        src, res = _tensor(self.source, "source"), _tensor(self.result, "result")
        _check_slice(src, res, self.offsets, "result")


def _check_slice(big: ir.RankedTensorType, small: ir.RankedTensorType, offsets, what: str):
    if big.element_type != small.element_type:
        raise VerifyError(f"element types differ: {big.element_type} and {small.element_type}")
    if big.rank != small.rank:
        raise VerifyError(f"the {what} has rank {small.rank}, the tile rank {big.rank}")
    if len(offsets) != big.rank:
        raise VerifyError(f"expected {big.rank} offsets (one per dim), got {len(offsets)}")
    for i, (a, b) in enumerate(zip(big.shape, small.shape)):
        if b > a:
            raise VerifyError(f"the {what}'s dim {i} ({b}) is larger than the tile's ({a})")


@DIALECT.op
class InsertSliceOp(TileOpView):
    """`dest` with the sub-tile at element `offsets` replaced by `value`."""

    OPERATION_NAME = "tile.insert_slice"
    SPEC = Spec(operands=(Arg("dest", "tensor"), Arg("value", "tensor"),
                          Arg("offsets", "i32", variadic=True)),
                results=(Arg("result", "tensor"),))

    def __init__(self, dest: ir.Value, value: ir.Value, offsets: Sequence[ir.Value], *,
                 loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[dest.type],
                                             operands=[dest, value, *offsets], loc=loc, ip=ip))

    @property
    def dest(self) -> ir.Value:
        return self.operands[0]

    @property
    def value(self) -> ir.Value:
        return self.operands[1]

    @property
    def offsets(self) -> list[ir.Value]:
        return list(self.operands)[2:]

    def verify(self) -> None:
        dest, res = _tensor(self.dest, "dest"), _tensor(self.result, "result")
        if _shape(dest) != _shape(res) or dest.element_type != res.element_type:
            raise VerifyError(f"result type {res} differs from dest type {dest}")
        _check_slice(dest, _tensor(self.value, "value"), self.offsets, "value")


@DIALECT.op
class ConcatOp(TileOpView):
    """`lhs` and `rhs` side by side along `axis` (equal in every other dim)."""

    OPERATION_NAME = "tile.concat"
    SPEC = Spec(operands=(Arg("lhs", "tensor"), Arg("rhs", "tensor")),
                attributes=(("axis", "int_attr"),), results=(Arg("result", "tensor"),))

    def __init__(self, lhs: ir.Value, rhs: ir.Value, axis: int, *, loc=None, ip=None):
        a, b = lhs.type, rhs.type
        shape = list(a.shape)
        shape[axis] += b.shape[axis]
        op = ir.Operation.create(self.OPERATION_NAME,
                                 results=[tile_type(shape, a.element_type)],
                                 operands=[lhs, rhs], attributes={"axis": _i64_attr(axis)},
                                 loc=loc, ip=ip)
        super().__init__(op)

    @property
    def lhs(self) -> ir.Value:
        return self.operands[0]

    @property
    def rhs(self) -> ir.Value:
        return self.operands[1]

    @property
    def axis(self) -> int:
        return self.int_attr("axis")

    def verify(self) -> None:
        a, b = _tensor(self.lhs, "lhs"), _tensor(self.rhs, "rhs")
        res = _tensor(self.result, "result")
        if a.element_type != b.element_type or a.element_type != res.element_type:
            raise VerifyError(f"element types differ: {a.element_type}, {b.element_type}, "
                              f"{res.element_type}")
        if not (a.rank == b.rank == res.rank):
            raise VerifyError(f"ranks differ: {a.rank}, {b.rank}, {res.rank}")
        _check_axis(self.axis, a.rank, "the operands")
        want = list(a.shape)
        want[self.axis] += b.shape[self.axis]
        for i, (x, y) in enumerate(zip(a.shape, b.shape)):
            if i != self.axis and x != y:
                raise VerifyError(f"dim {i} differs ({x} and {y}); only dim {self.axis} may")
        if _shape(res) != want:
            raise VerifyError(f"result shape {_shape(res)}, expected {want}")


__all__ = ["ExtractSliceOp", "InsertSliceOp", "ConcatOp"]
