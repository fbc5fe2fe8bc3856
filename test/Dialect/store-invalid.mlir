// RUN: tile-opt %s -split-input-file -verify-diagnostics

!A = !tile.array<f32, 2 : i64>

func.func @wrong_index_count(%a: !A, %t: tensor<16x16xf32>, %i: i32) {
  // expected-error @+1 {{'tile.store' op expected 2 tile indices (one per array dim), got 3}}
  "tile.store"(%a, %t, %i, %i, %i) : (!A, tensor<16x16xf32>, i32, i32, i32) -> ()
  return
}

// -----

!A = !tile.array<f32, 2 : i64>

func.func @wrong_rank(%a: !A, %t: tensor<256xf32>, %i: i32) {
  // expected-error @+1 {{'tile.store' op stored tile has rank 1, but the array has rank 2}}
  "tile.store"(%a, %t, %i, %i) : (!A, tensor<256xf32>, i32, i32) -> ()
  return
}

// -----

!A = !tile.array<f32, 1 : i64>

func.func @wrong_element_type(%a: !A, %t: tensor<16xf16>, %i: i32) {
  // expected-error @+1 {{'tile.store' op stored tile element type f16 does not match the array element type f32 (convert it first)}}
  "tile.store"(%a, %t, %i) : (!A, tensor<16xf16>, i32) -> ()
  return
}

// -----

!A = !tile.array<f32, 1 : i64>

func.func @scalar_stored(%a: !A, %s: f32, %i: i32) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  "tile.store"(%a, %s, %i) : (!A, f32, i32) -> ()
  return
}

// -----

!A = !tile.array<f32, 1 : i64>

func.func @store_has_no_result(%a: !A, %t: tensor<16xf32>, %i: i32) {
  // expected-error @+1 {{op expects exactly 0 results, but got 1}}
  %r = "tile.store"(%a, %t, %i) : (!A, tensor<16xf32>, i32) -> i32
  return
}

// -----

func.func @array_operand_first(%t: tensor<16xf32>, %i: i32) {
  // expected-error @+1 {{expected base type 'tile.array' but got 'builtin.tensor'}}
  "tile.store"(%t, %t, %i) : (tensor<16xf32>, tensor<16xf32>, i32) -> ()
  return
}
