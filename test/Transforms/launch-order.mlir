// RUN: tile-opt %s -split-input-file --tile-launch-order | FileCheck %s

// SwiGLU as written: grid (rows, column tiles), bid(1) indexes the innermost dim of
// every access.  With the wish's "swap:1" the kernel reads its axes swapped and
// tells the launcher (grid_perm), so blocks start along the row.

// CHECK-LABEL: func.func @swiglu
// CHECK-SAME:    tile.grid_perm = array<i64: 1, 0, 2>
// CHECK-SAME:    tile.grid_rewrites = ["tile-launch-order"]
// CHECK:         %[[I:.*]] = "tile.bid"() {axis = 1 : i64}
// CHECK:         %[[J:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK:         "tile.load"(%{{.*}}, %[[I]], %[[J]])
// CHECK:         "tile.num_blocks"() {axis = 0 : i64}
func.func @swiglu(%g: !tile.array<bf16, 2 : i64>, %o: !tile.array<bf16, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "free:4;swap:1"} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %t = "tile.load"(%g, %i, %j) {padding = "zero", tile_shape = array<i64: 1, 1024>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x1024xbf16>
  %n = "tile.num_blocks"() {axis = 1 : i64} : () -> i32
  "tile.store"(%o, %t, %i, %j) : (!tile.array<bf16, 2 : i64>, tensor<1x1024xbf16>, i32, i32) -> ()
  return
}

// -----

// Left as written: no swap in the wish; bid(0) already walks the innermost dim; a
// transpose (as many bytes each way round).

// CHECK-LABEL: func.func @no_wish
// CHECK-NOT:     tile.grid_perm
// CHECK-LABEL: func.func @already_inner
// CHECK-NOT:     tile.grid_perm
// CHECK-LABEL: func.func @transpose
// CHECK-NOT:     tile.grid_perm
func.func @no_wish(%g: !tile.array<bf16, 2 : i64>, %o: !tile.array<bf16, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "free:4"} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %t = "tile.load"(%g, %i, %j) {padding = "zero", tile_shape = array<i64: 1, 1024>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x1024xbf16>
  "tile.store"(%o, %t, %i, %j) : (!tile.array<bf16, 2 : i64>, tensor<1x1024xbf16>, i32, i32) -> ()
  return
}
func.func @already_inner(%g: !tile.array<bf16, 2 : i64>, %o: !tile.array<bf16, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "free:4;swap:1"} {
  %i = "tile.bid"() {axis = 1 : i64} : () -> i32
  %j = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%g, %i, %j) {padding = "zero", tile_shape = array<i64: 1, 1024>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x1024xbf16>
  "tile.store"(%o, %t, %i, %j) : (!tile.array<bf16, 2 : i64>, tensor<1x1024xbf16>, i32, i32) -> ()
  return
}
func.func @transpose(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "free:4;swap:1"} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %t = "tile.load"(%x, %i, %j) {padding = "zero", tile_shape = array<i64: 32, 32>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<32x32xf32>
  %u = "tile.permute"(%t) {permutation = array<i64: 1, 0>} : (tensor<32x32xf32>) -> tensor<32x32xf32>
  "tile.store"(%y, %u, %j, %i) : (!tile.array<f32, 2 : i64>, tensor<32x32xf32>, i32, i32) -> ()
  return
}
