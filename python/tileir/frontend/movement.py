"""Trace-time rules of the ops that take tiles apart and put them together: `cat`,
`extract`, `insert`, `astile`, `bitcast`, `pack_to_bytes`, `unpack_from_bytes` and
the tile method `item` (cuTile's names and semantics).

`extract`/`insert` address sub-tiles by their index in the grid of `shape`-sized
sub-tiles (cuTile's convention), which becomes element offsets of
`tile.extract_slice` / `tile.insert_slice`; constant indices are bounds-checked
here.  Bytes are little-endian: `pack_to_bytes` splits each element into its bytes
with shifts and stacks them (`tile.concat`), `unpack_from_bytes` reverses it.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from .. import dtypes as dt
from ..errors import TileUnsupportedFeatureError
from tileir.dialect import pieces, tile as tile_ops
from . import compute
from .emit import (cast, constant, is_number, loc, python_dtype, reshape, splat, tensor_type,
                   type_error, value_error, wrap)
from .intrinsics import const_int, const_shape, dtype_arg, rule, scalar_int, tile_arg
from .values import TileValue, describe


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _as_tile(x, what: str) -> TileValue:
    t = tile_arg(x, what)
    if t.is_scalar:
        raise type_error(f"{what} must be a tile of rank >= 1, got {t.describe()}")
    return t


@rule("cat")
def _cat(tiles, axis):
    if not isinstance(tiles, tuple):
        raise type_error(f"cat takes a tuple of tiles, got {describe(tiles)}")
    if len(tiles) == 0:
        raise type_error("cat needs at least one tile")
    if len(tiles) > 2:
        raise type_error(f"cat joins at most 2 tiles (the result's dims stay powers of two), "
                         f"got {len(tiles)}")
    if len(tiles) == 1:
        return _as_tile(tiles[0], "cat's tile")
    a, b = (_as_tile(t, "cat's tile") for t in tiles)
    if a.dtype != b.dtype:
        raise type_error(f"cat needs tiles of one dtype, got {a.dtype.name} and {b.dtype.name}")
    if a.ndim != b.ndim:
        raise type_error(f"cat needs tiles of one rank, got {a.shape} and {b.shape}")
    axis = compute.normalize_axis(const_int(axis, "axis"), a.ndim)
    for i, (x, y) in enumerate(zip(a.shape, b.shape)):
        if i != axis and x != y:
            raise type_error(f"cat along axis {axis}: dim {i} differs ({a.shape} and {b.shape})")
    const_shape(tuple(x + y if i == axis else x for i, (x, y) in
                      enumerate(zip(a.shape, b.shape))), "result shape")
    return wrap(pieces.ConcatOp(a.value, b.value, axis).result, a.dtype)


def _sub_shape(x: TileValue, shape, what: str) -> tuple[int, ...]:
    if shape == ():
        return (1,) * x.ndim
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    shape = const_shape(shape, what)
    if len(shape) != x.ndim:
        raise type_error(f"{what} {shape} has {len(shape)} dims, the tile {x.ndim}")
    for i, (s, n) in enumerate(zip(shape, x.shape)):
        if n % s:
            raise type_error(f"{what} {shape} does not divide the tile's shape {x.shape} "
                             f"(dim {i})")
    return shape


def _offsets(x: TileValue, index, sub: tuple[int, ...]) -> list[TileValue]:
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) != x.ndim:
        raise type_error(f"index has {len(index)} entries, the tile has {x.ndim} dims")
    out = []
    for d, (i, s) in enumerate(zip(index, sub)):
        count = x.shape[d] // s
        if is_number(i):
            i = const_int(i, f"index entry {d}")
            if not 0 <= i < count:
                raise value_error(f"index {i} is out of range for dim {d}: the tile has "
                                  f"{count} sub-tiles of {s} there")
            out.append(constant(i * s, dt.int32))
        else:
            out.append(compute.binary("*", scalar_int(i, f"index entry {d}"), s))
    return out


@rule("extract")
def _extract(x, index, shape):
    t = _as_tile(x, "x")
    sub = _sub_shape(t, shape, "shape")
    offsets = _offsets(t, index, sub)
    r = wrap(pieces.ExtractSliceOp(t.value, [o.value for o in offsets],
                                   tensor_type(sub, t.dtype)).result, t.dtype)
    return reshape(r, ()) if shape == () else r


@rule("insert")
def _insert(x, index, value):
    t = _as_tile(x, "x")
    if is_number(value):
        value = constant(value, t.dtype)
    v = tile_arg(value, "value")
    if v.dtype != t.dtype:
        raise type_error(f"insert needs a value of the tile's dtype {t.dtype.name}, got "
                         f"{v.dtype.name} (astype it first)")
    if v.is_scalar:
        v = reshape(v, (1,) * t.ndim)
    elif v.ndim != t.ndim:
        raise type_error(f"insert's value has rank {v.ndim}, the tile {t.ndim} (or give a "
                         f"scalar)")
    sub = _sub_shape(t, v.shape, "value shape")
    offsets = _offsets(t, index, sub)
    return wrap(pieces.InsertSliceOp(t.value, v.value, [o.value for o in offsets]).result,
                t.dtype)


@rule("item")
def _item(x):
    t = tile_arg(x, "x")
    if _numel(t.shape) != 1:
        raise type_error(f"item() needs a tile of one element, got {t.describe()}")
    return reshape(t, ())


def _nested_shape(value) -> tuple[int, ...]:
    if not isinstance(value, tuple):
        return ()
    if not value:
        raise type_error("astile of an empty tuple")
    inner = {_nested_shape(v) for v in value}
    if len(inner) != 1:
        raise type_error("astile needs nested tuples of equal lengths at each level")
    return (len(value), *inner.pop())


def _flatten(value) -> list:
    return [y for v in value for y in _flatten(v)] if isinstance(value, tuple) else [value]


@rule("astile")
def _astile(value, dtype):
    shape = _nested_shape(value)
    items = _flatten(value)
    for v in items:
        if not (is_number(v) or (isinstance(v, TileValue) and v.is_scalar)):
            raise type_error(f"astile takes scalars and nested tuples of scalars, got "
                             f"{describe(v)}")
    if dtype is not None:
        d = dtype_arg(dtype)
    else:
        runtime = [v.dtype for v in items if isinstance(v, TileValue)]
        d = runtime[0] if runtime else compute_dtype_of(items)
        for r in runtime[1:]:
            d = dt.promote(d, r)
    if shape:
        const_shape(shape, "astile shape")
    if not shape:
        v = items[0]
        return constant(v, d) if is_number(v) else cast(v, d)
    if all(is_number(v) for v in items):
        return _constant_table(items, d, shape)
    flat = len(items)
    # run-time elements: select each into place by its flat position
    iota = wrap(tile_ops.IotaOp(tensor_type((flat,), dt.int32)).result, dt.int32)
    acc = None
    for i, v in enumerate(items):
        part = splat(cast(v, d) if isinstance(v, TileValue) else constant(v, d), (flat,))
        acc = part if acc is None else compute.select(compute.compare("==", iota, i), part, acc)
    return reshape(acc, shape)


def compute_dtype_of(items) -> dt.DType:
    if any(isinstance(v, float) for v in items):
        return dt.float32
    if all(isinstance(v, bool) for v in items):
        return dt.bool_
    big = any(not -(1 << 31) <= int(v) < (1 << 31) for v in items)
    return dt.int64 if big else dt.int32


def _constant_table(items, d: dt.DType, shape) -> TileValue:
    """A non-splat constant tile (a table in global memory on the GPU)."""
    from .emit import scalar_attr
    attrs = [scalar_attr(v, d) for v in items]
    t = tensor_type(shape, d)
    attr = ir.DenseElementsAttr.get_splat(t, attrs[0]) if len(set(map(str, attrs))) == 1 \
        else ir.Attribute.parse(f"dense<[{', '.join(_literal(a) for a in attrs)}]> : "
                                f"tensor<{len(items)}x{d.mlir}>")
    if not attr.type == t:                       # the literal is 1-D: reshape it
        flat = wrap(arith.ConstantOp(attr.type, attr).result, d)
        return reshape(flat, shape)
    return wrap(arith.ConstantOp(t, attr).result, d)


def _literal(a: ir.Attribute) -> str:
    return str(a).rsplit(" : ", 1)[0]


# ---------------------------------------------------------------------------
# Bits and bytes
# ---------------------------------------------------------------------------
def _same_width_int(d: dt.DType) -> dt.DType:
    return dt.BY_NAME[f"uint{d.bits}"]


def _check_bits(d: dt.DType, what: str) -> None:
    if d.is_bool:
        raise type_error(f"{what} does not take booleans")
    if d.bits < 8:
        raise TileUnsupportedFeatureError(f"{what} of the {d.bits}-bit {d.name} is not "
                                          f"supported by tileir yet", loc())


@rule("bitcast")
def _bitcast(x, dtype):
    # a Python number is a 0-d tile of its default dtype (1.0: float32, 1: int32)
    t = constant(x, python_dtype(x)) if is_number(x) else tile_arg(x, "x")
    d = dtype_arg(dtype)
    for e in (t.dtype, d):
        _check_bits(e, "bitcast")
    if t.dtype == d:
        return t
    if t.dtype.bits != d.bits or dt.tfloat32 in (t.dtype, d):
        raise type_error(f"bitcast keeps the bit width: {t.dtype.name} has {t.dtype.bits} "
                         f"bits, {d.name} {d.bits}")
    if t.dtype.mlir == d.mlir:                    # int32 <-> uint32: the view changes
        return TileValue(t.value, d, t.shape)
    return wrap(arith.BitcastOp(tensor_type(t.shape, d), t.value).result, d)


@rule("pack_to_bytes")
def _pack_to_bytes(x):
    t = tile_arg(x, "x")
    _check_bits(t.dtype, "pack_to_bytes")
    n = _numel(t.shape) if t.shape else 1
    flat = reshape(t, (n,))
    nbytes = t.dtype.bits // 8
    if nbytes == 1:
        return _bitcast(flat, dt.uint8)
    bits = _bitcast(flat, _same_width_int(t.dtype))
    columns = []
    for k in range(nbytes):
        shifted = compute.binary(">>", bits, 8 * k) if k else bits
        byte = cast(shifted, dt.uint8)              # truncation keeps the low byte
        columns.append(reshape(byte, (n, 1)))
    while len(columns) > 1:                          # byte k at n * nbytes + k
        columns = [_cat((columns[i], columns[i + 1]), 1) for i in range(0, len(columns), 2)]
    return reshape(columns[0], (n * nbytes,))


@rule("unpack_from_bytes")
def _unpack_from_bytes(x, dtype):
    t = tile_arg(x, "x")
    d = dtype_arg(dtype)
    _check_bits(d, "unpack_from_bytes")
    if t.ndim != 1 or t.dtype not in (dt.uint8, dt.int8):
        raise type_error(f"unpack_from_bytes takes a 1-D uint8 tile, got {t.describe()}")
    nbytes = d.bits // 8
    if t.shape[0] % nbytes:
        raise type_error(f"{t.shape[0]} bytes do not hold a whole number of {d.name} "
                         f"elements ({nbytes} bytes each)")
    if nbytes == 1:
        return _bitcast(t, d)
    n = t.shape[0] // nbytes
    rows = reshape(TileValue(t.value, dt.uint8, t.shape), (n, nbytes))
    wide = _same_width_int(d)
    acc = None
    for k in range(nbytes):
        byte = reshape(_extract(rows, (0, k), (n, 1)), (n,))
        part = cast(byte, wide)
        part = compute.binary("<<", part, 8 * k) if k else part
        acc = part if acc is None else compute.binary("|", acc, part)
    return _bitcast(acc, d)
