// RUN: tile-opt %s -split-input-file --tile-persistent-tiles | FileCheck %s
// RUN: tile-opt %s -split-input-file --tile-assign-layouts --tile-persistent-tiles --tile-pipeline-loops | FileCheck %s --check-prefix=WS
// RUN: tile-opt %s -split-input-file --tile-assign-layouts --tile-persistent-tiles --tile-pipeline-loops --tile-lower-to-gpu | FileCheck %s --check-prefix=GPU
// RUN: tile-opt %s -split-input-file --tile-assign-layouts --tile-persistent-tiles --tile-pipeline-loops | FileCheck %s --check-prefix=FLAT

// At the gpu stage the grid the kernel walks is three i32 parameters after the
// arrays' and before the tensor maps, and the metadata says it is persistent
// (the launcher passes the grid there and runs one block per SM).
// GPU: tile.kernel_meta = {{.*}}\22persistent\22: true
// GPU-LABEL: gpu.func @gemm(
// GPU-SAME:    %arg14: i64, %[[G0:arg15]]: i32, %[[G1:arg16]]: i32, %[[G2:arg17]]: i32, %arg18: !llvm.ptr, %arg19: !llvm.ptr, %[[TMC:arg20]]: !llvm.ptr)
// GPU:         arith.muli %[[G0]], %[[G1]]
// The accumulator is stored by TMA (backend/gpu/tma_store.py): the f32 tile as two
// slabs of 32 columns, both written to shared memory (two buffers hold the
// whole tile), fenced, and stored by thread 0 after one barrier of the
// consumers.  A tile's stores are still in flight when the next tile's epilogue
// starts: it first waits until they have read their buffers, and so does the
// block before it exits.
// GPU:         nvvm.cp.async.bulk.wait_group 0 {read}
// GPU:         nvvm.barrier id
// GPU:         nvvm.fence.proxy
// GPU:         nvvm.barrier id
// GPU:         nvvm.cp.async.bulk.tensor.global.shared.cta %[[TMC]]
// GPU:         nvvm.cp.async.bulk.tensor.global.shared.cta %[[TMC]]
// GPU:         nvvm.cp.async.bulk.commit.group
// GPU:         nvvm.cp.async.bulk.wait_group 0 {read}
// GPU-NEXT:    }
// GPU-NEXT:    gpu.return

// A GEMM with `tile.persistent`: the body moves into one loop over the tiles of
// the grid the launch gives (tile.grid_size), from this block's linear id, by
// the number of blocks running; bid(0)/bid(1) become the tile's coordinates in
// grouped order (groups of 8 along axis 0).

// CHECK-LABEL: func.func @gemm
// CHECK-DAG:     %[[G0:.*]] = "tile.grid_size"() {axis = 0 : i64}
// CHECK-DAG:     %[[G1:.*]] = "tile.grid_size"() {axis = 1 : i64}
// CHECK-DAG:     %[[G2:.*]] = "tile.grid_size"() {axis = 2 : i64}
// CHECK-DAG:     %[[N0:.*]] = "tile.num_blocks"() {axis = 0 : i64}
// CHECK-DAG:     %[[N1:.*]] = "tile.num_blocks"() {axis = 1 : i64}
// CHECK-DAG:     %[[N2:.*]] = "tile.num_blocks"() {axis = 2 : i64}
// CHECK-DAG:     %[[B0:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK:         %[[PID:.*]] = arith.addi %[[B0]], %{{.*}} : i32
// CHECK:         %[[N01:.*]] = arith.muli %[[N0]], %[[N1]]
// CHECK:         %[[PROGRAMS:.*]] = arith.muli %[[N01]], %[[N2]]
// CHECK:         %[[PLANE:.*]] = arith.muli %[[G0]], %[[G1]]
// CHECK:         %[[TOTAL:.*]] = arith.muli %[[PLANE]], %[[G2]]
// CHECK:         scf.for %[[T:.*]] = %[[PID]] to %[[TOTAL]] step %[[PROGRAMS]]
// CHECK:           %[[REST:.*]] = arith.remui %[[T]], %[[PLANE]]
// CHECK:           %[[I:.*]] = arith.addi
// CHECK:           %[[J:.*]] = arith.divui
// CHECK:           scf.for
// CHECK:             "tile.load"(%arg0, %[[I]], %{{.*}})
// CHECK:             "tile.load"(%arg1, %{{.*}}, %[[J]])
// CHECK:           "tile.store"(%arg2, %{{.*}}, %[[I]], %[[J]])
// CHECK:         } {tile.persistent_loop}
// CHECK-NEXT:    return

// With warp specialization, the pipeliner splits the tile loop: the producer
// walks the same tiles, recomputing only the loads' indices (the grouped-order
// math of the tile index) and counting ring iterations across tiles in an
// iteration argument; the consumers walk them with the K loop, the epilogue and
// the same count, and free the ring after the last tile.

