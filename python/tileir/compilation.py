"""`tileir.compilation`: export kernels ahead of time (cuTile's `cuda.tile.compilation`).

    sig = KernelSignature([ArrayConstraint(ct.float32, 1, base_addr_divisible_by=16,
                                           stride_constant=(1,))] * 3 + [1024],
                          CallingConvention.tileir_v1())
    export_kernel(vector_add, [sig, ...], "kernels.cubin", gpu_code="sm_90a",
                  output_format="cubin")

A `KernelSignature` describes one compiled variant: a constraint per kernel
parameter (`ArrayConstraint`, `ScalarConstraint`, `ConstantConstraint`, ...), the
calling convention, and the kernel's symbol in the cubin (by default the
mangled name, `mangle_kernel_name`).  `export_kernel` compiles every signature
and writes ONE cubin holding all of them.  The names, signatures and checks
are cuTile's; what tileir does differently:

* **Calling convention.**  Exported kernels take arguments as tileir's kernels
  do (docs/gpu-backend.md, "Kernel ABI"): `CallingConvention.tileir_v1()`, an
  array as pointer, ndim int32 dims, ndim int64 strides.  cuTile's
  `cutile_python_v1/v2` pass dims and strides both as `index_dtype` values, and
  tileir's sm_90a TMA kernels take trailing CUtensorMap parameters, so
  exporting with them is refused (TileUnsupportedFeatureError).
  `kernel_launch_info` (tileir's addition) says what a host must pass: block
  size, shared memory, every parameter slot with its C type and offset.
* **What a constraint compiles to.**  An `ArrayConstraint` becomes an
  `ArrayParam`: `aligned` when its facts imply 16-byte vector access (a base
  divisible by 16 bytes, unit last stride, other strides multiples of 16
  bytes), its `shape_constant`/`stride_constant` entries compiled in.  Index
  dtype, lower bounds, shape divisibility and aliasing are checked and kept in the
  symbol; tileir's code generation uses none of them (assuming less is safe).  Its
  code assumes what it assumes for launches: arrays that share memory are the
  same array (an in-place launch) or disjoint, never partly overlapping views
  (passes/iterations.py), whatever the alias groups allow.  tileir indexes with
  32 bits, also for `index_dtype=int64`: a host must not pass an array with a dim
  above 2**31 - 1 (tileir's launcher refuses them).
* **Not supported:** `ListConstraint` parameters and tuples passed at run time
  (TileUnsupportedFeatureError naming the parameter; tuples of constants for a
  `ct.Constant` parameter work), and `output_format="tileir_bytecode"` (NVIDIA's
  Tile IR bytecode, which tileir does not produce).

How one cubin holds several kernels: each signature compiles (through the compile
cache) like a launch's specialization; the `llvm`-stage IR of each is parsed
back, their gpu.modules merged into one with each kernel renamed to its symbol and
each module's other definitions renamed apart (`_combined_ptx`), and that module goes
through the `ptx` and `cubin` stages' own functions (the NVPTX backend, ptxas).
Each kernel's PTX is the same as when it is compiled alone, but for its names.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import os
import re
import secrets
import struct
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Literal, Sequence, TypeAlias

import numpy as np

from . import dtypes as dt
from .annotations import ArrayAnnotation
from .errors import (TileInternalError, TileTypeError, TileUnsupportedFeatureError,
                     TileValueError)
from .kernel import Kernel
from .specialization import (ArrayParam, ArraySpec, ConstantAnnotation, Param, ScalarParam,
                             classify_arg)

if TYPE_CHECKING:
    from .kernel import CompiledKernel

__all__ = ["ScalarConstraint", "ArrayConstraint", "ListConstraint", "TupleConstraint",
           "ConstantConstraint", "ParameterConstraint", "ConstantValue", "KernelSignature",
           "CallingConvention", "export_kernel", "mangle_kernel_name", "demangle_kernel_name",
           "kernel_launch_info"]


# ---------------------------------------------------------------------------
# Calling conventions
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CallingConvention:
    """How an exported kernel takes its arguments, and the code that names it in
    mangled symbols.  Get one from the static methods or `from_code`.

    `tileir_v1` is what tileir implements: per array a pointer, ndim int32 dims,
    ndim int64 strides; a scalar at its width; `Constant`s omitted; then what
    `kernel_launch_info` lists (a persistent kernel's grid, sm_90a tensor maps).
    `cutile_python_v1/v2` are cuTile's, named here so that signatures written for
    cuTile construct and mangle; tileir does not export with them.
    """

    name: str
    code: str
    version: int

    @staticmethod
    def cutile_python_v1() -> "CallingConvention":
        return _CONVENTIONS["t1"]

    @staticmethod
    def cutile_python_v2() -> "CallingConvention":
        return _CONVENTIONS["t2"]

    @staticmethod
    def tileir_v1() -> "CallingConvention":
        """tileir's kernel ABI (docs/gpu-backend.md), the one `export_kernel` takes."""
        return _CONVENTIONS["tir1"]

    @staticmethod
    def from_code(code: str, /) -> "CallingConvention":
        if not isinstance(code, str):
            raise TypeError(f"a calling convention code is a str, got {type(code).__name__}")
        found = _CONVENTIONS.get(code)
        if found is None:
            known = ", ".join(f"{c} ({cc.name})" for c, cc in _CONVENTIONS.items())
            raise ValueError(f"unknown calling convention code {code!r}; codes: {known}")
        return found

    def __repr__(self) -> str:
        return f"CallingConvention({self.name!r}, {self.code!r})"


_CONVENTIONS = {"t1": CallingConvention("cutile_python_v1", "t1", 1),
                "t2": CallingConvention("cutile_python_v2", "t2", 2),
                "tir1": CallingConvention("tileir_v1", "tir1", 1)}
# cuTile's version 2 added tuple parameters and constant shapes; tileir_v1 has both
_TUPLES_AND_SHAPES = ("t2", "tir1")
_TILEIR = "tir1"


# ---------------------------------------------------------------------------
# Parameter constraints
# ---------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _set_fields(obj: Any, **values: Any) -> None:
    for name, value in values.items():
        object.__setattr__(obj, name, value)


@dataclasses.dataclass(frozen=True, init=False)
class ScalarConstraint:
    """A scalar parameter of `dtype`, passed at launch."""

    dtype: dt.DType

    def __init__(self, dtype: dt.DType):
        if not isinstance(dtype, dt.DType):
            raise TypeError(f"ScalarConstraint's dtype must be a tileir dtype (tileir.float32, "
                            f"...), got {dtype!r}")
        _set_fields(self, dtype=dtype)


@dataclasses.dataclass(frozen=True, init=False)
class ArrayConstraint:
    """An array parameter and what may be assumed of it.

    Per-dim fields take one entry per dim, or a single int for every dim.
    Divisors are in elements, `base_addr_divisible_by` in bytes.  A constant
    shape or stride entry compiles in; it makes that dim's divisor (and, for
    strides, lower bound) redundant: they must agree with it, then read 1/None.
    `alias_groups`: parameters may alias each other when they share a group
    (none: aliases nothing).
    """

    dtype: dt.DType
    ndim: int
    index_dtype: dt.DType
    stride_lower_bound_incl: tuple[int | None, ...]
    alias_groups: tuple[str, ...]
    may_alias_internally: bool
    stride_constant: tuple[int | None, ...]
    shape_constant: tuple[int | None, ...]
    stride_divisible_by: tuple[int, ...]
    shape_divisible_by: tuple[int, ...]
    base_addr_divisible_by: int

    def __init__(self, dtype: dt.DType, ndim: int, *, index_dtype: dt.DType = dt.int32,
                 stride_lower_bound_incl: Sequence[int | None] | int | None = None,
                 alias_groups: Sequence[str] = (), may_alias_internally: bool = False,
                 stride_constant: Sequence[int | None] | int | None = None,
                 shape_constant: Sequence[int | None] | int | None = None,
                 stride_divisible_by: Sequence[int] | int = 1,
                 shape_divisible_by: Sequence[int] | int = 1,
                 base_addr_divisible_by: int = 1):
        if not isinstance(dtype, dt.DType):
            raise TypeError(f"ArrayConstraint's dtype must be a tileir dtype (tileir.float32, "
                            f"...), got {dtype!r}")
        if not _is_int(ndim):
            raise TypeError(f"ArrayConstraint's ndim must be an int, got {ndim!r}")
        if ndim < 0:
            raise ValueError(f"ArrayConstraint's ndim must be >= 0, got {ndim}")
        # cuTile's index dtypes; tileir passes dims as int32 whichever (module docstring)
        if index_dtype not in (dt.int32, dt.uint32, dt.int64):
            raise ValueError(f"index_dtype must be tileir.int32, tileir.uint32 or tileir.int64, "
                             f"got {index_dtype!r}")
        strides = _per_dim(stride_constant, ndim, "stride_constant", None, _optional_int)
        shapes = _per_dim(shape_constant, ndim, "shape_constant", None, _optional_size)
        lower = _per_dim(stride_lower_bound_incl, ndim, "stride_lower_bound_incl", None,
                         _optional_int)
        stride_div = _per_dim(stride_divisible_by, ndim, "stride_divisible_by", 1, _divisor)
        shape_div = _per_dim(shape_divisible_by, ndim, "shape_divisible_by", 1, _divisor)
        lower, stride_div = _constants_subsume(strides, "stride", lower, stride_div)
        _, shape_div = _constants_subsume(shapes, "shape", None, shape_div)
        _divisor("base_addr_divisible_by", None, base_addr_divisible_by)
        _set_fields(self, dtype=dtype, ndim=ndim, index_dtype=index_dtype,
                    stride_lower_bound_incl=lower, alias_groups=_alias_groups(alias_groups),
                    may_alias_internally=bool(may_alias_internally), stride_constant=strides,
                    shape_constant=shapes, stride_divisible_by=stride_div,
                    shape_divisible_by=shape_div, base_addr_divisible_by=base_addr_divisible_by)


def _per_dim(value: Any, ndim: int, field: str, default: Any,
             check: Callable[[str, int | None, Any], None]) -> tuple:
    if value is None:
        return (default,) * ndim
    if _is_int(value):
        check(field, None, value)
        return (value,) * ndim
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{field} must be a sequence with one entry per dim or a single int, "
                        f"got {value!r}")
    values = tuple(value)
    if len(values) != ndim:
        raise ValueError(f"{field} {values} has {len(values)} entries but ndim is {ndim}: give "
                         f"one per dim, or a single int for every dim")
    for i, v in enumerate(values):
        check(field, i, v)
    return values


