"""tile-guard-masks: a mask that keeps every element in most iterations of a loop is
computed and applied only in the iterations where it may not.

Flag:          --tile-guard-masks
Input/output:  Tile IR -> the same dialects (an `scf.if` around the masking).
Precondition:  verified IR.  In the body of an `scf.for`, an `arith.select %m, %x, %y`
               of tiles whose mask %m is built from
               - comparisons (`arith.cmpi slt/sle/sgt/sge`) of integer tiles of the
                 form scalar + offset, each offset in a range known at compile
                 time: `tile.iota` (0 .. n-1), splats and splat constants, sums
                 and differences of those, and their reshapes, broadcasts and
                 permutes;
               - `arith.andi` of such masks, and their reshapes and broadcasts.
               Such a mask keeps every element when a scalar condition holds
               (for `a < b`: the largest element of a is below the smallest of
               b); the select becomes
                   scf.if %all { yield %x } else { <the mask's ops>; select }
               with the ops only the mask needs moved into the else branch.

Why: attention as the tutorials write it masks its scores in every iteration,
`where((cols < n_kv) & (rows >= cols), s, -inf)`, a compare and a select per
element, while only the last tile (a length that is not a multiple of the tile)
and, causal, the tiles on the diagonal hold masked elements.  FlashAttention
masks only there; guarded, so does this kernel: the other iterations branch past
the mask (a uniform branch: the condition is the same for every thread).

Example:
  before:  %c = arith.addi %splat_jBN, %iota : tensor<1x64xi32>
           %m = arith.cmpi slt, %c, %splat_n : tensor<1x64xi32>
           %s2 = arith.select %mb, %s, %neg_inf : tensor<64x64xi1>, tensor<64x64xf32>
  after:   %d = arith.subi %jBN, %n : i32 ; %all = arith.cmpi slt, %d, %c-63 : i32
           %s2 = scf.if %all -> (tensor<64x64xf32>) { scf.yield %s }
                 else { %c = ... ; %m = ... ; %t = arith.select ... ; scf.yield %t }
"""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, scf

from .effects import blocks_under, ops_of
from .iterations import constant_int

FLAG = "tile-guard-masks"
SUMMARY = "compute and apply a loop's mask only in the iterations where it may drop elements"

SHAPE_OPS = ("tile.reshape", "tile.broadcast", "tile.permute")
CMP_SLT, CMP_SLE, CMP_SGT, CMP_SGE = 2, 3, 4, 5          # arith.cmpi's predicate numbers


@dataclasses.dataclass(frozen=True)
class _Range:
    """Elements of an integer tile: sum(sign * scalar) + an offset in [lo, hi]."""

    terms: tuple[tuple[ir.Value, int], ...]
    lo: int
    hi: int


def run(module: ir.Module) -> None:
    for block in blocks_under(module.operation):
        parent = block.owner
        if parent is None or parent.name != "scf.for":
            continue
        for op in ops_of(block):
            if op.name == "arith.select" and isinstance(op.operands[0].type,
                                                         ir.RankedTensorType):
                _guard(op, block)


