// RUN: tile-opt %s -split-input-file --tile-retile-blocks | FileCheck %s

// A GEMM with B as an (N, K) weight and a bias epilogue, launched on a grid of
// many waves with both axes even ("wide:3"): the tiles that follow bid(1) (the
// weight's rows, the bias, the accumulator's and the output's columns) double;
// A's tile, K and the loop stay; the grid's axis 1 halves (tile.grid_scale).
// So many waves of the wider tiles run persistent (tile.persistent, for the
// pipeline stage's tile-persistent-tiles).

// CHECK-LABEL: func.func @linear
// CHECK-SAME:    tile.grid_scale = array<i64: 1, 2, 1>
// CHECK-SAME:    tile.persistent = true
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
// (128 -> 32), the grid's axis 1 four times longer.  The K loop keeps its 64-wide
// tiles: its trip count is a constant, not cdiv(dim, 64), so longer tiles could
// not cover the same K.

// CHECK-LABEL: func.func @decode
// CHECK-SAME:    tile.grid_scale = array<i64: 1, 1, 4>
// CHECK-NOT:     tile.persistent
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c8
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

// A decode GEMM as written (128 x 128 x 64 tiles, weight (N, K), K loop of
// cdiv(K, 64) trips) launched with 16 rows on a grid of 32 blocks
// ("narrow:4;short:a.0,c.0", the launch's A and C have at most 64 rows):
// - the rows shrink to 64 (the array's rows all lie in block 0's tile; the grid
//   keeps its axis 0),
// - the N tiles become 4 times narrower (128 -> 32, the grid's axis 1 x 4),
// - the K tiles 4 times longer (64 -> 256) in cdiv(K, 256) trips: a ring slot
//   keeps about its bytes (the arrays are aligned: TMA will copy these tiles; the
//   @one_short case below, unaligned, keeps its K tiles).

// CHECK-LABEL: func.func @decode_short
// CHECK-SAME:    tile.grid_scale = array<i64: 1, 1, 4>
// CHECK:         %[[K:.*]] = "tile.dim"(%arg0) {axis = 1 : i64}
// CHECK:         %[[TOP:.*]] = arith.addi %[[K]], %c255_i32
// CHECK:         %[[TRIPS:.*]] = arith.floordivsi %[[TOP]], %c256_i32
// CHECK:         scf.for %{{.*}} = %{{.*}} to %[[TRIPS]] {{.*}} -> (tensor<64x32xf32>)
// CHECK:           "tile.load"(%arg0, {{.*}}tile_shape = array<i64: 64, 256>
// CHECK:           "tile.load"(%arg1, {{.*}}tile_shape = array<i64: 32, 256>
// CHECK:           "tile.permute"{{.*}} -> tensor<256x32xbf16>
// CHECK:           "tile.mma"{{.*}} -> tensor<64x32xf32>
// CHECK:         "tile.store"(%arg2, {{.*}}tensor<64x32xbf16>
func.func @decode_short(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %w: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.arg_names = ["a", "w", "c"], tile.grid_wish = "narrow:4;short:a.0,c.0"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c63 = arith.constant 63 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %k = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %top = arith.addi %k, %c63 : i32
  %n = arith.floordivsi %top, %c64 : i32
  %acc = scf.for %t = %c0 to %n step %c1 iter_args(%x = %zero) -> (tensor<128x128xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
    %tw = "tile.load"(%w, %j, %t) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
    %tb = "tile.permute"(%tw) {permutation = array<i64: 1, 0>} : (tensor<128x64xbf16>) -> tensor<64x128xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
    scf.yield %y : tensor<128x128xf32>
  }
  %o = arith.truncf %acc : tensor<128x128xf32> to tensor<128x128xbf16>
  "tile.store"(%c, %o, %i, %j) : (!tile.array<bf16, 2 : i64>, tensor<128x128xbf16>, i32, i32) -> ()
  return
}

// -----

// Rows shrink only where every array the axis indexes is short: here the launch's
// C has more than 64 rows ("short:a.0" alone), so the 128-row tiles stay.

