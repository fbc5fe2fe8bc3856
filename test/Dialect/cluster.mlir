// RUN: tile-opt %s | tile-opt | FileCheck %s

// CHECK-LABEL: func.func @gather
// CHECK:         %{{.*}}:2 = "tile.cluster_gather"(%{{.*}}, %{{.*}}) {axis = 2 : i64, size = 8 : i64} : (tensor<1xf32>, tensor<1xf32>) -> (tensor<8x1xf32>, tensor<8x1xf32>)
// CHECK:         "tile.cluster_gather"(%{{.*}}) {axis = 1 : i64, size = 2 : i64} : (tensor<4x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK:         "tile.cluster_gather"(%{{.*}}) {axis = 0 : i64, size = 16 : i64} : (tensor<i64>) -> tensor<16xi64>
func.func @gather(%m: tensor<1xf32>, %s: tensor<1xf32>, %t: tensor<4x16xbf16>, %z: tensor<i64>) attributes {tile.function} {
  %g:2 = "tile.cluster_gather"(%m, %s) {axis = 2 : i64, size = 8 : i64} : (tensor<1xf32>, tensor<1xf32>) -> (tensor<8x1xf32>, tensor<8x1xf32>)
  %h = "tile.cluster_gather"(%t) {axis = 1 : i64, size = 2 : i64} : (tensor<4x16xbf16>) -> tensor<2x4x16xbf16>
  %i = "tile.cluster_gather"(%z) {axis = 0 : i64, size = 16 : i64} : (tensor<i64>) -> tensor<16xi64>
  return
}
