"""Trace-time implementations of the tile language (`tileir.api`), one rule per function.

A rule receives the call's arguments bound to the public signature (so
keywords, defaults and positional use all work as in cuTile) and returns a
traced value or a Python constant.
"""

from __future__ import annotations

import inspect
import math as pymath
from typing import Callable

from .. import api
from .. import dtypes as dt
from ..api import PaddingMode
from mlir import ir

from tileir.dialect import ordering as ordering_ops
from tileir.dialect import tile as tile_ops
from tileir.dialect.types import is_power_of_two
from . import compute, windows
from .emit import (as_value, broadcast_to, cast, constant, is_number, loc, reshape, splat,
                   tensor_type, type_error, value_error, wrap)
from ..errors import TileStaticAssertionError, TileUnsupportedFeatureError
from ..semantics import MemoryOrder, MemoryScope
from .values import ArrayValue, TileValue, describe

RULES: dict[str, Callable] = {}


def rule(name: str):
    def deco(fn):
        RULES[name] = fn
        return fn
    return deco


# Methods of kernel values (`a.slice(...)`, `tv.load(...)`): rules named
# "Class.method", bound against the stubs of `tileir.Array` / `tileir.TiledView`.
# `tileir.TiledView.load(tv, ...)` names the same rule: METHOD_NAMES finds it.
METHOD_SIGNATURES: dict[str, Callable] = {}
METHOD_NAMES: dict[Callable, str] = {}


def method(cls: type, name: str):
    key = f"{cls.__name__}.{name}"
    METHOD_SIGNATURES[key] = getattr(cls, name)
    METHOD_NAMES[getattr(cls, name)] = key
    return rule(key)


def call(name: str, args: tuple, kwargs: dict, extra: dict | None = None):
    """Rule `name` on the call's arguments bound to the public signature; `extra`:
    what the compiler adds for rules that call back into it (`_apply`)."""
    sig = _signature(api.SIGNATURES.get(name) or METHOD_SIGNATURES[name])
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise type_error(f"bad arguments to {name}{sig}: {e}")
    bound.apply_defaults()
    return RULES[name](**bound.arguments, **(extra or {}))


# The public signatures by function: `inspect.signature` builds a Signature each time
# (~40 us, a fifth of a call's tracing; a compile traces hundreds of calls).
_SIGNATURE_OF: dict[Callable, inspect.Signature] = {}


def _signature(fn: Callable) -> inspect.Signature:
    sig = _SIGNATURE_OF.get(fn)
    if sig is None:
        sig = _SIGNATURE_OF[fn] = inspect.signature(fn)
    return sig


# rules that apply a user's combine function: the compiler passes `_apply`
CALLBACK_RULES = ("reduce", "scan")


# ---------------------------------------------------------------------------
# Argument checking helpers
# ---------------------------------------------------------------------------
def const_int(x, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise type_error(f"{what} must be a compile-time int, got {describe(x)} (declare kernel "
                         f"parameters used here as Constant[int])")
    return x


def const_shape(shape, what: str = "shape") -> tuple[int, ...]:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, tuple):
        raise type_error(f"{what} must be a tuple of compile-time ints, got {describe(shape)}")
    dims = tuple(const_int(s, f"{what} entry") for s in shape)
    for axis, d in enumerate(dims):
        if not is_power_of_two(d):
            raise value_error(f"tile {what} {dims} must have power-of-two dims; got {d} in "
                              f"axis {axis} (round up and rely on padding/masking)")
    return dims


def dtype_arg(x, default: dt.DType | None = None) -> dt.DType:
    if x is None and default is not None:
        return default
    d = dt.from_any(x)
    if d is None:
        raise type_error(f"expected a dtype (e.g. tileir.float32), got {describe(x)}")
    if d == dt.float8_e5m3fnu:
        raise TileUnsupportedFeatureError("float8_e5m3fnu has no MLIR type in this build; "
                                          "tileir cannot compile tiles of it", loc())
    return d


