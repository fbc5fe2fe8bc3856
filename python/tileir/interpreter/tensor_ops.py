"""Rules for the three `tensor` ops Tile IR uses: splat, extract, from_elements."""

from __future__ import annotations

import numpy as np

from .compiler import CompileContext, Step, pure, rule
from .dtypes import elem_of, shape_of
from .errors import Fault


@rule("tensor.splat")
def _splat(op, cx: CompileContext) -> Step:
    t = op.result.type
    if len(op.operands) != 1:
        raise Fault("dynamically shaped splats are not Tile IR (tiles have static shapes)")
    shape, dtype = shape_of(t), elem_of(t).storage
    return pure(op, cx, lambda x: np.full(shape, x, dtype=dtype))


@rule("tensor.extract")
def _extract(op, cx: CompileContext) -> Step:
    shape = shape_of(op.operands[0].type)
    if not shape:
        return pure(op, cx, lambda t: np.asarray(t)[()])

    def extract(t, *indices):
        index = tuple(int(i) for i in indices)
        # NumPy would wrap negative indices around; MLIR calls them out of bounds.
        if not all(0 <= i < d for i, d in zip(index, shape)):
            raise Fault(f"index {list(index)} is out of bounds for a tile of shape "
                        f"{list(shape)}")
        return np.asarray(t)[index]
    return pure(op, cx, extract)


@rule("tensor.from_elements")
def _from_elements(op, cx: CompileContext) -> Step:
    t = op.result.type
    shape, dtype = shape_of(t), elem_of(t).storage
    return pure(op, cx, lambda *xs: np.array(xs, dtype=dtype).reshape(shape))
