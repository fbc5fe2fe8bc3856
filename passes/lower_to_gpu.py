"""tile-lower-to-gpu: tiles to per-thread code in a gpu.module (stage `gpu`).

Flag:          --tile-lower-to-gpu
Input/output:  layout-stage Tile IR -> `module attributes {gpu.container_module}`
               holding `gpu.module @tileir_kernels` with one `gpu.func` kernel of
               arith, math, scf, vector, memref, llvm and gpu ops; the
               `tile.kernel` function is erased.  The launch metadata (name,
               num_threads, shared_bytes, params) is the module attribute
               `tile.kernel_meta`, as JSON.
Precondition:  exactly one `tile.kernel` function, with `tile.num_warps` and a
               layout on every tile (the `layout` stage ran).  The ABI is
               docs/gpu-backend.md's: an array argument becomes a `!llvm.ptr<1>`
               (`llvm.align = 16` when it has `tile.aligned`), its dims as i32
               and strides as i64; a scalar stays itself.  `known_block_size`
               is 32 x num_warps; `tile.occupancy` becomes `nvvm.minctasm`.
               16-byte loads from arrays marked `tile.large` carry an L2
               evict_last policy (`createpolicy` once at the entry, then
               `ld.global.L2::cache_hint`); a `tile.cache_hints` bool on the
               kernel puts it on every 16-byte load (true) or none (false).
               Each op lowers by its rule in
               tileir.backend.gpu.rules (one module per op family), under its
               location: loads and stores of
               aligned arrays as 16-byte vectors, of others as scalars, with
               one bounds branch per tile and masked accesses at the edge;
               reductions as xor shuffles, then shared memory across warps;
               conversions through one dynamic shared-memory buffer; scf.for
               and scf.if carry one scalar per register.  An op without a rule
               is a located error.

Example:
  before:  func.func @k(%a: !tile.array<bf16, 1 : i64> {tile.aligned})
               attributes {tile.kernel, tile.num_warps = 1 : i32}
  after:   gpu.func @k(%arg0: !llvm.ptr<1> {llvm.align = 16 : i64}, %arg1: i32, %arg2: i64)
               kernel attributes {known_block_size = array<i32: 32, 1, 1>}
           (a 256 x bf16 tile load in it: one `llvm.load` of a vector<8xbf16> per thread)
"""

import json

from mlir import ir

from tileir.backend.gpu.lower import lower_to_gpu

FLAG = "tile-lower-to-gpu"
SUMMARY = "lower a layout-annotated kernel to per-thread code in a gpu.module"
META_ATTR = "tile.kernel_meta"


def run(module: ir.Module) -> None:
    meta = lower_to_gpu(module)
    module.operation.attributes[META_ATTR] = ir.StringAttr.get(json.dumps(meta.to_json()))