def tile_arg(x, what: str) -> TileValue:
    if not isinstance(x, TileValue):
        raise type_error(f"{what} must be a tile, got {describe(x)}")
    return x


def array_arg(x, what: str) -> ArrayValue:
    if not isinstance(x, ArrayValue):
        raise type_error(f"{what} must be an array argument of the kernel, got {describe(x)}")
    return x


def scalar_int(x, what: str) -> TileValue:
    if is_number(x) and not isinstance(x, float):
        return constant(int(x), dt.int32)
    if isinstance(x, TileValue) and x.is_scalar and (x.dtype.is_int or x.dtype.is_bool):
        return cast(x, dt.int32)
    raise type_error(f"{what} must be an integer scalar, got {describe(x)}")


def index_tuple(index, ndim: int) -> list[TileValue]:
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) != ndim:
        raise type_error(f"index has {len(index)} entries but the array has {ndim} dims "
                         f"(one tile index per dim)")
    return [scalar_int(i, f"index entry {k}") for k, i in enumerate(index)]


# ---------------------------------------------------------------------------
# Grid and arrays
# ---------------------------------------------------------------------------
def _grid_axis(axis) -> int:
    axis = const_int(axis, "axis")
    if axis not in (0, 1, 2):
        raise value_error(f"grid axis must be 0, 1 or 2, got {axis}")
    return axis


@rule("bid")
def _bid(axis):
    return wrap(tile_ops.BidOp(_grid_axis(axis)).result, dt.int32)


@rule("num_blocks")
def _num_blocks(axis):
    return wrap(tile_ops.NumBlocksOp(_grid_axis(axis)).result, dt.int32)


def array_dim(a: ArrayValue, axis: int) -> TileValue | int:
    """Dim `axis` of `a`: a Python int where the kernel's annotation (or a slice's
    compile-time bounds) compiles it in."""
    if a.is_slice and a.extents[axis] is not None:
        return a.extents[axis]
    static = dict(a.static_shape)
    if axis in static:
        return static[axis]
    return wrap(tile_ops.DimOp(a.value, axis).result, dt.int32)


def array_stride(a: ArrayValue, axis: int) -> TileValue | int:
    static = dict(a.static_strides)
    if axis in static:
        return static[axis]
    return wrap(tile_ops.StrideOp(a.value, axis).result, dt.int32)


