"""Debugging and launch-order ops: `tile.print`, `tile.assert`,
`tile.grid_dependency` (docs/tile-ir.md), and the printf format helpers the
frontend, the interpreter and the GPU rules share.  Registered with the tile
dialect."""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from .ods import Arg, Spec, TileOpView, VerifyError
from .indexed import check_flag as _check_flag
from .tile import DIALECT, _i64_attr
from .types import is_float, is_int


# One C conversion: flags, width, precision, length, specifier (tileir's printf subset)
PRINTF_CONVERSION = r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diuoxXeEfFgGaA]"


def printf_spans(fmt: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of each conversion of a printf format, in order ('%%' is a
    literal percent)."""
    import re
    pattern = re.compile(PRINTF_CONVERSION)
    out, i = [], 0
    while True:
        i = fmt.find("%", i)
        if i < 0:
            return out
        if fmt.startswith("%%", i):
            i += 2
            continue
        m = pattern.match(fmt, i)
        if m is None:
            raise VerifyError(f"format {fmt!r}: '%' at {i} starts no conversion tileir "
                              f"prints (flags, width, precision, then one of diuoxXeEfFgGaA)")
        out.append((i, m.end(), m.group(0)))
        i = m.end()


def printf_conversions(fmt: str) -> list[str]:
    """The conversions of a printf format, in order."""
    return [c for _, _, c in printf_spans(fmt)]


@DIALECT.op
class PrintOp(TileOpView):
    """Prints `format` once per block: its conversion (C printf, at most one) takes the
    operand, a scalar as one value, a tile as `[v, v, ...]` (nested for higher ranks).
    `more` = 1: the text continues in the next `tile.print` of the block, and the
    line is printed as one piece when the last (`more` = 0) runs.  (One value per op:
    IRDL ties the types of a variadic operand group.)"""

    OPERATION_NAME = "tile.print"
    SPEC = Spec(operands=(Arg("values", "any", variadic=True),),
                attributes=(("format", "str_attr"), ("more", "int_attr")))

    def __init__(self, fmt: str, values: Sequence[ir.Value], more: bool = False, *,
                 loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[], operands=list(values),
            attributes={"format": ir.StringAttr.get(fmt), "more": _i64_attr(int(more))},
            loc=loc, ip=ip))

    format = property(lambda self: self.str_attr("format"))
    values = property(lambda self: list(self.operands))
    more = property(lambda self: bool(self.int_attr("more")))

    def verify(self) -> None:
        conv = printf_conversions(self.format)
        if len(conv) != len(self.values) or len(conv) > 1:
            raise VerifyError(f"format {self.format!r} has {len(conv)} conversions for "
                              f"{len(self.values)} values (one value per tile.print at most)")
        _check_flag(self, "more")
        for c, v in zip(conv, self.values):
            t = v.type
            elem = t.element_type if isinstance(t, ir.RankedTensorType) else t
            if c[-1] in "diuoxX" and not is_int(elem):
                raise VerifyError(f"conversion {c} prints integers, got {t}")
            if c[-1] in "eEfFgGaA" and not is_float(elem):
                raise VerifyError(f"conversion {c} prints floats, got {t}")


@DIALECT.op
class AssertOp(TileOpView):
    """Stops the kernel (a trap, after printing `message` with the failing block) unless
    every element of `cond` is true."""

    OPERATION_NAME = "tile.assert"
    SPEC = Spec(operands=(Arg("cond", "any"),), attributes=(("message", "str_attr"),))

    def __init__(self, cond: ir.Value, message: str, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[], operands=[cond],
            attributes={"message": ir.StringAttr.get(message)}, loc=loc, ip=ip))

    cond = property(lambda self: self.operands[0])
    message = property(lambda self: self.str_attr("message"))

    def verify(self) -> None:
        t = self.cond.type
        elem = t.element_type if isinstance(t, ir.RankedTensorType) else t
        if str(elem) != "i1":
            raise VerifyError(f"the condition must be i1 (a bool tile or scalar), got {t}")


@DIALECT.op
class GridDependencyOp(TileOpView):
    """Programmatic dependent launch (sm_90+): `wait` blocks until the kernel this grid
    depends on has finished and its writes are visible; `launch_dependents` lets the
    grids that depend on this one begin launching.  Without such a launch both are
    no-ops."""

    OPERATION_NAME = "tile.grid_dependency"
    SPEC = Spec(attributes=(("kind", "str_attr"),))
    KINDS = ("wait", "launch_dependents")

    def __init__(self, kind: str, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(self.OPERATION_NAME, results=[], operands=[],
                                             attributes={"kind": ir.StringAttr.get(kind)},
                                             loc=loc, ip=ip))

    kind = property(lambda self: self.str_attr("kind"))

    def verify(self) -> None:
        if self.kind not in self.KINDS:
            raise VerifyError(f"kind '{self.kind}' is not one of {', '.join(self.KINDS)}")


__all__ = ["PRINTF_CONVERSION", "PrintOp", "AssertOp", "GridDependencyOp", "printf_spans",
           "printf_conversions"]
