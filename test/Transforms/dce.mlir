// RUN: tile-opt %s -split-input-file --tile-dce | FileCheck %s

// Unused pure tile ops go, whole chains at once; stores and their inputs stay.

!A = !tile.array<f32, 2 : i64>

// CHECK-LABEL: func.func @chains
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 2 : i64>)
// CHECK-NEXT:    %[[B:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:    %[[T:.*]] = "tile.load"(%[[A]], %[[B]], %[[B]])
// CHECK-NEXT:    "tile.store"(%[[A]], %[[T]], %[[B]], %[[B]])
// CHECK-NEXT:    return
func.func @chains(%a: !A) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.num_blocks"() {axis = 1 : i64} : () -> i32
  %t = "tile.load"(%a, %b, %b) {tile_shape = array<i64: 16, 16>, padding = "zero"} : (!A, i32, i32) -> tensor<16x16xf32>
  %dead_load = "tile.load"(%a, %n, %b) {tile_shape = array<i64: 16, 16>, padding = "zero"} : (!A, i32, i32) -> tensor<16x16xf32>
  %r = "tile.reduce"(%dead_load) {kind = "max", axis = 0 : i64} : (tensor<16x16xf32>) -> tensor<16xf32>
  %s = "tile.reshape"(%r) : (tensor<16xf32>) -> tensor<4x4xf32>
  %p = "tile.permute"(%s) {permutation = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %i = "tile.iota"() : () -> tensor<16xi32>
  %m = "tile.matmul"(%t, %t) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %e = math.exp %m : tensor<16x16xf32>
  %c = arith.constant 1.0 : f32
  %sp = tensor.splat %c : tensor<16x16xf32>
  "tile.store"(%a, %t, %b, %b) : (!A, tensor<16x16xf32>, i32, i32) -> ()
  return
}

// -----

// Dead ops inside loops go; a loop whose body only computes unused values goes
// too, while a loop that stores stays (with its now-empty-ish body).

!A = !tile.array<f32, 1 : i64>

// CHECK-LABEL: func.func @loops
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 1 : i64>, %[[N:.*]]: i32)
// CHECK:         scf.for %[[K:[a-z0-9_]+]] = %{{.*}} to %[[N]]
// CHECK-NEXT:      %[[T:.*]] = "tile.iota"() : () -> tensor<16xi32>
// CHECK-NEXT:      %[[F:.*]] = arith.sitofp %[[T]]
// CHECK-NEXT:      "tile.store"(%[[A]], %[[F]], %[[K]])
// CHECK-NEXT:    }
// CHECK-NEXT:    return
func.func @loops(%a: !A, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<16xf32>
  %unused = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<16xf32>) : i32 {
    %e = math.exp %acc : tensor<16xf32>
    scf.yield %e : tensor<16xf32>
  }
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.iota"() : () -> tensor<16xi32>
    %dead = "tile.reshape"(%t) : (tensor<16xi32>) -> tensor<4x4xi32>
    %f = arith.sitofp %t : tensor<16xi32> to tensor<16xf32>
    "tile.store"(%a, %f, %k) : (!A, tensor<16xf32>, i32) -> ()
  }
  return
}

// -----

// scf.if without results is dead when both branches are pure; scf.while is
// kept (it might not terminate).

// CHECK-LABEL: func.func @conditionals
// CHECK-NOT:     scf.if
// CHECK:         scf.while
func.func @conditionals(%c: i1, %n: i32) attributes {tile.kernel} {
  scf.if %c {
    %x = "tile.iota"() : () -> tensor<16xi32>
  }
  %c0 = arith.constant 0 : i32
  %r = scf.while (%i = %n) : (i32) -> i32 {
    %more = arith.cmpi sgt, %i, %c0 : i32
    scf.condition(%more) %i : i32
  } do {
  ^bb0(%j: i32):
    scf.yield %j : i32
  }
  return
}

// -----

// Calls: unused calls of pure functions go; calls of functions that store stay.

!A = !tile.array<f32, 1 : i64>

func.func private @pure(%x: i32) -> i32 attributes {tile.function} {
  %y = arith.addi %x, %x : i32
  return %y : i32
}

func.func private @stores(%a: !A, %x: i32) -> i32 attributes {tile.function} {
  %t = arith.constant dense<1.0> : tensor<16xf32>
  "tile.store"(%a, %t, %x) : (!A, tensor<16xf32>, i32) -> ()
  return %x : i32
}

// A helper calling a storing helper stores too.
func.func private @stores_indirectly(%a: !A, %x: i32) -> i32 attributes {tile.function} {
  %r = func.call @stores(%a, %x) : (!A, i32) -> i32
  return %r : i32
}

// CHECK-LABEL: func.func @calls
// CHECK-NOT:     call @pure
// CHECK:         call @stores(
// CHECK-NEXT:    call @stores_indirectly(
// CHECK-NEXT:    return
func.func @calls(%a: !A, %x: i32) attributes {tile.kernel} {
  %p = func.call @pure(%x) : (i32) -> i32
  %s = func.call @stores(%a, %x) : (!A, i32) -> i32
  %si = func.call @stores_indirectly(%a, %x) : (!A, i32) -> i32
  return
}

// -----

// Ops the pass knows nothing about are kept.

// CHECK-LABEL: func.func @unknown_ops
// CHECK:         memref.alloc
func.func @unknown_ops() {
  %m = memref.alloc() : memref<4xf32>
  return
}
