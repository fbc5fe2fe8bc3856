// RUN: tile-opt %s -split-input-file --tile-cse | FileCheck %s

// Identical pure tile ops merge: same name, operands, attributes, types.

// CHECK-LABEL: func.func @pure_tile_ops
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 2 : i64>, %[[T:.*]]: tensor<16x32xf32>)
// CHECK-NEXT:    %[[B0:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:    %[[B1:.*]] = "tile.bid"() {axis = 1 : i64}
// CHECK-NEXT:    %[[D:.*]] = "tile.dim"(%[[A]]) {axis = 0 : i64}
// CHECK-NEXT:    %[[R:.*]] = "tile.reduce"(%[[T]]) {axis = 1 : i64, kind = "sum"}
// CHECK-NEXT:    %[[M:.*]] = "tile.reduce"(%[[T]]) {axis = 1 : i64, kind = "max"}
// CHECK-NEXT:    %[[S:.*]] = "tile.reshape"(%[[T]]) : (tensor<16x32xf32>) -> tensor<512xf32>
// CHECK-NEXT:    %[[S2:.*]] = "tile.reshape"(%[[T]]) : (tensor<16x32xf32>) -> tensor<32x16xf32>
// CHECK-NEXT:    return %[[B0]], %[[B0]], %[[B1]], %[[D]], %[[D]], %[[R]], %[[R]], %[[M]], %[[S]], %[[S]], %[[S2]]
func.func @pure_tile_ops(%a: !tile.array<f32, 2 : i64>, %t: tensor<16x32xf32>)
    -> (i32, i32, i32, i32, i32, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<512xf32>, tensor<512xf32>, tensor<32x16xf32>)
    attributes {tile.function} {
  %b0 = "tile.bid"() {axis = 0 : i64} : () -> i32
  %b0_again = "tile.bid"() {axis = 0 : i64} : () -> i32
  %b1 = "tile.bid"() {axis = 1 : i64} : () -> i32
  %d = "tile.dim"(%a) {axis = 0 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %d_again = "tile.dim"(%a) {axis = 0 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %r = "tile.reduce"(%t) {kind = "sum", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xf32>
  // Attribute order does not matter.
  %r_again = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<16x32xf32>) -> tensor<16xf32>
  %m = "tile.reduce"(%t) {kind = "max", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xf32>
  %s = "tile.reshape"(%t) : (tensor<16x32xf32>) -> tensor<512xf32>
  %s_again = "tile.reshape"(%t) : (tensor<16x32xf32>) -> tensor<512xf32>
  // Same op and operand, different result type: kept.
  %s2 = "tile.reshape"(%t) : (tensor<16x32xf32>) -> tensor<32x16xf32>
  return %b0, %b0_again, %b1, %d, %d_again, %r, %r_again, %m, %s, %s_again, %s2
      : i32, i32, i32, i32, i32, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<512xf32>, tensor<512xf32>, tensor<32x16xf32>
}

// -----

// Merging cascades: once operands merge, their users become identical too;
// arith, math and tensor ops merge as well.

// CHECK-LABEL: func.func @cascade
// CHECK-SAME:    (%[[S:.*]]: f32)
// CHECK-NEXT:    %[[SP:.*]] = tensor.splat %[[S]] : tensor<64xf32>
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[SP]] : tensor<64xf32>
// CHECK-NEXT:    %[[SUM:.*]] = arith.addf %[[E]], %[[SP]] : tensor<64xf32>
// CHECK-NEXT:    %[[B:.*]] = "tile.reshape"(%[[SUM]])
// CHECK-NEXT:    return %[[B]], %[[B]]
func.func @cascade(%s: f32) -> (tensor<8x8xf32>, tensor<8x8xf32>) attributes {tile.function} {
  %a1 = tensor.splat %s : tensor<64xf32>
  %e1 = math.exp %a1 : tensor<64xf32>
  %x1 = arith.addf %e1, %a1 : tensor<64xf32>
  %r1 = "tile.reshape"(%x1) : (tensor<64xf32>) -> tensor<8x8xf32>
  %a2 = tensor.splat %s : tensor<64xf32>
  %e2 = math.exp %a2 : tensor<64xf32>
  %x2 = arith.addf %e2, %a2 : tensor<64xf32>
  %r2 = "tile.reshape"(%x2) : (tensor<64xf32>) -> tensor<8x8xf32>
  return %r1, %r2 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Stores are never merged.  Loads merge only with an earlier identical load
// in the same block and no store in between.

!A = !tile.array<f32, 1 : i64>

// CHECK-LABEL: func.func @loads_and_stores
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 1 : i64>, %[[I:.*]]: i32)
// CHECK-NEXT:    %[[L1:.*]] = "tile.load"(%[[A]], %[[I]])
// CHECK-NEXT:    %[[X:.*]] = arith.addf %[[L1]], %[[L1]]
// CHECK-NEXT:    "tile.store"(%[[A]], %[[X]], %[[I]])
// CHECK-NEXT:    "tile.store"(%[[A]], %[[X]], %[[I]])
// CHECK-NEXT:    %[[L2:.*]] = "tile.load"(%[[A]], %[[I]])
// CHECK-NEXT:    return %[[L2]]
func.func @loads_and_stores(%a: !A, %i: i32) -> tensor<16xf32> attributes {tile.function} {
  %l1 = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "zero"} : (!A, i32) -> tensor<16xf32>
  %l1_again = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "zero"} : (!A, i32) -> tensor<16xf32>
  %x = arith.addf %l1, %l1_again : tensor<16xf32>
  "tile.store"(%a, %x, %i) : (!A, tensor<16xf32>, i32) -> ()
  "tile.store"(%a, %x, %i) : (!A, tensor<16xf32>, i32) -> ()
  // The stores may have changed memory: this load is not the first one.
  %l2 = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "zero"} : (!A, i32) -> tensor<16xf32>
  return %l2 : tensor<16xf32>
}

