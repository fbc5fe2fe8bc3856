"""tile-lower-to-gpu: tiles to per-thread code in a gpu.module (stage `gpu`).

Input: layout-stage IR with one `tile.kernel` function.
Output: `module attributes {gpu.container_module}` holding `gpu.module
@tileir_kernels` with one `gpu.func` kernel of arith/math/scf/llvm/gpu/memref
ops: 16-byte vector global accesses with masked edges, warp shuffles and
shared memory for reductions and layout conversions.  The launch metadata
(threads, shared bytes, ABI) is recorded as the module attribute
`tile.kernel_meta` (JSON).  The ABI is in docs/gpu-backend.md.

    func.func @k(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel, ...}
  becomes
    gpu.func @k(%ptr: !llvm.ptr<1>, %dim0: i32, %stride0: i64) kernel
"""

import json

from mlir import ir

from tileir.backend.lower import lower_to_gpu

FLAG = "tile-lower-to-gpu"
SUMMARY = "lower a layout-annotated kernel to per-thread code in a gpu.module"
META_ATTR = "tile.kernel_meta"


def run(module: ir.Module) -> None:
    meta = lower_to_gpu(module)
    module.operation.attributes[META_ATTR] = ir.StringAttr.get(json.dumps(meta.to_json()))
