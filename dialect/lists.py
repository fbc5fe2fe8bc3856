"""Lists of arrays: `tile.select_array` and `tile.list_get` (docs/tile-ir.md).

A kernel parameter that is a list of arrays (cuTile's `ListAnnotation`) becomes
one `!tile.array` argument per element when a launch compiles it (the length is
part of the specialization); `arrays[i]` with a run-time `i` picks one of them:

    %a = "tile.select_array"(%i, %a0, %a1, %a2)
        : (i32, !tile.array<f32, 2 : i64>, !tile.array<f32, 2 : i64>,
           !tile.array<f32, 2 : i64>) -> !tile.array<f32, 2 : i64>

The result is the array (base, dims, strides) of operand `1 + i`.  An index
outside `[0, N)` is undefined: the interpreter stops, the GPU reads some array
of the list.  A constant index never reaches Tile IR (the frontend picks the
argument).

A list whose length is not known when the kernel compiles (an exported kernel's
`ListConstraint` parameter) is one argument instead: a *table*, an int64 array
of shape (length, 1 + 2 n) whose row i describes element i as the kernel ABI
passes an array (its address, its n dims, its n strides in elements):

    %a = "tile.list_get"(%table, %i) {aligned = false}
        : (!tile.array<i64, 2 : i64>, i32) -> !tile.array<f32, 1 : i64>

`aligned` promises of every element what the `tile.aligned` argument attribute
promises of an array.  The table is read-only: the op reads it but has no effect
the passes must order.  An index outside `[0, length)` (or a table whose rows are
shorter than 1 + 2 n) gives an empty array, all dims 0: loads read padding,
stores write nothing.  Both ops are registered with the tile dialect.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from .ods import Arg, Spec, TileOpView, VerifyError
from .tile import DIALECT, _array


@DIALECT.op
class SelectArrayOp(TileOpView):
    """The array `arrays[index]` of a list of arrays (one type for all)."""

    OPERATION_NAME = "tile.select_array"
    SPEC = Spec(operands=(Arg("index", "i32"), Arg("arrays", "array", variadic=True)),
                results=(Arg("result", "array"),))

    def __init__(self, index: ir.Value, arrays: Sequence[ir.Value], *, loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[arrays[0].type], operands=[index, *arrays],
            loc=loc, ip=ip))

    index = property(lambda self: self.operands[0])
    arrays = property(lambda self: list(self.operands)[1:])

    def verify(self) -> None:
        arrays = self.arrays
        if not arrays:
            raise VerifyError("expected at least one array to select from")
        _array(self.result)
        for i, a in enumerate(arrays):
            if a.type != self.result.type:
                raise VerifyError(f"array {i} is {a.type} but the result is "
                                  f"{self.result.type}; the arrays of a list share one type")


@DIALECT.op
class ListGetOp(TileOpView):
    """Element `index` of a list of arrays passed as a table (one row per element)."""

    OPERATION_NAME = "tile.list_get"
    SPEC = Spec(operands=(Arg("table", "array"), Arg("index", "i32")),
                attributes=(("aligned", "int_attr"),),
                results=(Arg("result", "array"),))

    def __init__(self, result: ir.Type, table: ir.Value, index: ir.Value, aligned: bool, *,
                 loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[result], operands=[table, index],
            attributes={"aligned": ir.BoolAttr.get(aligned)}, loc=loc, ip=ip))

    table = property(lambda self: self.operands[0])
    index = property(lambda self: self.operands[1])

    @property
    def aligned(self) -> bool:
        return bool(ir.IntegerAttr(self.attributes["aligned"]).value)

    def verify(self) -> None:
        table = _array(self.table)
        if str(table.element_type) != "i64" or table.rank != 2:
            raise VerifyError(f"the table of a list is an i64 array of rank 2 (one row of "
                              f"address, dims and strides per element), got {self.table.type}")
        _array(self.result)
        a = ir.IntegerAttr(self.attributes["aligned"])
        if a.type != ir.IntegerType.get_signless(1):
            raise VerifyError(f"'aligned' is a bool (true or false), got {a}")


__all__ = ["ListGetOp", "SelectArrayOp"]
