"""Rules for the `tile` dialect: grid queries, array access, shapes, reductions, mma.

Arrays are held in the frame as NumPy arrays already viewed in the tile's
storage dtype (a `ui8` array as int8, bf16 bits as bfloat16), so loads and
stores move bits without conversion.
"""

from __future__ import annotations

import re
import sys

import numpy as np
from mlir import ir

from tileir.dialect.debug import printf_spans
from tileir.dialect.types import array_info

from .compiler import (CHECKED, LAUNCH_SLOT, CompileContext, Step, constant, pure, rule,
                       wrong_result)
from .dtypes import F64, Elem, as_signed, as_unsigned, elem_of, shape_of
from .errors import Fault, UnsupportedOpError


# ---------------------------------------------------------------------------
# Grid and array queries
# ---------------------------------------------------------------------------
@rule("tile.bid")
def _bid(op, cx: CompileContext) -> Step:
    out, axis = cx.define(op.result), op.axis
    (_, dtype, shape), = cx._expected_results(op)

    # (checked here, as `pure`'s steps are: a block id is read in every block)
    def step(frame):
        frame[out] = v = frame[LAUNCH_SLOT].bid[axis]
        if v.dtype is not dtype and v.dtype != dtype or v.shape != shape:
            raise wrong_result(v, dtype, shape)
    setattr(step, CHECKED, True)
    return step


# tile.grid_size, the grid a persistent kernel walks, is the launch's: the
# interpreter runs that grid itself (one block per tile)
@rule("tile.num_blocks", "tile.grid_size")
def _num_blocks(op, cx: CompileContext) -> Step:
    out, axis = cx.define(op.result), op.axis

    def step(frame):
        frame[out] = np.int32(frame[LAUNCH_SLOT].grid[axis])
    return step


@rule("tile.dim")
def _dim(op, cx: CompileContext) -> Step:
    axis = op.axis
    return pure(op, cx, lambda array: np.int32(array.shape[axis]))