def _where(field: str, i: int | None) -> str:
    return field if i is None else f"{field}[{i}]"


def _optional_int(field: str, i: int | None, v: Any) -> None:
    if v is not None and not _is_int(v):
        raise TypeError(f"{_where(field, i)} must be an int or None, got {v!r}")


def _optional_size(field: str, i: int | None, v: Any) -> None:
    _optional_int(field, i, v)
    if v is not None and v < 0:
        raise ValueError(f"{_where(field, i)} must be >= 0 (a dim's size), got {v}")


def _divisor(field: str, i: int | None, v: Any) -> None:
    if not _is_int(v):
        raise TypeError(f"{_where(field, i)} must be an int, got {v!r}")
    if v <= 0:
        raise ValueError(f"{_where(field, i)} must be > 0 (1: nothing assumed), got {v}")


def _constants_subsume(constants: tuple, what: str, lower: tuple | None,
                       divisors: tuple) -> tuple[tuple | None, tuple]:
    """The lower bounds and divisors with those of constant entries checked against the
    constant, then reset (a known value needs no weaker facts)."""
    lower = None if lower is None else list(lower)
    divisors = list(divisors)
    for i, c in enumerate(constants):
        if c is None:
            continue
        if lower is not None and lower[i] is not None:
            if c < lower[i]:
                raise ValueError(f"{what}_constant[{i}] = {c} is below "
                                 f"stride_lower_bound_incl[{i}] = {lower[i]}")
            lower[i] = None
        if c % divisors[i]:
            raise ValueError(f"{what}_constant[{i}] = {c} is not divisible by "
                             f"{what}_divisible_by[{i}] = {divisors[i]}")
        divisors[i] = 1
    return (None if lower is None else tuple(lower)), tuple(divisors)


def _alias_groups(groups: Any) -> tuple[str, ...]:
    if isinstance(groups, (str, bytes)):
        raise TypeError(f"alias_groups is a sequence of group names, not one string: write "
                        f"({groups!r},)")
    groups = tuple(groups)
    for g in groups:
        if not isinstance(g, str):
            raise TypeError(f"alias group names are strings, got {g!r} in {groups}")
    repeated = [g for g, n in collections.Counter(groups).items() if n > 1]
    if repeated:
        raise ValueError(f"alias group {repeated[0]!r} is listed twice in {list(groups)}")
    return groups


@dataclasses.dataclass(frozen=True, init=False)
class ListConstraint:
    """A parameter that is a list of arrays, each described by `element`.  Constructs,
    mangles and demangles; tileir does not compile list parameters yet."""

    element: ArrayConstraint
    alias_groups: tuple[str, ...]
    elements_may_alias: bool

    def __init__(self, element: ArrayConstraint, *, alias_groups: Sequence[str] = (),
                 elements_may_alias: bool = False):
        if not isinstance(element, ArrayConstraint):
            raise TypeError(f"ListConstraint's element must be an ArrayConstraint (lists hold "
                            f"arrays), got {element!r}")
        _set_fields(self, element=element, alias_groups=_alias_groups(alias_groups),
                    elements_may_alias=bool(elements_may_alias))


@dataclasses.dataclass(frozen=True, init=False)
class TupleConstraint:
    """A tuple parameter: one constraint per item (plain values and tuples as in
    KernelSignature)."""

    items: tuple["ParameterConstraint", ...]

    def __init__(self, items: Sequence[Any]):
        if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
            raise TypeError(f"TupleConstraint takes a sequence of item constraints, got "
                            f"{items!r}")
        _set_fields(self, items=tuple(_to_constraint(x) for x in items))


ConstantValue: TypeAlias = bool | int | float


