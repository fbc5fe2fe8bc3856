// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @address_rank(%a: !tile.array<f32, 2 : i64>, %i: i32) {
  // expected-error @+1 {{'tile.array_address' op expected 2 indices (one per array dim), got 1}}
  %p = "tile.array_address"(%a, %i) : (!tile.array<f32, 2 : i64>, i32) -> i64
  return
}

// -----

func.func @address_type(%a: !tile.array<f32, 1 : i64>, %i: i32) {
  // expected-error @+1 {{'tile.array_address' op the result must be an i64, got i32}}
  %p = "tile.array_address"(%a, %i) : (!tile.array<f32, 1 : i64>, i32) -> i32
  return
}

// -----

func.func @extents(%p: i64, %n: i64) {
  // expected-error @+1 {{'tile.make_array' op expected 2 dims and 2 strides for a rank-2 array, got 3 operands after the address}}
  %v = "tile.make_array"(%p, %n, %n, %n) : (i64, i64, i64, i64) -> !tile.array<f32, 2 : i64>
  return
}

// -----

func.func @extent_type(%p: i64, %n: i32) {
  // expected-error @+1 {{'tile.make_array' op dim 0 must be an i64, got i32}}
  %v = "tile.make_array"(%p, %n, %n) : (i64, i32, i32) -> !tile.array<f32, 1 : i64>
  return
}

// -----

func.func @address_operand(%p: i32, %n: i64) {
  // expected-error @+1 {{'tile.make_array' op the address must be an i64, got i32}}
  %v = "tile.make_array"(%p, %n, %n) : (i32, i64, i64) -> !tile.array<f32, 1 : i64>
  return
}

// -----

func.func @raw_rank(%p: i64) {
  // expected-error @+1 {{'tile.raw_memory' op raw memory is a 1-d array, got !tile.array<f32, 2 : i64>}}
  %m = "tile.raw_memory"(%p) : (i64) -> !tile.array<f32, 2 : i64>
  return
}
