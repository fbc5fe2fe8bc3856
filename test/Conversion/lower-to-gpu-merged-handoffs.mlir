// RUN: tile-opt %s --tile-split-warpgroups --tile-assign-layouts --tile-pipeline-loops --tile-lower-to-gpu | FileCheck %s

// backend/gpu/owner_runs.py, the kernel option `merged_handoffs`: a step's two
// hand-offs (alpha, then P; only O's elementwise rescale between them) share one pair
// of signals.  The owner waits on empty (8) once, writes alpha, writes P (stmatrix)
// past alpha's bytes, and arrives on full (9) once; the other warpgroup waits on full
// once, reads alpha, rescales, reads P (ldmatrix) and arrives on empty once.  The loop
// of lower-to-gpu-owner-runs.mlir's @mla_like, with the option.

// CHECK-LABEL: gpu.func @mla_like_merged
// CHECK:         scf.for
// CHECK:           nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>
// alpha: the owner waits on empty and writes, the other waits on full and reads; no
// arrival on either side yet.
// CHECK:           scf.if %{{.*}} -> (f32, f32) {
// CHECK:             nvvm.barrier id = %c8_i32{{.*}} number_of_threads
// CHECK-NOT:         nvvm.barrier
// CHECK:           } else {
// CHECK:             nvvm.barrier id = %c9_i32{{.*}} number_of_threads
// CHECK-NOT:         nvvm.barrier
// CHECK:           }
// P: no wait on either side; the owner's stmatrix, then its one arrival on full; the
// other's ldmatrix, then its one arrival on empty.
// CHECK-NOT:       nvvm.barrier
// CHECK:           scf.if %{{.*}} -> (bf16
// CHECK-NOT:         nvvm.barrier id
// CHECK:             nvvm.stmatrix
// CHECK-NOT:         nvvm.barrier id
// CHECK:             nvvm.barrier.arrive id = %c9_i32{{.*}} number_of_threads
// CHECK-NEXT:        scf.yield
// CHECK-NEXT:      } else {
// CHECK-NOT:         nvvm.barrier id
// CHECK:             nvvm.ldmatrix
// CHECK-NOT:         nvvm.barrier id
// CHECK:             nvvm.barrier.arrive id = %c8_i32{{.*}} number_of_threads
// CHECK-NEXT:        scf.yield
// CHECK:           }
// CHECK-NOT:       nvvm.barrier
// CHECK:           wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK:         scf.yield
// After the loop, l alone: a hand-off of its own, with both signals.
// CHECK:         nvvm.barrier id = %c8_i32{{.*}} number_of_threads
// CHECK:         nvvm.barrier.arrive id = %c9_i32{{.*}} number_of_threads
// CHECK:         nvvm.barrier id = %c9_i32{{.*}} number_of_threads
// CHECK:         nvvm.barrier.arrive id = %c8_i32{{.*}} number_of_threads
// CHECK:       gpu.return

