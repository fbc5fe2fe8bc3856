"""Trace-time rule of `mma_scaled`: block-scaled products (cuTile's name, operand
and scale formats, shape rules).

`x` ([..., M, K]) and `y` ([..., K, N]) are fp8 or fp4; each of `x_scale`
([..., M, K/B]) and `y_scale` ([..., K/B, N]) scales a block of B consecutive K
elements.  The product is built from ops tileir has: both operands widened to
f32 and multiplied by their scales repeated along K, then `mma` into the f32
accumulator.  A scale is a power of two (e8m0) or an e4m3 (fp4 inputs), so the
scaled operands are exact in f32 and in TF32 (at most 5 significant bits): the
result is the exact sum of products, rounded as an f32 accumulation is.
Block-scaled tensor cores are sm_100's: on sm_90a/sm_80 the fp4 and e8m0 tiles
are refused by name (the layout stage), the interpreter runs everything.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileUnsupportedFeatureError
from . import compute
from .emit import broadcast_to, cast, loc, reshape, type_error
from .intrinsics import rule, tile_arg

# (operand dtype, scale dtype) -> allowed blocks
_FORMATS = {("float8_e4m3fn", "float8_e8m0fnu"): (32,),
            ("float8_e5m2", "float8_e8m0fnu"): (32,),
            ("float4_e2m1fn", "float8_e8m0fnu"): (16, 32),
            ("float4_e2m1fn", "float8_e4m3fn"): (16,),
            ("float4_e2m1fn", "float8_e5m3fnu"): (16, 32)}


def _repeat(scale, axis: int, block: int):
    """`scale` repeated `block` times along `axis` (each entry covers a block)."""
    s = cast(scale, dt.float32)
    shape = s.shape
    grown = reshape(s, shape[:axis + 1] + (1,) + shape[axis + 1:])
    full = broadcast_to(grown, shape[:axis + 1] + (block,) + shape[axis + 1:])
    return reshape(full, shape[:axis] + (shape[axis] * block,) + shape[axis + 1:])


@rule("mma_scaled")
def _mma_scaled(x, x_scale, y, y_scale, acc):
    x, xs, y, ys, acc = (tile_arg(v, name) for v, name in (
        (x, "x"), (x_scale, "x_scale"), (y, "y"), (y_scale, "y_scale"), (acc, "acc")))
    if x.dtype != y.dtype or xs.dtype != ys.dtype:
        raise type_error(f"mma_scaled needs x and y of one dtype and both scales of one dtype, "
                         f"got {x.dtype.name}/{y.dtype.name} and {xs.dtype.name}/{ys.dtype.name}")
    blocks = _FORMATS.get((x.dtype.name, xs.dtype.name))
    if blocks is None:
        raise type_error(f"mma_scaled does not take {x.dtype.name} operands with "
                         f"{xs.dtype.name} scales (it takes {sorted(_FORMATS)})")
    if xs.dtype == dt.float8_e5m3fnu:
        raise TileUnsupportedFeatureError("float8_e5m3fnu scales have no MLIR type in this "
                                          "build", loc())
    if acc.dtype != dt.float32:
        raise type_error(f"mma_scaled accumulates in float32, got {acc.describe()}")
    for t, name in ((x, "x"), (xs, "x_scale"), (y, "y"), (ys, "y_scale")):
        if t.ndim not in (2, 3):
            raise type_error(f"mma_scaled's {name} must be 2-D or 3-D, got {t.describe()}")
    k, ks = x.shape[-1], xs.shape[-1]
    if xs.shape[:-1] != x.shape[:-1] or ys.shape[-1] != y.shape[-1] or ys.shape[-2] != ks \
            or y.shape[-2] != k or k % ks:
        raise type_error(f"mma_scaled shapes do not fit: x {x.shape}, x_scale {xs.shape}, "
                         f"y {y.shape}, y_scale {ys.shape} (x [...,M,K], x_scale [...,M,K/B], "
                         f"y [...,K,N], y_scale [...,K/B,N])")
    block = k // ks
    if block not in blocks:
        raise type_error(f"mma_scaled with {x.dtype.name} and {xs.dtype.name} scales takes "
                         f"blocks of {' or '.join(map(str, blocks))} K elements, got {block}")
    xd = compute.binary("*", cast(x, dt.float32), _repeat(xs, xs.ndim - 1, block))
    yd = compute.binary("*", cast(y, dt.float32), _repeat(ys, ys.ndim - 2, block))
    return compute.mma(xd, yd, acc)
