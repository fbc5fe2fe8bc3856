"""The `tile` dialect: the ops that builtin dialects cannot express.

This module is importable as `tileir.dialect.tile`, which is what makes
`op.opview` return these classes (the bindings look up `<prefix>.<namespace>`).

Everything else a kernel computes uses builtin ops on tensors: `arith` and
`math` element-wise (including `arith.select` for where), `arith.constant` and
`tensor.splat` for constants and full tiles, `tensor.extract` to turn a rank-0
tile into a scalar, `scf.for` / `scf.if` for control flow, `func.call` for
`@function` helpers.  See docs/tile-ir.md for the semantics of each op.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from .ods import Arg, Dialect, Spec, TileOpView, VerifyError
from .types import (ArrayInfo, array_info, array_type, element_type, is_float, is_int,
                    signless, tile_type)

DIALECT = Dialect("tile")
DIALECT.type("array", "a view of a global array: base, dynamic shape and strides",
              elem="any", rank="int_attr")

PADDING_MODES = ("zero", "neg_zero", "neg_inf", "pos_inf", "nan", "undetermined")
REDUCE_KINDS = ("sum", "prod", "max", "min", "argmax", "argmin")
MAX_GRID_AXES = 3


def _i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def _i64_attr(v: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def _shape(t: ir.Type) -> list[int]:
    return list(t.shape)


def _check_axis(axis: int, rank: int, what: str) -> None:
    if not 0 <= axis < rank:
        raise VerifyError(f"axis {axis} is out of range for {what} of rank {rank}"
                          f" (expected 0 <= axis < {rank})")


def _array(value: ir.Value) -> ArrayInfo:
    # IRDL accepts any integer attribute as the rank (`-1 : i64`, `2 : i32`);
    # `array_info` recognizes only the documented form.
    info = array_info(value.type)
    if info is None:
        raise VerifyError(f"malformed array type {value.type}: expected "
                          f"!tile.array<T, R : i64> with rank R >= 0")
    return info


def _tensor(value: ir.Value, what: str) -> ir.RankedTensorType:
    t = value.type
    if not isinstance(t, ir.RankedTensorType):
        raise VerifyError(f"{what} must be a ranked tensor (a tile), got {t}")
    return t


# --------------------------------------------------------------------------
# Grid
# --------------------------------------------------------------------------
class _GridOp(TileOpView):
    SPEC = Spec(attributes=(("axis", "int_attr"),), results=(Arg("result", "i32"),))

    def __init__(self, axis: int, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[_i32()],
                                 attributes={"axis": _i64_attr(axis)}, loc=loc, ip=ip)
        super().__init__(op)

    @property
    def axis(self) -> int:
        return self.int_attr("axis")

    def verify(self) -> None:
        _check_axis(self.axis, MAX_GRID_AXES, "the grid")


@DIALECT.op
class BidOp(_GridOp):
    """The index of the executing block along `axis` (0, 1 or 2)."""

    OPERATION_NAME = "tile.bid"


@DIALECT.op
class NumBlocksOp(_GridOp):
    """The number of blocks in the grid along `axis`."""

    OPERATION_NAME = "tile.num_blocks"


@DIALECT.op
class GridSizeOp(_GridOp):
    """The grid a persistent kernel walks, along `axis`: the launch's grid (after
    retiling), while its hardware grid is one block per SM (backend/persistent.py)."""

    OPERATION_NAME = "tile.grid_size"


# --------------------------------------------------------------------------
# Arrays
# --------------------------------------------------------------------------
class _ArrayQueryOp(TileOpView):
    SPEC = Spec(operands=(Arg("array", "array"),), attributes=(("axis", "int_attr"),),
                results=(Arg("result", "i32"),))

    def __init__(self, array: ir.Value, axis: int, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[_i32()], operands=[array],
                                 attributes={"axis": _i64_attr(axis)}, loc=loc, ip=ip)
        super().__init__(op)

    @property
    def array(self) -> ir.Value:
        return self.operands[0]

    @property
    def axis(self) -> int:
        return self.int_attr("axis")

    def verify(self) -> None:
        _check_axis(self.axis, _array(self.array).rank, "the array")


@DIALECT.op
class DimOp(_ArrayQueryOp):
    """The size of `array` along `axis`, in elements."""

    OPERATION_NAME = "tile.dim"


@DIALECT.op
class StrideOp(_ArrayQueryOp):
    """The stride of `array` along `axis`, in elements."""

    OPERATION_NAME = "tile.stride"


def _check_indices(indices: Sequence[ir.Value], rank: int) -> None:
    if len(indices) != rank:
        raise VerifyError(f"expected {rank} tile indices (one per array dim), got {len(indices)}")


@DIALECT.op
class LoadOp(TileOpView):
    """Loads the tile with tile index `index` of shape `tile_shape` from `array`.

    Element offsets are `index[i] * tile_shape[i]`; elements outside the array
    read the padding value.
    """

    OPERATION_NAME = "tile.load"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("index", "i32", variadic=True)),
                attributes=(("tile_shape", "i64_array_attr"), ("padding", "str_attr")),
                results=(Arg("result", "tensor"),))

    def __init__(self, array: ir.Value, index: Sequence[ir.Value], tile_shape: Sequence[int],
                 padding: str = "undetermined", *, loc=None, ip=None):
        info = array_info(array.type)
        elem = signless(info.element_type) if info else ir.F32Type.get()
        op = ir.Operation.create(
            self.OPERATION_NAME, results=[tile_type(tile_shape, elem)],
            operands=[array, *index],
            attributes={"tile_shape": ir.DenseI64ArrayAttr.get(list(tile_shape)),
                        "padding": ir.StringAttr.get(padding)}, loc=loc, ip=ip)
        super().__init__(op)

    @property
    def array(self) -> ir.Value:
        return self.operands[0]

    @property
    def index(self) -> list[ir.Value]:
        return list(self.operands)[1:]

    @property
    def tile_shape(self) -> list[int]:
        return self.i64_array_attr("tile_shape")

    @property
    def padding(self) -> str:
        return self.str_attr("padding")

    def verify(self) -> None:
        info = _array(self.array)
        _check_indices(self.index, info.rank)
        shape = self.tile_shape
        if len(shape) != info.rank:
            raise VerifyError(f"tile_shape {shape} has rank {len(shape)}, but the array has "
                              f"rank {info.rank}")
        res = _tensor(self.result, "result")
        if _shape(res) != shape:
            raise VerifyError(f"result shape {_shape(res)} does not match tile_shape {shape}")
        want = signless(info.element_type)
        if res.element_type != want:
            raise VerifyError(f"result element type {res.element_type} does not match the "
                              f"array element type {info.element_type} (expected {want})")
        if self.padding not in PADDING_MODES:
            raise VerifyError(f"unknown padding '{self.padding}'; expected one of "
                              f"{', '.join(PADDING_MODES)}")
        if self.padding not in ("zero", "undetermined") and not is_float(want):
            raise VerifyError(f"padding '{self.padding}' needs a float element type, "
                              f"got {want}")


@DIALECT.op
class StoreOp(TileOpView):
    """Stores `tile` at tile index `index` of `array`; out-of-range elements are dropped."""

    OPERATION_NAME = "tile.store"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("tile", "tensor"),
                          Arg("index", "i32", variadic=True)))

    def __init__(self, array: ir.Value, tile: ir.Value, index: Sequence[ir.Value], *,
                 loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, operands=[array, tile, *index],
                                 loc=loc, ip=ip)
        super().__init__(op)

    @property
    def array(self) -> ir.Value:
        return self.operands[0]

    @property
    def tile(self) -> ir.Value:
        return self.operands[1]

    @property
    def index(self) -> list[ir.Value]:
        return list(self.operands)[2:]

    def verify(self) -> None:
        info = _array(self.array)
        _check_indices(self.index, info.rank)
        t = _tensor(self.tile, "the stored tile")
        if t.rank != info.rank:
            raise VerifyError(f"stored tile has rank {t.rank}, but the array has rank {info.rank}")
        want = signless(info.element_type)
        if t.element_type != want:
            raise VerifyError(f"stored tile element type {t.element_type} does not match the "
                              f"array element type {info.element_type} (convert it first)")


# --------------------------------------------------------------------------
# Construction and shape
# --------------------------------------------------------------------------
@DIALECT.op
class IotaOp(TileOpView):
    """The 1-D tile [0, 1, ..., n-1] of an integer type."""

    OPERATION_NAME = "tile.iota"
    SPEC = Spec(results=(Arg("result", "tensor"),))

    def __init__(self, result_type: ir.Type, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[result_type],
                                             loc=loc, ip=ip))

    def verify(self) -> None:
        t = _tensor(self.result, "result")
        if t.rank != 1:
            raise VerifyError(f"result must be a 1-D tile, got rank {t.rank}")
        if not is_int(t.element_type) or t.element_type.width == 1:
            raise VerifyError(f"result element type must be an integer of 8 bits or more, "
                              f"got {t.element_type}")
        bits = t.element_type.width
        if t.shape[0] > 2 ** (bits - 1):
            raise VerifyError(f"{t.shape[0]} elements do not fit in {t.element_type}")


class _ShapeOp(TileOpView):
    SPEC = Spec(operands=(Arg("source", "tensor"),), results=(Arg("result", "tensor"),))

    def __init__(self, source: ir.Value, result_type: ir.Type, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[result_type],
                                             operands=[source], loc=loc, ip=ip))

    @property
    def source(self) -> ir.Value:
        return self.operands[0]

    def _types(self) -> tuple[ir.RankedTensorType, ir.RankedTensorType]:
        src = _tensor(self.source, "source")
        res = _tensor(self.result, "result")
        if src.element_type != res.element_type:
            raise VerifyError(f"element type changes from {src.element_type} to "
                              f"{res.element_type}; shape ops keep the element type")
        return src, res


@DIALECT.op
class BroadcastOp(_ShapeOp):
    """Broadcasts a tile to a larger shape of the same rank (dims of size 1 stretch)."""

    OPERATION_NAME = "tile.broadcast"

    def verify(self) -> None:
        src, res = self._types()
        if src.rank != res.rank:
            raise VerifyError(f"broadcast keeps the rank: source rank {src.rank}, result rank "
                              f"{res.rank} (reshape first to add dims)")
        for i, (a, b) in enumerate(zip(src.shape, res.shape)):
            if a != b and a != 1:
                raise VerifyError(f"cannot broadcast dim {i} of size {a} to {b} "
                                  f"(only size-1 dims stretch)")


@DIALECT.op
class ReshapeOp(_ShapeOp):
    """Reinterprets a tile with a new shape, row-major, same number of elements."""

    OPERATION_NAME = "tile.reshape"

    def verify(self) -> None:
        src, res = self._types()
        n_src, n_res = _numel(src.shape), _numel(res.shape)
        if n_src != n_res:
            raise VerifyError(f"reshape from {list(src.shape)} ({n_src} elements) to "
                              f"{list(res.shape)} ({n_res} elements) changes the element count")


@DIALECT.op
class PermuteOp(_ShapeOp):
    """Permutes the dims of a tile: result.shape[i] = source.shape[permutation[i]]."""

    OPERATION_NAME = "tile.permute"
    SPEC = Spec(operands=(Arg("source", "tensor"),),
                attributes=(("permutation", "i64_array_attr"),),
                results=(Arg("result", "tensor"),))

    def __init__(self, source: ir.Value, permutation: Sequence[int], *, loc=None, ip=None):
        src = source.type
        shape = [src.shape[p] for p in permutation]
        op = ir.Operation.create(
            self.OPERATION_NAME, results=[tile_type(shape, src.element_type)], operands=[source],
            attributes={"permutation": ir.DenseI64ArrayAttr.get(list(permutation))},
            loc=loc, ip=ip)
        ir.OpView.__init__(self, op)

    @property
    def permutation(self) -> list[int]:
        return self.i64_array_attr("permutation")

    def verify(self) -> None:
        src, res = self._types()
        perm = self.permutation
        if sorted(perm) != list(range(src.rank)):
            raise VerifyError(f"permutation {perm} is not a permutation of 0..{src.rank - 1}")
        want = [src.shape[p] for p in perm]
        if list(res.shape) != want:
            raise VerifyError(f"result shape {list(res.shape)} does not match the permuted "
                              f"source shape {want}")


@DIALECT.op
class ExtractSliceOp(TileOpView):
    """The sub-tile of `source` starting at element `offsets` (one i32 per dim, run-time
    values allowed), of the result's shape: result[c] = source[offsets + c].  The
    slice must lie inside the source (the frontend checks constant offsets)."""

    OPERATION_NAME = "tile.extract_slice"
    SPEC = Spec(operands=(Arg("source", "tensor"), Arg("offsets", "i32", variadic=True)),
                results=(Arg("result", "tensor"),))

    def __init__(self, source: ir.Value, offsets: Sequence[ir.Value], result_type: ir.Type, *,
                 loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[result_type],
                                             operands=[source, *offsets], loc=loc, ip=ip))

    @property
    def source(self) -> ir.Value:
        return self.operands[0]

    @property
    def offsets(self) -> list[ir.Value]:
        return list(self.operands)[1:]

    def verify(self) -> None:
        src, res = _tensor(self.source, "source"), _tensor(self.result, "result")
        _check_slice(src, res, self.offsets, "result")


def _check_slice(big: ir.RankedTensorType, small: ir.RankedTensorType, offsets, what: str):
    if big.element_type != small.element_type:
        raise VerifyError(f"element types differ: {big.element_type} and {small.element_type}")
    if big.rank != small.rank:
        raise VerifyError(f"the {what} has rank {small.rank}, the tile rank {big.rank}")
    if len(offsets) != big.rank:
        raise VerifyError(f"expected {big.rank} offsets (one per dim), got {len(offsets)}")
    for i, (a, b) in enumerate(zip(big.shape, small.shape)):
        if b > a:
            raise VerifyError(f"the {what}'s dim {i} ({b}) is larger than the tile's ({a})")


@DIALECT.op
class InsertSliceOp(TileOpView):
    """`dest` with the sub-tile at element `offsets` replaced by `value`."""

    OPERATION_NAME = "tile.insert_slice"
    SPEC = Spec(operands=(Arg("dest", "tensor"), Arg("value", "tensor"),
                          Arg("offsets", "i32", variadic=True)),
                results=(Arg("result", "tensor"),))

    def __init__(self, dest: ir.Value, value: ir.Value, offsets: Sequence[ir.Value], *,
                 loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[dest.type],
                                             operands=[dest, value, *offsets], loc=loc, ip=ip))

    @property
    def dest(self) -> ir.Value:
        return self.operands[0]

    @property
    def value(self) -> ir.Value:
        return self.operands[1]

    @property
    def offsets(self) -> list[ir.Value]:
        return list(self.operands)[2:]

    def verify(self) -> None:
        dest, res = _tensor(self.dest, "dest"), _tensor(self.result, "result")
        if _shape(dest) != _shape(res) or dest.element_type != res.element_type:
            raise VerifyError(f"result type {res} differs from dest type {dest}")
        _check_slice(dest, _tensor(self.value, "value"), self.offsets, "value")


@DIALECT.op
class ConcatOp(TileOpView):
    """`lhs` and `rhs` side by side along `axis` (equal in every other dim)."""

    OPERATION_NAME = "tile.concat"
    SPEC = Spec(operands=(Arg("lhs", "tensor"), Arg("rhs", "tensor")),
                attributes=(("axis", "int_attr"),), results=(Arg("result", "tensor"),))

    def __init__(self, lhs: ir.Value, rhs: ir.Value, axis: int, *, loc=None, ip=None):
        a, b = lhs.type, rhs.type
        shape = list(a.shape)
        shape[axis] += b.shape[axis]
        op = ir.Operation.create(self.OPERATION_NAME,
                                 results=[tile_type(shape, a.element_type)],
                                 operands=[lhs, rhs], attributes={"axis": _i64_attr(axis)},
                                 loc=loc, ip=ip)
        super().__init__(op)

    @property
    def lhs(self) -> ir.Value:
        return self.operands[0]

    @property
    def rhs(self) -> ir.Value:
        return self.operands[1]

    @property
    def axis(self) -> int:
        return self.int_attr("axis")

    def verify(self) -> None:
        a, b = _tensor(self.lhs, "lhs"), _tensor(self.rhs, "rhs")
        res = _tensor(self.result, "result")
        if a.element_type != b.element_type or a.element_type != res.element_type:
            raise VerifyError(f"element types differ: {a.element_type}, {b.element_type}, "
                              f"{res.element_type}")
        if not (a.rank == b.rank == res.rank):
            raise VerifyError(f"ranks differ: {a.rank}, {b.rank}, {res.rank}")
        _check_axis(self.axis, a.rank, "the operands")
        want = list(a.shape)
        want[self.axis] += b.shape[self.axis]
        for i, (x, y) in enumerate(zip(a.shape, b.shape)):
            if i != self.axis and x != y:
                raise VerifyError(f"dim {i} differs ({x} and {y}); only dim {self.axis} may")
        if _shape(res) != want:
            raise VerifyError(f"result shape {_shape(res)}, expected {want}")


# --------------------------------------------------------------------------
# Element-indexed memory: gather, scatter, atomics
# --------------------------------------------------------------------------
MEMORY_ORDERS = ("relaxed", "acquire", "release", "acq_rel")
MEMORY_SCOPES = ("block", "device", "sys")
ATOMIC_KINDS = ("add", "and", "or", "xor", "min", "max", "umin", "umax", "xchg")


def _check_element_access(op, array: ir.Value, indices: list[ir.Value],
                          shaped: list[tuple[str, ir.Value]]) -> ir.RankedTensorType:
    """Common checks: one integer index tile per array dim (all of one type: IRDL ties
    a variadic group's types), every tile operand of one shape."""
    info = _array(array)
    if len(indices) != info.rank:
        raise VerifyError(f"expected {info.rank} index tiles (one per array dim), got "
                          f"{len(indices)}")
    shape = None
    for k, v in enumerate(indices):
        t = _tensor(v, f"index {k}")
        elem = t.element_type
        if not isinstance(elem, ir.IntegerType) or elem.width not in (32, 64):
            raise VerifyError(f"index {k} must be a tile of i32 or i64, got {t}")
        shape = shape or _shape(t)
        if _shape(t) != shape:
            raise VerifyError(f"index {k} has shape {_shape(t)}, index 0 {shape}")
    for what, v in shaped:
        t = _tensor(v, what)
        if _shape(t) != shape:
            raise VerifyError(f"{what} has shape {_shape(t)}, the indices {shape}")
    return info


def _check_mask(v: ir.Value) -> None:
    t = _tensor(v, "mask")
    if str(t.element_type) != "i1":
        raise VerifyError(f"mask must be a tile of i1, got {t}")


def _check_elem(v: ir.Value, info: ArrayInfo, what: str) -> None:
    want = signless(info.element_type)
    if _tensor(v, what).element_type != want:
        raise VerifyError(f"{what} element type {v.type.element_type} does not match the "
                          f"array's {info.element_type} (expected {want})")


def _check_flag(op, name: str) -> None:
    if op.int_attr(name) not in (0, 1):
        raise VerifyError(f"{name} must be 0 or 1, got {op.int_attr(name)}")


@DIALECT.op
class GatherOp(TileOpView):
    """result[c] = array[indices[0][c], ..., indices[R-1][c]] where `mask[c]` holds and
    (with `check_bounds` = 1) every index lies in its dim, else `padding[c]`."""

    OPERATION_NAME = "tile.gather"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("mask", "tensor"), Arg("padding", "tensor"),
                          Arg("indices", "tensor", variadic=True)),
                attributes=(("check_bounds", "int_attr"),), results=(Arg("result", "tensor"),))

    def __init__(self, array, mask, padding, indices, check_bounds: bool, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[padding.type],
                                 operands=[array, mask, padding, *indices],
                                 attributes={"check_bounds": _i64_attr(int(check_bounds))},
                                 loc=loc, ip=ip)
        super().__init__(op)

    array = property(lambda self: self.operands[0])
    mask = property(lambda self: self.operands[1])
    padding = property(lambda self: self.operands[2])
    indices = property(lambda self: list(self.operands)[3:])
    check_bounds = property(lambda self: bool(self.int_attr("check_bounds")))

    def verify(self) -> None:
        info = _check_element_access(self, self.array, self.indices,
                                     [("mask", self.mask), ("padding", self.padding),
                                      ("result", self.result)])
        _check_mask(self.mask)
        _check_elem(self.padding, info, "padding")
        _check_elem(self.result, info, "result")
        _check_flag(self, "check_bounds")


