"""Memory access through a window of an array: a slice (`Array.slice`), or tiles whose
origins step by other than their shape (`tiled_view`'s `traversal_steps`).

Tile IR's arrays have no base offset: `tile.load` tile `i` covers elements
`[i*s, (i+1)*s)` of the whole array (docs/tile-ir.md), and no op makes an array
from another.  So these accesses address elements: along each axis the elements
of tile `index` are `offset + index * step + iota(tile dim)`, and `tile.gather` /
`tile.scatter` / `tile.atomic_rmw` read, write or update them where they lie
inside the window (and, by their `check_bounds`, inside the array).  Outside it a
load reads the padding and a store or an atomic does nothing, as `load`/`store`
do at an array's edges.  Every target compiles these ops: one guarded access per
element (no 16-byte vectors, TMA or cp.async rings).  Whole arrays whose tiles
step by their shape keep `tile.load` / `tile.store`.
"""

from __future__ import annotations

from .. import dtypes as dt
from tileir.dialect import indexed as indexed_ops, tile as tile_ops
from . import compute
from .emit import broadcast_to, cast, constant, is_number, reshape, tensor_type, wrap
from .values import ArrayValue, TileValue

# What each padding mode reads (`undetermined` reads zero, as on the GPU).
PADDING_VALUES = {"zero": 0, "undetermined": 0, "neg_zero": -0.0, "nan": float("nan"),
                  "pos_inf": float("inf"), "neg_inf": float("-inf")}


def extent(a: ArrayValue, axis: int):
    """The window's extent along `axis`: an int, an int32 scalar, or None (the dim)."""
    return a.extents[axis] if a.is_slice else None


def offset(a: ArrayValue, axis: int):
    """The window's first element along `axis`: an int or an int32 scalar."""
    return a.offsets[axis] if a.is_slice else 0


def _and(mask: TileValue | None, m: TileValue) -> TileValue:
    return m if mask is None else compute.binary("&", mask, m)


def _inside(i: TileValue, ext) -> TileValue:
    return compute.binary("&", compute.compare(">=", i, 0), compute.compare("<", i, ext))


def _shifted(i: TileValue, off) -> TileValue:
    if is_number(off) and off == 0:
        return i
    return compute.binary("+", i, off if is_number(off) else cast(off, i.dtype))


def coordinates(a: ArrayValue, index: list[TileValue], shape: tuple[int, ...],
                steps: tuple[int, ...]) -> tuple[list[TileValue], TileValue | None]:
    """The array coordinates (int32 tiles of `shape`) of the elements of tile `index`
    and the mask of those inside the window (None: all of them)."""
    coords, mask = [], None
    for d, n in enumerate(shape):
        iota = wrap(tile_ops.IotaOp(tensor_type((n,), dt.int32)).result, dt.int32)
        rel = compute.binary("+", iota, compute.binary("*", index[d], steps[d]))
        rel = reshape(rel, tuple(n if k == d else 1 for k in range(len(shape))))
        ext = extent(a, d)
        if ext is not None:
            mask = _and(mask, _inside(rel, ext))
        coords.append(broadcast_to(_shifted(rel, offset(a, d)), shape))
    return coords, (broadcast_to(mask, shape) if mask is not None else None)


def _direct(a: ArrayValue, shape, steps) -> bool:
    return not a.is_slice and tuple(steps) == tuple(shape)


def _all(mask: TileValue | None, shape) -> TileValue:
    return mask if mask is not None else constant(True, dt.bool_, shape)


def load(a: ArrayValue, index: list[TileValue], shape: tuple[int, ...], padding: str,
         steps: tuple[int, ...] | None = None) -> TileValue:
    """Tile `index` of `shape` (in the array's axes), its origin `index * steps`."""
    steps = steps or shape
    if _direct(a, shape, steps):
        op = tile_ops.LoadOp(a.value, [i.value for i in index], shape, padding)
        return wrap(op.result, a.dtype)
    coords, mask = coordinates(a, index, shape, steps)
    pad = constant(PADDING_VALUES[padding], a.dtype, shape)
    op = indexed_ops.GatherOp(a.value, _all(mask, shape).value, pad.value,
                              [c.value for c in coords], True)
    return wrap(op.result, a.dtype)


def store(a: ArrayValue, index: list[TileValue], tile: TileValue,
          steps: tuple[int, ...] | None = None):
    """Stores `tile` (the array's dtype and rank) at tile `index`; returns the op."""
    steps = steps or tile.shape
    if _direct(a, tile.shape, steps):
        return tile_ops.StoreOp(a.value, tile.value, [i.value for i in index])
    coords, mask = coordinates(a, index, tile.shape, steps)
    return indexed_ops.ScatterOp(a.value, tile.value, _all(mask, tile.shape).value,
                                 [c.value for c in coords], True)


def atomic_update(a: ArrayValue, index: list[TileValue], update: TileValue, kind: str,
                  steps: tuple[int, ...]) -> None:
    """`kind` (an `atomic_rmw` kind) of `update` into tile `index`, relaxed at device
    scope (cuTile's `TiledView.atomic_store_*`); the old values are not needed."""
    coords, mask = coordinates(a, index, update.shape, steps)
    indexed_ops.AtomicRMWOp(a.value, update.value, _all(mask, update.shape).value,
                            [c.value for c in coords], kind, "relaxed", "device", True)


def element_indices(a: ArrayValue, idx: list[TileValue], mask: TileValue,
                    check: bool) -> tuple[list[TileValue], TileValue]:
    """Element indices into a slice as indices into its array (gather, scatter, the
    atomics), and the mask narrowed to the window where `check`."""
    if not a.is_slice:
        return idx, mask
    out = []
    for d, i in enumerate(idx):
        ext = extent(a, d)
        if check and ext is not None:
            mask = _and(mask, _inside(i, ext))
        out.append(_shifted(i, offset(a, d)))
    return out, mask
