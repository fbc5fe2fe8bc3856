// RUN: rm -f %t.cubin
// RUN: not tile-opt %s --emit=cubin --pass-pipeline='builtin.module()' -o %t.cubin 2>&1 | FileCheck %s --check-prefix=NOT-YET
// RUN: not test -e %t.cubin
// RUN: env TILEIR_PTXAS=%t.no-such-ptxas not tile-opt %s --emit=cubin -o %t.cubin 2>&1 | FileCheck %s --check-prefix=NO-PTXAS
// RUN: not test -e %t.cubin
// RUN: not tile-opt %s -split-input-file --emit=cubin -o %t.cubin 2>&1 | FileCheck %s --check-prefix=SPLIT

// --emit=cubin needs a module that holds a cubin; on failure nothing is
// written (no empty or partial file for a build to pick up).  None of these
// runs reaches ptxas.

// NO-PTXAS: tile-opt: error: TILEIR_PTXAS={{.*}}no-such-ptxas does not exist
// SPLIT: tile-opt: error: --emit=cubin writes one binary; it cannot be combined with --split-input-file
// NOT-YET: emit-cubin-invalid.mlir:[[@LINE+1]]:1: error: --emit=cubin: the module is at stage 'ptx' and holds no cubin yet; compile it up to that stage with --stop-after=cubin
module attributes {gpu.container_module, tile.stage = "ptx", tile.target = "sm_80"} {
  gpu.binary @tileir_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, assembly = ".version 8.0\0A.target sm_80\0A.address_size 64\0A">]
}
