"""Per-op lowering rules of the `gpu` stage: layout-annotated Tile IR -> per-thread code.

One function per op, registered by name (`registry.rule`), grouped by op family:

| module        | ops |
|---------------|-----|
| `elementwise` | `arith.*`, `math.*` on tiles, constants, `tensor.splat/extract/from_elements` |
| `arrays`      | `tile.bid/num_blocks/dim/stride`, `tile.load/store` (global memory), `tile.iota` |
| `shape`       | `tile.broadcast/reshape/permute/convert_layout` (shared-memory exchanges) |
| `reduce`      | `tile.reduce` (registers, shuffles, shared memory across warps) |
| `slices`      | `tile.extract_slice/insert_slice/concat` (shared-memory exchanges) |
| `indexed`     | `tile.gather/scatter/atomic_rmw/atomic_cas` (per-element addresses, PTX `atom`) |
| `pointers`    | `tile.array_address/make_array/raw_memory` (addresses as i64, array records) |
| `cluster`     | `tile.cluster_gather` (distributed shared memory, cluster barriers) |
| `ordering`    | `tile.fence` (block barrier + `fence.acq_rel.<scope>`) |
| `stream_k`    | `tile.partial_store/partial_add` (a workspace slot, a release/acquire flag) |
| `debug`       | `tile.print` (vprintf), `tile.assert` (`trap`), `tile.grid_dependency` |
| `control`     | `scf.for`, `scf.if` (one scalar per register carried) |
| `mma`         | `tile.mma/mma_async/mma_wait` (wgmma on sm_90a, mma.sync) |

Importing this package registers every family.
"""

from . import (arrays, cluster, control, debug, elementwise, indexed, mma,  # noqa: F401
               ordering, pointers, reduce, ring, shape, slices, stream_k)
from .registry import RULES, lower_block, lower_op

__all__ = ["RULES", "lower_block", "lower_op"]
