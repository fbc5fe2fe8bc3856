// RUN: tile-opt %s --tile-lower-to-gpu | FileCheck %s

// The sm_80 tensor-core rules on a pipelined GEMM (the plain source, 64 x 64 x 32
// bf16 tiles): a cp.async ring, ldmatrix one k step at a time, mma.sync.

// No tensor maps on sm_80.
// CHECK-NOT:   tensor_maps
// CHECK-LABEL: gpu.func @gemm(
// The prologue: every thread copies its 16-byte chunks (zero-filled past the
// edge), one commit group per iteration.
// CHECK:         nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg, %{{.*}}
// CHECK:         nvvm.cp.async.commit.group
// In the loop: wait until 2 groups (S - 2) are pending, a block barrier, then
// ldmatrix (plain for A, transposed for the row-major B) and mma.sync.
// CHECK:         scf.for
// CHECK:           nvvm.cp.async.wait.group 2
// CHECK-NEXT:      gpu.barrier
// CHECK:           nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4
// CHECK:           nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 4
// CHECK:           nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK-NOT:       nvvm.wgmma
// After the loop the ring drains.
// CHECK:         nvvm.cp.async.wait.group 0

#s0 = #tile.shared<128 : i64, array<i64: 1, 0>>
#s1 = #tile.shared<64 : i64, array<i64: 1, 0>>
#acc0 = #tile.mma_acc<2 : i64, array<i64: 1, 2>, array<i64: 16, 8>>
#st0 = #tile.blocked<array<i64: 1, 8>, array<i64: 4, 8>, array<i64: 2, 1>, array<i64: 1, 0>>
module attributes {tile.target = "sm_80"} {
  func.func @gemm(%arg0: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg1: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg2: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.arg_names = ["a", "b", "c"], tile.kernel, tile.num_warps = 2 : i32} {
    %true = arith.constant true
    %c3_i32 = arith.constant 3 : i32
    %c4_i32 = arith.constant 4 : i32
    %c2_i32 = arith.constant 2 : i32
    %c1_i32 = arith.constant 1 : i32
    %c0_i32 = arith.constant 0 : i32
    %c1_i32_0 = arith.constant 1 : i32
    %c0_i32_1 = arith.constant 0 : i32
    %c32_i32 = arith.constant 32 : i32
    %c31_i32 = arith.constant 31 : i32
    %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #acc0>
    %0 = "tile.bid"() {axis = 0 : i64} : () -> i32
    %1 = "tile.bid"() {axis = 1 : i64} : () -> i32
    %2 = "tile.dim"(%arg0) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
    %3 = arith.addi %2, %c31_i32 : i32
    %4 = arith.floordivsi %3, %c32_i32 : i32
    %5 = "tile.ring_alloc"() {stages = 4 : i64, tiles = [tensor<64x32xbf16, #s1>, tensor<32x64xbf16, #s0>]} : () -> !tile.ring
    %6 = arith.cmpi slt, %c0_i32_1, %4 : i32
    "tile.ring_acquire"(%5, %c0_i32, %c1_i32, %6) : (!tile.ring, i32, i32, i1) -> ()
    "tile.ring_load"(%5, %c0_i32, %6, %arg0, %0, %c0_i32_1) {buffer = 0 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
    "tile.ring_load"(%5, %c0_i32, %6, %arg1, %c0_i32_1, %1) {buffer = 1 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
    "tile.ring_commit"(%5) : (!tile.ring) -> ()
    %7 = arith.muli %c1_i32, %c1_i32_0 : i32
    %8 = arith.addi %c0_i32_1, %7 : i32
    %9 = arith.cmpi slt, %8, %4 : i32
    "tile.ring_acquire"(%5, %c1_i32, %c1_i32, %9) : (!tile.ring, i32, i32, i1) -> ()
    "tile.ring_load"(%5, %c1_i32, %9, %arg0, %0, %8) {buffer = 0 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
    "tile.ring_load"(%5, %c1_i32, %9, %arg1, %8, %1) {buffer = 1 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
    "tile.ring_commit"(%5) : (!tile.ring) -> ()
    %10 = arith.muli %c2_i32, %c1_i32_0 : i32
    %11 = arith.addi %c0_i32_1, %10 : i32
    %12 = arith.cmpi slt, %11, %4 : i32
    "tile.ring_acquire"(%5, %c2_i32, %c1_i32, %12) : (!tile.ring, i32, i32, i1) -> ()
    "tile.ring_load"(%5, %c2_i32, %12, %arg0, %0, %11) {buffer = 0 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
    "tile.ring_load"(%5, %c2_i32, %12, %arg1, %11, %1) {buffer = 1 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
    "tile.ring_commit"(%5) : (!tile.ring) -> ()
    %13 = scf.for %arg3 = %c0_i32_1 to %4 step %c1_i32_0 iter_args(%arg4 = %cst) -> (tensor<64x64xf32, #acc0>)  : i32 {
      %16 = arith.subi %arg3, %c0_i32_1 : i32
      %17 = arith.divui %16, %c1_i32_0 : i32
      %18 = arith.remui %17, %c4_i32 : i32
      %19 = arith.divui %17, %c4_i32 : i32
      %20 = arith.andi %19, %c1_i32 : i32
      "tile.ring_wait"(%5, %18, %20) : (!tile.ring, i32, i32) -> ()
      %21 = "tile.ring_view"(%5, %18) {buffer = 0 : i64} : (!tile.ring, i32) -> tensor<64x32xbf16, #s1>
      %22 = "tile.ring_view"(%5, %18) {buffer = 1 : i64} : (!tile.ring, i32) -> tensor<32x64xbf16, #s0>
      %23 = arith.addi %17, %c3_i32 : i32
      %24 = arith.muli %c3_i32, %c1_i32_0 : i32
      %25 = arith.addi %arg3, %24 : i32
      %26 = arith.cmpi slt, %25, %4 : i32
      %27 = arith.remui %23, %c4_i32 : i32
      %28 = arith.divui %23, %c4_i32 : i32
      %29 = arith.andi %28, %c1_i32 : i32
      %30 = arith.xori %29, %c1_i32 : i32
      "tile.ring_acquire"(%5, %27, %30, %26) : (!tile.ring, i32, i32, i1) -> ()
      "tile.ring_load"(%5, %27, %26, %arg0, %0, %25) {buffer = 0 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
      "tile.ring_load"(%5, %27, %26, %arg1, %25, %1) {buffer = 1 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
      "tile.ring_commit"(%5) : (!tile.ring) -> ()
      %31 = "tile.mma"(%21, %22, %arg4) : (tensor<64x32xbf16, #s1>, tensor<32x64xbf16, #s0>, tensor<64x64xf32, #acc0>) -> tensor<64x64xf32, #acc0>
      "tile.ring_release"(%5, %18, %true) : (!tile.ring, i32, i1) -> ()
      scf.yield %31 : tensor<64x64xf32, #acc0>
    }
    "tile.ring_free"(%5) : (!tile.ring) -> ()
    %14 = arith.truncf %13 : tensor<64x64xf32, #acc0> to tensor<64x64xbf16, #acc0>
    %15 = "tile.convert_layout"(%14) : (tensor<64x64xbf16, #acc0>) -> tensor<64x64xbf16, #st0>
    "tile.store"(%arg2, %15, %0, %1) : (!tile.array<bf16, 2 : i64>, tensor<64x64xbf16, #st0>, i32, i32) -> ()
    return
  }
}

