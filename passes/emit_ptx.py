r"""tile-emit-ptx: NVPTX code generation (stage `ptx`).

Flag:          --tile-emit-ptx
Input/output:  llvm-stage IR -> the gpu.module replaced by `gpu.binary
               @tileir_kernels` holding one `#gpu.object` whose `assembly` is
               the PTX text (`tile-opt --emit=ptx` writes it out;
               tileir.backend.target.toolchain.emit_ptx returns it).
Precondition:  a gpu.module in the LLVM/NVVM dialects with its `#nvvm.target`
               (the `llvm` stage ran).  Upstream gpu-module-to-binary{format=isa}
               runs LLVM's NVPTX backend at the target's optimization level for
               PTX ISA 8.0 (`+ptx80`): one `.visible .entry` per kernel, named
               as in Python, with `.maxntid` from the block size.

Example:
  before:  gpu.module @tileir_kernels [#nvvm.target<..., chip = "sm_80", ...>] { llvm.func @k ...}
  after:   gpu.binary @tileir_kernels [#gpu.object<#nvvm.target<..., chip = "sm_80", ...>,
               properties = {...}, assembly = "...\0A.target sm_80\0A...\0A.visible .entry k(...">]
"""

from mlir import ir

from tileir.backend.target.toolchain import emit_ptx

FLAG = "tile-emit-ptx"
SUMMARY = "generate PTX for the gpu.module (NVPTX backend)"


def run(module: ir.Module) -> None:
    emit_ptx(module)
