// RUN: tile-opt %s --target=sm_80 --stop-after=gpu 2>%t.remarks | FileCheck %s
// RUN: FileCheck %s --check-prefix=REMARK < %t.remarks
// RUN: tile-opt %s --target=sm_90a --stop-after=gpu 2>&1 >/dev/null | FileCheck %s --check-prefix=FITS --allow-empty

// Shared memory is a budget (backend/layout/budget.py).  A 128 x 256 x 128 fp16 GEMM:
// on sm_80 two stages of its tiles (2 x 96 KiB) do not fit the block's 163 KiB,
// so the stage driver reruns `layout` with K tiles half as long and `pipeline`
// takes as many stages of those as fit; a remark says what it chose and why.
// On sm_90a (227 KiB) the written tiles fit: no remark.
// REMARK: remark: sm_80: a ring of 2 x 98304 B with 0 B beside it needs 196608 B of shared memory, over the block's 166912: K tiles 2 times shorter
// Three stages of 128 x 64 and 64 x 256 tiles: 144 KiB.
// CHECK: module attributes {gpu.container_module, tile.fit = "sm_80: a ring of 2 x 98304 B
// CHECK-SAME: \22shared_bytes\22: 147456
// FITS-NOT: remark
module {
  func.func @gemm(%arg0: !tile.array<f16, 2 : i64> {tile.aligned}, %arg1: !tile.array<f16, 2 : i64> {tile.aligned}, %arg2: !tile.array<f16, 2 : i64> {tile.aligned}) attributes {tile.arg_names = ["A", "B", "C"], tile.kernel} {
    %c1_i32 = arith.constant 1 : i32
    %c0_i32 = arith.constant 0 : i32
    %c128_i32 = arith.constant 128 : i32
    %c127_i32 = arith.constant 127 : i32
    %cst = arith.constant dense<0.000000e+00> : tensor<128x256xf32>
    %0 = "tile.bid"() {axis = 0 : i64} : () -> i32
    %1 = "tile.bid"() {axis = 1 : i64} : () -> i32
    %2 = "tile.dim"(%arg0) {axis = 1 : i64} : (!tile.array<f16, 2 : i64>) -> i32
    %3 = arith.addi %2, %c127_i32 : i32
    %4 = arith.floordivsi %3, %c128_i32 : i32
    %5 = scf.for %arg3 = %c0_i32 to %4 step %c1_i32 iter_args(%arg4 = %cst) -> (tensor<128x256xf32>)  : i32 {
      %7 = "tile.load"(%arg0, %0, %arg3) {padding = "zero", tile_shape = array<i64: 128, 128>} : (!tile.array<f16, 2 : i64>, i32, i32) -> tensor<128x128xf16>
      %8 = "tile.load"(%arg1, %arg3, %1) {padding = "zero", tile_shape = array<i64: 128, 256>} : (!tile.array<f16, 2 : i64>, i32, i32) -> tensor<128x256xf16>
      %9 = "tile.mma"(%7, %8, %arg4) : (tensor<128x128xf16>, tensor<128x256xf16>, tensor<128x256xf32>) -> tensor<128x256xf32>
      scf.yield %9 : tensor<128x256xf32>
    }
    %6 = arith.truncf %5 : tensor<128x256xf32> to tensor<128x256xf16>
    "tile.store"(%arg2, %6, %0, %1) : (!tile.array<f16, 2 : i64>, tensor<128x256xf16>, i32, i32) -> ()
    return
  }
}
