// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @dim_axis_out_of_range(%a: !tile.array<f32, 2 : i64>) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.dim' op axis 2 is out of range for the array of rank 2 (expected 0 <= axis < 2)}}
  %d = "tile.dim"(%a) {axis = 2 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  return
}

// -----

func.func @stride_of_rank0(%a: !tile.array<f32, 0 : i64>) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.stride' op axis 0 is out of range for the array of rank 0}}
  %s = "tile.stride"(%a) {axis = 0 : i64} : (!tile.array<f32, 0 : i64>) -> i32
  return
}

// -----

func.func @dim_of_tile(%t: tensor<4xf32>) {
  // expected-error @+1 {{expected base type 'tile.array' but got 'builtin.tensor'}}
  %d = "tile.dim"(%t) {axis = 0 : i64} : (tensor<4xf32>) -> i32
  return
}

// -----

func.func @dim_result_i64(%a: !tile.array<f32, 1 : i64>) {
  // expected-error @+1 {{expected 'i32' but got 'i64'}}
  %d = "tile.dim"(%a) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i64
  return
}

// -----

// expected-error @+1 {{expected 2 type arguments, but had 1}}
func.func @array_missing_rank(%a: !tile.array<f32>) {
  return
}

// -----

// expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.string'}}
func.func @array_string_rank(%a: !tile.array<f32, "two">) {
  return
}

// -----

// A rank that is not a non-negative i64 used to crash the verifier.
func.func @array_negative_rank(%a: !tile.array<f32, -1 : i64>) {
  // expected-error @+1 {{'tile.dim' op malformed array type !tile.array<f32, -1 : i64>: expected !tile.array<T, R : i64> with rank R >= 0}}
  %d = "tile.dim"(%a) {axis = 0 : i64} : (!tile.array<f32, -1 : i64>) -> i32
  return
}

// -----

func.func @array_i32_rank(%a: !tile.array<f32, 1 : i32>) {
  // expected-error @+1 {{'tile.stride' op malformed array type !tile.array<f32, 1 : i32>}}
  %s = "tile.stride"(%a) {axis = 0 : i64} : (!tile.array<f32, 1 : i32>) -> i32
  return
}

// -----

// expected-error @+1 {{kernel argument #0 has type tensor<4xf32>; kernels take !tile.array and scalar arguments}}
func.func @kernel_takes_tile(%t: tensor<4xf32>) attributes {tile.kernel} {
  return
}

// -----

// expected-error @+1 {{expected dynamic type}}
func.func @unknown_tile_type(%a: !tile.matrix<f32>) {
  return
}

// -----

// expected-error @+1 {{argument #0 is an array of rank 9; arrays have at most 8 dims}}
func.func @rank9(%a: !tile.array<f32, 9 : i64>) attributes {tile.kernel} {
  return
}

// -----

// A layout must be well-formed wherever it appears (found by the fuzzer: a bad
// order reached the lowering).

#bad = #tile.blocked<array<i64: 1, 8>, array<i64: 1, 32>, array<i64: 1, 2>, array<i64: 7, 0>>
func.func @bad_order(%x: !tile.array<bf16, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{layout is malformed: order [7, 0] is not a permutation of 0..1}}
  %t = "tile.load"(%x, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 512>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x512xbf16, #bad>
  return
}

// -----

// An accumulator layout with a leading unit dim (a batched product's (1, M, N)
// tile) holds only tiles whose leading extent is 1.

#acc = #tile.mma_acc<3 : i64, array<i64: 1, 4, 1>, array<i64: 1, 64, 64>>
func.func @mma_lead_not_unit(%x: !tile.array<f32, 3 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{layout is malformed: #tile.mma_acc<3 : i64, array<i64: 1, 4, 1>, array<i64: 1, 64, 64>> has 1 leading unit dim(s); the tile's shape [2, 64, 64] does not}}
  %t = "tile.load"(%x, %c0, %c0, %c0) {padding = "zero", tile_shape = array<i64: 2, 64, 64>} : (!tile.array<f32, 3 : i64>, i32, i32, i32) -> tensor<2x64x64xf32, #acc>
  return
}

// -----

#acc = #tile.mma_acc<3 : i64, array<i64: 2, 4, 1>, array<i64: 1, 64, 64>>
func.func @mma_lead_not_one(%x: !tile.array<f32, 3 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{has encoding #tile.mma_acc<3 : i64, array<i64: 2, 4, 1>, array<i64: 1, 64, 64>>, which is not a tile layout}}
  %t = "tile.load"(%x, %c0, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 64, 64>} : (!tile.array<f32, 3 : i64>, i32, i32, i32) -> tensor<1x64x64xf32, #acc>
  return
}
