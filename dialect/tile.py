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
REDUCE_KINDS = ("sum", "prod", "max", "min", "argmax", "argmin", "maxnum", "minnum",
                "argmaxnum", "argminnum")
ARG_KINDS = ("argmax", "argmin", "argmaxnum", "argminnum")    # give i32 indices
NAN_IGNORING_KINDS = ("maxnum", "minnum", "argmaxnum", "argminnum")   # floats only
# cuTile's float options on a reduction, as on the arith op its combine is
# (tileir.frontend.functional): `tile.rounding` (a directed mode: rz, rm, rp) on
# float sum/prod, `tile.ftz` (flush f32 subnormals) on f32 sum/prod/max/min kinds
ROUNDING_ATTR = "tile.rounding"
FTZ_ATTR = "tile.ftz"
DIRECTED_MODES = ("rz", "rm", "rp")
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
    retiling), while its hardware grid is one block per SM (backend/pipeline/persistent.py)."""

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
        check_access_scope(self)


# Relaxed (strong) loads and stores: cuTile's memory_order RELAXED, and the accesses
# of ACQUIRE / RELEASE around a `tile.fence` (dialect/ordering.py)
SCOPE_ATTR = "tile.memory_scope"
SCOPES = ("block", "device", "sys")
# A weak load or store whose whole tile lies inside its array: a promise (made by
# tile-version-bounds, backend/pipeline/version_bounds.py), not checked at run time.  It lowers
# to plain vector accesses without per-thread bounds checks.
IN_BOUNDS_ATTR = "tile.in_bounds"


def access_scope(op: ir.Operation) -> str | None:
    """The scope of a relaxed `tile.load` / `tile.store` (None: a weak one)."""
    attrs = op.attributes
    return ir.StringAttr(attrs[SCOPE_ATTR]).value if SCOPE_ATTR in attrs else None


def check_access_scope(op: TileOpView) -> None:
    """The verifier's part for loads and stores that carry `tile.memory_scope` or
    `tile.in_bounds`."""
    attrs = op.operation.attributes
    if IN_BOUNDS_ATTR in attrs:
        if not isinstance(attrs[IN_BOUNDS_ATTR], ir.UnitAttr):
            raise VerifyError(f"{IN_BOUNDS_ATTR} must be a unit attribute, got "
                              f"{attrs[IN_BOUNDS_ATTR]}")
        if SCOPE_ATTR in attrs:
            raise VerifyError(f"{IN_BOUNDS_ATTR} applies to weak accesses, not to one with "
                              f"{SCOPE_ATTR}")
    if SCOPE_ATTR not in attrs:
        return
    attr = attrs[SCOPE_ATTR]
    if not isinstance(attr, ir.StringAttr) or attr.value not in SCOPES:
        raise VerifyError(f"{SCOPE_ATTR} must be one of {', '.join(SCOPES)}, got {attr}")


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
        check_access_scope(self)


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
    (the first occurrence wins).  Float max/min propagate NaN (a NaN is the
    extreme: argmax/argmin give the first NaN), as `arith.maximumf` does; the
    `...num` kinds ignore NaN elements, as `arith.maxnumf` does: maxnum/minnum
    of an all-NaN slice is NaN, argmaxnum/argminnum give the first index of the
    extreme of the non-NaN elements (0 for an all-NaN slice).  Float options
    (`tile.rounding`, `tile.ftz`) apply to every combining step.
    """

    OPERATION_NAME = "tile.reduce"
    SPEC = Spec(operands=(Arg("source", "tensor"),),
                attributes=(("kind", "str_attr"), ("axis", "int_attr")),
                results=(Arg("result", "tensor"),))

    def __init__(self, source: ir.Value, kind: str, axis: int, *,
                 options: dict[str, str] | None = None, loc=None, ip=None):
        """`options`: the float options (`tile.rounding` / `tile.ftz` to their values)."""
        src = source.type
        shape = [d for i, d in enumerate(src.shape) if i != axis]
        elem = _i32() if kind in ARG_KINDS else src.element_type
        attrs = {"kind": ir.StringAttr.get(kind), "axis": _i64_attr(axis)}
        attrs.update({k: ir.StringAttr.get(v) for k, v in (options or {}).items()})
        op = ir.Operation.create(
            self.OPERATION_NAME, results=[tile_type(shape, elem)], operands=[source],
            attributes=attrs, loc=loc, ip=ip)
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

    @property
    def options(self) -> dict[str, str]:
        """The float options the op carries (`tile.rounding`, `tile.ftz`)."""
        return float_options_of(self.operation)

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
        want = _i32() if self.kind in ARG_KINDS else elem
        if res.element_type != want:
            raise VerifyError(f"'{self.kind}' of {elem} gives {want}, but the result is "
                              f"{res.element_type}")
        if self.kind in NAN_IGNORING_KINDS and not is_float(elem):
            raise VerifyError(f"'{self.kind}' ignores NaN and needs a float source, got {elem} "
                              f"(use '{self.kind[:-3]}')")
        self._verify_float_options(elem)

    def _verify_float_options(self, elem: ir.Type) -> None:
        attrs = self.operation.attributes
        if ROUNDING_ATTR in attrs:
            mode = attrs[ROUNDING_ATTR]
            mode = ir.StringAttr(mode).value if isinstance(mode, ir.StringAttr) else str(mode)
            if mode not in DIRECTED_MODES:
                raise VerifyError(f"{ROUNDING_ATTR} must be one of {', '.join(DIRECTED_MODES)} "
                                  f"(round to nearest is the default), got {mode!r}")
            if self.kind not in ("sum", "prod") or not is_float(elem) or \
                    _float_bits(elem) < 16:
                raise VerifyError(f"{ROUNDING_ATTR} applies to sums and products of "
                                  f"f16/bf16/f32/f64, not '{self.kind}' of {elem}")
        if FTZ_ATTR in attrs:
            if self.kind in ARG_KINDS or not isinstance(elem, ir.F32Type):
                raise VerifyError(f"{FTZ_ATTR} applies to sum/prod/max/min kinds of f32, not "
                                  f"'{self.kind}' of {elem}")


