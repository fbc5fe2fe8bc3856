// RUN: tile-opt %s --tile-lower-to-gpu | FileCheck %s
// RUN: tile-opt %s --tile-lower-to-gpu --tile-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// The tensor-core rules on a pipelined GEMM (what `tile-pipeline-loops` makes of
// the plain source with 64 x 64 x 32 bf16 tiles on sm_90a: a ring of 4 stages,
// A and B by TMA, the product by wgmma, async).

// At the llvm stage the tensor maps are 128-byte by-value grid constants.
// LLVM:        llvm.func @gemm(
// LLVM-SAME:     %arg15: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %arg16: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})

// Two CUtensorMap parameters trail the ABI (A's box 64 x 32, B's 32 x 64), each
// cut along dim 0 (its rows) to the array's extent when that is shorter.
// CHECK: tile.kernel_meta = {{.*}}\22tensor_maps\22: [{\22slot\22: 15, \22param\22: 0, \22box\22: [64, 32], \22swizzle\22: 64, \22clip\22: 0}, {\22slot\22: 16, \22param\22: 1, \22box\22: [32, 64], \22swizzle\22: 128, \22clip\22: 0}]
// CHECK-LABEL: gpu.func @gemm(
// CHECK-SAME:    %[[A0:arg1]]: i32
// CHECK-SAME:    %[[B0:arg6]]: i32
// CHECK-SAME:    %[[TMA:arg15]]: !llvm.ptr, %[[TMB:arg16]]: !llvm.ptr)
// ring_alloc: thread 0 initializes a full (count 1) and an empty (count 4 warps)
// barrier per slot.
// CHECK:         scf.if
// CHECK-COUNT-4:   nvvm.mbarrier.init %{{.*}}, %c1_i32{{.*}}
// CHECK:           nvvm.fence.mbarrier.init
// The rows each box keeps: min(extent, tile rows), at least 1; a slot's bytes are
// A's kept rows x 64 bytes plus B's x 128.
// CHECK:         %[[MINA:.*]] = arith.minsi %[[A0]], %c64_i32
// CHECK:         %[[KEPTA:.*]] = arith.maxsi %[[MINA]], %c1_i32
// CHECK:         %[[MINB:.*]] = arith.minsi %[[B0]], %c32_i32
// CHECK:         %[[KEPTB:.*]] = arith.maxsi %[[MINB]], %c1_i32
// CHECK:         %[[TXA:.*]] = arith.muli %[[KEPTA]], %c64_i32
// CHECK:         %[[TXA2:.*]] = arith.addi %{{.*}}, %[[TXA]]
// CHECK:         %[[TXB:.*]] = arith.muli %[[KEPTB]], %c128_i32
// CHECK:         %[[TX:.*]] = arith.addi %[[TXA2]], %[[TXB]]
// When a box is cut, every thread zeroes the rows it leaves out in all 4 slots,
// then orders those writes before the async proxy's reads; a block barrier.
// CHECK:         scf.if
// CHECK:           scf.for
// CHECK:             scf.if
// CHECK:               llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:         gpu.barrier
// The prologue: thread 0 waits for the slot's release, announces the slot's bytes
// (8192 when nothing is cut), copies A and B by TMA onto the slot's full barrier.
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK:         nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[TX]]
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[TMA]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[TMB]], %{{.*}}, box[%{{.*}}, %{{.*}}]
// In the loop: every thread waits on the slot's full barrier, the product is one
// fence (tied to the accumulator), 2 wgmma (k = 2 x 16), a commit; the wait for
// the previous product keeps one group pending; lane 0 of each warp releases.
// CHECK:         scf.for
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           llvm.inline_asm has_side_effects "wgmma.fence.sync.aligned;"
// CHECK-COUNT-2:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK:           llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 1;"
// CHECK:           scf.if
// CHECK:             nvvm.mbarrier.arrive %
// After the loop: no group pending, then the barriers are invalidated.
// CHECK:         llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// CHECK:         gpu.barrier
// CHECK-COUNT-8: nvvm.mbarrier.inval

