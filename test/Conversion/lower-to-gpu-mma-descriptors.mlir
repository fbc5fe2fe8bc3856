// RUN: tile-opt %s -split-input-file --tile-lower-to-gpu | FileCheck %s

// wgmma descriptors (backend/gpu/rules/mma.py, _Desc): a product of a few k steps
// steps its 64-bit descriptors by 64-bit adds (ptxas keeps them in uniform
// registers); one of many k steps (here 32: K = 512, as MLA's scores) adds each
// step's offset to the low word alone and ors the constant high word on.

#sh = #tile.shared<128 : i64, array<i64: 1, 0>>
#sht = #tile.shared<128 : i64, array<i64: 0, 1>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// CHECK-LABEL: gpu.func @deep
// CHECK:         nvvm.wgmma.mma_async
// CHECK-NOT:     arith.addi {{.*}} : i64
// CHECK:         %[[LO:.*]] = arith.addi %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[W:.*]] = arith.extui %[[LO]] : i32 to i64
// CHECK-NEXT:    arith.ori %[[W]], %{{c[0-9]+_i64[_0-9]*}} : i64
// CHECK:         nvvm.wgmma.mma_async
// CHECK-COUNT-30: nvvm.wgmma.mma_async
// CHECK-NOT:     nvvm.wgmma.mma_async
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
module attributes {tile.stage = "pipeline", tile.target = "sm_90a"} {
  func.func @deep(%arg0: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg1: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg2: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.arg_names = ["A", "B", "C"], tile.kernel, tile.num_warps = 4 : i32} {
    %c0_i32 = arith.constant 0 : i32
    %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #acc>
    %0 = "tile.bid"() {axis = 0 : i64} : () -> i32
    %1 = "tile.load"(%arg0, %0, %c0_i32) {padding = "undetermined", tile_shape = array<i64: 64, 512>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x512xbf16, #sh>
    %2 = "tile.load"(%arg1, %0, %c0_i32) {padding = "undetermined", tile_shape = array<i64: 64, 512>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x512xbf16, #sh>
    %3 = "tile.permute"(%2) {permutation = array<i64: 1, 0>} : (tensor<64x512xbf16, #sh>) -> tensor<512x64xbf16, #sht>
    %4 = "tile.mma"(%1, %3, %cst) : (tensor<64x512xbf16, #sh>, tensor<512x64xbf16, #sht>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    "tile.store"(%arg2, %4, %0, %c0_i32) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
    return
  }
}

// -----

#sh = #tile.shared<128 : i64, array<i64: 1, 0>>
#sht = #tile.shared<128 : i64, array<i64: 0, 1>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// CHECK-LABEL: gpu.func @shallow
// CHECK:         nvvm.wgmma.mma_async
// CHECK:         arith.addi %{{.*}}, %{{.*}} : i64
// CHECK:         nvvm.wgmma.mma_async
// CHECK-COUNT-2: nvvm.wgmma.mma_async
// CHECK-NOT:     nvvm.wgmma.mma_async
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
module attributes {tile.stage = "pipeline", tile.target = "sm_90a"} {
  func.func @shallow(%arg0: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg1: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg2: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.arg_names = ["A", "B", "C"], tile.kernel, tile.num_warps = 4 : i32} {
    %c0_i32 = arith.constant 0 : i32
    %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #acc>
    %0 = "tile.bid"() {axis = 0 : i64} : () -> i32
    %1 = "tile.load"(%arg0, %0, %c0_i32) {padding = "undetermined", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sh>
    %2 = "tile.load"(%arg1, %0, %c0_i32) {padding = "undetermined", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sh>
    %3 = "tile.permute"(%2) {permutation = array<i64: 1, 0>} : (tensor<64x64xbf16, #sh>) -> tensor<64x64xbf16, #sht>
    %4 = "tile.mma"(%1, %3, %cst) : (tensor<64x64xbf16, #sh>, tensor<64x64xbf16, #sht>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    "tile.store"(%arg2, %4, %0, %c0_i32) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
    return
  }
}
