// RUN: tile-opt %s -split-input-file --tile-pipeline-loops --tile-programmatic-launch | FileCheck %s
// RUN: tile-opt %s -split-input-file --target=sm_80 --tile-pipeline-loops --tile-programmatic-launch | FileCheck %s --check-prefix=SM80

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#sb = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// The `l2_prefetch` option on a ring of three stages: before the grid-dependency
// wait, L2 prefetches of the tiles the prologue loads (iterations 0 and 1), each
// under the prologue's predicate k < ub, their indices computed from the kernel's
// arguments alone (the block index and the loop bounds cloned above them, b's K
// offset k + base cloned with k = lb + p * step); then the wait, the release, and
// the kernel as without the option (its prologue loads the same tiles into the ring).
// CHECK-LABEL: func.func @gemm
// CHECK-SAME:    tile.overlapped
// CHECK:       %[[I:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK:       %[[BASE:.*]] = "tile.bid"() {axis = 2 : i64}
// CHECK:       %[[UB:.*]] = "tile.dim"
// CHECK:       %[[P0:.*]] = arith.cmpi slt, %[[LB:.*]], %[[UB]] : i32
// CHECK-NEXT:  "tile.prefetch_l2"(%[[P0]], %arg0, %[[I]], %[[LB]]) {tile = tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>}
// CHECK-NEXT:  %[[KK0:.*]] = arith.addi %[[LB]], %[[BASE]] : i32
// CHECK-NEXT:  "tile.prefetch_l2"(%[[P0]], %arg1, %[[KK0]], %[[J:.*]]) {tile = tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>}
// CHECK-NEXT:  %[[AHEAD:.*]] = arith.muli
// CHECK-NEXT:  %[[K1:.*]] = arith.addi %[[LB]], %[[AHEAD]] : i32
// CHECK-NEXT:  %[[P1:.*]] = arith.cmpi slt, %[[K1]], %[[UB]] : i32
// CHECK-NEXT:  "tile.prefetch_l2"(%[[P1]], %arg0, %[[I]], %[[K1]])
// CHECK-NEXT:  %[[KK1:.*]] = arith.addi %[[K1]], %[[BASE]] : i32
// CHECK-NEXT:  "tile.prefetch_l2"(%[[P1]], %arg1, %[[KK1]], %[[J]])
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
// CHECK-NOT:   "tile.prefetch_l2"
// CHECK:       "tile.ring_alloc"() {stages = 3 : i64
// CHECK:       "tile.ring_load"
// CHECK:       return
// SM80-LABEL: func.func @gemm
// SM80-NOT:   "tile.prefetch_l2"
// SM80:       return
func.func @gemm(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.l2_prefetch = true, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %base = "tile.bid"() {axis = 2 : i64} : () -> i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %kk = arith.addi %k, %base : i32
    %tb = "tile.load"(%b, %kk, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sb>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sb>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>

// Warp specialization: the producer's first S - 1 rounds (here 3 of a 4-stage
// ring) are prefetched before the wait, from the kernel's top, before the producer
// and consumer warps part.
// CHECK-LABEL: func.func @specialized
// CHECK-SAME:    tile.overlapped
// CHECK-COUNT-6: "tile.prefetch_l2"
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
// CHECK-NOT:   "tile.prefetch_l2"
// CHECK:       "tile.ring_alloc"() {stages = 4 : i64
// CHECK-NEXT:  %[[P:.*]] = "tile.is_producer"() : () -> i1
// CHECK-NEXT:  scf.if %[[P]] {
// CHECK:         "tile.ring_load"
// CHECK:       return
func.func @specialized(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.l2_prefetch = true, tile.num_warps = 8 : i32, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %c0, %k) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %ts = "tile.load"(%a, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %ts, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// Without a wait to overlap nothing is prefetched: a kernel launched plainly
// (`programmatic_launch=False`) starts its ring's loads at once, and one whose author
// placed the grid-dependency ops keeps the author's order.
// CHECK-LABEL: func.func @plain
// CHECK-NOT:   "tile.prefetch_l2"
// CHECK:       return
// CHECK-LABEL: func.func @placed
// CHECK-NOT:   "tile.prefetch_l2"
// CHECK:       return
func.func @plain(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.l2_prefetch = true, tile.programmatic_launch = false, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %ta, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}
func.func @placed(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.l2_prefetch = true, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  "tile.grid_dependency"() {kind = "wait"} : () -> ()
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %ta, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

!V = !tile.array<bf16, 2 : i64>

// tile-programmatic-launch on prefetches already placed: the wait follows the last
// one when only pure ops come before it; after a load (a real read) it opens the body,
// the prefetches then after it.
// CHECK-LABEL: func.func @after_prefetches
// CHECK:       "tile.prefetch_l2"(%{{.*}}, %arg0, %[[I:.*]], %[[I]])
// CHECK-NEXT:  %[[J:.*]] = arith.addi
// CHECK-NEXT:  "tile.prefetch_l2"(%{{.*}}, %arg0, %[[I]], %[[J]])
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
// CHECK-NEXT:  "tile.load"
func.func @after_prefetches(%x: !V {tile.aligned}) attributes {tile.kernel} {
  %true = arith.constant true
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  "tile.prefetch_l2"(%true, %x, %i, %i) {tile = tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>} : (i1, !V, i32, i32) -> ()
  %j = arith.addi %i, %i : i32
  "tile.prefetch_l2"(%true, %x, %i, %j) {tile = tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>} : (i1, !V, i32, i32) -> ()
  %t = "tile.load"(%x, %i, %i) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!V, i32, i32) -> tensor<64x64xbf16>
  return
}
// CHECK-LABEL: func.func @after_a_load
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
// CHECK:       "tile.load"
// CHECK:       "tile.prefetch_l2"
func.func @after_a_load(%x: !V {tile.aligned}) attributes {tile.kernel} {
  %true = arith.constant true
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %i, %i) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!V, i32, i32) -> tensor<64x64xbf16>
  "tile.prefetch_l2"(%true, %x, %i, %i) {tile = tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>} : (i1, !V, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// A load whose index is read from memory (a row of a table, before the loop) is not
// prefetched: the read would come before the wait.  The other load still is.
// CHECK-LABEL: func.func @table_row
// CHECK-COUNT-2: "tile.prefetch_l2"(%{{.*}}, %arg0,
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NOT:   "tile.prefetch_l2"
// CHECK:       return
func.func @table_row(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %rows: !tile.array<i32, 1 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.l2_prefetch = true, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%rows, %i) {padding = "undetermined", tile_shape = array<i64: 1>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32>
  %t0 = "tile.reshape"(%t) : (tensor<1xi32>) -> tensor<i32>
  %j = tensor.extract %t0[] : tensor<i32>
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %tb = "tile.load"(%b, %k, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %i, %i) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}
