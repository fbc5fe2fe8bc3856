// RUN: tile-opt %s -split-input-file --tile-reassociate-reductions | FileCheck %s

// Two (32, 1024) sums only reduced over their rows after the loop: each iteration
// reduces its tile and the loop carries 1024 floats (the zero init folds).
// CHECK-LABEL: func.func @column_sums
// CHECK:       %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<1024xf32>
// CHECK:       %[[Z2:.*]] = arith.constant dense<0.000000e+00> : tensor<1024xf32>
// CHECK:       %[[R:.*]]:2 = scf.for {{.*}} iter_args(%[[A:.*]] = %[[Z]], %[[B:.*]] = %[[Z2]]) -> (tensor<1024xf32>, tensor<1024xf32>)
// CHECK:         %[[T:.*]] = "tile.load"
// CHECK:         %[[S:.*]] = "tile.reduce"(%[[T]]) {axis = 0 : i64, kind = "sum"} : (tensor<32x1024xf32>) -> tensor<1024xf32>
// CHECK:         %[[N:.*]] = arith.addf %[[A]], %[[S]] : tensor<1024xf32>
// CHECK:         %[[U:.*]] = "tile.load"
// CHECK:         %[[V:.*]] = "tile.reduce"(%[[U]]) {axis = 0 : i64, kind = "sum"}
// CHECK:         %[[M:.*]] = arith.addf %[[B]], %[[V]] : tensor<1024xf32>
// CHECK:         scf.yield %[[N]], %[[M]]
// CHECK-NOT:   "tile.reduce"
// CHECK:       "tile.store"(%arg2, %[[R]]#0, %{{.*}})
// CHECK:       "tile.store"(%arg3, %[[R]]#1, %{{.*}})
func.func @column_sums(%dw: !tile.array<f32, 2 : i64>, %db: !tile.array<f32, 2 : i64>, %sw: !tile.array<f32, 1 : i64>, %sb: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%dw) {axis = 0 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %zero = arith.constant dense<0.0> : tensor<32x1024xf32>
  %j = "tile.bid"() {axis = 0 : i64} : () -> i32
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %zero, %b = %zero) -> (tensor<32x1024xf32>, tensor<32x1024xf32>) : i32 {
    %t = "tile.load"(%dw, %i, %j) {padding = "zero", tile_shape = array<i64: 32, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<32x1024xf32>
    %x = arith.addf %a, %t : tensor<32x1024xf32>
    %u = "tile.load"(%db, %i, %j) {padding = "zero", tile_shape = array<i64: 32, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<32x1024xf32>
    %y = arith.addf %u, %b : tensor<32x1024xf32>
    scf.yield %x, %y : tensor<32x1024xf32>, tensor<32x1024xf32>
  }
  %s = "tile.reduce"(%r#0) {axis = 0 : i64, kind = "sum"} : (tensor<32x1024xf32>) -> tensor<1024xf32>
  %q = "tile.reduce"(%r#1) {axis = 0 : i64, kind = "sum"} : (tensor<32x1024xf32>) -> tensor<1024xf32>
  "tile.store"(%sw, %s, %j) : (!tile.array<f32, 1 : i64>, tensor<1024xf32>, i32) -> ()
  "tile.store"(%sb, %q, %j) : (!tile.array<f32, 1 : i64>, tensor<1024xf32>, i32) -> ()
  return
}

// -----

// A running max along the columns, started from a tile that is not a constant: the
// initial tile is reduced before the loop.
// CHECK-LABEL: func.func @column_max
// CHECK:       %[[I:.*]] = "tile.reduce"(%{{.*}}) {axis = 1 : i64, kind = "max"} : (tensor<64x128xf32>) -> tensor<64xf32>
// CHECK:       scf.for {{.*}} iter_args(%[[A:.*]] = %[[I]]) -> (tensor<64xf32>)
// CHECK:         "tile.reduce"(%{{.*}}) {axis = 1 : i64, kind = "max"}
// CHECK:         arith.maximumf %[[A]]
func.func @column_max(%x: !tile.array<f32, 2 : i64>, %o: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %init = "tile.load"(%x, %c0, %c0) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x128xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %init) -> (tensor<64x128xf32>) : i32 {
    %t = "tile.load"(%x, %c0, %i) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x128xf32>
    %m = arith.maximumf %a, %t : tensor<64x128xf32>
    scf.yield %m : tensor<64x128xf32>
  }
  %s = "tile.reduce"(%r) {axis = 1 : i64, kind = "max"} : (tensor<64x128xf32>) -> tensor<64xf32>
  "tile.store"(%o, %s, %c0) : (!tile.array<f32, 1 : i64>, tensor<64xf32>, i32) -> ()
  return
}

// -----

// Left alone: a small tile (registers are cheap, and reducing every iteration costs
// shuffles); a tile the loop also reads elsewhere; a result used besides its sum;
// a combiner that is not the reduction's kind.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-4: iter_args({{.*}}) -> (tensor<{{[0-9]+}}x{{[0-9]+}}xf32>)
func.func @left_alone(%x: !tile.array<f32, 2 : i64>, %o: !tile.array<f32, 2 : i64>, %v: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%x) {axis = 0 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %small = arith.constant dense<0.0> : tensor<16x128xf32>
  %zero = arith.constant dense<0.0> : tensor<64x128xf32>
  %r1 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %small) -> (tensor<16x128xf32>) : i32 {
    %t = "tile.load"(%x, %i, %c0) {padding = "zero", tile_shape = array<i64: 16, 128>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<16x128xf32>
    %s = arith.addf %a, %t : tensor<16x128xf32>
    scf.yield %s : tensor<16x128xf32>
  }
  %s1 = "tile.reduce"(%r1) {axis = 0 : i64, kind = "sum"} : (tensor<16x128xf32>) -> tensor<128xf32>
  "tile.store"(%v, %s1, %c0) : (!tile.array<f32, 1 : i64>, tensor<128xf32>, i32) -> ()
  %r2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %zero) -> (tensor<64x128xf32>) : i32 {
    %t = "tile.load"(%x, %i, %c0) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x128xf32>
    %s = arith.addf %a, %t : tensor<64x128xf32>
    %w = arith.mulf %s, %a : tensor<64x128xf32>
    scf.yield %w : tensor<64x128xf32>
  }
  %s2 = "tile.reduce"(%r2) {axis = 0 : i64, kind = "sum"} : (tensor<64x128xf32>) -> tensor<128xf32>
  "tile.store"(%v, %s2, %c0) : (!tile.array<f32, 1 : i64>, tensor<128xf32>, i32) -> ()
  %r3 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %zero) -> (tensor<64x128xf32>) : i32 {
    %t = "tile.load"(%x, %i, %c0) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x128xf32>
    %s = arith.addf %a, %t : tensor<64x128xf32>
    scf.yield %s : tensor<64x128xf32>
  }
  %s3 = "tile.reduce"(%r3) {axis = 0 : i64, kind = "sum"} : (tensor<64x128xf32>) -> tensor<128xf32>
  "tile.store"(%v, %s3, %c0) : (!tile.array<f32, 1 : i64>, tensor<128xf32>, i32) -> ()
  "tile.store"(%o, %r3, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x128xf32>, i32, i32) -> ()
  %r4 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %zero) -> (tensor<64x128xf32>) : i32 {
    %t = "tile.load"(%x, %i, %c0) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x128xf32>
    %s = arith.maximumf %a, %t : tensor<64x128xf32>
    scf.yield %s : tensor<64x128xf32>
  }
  %s4 = "tile.reduce"(%r4) {axis = 0 : i64, kind = "sum"} : (tensor<64x128xf32>) -> tensor<128xf32>
  "tile.store"(%v, %s4, %c0) : (!tile.array<f32, 1 : i64>, tensor<128xf32>, i32) -> ()
  return
}
