"""Layout encodings of tiles (stage `layout`) and the op that changes them.

`#tile.blocked<spt, tpw, wpb, order>` and `#tile.slice<dim : i64, #parent>` (in
`tileir.backend.layout.layouts`), and the tensor-core layouts `#tile.mma_acc<...>`,
`#tile.mma_operand<...>` and `#tile.shared<...>` (in
`tileir.backend.layout.mma_layouts`) are attributes put in the encoding slot of a tile's
`tensor` type.  Element-wise ops need operands of one
type, so layouts are checked by MLIR for free; `tile.convert_layout` is the
only op that changes a tile's layout.
"""

from __future__ import annotations

from mlir import ir

from .ods import Arg, Spec, TileOpView, VerifyError
from .tile import DIALECT
from .types import by_type

DIALECT.attribute("blocked", "a Triton-style blocked distribution over lanes and warps",
                  size_per_thread="i64_array_attr", threads_per_warp="i64_array_attr",
                  warps_per_block="i64_array_attr", order="i64_array_attr")
DIALECT.attribute("slice", "a distributed parent with one dim removed (reduction results)",
                  dim="int_attr", parent="any")
# Tensor-core layouts (tileir.backend.layout.mma_layouts): accumulators, register operands,
# and tiles that live in shared memory.
DIALECT.attribute("mma_acc", "a tensor-core accumulator: mma.sync (2) or wgmma (3) fragments",
                  version="int_attr", warps="i64_array_attr", instr="i64_array_attr")
DIALECT.attribute("mma_operand", "operand A (0) or B (1) of an mma, in registers; kwidth: "
                  "K elements per 32-bit register (2: 16-bit types, 1: tf32)",
                  index="int_attr", parent="mma_attr", kwidth="int_attr")
DIALECT.attribute("shared", "a tile in shared memory: swizzled boxes along the fastest dim",
                  swizzle="int_attr", order="i64_array_attr")


def tile_layout(t: ir.Type):
    """The layout (a `tileir.backend.layout.layouts` object) of a tile type, or None
    (read once per type: the lowering asks for every value it lowers)."""
    if not isinstance(t, ir.RankedTensorType):
        return None
    return by_type("layout", t, _read_layout)


def _read_layout(t: ir.RankedTensorType):
    if t.encoding is None:
        return None
    from tileir.backend.layout import encodings
    return encodings.parse(str(t.encoding))


def with_layout(t: ir.RankedTensorType, layout) -> ir.RankedTensorType:
    """`t` with its encoding replaced by `layout` (None removes it)."""
    enc = ir.Attribute.parse(layout.attr(), t.context) if layout is not None else None
    return ir.RankedTensorType.get(list(t.shape), t.element_type, enc,
                                   loc=ir.Location.unknown(t.context))


def check_layout(t: ir.Type, what: str) -> None:
    """Raises VerifyError if `t` carries a malformed or rank-mismatched layout."""
    if not isinstance(t, ir.RankedTensorType) or t.encoding is None:
        return
    from tileir.backend.layout import encodings
    try:
        lay = encodings.parse(str(t.encoding))
    except ValueError:
        raise VerifyError(f"{what} has encoding {t.encoding}, which is not a tile layout")
    msg = encodings.verify(lay)
    if msg:
        raise VerifyError(f"{what} layout is malformed: {msg}")
    if lay.rank != t.rank:
        raise VerifyError(f"{what} has a rank-{lay.rank} layout for a rank-{t.rank} tile")
    msg = encodings.verify_shape(lay, list(t.shape))
    if msg:
        raise VerifyError(f"{what} layout is malformed: {msg}")


@DIALECT.op
class ConvertLayoutOp(TileOpView):
    """Moves a tile to another layout (same shape and element type); through shared memory."""

    OPERATION_NAME = "tile.convert_layout"
    SPEC = Spec(operands=(Arg("source", "tensor"),), results=(Arg("result", "tensor"),))

    def __init__(self, source: ir.Value, result_type: ir.Type, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[result_type],
                                             operands=[source], loc=loc, ip=ip))

    @property
    def source(self) -> ir.Value:
        return self.operands[0]

    def verify(self) -> None:
        src, res = self.source.type, self.result.type
        if not isinstance(src, ir.RankedTensorType) or not isinstance(res, ir.RankedTensorType):
            raise VerifyError("operand and result must be tiles")
        if list(src.shape) != list(res.shape) or src.element_type != res.element_type:
            raise VerifyError(f"convert_layout keeps shape and element type: {src} -> {res}")
        check_layout(src, "source")
        check_layout(res, "result")
