"""tile-canonicalize: fold tile ops, then run upstream canonicalize, then drop dead ops.

Flag:          --tile-canonicalize
Input/output:  Tile IR -> same dialects.
Precondition:  verified IR.  IRDL ops have no folders or canonicalization
               patterns, so ours are Python rewrite patterns:
                 broadcast/reshape to the source type       -> the source
                 broadcast of broadcast, reshape of reshape -> one op
                 permute by the identity                    -> the source
                 permute of permute                         -> one permute (or the source)
                 broadcast/reshape/permute of a splat       -> a splat of the result type
                 reduce over a size-1 axis                  -> reshape (argmax/argmin: zeros)
                 reduce max/min of a splat                  -> a splat (argmax/argmin: zeros)
                 select_array at a constant index in range  -> that array
                 select_array among one array               -> that array
               `tile.dim`/`tile.stride` are runtime values and stay.  Upstream
               `canonicalize` then folds arith/math/scf/tensor; it leaves tile
               ops alone (it neither erases nor merges ops without memory-effect
               information), so dead tile ops are swept with tile-dce's sweep.

Example:
  before:  %0 = "tile.reshape"(%t) : (tensor<4x4xf32>) -> tensor<16xf32>
           %1 = "tile.reshape"(%0) : (tensor<16xf32>) -> tensor<2x8xf32>
  after:   %1 = "tile.reshape"(%t) : (tensor<4x4xf32>) -> tensor<2x8xf32>
"""

from __future__ import annotations

from typing import Callable

from mlir import ir, rewrite
from mlir.dialects import arith, tensor
from mlir.passmanager import PassManager

from tileir.dialect import tile

from .dce import erase_dead_ops

FLAG = "tile-canonicalize"
SUMMARY = "fold tile shape ops and trivial reductions, run upstream canonicalize, drop dead ops"

# A folder looks at one op and returns the value that replaces its result, or
# None.  It may build new ops (at the op, under its location), but only once it
# has decided to fold.
Folder = Callable[[ir.OpView], ir.Value | None]
Splat = ir.Value | ir.Attribute  # a scalar SSA value, or a constant element


def run(module: ir.Module) -> None:
    from .pipeline import upstream_verifier      # (pipeline imports the passes)
    with module.context:
        _apply_folders(module)
        manager = PassManager.parse("builtin.module(canonicalize)")
        manager.enable_verifier(upstream_verifier())    # (as the pipeline verifies)
        manager.run(module.operation)
        # Upstream folds (constants into splats, say) can enable ours again.
        _apply_folders(module)
    erase_dead_ops(module.operation)


def _apply_folders(module: ir.Module) -> None:
    patterns = rewrite.RewritePatternSet()
    for op_name, folders in FOLDERS.items():
        for folder in folders:
            patterns.add(op_name, _as_pattern(folder))
    # A frozen set must be frozen exactly once (shared/STACK.md): build it per run.
    rewrite.apply_patterns_and_fold_greedily(module, patterns.freeze())


