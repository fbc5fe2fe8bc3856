// RUN: tile-opt %s -split-input-file --tile-inline | FileCheck %s
// RUN: tile-opt %s -split-input-file --tile-inline --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// A helper call becomes the helper's body, arguments mapped to operands and
// results to returned values; the unused private helper is erased.

func.func private @axpy(%a: f32, %x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> attributes {tile.function} {
  %s = tensor.splat %a : tensor<16xf32>
  %ax = arith.mulf %s, %x : tensor<16xf32>
  %r = arith.addf %ax, %y : tensor<16xf32>
  return %r : tensor<16xf32>
}

// CHECK-NOT:     func.func private @axpy
// CHECK-LABEL: func.func @simple
// CHECK-SAME:    (%[[A:.*]]: f32, %[[X:.*]]: tensor<16xf32>, %[[Y:.*]]: tensor<16xf32>)
// CHECK-NEXT:    %[[S:.*]] = tensor.splat %[[A]] : tensor<16xf32>
// CHECK-NEXT:    %[[AX:.*]] = arith.mulf %[[S]], %[[X]]
// CHECK-NEXT:    %[[R:.*]] = arith.addf %[[AX]], %[[Y]]
// CHECK-NEXT:    %[[B:.*]] = math.exp %[[R]]
// CHECK-NEXT:    return %[[B]]

// Inlined ops are located at the helper's line, called from the call's line.
// LOC-LABEL: func.func @simple
// LOC:         tensor.splat {{.*}} loc(#[[SPLAT:loc[0-9]+]])
// LOC:         math.exp {{.*}} loc(#[[EXP:loc[0-9]+]])
// LOC-DAG:     #[[HELPER_LINE:loc[0-9]+]] = loc("{{.*}}inline.mlir":8:8)
// LOC-DAG:     #[[CALL_LINE:loc[0-9]+]] = loc("{{.*}}inline.mlir":32:8)
// LOC-DAG:     #[[EXP]] = loc("{{.*}}inline.mlir":33:8)
// LOC-DAG:     #[[SPLAT]] = loc(callsite(#[[HELPER_LINE]] at #[[CALL_LINE]]))
func.func @simple(%a: f32, %x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> attributes {tile.function} {
  %r = func.call @axpy(%a, %x, %y) : (f32, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %b = math.exp %r : tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

// Helpers calling helpers, called twice, inside a loop: every call inlined.

func.func private @square(%x: i32) -> i32 attributes {tile.function} {
  %y = arith.muli %x, %x : i32
  return %y : i32
}

func.func private @fourth(%x: i32) -> i32 attributes {tile.function} {
  %y = func.call @square(%x) : (i32) -> i32
  %z = func.call @square(%y) : (i32) -> i32
  return %z : i32
}

// CHECK-NOT:     @square
// CHECK-NOT:     @fourth
// CHECK-LABEL: func.func @nested
// CHECK-SAME:    (%[[N:.*]]: i32)
// CHECK:         scf.for %[[I:[a-z0-9_]+]] = {{.*}} iter_args(%[[ACC:[a-z0-9_]+]] = %[[N]])
// CHECK-NEXT:      %[[S1:.*]] = arith.muli %[[ACC]], %[[ACC]] : i32
// CHECK-NEXT:      %[[S2:.*]] = arith.muli %[[S1]], %[[S1]] : i32
// CHECK-NEXT:      scf.yield %[[S2]] : i32
// CHECK-NOT:     call
func.func @nested(%n: i32) -> i32 attributes {tile.function} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %n) -> (i32) : i32 {
    %f = func.call @fourth(%acc) : (i32) -> i32
    scf.yield %f : i32
  }
  return %r : i32
}

// -----

// A helper returning an argument unchanged, and one returning nothing but
// storing: results map to the right values, stores survive.

!A = !tile.array<f32, 1 : i64>

func.func private @identity(%t: tensor<16xf32>) -> tensor<16xf32> attributes {tile.function} {
  return %t : tensor<16xf32>
}

func.func private @put(%a: !A, %t: tensor<16xf32>, %i: i32) attributes {tile.function} {
  "tile.store"(%a, %t, %i) : (!A, tensor<16xf32>, i32) -> ()
  return
}

// CHECK-LABEL: func.func @kernel
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 1 : i64>, %[[T:.*]]: tensor<16xf32>)
// CHECK-NEXT:    %[[B:.*]] = "tile.bid"
// CHECK-NEXT:    "tile.store"(%[[A]], %[[T]], %[[B]])
// CHECK-NEXT:    return
func.func @kernel(%a: !A, %t: tensor<16xf32>) attributes {tile.function} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %same = func.call @identity(%t) : (tensor<16xf32>) -> tensor<16xf32>
  func.call @put(%a, %same, %b) : (!A, tensor<16xf32>, i32) -> ()
  return
}

// -----

// Only tile.function helpers are inlined; a public helper survives its calls;
// calls of other functions stay.

func.func @public_helper(%x: i32) -> i32 attributes {tile.function} {
  return %x : i32
}

func.func private @not_a_helper(%x: i32) -> i32 {
  return %x : i32
}

// CHECK-LABEL: func.func @public_helper
// CHECK-LABEL: func.func private @not_a_helper
// CHECK-LABEL: func.func @caller
// CHECK-NOT:     call @public_helper
// CHECK:         call @not_a_helper
func.func @caller(%x: i32) -> (i32, i32) attributes {tile.function} {
  %a = func.call @public_helper(%x) : (i32) -> i32
  %b = func.call @not_a_helper(%x) : (i32) -> i32
  return %a, %b : i32, i32
}
