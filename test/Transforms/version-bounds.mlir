// RUN: tile-opt %s -split-input-file --tile-version-bounds | FileCheck %s

!A = !tile.array<f32, 2 : i64>

// A map over rows: the row's load and store are marked in the first version; the
// condition checks each index against the dim's count of whole tiles (dim >> 8 for
// tiles 256 wide), once per (index, bound), and-ed as a balanced tree.  The second
// version is the kernel as it was.
// CHECK-LABEL: func.func @rows
// CHECK:         %[[R:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK:         %[[D0:.*]] = "tile.dim"(%arg0) {axis = 0 : i64}
// CHECK:         %[[D1:.*]] = "tile.dim"(%arg0) {axis = 1 : i64}
// CHECK:         %[[C8:.*]] = arith.constant 8 : i32
// CHECK:         %[[N1:.*]] = arith.shrui %[[D1]], %[[C8]] : i32
// CHECK:         %[[E0:.*]] = "tile.dim"(%arg1) {axis = 0 : i64}
// CHECK:         %[[E1:.*]] = "tile.dim"(%arg1) {axis = 1 : i64}
// CHECK:         %[[M1:.*]] = arith.shrui %[[E1]]
// CHECK:         %[[K0:.*]] = arith.cmpi ult, %[[R]], %[[D0]] : i32
// CHECK:         %[[K1:.*]] = arith.cmpi ult, %[[R]], %[[E0]] : i32
// CHECK:         %[[K2:.*]] = arith.cmpi ult, %{{.*}}, %[[N1]] : i32
// CHECK:         %[[K3:.*]] = arith.cmpi ult, %{{.*}}, %[[M1]] : i32
// CHECK:         %[[A0:.*]] = arith.andi %[[K0]], %[[K1]] : i1
// CHECK:         %[[A1:.*]] = arith.andi %[[K2]], %[[K3]] : i1
// CHECK:         %[[OK:.*]] = arith.andi %[[A0]], %[[A1]] : i1
// CHECK:         scf.if %[[OK]] {
// CHECK:           "tile.load"(%arg0, {{.*}}) {padding = "zero", tile.in_bounds, tile_shape = array<i64: 1, 256>}
// CHECK:           math.exp
// CHECK:           "tile.store"(%arg1, {{.*}}) {tile.in_bounds}
// CHECK:         } else {
// CHECK:           "tile.load"(%arg0, {{.*}}) {padding = "zero", tile_shape = array<i64: 1, 256>}
// CHECK:           math.exp
// CHECK:           "tile.store"(%arg1, {{.*}}) :
// CHECK:         }
// CHECK-NEXT:    return
func.func @rows(%x: !A, %y: !A) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %r = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %r, %c0) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!A, i32, i32) -> tensor<1x256xf32>
  %o = math.exp %t : tensor<1x256xf32>
  "tile.store"(%y, %o, %r, %c0) : (!A, tensor<1x256xf32>, i32, i32) -> ()
  return
}

// Two halves of a row (column tiles 0 and 1): against one bound only the larger
// constant index is checked.
// CHECK-LABEL: func.func @halves
// CHECK:         %[[C1:.*]] = arith.constant 1 : i32
// CHECK:         %[[N:.*]] = arith.shrui
// CHECK-NOT:     arith.cmpi ult, %c0_i32, %[[N]]
// CHECK:         arith.cmpi ult, %[[C1]], %[[N]]
// CHECK:         scf.if
func.func @halves(%x: !A) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = "tile.bid"() {axis = 0 : i64} : () -> i32
  %a = "tile.load"(%x, %r, %c0) {padding = "zero", tile_shape = array<i64: 1, 64>} : (!A, i32, i32) -> tensor<1x64xf32>
  %b = "tile.load"(%x, %r, %c1) {padding = "zero", tile_shape = array<i64: 1, 64>} : (!A, i32, i32) -> tensor<1x64xf32>
  "tile.store"(%x, %b, %r, %c0) : (!A, tensor<1x64xf32>, i32, i32) -> ()
  "tile.store"(%x, %a, %r, %c1) : (!A, tensor<1x64xf32>, i32, i32) -> ()
  return
}

// -----

!I = !tile.array<i32, 1 : i64>
!V = !tile.array<f32, 1 : i64>

// An index read from memory cannot be checked before the branch: that load stays
// checked in both versions; the others are marked.  So is a relaxed store.
// CHECK-LABEL: func.func @gathered
// CHECK:         scf.if
// CHECK:           "tile.load"(%arg0, %{{.*}}) {padding = "zero", tile.in_bounds, tile_shape = array<i64: 1>}
// CHECK:           "tile.load"(%arg1, %{{.*}}) {padding = "zero", tile_shape = array<i64: 64>}
// CHECK:           "tile.store"(%arg2, {{.*}}) {tile.in_bounds}
// CHECK:           "tile.store"(%arg2, {{.*}}) {tile.memory_scope = "device"}
// CHECK:         } else {
// CHECK-NOT:       tile.in_bounds
// CHECK:         }
func.func @gathered(%idx: !I, %x: !V, %y: !V) attributes {tile.kernel} {
  %c0 = arith.constant 0 : index
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%idx, %b) {padding = "zero", tile_shape = array<i64: 1>} : (!I, i32) -> tensor<1xi32>
  %row = tensor.extract %t[%c0] : tensor<1xi32>
  %v = "tile.load"(%x, %row) {padding = "zero", tile_shape = array<i64: 64>} : (!V, i32) -> tensor<64xf32>
  "tile.store"(%y, %v, %b) : (!V, tensor<64xf32>, i32) -> ()
  "tile.store"(%y, %v, %b) {tile.memory_scope = "device"} : (!V, tensor<64xf32>, i32) -> ()
  return
}