def _as_pattern(folder: Folder):
    def match_and_rewrite(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
        with ir.InsertionPoint(op), op.location:
            replacement = folder(op)
        if replacement is None:
            return True  # mlir.rewrite reads a truthy return as "did not match"
        rewriter.replace_op(op, [replacement])
        return False

    return match_and_rewrite


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
def _producer(value: ir.Value, name: str) -> ir.OpView | None:
    """The op defining `value` if it is called `name` (None for block arguments)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != name:
        return None
    return owner


def _splat_of(value: ir.Value) -> Splat | None:
    """The repeated element of a splat tile: a scalar value or a constant attribute."""
    if (splat := _producer(value, "tensor.splat")) is not None:
        return splat.operands[0]
    if (const := _producer(value, "arith.constant")) is not None:
        attr = const.attributes["value"]
        if isinstance(attr, ir.DenseElementsAttr) and attr.is_splat:
            return attr.get_splat_value()
    return None


def _make_splat(element: Splat, result_type: ir.Type) -> ir.Value:
    if isinstance(element, ir.Value):
        return tensor.SplatOp(result_type, element, []).result
    return arith.ConstantOp(result_type, ir.DenseElementsAttr.get_splat(result_type, element)
                            ).result


def _zeros(result_type: ir.Type) -> ir.Value:
    zero = ir.IntegerAttr.get(ir.RankedTensorType(result_type).element_type, 0)
    return _make_splat(zero, result_type)


def _is_identity(permutation: list[int]) -> bool:
    return permutation == list(range(len(permutation)))


# --------------------------------------------------------------------------
# Folders
# --------------------------------------------------------------------------
def fold_to_same_type(op: ir.OpView) -> ir.Value | None:
    """broadcast/reshape whose result type is the source type -> the source."""
    return op.source if op.source.type == op.result.type else None


def fold_broadcast_of_broadcast(op: ir.OpView) -> ir.Value | None:
    # Every dim the inner op stretched had size 1 in its source, so one
    # broadcast from that source reaches the outer shape directly.
    inner = _producer(op.source, "tile.broadcast")
    return None if inner is None else tile.BroadcastOp(inner.source, op.result.type).result


def fold_reshape_of_reshape(op: ir.OpView) -> ir.Value | None:
    inner = _producer(op.source, "tile.reshape")
    if inner is None:
        return None
    if inner.source.type == op.result.type:
        return inner.source
    return tile.ReshapeOp(inner.source, op.result.type).result


def fold_permute(op: ir.OpView) -> ir.Value | None:
    """Identity permutations vanish; two permutes compose into one."""
    permutation = op.permutation
    if _is_identity(permutation):
        return op.source
    inner = _producer(op.source, "tile.permute")
    if inner is None:
        return None
    # out[i] = mid[perm[i]] = src[inner_perm[perm[i]]]
    inner_permutation = inner.permutation
    composed = [inner_permutation[p] for p in permutation]
    if _is_identity(composed):
        return inner.source
    return tile.PermuteOp(inner.source, composed).result


def fold_shape_op_of_splat(op: ir.OpView) -> ir.Value | None:
    """broadcast/reshape/permute of a splat -> a splat of the result type."""
    element = _splat_of(op.source)
    return None if element is None else _make_splat(element, op.result.type)


def fold_reduce(op: ir.OpView) -> ir.Value | None:
    """Reductions with nothing to combine: a size-1 axis, or max/min/arg* of a splat
    (of any kind: a NaN splat is NaN, its index 0, whether NaN propagates or not).
    A flushing one (`tile.ftz`) stays: it flushes its one element."""
    is_arg = op.kind in tile.ARG_KINDS
    if tile.FTZ_ATTR in op.operation.attributes:
        return None
    if ir.RankedTensorType(op.source.type).shape[op.axis] == 1:
        # One element per output: it is the result, and its index is 0.
        return _zeros(op.result.type) if is_arg else \
            tile.ReshapeOp(op.source, op.result.type).result
    element = _splat_of(op.source)
    if element is None or op.kind in ("sum", "prod"):
        return None  # sums of splats would need rounding rules; leave them
    # All elements are equal: the first occurrence (index 0) wins.
    return _zeros(op.result.type) if is_arg else _make_splat(element, op.result.type)


def fold_select_array(op: ir.OpView) -> ir.Value | None:
    """A list's element picked at a known index (a constant 0-d tile, a helper's
    argument), or a choice among one array."""
    arrays = op.arrays
    if all(a == arrays[0] for a in arrays):
        return arrays[0]
    const = _producer(op.index, "arith.constant")
    if const is None:
        return None
    i = ir.IntegerAttr(const.attributes["value"]).value
    # (an index outside the list is undefined: left for the interpreter to report)
    return arrays[i] if 0 <= i < len(arrays) else None


FOLDERS: dict[str, tuple[Folder, ...]] = {
    "tile.broadcast": (fold_to_same_type, fold_broadcast_of_broadcast, fold_shape_op_of_splat),
    "tile.reshape": (fold_to_same_type, fold_reshape_of_reshape, fold_shape_op_of_splat),
    "tile.permute": (fold_permute, fold_shape_op_of_splat),
    "tile.reduce": (fold_reduce,),
    "tile.select_array": (fold_select_array,),
}
