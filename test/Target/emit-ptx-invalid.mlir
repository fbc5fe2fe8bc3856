// RUN: tile-opt %s -split-input-file -verify-diagnostics --emit=ptx --pass-pipeline='builtin.module()'
// RUN: not tile-opt %s -split-input-file --emit=ptx 2>&1 | FileCheck %s

// --emit=ptx writes the PTX a module holds after the 'ptx' stage; any other
// module is refused, at the module, saying how to get there.  (The empty
// pipeline runs nothing, so the module stays at its stage.)

// expected-error @+1 {{--emit=ptx: the module is at stage 'gpu' and holds no PTX text yet; compile it up to that stage with --stop-after=ptx}}
module attributes {gpu.container_module, tile.stage = "gpu"} {
  gpu.module @tileir_kernels {
    gpu.func @k() kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      gpu.return
    }
  }
}

// -----

// Past the 'ptx' stage, ptxas has replaced the PTX with a cubin.  Alone,
// --emit=ptx drives the stages up to 'ptx', which this input is already past.

// CHECK: emit-ptx-invalid.mlir:[[@LINE+2]]:1: error: the input is already at stage 'cubin', past 'ptx'
// expected-error @+1 {{--emit=ptx: the module is at stage 'cubin', past 'ptx', and holds no PTX text; stop there with --stop-after=ptx}}
module attributes {gpu.container_module, tile.stage = "cubin", tile.target = "sm_80"} {
  gpu.binary @tileir_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, bin = "\7FELF">]
}
