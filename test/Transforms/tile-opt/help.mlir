// RUN: tile-opt --help | FileCheck %s
// RUN: tile-opt -help | FileCheck %s

// Every pass has a flag with its summary; the stages are listed in order.

// CHECK: usage: tile-opt
// CHECK: --pass-pipeline PIPELINE
// CHECK: --stop-after STAGE
// CHECK: --split-input-file
// CHECK: --verify-diagnostics
// CHECK: --print-ir-after-all
// CHECK: --mlir-print-debuginfo
// CHECK: tile passes (run in command-line order):
// CHECK-NEXT: --tile-inline         inline calls of tile.function helpers
// CHECK:      --tile-canonicalize   fold tile shape ops
// CHECK:      --tile-licm           hoist loop-invariant pure ops
// CHECK:      --tile-cse            merge identical pure ops
// CHECK:      --tile-dce            erase unused side-effect-free ops
// CHECK:      --tile-reverse-rereads
// CHECK-NEXT: {{ +}}run a loop that re-reads
// CHECK: stages, in order
// CHECK-NEXT: frontend  (no passes: what @kernel produces)
// CHECK-NEXT: tile      tile-inline, tile-canonicalize, tile-guard-masks, tile-licm, tile-cse, tile-reverse-rereads, tile-reassociate-reductions, tile-dce
