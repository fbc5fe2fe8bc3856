// RUN: tile-opt %s -split-input-file --tile-licm | FileCheck %s

// Pure, speculatable ops whose operands come from outside the loop move out,
// chains included; ops using the induction variable or loop-carried values stay.

// CHECK-LABEL: func.func @hoist
// CHECK-SAME:    (%[[S:.*]]: f32, %[[N:.*]]: i32)
// CHECK:         %[[B:.*]] = "tile.bid"
// CHECK-NEXT:    %[[SP:.*]] = tensor.splat %[[S]] : tensor<1x16xf32>
// CHECK-NEXT:    %[[BC:.*]] = "tile.broadcast"(%[[SP]])
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[BC]]
// CHECK-NEXT:    scf.for %[[I:[a-z0-9_]+]] = {{.*}} iter_args(%[[ACC:[a-z0-9_]+]] = {{.*}})
// CHECK-NEXT:      %[[X:.*]] = arith.addi %[[I]], %[[B]] : i32
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[E]]
// CHECK-NEXT:      scf.yield %[[SUM]]
func.func @hoist(%s: f32, %n: i32) -> tensor<16x16xf32> attributes {tile.function} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<16x16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<16x16xf32>) : i32 {
    %b = "tile.bid"() {axis = 0 : i64} : () -> i32
    %x = arith.addi %i, %b : i32
    %sp = tensor.splat %s : tensor<1x16xf32>
    %bc = "tile.broadcast"(%sp) : (tensor<1x16xf32>) -> tensor<16x16xf32>
    %e = math.exp %bc : tensor<16x16xf32>
    %sum = arith.addf %acc, %e : tensor<16x16xf32>
    scf.yield %sum : tensor<16x16xf32>
  }
  return %r : tensor<16x16xf32>
}

// -----

// Loads and stores stay (the loop may write what it reads); so do integer
// divisions (they may trap if the loop would not have run).

!A = !tile.array<f32, 1 : i64>

// CHECK-LABEL: func.func @stays
// CHECK:         scf.for
// CHECK-NEXT:      "tile.load"
// CHECK-NEXT:      arith.divsi
// CHECK-NEXT:      arith.remui
// CHECK-NEXT:      arith.addi
// CHECK-NEXT:      "tile.store"
func.func @stays(%a: !A, %n: i32, %d: i32) attributes {tile.function} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%a, %c0) {tile_shape = array<i64: 16>, padding = "zero"} : (!A, i32) -> tensor<16xf32>
    %q = arith.divsi %n, %d : i32
    %r = arith.remui %n, %d : i32
    %s = arith.addi %q, %r : i32
    "tile.store"(%a, %t, %s) : (!A, tensor<16xf32>, i32) -> ()
  }
  return
}

// -----

// Nested loops: an invariant of both loops climbs out of both; one that uses
// the outer induction variable stops between them.

// CHECK-LABEL: func.func @nested
// CHECK-SAME:    (%[[N:.*]]: i32)
// CHECK:         %[[BOTH:.*]] = arith.muli %[[N]], %[[N]] : i32
// CHECK-NEXT:    scf.for %[[I:[a-z0-9_]+]] =
// CHECK-NEXT:      %[[OUTER:.*]] = arith.addi %[[I]], %[[BOTH]] : i32
// CHECK-NEXT:      scf.for %[[J:[a-z0-9_]+]] =
// CHECK-NEXT:        arith.addi %[[J]], %[[OUTER]] : i32
func.func @nested(%n: i32) -> i32 attributes {tile.function} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %c0) -> (i32) : i32 {
    %r2 = scf.for %j = %c0 to %n step %c1 iter_args(%b = %a) -> (i32) : i32 {
      %both = arith.muli %n, %n : i32
      %outer = arith.addi %i, %both : i32
      %inner = arith.addi %j, %outer : i32
      %s = arith.addi %b, %inner : i32
      scf.yield %s : i32
    }
    scf.yield %r2 : i32
  }
  return %r : i32
}

// -----

// Nothing moves out of scf.if: its branches run conditionally.

// CHECK-LABEL: func.func @conditional
// CHECK:         scf.if
// CHECK-NEXT:      "tile.iota"
func.func @conditional(%c: i1) -> tensor<16xi32> attributes {tile.function} {
  %r = scf.if %c -> (tensor<16xi32>) {
    %x = "tile.iota"() : () -> tensor<16xi32>
    scf.yield %x : tensor<16xi32>
  } else {
    %z = arith.constant dense<0> : tensor<16xi32>
    scf.yield %z : tensor<16xi32>
  }
  return %r : tensor<16xi32>
}
