// RUN: not tile-opt %s --pass-pipeline='builtin.module(tile-canonicalize,no-such-pass)' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tile-opt %s --pass-pipeline='tile-cxe' 2>&1 | FileCheck %s --check-prefix=TYPO
// RUN: not tile-opt %s --pass-pipeline='func.func(tile-cse)' 2>&1 | FileCheck %s --check-prefix=NESTED
// RUN: not tile-opt %s --pass-pipeline='tile-dce{aggressive=1}' 2>&1 | FileCheck %s --check-prefix=OPTIONS
// RUN: not tile-opt %s --pass-pipeline='canonicalize{no-such-option=1}' 2>&1 | FileCheck %s --check-prefix=UPSTREAM-OPTIONS
// RUN: not tile-opt %s --pass-pipeline='builtin.module(cse' 2>&1 | FileCheck %s --check-prefix=UNBALANCED
// RUN: not tile-opt %s --pass-pipeline='cse,,canonicalize' 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not tile-opt %s --tile-frobnicate 2>&1 | FileCheck %s --check-prefix=FLAG

// Bad pipelines are reported before any input is read: no IR is printed.

// UNKNOWN: tile-opt: error: unknown pass 'no-such-pass'; tile passes: tile-inline, tile-canonicalize, tile-licm, tile-cse, tile-dce, {{.*}}(upstream MLIR pass names work too)
// UNKNOWN-NOT: func.func
// TYPO: tile-opt: error: unknown pass 'tile-cxe'; did you mean 'tile-dce'?
// NESTED: tile-opt: error: 'func.func(tile-cse)': tile passes run on the whole module; put them at the top level of the pipeline, not inside an op anchor
// OPTIONS: tile-opt: error: pass 'tile-dce' takes no options (got 'tile-dce{aggressive=1}')
// UPSTREAM-OPTIONS: tile-opt: error: invalid pass 'canonicalize{no-such-option=1}': no such option no-such-option
// UNBALANCED: tile-opt: error: missing ')' at the end of pass pipeline 'builtin.module(cse'
// EMPTY: tile-opt: error: empty pass name in pass pipeline 'cse,,canonicalize'
// FLAG: tile-opt: error: unrecognized arguments: --tile-frobnicate

func.func @f() {
  return
}
