"""Trace-time rules of element-indexed memory: `gather`, `scatter` and the atomics
(`atomic_add and or xor min max xchg cas`), with cuTile's names and semantics.

`indices` holds one integer tile or scalar per array dim; they broadcast with the
mask (and the padding, value or update operands) to one shape, the result's.
With `check_bounds` (the default) an index outside its dim (negative ones too)
makes the element inactive: a gather reads the padding, a scatter or atomic does
nothing (an atomic then returns its update, `atomic_cas` its `expected`).
Atomics return the old values; the memory order and scope go to the op as
strings (`tile.atomic_rmw` / `tile.atomic_cas`, docs/tile-ir.md).  On a slice
(`Array.slice`) indices count from the slice's start and its extents are the
bounds (`windows.element_indices`).
"""

from __future__ import annotations

from .. import dtypes as dt
from ..annotations import Slice
from ..api import PaddingMode
from ..semantics import MemoryOrder, MemoryScope
from tileir.dialect import indexed as indexed_ops, tile as tile_ops
from . import compute, windows
from .emit import (as_value, broadcast_shapes, broadcast_to, cast, constant, is_number,
                   reshape, tensor_type, type_error, wrap)
from .intrinsics import array_arg, rule
from .values import TileValue, describe

_ORDERS = {MemoryOrder.RELAXED: "relaxed", MemoryOrder.ACQUIRE: "acquire",
           MemoryOrder.RELEASE: "release", MemoryOrder.ACQ_REL: "acq_rel"}
_SCOPES = {MemoryScope.BLOCK: "block", MemoryScope.DEVICE: "device", MemoryScope.SYS: "sys"}


def _flag(x, what: str) -> bool:
    if not isinstance(x, bool):
        raise type_error(f"{what} must be a compile-time bool, got {describe(x)}")
    return x


def _latency(latency) -> None:
    if latency is not None and not (isinstance(latency, int) and 1 <= latency <= 10):
        raise type_error(f"latency must be an int in 1..10, got {describe(latency)}")


def _index_tiles(a, indices) -> list[TileValue]:
    if not isinstance(indices, tuple):
        indices = (indices,)
    if len(indices) != a.ndim:
        raise type_error(f"indices has {len(indices)} entries but the array has {a.ndim} dims "
                         f"(one element index per dim)")
    out = []
    for k, i in enumerate(indices):
        v = as_value(i) if is_number(i) else i
        if not isinstance(v, TileValue) or not v.dtype.is_int:
            raise type_error(f"index {k} must be an integer tile or scalar, got {describe(i)}")
        if not v.dtype.is_signed:            # unsigned: widened so that the sign is right
            v = cast(v, dt.int64 if v.dtype.bits >= 32 else dt.int32)
        elif v.dtype.bits < 32:
            v = cast(v, dt.int32)
        out.append(v)
    return out


def _shape_of(values) -> tuple[int, ...]:
    shape: tuple[int, ...] = ()
    for v in values:
        if isinstance(v, TileValue):
            shape = broadcast_shapes(shape, v.shape)
    return shape


def _full(v, d: dt.DType, shape) -> TileValue:
    """`v` (a tile, scalar or number) as a tile of dtype `d` and `shape` (>= rank 1)."""
    t = constant(v, d) if is_number(v) else cast(v, d)
    return broadcast_to(t, shape)


def _mask(mask, shape) -> TileValue:
    if mask is None:
        return constant(True, dt.bool_, shape)
    if is_number(mask):
        return constant(bool(mask), dt.bool_, shape)
    if not isinstance(mask, TileValue) or not mask.dtype.is_bool:
        raise type_error(f"mask must be a bool tile or scalar, got {describe(mask)}")
    return broadcast_to(mask, shape)


def _operands(a, indices, *extra):
    """Index tiles, the common shape (at least (1,)) and whether the result is a scalar."""
    idx = _index_tiles(a, indices)
    if any(i.dtype.bits == 64 for i in idx):        # one index type (a variadic group)
        idx = [cast(i, dt.int64) for i in idx]
    shape = _shape_of([*idx, *extra])
    scalar = shape == ()
    shape = shape or (1,)
    return [broadcast_to(i, shape) for i in idx], shape, scalar