// -----

!V = !tile.array<f32, 1 : i64>

// Kernels with loops or reductions stay as they are, and so do persistent ones and
// kernels with nothing to mark.
// CHECK-LABEL: func.func @looped
// CHECK-NOT:     scf.if
// CHECK-NOT:     tile.in_bounds
// CHECK:         return
func.func @looped(%x: !V, %y: !V, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %acc0 = arith.constant dense<0.0> : tensor<64xf32>
  %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %acc0) -> (tensor<64xf32>) : i32 {
    %t = "tile.load"(%x, %k) {padding = "zero", tile_shape = array<i64: 64>} : (!V, i32) -> tensor<64xf32>
    %a = arith.addf %acc, %t : tensor<64xf32>
    scf.yield %a : tensor<64xf32>
  }
  "tile.store"(%y, %s, %c0) : (!V, tensor<64xf32>, i32) -> ()
  return
}

// CHECK-LABEL: func.func @reducing
// CHECK-NOT:     tile.in_bounds
// CHECK:         return
func.func @reducing(%x: !V, %y: !V) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 64>} : (!V, i32) -> tensor<64xf32>
  %s = "tile.reduce"(%t) {axis = 0 : i64, kind = "sum"} : (tensor<64xf32>) -> tensor<f32>
  %s1 = "tile.reshape"(%s) : (tensor<f32>) -> tensor<1xf32>
  %sb = "tile.broadcast"(%s1) : (tensor<1xf32>) -> tensor<64xf32>
  "tile.store"(%y, %sb, %b) : (!V, tensor<64xf32>, i32) -> ()
  return
}

// CHECK-LABEL: func.func @persistent
// CHECK-NOT:     tile.in_bounds
// CHECK:         return
func.func @persistent(%x: !V, %y: !V) attributes {tile.kernel, tile.persistent = true} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 64>} : (!V, i32) -> tensor<64xf32>
  "tile.store"(%y, %t, %b) : (!V, tensor<64xf32>, i32) -> ()
  return
}

// CHECK-LABEL: func.func @nothing
// CHECK-NOT:     scf.if
// CHECK:         return
func.func @nothing(%y: !V, %v: f32) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%y, %b) {padding = "zero", tile_shape = array<i64: 64>, tile.memory_scope = "device"} : (!V, i32) -> tensor<64xf32>
  return
}

// -----

!S = !tile.array<f64, 0 : i64>

// A rank-0 array has its one element: nothing to check, the condition is true.
// CHECK-LABEL: func.func @scalar
// CHECK:         %[[T:.*]] = arith.constant true
// CHECK:         scf.if %[[T]] {
// CHECK:           "tile.load"(%arg0) {padding = "zero", tile.in_bounds, tile_shape = array<i64>}
func.func @scalar(%s: !S, %o: !S) attributes {tile.kernel} {
  %t = "tile.load"(%s) {padding = "zero", tile_shape = array<i64>} : (!S) -> tensor<f64>
  "tile.store"(%o, %t) : (!S, tensor<f64>) -> ()
  return
}

// -----

!V = !tile.array<f32, 1 : i64>

// A kernel that waits for the previous one in the stream: what comes before the wait
// stays before it; the condition is computed after the wait (the dims it reads may be
// that kernel's output) and only what follows is versioned (releasing the next kernel
// is part of it).
// CHECK-LABEL: func.func @after_the_wait
// CHECK:         %[[B:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:    "tile.grid_dependency"() {kind = "wait"}
// CHECK-NEXT:    "tile.dim"(%arg0)
// CHECK:         scf.if
// CHECK:           "tile.load"(%arg0, %[[B]]) {padding = "zero", tile.in_bounds, tile_shape = array<i64: 64>}
// CHECK:         } else {
// CHECK:           "tile.load"(%arg0, %[[B]]) {padding = "zero", tile_shape = array<i64: 64>}
// CHECK:           "tile.grid_dependency"() {kind = "launch_dependents"}
// CHECK:         }
// CHECK-NEXT:    return
func.func @after_the_wait(%x: !V, %y: !V) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  "tile.grid_dependency"() {kind = "wait"} : () -> ()
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 64>} : (!V, i32) -> tensor<64xf32>
  "tile.store"(%y, %t, %b) : (!V, tensor<64xf32>, i32) -> ()
  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
  return
}