@DIALECT.op
class ScatterOp(TileOpView):
    """array[indices[.][c]] = value[c] where `mask[c]` holds and (with `check_bounds`)
    the indices lie in the array; of equal indices one write wins, which unspecified."""

    OPERATION_NAME = "tile.scatter"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("value", "tensor"), Arg("mask", "tensor"),
                          Arg("indices", "tensor", variadic=True)),
                attributes=(("check_bounds", "int_attr"),))

    def __init__(self, array, value, mask, indices, check_bounds: bool, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[],
                                 operands=[array, value, mask, *indices],
                                 attributes={"check_bounds": _i64_attr(int(check_bounds))},
                                 loc=loc, ip=ip)
        super().__init__(op)

    array = property(lambda self: self.operands[0])
    value = property(lambda self: self.operands[1])
    mask = property(lambda self: self.operands[2])
    indices = property(lambda self: list(self.operands)[3:])
    check_bounds = property(lambda self: bool(self.int_attr("check_bounds")))

    def verify(self) -> None:
        info = _check_element_access(self, self.array, self.indices,
                                     [("value", self.value), ("mask", self.mask)])
        _check_mask(self.mask)
        _check_elem(self.value, info, "value")
        _check_flag(self, "check_bounds")


class _AtomicOp(TileOpView):
    def _atomic_attrs(self) -> None:
        if self.memory_order not in MEMORY_ORDERS:
            raise VerifyError(f"memory_order '{self.memory_order}' is not one of "
                              f"{', '.join(MEMORY_ORDERS)}")
        if self.memory_scope not in MEMORY_SCOPES:
            raise VerifyError(f"memory_scope '{self.memory_scope}' is not one of "
                              f"{', '.join(MEMORY_SCOPES)}")
        _check_flag(self, "check_bounds")

    memory_order = property(lambda self: self.str_attr("memory_order"))
    memory_scope = property(lambda self: self.str_attr("memory_scope"))
    check_bounds = property(lambda self: bool(self.int_attr("check_bounds")))


