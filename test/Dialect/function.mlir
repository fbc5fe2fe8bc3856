// RUN: tile-opt %s | tile-opt | FileCheck %s

// Kernels (tile.kernel) take arrays and scalars and return nothing; helpers
// (tile.function) are private and called with func.call.  Control flow is scf
// over i32 with tiles and scalars as loop-carried values.

!A = !tile.array<f32, 2 : i64>

// CHECK-LABEL: func.func private @scale
// CHECK-SAME:    (%[[T:.*]]: tensor<16x16xf32>, %[[S:.*]]: f32) -> tensor<16x16xf32> attributes {tile.function}
// CHECK:         %[[F:.*]] = tensor.splat %[[S]] : tensor<16x16xf32>
// CHECK:         %[[R:.*]] = arith.mulf %[[T]], %[[F]] : tensor<16x16xf32>
// CHECK:         return %[[R]] : tensor<16x16xf32>
func.func private @scale(%t: tensor<16x16xf32>, %s: f32) -> tensor<16x16xf32> attributes {tile.function} {
  %f = tensor.splat %s : tensor<16x16xf32>
  %r = arith.mulf %t, %f : tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}

// CHECK-LABEL: func.func @row_sums
// CHECK-SAME:    attributes {tile.arg_names = ["x", "y", "n"], tile.kernel}
// CHECK:         %[[ACC:.*]] = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %{{.*}}) -> (tensor<16x16xf32>)  : i32 {
// CHECK:           %[[T:.*]] = "tile.load"(%{{.*}}, %{{.*}}, %[[K]])
// CHECK:           %[[SC:.*]] = func.call @scale(%[[T]], %{{.*}}) : (tensor<16x16xf32>, f32) -> tensor<16x16xf32>
// CHECK:           %[[SUM:.*]] = arith.addf %[[A]], %[[SC]] : tensor<16x16xf32>
// CHECK:           scf.yield %[[SUM]] : tensor<16x16xf32>
// CHECK:         %[[RES:.*]] = scf.if %{{.*}} -> (tensor<16x16xf32>) {
// CHECK:           scf.yield %[[ACC]] : tensor<16x16xf32>
// CHECK:         } else {
// CHECK:           arith.negf %[[ACC]] : tensor<16x16xf32>
// CHECK:         "tile.store"(%{{.*}}, %[[RES]], %{{.*}}, %{{.*}})
func.func @row_sums(%x: !A, %y: !A, %n: i32) attributes {tile.kernel, tile.arg_names = ["x", "y", "n"]} {
  %bid = "tile.bid"() {axis = 0 : i64} : () -> i32
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %two = arith.constant 2.0 : f32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %acc = scf.for %k = %c0 to %n step %c1 iter_args(%a = %zero) -> (tensor<16x16xf32>) : i32 {
    %t = "tile.load"(%x, %bid, %k) {tile_shape = array<i64: 16, 16>, padding = "zero"} : (!A, i32, i32) -> tensor<16x16xf32>
    %sc = func.call @scale(%t, %two) : (tensor<16x16xf32>, f32) -> tensor<16x16xf32>
    %sum = arith.addf %a, %sc : tensor<16x16xf32>
    scf.yield %sum : tensor<16x16xf32>
  }
  %positive = arith.cmpi sgt, %n, %c0 : i32
  %res = scf.if %positive -> (tensor<16x16xf32>) {
    scf.yield %acc : tensor<16x16xf32>
  } else {
    %neg = arith.negf %acc : tensor<16x16xf32>
    scf.yield %neg : tensor<16x16xf32>
  }
  "tile.store"(%y, %res, %bid, %c0) : (!A, tensor<16x16xf32>, i32, i32) -> ()
  return
}

// CHECK-LABEL: func.func @count_down
// CHECK:         scf.while (%[[I:.*]] = %{{.*}}) : (i32) -> i32 {
// CHECK:           scf.condition(%{{.*}}) %[[I]] : i32
// CHECK:         } do {
// CHECK:         ^bb0(%[[J:.*]]: i32):
// CHECK:           scf.yield %{{.*}} : i32
func.func @count_down(%n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = scf.while (%i = %n) : (i32) -> i32 {
    %more = arith.cmpi sgt, %i, %c0 : i32
    scf.condition(%more) %i : i32
  } do {
  ^bb0(%j: i32):
    %next = arith.subi %j, %c1 : i32
    scf.yield %next : i32
  }
  return
}

// Functions without tile attributes are not Tile IR: anything goes there.

// CHECK-LABEL: func.func @host_code
// CHECK:         memref.alloc() : memref<3xf32>
func.func @host_code() {
  %m = memref.alloc() : memref<3xf32>
  return
}
