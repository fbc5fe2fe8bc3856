// RUN: tile-opt %s -split-input-file --tile-split-blocks | FileCheck %s

// RoPE on one token ("split:8;free:6": a grid of 1 block on 132 SMs, axes 1 and 2
// of extent 1).  The heads (dim 1, not the innermost of any array) split across
// grid axis 2, 8 ways (the block loads and stores 32 KB; a block keeps at least
// 4 KB): the x load and the out store take head tile bid(2) of extent 16 (index
// 0 * 8 + bid(2)); the cos row, broadcast over the heads, stays whole; the grid's
// axis 2 becomes 8 (tile.grid_scale).

// CHECK-LABEL: func.func @rope
// CHECK-SAME:    tile.grid_scale = array<i64: 2, 1, 8>
// The new index is made right after the old one (the constant 0), once for both
// accesses that shared it.
// CHECK:         %[[U:.*]] = "tile.bid"() {axis = 2 : i64}
// CHECK:         %[[Z:.*]] = arith.constant 0 : i32
// CHECK:         %[[S:.*]] = arith.muli %[[Z]], %{{.*}} : i32
// CHECK:         %[[H:.*]] = arith.addi %[[S]], %[[U]] : i32
// CHECK:         %[[T:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK:         "tile.load"(%arg0, %[[T]], %[[H]], %[[Z]]) {{.*}}tile_shape = array<i64: 1, 16, 64>{{.*}} -> tensor<1x16x64xbf16>
// CHECK:         "tile.load"(%arg1, %[[T]], %{{.*}}) {{.*}}tile_shape = array<i64: 1, 64>{{.*}} -> tensor<1x64xbf16>
// CHECK:         "tile.broadcast"{{.*}} -> tensor<1x16x64xf32>
// CHECK:         "tile.store"(%arg2, %{{.*}}, %[[T]], %[[H]], %[[Z]]) : ({{.*}}, tensor<1x16x64xbf16>, i32, i32, i32)
func.func @rope(%x: !tile.array<bf16, 3 : i64>, %cos: !tile.array<bf16, 2 : i64>, %out: !tile.array<bf16, 3 : i64>) attributes {tile.kernel, tile.grid_wish = "split:8;free:6"} {
  %c0 = arith.constant 0 : i32
  %t = "tile.bid"() {axis = 0 : i64} : () -> i32
  %a = "tile.load"(%x, %t, %c0, %c0) {padding = "undetermined", tile_shape = array<i64: 1, 128, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x128x64xbf16>
  %af = arith.extf %a : tensor<1x128x64xbf16> to tensor<1x128x64xf32>
  %c = "tile.load"(%cos, %t, %c0) {padding = "undetermined", tile_shape = array<i64: 1, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x64xbf16>
  %cf = arith.extf %c : tensor<1x64xbf16> to tensor<1x64xf32>
  %c3 = "tile.reshape"(%cf) : (tensor<1x64xf32>) -> tensor<1x1x64xf32>
  %cb = "tile.broadcast"(%c3) : (tensor<1x1x64xf32>) -> tensor<1x128x64xf32>
  %p = arith.mulf %af, %cb : tensor<1x128x64xf32>
  %o = arith.truncf %p : tensor<1x128x64xf32> to tensor<1x128x64xbf16>
  "tile.store"(%out, %o, %t, %c0, %c0) : (!tile.array<bf16, 3 : i64>, tensor<1x128x64xbf16>, i32, i32, i32) -> ()
  return
}

// -----

// A 1-D map whose only dim is innermost: it splits too, 8 ways (32 KB moved, 4 KB
// a block, rows of 2 KB), along grid axis 2 (the last free axis first), the index
// bid(0) * 8 + bid(2); the splat constant takes the slice's shape.

// CHECK-LABEL: func.func @scale
// CHECK-SAME:    tile.grid_scale = array<i64: 2, 1, 8>
// CHECK:         %[[U:.*]] = "tile.bid"() {axis = 2 : i64}
// CHECK:         %[[I:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK:         %[[S:.*]] = arith.muli %[[I]], %{{.*}} : i32
// CHECK:         %[[J:.*]] = arith.addi %[[S]], %[[U]] : i32
// CHECK:         "tile.load"(%arg0, %[[J]]) {{.*}} -> tensor<512xf32>
// CHECK:         arith.constant dense<2.000000e+00> : tensor<512xf32>
// CHECK:         "tile.store"(%arg1, %{{.*}}, %{{.*}}) : ({{.*}}, tensor<512xf32>, i32)
func.func @scale(%x: !tile.array<f32, 1 : i64>, %y: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:8;free:6"} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %a = "tile.load"(%x, %i) {padding = "zero", tile_shape = array<i64: 4096>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<4096xf32>
  %two = arith.constant dense<2.0> : tensor<4096xf32>
  %b = arith.mulf %a, %two : tensor<4096xf32>
  "tile.store"(%y, %b, %i) : (!tile.array<f32, 1 : i64>, tensor<4096xf32>, i32) -> ()
  return
}

// -----

// A loop over a row's chunks that maps each: the chunk's columns split, its counter
// k becoming the index k * 8 + bid(2); the loop is unchanged.  Each block keeps
// at least 4 KB of the 32 KB a chunk loads and stores: 8 blocks, though the wish
// allows 16.

// CHECK-LABEL: func.func @chunks
// CHECK-SAME:    tile.grid_scale = array<i64: 2, 1, 8>
// CHECK:         %[[U:.*]] = "tile.bid"() {axis = 2 : i64}
// CHECK:         scf.for %[[K:.*]] =
// CHECK:           %[[S:.*]] = arith.muli %[[K]], %{{.*}} : i32
// CHECK:           %[[J:.*]] = arith.addi %[[S]], %[[U]] : i32
// CHECK:           "tile.load"(%arg0, %{{.*}}, %[[J]]) {{.*}} -> tensor<1x512xf32>
// CHECK:           "tile.store"(%arg1, %{{.*}}, %{{.*}}, %{{.*}}) : ({{.*}}, tensor<1x512xf32>, i32, i32)
func.func @chunks(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "split:16;free:6"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %r = "tile.bid"() {axis = 0 : i64} : () -> i32
  scf.for %k = %c0 to %c8 step %c1 : i32 {
    %a = "tile.load"(%x, %r, %k) {padding = "zero", tile_shape = array<i64: 1, 4096>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x4096xf32>
    %e = math.exp %a : tensor<1x4096xf32>
    "tile.store"(%y, %e, %r, %k) : (!tile.array<f32, 2 : i64>, tensor<1x4096xf32>, i32, i32) -> ()
  }
  return
}

// -----

// A row reduction (RMSNorm's shape): the row's only long dim is reduced and the
// other has extent 1, so nothing splits and the kernel is unchanged.

// CHECK-LABEL: func.func @row_sum
// CHECK-NOT:     tile.grid_scale
// CHECK:         "tile.load"{{.*}} -> tensor<1x4096xf32>
func.func @row_sum(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "split:64;free:6"} {
  %c0 = arith.constant 0 : i32
  %r = "tile.bid"() {axis = 0 : i64} : () -> i32
  %a = "tile.load"(%x, %r, %c0) {padding = "zero", tile_shape = array<i64: 1, 4096>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x4096xf32>
  %s = "tile.reduce"(%a) {axis = 1 : i64, kind = "sum"} : (tensor<1x4096xf32>) -> tensor<1xf32>
  %s2 = "tile.reshape"(%s) : (tensor<1xf32>) -> tensor<1x1xf32>
  %b = "tile.broadcast"(%s2) : (tensor<1x1xf32>) -> tensor<1x4096xf32>
  %d = arith.divf %a, %b : tensor<1x4096xf32>
  "tile.store"(%y, %d, %r, %c0) : (!tile.array<f32, 2 : i64>, tensor<1x4096xf32>, i32, i32) -> ()
  return
}

// -----

// Columns of a (64, 1024) tile reduced along dim 0 (a column sum): dim 1 splits
// (the reduction runs along the other), but the result is stored per column, so it
// splits with it; an iota along dim 1 would have to shift, so with one the kernel
// stays as written.

// CHECK-LABEL: func.func @column_sum
// CHECK-SAME:    tile.grid_scale = array<i64: 1, 1, 4>
// CHECK:         "tile.reduce"{{.*}} -> tensor<256xf32>
// CHECK-LABEL: func.func @column_sum_iota
// CHECK-NOT:     tile.grid_scale
func.func @column_sum(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:4;free:2"} {
  %c0 = arith.constant 0 : i32
  %j = "tile.bid"() {axis = 0 : i64} : () -> i32
  %a = "tile.load"(%x, %c0, %j) {padding = "zero", tile_shape = array<i64: 64, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x1024xf32>
  %s = "tile.reduce"(%a) {axis = 0 : i64, kind = "sum"} : (tensor<64x1024xf32>) -> tensor<1024xf32>
  "tile.store"(%y, %s, %j) : (!tile.array<f32, 1 : i64>, tensor<1024xf32>, i32) -> ()
  return
}
func.func @column_sum_iota(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:4;free:2"} {
  %c0 = arith.constant 0 : i32
  %j = "tile.bid"() {axis = 0 : i64} : () -> i32
  %a = "tile.load"(%x, %c0, %j) {padding = "zero", tile_shape = array<i64: 64, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x1024xf32>
  %s = "tile.reduce"(%a) {axis = 0 : i64, kind = "sum"} : (tensor<64x1024xf32>) -> tensor<1024xf32>
  %i = "tile.iota"() : () -> tensor<1024xi32>
  %f = arith.sitofp %i : tensor<1024xi32> to tensor<1024xf32>
  %t = arith.addf %s, %f : tensor<1024xf32>
  "tile.store"(%y, %t, %j) : (!tile.array<f32, 1 : i64>, tensor<1024xf32>, i32) -> ()
  return
}

// -----

// The kernel reads bid(2) and num_blocks(1): no grid axis is free, nothing splits.

// CHECK-LABEL: func.func @no_free_axis
// CHECK-NOT:     tile.grid_scale
func.func @no_free_axis(%x: !tile.array<f32, 1 : i64>, %y: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:8;free:6"} {
  %i = "tile.bid"() {axis = 2 : i64} : () -> i32
  %n = "tile.num_blocks"() {axis = 1 : i64} : () -> i32
  %j = arith.addi %i, %n : i32
  %a = "tile.load"(%x, %j) {padding = "zero", tile_shape = array<i64: 4096>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<4096xf32>
  "tile.store"(%y, %a, %j) : (!tile.array<f32, 1 : i64>, tensor<4096xf32>, i32) -> ()
  return
}