def _atomic_attributes(order: str, scope: str, check_bounds: bool, **more) -> dict:
    attrs = {"memory_order": ir.StringAttr.get(order), "memory_scope": ir.StringAttr.get(scope),
             "check_bounds": _i64_attr(int(check_bounds))}
    attrs.update({k: ir.StringAttr.get(v) for k, v in more.items()})
    return attrs


@DIALECT.op
class AtomicRMWOp(_AtomicOp):
    """Per element where `mask` holds (and the indices are in bounds with
    `check_bounds`): atomically `array[idx] = kind(array[idx], update)`; the result is
    the value before (elsewhere: `update`).  Kinds: add, and, or, xor, min, max (signed),
    umin, umax (unsigned), xchg."""

    OPERATION_NAME = "tile.atomic_rmw"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("update", "tensor"), Arg("mask", "tensor"),
                          Arg("indices", "tensor", variadic=True)),
                attributes=(("kind", "str_attr"), ("memory_order", "str_attr"),
                            ("memory_scope", "str_attr"), ("check_bounds", "int_attr")),
                results=(Arg("result", "tensor"),))

    def __init__(self, array, update, mask, indices, kind: str, order: str, scope: str,
                 check_bounds: bool, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[update.type],
                                 operands=[array, update, mask, *indices],
                                 attributes=_atomic_attributes(order, scope, check_bounds,
                                                               kind=kind), loc=loc, ip=ip)
        super().__init__(op)

    array = property(lambda self: self.operands[0])
    update = property(lambda self: self.operands[1])
    mask = property(lambda self: self.operands[2])
    indices = property(lambda self: list(self.operands)[3:])
    kind = property(lambda self: self.str_attr("kind"))

    def verify(self) -> None:
        info = _check_element_access(self, self.array, self.indices,
                                     [("update", self.update), ("mask", self.mask),
                                      ("result", self.result)])
        _check_mask(self.mask)
        _check_elem(self.update, info, "update")
        _check_elem(self.result, info, "result")
        self._atomic_attrs()
        if self.kind not in ATOMIC_KINDS:
            raise VerifyError(f"unknown atomic kind '{self.kind}'; expected one of "
                              f"{', '.join(ATOMIC_KINDS)}")
        elem = signless(info.element_type)
        if self.kind != "add" and self.kind != "xchg" and not is_int(elem):
            raise VerifyError(f"atomic {self.kind} needs an integer array, got {elem}")


