// RUN: tile-opt %s -split-input-file --tile-retile-blocks | FileCheck %s

// A GEMM with B as an (N, K) weight and a bias epilogue, launched on a grid of
// many waves with both axes even ("wide:3"): the tiles that follow bid(1) (the
// weight's rows, the bias, the accumulator's and the output's columns) double;
// A's tile, K and the loop stay; the grid's axis 1 halves (tile.grid_scale).

// CHECK-LABEL: func.func @linear
// CHECK-SAME:    tile.grid_scale = array<i64: 1, 2, 1>
// CHECK:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<128x256xf32>
// CHECK:         scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (tensor<128x256xf32>)
// CHECK:           "tile.load"(%arg0, %{{.*}}, %{{.*}}) {padding = "zero", tile_shape = array<i64: 128, 64>} {{.*}} -> tensor<128x64xbf16>
// CHECK:           "tile.load"(%arg1, %{{.*}}, %{{.*}}) {padding = "zero", tile_shape = array<i64: 256, 64>} {{.*}} -> tensor<256x64xbf16>
// CHECK:           "tile.permute"{{.*}} -> tensor<64x256xbf16>
// CHECK:           "tile.mma"{{.*}} -> tensor<128x256xf32>
// CHECK:         "tile.load"(%arg2, %{{.*}}) {padding = "zero", tile_shape = array<i64: 256>} {{.*}} -> tensor<256xbf16>
// CHECK:         "tile.reshape"{{.*}} -> tensor<1x256xbf16>
// CHECK:         "tile.broadcast"{{.*}} -> tensor<128x256xf32>
// A splat constant takes the new shape:
// CHECK:         arith.constant dense<2.000000e+00> : tensor<128x256xf32>
// CHECK:         "tile.store"(%arg3, %{{.*}}, %{{.*}}, %{{.*}}) : ({{.*}}, tensor<128x256xbf16>, i32, i32)
func.func @linear(%a: !tile.array<bf16, 2 : i64>, %w: !tile.array<bf16, 2 : i64>, %bias: !tile.array<bf16, 1 : i64>, %c: !tile.array<bf16, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "wide:3"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %k = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %n = arith.floordivsi %k, %c64 : i32
  %acc = scf.for %t = %c0 to %n step %c1 iter_args(%x = %zero) -> (tensor<128x128xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
    %tw = "tile.load"(%w, %j, %t) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
    %tb = "tile.permute"(%tw) {permutation = array<i64: 1, 0>} : (tensor<128x64xbf16>) -> tensor<64x128xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
    scf.yield %y : tensor<128x128xf32>
  }
  %b = "tile.load"(%bias, %j) {padding = "zero", tile_shape = array<i64: 128>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<128xbf16>
  %b2 = "tile.reshape"(%b) : (tensor<128xbf16>) -> tensor<1x128xbf16>
  %bf = arith.extf %b2 : tensor<1x128xbf16> to tensor<1x128xf32>
  %bb = "tile.broadcast"(%bf) : (tensor<1x128xf32>) -> tensor<128x128xf32>
  %two = arith.constant dense<2.0> : tensor<128x128xf32>
  %s = arith.mulf %acc, %two : tensor<128x128xf32>
  %h = arith.addf %s, %bb : tensor<128x128xf32>
  %o = arith.truncf %h : tensor<128x128xf32> to tensor<128x128xbf16>
  "tile.store"(%c, %o, %i, %j) : (!tile.array<bf16, 2 : i64>, tensor<128x128xbf16>, i32, i32) -> ()
  return
}

// -----

// A grid smaller than the GPU ("narrow:4"): the N tiles become 4 times narrower
// (128 -> 32), the grid's axis 1 four times longer.

// CHECK-LABEL: func.func @decode
// CHECK-SAME:    tile.grid_scale = array<i64: 1, 1, 4>
// CHECK:         "tile.load"(%arg1, %{{.*}}, %{{.*}}) {{.*}}tile_shape = array<i64: 64, 32>
// CHECK:         "tile.mma"{{.*}} -> tensor<64x32xf32>
// CHECK:         "tile.store"({{.*}}tensor<64x32xf32>
func.func @decode(%a: !tile.array<bf16, 2 : i64>, %b: !tile.array<bf16, 2 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "narrow:4"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %zero = arith.constant dense<0.0> : tensor<64x128xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %acc = scf.for %t = %c0 to %c8 step %c1 iter_args(%x = %zero) -> (tensor<64x128xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %tb = "tile.load"(%b, %t, %j) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<64x64xbf16>, tensor<64x128xbf16>, tensor<64x128xf32>) -> tensor<64x128xf32>
    scf.yield %y : tensor<64x128xf32>
  }
  "tile.store"(%c, %acc, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x128xf32>, i32, i32) -> ()
  return
}

// -----

// Where the analysis refuses, a wish changes nothing: here bid(1) also computes
// an index by arithmetic, so axis 1 cannot be retiled, and axis 0's grid is odd
// ("wide:2": only axis 1 is even).

// CHECK-LABEL: func.func @masked
// CHECK-NOT:     tile.grid_scale
// CHECK:         tensor<64x64xf32>
func.func @masked(%a: !tile.array<bf16, 2 : i64>, %b: !tile.array<bf16, 2 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "wide:2"} {
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %off = arith.muli %j, %c64 : i32
  %ta = "tile.load"(%a, %i, %i) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
  %tb = "tile.load"(%b, %off, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
  %y = "tile.mma"(%ta, %tb, %zero) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
  "tile.store"(%c, %y, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}

// -----

// No wish, no option: no change.

// CHECK-LABEL: func.func @plain
// CHECK-NOT:     tile.grid_scale
func.func @plain(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%a, %i) {padding = "zero", tile_shape = array<i64: 128>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<128xf32>
  "tile.store"(%a, %t, %i) : (!tile.array<f32, 1 : i64>, tensor<128xf32>, i32) -> ()
  return
}
