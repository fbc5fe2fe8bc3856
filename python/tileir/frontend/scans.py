"""Trace-time rules of reductions and scans with a combine function: `reduce`,
`scan`, `cumsum`, `cumprod` (cuTile's names and semantics).

The combine function is the user's: a lambda written in the kernel, a helper, a
tileir function (`ct.maximum`) or an `operator` function.  It is applied to whole
tiles, element-wise, by `apply` (the AST compiler's, which knows how to call each
kind), so one call combines every pair of a step:

- `reduce` halves the axis log2(n) times, combining neighbours (element 2k with
  2k+1: the order of a non-commutative but associative function is kept); a
  combine that is `+`, `*`, max or min on one tile is the built-in `tile.reduce`.
- `scan` is Hillis-Steele: log2(n) steps, step d combining each element with the
  one d before it (after it, `reverse`); elements with no partner keep theirs.
  The shifted operand is a window of the tile concatenated with identities.

On the GPU each step's pieces move through shared memory (`tile.extract_slice`,
`tile.concat`); `cumsum`/`cumprod` take `rounding_mode`/`flush_to_zero` onto
their combining op like `add`/`mul`.
"""

from __future__ import annotations

import operator
from typing import Callable

from .. import dtypes as dt
from tileir.dialect import pieces, tile as tile_ops
from . import compute
from .emit import (broadcast_shapes, broadcast_to, cast, constant, is_number, reshape,
                   tensor_type, type_error, wrap)
from .intrinsics import RULES, const_int, rule, tile_arg
from .movement import _cat, _extract
from .values import TileValue, describe

# combine functions that are a built-in reduction of one tile, and whether they
# propagate NaN: Python's max/min, as ct.maximum/ct.minimum, ignore it
_BUILTIN = {operator.add: ("sum", True), operator.mul: ("prod", True), max: ("max", False),
            min: ("min", False)}


def _builtin_kind(func) -> tuple[str, bool] | None:
    from .. import api
    named = {api.add: ("sum", True), api.mul: ("prod", True),
             api.maximum: ("max", False), api.minimum: ("min", False)}   # ignore NaN
    try:
        return _BUILTIN.get(func) or named.get(func)
    except TypeError:                       # unhashable: a traced lambda
        return None


def _members(x, what: str) -> tuple[list[TileValue], bool]:
    """The tile(s) of `x` broadcast to one shape, and whether `x` was a tuple."""
    many = isinstance(x, tuple)
    tiles = [tile_arg(t, what) for t in (x if many else (x,))]
    if not tiles:
        raise type_error(f"{what} is an empty tuple")
    shape = tiles[0].shape
    for t in tiles[1:]:
        shape = broadcast_shapes(shape, t.shape)
    tiles = [broadcast_to(t, shape) for t in tiles]
    if not shape:
        raise type_error(f"{what} must be a tile of rank >= 1, got a scalar")
    return tiles, many


def _identities(identity, tiles: list[TileValue], many: bool) -> list:
    ids = identity if isinstance(identity, tuple) else (identity,)
    if many != isinstance(identity, tuple) or len(ids) != len(tiles):
        raise type_error(f"identity must be {'a tuple of ' + str(len(tiles)) if many else 'one'}"
                         f" compile-time scalar{'s' if many else ''}, got {describe(identity)}")
    for v in ids:
        if not is_number(v):
            raise type_error(f"identity must be compile-time scalars, got {describe(v)}")
    return list(ids)


def _combine(apply: Callable, func, a: list[TileValue], b: list[TileValue],
             many: bool) -> list[TileValue]:
    out = apply(func, [*a, *b])
    outs = list(out) if isinstance(out, tuple) else [out]
    if len(outs) != len(a) or (many and not isinstance(out, tuple)):
        raise type_error(f"the combine function must return {len(a)} value(s), got "
                         f"{describe(out)}")
    res = []
    for o, like in zip(outs, a):
        o = constant(o, like.dtype, like.shape) if is_number(o) else tile_arg(o, "its result")
        if o.dtype != like.dtype:
            raise type_error(f"the combine function turns {like.dtype.name} into "
                             f"{o.dtype.name}; it must keep each operand's dtype (astype "
                             f"inside it)")
        res.append(broadcast_to(o, like.shape))
    return res