@DIALECT.op
class AtomicCasOp(_AtomicOp):
    """Per element where `mask` holds (and in bounds with `check_bounds`): atomically,
    if `array[idx] == expected` then `array[idx] = desired`; the result is the value
    before (elsewhere: `expected`)."""

    OPERATION_NAME = "tile.atomic_cas"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("expected", "tensor"),
                          Arg("desired", "tensor"), Arg("mask", "tensor"),
                          Arg("indices", "tensor", variadic=True)),
                attributes=(("memory_order", "str_attr"), ("memory_scope", "str_attr"),
                            ("check_bounds", "int_attr")),
                results=(Arg("result", "tensor"),))

    def __init__(self, array, expected, desired, mask, indices, order: str, scope: str,
                 check_bounds: bool, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[expected.type],
                                 operands=[array, expected, desired, mask, *indices],
                                 attributes=_atomic_attributes(order, scope, check_bounds),
                                 loc=loc, ip=ip)
        super().__init__(op)

    array = property(lambda self: self.operands[0])
    expected = property(lambda self: self.operands[1])
    desired = property(lambda self: self.operands[2])
    mask = property(lambda self: self.operands[3])
    indices = property(lambda self: list(self.operands)[4:])

    def verify(self) -> None:
        info = _check_element_access(self, self.array, self.indices,
                                     [("expected", self.expected), ("desired", self.desired),
                                      ("mask", self.mask), ("result", self.result)])
        _check_mask(self.mask)
        for what in ("expected", "desired", "result"):
            _check_elem(getattr(self, what) if what != "result" else self.result, info, what)
        self._atomic_attrs()


