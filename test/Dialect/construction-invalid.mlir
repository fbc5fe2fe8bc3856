// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @iota_2d() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.iota' op result must be a 1-D tile, got rank 2}}
  %0 = "tile.iota"() : () -> tensor<4x4xi32>
  return
}

// -----

func.func @iota_float() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.iota' op result element type must be an integer of 8 bits or more, got f32}}
  %0 = "tile.iota"() : () -> tensor<16xf32>
  return
}

// -----

func.func @iota_bool() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.iota' op result element type must be an integer of 8 bits or more, got i1}}
  %0 = "tile.iota"() : () -> tensor<2xi1>
  return
}

// -----

func.func @iota_overflow() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.iota' op 256 elements do not fit in i8}}
  %0 = "tile.iota"() : () -> tensor<256xi8>
  return
}

// -----

func.func @iota_scalar() attributes {tile.kernel} {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.integer'}}
  %0 = "tile.iota"() : () -> i32
  return
}

// -----

func.func @iota_not_power_of_two() attributes {tile.kernel} {
  // expected-error @+1 {{'tile.iota' tile shape [100] must have power-of-two dims; got 100}}
  %0 = "tile.iota"() : () -> tensor<100xi32>
  return
}

// -----

func.func @constant_not_power_of_two() attributes {tile.kernel} {
  // expected-error @+1 {{'arith.constant' tile shape [3, 4] must have power-of-two dims; got 3}}
  %0 = arith.constant dense<1.0> : tensor<3x4xf32>
  return
}

// -----

func.func @splat_not_power_of_two(%s: f32) attributes {tile.kernel} {
  // expected-error @+1 {{'tensor.splat' tile shape [48] must have power-of-two dims; got 48}}
  %0 = tensor.splat %s : tensor<48xf32>
  return
}

// -----

func.func @dynamic_tile(%s: f32) attributes {tile.kernel} {
  %c = arith.constant 4 : index
  // expected-error @+1 {{'tensor.splat' tile shape}}
  %0 = tensor.splat %s[%c] : tensor<?xf32>
  return
}

// -----

func.func @splat_type_mismatch(%s: f32) attributes {tile.kernel} {
  // expected-error @+1 {{'tensor.splat' op failed to verify that operand type matches element type of result}}
  %0 = "tensor.splat"(%s) : (f32) -> tensor<4xi32>
  return
}
