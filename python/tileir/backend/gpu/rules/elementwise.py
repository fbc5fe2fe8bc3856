"""Element-wise rules: `arith`/`math` on tiles become the same op on each register.

Constants and splats give every register the same scalar; a rank-0 tile is one
register (`tensor.extract` reads it back as a scalar; an element of a larger tile
comes from the threads that hold it through a shared slot).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, memref, scf, vector

from tileir.dialect import TileIRError

from ..context import Frag, LoweringContext, _bits, is_fp8, lin_of, reg_type
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
    elems = [r.type.element_type if isinstance(r.type, ir.RankedTensorType) else r.type
             for r in op.results]
    in_elems = [v.type.element_type if isinstance(v.type, ir.RankedTensorType) else v.type
                for v in op.operands]
    fp8 = any(is_fp8(e) for e in elems + in_elems)
    if not frags:
        if fp8:                   # a scalar (a 0-d tile's value): its bits, as in a tile
            results = _fp8_op(cx, name, in_elems, elems, operands, _attrs(op))
        else:
            results = ir.Operation.create(name, results=[r.type for r in op.results],
                                          operands=operands, attributes=_attrs(op)).results
        for old, res in zip(op.results, results):
            cx.values[old] = res
        return
    lin = frags[0].lin
    if any(f.lin != lin for f in frags):
        raise TileIRError(f"internal error: operands of '{name}' have different layouts",
                          op.location)
    out: list[list[ir.Value]] = [[] for _ in elems]
    attrs = _attrs(op)
    if _paired_truncf(name, in_elems, elems, attrs, lin.num_regs) and _feeds_a_product(op):
        cx.values[op.results[0]] = Frag(lin, elems[0], _truncf_pairs(frags[0].regs, elems[0]))
        return
    for r in range(lin.num_regs):
        args = [f.regs[r] if isinstance(f, Frag) else f for f in operands]
        results = _fp8_op(cx, name, in_elems, elems, args, attrs) if fp8 else \
            _scalar_op(name, elems, args, attrs)
        for k, res in enumerate(results):
            out[k].append(res)
    for old, regs, elem in zip(op.results, out, elems):
        cx.values[old] = Frag(lin, elem, regs)


# GPU precision (docs/gpu-backend.md): exp/exp2 use the hardware ex2.approx
# (what Triton's tl.exp does), f32 division div.full.f32 (2 ulp over the full
# range); everything else is IEEE or libdevice-accurate.
_FAST_EXP = ("math.exp", "math.exp2")


# cuTile's float options (tileir.frontend.functional): `tile.rounding` (rn, full,
# approx; the directed rz, rm, rp below) and `tile.ftz` pick the f32 instruction; on
# other types RN is the default.
_F32_OPTION_ASM = {"arith.addf": "add.rn", "arith.subf": "sub.rn", "arith.mulf": "mul.rn",
                   "arith.maximumf": "max.NaN", "arith.minimumf": "min.NaN",
                   "arith.maxnumf": "max", "arith.minnumf": "min", "math.exp2": "ex2.approx",
                   "math.rsqrt": "rsqrt.approx"}
_ROUNDED_ASM = {("arith.divf", None): "div.full", ("arith.divf", "full"): "div.full",
                ("arith.divf", "rn"): "div.rn", ("arith.divf", "approx"): "div.approx",
                ("math.sqrt", "rn"): "sqrt.rn", ("math.sqrt", None): "sqrt.rn",
                ("math.sqrt", "approx"): "sqrt.approx", ("math.tanh", "approx"): "tanh.approx"}


def _f32_option(name: str, args: list[ir.Value], rounding: str | None, ftz: bool):
    """The PTX instruction for an f32 op with float options, or None for the default."""
    inst = _ROUNDED_ASM.get((name, rounding)) or (_F32_OPTION_ASM.get(name) if ftz else None)
    if inst is None:
        return None
    if ftz:                                     # max.ftz.NaN: .ftz follows the opcode
        head, dot, tail = inst.partition(".")
        inst = f"{head}.ftz{dot}{tail}" if head in ("max", "min") else f"{inst}.ftz"
    operands = ", ".join(f"${i + 1}" for i in range(len(args)))
    return llvm.inline_asm(ir.F32Type.get(), args, f"{inst}.f32 $0, {operands};",
                           "=f," + ",".join("f" for _ in args))


# cuTile's directed roundings (RZ, RM, RP: `tile.rounding` rz/rm/rp) of these ops
_DIRECTED_PTX = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul",
                 "arith.divf": "div", "math.sqrt": "sqrt"}


def _directed(name: str, elem: ir.Type, args: list[ir.Value], mode: str, ftz: bool):
    """`name` rounded toward zero (rz), -inf (rm) or +inf (rp), once.  f32 and f64 have
    the PTX instruction (`add.rz.f32`, `div.rm.f64`, `sqrt.rp.f32`).  float16 and
    bfloat16 operands are exact in f32: the op runs there with the same direction, and
    the f32 result is rounded to 16 bits in that direction again, which gives the
    single directed rounding (the 16-bit numbers are f32 numbers, and the largest one
    below a value is the largest one below its f32 rounding down; likewise up and
    toward zero)."""
    inst = f"{_DIRECTED_PTX[name]}.{mode}{'.ftz' if ftz else ''}"
    if isinstance(elem, (ir.F32Type, ir.F64Type)):
        t, c = ("f32", "f") if isinstance(elem, ir.F32Type) else ("f64", "d")
        operands = ", ".join(f"${i + 1}" for i in range(len(args)))
        return llvm.inline_asm(elem, args, f"{inst}.{t} $0, {operands};",
                               f"={c}," + ",".join(c for _ in args))
    f32 = ir.F32Type.get()
    wide = _directed(name, f32, [arith.extf(f32, a) for a in args], mode, False)
    return narrow_directed(wide, elem, mode)


def narrow_directed(x: ir.Value, elem: ir.Type, mode: str) -> ir.Value:
    """f32 `x` rounded once to float16 or bfloat16 toward zero (rz), -inf (rm) or +inf
    (rp): PTX `cvt.rz.f16.f32` and the like for f16, integer operations on the bits
    for bf16 (`_f32_to_bf16_directed`)."""
    if isinstance(elem, ir.F16Type):
        return llvm.inline_asm(elem, [x], f"cvt.{mode}.f16.f32 $0, $1;", "=h,f")
    return _f32_to_bf16_directed(x, mode)


def _f32_to_bf16_directed(x: ir.Value, mode: str) -> ir.Value:
    """f32 -> bfloat16 toward zero, -inf or +inf, in integer operations on the bits (PTX
    has `cvt.rz.bf16.f32` but no rm/rp): the top half, plus one unit of magnitude when
    the bits dropped are not zero and the direction is away from zero; a NaN stays a
    (quiet) NaN, an infinity infinite."""
    i32, i16 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(16)
    c = lambda v: arith.constant(i32, v)          # noqa: E731
    bits = arith.bitcast(i32, x)
    top = arith.shrui(bits, c(16))
    if mode != "rz":
        lost = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(bits, c(0xFFFF)), c(0))
        negative = arith.cmpi(arith.CmpIPredicate.slt, bits, c(0))
        away = negative if mode == "rm" else arith.xori(
            negative, arith.constant(ir.IntegerType.get_signless(1), 1))
        top = arith.addi(top, arith.extui(i32, arith.andi(lost, away)))
    nan = arith.cmpi(arith.CmpIPredicate.ugt, arith.andi(bits, c(0x7FFFFFFF)), c(0x7F800000))
    top = arith.select(nan, arith.ori(arith.shrui(bits, c(16)), c(0x40)), top)
    return arith.bitcast(ir.BF16Type.get(), arith.trunci(i16, top))


_CVT_MODE = {arith.RoundingMode.toward_zero: "rz", arith.RoundingMode.downward: "rm",
             arith.RoundingMode.upward: "rp"}


def _directed_truncf(elem: ir.Type, x: ir.Value, mode: str) -> ir.Value:
    """`x` (f32 or f64) rounded to float type `elem` toward zero, -inf or +inf, once: f64
    to f32 by `cvt.rz.f32.f64` and kin, then to 16 bits by `narrow_directed` (two
    roundings in one direction through f32 are one: the 16-bit numbers are f32
    numbers)."""
    if isinstance(x.type, ir.F64Type):
        x = llvm.inline_asm(ir.F32Type.get(), [x], f"cvt.{mode}.f32.f64 $0, $1;", "=f,d")
    return x if isinstance(elem, ir.F32Type) else narrow_directed(x, elem, mode)


def _paired_truncf(name: str, in_elems, elems, attrs: dict, regs: int) -> bool:
    """A round-to-nearest truncf of f32 registers to f16/bf16, an even number of them."""
    return name == "arith.truncf" and regs % 2 == 0 and isinstance(in_elems[0], ir.F32Type) \
        and str(elems[0]) in ("f16", "bf16") and not (set(attrs) - {"fastmath"})


def _feeds_a_product(op: ir.Operation) -> bool:
    """Whether the cast's only use makes it a tensor-core operand from registers (an
    attention's P): its registers are packed in the same pairs there.  (Elsewhere pairs
    can cost registers: a row kernel's 16-bit store packs in its own order, and the
    paired casts made LayerNorm's 80-register sm_90a kernel spill.)"""
    uses = list(op.results[0].uses)
    return len(uses) == 1 and uses[0].owner.name == "tile.convert_layout" and \
        "mma_operand" in str(uses[0].owner.results[0].type)