# --------------------------------------------------------------------------
# Debugging: device printf and assert
# --------------------------------------------------------------------------
# One C conversion: flags, width, precision, length, specifier (tileir's printf subset)
PRINTF_CONVERSION = r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diuoxXeEfFgGaA]"


def printf_conversions(fmt: str) -> list[str]:
    """The conversions of a printf format, in order ('%%' is a literal percent)."""
    import re
    out, i = [], 0
    while True:
        i = fmt.find("%", i)
        if i < 0:
            return out
        if fmt.startswith("%%", i):
            i += 2
            continue
        m = re.compile(PRINTF_CONVERSION).match(fmt, i)
        if m is None:
            raise VerifyError(f"format {fmt!r}: '%' at {i} starts no conversion tileir "
                              f"prints (flags, width, precision, then one of diuoxXeEfFgGaA)")
        out.append(m.group(0))
        i = m.end()


@DIALECT.op
class PrintOp(TileOpView):
    """Prints `format` once per block: its conversion (C printf, at most one) takes the
    operand, a scalar as one value, a tile as `[v, v, ...]` (nested for higher ranks).
    `more` = 1: the text continues in the next `tile.print` of the block, and the
    line is printed as one piece when the last (`more` = 0) runs.  (One value per op:
    IRDL ties the types of a variadic operand group.)"""

    OPERATION_NAME = "tile.print"
    SPEC = Spec(operands=(Arg("values", "any", variadic=True),),
                attributes=(("format", "str_attr"), ("more", "int_attr")))

    def __init__(self, fmt: str, values: Sequence[ir.Value], more: bool = False, *,
                 loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[], operands=list(values),
            attributes={"format": ir.StringAttr.get(fmt), "more": _i64_attr(int(more))},
            loc=loc, ip=ip))

    format = property(lambda self: self.str_attr("format"))
    values = property(lambda self: list(self.operands))
    more = property(lambda self: bool(self.int_attr("more")))

    def verify(self) -> None:
        conv = printf_conversions(self.format)
        if len(conv) != len(self.values) or len(conv) > 1:
            raise VerifyError(f"format {self.format!r} has {len(conv)} conversions for "
                              f"{len(self.values)} values (one value per tile.print at most)")
        _check_flag(self, "more")
        for c, v in zip(conv, self.values):
            t = v.type
            elem = t.element_type if isinstance(t, ir.RankedTensorType) else t
            if c[-1] in "diuoxX" and not is_int(elem):
                raise VerifyError(f"conversion {c} prints integers, got {t}")
            if c[-1] in "eEfFgGaA" and not is_float(elem):
                raise VerifyError(f"conversion {c} prints floats, got {t}")


