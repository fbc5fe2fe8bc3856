// RUN: tile-opt %s --tile-pipeline-loops --tile-lower-to-gpu | FileCheck %s

// The wgmma rules on a rotated chain of products (backend/pipeline/product_rotation.py;
// MLA's scores q_nope c^T + q_rope r^T, then P c): in the main loop the second score
// product accumulates onto the first while that is still in flight, so it gets no
// wgmma.fence (the same shape's accumulator is ordered by the hardware, and a fence
// tied to its registers would define them between the two: ptxas serializes every
// wgmma, C7513).  P V's wait keeps alive the packed registers its A was read from,
// those its wgmmas read, not the values they were packed from.

// CHECK-LABEL: gpu.func @latent
// The main loop (its iter args are the one-trip prologue's results).
// CHECK:       scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}#0,
// CHECK:         "wgmma.fence.sync.aligned;"
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:     wgmma.fence
// CHECK:         nvvm.wgmma.mma_async
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// P V: A from registers, packed (32-bit) and tied to its fence.
// CHECK:         llvm.inline_asm has_side_effects "wgmma.fence.sync.aligned;", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=r,
// CHECK:         wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK:         "wgmma.wait_group.sync.aligned 1;"
// The wait for P V: its 16 accumulator registers and the 16 packed A registers.
// CHECK:         "wgmma.wait_group.sync.aligned 0;", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,0,
#sh = #tile.shared<128 : i64, array<i64: 1, 0>>
#sht = #tile.shared<128 : i64, array<i64: 0, 1>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 2>, array<i64: 64, 32>>
#opa = #tile.mma_operand<0 : i64, #tile.mma_acc<3 : i64, array<i64: 4, 2>, array<i64: 64, 32>>, 2 : i64>
module attributes {tile.stage = "layout", tile.target = "sm_90a"} {
  func.func @latent(%arg0: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg1: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg2: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg3: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.arg_names = ["Q", "C", "R", "O"], tile.kernel, tile.num_warps = 8 : i32, tile.num_stages = 3 : i32, tile.warp_specialize = false} {
    %c1_i32 = arith.constant 1 : i32
    %c64_i32 = arith.constant 64 : i32
    %c63_i32 = arith.constant 63 : i32
    %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #acc>
    %c0_i32 = arith.constant 0 : i32
    %0 = "tile.bid"() {axis = 0 : i64} : () -> i32
    %1 = "tile.load"(%arg0, %0, %c0_i32) {padding = "undetermined", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sh>
    %q2 = "tile.load"(%arg0, %0, %c1_i32) {padding = "undetermined", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sh>
    %2 = "tile.dim"(%arg1) {axis = 0 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
    %3 = arith.addi %2, %c63_i32 : i32
    %4 = arith.floordivsi %3, %c64_i32 : i32
    %5 = scf.for %arg4 = %c0_i32 to %4 step %c1_i32 iter_args(%arg5 = %cst) -> (tensor<64x64xf32, #acc>)  : i32 {
      %7 = "tile.load"(%arg1, %arg4, %c0_i32) {padding = "undetermined", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sh>
      %r = "tile.load"(%arg2, %arg4, %c0_i32) {padding = "undetermined", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sh>
      %8 = "tile.permute"(%7) {permutation = array<i64: 1, 0>} : (tensor<64x64xbf16, #sh>) -> tensor<64x64xbf16, #sht>
      %rt = "tile.permute"(%r) {permutation = array<i64: 1, 0>} : (tensor<64x64xbf16, #sh>) -> tensor<64x64xbf16, #sht>
      %9 = "tile.mma"(%1, %8, %cst) : (tensor<64x64xbf16, #sh>, tensor<64x64xbf16, #sht>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
      %s = "tile.mma"(%q2, %rt, %9) : (tensor<64x64xbf16, #sh>, tensor<64x64xbf16, #sht>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
      %10 = math.exp2 %s : tensor<64x64xf32, #acc>
      %12 = arith.truncf %10 : tensor<64x64xf32, #acc> to tensor<64x64xbf16, #acc>
      %cst_0 = arith.constant dense<5.000000e-01> : tensor<64x64xf32, #acc>
      %13 = arith.mulf %arg5, %cst_0 : tensor<64x64xf32, #acc>
      %14 = "tile.convert_layout"(%12) : (tensor<64x64xbf16, #acc>) -> tensor<64x64xbf16, #opa>
      %15 = "tile.mma"(%14, %7, %13) : (tensor<64x64xbf16, #opa>, tensor<64x64xbf16, #sh>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
      scf.yield %15 : tensor<64x64xf32, #acc>
    }
    %6 = arith.truncf %5 : tensor<64x64xf32, #acc> to tensor<64x64xbf16, #acc>
    "tile.store"(%arg3, %6, %0, %c0_i32) : (!tile.array<bf16, 2 : i64>, tensor<64x64xbf16, #acc>, i32, i32) -> ()
    return
  }
}
