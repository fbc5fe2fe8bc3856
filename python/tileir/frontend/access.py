"""The frontend's attribute and subscript expressions: `x.attr` of arrays, tiled views,
dataclass instances and modules; `x[i]` of tiles, lists, tables, tuples and dicts;
slices (a mixin of `compiler.FunctionCompiler`).
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import types
from typing import Any

from mlir import ir

from .. import dtypes as dt
from ..errors import (TileSyntaxError, TileTypeError, TileUnsupportedFeatureError,
                      TileValueError)
from ..function import Function
from tileir.dialect import array_type, lists
from . import aggregates, compute, emit, intrinsics, pointers
from .values import (ArrayValue, BoundMethod, DataclassValue, ForeignPointerValue, ListValue,
                     MethodValue, RawMemoryValue, TableListValue, TiledViewValue, TileValue,
                     describe)


_TILED_VIEW_METHODS = ("num_tiles", "load", "store", "atomic_store_add", "atomic_store_max",
                       "atomic_store_min", "atomic_store_and", "atomic_store_or",
                       "atomic_store_xor")

# a dict (a helper's **kwargs) in kernel code: compile-time, like a tuple
_DICT_METHODS = ("get", "keys", "values", "items")


class Access:
    """`x.attr`, `x[i]` and `a:b:c`."""

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        obj = self.expr(node.value)
        attr = node.attr
        if isinstance(obj, ArrayValue):
            return self.array_attr(obj, attr, node)
        if isinstance(obj, TiledViewValue):
            return self.tiled_view_attr(obj, attr, node)
        if isinstance(obj, (RawMemoryValue, ForeignPointerValue)):
            found = pointers.attribute(obj, attr)      # a value, or a method's rule name
            return BoundMethod(found, obj) if isinstance(found, str) else found
        if isinstance(obj, TileValue):
            if attr == "shape":
                return obj.shape
            if attr == "dtype":
                return obj.dtype
            if attr == "ndim":
                return obj.ndim
            if attr == "T":
                return intrinsics.call("transpose", (obj,), {})
            if attr in intrinsics.TILE_METHODS:
                return BoundMethod(intrinsics.TILE_METHODS[attr], obj)
            raise self.error(TileTypeError, node, f"tiles have no attribute '{attr}'")
        if isinstance(obj, types.ModuleType) or isinstance(obj, type) or \
                isinstance(obj, dt.DType):
            try:
                return getattr(obj, attr)
            except AttributeError:
                raise self.error(TileSyntaxError, node,
                                 f"'{getattr(obj, '__name__', obj)}' has no attribute "
                                 f"'{attr}'") from None
        if isinstance(obj, tuple) and attr in ("index", "count"):
            return getattr(obj, attr)
        if isinstance(obj, enum.Enum) and attr in ("name", "value"):
            return getattr(obj, attr)
        if isinstance(obj, str) and attr == "join":         # cuTile's one string method
            return obj.join
        if isinstance(obj, DataclassValue):
            return self.dataclass_attr(obj, attr, node)
        if isinstance(obj, dict) and attr in _DICT_METHODS:
            return BoundMethod(f"dict.{attr}", obj)
        raise self.error(TileTypeError, node, f"{describe(obj)} has no attribute '{attr}' "
                         f"usable in a kernel")

    def dataclass_attr(self, obj: DataclassValue, attr: str, node: ast.AST) -> Any:
        """A field of a dataclass instance, or what its class gives: a method bound to
        it (compiled as a helper), a property's value, a class constant."""
        names = [f.name for f in dataclasses.fields(obj.cls)]
        if attr in names:
            return obj.fields[names.index(attr)]
        try:
            raw = inspect.getattr_static(obj.cls, attr)
        except AttributeError:
            raise self.error(TileTypeError, node, f"{obj.describe()} has no attribute "
                             f"'{attr}' (its fields: {', '.join(names)})") from None
        if isinstance(raw, property):
            return self.call(raw.fget, [obj], {}, node)
        if isinstance(raw, staticmethod):
            return raw.__func__
        if isinstance(raw, classmethod):
            return MethodValue(raw.__func__, obj.cls)
        if isinstance(raw, (types.FunctionType, Function)):
            return MethodValue(raw, obj)
        return aggregates.from_python(getattr(obj.cls, attr))

    def array_attr(self, a: ArrayValue, attr: str, node: ast.AST) -> Any:
        if attr == "shape":
            return tuple(intrinsics.array_dim(a, i) for i in range(a.ndim))
        if attr == "strides":
            return tuple(intrinsics.array_stride(a, i) for i in range(a.ndim))
        if attr == "dtype":
            return a.dtype
        if attr == "ndim":
            return a.ndim
        if attr in ("slice", "tiled_view", "get_raw_memory"):
            return BoundMethod(f"Array.{attr}", a)
        if attr == "foreign_pointer":
            return intrinsics.call("Array.foreign_pointer", (a,), {})
        raise self.error(TileTypeError, node, f"arrays have no attribute '{attr}' in kernels "
                         f"(use shape, strides, dtype, ndim, slice, tiled_view, "
                         f"get_raw_memory, foreign_pointer)")

    def tiled_view_attr(self, tv: TiledViewValue, attr: str, node: ast.AST) -> Any:
        if attr == "dtype":
            return tv.dtype
        if attr == "tile_shape":
            return tv.tile_shape
        if attr == "traversal_steps":
            return tv.traversal_steps
        if attr in _TILED_VIEW_METHODS:
            return BoundMethod(f"TiledView.{attr}", tv)
        raise self.error(TileTypeError, node, f"tiled views have no attribute '{attr}' (use "
                         f"dtype, tile_shape, traversal_steps, "
                         f"{', '.join(_TILED_VIEW_METHODS)})")

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        obj = self.expr(node.value)
        if isinstance(obj, tuple):
            idx = self.expr(node.slice)
            if isinstance(idx, slice):
                return obj[idx]
            if isinstance(idx, bool) or not isinstance(idx, int):
                raise self.error(TileTypeError, node.slice,
                                 f"tuple index must be a compile-time int or slice, got "
                                 f"{describe(idx)}")
            if not -len(obj) <= idx < len(obj):
                raise self.error(TileValueError, node.slice,
                                 f"tuple index {idx} is out of range for a tuple of "
                                 f"{len(obj)}")
            return obj[idx]
        if isinstance(obj, TileValue):
            return self.tile_subscript(obj, node)
        if isinstance(obj, dict):                   # **kwargs
            key = self.expr(node.slice)
            if not emit.is_hashable(key) or key not in obj:
                raise self.error(TileTypeError, node.slice, f"{describe(key)} is not a key of "
                                 f"the dict (its keys: {', '.join(map(repr, obj))})")
            return obj[key]
        if isinstance(obj, ListValue):
            return self.list_subscript(obj, node)
        raise self.error(TileTypeError, node, f"cannot subscript {describe(obj)}")

    def list_subscript(self, xs: ListValue, node: ast.Subscript) -> ArrayValue:
        """`arrays[i]`: a compile-time `i` picks the argument; a run-time integer scalar
        (or 0-d tile) selects among them (`tile.select_array`); a list whose length is
        known at launch only reads row `i` of its table (`tile.list_get`)."""
        idx = self.expr(node.slice)
        if isinstance(xs, TableListValue):
            if isinstance(idx, bool) or not (
                    isinstance(idx, int) or isinstance(idx, TileValue) and idx.is_scalar
                    and idx.dtype.is_int and not idx.dtype.is_bool):
                raise self.error(TileTypeError, node.slice,
                                 f"a list of arrays is indexed by an int, an integer scalar "
                                 f"or a 0-d integer tile, got {describe(idx)}")
            with self.at(node):
                if isinstance(idx, int):        # from the end: len(xs) + idx
                    idx = emit.constant(idx, dt.int32) if idx >= 0 else compute.binary(
                        "+", intrinsics.array_dim(xs.table, 0), emit.constant(idx, dt.int32))
                return self.table_element(xs, idx)
        n = len(xs.elements)
        if isinstance(idx, int) and not isinstance(idx, bool):
            if not -n <= idx < n:
                raise self.error(TileValueError, node.slice,
                                 f"index {idx} is out of range for {xs.describe()} "
                                 f"('{xs.name}'): expected -{n} <= index < {n}")
            return xs.elements[idx]
        if not (isinstance(idx, TileValue) and idx.is_scalar and idx.dtype.is_int
                and not idx.dtype.is_bool):
            raise self.error(TileTypeError, node.slice,
                             f"a list of arrays is indexed by an int, an integer scalar or a "
                             f"0-d integer tile, got {describe(idx)}")
        if n == 1:
            return xs.elements[0]
        first = xs.elements[0]
        with self.at(node):
            index = emit.cast(idx, dt.int32).value if idx.dtype != dt.int32 else idx.value
            value = lists.SelectArrayOp(index, [a.value for a in xs.elements]).result
        return dataclasses.replace(first, value=value, name=f"{xs.name}[...]")

    def table_element(self, xs: TableListValue, idx: TileValue) -> ArrayValue:
        """Element `idx` of a list passed as a table (at the current location); an index
        beyond int32 becomes -1, outside the list as it is (an empty array)."""
        e = xs.element
        if idx.dtype.bits > 32 or (idx.dtype.bits == 32 and not idx.dtype.is_signed):
            wide = emit.cast(idx, dt.int64)
            fits = compute.binary("&", compute.compare(">=", wide, -2**31),
                                  compute.compare("<", wide, 2**31))
            idx = compute.select(fits, emit.cast(wide, dt.int32), emit.constant(-1, dt.int32))
        index = emit.cast(idx, dt.int32).value if idx.dtype != dt.int32 else idx.value
        result = array_type(ir.Type.parse(e.dtype.array_mlir), e.ndim)
        value = lists.ListGetOp(result, xs.table.value, index, e.aligned).result
        return ArrayValue(value, e.dtype, e.ndim, f"{xs.name}[...]", e.static_shape,
                          e.static_strides)

    def tile_subscript(self, t: TileValue, node: ast.Subscript) -> TileValue:
        """`t[:, None]`, `t[None]`, `t[..., None]`, `t[:, np.newaxis]`: insert size-1 dims
        (the only indexing of tiles).  `...` stands for as many ':' as the tile has dims
        the other items do not name."""
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        kinds = [self.tile_index_item(it) for it in items]
        if kinds.count(Ellipsis) > 1:
            raise self.error(TileTypeError, node.slice, "an index can have only one "
                             "ellipsis ('...')")
        named = kinds.count(slice)
        if named > t.ndim:
            raise self.error(TileTypeError, node, f"too many indices for {t.describe()}: "
                             f"{named} ':' for {t.ndim} dims")
        shape, dim = [], 0
        for kind in kinds:
            count = {None: 0, slice: 1, Ellipsis: t.ndim - named}[kind]
            shape.extend([1] if kind is None else t.shape[dim:dim + count])
            dim += count
        shape.extend(t.shape[dim:])
        return emit.reshape(t, tuple(shape))

    def tile_index_item(self, it: ast.expr) -> Any:
        """What one item of a tile's index is: None (a new dim), `slice` (a whole dim,
        ':') or Ellipsis."""
        if isinstance(it, ast.Slice) and it.lower is it.upper is it.step is None:
            return slice
        value = None if isinstance(it, ast.Slice) else self.expr(it)
        if value is None and not isinstance(it, ast.Slice) or value is Ellipsis:
            return value
        raise self.error(TileUnsupportedFeatureError, it,
                         "tiles can only be indexed with ':', None (np.newaxis) and '...' "
                         "(to add dims); use load/extract patterns for elements")

    def expr_Slice(self, node: ast.Slice) -> slice:
        """`a:b:c` in a tuple's index: compile-time ints or None."""
        parts = []
        for part in (node.lower, node.upper, node.step):
            v = None if part is None else self.expr(part)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise self.error(TileTypeError, part, f"slice bounds must be compile-time "
                                 f"ints or None, got {describe(v)}")
            parts.append(v)
        if parts[2] == 0:
            raise self.error(TileValueError, node.step, "slice step cannot be zero")
        return slice(*parts)