@dataclasses.dataclass(frozen=True, init=False, eq=False)
class ConstantConstraint:
    """The value of a `ct.Constant` parameter, compiled in.  Equal only to the same
    value of the same type (1, True and 1.0 differ); floats compare by their bits
    (NaN equals NaN, 0.0 differs from -0.0)."""

    value: ConstantValue

    def __init__(self, value: ConstantValue):
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (bool, int, float)):
            raise TypeError(f"a ConstantConstraint's value is a bool, int or float, got "
                            f"{type(value).__name__} {value!r}")
        _set_fields(self, value=value)

    def _key(self) -> tuple:
        v = self.value
        return (type(v), struct.pack("<d", v) if isinstance(v, float) else v)

    def __eq__(self, other: Any) -> bool:
        if type(other) is not ConstantConstraint:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


ParameterConstraint: TypeAlias = (ScalarConstraint | ArrayConstraint | ListConstraint
                                  | TupleConstraint | ConstantConstraint)


def _to_constraint(c: Any) -> ParameterConstraint:
    """A constraint, a plain constant (ConstantConstraint) or a tuple (TupleConstraint)."""
    if isinstance(c, (ScalarConstraint, ArrayConstraint, ListConstraint, TupleConstraint,
                      ConstantConstraint)):
        return c
    if isinstance(c, (bool, int, float, np.bool_, np.integer, np.floating)):
        return ConstantConstraint(c)
    if isinstance(c, tuple):
        return TupleConstraint(c)
    raise TypeError(f"{c!r} is not a parameter constraint: give a ScalarConstraint, "
                    f"ArrayConstraint, ListConstraint, TupleConstraint, ConstantConstraint, "
                    f"a bool, int or float (a constant) or a tuple")


# ---------------------------------------------------------------------------
# Kernel signatures
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, init=False)
class KernelSignature:
    """One exported variant of a kernel: a constraint per parameter of its Python
    function (a plain bool/int/float stands for a ConstantConstraint, a plain tuple
    for a TupleConstraint), the calling convention, and the symbol (None: the
    mangled name, filled in by `export_kernel`)."""

    parameters: tuple[ParameterConstraint, ...]
    calling_convention: CallingConvention
    symbol: str | None

    def __init__(self, parameters: Sequence[Any], calling_convention: CallingConvention,
                 symbol: str | None = None):
        if isinstance(parameters, (str, bytes)) or not hasattr(parameters, "__iter__"):
            raise TypeError(f"parameters is a sequence of constraints, got {parameters!r}")
        if not isinstance(calling_convention, CallingConvention):
            raise TypeError(f"calling_convention must be a CallingConvention (e.g. "
                            f"CallingConvention.tileir_v1()), got {calling_convention!r}")
        if symbol is not None and not isinstance(symbol, str):
            raise TypeError(f"symbol must be a str or None, got {symbol!r}")
        parameters = tuple(_to_constraint(c) for c in parameters)
        _check_alias_groups(parameters)
        _check_expressible(parameters, calling_convention)
        _set_fields(self, parameters=parameters, calling_convention=calling_convention,
                    symbol=symbol)

    def with_mangled_symbol(self, function_name: str) -> "KernelSignature":
        """This signature, its symbol the mangled name of `function_name` and itself."""
        return self.with_symbol(mangle_kernel_name(function_name, self))

    def with_symbol(self, symbol: str | None) -> "KernelSignature":
        return KernelSignature(self.parameters, self.calling_convention, symbol)

    @staticmethod
    def from_kernel_args(kernel: Kernel, kernel_args: Sequence[Any],
                         calling_convention: CallingConvention, *,
                         symbol: str | None = None) -> "KernelSignature":
        """The signature a launch with `kernel_args` compiles (what `ct.launch`
        specializes on: dtypes and ranks, the arrays' alignment, scalar types,
        Constant values), its symbol mangled when `symbol` is None.

        For tests and prototypes: it assumes of every later argument what holds of
        these (an array whose base happens to be 16-byte aligned makes an exported
        kernel that must only be given such arrays).  Arrays may also be
        `ArraySpec`s; whether an array is many times the L2 cache is not kept.
        """
        _check_kernel(kernel)
        params = kernel.classify(list(kernel_args), gpu=True)
        constraints = [_constraint_of(kernel.name, name, kind) for name, kind in params]
        signature = KernelSignature(constraints, calling_convention, symbol)
        return signature if symbol is not None else signature.with_mangled_symbol(kernel.name)


def _alias_uses(parameters: Sequence[ParameterConstraint]
                ) -> Iterator[tuple[ParameterConstraint, tuple[str, ...]]]:
    """(constraint, its groups) in parameter order, a list before its element (the order
    mangled names number groups in)."""
    for p in parameters:
        if isinstance(p, ArrayConstraint):
            yield p, p.alias_groups
        elif isinstance(p, ListConstraint):
            yield p, p.alias_groups
            yield p.element, p.element.alias_groups
        elif isinstance(p, TupleConstraint):
            yield from _alias_uses(p.items)


def _check_alias_groups(parameters: Sequence[ParameterConstraint]) -> None:
    uses: collections.Counter = collections.Counter()
    kinds: dict[str, str] = {}
    for constraint, groups in _alias_uses(parameters):
        kind = type(constraint).__name__
        for g in groups:
            uses[g] += 1
            if kinds.setdefault(g, kind) != kind:
                raise ValueError(f"alias group {g!r} joins an {kinds[g]} and a {kind}: a "
                                 f"list's storage may alias only other lists' storage")
    once = [g for g, n in uses.items() if n == 1]
    if once:
        raise ValueError(f"alias group {once[0]!r} is named by one parameter only: a group "
                         f"says which parameters may alias each other, so it takes two; "
                         f"give an array that aliases nothing no groups")


def _check_expressible(parameters: Sequence[ParameterConstraint],
                       convention: CallingConvention) -> None:
    """cuTile's rule: cutile_python_v1 has neither tuples nor constant shapes."""
    if convention.code in _TUPLES_AND_SHAPES:
        return
    for i, p in enumerate(parameters):
        for c in _leaves(p):
            if isinstance(c, TupleConstraint):
                what = "a tuple"
            elif isinstance(c, ArrayConstraint) and any(s is not None
                                                         for s in c.shape_constant):
                what = "a constant shape (shape_constant)"
            else:
                continue
            raise ValueError(f"parameter #{i} has {what}, which calling convention "
                             f"{convention.name} cannot express; cutile_python_v2 and "
                             f"tileir_v1 can")


def _leaves(p: ParameterConstraint) -> Iterator[ParameterConstraint]:
    yield p
    if isinstance(p, TupleConstraint):
        for item in p.items:
            yield from _leaves(item)
    elif isinstance(p, ListConstraint):
        yield p.element


def _item_bits(d: dt.DType) -> int:
    return 8 if d.is_bool else d.bits          # bool arrays hold a byte per element


