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

// The kernel's own num_warps must be a power of two within the block limit.

// expected-error @+1 {{num_warps must be a power of two <= 32, got 3}}
func.func @three_warps(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 3 : i32} {
  return
}
