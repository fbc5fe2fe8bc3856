"""The simulator's models of memory ops: shared-memory memrefs, LLVM loads, stores and
address arithmetic on global and shared memory (every access checked to lie inside an
argument array or the block's shared memory), LLVM structs and vectors."""

from __future__ import annotations

import re

import numpy as np
from mlir import ir

from .rules import (DYNAMIC, SharedRef, SimError, by_type, nbytes_of, np_dtype, op, operands,
                    static)


# -- memref (shared memory) ----------------------------------------------------------------
@op("memref.view")
def _view(sim, blk, o, mask):
    src, shift = operands(sim, blk, o)[:2]
    t = ir.MemRefType(o.results[0].type)
    return SharedRef(src.offset + np.asarray(shift, np.int64), np_dtype(t.element_type))


@op("memref.extract_aligned_pointer_as_index")
def _extract_ptr(sim, blk, o, mask):
    return operands(sim, blk, o)[0].offset.copy()


@op("memref.load")
def _mload(sim, blk, o, mask):
    ref, idx = operands(sim, blk, o)
    addr = ref.offset + np.asarray(idx, np.int64) * ref.dtype.itemsize
    return read_memory(sim, blk, 3, addr, ref.dtype, mask, None)


@op("memref.store")
def _mstore(sim, blk, o, mask):
    value, ref, idx = operands(sim, blk, o)
    addr = ref.offset + np.asarray(idx, np.int64) * ref.dtype.itemsize
    write_memory(sim, blk, 3, addr, np.asarray(value, ref.dtype), mask)


# -- memory --------------------------------------------------------------------------------
def _space(t: ir.Type) -> int:
    return by_type("space", t, _address_space)


def _address_space(t: ir.Type) -> int:
    m = re.match(r"!llvm\.ptr(?:<(\d+)>)?", str(t))
    return int(m.group(1) or 0) if m else 0


def _is_pointer(t: ir.Type) -> bool:
    return by_type("pointer", t, lambda t: str(t).startswith("!llvm.ptr"))


def read_memory(sim, blk, space, addr, dtype, mask, count) -> np.ndarray:
    """Per active thread, `count` (None: one scalar) elements of `dtype` at `addr`."""
    n = dtype.itemsize * (count or 1)
    out = np.zeros((sim.threads, n), np.uint8)
    if mask.any():
        a = np.asarray(addr, np.int64)[mask]
        data = blk.shared.read(a, n) if space == 3 else sim.memory.read(a, n)
        out[mask] = data
    vals = out.view(dtype if dtype != np.bool_ else np.uint8)
    if dtype == np.bool_:
        vals = vals != 0
    return vals.reshape(sim.threads) if count is None else vals.reshape(sim.threads, count)


def write_memory(sim, blk, space, addr, value, mask) -> None:
    if not mask.any():
        return
    value = np.ascontiguousarray(value)
    if value.dtype == np.bool_:
        value = value.astype(np.uint8)
    raw = value.view(np.uint8).reshape(sim.threads, -1)[mask]
    a = np.asarray(addr, np.int64)[mask]
    if space == 3:
        blk.shared.write(a, raw)
    else:
        sim.memory.write(a, raw)


@op("llvm.load")
def _load(sim, blk, o, mask):
    (ptr,) = operands(sim, blk, o)
    space, dtype, count = static(sim, o, _load_static)
    return read_memory(sim, blk, space, ptr, dtype, mask, count)


def _load_static(o) -> tuple:
    """(address space, element dtype, elements: None for a scalar) of an llvm.load."""
    t = o.results[0].type
    space = _space(o.operands[0].type)
    if isinstance(t, ir.VectorType):
        return space, np_dtype(t.element_type), t.shape[0]
    return space, np_dtype(t), None


@op("llvm.store")
def _store(sim, blk, o, mask):
    value, ptr = operands(sim, blk, o)
    write_memory(sim, blk, static(sim, o, lambda o: _space(o.operands[1].type)), ptr, value,
                 mask)


