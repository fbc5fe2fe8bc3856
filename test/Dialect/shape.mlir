// RUN: tile-opt %s | tile-opt | FileCheck %s

// CHECK-LABEL: func.func @broadcast
// CHECK-SAME:    (%[[ROW:.*]]: tensor<1x64xf32>, %[[COL:.*]]: tensor<32x1xf16>, %[[ONE:.*]]: tensor<1x1xi32>)
// CHECK:         "tile.broadcast"(%[[ROW]]) : (tensor<1x64xf32>) -> tensor<32x64xf32>
// CHECK-NEXT:    "tile.broadcast"(%[[COL]]) : (tensor<32x1xf16>) -> tensor<32x64xf16>
// CHECK-NEXT:    "tile.broadcast"(%[[ONE]]) : (tensor<1x1xi32>) -> tensor<8x16xi32>
// CHECK-NEXT:    "tile.broadcast"(%[[ROW]]) : (tensor<1x64xf32>) -> tensor<1x64xf32>
func.func @broadcast(%row: tensor<1x64xf32>, %col: tensor<32x1xf16>, %one: tensor<1x1xi32>) attributes {tile.function} {
  %0 = "tile.broadcast"(%row) : (tensor<1x64xf32>) -> tensor<32x64xf32>
  %1 = "tile.broadcast"(%col) : (tensor<32x1xf16>) -> tensor<32x64xf16>
  %2 = "tile.broadcast"(%one) : (tensor<1x1xi32>) -> tensor<8x16xi32>
  %3 = "tile.broadcast"(%row) : (tensor<1x64xf32>) -> tensor<1x64xf32>
  return
}

// CHECK-LABEL: func.func @reshape
// CHECK-SAME:    (%[[T:.*]]: tensor<4x8xf32>, %[[S:.*]]: tensor<f32>)
// CHECK:         "tile.reshape"(%[[T]]) : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT:    "tile.reshape"(%[[T]]) : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
// CHECK-NEXT:    "tile.reshape"(%[[T]]) : (tensor<4x8xf32>) -> tensor<1x32x1xf32>
// CHECK-NEXT:    "tile.reshape"(%[[S]]) : (tensor<f32>) -> tensor<1x1xf32>
func.func @reshape(%t: tensor<4x8xf32>, %s: tensor<f32>) attributes {tile.function} {
  %0 = "tile.reshape"(%t) : (tensor<4x8xf32>) -> tensor<32xf32>
  %1 = "tile.reshape"(%t) : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
  %2 = "tile.reshape"(%t) : (tensor<4x8xf32>) -> tensor<1x32x1xf32>
  %3 = "tile.reshape"(%s) : (tensor<f32>) -> tensor<1x1xf32>
  return
}

// CHECK-LABEL: func.func @permute
// CHECK-SAME:    (%[[M:.*]]: tensor<16x64xbf16>, %[[C:.*]]: tensor<2x4x8xi8>)
// CHECK:         "tile.permute"(%[[M]]) {permutation = array<i64: 1, 0>} : (tensor<16x64xbf16>) -> tensor<64x16xbf16>
// CHECK-NEXT:    "tile.permute"(%[[C]]) {permutation = array<i64: 2, 0, 1>} : (tensor<2x4x8xi8>) -> tensor<8x2x4xi8>
// CHECK-NEXT:    "tile.permute"(%[[C]]) {permutation = array<i64: 0, 1, 2>} : (tensor<2x4x8xi8>) -> tensor<2x4x8xi8>
func.func @permute(%m: tensor<16x64xbf16>, %c: tensor<2x4x8xi8>) attributes {tile.function} {
  %0 = "tile.permute"(%m) {permutation = array<i64: 1, 0>} : (tensor<16x64xbf16>) -> tensor<64x16xbf16>
  %1 = "tile.permute"(%c) {permutation = array<i64: 2, 0, 1>} : (tensor<2x4x8xi8>) -> tensor<8x2x4xi8>
  %2 = "tile.permute"(%c) {permutation = array<i64: 0, 1, 2>} : (tensor<2x4x8xi8>) -> tensor<2x4x8xi8>
  return
}
