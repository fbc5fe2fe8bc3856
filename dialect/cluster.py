"""Ops of thread-block clusters (sm_90a): `tile.cluster_gather` (docs/tile-ir.md).

`tile-cluster-rows` splits the loops of a small grid's kernel across the blocks of
a cluster; after each split loop, every block holds a partial of each reduction
the loop carried, and one `tile.cluster_gather` hands every block the partials of
all the blocks of its cluster, stacked along a new leading dim, for ordinary tile
ops to combine:

    %all:2 = tile.cluster_gather %m, %s {axis = 2, size = 8}
        : (tensor<1xf32>, tensor<1xf32>) -> (tensor<8x1xf32>, tensor<8x1xf32>)

The cluster is `size` consecutive blocks along grid axis `axis` (the launch's grid
along it is a multiple of `size`); row `r` of each result is the operand of the
block whose id along that axis is `r` modulo `size`.  On the GPU the partials
travel through distributed shared memory between two cluster barriers; the
interpreter runs a cluster's blocks side by side to do the same.
"""

from __future__ import annotations

from mlir import ir

from .ods import Arg, Spec, TileOpView, VerifyError
from .tile import DIALECT, _i64_attr, _tensor
from .types import bitwidth, is_float, is_int

MAX_CLUSTER = 16        # blocks in a cluster (8 portable, 16 on the H100/H200 by opt-in)


@DIALECT.op
class ClusterGatherOp(TileOpView):
    """Every block of a cluster receives every block's operands, stacked by rank."""

    OPERATION_NAME = "tile.cluster_gather"
    SPEC = Spec(operands=(Arg("values", "tensor", variadic=True),),
                attributes=(("axis", "int_attr"), ("size", "int_attr")),
                results=(Arg("gathered", "tensor", variadic=True),))

    def __init__(self, values: list[ir.Value], axis: int, size: int, *, loc=None, ip=None):
        results = [ir.RankedTensorType.get([size] + list(v.type.shape), v.type.element_type)
                   for v in values]
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=results, operands=list(values),
            attributes={"axis": _i64_attr(axis), "size": _i64_attr(size)}, loc=loc, ip=ip))

    values = property(lambda self: list(self.operands))
    gathered = property(lambda self: list(self.results))
    axis = property(lambda self: self.int_attr("axis"))
    size = property(lambda self: self.int_attr("size"))

    def verify(self) -> None:
        if not 0 <= self.axis <= 2:
            raise VerifyError(f"axis must be a grid axis (0, 1 or 2), got {self.axis}")
        size = self.size
        if not 2 <= size <= MAX_CLUSTER or size & (size - 1):
            raise VerifyError(f"size must be a power of two in 2..{MAX_CLUSTER}, got {size}")
        if not self.values or len(self.values) != len(self.gathered):
            raise VerifyError(f"one result per operand, and at least one: got "
                              f"{len(self.values)} operands and {len(self.gathered)} results")
        for i, (v, r) in enumerate(zip(self.values, self.gathered)):
            t, rt = _tensor(v, f"operand {i}"), _tensor(r, f"result {i}")
            if not (is_int(t.element_type) or is_float(t.element_type)) or \
                    bitwidth(t.element_type) not in (16, 32, 64):
                raise VerifyError(f"operand {i}: elements of 16, 32 or 64 bits travel between "
                                  f"blocks, got {t.element_type}")
            if list(rt.shape) != [size] + list(t.shape) or rt.element_type != t.element_type:
                want = "x".join(str(d) for d in [size] + list(t.shape))
                raise VerifyError(f"result {i} must be tensor<{want}x{t.element_type}> (the "
                                  f"operand stacked {size} times), got {rt}")


__all__ = ["ClusterGatherOp", "MAX_CLUSTER"]
