// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @axis_too_large() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.bid' op axis 3 is out of range for the grid of rank 3 (expected 0 <= axis < 3)}}
  %b = "tile.bid"() {axis = 3 : i64} : () -> i32
  return
}

// -----

func.func @negative_axis() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.num_blocks' op axis -1 is out of range for the grid of rank 3}}
  %n = "tile.num_blocks"() {axis = -1 : i64} : () -> i32
  return
}

// -----

func.func @missing_axis() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.bid' op attribute "axis" is expected but not provided}}
  %b = "tile.bid"() : () -> i32
  return
}

// -----

func.func @axis_not_integer() attributes {tile.kernel} {
  // expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.string'}}
  %b = "tile.bid"() {axis = "x"} : () -> i32
  return
}

// -----

func.func @axis_not_i64() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.bid' op attribute 'axis' must be an i64 integer, got 1 : i32}}
  %b = "tile.bid"() {axis = 1 : i32} : () -> i32
  return
}

// -----

// An i128 too large for int64 used to trip an APInt assertion (an abort).
func.func @axis_i128() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.num_blocks' op attribute 'axis' must be an i64 integer, got 100000000000000000000000000 : i128}}
  %n = "tile.num_blocks"() {axis = 100000000000000000000000000 : i128} : () -> i32
  return
}

// -----

func.func @result_not_i32() attributes {tile.kernel} {
  // expected-error @+1 {{expected 'i32' but got 'i64'}}
  %b = "tile.bid"() {axis = 0 : i64} : () -> i64
  return
}

// -----

func.func @operand_given() attributes {tile.kernel} {
  %c = arith.constant 0 : i32
  // expected-error @+1 {{op expects exactly 0 operands, but got 1}}
  %b = "tile.bid"(%c) {axis = 0 : i64} : (i32) -> i32
  return
}

// -----

func.func @two_results() attributes {tile.kernel} {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %b:2 = "tile.bid"() {axis = 0 : i64} : () -> (i32, i32)
  return
}

// -----

// (found by fuzz_mlir.py: tile-cluster-pairs read a malformed grid scale and crashed)
// expected-error @+1 {{tile.grid_scale must be array<i64: axis, num, den> with axis 0 to 2 and num, den >= 1, got tensor<8x64xf32>}}
func.func @grid_scale_not_an_array() attributes {tile.kernel, tile.grid_scale = tensor<8x64xf32>} {
  return
}

// -----

// expected-error @+1 {{tile.grid_scale must be array<i64: axis, num, den> with axis 0 to 2 and num, den >= 1, got array<i64: 3, 1, 2>}}
func.func @grid_scale_axis() attributes {tile.kernel, tile.grid_scale = array<i64: 3, 1, 2>} {
  return
}
