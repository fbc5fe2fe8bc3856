// RUN: not tile-opt %s -split-input-file -verify-diagnostics 2>&1 | FileCheck %s

// -verify-diagnostics fails on an error nobody expected and on an expected
// error that did not happen, pointing at the right lines.

func.func @unexpected() attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 5 : i64} : () -> i32
  return
}
// CHECK: verify-diagnostics.mlir:[[@LINE-3]]:8: error: unexpected error: 'tile.bid' op axis 5 is out of range

// -----

func.func @missing() attributes {tile.kernel} {
  // expected-error @+1 {{this error does not happen}}
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  return
}
// CHECK: verify-diagnostics.mlir:[[@LINE-4]]:6: error: expected error "this error does not happen" was not produced

// -----

// Expected, on the right line: no complaint.
func.func @met() attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 4 : i64} : () -> i32 // expected-error {{axis 4 is out of range}}
  return
}
// CHECK-NOT: error:
