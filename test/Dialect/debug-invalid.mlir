// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @two_conversions(%x: f32) {
  // expected-error @+1 {{'tile.print' op format '%f %f' has 2 conversions for 1 values (one value per tile.print at most)}}
  "tile.print"(%x) {format = "%f %f", more = 0 : i64} : (f32) -> ()
  return
}

// -----

func.func @int_conversion(%x: f32) {
  // expected-error @+1 {{'tile.print' op conversion %d prints integers, got f32}}
  "tile.print"(%x) {format = "%d", more = 0 : i64} : (f32) -> ()
  return
}

// -----

func.func @assert_type(%c: tensor<4xi32>) {
  // expected-error @+1 {{'tile.assert' op the condition must be i1 (a bool tile or scalar), got tensor<4xi32>}}
  "tile.assert"(%c) {message = ""} : (tensor<4xi32>) -> ()
  return
}

// -----

func.func @dependency_kind() {
  // expected-error @+1 {{'tile.grid_dependency' op kind 'signal' is not one of wait, launch_dependents}}
  "tile.grid_dependency"() {kind = "signal"} : () -> ()
  return
}