def _result(v: TileValue, scalar: bool):
    return reshape(v, ()) if scalar else v


@rule("gather")
def _gather(array, indices, mask, padding_value, check_bounds, latency):
    a = array_arg(array, "array")
    _latency(latency)
    check = _flag(check_bounds, "check_bounds")
    idx, shape, scalar = _operands(a, indices, mask, padding_value)
    pad = _full(padding_value, a.dtype, shape)
    idx, m = windows.element_indices(a, idx, _mask(mask, shape), check)
    op = indexed_ops.GatherOp(a.value, m.value, pad.value, [i.value for i in idx], check)
    return _result(wrap(op.result, a.dtype), scalar)


@rule("scatter")
def _scatter(array, indices, value, mask, check_bounds, latency):
    a = array_arg(array, "array")
    _latency(latency)
    check = _flag(check_bounds, "check_bounds")
    idx, shape, _ = _operands(a, indices, mask, value)
    v = _full(value, a.dtype, shape)
    idx, m = windows.element_indices(a, idx, _mask(mask, shape), check)
    indexed_ops.ScatterOp(a.value, v.value, m.value, [i.value for i in idx], check)
    return None


def _order_scope(memory_order, memory_scope) -> tuple[str, str]:
    if not isinstance(memory_order, MemoryOrder) or memory_order not in _ORDERS:
        raise type_error(f"atomics take memory_order RELAXED, ACQUIRE, RELEASE or ACQ_REL, got "
                         f"{describe(memory_order)}")
    if not isinstance(memory_scope, MemoryScope) or memory_scope not in _SCOPES:
        raise type_error(f"atomics take memory_scope BLOCK, DEVICE or SYS, got "
                         f"{describe(memory_scope)}" + (
                             " (CLUSTER is cuda.lang's, not cuTile's)"
                             if memory_scope == MemoryScope.CLUSTER else ""))
    return _ORDERS[memory_order], _SCOPES[memory_scope]


_INTS = ("int32", "int64", "uint32", "uint64")
# Array dtypes each atomic takes (cuTile's table).
ATOMIC_DTYPES = {"add": _INTS + ("float32", "float64", "float16", "bfloat16"),
                 "xchg": _INTS + ("float32", "float64"), "cas": _INTS + ("float32", "float64"),
                 "min": _INTS, "max": _INTS, "and": _INTS, "or": _INTS, "xor": _INTS}


def _atomic_array(array, name: str):
    a = array_arg(array, "array")
    if a.dtype.name not in ATOMIC_DTYPES[name]:
        raise type_error(f"atomic_{name} does not take arrays of {a.dtype.name} (it takes "
                         f"{', '.join(ATOMIC_DTYPES[name])})")
    return a


def _update(v, a, name: str, shape) -> TileValue:
    if name in ("and", "or", "xor") and isinstance(v, TileValue) and v.dtype != a.dtype:
        raise type_error(f"atomic_{name} needs an update of the array's dtype {a.dtype.name}, "
                         f"got {v.dtype.name}")
    return _full(v, a.dtype, shape)


def _rmw(name: str):
    def fn(array, indices, update, check_bounds, memory_order, memory_scope):
        a = _atomic_array(array, name)
        check = _flag(check_bounds, "check_bounds")
        order, scope = _order_scope(memory_order, memory_scope)
        idx, shape, scalar = _operands(a, indices, update)
        u = _update(update, a, name, shape)
        kind = name
        if name in ("min", "max") and not a.dtype.is_signed:
            kind = "u" + name
        idx, m = windows.element_indices(a, idx, _mask(None, shape), check)
        op = indexed_ops.AtomicRMWOp(a.value, u.value, m.value, [i.value for i in idx], kind,
                                     order, scope, check)
        return _result(wrap(op.result, a.dtype), scalar)
    return fn


for _name in ("add", "and", "or", "xor", "min", "max", "xchg"):
    rule(f"atomic_{_name}")(_rmw(_name))