@op("llvm.intr.masked.load")
def _masked_load(sim, blk, o, mask):
    ptr, m, passthru = operands(sim, blk, o)
    t = o.results[0].type
    dtype = np_dtype(t.element_type)
    out = np.array(passthru, copy=True)
    for j in range(t.shape[0]):
        lane_mask = mask & np.asarray(m)[:, j]
        vals = read_memory(sim, blk, _space(o.operands[0].type), ptr + j * dtype.itemsize, dtype,
                     lane_mask, None)
        out[:, j] = np.where(lane_mask, vals, out[:, j])
    return out


@op("llvm.intr.masked.store")
def _masked_store(sim, blk, o, mask):
    value, ptr, m = operands(sim, blk, o)
    dtype = np.asarray(value).dtype
    for j in range(np.asarray(value).shape[1]):
        write_memory(sim, blk, _space(o.operands[1].type), ptr + j * dtype.itemsize,
               np.asarray(value)[:, j], mask & np.asarray(m)[:, j])


@op("llvm.getelementptr")
def _gep(sim, blk, o, mask):
    base_value, size, index, dynamic = static(sim, o, lambda o: _gep_static(sim, o))
    base = np.asarray(blk.env[base_value], np.int64)
    idx = np.asarray(blk.env[index], np.int64) if dynamic else index
    return base + idx * size


def _gep_static(sim, o):
    """(the base operand's number, the element's size, the index: a constant or the
    operand's number, whether it is the operand)."""
    size = nbytes_of(ir.TypeAttr(o.attributes["elem_type"]).value)
    raw = list(ir.DenseI32ArrayAttr(o.attributes["rawConstantIndices"]))
    if len(raw) != 1:
        raise SimError("getelementptr with more than one index is not modelled")
    operands_ = list(o.operands)
    dynamic = raw[0] == DYNAMIC
    return (sim.vid(operands_[0]), size, sim.vid(operands_[1]) if dynamic else raw[0],
            dynamic)


@op("llvm.inttoptr", "llvm.ptrtoint", "llvm.addrspacecast")
def _ptr_cast(sim, blk, o, mask):
    (a,) = operands(sim, blk, o)
    t = o.results[0].type
    return np.asarray(a).astype(np.int64) if _is_pointer(t) else \
        np.asarray(a).astype(np_dtype(t))


@op("llvm.mlir.undef", "llvm.mlir.poison")
def _undef(sim, blk, o, mask):
    # zeros of the type, made once a simulation and shared as constants are (no rule
    # writes into its operands): an accumulator's struct of 64 fields took ~60 us a trip
    t = o.results[0].type
    found = sim.constants.get(("undef", t))
    if found is None:
        found = sim.constants["undef", t] = sim.full(0, t)
    return found


@op("llvm.insertvalue")
def _insertvalue(sim, blk, o, mask):
    s, v = operands(sim, blk, o)
    i = static(sim, o, _position)
    s = list(s)
    s[i] = v
    return tuple(s)


@op("llvm.extractvalue")
def _extractvalue(sim, blk, o, mask):
    (s,) = operands(sim, blk, o)
    return s[static(sim, o, _position)]


def _position(o) -> int:
    (i,) = list(ir.DenseI64ArrayAttr(o.attributes["position"]))
    return i


@op("llvm.insertelement")
def _insertelement(sim, blk, o, mask):
    vec, v, i = operands(sim, blk, o)
    out = np.array(vec, copy=True)
    out[np.arange(sim.threads), np.asarray(i, np.int64)] = v
    return out


@op("vector.from_elements")
def _from_elements(sim, blk, o, mask):
    return np.stack([np.asarray(v) for v in operands(sim, blk, o)], axis=1)


@op("vector.extract")
def _vextract(sim, blk, o, mask):
    v = operands(sim, blk, o)[0]
    (pos,) = list(ir.DenseI64ArrayAttr(o.attributes["static_position"]))
    return np.asarray(v)[:, pos]


@op("vector.broadcast")
def _vbroadcast(sim, blk, o, mask):
    (v,) = operands(sim, blk, o)
    n = o.results[0].type.shape[0]
    return np.repeat(np.asarray(v)[:, None], n, axis=1)