#sa = #tile.shared<64 : i64, array<i64: 1, 0>>
#sb = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>
#st0 = #tile.blocked<array<i64: 1, 8>, array<i64: 4, 8>, array<i64: 4, 1>, array<i64: 1, 0>>
module {
  func.func @gemm(%arg0: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg1: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg2: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.arg_names = ["a", "b", "c"], tile.kernel, tile.num_warps = 4 : i32} {
    %c3_i32 = arith.constant 3 : i32
    %c4_i32 = arith.constant 4 : i32
    %c2_i32 = arith.constant 2 : i32
    %c1_i32 = arith.constant 1 : i32
    %c0_i32 = arith.constant 0 : i32
    %c1_i32_0 = arith.constant 1 : i32
    %c0_i32_1 = arith.constant 0 : i32
    %c32_i32 = arith.constant 32 : i32
    %c31_i32 = arith.constant 31 : i32
    %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #acc>
    %0 = "tile.bid"() {axis = 0 : i64} : () -> i32
    %1 = "tile.bid"() {axis = 1 : i64} : () -> i32
    %2 = "tile.dim"(%arg0) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
    %3 = arith.addi %2, %c31_i32 : i32
    %4 = arith.floordivsi %3, %c32_i32 : i32
    %5 = "tile.ring_alloc"() {stages = 4 : i64, tiles = [tensor<64x32xbf16, #sa>, tensor<32x64xbf16, #sb>]} : () -> !tile.ring
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
    %13 = scf.for %arg3 = %c0_i32_1 to %4 step %c1_i32_0 iter_args(%arg4 = %cst) -> (tensor<64x64xf32, #acc>)  : i32 {
      %17 = arith.subi %arg3, %c0_i32_1 : i32
      %18 = arith.divui %17, %c1_i32_0 : i32
      %19 = arith.remui %18, %c4_i32 : i32
      %20 = arith.divui %18, %c4_i32 : i32
      %21 = arith.andi %20, %c1_i32 : i32
      "tile.ring_wait"(%5, %19, %21) : (!tile.ring, i32, i32) -> ()
      %22 = "tile.ring_view"(%5, %19) {buffer = 0 : i64} : (!tile.ring, i32) -> tensor<64x32xbf16, #sa>
      %23 = "tile.ring_view"(%5, %19) {buffer = 1 : i64} : (!tile.ring, i32) -> tensor<32x64xbf16, #sb>
      %24 = "tile.mma_async"(%22, %23, %arg4) : (tensor<64x32xbf16, #sa>, tensor<32x64xbf16, #sb>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
      %25 = "tile.mma_wait"(%24) {pending = 1 : i64} : (tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
      %26 = arith.addi %18, %c3_i32 : i32
      %27 = arith.remui %26, %c4_i32 : i32
      %28 = arith.cmpi ugt, %18, %c0_i32 : i32
      "tile.ring_release"(%5, %27, %28) : (!tile.ring, i32, i1) -> ()
      %29 = arith.addi %18, %c3_i32 : i32
      %30 = arith.muli %c3_i32, %c1_i32_0 : i32
      %31 = arith.addi %arg3, %30 : i32
      %32 = arith.cmpi slt, %31, %4 : i32
      %33 = arith.remui %29, %c4_i32 : i32
      %34 = arith.divui %29, %c4_i32 : i32
      %35 = arith.andi %34, %c1_i32 : i32
      %36 = arith.xori %35, %c1_i32 : i32
      "tile.ring_acquire"(%5, %33, %36, %32) : (!tile.ring, i32, i32, i1) -> ()
      "tile.ring_load"(%5, %33, %32, %arg0, %0, %31) {buffer = 0 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
      "tile.ring_load"(%5, %33, %32, %arg1, %31, %1) {buffer = 1 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
      "tile.ring_commit"(%5) : (!tile.ring) -> ()
      scf.yield %25 : tensor<64x64xf32, #acc>
    }
    %14 = "tile.mma_wait"(%13) {pending = 0 : i64} : (tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    "tile.ring_free"(%5) : (!tile.ring) -> ()
    %15 = arith.truncf %14 : tensor<64x64xf32, #acc> to tensor<64x64xbf16, #acc>
    %16 = "tile.convert_layout"(%15) : (tensor<64x64xbf16, #acc>) -> tensor<64x64xbf16, #st0>
    "tile.store"(%arg2, %16, %0, %1) : (!tile.array<bf16, 2 : i64>, tensor<64x64xbf16, #st0>, i32, i32) -> ()
    return
  }
}

