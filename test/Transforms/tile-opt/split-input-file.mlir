// RUN: not tile-opt %s -split-input-file 2>%t.err | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=ERR --implicit-check-not=error: < %t.err

// Each split is parsed, verified and printed on its own; an error in one split
// is reported at its line in this file and the next split is still processed.

// OUT-LABEL: func.func @first
// OUT:       // -----
// OUT-LABEL: func.func @third
// OUT:       // -----
// OUT-LABEL: func.func @fifth
// OUT-NOT:   // -----

func.func @first() {
  return
}

// -----

func.func @second() attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 9 : i64} : () -> i32
  return
}
// ERR: split-input-file.mlir:[[@LINE-3]]:8: error: 'tile.bid' op axis 9 is out of range for the grid of rank 3
// ERR-NEXT: {{^}}    %b = "tile.bid"() {axis = 9 : i64} : () -> i32
// ERR-NEXT: {{^}}         ^

// -----

func.func @third() {
  return
}

// -----

func.func @fourth() {
  %x = arith.addi %undefined, %undefined : i32
  return
}
// ERR: split-input-file.mlir:[[@LINE-3]]:19: error: use of undeclared SSA value name

// -----

func.func @fifth() {
  return
}