def _constraint_of(kname: str, pname: str, kind: Any) -> ParameterConstraint:
    """The constraint for one parameter of a launch's specialization."""
    if isinstance(kind, ScalarParam):
        return ScalarConstraint(kind.dtype)
    if isinstance(kind, ArrayParam):
        shape = dict(kind.static_shape)
        strides = dict(kind.static_strides)
        divisors = [1] * kind.ndim
        if kind.aligned:                  # docs/gpu-backend.md's aligned, as facts
            for d in range(kind.ndim - 1):
                divisors[d] = 128 // _item_bits(kind.dtype)
            if kind.ndim:
                strides.setdefault(kind.ndim - 1, 1)
        for d in strides:
            divisors[d] = 1
        return ArrayConstraint(
            kind.dtype, kind.ndim, base_addr_divisible_by=16 if kind.aligned else 1,
            shape_constant=[shape.get(d) for d in range(kind.ndim)],
            stride_constant=[strides.get(d) for d in range(kind.ndim)],
            stride_divisible_by=divisors)
    if isinstance(kind, tuple):
        return TupleConstraint([_constraint_of(kname, pname, v) for v in kind])
    if isinstance(kind, (bool, int, float)):
        return ConstantConstraint(kind)
    raise TypeError(f"argument '{pname}' of kernel '{kname}' is the Constant "
                    f"{type(kind).__name__} {kind!r}; a ConstantConstraint holds a bool, int "
                    f"or float")


# ---------------------------------------------------------------------------
# Name mangling
# ---------------------------------------------------------------------------
# A mangled name is `function "_K" convention ("_" parameter)*`, every character in
# [A-Za-z0-9_], and no parameter's code contains "_K" (so the last "_K" ends the name):
#
#   parameter := "S" dtype                                 a scalar
#              | "A" ndim dtype ("_" dim fact+)* ("_" flag+)?     an array
#              | "L" ("g" n)* "e"? "A" ...                 a list: its groups, elements
#                                                          may alias, then its element
#              | "T" count ("_" parameter){count}          a tuple
#              | "B0" | "B1" | "I" int | "F" 16 hex digits (the float's bits)
#   fact      := "s" int | "d" int | "c" int | "v" int | "l" int
#                (shape constant, shape divisor, stride constant, stride divisor, stride
#                lower bound: each only where it says something, dims ascending)
#   flag      := "p" int (base address divisor) | "g" n (alias group) | "i" (may alias
#                internally) | "u" (uint32 index) | "w" (int64 index)
#   int       := "n"? digits (n: negative; no leading zeros)
#
# Alias groups are numbered in order of first appearance: demangled, they are named
# g0, g1, ....  E.g. vector_add_Ktir1_A1f32_0c1_p16_A1f32_0c1_p16_A1f32_0c1_p16_I1024.
_DTYPE_CODES = {
    dt.bool_: "b8", dt.int8: "i8", dt.int16: "i16", dt.int32: "i32", dt.int64: "i64",
    dt.uint8: "u8", dt.uint16: "u16", dt.uint32: "u32", dt.uint64: "u64",
    dt.float16: "f16", dt.bfloat16: "bf16", dt.float32: "f32", dt.float64: "f64",
    dt.tfloat32: "tf32", dt.float8_e4m3fn: "f8e4m3", dt.float8_e5m2: "f8e5m2",
    dt.float4_e2m1fn: "f4e2m1", dt.float8_e8m0fnu: "f8e8m0", dt.float8_e5m3fnu: "f8e5m3",
}
_CODE_DTYPES = {code: d for d, code in _DTYPE_CODES.items()}
_DTYPE_TOKEN = "|".join(sorted(_CODE_DTYPES, key=len, reverse=True))
_INDEX_FLAGS = {dt.int32: "", dt.uint32: "u", dt.int64: "w"}
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def mangle_kernel_name(function_name: str, kernel_signature: KernelSignature) -> str:
    """The symbol of `function_name` compiled for `kernel_signature` (grammar above);
    `demangle_kernel_name` inverts it."""
    if not isinstance(function_name, str) or not _FUNCTION_NAME.fullmatch(function_name):
        raise ValueError(f"a mangled name starts with the kernel's name, an ASCII identifier "
                         f"([A-Za-z_][A-Za-z0-9_]*); got {function_name!r}")
    if not isinstance(kernel_signature, KernelSignature):
        raise TypeError(f"kernel_signature must be a KernelSignature, got "
                        f"{kernel_signature!r}")
    groups = _GroupNumbers()
    params = "".join("_" + _mangle(p, groups) for p in kernel_signature.parameters)
    return f"{function_name}_K{kernel_signature.calling_convention.code}{params}"


class _GroupNumbers:
    """Alias group names to numbers, in order of first appearance."""

    def __init__(self):
        self.numbers: dict[str, int] = {}

    def code(self, groups: Sequence[str]) -> str:
        return "".join(f"g{self.numbers.setdefault(g, len(self.numbers))}" for g in groups)


def _int(v: int) -> str:
    return f"n{-v}" if v < 0 else str(v)


def _mangle(p: ParameterConstraint, groups: _GroupNumbers) -> str:
    if isinstance(p, ScalarConstraint):
        return "S" + _DTYPE_CODES[p.dtype]
    if isinstance(p, ArrayConstraint):
        return "A" + _mangle_array(p, groups)
    if isinstance(p, ListConstraint):
        flags = groups.code(p.alias_groups) + ("e" if p.elements_may_alias else "")
        return "L" + flags + "A" + _mangle_array(p.element, groups)
    if isinstance(p, TupleConstraint):
        return f"T{len(p.items)}" + "".join("_" + _mangle(i, groups) for i in p.items)
    v = p.value
    if isinstance(v, bool):
        return f"B{int(v)}"
    if isinstance(v, int):
        return "I" + _int(v)
    return "F" + struct.pack(">d", v).hex()


_FACTS = (("s", "shape_constant", None), ("d", "shape_divisible_by", 1),
          ("c", "stride_constant", None), ("v", "stride_divisible_by", 1),
          ("l", "stride_lower_bound_incl", None))


def _mangle_array(a: ArrayConstraint, groups: _GroupNumbers) -> str:
    out = f"{a.ndim}{_DTYPE_CODES[a.dtype]}"
    for d in range(a.ndim):
        facts = "".join(letter + _int(getattr(a, field)[d]) for letter, field, default in _FACTS
                        if getattr(a, field)[d] != default)
        if facts:
            out += f"_{d}{facts}"
    flags = "" if a.base_addr_divisible_by == 1 else f"p{a.base_addr_divisible_by}"
    flags += groups.code(a.alias_groups)
    flags += ("i" if a.may_alias_internally else "") + _INDEX_FLAGS[a.index_dtype]
    return out + ("_" + flags if flags else "")


def demangle_kernel_name(symbol: str) -> tuple[str, KernelSignature]:
    """(function name, signature) of a mangled name, the signature's symbol `symbol`.

    Exactly inverts `mangle_kernel_name`: a name it could not have produced (a
    non-canonical spelling too) is a ValueError.  Alias groups come back named g0,
    g1, ... in order of first appearance.
    """
    if not isinstance(symbol, str):
        raise TypeError(f"symbol must be a str, got {symbol!r}")
    at = symbol.rfind("_K")
    if at <= 0:
        raise ValueError(f"'{symbol}' is not a mangled kernel name: it has no "
                         f"'_K<convention>' after a function name")
    name = symbol[:at]
    reader = _Reader(symbol, at + 2)
    convention = CallingConvention.from_code(
        reader.expect("[A-Za-z0-9]+", "a calling convention code after '_K'"))
    groups = _GroupNames(reader)
    params = []
    while not reader.at_end():
        reader.expect("_", "'_' before the next parameter")
        params.append(_demangle(reader, groups))
    signature = KernelSignature(params, convention, symbol)
    again = mangle_kernel_name(name, signature)
    if again != symbol:
        raise ValueError(f"'{symbol}' is not in canonical form: the signature it spells "
                         f"mangles to '{again}'")
    return name, signature