@DIALECT.op
class AssertOp(TileOpView):
    """Stops the kernel (a trap, after printing `message` with the failing block) unless
    every element of `cond` is true."""

    OPERATION_NAME = "tile.assert"
    SPEC = Spec(operands=(Arg("cond", "any"),), attributes=(("message", "str_attr"),))

    def __init__(self, cond: ir.Value, message: str, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[], operands=[cond],
            attributes={"message": ir.StringAttr.get(message)}, loc=loc, ip=ip))

    cond = property(lambda self: self.operands[0])
    message = property(lambda self: self.str_attr("message"))

    def verify(self) -> None:
        t = self.cond.type
        elem = t.element_type if isinstance(t, ir.RankedTensorType) else t
        if str(elem) != "i1":
            raise VerifyError(f"the condition must be i1 (a bool tile or scalar), got {t}")


@DIALECT.op
class GridDependencyOp(TileOpView):
    """Programmatic dependent launch (sm_90+): `wait` blocks until the kernel this grid
    depends on has finished and its writes are visible; `launch_dependents` lets the
    grids that depend on this one begin launching.  Without such a launch both are
    no-ops."""

    OPERATION_NAME = "tile.grid_dependency"
    SPEC = Spec(attributes=(("kind", "str_attr"),))
    KINDS = ("wait", "launch_dependents")

    def __init__(self, kind: str, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[], operands=[],
                                             attributes={"kind": ir.StringAttr.get(kind)},
                                             loc=loc, ip=ip))

    kind = property(lambda self: self.str_attr("kind"))

    def verify(self) -> None:
        if self.kind not in self.KINDS:
            raise VerifyError(f"kind '{self.kind}' is not one of {', '.join(self.KINDS)}")


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------
@DIALECT.op
class ReduceOp(TileOpView):
    """Reduces a tile along `axis` with `kind`; the axis is removed from the shape.

    sum/prod/max/min keep the element type; argmax/argmin return i32 indices
    (the first occurrence wins).  Float max/min propagate NaN.
    """

    OPERATION_NAME = "tile.reduce"
    SPEC = Spec(operands=(Arg("source", "tensor"),),
                attributes=(("kind", "str_attr"), ("axis", "int_attr")),
                results=(Arg("result", "tensor"),))

    def __init__(self, source: ir.Value, kind: str, axis: int, *, loc=None, ip=None):
        src = source.type
        shape = [d for i, d in enumerate(src.shape) if i != axis]
        elem = _i32() if kind in ("argmax", "argmin") else src.element_type
        op = ir.Operation.create(
            self.OPERATION_NAME, results=[tile_type(shape, elem)], operands=[source],
            attributes={"kind": ir.StringAttr.get(kind), "axis": _i64_attr(axis)},
            loc=loc, ip=ip)
        super().__init__(op)

    @property
    def source(self) -> ir.Value:
        return self.operands[0]

    @property
    def kind(self) -> str:
        return self.str_attr("kind")

    @property
    def axis(self) -> int:
        return self.int_attr("axis")

    def verify(self) -> None:
        src = _tensor(self.source, "source")
        res = _tensor(self.result, "result")
        if self.kind not in REDUCE_KINDS:
            raise VerifyError(f"unknown reduction kind '{self.kind}'; expected one of "
                              f"{', '.join(REDUCE_KINDS)}")
        if src.rank == 0:
            raise VerifyError("cannot reduce a rank-0 tile")
        _check_axis(self.axis, src.rank, "the source tile")
        elem = src.element_type
        if not (is_float(elem) or (is_int(elem) and elem.width > 1)):
            raise VerifyError(f"cannot reduce element type {elem} (convert booleans first)")
        want_shape = [d for i, d in enumerate(src.shape) if i != self.axis]
        if list(res.shape) != want_shape:
            raise VerifyError(f"result shape {list(res.shape)} should be {want_shape} "
                              f"(source shape without axis {self.axis})")
        want = _i32() if self.kind in ("argmax", "argmin") else elem
        if res.element_type != want:
            raise VerifyError(f"'{self.kind}' of {elem} gives {want}, but the result is "
                              f"{res.element_type}")


