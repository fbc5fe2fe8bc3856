"""tile-emit-ptx: NVPTX code generation (stage `ptx`).

Input: llvm-stage IR.  Output: the gpu.module replaced by a `gpu.binary`
holding the PTX text (`tileir.backend.target.emit_ptx` reads it back).

    gpu.module @tileir_kernels [#nvvm.target<...>] { llvm.func @k ... }
  becomes
    gpu.binary @tileir_kernels [#gpu.object<#nvvm.target<...>, assembly = "..."> ]
"""

from mlir import ir

from tileir.backend.target import emit_ptx

FLAG = "tile-emit-ptx"
SUMMARY = "generate PTX for the gpu.module (NVPTX backend)"


def run(module: ir.Module) -> None:
    emit_ptx(module)
