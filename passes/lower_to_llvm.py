"""tile-lower-to-llvm: the gpu.module to the NVVM/LLVM dialects (stage `llvm`).

Input: gpu-stage IR.  Output: the gpu.module with an `#nvvm.target` for the
module's `tile.target` (default sm_90a) and its contents in the LLVM/NVVM
dialects, via upstream conversions (tileir.backend.target.LLVM_PIPELINE).

    gpu.func @k(...) kernel { %x = arith.addf ... }
  becomes
    llvm.func @k(...) attributes {nvvm.kernel} { %x = llvm.fadd ... }
"""

from mlir import ir

from tileir.backend.target import Target, lower_to_llvm

FLAG = "tile-lower-to-llvm"
SUMMARY = "convert the gpu.module to NVVM/LLVM for the module's tile.target"
TARGET_ATTR = "tile.target"


def module_target(module: ir.Module) -> Target:
    attrs = module.operation.attributes
    chip = ir.StringAttr(attrs[TARGET_ATTR]).value if TARGET_ATTR in attrs else "sm_90a"
    return Target(chip)


def run(module: ir.Module) -> None:
    lower_to_llvm(module, module_target(module))
