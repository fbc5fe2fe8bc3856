// RUN: tile-opt %s --stop-after=tile | FileCheck %s
// RUN: tile-opt %s --stop-after=tile | tile-opt --stop-after=tile | FileCheck %s

// The whole tile stage on a GEMM written the way the frontend writes it: a
// helper for the tile indices, recomputed block ids, a loop-invariant
// broadcast of the bias inside the K loop, and a transposed-twice operand.
// After the stage: no calls, one of each block id, the bias hoisted, the
// double transpose gone, nothing dead; and running the stage again changes
// nothing.

!A = !tile.array<f16, 2 : i64>
!C = !tile.array<f32, 2 : i64>

func.func private @tile_ids() -> (i32, i32) attributes {tile.function} {
  %m = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.bid"() {axis = 1 : i64} : () -> i32
  return %m, %n : i32, i32
}

// CHECK:       module attributes {tile.stage = "tile"}
// CHECK-NOT:   @tile_ids
// CHECK-LABEL: func.func @gemm
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f16, 2 : i64>, %[[B:.*]]: !tile.array<f16, 2 : i64>, %[[C:.*]]: !tile.array<f32, 2 : i64>, %[[BIAS:.*]]: f32, %[[K:.*]]: i32)
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : i32
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG:     %[[M:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-DAG:     %[[N:.*]] = "tile.bid"() {axis = 1 : i64}
// CHECK-DAG:     %[[BB:.*]] = tensor.splat %[[BIAS]] : tensor<64x64xf32>
// CHECK:         %[[ACC:.*]] = scf.for %[[KK:[a-z0-9_]+]] = %[[C0]] to %[[K]] step %[[C1]] iter_args(%[[X:[a-z0-9_]+]] = %[[ZERO]])
// CHECK-NEXT:      %[[TA:.*]] = "tile.load"(%[[A]], %[[M]], %[[KK]])
// CHECK-NEXT:      %[[TB:.*]] = "tile.load"(%[[B]], %[[KK]], %[[N]])
// CHECK-NEXT:      %[[MMA:.*]] = "tile.mma"(%[[TA]], %[[TB]], %[[X]])
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[MMA]], %[[BB]]
// CHECK-NEXT:      scf.yield %[[SUM]]
// CHECK-NEXT:    }
// CHECK-NEXT:    "tile.store"(%[[C]], %[[ACC]], %[[M]], %[[N]])
// CHECK-NEXT:    return
func.func @gemm(%a: !A, %b: !A, %c: !C, %bias: f32, %k: i32) attributes {tile.kernel, tile.arg_names = ["a", "b", "c", "bias", "k"]} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %ids:2 = func.call @tile_ids() : () -> (i32, i32)
  %acc = scf.for %kk = %c0 to %k step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %m = "tile.bid"() {axis = 0 : i64} : () -> i32
    %ta = "tile.load"(%a, %m, %kk) {tile_shape = array<i64: 64, 32>, padding = "zero"} : (!A, i32, i32) -> tensor<64x32xf16>
    %tb = "tile.load"(%b, %kk, %ids#1) {tile_shape = array<i64: 32, 64>, padding = "zero"} : (!A, i32, i32) -> tensor<32x64xf16>
    %tbt = "tile.permute"(%tb) {permutation = array<i64: 1, 0>} : (tensor<32x64xf16>) -> tensor<64x32xf16>
    %tbb = "tile.permute"(%tbt) {permutation = array<i64: 1, 0>} : (tensor<64x32xf16>) -> tensor<32x64xf16>
    %mma = "tile.mma"(%ta, %tbb, %x) : (tensor<64x32xf16>, tensor<32x64xf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %row = tensor.splat %bias : tensor<1x64xf32>
    %bb = "tile.broadcast"(%row) : (tensor<1x64xf32>) -> tensor<64x64xf32>
    %sum = arith.addf %mma, %bb : tensor<64x64xf32>
    %unused = "tile.reduce"(%sum) {kind = "max", axis = 1 : i64} : (tensor<64x64xf32>) -> tensor<64xf32>
    scf.yield %sum : tensor<64x64xf32>
  }
  "tile.store"(%c, %acc, %ids#0, %ids#1) : (!C, tensor<64x64xf32>, i32, i32) -> ()
  return
}