def _truncf_pairs(regs: list[ir.Value], elem: ir.Type) -> list[ir.Value]:
    """f32 registers rounded to 16 bits two at a time (`cvt.rn.bf16x2.f32`, one
    instruction a pair), the pairs a wgmma's A fragment packs."""
    v2f32, v2h = ir.VectorType.get([2], ir.F32Type.get()), ir.VectorType.get([2], elem)
    out = []
    for i in range(0, len(regs), 2):
        h = arith.truncf(v2h, vector.from_elements(v2f32, regs[i:i + 2]))
        out += [vector.extract(h, [], [j]) for j in (0, 1)]
    return out


def _scalar_op(name: str, elems: list[ir.Type], args: list[ir.Value], attrs: dict):
    attrs = dict(attrs)
    if name == "arith.truncf" and "roundingmode" in attrs:
        mode = arith.RoundingMode(ir.IntegerAttr(attrs["roundingmode"]).value)
        if mode in _CVT_MODE:               # cuTile's astype RZ, RM, RP
            return [_directed_truncf(elems[0], args[0], _CVT_MODE[mode])]
        if mode != arith.RoundingMode.to_nearest_even:
            raise TileIRError(f"no lowering for arith.truncf rounding {mode.name}",
                              ir.Location.current)
        del attrs["roundingmode"]
    rounding = attrs.pop("tile.rounding", None)
    ftz = attrs.pop("tile.ftz", None) is not None
    rounding = ir.StringAttr(rounding).value if rounding is not None else None
    if rounding in ("rz", "rm", "rp") and name in _DIRECTED_PTX:
        return [_directed(name, elems[0], args, rounding, ftz)]
    if isinstance(elems[0], ir.F32Type) and (rounding or ftz or name == "arith.divf"):
        special = _f32_option(name, args, rounding, ftz)
        if special is not None:
            return [special]
    if name in ("arith.fptosi", "arith.fptoui"):
        return [_float_to_int(name == "arith.fptosi", elems[0], args[0])]
    if name == "math.absi":        # the NVVM lowering knows i32 only (__nv_abs)
        return [_absi(args[0])]
    if name == "math.ipowi":       # no lowering to LLVM upstream
        return [_ipowi(args[0], args[1])]
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


