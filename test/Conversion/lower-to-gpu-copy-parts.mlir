// RUN: tile-opt %s --tile-lower-to-gpu | FileCheck %s

// A ring copied in parts (backend/pipeline/copy_parts.py; what tile-pipeline-loops
// makes of a loop whose loaded tiles only feed a wgmma, with the kernel options
// copy_parts and warp_specialize: test/Transforms/pipeline-loops.mlir): A and B are (64, 128) bf16 tiles, each two TMA boxes of 64 columns
// (128-byte swizzle rows), so a slot has four full barriers, one per box (A's at
// +0 and +8 bytes, B's at +16 and +24), besides its empty one.  The slots take
// 3 x 32 KiB from byte 0: the full barriers start at 98304, the empty ones at 98400.

// CHECK-LABEL: gpu.func @copy_parts(
// CHECK:         arith.constant 98304 : i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         arith.constant 98312 : i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         arith.constant 98320 : i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         arith.constant 98328 : i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         arith.constant 98400 : i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c4_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c4_i32
// CHECK-NOT:     nvvm.mbarrier.init
// The acquire: the empty barrier waited for, then each box's bytes (8 KiB) announced
// on the box's own barrier; each box's copy completes on that barrier.
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4: nvvm.mbarrier.arrive.expect_tx
// CHECK-COUNT-4: nvvm.cp.async.bulk.tensor.shared.cluster.global
// The consumer: each view's box barriers (slot stride 32 bytes); no wait at the top
// of the iteration; the first four k steps (A's and B's first 64 columns) wait for
// box 0 of each, the next four for box 1 of each.
// CHECK:         scf.for %{{.*}} iter_args
// CHECK-NOT:       nvvm.mbarrier.try_wait
// CHECK:           %[[OA0:.*]] = arith.addi %c98304_i32, %{{.*}} : i32
// CHECK-NEXT:      %[[A0:.*]] = llvm.getelementptr %{{.*}}[%[[OA0]]]
// CHECK:           %[[OA1:.*]] = arith.addi %c98312_i32, %{{.*}} : i32
// CHECK-NEXT:      %[[A1:.*]] = llvm.getelementptr %{{.*}}[%[[OA1]]]
// CHECK:           %[[OB0:.*]] = arith.addi %c98320_i32, %{{.*}} : i32
// CHECK-NEXT:      %[[B0:.*]] = llvm.getelementptr %{{.*}}[%[[OB0]]]
// CHECK:           %[[OB1:.*]] = arith.addi %c98328_i32, %{{.*}} : i32
// CHECK-NEXT:      %[[B1:.*]] = llvm.getelementptr %{{.*}}[%[[OB1]]]
// CHECK-NOT:       nvvm.mbarrier.try_wait
// CHECK:           "wgmma.fence.sync.aligned;"
// CHECK-NOT:       nvvm.wgmma.mma_async
// CHECK:           nvvm.mbarrier.try_wait.parity %[[A0]], %[[PAR:[0-9]+]],
// CHECK-NEXT:      arith.constant
// CHECK-NEXT:      nvvm.mbarrier.try_wait.parity %[[B0]], %[[PAR]],
// CHECK-COUNT-4:   nvvm.wgmma.mma_async
// CHECK-NOT:       nvvm.wgmma.mma_async
// CHECK:           nvvm.mbarrier.try_wait.parity %[[A1]], %[[PAR]],
// CHECK-NEXT:      arith.constant
// CHECK-NEXT:      nvvm.mbarrier.try_wait.parity %[[B1]], %[[PAR]],
// CHECK-COUNT-4:   nvvm.wgmma.mma_async
// CHECK-NOT:       nvvm.mbarrier.try_wait.parity %{{.*}}, %[[PAR]],
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// After the loop: the consumers' barrier, then every barrier of the three stages
// is invalidated.
// CHECK:         nvvm.barrier id
// CHECK-COUNT-15: nvvm.mbarrier.inval

