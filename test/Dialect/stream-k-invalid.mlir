// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @not_f32(%acc: tensor<64x64xbf16>, %slot: i32, %p: i1) {
  // expected-error @+1 {{'tile.partial_store' op the accumulator must be a 2-d f32 tile, got tensor<64x64xbf16>}}
  "tile.partial_store"(%acc, %slot, %p) : (tensor<64x64xbf16>, i32, i1) -> ()
  return
}

// -----

func.func @not_2d(%acc: tensor<64xf32>, %slot: i32, %p: i1) {
  // expected-error @+1 {{'tile.partial_add' op the accumulator must be a 2-d f32 tile, got tensor<64xf32>}}
  %s = "tile.partial_add"(%acc, %slot, %p) : (tensor<64xf32>, i32, i1) -> tensor<64xf32>
  return
}

// -----

func.func @result(%acc: tensor<64x64xf32>, %slot: i32, %p: i1) {
  // expected-error @+1 {{'tile.partial_add' op the result must have the accumulator's type tensor<64x64xf32>, got tensor<32x64xf32>}}
  %s = "tile.partial_add"(%acc, %slot, %p) : (tensor<64x64xf32>, i32, i1) -> tensor<32x64xf32>
  return
}
