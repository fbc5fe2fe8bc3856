// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-cluster-pairs | FileCheck %s
// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-cluster-pairs --tile-pipeline-loops | FileCheck %s --check-prefix=RING
// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-cluster-pairs --tile-pipeline-loops --tile-lower-to-gpu | FileCheck %s --check-prefix=GPU
// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-cluster-pairs --tile-group-blocks | FileCheck %s --check-prefix=ORDER
// RUN: tile-opt %s -split-input-file --tile-group-blocks | FileCheck %s --check-prefix=UNPAIRED

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>
#r = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 8>, array<i64: 0>>
#s = #tile.slice<0 : i64, #r>

// The kernel option `pair_axis` = 1 on a paged loop whose ring a producer warpgroup
// fills, launched as written (not persistent): MLA decode's form, where grid axis 1
// is a token's blocks of heads.  The page's tile (its index: the table's element at
// the step, the same for both blocks of a pair) is shared; Q's (its index: bid(1))
// is each block's own.  The kernel runs (1, 2, 1) clusters.
// The hardware pairs blocks by their ids: a paired kernel keeps the hardware's block
// order (grouped, a pair's two blocks would get different tiles along axis 0), where
// the same kernel unpaired is regrouped for L2.
// ORDER-LABEL: func.func @paged_pair
// ORDER-NOT:   tile.num_blocks
// ORDER:       return
// UNPAIRED-LABEL: func.func @paged_pair
// UNPAIRED:    tile.num_blocks
// CHECK-LABEL: func.func @paged_pair
// CHECK-SAME:    tile.cluster = array<i64: 1, 2, 1>, tile.cluster_pairs = 1 : i64
// CHECK:         "tile.load"(%arg0
// CHECK-NOT:       tile.multicast
// CHECK-SAME:      -> tensor<128x64xbf16
// CHECK:         "tile.load"(%arg3, %{{.*}}) {padding = "zero", tile.multicast,

// The ring lists the shared buffer; the producer warps, after their loop, close the
// ring too (their part of its cluster barrier), the consumers after theirs.
// RING-LABEL: func.func @paged_pair
// RING:       "tile.ring_alloc"() {stages = 2 : i64, tile.multicast = array<i64: 1>
// RING:       scf.if %{{.*}} {
// RING:         scf.for
// RING:           "tile.ring_acquire"
// RING:           "tile.ring_commit"
// RING-NEXT:    }
// RING-NEXT:    "tile.ring_free"
// RING-NEXT:  } else {
// RING:         scf.for
// RING:           "tile.ring_release"
// RING:         }
// RING:         "tile.ring_free"
// RING-NOT:     "tile.ring_free"
// RING:       return

