// RUN: tile-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{a tile.kernel function must not return values (store results into arrays instead)}}
func.func @kernel_returns(%x: i32) -> i32 attributes {tile.kernel} {
  return %x : i32
}

// -----

// expected-error @+2 {{kernel argument #1 has type memref<16xf32>; kernels take !tile.array and scalar arguments}}
// expected-error @+1 {{'func.func' type memref<16xf32> is not allowed in Tile IR (tiles are ranked static tensors)}}
func.func @kernel_takes_memref(%a: !tile.array<f32, 1 : i64>, %m: memref<16xf32>) attributes {tile.kernel} {
  return
}

// -----

func.func @memref_in_kernel() attributes {tile.kernel} {
  // expected-error @+2 {{'memref.alloc' is not part of Tile IR; inside a tile function use tile, arith, math, scf, func.call and tensor.splat/extract/from_elements}}
  // expected-error @+1 {{'memref.alloc' type memref<16xf32> is not allowed in Tile IR}}
  %m = memref.alloc() : memref<16xf32>
  return
}

// -----

func.func private @helper_uses_tensor_empty() -> tensor<16xf32> attributes {tile.function} {
  // expected-error @+1 {{'tensor.empty' is not part of Tile IR}}
  %e = tensor.empty() : tensor<16xf32>
  return %e : tensor<16xf32>
}

// -----

func.func @cf_in_kernel(%c: i1) attributes {tile.kernel} {
  // expected-error @+1 {{'cf.cond_br' is not part of Tile IR}}
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  return
^bb2:
  return
}

// -----

func.func @non_power_of_two_tile(%a: !tile.array<f32, 2 : i64>, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' tile shape [64, 48] must have power-of-two dims; got 48 (pad the tile up to the next power of two and mask)}}
  %t = "tile.load"(%a, %i, %i) {tile_shape = array<i64: 64, 48>, padding = "zero"} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x48xf32>
  return
}

// -----

// expected-error @+1 {{'func.func' tile shape [6] must have power-of-two dims; got 6}}
func.func private @helper_non_power_of_two(%t: tensor<6xf32>) attributes {tile.function} {
  return
}

// -----

func.func @loop_carried_non_power_of_two(%n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  // expected-error @+1 {{'arith.constant' tile shape [5] must have power-of-two dims; got 5}}
  %init = arith.constant dense<0.0> : tensor<5xf32>
  // expected-error @+1 {{'scf.for' tile shape [5] must have power-of-two dims; got 5}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %init) -> (tensor<5xf32>) : i32 {
    scf.yield %a : tensor<5xf32>
  }
  return
}

// -----

func.func @call_to_missing_helper() attributes {tile.kernel} {
  // expected-error @+1 {{'func.call' op 'missing' does not reference a valid function}}
  func.call @missing() : () -> ()
  return
}

// -----

func.func private @helper(%x: i32) -> i32 attributes {tile.function} {
  return %x : i32
}

func.func @call_with_wrong_type(%f: f32) attributes {tile.kernel} {
  // expected-error @+1 {{'func.call' op operand type mismatch: expected operand type 'i32', but provided 'f32' for operand number 0}}
  %r = func.call @helper(%f) : (f32) -> i32
  return
}

// -----

// The kernel's own num_warps must be a power of two within the block limit (the
// verifier's: a hand-written later-stage kernel reaches passes that read it).

// expected-error @+1 {{tile.num_warps must be a power of two from 1 to 32, got 3 : i32}}
func.func @three_warps(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 3 : i32} {
  return
}

// -----

// A ring of 2^31 stages ran the pipeline stage out of memory (found by the fuzzer).

// expected-error @+1 {{tile.num_stages must be an int from 2 to 8, got 2143289344 : i32}}
func.func @stages(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.num_stages = 0x7FC00000 : i32} {
  return
}
