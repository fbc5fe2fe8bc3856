// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @unknown_kind(%t: tensor<16xf32>) {
  // expected-error @+1 {{'tile.reduce' op unknown reduction kind 'mean'; expected one of sum, prod, max, min, argmax, argmin, maxnum, minnum, argmaxnum, argminnum}}
  %0 = "tile.reduce"(%t) {kind = "mean", axis = 0 : i64} : (tensor<16xf32>) -> tensor<f32>
  return
}

// -----

func.func @axis_out_of_range(%t: tensor<16x8xf32>) {
  // expected-error @+1 {{'tile.reduce' op axis 2 is out of range for the source tile of rank 2 (expected 0 <= axis < 2)}}
  %0 = "tile.reduce"(%t) {kind = "sum", axis = 2 : i64} : (tensor<16x8xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @rank0_source(%t: tensor<f32>) {
  // expected-error @+1 {{'tile.reduce' op cannot reduce a rank-0 tile}}
  %0 = "tile.reduce"(%t) {kind = "sum", axis = 0 : i64} : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @bool_source(%t: tensor<16xi1>) {
  // expected-error @+1 {{'tile.reduce' op cannot reduce element type i1 (convert booleans first)}}
  %0 = "tile.reduce"(%t) {kind = "sum", axis = 0 : i64} : (tensor<16xi1>) -> tensor<i1>
  return
}

// -----

func.func @axis_kept(%t: tensor<16x8xf32>) {
  // expected-error @+1 {{'tile.reduce' op result shape [1, 8] should be [8] (source shape without axis 0)}}
  %0 = "tile.reduce"(%t) {kind = "max", axis = 0 : i64} : (tensor<16x8xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @sum_changes_type(%t: tensor<16xf16>) {
  // expected-error @+1 {{'tile.reduce' op 'sum' of f16 gives f16, but the result is f32}}
  %0 = "tile.reduce"(%t) {kind = "sum", axis = 0 : i64} : (tensor<16xf16>) -> tensor<f32>
  return
}

// -----

func.func @argmax_not_i32(%t: tensor<16xf32>) {
  // expected-error @+1 {{'tile.reduce' op 'argmax' of f32 gives i32, but the result is i64}}
  %0 = "tile.reduce"(%t) {kind = "argmax", axis = 0 : i64} : (tensor<16xf32>) -> tensor<i64>
  return
}

// -----

func.func @argmin_not_i32(%t: tensor<16xi8>) {
  // expected-error @+1 {{'tile.reduce' op 'argmin' of i8 gives i32, but the result is i8}}
  %0 = "tile.reduce"(%t) {kind = "argmin", axis = 0 : i64} : (tensor<16xi8>) -> tensor<i8>
  return
}

// -----

func.func @kind_not_string(%t: tensor<16xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.string' but got 'builtin.integer'}}
  %0 = "tile.reduce"(%t) {kind = 0 : i64, axis = 0 : i64} : (tensor<16xf32>) -> tensor<f32>
  return
}

// -----

func.func @missing_axis(%t: tensor<16xf32>) {
  // expected-error @+1 {{'tile.reduce' op attribute "axis" is expected but not provided}}
  %0 = "tile.reduce"(%t) {kind = "sum"} : (tensor<16xf32>) -> tensor<f32>
  return
}

// -----

func.func @maxnum_of_ints(%t: tensor<16xi32>) {
  // expected-error @+1 {{'tile.reduce' op 'maxnum' ignores NaN and needs a float source, got i32 (use 'max')}}
  %0 = "tile.reduce"(%t) {kind = "maxnum", axis = 0 : i64} : (tensor<16xi32>) -> tensor<i32>
  return
}

// -----

func.func @argminnum_not_i32(%t: tensor<16xf16>) {
  // expected-error @+1 {{'tile.reduce' op 'argminnum' of f16 gives i32, but the result is f16}}
  %0 = "tile.reduce"(%t) {kind = "argminnum", axis = 0 : i64} : (tensor<16xf16>) -> tensor<f16>
  return
}

// -----

func.func @rounding_nearest(%t: tensor<16xf32>) {
  // expected-error @+1 {{'tile.reduce' op tile.rounding must be one of rz, rm, rp (round to nearest is the default), got 'rn'}}
  %0 = "tile.reduce"(%t) {kind = "sum", axis = 0 : i64, tile.rounding = "rn"} : (tensor<16xf32>) -> tensor<f32>
  return
}

// -----

func.func @rounding_a_max(%t: tensor<16xf32>) {
  // expected-error @+1 {{'tile.reduce' op tile.rounding applies to sums and products of f16/bf16/f32/f64, not 'max' of f32}}
  %0 = "tile.reduce"(%t) {kind = "max", axis = 0 : i64, tile.rounding = "rz"} : (tensor<16xf32>) -> tensor<f32>
  return
}

// -----

func.func @rounding_an_int_sum(%t: tensor<16xi32>) {
  // expected-error @+1 {{'tile.reduce' op tile.rounding applies to sums and products of f16/bf16/f32/f64, not 'sum' of i32}}
  %0 = "tile.reduce"(%t) {kind = "sum", axis = 0 : i64, tile.rounding = "rm"} : (tensor<16xi32>) -> tensor<i32>
  return
}

// -----

func.func @ftz_f16(%t: tensor<16xf16>) {
  // expected-error @+1 {{'tile.reduce' op tile.ftz applies to sum/prod/max/min kinds of f32, not 'sum' of f16}}
  %0 = "tile.reduce"(%t) {kind = "sum", axis = 0 : i64, tile.ftz = "true"} : (tensor<16xf16>) -> tensor<f16>
  return
}

// -----

func.func @ftz_argmax(%t: tensor<16xf32>) {
  // expected-error @+1 {{'tile.reduce' op tile.ftz applies to sum/prod/max/min kinds of f32, not 'argmaxnum' of f32}}
  %0 = "tile.reduce"(%t) {kind = "argmaxnum", axis = 0 : i64, tile.ftz = "true"} : (tensor<16xf32>) -> tensor<i32>
  return
}