def _float_to_int(signed: bool, t: ir.Type, x: ir.Value) -> ir.Value:
    """x truncated toward zero to the integer type `t`, saturating, NaN to 0: the
    interpreter's semantics and what PTX's cvt does, written out, since LLVM's
    fptosi/fptoui make out-of-range values poison.  The conversion itself only sees
    values in range."""
    import numpy as np
    bits = t.width
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    ft = x.type
    big = float(np.finfo(_NP_FLOAT[str(ft)]).max) if str(ft) in _NP_FLOAT else float("inf")
    fc = lambda v: arith.constant(ft, v)                                # noqa: E731
    ic = lambda v: arith.constant(t, v - (1 << bits) if v > (1 << (bits - 1)) - 1 else v)  # noqa
    inf = float("inf")
    # at or past the bound saturates (float(hi) is exact or rounds up to a power of two
    # no float below it reaches); a float type whose range ends first, only at infinity;
    # unsigned: (-1, 0] truncates to 0, so only -1 and below saturate low
    top = float(hi) if float(hi) <= big else inf
    bottom = -1.0 if not signed else float(lo) if -float(lo) <= big else -inf
    above = arith.cmpf(arith.CmpFPredicate.OGE, x, fc(top))
    below = arith.cmpf(arith.CmpFPredicate.OLE, x, fc(bottom))
    nan = arith.cmpf(arith.CmpFPredicate.UNO, x, x)
    bad = arith.ori(arith.ori(above, below), nan)
    inner = (arith.fptosi if signed else arith.fptoui)(t, arith.select(bad, fc(0.0), x))
    return arith.select(above, ic(hi), arith.select(below, ic(lo), arith.select(
        nan, ic(0), inner)))