// WS-LABEL: func.func @gemm
// WS:         %[[RING:.*]] = "tile.ring_alloc"() {stages = 8 : i64
// WS:         scf.if %{{.*}} {
// WS:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[BASE:.*]] = %c0_i32) -> (i32)
// WS:             scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step
// WS:               %[[IT:.*]] = arith.addi %[[BASE]], %{{.*}} : i32
// WS:               %[[SLOT:.*]] = arith.remui %[[IT]], %c8_i32
// WS:               "tile.ring_acquire"(%[[RING]], %[[SLOT]]
// WS:               "tile.ring_load"(%[[RING]], %[[SLOT]], %{{.*}}, %arg0
// WS:               "tile.ring_load"(%[[RING]], %[[SLOT]], %{{.*}}, %arg1
// WS-NOT:           "tile.mma
// WS:             %[[NEXT:.*]] = arith.addi %[[BASE]], %{{.*}} : i32
// WS:             scf.yield %[[NEXT]] : i32
// WS:         } else {
// WS:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[CBASE:.*]] = %c0_i32) -> (i32)
// WS:             scf.for
// WS:               %[[CIT:.*]] = arith.addi %[[CBASE]], %{{.*}} : i32
// WS:               "tile.ring_wait"(%[[RING]]
// WS:               "tile.mma_async"
// WS:               "tile.ring_release"(%[[RING]]
// WS:             "tile.mma_wait"(%{{.*}}) {pending = 0 : i64}
// WS:             "tile.store"
// WS:             scf.yield %{{.*}} : i32
// WS:           } {tile.persistent_loop}
// WS:           "tile.ring_free"(%[[RING]])
module attributes {tile.target = "sm_90a"} {
func.func @gemm(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.persistent = true, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %acc = scf.for %t = %c0 to %c8 step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %tb = "tile.load"(%b, %t, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  "tile.store"(%c, %acc, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}
}

// -----

// Without warp specialization the ring is allocated once and runs on across
// tiles: the tile loop counts ring iterations (base) and how many of its tile's
// first iterations the tile before copied ahead (ahead); the next tile's index
// math is cloned for t2 = t + step; a catch-up issues what was not copied ahead
// (the prologue, for a block's first tile); in the K loop each copy of iteration
// it + 3 reads this tile's indices or, past its last trip, the next tile's.

// FLAT-LABEL: func.func @gemm_flat
// FLAT:         %[[RING:.*]] = "tile.ring_alloc"() {stages = 4 : i64
// FLAT:         scf.for %[[T:.*]] = %{{.*}} to %[[END:.*]] step %[[STEP:.*]] iter_args(%[[BASE:.*]] = %c0_i32{{.*}}, %[[AHEAD:.*]] = %c0_i32{{.*}}) -> (i32, i32)
// FLAT:           %[[T2:.*]] = arith.addi %[[T]], %[[STEP]]
// FLAT:           arith.cmpi slt, %[[T2]], %[[END]]
// FLAT:           %[[CATCH:.*]] = arith.cmpi slt, %[[AHEAD]], %c3_i32
// FLAT:           scf.if %[[CATCH]] {
// FLAT-COUNT-3:     "tile.ring_acquire"(%[[RING]]
// FLAT:           }
// FLAT:           scf.for
// FLAT:             "tile.ring_wait"(%[[RING]]
// FLAT:             "tile.mma_async"
// FLAT:             "tile.ring_release"(%[[RING]]
// FLAT:             "tile.ring_acquire"(%[[RING]]
// FLAT:             arith.select
// FLAT:             "tile.ring_load"(%[[RING]]
// FLAT:           "tile.mma_wait"(%{{.*}}) {pending = 0 : i64}
// FLAT:           "tile.store"
// FLAT:           scf.yield %{{.*}}, %{{.*}} : i32, i32
// FLAT:         } {tile.persistent_loop}
// FLAT-NEXT:    "tile.ring_free"(%[[RING]])
module attributes {tile.target = "sm_90a"} {
func.func @gemm_flat(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.persistent = true, tile.warp_specialize = false} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %acc = scf.for %t = %c0 to %c8 step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %tb = "tile.load"(%b, %t, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  "tile.store"(%c, %acc, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}
}

// -----

// A batched GEMM with the batch on grid axis 0 (cuTile's BatchMatMul): the batch
// is walked slowest, the row and column tiles (axes 1 and 2) grouped in each
// batch's plane (block_order.walk_order): resident blocks share a batch's
// operands, as a 2-d GEMM's do.

// CHECK-LABEL: func.func @batched
// CHECK-DAG:     %[[G0:.*]] = "tile.grid_size"() {axis = 0 : i64}
// CHECK-DAG:     %[[G1:.*]] = "tile.grid_size"() {axis = 1 : i64}
// CHECK-DAG:     %[[G2:.*]] = "tile.grid_size"() {axis = 2 : i64}
// CHECK:         %[[PLANE:.*]] = arith.muli %[[G1]], %[[G2]]
// CHECK:         %[[TOTAL:.*]] = arith.muli %[[PLANE]], %[[G0]]
// CHECK:         scf.for %[[T:.*]] = %{{.*}} to %[[TOTAL]] step
// CHECK:           %[[Z:.*]] = arith.divui %[[T]], %[[PLANE]]
// CHECK:           %[[REST:.*]] = arith.remui %[[T]], %[[PLANE]]
// CHECK:           %[[PER:.*]] = arith.muli %{{.*}}, %[[G2]]
// CHECK:           %[[I:.*]] = arith.addi
// CHECK:           %[[J:.*]] = arith.divui
// CHECK:           scf.for
// CHECK:             "tile.load"(%arg0, %[[Z]], %[[I]], %{{.*}})
// CHECK:             "tile.load"(%arg1, %[[Z]], %{{.*}}, %[[J]])
// CHECK:           "tile.store"(%arg2, %{{.*}}, %[[Z]], %[[I]], %[[J]])
// CHECK:         } {tile.persistent_loop}

// Its (1, 64, 64) tile is stored by TMA, each tile's box at (column, row, batch).
// GPU-LABEL: gpu.func @batched(
// GPU-SAME:    %[[TMC:arg[0-9]+]]: !llvm.ptr)
// GPU:         nvvm.cp.async.bulk.tensor.global.shared.cta %[[TMC]], %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}]
func.func @batched(%a: !tile.array<bf16, 3 : i64> {tile.aligned}, %b: !tile.array<bf16, 3 : i64> {tile.aligned}, %c: !tile.array<f32, 3 : i64> {tile.aligned}) attributes {tile.kernel, tile.persistent = true, tile.warp_specialize = false} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %z = "tile.bid"() {axis = 0 : i64} : () -> i32
  %i = "tile.bid"() {axis = 1 : i64} : () -> i32
  %j = "tile.bid"() {axis = 2 : i64} : () -> i32
  %acc = scf.for %t = %c0 to %c8 step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %la = "tile.load"(%a, %z, %i, %t) {padding = "zero", tile_shape = array<i64: 1, 64, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x64xbf16>
    %ta = "tile.reshape"(%la) : (tensor<1x64x64xbf16>) -> tensor<64x64xbf16>
    %lb = "tile.load"(%b, %z, %t, %j) {padding = "zero", tile_shape = array<i64: 1, 64, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x64xbf16>
    %tb = "tile.reshape"(%lb) : (tensor<1x64x64xbf16>) -> tensor<64x64xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  %r = "tile.reshape"(%acc) : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  "tile.store"(%c, %r, %z, %i, %j) : (!tile.array<f32, 3 : i64>, tensor<1x64x64xf32>, i32, i32, i32) -> ()
  return
}

// -----

// Two K loops a tile (a SwiGLU GEMV's gate, then its up): the producer of a
// specialized tile loop walks one loop's copies only, so none is specialized; each
// loop is pipelined in place with its own ring, inside the walk.

// WS-LABEL: func.func @two_k_loops
// WS-NOT:     tile.is_producer
// WS:         scf.for
// WS:           %[[R1:.*]] = "tile.ring_alloc"()
// WS:           scf.for
// WS:             "tile.ring_wait"(%[[R1]]
// WS:           "tile.ring_free"(%[[R1]])
// WS:           %[[R2:.*]] = "tile.ring_alloc"()
// WS:           scf.for
// WS:             "tile.ring_wait"(%[[R2]]
// WS:           "tile.ring_free"(%[[R2]])
// WS:         } {tile.persistent_loop}
module attributes {tile.target = "sm_90a"} {
func.func @two_k_loops(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %d: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64> {tile.aligned}, %e: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.persistent = true, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %acc = scf.for %t = %c0 to %c8 step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %tb = "tile.load"(%b, %t, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %y = "tile.mma"(%ta, %tb, %x) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  %acc2 = scf.for %t = %c0 to %c8 step %c1 iter_args(%x = %zero) -> (tensor<64x64xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %t) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %td = "tile.load"(%d, %t, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %y = "tile.mma"(%ta, %td, %x) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  "tile.store"(%c, %acc, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  "tile.store"(%e, %acc2, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
  return
}
}

// -----

// Without `tile.persistent` (or with it false): no change.

// CHECK-LABEL: func.func @plain
// CHECK-NOT:     tile.grid_size
// CHECK-NOT:     tile.persistent_loop
// WS-LABEL: func.func @plain
// WS-NOT:     tile.grid_size
func.func @plain(%c: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.persistent = false} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %v = arith.constant dense<1.0> : tensor<64xf32>
  "tile.store"(%c, %v, %i) : (!tile.array<f32, 1 : i64>, tensor<64xf32>, i32) -> ()
  return
}
