"""tile-lower-to-llvm: the gpu.module to the NVVM and LLVM dialects (stage `llvm`).

Flag:          --tile-lower-to-llvm
Input/output:  gpu-stage IR -> the gpu.module with the target attribute
               `#nvvm.target<O = 3, chip = ..., features = "+ptx80">` and its
               contents in the LLVM and NVVM dialects: the kernel is an
               `llvm.func` with `nvvm.kernel` and `nvvm.maxntid` from its
               `known_block_size`.
Precondition:  verified IR with a `gpu.module` (the `gpu` stage ran).  The chip
               is the module attribute `tile.target`, one of
               tileir.backend.target.toolchain.TARGETS (`sm_80`, `sm_90a`); sm_90a when
               absent (`tile-opt --target` sets it).  An id op's `upper_bound`
               outside 1 .. 2^31 - 1 is a located error (the conversion aborts
               the process on some).  The work is upstream
               conversions (tileir.backend.target.toolchain.LLVM_PIPELINE):
               convert-nvgpu-to-nvvm; in the gpu.module convert-vector-to-scf,
               convert-scf-to-cf, convert-nvvm-to-llvm, expand-strided-metadata,
               lower-affine, convert-gpu-to-nvvm{index-bitwidth=64},
               canonicalize, cse; then reconcile-unrealized-casts.  Thread and
               block ids read PTX special registers, gpu.shuffle becomes
               nvvm.shfl.sync, gpu.barrier nvvm.barrier0, dynamic shared memory
               a global in address space 3, scf control flow branches.

Example:
  before:  gpu.module @tileir_kernels {
             gpu.func @k(...) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {...}
  after:   gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">] {
             llvm.func @k(...) attributes {..., nvvm.kernel, nvvm.maxntid = array<i32: 64, 1, 1>}
"""

from mlir import ir

from tileir.dialect import TileIRError
from tileir.dialect.verifier import module_chip
from tileir.backend.target.toolchain import Target, lower_to_llvm

FLAG = "tile-lower-to-llvm"
SUMMARY = "convert the gpu.module to NVVM/LLVM for the module's tile.target"


def module_target(module: ir.Module) -> Target:
    chip = module_chip(module)
    try:
        return Target(chip)
    except ValueError as e:
        raise TileIRError(str(e), module.operation.location) from None


def run(module: ir.Module) -> None:
    lower_to_llvm(module, module_target(module), tensor_map_slots(module))


def tensor_map_slots(module: ir.Module) -> list[int]:
    """The ABI slots of the kernel's CUtensorMap parameters (from the gpu stage's
    launch metadata)."""
    import json
    attrs = module.operation.attributes
    if "tile.kernel_meta" not in attrs:
        return []
    meta = json.loads(ir.StringAttr(attrs["tile.kernel_meta"]).value)
    return [tm["slot"] for tm in meta.get("tensor_maps", [])]
