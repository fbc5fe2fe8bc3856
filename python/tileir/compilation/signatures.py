"""Calling conventions, parameter constraints and kernel signatures (cuTile's
`cuda.tile.compilation` classes, checked as cuTile checks them)."""

from __future__ import annotations

import collections
import dataclasses
import struct
from typing import (Any, Callable, Iterator, Sequence, TypeAlias)

import numpy as np

from .. import dtypes as dt
from ..kernel import Kernel
from ..specialization import ArrayParam, ListParam, ScalarParam, TupleParam


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
    """A parameter that is a list of arrays, each described by `element`, its length
    the launch's: exported, the kernel takes the list's table (docs/compilation.md)."""

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
        from .mangling import mangle_kernel_name     # (mangling reads signatures)
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
    if isinstance(kind, TupleParam):    # a tuple passed at launch: its items' constraints
        return TupleConstraint([_constraint_of(kname, f"{pname}[{i}]", k)
                                for i, k in enumerate(kind.items)])
    if isinstance(kind, ListParam):     # every element as the least aligned one is
        element = kind.element
        if not all(e.aligned for e in kind.elements):
            element = dataclasses.replace(element, aligned=False)
        return ListConstraint(_constraint_of(kname, pname, element))
    if isinstance(kind, (bool, int, float)):
        return ConstantConstraint(kind)
    raise TypeError(f"argument '{pname}' of kernel '{kname}' is the Constant "
                    f"{type(kind).__name__} {kind!r}; a ConstantConstraint holds a bool, int "
                    f"or float")


def _check_kernel(kernel: Any) -> None:
    if not isinstance(kernel, Kernel):
        raise TypeError(f"expected a @tileir.kernel, got {type(kernel).__name__} {kernel!r}")
