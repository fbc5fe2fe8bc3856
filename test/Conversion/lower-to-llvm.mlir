// RUN: tile-opt %s -split-input-file --tile-lower-to-llvm | FileCheck %s --check-prefixes=CHECK,DEFAULT --implicit-check-not=gpu.func --implicit-check-not=scf. --implicit-check-not=arith. --implicit-check-not=memref.
// RUN: tile-opt %s -split-input-file --target=sm_80 --tile-lower-to-llvm | FileCheck %s --check-prefixes=CHECK,SM80 --implicit-check-not=gpu.func --implicit-check-not=scf. --implicit-check-not=arith. --implicit-check-not=memref.
// RUN: tile-opt %s -split-input-file --target=sm_90a --tile-lower-to-llvm | FileCheck %s --check-prefixes=CHECK,SM90A --implicit-check-not=gpu.func --implicit-check-not=scf. --implicit-check-not=arith. --implicit-check-not=memref.

// The gpu.module gets the NVVM target of the module's tile.target (sm_90a
// when it has none; --target sets it) and its kernel becomes an llvm.func with
// nvvm.kernel: thread and block ids read PTX special registers, shuffles are
// shfl.sync, barriers bar.sync, dynamic shared memory a global in address
// space 3, scf control flow branches; no gpu.func, scf, arith or memref op is
// left (the implicit CHECK-NOTs).

// DEFAULT:     module attributes {gpu.container_module, tile.stage = "gpu"}
// DEFAULT:     gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// SM80:        module attributes {gpu.container_module, tile.stage = "gpu", tile.target = "sm_80"}
// SM80:        gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">]
// SM90A:       module attributes {gpu.container_module, tile.stage = "gpu", tile.target = "sm_90a"}
// SM90A:       gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// CHECK-NEXT:    llvm.mlir.global internal @[[SMEM:__dynamic_shmem__[0-9]*]]() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK-LABEL:   llvm.func @k
// CHECK-SAME:      (%[[X:[^:]*]]: !llvm.ptr<1> {llvm.align = 16 : i64}, %[[N:[^:]*]]: i32, %{{[^:]*}}: i64)
// CHECK-SAME:      attributes {gpu.kernel, gpu.known_block_size = array<i32: 64, 1, 1>, nvvm.kernel, nvvm.maxntid = array<i32: 64, 1, 1>, nvvm.minctasm = 2 : i32}
// CHECK:           %[[BASE:.*]] = llvm.mlir.addressof @[[SMEM]] : !llvm.ptr<3>
// CHECK:           nvvm.read.ptx.sreg.tid.x range <i32, 0, 64> : i32
// CHECK:           nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK:           %[[P:.*]] = llvm.getelementptr %[[X]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK-NEXT:      llvm.load %[[P]] {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK:           %[[R:.*]] = nvvm.shfl.sync bfly %{{.*}} : f32 -> f32
// CHECK:           %[[SLOT:.*]] = llvm.getelementptr {{.*}}%[[BASE]][%{{.*}}] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, f32
// CHECK-NEXT:      llvm.store %[[R]], %[[SLOT]] : f32, !llvm.ptr<3>
// CHECK-NEXT:      nvvm.barrier0
// CHECK-NEXT:      llvm.load %[[BASE]] : !llvm.ptr<3> -> f32
// CHECK:           llvm.cond_br %{{.*}}, ^[[THEN:.*]], ^[[END:.*]]
// CHECK:         ^[[THEN]]:
// CHECK:           llvm.store %{{.*}}, %[[P]] {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK:         ^[[END]]:
// CHECK-NEXT:      llvm.return
module attributes {gpu.container_module, tile.stage = "gpu"} {
  gpu.module @tileir_kernels {
    gpu.func @k(%x: !llvm.ptr<1> {llvm.align = 16 : i64}, %n: i32, %s: i64) kernel attributes {known_block_size = array<i32: 64, 1, 1>, nvvm.minctasm = 2 : i32} {
      %smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %tid = gpu.thread_id x upper_bound 64
      %bid = gpu.block_id x
      %b = arith.index_castui %bid : index to i32
      %b64 = arith.extsi %b : i32 to i64
      %p = llvm.getelementptr %x[%b64] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
      %v = llvm.load %p {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
      %e = vector.extract %v[0] : bf16 from vector<8xbf16>
      %f = arith.extf %e : bf16 to f32
      %r, %valid = gpu.shuffle xor %f, %c1, %c32 : f32
      %buf = memref.view %smem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
      memref.store %r, %buf[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %l = memref.load %buf[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
      %in = arith.cmpi ult, %b, %n : i32
      scf.if %in {
        %h = arith.truncf %l : f32 to bf16
        llvm.store %h, %p {alignment = 2 : i64} : bf16, !llvm.ptr<1>
      }
      gpu.return
    }
  }
}

// -----

// The module's own tile.target is used when --target does not override it.

// DEFAULT:     module attributes {gpu.container_module, tile.stage = "gpu", tile.target = "sm_80"}
// DEFAULT:     gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">]
// SM80:        module attributes {gpu.container_module, tile.stage = "gpu", tile.target = "sm_80"}
// SM80:        gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">]
// SM90A:       module attributes {gpu.container_module, tile.stage = "gpu", tile.target = "sm_90a"}
// SM90A:       gpu.module @tileir_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// CHECK-LABEL:   llvm.func @empty()
// CHECK-SAME:      attributes {gpu.kernel, gpu.known_block_size = array<i32: 32, 1, 1>, nvvm.kernel, nvvm.maxntid = array<i32: 32, 1, 1>}
// CHECK-NEXT:      llvm.return
module attributes {gpu.container_module, tile.stage = "gpu", tile.target = "sm_80"} {
  gpu.module @tileir_kernels {
    gpu.func @empty() kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      gpu.return
    }
  }
}