class _Reader:
    """A cursor over a mangled name; errors say where it stopped."""

    def __init__(self, text: str, pos: int):
        self.text, self.pos = text, pos

    def at_end(self) -> bool:
        return self.pos == len(self.text)

    def peek(self, pattern: str) -> bool:
        return re.compile(pattern).match(self.text, self.pos) is not None

    def take(self, pattern: str) -> str | None:
        m = re.compile(pattern).match(self.text, self.pos)
        if m is None:
            return None
        self.pos = m.end()
        return m.group()

    def expect(self, pattern: str, what: str) -> str:
        found = self.take(pattern)
        if found is None:
            raise self.error(f"expected {what}")
        return found

    def integer(self, what: str) -> int:
        text = self.expect("n?[0-9]+", what)
        return -int(text[1:]) if text.startswith("n") else int(text)

    def error(self, message: str) -> ValueError:
        rest = self.text[self.pos:self.pos + 16] or "the end"
        return ValueError(f"'{self.text}' is not a mangled kernel name: at offset {self.pos} "
                          f"({rest!r}) {message}")


class _GroupNames:
    """Alias group numbers back to names (g0, g1, ...), each new one the next number."""

    def __init__(self, reader: _Reader):
        self.reader, self.count = reader, 0

    def read(self) -> list[str]:
        names = []
        while self.reader.take("g"):
            n = int(self.reader.expect("[0-9]+", "an alias group number after 'g'"))
            if n > self.count:
                raise self.reader.error(f"alias group g{n} comes before g{self.count}")
            self.count = max(self.count, n + 1)
            names.append(f"g{n}")
        return names


def _demangle(r: _Reader, groups: _GroupNames) -> ParameterConstraint:
    code = r.expect("[ASLTBIF]", "a parameter: one of A, S, L, T, B, I, F")
    if code == "S":
        return ScalarConstraint(_read_dtype(r))
    if code == "A":
        return _demangle_array(r, groups)
    if code == "L":
        names = groups.read()
        elements_may_alias = r.take("e") is not None
        r.expect("A", "'A' and the list's element array")
        return ListConstraint(_demangle_array(r, groups), alias_groups=names,
                              elements_may_alias=elements_may_alias)
    if code == "T":
        items = []
        for _ in range(int(r.expect("[0-9]+", "the tuple's length"))):
            r.expect("_", "'_' before the next tuple item")
            items.append(_demangle(r, groups))
        return TupleConstraint(items)
    if code == "B":
        return ConstantConstraint(r.expect("[01]", "0 or 1 after B") == "1")
    if code == "I":
        return ConstantConstraint(r.integer("an int after I"))
    return ConstantConstraint(struct.unpack(">d", bytes.fromhex(
        r.expect("[0-9a-f]{16}", "16 hex digits after F")))[0])


def _read_dtype(r: _Reader) -> dt.DType:
    return _CODE_DTYPES[r.expect(_DTYPE_TOKEN, f"a dtype ({', '.join(_CODE_DTYPES)})")]


def _demangle_array(r: _Reader, groups: _GroupNames) -> ArrayConstraint:
    ndim = int(r.expect("[0-9]+", "the array's ndim"))
    dtype = _read_dtype(r)
    fields: dict[str, list] = {field: [default] * ndim for _, field, default in _FACTS}
    while r.peek("_[0-9]"):
        r.take("_")
        d = int(r.expect("[0-9]+", "a dim"))
        if d >= ndim:
            raise r.error(f"dim {d} of a {ndim}-d array")
        letters = dict((letter, field) for letter, field, _ in _FACTS)
        while (letter := r.take("[sdcvl]")) is not None:
            fields[letters[letter]][d] = r.integer(f"an int after '{letter}'")
    base, names, internal, index = 1, [], False, dt.int32
    if r.peek("_[a-z]"):
        r.take("_")
        if r.take("p"):
            base = r.integer("the base address divisor after 'p'")
        names = groups.read()
        internal = r.take("i") is not None
        index = {"u": dt.uint32, "w": dt.int64}.get(r.take("[uw]") or "", dt.int32)
    return ArrayConstraint(dtype, ndim, index_dtype=index, alias_groups=names,
                           may_alias_internally=internal, base_addr_divisible_by=base,
                           **fields)


# ---------------------------------------------------------------------------
# Signatures as tileir specializations
# ---------------------------------------------------------------------------
def _check_kernel(kernel: Any) -> None:
    if not isinstance(kernel, Kernel):
        raise TypeError(f"expected a @tileir.kernel, got {type(kernel).__name__} {kernel!r}")


def _specialize(kernel: Kernel, signature: KernelSignature) -> list[tuple[str, Any]]:
    """What `Kernel.classify` gives for a launch the signature describes."""
    names = list(kernel.signature.parameters)
    if len(signature.parameters) != len(names):
        raise TileTypeError(f"kernel '{kernel.name}' takes {len(names)} parameters "
                            f"({', '.join(names)}) but the signature describes "
                            f"{len(signature.parameters)}")
    return [(name, _param_kind(kernel, name, c))
            for name, c in zip(names, signature.parameters)]


def _param_kind(kernel: Kernel, name: str, c: ParameterConstraint) -> Any:
    annotation = kernel.param_annotations[name]
    what = f"parameter '{name}' of kernel '{kernel.name}'"
    if isinstance(c, ListConstraint):
        raise TileUnsupportedFeatureError(f"{what} is a list (ListConstraint): tileir does not "
                                          f"compile list parameters yet; pass the arrays as "
                                          f"separate parameters")
    value = _constant_value(c)
    if isinstance(annotation, ConstantAnnotation):
        if value is _RUNTIME:
            raise TileTypeError(f"{what} is a ct.Constant parameter, compiled in: its "
                                f"constraint must be a ConstantConstraint (or a tuple of "
                                f"them), got {type(c).__name__}")
        return classify_arg(kernel.name, name, annotation, value, True)
    if isinstance(c, ConstantConstraint):
        raise TileTypeError(f"{what} is not a ct.Constant parameter, so its value is passed at "
                            f"launch: describe it with a ScalarConstraint (or annotate it "
                            f"ct.Constant[...] to compile {c.value!r} in)")
    if isinstance(c, TupleConstraint):
        raise TileUnsupportedFeatureError(f"{what} is a tuple passed at launch: tileir does "
                                          f"not compile those yet (a tuple of constants for a "
                                          f"ct.Constant parameter it does); pass the items as "
                                          f"separate parameters")
    if isinstance(c, ScalarConstraint):
        kind = classify_arg(kernel.name, name, annotation, ScalarParam(c.dtype), True)
        if kind != ScalarParam(c.dtype):
            raise TileTypeError(f"{what} is annotated {kind.dtype.name} but the signature says "
                                f"{c.dtype.name}")
        return kind
    if not isinstance(annotation, ArrayAnnotation):      # None, or the error it is
        classify_arg(kernel.name, name, annotation, ArraySpec(c.dtype, c.ndim), True)
    aligned = _aligned(c)
    # an aligned array's unit last stride is part of `aligned`: compiling it in as well
    # would only make a variant apart from the one launches of such arrays compile
    strides = tuple((d, v) for d, v in _known(c.stride_constant)
                    if not (aligned and d == c.ndim - 1 and v == 1))
    param = ArrayParam(c.dtype, c.ndim, aligned=aligned, static_shape=_known(c.shape_constant),
                       static_strides=strides)
    if isinstance(annotation, ArrayAnnotation):
        _check_static_dims(what, annotation, param)
    return param


