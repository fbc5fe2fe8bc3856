// RUN: tile-opt %s -split-input-file --tile-group-blocks | FileCheck %s

// A K loop of mma over a 2-d grid: the block ids become a grouped order of the
// linear block id (groups of 8 along axis 0, walked along axis 1).

// CHECK-LABEL: func.func @gemm_like
// CHECK-DAG:     %[[B0:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-DAG:     %[[B1:.*]] = "tile.bid"() {axis = 1 : i64}
// CHECK-DAG:     %[[G0:.*]] = "tile.num_blocks"() {axis = 0 : i64}
// CHECK-DAG:     %[[G1:.*]] = "tile.num_blocks"() {axis = 1 : i64}
// CHECK:         %[[ROWS:.*]] = arith.muli %[[B1]], %[[G0]] : i32
// CHECK-NEXT:    %[[PID:.*]] = arith.addi %[[ROWS]], %[[B0]] : i32
// CHECK-NEXT:    %[[C8:.*]] = arith.constant 8 : i32
// CHECK-NEXT:    %[[PER:.*]] = arith.muli %[[C8]], %[[G1]] : i32
// CHECK-NEXT:    %[[GROUP:.*]] = arith.divui %[[PID]], %[[PER]] : i32
// CHECK-NEXT:    %[[FIRST:.*]] = arith.muli %[[GROUP]], %[[C8]] : i32
// CHECK-NEXT:    %[[LEFT:.*]] = arith.subi %[[G0]], %[[FIRST]] : i32
// CHECK-NEXT:    %[[SIZE:.*]] = arith.minui %[[LEFT]], %[[C8]] : i32
// CHECK-NEXT:    %[[IN:.*]] = arith.remui %[[PID]], %[[PER]] : i32
// CHECK-NEXT:    %[[R:.*]] = arith.remui %[[IN]], %[[SIZE]] : i32
// CHECK-NEXT:    %[[I:.*]] = arith.addi %[[FIRST]], %[[R]] : i32
// CHECK-NEXT:    %[[J:.*]] = arith.divui %[[IN]], %[[SIZE]] : i32
// CHECK-NOT:     "tile.bid"
// CHECK:         "tile.load"(%arg0, %[[I]], %{{.*}})
// CHECK:         "tile.load"(%arg1, %{{.*}}, %[[J]])
// CHECK:         "tile.store"(%arg2, %{{.*}}, %[[I]], %[[J]])
func.func @gemm_like(%a: !tile.array<bf16, 2 : i64>, %b: !tile.array<bf16, 2 : i64>, %c: !tile.array<f32, 2 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 32>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x32xbf16>
    %tb = "tile.load"(%b, %k, %j) {padding = "zero", tile_shape = array<i64: 32, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<32x64xbf16>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<64x32xbf16>, tensor<32x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  "tile.store"(%c, %r, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}

// -----

// No tensor-core loop, or block_order = "linear": the hardware's order stays.

// CHECK-LABEL: func.func @copy
// CHECK-NEXT:    "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:    "tile.bid"() {axis = 1 : i64}
// CHECK-NOT:     tile.num_blocks
func.func @copy(%a: !tile.array<f32, 2 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %t = "tile.load"(%a, %i, %j) {padding = "zero", tile_shape = array<i64: 32, 32>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<32x32xf32>
  "tile.store"(%c, %t, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<32x32xf32>, i32, i32) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @forced_grouped
// CHECK:         arith.minui
// CHECK-NOT:     "tile.bid"() {axis = 0 : i64}
func.func @forced_grouped(%a: !tile.array<f32, 2 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.block_order = "grouped"} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %t = "tile.load"(%a, %i, %j) {padding = "zero", tile_shape = array<i64: 32, 32>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<32x32xf32>
  "tile.store"(%c, %t, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<32x32xf32>, i32, i32) -> ()
  return
}

// -----

// A batched product (cuTile's BatchMatMul: bid(0) the batch, which indexes only
// the tiles' unit dims): the batch is walked slowest, rows and columns (axes 1
// and 2) grouped in each batch's plane, from the linear id of the 3-d grid.

// CHECK-LABEL: func.func @batch_first
// CHECK-DAG:     %[[B0:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-DAG:     %[[B1:.*]] = "tile.bid"() {axis = 1 : i64}
// CHECK-DAG:     %[[B2:.*]] = "tile.bid"() {axis = 2 : i64}
// CHECK-DAG:     %[[G0:.*]] = "tile.num_blocks"() {axis = 0 : i64}
// CHECK-DAG:     %[[G1:.*]] = "tile.num_blocks"() {axis = 1 : i64}
// CHECK-DAG:     %[[G2:.*]] = "tile.num_blocks"() {axis = 2 : i64}
// CHECK:         %[[ZG:.*]] = arith.muli %[[G1]], %[[B2]] : i32
// CHECK-NEXT:    %[[YZ:.*]] = arith.addi %[[B1]], %[[ZG]] : i32
// CHECK-NEXT:    %[[YZG:.*]] = arith.muli %[[G0]], %[[YZ]] : i32
// CHECK-NEXT:    %[[PID:.*]] = arith.addi %[[B0]], %[[YZG]] : i32
// CHECK-NEXT:    %[[PLANE:.*]] = arith.muli %[[G1]], %[[G2]] : i32
// CHECK-NEXT:    %[[REST:.*]] = arith.remui %[[PID]], %[[PLANE]] : i32
// CHECK-NEXT:    %[[C8:.*]] = arith.constant 8 : i32
// CHECK-NEXT:    %[[PER:.*]] = arith.muli %[[C8]], %[[G2]] : i32
// CHECK:         %[[SIZE:.*]] = arith.minui %{{.*}}, %[[C8]] : i32
// CHECK:         %[[IN:.*]] = arith.remui %[[REST]], %[[PER]] : i32
// CHECK:         %[[I:.*]] = arith.addi %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[J:.*]] = arith.divui %[[IN]], %[[SIZE]] : i32
// CHECK-NEXT:    %[[Z:.*]] = arith.divui %[[PID]], %[[PLANE]] : i32
// CHECK-NOT:     "tile.bid"
// CHECK:         "tile.load"(%arg0, %[[Z]], %[[I]], %{{.*}})
// CHECK:         "tile.load"(%arg1, %[[Z]], %{{.*}}, %[[J]])
// CHECK:         "tile.store"(%arg2, %{{.*}}, %[[Z]], %[[I]], %[[J]])
func.func @batch_first(%a: !tile.array<bf16, 3 : i64>, %b: !tile.array<bf16, 3 : i64>, %c: !tile.array<f32, 3 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = "tile.bid"() {axis = 0 : i64} : () -> i32
  %i = "tile.bid"() {axis = 1 : i64} : () -> i32
  %j = "tile.bid"() {axis = 2 : i64} : () -> i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %la = "tile.load"(%a, %z, %i, %k) {padding = "zero", tile_shape = array<i64: 1, 64, 32>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x32xbf16>
    %ta = "tile.reshape"(%la) : (tensor<1x64x32xbf16>) -> tensor<64x32xbf16>
    %lb = "tile.load"(%b, %z, %k, %j) {padding = "zero", tile_shape = array<i64: 1, 32, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x32x64xbf16>
    %tb = "tile.reshape"(%lb) : (tensor<1x32x64xbf16>) -> tensor<32x64xbf16>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<64x32xbf16>, tensor<32x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  %r3 = "tile.reshape"(%r) : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  "tile.store"(%c, %r3, %z, %i, %j) : (!tile.array<f32, 3 : i64>, tensor<1x64x64xf32>, i32, i32, i32) -> ()
  return
}

// -----

// The batch on axis 2 (the hardware walks it last already): axes 0 and 1 grouped
// as in a 2-d GEMM, bid(2) kept.

// CHECK-LABEL: func.func @batch_last
// CHECK:         arith.minui
// CHECK:         %[[Z:.*]] = "tile.bid"() {axis = 2 : i64}
// CHECK:         "tile.load"(%arg0, %[[Z]],
func.func @batch_last(%a: !tile.array<bf16, 3 : i64>, %b: !tile.array<bf16, 3 : i64>, %c: !tile.array<f32, 3 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %z = "tile.bid"() {axis = 2 : i64} : () -> i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %la = "tile.load"(%a, %z, %i, %k) {padding = "zero", tile_shape = array<i64: 1, 64, 32>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x32xbf16>
    %ta = "tile.reshape"(%la) : (tensor<1x64x32xbf16>) -> tensor<64x32xbf16>
    %lb = "tile.load"(%b, %z, %k, %j) {padding = "zero", tile_shape = array<i64: 1, 32, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x32x64xbf16>
    %tb = "tile.reshape"(%lb) : (tensor<1x32x64xbf16>) -> tensor<32x64xbf16>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<64x32xbf16>, tensor<32x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  %r3 = "tile.reshape"(%r) : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  "tile.store"(%c, %r3, %z, %i, %j) : (!tile.array<f32, 3 : i64>, tensor<1x64x64xf32>, i32, i32, i32) -> ()
  return
}

// -----

// A product of a computed tile (attention's P V) is not a batched GEMM: a grid
// axis that indexes only unit dims (a head) keeps the 2-d order, axes 0 and 1
// grouped.

// CHECK-LABEL: func.func @computed_operand
// CHECK:         %[[B0:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK:         %[[B1:.*]] = "tile.bid"() {axis = 1 : i64}
// CHECK:         %[[ROWS:.*]] = arith.muli %[[B1]], %{{.*}} : i32
// CHECK-NEXT:    arith.addi %[[ROWS]], %[[B0]] : i32
// CHECK-NOT:     "tile.bid"
func.func @computed_operand(%a: !tile.array<bf16, 3 : i64>, %b: !tile.array<bf16, 3 : i64>, %c: !tile.array<f32, 3 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %h = "tile.bid"() {axis = 1 : i64} : () -> i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %two = arith.constant dense<2.0> : tensor<64x32xbf16>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %la = "tile.load"(%a, %h, %i, %k) {padding = "zero", tile_shape = array<i64: 1, 64, 32>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x32xbf16>
    %ta = "tile.reshape"(%la) : (tensor<1x64x32xbf16>) -> tensor<64x32xbf16>
    %p = arith.mulf %ta, %two : tensor<64x32xbf16>
    %lb = "tile.load"(%b, %h, %k, %c0) {padding = "zero", tile_shape = array<i64: 1, 32, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x32x64xbf16>
    %tb = "tile.reshape"(%lb) : (tensor<1x32x64xbf16>) -> tensor<32x64xbf16>
    %d = "tile.mma"(%p, %tb, %acc) : (tensor<64x32xbf16>, tensor<32x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  %r3 = "tile.reshape"(%r) : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  "tile.store"(%c, %r3, %h, %i, %c0) : (!tile.array<f32, 3 : i64>, tensor<1x64x64xf32>, i32, i32, i32) -> ()
  return
}

// -----

// block_order = "reversed": the grouped order from its last tile (pid' = G0 G1 - 1 - pid),
// so the blocks with the longest loops (causal attention's last Q tiles) start first.

// CHECK-LABEL: func.func @reversed
// CHECK-DAG:     %[[B0:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-DAG:     %[[B1:.*]] = "tile.bid"() {axis = 1 : i64}
// CHECK-DAG:     %[[G0:.*]] = "tile.num_blocks"() {axis = 0 : i64}
// CHECK-DAG:     %[[G1:.*]] = "tile.num_blocks"() {axis = 1 : i64}
// CHECK:         %[[ROWS:.*]] = arith.muli %[[B1]], %[[G0]] : i32
// CHECK-NEXT:    %[[PID:.*]] = arith.addi %[[ROWS]], %[[B0]] : i32
// CHECK-NEXT:    %[[ALL:.*]] = arith.muli %[[G0]], %[[G1]] : i32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:    %[[LAST:.*]] = arith.subi %[[ALL]], %[[ONE]] : i32
// CHECK-NEXT:    %[[REV:.*]] = arith.subi %[[LAST]], %[[PID]] : i32
// CHECK-NEXT:    %[[C8:.*]] = arith.constant 8 : i32
// CHECK-NEXT:    %[[PER:.*]] = arith.muli %[[C8]], %[[G1]] : i32
// CHECK-NEXT:    arith.divui %[[REV]], %[[PER]] : i32
// CHECK-NOT:     "tile.bid"
// CHECK:         "tile.store"
func.func @reversed(%a: !tile.array<bf16, 2 : i64>, %b: !tile.array<bf16, 2 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.block_order = "reversed"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %n = arith.addi %i, %c1 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 32>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x32xbf16>
    %tb = "tile.load"(%b, %k, %j) {padding = "zero", tile_shape = array<i64: 32, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<32x64xbf16>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<64x32xbf16>, tensor<32x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  "tile.store"(%c, %r, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}
