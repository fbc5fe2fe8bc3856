// RUN: tile-opt %s -split-input-file -verify-diagnostics --target=sm_90a --tile-lower-to-llvm
// RUN: not tile-opt %s --target=sm_70 2>&1 | FileCheck %s --check-prefix=USAGE

// The target enters at the 'llvm' stage: --target may set it on any input
// before that stage, but a module already lowered for another chip cannot be
// retargeted, and a tile.target must name a supported chip.

// USAGE: tile-opt: error: argument --target: invalid choice: 'sm_70' (choose from {{'?}}sm_80{{'?}}, {{'?}}sm_90a{{'?}})

// expected-error @+1 {{--target=sm_90a: the input is at stage 'llvm', already lowered for sm_80; retarget an input from before stage 'llvm'}}
module attributes {gpu.container_module, tile.stage = "llvm", tile.target = "sm_80"} {
  gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">] {
  }
}

// -----

// expected-error @+1 {{module attribute tile.target = "sm_75" is not a target; targets: sm_80, sm_90a}}
module attributes {gpu.container_module, tile.stage = "gpu", tile.target = "sm_75"} {
  gpu.module @tileir_kernels {
  }
}

// -----

// An id's bound outside 1 .. 2^31 - 1 is refused at the op (convert-gpu-to-nvvm
// builds a 32-bit range from it and aborted the process on -1 and 2^32 - 1; found
// by test/fuzz/fuzz_mlir.py).

module attributes {gpu.container_module, tile.stage = "gpu"} {
  gpu.module @tileir_kernels {
    gpu.func @k() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      // expected-error @+1 {{'gpu.thread_id' has upper_bound -1; an id's bound is 1 to 2147483647}}
      %tid = gpu.thread_id x upper_bound -1
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module, tile.stage = "gpu"} {
  gpu.module @tileir_kernels {
    gpu.func @k() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      // expected-error @+1 {{'gpu.block_id' has upper_bound 4294967295; an id's bound is 1 to 2147483647}}
      %bid = gpu.block_id y upper_bound 4294967295
      gpu.return
    }
  }
}
