"""Element-indexed memory: `tile.gather`, `tile.scatter`, `tile.atomic_rmw`,
`tile.atomic_cas` (docs/tile-ir.md).  Registered with the tile dialect."""

from __future__ import annotations

from mlir import ir

from .ods import Arg, Spec, TileOpView, VerifyError
from .tile import DIALECT, _array, _i64_attr, _shape, _tensor
from .types import ArrayInfo, is_int, signless


MEMORY_ORDERS = ("relaxed", "acquire", "release", "acq_rel")
MEMORY_SCOPES = ("block", "device", "sys")
ATOMIC_KINDS = ("add", "and", "or", "xor", "min", "max", "umin", "umax", "xchg")


def _check_element_access(op, array: ir.Value, indices: list[ir.Value],
                          shaped: list[tuple[str, ir.Value]]) -> ir.RankedTensorType:
    """Common checks: one integer index tile per array dim (all of one type: IRDL ties
    a variadic group's types), every tile operand of one shape."""
    info = _array(array)
    if len(indices) != info.rank:
        raise VerifyError(f"expected {info.rank} index tiles (one per array dim), got "
                          f"{len(indices)}")
    shape = None
    for k, v in enumerate(indices):
        t = _tensor(v, f"index {k}")
        elem = t.element_type
        if not isinstance(elem, ir.IntegerType) or elem.width not in (32, 64):
            raise VerifyError(f"index {k} must be a tile of i32 or i64, got {t}")
        shape = shape or _shape(t)
        if _shape(t) != shape:
            raise VerifyError(f"index {k} has shape {_shape(t)}, index 0 {shape}")
    for what, v in shaped:
        t = _tensor(v, what)
        if _shape(t) != shape:
            raise VerifyError(f"{what} has shape {_shape(t)}, the indices {shape}")
    return info


def _check_mask(v: ir.Value) -> None:
    t = _tensor(v, "mask")
    if str(t.element_type) != "i1":
        raise VerifyError(f"mask must be a tile of i1, got {t}")


def _check_elem(v: ir.Value, info: ArrayInfo, what: str) -> None:
    want = signless(info.element_type)
    if _tensor(v, what).element_type != want:
        raise VerifyError(f"{what} element type {v.type.element_type} does not match the "
                          f"array's {info.element_type} (expected {want})")


def check_flag(op, name: str) -> None:
    """An int attribute that must be 0 or 1."""
    if op.int_attr(name) not in (0, 1):
        raise VerifyError(f"{name} must be 0 or 1, got {op.int_attr(name)}")


@DIALECT.op
class GatherOp(TileOpView):
    """result[c] = array[indices[0][c], ..., indices[R-1][c]] where `mask[c]` holds and
    (with `check_bounds` = 1) every index lies in its dim, else `padding[c]`."""

    OPERATION_NAME = "tile.gather"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("mask", "tensor"), Arg("padding", "tensor"),
                          Arg("indices", "tensor", variadic=True)),
                attributes=(("check_bounds", "int_attr"),), results=(Arg("result", "tensor"),))

    def __init__(self, array, mask, padding, indices, check_bounds: bool, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[padding.type],
                                 operands=[array, mask, padding, *indices],
                                 attributes={"check_bounds": _i64_attr(int(check_bounds))},
                                 loc=loc, ip=ip)
        super().__init__(op)

    array = property(lambda self: self.operands[0])
    mask = property(lambda self: self.operands[1])
    padding = property(lambda self: self.operands[2])
    indices = property(lambda self: list(self.operands)[3:])
    check_bounds = property(lambda self: bool(self.int_attr("check_bounds")))

    def verify(self) -> None:
        info = _check_element_access(self, self.array, self.indices,
                                     [("mask", self.mask), ("padding", self.padding),
                                      ("result", self.result)])
        _check_mask(self.mask)
        _check_elem(self.padding, info, "padding")
        _check_elem(self.result, info, "result")
        check_flag(self, "check_bounds")


@DIALECT.op
class ScatterOp(TileOpView):
    """array[indices[.][c]] = value[c] where `mask[c]` holds and (with `check_bounds`)
    the indices lie in the array; of equal indices one write wins, which unspecified."""

    OPERATION_NAME = "tile.scatter"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("value", "tensor"), Arg("mask", "tensor"),
                          Arg("indices", "tensor", variadic=True)),
                attributes=(("check_bounds", "int_attr"),))

    def __init__(self, array, value, mask, indices, check_bounds: bool, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[],
                                 operands=[array, value, mask, *indices],
                                 attributes={"check_bounds": _i64_attr(int(check_bounds))},
                                 loc=loc, ip=ip)
        super().__init__(op)

    array = property(lambda self: self.operands[0])
    value = property(lambda self: self.operands[1])
    mask = property(lambda self: self.operands[2])
    indices = property(lambda self: list(self.operands)[3:])
    check_bounds = property(lambda self: bool(self.int_attr("check_bounds")))

    def verify(self) -> None:
        info = _check_element_access(self, self.array, self.indices,
                                     [("value", self.value), ("mask", self.mask)])
        _check_mask(self.mask)
        _check_elem(self.value, info, "value")
        check_flag(self, "check_bounds")