func.func @mla_like_merged(%q_arr: !tile.array<bf16, 2 : i64> {tile.aligned}, %kv: !tile.array<bf16, 3 : i64> {tile.aligned},
                    %o_arr: !tile.array<f32, 2 : i64> {tile.aligned}, %n: i32, %steps: i32)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_split = true, tile.merged_handoffs = true,
               tile.product_rotation = false} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %cm63 = arith.constant -63 : i32
  %neg = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %zs = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %zo = arith.constant dense<0.000000e+00> : tensor<64x128xf32>
  %m0 = arith.constant dense<-1.000000e+30> : tensor<64x1xf32>
  %one = arith.constant dense<1.000000e+00> : tensor<64x1xf32>
  %qt = "tile.load"(%q_arr, %c0, %c0) {padding = "undetermined", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16>
  %r:3 = scf.for %j = %c0 to %steps step %c1 iter_args(%acc = %zo, %l = %zs, %m = %m0) -> (tensor<64x128xf32>, tensor<64x64xf32>, tensor<64x1xf32>) : i32 {
    %ct = "tile.load"(%kv, %j, %c0, %c0) {padding = "undetermined", tile_shape = array<i64: 1, 64, 128>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x128xbf16>
    %c = "tile.reshape"(%ct) : (tensor<1x64x128xbf16>) -> tensor<64x128xbf16>
    %cT = "tile.permute"(%c) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16>) -> tensor<128x64xbf16>
    %s = "tile.mma"(%qt, %cT, %zs) : (tensor<64x128xbf16>, tensor<128x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %jb = arith.muli %j, %c64 : i32
    %d = arith.subi %jb, %n : i32
    %whole = arith.cmpi sle, %d, %cm63 : i32
    %sm = scf.if %whole -> (tensor<64x64xf32>) {
      scf.yield %s : tensor<64x64xf32>
    } else {
      %i = "tile.iota"() : () -> tensor<64xi32>
      %jbs = tensor.splat %jb : tensor<64xi32>
      %pos = arith.addi %jbs, %i : tensor<64xi32>
      %pos2 = "tile.reshape"(%pos) : (tensor<64xi32>) -> tensor<1x64xi32>
      %ns = tensor.splat %n : tensor<1x64xi32>
      %keep = arith.cmpi sle, %pos2, %ns : tensor<1x64xi32>
      %keepb = "tile.broadcast"(%keep) : (tensor<1x64xi1>) -> tensor<64x64xi1>
      %sel = arith.select %keepb, %s, %neg : tensor<64x64xi1>, tensor<64x64xf32>
      scf.yield %sel : tensor<64x64xf32>
    }
    %mx = "tile.reduce"(%sm) {axis = 1 : i64, kind = "maxnum"} : (tensor<64x64xf32>) -> tensor<64xf32>
    %mx2 = "tile.reshape"(%mx) : (tensor<64xf32>) -> tensor<64x1xf32>
    %mnew = arith.maxnumf %m, %mx2 : tensor<64x1xf32>
    %dm = arith.subf %m, %mnew : tensor<64x1xf32>
    %alpha = math.exp2 %dm : tensor<64x1xf32>
    %ab = "tile.broadcast"(%alpha) : (tensor<64x1xf32>) -> tensor<64x128xf32>
    %accs = arith.mulf %acc, %ab : tensor<64x128xf32>
    %ab2 = "tile.broadcast"(%alpha) : (tensor<64x1xf32>) -> tensor<64x64xf32>
    %ls = arith.mulf %l, %ab2 : tensor<64x64xf32>
    %mb = "tile.broadcast"(%mnew) : (tensor<64x1xf32>) -> tensor<64x64xf32>
    %sd = arith.subf %sm, %mb : tensor<64x64xf32>
    %p = math.exp2 %sd : tensor<64x64xf32>
    %l2 = arith.addf %ls, %p : tensor<64x64xf32>
    %pb = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xbf16>
    %o = "tile.mma"(%pb, %c, %accs) : (tensor<64x64xbf16>, tensor<64x128xbf16>, tensor<64x128xf32>) -> tensor<64x128xf32>
    scf.yield %o, %l2, %mnew : tensor<64x128xf32>, tensor<64x64xf32>, tensor<64x1xf32>
  }
  %lsum = "tile.reduce"(%r#1) {axis = 1 : i64, kind = "sum"} : (tensor<64x64xf32>) -> tensor<64xf32>
  %l1 = "tile.reshape"(%lsum) : (tensor<64xf32>) -> tensor<64x1xf32>
  %lb = "tile.broadcast"(%l1) : (tensor<64x1xf32>) -> tensor<64x128xf32>
  %out = arith.divf %r#0, %lb : tensor<64x128xf32>
  "tile.store"(%o_arr, %out, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x128xf32>, i32, i32) -> ()
  return
}
