"""Element-wise rules: `arith`/`math` on tiles become the same op on each register.

Constants and splats give every register the same scalar; a rank-0 tile is one
register (`tensor.extract` reads it back as a scalar).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm

from tileir.dialect import TileIRError

from ..context import Frag, LoweringContext, lin_of
from .registry import prefix_rule, rule


def _attrs(op: ir.Operation) -> dict:
    return {name: op.attributes[name] for name in op.attributes}


_UPCAST_MATH = ("f16", "bf16")


@prefix_rule("arith.", "math.")
def elementwise(cx: LoweringContext, op: ir.Operation) -> None:
    name = op.name
    if name == "arith.constant" and isinstance(op.results[0].type, ir.RankedTensorType):
        return splat_constant(cx, op)
    operands = [cx.get(v) for v in op.operands]
    frags = [f for f in operands if isinstance(f, Frag)]
    if not frags:
        new = ir.Operation.create(name, results=[r.type for r in op.results],
                                  operands=operands, attributes=_attrs(op))
        for old, res in zip(op.results, new.results):
            cx.values[old] = res
        return
    lin = frags[0].lin
    if any(f.lin != lin for f in frags):
        raise TileIRError(f"internal error: operands of '{name}' have different layouts",
                          op.location)
    elems = [r.type.element_type for r in op.results]
    out: list[list[ir.Value]] = [[] for _ in elems]
    attrs = _attrs(op)
    for r in range(lin.num_regs):
        args = [f.regs[r] if isinstance(f, Frag) else f for f in operands]
        for k, res in enumerate(_scalar_op(name, elems, args, attrs)):
            out[k].append(res)
    for old, regs, elem in zip(op.results, out, elems):
        cx.values[old] = Frag(lin, elem, regs)


# GPU precision (docs/gpu-backend.md): exp/exp2 use the hardware ex2.approx
# (what Triton's tl.exp does), f32 division div.full.f32 (2 ulp over the full
# range); everything else is IEEE or libdevice-accurate.
_FAST_EXP = ("math.exp", "math.exp2")


def _scalar_op(name: str, elems: list[ir.Type], args: list[ir.Value], attrs: dict):
    if name == "arith.divf" and isinstance(elems[0], ir.F32Type):
        return [llvm.inline_asm(elems[0], args, "div.full.f32 $0, $1, $2;", "=f,f,f")]
    if name in _FAST_EXP:
        attrs = dict(attrs, fastmath=ir.Attribute.parse("#arith.fastmath<afn>"))
    # libdevice has no 16-bit transcendental functions: compute those in f32.
    if name.startswith("math.") and len(elems) == 1 and str(elems[0]) in _UPCAST_MATH:
        f32 = ir.F32Type.get()
        wide = [arith.extf(f32, a) if str(a.type) in _UPCAST_MATH else a for a in args]
        r = ir.Operation.create(name, results=[f32], operands=wide, attributes=attrs).results[0]
        return [arith.truncf(elems[0], r)]
    return list(ir.Operation.create(name, results=elems, operands=args,
                                    attributes=attrs).results)


def splat_constant(cx: LoweringContext, op: ir.Operation) -> None:
    t = op.results[0].type
    value = ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()
    scalar = arith.ConstantOp(t.element_type, value).result
    lin = lin_of(t)
    cx.values[op.results[0]] = Frag(lin, t.element_type, [scalar] * lin.num_regs)


@rule("tensor.splat")
def _splat(cx, op):
    t = op.results[0].type
    lin = lin_of(t)
    cx.values[op.results[0]] = Frag(lin, t.element_type, [cx.get(op.operands[0])] * lin.num_regs)


@rule("tensor.extract")
def _extract(cx, op):
    src = cx.frag(op.operands[0])
    if len(src.shape) != 0:
        raise TileIRError("extracting elements of a tile with indices is not lowered to the "
                          "GPU; reduce to a scalar instead", op.location)
    cx.values[op.results[0]] = src.regs[0]


@rule("tensor.from_elements")
def _from_elements(cx, op):
    t = op.results[0].type
    if t.rank != 0:
        raise TileIRError("tensor.from_elements of more than one element is not lowered to the "
                          "GPU", op.location)
    lin = lin_of(t)
    cx.values[op.results[0]] = Frag(lin, t.element_type, [cx.get(op.operands[0])])


