"""tile-emit-cubin: assemble the PTX with ptxas (stage `cubin`).

Input: ptx-stage IR (a `gpu.binary` with PTX).  Output: the same `gpu.binary`
with its object replaced by the ELF cubin for the module's `tile.target`;
ptxas' resource report (registers, spills, shared memory) is kept as the
module attribute `tile.ptxas_report`.

    #gpu.object<#nvvm.target<chip = "sm_90a">, assembly = ".version 8.0 ...">
  becomes
    #gpu.object<#nvvm.target<chip = "sm_90a">, bin = "\7FELF...">
"""

from mlir import ir
from mlir.dialects import gpu

from tileir.backend.target import assemble, binary_object

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