_RUNTIME = object()


def _constant_value(c: ParameterConstraint) -> Any:
    """The Python value of a constant (or tuple of constants); _RUNTIME otherwise."""
    if isinstance(c, ConstantConstraint):
        return c.value
    if isinstance(c, TupleConstraint):
        items = tuple(_constant_value(i) for i in c.items)
        return _RUNTIME if any(i is _RUNTIME for i in items) else items
    return _RUNTIME


def _known(entries: tuple[int | None, ...]) -> tuple[tuple[int, int], ...]:
    return tuple((d, v) for d, v in enumerate(entries) if v is not None)


def _aligned(c: ArrayConstraint) -> bool:
    """Whether the constraint promises docs/gpu-backend.md's aligned arrays: base % 16
    bytes, unit last stride, other strides multiples of 16 bytes (dims of size 1
    exempt: their stride never moves an address)."""
    if c.base_addr_divisible_by % 16:
        return False
    bits = _item_bits(c.dtype)
    for d in range(c.ndim):
        if c.shape_constant[d] == 1:
            continue
        stride = c.stride_constant[d]
        if d == c.ndim - 1:
            if stride != 1:
                return False
        elif (stride if stride is not None else c.stride_divisible_by[d]) * bits % 128:
            return False
    return True


def _check_static_dims(what: str, annotation: ArrayAnnotation, param: ArrayParam) -> None:
    """An annotated parameter compiles those entries in: the signature must give them."""
    for field, dims, known, constraint_field in (
            ("static_shape_dims", annotation.static_shape_dims, param.static_shape,
             "shape_constant"),
            ("static_stride_dims", annotation.static_stride_dims, param.static_strides,
             "stride_constant")):
        have = dict(known)
        for d in dims:
            if not -param.ndim <= d < param.ndim:
                raise TileValueError(f"{what}: {field} names dim {d} of a {param.ndim}-d "
                                     f"array")
            if d % param.ndim not in have:
                raise TileValueError(f"{what} is annotated {field}={dims}, which the kernel "
                                     f"compiles in: the signature's ArrayConstraint must give "
                                     f"{constraint_field}[{d % param.ndim}]")


_PTX_SYMBOL = re.compile(r"[A-Za-z][A-Za-z0-9_]*|_[A-Za-z0-9_]+")


def _symbol(kernel: Kernel, signature: KernelSignature) -> str:
    symbol = signature.symbol
    if symbol is None:
        symbol = mangle_kernel_name(kernel.name, signature)
    if not _PTX_SYMBOL.fullmatch(symbol):
        raise ValueError(f"symbol {symbol!r} cannot name a kernel in a cubin: use letters, "
                         f"digits and '_', starting with a letter (or '_' and one more)")
    return symbol


def _check_convention(signature: KernelSignature, index: int) -> None:
    convention = signature.calling_convention
    if convention.code == _TILEIR:
        return
    raise TileUnsupportedFeatureError(
        f"signature #{index} uses calling convention {convention.name}, which tileir does not "
        f"implement: cuTile's conventions pass an array's shape and strides as 2 x ndim "
        f"values of its index_dtype, tileir's kernels take ndim int32 dims then ndim int64 "
        f"strides, and on sm_90a a kernel that copies with TMA takes CUtensorMap parameters "
        f"after the others (docs/gpu-backend.md, \"Kernel ABI\").  Export with "
        f"CallingConvention.tileir_v1() and launch as kernel_launch_info() describes")


_GPU_CODES = {"sm_80": "sm_80", "sm_90": "sm_90a", "sm_90a": "sm_90a"}


def _target(gpu_code: Any) -> str:
    if gpu_code is None:
        raise ValueError("gpu_code is required for output_format='cubin': the GPU to compile "
                         "for, 'sm_80' or 'sm_90a'")
    if not isinstance(gpu_code, str):
        raise TypeError(f"gpu_code must be a str such as 'sm_90a', got {gpu_code!r}")
    target = _GPU_CODES.get(gpu_code)
    if target is not None:
        return target
    if re.fullmatch(r"sm_[0-9]+[a-z]?", gpu_code):
        raise TileUnsupportedFeatureError(
            f"tileir does not compile for {gpu_code}: it compiles for sm_80 (Ampere; those "
            f"cubins run on every 8.x GPU) and sm_90a (Hopper; 'sm_90' means sm_90a)")
    raise ValueError(f"gpu_code must name a GPU such as 'sm_80' or 'sm_90a', got {gpu_code!r}")


def _compile(kernel: Kernel, params: list[tuple[str, Any]], target: str) -> CompiledKernel:
    """The `cubin`-stage specialization, through the compile cache (whose entry keeps
    every stage's artifact, the `llvm` stage's IR among them).  `Kernel.compile`
    would classify arguments, and an ArraySpec cannot carry the constant shape and
    stride entries a signature may give: the specialization goes in as built."""
    from .cache import Cache
    return kernel._load_or_build(params, target, Cache())


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------
def export_kernel(kernel: Kernel, signatures: Sequence[KernelSignature],
                  output_file: IO | str | bytes | os.PathLike, *, gpu_code: str | None = None,
                  output_format: Literal["cubin", "tileir_bytecode"],
                  bytecode_version: str | None = None) -> None:
    """Compiles `kernel` for each signature and writes one cubin holding them all, each
    under its signature's symbol (the mangled name when it has none).

    `output_file`: a path (written atomically) or a binary file object (io.BytesIO
    keeps it in memory).  `gpu_code`: "sm_80" or "sm_90a" ("sm_90" means sm_90a).
    `output_format`: "cubin"; "tileir_bytecode" (with `bytecode_version`
    "major.minor") is NVIDIA's Tile IR bytecode, which tileir does not produce.
    Signatures must use `CallingConvention.tileir_v1()`; `kernel_launch_info`
    says how to launch each symbol.
    """
    _check_kernel(kernel)
    signatures = _check_signatures(signatures)
    _check_output(output_file)
    _check_format(output_format, bytecode_version)
    if output_format == "tileir_bytecode":
        raise TileUnsupportedFeatureError(
            "tileir does not produce Tile IR bytecode (output_format='tileir_bytecode', "
            "NVIDIA's format, compiled by its tileiras): tileir exports cubins; use "
            "output_format='cubin' with gpu_code='sm_80' or 'sm_90a'")
    target = _target(gpu_code)
    symbols = []
    for i, signature in enumerate(signatures):
        _check_convention(signature, i)
        symbols.append(_symbol(kernel, signature))
    _check_distinct(symbols)
    specializations = [_specialize(kernel, s) for s in signatures]   # all checked first
    parts = [(symbol, _llvm_ir(_compile(kernel, params, target)))
             for symbol, params in zip(symbols, specializations)]
    _write(output_file, _combine(parts, target))