// CHECK-LABEL: func.func @one_short
// CHECK-NOT:     tile.grid_scale
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK:         "tile.load"(%arg0, {{.*}}tile_shape = array<i64: 128, 64>
func.func @one_short(%a: !tile.array<bf16, 2 : i64>, %w: !tile.array<bf16, 2 : i64>, %c: !tile.array<bf16, 2 : i64>) attributes {tile.kernel, tile.arg_names = ["a", "w", "c"], tile.grid_wish = "short:a.0"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c63 = arith.constant 63 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %k = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %top = arith.addi %k, %c63 : i32
  %n = arith.floordivsi %top, %c64 : i32
  %acc = scf.for %t = %c0 to %n step %c1 iter_args(%x = %zero) -> (tensor<128x128xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
    %tw = "tile.load"(%w, %j, %t) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
    %tb = "tile.permute"(%tw) {permutation = array<i64: 1, 0>} : (tensor<128x64xbf16>) -> tensor<64x128xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
    scf.yield %y : tensor<128x128xf32>
  }
  %o = arith.truncf %acc : tensor<128x128xf32> to tensor<128x128xbf16>
  "tile.store"(%c, %o, %i, %j) : (!tile.array<bf16, 2 : i64>, tensor<128x128xbf16>, i32, i32) -> ()
  return
}

// -----

// Where the analysis refuses, a wish changes nothing: here bid(1) also computes
// an index by arithmetic, so axis 1 cannot be retiled, and axis 0's grid is odd
// ("wide:2": only axis 1 is even).

// CHECK-LABEL: func.func @masked
// CHECK-NOT:     tile.grid_scale
// CHECK-NOT:     tile.persistent
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

// -----

// The stage driver's K split (tile.k_split = 2, backend/layout/budget.py: two stages of
// the written tiles overflowed the shared memory): a batched GEMM's K tiles,
// loaded as (1, M, K) and (1, K, N) and reshaped, become half as long, in twice
// the trips (cdiv(K, 64)); M, N and the batch stay.
// CHECK-LABEL: func.func @split_k
// CHECK:         %[[C63:.*]] = arith.constant 63 : i32
// CHECK:         %[[TOP:.*]] = arith.addi %{{.*}}, %[[C63]] : i32
// CHECK:         %[[C64:.*]] = arith.constant 64 : i32
// CHECK:         %[[TRIPS:.*]] = arith.floordivsi %[[TOP]], %[[C64]] : i32
// CHECK:         scf.for %{{.*}} = %{{.*}} to %[[TRIPS]]
// CHECK:           "tile.load"(%arg0, {{.*}}) {padding = "zero", tile_shape = array<i64: 1, 128, 64>}
// CHECK:           "tile.reshape"{{.*}} -> tensor<128x64xf16>
// CHECK:           "tile.load"(%arg1, {{.*}}) {padding = "zero", tile_shape = array<i64: 1, 64, 256>}
// CHECK:           "tile.mma"{{.*}} (tensor<128x64xf16>, tensor<64x256xf16>, tensor<128x256xf32>)
func.func @split_k(%a: !tile.array<f16, 3 : i64>, %b: !tile.array<f16, 3 : i64>, %c: !tile.array<f32, 3 : i64>) attributes {tile.kernel, tile.k_split = 2 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c127 = arith.constant 127 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant dense<0.0> : tensor<128x256xf32>
  %z = "tile.bid"() {axis = 0 : i64} : () -> i32
  %i = "tile.bid"() {axis = 1 : i64} : () -> i32
  %j = "tile.bid"() {axis = 2 : i64} : () -> i32
  %k = "tile.dim"(%a) {axis = 2 : i64} : (!tile.array<f16, 3 : i64>) -> i32
  %top = arith.addi %k, %c127 : i32
  %n = arith.floordivsi %top, %c128 : i32
  %acc = scf.for %t = %c0 to %n step %c1 iter_args(%x = %zero) -> (tensor<128x256xf32>) : i32 {
    %ta = "tile.load"(%a, %z, %i, %t) {padding = "zero", tile_shape = array<i64: 1, 128, 128>} : (!tile.array<f16, 3 : i64>, i32, i32, i32) -> tensor<1x128x128xf16>
    %ra = "tile.reshape"(%ta) : (tensor<1x128x128xf16>) -> tensor<128x128xf16>
    %tb = "tile.load"(%b, %z, %t, %j) {padding = "zero", tile_shape = array<i64: 1, 128, 256>} : (!tile.array<f16, 3 : i64>, i32, i32, i32) -> tensor<1x128x256xf16>
    %rb = "tile.reshape"(%tb) : (tensor<1x128x256xf16>) -> tensor<128x256xf16>
    %y = "tile.mma"(%ra, %rb, %x) : (tensor<128x128xf16>, tensor<128x256xf16>, tensor<128x256xf32>) -> tensor<128x256xf32>
    scf.yield %y : tensor<128x256xf32>
  }
  %r = "tile.reshape"(%acc) : (tensor<128x256xf32>) -> tensor<1x128x256xf32>
  "tile.store"(%c, %r, %z, %i, %j) : (!tile.array<f32, 3 : i64>, tensor<1x128x256xf32>, i32, i32, i32) -> ()
  return
}
