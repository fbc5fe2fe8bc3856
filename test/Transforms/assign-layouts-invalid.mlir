// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-assign-layouts
// RUN: not tile-opt %s --tile-assign-layouts 2>&1 | FileCheck %s

// What the GPU stages cannot lower is refused here, at the user's op.

// Without -split-input-file the first error stops the run; it shows the line.
// A batched (3-d) product tile:
func.func @mma(%a: !tile.array<f16, 3 : i64>, %c: !tile.array<f32, 3 : i64>) attributes {tile.kernel} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%a, %i, %i, %i) {padding = "zero", tile_shape = array<i64: 2, 16, 16>} : (!tile.array<f16, 3 : i64>, i32, i32, i32) -> tensor<2x16x16xf16>
  %zero = arith.constant dense<0.0> : tensor<2x16x16xf32>
  // expected-error @+4 {{a batched (3-d) mma is not lowered to the GPU: operands [2, 16, 16] x [2, 16, 16]; index the batch with a block id and reshape the tiles to 2-d}}
  // CHECK:      assign-layouts-invalid.mlir:[[@LINE+3]]:10: error: a batched (3-d) mma is not lowered to the GPU
  // CHECK-NEXT: {{^}}      %acc = "tile.mma"(%t, %t, %zero)
  // CHECK-NEXT: {{^}}             ^
  %acc = "tile.mma"(%t, %t, %zero) : (tensor<2x16x16xf16>, tensor<2x16x16xf16>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  "tile.store"(%c, %acc, %i, %i, %i) : (!tile.array<f32, 3 : i64>, tensor<2x16x16xf32>, i32, i32, i32) -> ()
  return
}


// -----

// IR past the layout stage that lost its tile.stage (found by the fuzzer: assigning
// layouts again produced invalid IR).

#row = #tile.blocked<array<i64: 1, 8>, array<i64: 1, 32>, array<i64: 1, 2>, array<i64: 1, 0>>
func.func @assigned(%x: !tile.array<bf16, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{'tile.load' already has a layout or belongs to a later stage: this kernel is past the 'layout' stage; say so with the module attribute tile.stage}}
  %t = "tile.load"(%x, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 512>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x512xbf16, #row>
  return
}

// -----

// A tile no thread could hold: 2^20 f32 on 512 threads.

func.func @huge(%x: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{a tile of shape (1048576,) and f32 needs 2048 registers a thread on 512 threads (num_warps=16)}}
  %t = "tile.load"(%x, %c0) {padding = "zero", tile_shape = array<i64: 1048576>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<1048576xf32>
  "tile.store"(%x, %t, %c0) : (!tile.array<f32, 1 : i64>, tensor<1048576xf32>, i32) -> ()
  return
}
