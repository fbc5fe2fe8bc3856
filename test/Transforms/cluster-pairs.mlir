// RUN: tile-opt %s -split-input-file --tile-assign-layouts --tile-cluster-pairs | FileCheck %s
// RUN: tile-opt %s -split-input-file --tile-assign-layouts --tile-cluster-pairs --tile-persistent-tiles | FileCheck %s --check-prefix=WALK
// RUN: tile-opt %s -split-input-file --tile-assign-layouts --tile-cluster-pairs --tile-persistent-tiles --tile-pipeline-loops | FileCheck %s --check-prefix=RING
// RUN: tile-opt %s -split-input-file --tile-assign-layouts --tile-cluster-pairs --tile-persistent-tiles --tile-pipeline-loops --tile-lower-to-gpu | FileCheck %s --check-prefix=GPU

// A persistent GEMM on a grid even along both axes ("wide:3"), retiled along
// axis 1: neighbouring row tiles (axis 0) pair; B's load does not depend on
// bid(0), so both blocks of a pair share it; A's does, so each loads its own.
// CHECK-LABEL: func.func @gemm
// CHECK-SAME:    tile.cluster = array<i64: 2, 1, 1>, tile.cluster_pairs = 0 : i64
// CHECK:         "tile.load"(%arg0
// CHECK-NOT:       tile.multicast
// CHECK-SAME:      -> tensor<128x64xbf16
// CHECK:         "tile.load"(%arg1, %{{.*}}) {padding = "zero", tile.multicast,

// The tile loop walks pairs of tiles with clusters: the cluster's id and count
// are the block's halved, the grid it walks is halved along axis 0, and the
// block of rank bid(0) mod 2 takes row tile 2 p + rank of pair tile p.
// WALK-LABEL: func.func @gemm
// WALK-DAG:     %[[G0:.*]] = "tile.grid_size"() {axis = 0 : i64}
// WALK-DAG:     %[[B0:.*]] = "tile.bid"() {axis = 0 : i64}
// WALK:         %[[RANK:.*]] = arith.remui %[[B0]], %c2_i32
// WALK:         %[[CID:.*]] = arith.divui %[[B0]], %c2_i32
// WALK:         %[[HALF:.*]] = arith.divui %[[G0]], %c2_i32
// WALK:         arith.muli %[[HALF]],
// WALK:         scf.for
// WALK:           %[[P:.*]] = arith.addi
// WALK:           %[[TWICE:.*]] = arith.muli %[[P]], %c2_i32
// WALK:           %[[I:.*]] = arith.addi %[[TWICE]], %[[RANK]]
// WALK:           "tile.load"(%arg0, %[[I]],

// The ring lists the shared buffer.
// RING: "tile.ring_alloc"() {stages = {{[0-9]+}} : i64, tile.multicast = array<i64: 1>

// The lowering: empty barriers count the warps of both blocks (8 + 8); a cluster
// barrier follows their initialization; each block copies its half of B (128 of
// its 256 rows, 16 KB into the slot) to both blocks; a release also arrives on
// the peer's empty barrier; a cluster barrier before the barriers go.
// GPU:       nvvm.cluster_dim = array<i32: 2, 1, 1>
// GPU:       nvvm.mbarrier.init %{{.*}}, %c16_i32
// GPU:       nvvm.fence.mbarrier.init
// GPU:       barrier.cluster.arrive.release.aligned
// GPU-NEXT:  barrier.cluster.wait.acquire.aligned
// GPU:       %[[BID:.*]] = gpu.block_id x
// GPU:       %[[R:.*]] = arith.remui %{{.*}}, %c2_i32
// GPU:       arith.muli %[[R]], %c16384_i32
// GPU:       nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask = %c3_i16
// A wgmma descriptor keeps 14 bits of address (>> 4): in a cluster launch block
// rank 1's shared addresses have bits above 17 set, which must not reach the
// leading byte offset (bits 16-29).
// GPU:       arith.andi %{{.*}}, %c16383_i32
// GPU:       mapa.shared::cluster.u32
// GPU:       mbarrier.arrive.shared::cluster.b64
// GPU:       barrier.cluster.arrive.release.aligned
// GPU-NEXT:  barrier.cluster.wait.acquire.aligned
// GPU:       nvvm.mbarrier.inval
module attributes {tile.target = "sm_90a"} {
func.func @gemm(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %w: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.persistent = true, tile.num_warps = 8 : i32, tile.grid_wish = "wide:3", tile.grid_scale = array<i64: 1, 2, 1>} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %zero = arith.constant dense<0.0> : tensor<128x256xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %acc = scf.for %t = %c0 to %c8 step %c1 iter_args(%x = %zero) -> (tensor<128x256xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
    %tw = "tile.load"(%w, %j, %t) {padding = "zero", tile_shape = array<i64: 256, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<256x64xbf16>
    %tb = "tile.permute"(%tw) {permutation = array<i64: 1, 0>} : (tensor<256x64xbf16>) -> tensor<64x256xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<128x64xbf16>, tensor<64x256xbf16>, tensor<128x256xf32>) -> tensor<128x256xf32>
    scf.yield %y : tensor<128x256xf32>
  }
  %o = arith.truncf %acc : tensor<128x256xf32> to tensor<128x256xbf16>
  "tile.store"(%c, %o, %i, %j) : (!tile.array<bf16, 2 : i64>, tensor<128x256xbf16>, i32, i32) -> ()
  return
}
}

// -----

// No pairs: a grid odd along axis 0 and coarsened along axis 1 ("wide:2", scale
// 2 on axis 1); a loop whose length depends on bid(0) and bid(1) (the two tiles
// of a pair would run different ring iterations along either axis); a
// warp-specialized kernel.
// CHECK-LABEL: func.func @odd
// CHECK-NOT:     tile.cluster
// CHECK-LABEL: func.func @ragged_loop
// CHECK-NOT:     tile.cluster
// CHECK-LABEL: func.func @specialized
// CHECK-NOT:     tile.cluster
module attributes {tile.target = "sm_90a"} {
func.func @odd(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %w: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.persistent = true, tile.grid_wish = "wide:2", tile.grid_scale = array<i64: 1, 2, 1>} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %acc = scf.for %t = %c0 to %c8 step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %tb = "tile.load"(%w, %t, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  "tile.store"(%c, %acc, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}
}

// -----

module attributes {tile.target = "sm_90a"} {
func.func @ragged_loop(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %w: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.persistent = true, tile.grid_wish = "wide:3"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %ij = arith.addi %i, %j : i32
  %n = arith.addi %ij, %c1 : i32
  %acc = scf.for %t = %c0 to %n step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %tb = "tile.load"(%w, %t, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  "tile.store"(%c, %acc, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}
}

// -----

module attributes {tile.target = "sm_90a"} {
func.func @specialized(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %w: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.persistent = true, tile.warp_specialize = true, tile.grid_wish = "wide:3"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %acc = scf.for %t = %c0 to %c8 step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %tb = "tile.load"(%w, %t, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  "tile.store"(%c, %acc, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}
}