module {
  func.func @copy_parts(%arg0: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg1: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg2: !tile.array<f32, 2 : i64>) attributes {tile.copy_parts = true, tile.kernel, tile.num_stages = 3 : i32, tile.num_warps = 4 : i32, tile.producer_warps = 4 : i32, tile.warp_specialize = true} {
    %c0_i32 = arith.constant 0 : i32
    %c2_i32 = arith.constant 2 : i32
    %true = arith.constant true
    %c1_i32 = arith.constant 1 : i32
    %c3_i32 = arith.constant 3 : i32
    %c0_i32_0 = arith.constant 0 : i32
    %c1_i32_1 = arith.constant 1 : i32
    %0 = "tile.bid"() {axis = 0 : i64} : () -> i32
    %1 = "tile.dim"(%arg0) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
    %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
    %2 = "tile.ring_alloc"() {stages = 3 : i64, tile.copy_parts, tiles = [tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>, tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>]} : () -> !tile.ring
    %3 = "tile.is_producer"() : () -> i1
    scf.if %3 {
      scf.for %arg3 = %c0_i32_0 to %1 step %c1_i32_1  : i32 {
        %4 = arith.subi %arg3, %c0_i32_0 : i32
        %5 = arith.divui %4, %c1_i32_1 : i32
        %6 = arith.remui %5, %c3_i32 : i32
        %7 = arith.divui %5, %c3_i32 : i32
        %8 = arith.andi %7, %c1_i32 : i32
        %9 = arith.xori %8, %c1_i32 : i32
        "tile.ring_acquire"(%2, %6, %9, %true) : (!tile.ring, i32, i32, i1) -> ()
        "tile.ring_load"(%2, %6, %true, %arg0, %0, %arg3) {buffer = 0 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
        "tile.ring_load"(%2, %6, %true, %arg1, %c0_i32_0, %arg3) {buffer = 1 : i64} : (!tile.ring, i32, i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
        "tile.ring_commit"(%2) : (!tile.ring) -> ()
      }
    } else {
      %4 = scf.for %arg3 = %c0_i32_0 to %1 step %c1_i32_1 iter_args(%arg4 = %cst) -> (tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>)  : i32 {
        %6 = arith.subi %arg3, %c0_i32_0 : i32
        %7 = arith.divui %6, %c1_i32_1 : i32
        %8 = arith.remui %7, %c3_i32 : i32
        %9 = arith.divui %7, %c3_i32 : i32
        %10 = arith.andi %9, %c1_i32 : i32
        "tile.ring_wait"(%2, %8, %10) {tile.copy_parts} : (!tile.ring, i32, i32) -> ()
        %11 = "tile.ring_view"(%2, %8) {buffer = 0 : i64} : (!tile.ring, i32) -> tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>
        %12 = "tile.ring_view"(%2, %8) {buffer = 1 : i64} : (!tile.ring, i32) -> tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>
        %13 = "tile.permute"(%12) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>) -> tensor<128x64xbf16, #tile.shared<128 : i64, array<i64: 0, 1>>>
        %14 = "tile.mma_async"(%11, %13, %arg4) : (tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>, tensor<128x64xbf16, #tile.shared<128 : i64, array<i64: 0, 1>>>, tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>) -> tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
        %15 = "tile.mma_wait"(%14) {pending = 1 : i64} : (tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>) -> tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
        %16 = arith.addi %7, %c2_i32 : i32
        %17 = arith.remui %16, %c3_i32 : i32
        %18 = arith.cmpi ugt, %7, %c0_i32 : i32
        "tile.ring_release"(%2, %17, %18) : (!tile.ring, i32, i1) -> ()
        scf.yield %15 : tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
      }
      %5 = "tile.mma_wait"(%4) {pending = 0 : i64} : (tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>) -> tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
      "tile.ring_free"(%2) : (!tile.ring) -> ()
      "tile.store"(%arg2, %5, %0, %c0_i32_0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>, i32, i32) -> ()
    }
    return
  }
}
