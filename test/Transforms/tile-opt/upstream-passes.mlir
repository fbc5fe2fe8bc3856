// RUN: tile-opt %s --pass-pipeline='canonicalize,cse,symbol-dce' | FileCheck %s
// RUN: not tile-opt %s --pass-pipeline='convert-scf-to-cf,tile-cse' 2>&1 | FileCheck %s --check-prefix=LOWERED

// Upstream passes keep tile ops they know nothing about (no memory effects:
// not erased, not merged) and can run in the same pipeline.  Tile passes need
// Tile IR: after an upstream lowering it is no longer Tile IR, and the
// pipeline stops with the pass named and the offending op located.

// CHECK-LABEL: func.func @kernel
// CHECK:         "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:    "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:    "tile.iota"() : () -> tensor<16xi32>
// CHECK-NEXT:    "tile.iota"() : () -> tensor<8xi32>
// CHECK:         scf.for

// LOWERED: tile-opt: error: the IR produced by 'convert-scf-to-cf' is invalid before 'tile-cse'
// LOWERED: upstream-passes.mlir:[[@LINE+7]]:3: error: 'cf.br' is not part of Tile IR
func.func @kernel(%a: !tile.array<i32, 1 : i64>, %n: i32) attributes {tile.kernel} {
  %b1 = "tile.bid"() {axis = 0 : i64} : () -> i32
  %b2 = "tile.bid"() {axis = 0 : i64} : () -> i32
  %iota = "tile.iota"() : () -> tensor<16xi32>
  %unused = "tile.iota"() : () -> tensor<8xi32>
  %c1 = arith.constant 1 : i32
  scf.for %i = %b1 to %n step %c1 : i32 {
    "tile.store"(%a, %iota, %b2) : (!tile.array<i32, 1 : i64>, tensor<16xi32>, i32) -> ()
  }
  return
}
