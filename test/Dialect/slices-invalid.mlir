// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @extract_too_big(%t: tensor<16xf32>, %i: i32) {
  // expected-error @+1 {{'tile.extract_slice' op the result's dim 0 (32) is larger than the tile's (16)}}
  %0 = "tile.extract_slice"(%t, %i) : (tensor<16xf32>, i32) -> tensor<32xf32>
  return
}

// -----

func.func @extract_offsets(%t: tensor<16x4xf32>, %i: i32) {
  // expected-error @+1 {{'tile.extract_slice' op expected 2 offsets (one per dim), got 1}}
  %0 = "tile.extract_slice"(%t, %i) : (tensor<16x4xf32>, i32) -> tensor<4x4xf32>
  return
}

// -----

func.func @insert_element_type(%t: tensor<16xf32>, %v: tensor<4xf16>, %i: i32) {
  // expected-error @+1 {{'tile.insert_slice' op element types differ: f32 and f16}}
  %0 = "tile.insert_slice"(%t, %v, %i) : (tensor<16xf32>, tensor<4xf16>, i32) -> tensor<16xf32>
  return
}

// -----

func.func @concat_dims(%a: tensor<16x4xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'tile.concat' op dim 0 differs (16 and 8); only dim 1 may}}
  %0 = "tile.concat"(%a, %b) {axis = 1 : i64} : (tensor<16x4xf32>, tensor<8x4xf32>) -> tensor<16x8xf32>
  return
}

// -----

func.func @concat_result(%a: tensor<16x4xf32>) {
  // expected-error @+1 {{'tile.concat' op result shape [16, 4], expected [32, 4]}}
  %0 = "tile.concat"(%a, %a) {axis = 0 : i64} : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  return
}
