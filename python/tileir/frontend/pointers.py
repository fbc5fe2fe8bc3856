"""Trace-time rules of foreign pointers and raw array memory, with cuTile 1.7's names
and semantics: `Array.foreign_pointer`, `Array.from_foreign`, `Array.get_raw_memory`
and the `RawArrayMemory` methods (`dtype`, `load_offset`, `store_offset`,
`atomic_*_offset`).

A foreign pointer is the address of an array's first element (`tile.array_address`;
a slice's first element for a slice), a `ForeignPointerValue` of dtype
`foreign_pointer[T]`: nothing computes with it (cuTile gives it no numeric or pointer
operations); `Array.from_foreign` makes an array of it again (`tile.make_array`),
and it may enter helpers.

Raw memory is the array's memory from its first element on, addressed by element
offset, no shape, strides or bounds (`tile.raw_memory`: a 1-d array of unit stride);
its methods are `tile.gather`/`tile.scatter`/`tile.atomic_rmw`/`tile.atomic_cas`
without bounds checks, so they reach the interpreter and both GPU targets as the
array atomics do.  As in cuTile, the result has the offset's shape, and the mask and
the value operands broadcast to it; atomics take cuTile's dtypes, orders and scopes.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..annotations import Array, RawArrayMemory
from tileir.dialect import array_type, indexed as indexed_ops, pointers as pointer_ops
from . import windows
from .emit import (as_value, broadcast_to, cast, constant, is_number, reshape, type_error,
                   value_error, wrap)
from .indexed import ATOMIC_DTYPES, _latency, _order_scope
from .intrinsics import METHOD_NAMES, METHOD_SIGNATURES, RULES, array_arg, method
from .values import (ArrayValue, ForeignPointerValue, RawMemoryValue, TileValue, describe)


def _foreign_pointer_signature(self):
    """`array.foreign_pointer` (a property: bound to its array)."""


METHOD_SIGNATURES["Array.foreign_pointer"] = _foreign_pointer_signature


# ---------------------------------------------------------------------------
# Foreign pointers
# ---------------------------------------------------------------------------
def first_element_address(a: ArrayValue) -> TileValue:
    """The address of `a`'s first element (a slice's first element of its window)."""
    index = [as_value(windows.offset(a, d), dt.int32) for d in range(a.ndim)]
    index = [cast(i, dt.int32) for i in index]
    op = pointer_ops.ArrayAddressOp(a.value, [i.value for i in index])
    return wrap(op.result, dt.int64)


def _foreign_pointer(self):
    a = array_arg(self, "foreign_pointer's array")
    return ForeignPointerValue(first_element_address(a).value, dt.foreign_pointer_dtype(a.dtype))


RULES["Array.foreign_pointer"] = _foreign_pointer


def _extents(values, what: str) -> tuple[list, bool]:
    """A from_foreign shape or strides: each a non-negative compile-time int or a signed
    integer scalar; whether one of them is 64-bit."""
    if not isinstance(values, tuple):
        raise type_error(f"{what} must be a tuple of signed integers (compile-time or "
                         f"scalars), got {describe(values)}")
    wide = False
    for i, v in enumerate(values):
        if isinstance(v, bool) or isinstance(v, float):
            raise type_error(f"{what}[{i}] must be an integer, got {describe(v)}")
        if isinstance(v, int):
            if v < 0:
                raise value_error(f"{what}[{i}] must be non-negative, got {v}")
            continue
        if not (isinstance(v, TileValue) and v.is_scalar and v.dtype.is_int):
            raise type_error(f"{what}[{i}] must be an integer scalar, got {describe(v)}")
        if not v.dtype.is_signed:
            raise type_error(f"{what}[{i}] must be a signed integer, got {describe(v)}")
        wide = wide or v.dtype.bits > 32
    return list(values), wide


@method(Array, "from_foreign")
def _from_foreign(pointer, shape, strides):
    if not isinstance(pointer, ForeignPointerValue):
        raise type_error(f"Array.from_foreign needs a scalar foreign pointer (an array's "
                         f"foreign_pointer), got {describe(pointer)}")
    dims, _ = _extents(shape, "shape")
    steps, _ = _extents(strides, "strides")
    if len(dims) != len(steps):
        raise type_error(f"shape and strides must have the same rank, got {len(dims)} dims "
                         f"and {len(steps)} strides")
    for i, d in enumerate(dims):
        if isinstance(d, int) and d >= 1 << 31:
            raise value_error(f"shape[{i}] is {d}: tileir indexes an array dim with 32 bits "
                              f"(at most {(1 << 31) - 1})")
    pointee = pointer.dtype.pointee
    extents = [cast(as_value(v, dt.int64), dt.int64).value for v in dims + steps]
    result = array_type(_array_element(pointee), len(dims))
    op = pointer_ops.MakeArrayOp(result, pointer.value, extents[:len(dims)],
                                 extents[len(dims):])
    static = lambda vs: tuple((d, v) for d, v in enumerate(vs)  # noqa: E731
                              if isinstance(v, int))
    return ArrayValue(op.result, pointee, len(dims), "from_foreign", static(dims),
                      static(steps))


def _array_element(d: dt.DType):
    """The element type of `!tile.array` for `d` (unsigned ints keep their sign)."""
    from mlir import ir
    return ir.Type.parse(d.array_mlir)


# ---------------------------------------------------------------------------
# Raw array memory
# ---------------------------------------------------------------------------
@method(Array, "get_raw_memory")
def _get_raw_memory(self):
    a = array_arg(self, "get_raw_memory's array")
    raw = pointer_ops.RawMemoryOp(array_type(_array_element(a.dtype), 1),
                                  first_element_address(a).value)
    return RawMemoryValue(ArrayValue(raw.result, a.dtype, 1, f"{a.name} (raw memory)"))


def attribute(obj, attr: str):
    """`obj.attr` of a foreign pointer or raw memory: a value, or the rule name of a
    method (the compiler binds it)."""
    if isinstance(obj, RawMemoryValue):
        if attr == "dtype":
            return obj.dtype
        key = f"RawArrayMemory.{attr}"
        if key in RULES:
            return key
        raise type_error(f"RawArrayMemory has no attribute '{attr}' (it has dtype, "
                         f"{', '.join(_RAW_METHODS)})")
    if attr == "dtype":
        return obj.dtype
    raise type_error(f"a foreign pointer has no attribute '{attr}': it has its dtype, and "
                     f"becomes an array with ct.Array.from_foreign(pointer, shape, strides)")


def _raw(x) -> ArrayValue:
    if not isinstance(x, RawMemoryValue):
        raise type_error(f"expected an array's raw memory (get_raw_memory()), got "
                         f"{describe(x)}")
    return x.array


def _offset(offset) -> tuple[TileValue, tuple[int, ...]]:
    """The offset as a signed index tile of at least rank 1, and its own shape."""
    v = as_value(offset) if is_number(offset) and not isinstance(offset, float) else offset
    if not isinstance(v, TileValue) or not v.dtype.is_int:
        raise type_error(f"the offset must be an integer scalar or tile, got {describe(offset)}")
    if not v.dtype.is_signed:               # unsigned: widened, so that no sign appears
        v = cast(v, dt.int64 if v.dtype.bits >= 32 else dt.int32)
    elif v.dtype.bits < 32:
        v = cast(v, dt.int32)
    shape = v.shape
    return broadcast_to(v, shape or (1,)), shape


def _fits(x, shape: tuple[int, ...], what: str) -> None:
    """cuTile's rule: the operand broadcasts to the offset's shape (not the other way)."""
    got = x.shape if isinstance(x, TileValue) else ()
    if len(got) > len(shape) or any(g not in (1, s) for g, s in
                                    zip(reversed(got), reversed(shape))):
        raise type_error(f"{what} shape {got} is not broadcastable to the offset shape {shape}")


def _operand(x, d: dt.DType, shape, what: str) -> TileValue:
    if not (is_number(x) or isinstance(x, TileValue)):
        raise type_error(f"{what} must be a scalar or a tile, got {describe(x)}")
    _fits(x, shape, what)
    t = constant(x, d) if is_number(x) else cast(x, d)
    return broadcast_to(t, shape or (1,))


def _mask(mask, shape) -> TileValue:
    if mask is None:
        return constant(True, dt.bool_, shape or (1,))
    if not (isinstance(mask, TileValue) and mask.dtype.is_bool or isinstance(mask, bool)):
        raise type_error(f"the mask must be a bool tile or scalar, got {describe(mask)}")
    _fits(mask, shape, "the mask")
    return broadcast_to(as_value(mask), shape or (1,))


def _result(v: TileValue, shape) -> TileValue:
    return v if shape else reshape(v, ())


@method(RawArrayMemory, "load_offset")
def _load_offset(self, offset, mask, padding_value, latency):
    a = _raw(self)
    _latency(latency)
    index, shape = _offset(offset)
    pad = _operand(0 if padding_value is None else padding_value, a.dtype, shape,
                   "the padding value")
    op = indexed_ops.GatherOp(a.value, _mask(mask, shape).value, pad.value, [index.value],
                              False)
    return _result(wrap(op.result, a.dtype), shape)


@method(RawArrayMemory, "store_offset")
def _store_offset(self, offset, value, mask, latency):
    a = _raw(self)
    _latency(latency)
    index, shape = _offset(offset)
    v = _operand(value, a.dtype, shape, "the value")
    indexed_ops.ScatterOp(a.value, v.value, _mask(mask, shape).value, [index.value], False)
    return None


def _atomic_raw(self, name: str) -> ArrayValue:
    a = _raw(self)
    if a.dtype.name not in ATOMIC_DTYPES[name]:
        raise type_error(f"atomic_{name}_offset does not take the raw memory of a "
                         f"{a.dtype.name} array (it takes {', '.join(ATOMIC_DTYPES[name])})")
    return a


def _rmw(name: str):
    def fn(self, offset, update, mask, memory_order, memory_scope):
        a = _atomic_raw(self, name)
        order, scope = _order_scope(memory_order, memory_scope)
        index, shape = _offset(offset)
        if name in ("and", "or", "xor") and isinstance(update, TileValue) and \
                update.dtype != a.dtype:
            raise type_error(f"atomic_{name}_offset needs an update of the array's dtype "
                             f"{a.dtype.name}, got {update.dtype.name}")
        u = _operand(update, a.dtype, shape, "the update")
        kind = "u" + name if name in ("min", "max") and not a.dtype.is_signed else name
        op = indexed_ops.AtomicRMWOp(a.value, u.value, _mask(mask, shape).value,
                                     [index.value], kind, order, scope, False)
        return _result(wrap(op.result, a.dtype), shape)
    return fn


_RAW_METHODS = ["load_offset", "store_offset", "atomic_cas_offset"]
for _name in ("xchg", "add", "max", "min", "and", "or", "xor"):
    method(RawArrayMemory, f"atomic_{_name}_offset")(_rmw(_name))
    _RAW_METHODS.append(f"atomic_{_name}_offset")


@method(RawArrayMemory, "atomic_cas_offset")
def _atomic_cas_offset(self, offset, expected, desired, mask, memory_order, memory_scope):
    a = _atomic_raw(self, "cas")
    order, scope = _order_scope(memory_order, memory_scope)
    index, shape = _offset(offset)
    e = _operand(expected, a.dtype, shape, "the expected value")
    d = _operand(desired, a.dtype, shape, "the desired value")
    op = indexed_ops.AtomicCasOp(a.value, e.value, d.value, _mask(mask, shape).value,
                                 [index.value], order, scope, False)
    return _result(wrap(op.result, a.dtype), shape)


# `tileir.foreign_pointer_dtype` is a host function kernels may call too (constant-folded)
METHOD_SIGNATURES["foreign_pointer_dtype"] = dt.foreign_pointer_dtype
METHOD_NAMES[dt.foreign_pointer_dtype] = "foreign_pointer_dtype"
RULES["foreign_pointer_dtype"] = lambda pointee_dtype: _pointer_dtype(pointee_dtype)


def _pointer_dtype(pointee):
    try:
        return dt.foreign_pointer_dtype(pointee)
    except TypeError as e:
        raise type_error(str(e)) from None


__all__ = ["attribute", "first_element_address"]
