// RUN: tile-opt %s --mlir-print-debuginfo | FileCheck %s
// RUN: tile-opt --mlir-print-debuginfo < %s | FileCheck %s --check-prefix=STDIN
// RUN: tile-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Locations name this file (or <stdin>) at the original lines and columns.

// CHECK:     "tile.bid"() {axis = 0 : i64} : () -> i32 loc(#[[BID:loc[0-9]*]])
// CHECK:     #[[BID]] = loc("{{.*}}debuginfo.mlir":[[@LINE+5]]:8)
// STDIN:     #{{loc[0-9]*}} = loc("<stdin>":[[@LINE+4]]:8)
// GENERIC:   "func.func"() <{function_type = () -> i32, sym_name = "f"}> ({
// GENERIC:     "func.return"
func.func @f() -> i32 {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  return %b : i32
}
