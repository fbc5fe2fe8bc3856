"""Addresses of arrays (dialect/pointers.py): `tile.array_address` (a GEP to the element
and `ptrtoint`), `tile.make_array` and `tile.raw_memory` (an `inttoptr` and the dims
and strides of an array ABI record).  Every thread computes the same values."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm

from tileir.dialect.types import array_info, signless

from ..context import I32, ArrayABI
from ..memory import gep
from .registry import rule

_GLOBAL_PTR = "!llvm.ptr<1>"
# raw memory's one dim: no bounds are checked on it (its ops pass check_bounds = 0)
_UNBOUNDED = (1 << 31) - 1


def _i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


@rule("tile.array_address")
def _array_address(cx, op):
    arr = cx.arrays[op.array]
    offset = None
    for i, stride in zip(op.opview.index, arr.strides):
        term = arith.muli(arith.extsi(_i64(), cx.get(i)), stride)
        offset = term if offset is None else arith.addi(offset, term)
    ptr = arr.ptr if offset is None else gep(arr.ptr, offset, arr.elem)
    cx.values[op.result] = llvm.ptrtoint(_i64(), ptr)


def _element(op) -> ir.Type:
    return signless(array_info(op.result.type).element_type)


@rule("tile.make_array")
def _make_array(cx, op):
    view = op.opview
    ptr = llvm.inttoptr(ir.Type.parse(_GLOBAL_PTR), cx.get(view.address))
    dims = [arith.trunci(I32(), cx.get(d)) for d in view.dims]
    strides = [cx.get(s) for s in view.strides]
    cx.arrays[op.result] = ArrayABI(ptr, dims, strides, _element(op), False)


@rule("tile.raw_memory")
def _raw_memory(cx, op):
    ptr = llvm.inttoptr(ir.Type.parse(_GLOBAL_PTR), cx.get(op.opview.address))
    cx.arrays[op.result] = ArrayABI(ptr, [cx.const(_UNBOUNDED)], [cx.const(1, _i64())],
                                    _element(op), False)