# --------------------------------------------------------------------------
# Matrix multiply
# --------------------------------------------------------------------------
def mma_accumulator_types(elem: ir.Type) -> tuple[str, ...]:
    """Accumulator (and matmul result) element types allowed for operand type `elem`."""
    return {"f16": ("f16", "f32"), "bf16": ("f32",), "f32": ("f32",), "f64": ("f64",),
            "i8": ("i32",), "f8E4M3FN": ("f32",), "f8E5M2": ("f32",)}.get(str(elem), ())


def _check_matmul_shapes(a: ir.RankedTensorType, b: ir.RankedTensorType,
                         c_shape: Sequence[int], what: str) -> None:
    if a.rank not in (2, 3) or b.rank != a.rank:
        raise VerifyError(f"operands must both be 2-D (M x K, K x N) or 3-D (batched); got "
                          f"ranks {a.rank} and {b.rank}")
    if a.element_type != b.element_type:
        raise VerifyError(f"operand element types differ: {a.element_type} and "
                          f"{b.element_type} (convert one first)")
    if a.rank == 3 and a.shape[0] != b.shape[0]:
        raise VerifyError(f"batch dims differ: {a.shape[0]} and {b.shape[0]}")
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2:
        raise VerifyError(f"contraction dims differ: a is {list(a.shape)}, b is {list(b.shape)} "
                          f"(a's last dim must equal b's second-to-last)")
    want = [*a.shape[:-2], m, n]
    if list(c_shape) != want:
        raise VerifyError(f"{what} shape {list(c_shape)} should be {want}")


