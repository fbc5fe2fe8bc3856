// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @empty(%i: i32) {
  // expected-error @+1 {{'tile.select_array' op expected at least one array to select from}}
  %s = "tile.select_array"(%i) : (i32) -> !tile.array<f32, 1 : i64>
  return
}

// -----

func.func @result_type(%i: i32, %a: !tile.array<f32, 1 : i64>, %b: !tile.array<f32, 1 : i64>) {
  // expected-error @+1 {{'tile.select_array' op array 0 is !tile.array<f32, 1 : i64> but the result is !tile.array<f16, 1 : i64>; the arrays of a list share one type}}
  %s = "tile.select_array"(%i, %a, %b) : (i32, !tile.array<f32, 1 : i64>, !tile.array<f32, 1 : i64>) -> !tile.array<f16, 1 : i64>
  return
}

// -----

// IRDL ties the types of a variadic operand group: one type for every array.
func.func @mixed(%i: i32, %a: !tile.array<f32, 1 : i64>, %b: !tile.array<f32, 2 : i64>) {
  // expected-error @+1 {{expected '!tile.array<f32, 1 : i64>' but got '!tile.array<f32, 2 : i64>'}}
  %s = "tile.select_array"(%i, %a, %b) : (i32, !tile.array<f32, 1 : i64>, !tile.array<f32, 2 : i64>) -> !tile.array<f32, 1 : i64>
  return
}

// -----

func.func @index(%i: i64, %a: !tile.array<f32, 1 : i64>) {
  // expected-error @+1 {{expected 'i32' but got 'i64'}}
  %s = "tile.select_array"(%i, %a) : (i64, !tile.array<f32, 1 : i64>) -> !tile.array<f32, 1 : i64>
  return
}

// -----

func.func @table_type(%t: !tile.array<i32, 2 : i64>, %i: i32) {
  // expected-error @+1 {{'tile.list_get' op the table of a list is an i64 array of rank 2 (one row of address, dims and strides per element), got !tile.array<i32, 2 : i64>}}
  %a = "tile.list_get"(%t, %i) {aligned = false} : (!tile.array<i32, 2 : i64>, i32) -> !tile.array<f32, 1 : i64>
  return
}

// -----

func.func @table_rank(%t: !tile.array<i64, 1 : i64>, %i: i32) {
  // expected-error @+1 {{'tile.list_get' op the table of a list is an i64 array of rank 2}}
  %a = "tile.list_get"(%t, %i) {aligned = false} : (!tile.array<i64, 1 : i64>, i32) -> !tile.array<f32, 1 : i64>
  return
}

// -----

func.func @aligned_is_a_bool(%t: !tile.array<i64, 2 : i64>, %i: i32) {
  // expected-error @+1 {{'tile.list_get' op 'aligned' is a bool (true or false), got 1 : i64}}
  %a = "tile.list_get"(%t, %i) {aligned = 1 : i64} : (!tile.array<i64, 2 : i64>, i32) -> !tile.array<f32, 1 : i64>
  return
}

// -----

func.func @no_aligned(%t: !tile.array<i64, 2 : i64>, %i: i32) {
  // expected-error @+1 {{'tile.list_get' op attribute "aligned" is expected but not provided}}
  %a = "tile.list_get"(%t, %i) : (!tile.array<i64, 2 : i64>, i32) -> !tile.array<f32, 1 : i64>
  return
}