_NP_FLOAT = {"f16": "float16", "f32": "float32", "f64": "float64"}


def _absi(a: ir.Value) -> ir.Value:
    """|a| of a signed integer, wrapping (abs(INT_MIN) is INT_MIN)."""
    zero = arith.constant(a.type, 0)
    return arith.select(arith.cmpi(arith.CmpIPredicate.slt, a, zero), arith.subi(zero, a), a)


def _ipowi(a: ir.Value, n: ir.Value) -> ir.Value:
    """a ** n of signed integers, wrapping, as the interpreter computes it: by squaring
    over the bits of n >= 0 (a loop of as many steps as n has bits); for n < 0, 1 / a
    ** |n| truncated: 1 for a == 1, +-1 for a == -1, 0 for |a| > 1, -1 for a == 0."""
    t = a.type
    c = lambda v: arith.constant(t, v)                  # noqa: E731
    negative = arith.cmpi(arith.CmpIPredicate.slt, n, c(0))
    loop = scf.WhileOp([t, t, t], [c(1), a, arith.select(negative, c(0), n)])
    before = loop.before.blocks.append(t, t, t)
    with ir.InsertionPoint(before):
        more = arith.cmpi(arith.CmpIPredicate.ne, before.arguments[2], c(0))
        scf.ConditionOp(more, list(before.arguments))
    after = loop.after.blocks.append(t, t, t)
    with ir.InsertionPoint(after):
        acc, base, e = after.arguments
        odd = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(e, c(1)), c(0))
        scf.YieldOp([arith.select(odd, arith.muli(acc, base), acc), arith.muli(base, base),
                     arith.shrui(e, c(1))])
    power = loop.results[0]
    eq = lambda v: arith.cmpi(arith.CmpIPredicate.eq, a, c(v))     # noqa: E731
    even = arith.cmpi(arith.CmpIPredicate.eq, arith.andi(n, c(1)), c(0))
    inverse = arith.select(eq(1), c(1), arith.select(
        eq(-1), arith.select(even, c(1), c(-1)), arith.select(eq(0), c(-1), c(0))))
    return arith.select(negative, inverse, power)


