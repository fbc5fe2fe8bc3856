// RUN: tile-opt %s | tile-opt | FileCheck %s

// Tiles are built by tile.iota, by arith.constant (splat or dense), and by
// tensor.splat of a runtime scalar; tensor.extract turns a rank-0 tile into a
// scalar, tensor.from_elements a scalar into a tile.

// CHECK-LABEL: func.func @iota
// CHECK:         "tile.iota"() : () -> tensor<128xi32>
// CHECK-NEXT:    "tile.iota"() : () -> tensor<64xi8>
// CHECK-NEXT:    "tile.iota"() : () -> tensor<1xi64>
// CHECK-NEXT:    "tile.iota"() : () -> tensor<1024xi16>
func.func @iota() attributes {tile.kernel} {
  %0 = "tile.iota"() : () -> tensor<128xi32>
  %1 = "tile.iota"() : () -> tensor<64xi8>
  %2 = "tile.iota"() : () -> tensor<1xi64>
  %3 = "tile.iota"() : () -> tensor<1024xi16>
  return
}

// CHECK-LABEL: func.func @constants
// CHECK-SAME:    (%[[S:.*]]: f32)
// CHECK:         arith.constant dense<0.000000e+00> : tensor<64x64xf32>
// CHECK-NEXT:    arith.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
// CHECK-NEXT:    arith.constant dense<true> : tensor<8xi1>
// CHECK-NEXT:    arith.constant 7 : i32
// CHECK-NEXT:    %[[F:.*]] = tensor.splat %[[S]] : tensor<16x16xf32>
// CHECK-NEXT:    %[[R:.*]] = tensor.from_elements %[[S]] : tensor<f32>
// CHECK-NEXT:    tensor.extract %[[R]][] : tensor<f32>
func.func @constants(%s: f32) -> f32 attributes {tile.function} {
  %zeros = arith.constant dense<0.0> : tensor<64x64xf32>
  %dense = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %true = arith.constant dense<true> : tensor<8xi1>
  %c7 = arith.constant 7 : i32
  %full = tensor.splat %s : tensor<16x16xf32>
  %rank0 = tensor.from_elements %s : tensor<f32>
  %scalar = tensor.extract %rank0[] : tensor<f32>
  return %scalar : f32
}
