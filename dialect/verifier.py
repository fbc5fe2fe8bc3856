"""The semantic verifier of Tile IR (runs after MLIR's own structural checks).

IRDL checks operand counts, base types and required attributes.  This module
adds what it cannot: each tile op's `verify()` (shapes, dtypes, attribute
values), the contract of `tile.kernel` / `tile.function` functions, and the
rule that inside them only Tile IR is used and every tile dim is a power of
two.  Errors come back as located diagnostics, never as exceptions from MLIR.
"""

from __future__ import annotations

from mlir import ir

from .diagnostics import Diagnostic, TileIRError
from .ods import VerifyError
from .ring import MAX_STAGES
from .tile import DIALECT
from .types import MAX_ARRAY_RANK, array_info, by_type, is_power_of_two

KERNEL_ATTR = "tile.kernel"
FUNCTION_ATTR = "tile.function"

# Builtin ops a Tile IR function may use (everything else is a later stage's IR).
ALLOWED_PREFIXES = ("tile.", "arith.", "math.")
ALLOWED_OPS = frozenset({
    "tensor.splat", "tensor.extract", "tensor.from_elements",
    "scf.for", "scf.if", "scf.yield", "scf.while", "scf.condition",
    "func.call", "func.return",
})


TARGET_ATTR = "tile.target"     # on the module: the chip the GPU stages compile for
DEFAULT_CHIP = "sm_90a"


def module_chip(module: ir.Module, default: str = DEFAULT_CHIP) -> str:
    """The module's `tile.target` chip ("sm_90a", "sm_80"), else `default`."""
    attrs = module.operation.attributes
    return ir.StringAttr(attrs[TARGET_ATTR]).value if TARGET_ATTR in attrs else default


def kernel_functions(module: ir.Module) -> list[ir.Operation]:
    """The module's `tile.kernel` functions (a list: passes may add ops as they go)."""
    return [op.operation for op in module.body.operations
            if op.operation.name == "func.func" and KERNEL_ATTR in op.operation.attributes]


def arg_has(func: ir.Operation, i: int, attr: str) -> bool:
    """Whether argument `i` of function `func` carries attribute `attr` (`tile.aligned`)."""
    if "arg_attrs" not in func.attributes:
        return False
    attrs = ir.ArrayAttr(func.attributes["arg_attrs"])
    return i < len(attrs) and attr in ir.DictAttr(attrs[i])


def is_tile_function(op: ir.Operation) -> bool:
    attrs = op.attributes
    return op.name == "func.func" and (KERNEL_ATTR in attrs or FUNCTION_ATTR in attrs)


def _types_of(op: ir.Operation):
    for v in op.results:
        yield v.type
    for region in op.regions:
        for block in region.blocks:
            for arg in block.arguments:
                yield arg.type


def _check_tile_type(t: ir.Type) -> str | None:
    """What is wrong with `t` in Tile IR, or None (once per type: a kernel's values
    share a few types)."""
    return by_type("tile_type", t, _tile_type_problem)


def _tile_type_problem(t: ir.Type) -> str | None:
    if isinstance(t, ir.RankedTensorType):
        bad = [d for d in t.shape if not is_power_of_two(d)]
        if bad:
            return (f"tile shape {list(t.shape)} must have power-of-two dims; got {bad[0]} "
                    f"(pad the tile up to the next power of two and mask)")
        if t.encoding is not None:              # a layout: well-formed, of the tile's rank
            from .layout import check_layout
            try:
                check_layout(t, f"tile {t}")
            except VerifyError as e:
                return str(e)
    elif isinstance(t, (ir.ShapedType,)) and not isinstance(t, ir.RankedTensorType):
        return f"type {t} is not allowed in Tile IR (tiles are ranked static tensors)"
    return None


def _verify_function(func: ir.Operation, diags: list[Diagnostic]) -> None:
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    if KERNEL_ATTR in func.attributes and len(ftype.results) != 0:
        diags.append(Diagnostic(func.location, "a tile.kernel function must not return values "
                                "(store results into arrays instead)"))
    # kernel attributes the GPU stages read (set by @kernel options, or by hand)
    for name, low, high, power in (("tile.num_warps", 1, 32, True),
                                   ("tile.producer_warps", 0, 32, True),
                                   ("tile.occupancy", 1, 32, False),
                                   ("tile.num_stages", 2, MAX_STAGES, False)):
        if name in func.attributes:
            attr = func.attributes[name]
            n = ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else -1
            if not low <= n <= high or (power and n & (n - 1)):
                diags.append(Diagnostic(func.location, f"{name} must be "
                                        f"{'a power of two' if power else 'an int'} from "
                                        f"{low} to {high}, got {attr}"))
    # [axis, num, den]: the launch grid along `axis` times den / num (tileir.backend.layout.retile)
    if "tile.grid_scale" in func.attributes:
        attr = func.attributes["tile.grid_scale"]
        v = list(ir.DenseI64ArrayAttr(attr)) if isinstance(attr, ir.DenseI64ArrayAttr) else []
        if len(v) != 3 or not 0 <= v[0] <= 2 or v[1] < 1 or v[2] < 1:
            diags.append(Diagnostic(func.location, f"tile.grid_scale must be array<i64: axis, "
                                    f"num, den> with axis 0 to 2 and num, den >= 1, got {attr}"))
    for i, t in enumerate(ftype.inputs):
        info = array_info(t)
        if info is not None and info.rank > MAX_ARRAY_RANK:
            diags.append(Diagnostic(func.location, f"argument #{i} is an array of rank "
                                    f"{info.rank}; arrays have at most {MAX_ARRAY_RANK} dims"))
            continue
        ok = info is not None or isinstance(t, (ir.IntegerType, ir.F16Type,
                                                ir.BF16Type, ir.F32Type, ir.F64Type))
        if not ok and KERNEL_ATTR in func.attributes:
            diags.append(Diagnostic(func.location, f"kernel argument #{i} has type {t}; "
                                    f"kernels take !tile.array and scalar arguments"))

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op is not func and op != func:
            name = op.name
            if not (name.startswith(ALLOWED_PREFIXES) or name in ALLOWED_OPS):
                diags.append(Diagnostic(op.location, f"'{name}' is not part of Tile IR; inside "
                                        f"a tile function use tile, arith, math, scf, func.call "
                                        f"and tensor.splat/extract/from_elements"))
        for t in _types_of(op):
            msg = _check_tile_type(t)
            if msg:
                diags.append(Diagnostic(op.location, f"'{op.name}' {msg}"))
                break
        return ir.WalkResult.ADVANCE

    func.walk(visit)


def collect(root: ir.Operation) -> list[Diagnostic]:
    """All semantic diagnostics under `root` (a module or any op)."""
    diags: list[Diagnostic] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in DIALECT.ops:
            try:
                op.opview.verify()
            except VerifyError as e:
                diags.append(Diagnostic(op.location, f"'{op.name}' op {e}"))
        elif is_tile_function(op):
            _verify_function(op, diags)
        return ir.WalkResult.ADVANCE

    # Op verifiers build types (`i32` for arg reductions) and need a context.
    with root.context:
        root.walk(visit)
    return diags


def verify(root: ir.Module | ir.Operation) -> None:
    """Runs MLIR's verifier, then ours; raises `TileIRError` with every problem found."""
    op = root.operation if isinstance(root, ir.Module) else root
    try:
        op.verify()
    except ir.MLIRError as e:
        from .diagnostics import from_mlir_error
        raise TileIRError(from_mlir_error(e)) from None
    diags = collect(op)
    if diags:
        raise TileIRError(diags)