# fp8 on the GPU: registers hold the bits (i8); arithmetic runs in f32 between two
# conversions, the way bf16 arithmetic rounds once per op.
_FP8_PTX = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}


def fp8_to_f32(cx: LoweringContext, bits: ir.Value, fp8: ir.Type) -> ir.Value:
    """The f32 value of fp8 `bits` (an i8): `cvt` on sm_89 and later; on sm_80, which
    has no fp8 instructions, the bits placed in an f16 and rescaled (e5m2 is the top
    byte of an f16; e4m3's 4-bit exponent sits in the f16's low exponent bits, 2^8
    too small, subnormals included; 0x7F is its NaN)."""
    i16 = ir.IntegerType.get_signless(16)
    wide = arith.extui(i16, bits)
    if cx.chip.startswith("sm_90"):
        asm = ("{\n.reg .b32 t;\n.reg .f16 lo, hi;\n"
               f"cvt.rn.f16x2.{_FP8_PTX[str(fp8)]}x2 t, $1;\nmov.b32 {{lo, hi}}, t;\n"
               "cvt.f32.f16 $0, lo;\n}")
        return llvm.inline_asm(ir.F32Type.get(), [wide], asm, "=f,h")
    f16, f32 = ir.F16Type.get(), ir.F32Type.get()
    c = lambda v, t=i16: arith.ConstantOp(t, v).result  # noqa: E731
    if str(fp8) == "f8E5M2":
        return arith.extf(f32, arith.bitcast(f16, arith.shli(wide, c(8))))
    magnitude = arith.shli(arith.andi(wide, c(0x7F)), c(7))
    value = arith.mulf(arith.extf(f32, arith.bitcast(f16, magnitude)), c(256.0, f32))
    negative = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(wide, c(0x80)), c(0))
    value = arith.select(negative, arith.negf(value), value)
    nan = arith.cmpi(arith.CmpIPredicate.eq, arith.andi(wide, c(0x7F)), c(0x7F))
    return arith.select(nan, c(float("nan"), f32), value)


def f32_to_fp8(cx: LoweringContext, x: ir.Value, fp8: ir.Type) -> ir.Value:
    if not cx.chip.startswith("sm_90"):
        raise TileIRError(f"rounding to {fp8} needs sm_89 or later (cvt ... e4m3x2/e5m2x2); "
                          f"on {cx.chip} fp8 tiles can be loaded, multiplied and widened, "
                          f"but results must be f16, bf16 or f32", ir.Location.current)
    i16 = ir.IntegerType.get_signless(16)
    zero = arith.ConstantOp(ir.F32Type.get(), 0.0).result
    asm = f"cvt.rn.satfinite.{_FP8_PTX[str(fp8)]}x2.f32 $0, $1, $2;"
    packed = llvm.inline_asm(i16, [zero, x], asm, "=h,f,f")
    return arith.trunci(ir.IntegerType.get_signless(8), packed)


def _fp8_op(cx: LoweringContext, name: str, in_elems: list[ir.Type | None],
            elems: list[ir.Type], args: list[ir.Value], attrs: dict) -> list[ir.Value]:
    """One element of an op that reads or makes fp8: its fp8 operands widened to f32,
    the op in f32, fp8 results narrowed back (satfinite, round to nearest even)."""
    f32 = ir.F32Type.get()
    if name == "arith.bitcast":               # fp8 <-> i8: the register already is the bits
        return list(args)
    wide = [fp8_to_f32(cx, a, e) if e is not None and is_fp8(e) else a
            for a, e in zip(args, in_elems)]
    if name in ("arith.extf", "arith.truncf"):
        x, out = wide[0], elems[0]
        if is_fp8(out):            # the GPU rounds to fp8 from f32 only
            wide32 = x if isinstance(x.type, ir.F32Type) else _f32_rounded_to_odd(x) \
                if isinstance(x.type, ir.F64Type) else arith.extf(f32, x)
            return [f32_to_fp8(cx, wide32, out)]
        if out == f32:
            return [x]
        return [arith.truncf(out, x) if _bits(out) < 32 else arith.extf(out, x)]
    outs = _scalar_op(name, [f32 if is_fp8(e) else e for e in elems], wide, attrs)
    return [f32_to_fp8(cx, r, e) if is_fp8(e) else r for r, e in zip(outs, elems)]