class _AtomicOp(TileOpView):
    def _atomic_attrs(self) -> None:
        if self.memory_order not in MEMORY_ORDERS:
            raise VerifyError(f"memory_order '{self.memory_order}' is not one of "
                              f"{', '.join(MEMORY_ORDERS)}")
        if self.memory_scope not in MEMORY_SCOPES:
            raise VerifyError(f"memory_scope '{self.memory_scope}' is not one of "
                              f"{', '.join(MEMORY_SCOPES)}")
        check_flag(self, "check_bounds")

    memory_order = property(lambda self: self.str_attr("memory_order"))
    memory_scope = property(lambda self: self.str_attr("memory_scope"))
    check_bounds = property(lambda self: bool(self.int_attr("check_bounds")))


def _atomic_attributes(order: str, scope: str, check_bounds: bool, **more) -> dict:
    attrs = {"memory_order": ir.StringAttr.get(order), "memory_scope": ir.StringAttr.get(scope),
             "check_bounds": _i64_attr(int(check_bounds))}
    attrs.update({k: ir.StringAttr.get(v) for k, v in more.items()})
    return attrs


@DIALECT.op
class AtomicRMWOp(_AtomicOp):
    """Per element where `mask` holds (and the indices are in bounds with
    `check_bounds`): atomically `array[idx] = kind(array[idx], update)`; the result is
    the value before (elsewhere: `update`).  Kinds: add, and, or, xor, min, max (signed),
    umin, umax (unsigned), xchg."""

    OPERATION_NAME = "tile.atomic_rmw"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("update", "tensor"), Arg("mask", "tensor"),
                          Arg("indices", "tensor", variadic=True)),
                attributes=(("kind", "str_attr"), ("memory_order", "str_attr"),
                            ("memory_scope", "str_attr"), ("check_bounds", "int_attr")),
                results=(Arg("result", "tensor"),))

    def __init__(self, array, update, mask, indices, kind: str, order: str, scope: str,
                 check_bounds: bool, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[update.type],
                                 operands=[array, update, mask, *indices],
                                 attributes=_atomic_attributes(order, scope, check_bounds,
                                                               kind=kind), loc=loc, ip=ip)
        super().__init__(op)

    array = property(lambda self: self.operands[0])
    update = property(lambda self: self.operands[1])
    mask = property(lambda self: self.operands[2])
    indices = property(lambda self: list(self.operands)[3:])
    kind = property(lambda self: self.str_attr("kind"))

    def verify(self) -> None:
        info = _check_element_access(self, self.array, self.indices,
                                     [("update", self.update), ("mask", self.mask),
                                      ("result", self.result)])
        _check_mask(self.mask)
        _check_elem(self.update, info, "update")
        _check_elem(self.result, info, "result")
        self._atomic_attrs()
        if self.kind not in ATOMIC_KINDS:
            raise VerifyError(f"unknown atomic kind '{self.kind}'; expected one of "
                              f"{', '.join(ATOMIC_KINDS)}")
        elem = signless(info.element_type)
        if self.kind != "add" and self.kind != "xchg" and not is_int(elem):
            raise VerifyError(f"atomic {self.kind} needs an integer array, got {elem}")


@DIALECT.op
class AtomicCasOp(_AtomicOp):
    """Per element where `mask` holds (and in bounds with `check_bounds`): atomically,
    if `array[idx] == expected` then `array[idx] = desired`; the result is the value
    before (elsewhere: `expected`)."""

    OPERATION_NAME = "tile.atomic_cas"
    SPEC = Spec(operands=(Arg("array", "array"), Arg("expected", "tensor"),
                          Arg("desired", "tensor"), Arg("mask", "tensor"),
                          Arg("indices", "tensor", variadic=True)),
                attributes=(("memory_order", "str_attr"), ("memory_scope", "str_attr"),
                            ("check_bounds", "int_attr")),
                results=(Arg("result", "tensor"),))

    def __init__(self, array, expected, desired, mask, indices, order: str, scope: str,
                 check_bounds: bool, *, loc=None, ip=None):
        op = ir.Operation.create(self.OPERATION_NAME, results=[expected.type],
                                 operands=[array, expected, desired, mask, *indices],
                                 attributes=_atomic_attributes(order, scope, check_bounds),
                                 loc=loc, ip=ip)
        super().__init__(op)

    array = property(lambda self: self.operands[0])
    expected = property(lambda self: self.operands[1])
    desired = property(lambda self: self.operands[2])
    mask = property(lambda self: self.operands[3])
    indices = property(lambda self: list(self.operands)[4:])

    def verify(self) -> None:
        info = _check_element_access(self, self.array, self.indices,
                                     [("expected", self.expected), ("desired", self.desired),
                                      ("mask", self.mask), ("result", self.result)])
        _check_mask(self.mask)
        for what in ("expected", "desired", "result"):
            _check_elem(getattr(self, what) if what != "result" else self.result, info, what)
        self._atomic_attrs()


__all__ = ["MEMORY_ORDERS", "MEMORY_SCOPES", "ATOMIC_KINDS", "GatherOp", "ScatterOp",
           "AtomicRMWOp", "AtomicCasOp", "check_flag"]
