// RUN: tile-opt %s --pass-pipeline='builtin.module(tile-inline,tile-canonicalize,cse,tile-cse)' | FileCheck %s
// RUN: tile-opt %s --pass-pipeline='tile-inline, tile-canonicalize, cse, tile-cse' | FileCheck %s
// RUN: tile-opt %s --tile-inline --tile-canonicalize --pass-pipeline='func.func(cse)' --tile-cse | FileCheck %s
// RUN: tile-opt %s --tile-cse --tile-inline --print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=ORDER
// RUN: tile-opt %s --pass-pipeline='builtin.module()' | FileCheck %s --check-prefix=NONE

// Tile passes and upstream passes mix in one pipeline, written as MLIR's
// pipeline syntax, as a bare list, or as flags; flags run in command-line order.

// ORDER:     IR Dump After tile-cse
// ORDER:     IR Dump After tile-inline
// ORDER-NOT: IR Dump After

// NONE: call @scale
// NONE: call @scale

func.func private @scale(%t: tensor<16xf32>) -> tensor<16xf32> attributes {tile.function} {
  %c = arith.constant dense<2.0> : tensor<16xf32>
  %r = arith.mulf %t, %c : tensor<16xf32>
  return %r : tensor<16xf32>
}

// CHECK-NOT:   @scale
// CHECK-LABEL: func.func @kernel
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 1 : i64>)
// CHECK-DAG:     %[[C:.*]] = arith.constant dense<2.000000e+00> : tensor<16xf32>
// CHECK-DAG:     %[[B:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK:         %[[T:.*]] = "tile.load"(%[[A]], %[[B]])
// CHECK-NEXT:    %[[M:.*]] = arith.mulf %[[T]], %[[C]]
// CHECK-NEXT:    "tile.store"(%[[A]], %[[M]], %[[B]])
// CHECK-NEXT:    "tile.store"(%[[A]], %[[M]], %[[B]])
// CHECK-NEXT:    return
func.func @kernel(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%a, %b) {tile_shape = array<i64: 16>, padding = "zero"} : (!tile.array<f32, 1 : i64>, i32) -> tensor<16xf32>
  %r1 = func.call @scale(%t) : (tensor<16xf32>) -> tensor<16xf32>
  %r2 = func.call @scale(%t) : (tensor<16xf32>) -> tensor<16xf32>
  "tile.store"(%a, %r1, %b) : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
  "tile.store"(%a, %r2, %b) : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
  return
}
