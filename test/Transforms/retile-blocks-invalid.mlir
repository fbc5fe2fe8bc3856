// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-retile-blocks

// An explicit retile (`@kernel(retile=(axis, factor))`) that the kernel does not
// allow is an error at the op that stops it.

func.func @arith(%a: !tile.array<f32, 2 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.retile = array<i64: 1, 2, 1>} {
  %c2 = arith.constant 2 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  // expected-error @+1 {{kernel option retile=(1, 2) cannot be applied: bid(1) is used by 'arith.muli', not only as a tile index of loads and stores}}
  %k = arith.muli %j, %c2 : i32
  %t = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 16, 16>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<16x16xf32>
  "tile.store"(%c, %t, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<16x16xf32>, i32, i32) -> ()
  return
}

// -----

func.func @reduce_along(%a: !tile.array<f32, 2 : i64>, %c: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.retile = array<i64: 0, 1, 2>} {
  %z = arith.constant 0 : i32
  %j = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%a, %z, %j) {padding = "zero", tile_shape = array<i64: 16, 64>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<16x64xf32>
  // expected-error @+1 {{kernel option retile=(0, 1/2) cannot be applied: a reduction runs along the dim that follows the block index}}
  %r = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<16x64xf32>) -> tensor<16xf32>
  "tile.store"(%c, %r, %z) : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
  return
}

// -----

func.func @untied_operand(%a: !tile.array<f32, 1 : i64>, %c: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.retile = array<i64: 0, 2, 1>} {
  %z = arith.constant 0 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%a, %i) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<64xf32>
  %u = "tile.load"(%a, %z) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<64xf32>
  // expected-error @+1 {{kernel option retile=(0, 2) cannot be applied: 'arith.addf' would need a tensor to follow the block index along dim 0 and along dim none}}
  %s = arith.addf %t, %u : tensor<64xf32>
  "tile.store"(%c, %s, %i) : (!tile.array<f32, 1 : i64>, tensor<64xf32>, i32) -> ()
  return
}

// -----

func.func @grid_size(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.retile = array<i64: 0, 2, 1>} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  // expected-error @+1 {{kernel option retile=(0, 2) cannot be applied: num_blocks(0) is used (the grid would change)}}
  %g = "tile.num_blocks"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%a, %i) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<64xf32>
  "tile.store"(%a, %t, %g) : (!tile.array<f32, 1 : i64>, tensor<64xf32>, i32) -> ()
  return
}

// -----

// Malformed retile and wish attributes written by hand (found by the fuzzer).

// expected-error @+1 {{tile.retile must be array<i64: axis, num, den> with axis 0..2 and num, den >= 1; got array<i64: 1, 128>}}
func.func @short_retile(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.retile = array<i64: 1, 128>} {
  return
}

// -----

// expected-error @+1 {{tile.grid_wish: grid wish item 'narrow:x' needs a positive int}}
func.func @bad_wish(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "narrow:x"} {
  return
}
