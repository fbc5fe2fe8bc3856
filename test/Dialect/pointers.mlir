// RUN: tile-opt %s | tile-opt | FileCheck %s

// An array's address (cuTile's foreign pointer) is an i64: the address of the
// element its index names (one i32 per dim).  It becomes an array again with dims
// and then strides, all i64, or raw memory: a 1-d unit-stride array from there on.

// CHECK-LABEL: func.func @addresses
// CHECK-SAME:    (%[[A:[^:]*]]: !tile.array<f32, 2 : i64>, %[[N:[^:]*]]: i64, %[[I:[^:]*]]: i32)
// CHECK:         %[[P:.*]] = "tile.array_address"(%[[A]], %[[I]], %[[I]]) : (!tile.array<f32, 2 : i64>, i32, i32) -> i64
// CHECK:         "tile.make_array"(%[[P]], %[[N]], %[[N]], %[[N]], %[[N]]) : (i64, i64, i64, i64, i64) -> !tile.array<f32, 2 : i64>
// CHECK:         "tile.make_array"(%[[P]]) : (i64) -> !tile.array<f32, 0 : i64>
// CHECK:         "tile.raw_memory"(%[[P]]) : (i64) -> !tile.array<ui16, 1 : i64>
func.func @addresses(%a: !tile.array<f32, 2 : i64>, %n: i64, %i: i32) attributes {tile.kernel} {
  %p = "tile.array_address"(%a, %i, %i) : (!tile.array<f32, 2 : i64>, i32, i32) -> i64
  %v = "tile.make_array"(%p, %n, %n, %n, %n) : (i64, i64, i64, i64, i64) -> !tile.array<f32, 2 : i64>
  %s = "tile.make_array"(%p) : (i64) -> !tile.array<f32, 0 : i64>
  %m = "tile.raw_memory"(%p) : (i64) -> !tile.array<ui16, 1 : i64>
  return
}
