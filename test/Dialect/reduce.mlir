// RUN: tile-opt %s | tile-opt | FileCheck %s

// tile.reduce removes `axis`; sum/prod/max/min keep the element type,
// argmax/argmin give i32 indices.

// CHECK-LABEL: func.func @every_kind
// CHECK-SAME:    (%[[T:.*]]: tensor<16x32xf32>)
// CHECK:         "tile.reduce"(%[[T]]) {axis = 1 : i64, kind = "sum"} : (tensor<16x32xf32>) -> tensor<16xf32>
// CHECK-NEXT:    "tile.reduce"(%[[T]]) {axis = 0 : i64, kind = "prod"} : (tensor<16x32xf32>) -> tensor<32xf32>
// CHECK-NEXT:    "tile.reduce"(%[[T]]) {axis = 1 : i64, kind = "max"} : (tensor<16x32xf32>) -> tensor<16xf32>
// CHECK-NEXT:    "tile.reduce"(%[[T]]) {axis = 1 : i64, kind = "min"} : (tensor<16x32xf32>) -> tensor<16xf32>
// CHECK-NEXT:    "tile.reduce"(%[[T]]) {axis = 1 : i64, kind = "argmax"} : (tensor<16x32xf32>) -> tensor<16xi32>
// CHECK-NEXT:    "tile.reduce"(%[[T]]) {axis = 0 : i64, kind = "argmin"} : (tensor<16x32xf32>) -> tensor<32xi32>
func.func @every_kind(%t: tensor<16x32xf32>) attributes {tile.function} {
  %0 = "tile.reduce"(%t) {kind = "sum", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xf32>
  %1 = "tile.reduce"(%t) {kind = "prod", axis = 0 : i64} : (tensor<16x32xf32>) -> tensor<32xf32>
  %2 = "tile.reduce"(%t) {kind = "max", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xf32>
  %3 = "tile.reduce"(%t) {kind = "min", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xf32>
  %4 = "tile.reduce"(%t) {kind = "argmax", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xi32>
  %5 = "tile.reduce"(%t) {kind = "argmin", axis = 0 : i64} : (tensor<16x32xf32>) -> tensor<32xi32>
  return
}

// A 1-D reduction gives a rank-0 tile; integer and 16-bit float sources work.

// CHECK-LABEL: func.func @to_rank0
// CHECK:         "tile.reduce"(%{{.*}}) {axis = 0 : i64, kind = "sum"} : (tensor<128xi32>) -> tensor<i32>
// CHECK-NEXT:    "tile.reduce"(%{{.*}}) {axis = 0 : i64, kind = "max"} : (tensor<64xf16>) -> tensor<f16>
// CHECK-NEXT:    "tile.reduce"(%{{.*}}) {axis = 0 : i64, kind = "argmax"} : (tensor<64xbf16>) -> tensor<i32>
// CHECK-NEXT:    "tile.reduce"(%{{.*}}) {axis = 2 : i64, kind = "min"} : (tensor<2x4x8xi8>) -> tensor<2x4xi8>
func.func @to_rank0(%i: tensor<128xi32>, %h: tensor<64xf16>, %b: tensor<64xbf16>, %c: tensor<2x4x8xi8>) attributes {tile.function} {
  %0 = "tile.reduce"(%i) {kind = "sum", axis = 0 : i64} : (tensor<128xi32>) -> tensor<i32>
  %1 = "tile.reduce"(%h) {kind = "max", axis = 0 : i64} : (tensor<64xf16>) -> tensor<f16>
  %2 = "tile.reduce"(%b) {kind = "argmax", axis = 0 : i64} : (tensor<64xbf16>) -> tensor<i32>
  %3 = "tile.reduce"(%c) {kind = "min", axis = 2 : i64} : (tensor<2x4x8xi8>) -> tensor<2x4xi8>
  return
}

// NaN-ignoring kinds of floats (maxnum...: cuTile's default), and the float options
// (a directed rounding of sums and products, ftz of f32) every step carries.

// CHECK-LABEL: func.func @nan_ignoring_and_options
// CHECK:         "tile.reduce"(%{{.*}}) {axis = 1 : i64, kind = "maxnum"} : (tensor<16x32xf32>) -> tensor<16xf32>
// CHECK-NEXT:    "tile.reduce"(%{{.*}}) {axis = 0 : i64, kind = "minnum"} : (tensor<16x32xf32>) -> tensor<32xf32>
// CHECK-NEXT:    "tile.reduce"(%{{.*}}) {axis = 1 : i64, kind = "argmaxnum"} : (tensor<16x32xf32>) -> tensor<16xi32>
// CHECK-NEXT:    "tile.reduce"(%{{.*}}) {axis = 0 : i64, kind = "argminnum"} : (tensor<64xbf16>) -> tensor<i32>
// CHECK-NEXT:    "tile.reduce"(%{{.*}}) {axis = 1 : i64, kind = "sum", tile.ftz = "true", tile.rounding = "rz"} : (tensor<16x32xf32>) -> tensor<16xf32>
// CHECK-NEXT:    "tile.reduce"(%{{.*}}) {axis = 0 : i64, kind = "prod", tile.rounding = "rp"} : (tensor<64xbf16>) -> tensor<bf16>
// CHECK-NEXT:    "tile.reduce"(%{{.*}}) {axis = 1 : i64, kind = "maxnum", tile.ftz = "true"} : (tensor<16x32xf32>) -> tensor<16xf32>
func.func @nan_ignoring_and_options(%t: tensor<16x32xf32>, %b: tensor<64xbf16>) attributes {tile.function} {
  %0 = "tile.reduce"(%t) {kind = "maxnum", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xf32>
  %1 = "tile.reduce"(%t) {kind = "minnum", axis = 0 : i64} : (tensor<16x32xf32>) -> tensor<32xf32>
  %2 = "tile.reduce"(%t) {kind = "argmaxnum", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xi32>
  %3 = "tile.reduce"(%b) {kind = "argminnum", axis = 0 : i64} : (tensor<64xbf16>) -> tensor<i32>
  %4 = "tile.reduce"(%t) {kind = "sum", axis = 1 : i64, tile.rounding = "rz", tile.ftz = "true"} : (tensor<16x32xf32>) -> tensor<16xf32>
  %5 = "tile.reduce"(%b) {kind = "prod", axis = 0 : i64, tile.rounding = "rp"} : (tensor<64xbf16>) -> tensor<bf16>
  %6 = "tile.reduce"(%t) {kind = "maxnum", axis = 1 : i64, tile.ftz = "true"} : (tensor<16x32xf32>) -> tensor<16xf32>
  return
}