class ProductOp(TileOpView):
    """`a @ b + acc` with the accumulator's type (`tile.mma`, `tile.mma_async`)."""

    def __init__(self, a: ir.Value, b: ir.Value, acc: ir.Value, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[acc.type],
                                             operands=[a, b, acc], loc=loc, ip=ip))

    @property
    def a(self) -> ir.Value:
        return self.operands[0]

    @property
    def b(self) -> ir.Value:
        return self.operands[1]

    @property
    def acc(self) -> ir.Value:
        return self.operands[2]


@DIALECT.op
class MmaOp(ProductOp):
    """`a @ b + acc` with the accumulator's precision; the result has acc's type.

    Operand/accumulator element types: f16 x f16 -> f16|f32, bf16 x bf16 -> f32,
    f32 x f32 -> f32, f64 x f64 -> f64, i8 x i8 -> i32.
    """

    OPERATION_NAME = "tile.mma"
    SPEC = Spec(operands=(Arg("a", "tensor"), Arg("b", "tensor"), Arg("acc", "tensor")),
                results=(Arg("result", "tensor"),))

    def verify(self) -> None:
        a, b = _tensor(self.a, "a"), _tensor(self.b, "b")
        acc, res = _tensor(self.acc, "acc"), _tensor(self.result, "result")
        _check_matmul_shapes(a, b, acc.shape, "accumulator")
        allowed = mma_accumulator_types(a.element_type)
        if not allowed:
            raise VerifyError(f"mma does not take {a.element_type} operands; supported: f16, "
                              f"bf16, f32, f64, i8, f8E4M3FN, f8E5M2")
        if str(acc.element_type) not in allowed:
            raise VerifyError(f"accumulator element type {acc.element_type} is not allowed for "
                              f"{a.element_type} operands (allowed: {', '.join(allowed)})")
        if res != acc:
            raise VerifyError(f"result type {res} must equal the accumulator type {acc}")


@DIALECT.op
class MatmulOp(TileOpView):
    """`a @ b` accumulated at full precision and rounded to the result element type.

    The result is the operand type for floats (f16 @ f16 -> f16) or f32 for
    f16/bf16 when asked; i8 @ i8 -> i32.
    """

    OPERATION_NAME = "tile.matmul"
    SPEC = Spec(operands=(Arg("a", "tensor"), Arg("b", "tensor")),
                results=(Arg("result", "tensor"),))

    def __init__(self, a: ir.Value, b: ir.Value, result_type: ir.Type | None = None, *,
                 loc=None, ip=None):
        if result_type is None:
            at, bt = a.type, b.type
            elem = _i32() if str(at.element_type) == "i8" else at.element_type
            result_type = tile_type([*at.shape[:-1], bt.shape[-1]], elem)
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[result_type],
                                             operands=[a, b], loc=loc, ip=ip))

    @property
    def a(self) -> ir.Value:
        return self.operands[0]

    @property
    def b(self) -> ir.Value:
        return self.operands[1]

    def verify(self) -> None:
        a, b = _tensor(self.a, "a"), _tensor(self.b, "b")
        res = _tensor(self.result, "result")
        _check_matmul_shapes(a, b, res.shape, "result")
        allowed = mma_accumulator_types(a.element_type)
        if not allowed:
            raise VerifyError(f"matmul does not take {a.element_type} operands; supported: "
                              f"f16, bf16, f32, f64, i8, f8E4M3FN, f8E5M2")
        ok = set(allowed) | ({str(a.element_type)} if is_float(a.element_type) else set())
        if str(res.element_type) not in ok:
            raise VerifyError(f"result element type {res.element_type} is not allowed for "
                              f"{a.element_type} operands (allowed: {', '.join(sorted(ok))})")


__all__ = ["DIALECT", "PADDING_MODES", "REDUCE_KINDS", "BidOp", "NumBlocksOp", "GridSizeOp",
           "DimOp", "StrideOp", "LoadOp", "StoreOp", "IotaOp", "BroadcastOp", "ReshapeOp",
           "PermuteOp", "ExtractSliceOp", "InsertSliceOp", "ConcatOp", "GatherOp", "ScatterOp",
           "AtomicRMWOp", "AtomicCasOp", "PrintOp", "AssertOp", "GridDependencyOp", "ReduceOp",
           "MmaOp", "MatmulOp", "array_type", "element_type", "mma_accumulator_types",
           "printf_conversions"]