def _f32_rounded_to_odd(x: ir.Value) -> ir.Value:
    """An f64 value as f32 rounded to odd: exact values as they are, others the odd
    one of their two f32 neighbours.  Rounding that to nearest fp8 rounds the f64
    value once, correctly (f32 has more than two bits beyond fp8's); rounding to
    nearest f32 first could land on an fp8 tie and round twice.  NaN and infinities
    keep their class; an f64 past f32's range becomes the largest f32, past fp8's."""
    f32, f64, i32 = ir.F32Type.get(), ir.F64Type.get(), ir.IntegerType.get_signless(32)
    c = lambda v: arith.constant(i32, v)                   # noqa: E731
    near = arith.truncf(f32, x)
    back = arith.extf(f64, near)
    inexact = arith.cmpf(arith.CmpFPredicate.ONE, back, x)
    bits = arith.bitcast(i32, near)
    even = arith.cmpi(arith.CmpIPredicate.eq, arith.andi(bits, c(1)), c(0))
    # the other neighbour lies toward x: one unit of magnitude down if |near| > |x|
    larger = arith.xori(arith.cmpf(arith.CmpFPredicate.OGT, back, x),
                        arith.cmpf(arith.CmpFPredicate.OLT, x, arith.constant(f64, 0.0)))
    odd = arith.select(arith.andi(inexact, even),
                       arith.addi(bits, arith.select(larger, c(-1), c(1))), bits)
    return arith.bitcast(f32, odd)


