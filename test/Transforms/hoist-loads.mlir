// RUN: tile-opt %s -split-input-file --tile-hoist-loads | FileCheck %s
// RUN: tile-opt %s -split-input-file --target=sm_80 --tile-hoist-loads | FileCheck %s --check-prefix=SM80

!A = !tile.array<f32, 2 : i64>
!V = !tile.array<f32, 1 : i64>

// LayerNorm's weight load goes up past the reduction (its operands are ready at the
// top), to just below the row's load; the store stays where it is.  Not on sm_80.
// SM80-LABEL: func.func @norm
// SM80:         "tile.reduce"
// SM80:         "tile.load"(%arg1
// CHECK-LABEL: func.func @norm
// CHECK:         %[[R:.*]] = "tile.bid"
// CHECK-NEXT:    %[[X:.*]] = "tile.load"(%arg0, %[[R]], %[[C0:[a-z0-9_]+]])
// CHECK-NEXT:    %[[W:.*]] = "tile.load"(%arg1, %[[C0]])
// CHECK-NEXT:    %[[S:.*]] = "tile.reduce"(%[[X]])
// CHECK:         "tile.store"
func.func @norm(%x: !A, %w: !V, %y: !A) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %r = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %r, %c0) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
  %s = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
  %s2 = "tile.reshape"(%s) : (tensor<1xf32>) -> tensor<1x1xf32>
  %sb = "tile.broadcast"(%s2) : (tensor<1x1xf32>) -> tensor<1x256xf32>
  %d = arith.subf %t, %sb : tensor<1x256xf32>
  %g = "tile.load"(%w, %c0) {padding = "zero", tile_shape = array<i64: 256>} : (!V, i32) -> tensor<256xf32>
  %g2 = "tile.reshape"(%g) : (tensor<256xf32>) -> tensor<1x256xf32>
  %o = arith.mulf %d, %g2 : tensor<1x256xf32>
  "tile.store"(%y, %o, %r, %c0) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  return
}

// -----

!A = !tile.array<f32, 2 : i64>

// A load stays below a store (it may read what the store wrote), below a loop (it
// would hold its registers through it), and below what computes its index.
// CHECK-LABEL: func.func @stays
// CHECK:         "tile.store"
// CHECK-NEXT:    %[[A:.*]] = "tile.load"
// CHECK:         scf.for
// CHECK:         }
// CHECK-NEXT:    %[[B:.*]] = "tile.load"
// CHECK:         %[[I:.*]] = arith.addi
// CHECK-NEXT:    "tile.load"(%arg0, %[[I]]
func.func @stays(%x: !A, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %t = "tile.load"(%x, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
  "tile.store"(%x, %t, %c1, %c0) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  %a = "tile.load"(%x, %c1, %c0) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
  %z = arith.constant dense<0.0> : tensor<1x256xf32>
  %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<1x256xf32>) : i32 {
    %e = math.exp %acc : tensor<1x256xf32>
    scf.yield %e : tensor<1x256xf32>
  }
  %b = "tile.load"(%x, %c1, %c0) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
  %u = arith.addf %a, %b : tensor<1x256xf32>
  %v = arith.addf %u, %s : tensor<1x256xf32>
  %i = arith.addi %n, %c1 : i32
  %c = "tile.load"(%x, %i, %c0) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
  %w = arith.addf %v, %c : tensor<1x256xf32>
  "tile.store"(%x, %w, %c0, %c0) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  return
}
