// RUN: tile-opt %s -split-input-file --tile-pipeline-loops | FileCheck %s
// RUN: tile-opt %s -split-input-file --target=sm_80 --tile-pipeline-loops | FileCheck %s --check-prefix=SM80

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>
#r = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 8>, array<i64: 0>>
#s = #tile.slice<0 : i64, #r>

// The kernel option `l2_ahead` = 2 on a paged loop whose ring a producer warpgroup
// fills.  The producer reads step k's page from the table before it waits for the
// step's slot (the read's latency passes during the wait), and before that wait it
// also prefetches into L2 the tile step k + 2 * step will copy: that page is read from
// the table at k + 2 * step where that is before the loop's end, else at k (a row the
// copy reads anyway: nothing past the table is read), and the prefetch is predicated
// on k + 2 * step < ub.  The loop-invariant tile (buffer 0) is not prefetched; the
// consumers are as without the option.
// CHECK-LABEL: func.func @paged_ahead
// CHECK:       "tile.ring_alloc"() {stages = 2 : i64
// CHECK:       %[[P:.*]] = "tile.is_producer"() : () -> i1
// CHECK-NEXT:  scf.if %[[P]] {
// CHECK:         scf.for %[[K:.*]] = %{{.*}} to %[[UB:.*]] step %[[STEP:.*]] : i32 {
// CHECK:           %[[T:.*]] = "tile.load"(%arg1, %[[K]])
// CHECK-NEXT:      %[[T1:.*]] = "tile.reshape"(%[[T]])
// CHECK-NEXT:      %[[PK:.*]] = tensor.extract %[[T1]][]
// CHECK-NEXT:      %[[D:.*]] = arith.muli %{{.*}}, %[[STEP]] : i32
// CHECK-NEXT:      %[[AHEAD:.*]] = arith.addi %[[K]], %[[D]] : i32
// CHECK-NEXT:      %[[IN:.*]] = arith.cmpi slt, %[[AHEAD]], %[[UB]] : i32
// CHECK-NEXT:      %[[KK:.*]] = arith.select %[[IN]], %[[AHEAD]], %[[K]] : i32
// CHECK-NEXT:      %[[T2:.*]] = "tile.load"(%arg1, %[[KK]]) {padding = "undetermined"
// CHECK-NEXT:      %[[T3:.*]] = "tile.reshape"(%[[T2]])
// CHECK-NEXT:      %[[PG:.*]] = tensor.extract %[[T3]][]
// CHECK-NEXT:      "tile.prefetch_l2"(%[[IN]], %arg0, %[[PG]], %{{.*}}) {tile = tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>}
// CHECK-NOT:       "tile.prefetch_l2"
// CHECK:           "tile.ring_acquire"
// CHECK-NEXT:      "tile.ring_load"(%{{.*}}, %{{.*}}, %{{.*}}, %arg0, %{{.*}}, %{{.*}}) {buffer = 0 : i64}
// CHECK-NEXT:      "tile.ring_load"(%{{.*}}, %{{.*}}, %{{.*}}, %arg0, %[[PK]], %{{.*}}) {buffer = 1 : i64}
// CHECK-NEXT:      "tile.ring_commit"
// CHECK-NEXT:    }
// CHECK:       } else {
// CHECK-NOT:     "tile.prefetch_l2"
// CHECK:       return
// SM80-LABEL: func.func @paged_ahead
// SM80-NOT:   "tile.prefetch_l2"
// SM80:       return
func.func @paged_ahead(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %tbl: !tile.array<i32, 1 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.l2_ahead = 2 : i32, tile.num_warps = 8 : i32, tile.num_stages = 2 : i32, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %n = "tile.dim"(%tbl) {axis = 0 : i64} : (!tile.array<i32, 1 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %t = "tile.load"(%tbl, %k) {padding = "undetermined", tile_shape = array<i64: 1>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32, #r>
    %t0 = "tile.reshape"(%t) : (tensor<1xi32, #r>) -> tensor<i32, #s>
    %p = tensor.extract %t0[] : tensor<i32, #s>
    %ta = "tile.load"(%a, %c0, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tb = "tile.load"(%a, %p, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#r = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 8>, array<i64: 0>>
#s = #tile.slice<0 : i64, #r>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>

// Without the option: the table read still comes before the wait for the slot, and
// nothing is prefetched.
// CHECK-LABEL: func.func @paged_producer
// CHECK:       scf.if %{{.*}} {
// CHECK:         scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} : i32 {
// CHECK:           %[[T:.*]] = "tile.load"(%arg1, %[[K]])
// CHECK-NOT:       "tile.prefetch_l2"
// CHECK:           "tile.ring_acquire"
// CHECK-NEXT:      "tile.ring_load"
// CHECK-NOT:     "tile.prefetch_l2"
// CHECK:       return
func.func @paged_producer(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %tbl: !tile.array<i32, 1 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 8 : i32, tile.num_stages = 2 : i32, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %n = "tile.dim"(%tbl) {axis = 0 : i64} : (!tile.array<i32, 1 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %t = "tile.load"(%tbl, %k) {padding = "undetermined", tile_shape = array<i64: 1>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32, #r>
    %t0 = "tile.reshape"(%t) : (tensor<1xi32, #r>) -> tensor<i32, #s>
    %p = tensor.extract %t0[] : tensor<i32, #s>
    %ta = "tile.load"(%a, %c0, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tb = "tile.load"(%a, %p, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}