@rule("cdiv")
def _cdiv(a, b):
    if is_number(a) and is_number(b):
        return -(-a // b)
    return compute.binary("//", compute.binary("+", a, compute.binary("-", b, 1)), b)


@rule("num_tiles")
def _num_tiles(array, axis, shape, order):
    """Tiles of `shape` along `axis` of the tile space of the array, its axes permuted by
    `order` as `load` permutes them: tile-space axis i is array axis order[i]."""
    a = array_arg(array, "array")
    axis = compute.normalize_axis(const_int(axis, "axis"), a.ndim)
    shape = (1,) * a.ndim if shape == () else const_shape(shape)
    if len(shape) != a.ndim:
        raise type_error(f"shape {shape} has {len(shape)} dims, the array has {a.ndim}")
    perm = _order(order, a.ndim)
    return _cdiv(array_dim(a, axis if perm is None else perm[axis]), shape[axis])


def _order(order, ndim: int) -> list[int] | None:
    """The axis permutation of `order` ("C", "F" or a tuple), None for none."""
    if order == "C":
        return None
    if order == "F":
        perm = list(reversed(range(ndim)))
    elif isinstance(order, tuple) and sorted(
            compute.normalize_axis(const_int(a, "order entry"), ndim) for a in order) == \
            list(range(ndim)):
        perm = [compute.normalize_axis(a, ndim) for a in order]
    else:
        raise type_error(f"order must be 'C', 'F' or a permutation of the {ndim} array axes, "
                         f"got {describe(order)}")
    return None if perm == list(range(ndim)) else perm


_ACCESS_ORDERS = {"tile_load": (MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, MemoryOrder.WEAK),
                  "tile_store": (MemoryOrder.RELAXED, MemoryOrder.RELEASE, MemoryOrder.WEAK)}
_ACCESS_SCOPES = {MemoryScope.BLOCK: "block", MemoryScope.DEVICE: "device",
                  MemoryScope.SYS: "sys"}


def access_order(check_bounds, memory_order, memory_scope, opcode: str) -> str | None:
    """Checks load/store's `check_bounds`, `memory_order` and `memory_scope` as cuTile
    does; the scope of a relaxed (strong) access (`tile.memory_scope`), None for a weak
    one.  ACQUIRE and RELEASE add a `tile.fence` after the load / before the store."""
    if not isinstance(check_bounds, bool):
        raise type_error(f"check_bounds must be a compile-time bool, got {describe(check_bounds)}")
    memory_order = MemoryOrder.WEAK if memory_order is None else memory_order
    memory_scope = MemoryScope.NONE if memory_scope is None else memory_scope
    valid = _ACCESS_ORDERS[opcode]
    if memory_order not in valid:
        raise type_error(f"Invalid memory order for {opcode}. Got {describe(memory_order)}, "
                         f"expected one of {', '.join(str(o) for o in valid)}")
    if not isinstance(memory_scope, MemoryScope):
        raise type_error(f"Invalid memory scope for {opcode}. Got {describe(memory_scope)}")
    if memory_order == MemoryOrder.WEAK:
        if memory_scope != MemoryScope.NONE:
            raise type_error(f"{opcode} with WEAK memory ordering cannot specify a memory scope")
        return None
    if memory_scope == MemoryScope.NONE:
        raise type_error(f"{opcode} with {memory_order.name} memory ordering requires a "
                         f"memory scope")
    if memory_scope not in _ACCESS_SCOPES:          # CLUSTER: cuda.lang's, not cuTile's
        raise type_error(f"Invalid memory scope for {opcode}. Got {memory_scope}, expected "
                         f"one of MemoryScope.NONE, MemoryScope.BLOCK, MemoryScope.DEVICE, "
                         f"MemoryScope.SYS")
    return _ACCESS_SCOPES[memory_scope]


def ordered(op, scope: str | None, what: str) -> None:
    """Marks the `tile.load` / `tile.store` that implements an access as relaxed at
    `scope` (nothing for a weak access)."""
    if scope is None:
        return
    op = op.operation
    if op.name not in ("tile.load", "tile.store"):
        raise TileUnsupportedFeatureError(
            f"{what} with a memory_order other than WEAK reads or writes an array slice or "
            f"a tile with steps element by element; ordered accesses are supported on "
            f"whole arrays only", loc())
    op.attributes[tile_ops.SCOPE_ATTR] = ir.StringAttr.get(scope)


def padding_arg(padding_mode, a: ArrayValue) -> None:
    if not isinstance(padding_mode, PaddingMode):
        raise type_error(f"padding_mode must be a tileir.PaddingMode, got {describe(padding_mode)}")
    if padding_mode not in (PaddingMode.ZERO, PaddingMode.UNDETERMINED) and not a.dtype.is_float:
        raise type_error(f"padding_mode {padding_mode.name} needs a float array, got "
                         f"{a.dtype.name}")


def latency_arg(latency) -> None:
    if latency is not None and not (isinstance(latency, int) and 1 <= latency <= 10):
        raise value_error(f"latency must be an int in 1..10, got {describe(latency)}")


@rule("load")
def _load(array, index, shape, order, padding_mode, check_bounds, latency, allow_tma,
          memory_order, memory_scope):
    a = array_arg(array, "array")
    scope = access_order(check_bounds, memory_order, memory_scope, "tile_load")
    scalar = shape == ()
    shape = (1,) * a.ndim if scalar else const_shape(shape)   # `()`: one element
    if len(shape) != a.ndim:
        raise type_error(f"shape {shape} has {len(shape)} dims but the array has {a.ndim}")
    idx = index_tuple(index, a.ndim)
    padding_arg(padding_mode, a)
    latency_arg(latency)
    perm = _order(order, a.ndim)
    if perm is not None:             # the tile space of the permuted array: load, permute
        shape = tuple(shape[perm.index(d)] for d in range(a.ndim))
        idx = [idx[perm.index(d)] for d in range(a.ndim)]
    t = windows.load(a, idx, shape, padding_mode.value)
    ordered(t.value.owner, scope, "load")
    if memory_order == MemoryOrder.ACQUIRE:
        ordering_ops.FenceOp("acquire", scope)
    if perm is not None:
        t = wrap(tile_ops.PermuteOp(t.value, perm).result, a.dtype)
    return reshape(t, ()) if scalar else t


@rule("store")
def _store(array, index, tile, order, check_bounds, latency, allow_tma, memory_order,
           memory_scope):
    a = array_arg(array, "array")
    scope = access_order(check_bounds, memory_order, memory_scope, "tile_store")
    latency_arg(latency)
    idx = index_tuple(index, a.ndim)
    t = as_value(tile, a.dtype)
    if t.ndim > a.ndim:
        raise type_error(f"cannot store {t.describe()} into {a.describe()}")
    if t.ndim < a.ndim:                           # scalars and lower-rank tiles: leading 1s
        t = reshape(t, (1,) * (a.ndim - t.ndim) + t.shape)
    t = cast(t, a.dtype)
    perm = _order(order, a.ndim)
    if perm is not None:             # back to the array's axes
        inverse = [perm.index(d) for d in range(a.ndim)]
        t = wrap(tile_ops.PermuteOp(t.value, inverse).result, a.dtype)
        idx = [idx[perm.index(d)] for d in range(a.ndim)]
    if memory_order == MemoryOrder.RELEASE:
        ordering_ops.FenceOp("release", scope)
    ordered(windows.store(a, idx, t), scope, "store")
    return None


# ---------------------------------------------------------------------------
# Construction
# ---------------------------------------------------------------------------
@rule("full")
def _full(shape, fill_value, dtype):
    shape = const_shape(shape)
    if is_number(fill_value):
        d = dtype_arg(dtype, compute_default_dtype(fill_value))
        return constant(fill_value, d, shape)
    v = tile_arg(fill_value, "fill_value")
    if not v.is_scalar:
        raise type_error(f"fill_value must be a scalar, got {v.describe()}")
    if dtype is not None:
        v = cast(v, dtype_arg(dtype))
    return splat(v, shape)


def compute_default_dtype(x) -> dt.DType:
    return dt.bool_ if isinstance(x, bool) else dt.int32 if isinstance(x, int) else dt.float32


@rule("zeros")
def _zeros(shape, dtype):
    return constant(0, dtype_arg(dtype, dt.float32), const_shape(shape))


@rule("ones")
def _ones(shape, dtype):
    return constant(1, dtype_arg(dtype, dt.float32), const_shape(shape))


@rule("arange")
def _arange(size, dtype, start, step):
    """[start, start + step, ..., start + (size - 1) * step] in `dtype`, as cuTile
    computes it: the iota in `dtype`, times `step`, plus `start`, each converted to
    `dtype` first (`start`/`step`: compile-time numbers or run-time scalars)."""
    (n,) = const_shape(size, "size")
    d = dtype_arg(dtype, dt.int32)
    it = dt.int64 if (d.is_int and d.bits == 64) else dt.int32
    r = cast(wrap(tile_ops.IotaOp(tensor_type((n,), it)).result, it), d)
    if not (is_number(step) and not isinstance(step, bool) and step == 1):
        r = compute.binary("*", r, _scalar_in(step, d, "step"))
    if not (is_number(start) and not isinstance(start, bool) and start == 0):
        r = compute.binary("+", r, _scalar_in(start, d, "start"))
    return r


def _scalar_in(x, d: dt.DType, what: str) -> TileValue:
    """A scalar argument converted to `d` (a Python number as a constant of `d`)."""
    if is_number(x):
        if d.is_int and not isinstance(x, bool):
            x = int(x)                    # toward zero, as a float's astype to int
            lo, hi = (-(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1) if d.is_signed else \
                (0, (1 << d.bits) - 1)
            if not lo <= x <= hi:
                raise value_error(f"arange {what} {x} is out of range of {d.name}")
        return constant(x, d)
    if not (isinstance(x, TileValue) and x.is_scalar):
        raise type_error(f"arange {what} must be a scalar, got {describe(x)}")
    return cast(x, d)


@rule("where")
def _where(cond, x, y):
    return compute.select(cond, x, y)


# ---------------------------------------------------------------------------
# Shape
# ---------------------------------------------------------------------------
@rule("reshape")
def _reshape(x, shape):
    t = tile_arg(x, "x")
    shape = tuple(const_int(s, "shape entry") for s in
                  (shape if isinstance(shape, tuple) else (shape,)))
    if -1 in shape:
        known = 1
        for s in shape:
            known *= s if s != -1 else 1
        shape = tuple(compute._numel(t.shape) // known if s == -1 else s for s in shape)
    if compute._numel(shape) != compute._numel(t.shape):
        raise type_error(f"cannot reshape {t.describe()} to {shape}: element counts differ")
    if shape:
        const_shape(shape)          # power-of-two check with the usual message
    return reshape(t, shape)


@rule("permute")
def _permute(x, axes):
    t = tile_arg(x, "x")
    if not isinstance(axes, tuple) or sorted(
            compute.normalize_axis(a, t.ndim) for a in axes) != list(range(t.ndim)):
        raise value_error(f"axes {axes!r} is not a permutation of the {t.ndim} dims of "
                          f"{t.describe()}")
    perm = [compute.normalize_axis(a, t.ndim) for a in axes]
    if perm == list(range(t.ndim)):
        return t
    return wrap(tile_ops.PermuteOp(t.value, perm).result, t.dtype)


@rule("transpose")
def _transpose(x, axis0, axis1):
    t = tile_arg(x, "x")
    if t.ndim < 2:
        raise type_error(f"transpose needs a tile of rank >= 2, got {t.describe()}")
    a0 = compute.normalize_axis(-2 if axis0 is None else axis0, t.ndim)
    a1 = compute.normalize_axis(-1 if axis1 is None else axis1, t.ndim)
    perm = list(range(t.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return _permute(t, tuple(perm))


@rule("broadcast_to")
def _broadcast_to(x, shape):
    return broadcast_to(as_value(x), const_shape(shape))


@rule("expand_dims")
def _expand_dims(x, axis):
    t = as_value(x)
    axis = compute.normalize_axis(const_int(axis, "axis"), t.ndim + 1)
    return reshape(t, t.shape[:axis] + (1,) + t.shape[axis:])


# ---------------------------------------------------------------------------
# Reductions, math, matmul
# ---------------------------------------------------------------------------
def const_bool(x, what: str) -> bool:
    if not isinstance(x, (bool, int)):
        raise type_error(f"{what} must be a compile-time bool, got {describe(x)}")
    return bool(x)


# cuTile's options of each reduction, and the float op whose options they are
_REDUCTION_OPTIONS = {"sum": ("add", True), "prod": ("mul", True), "max": ("maximum", False),
                      "min": ("minimum", False)}


def _reduction(kind):
    def fn(x, axis, keepdims, rounding_mode=None, flush_to_zero=False, propagate_nan=False):
        from .functional import float_options
        keepdims = const_bool(keepdims, "keepdims")
        propagate_nan = const_bool(propagate_nan, "propagate_nan")
        flush_to_zero = const_bool(flush_to_zero, "flush_to_zero")
        options: dict[str, str] = {}
        if kind in _REDUCTION_OPTIONS and (rounding_mode is not None or flush_to_zero):
            t = tile_arg(x, "x")
            d = dt.int32 if t.dtype.is_bool else t.dtype
            name, rounds = _REDUCTION_OPTIONS[kind]
            options = float_options(name, d, rounding_mode if rounds else None, flush_to_zero,
                                    what=kind)
            if options.get("tile.rounding") == "rn":     # the default
                del options["tile.rounding"]
        return compute.reduce(kind, x, axis, keepdims, propagate_nan=propagate_nan,
                              options=options)
    return fn


for _k in ("sum", "prod", "max", "min", "argmax", "argmin"):
    RULES[_k] = _reduction(_k)


_PY_MATH = {"exp": pymath.exp, "exp2": lambda x: 2.0 ** x, "log": pymath.log,
            "log2": pymath.log2, "sqrt": pymath.sqrt, "rsqrt": lambda x: 1 / pymath.sqrt(x),
            "tanh": pymath.tanh, "sin": pymath.sin, "cos": pymath.cos, "tan": pymath.tan,
            "floor": pymath.floor, "ceil": pymath.ceil}


def _math(name):
    def fn(x):
        if is_number(x):                 # constant folding of compile-time arguments
            return _PY_MATH[name](x)
        return compute.unary_math(name, tile_arg(x, "x"))
    return fn


for _k in _PY_MATH:
    RULES[_k] = _math(_k)


@rule("abs")
def _abs(x):
    return compute.absolute(x)


@rule("maximum")
def _maximum(x, y):
    return compute.binary("max", x, y)


@rule("minimum")
def _minimum(x, y):
    return compute.binary("min", x, y)


@rule("pow")
def _pow(x, y):
    return compute.binary("**", x, y)


@rule("mma")
def _mma(a, b, acc, use_fast_acc):
    if not isinstance(use_fast_acc, bool):
        raise type_error(f"mma's use_fast_acc must be a compile-time bool, got "
                         f"{describe(use_fast_acc)}")
    return compute.mma(a, b, acc, use_fast_acc)


@rule("matmul")
def _matmul(a, b):
    return compute.matmul(a, b)


@rule("static_assert")
def _static_assert(cond, message):
    if not is_number(cond):
        raise type_error(f"static_assert needs a compile-time condition, got {describe(cond)}")
    if not cond:
        raise TileStaticAssertionError(
            f"Static assertion failed{': ' + str(message) if message else ''}", loc())
    return None


@rule("ensure_constant")
def _ensure_constant(value):
    if isinstance(value, (TileValue, ArrayValue)):
        raise TileStaticAssertionError("Argument of ensure_constant() is not a compile-time "
                                       f"constant ({describe(value)})", loc())
    return value


@rule("assume_divisible_by")
def _assume_divisible_by(x, divisor):
    divisor = const_int(divisor, "divisor")
    if divisor < 1:
        raise type_error(f"assume_divisible_by needs a divisor >= 1, got {divisor}")
    if is_number(x) and not isinstance(x, (bool, float)):
        if x % divisor:
            raise value_error(f"assume_divisible_by: the constant {x} is not a multiple of "
                              f"{divisor}")
        return x
    if not (isinstance(x, TileValue) and x.is_scalar and x.dtype.is_int):
        raise type_error(f"assume_divisible_by needs an integer scalar, got {describe(x)}")
    return x


# Methods of traced tiles: `t.astype(d)`, `t.reshape(s)`, `t.sum(axis)`, ...
TILE_METHODS = {"astype": "astype", "reshape": "reshape", "permute": "permute",
                "transpose": "transpose", "sum": "sum", "prod": "prod", "max": "max",
                "min": "min", "argmax": "argmax", "argmin": "argmin", "expand_dims": "expand_dims",
                "broadcast_to": "broadcast_to", "item": "item", "extract": "extract",
                "insert": "insert"}


from . import (conversions, debug, functional, indexed, movement, scaled, scans,  # noqa: E402,F401
               views)