def _llvm_ir(compiled: CompiledKernel) -> str:
    if "llvm" not in compiled.artifacts:
        where = getattr(compiled.entry, "path", None) or "(in memory)"
        raise TileInternalError(f"kernel '{compiled.name}': the compile cache entry {where} "
                                f"has no llvm-stage IR; clear it (python -m tileir.cache "
                                f"--clear) and export again")
    return compiled.artifacts["llvm"]


def _check_signatures(signatures: Any) -> list[KernelSignature]:
    if isinstance(signatures, KernelSignature) or not hasattr(signatures, "__iter__"):
        raise TypeError(f"signatures is a sequence of KernelSignature (a list, even of one), "
                        f"got {signatures!r}")
    signatures = list(signatures)
    if not signatures:
        raise ValueError("signatures is empty: export_kernel needs at least one signature")
    for i, s in enumerate(signatures):
        if not isinstance(s, KernelSignature):
            raise TypeError(f"signatures[{i}] is a {type(s).__name__}, not a KernelSignature")
    return signatures


def _check_output(output_file: Any) -> None:
    if isinstance(output_file, (str, bytes, os.PathLike)):
        return
    if isinstance(output_file, io.TextIOBase):
        raise TypeError("output_file is a text stream; a cubin is bytes: open it with 'wb', "
                        "or pass io.BytesIO()")
    if not callable(getattr(output_file, "write", None)):
        raise TypeError(f"output_file must be a path or a binary file object, got "
                        f"{type(output_file).__name__}")


def _check_format(output_format: Any, bytecode_version: Any) -> None:
    if output_format not in ("cubin", "tileir_bytecode"):
        raise ValueError(f"output_format must be 'cubin' or 'tileir_bytecode', got "
                         f"{output_format!r}")
    if bytecode_version is None:
        return
    if output_format != "tileir_bytecode":
        raise ValueError(f"bytecode_version goes with output_format='tileir_bytecode' only, "
                         f"got it with {output_format!r}")
    if not isinstance(bytecode_version, str) or not re.fullmatch(r"[0-9]+\.[0-9]+",
                                                                 bytecode_version):
        raise ValueError(f"bytecode_version must be 'major.minor' (e.g. '13.1'), got "
                         f"{bytecode_version!r}")


def _check_distinct(symbols: Sequence[str]) -> None:
    first: dict[str, int] = {}
    for i, s in enumerate(symbols):
        if s in first:
            raise ValueError(f"signatures #{first[s]} and #{i} both export the symbol '{s}'; "
                             f"give one another symbol (KernelSignature.with_symbol)")
        first[s] = i


def _write(output_file: Any, data: bytes) -> None:
    if not isinstance(output_file, (str, bytes, os.PathLike)):
        output_file.write(data)
        return
    path = os.path.abspath(os.fsdecode(output_file))
    # a scratch file beside it (created as open() creates files, under the umask), then
    # renamed over it: readers see the whole cubin or the old file, never a part
    scratch = os.path.join(os.path.dirname(path),
                           f".{os.path.basename(path)}.tmp-{secrets.token_hex(6)}")
    try:
        with open(scratch, "xb") as f:
            f.write(data)
        os.replace(scratch, path)
    except BaseException:
        if os.path.exists(scratch):
            os.unlink(scratch)
        raise


def _combine(parts: Sequence[tuple[str, str]], target: str) -> bytes:
    """One cubin holding each part's kernel under its symbol: ptxas on `_combined_ptx`."""
    from .backend.target import Target, assemble
    cubin, _ = assemble(_combined_ptx(parts), Target(target))
    missing = [s for s, _ in parts if s not in _elf_functions(cubin)]
    if missing:
        raise TileInternalError(f"the combined cubin lacks the kernel(s) {missing}")
    return cubin


def _combined_ptx(parts: Sequence[tuple[str, str]]) -> str:
    """One PTX module holding each part's kernel under its symbol.

    A part is (symbol, the `llvm`-stage IR of one specialization).  Their gpu.modules
    become one: each kernel renamed to its symbol, each module's other definitions
    (shared-memory globals, constant tables, helpers) prefixed apart, external
    declarations (libdevice functions) kept once.  The NVPTX backend then writes each
    kernel as it wrote it alone, but for those names.  Merged as IR, not as PTX text:
    the symbol tables rename, LLVM writes PTX.
    """
    from mlir import ir
    from .backend.target import emit_ptx
    from .kernel import mlir_context
    with mlir_context() as ctx:
        merged = into = None
        for i, (symbol, text) in enumerate(parts):
            module = ir.Module.parse(text, ctx)
            gpu_module = _gpu_module(module)
            _rename(gpu_module, symbol, f"__tileir_export{i}_")
            if merged is None:
                merged, into = module, gpu_module
            else:
                _move_symbols(gpu_module, into)
        return emit_ptx(merged)


def _gpu_module(module: Any) -> Any:
    found = [op.operation for op in module.body.operations if op.operation.name == "gpu.module"]
    if len(found) != 1:
        raise TileInternalError(f"an llvm-stage module holds {len(found)} gpu.modules, not 1")
    return found[0]


def _symbol_ops(gpu_module: Any) -> list[Any]:
    return [op.operation for op in gpu_module.regions[0].blocks[0].operations
            if "sym_name" in op.operation.attributes]


def _sym_name(op: Any) -> str:
    from mlir import ir
    return ir.StringAttr(op.attributes["sym_name"]).value


def _is_declaration(op: Any) -> bool:
    return op.name == "llvm.func" and len(op.regions[0].blocks) == 0


def _rename(gpu_module: Any, symbol: str, prefix: str) -> None:
    """The kernel becomes `symbol`, other definitions `prefix + name`."""
    from mlir import ir
    ops = _symbol_ops(gpu_module)
    kernels = [op for op in ops if "nvvm.kernel" in op.attributes]
    if len(kernels) != 1:
        raise TileInternalError(f"an llvm-stage module holds {len(kernels)} kernels, not 1")
    if any(_sym_name(op) == symbol for op in ops if op is not kernels[0]):
        raise TileValueError(f"symbol '{symbol}' is the name of a function or global the "
                             f"kernel uses: choose another")
    for op in ops:
        if _is_declaration(op):
            continue
        old = _sym_name(op)
        new = symbol if op is kernels[0] else prefix + old
        ir.SymbolTable.replace_all_symbol_uses(old, new, gpu_module)
        ir.SymbolTable.set_symbol_name(op, new)


def _move_symbols(source: Any, into: Any) -> None:
    """Moves `source`'s symbols to the end of `into`; a declaration `into` has is dropped."""
    existing = {_sym_name(op): op for op in _symbol_ops(into)}
    last = list(into.regions[0].blocks[0].operations)[-1].operation
    for op in _symbol_ops(source):
        name = _sym_name(op)
        there = existing.get(name)
        if there is not None:
            if _is_declaration(op) and _is_declaration(there) and \
                    str(op.attributes["function_type"]) == str(there.attributes["function_type"]):
                continue
            raise TileValueError(f"two of the exported kernels define '{name}': give them "
                                 f"distinct symbols")
        op.move_after(last)
        last = op
        existing[name] = op


