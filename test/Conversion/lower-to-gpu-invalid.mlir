// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-lower-to-gpu

// The gpu stage needs the layout stage's output.

// expected-error @+1 {{the kernel has no layouts: run the 'layout' stage first}}
func.func @no_layouts(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  return
}

// -----

// Hand-written layout IR with a product accumulated in a blocked layout and
// register operands: a blocked accumulator means the FMA path, which reads its
// operands from shared memory, where the layout stage would have put them.

#a = #tile.blocked<array<i64: 1, 1>, array<i64: 8, 4>, array<i64: 1, 1>, array<i64: 1, 0>>
func.func @mma(%x: !tile.array<f16, 2 : i64>, %y: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%x, %c0, %c0) {padding = "zero", tile_shape = array<i64: 16, 16>} : (!tile.array<f16, 2 : i64>, i32, i32) -> tensor<16x16xf16, #a>
  %z = arith.constant dense<0.0> : tensor<16x16xf32, #a>
  // expected-error @+1 {{runs on the FMA units and needs both operands in unswizzled shared memory (#tile.shared<0 : i64, ...>), as the layout stage assigns them}}
  %m = "tile.mma"(%t, %t, %z) : (tensor<16x16xf16, #a>, tensor<16x16xf16, #a>, tensor<16x16xf32, #a>) -> tensor<16x16xf32, #a>
  "tile.store"(%y, %m, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<16x16xf32, #a>, i32, i32) -> ()
  return
}

// -----

// A warp count that is not 1..32 (found by the fuzzer: it reached the GPU
// function's builder and crashed there).

#row = #tile.blocked<array<i64: 1, 8>, array<i64: 1, 32>, array<i64: 1, 2>, array<i64: 1, 0>>
// expected-error @+1 {{tile.num_warps must be a power of two from 1 to 32, got -1 : i32}}
func.func @bad_warps(%x: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.num_warps = -1 : i32} {
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%x, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 512>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x512xbf16, #row>
  return
}

// -----

// A wgmma operand whose shared layout has no swizzle wgmma knows (0 bytes): a located
// error, not a crash (found by fuzz_mlir.py --seed 20261210).

#sa = #tile.shared<0 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>
module attributes {tile.stage = "layout", tile.target = "sm_90a"} {
func.func @specialized(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %c0, %k) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %ts = "tile.load"(%a, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    // expected-error @+1 {{a wgmma operand in shared memory needs a swizzle of 32, 64, 128 bytes; its layout has 0}}
    %d = "tile.mma"(%ta, %ts, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}
}

// -----

// Hand-written layout IR that stores a tile it loaded into a shared-memory layout
// (the fuzzer's mutants of pipeline-loops.mlir @copy_parts_read_elsewhere reached
// this as an internal error): a store reads registers, and the layout stage puts a
// tile.convert_layout before such a use.

#sh = #tile.shared<128 : i64, array<i64: 1, 0>>
module attributes {tile.stage = "layout", tile.target = "sm_90a"} {
func.func @store_from_shared(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %e: !tile.array<bf16, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%a, %c0, %c0) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16, #sh>
  // expected-error @+1 {{this op reads a tile in registers, but the tile's layout keeps it in shared memory (tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>): convert it to a register layout first (tile.convert_layout)}}
  "tile.store"(%e, %t, %c0, %c0) : (!tile.array<bf16, 2 : i64>, tensor<64x128xbf16, #sh>, i32, i32) -> ()
  return
}
}
