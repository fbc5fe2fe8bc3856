// RUN: tile-opt %s | tile-opt | FileCheck %s

// CHECK-LABEL: func.func @slices
// CHECK-SAME:    (%[[T:.*]]: tensor<16x32xf32>, %[[V:.*]]: tensor<4x8xf32>, %[[I:.*]]: i32, %[[J:.*]]: i32)
// CHECK:         "tile.extract_slice"(%[[T]], %[[I]], %[[J]]) : (tensor<16x32xf32>, i32, i32) -> tensor<4x8xf32>
// CHECK-NEXT:    "tile.insert_slice"(%[[T]], %[[V]], %[[I]], %[[J]]) : (tensor<16x32xf32>, tensor<4x8xf32>, i32, i32) -> tensor<16x32xf32>
// CHECK-NEXT:    "tile.concat"(%[[T]], %[[T]]) {axis = 1 : i64} : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x64xf32>
func.func @slices(%t: tensor<16x32xf32>, %v: tensor<4x8xf32>, %i: i32, %j: i32) attributes {tile.function} {
  %0 = "tile.extract_slice"(%t, %i, %j) : (tensor<16x32xf32>, i32, i32) -> tensor<4x8xf32>
  %1 = "tile.insert_slice"(%t, %v, %i, %j) : (tensor<16x32xf32>, tensor<4x8xf32>, i32, i32) -> tensor<16x32xf32>
  %2 = "tile.concat"(%t, %t) {axis = 1 : i64} : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x64xf32>
  return
}
