// RUN: tile-opt %s -split-input-file --tile-guard-masks | FileCheck %s

// Attention's mask, (cols < n) & (rows >= cols) with rows = mb*64 + iota and cols =
// j*64 + iota: every element is kept when j*64 + 63 < n and mb*64 >= j*64 + 63.  The
// select runs only otherwise, and what only the mask needs moves into that branch
// (the counter's product stays: the condition reads it too).
// CHECK-LABEL: func.func @attention_mask
// CHECK:       scf.for %[[J:.*]] = {{.*}} {
// CHECK:         %[[S:.*]] = "tile.load"
// CHECK:         %[[JB:.*]] = arith.muli %[[J]], %{{.*}} : i32
// CHECK:         %[[D1:.*]] = arith.subi %[[JB]], %[[N:.*]] : i32
// CHECK:         %[[C1:.*]] = arith.cmpi slt, %[[D1]], %{{.*}} : i32
// CHECK:         %[[D2:.*]] = arith.subi %[[MB:.*]], %[[JB]] : i32
// CHECK:         %[[C2:.*]] = arith.cmpi sge, %[[D2]], %{{.*}} : i32
// CHECK:         %[[ALL:.*]] = arith.andi %[[C1]], %[[C2]] : i1
// CHECK:         %[[R:.*]] = scf.if %[[ALL]] -> (tensor<64x64xf32>) {
// CHECK-NEXT:      scf.yield %[[S]]
// CHECK-NEXT:    } else {
// CHECK:           tensor.splat %[[JB]]
// CHECK:           arith.cmpi slt
// CHECK:           arith.cmpi sge
// CHECK:           arith.andi {{.*}} : tensor<64x64xi1>
// CHECK:           %[[M:.*]] = arith.select
// CHECK:           scf.yield %[[M]]
// CHECK:         }
// CHECK:         "tile.store"(%{{.*}}, %[[R]]
func.func @attention_mask(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 2 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %mb = "tile.bid"() {axis = 0 : i64} : () -> i32
  %base = arith.muli %mb, %c64 : i32
  %iota = "tile.iota"() : () -> tensor<64xi32>
  %ri = "tile.reshape"(%iota) : (tensor<64xi32>) -> tensor<64x1xi32>
  %rs = tensor.splat %base : tensor<64x1xi32>
  %rows = arith.addi %rs, %ri : tensor<64x1xi32>
  %rowsb = "tile.broadcast"(%rows) : (tensor<64x1xi32>) -> tensor<64x64xi32>
  %ci = "tile.reshape"(%iota) : (tensor<64xi32>) -> tensor<1x64xi32>
  %ns = tensor.splat %n : tensor<1x64xi32>
  %trips = arith.floordivsi %n, %c64 : i32
  scf.for %j = %c0 to %trips step %c1 : i32 {
    %s = "tile.load"(%x, %mb, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x64xf32>
    %jb = arith.muli %j, %c64 : i32
    %js = tensor.splat %jb : tensor<1x64xi32>
    %cols = arith.addi %js, %ci : tensor<1x64xi32>
    %inb = arith.cmpi slt, %cols, %ns : tensor<1x64xi32>
    %colsb = "tile.broadcast"(%cols) : (tensor<1x64xi32>) -> tensor<64x64xi32>
    %causal = arith.cmpi sge, %rowsb, %colsb : tensor<64x64xi32>
    %inbb = "tile.broadcast"(%inb) : (tensor<1x64xi1>) -> tensor<64x64xi1>
    %keep = arith.andi %inbb, %causal : tensor<64x64xi1>
    %m = arith.select %keep, %s, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
    "tile.store"(%y, %m, %mb, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  }
  return
}

// -----

// A mask the analysis cannot bound (a loaded tile) is left alone, and so is a select
// outside a loop.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:   scf.if
func.func @left_alone(%x: !tile.array<f32, 1 : i64>, %k: !tile.array<i32, 1 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64xf32>
  %iota = "tile.iota"() : () -> tensor<64xi32>
  %ns = tensor.splat %n : tensor<64xi32>
  %t0 = "tile.load"(%x, %c0) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<64xf32>
  %in0 = arith.cmpi slt, %iota, %ns : tensor<64xi32>
  %m0 = arith.select %in0, %t0, %zero : tensor<64xi1>, tensor<64xf32>
  "tile.store"(%x, %m0, %c0) : (!tile.array<f32, 1 : i64>, tensor<64xf32>, i32) -> ()
  scf.for %j = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%x, %j) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<64xf32>
    %kk = "tile.load"(%k, %j) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<64xi32>
    %in = arith.cmpi slt, %kk, %ns : tensor<64xi32>
    %m = arith.select %in, %t, %zero : tensor<64xi1>, tensor<64xf32>
    "tile.store"(%x, %m, %j) : (!tile.array<f32, 1 : i64>, tensor<64xf32>, i32) -> ()
  }
  return
}
