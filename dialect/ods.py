"""A small operation-definition layer: one Python spec per op drives everything.

MLIR 22.1's Python bindings have no op-definition DSL, so the Tile IR dialect is
declared here in plain Python.  Each op class carries a `Spec` (operands,
attributes, results with their constraints).  From the specs we generate

* the IRDL module that registers the dialect with MLIR (structural checks:
  operand counts, base types, required attributes), and
* `OpView` subclasses registered with the bindings, so `op.opview` returns our
  classes with builders, accessors and a `verify()` method for the semantic
  rules IRDL cannot say (shapes, dtypes, attribute values).

IRDL limits shape this design (see shared/STACK.md): generic syntax only, no
traits or memory effects, no optional attributes.  Semantic verification is
therefore ours: `tileir.dialect.verifier` runs every op's `verify()`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from mlir import ir
from mlir._mlir_libs import _mlir

# Constraint name -> IRDL snippet producing the constraint value.  The snippet
# may use "{ns}" for the dialect namespace.
CONSTRAINTS: dict[str, str] = {
    "i32": "irdl.is i32",
    "i1": "irdl.is i1",
    "any": "irdl.any",
    "tensor": 'irdl.base "!builtin.tensor"',
    "array": "irdl.base @{ns}::@array",
    "ring": "irdl.base @{ns}::@ring",
    "int_attr": 'irdl.base "#builtin.integer"',
    "str_attr": 'irdl.base "#builtin.string"',
    "i64_array_attr": 'irdl.base "#builtin.dense_array"',
    "blocked_attr": "irdl.base @{ns}::@blocked",
    "mma_attr": "irdl.base @{ns}::@mma_acc",
}


@dataclasses.dataclass(frozen=True)
class Arg:
    """One operand or result: a name, a constraint name, and whether it is variadic."""

    name: str
    constraint: str
    variadic: bool = False


@dataclasses.dataclass(frozen=True)
class Spec:
    """The structural signature of an op (what IRDL verifies)."""

    operands: tuple[Arg, ...] = ()
    attributes: tuple[tuple[str, str], ...] = ()
    results: tuple[Arg, ...] = ()


@dataclasses.dataclass(frozen=True)
class TypeSpec:
    """A parametric type: its name and (parameter name, constraint) pairs."""

    name: str
    summary: str
    parameters: tuple[tuple[str, str], ...]


class VerifyError(Exception):
    """Raised by an op's `verify()`; the verifier attaches the op's location."""


class Dialect:
    """Collects the types and ops of one dialect and loads them into contexts."""

    def __init__(self, namespace: str):
        self.namespace = namespace
        self.types: list[TypeSpec] = []
        self.attributes: list[TypeSpec] = []
        self.ops: dict[str, type] = {}

        @_mlir.register_dialect
        class _DialectView(ir.Dialect):
            DIALECT_NAMESPACE = namespace

        self._dialect_view = _DialectView

    # -- declaration -------------------------------------------------------
    def type(self, name: str, summary: str, **parameters: str) -> TypeSpec:
        spec = TypeSpec(name, summary, tuple(parameters.items()))
        self.types.append(spec)
        return spec

    def attribute(self, name: str, summary: str, **parameters: str) -> TypeSpec:
        spec = TypeSpec(name, summary, tuple(parameters.items()))
        self.attributes.append(spec)
        return spec

    def op(self, cls: type) -> type:
        """Class decorator: registers an `OpView` subclass carrying `SPEC`."""
        name = cls.OPERATION_NAME
        if not name.startswith(self.namespace + "."):
            raise ValueError(f"op {name} is not in dialect {self.namespace}")
        if name in self.ops:
            raise ValueError(f"op {name} defined twice")
        cls._ODS_REGIONS = (0, True)
        self.ops[name] = cls
        return _mlir.register_operation(self._dialect_view)(cls)

    # -- IRDL generation -----------------------------------------------------
    def irdl(self) -> str:
        ns = self.namespace
        lines = [f"irdl.dialect @{ns} {{"]
        for kind, specs in (("type", self.types), ("attribute", self.attributes)):
            lines.extend(self._parametric(kind, specs))
        for name, cls in self.ops.items():
            spec: Spec = cls.SPEC
            lines.append(f"  irdl.operation @{name.split('.', 1)[1]} {{")
            values: dict[str, str] = {}

            def use(cons: str) -> str:
                # One SSA value per constraint *use*: IRDL ties the types of all
                # operands sharing a constraint value, which we do not want.
                v = f"%c{len(values)}"
                values[v] = cons
                lines.append(f"    {v} = {CONSTRAINTS[cons].format(ns=ns)}")
                return v

            if spec.operands:
                ops = [f"{a.name}: {'variadic ' if a.variadic else ''}{use(a.constraint)}"
                       for a in spec.operands]
                lines.append(f"    irdl.operands({', '.join(ops)})")
            if spec.attributes:
                attrs = [f'"{n}" = {use(c)}' for n, c in spec.attributes]
                lines.append(f"    irdl.attributes {{ {', '.join(attrs)} }}")
            if spec.results:
                res = [f"{a.name}: {'variadic ' if a.variadic else ''}{use(a.constraint)}"
                       for a in spec.results]
                lines.append(f"    irdl.results({', '.join(res)})")
            lines.append("  }")
        lines.append("}")
        return "\n".join(lines)

    def _parametric(self, kind: str, specs: list[TypeSpec]) -> list[str]:
        lines = []
        for t in specs:
            lines.append(f"  irdl.{kind} @{t.name} {{")
            names = []
            for i, (pname, cons) in enumerate(t.parameters):
                lines.append(f"    %p{i} = {CONSTRAINTS[cons].format(ns=self.namespace)}")
                names.append(f"{pname}: %p{i}")
            lines.append(f"    irdl.parameters({', '.join(names)})")
            lines.append("  }")
        return lines

    def load(self, context: ir.Context) -> None:
        """Registers the dialect in `context` (idempotent: loading twice aborts MLIR)."""
        first_op = next(iter(self.ops))
        if context.is_registered_operation(first_op):
            return
        from mlir.dialects import irdl

        with context:
            module = ir.Module.parse(self.irdl())
            irdl.load_dialects(module)


class TileOpView(ir.OpView):
    """Base for our op classes: a generic `create` and the default `verify`."""

    OPERATION_NAME = ""
    SPEC = Spec()
    SUMMARY = ""

    @classmethod
    def create(cls, *, results=(), operands=(), attributes=None, loc=None, ip=None):
        op = ir.Operation.create(cls.OPERATION_NAME, results=list(results),
                                 operands=list(operands), attributes=attributes or {},
                                 loc=loc, ip=ip)
        return cls(op)

    def int_attr(self, name: str) -> int:
        # IRDL only checks for "some integer attribute"; reading an i128 or an
        # unsigned one through `.value` can trip an APInt assertion (an abort),
        # so insist on the documented i64 first.
        attr = ir.IntegerAttr(self.operation.attributes[name])
        if attr.type != ir.IntegerType.get_signless(64, attr.context):
            raise VerifyError(f"attribute '{name}' must be an i64 integer, got {attr}")
        return attr.value

    def str_attr(self, name: str) -> str:
        return ir.StringAttr(self.operation.attributes[name]).value

    def i64_array_attr(self, name: str) -> list[int]:
        # IRDL accepts any `array<...>`; only `array<i64: ...>` is meaningful here.
        attr = self.operation.attributes[name]
        if not isinstance(attr, ir.DenseI64ArrayAttr):
            raise VerifyError(f"attribute '{name}' must be an array<i64: ...>, got {attr}")
        return list(attr)

    def verify(self) -> None:  # pragma: no cover - overridden where needed
        return None


VerifyFn = Callable[[ir.OpView], None]