@rule("tile.stride")
def _stride(op, cx: CompileContext) -> Step:
    axis = op.axis
    # Argument binding checked that byte strides are whole elements.
    return pure(op, cx, lambda array: np.int32(array.strides[axis] // array.itemsize))


@rule("tile.select_array")
def _select_array(op, cx: CompileContext) -> Step:
    index, *arrays = cx.slots(op.operands)
    out, n = cx.define(op.result), len(arrays)

    def step(frame):
        i = int(frame[index])
        if not 0 <= i < n:
            raise Fault(f"index {i} is out of range for a list of {n} arrays")
        frame[out] = frame[arrays[i]]
    return step


@rule("tile.list_get")
def _list_get(op, cx: CompileContext) -> Step:
    raise UnsupportedOpError.at(
        op.location, "tile.list_get reads a list's table of device addresses, which the "
        "interpreter cannot follow: a list whose length is known at launch only (an "
        "exported kernel's ListConstraint) runs on the GPU; a launch compiles lists with "
        "their length")


# ---------------------------------------------------------------------------
# Loads and stores
# ---------------------------------------------------------------------------
def padding_value(padding: str, e: Elem, array_elem: ir.Type) -> np.generic:
    """The value a load reads outside the array (docs/tile-ir.md, tile.load)."""
    if padding == "undetermined":
        # Unspecified by the contract; zero, what the GPU reads there (TMA's fill, the
        # masked loads' padding) and what cuTile's own kernels count on (an attention
        # tail's V rows multiplied by p = 0).
        return e.scalar(0)
    values = {"zero": 0.0, "neg_zero": -0.0, "neg_inf": -np.inf, "pos_inf": np.inf,
              "nan": np.nan}
    if padding not in values:
        raise Fault(f"unknown padding mode '{padding}'")
    return e.scalar(values[padding] if e.is_float else 0)


def _window(indices, tile_shape, array_shape):
    """The part of tile `indices` inside the array, as (array slices, tile slices).

    Returns None when the tile lies entirely outside.  Tile index `i` covers
    elements [i*s, (i+1)*s) of its dim; negative indices are simply out of range.
    """
    src, dst = [], []
    for i, s, dim in zip(indices, tile_shape, array_shape):
        start = int(i) * s
        end = start + s
        # (conditional expressions, not max and min: this runs for every load and store)
        lo = start if start > 0 else 0
        hi = end if end < dim else dim
        if hi <= lo:
            return None
        src.append(slice(lo, hi))
        dst.append(slice(lo - start, hi - start))
    return tuple(src), tuple(dst)


@rule("tile.load")
def _load(op, cx: CompileContext) -> Step:
    load = _load_tile(elem_of(op.result.type), tuple(op.tile_shape), op.padding, op.array.type)
    array_slot, index_slots, out = cx.slot(op.array), cx.slots(op.index), cx.define(op.result)
    (_, dtype, shape), = cx._expected_results(op)

    # The result checked against its IR type here, as `pure` does (a load is the
    # interpreter's second most common step after pure ones).
    def step(frame):
        frame[out] = v = load(frame[array_slot], [frame[s] for s in index_slots])
        if v.dtype is not dtype and v.dtype != dtype or v.shape != shape:
            raise wrong_result(v, dtype, shape)
    setattr(step, CHECKED, True)
    return step


def _load_tile(e: Elem, shape: tuple, padding: str, array_type: ir.Type):
    """`load(array, indices)`: the tile at tile index `indices`, padded outside."""
    pad = padding_value(padding, e, array_info(array_type).element_type)

    def load(array, indices):
        window = _window(indices, shape, array.shape)
        if window is None:
            return np.full(shape, pad, dtype=e.storage)
        src, dst = window
        part = array[src]
        if part.shape == shape:
            return np.array(part)  # a copy: later stores must not change this tile
        tile = np.full(shape, pad, dtype=e.storage)
        tile[dst] = part
        return tile
    return load


@rule("tile.store")
def _store(op, cx: CompileContext) -> Step:
    shape = shape_of(op.tile.type)
    array_slot, tile_slot = cx.slot(op.array), cx.slot(op.tile)
    index_slots = cx.slots(op.index)

    def step(frame):
        array = frame[array_slot]
        if not array.flags.writeable:
            raise Fault("cannot store into a read-only array argument")
        window = _window([frame[s] for s in index_slots], shape, array.shape)
        if window is not None:  # elements outside the array are dropped
            src, dst = window
            array[src] = np.asarray(frame[tile_slot])[dst]
    return step


# ---------------------------------------------------------------------------
# Construction and shape
# ---------------------------------------------------------------------------
@rule("tile.iota")
def _iota(op, cx: CompileContext) -> Step:
    t = op.result.type
    value = np.arange(t.shape[0], dtype=elem_of(t).storage)
    value.flags.writeable = False  # shared by every execution: tiles are immutable
    return constant(op, cx, value)


@rule("tile.broadcast")
def _broadcast(op, cx: CompileContext) -> Step:
    shape = shape_of(op.result.type)
    return pure(op, cx, lambda x: np.broadcast_to(x, shape))


@rule("tile.reshape")
def _reshape(op, cx: CompileContext) -> Step:
    shape = shape_of(op.result.type)
    return pure(op, cx, lambda x: np.reshape(x, shape))


@rule("tile.convert_layout")
def _convert_layout(op, cx: CompileContext) -> Step:
    # A layout says which thread holds which element; the values are unchanged.
    return pure(op, cx, lambda x: x)


@rule("tile.permute")
def _permute(op, cx: CompileContext) -> Step:
    perm = tuple(op.permutation)
    return pure(op, cx, lambda x: np.transpose(x, perm))


def _window_of(offsets, shape, whole) -> tuple[slice, ...]:
    window = []
    for o, n, m in zip(offsets, shape, whole):
        o = int(o)
        if not 0 <= o <= m - n:
            raise Fault(f"the slice at offsets {[int(x) for x in offsets]} of shape "
                        f"{list(shape)} leaves the tile of shape {list(whole)}")
        window.append(slice(o, o + n))
    return tuple(window)


@rule("tile.extract_slice")
def _extract_slice(op, cx: CompileContext) -> Step:
    shape, whole = shape_of(op.result.type), shape_of(op.source.type)
    return pure(op, cx, lambda x, *offsets: np.array(x[_window_of(offsets, shape, whole)]))


@rule("tile.insert_slice")
def _insert_slice(op, cx: CompileContext) -> Step:
    shape, whole = shape_of(op.value.type), shape_of(op.dest.type)

    def insert(dest, value, *offsets):
        out = np.array(dest)
        out[_window_of(offsets, shape, whole)] = value
        return out
    return pure(op, cx, insert)


@rule("tile.concat")
def _concat(op, cx: CompileContext) -> Step:
    axis = op.axis
    return pure(op, cx, lambda a, b: np.concatenate([a, b], axis=axis))


# ---------------------------------------------------------------------------
# Matrix multiply
# ---------------------------------------------------------------------------
# The dtype every product is accumulated in before the single final rounding to the
# result's type.  i8 products: every partial sum is an integer below 2**53, so BLAS
# gives the exact result, which then wraps to i32 like the hardware.  Float products:
# each product of two f32, f16 or bf16 values is exact in float64; in float32, BLAS'
# sgemm sums in an order that depends on the CPU's SIMD kernel and on the operands'
# strides, so two kernels reading the same tiles through different views could differ
# in the last bit (seen on an AVX-512 machine with NumPy 2.4's OpenBLAS); in float64 the
# order moves only bits far below float32's rounding.
ACCUMULATOR = F64


def _round_result(result: Elem):
    if result.is_int:
        # Exact integer in float64 -> int64 -> wrap to the result width.
        return lambda r: r.astype(np.int64).astype(result.storage)
    return lambda r: r.astype(result.storage)


@rule("tile.mma")
def _mma(op, cx: CompileContext) -> Step:
    return pure(op, cx, _mma_fn(op))


def _mma_fn(op):
    """`a @ b + acc` at the accumulator's precision (tile.mma, tile.mma_async)."""
    acc = ACCUMULATOR
    result = elem_of(op.result.type)
    if result.is_int:
        # The accumulator is added in int64 so large i32 values stay exact.
        def fn(a, b, c):
            ab = np.matmul(a.astype(acc), b.astype(acc)).astype(np.int64)
            return (ab + c.astype(np.int64)).astype(result.storage)
    else:
        def fn(a, b, c):
            return (np.matmul(a.astype(acc), b.astype(acc)) + c.astype(acc)).astype(
                result.storage)
    return fn


@rule("tile.matmul")
def _matmul(op, cx: CompileContext) -> Step:
    acc = ACCUMULATOR
    round_to = _round_result(elem_of(op.result.type))
    return pure(op, cx, lambda a, b: round_to(np.matmul(a.astype(acc), b.astype(acc))))


# ---------------------------------------------------------------------------
# Element-indexed memory: gather, scatter, atomics
# ---------------------------------------------------------------------------
def _element_positions(array, indices, mask, check_bounds: bool):
    """(flat positions into `array`, and where each element acts): the element
    indices as one tuple of index arrays, and the acting mask."""
    idx = [np.asarray(i).astype(np.int64) for i in indices]
    act = np.asarray(mask, dtype=bool).copy()
    inside = np.ones(act.shape, dtype=bool)
    for i, n in zip(idx, array.shape):
        inside &= (i >= 0) & (i < n)
    if check_bounds:
        act &= inside
    elif (act & ~inside).any():
        raise Fault("an index lies outside the array and check_bounds is off")
    return tuple(np.where(act, i, 0) for i in idx), act


@rule("tile.gather")
def _gather(op, cx: CompileContext) -> Step:
    check = op.check_bounds

    def gather(array, mask, padding, *indices):
        where, act = _element_positions(array, indices, mask, check)
        return np.where(act, array[where], padding).astype(array.dtype)
    return pure(op, cx, gather)


@rule("tile.scatter")
def _scatter(op, cx: CompileContext) -> Step:
    slots = cx.slots(op.operands)
    check = op.check_bounds

    def step(frame):
        array, value, mask, *indices = (frame[s] for s in slots)
        if not array.flags.writeable:
            raise Fault("cannot store into a read-only array argument")
        where, act = _element_positions(array, indices, mask, check)
        array[tuple(i[act] for i in where)] = np.asarray(value)[act]
    return step


def _unsigned(x):
    return x.view(f"uint{x.dtype.itemsize * 8}") if x.dtype.kind == "i" else x


_RMW = {"add": lambda old, v: old + v, "and": lambda old, v: old & v,
        "or": lambda old, v: old | v, "xor": lambda old, v: old ^ v,
        "min": lambda old, v: min(old, v), "max": lambda old, v: max(old, v),
        "xchg": lambda old, v: v}


def _atomic(op, cx: CompileContext, n_values: int, apply) -> Step:
    """Atomics run element by element in row-major order: each one sees the writes of
    those before it (the GPU's order among threads is unspecified)."""
    slots = cx.slots(op.operands)
    out = cx.define(op.result)
    check = op.check_bounds

    def step(frame):
        array, *rest = (frame[s] for s in slots)
        values, mask, indices = rest[:n_values], rest[n_values], rest[n_values + 1:]
        if not array.flags.writeable:
            raise Fault("cannot update a read-only array argument")
        where, act = _element_positions(array, indices, mask, check)
        values = [np.asarray(v) for v in values]
        old = np.array(values[0], dtype=array.dtype)
        with np.errstate(over="ignore"):
            for c in zip(*np.nonzero(act)) if act.ndim else ([()] if act else []):
                at = tuple(w[c] for w in where)
                before = array[at]
                old[c] = before
                array[at] = apply(before, *(v[c] for v in values))
        frame[out] = old
    return step


@rule("tile.atomic_rmw")
def _atomic_rmw(op, cx: CompileContext) -> Step:
    kind = op.kind
    if kind in ("umin", "umax"):
        pick = min if kind == "umin" else max

        def apply(old, v):
            u = pick(_unsigned(np.asarray(old)), _unsigned(np.asarray(v)))
            return np.asarray(u).view(np.asarray(old).dtype)
    else:
        apply = _RMW[kind]
    return _atomic(op, cx, 1, apply)


@rule("tile.atomic_cas")
def _atomic_cas(op, cx: CompileContext) -> Step:
    def cas(old, expected, desired):           # the hardware compares bits (-0 != +0)
        same = np.asarray(old).tobytes() == np.asarray(expected, old.dtype).tobytes()
        return desired if same else old
    return _atomic(op, cx, 2, cas)


# ---------------------------------------------------------------------------
# Debugging: printf and assert
# ---------------------------------------------------------------------------
_LENGTH = re.compile(r"(hh|h|ll|l|z|j|t)(?=[diuoxXeEfFgGaA]$)")


def format_values(fmt: str, values, elems) -> str:
    """`fmt` with each conversion applied to its value: a tile as `[v, v, ...]`."""
    parts, pos = [], 0
    for (at, end, conv), value, e in zip(printf_spans(fmt), values, elems):
        parts.append(fmt[pos:at].replace("%%", "%"))
        py = _LENGTH.sub("", conv)
        if conv[-1] in "diuoxX":
            value = np.asarray(as_unsigned(e, np.asarray(value)) if conv[-1] in "uoxX"
                               else as_signed(e, np.asarray(value)))
        parts.append(_render(py, np.asarray(value)))
        pos = end
    parts.append(fmt[pos:].replace("%%", "%"))
    return "".join(parts)


def _render(conv: str, v: np.ndarray) -> str:
    if v.ndim == 0:
        x = v.item()
        return conv % (float(x) if conv[-1] in "eEfFgGaA" else int(x))
    return "[" + ", ".join(_render(conv, row) for row in v) + "]"


@rule("tile.print")
def _print(op, cx: CompileContext) -> Step:
    slots = cx.slots(op.operands)
    fmt = op.format
    elems = [elem_of(v.type) for v in op.operands]

    more = op.more

    def step(frame):
        launch = frame[LAUNCH_SLOT]
        text = format_values(fmt, [frame[s] for s in slots], elems)
        pending = launch.print_pending + text
        if more:
            launch.print_pending = pending
            return
        launch.print_pending = ""
        sys.stdout.write(pending)
        sys.stdout.flush()
    return step


@rule("tile.assert")
def _assert(op, cx: CompileContext) -> Step:
    slot = cx.slot(op.cond)
    message = op.message

    def step(frame):
        if not np.all(frame[slot]):
            raise Fault(f"{message} (block {tuple(int(b) for b in frame[LAUNCH_SLOT].bid)})")
    return step


@rule("tile.grid_dependency")
def _grid_dependency(op, cx: CompileContext) -> Step:
    """Launches run one after another here: the previous kernel is always done."""
    return lambda frame: None