// -----

// Loads with different padding are different loads.

!A = !tile.array<f32, 1 : i64>

// CHECK-LABEL: func.func @load_attributes
// CHECK:         "tile.load"{{.*}}padding = "zero"
// CHECK-NEXT:    "tile.load"{{.*}}padding = "nan"
func.func @load_attributes(%a: !A, %i: i32) -> (tensor<16xf32>, tensor<16xf32>) attributes {tile.function} {
  %z = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "zero"} : (!A, i32) -> tensor<16xf32>
  %n = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "nan"} : (!A, i32) -> tensor<16xf32>
  return %z, %n : tensor<16xf32>, tensor<16xf32>
}

// -----

// Values from the enclosing block are reused inside scf regions; a load is not
// reused inside a loop (an earlier iteration may have stored), and values are
// never shared between functions.

!A = !tile.array<f32, 1 : i64>

// CHECK-LABEL: func.func @regions
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 1 : i64>, %[[N:.*]]: i32)
// CHECK:         %[[B:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK:         %[[L:.*]] = "tile.load"(%[[A]], %[[B]])
// CHECK:         scf.for
// CHECK-NOT:       "tile.bid"
// CHECK:           %[[IN:.*]] = "tile.load"(%[[A]], %[[B]])
// CHECK:           "tile.store"(%[[A]], %[[IN]], %[[B]])
// CHECK:         }
// CHECK:         return %[[L]]
func.func @regions(%a: !A, %n: i32) -> tensor<16xf32> attributes {tile.function} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %l = "tile.load"(%a, %b) {tile_shape = array<i64: 16>, padding = "zero"} : (!A, i32) -> tensor<16xf32>
  scf.for %k = %c0 to %n step %c1 : i32 {
    %b_in = "tile.bid"() {axis = 0 : i64} : () -> i32
    %l_in = "tile.load"(%a, %b_in) {tile_shape = array<i64: 16>, padding = "zero"} : (!A, i32) -> tensor<16xf32>
    "tile.store"(%a, %l_in, %b_in) : (!A, tensor<16xf32>, i32) -> ()
  }
  return %l : tensor<16xf32>
}

// CHECK-LABEL: func.func @other_function
// CHECK-NEXT:    %[[B:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:    return %[[B]]
func.func @other_function() -> i32 attributes {tile.function} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  return %b : i32
}

// -----

// Values defined in one branch of an scf.if are not visible in the other.

// CHECK-LABEL: func.func @branches
// CHECK:         scf.if
// CHECK-NEXT:      "tile.iota"
// CHECK:         } else {
// CHECK-NEXT:      "tile.iota"
func.func @branches(%c: i1) -> tensor<16xi32> attributes {tile.function} {
  %r = scf.if %c -> (tensor<16xi32>) {
    %x = "tile.iota"() : () -> tensor<16xi32>
    scf.yield %x : tensor<16xi32>
  } else {
    %y = "tile.iota"() : () -> tensor<16xi32>
    scf.yield %y : tensor<16xi32>
  }
  return %r : tensor<16xi32>
}

// -----

// Calls merge when the callee is pure, not when it stores.

!A = !tile.array<f32, 1 : i64>

func.func private @pure(%x: i32) -> i32 attributes {tile.function} {
  %y = arith.muli %x, %x : i32
  return %y : i32
}

func.func private @stores(%a: !A, %x: i32) -> i32 attributes {tile.function} {
  %t = arith.constant dense<1.0> : tensor<16xf32>
  "tile.store"(%a, %t, %x) : (!A, tensor<16xf32>, i32) -> ()
  return %x : i32
}

// CHECK-LABEL: func.func @calls
// CHECK:         %[[P:.*]] = call @pure
// CHECK-NOT:     call @pure
// CHECK:         call @stores
// CHECK-NEXT:    call @stores
func.func @calls(%a: !A, %x: i32) -> (i32, i32, i32, i32) attributes {tile.function} {
  %p1 = func.call @pure(%x) : (i32) -> i32
  %p2 = func.call @pure(%x) : (i32) -> i32
  %s1 = func.call @stores(%a, %x) : (!A, i32) -> i32
  %s2 = func.call @stores(%a, %x) : (!A, i32) -> i32
  return %p1, %p2, %s1, %s2 : i32, i32, i32, i32
}

// -----

// Functions are isolated from above: a constant at module level is not reused
// inside a function.

// CHECK-LABEL: func.func @isolated
// CHECK-NEXT:    %[[C:.*]] = arith.constant 7 : i32
// CHECK-NEXT:    return %[[C]]
%seven = arith.constant 7 : i32
func.func @isolated() -> i32 attributes {tile.function} {
  %c = arith.constant 7 : i32
  return %c : i32
}