@rule("atomic_cas")
def _atomic_cas(array, indices, expected, desired, check_bounds, memory_order, memory_scope):
    a = _atomic_array(array, "cas")
    check = _flag(check_bounds, "check_bounds")
    order, scope = _order_scope(memory_order, memory_scope)
    idx, shape, scalar = _operands(a, indices, expected, desired)
    e, d = _full(expected, a.dtype, shape), _full(desired, a.dtype, shape)
    idx, m = windows.element_indices(a, idx, _mask(None, shape), check)
    op = indexed_ops.AtomicCasOp(a.value, e.value, d.value, m.value, [i.value for i in idx],
                                 order, scope, check)
    return _result(wrap(op.result, a.dtype), scalar)


# ---------------------------------------------------------------------------
# Advanced indexing: one sparse dim, Slices elsewhere
# ---------------------------------------------------------------------------
def _advanced(a, indices, what: str):
    """(index tiles broadcast to the implied shape, that shape)."""
    if not isinstance(indices, tuple) or len(indices) != a.ndim:
        raise type_error(f"{what} takes a tuple of {a.ndim} indices (one per array dim), got "
                         f"{describe(indices)}")
    sparse = [d for d, i in enumerate(indices) if isinstance(i, TileValue)]
    if len(sparse) != 1:
        raise type_error(f"{what} needs exactly one 1-D integer index tile (the sparse dim) "
                         f"and Slice(start, length) in every other dim, got {len(sparse)} "
                         f"tiles")
    shape = []
    for d, i in enumerate(indices):
        if isinstance(i, TileValue):
            if i.ndim != 1 or not i.dtype.is_int:
                raise type_error(f"the sparse index (dim {d}) must be a 1-D integer tile, got "
                                 f"{i.describe()}")
            shape.append(i.shape[0])
        elif isinstance(i, Slice):
            shape.append(i.length)
        else:
            raise type_error(f"index {d} must be a Slice(start, length) or the sparse index "
                             f"tile, got {describe(i)}")
    shape = tuple(shape)
    tiles = []
    for d, i in enumerate(indices):
        along = tuple(shape[d] if k == d else 1 for k in range(a.ndim))
        if isinstance(i, TileValue):
            t = reshape(cast(i, dt.int32) if i.dtype.bits < 32 else i, along)
        else:
            iota = wrap(tile_ops.IotaOp(tensor_type((i.length,), dt.int32)).result, dt.int32)
            start = i.start if isinstance(i.start, TileValue) else constant(i.start, dt.int32)
            t = reshape(compute.binary("+", iota, cast(start, dt.int32)), along)
        tiles.append(broadcast_to(t, shape))
    if any(t.dtype.bits == 64 for t in tiles):
        tiles = [cast(t, dt.int64) for t in tiles]
    return tiles, shape


@rule("load_advanced_indexing")
def _load_advanced(array, indices, padding_mode, latency, allow_tma):
    a = array_arg(array, "array")
    _latency(latency)
    if not isinstance(padding_mode, PaddingMode):
        raise type_error(f"padding_mode must be a tileir.PaddingMode, got {describe(padding_mode)}")
    if padding_mode.value not in ("zero", "undetermined") and not a.dtype.is_float:
        raise type_error(f"padding_mode {padding_mode.name} needs a float array, got "
                         f"{a.dtype.name}")
    tiles, shape = _advanced(a, indices, "load_advanced_indexing")
    pad = _full(windows.PADDING_VALUES[padding_mode.value], a.dtype, shape)
    tiles, m = windows.element_indices(a, tiles, _mask(None, shape), True)
    op = indexed_ops.GatherOp(a.value, m.value, pad.value, [t.value for t in tiles], True)
    return wrap(op.result, a.dtype)


@rule("store_advanced_indexing")
def _store_advanced(array, indices, tile, latency, allow_tma):
    a = array_arg(array, "array")
    _latency(latency)
    tiles, shape = _advanced(a, indices, "store_advanced_indexing")
    if isinstance(tile, TileValue) and not tile.is_scalar and tile.shape != shape:
        raise type_error(f"store_advanced_indexing's tile has shape {tile.shape}; the indices "
                         f"give {shape}")
    v = _full(tile, a.dtype, shape)
    tiles, m = windows.element_indices(a, tiles, _mask(None, shape), True)
    indexed_ops.ScatterOp(a.value, v.value, m.value, [t.value for t in tiles], True)
    return None
