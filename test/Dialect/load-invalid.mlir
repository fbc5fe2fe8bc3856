// RUN: tile-opt %s -split-input-file -verify-diagnostics

!A = !tile.array<f32, 2 : i64>

func.func @too_few_indices(%a: !A, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op expected 2 tile indices (one per array dim), got 1}}
  %t = "tile.load"(%a, %i) {tile_shape = array<i64: 16, 16>, padding = "zero"} : (!A, i32) -> tensor<16x16xf32>
  return
}

// -----

!A = !tile.array<f32, 2 : i64>

func.func @tile_shape_rank(%a: !A, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op tile_shape [16] has rank 1, but the array has rank 2}}
  %t = "tile.load"(%a, %i, %i) {tile_shape = array<i64: 16>, padding = "zero"} : (!A, i32, i32) -> tensor<16xf32>
  return
}

// -----

!A = !tile.array<f32, 2 : i64>

func.func @result_shape(%a: !A, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op result shape [16, 8] does not match tile_shape [16, 16]}}
  %t = "tile.load"(%a, %i, %i) {tile_shape = array<i64: 16, 16>, padding = "zero"} : (!A, i32, i32) -> tensor<16x8xf32>
  return
}

// -----

!A = !tile.array<f32, 2 : i64>

func.func @result_element_type(%a: !A, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op result element type f16 does not match the array element type f32 (expected f32)}}
  %t = "tile.load"(%a, %i, %i) {tile_shape = array<i64: 16, 16>, padding = "zero"} : (!A, i32, i32) -> tensor<16x16xf16>
  return
}

// -----

func.func @unsigned_loads_signless(%a: !tile.array<ui8, 1 : i64>, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op result element type ui8 does not match the array element type ui8 (expected i8)}}
  %t = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "zero"} : (!tile.array<ui8, 1 : i64>, i32) -> tensor<16xui8>
  return
}

// -----

!A = !tile.array<f32, 1 : i64>

func.func @unknown_padding(%a: !A, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op unknown padding 'ones'; expected one of zero, neg_zero, neg_inf, pos_inf, nan, undetermined}}
  %t = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "ones"} : (!A, i32) -> tensor<16xf32>
  return
}

// -----

func.func @nan_padding_of_ints(%a: !tile.array<i32, 1 : i64>, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op padding 'nan' needs a float element type, got i32}}
  %t = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "nan"} : (!tile.array<i32, 1 : i64>, i32) -> tensor<16xi32>
  return
}

// -----

func.func @neg_inf_padding_of_ints(%a: !tile.array<i8, 1 : i64>, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op padding 'neg_inf' needs a float element type, got i8}}
  %t = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "neg_inf"} : (!tile.array<i8, 1 : i64>, i32) -> tensor<16xi8>
  return
}

// -----

!A = !tile.array<f32, 1 : i64>

func.func @missing_padding(%a: !A, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op attribute "padding" is expected but not provided}}
  %t = "tile.load"(%a, %i) {tile_shape = array<i64: 16>} : (!A, i32) -> tensor<16xf32>
  return
}

// -----

!A = !tile.array<f32, 1 : i64>

func.func @tile_shape_not_i64(%a: !A, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' op attribute 'tile_shape' must be an array<i64: ...>, got array<i32: 16>}}
  %t = "tile.load"(%a, %i) {tile_shape = array<i32: 16>, padding = "zero"} : (!A, i32) -> tensor<16xf32>
  return
}

// -----

!A = !tile.array<f32, 1 : i64>

func.func @index_not_i32(%a: !A, %i: i64) attributes {tile.kernel} {
  // expected-error @+1 {{expected 'i32' but got 'i64'}}
  %t = "tile.load"(%a, %i) {tile_shape = array<i64: 16>, padding = "zero"} : (!A, i64) -> tensor<16xf32>
  return
}

// -----

!A = !tile.array<f32, 1 : i64>

func.func @non_power_of_two_tile(%a: !A, %i: i32) attributes {tile.kernel} {
  // expected-error @+1 {{'tile.load' tile shape [12] must have power-of-two dims; got 12 (pad the tile up to the next power of two and mask)}}
  %t = "tile.load"(%a, %i) {tile_shape = array<i64: 12>, padding = "zero"} : (!A, i32) -> tensor<12xf32>
  return
}

// -----

func.func @in_bounds_not_unit(%a: !tile.array<f32, 1 : i64>, %i: i32) {
  // expected-error @+1 {{'tile.load' op tile.in_bounds must be a unit attribute, got true}}
  %t = "tile.load"(%a, %i) {padding = "zero", tile_shape = array<i64: 16>, tile.in_bounds = true} : (!tile.array<f32, 1 : i64>, i32) -> tensor<16xf32>
  return
}

// -----

func.func @in_bounds_relaxed(%a: !tile.array<f32, 1 : i64>, %t: tensor<16xf32>, %i: i32) {
  // expected-error @+1 {{'tile.store' op tile.in_bounds applies to weak accesses, not to one with tile.memory_scope}}
  "tile.store"(%a, %t, %i) {tile.in_bounds, tile.memory_scope = "device"} : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
  return
}
