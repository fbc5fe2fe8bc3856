// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-emit-ptx

// What the translation to LLVM IR and NVPTX would abort the process on (found by
// test/fuzz/fuzz_mlir.py) is refused at the op before it runs.

module attributes {gpu.container_module, tile.stage = "llvm", tile.target = "sm_90a"} {
  gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">] {
    llvm.func @gep(%src: !llvm.ptr<1>) attributes {gpu.kernel, nvvm.kernel, nvvm.maxntid = array<i32: 32, 1, 1>} {
      %i = llvm.mlir.constant(1 : i64) : i64
      // expected-error @+1 {{'llvm.getelementptr' has type tensor<12xf32>, which has no LLVM equivalent}}
      %p = llvm.getelementptr %src[%i] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, tensor<12xf32>
      llvm.return
    }
  }
}

// -----

module attributes {gpu.container_module, tile.stage = "llvm", tile.target = "sm_90a"} {
  gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">] {
    llvm.func @align(%src: !llvm.ptr<1>) attributes {gpu.kernel, nvvm.kernel, nvvm.maxntid = array<i32: 32, 1, 1>} {
      %v = llvm.load %src {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
      // expected-error @+1 {{'llvm.store' has alignment 24, not a power of two}}
      llvm.store %v, %src {alignment = 24 : i64} : vector<4xf32>, !llvm.ptr<1>
      llvm.return
    }
  }
}

// -----

module attributes {gpu.container_module, tile.stage = "llvm", tile.target = "sm_90a"} {
  gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">] {
    // expected-error @+1 {{'llvm.func' has nvvm.maxntid [2048, 1, 1]: a block has 1 to 1024 threads}}
    llvm.func @threads() attributes {gpu.kernel, nvvm.kernel, nvvm.maxntid = array<i32: 2048, 1, 1>} {
      llvm.return
    }
  }
}