def _halves(t: TileValue, axis: int) -> tuple[TileValue, TileValue]:
    """Elements 2k and 2k+1 along `axis`, each of half the length."""
    n = t.shape[axis]
    pairs = reshape(t, t.shape[:axis] + (n // 2, 2) + t.shape[axis + 1:])
    sub = pairs.shape[:axis + 1] + (1,) + pairs.shape[axis + 2:]
    grid = lambda k: tuple(k if d == axis + 1 else 0 for d in range(pairs.ndim))  # noqa: E731
    half = t.shape[:axis] + (n // 2,) + t.shape[axis + 1:]
    return tuple(reshape(_extract(pairs, grid(k), sub), half) for k in (0, 1))


@rule("reduce")
def _reduce(x, axis, func, identity, keepdims, _apply):
    tiles, many = _members(x, "x")
    axis = compute.normalize_axis(const_int(axis, "axis"), tiles[0].ndim)
    _identities(identity, tiles, many)
    builtin = None if many else _builtin_kind(func)
    if builtin is not None:
        kind, propagate_nan = builtin
        return compute.reduce(kind, tiles[0], axis, bool(keepdims), propagate_nan=propagate_nan)
    while tiles[0].shape[axis] > 1:
        pairs = [_halves(t, axis) for t in tiles]
        tiles = _combine(_apply, func, [p[0] for p in pairs], [p[1] for p in pairs], many)
    if not keepdims:
        tiles = [reshape(t, t.shape[:axis] + t.shape[axis + 1:]) for t in tiles]
    return tuple(tiles) if many else tiles[0]


def _shifted(t: TileValue, axis: int, d: int, fill, reverse: bool) -> TileValue:
    """`t` moved d places along `axis` (towards the end; the start if `reverse`),
    the places left empty holding `fill`."""
    n = t.shape[axis]
    pad = constant(fill, t.dtype, t.shape)
    both = _cat((t, pad) if reverse else (pad, t), axis)
    start = d if reverse else n - d
    sub = t.shape
    offsets = [constant(start if k == axis else 0, dt.int32).value for k in range(t.ndim)]
    return wrap(pieces.ExtractSliceOp(both.value, offsets, tensor_type(sub, t.dtype)).result,
                t.dtype)


def scan_tiles(tiles: list[TileValue], axis: int, combine, ids: list, reverse: bool,
               many: bool) -> list[TileValue]:
    n = tiles[0].shape[axis]
    pos = _iota_along(tiles[0].shape, axis)
    d = 1
    while d < n:
        moved = [_shifted(t, axis, d, i, reverse) for t, i in zip(tiles, ids)]
        new = combine(tiles, moved) if reverse else combine(moved, tiles)
        has_partner = compute.compare("<", pos, n - d) if reverse else \
            compute.compare(">=", pos, d)
        tiles = [compute.select(has_partner, v, t) for v, t in zip(new, tiles)]
        d *= 2
    return tiles


def _iota_along(shape, axis: int) -> TileValue:
    n = shape[axis]
    iota = wrap(tile_ops.IotaOp(tensor_type((n,), dt.int32)).result, dt.int32)
    col = reshape(iota, tuple(n if k == axis else 1 for k in range(len(shape))))
    return broadcast_to(col, shape)


@rule("scan")
def _scan(x, axis, func, identity, reverse, _apply):
    tiles, many = _members(x, "x")
    axis = compute.normalize_axis(const_int(axis, "axis"), tiles[0].ndim)
    ids = _identities(identity, tiles, many)
    combine = lambda a, b: _combine(_apply, func, a, b, many)          # noqa: E731
    out = scan_tiles(tiles, axis, combine, ids, bool(reverse), many)
    return tuple(out) if many else out[0]


def _cumulative(name: str, op: str, identity: int):
    def fn(x, axis, reverse, rounding_mode, flush_to_zero):
        from .functional import float_options, mark
        t = tile_arg(x, "x")
        if t.is_scalar:
            raise type_error(f"{name} needs a tile of rank >= 1, got {t.describe()}")
        if t.dtype.is_bool:
            t = cast(t, dt.int32)
        axis = compute.normalize_axis(const_int(axis, "axis"), t.ndim)
        attrs = float_options("add" if op == "+" else "mul", t.dtype, rounding_mode,
                              flush_to_zero)
        combine = lambda a, b: [mark(compute.binary(op, a[0], b[0]), attrs)]  # noqa: E731
        return scan_tiles([t], axis, combine, [identity], bool(reverse), False)[0]
    return fn


RULES["cumsum"] = _cumulative("cumsum", "+", 0)
RULES["cumprod"] = _cumulative("cumprod", "*", 1)