def _fp8_pattern(value: float, spelling: str) -> int:
    """The bits of `value` rounded to an fp8 type, as a signed i8."""
    import ml_dtypes
    import numpy as np
    t = {"f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2}[spelling]
    return int(np.array(value, np.float32).astype(t).view(np.int8))


def splat_constant(cx: LoweringContext, op: ir.Operation) -> None:
    t = op.results[0].type
    attr = ir.DenseElementsAttr(op.attributes["value"])
    if not attr.is_splat:
        return _table_constant(cx, op, attr)
    value = attr.get_splat_value()
    if is_fp8(t.element_type):           # the bits of the fp8 value, as i8
        bits = _fp8_pattern(ir.FloatAttr(value).value, str(t.element_type))
        scalar = arith.ConstantOp(reg_type(t.element_type), bits).result
        lin = lin_of(t)
        cx.values[op.results[0]] = Frag(lin, t.element_type, [scalar] * lin.num_regs)
        return
    scalar = arith.ConstantOp(t.element_type, value).result
    lin = lin_of(t)
    cx.values[op.results[0]] = Frag(lin, t.element_type, [scalar] * lin.num_regs)


def _table_constant(cx: LoweringContext, op: ir.Operation, attr) -> None:
    """A tile constant whose elements differ: its bits as a constant table in global
    memory (`LoweringContext.constant_table`), each thread loading the elements its
    registers hold (row-major index of their coordinates)."""
    import numpy as np
    from tileir.interpreter.constants import dense_value
    from tileir.interpreter.dtypes import elem_of
    t = op.results[0].type
    # the same elements on a plain tensor type (the interpreter's reader folds casts)
    plain = ir.RankedTensorType.get(list(t.shape), t.element_type)
    attr = ir.Attribute.parse(f"{str(attr).rsplit(' : ', 1)[0]} : {plain}")
    values = dense_value(ir.DenseElementsAttr(attr), elem_of(plain), tuple(t.shape))
    nbytes = max(1, _bits(t.element_type) // 8)
    bits = np.ascontiguousarray(values).view(f"<u{nbytes}").reshape(-1)
    table = cx.constant_table(bits.astype(f"<i{nbytes}"))
    word = ir.IntegerType.get_signless(8 * nbytes)
    lin = lin_of(t)
    tc = cx.thread_coords(lin)
    strides = [1] * len(t.shape)
    for d in reversed(range(len(t.shape) - 1)):
        strides[d] = strides[d + 1] * t.shape[d + 1]
    regs = []
    for r in range(lin.num_regs):
        flat = None
        for c, s, st in zip(tc, lin.reg_coord(r), strides):
            term = arith.muli(arith.addi(c, cx.const(s)) if s else c, cx.const(st))
            flat = term if flat is None else arith.addi(flat, term)
        ptr = llvm.GEPOp(table.type, table, [flat], ir.DenseI32ArrayAttr.get([-2147483648]),
                         ir.TypeAttr.get(word), None).result
        v = llvm.load(word, ptr, alignment=nbytes)
        if isinstance(t.element_type, ir.IntegerType) and t.element_type.width == 1:
            v = arith.cmpi(arith.CmpIPredicate.ne, v, cx.const(0, word))
        elif isinstance(t.element_type, ir.FloatType) and not is_fp8(t.element_type):
            v = arith.bitcast(t.element_type, v)
        regs.append(v)
    cx.values[op.results[0]] = Frag(lin, t.element_type, regs)


@rule("tensor.splat")
def _splat(cx, op):
    t = op.results[0].type
    lin = lin_of(t)
    cx.values[op.results[0]] = Frag(lin, t.element_type, [cx.get(op.operands[0])] * lin.num_regs)


@rule("tensor.extract")
def _extract(cx, op):
    src = cx.frag(op.operands[0])
    if len(src.shape) == 0:
        cx.values[op.results[0]] = src.regs[0]
        return
    # one element at run-time indices: the threads holding it write it to a shared
    # slot, and every thread reads it back (a scalar is the block's)
    index = [arith.index_cast(ir.IntegerType.get_signless(32), cx.get(v))
             for v in list(op.operands)[1:]]
    cx.values[op.results[0]] = broadcast_element(cx, src, index)


def broadcast_element(cx: LoweringContext, src: Frag, index: list[ir.Value]) -> ir.Value:
    """Element `index` (i32 per dim, block-uniform) of `src`, in every thread: its holders
    (replicas write the same value) store it to a shared slot between barriers."""
    is_i1 = isinstance(src.elem, ir.IntegerType) and src.elem.width == 1
    mem_t = ir.IntegerType.get_signless(8) if is_i1 else reg_type(src.elem)
    slot = cx.smem(1, mem_t)
    zero = arith.ConstantOp(ir.IndexType.get(), 0).result
    tc = cx.thread_coords(src.lin)
    cx.smem_barrier_before()             # earlier readers of the slot are done
    for r in range(src.lin.num_regs):
        here = None
        for d, (t, s) in enumerate(zip(tc, src.lin.reg_coord(r))):
            c = arith.addi(t, cx.const(s)) if s else t
            eq = arith.cmpi(arith.CmpIPredicate.eq, c, index[d])
            here = eq if here is None else arith.andi(here, eq)
        if_op = scf.IfOp(here, [], has_else=False)
        with ir.InsertionPoint(if_op.then_block):
            v = arith.extui(mem_t, src.regs[r]) if is_i1 else src.regs[r]
            memref.store(v, slot, [zero])
            scf.YieldOp([])
    cx.barrier()
    v = memref.load(slot, [zero])
    return arith.cmpi(arith.CmpIPredicate.ne, v, cx.const(0, mem_t)) if is_i1 else v


@rule("tensor.from_elements")
def _from_elements(cx, op):
    t = op.results[0].type
    if t.rank != 0:
        raise TileIRError("tensor.from_elements of more than one element is not lowered to the "
                          "GPU", op.location)
    lin = lin_of(t)
    cx.values[op.results[0]] = Frag(lin, t.element_type, [cx.get(op.operands[0])])
