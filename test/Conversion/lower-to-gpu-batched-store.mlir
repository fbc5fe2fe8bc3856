// RUN: tile-opt %s --tile-lower-to-gpu | FileCheck %s

// A batched product's (1, M, N) accumulator tile (an mma_acc layout with a leading
// unit dim) stored into an aligned 3-d array: the TMA store of a 2-d tile
// (backend/gpu/tma_store.py), its box (1, 64, 64) one plane of the array; the
// registers go to swizzled shared memory by stmatrix, then one thread stores the
// box at (column, row, batch): TMA's coordinates run innermost first, the batch
// index (bid 2) last.

// CHECK: tile.kernel_meta = {{.*}}\22tensor_maps\22: [{\22slot\22: 7, \22param\22: 0, \22box\22: [1, 64, 64], \22swizzle\22: 128}]
// CHECK-LABEL: gpu.func @batched_store(
// CHECK-SAME:    %[[TMC:arg7]]: !llvm.ptr)
// CHECK:         %[[BX:.*]] = gpu.block_id  x
// CHECK:         %[[I:.*]] = arith.index_castui %[[BX]] : index to i32
// CHECK:         %[[BZ:.*]] = gpu.block_id  z
// CHECK:         %[[Z:.*]] = arith.index_castui %[[BZ]] : index to i32
// CHECK:         %[[ROW:.*]] = arith.muli %[[I]], %c64_i32
// CHECK:         %[[COL:.*]] = arith.muli %c0_i32, %c64_i32
// CHECK-COUNT-4: nvvm.stmatrix
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT:    gpu.barrier
// CHECK:         scf.if
// CHECK-NEXT:      nvvm.cp.async.bulk.tensor.global.shared.cta %[[TMC]], %{{.*}}, box[%[[COL]], %[[ROW]], %[[Z]]]
// CHECK-NEXT:      nvvm.cp.async.bulk.commit.group
// CHECK-NOT:     llvm.store

#acc3 = #tile.mma_acc<3 : i64, array<i64: 1, 4, 1>, array<i64: 1, 64, 64>>
module {
  func.func @batched_store(%c: !tile.array<bf16, 3 : i64> {tile.aligned}) attributes {tile.arg_names = ["c"], tile.kernel, tile.num_warps = 4 : i32} {
    %c0 = arith.constant 0 : i32
    %i = "tile.bid"() {axis = 0 : i64} : () -> i32
    %z = "tile.bid"() {axis = 2 : i64} : () -> i32
    %t = arith.constant dense<1.0> : tensor<1x64x64xbf16, #acc3>
    "tile.store"(%c, %t, %z, %i, %c0) : (!tile.array<bf16, 3 : i64>, tensor<1x64x64xbf16, #acc3>, i32, i32, i32) -> ()
    return
  }
}
