// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @shapes_differ(%a: tensor<16xf32>, %b: tensor<32xf32>) attributes {tile.function} {
  // expected-error @+1 {{'arith.addf' op requires the same type for all operands and results}}
  %0 = "arith.addf"(%a, %b) : (tensor<16xf32>, tensor<32xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @float_op_on_ints(%a: tensor<16xi32>) attributes {tile.function} {
  // expected-error @+1 {{'arith.mulf' op operand #0 must be floating-point-like, but got 'tensor<16xi32>'}}
  %0 = arith.mulf %a, %a : tensor<16xi32>
  return
}

// -----

func.func @select_condition_shape(%c: tensor<8xi1>, %a: tensor<16xf32>) attributes {tile.function} {
  // expected-error @+1 {{'arith.select' op failed to verify that condition is signless i1 or has matching shape}}
  %0 = arith.select %c, %a, %a : tensor<8xi1>, tensor<16xf32>
  return
}

// -----

func.func @extf_narrows(%a: tensor<16xf32>) attributes {tile.function} {
  // expected-error @+1 {{'arith.extf' op operand type 'tensor<16xf32>' and result type 'tensor<16xf16>' are cast incompatible}}
  %0 = arith.extf %a : tensor<16xf32> to tensor<16xf16>
  return
}

// -----

func.func @trunci_widens(%a: tensor<16xi8>) attributes {tile.function} {
  // expected-error @+1 {{'arith.trunci' op operand type 'tensor<16xi8>' and result type 'tensor<16xi32>' are cast incompatible}}
  %0 = arith.trunci %a : tensor<16xi8> to tensor<16xi32>
  return
}

// -----

func.func @cast_changes_shape(%a: tensor<16xi32>) attributes {tile.function} {
  // expected-error @+1 {{'arith.sitofp' op failed to verify that input and output have the same tensor dimensions}}
  %0 = "arith.sitofp"(%a) : (tensor<16xi32>) -> tensor<32xf32>
  return
}

// -----

func.func @math_non_power_of_two(%a: tensor<24xf32>) attributes {tile.function} {
  // expected-error @-1 {{'func.func' tile shape [24] must have power-of-two dims; got 24}}
  // expected-error @+1 {{'math.exp' tile shape [24] must have power-of-two dims; got 24}}
  %0 = math.exp %a : tensor<24xf32>
  return
}

// -----

func.func @unranked_tile(%a: tensor<*xf32>) attributes {tile.function} {
  // expected-error @-1 {{unranked tensor and memref types are not Tile IR (tiles have static shapes)}}
  return
}

// -----

// Refused before MLIR parses it: its own verifier of arith.sitofp asserts on an
// unranked result (found by the fuzzer).

func.func @cast_to_unranked(%a: tensor<16xi32>) attributes {tile.function} {
  // expected-error @+1 {{unranked tensor and memref types are not Tile IR (tiles have static shapes)}}
  %0 = "arith.sitofp"(%a) : (tensor<16xi32>) -> tensor<*xf32>
  return
}

// -----

// Refused before MLIR parses it: its parser asserts on a dense array of index
// elements (found by the fuzzer in a mutated tile_shape).

!S = !tile.array<f64, 0 : i64>
func.func @index_array(%s: !S, %o: !S) attributes {tile.kernel} {
  // expected-error @+1 {{a dense array attribute holds integers or floats (array<i64: 1, 2>, array<f32: ...>)}}
  %t = "tile.load"(%s) {padding = "zero", tile_shape = array<index>} : (!S) -> tensor<f64>
  "tile.store"(%o, %t) : (!S, tensor<f64>) -> ()
  return
}
