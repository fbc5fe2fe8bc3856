// RUN: tile-opt %s -split-input-file --tile-canonicalize | FileCheck %s

// Shape ops to their own source type vanish.

// CHECK-LABEL: func.func @same_type
// CHECK-SAME:    (%[[T:.*]]: tensor<16x32xf32>)
// CHECK-NOT:     tile.broadcast
// CHECK-NOT:     tile.reshape
// CHECK:         return %[[T]], %[[T]]
func.func @same_type(%t: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>) attributes {tile.function} {
  %0 = "tile.broadcast"(%t) : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %1 = "tile.reshape"(%t) : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0, %1 : tensor<16x32xf32>, tensor<16x32xf32>
}

// -----

// A chain of reshapes is one reshape; a chain back to the source is nothing.

// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME:    (%[[T:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[R:.*]] = "tile.reshape"(%[[T]]) : (tensor<4x8xf32>) -> tensor<2x16xf32>
// CHECK-NEXT:    return %[[R]], %[[T]] : tensor<2x16xf32>, tensor<4x8xf32>
func.func @reshape_chain(%t: tensor<4x8xf32>) -> (tensor<2x16xf32>, tensor<4x8xf32>) attributes {tile.function} {
  %0 = "tile.reshape"(%t) : (tensor<4x8xf32>) -> tensor<32xf32>
  %1 = "tile.reshape"(%0) : (tensor<32xf32>) -> tensor<1x32xf32>
  %2 = "tile.reshape"(%1) : (tensor<1x32xf32>) -> tensor<2x16xf32>
  %3 = "tile.reshape"(%2) : (tensor<2x16xf32>) -> tensor<4x8xf32>
  return %2, %3 : tensor<2x16xf32>, tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_chain
// CHECK-SAME:    (%[[T:.*]]: tensor<1x1xf16>)
// CHECK-NEXT:    %[[B:.*]] = "tile.broadcast"(%[[T]]) : (tensor<1x1xf16>) -> tensor<8x16xf16>
// CHECK-NEXT:    return %[[B]]
func.func @broadcast_chain(%t: tensor<1x1xf16>) -> tensor<8x16xf16> attributes {tile.function} {
  %0 = "tile.broadcast"(%t) : (tensor<1x1xf16>) -> tensor<1x16xf16>
  %1 = "tile.broadcast"(%0) : (tensor<1x16xf16>) -> tensor<8x16xf16>
  return %1 : tensor<8x16xf16>
}

// -----

// Identity permutations vanish; permutes compose.

// CHECK-LABEL: func.func @permutes
// CHECK-SAME:    (%[[T:.*]]: tensor<2x4x8xf32>)
// CHECK-NEXT:    %[[P:.*]] = "tile.permute"(%[[T]]) {permutation = array<i64: 1, 2, 0>} : (tensor<2x4x8xf32>) -> tensor<4x8x2xf32>
// CHECK-NEXT:    return %[[T]], %[[T]], %[[P]]
func.func @permutes(%t: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x8x2xf32>) attributes {tile.function} {
  %id = "tile.permute"(%t) {permutation = array<i64: 0, 1, 2>} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // Transposing twice is the identity.
  %a = "tile.permute"(%t) {permutation = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %b = "tile.permute"(%a) {permutation = array<i64: 0, 2, 1>} : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  // (1 0 2) then (0 2 1): out[i] = src[inner[perm[i]]], i.e. (1 2 0).
  %c = "tile.permute"(%t) {permutation = array<i64: 1, 0, 2>} : (tensor<2x4x8xf32>) -> tensor<4x2x8xf32>
  %d = "tile.permute"(%c) {permutation = array<i64: 0, 2, 1>} : (tensor<4x2x8xf32>) -> tensor<4x8x2xf32>
  return %id, %b, %d : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x8x2xf32>
}

// -----

// Shape ops of a splat are a splat (of a runtime scalar or of a constant).

// CHECK-LABEL: func.func @splats
// CHECK-SAME:    (%[[S:.*]]: f32)
// CHECK-DAG:     %[[C:.*]] = arith.constant dense<2.000000e+00> : tensor<16x32xf32>
// CHECK-DAG:     %[[B:.*]] = tensor.splat %[[S]] : tensor<16x32xf32>
// CHECK-DAG:     %[[R:.*]] = tensor.splat %[[S]] : tensor<32xf32>
// CHECK-DAG:     %[[P:.*]] = tensor.splat %[[S]] : tensor<32x1xf32>
// CHECK-NOT:     tile.
// CHECK:         return %[[B]], %[[C]], %[[R]], %[[P]]
func.func @splats(%s: f32) -> (tensor<16x32xf32>, tensor<16x32xf32>, tensor<32xf32>, tensor<32x1xf32>) attributes {tile.function} {
  %splat = tensor.splat %s : tensor<1x32xf32>
  %b = "tile.broadcast"(%splat) : (tensor<1x32xf32>) -> tensor<16x32xf32>
  %cst = arith.constant dense<2.0> : tensor<1x32xf32>
  %c = "tile.broadcast"(%cst) : (tensor<1x32xf32>) -> tensor<16x32xf32>
  %r = "tile.reshape"(%splat) : (tensor<1x32xf32>) -> tensor<32xf32>
  %p = "tile.permute"(%splat) {permutation = array<i64: 1, 0>} : (tensor<1x32xf32>) -> tensor<32x1xf32>
  return %b, %c, %r, %p : tensor<16x32xf32>, tensor<16x32xf32>, tensor<32xf32>, tensor<32x1xf32>
}

// -----

// Reducing a size-1 axis is a reshape; its argmax/argmin is 0.

// CHECK-LABEL: func.func @reduce_size_one
// CHECK-SAME:    (%[[T:.*]]: tensor<1x64xf32>, %[[V:.*]]: tensor<1xi32>)
// CHECK-DAG:     %[[Z:.*]] = arith.constant dense<0> : tensor<64xi32>
// CHECK:         %[[SUM:.*]] = "tile.reshape"(%[[T]]) : (tensor<1x64xf32>) -> tensor<64xf32>
// CHECK-NEXT:    %[[PROD:.*]] = "tile.reshape"(%[[T]]) : (tensor<1x64xf32>) -> tensor<64xf32>
// CHECK-NEXT:    %[[MAX:.*]] = "tile.reshape"(%[[V]]) : (tensor<1xi32>) -> tensor<i32>
// CHECK-NOT:     tile.reduce
// CHECK:         return %[[SUM]], %[[PROD]], %[[Z]], %[[MAX]]
func.func @reduce_size_one(%t: tensor<1x64xf32>, %v: tensor<1xi32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xi32>, tensor<i32>) attributes {tile.function} {
  %sum = "tile.reduce"(%t) {kind = "sum", axis = 0 : i64} : (tensor<1x64xf32>) -> tensor<64xf32>
  %prod = "tile.reduce"(%t) {kind = "prod", axis = 0 : i64} : (tensor<1x64xf32>) -> tensor<64xf32>
  %arg = "tile.reduce"(%t) {kind = "argmin", axis = 0 : i64} : (tensor<1x64xf32>) -> tensor<64xi32>
  %max = "tile.reduce"(%v) {kind = "max", axis = 0 : i64} : (tensor<1xi32>) -> tensor<i32>
  return %sum, %prod, %arg, %max : tensor<64xf32>, tensor<64xf32>, tensor<64xi32>, tensor<i32>
}

// -----

// max/min/argmax of a splat need no reduction; sum/prod of a splat stay (rounding).

// CHECK-LABEL: func.func @reduce_splat
// CHECK-SAME:    (%[[S:.*]]: f16)
// CHECK-DAG:     %[[Z:.*]] = arith.constant dense<0> : tensor<16xi32>
// CHECK-DAG:     %[[M:.*]] = tensor.splat %[[S]] : tensor<16xf16>
// CHECK-DAG:     %[[SP:.*]] = tensor.splat %[[S]] : tensor<16x32xf16>
// CHECK-DAG:     %[[SUM:.*]] = "tile.reduce"(%[[SP]]) {axis = 1 : i64, kind = "sum"}
// CHECK:         return %[[M]], %[[Z]], %[[SUM]]
func.func @reduce_splat(%s: f16) -> (tensor<16xf16>, tensor<16xi32>, tensor<16xf16>) attributes {tile.function} {
  %splat = tensor.splat %s : tensor<16x32xf16>
  %max = "tile.reduce"(%splat) {kind = "max", axis = 1 : i64} : (tensor<16x32xf16>) -> tensor<16xf16>
  %arg = "tile.reduce"(%splat) {kind = "argmax", axis = 1 : i64} : (tensor<16x32xf16>) -> tensor<16xi32>
  %sum = "tile.reduce"(%splat) {kind = "sum", axis = 1 : i64} : (tensor<16x32xf16>) -> tensor<16xf16>
  return %max, %arg, %sum : tensor<16xf16>, tensor<16xi32>, tensor<16xf16>
}

// -----

// The NaN-ignoring kinds fold alike (a NaN splat is NaN, its argmaxnum 0), and so
// does a directed sum of one element (nothing is rounded); a flushing reduction
// (tile.ftz) stays, since it flushes its one element.

// CHECK-LABEL: func.func @reduce_nan_ignoring_and_options
// CHECK-SAME:    (%[[T:.*]]: tensor<1x64xf32>, %[[S:.*]]: f32)
// CHECK-DAG:     %[[Z:.*]] = arith.constant dense<0> : tensor<16xi32>
// CHECK-DAG:     %[[M:.*]] = tensor.splat %[[S]] : tensor<16xf32>
// CHECK-DAG:     %[[SUM:.*]] = "tile.reshape"(%[[T]]) : (tensor<1x64xf32>) -> tensor<64xf32>
// CHECK-DAG:     %[[FTZ:.*]] = "tile.reduce"(%[[T]]) {axis = 0 : i64, kind = "maxnum", tile.ftz = "true"}
// CHECK:         return %[[M]], %[[Z]], %[[SUM]], %[[FTZ]]
func.func @reduce_nan_ignoring_and_options(%t: tensor<1x64xf32>, %s: f32) -> (tensor<16xf32>, tensor<16xi32>, tensor<64xf32>, tensor<64xf32>) attributes {tile.function} {
  %splat = tensor.splat %s : tensor<16x32xf32>
  %max = "tile.reduce"(%splat) {kind = "maxnum", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xf32>
  %arg = "tile.reduce"(%splat) {kind = "argmaxnum", axis = 1 : i64} : (tensor<16x32xf32>) -> tensor<16xi32>
  %sum = "tile.reduce"(%t) {kind = "sum", axis = 0 : i64, tile.rounding = "rz"} : (tensor<1x64xf32>) -> tensor<64xf32>
  %ftz = "tile.reduce"(%t) {kind = "maxnum", axis = 0 : i64, tile.ftz = "true"} : (tensor<1x64xf32>) -> tensor<64xf32>
  return %max, %arg, %sum, %ftz : tensor<16xf32>, tensor<16xi32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// Upstream canonicalization runs too (arith folding, scf.if on a constant),
// and the tile ops left dead by folding are erased; stores stay.

// CHECK-LABEL: func.func @upstream_and_dead_code
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 1 : i64>, %[[T:.*]]: tensor<16xf32>)
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : i32
// CHECK-NOT:     tile.reshape
// CHECK-NOT:     scf.if
// CHECK:         "tile.store"(%[[A]], %[[T]], %[[C2]])
// CHECK-NEXT:    return
func.func @upstream_and_dead_code(%a: !tile.array<f32, 1 : i64>, %t: tensor<16xf32>) attributes {tile.function} {
  %c1 = arith.constant 1 : i32
  %i = arith.addi %c1, %c1 : i32
  %dead = "tile.reshape"(%t) : (tensor<16xf32>) -> tensor<4x4xf32>
  %true = arith.constant true
  %v = scf.if %true -> (tensor<16xf32>) {
    scf.yield %t : tensor<16xf32>
  } else {
    %n = arith.negf %t : tensor<16xf32>
    scf.yield %n : tensor<16xf32>
  }
  "tile.store"(%a, %v, %i) : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
  return
}

// -----

// tile.dim is a runtime value: nothing to fold.  A reshape between different
// shapes, and a real broadcast, stay.

// CHECK-LABEL: func.func @nothing_to_fold
// CHECK:         "tile.dim"
// CHECK:         "tile.reshape"
// CHECK:         "tile.broadcast"
// CHECK:         "tile.reduce"
func.func @nothing_to_fold(%a: !tile.array<f32, 1 : i64>, %t: tensor<1x16xf32>, %i: i32) attributes {tile.function} {
  %d = "tile.dim"(%a) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  %r = "tile.reshape"(%t) : (tensor<1x16xf32>) -> tensor<16xf32>
  %b = "tile.broadcast"(%t) : (tensor<1x16xf32>) -> tensor<4x16xf32>
  %s = "tile.reduce"(%b) {kind = "sum", axis = 0 : i64} : (tensor<4x16xf32>) -> tensor<16xf32>
  %x = arith.addf %r, %s : tensor<16xf32>
  "tile.store"(%a, %x, %d) : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
  return
}

// -----

// A list's element at a constant index is that array; at an index outside the
// list (undefined) or a run-time one the choice stays.

// CHECK-LABEL: func.func @select_array
// CHECK-SAME:    (%[[I:[^:]*]]: i32, %[[A:[^:]*]]: !tile.array<f32, 1 : i64>, %[[B:[^:]*]]: !tile.array<f32, 1 : i64>)
// CHECK:         %[[C5:.*]] = arith.constant 5 : i32
// CHECK-NEXT:    %[[OUT:.*]] = "tile.select_array"(%[[C5]], %[[A]], %[[B]])
// CHECK-NEXT:    %[[RT:.*]] = "tile.select_array"(%[[I]], %[[A]], %[[B]])
// CHECK-NEXT:    "tile.dim"(%[[B]])
// CHECK-NEXT:    "tile.dim"(%[[OUT]])
// CHECK-NEXT:    "tile.dim"(%[[RT]])
// CHECK-NEXT:    "tile.dim"(%[[A]])
func.func @select_array(%i: i32, %a: !tile.array<f32, 1 : i64>, %b: !tile.array<f32, 1 : i64>) -> (i32, i32, i32, i32) attributes {tile.function} {
  %c1 = arith.constant 1 : i32
  %c5 = arith.constant 5 : i32
  %0 = "tile.select_array"(%c1, %a, %b) : (i32, !tile.array<f32, 1 : i64>, !tile.array<f32, 1 : i64>) -> !tile.array<f32, 1 : i64>
  %1 = "tile.select_array"(%c5, %a, %b) : (i32, !tile.array<f32, 1 : i64>, !tile.array<f32, 1 : i64>) -> !tile.array<f32, 1 : i64>
  %2 = "tile.select_array"(%i, %a, %b) : (i32, !tile.array<f32, 1 : i64>, !tile.array<f32, 1 : i64>) -> !tile.array<f32, 1 : i64>
  %3 = "tile.select_array"(%i, %a, %a) : (i32, !tile.array<f32, 1 : i64>, !tile.array<f32, 1 : i64>) -> !tile.array<f32, 1 : i64>
  %d0 = "tile.dim"(%0) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  %d1 = "tile.dim"(%1) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  %d2 = "tile.dim"(%2) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  %d3 = "tile.dim"(%3) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  return %d0, %d1, %d2, %d3 : i32, i32, i32, i32
}
