// RUN: tile-opt %s -split-input-file --tile-reverse-rereads | FileCheck %s

!A = !tile.array<f32, 2 : i64>

// A softmax's second pass re-reads the row slabs the first pass read, and writes
// each slab it reads: it runs backwards, its counter's uses become n - 1 - k.
// CHECK-LABEL: func.func @second_pass
// CHECK:         scf.for %[[K0:[a-z0-9_]+]] = %[[C0:.*]] to %[[N:.*]] step %[[C1:.*]] iter_args
// CHECK-NEXT:      "tile.load"(%arg0, %{{.*}}, %[[K0]])
// CHECK:         %[[LAST:.*]] = arith.subi %[[N]], %[[C1]] : i32
// CHECK-NEXT:    scf.for %[[K:[a-z0-9_]+]] = %[[C0]] to %[[N]] step %[[C1]]  : i32 {
// CHECK-NEXT:      %[[J:.*]] = arith.subi %[[LAST]], %[[K]] : i32
// CHECK-NEXT:      %[[T:.*]] = "tile.load"(%arg0, %[[R:.*]], %[[J]])
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[T]]
// CHECK-NEXT:      "tile.store"(%arg1, %[[E]], %[[R]], %[[J]])
func.func @second_pass(%x: !A, %y: !A) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<1xf32>
  %r = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!A) -> i32
  %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    %m = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %a = arith.addf %acc, %m : tensor<1xf32>
    scf.yield %a : tensor<1xf32>
  }
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    %e = math.exp %t : tensor<1x256xf32>
    "tile.store"(%y, %e, %r, %k) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  }
  return
}

// -----

!A = !tile.array<f32, 2 : i64>

// Not reversed: the re-reading loop carries a value (order may matter), reads
// another trip count, or reads another array than the first loop did.
// CHECK-LABEL: func.func @kept
// CHECK-NOT:     arith.subi
// CHECK:         return
func.func @kept(%x: !A, %w: !A, %y: !A, %m: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<1xf32>
  %r = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!A) -> i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    "tile.store"(%y, %t, %r, %k) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  }
  %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    %q = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %a = arith.addf %acc, %q : tensor<1xf32>
    scf.yield %a : tensor<1xf32>
  }
  scf.for %k = %c0 to %m step %c1 : i32 {
    %t = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    "tile.store"(%y, %t, %r, %k) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  }
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%w, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    "tile.store"(%y, %t, %r, %k) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  }
  return
}

// -----

!A = !tile.array<f32, 2 : i64>

// Not a map over slabs, so the order may matter: a load of slab k + 1 (iteration
// k reads what iteration k + 1 writes), a loop-invariant load beside a store, a
// store of another extent along the counter's dim.
// CHECK-LABEL: func.func @not_maps
// CHECK-NOT:     arith.subi %{{.*}}, %{{.*}} : i32
// CHECK:         return
func.func @not_maps(%x: !A, %y: !A) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!A) -> i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    "tile.store"(%y, %t, %r, %k) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  }
  scf.for %k = %c0 to %n step %c1 : i32 {
    %k1 = arith.addi %k, %c1 : i32
    %t = "tile.load"(%x, %r, %k1) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    %u = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    "tile.store"(%x, %t, %r, %k) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  }
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    %w = "tile.load"(%y, %r, %c0) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    %s = arith.addf %t, %w : tensor<1x256xf32>
    "tile.store"(%y, %s, %r, %k) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  }
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
    %h = "tile.reshape"(%t) : (tensor<1x256xf32>) -> tensor<2x128xf32>
    "tile.store"(%y, %h, %r, %k) : (!A, tensor<2x128xf32>, i32, i32) -> ()
  }
  return
}
