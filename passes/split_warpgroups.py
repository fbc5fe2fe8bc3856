"""tile-split-warpgroups: plan which ops of a two-product loop one consumer warpgroup
owns (stage `layout`, before tile-assign-layouts).

Flag:          --tile-split-warpgroups
Input/output:  Tile IR -> the same ops, with `tile.owner`/`tile.handoff` marks on the
               owned ops and a `tile.warpgroup_split` plan on each qualifying scf.for.
Precondition:  only kernels with `tile.warpgroup_split = true` (the kernel option
               `warpgroup_split=True`) for an sm_90 target (`tile.target`, sm_90a when
               absent) and 8 warps; in them, loops of a score product chain whose
               result feeds the A operand of a second product accumulated across the
               loop, that product's output split by columns over the two warpgroups
               (tileir.backend.layout.warpgroup_split has the contract).  Anything
               else is left as it is.  tile-assign-layouts reads the marks: each
               owned product is planned for one warpgroup (the other holds
               replicas of its results).  With `tile.alternate_owners = true` a
               planned loop is replaced by a loop over pairs of steps (owners 0 and
               1) and a loop of the last step of an odd count (`unroll_pairs`).

Example:
  before:  scf.for ... { %s = "tile.mma"(%q, %kt, %z) ...; %p = arith.truncf %e
                         %o = "tile.mma"(%p, %v, %acc) }
  after:   scf.for ... { %s = "tile.mma"(%q, %kt, %z) {tile.owner = 0} ...
                         %p = arith.truncf %e {tile.handoff = array<i64: 0>, tile.owner = 0}
                         %o = "tile.mma"(%p, %v, %acc) } {tile.warpgroup_split = {...}}
"""

from mlir import ir

from tileir.backend.layout.warpgroup_split import split_warpgroups

from .lower_to_llvm import module_target

FLAG = "tile-split-warpgroups"
SUMMARY = "plan the scores and softmax of a two-product loop for one warpgroup of two"


def run(module: ir.Module) -> None:
    split_warpgroups(module, module_target(module).chip)
