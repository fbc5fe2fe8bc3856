// RUN: tile-opt %s | tile-opt | FileCheck %s
// RUN: tile-opt %s --mlir-print-op-generic | tile-opt | FileCheck %s

// Block ids and grid sizes: one i32 per axis, axes 0..2.

// CHECK-LABEL: func.func @grid
// CHECK:         %[[B0:.*]] = "tile.bid"() {axis = 0 : i64} : () -> i32
// CHECK-NEXT:    %[[B1:.*]] = "tile.bid"() {axis = 1 : i64} : () -> i32
// CHECK-NEXT:    %[[B2:.*]] = "tile.bid"() {axis = 2 : i64} : () -> i32
// CHECK-NEXT:    %[[N0:.*]] = "tile.num_blocks"() {axis = 0 : i64} : () -> i32
// CHECK-NEXT:    %[[N2:.*]] = "tile.num_blocks"() {axis = 2 : i64} : () -> i32
// CHECK-NEXT:    %[[L:.*]] = arith.muli %[[B1]], %[[N0]] : i32
// CHECK-NEXT:    arith.addi %[[B0]], %[[L]] : i32
func.func @grid() attributes {tile.kernel} {
  %b0 = "tile.bid"() {axis = 0 : i64} : () -> i32
  %b1 = "tile.bid"() {axis = 1 : i64} : () -> i32
  %b2 = "tile.bid"() {axis = 2 : i64} : () -> i32
  %n0 = "tile.num_blocks"() {axis = 0 : i64} : () -> i32
  %n2 = "tile.num_blocks"() {axis = 2 : i64} : () -> i32
  %l = arith.muli %b1, %n0 : i32
  %linear = arith.addi %b0, %l : i32
  return
}

// Grid ops are usable in helpers too, and outside tile functions.

// CHECK-LABEL: func.func private @helper
// CHECK-SAME:    attributes {tile.function}
// CHECK:         %[[B:.*]] = "tile.bid"() {axis = 1 : i64} : () -> i32
// CHECK:         return %[[B]] : i32
func.func private @helper() -> i32 attributes {tile.function} {
  %b = "tile.bid"() {axis = 1 : i64} : () -> i32
  return %b : i32
}
