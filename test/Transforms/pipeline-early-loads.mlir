// RUN: tile-opt %s -split-input-file --tile-pipeline-loops --tile-programmatic-launch | FileCheck %s
// RUN: tile-opt %s -split-input-file --target=sm_80 --tile-pipeline-loops --tile-programmatic-launch | FileCheck %s --check-prefix=SM80

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#sb = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// The `early_loads` option on b (a ring of three stages, no producer warps): at the
// kernel's top, before the grid-dependency wait, the ring, and for the prologue's
// iterations 0 and 1 the acquire of fresh slot p (parity 1) and the load of b's tile
// into it, under the prologue's predicate k < ub, b's index computed from the
// kernel's arguments alone; then the wait; then a's tiles of the same slots (the
// activation the previous kernel wrote) and the commits, where the prologue was.
// CHECK-LABEL: func.func @prologue
// CHECK-SAME:    tile.overlapped
// CHECK:       %[[J:.*]] = "tile.bid"() {axis = 1 : i64}
// CHECK:       %[[BASE:.*]] = "tile.bid"() {axis = 2 : i64}
// CHECK:       %[[UB:.*]] = "tile.dim"
// CHECK-NEXT:  %[[RING:.*]] = "tile.ring_alloc"() {stages = 3 : i64
// CHECK-NEXT:  %[[P0:.*]] = arith.cmpi slt, %[[LB:.*]], %[[UB]] : i32
// CHECK-NEXT:  "tile.ring_acquire"(%[[RING]], %[[S0:.*]], %[[ONE:.*]], %[[P0]])
// CHECK-NEXT:  %[[KK0:.*]] = arith.addi %[[LB]], %[[BASE]] : i32
// CHECK-NEXT:  "tile.ring_load"(%[[RING]], %[[S0]], %[[P0]], %arg1, %[[KK0]], %[[J]]) {buffer = 1 : i64}
// CHECK:       %[[P1:.*]] = arith.cmpi slt
// CHECK-NEXT:  "tile.ring_acquire"(%[[RING]], %[[S1:.*]], %[[ONE]], %[[P1]])
// CHECK-NEXT:  %[[KK1:.*]] = arith.addi
// CHECK-NEXT:  "tile.ring_load"(%[[RING]], %[[S1]], %[[P1]], %arg1, %[[KK1]], %[[J]]) {buffer = 1 : i64}
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
// CHECK-NOT:   "tile.ring_alloc"
// CHECK-NOT:   "tile.ring_acquire"
// CHECK:       "tile.ring_load"(%[[RING]], %[[S0]], %{{.*}}, %arg0, %{{.*}}) {buffer = 0 : i64}
// CHECK-NEXT:  "tile.ring_commit"(%[[RING]])
// CHECK:       "tile.ring_load"(%[[RING]], %[[S1]], %{{.*}}, %arg0, %{{.*}}) {buffer = 0 : i64}
// CHECK-NEXT:  "tile.ring_commit"(%[[RING]])
// CHECK-NEXT:  scf.for
// CHECK:         "tile.ring_wait"
// CHECK:         "tile.ring_acquire"
// CHECK-NEXT:    "tile.ring_load"({{.*}}, %arg0,
// CHECK:         "tile.ring_load"({{.*}}, %arg1,
// CHECK-NEXT:    "tile.ring_commit"
// CHECK:       "tile.ring_free"(%[[RING]])
// CHECK:       return
// On sm_80 (cp.async rings, no programmatic launch) the option changes nothing.
// SM80-LABEL: func.func @prologue
// SM80-NOT:   "tile.grid_dependency"
// SM80:       "tile.ring_alloc"
// SM80-NEXT:  arith.cmpi
// SM80-NEXT:  "tile.ring_acquire"
// SM80-NEXT:  "tile.ring_load"({{.*}}, %arg0,
// SM80:       "tile.ring_load"({{.*}}, %arg1,
// SM80-NEXT:  "tile.ring_commit"
func.func @prologue(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.arg_names = ["a", "b", "c"], tile.early_loads = ["b"], tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
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

// Warp specialization (a 4-stage ring): w's tiles of the producer's first three
// rounds at the kernel's top, before the wait and before the producer and consumer
// warps part; in the producer's branch, x's tiles of those rounds (after the wait),
// then its loop from round 3 on (k = lb + 3 * step), each round acquiring its slot
// and loading both tiles.  The consumers' loop is as without the option.
// CHECK-LABEL: func.func @specialized
// CHECK-SAME:    tile.overlapped
// CHECK:       %[[RING:.*]] = "tile.ring_alloc"() {stages = 4 : i64
// CHECK-COUNT-3: "tile.ring_load"(%[[RING]], {{.*}}, %arg1, {{.*}}) {buffer = 0 : i64}
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
// CHECK:       %[[UB:.*]] = "tile.dim"(%arg1)
// CHECK:       %[[P:.*]] = "tile.is_producer"() : () -> i1
// CHECK-NEXT:  scf.if %[[P]] {
// CHECK-NEXT:    "tile.set_max_registers"() {action = "dec"
// CHECK-NEXT:    %[[P0:.*]] = arith.cmpi slt, %[[LB:.*]], %[[UB]] : i32
// CHECK-NEXT:    "tile.ring_load"(%[[RING]], %{{.*}}, %[[P0]], %arg0, %[[LB]], %[[LB]]) {buffer = 1 : i64}
// CHECK-NEXT:    "tile.ring_commit"(%[[RING]])
// CHECK-COUNT-2: "tile.ring_load"({{.*}}, %arg0, {{.*}}) {buffer = 1 : i64}
// CHECK-NEXT:    "tile.ring_commit"(%[[RING]])
// CHECK-NEXT:    %[[AHEAD:.*]] = arith.muli %[[THREE:.*]], %[[STEP:.*]] : i32
// CHECK-NEXT:    %[[START:.*]] = arith.addi %[[LB]], %[[AHEAD]] : i32
// CHECK-NEXT:    scf.for %[[K:.*]] = %[[START]] to %[[UB]] step %[[STEP]]  : i32 {
// CHECK-NEXT:      arith.subi %[[K]], %[[LB]] : i32
// CHECK:           "tile.ring_acquire"
// CHECK-NEXT:      "tile.ring_load"({{.*}}, %arg1,
// CHECK-NEXT:      "tile.ring_load"({{.*}}, %arg0,
// CHECK-NEXT:      "tile.ring_commit"
// CHECK:       } else {
// CHECK-NOT:     "tile.ring_load"
// CHECK:         scf.for %{{.*}} = %[[LB]] to %[[UB]]
// CHECK:           "tile.ring_wait"
// CHECK:       return
func.func @specialized(%x: !tile.array<bf16, 2 : i64> {tile.aligned}, %w: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.arg_names = ["x", "w", "c"], tile.early_loads = ["w"], tile.num_warps = 8 : i32, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%w) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<128x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<128x64xf32, #acc>) : i32 {
    %tw = "tile.load"(%w, %i, %k) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16, #sa>
    %tx = "tile.load"(%x, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%tw, %tx, %acc) : (tensor<128x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<128x64xf32, #acc>) -> tensor<128x64xf32, #acc>
    scf.yield %d : tensor<128x64xf32, #acc>
  }
  "tile.store"(%c, %r, %i, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// Both options: the first loop's w tiles loaded early, only its x tiles prefetched
// into L2 (w's come into the ring itself); the wait after all of it.  The second
// loop's ring is built as without the option (it starts long after the wait: its
// tiles are only prefetched, both arrays', as `l2_prefetch` alone does).
// CHECK-LABEL: func.func @two_loops
// CHECK:       %[[RING:.*]] = "tile.ring_alloc"() {stages = 3 : i64
// CHECK-COUNT-2: "tile.ring_load"(%[[RING]], {{.*}}, %arg1, {{.*}}) {buffer = 0 : i64}
// CHECK-NOT:   "tile.prefetch_l2"({{.*}}, %arg1,
// CHECK-COUNT-2: "tile.prefetch_l2"({{.*}}, %arg0,
// CHECK:       "tile.prefetch_l2"({{.*}}, %arg1, %c1_i32
// CHECK-NEXT:  "tile.prefetch_l2"({{.*}}, %arg0,
// CHECK:       "tile.prefetch_l2"({{.*}}, %arg1, %c1_i32
// CHECK-NEXT:  "tile.prefetch_l2"({{.*}}, %arg0,
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
// CHECK-NOT:   "tile.prefetch_l2"
// CHECK:       "tile.ring_free"(%[[RING]])
// CHECK-NEXT:  %[[SECOND:.*]] = "tile.ring_alloc"() {stages = 3 : i64
// CHECK-NEXT:  arith.cmpi
// CHECK-NEXT:  "tile.ring_acquire"(%[[SECOND]],
// CHECK-NEXT:  "tile.ring_load"(%[[SECOND]], {{.*}}, %arg1,
// CHECK-NEXT:  "tile.ring_load"(%[[SECOND]], {{.*}}, %arg0,
// CHECK-NEXT:  "tile.ring_commit"(%[[SECOND]])
// CHECK:       return
func.func @two_loops(%x: !tile.array<bf16, 2 : i64> {tile.aligned}, %w: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.arg_names = ["x", "w", "c"], tile.early_loads = ["w"], tile.l2_prefetch = true, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%w) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %tw = "tile.load"(%w, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %tx = "tile.load"(%x, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%tw, %tx, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  %r2 = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %r) -> (tensor<64x64xf32, #acc>) : i32 {
    %tw = "tile.load"(%w, %c1, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %tx = "tile.load"(%x, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%tw, %tx, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r2, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// Without the wait this pass places nothing is loaded early: a kernel launched
// plainly (`programmatic_launch=False`) starts after the previous kernel ends, so its
// ring is built, and its loads issued, as without the option.
// CHECK-LABEL: func.func @plain
// CHECK-NOT:   "tile.grid_dependency"
// CHECK:       %[[UB:.*]] = "tile.dim"
// CHECK:       "tile.ring_alloc"
// CHECK-NEXT:  arith.cmpi
// CHECK-NEXT:  "tile.ring_acquire"
// CHECK-NEXT:  "tile.ring_load"({{.*}}, %arg1,
// CHECK-NEXT:  "tile.ring_load"({{.*}}, %arg0,
// CHECK-NEXT:  "tile.ring_commit"
// CHECK:       return
func.func @plain(%x: !tile.array<bf16, 2 : i64> {tile.aligned}, %w: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.arg_names = ["x", "w", "c"], tile.early_loads = ["w"], tile.programmatic_launch = false, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%w) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %tw = "tile.load"(%w, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %tx = "tile.load"(%x, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%tw, %tx, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

// Plain loads of `early_loads` arrays at the body's top level (paged decode attention's
// sequence length, then the block table's page number it indexes: `tables_early`) move
// to the top with the pure ops of their indices, before the wait, in body order; the
// load of x (the previous kernel's output) stays after the wait, where it was before
// them, and so does the load of x at the page; a relaxed load of lens (read afresh
// where it stands) and a load inside a branch stay too.
// CHECK-LABEL: func.func @tables
// CHECK:       %[[B:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:  %[[N:.*]] = "tile.load"(%arg0, %[[B]])
// CHECK-NEXT:  %[[NE:.*]] = tensor.extract %[[N]]
// CHECK-NEXT:  %[[L:.*]] = arith.subi %[[NE]]
// CHECK-NEXT:  %[[J:.*]] = arith.divui %[[L]]
// CHECK-NEXT:  %[[P:.*]] = "tile.load"(%arg1, %[[B]], %[[J]])
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
// CHECK:       "tile.load"(%arg2, %[[B]],
// CHECK-NEXT:  %[[PE:.*]] = tensor.extract %[[P]]
// CHECK-NEXT:  "tile.load"(%arg2, %[[PE]],
// CHECK-NEXT:  "tile.load"(%arg0, %[[B]]) {{{.*}}tile.memory_scope = "device"
// CHECK:       scf.if
// CHECK-NEXT:    "tile.load"(%arg1,
// CHECK:       return
func.func @tables(%lens: !tile.array<i32, 1 : i64>, %table: !tile.array<i32, 2 : i64>, %x: !tile.array<f32, 2 : i64>, %o: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.arg_names = ["lens", "table", "x", "o"], tile.early_loads = ["table", "lens"], tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %ci0 = arith.constant 0 : index
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %xt = "tile.load"(%x, %b, %c0) {padding = "zero", tile_shape = array<i64: 1, 64>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x64xf32>
  %nt = "tile.load"(%lens, %b) {padding = "undetermined", tile_shape = array<i64: 1>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32>
  %n = tensor.extract %nt[%ci0] : tensor<1xi32>
  %last = arith.subi %n, %c1 : i32
  %j = arith.divui %last, %c64 : i32
  %pt = "tile.load"(%table, %b, %j) {padding = "undetermined", tile_shape = array<i64: 1, 1>} : (!tile.array<i32, 2 : i64>, i32, i32) -> tensor<1x1xi32>
  %p = tensor.extract %pt[%ci0, %ci0] : tensor<1x1xi32>
  %yt = "tile.load"(%x, %p, %c0) {padding = "zero", tile_shape = array<i64: 1, 64>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x64xf32>
  %rt = "tile.load"(%lens, %b) {padding = "undetermined", tile_shape = array<i64: 1>, tile.memory_scope = "device"} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32>
  %r = tensor.extract %rt[%ci0] : tensor<1xi32>
  %big = arith.cmpi sgt, %r, %c64 : i32
  %q = scf.if %big -> (i32) {
    %qt = "tile.load"(%table, %b, %c0) {padding = "undetermined", tile_shape = array<i64: 1, 1>} : (!tile.array<i32, 2 : i64>, i32, i32) -> tensor<1x1xi32>
    %qe = tensor.extract %qt[%ci0, %ci0] : tensor<1x1xi32>
    scf.yield %qe : i32
  } else {
    scf.yield %c0 : i32
  }
  %qf = arith.sitofp %q : i32 to f32
  %qs = tensor.splat %qf : tensor<1x64xf32>
  %s0 = arith.addf %xt, %yt : tensor<1x64xf32>
  %s = arith.addf %s0, %qs : tensor<1x64xf32>
  "tile.store"(%o, %s, %b, %c0) : (!tile.array<f32, 2 : i64>, tensor<1x64xf32>, i32, i32) -> ()
  return
}