def float_options_of(op: ir.Operation) -> dict[str, str]:
    """`tile.rounding` / `tile.ftz` of `op` (a reduction, or the arith op of a combine)
    as strings: what a pass that rebuilds the reduction must carry over."""
    out = {}
    for name in (ROUNDING_ATTR, FTZ_ATTR):
        if name in op.attributes:
            a = op.attributes[name]
            out[name] = ir.StringAttr(a).value if isinstance(a, ir.StringAttr) else str(a)
    return out


def _float_bits(t: ir.Type) -> int:
    return ir.FloatType(t).width


# --------------------------------------------------------------------------
# Matrix multiply
# --------------------------------------------------------------------------
FP8_TYPES = ("f8E4M3FN", "f8E5M2")    # mma operands of these two types may mix (e4m3 x e5m2)


def mma_accumulator_types(elem: ir.Type) -> tuple[str, ...]:
    """Accumulator (and matmul result) element types allowed for operand type `elem`."""
    return {"f16": ("f16", "f32"), "bf16": ("f32",), "f32": ("f32",), "f64": ("f64",),
            "i8": ("i32",), "f8E4M3FN": ("f16", "f32"), "f8E5M2": ("f16", "f32")}.get(
                str(elem), ())


def _check_matmul_shapes(a: ir.RankedTensorType, b: ir.RankedTensorType,
                         c_shape: Sequence[int], what: str) -> None:
    if a.rank not in (2, 3) or b.rank != a.rank:
        raise VerifyError(f"operands must both be 2-D (M x K, K x N) or 3-D (batched); got "
                          f"ranks {a.rank} and {b.rank}")
    if a.element_type != b.element_type and not (
            str(a.element_type) in FP8_TYPES and str(b.element_type) in FP8_TYPES):
        raise VerifyError(f"operand element types differ: {a.element_type} and "
                          f"{b.element_type} (convert one first; only the two fp8 types "
                          f"mix)")
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


# On an fp8 `tile.mma`: its products may be summed on the tensor cores across a whole
# loop, in the fewer bits their fp8 sums keep (cuTile's `mma(..., use_fast_acc=True)`).
# Without it an fp8 product into an f32 accumulator is summed in f32 (docs/tensor-cores.md).
FAST_ACC_ATTR = "tile.fast_acc"


def fast_acc(op: ir.Operation) -> bool:
    return FAST_ACC_ATTR in op.attributes


def promotes_sums(op: ir.Operation) -> bool:
    """Whether an fp8 `tile.mma` sums into f32 in full precision: its products from zero
    on the tensor cores, then added to the accumulator (no `tile.fast_acc`)."""
    if op.name != "tile.mma":      # (tile.mma_async: made only of products that do not)
        return False
    a, acc = op.operands[0].type, op.operands[2].type
    return (str(a.element_type) in FP8_TYPES and str(acc.element_type) == "f32" and
            not fast_acc(op))


@DIALECT.op
class MmaOp(ProductOp):
    """`a @ b + acc` with the accumulator's precision; the result has acc's type.

    Operand/accumulator element types: f16 x f16 -> f16|f32, bf16 x bf16 -> f32,
    f32 x f32 -> f32, f64 x f64 -> f64, i8 x i8 -> i32, fp8 x fp8 -> f16|f32 (e4m3
    and e5m2 may mix; `tile.fast_acc`, fp8 only, see FAST_ACC_ATTR).
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
        attrs = self.operation.attributes
        if FAST_ACC_ATTR in attrs:
            if not isinstance(attrs[FAST_ACC_ATTR], ir.UnitAttr):
                raise VerifyError(f"{FAST_ACC_ATTR} must be a unit attribute, got "
                                  f"{attrs[FAST_ACC_ATTR]}")
            if str(a.element_type) not in FP8_TYPES:
                raise VerifyError(f"{FAST_ACC_ATTR} is only for fp8 operands (f8E4M3FN, "
                                  f"f8E5M2), got {a.element_type}")


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


__all__ = ["DIALECT", "PADDING_MODES", "REDUCE_KINDS", "ARG_KINDS", "NAN_IGNORING_KINDS",
           "ROUNDING_ATTR", "FTZ_ATTR", "DIRECTED_MODES", "float_options_of", "BidOp",
           "NumBlocksOp", "GridSizeOp", "DimOp", "StrideOp", "LoadOp", "StoreOp", "IotaOp",
           "BroadcastOp", "ReshapeOp", "PermuteOp", "ReduceOp", "MmaOp", "MatmulOp",
           "array_type", "element_type", "mma_accumulator_types"]
