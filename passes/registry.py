"""The pass registry and the stage list: the one place that says what runs when.

A pass is a module of this package exposing `FLAG`, `SUMMARY` and
`run(module) -> None` (raising `TileIRError` with located diagnostics).  A
stage is an ordered list of pass names; the names may also be upstream MLIR
passes (`canonicalize`, `convert-scf-to-cf`, `gpu.module(...)`), which
`pipeline.run_passes` hands to MLIR's PassManager.  Adding a stage is adding
one entry to `STAGES`, in pipeline order.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Callable

from mlir import ir

from . import (assign_layouts, canonicalize, cluster_pairs, cluster_rows, cse, dce,
               defer_online_reductions, emit_cubin, emit_ptx, group_blocks, guard_masks,
               hoist_loads, inline,
               launch_order, licm, lower_to_gpu, lower_to_llvm, persistent_tiles, pingpong,
               pipeline_loops, programmatic_launch, reassociate_reductions, retile_blocks,
               reverse_rereads, split_blocks, split_warpgroups, version_bounds)


@dataclasses.dataclass(frozen=True)
class PassInfo:
    name: str
    summary: str
    run: Callable[[ir.Module], None]


def _info(module: ModuleType) -> PassInfo:
    return PassInfo(module.FLAG, module.SUMMARY, module.run)


PASSES: dict[str, PassInfo] = {p.name: p for p in map(_info, (
    inline, canonicalize, licm, cse, dce, reverse_rereads, guard_masks, reassociate_reductions,
    hoist_loads,
    retile_blocks, cluster_rows, split_blocks, launch_order, defer_online_reductions,
    split_warpgroups, assign_layouts,
    cluster_pairs, persistent_tiles, group_blocks, pipeline_loops, pingpong, version_bounds,
    programmatic_launch, lower_to_gpu, lower_to_llvm, emit_ptx, emit_cubin))}

# The tile passes that take a kernel out of Tile IR (to the gpu dialect, to LLVM, to a
# gpu.binary): the IR after them is verified by MLIR's verifier, not the tile one.
LOWERINGS = frozenset({"tile-lower-to-gpu", "tile-lower-to-llvm", "tile-emit-ptx",
                       "tile-emit-cubin"})

STAGES: dict[str, tuple[str, ...]] = {
    # What @kernel produces: nothing to run.
    "frontend": (),
    "tile": (
        # Inline first, so every later pass sees whole kernels and folds cross
        # helper boundaries.
        "tile-inline",
        # Fold shape-op chains and constants before CSE: equal values reached
        # through different chains (reshape of reshape, permute of permute)
        # only look equal once folded.
        "tile-canonicalize",
        # A loop's mask goes behind a branch before hoisting: what only the mask
        # needs moves into the branch instead of out of the loop (registers).
        "tile-guard-masks",
        # Hoist before CSE: copies of one invariant hoisted out of sibling
        # loops meet in the enclosing block, where CSE merges them.
        "tile-licm",
        "tile-cse",
        # After CSE: a re-reading loop is recognized by the trip count it shares
        # with the earlier loop (one SSA value once CSE merged the two).
        "tile-reverse-rereads",
        # A large tile a loop accumulates and reduces only afterwards is reduced in
        # the loop (it would not fit registers): before layout picks its home.
        "tile-reassociate-reductions",
        # Folding and CSE leave unused ops behind: sweep them last.
        "tile-dce",
    ),
    # GPU stages.  The target (module attribute `tile.target`, default sm_90a)
    # picks the tensor-core instructions in `layout` (wgmma on sm_90a, mma.sync
    # on sm_80), the copy engine in `pipeline` and `gpu` (TMA + mbarriers on
    # sm_90a, cp.async commit groups on sm_80), and the NVVM target in `llvm`.
    # Retile (kernels with products), or on a small grid deal reducing loops to the
    # blocks of a cluster (sm_90a) or split element-wise tiles across more blocks,
    # first: they set the tile shapes layouts, warps and MMA plans are chosen for; on
    # a small grid, online softmax loops then carry their max and sum per lane.
    # Then, on any grid, the axis that walks contiguous memory is launched fastest.
    # A kernel that asks for a warpgroup split gets its plan (which ops one consumer
    # warpgroup owns) before layouts, which are to be chosen for it: after the
    # rewrites above, which change the loops it reads.
    "layout": ("tile-retile-blocks", "tile-cluster-rows", "tile-split-blocks",
               "tile-launch-order", "tile-defer-online-reductions", "tile-split-warpgroups",
               "tile-assign-layouts"),
    # After layouts: only then is it known which loads go to shared memory.
    # Cluster pairs before the tile loop is made: it walks pairs of tiles then.
    # Persistent first: the tile loop it makes is what grouped order and the
    # pipeliner (which runs a warp-specialized producer across its tiles) see.
    # Register loads go up to where their operands are ready first: a schedule for
    # the target, before the loops that follow are wrapped or rotated.  Last, a kernel
    # without loops gets a version for blocks whose tiles lie inside their arrays.
    # The consumer warpgroups' turns (a kernel that asks for them) go around the
    # product issue the pipeliner left in its rotated loops: after it.
    # Then an sm_90a kernel opens with a wait for the previous kernel in the stream
    # and lets the next one launch: launches overlap runs, the stream's order kept.
    "pipeline": ("tile-hoist-loads", "tile-cluster-pairs", "tile-persistent-tiles",
                 "tile-group-blocks", "tile-pipeline-loops", "tile-pingpong",
                 "tile-version-bounds", "tile-programmatic-launch"),
    "gpu": ("tile-lower-to-gpu",),
    "llvm": ("tile-lower-to-llvm",),
    "ptx": ("tile-emit-ptx",),
    "cubin": ("tile-emit-cubin",),
}
