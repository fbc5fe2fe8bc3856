"""`arith.constant`: attributes decoded once, at compile time, into NumPy values.

Reading a `DenseElementsAttr` through the buffer protocol has two traps in the
MLIR 22 bindings, both avoided here:
* a *splat* i1 attribute is read as if its bits were packed (wrong values),
  so splats always go through `get_splat_value()`;
* bf16 and fp8 have no buffer format at all, so such a non-splat attribute
  is bit-cast to i16 / i8 by MLIR's own folder and read as integers.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from mlir import ir
from mlir.dialects import arith, func
from mlir.passmanager import PassManager

from .compiler import CompileContext, Step, constant, rule
from .dtypes import BF16, Elem, elem_of, f64_to, shape_of, wrap_int
from .errors import Fault


def scalar_value(attr: ir.Attribute, e: Elem) -> np.generic:
    if isinstance(attr, ir.BoolAttr):
        return e.scalar(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        return e.scalar(wrap_int(attr.value, e.bits) if e.is_int else attr.value)
    if isinstance(attr, ir.FloatAttr):
        return f64_to(e, attr.value)  # exact: the value is representable in its type
    raise Fault(f"cannot read constant attribute {attr}")


def _raw_bits(attr: ir.DenseElementsAttr, width: int) -> np.ndarray:
    """The raw bits of a dense attribute whose element type has no buffer format (bf16,
    fp8), via a folded `arith.bitcast` to i<width>."""
    t = attr.type
    with attr.context, ir.Location.unknown():
        i16 = ir.RankedTensorType.get(list(t.shape), ir.IntegerType.get_signless(width))
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("bits", ([], [i16]))
            with ir.InsertionPoint(fn.add_entry_block()):
                func.ReturnOp([arith.BitcastOp(i16, arith.ConstantOp(t, attr).result).result])
        PassManager.parse("builtin.module(func.func(canonicalize))").run(module.operation)
        # Running a pass invalidates the Python handles of ops: look them up again.
        body = module.body.operations[0].regions[0].blocks[0]
        folded = list(body.operations)[-1].operands[0].owner
    if folded.name != "arith.constant":
        raise Fault(f"could not fold the constant {attr} to its bits")
    return np.array(folded.attributes["value"], dtype=f"<i{width // 8}")


_NO_BUFFER_FORMAT = (BF16, np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))


def dense_value(attr: ir.DenseElementsAttr, e: Elem, shape: tuple[int, ...]) -> np.ndarray:
    if attr.is_splat:
        return np.full(shape, scalar_value(attr.get_splat_value(), e), dtype=e.storage)
    if e.storage in _NO_BUFFER_FORMAT:
        return _raw_bits(attr, 8 * e.storage.itemsize).view(e.storage).reshape(shape)
    values = np.array(attr)
    if values.dtype != e.storage:  # e.g. a `ui8` attribute: the same bits, signless
        values = values.view(e.storage)
    return values.reshape(shape)


@rule("arith.constant")
def _constant(op, cx: CompileContext) -> Step:
    attr, t = op.attributes["value"], op.result.type
    e = elem_of(t)
    if isinstance(attr, ir.DenseElementsAttr):
        value = dense_value(attr, e, shape_of(t))
        value.flags.writeable = False  # shared by every execution: tiles are immutable
    else:
        value = scalar_value(attr, e)
    return constant(op, cx, value)
