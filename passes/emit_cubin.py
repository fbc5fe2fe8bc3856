r"""tile-emit-cubin: assemble the PTX with ptxas (stage `cubin`).

Flag:          --tile-emit-cubin
Input/output:  ptx-stage IR -> the same `gpu.binary` with its object replaced by
               the ELF cubin (`bin = "..."`; `tile-opt --emit=cubin` writes the
               bytes), and ptxas' resource report (registers, spills, shared
               memory) as the module attribute `tile.ptxas_report`.
Precondition:  a `gpu.binary` holding PTX (the `ptx` stage ran) for the module's
               `tile.target` (sm_90a when absent).  Runs `ptxas -arch=<chip>
               -O3 -v` (tileir.backend.target.toolchain.assemble), ptxas found through
               the TILEIR_PTXAS knob, the pip wheel, PATH, CUDA_HOME or
               /usr/local/cuda; a ptxas failure is an error with its stderr and
               a command that reproduces it.

Example:
  before:  gpu.binary @tileir_kernels [#gpu.object<#nvvm.target<...>, assembly = "...">]
  after:   gpu.binary @tileir_kernels [#gpu.object<#nvvm.target<...>, bin = "\7FELF...">]
           and tile.ptxas_report = "ptxas info : ... 0 bytes spill stores, 0 bytes spill loads ..."
"""

from mlir import ir
from mlir.dialects import gpu

from tileir.backend.target.toolchain import assemble, binary_object

from .lower_to_llvm import module_target

FLAG = "tile-emit-cubin"
SUMMARY = "assemble the PTX into a cubin with ptxas"


def run(module: ir.Module) -> None:
    target = module_target(module)
    op, obj = binary_object(module)
    cubin, report = assemble(obj.object.decode(), target)
    with module.context:
        new = gpu.ObjectAttr.get(obj.target, gpu.CompilationTarget.Binary, cubin)
        op.attributes["objects"] = ir.ArrayAttr.get([new])
        module.operation.attributes["tile.ptxas_report"] = ir.StringAttr.get(report.strip())
