"""Lists of arrays: `tile.select_array` (docs/tile-ir.md).

A kernel parameter that is a list of arrays (cuTile's `ListAnnotation`) becomes
one `!tile.array` argument per element; `arrays[i]` with a run-time `i` picks
one of them:

    %a = "tile.select_array"(%i, %a0, %a1, %a2)
        : (i32, !tile.array<f32, 2 : i64>, !tile.array<f32, 2 : i64>,
           !tile.array<f32, 2 : i64>) -> !tile.array<f32, 2 : i64>

The result is the array (base, dims, strides) of operand `1 + i`.  An index
outside `[0, N)` is undefined: the interpreter stops, the GPU reads some array
of the list.  A constant index never reaches Tile IR (the frontend picks the
argument).  Registered with the tile dialect.
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


__all__ = ["SelectArrayOp"]