def _guard(select: ir.Operation, block: ir.Block) -> None:
    emitted: list = []           # (what to build, ...) for the condition, built below
    cond = _all_true(select.operands[0], emitted)
    if cond is None or cond is True:
        return
    with ir.InsertionPoint(select), select.location:
        flag = _build(cond)
        branch = scf.IfOp(flag, [select.results[0].type], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([select.operands[1]])
        with ir.InsertionPoint(branch.else_block):
            done = scf.YieldOp([select.results[0]])
    select.results[0].replace_all_uses_except(branch.results[0], done.operation)
    for op in _only_for(select, block):
        op.move_before(done.operation)


def _only_for(select: ir.Operation, block: ir.Block) -> list[ir.Operation]:
    """The select and the ops of `block` computing its mask that nothing else uses, in
    block order."""
    mine = {select}
    order = [op.operation for op in block.operations]
    changed = True
    while changed:
        changed = False
        for op in order:
            if op in mine or op.name in ("scf.if", "scf.yield") or len(op.regions):
                continue
            results = list(op.results)
            if results and all(_user(u) in mine for r in results for u in r.uses) and \
                    _feeds(op, mine):
                mine.add(op)
                changed = True
    return [op for op in order if op in mine]


def _user(use) -> ir.Operation:
    owner = use.owner
    return owner.operation if isinstance(owner, ir.OpView) else owner


def _feeds(op: ir.Operation, mine: set) -> bool:
    return any(_user(u) in mine for r in op.results for u in r.uses)


# ---------------------------------------------------------------------------
# When a mask keeps everything
# ---------------------------------------------------------------------------
def _all_true(mask: ir.Value, out: list):
    """A description of the scalar condition under which every element of `mask` is
    true (True: always; None: unknown)."""
    op = _def(mask)
    if op is None:
        return None
    if op.name in SHAPE_OPS:
        return _all_true(op.operands[0], out)
    if op.name == "arith.andi":
        a, b = _all_true(op.operands[0], out), _all_true(op.operands[1], out)
        if a is None or b is None:
            return None
        return b if a is True else a if b is True else ("and", a, b)
    if op.name == "arith.constant":
        attr = ir.DenseElementsAttr(op.attributes["value"])
        if attr.is_splat and ir.BoolAttr(attr.get_splat_value()).value:
            return True
        return None
    if op.name == "arith.cmpi":
        ra, rb = _range(op.operands[0]), _range(op.operands[1])
        if ra is None or rb is None:
            return None
        # every a < b  <=>  max(a) < min(b)  <=>  base_a - base_b < lo_b - hi_a, and so on
        terms = _merge(ra.terms + tuple((v, -s) for v, s in rb.terms))
        bound = {CMP_SLT: ("slt", rb.lo - ra.hi), CMP_SLE: ("sle", rb.lo - ra.hi),
                 CMP_SGT: ("sgt", rb.hi - ra.lo), CMP_SGE: ("sge", rb.hi - ra.lo)}.get(
                     ir.IntegerAttr(op.attributes["predicate"]).value)
        if bound is None:
            return None
        if not terms:                   # the same for every iteration
            value = {"slt": 0 < bound[1], "sle": 0 <= bound[1], "sgt": 0 > bound[1],
                     "sge": 0 >= bound[1]}[bound[0]]
            return True if value else None
        return ("cmp", bound[0], terms, bound[1])
    return None


def _range(v: ir.Value) -> _Range | None:
    op = _def(v)
    if op is None:
        return None
    if op.name in SHAPE_OPS:
        return _range(op.operands[0])
    if op.name == "tile.iota":
        n = ir.RankedTensorType(op.results[0].type).shape[0]
        return _Range((), 0, n - 1)
    if op.name == "tensor.splat":
        scalar = op.operands[0]
        c = constant_int(scalar)
        return _Range((), c, c) if c is not None else _Range(((scalar, 1),), 0, 0)
    if op.name == "arith.constant":
        attr = op.attributes["value"]
        if isinstance(attr, ir.DenseElementsAttr) and ir.DenseElementsAttr(attr).is_splat:
            c = ir.IntegerAttr(ir.DenseElementsAttr(attr).get_splat_value()).value
            return _Range((), c, c)
        return None
    if op.name in ("arith.addi", "arith.subi"):
        a, b = _range(op.operands[0]), _range(op.operands[1])
        if a is None or b is None:
            return None
        if op.name == "arith.addi":
            return _Range(a.terms + b.terms, a.lo + b.lo, a.hi + b.hi)
        return _Range(a.terms + tuple((x, -s) for x, s in b.terms), a.lo - b.hi, a.hi - b.lo)
    return None


def _merge(terms) -> tuple:
    out: dict = {}
    for v, s in terms:
        out[v] = out.get(v, 0) + s
    return tuple((v, s) for v, s in out.items() if s)


def _def(v: ir.Value) -> ir.Operation | None:
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if isinstance(owner, ir.OpView) else owner


# ---------------------------------------------------------------------------
# Building the condition
# ---------------------------------------------------------------------------
def _build(cond) -> ir.Value:
    if cond[0] == "and":
        return arith.andi(_build(cond[1]), _build(cond[2]))
    _, pred, terms, bound = cond
    t = terms[0][0].type
    total = None
    for v, s in terms:
        for _ in range(abs(s)):
            if total is None:
                total = v if s > 0 else arith.subi(arith.constant(t, 0), v)
            else:
                total = arith.addi(total, v) if s > 0 else arith.subi(total, v)
    pred = getattr(arith.CmpIPredicate, pred)
    return arith.cmpi(pred, total, arith.constant(t, bound))