// The lowering: a (1, 2, 1) cluster; the empty barriers count both blocks' 8
// consumer warps; the block's rank in its pair is bid(1) mod 2; each block copies
// its half of the page's rows (32 of 64, 4 KB into the slot) into both blocks; the
// release also arrives on the peer's empty barrier; three cluster barriers: after
// the barriers' initialization, the producer's closing one, the consumers'.
// GPU:       nvvm.cluster_dim = array<i32: 1, 2, 1>
// GPU:       nvvm.mbarrier.init %{{.*}}, %c16_i32
// GPU:       barrier.cluster.arrive.release.aligned
// GPU-NEXT:  barrier.cluster.wait.acquire.aligned
// GPU:       gpu.block_id y
// GPU:       %[[R:.*]] = arith.remui %{{.*}}, %c2_i32
// GPU:       arith.muli %[[R]], %c4096_i32
// GPU:       nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask = %c3_i16
// GPU:       barrier.cluster.arrive.release.aligned
// GPU-NEXT:  barrier.cluster.wait.acquire.aligned
// GPU:       mapa.shared::cluster.u32
// GPU:       mbarrier.arrive.shared::cluster.b64
// GPU:       barrier.cluster.arrive.release.aligned
// GPU-NEXT:  barrier.cluster.wait.acquire.aligned
// GPU:       nvvm.mbarrier.inval
// GPU-NOT:   barrier.cluster
// GPU:       gpu.return
module attributes {tile.target = "sm_90a"} {
func.func @paged_pair(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %tbl: !tile.array<i32, 1 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>, %kv: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.pair_axis = 1 : i32, tile.num_warps = 8 : i32, tile.num_stages = 2 : i32, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %bt = "tile.bid"() {axis = 0 : i64} : () -> i32
  %hb = "tile.bid"() {axis = 1 : i64} : () -> i32
  %n = "tile.dim"(%tbl) {axis = 0 : i64} : (!tile.array<i32, 1 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %t = "tile.load"(%tbl, %k) {padding = "undetermined", tile_shape = array<i64: 1>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32, #r>
    %t0 = "tile.reshape"(%t) : (tensor<1xi32, #r>) -> tensor<i32, #s>
    %p = tensor.extract %t0[] : tensor<i32, #s>
    %ta = "tile.load"(%a, %hb, %bt) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tb = "tile.load"(%kv, %p, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %hb, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>

// Asked for, refused with the reason: the loop's length depends on bid(1), so the
// two blocks of a pair would run different iterations of the ring they share.
module attributes {tile.target = "sm_90a"} {
// expected-error @+1 {{kernel option pair_axis=1: a loop's bounds may depend on bid(1)}}
func.func @ragged_pair(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>, %kv: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.pair_axis = 1 : i32, tile.num_warps = 8 : i32, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %hb = "tile.bid"() {axis = 1 : i64} : () -> i32
  %n = arith.addi %hb, %c1 : i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %hb, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tb = "tile.load"(%kv, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %hb, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>

// Refused with the reason: a persistent kernel (its blocks walk tiles); an axis
// retiling rescaled (the hardware's blocks along it are not the launch's); no tile
// the two blocks load alike (both loads' indices depend on bid(1)).
module attributes {tile.target = "sm_90a"} {
// expected-error @+1 {{kernel option pair_axis=1: not for a persistent kernel}}
func.func @persistent_pair(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>, %kv: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.pair_axis = 1 : i32, tile.persistent = true, tile.num_warps = 8 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %hb = "tile.bid"() {axis = 1 : i64} : () -> i32
  %r = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %hb, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tb = "tile.load"(%kv, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %hb, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}

}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>

module attributes {tile.target = "sm_90a"} {
// expected-error @+1 {{kernel option pair_axis=1: retiling made the tiles 2/1 as wide along grid axis 1}}
func.func @retiled_pair(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>, %kv: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.pair_axis = 1 : i32, tile.grid_scale = array<i64: 1, 2, 1>, tile.num_warps = 8 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %hb = "tile.bid"() {axis = 1 : i64} : () -> i32
  %r = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %hb, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tb = "tile.load"(%kv, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %hb, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}

}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>

module attributes {tile.target = "sm_90a"} {
// expected-error @+1 {{kernel option pair_axis=1: no tile loaded in a loop is the same for both blocks of a pair along axis 1}}
func.func @nothing_shared(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>, %kv: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.pair_axis = 1 : i32, tile.num_warps = 8 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %hb = "tile.bid"() {axis = 1 : i64} : () -> i32
  %r = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %hb, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tb = "tile.load"(%kv, %k, %hb) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %hb, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>

// Two loops with a tile both blocks load alike: the first loop's is shared, the
// second's not (one paired ring a kernel: a warp-specialized kernel's producer warps
// close only the ring of the loop they fill).
// CHECK-LABEL: func.func @two_loops
// CHECK:         scf.for
// CHECK:           "tile.load"(%arg2, %{{.*}}) {padding = "zero", tile.multicast,
// CHECK:         scf.for
// CHECK-NOT:       tile.multicast
// CHECK:         return
module attributes {tile.target = "sm_90a"} {
func.func @two_loops(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>, %kv: !tile.array<bf16, 2 : i64> {tile.aligned}, %kv2: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.pair_axis = 1 : i32, tile.num_warps = 8 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %hb = "tile.bid"() {axis = 1 : i64} : () -> i32
  %r = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %hb, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tb = "tile.load"(%kv, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  %r2 = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %r) -> (tensor<128x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %hb, %c1) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tb = "tile.load"(%kv2, %k, %c1) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r2, %hb, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}
}
