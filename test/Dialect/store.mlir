// RUN: tile-opt %s | tile-opt | FileCheck %s

// tile.store writes a tile at a tile index; out-of-range elements are dropped.

// CHECK-LABEL: func.func @copy
// CHECK-SAME:    (%[[X:.*]]: !tile.array<f16, 2 : i64>, %[[Y:.*]]: !tile.array<f16, 2 : i64>)
// CHECK:         %[[I:.*]] = "tile.bid"() {axis = 0 : i64} : () -> i32
// CHECK:         %[[T:.*]] = "tile.load"(%[[X]], %[[I]], %[[C0:.*]]) {padding = "zero", tile_shape = array<i64: 64, 64>}
// CHECK-NEXT:    "tile.store"(%[[Y]], %[[T]], %[[I]], %[[C0]]) : (!tile.array<f16, 2 : i64>, tensor<64x64xf16>, i32, i32) -> ()
func.func @copy(%x: !tile.array<f16, 2 : i64>, %y: !tile.array<f16, 2 : i64>) attributes {tile.kernel} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%x, %i, %c0) {tile_shape = array<i64: 64, 64>, padding = "zero"} : (!tile.array<f16, 2 : i64>, i32, i32) -> tensor<64x64xf16>
  "tile.store"(%y, %t, %i, %c0) : (!tile.array<f16, 2 : i64>, tensor<64x64xf16>, i32, i32) -> ()
  return
}

// Signed and unsigned arrays take signless tiles; rank-0 arrays take rank-0 tiles.

// CHECK-LABEL: func.func @signedness_and_rank0
// CHECK:         "tile.store"(%{{.*}}, %{{.*}}, %{{.*}}) : (!tile.array<ui16, 1 : i64>, tensor<32xi16>, i32) -> ()
// CHECK-NEXT:    "tile.store"(%{{.*}}, %{{.*}}) : (!tile.array<f32, 0 : i64>, tensor<f32>) -> ()
func.func @signedness_and_rank0(%u: !tile.array<ui16, 1 : i64>, %s: !tile.array<f32, 0 : i64>,
                                %t: tensor<32xi16>, %r: tensor<f32>, %i: i32) {
  "tile.store"(%u, %t, %i) : (!tile.array<ui16, 1 : i64>, tensor<32xi16>, i32) -> ()
  "tile.store"(%s, %r) : (!tile.array<f32, 0 : i64>, tensor<f32>) -> ()
  return
}
