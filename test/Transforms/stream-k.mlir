// RUN: tile-opt %s --tile-persistent-tiles | FileCheck %s
// RUN: tile-opt %s --tile-assign-layouts --tile-persistent-tiles --tile-pipeline-loops --tile-lower-to-gpu | FileCheck %s --check-prefix=GPU

// Stream-K (backend/pipeline/stream_k.py): the persistent tile loop counts this block's
// segments: whole tiles (pid + s * blocks) first, then the tiles its run of K
// iterations touches; the K loop runs the segment's k_lo .. k_hi.  After it, a
// tail (k_lo > 0) stores its partial sum in the block's slot, a head (k_lo = 0,
// k_hi < n) adds the next block's, and only a segment that is not a tail runs
// the epilogue.  The trip count n is computed before the loop (cloned).

// CHECK-LABEL: func.func @gemm
// CHECK:         %[[N:.*]] = arith.floordivsi
// CHECK:         %[[NN:.*]] = arith.maxsi %[[N]], %{{.*}} : i32
// CHECK:         scf.for %[[S:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[WHOLE:.*]] = arith.cmpi slt, %[[S]]
// CHECK:           %[[KLO:.*]] = arith.select %[[WHOLE]], %c0{{.*}}, %{{.*}} : i32
// CHECK:           %[[KHI:.*]] = arith.select %[[WHOLE]], %[[NN]], %{{.*}} : i32
// CHECK:           %[[ACC:.*]] = scf.for %{{.*}} = %[[KLO]] to %[[KHI]] step
// CHECK:             "tile.mma"
// CHECK:           "tile.partial_store"(%[[ACC]], %[[PID:.*]], %[[TAIL:.*]]) :
// CHECK:           %[[SUM:.*]] = "tile.partial_add"(%[[ACC]], %{{.*}}, %{{.*}}) :
// CHECK:           %[[KEEP:.*]] = arith.xori %[[TAIL]], %{{.*}} : i1
// CHECK:           scf.if %[[KEEP]] {
// CHECK:             "tile.store"(%{{.*}}, %[[SUM]],
// CHECK:         } {tile.persistent_loop}

// At the gpu stage the workspace is a pointer after the walked grid; the metadata
// gives one block's slot: 64 x 64 f32 = 16384 bytes.  The tail's block writes its
// registers as 16-byte chunks, gathers, and thread 0 publishes the flag; the
// head's thread 0 waits for the flag (and clears it), the block gathers, and
// every thread reads its chunks from L2 and adds them.
// GPU: tile.kernel_meta = {{.*}}\22workspace\22: 16384
// GPU-LABEL: gpu.func @gemm(
// GPU-SAME:    %arg15: i32, %arg16: i32, %arg17: i32, %arg18: !llvm.ptr<1> {llvm.align = 16 : i64}
// GPU:         "st.global.v4.f32 [$0], {$1, $2, $3, $4};"
// GPU:         gpu.barrier
// GPU:         "fence.acq_rel.gpu;\0A\09st.relaxed.gpu.global.b32 [$0], $1;"
// GPU:         ld.acquire.gpu.global.b32
// GPU:         gpu.barrier
// GPU:         "ld.global.cg.v4.f32 {$0, $1, $2, $3}, [$4];"

module attributes {tile.target = "sm_90a"} {
func.func @gemm(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.persistent = true, tile.stream_k = true, tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c63 = arith.constant 63 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %k = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %k1 = arith.addi %k, %c63 : i32
  %n = arith.floordivsi %k1, %c64 : i32
  %acc = scf.for %t = %c0 to %n step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %tb = "tile.load"(%b, %t, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  "tile.store"(%c, %acc, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}
}
