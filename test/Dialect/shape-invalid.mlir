// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @broadcast_changes_rank(%t: tensor<64xf32>) {
  // expected-error @+1 {{'tile.broadcast' op broadcast keeps the rank: source rank 1, result rank 2 (reshape first to add dims)}}
  %0 = "tile.broadcast"(%t) : (tensor<64xf32>) -> tensor<32x64xf32>
  return
}

// -----

func.func @broadcast_non_unit_dim(%t: tensor<2x64xf32>) {
  // expected-error @+1 {{'tile.broadcast' op cannot broadcast dim 0 of size 2 to 32 (only size-1 dims stretch)}}
  %0 = "tile.broadcast"(%t) : (tensor<2x64xf32>) -> tensor<32x64xf32>
  return
}

// -----

func.func @broadcast_element_type(%t: tensor<1x64xf32>) {
  // expected-error @+1 {{'tile.broadcast' op element type changes from f32 to f16; shape ops keep the element type}}
  %0 = "tile.broadcast"(%t) : (tensor<1x64xf32>) -> tensor<4x64xf16>
  return
}

// -----

func.func @broadcast_of_scalar(%s: f32) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  %0 = "tile.broadcast"(%s) : (f32) -> tensor<4xf32>
  return
}

// -----

func.func @reshape_element_count(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{'tile.reshape' op reshape from [4, 8] (32 elements) to [64] (64 elements) changes the element count}}
  %0 = "tile.reshape"(%t) : (tensor<4x8xf32>) -> tensor<64xf32>
  return
}

// -----

func.func @reshape_element_type(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{'tile.reshape' op element type changes from f32 to i32; shape ops keep the element type}}
  %0 = "tile.reshape"(%t) : (tensor<4x8xf32>) -> tensor<32xi32>
  return
}

// -----

func.func @permute_not_a_permutation(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{'tile.permute' op permutation [0, 0] is not a permutation of 0..1}}
  %0 = "tile.permute"(%t) {permutation = array<i64: 0, 0>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @permute_wrong_length(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{'tile.permute' op permutation [1, 0, 2] is not a permutation of 0..1}}
  %0 = "tile.permute"(%t) {permutation = array<i64: 1, 0, 2>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @permute_result_shape(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{'tile.permute' op result shape [4, 8] does not match the permuted source shape [8, 4]}}
  %0 = "tile.permute"(%t) {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @permutation_not_i64(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{'tile.permute' op attribute 'permutation' must be an array<i64: ...>, got array<i32: 1, 0>}}
  %0 = "tile.permute"(%t) {permutation = array<i32: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @permute_missing_permutation(%t: tensor<4x8xf32>) {
  // expected-error @+1 {{'tile.permute' op attribute "permutation" is expected but not provided}}
  %0 = "tile.permute"(%t) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @broadcast_to_non_power_of_two(%t: tensor<1x8xf32>) attributes {tile.function} {
  // expected-error @+1 {{'tile.broadcast' tile shape [3, 8] must have power-of-two dims; got 3}}
  %0 = "tile.broadcast"(%t) : (tensor<1x8xf32>) -> tensor<3x8xf32>
  return
}
