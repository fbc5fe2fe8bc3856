// RUN: not tile-opt %s -split-input-file 2>&1 | FileCheck %s --implicit-check-not=Traceback

// Inputs that MLIR's parser rejects: each split reports one located error and
// processing continues with the next split.

func.func @custom_form() {
  %b = tile.bid {axis = 0 : i64} : i32
  return
}
// CHECK: syntax-invalid.mlir:[[@LINE-3]]:8: error: 'tile.bid' must be written in the generic form, e.g. %r = "tile.bid"(%x) {attr = ...} : (operand types) -> result type (IRDL ops have no custom assembly)
// CHECK-NEXT: {{^}}    %b = tile.bid {axis = 0 : i64} : i32
// CHECK-NEXT: {{^}}         ^

// -----

func.func @unknown_tile_op() {
  %b = "tile.block_id"() {axis = 0 : i64} : () -> i32
  return
}
// CHECK: syntax-invalid.mlir:[[@LINE-3]]:8: error: unregistered operation 'tile.block_id' found in dialect ('tile') that does not allow unknown operations

// -----

func.func @unknown_dialect() {
  "cutile.bid"() : () -> ()
  return
}
// CHECK: syntax-invalid.mlir:[[@LINE-3]]:15: error: operation being parsed with an unregistered dialect

// -----

func.func @undefined_value() {
  %r = arith.addi %nope, %nope : i32
  return
}
// CHECK: syntax-invalid.mlir:[[@LINE-3]]:19: error: use of undeclared SSA value name

// -----

func.func @wrong_operand_types(%a: tensor<16xf32>) {
  %0 = "tile.reshape"(%a) : (tensor<16xf16>) -> tensor<4x4xf32>
  return
}
// CHECK: syntax-invalid.mlir:[[@LINE-3]]:23: error: use of value '%a' expects different type than prior uses: 'tensor<16xf16>' vs 'tensor<16xf32>'

// -----

func.func @truncated() {
  %b = "tile.bid"() {axis = 0 : i64
// The error is at the end of the input: the end of this line.
// CHECK: syntax-invalid.mlir:[[@LINE]]:{{[0-9]+}}: error: expected '}' in attribute dictionary
