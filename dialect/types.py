"""Types of Tile IR: tiles are builtin tensors; global arrays are `!tile.array`.

* A **tile** is an immutable value `tensor<d0 x d1 x ... x T>` with static,
  power-of-two dims.  A rank-0 tile is `tensor<T>`.  Scalars are plain builtin
  scalars (`i32` for indices and sizes, `f32`, `i1`, ...).
* An **array** `!tile.array<T, R : i64>` is a view of global memory: a base
  address, `R` dynamic dims and `R` dynamic strides (in elements), element type
  `T`.  Integer element types may carry signedness (`ui8`, `si32`); tiles loaded
  from them use the signless type (`i8`, `i32`) and ops pick signed/unsigned
  variants.  Booleans are `i1` and take one byte per element in memory.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

from mlir import ir

FLOAT_TYPES = ("f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2")
INT_WIDTHS = (1, 8, 16, 32, 64)


@dataclasses.dataclass(frozen=True)
class ArrayInfo:
    """The parameters of an `!tile.array` type, readable from Python."""

    element_type: ir.Type
    rank: int


# IRDL dynamic types expose no parameter accessors to Python (shared/STACK.md),
# so the one place that needs them reads the type's own printed form.
_ARRAY_RE = re.compile(r"^!tile\.array<(.+), (\d+) : i64>$")


def array_type(element_type: ir.Type, rank: int) -> ir.Type:
    """Builds `!tile.array<element_type, rank : i64>` in the current context."""
    if rank < 0:
        raise ValueError(f"array rank must be >= 0, got {rank}")
    return ir.Type.parse(f"!tile.array<{element_type}, {rank} : i64>")


MAX_ARRAY_RANK = 8     # dims of an array argument (each passes a dim and a stride)


def array_info(t: ir.Type) -> ArrayInfo | None:
    """Returns the element type and rank of an array type, or None for other types."""
    return by_type("array_info", t, _array_info)


def _array_info(t: ir.Type) -> ArrayInfo | None:
    m = _ARRAY_RE.match(str(t))
    if m is None:
        return None
    return ArrayInfo(ir.Type.parse(m.group(1), t.context), int(m.group(2)))


def is_array(t: ir.Type) -> bool:
    return array_info(t) is not None


def is_tile(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType)


def is_float(t: ir.Type) -> bool:
    return isinstance(t, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type)) or \
        str(t) in ("f8E4M3FN", "f8E5M2")


def is_int(t: ir.Type) -> bool:
    return isinstance(t, ir.IntegerType)


def signless(t: ir.Type) -> ir.Type:
    """`ui8` -> `i8`; other types unchanged."""
    if isinstance(t, ir.IntegerType) and not t.is_signless:
        return ir.IntegerType.get_signless(t.width, t.context)
    return t


def element_type(t: ir.Type) -> ir.Type:
    """The element type of a tile, or the type itself for a scalar."""
    return t.element_type if isinstance(t, ir.RankedTensorType) else t


def shape_of(t: ir.Type) -> tuple[int, ...]:
    """The shape of a tile; () for a scalar."""
    return tuple(t.shape) if isinstance(t, ir.RankedTensorType) else ()


def tile_type(shape, elem: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), elem)


def is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def bitwidth(t: ir.Type) -> int:
    if isinstance(t, ir.IntegerType):
        return t.width
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8E4M3FN": 8, "f8E5M2": 8}[str(t)]


# What a pass or the simulator asks of a type, by the type itself (MLIR uniques types:
# equal types hash alike), without printing or inspecting it on every op.  A key keeps
# its context alive, so the memo is emptied when it grows past a few kernels' types (a
# test that builds a context per kernel would keep every one of them otherwise).
_BY_TYPE: dict[tuple[str, ir.Type], Any] = {}
_BY_TYPE_KEPT = 1024
_MISSING = object()


def by_type(what: str, t: ir.Type, make: Callable[[ir.Type], Any]) -> Any:
    """`make(t)`, once per type and `what` (None among the answers kept)."""
    key = (what, t)
    found = _BY_TYPE.get(key, _MISSING)
    if found is _MISSING:
        if len(_BY_TYPE) >= _BY_TYPE_KEPT:
            _BY_TYPE.clear()
        found = _BY_TYPE[key] = make(t)
    return found
