// RUN: tile-opt %s -o %t.out | count 0
// RUN: FileCheck %s < %t.out
// RUN: tile-opt - < %s | FileCheck %s
// RUN: not tile-opt %s -o %t.missing-dir/out.mlir 2>&1 | FileCheck %s --check-prefix=WRITE

// -o writes to a file (nothing on stdout); '-' reads stdin.

// CHECK-LABEL: func.func @f
// WRITE: tile-opt: error: cannot write '{{.*}}out.mlir': No such file or directory
func.func @f() {
  return
}