# ---------------------------------------------------------------------------
# What a host passes: tileir's addition
# ---------------------------------------------------------------------------
_C_TYPES = {"bool_": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
            "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
            "uint64": "uint64_t", "float16": "__half", "bfloat16": "__nv_bfloat16",
            "float32": "float", "float64": "double", "float8_e4m3fn": "__nv_fp8_e4m3",
            "float8_e5m2": "__nv_fp8_e5m2"}
_TENSOR_MAP_BYTES = 128


def kernel_launch_info(kernel: Kernel, signature: KernelSignature,
                       gpu_code: str) -> dict[str, Any]:
    """How a host launches what `export_kernel` exports for `signature` (tileir's
    addition; JSON-serializable):

    - `symbol`, `target`; `block`: [threads, 1, 1]; `shared_bytes` of dynamic shared
      memory (past 48 KiB, raise CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first).
    - `slots`: the kernel's parameters in order, each `{"param", "what", "axis"?,
      "ctype", "size", "offset"}`, `what` one of pointer, dim, stride, scalar, grid,
      tensor_map.  cuLaunchKernel's `kernelParams` takes one pointer per slot; a
      packed buffer (`extra`) of `param_bytes` puts each at its `offset`, read from
      the cubin's parameter table.
    - The grid is the user's, but `grid_perm` (when present) permutes its axes first,
      `grid_scale` `[axis, num, den]` multiplies that axis
      by den/num, and a `persistent` kernel takes the user's grid in its three `grid`
      slots and runs (min(blocks, SMs), 1, 1) blocks.
    - `tensor_maps` (sm_90a): each `tensor_map` slot is a CUtensorMap of array `param`,
      encoded as tileir.runtime.tensor_maps does (`box`, `swizzle`, `clip`).
    - `meta`: the metadata tileir's launcher takes, named for the symbol:
      `tileir.runtime.launcher.launch(cubin, info["meta"], grid, args)`.
    """
    _check_kernel(kernel)
    if not isinstance(signature, KernelSignature):
        raise TypeError(f"signature must be a KernelSignature, got {signature!r}")
    _check_convention(signature, 0)
    target = _target(gpu_code)
    symbol = _symbol(kernel, signature)
    params = _specialize(kernel, signature)
    compiled = _compile(kernel, params, target)
    meta = compiled.meta
    slots = _abi_slots(params, meta)
    table = _kernel_params(compiled.cubin, meta["name"])
    if [size for _, size in table] != [s["size"] for s in slots]:
        raise TileInternalError(f"kernel '{meta['name']}': ptxas laid out parameters of sizes "
                                f"{[size for _, size in table]}, the ABI says "
                                f"{[s['size'] for s in slots]}")
    for s, (offset, _) in zip(slots, table):
        s["offset"] = offset
    return {"symbol": symbol, "target": target, "block": [meta["num_threads"], 1, 1],
            "shared_bytes": meta["shared_bytes"], "slots": slots,
            "param_bytes": max((s["offset"] + s["size"] for s in slots), default=0),
            "persistent": bool(meta.get("persistent")), "grid_scale": meta.get("grid_scale"),
            "grid_perm": meta.get("grid_perm"),
            "tensor_maps": meta.get("tensor_maps", []), "meta": {**meta, "name": symbol}}


def _abi_slots(params: list[tuple[str, Any]], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The kernel's parameters per docs/gpu-backend.md's ABI, without offsets."""
    runtime = [(name, kind) for name, kind in params if isinstance(kind, Param)]
    if len(runtime) != len(meta["params"]):
        raise TileInternalError(f"kernel '{meta['name']}': {len(runtime)} runtime parameters "
                                f"but its metadata lists {len(meta['params'])}")
    slots: list[dict[str, Any]] = []

    def slot(param: str | None, what: str, ctype: str, size: int, **extra):
        slots.append({"param": param, "what": what, **extra, "ctype": ctype, "size": size})

    for name, kind in runtime:
        if isinstance(kind, ArrayParam):
            slot(name, "pointer", "void*", 8)
            for axis in range(kind.ndim):
                slot(name, "dim", "int32_t", 4, axis=axis)
            for axis in range(kind.ndim):
                slot(name, "stride", "int64_t", 8, axis=axis)
        else:
            size = max(1, kind.dtype.bits // 8)
            slot(name, "scalar", _C_TYPES.get(kind.dtype.name, f"uint{8 * size}_t"), size)
    if meta.get("persistent"):
        for axis in range(3):
            slot(None, "grid", "int32_t", 4, axis=axis)
    for tm in meta.get("tensor_maps", []):
        if tm["slot"] != len(slots):
            raise TileInternalError(f"kernel '{meta['name']}': tensor map slot {tm['slot']}, "
                                    f"expected {len(slots)}")
        slot(runtime[tm["param"]][0], "tensor_map", "CUtensorMap", _TENSOR_MAP_BYTES)
    return slots


# ---------------------------------------------------------------------------
# Reading a cubin (64-bit little-endian ELF)
# ---------------------------------------------------------------------------
def _elf_sections(image: bytes) -> list[tuple[str, int, int, int, int, int]]:
    """(name, type, offset, size, link, entry size) of each section."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        raise TileInternalError("not a 64-bit little-endian ELF image")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize)
               for i in range(shnum)]
    names = headers[shstrndx][4]
    return [(_c_string(image, names + h[0]), h[1], h[4], h[5], h[6], h[9]) for h in headers]


def _c_string(image: bytes, at: int) -> str:
    return image[at:image.index(b"\0", at)].decode()


def _elf_functions(image: bytes) -> set[str]:
    """The global function symbols of a cubin: its kernels."""
    sections = _elf_sections(image)
    found = set()
    for _, kind, offset, size, link, entsize in sections:
        if kind != 2:                                       # SHT_SYMTAB
            continue
        strtab = sections[link][2]
        for at in range(offset, offset + size, entsize):
            name, info = struct.unpack_from("<IB", image, at)
            if info & 0xF == 2 and info >> 4 == 1:          # STT_FUNC, STB_GLOBAL
                found.add(_c_string(image, strtab + name))
    return found


_EIFMT_SVAL, _EIATTR_KPARAM_INFO = 4, 0x17


def _kernel_params(image: bytes, kernel: str) -> list[tuple[int, int]]:
    """(offset, size) of each parameter of `kernel`, by ordinal, as ptxas laid them out
    (the EIATTR_KPARAM_INFO records of `.nv.info.<kernel>`, which cuobjdump -elf
    prints).  The offsets are what a packed parameter buffer must follow: ptxas aligns
    a CUtensorMap to 64 bytes of the constant bank, whose parameters start at 0x210 on
    sm_90, so no rule on offsets alone gives them."""
    data = next((image[offset:offset + size] for name, _, offset, size, _, _
                 in _elf_sections(image) if name == f".nv.info.{kernel}"), None)
    if data is None:
        raise TileInternalError(f"the cubin has no .nv.info.{kernel} section")
    params, at = {}, 0
    while at + 4 <= len(data):
        fmt, attr = data[at], data[at + 1]
        length = struct.unpack_from("<H", data, at + 2)[0] if fmt == _EIFMT_SVAL else 0
        if attr == _EIATTR_KPARAM_INFO:
            _, ordinal, offset, flags = struct.unpack_from("<IHHI", data, at + 4)
            params[ordinal] = (offset, flags >> 18)
        at += 4 + length
    return [params[i] for i in sorted(params)]
