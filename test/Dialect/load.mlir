// RUN: tile-opt %s | tile-opt | FileCheck %s

// tile.load reads the tile with tile index (i, j) of shape tile_shape; elements
// outside the array read the padding value.

!A = !tile.array<f32, 2 : i64>

// CHECK-LABEL: func.func @every_padding_mode
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 2 : i64>, %[[I:.*]]: i32, %[[J:.*]]: i32)
// CHECK:         "tile.load"(%[[A]], %[[I]], %[[J]]) {padding = "zero", tile_shape = array<i64: 16, 32>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<16x32xf32>
// CHECK-NEXT:    "tile.load"(%[[A]], %[[I]], %[[J]]) {padding = "neg_zero", tile_shape = array<i64: 16, 32>}
// CHECK-NEXT:    "tile.load"(%[[A]], %[[I]], %[[J]]) {padding = "neg_inf", tile_shape = array<i64: 16, 32>}
// CHECK-NEXT:    "tile.load"(%[[A]], %[[I]], %[[J]]) {padding = "pos_inf", tile_shape = array<i64: 16, 32>}
// CHECK-NEXT:    "tile.load"(%[[A]], %[[I]], %[[J]]) {padding = "nan", tile_shape = array<i64: 16, 32>}
// CHECK-NEXT:    "tile.load"(%[[A]], %[[I]], %[[J]]) {padding = "undetermined", tile_shape = array<i64: 1, 64>}
func.func @every_padding_mode(%a: !A, %i: i32, %j: i32) attributes {tile.kernel} {
  %0 = "tile.load"(%a, %i, %j) {tile_shape = array<i64: 16, 32>, padding = "zero"} : (!A, i32, i32) -> tensor<16x32xf32>
  %1 = "tile.load"(%a, %i, %j) {tile_shape = array<i64: 16, 32>, padding = "neg_zero"} : (!A, i32, i32) -> tensor<16x32xf32>
  %2 = "tile.load"(%a, %i, %j) {tile_shape = array<i64: 16, 32>, padding = "neg_inf"} : (!A, i32, i32) -> tensor<16x32xf32>
  %3 = "tile.load"(%a, %i, %j) {tile_shape = array<i64: 16, 32>, padding = "pos_inf"} : (!A, i32, i32) -> tensor<16x32xf32>
  %4 = "tile.load"(%a, %i, %j) {tile_shape = array<i64: 16, 32>, padding = "nan"} : (!A, i32, i32) -> tensor<16x32xf32>
  %5 = "tile.load"(%a, %i, %j) {tile_shape = array<i64: 1, 64>, padding = "undetermined"} : (!A, i32, i32) -> tensor<1x64xf32>
  return
}

// Integer arrays load signless tiles; they pad with zero or leave it undetermined.

// CHECK-LABEL: func.func @integer_and_bool
// CHECK:         "tile.load"(%{{.*}}, %{{.*}}) {padding = "zero", tile_shape = array<i64: 128>} : (!tile.array<ui8, 1 : i64>, i32) -> tensor<128xi8>
// CHECK-NEXT:    "tile.load"(%{{.*}}, %{{.*}}) {padding = "undetermined", tile_shape = array<i64: 8>} : (!tile.array<si32, 1 : i64>, i32) -> tensor<8xi32>
// CHECK-NEXT:    "tile.load"(%{{.*}}, %{{.*}}) {padding = "zero", tile_shape = array<i64: 4>} : (!tile.array<i1, 1 : i64>, i32) -> tensor<4xi1>
func.func @integer_and_bool(%u: !tile.array<ui8, 1 : i64>, %s: !tile.array<si32, 1 : i64>,
                            %b: !tile.array<i1, 1 : i64>, %i: i32) attributes {tile.kernel} {
  %0 = "tile.load"(%u, %i) {tile_shape = array<i64: 128>, padding = "zero"} : (!tile.array<ui8, 1 : i64>, i32) -> tensor<128xi8>
  %1 = "tile.load"(%s, %i) {tile_shape = array<i64: 8>, padding = "undetermined"} : (!tile.array<si32, 1 : i64>, i32) -> tensor<8xi32>
  %2 = "tile.load"(%b, %i) {tile_shape = array<i64: 4>, padding = "zero"} : (!tile.array<i1, 1 : i64>, i32) -> tensor<4xi1>
  return
}

// A rank-3 array, and a rank-0 array (no indices, a rank-0 tile).

// CHECK-LABEL: func.func @ranks
// CHECK:         "tile.load"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {padding = "zero", tile_shape = array<i64: 2, 4, 8>} : (!tile.array<f16, 3 : i64>, i32, i32, i32) -> tensor<2x4x8xf16>
// CHECK-NEXT:    "tile.load"(%{{.*}}) {padding = "zero", tile_shape = array<i64>} : (!tile.array<f64, 0 : i64>) -> tensor<f64>
func.func @ranks(%a: !tile.array<f16, 3 : i64>, %s: !tile.array<f64, 0 : i64>, %i: i32) attributes {tile.kernel} {
  %0 = "tile.load"(%a, %i, %i, %i) {tile_shape = array<i64: 2, 4, 8>, padding = "zero"} : (!tile.array<f16, 3 : i64>, i32, i32, i32) -> tensor<2x4x8xf16>
  %1 = "tile.load"(%s) {tile_shape = array<i64>, padding = "zero"} : (!tile.array<f64, 0 : i64>) -> tensor<f64>
  return
}
