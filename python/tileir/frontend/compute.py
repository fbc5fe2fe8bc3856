"""Arithmetic, comparisons, math functions, selection, reductions and matmul on traced values.

Python semantics where the tile language follows Python: `//` floors, `%`
takes the divisor's sign, `/` on integers gives float32.  Float max/min, binary
(Python's `max(a, b)`: `maxnumf`) and reductions alike, ignore NaN unless asked
to propagate it (cuTile's `propagate_nan` default).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, math

from .. import dtypes as dt
from tileir.dialect import tile
from .emit import (broadcast_shapes, broadcast_to, cast, check_arithmetic, constant,
                   extract_scalar, is_number, reshape, tensor_type, type_error, unify,
                   value_error, wrap)
from .values import TileValue, describe

# max/min: cuTile's `max(a, b)` is `ct.maximum` with its default, NaN ignored
_FLOAT_BIN = {"+": arith.AddFOp, "-": arith.SubFOp, "*": arith.MulFOp, "/": arith.DivFOp,
              "max": arith.MaxNumFOp, "min": arith.MinNumFOp}
_INT_BIN = {"+": arith.AddIOp, "-": arith.SubIOp, "*": arith.MulIOp, "&": arith.AndIOp,
            "|": arith.OrIOp, "^": arith.XOrIOp, "<<": arith.ShLIOp}
_SIGNED_BIN = {"max": arith.MaxSIOp, "min": arith.MinSIOp, ">>": arith.ShRSIOp,
               "//": arith.FloorDivSIOp, "rem": arith.RemSIOp}
_UNSIGNED_BIN = {"max": arith.MaxUIOp, "min": arith.MinUIOp, ">>": arith.ShRUIOp,
                 "//": arith.DivUIOp, "rem": arith.RemUIOp}

_FCMP = {"<": "OLT", "<=": "OLE", ">": "OGT", ">=": "OGE", "==": "OEQ", "!=": "UNE"}
_SCMP = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}
_UCMP = {"<": "ult", "<=": "ule", ">": "ugt", ">=": "uge", "==": "eq", "!=": "ne"}

_PY_FOLD = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
            "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
            "**": lambda a, b: a ** b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
            "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
            "max": max, "min": min,
            "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
            ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def binary(op: str, a, b):
    """`a op b` for tiles, scalars and Python numbers (folded when both are numbers)."""
    if is_number(a) and is_number(b):
        try:
            return _PY_FOLD[op](a, b)
        except ZeroDivisionError:
            raise value_error(f"division by zero in constant expression {a!r} {op} {b!r}")
    if op in _FCMP:
        return compare(op, a, b)
    if op == "/":
        x, y = unify(a, b)
        if not x.dtype.is_float:
            x, y = cast(x, dt.float32), cast(y, dt.float32)
        return _apply(arith.DivFOp, x, y)
    x, y = unify(a, b)
    d = x.dtype
    if op == "**":
        return _pow(x, y)
    if op == "%":
        return _mod(x, y)
    if d.is_float:
        if op == "//":
            return wrap(math.FloorOp(_apply(arith.DivFOp, x, y).value).result, d)
        if op not in _FLOAT_BIN:
            raise type_error(f"operator '{op}' does not apply to {d.name} operands")
        return _apply(_FLOAT_BIN[op], x, y)
    if d.is_bool and op in ("+", "-", "*", "//", "<<", ">>"):
        raise type_error(f"operator '{op}' does not apply to booleans; convert with "
                         f"astype(x, int32) first")
    table = _INT_BIN if op in _INT_BIN else (_SIGNED_BIN if d.is_signed else _UNSIGNED_BIN)
    if op not in table:
        raise type_error(f"operator '{op}' does not apply to {d.name} operands")
    return _apply(table[op], x, y)


def _apply(opclass, x: TileValue, y: TileValue) -> TileValue:
    return wrap(opclass(x.value, y.value).result, x.dtype)


def _mod(x: TileValue, y: TileValue) -> TileValue:
    """Python's modulo: the result takes the divisor's sign."""
    d = x.dtype
    if d.is_bool:
        raise type_error("operator '%' does not apply to booleans")
    if d.is_int and not d.is_signed:
        return _apply(arith.RemUIOp, x, y)
    r = _apply(arith.RemFOp if d.is_float else arith.RemSIOp, x, y)
    zero = constant(0, d, x.shape)
    fix = binary("&", compare("!=", r, zero),
                 compare("!=", compare("<", r, zero), compare("<", y, zero)))
    return select(fix, _apply(arith.AddFOp if d.is_float else arith.AddIOp, r, y), r)


def _pow(x: TileValue, y: TileValue) -> TileValue:
    if x.dtype.is_float:
        return _apply(math.PowFOp, x, y)
    if x.dtype.is_bool:
        raise type_error("operator '**' does not apply to booleans")
    return _apply(math.IPowIOp, x, y)


def compare(op: str, a, b) -> TileValue:
    if is_number(a) and is_number(b):
        return _PY_FOLD[op](a, b)
    x, y = unify(a, b)
    d = x.dtype
    if d.is_float:
        r = arith.CmpFOp(getattr(arith.CmpFPredicate, _FCMP[op]), x.value, y.value).result
    else:
        table = _SCMP if (d.is_signed or d.is_bool) else _UCMP
        r = arith.CmpIOp(getattr(arith.CmpIPredicate, table[op]), x.value, y.value).result
    return wrap(r, dt.bool_)


def negate(a):
    if is_number(a):
        return -a
    check_arithmetic(a.dtype)
    if a.dtype.is_float:
        return wrap(arith.NegFOp(a.value).result, a.dtype)
    if a.dtype.is_bool:
        raise type_error("unary '-' does not apply to booleans; use 'not' or '~'")
    return binary("-", constant(0, a.dtype, a.shape), a)


def invert(a):
    """`~a`: bitwise not for integers, logical not for booleans."""
    if is_number(a):
        return (not a) if isinstance(a, bool) else ~a
    if a.dtype.is_float:
        raise type_error(f"operator '~' does not apply to {a.dtype.name}")
    ones = constant(1 if a.dtype.is_bool else -1 if a.dtype.is_signed else
                    (1 << a.dtype.bits) - 1, a.dtype, a.shape)
    return _apply(arith.XOrIOp, a, ones)


def logical_not(a):
    if is_number(a):
        return not a
    return invert(cast(a, dt.bool_))


# ---------------------------------------------------------------------------
# Math functions
# ---------------------------------------------------------------------------
_UNARY_FLOAT = {"exp": math.ExpOp, "exp2": math.Exp2Op, "log": math.LogOp, "log2": math.Log2Op,
                "sqrt": math.SqrtOp, "rsqrt": math.RsqrtOp, "tanh": math.TanhOp,
                "sin": math.SinOp, "cos": math.CosOp, "tan": math.TanOp, "floor": math.FloorOp,
                "ceil": math.CeilOp, "erf": math.ErfOp}


def unary_math(name: str, a) -> TileValue:
    v = a if isinstance(a, TileValue) else constant(a, dt.float32)
    check_arithmetic(v.dtype)
    if not v.dtype.is_float:
        if name in ("floor", "ceil"):
            return v
        v = cast(v, dt.float32)
    return wrap(_UNARY_FLOAT[name](v.value).result, v.dtype)


def absolute(a):
    if is_number(a):
        return abs(a)
    check_arithmetic(a.dtype)
    if a.dtype.is_float:
        return wrap(math.AbsFOp(a.value).result, a.dtype)
    if a.dtype.is_signed:
        return wrap(math.AbsIOp(a.value).result, a.dtype)
    return a


def select(cond, a, b) -> TileValue:
    """Element-wise `cond ? a : b` with broadcasting of all three."""
    if is_number(cond):
        return a if cond else b
    c = cond if cond.dtype.is_bool else cast(cond, dt.bool_)
    x, y = unify(a, b)
    shape = broadcast_shapes(c.shape, x.shape)
    c, x, y = broadcast_to(c, shape), broadcast_to(x, shape), broadcast_to(y, shape)
    return wrap(arith.SelectOp(c.value, x.value, y.value).result, x.dtype)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------
def normalize_axis(axis, ndim: int) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise type_error(f"axis must be a compile-time int, got {describe(axis)}")
    if not -ndim <= axis < ndim:
        raise value_error(f"axis {axis} is out of range for a tile of rank {ndim}")
    return axis % ndim


_ARG = ("argmax", "argmin")


def reduce(kind: str, v, axis=None, keepdims: bool = False, *, propagate_nan: bool = True,
           options: dict[str, str] | None = None) -> TileValue:
    """`kind` (sum prod max min argmax argmin) of tile `v` over `axis` (an int, a tuple,
    None for all).  Float max/min/argmax/argmin ignore NaN elements unless
    `propagate_nan` (`tile.reduce` kinds maxnum... / max...); integers have one kind.
    `options`: the float options (`tile.rounding`, `tile.ftz`) every step carries."""
    if not isinstance(v, TileValue):
        raise type_error(f"{kind}() needs a tile, got {describe(v)}")
    check_arithmetic(v.dtype)
    if v.is_scalar:
        return constant(0, dt.int32) if kind in _ARG else v
    if v.dtype.is_bool:
        v = cast(v, dt.int32)
    if kind in ("max", "min", *_ARG) and v.dtype.is_float and not propagate_nan:
        kind += "num"                  # the tile.reduce kind that ignores NaN
    if kind.startswith("arg"):
        if axis is None:
            flat = reshape(v, (_numel(v.shape),))
            r = _reduce_axis(kind, flat, 0, options)
            return reshape(r, (1,) * v.ndim) if keepdims else r
        if isinstance(axis, tuple):
            raise type_error(f"{kind[:6]} takes one axis or None, not a tuple of axes "
                             f"{axis!r}")
        axes = [normalize_axis(axis, v.ndim)]
    elif axis is None:
        axes = list(range(v.ndim))
    elif isinstance(axis, tuple):
        axes = sorted({normalize_axis(a, v.ndim) for a in axis})
    else:
        axes = [normalize_axis(axis, v.ndim)]
    out_shape = tuple(1 if i in axes else s for i, s in enumerate(v.shape))
    r = v
    for ax in reversed(axes):          # highest axis first keeps the others' numbering
        r = _reduce_axis(kind, r, ax, options)
    return reshape(r, out_shape) if keepdims else r


def _reduce_axis(kind: str, v: TileValue, axis: int,
                 options: dict[str, str] | None = None) -> TileValue:
    op = tile.ReduceOp(v.value, kind, axis, options=options)
    d = dt.int32 if kind.startswith("arg") else v.dtype
    r = wrap(op.result, d)
    return extract_scalar(r) if r.shape == () else r


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# ---------------------------------------------------------------------------
# Matrix multiply
# ---------------------------------------------------------------------------
_INT8 = (dt.int8, dt.uint8)


def _matmul_operands(a, b, promote: bool = True) -> tuple[TileValue, TileValue]:
    """`a` and `b` checked as product operands, batch dims broadcast.  `promote`
    (matmul): operands of different dtypes go to their common dtype.  Without it
    (mma, as cuTile's): they must have one dtype, but for an int8 / uint8 pair and
    the two fp8 types, which the tensor cores multiply as they are."""
    # (matmul turns its 1-D operands 2-D before this; its message still names them)
    _operand_ranks(a, b, (1, 2, 3) if promote else (2, 3))
    if a.shape[-1] != b.shape[-2]:
        raise type_error(f"matmul contraction dims differ: a has shape {a.shape}, b has "
                         f"shape {b.shape} (a.shape[-1] must equal b.shape[-2])")
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]:     # batch dims broadcast
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = broadcast_to(a, batch + a.shape[-2:])
        b = broadcast_to(b, batch + b.shape[-2:])
    mix = a.dtype != b.dtype and not (a.dtype.mlir in tile.FP8_TYPES and
                                      b.dtype.mlir in tile.FP8_TYPES)
    if mix and promote:
        d = dt.promote(a.dtype, b.dtype)      # (e4m3 x e5m2 mix: the tensor cores take it)
        a, b = cast(a, d), cast(b, d)
    elif mix and not (a.dtype in _INT8 and b.dtype in _INT8):
        raise type_error(f"mma operands must have one dtype, but for int8 / uint8 and "
                         f"float8_e4m3fn / float8_e5m2 pairs; got {a.dtype.name} and "
                         f"{b.dtype.name} (mma does not promote: cast one, or use matmul)")
    if a.dtype.is_bool or (a.dtype.is_int and a.dtype.bits != 8):
        raise type_error(f"matmul does not take {a.dtype.name} operands; use float16, "
                         f"bfloat16, float32, float64, int8 or uint8")
    return a, b


def _operand_ranks(a, b, ranks=(1, 2, 3)) -> None:
    what = "1-D, 2-D or 3-D" if 1 in ranks else "2-D or 3-D"
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, TileValue) or x.ndim not in ranks:
            raise type_error(f"matmul operand {name} must be a {what} tile, got "
                             f"{describe(x)}")


def _int8_product(a: TileValue, b: TileValue, acc: TileValue) -> TileValue:
    """`a @ b + acc` of int8 / uint8 (M, K) x (K, N) tiles into int32, through the signed
    int8 product (Tile IR's i8 is signed): a uint8 operand enters as x' = x - 128 (exact
    in int8), and sum_k a b = sum_k a' b' + 128 [a unsigned] sum_k b' + 128 [b unsigned]
    sum_k a' + 128^2 K [both].  Exact, in the interpreter and on the GPU (int32
    wrapping as the product would)."""
    ua, ub = a.dtype == dt.uint8, b.dtype == dt.uint8

    def signed(t):
        return cast(binary("-", cast(t, dt.int16), 128), dt.int8) if t.dtype == dt.uint8 else t
    a2, b2 = signed(a), signed(b)
    r = wrap(tile.MmaOp(a2.value, b2.value, acc.value).result, dt.int32)
    if ub:
        rows = reduce("sum", cast(a2, dt.int32), axis=1, keepdims=True)      # (M, 1)
        r = binary("+", r, binary("*", rows, 128))
    if ua:
        cols = reduce("sum", cast(b2, dt.int32), axis=0, keepdims=True)      # (1, N)
        r = binary("+", r, binary("*", cols, 128))
    return binary("+", r, 128 * 128 * a.shape[-1]) if ua and ub else r


def matmul(a, b) -> TileValue:
    """`a @ b` as NumPy and cuTile define it: 2-D or 3-D (batched, batch dims broadcast)
    operands, or 1-D ones: a 1-D `a` is a row (1, K) and a 1-D `b` a column (K, 1), the
    unit dim dropped from the result again (1-D @ 1-D: a 0-d dot product)."""
    if isinstance(a, TileValue) and isinstance(b, TileValue) and 1 in (a.ndim, b.ndim):
        _operand_ranks(a, b)
        row, col = a.ndim == 1, b.ndim == 1
        k = b.shape[0] if col else b.shape[-2]
        if a.shape[-1] != k:
            raise type_error(f"matmul contraction dims differ: a has shape {a.shape}, b has "
                             f"shape {b.shape} (a.shape[-1] must equal "
                             f"b.shape[{0 if col else -2}])")
        r = matmul(reshape(a, (1, a.shape[0])) if row else a,
                   reshape(b, (b.shape[0], 1)) if col else b)
        shape = r.shape[:-2] + r.shape[-2:-1] * (not row) + r.shape[-1:] * (not col)
        return reshape(r, shape)
    a, b = _matmul_operands(a, b)
    if a.ndim == 3:          # one 2-d product a batch (a batch of 1 too)
        return _per_batch(lambda x, y, _: matmul(x, y), a, b, None)
    if a.dtype == dt.uint8:
        return _int8_product(a, b, constant(0, dt.int32, (a.shape[0], b.shape[-1])))
    out = dt.int32 if a.dtype.is_int else dt.float32 if a.dtype.restricted else a.dtype
    shape = (*a.shape[:-1], b.shape[-1])
    op = tile.MatmulOp(a.value, b.value, tensor_type(shape, out))
    return wrap(op.result, out)


def _per_batch(product, a: TileValue, b: TileValue, acc: TileValue | None) -> TileValue:
    """A product of several batches as one 2-d product per batch, stacked again: the
    tensor-core rules take one matrix product a block."""
    from .movement import _cat, _extract
    m, k, n = a.shape[1], a.shape[2], b.shape[2]
    parts = []
    for i in range(a.shape[0]):
        x = reshape(_extract(a, (i, 0, 0), (1, m, k)), (m, k))
        y = reshape(_extract(b, (i, 0, 0), (1, k, n)), (k, n))
        c = None if acc is None else reshape(_extract(acc, (i, 0, 0), (1, m, n)), (m, n))
        r = product(x, y, c)
        parts.append(reshape(r, (1, m, n)))
    while len(parts) > 1:
        parts = [_cat((parts[j], parts[j + 1]), 0) for j in range(0, len(parts), 2)]
    return parts[0]


def mma(a, b, acc, fast_acc: bool = False) -> TileValue:
    """`a @ b + acc` (cuTile's `mma(x, y, acc, use_fast_acc=)`).  fp8 products into an
    f32 accumulator are summed in f32 unless `fast_acc` (`tile.fast_acc`: summed on the
    tensor cores across the loop, in fewer bits; docs/tensor-cores.md)."""
    a, b = _matmul_operands(a, b, promote=False)
    if not isinstance(acc, TileValue):
        raise type_error(f"mma accumulator must be a tile, got {describe(acc)}")
    want = (*a.shape[:-1], b.shape[-1])
    if acc.shape != want:
        raise type_error(f"mma accumulator has shape {acc.shape}, expected {want} for a of "
                         f"shape {a.shape} and b of shape {b.shape}")
    allowed = tile.mma_accumulator_types(ir.Type.parse(a.dtype.mlir))   # (u8 is i8 here)
    if acc.dtype.mlir not in allowed:
        raise type_error(f"mma with {a.dtype.name} operands accumulates in "
                         f"{' or '.join(dt.from_mlir(x).name for x in allowed)}, got a "
                         f"{acc.dtype.name} accumulator")
    fp8 = a.dtype.mlir in tile.FP8_TYPES
    if fast_acc and not fp8:
        raise type_error(f"use_fast_acc is only supported for fp8 input dtypes "
                         f"(float8_e4m3fn, float8_e5m2), got {a.dtype.name}")
    if a.ndim == 3:          # one 2-d product a batch (a batch of 1 too)
        return _per_batch(lambda x, y, c: mma(x, y, c, fast_acc), a, b, acc)
    if a.dtype in _INT8 and (a.dtype == dt.uint8 or b.dtype == dt.uint8):
        return _int8_product(a, b, acc)
    op = tile.MmaOp(a.value, b.value, acc.value)
    if fast_acc:
        op.operation.attributes[tile.FAST_ACC_ATTR] = ir.UnitAttr.get()
    return wrap(op.result, acc.dtype)
