// RUN: tile-opt %s -split-input-file --tile-pipeline-loops | FileCheck %s
// RUN: tile-opt %s -split-input-file --target=sm_80 --tile-pipeline-loops | FileCheck %s --check-prefix=SM80

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#sb = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// A K loop of two loads into shared memory and a carried accumulation: a ring of
// three stages (the kernel asks for 3), loads of iterations 0 and 1 before the loop,
// each iteration waits for its slot, starts the product, waits for the previous
// one (pending 1), releases the previous slot and loads iteration k + 2.
// CHECK-LABEL: func.func @gemm
// CHECK-DAG:   %[[C2:.*]] = arith.constant 2 : i32
// CHECK-DAG:   %[[C3:.*]] = arith.constant 3 : i32
// CHECK-DAG:   %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG:   %[[C0:.*]] = arith.constant 0 : i32
// CHECK:       %[[UB:.*]] = "tile.dim"
// CHECK:       %[[R:.*]] = "tile.ring_alloc"() {stages = 3 : i64, tiles = [tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>, tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>]} : () -> !tile.ring
// Prologue: iteration 0 into slot 0, iteration 1 into slot 1; a fresh slot's first
// acquire waits for parity 1, which passes at once.
// CHECK:       %[[P0:.*]] = arith.cmpi slt, %[[LB:.*]], %[[UB]] : i32
// CHECK-NEXT:  "tile.ring_acquire"(%[[R]], %[[C0]], %[[C1]], %[[P0]])
// CHECK-NEXT:  "tile.ring_load"(%[[R]], %[[C0]], %[[P0]], %arg0, %[[I:.*]], %[[LB]]) {buffer = 0 : i64}
// CHECK-NEXT:  "tile.ring_load"(%[[R]], %[[C0]], %[[P0]], %arg1, %[[LB]], %[[J:.*]]) {buffer = 1 : i64}
// CHECK-NEXT:  "tile.ring_commit"(%[[R]])
// CHECK:       %[[K1:.*]] = arith.addi %[[LB]]
// CHECK-NEXT:  %[[P1:.*]] = arith.cmpi slt, %[[K1]], %[[UB]] : i32
// CHECK-NEXT:  "tile.ring_acquire"(%[[R]], %[[C1]], %[[C1]], %[[P1]])
// CHECK-NEXT:  "tile.ring_load"(%[[R]], %[[C1]], %[[P1]], %arg0, %[[I]], %[[K1]]) {buffer = 0 : i64}
// CHECK-NEXT:  "tile.ring_load"(%[[R]], %[[C1]], %[[P1]], %arg1, %[[K1]], %[[J]]) {buffer = 1 : i64}
// CHECK-NEXT:  "tile.ring_commit"(%[[R]])
// CHECK-NEXT:  %[[RES:.*]] = scf.for %[[K:.*]] = %[[LB]] to %[[UB]] step %[[STEP:.*]] iter_args(%[[ACC:.*]] = %{{.*}})
// The iteration number, its slot (mod 3) and its parity ((it / 3) mod 2):
// CHECK:         %[[IT:.*]] = arith.divui
// CHECK-NEXT:    %[[SLOT:.*]] = arith.remui %[[IT]], %[[C3]] : i32
// CHECK-NEXT:    %[[ROUND:.*]] = arith.divui %[[IT]], %[[C3]] : i32
// CHECK-NEXT:    %[[PAR:.*]] = arith.andi %[[ROUND]], %[[C1]] : i32
// CHECK-NEXT:    "tile.ring_wait"(%[[R]], %[[SLOT]], %[[PAR]])
// CHECK-NEXT:    %[[TA:.*]] = "tile.ring_view"(%[[R]], %[[SLOT]]) {buffer = 0 : i64}
// CHECK-NEXT:    %[[TB:.*]] = "tile.ring_view"(%[[R]], %[[SLOT]]) {buffer = 1 : i64}
// CHECK-NEXT:    %[[D:.*]] = "tile.mma_async"(%[[TA]], %[[TB]], %[[ACC]])
// CHECK-NEXT:    %[[W:.*]] = "tile.mma_wait"(%[[D]]) {pending = 1 : i64}
// The previous iteration's slot, (it + 2) mod 3, is free once it > 0:
// CHECK-NEXT:    %[[ITP:.*]] = arith.addi %[[IT]], %[[C2]] : i32
// CHECK-NEXT:    %[[PREV:.*]] = arith.remui %[[ITP]], %[[C3]] : i32
// CHECK-NEXT:    %[[NOTFIRST:.*]] = arith.cmpi ugt, %[[IT]], %[[C0]] : i32
// CHECK-NEXT:    "tile.ring_release"(%[[R]], %[[PREV]], %[[NOTFIRST]])
// Iteration k + 2 goes to slot (it + 2) mod 3 once the use before it there is
// released: parity ((it + 2) / 3 mod 2) xor 1.
// CHECK-NEXT:    %[[AHEAD:.*]] = arith.muli %[[C2]], %[[STEP]] : i32
// CHECK-NEXT:    %[[KN:.*]] = arith.addi %[[K]], %[[AHEAD]] : i32
// CHECK-NEXT:    %[[PN:.*]] = arith.cmpi slt, %[[KN]], %[[UB]] : i32
// CHECK-NEXT:    %[[NXT:.*]] = arith.addi %[[IT]], %[[C2]] : i32
// CHECK-NEXT:    %[[NSLOT:.*]] = arith.remui %[[NXT]], %[[C3]] : i32
// CHECK-NEXT:    %[[NROUND:.*]] = arith.divui %[[NXT]], %[[C3]] : i32
// CHECK-NEXT:    %[[NP:.*]] = arith.andi %[[NROUND]], %[[C1]] : i32
// CHECK-NEXT:    %[[NPAR:.*]] = arith.xori %[[NP]], %[[C1]] : i32
// CHECK-NEXT:    "tile.ring_acquire"(%[[R]], %[[NSLOT]], %[[NPAR]], %[[PN]])
// CHECK-NEXT:    "tile.ring_load"(%[[R]], %[[NSLOT]], %[[PN]], %arg0, %[[I]], %[[KN]]) {buffer = 0 : i64}
// CHECK-NEXT:    "tile.ring_load"(%[[R]], %[[NSLOT]], %[[PN]], %arg1, %[[KN]], %[[J]]) {buffer = 1 : i64}
// CHECK-NEXT:    "tile.ring_commit"(%[[R]])
// CHECK-NEXT:    scf.yield %[[W]]
// CHECK:       %[[DONE:.*]] = "tile.mma_wait"(%[[RES]]) {pending = 0 : i64}
// CHECK-NEXT:  "tile.ring_free"(%[[R]])
// CHECK-NEXT:  "tile.store"(%arg2, %[[DONE]]

// On sm_80 the product is synchronous: the next loads follow the wait, and the slot
// is released at the end of its own iteration.
// SM80-LABEL: func.func @gemm
// SM80:         "tile.ring_wait"(%[[R:.*]], %[[SLOT:.*]], %{{.*}})
// SM80-NEXT:    "tile.ring_view"
// SM80-NEXT:    "tile.ring_view"
// SM80:         "tile.ring_acquire"
// SM80:         "tile.ring_commit"
// SM80-NOT:     "tile.mma_async"
// SM80-NEXT:    "tile.mma"
// SM80-NEXT:    "tile.ring_release"(%[[R]], %[[SLOT]], %{{.*}})
// SM80-NEXT:    scf.yield
// SM80:       "tile.ring_free"
func.func @gemm(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %tb = "tile.load"(%b, %k, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sb>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sb>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// Without tile.num_stages: as many stages as fit the budget, at most 4.  The load
// from an unaligned array stays synchronous; so does one whose index depends on a
// value the loop carries.
// CHECK-LABEL: func.func @default_stages
// CHECK:       "tile.ring_alloc"() {stages = 4 : i64, tiles = [tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>]}
// CHECK:       scf.for
// CHECK:         "tile.ring_view"
// CHECK:         "tile.load"(%arg1
// CHECK:         "tile.load"(%arg0, %{{.*}}, %[[CARRIED:.*]]) {padding = "zero"
// SM80-LABEL: func.func @default_stages
// SM80:       "tile.ring_alloc"() {stages = 4 : i64
func.func @default_stages(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %u: !tile.array<bf16, 2 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r:2 = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z, %m = %c0) -> (tensor<64x64xf32, #acc>, i32) : i32 {
    %ta = "tile.load"(%a, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %tu = "tile.load"(%u, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %tv = "tile.load"(%a, %c0, %m) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %tu, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    %e = "tile.mma"(%tv, %tu, %d) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    %m2 = arith.addi %m, %c1 : i32
    scf.yield %e, %m2 : tensor<64x64xf32, #acc>, i32
  }
  "tile.store"(%c, %r#0, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 64>>

// Warp specialization (the kernel asks): a producer warpgroup (is_producer)
// gives back registers and runs its own loop of acquire / load / commit from
// iteration 0; the consumers take them, wait, multiply, release; everything after
// the loop runs in the consumer branch.  One block per SM: 4 stages.
// CHECK-LABEL: func.func @specialized
// CHECK-SAME:    tile.producer_warps = 4 : i32
// CHECK:       %[[R:.*]] = "tile.ring_alloc"() {stages = 4 : i64
// CHECK-NEXT:  %[[P:.*]] = "tile.is_producer"() : () -> i1
// CHECK-NEXT:  scf.if %[[P]] {
// CHECK-NEXT:    "tile.set_max_registers"() {action = "dec", count = 40 : i64}
// CHECK-NEXT:    scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}}  : i32 {
// CHECK:           %[[NPAR:.*]] = arith.xori
// CHECK-NEXT:      "tile.ring_acquire"(%[[R]], %{{.*}}, %[[NPAR]], %true)
// CHECK-NEXT:      "tile.ring_load"(%[[R]], %{{.*}}, %true, %arg0, %{{.*}}, %[[K]]) {buffer = 0 : i64}
// CHECK-NEXT:      "tile.ring_load"(%[[R]], %{{.*}}, %true, %arg0, %[[K]], %{{.*}}) {buffer = 1 : i64}
// CHECK-NEXT:      "tile.ring_commit"(%[[R]])
// CHECK:       } else {
// CHECK-NEXT:    "tile.set_max_registers"() {action = "inc", count = 232 : i64}
// CHECK-NEXT:    %[[RES:.*]] = scf.for
// CHECK:           "tile.ring_wait"(%[[R]]
// CHECK:           "tile.mma_async"
// CHECK:           "tile.mma_wait"({{.*}}) {pending = 1 : i64}
// CHECK:           "tile.ring_release"(%[[R]]
// CHECK-NOT:       "tile.ring_acquire"
// CHECK:           scf.yield
// CHECK:         "tile.mma_wait"(%[[RES]]) {pending = 0 : i64}
// CHECK-NEXT:    "tile.ring_free"(%[[R]])
// CHECK-NEXT:    "tile.store"
// CHECK-NEXT:  }
// CHECK-NEXT:  return
// SM80-LABEL: func.func @specialized
// SM80-NOT:   tile.is_producer
func.func @specialized(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warp_specialize = true} {
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

// A loop whose loads go to registers (a chunked row reduction) is rotated: the
// load of chunk k + 1 is issued first in iteration k, carried to the next one;
// chunk 0 is loaded before the loop (register_prefetch.py).

// CHECK-LABEL: func.func @row_sum
// CHECK:         %[[FIRST:.*]] = "tile.load"(%arg0, %[[LB:c0_i32[_0-9]*]])
// CHECK:         scf.for %[[K:.*]] = %[[LB]] to %{{.*}} step %[[S:.*]] iter_args(%[[ACC:.*]] = %{{.*}}, %[[CUR:.*]] = %[[FIRST]])
// CHECK-NEXT:      %[[KN:.*]] = arith.addi %[[K]], %[[S]] : i32
// CHECK-NEXT:      %[[NEXT:.*]] = "tile.load"(%arg0, %[[KN]])
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[CUR]]
// CHECK-NEXT:      scf.yield %[[SUM]], %[[NEXT]]
#r = #tile.blocked<array<i64: 4>, array<i64: 32>, array<i64: 4>, array<i64: 0>>
func.func @row_sum(%x: !tile.array<f32, 1 : i64>, %y: !tile.array<f32, 1 : i64>, %n: i32) attributes {tile.kernel, tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<512xf32, #r>
  %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<512xf32, #r>) : i32 {
    %t = "tile.load"(%x, %k) {padding = "zero", tile_shape = array<i64: 512>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<512xf32, #r>
    %a = arith.addf %acc, %t : tensor<512xf32, #r>
    scf.yield %a : tensor<512xf32, #r>
  }
  "tile.store"(%y, %s, %c0) : (!tile.array<f32, 1 : i64>, tensor<512xf32, #r>, i32) -> ()
  return
}

// -----

// A loop that stores where another iteration loads is left alone: the store of
// iteration k writes what the load of iteration k + 1 reads.

// CHECK-LABEL: func.func @read_modify_write
// CHECK:         scf.for
// CHECK-NEXT:      "tile.load"(%arg0, %{{.*}})
// CHECK-NOT:     iter_args
#r = #tile.blocked<array<i64: 4>, array<i64: 32>, array<i64: 4>, array<i64: 0>>
func.func @read_modify_write(%x: !tile.array<f32, 1 : i64>, %n: i32) attributes {tile.kernel, tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%x, %k) {padding = "zero", tile_shape = array<i64: 512>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<512xf32, #r>
    %a = arith.addf %t, %t : tensor<512xf32, #r>
    %k1 = arith.addi %k, %c1 : i32
    "tile.store"(%x, %a, %k1) : (!tile.array<f32, 1 : i64>, tensor<512xf32, #r>, i32) -> ()
  }
  return
}

// -----

// A map over slabs (iteration k loads and stores slab k only, here counted
// backwards as tile-reverse-rereads leaves a softmax's second pass) is rotated
// although it stores: no store reaches another iteration's load.  The next slab's
// index is the same n - 1 - k slice, cloned at k + 1.

// CHECK-LABEL: func.func @map_backwards
// CHECK:         %[[LAST:.*]] = arith.subi
// CHECK:         %[[J0:.*]] = arith.subi %[[LAST]], %[[LB:c0_i32[_0-9]*]]
// CHECK-NEXT:    %[[FIRST:.*]] = "tile.load"(%arg0, %[[J0]])
// CHECK:         scf.for %[[K:.*]] = %[[LB]] to %{{.*}} step %[[S:.*]] iter_args(%[[CUR:.*]] = %[[FIRST]])
// CHECK-NEXT:      %[[KN:.*]] = arith.addi %[[K]], %[[S]] : i32
// CHECK-NEXT:      %[[JN:.*]] = arith.subi %[[LAST]], %[[KN]] : i32
// CHECK-NEXT:      %[[NEXT:.*]] = "tile.load"(%arg0, %[[JN]])
// CHECK-NEXT:      %[[J:.*]] = arith.subi %[[LAST]], %[[K]] : i32
// CHECK-NEXT:      %[[A:.*]] = arith.addf %[[CUR]], %[[CUR]]
// CHECK-NEXT:      "tile.store"(%arg1, %[[A]], %[[J]])
// CHECK-NEXT:      scf.yield %[[NEXT]]
#r = #tile.blocked<array<i64: 4>, array<i64: 32>, array<i64: 4>, array<i64: 0>>
func.func @map_backwards(%x: !tile.array<f32, 1 : i64>, %y: !tile.array<f32, 1 : i64>, %n: i32) attributes {tile.kernel, tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %last = arith.subi %n, %c1 : i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %j = arith.subi %last, %k : i32
    %t = "tile.load"(%x, %j) {padding = "zero", tile_shape = array<i64: 512>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<512xf32, #r>
    %a = arith.addf %t, %t : tensor<512xf32, #r>
    "tile.store"(%y, %a, %j) : (!tile.array<f32, 1 : i64>, tensor<512xf32, #r>, i32) -> ()
  }
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// The stage driver's cap (tile.stage_cap, backend/layout/budget.py: an earlier plan
// overflowed the shared memory) bounds the author's num_stages: 6 asked, 3 taken.
// CHECK-LABEL: func.func @capped
// CHECK:       "tile.ring_alloc"() {stages = 3 : i64
func.func @capped(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.num_stages = 6 : i32, tile.stage_cap = 3 : i32} {
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

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// A cap of 1: no depth fits, so the loop keeps its loads (the threads copy the
// tiles to shared memory each iteration) and gets no ring.
// CHECK-LABEL: func.func @no_ring
// CHECK-NOT:   tile.ring_alloc
// CHECK:       scf.for
// CHECK:         "tile.load"(%arg0
// CHECK:         "tile.mma"
// CHECK-NOT:   tile.ring
// SM80-LABEL: func.func @no_ring
// SM80-NOT:   tile.ring_alloc
func.func @no_ring(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.stage_cap = 1 : i32} {
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

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>
#r = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 4>, array<i64: 0>>
#s = #tile.slice<0 : i64, #r>

// A paged loop (decode attention's block table): iteration k's tile sits at the row
// a table gives.  Nothing in the kernel writes the table, so the ring reads the entry
// of iteration k + 2 just before that iteration's copy (the read is cloned with the
// copy's index math).
// CHECK-LABEL: func.func @paged
// CHECK:       "tile.ring_alloc"() {stages = 3 : i64
// CHECK:       scf.for %[[K:.*]] = %{{.*}} to
// CHECK:         %[[AHEAD:.*]] = arith.addi %[[K]], %{{.*}} : i32
// CHECK:         "tile.ring_acquire"
// CHECK-NEXT:    %[[T:.*]] = "tile.load"(%arg1, %[[AHEAD]]) {padding = "undetermined"
// CHECK-NEXT:    %[[T0:.*]] = "tile.reshape"(%[[T]])
// CHECK-NEXT:    %[[P:.*]] = tensor.extract %[[T0]][]
// CHECK-NEXT:    "tile.ring_load"(%{{.*}}, %{{.*}}, %{{.*}}, %arg0, %[[P]], %{{.*}}) {buffer = 0 : i64}
// SM80-LABEL: func.func @paged
// SM80:       "tile.ring_alloc"
func.func @paged(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %tbl: !tile.array<i32, 1 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %n = "tile.dim"(%tbl) {axis = 0 : i64} : (!tile.array<i32, 1 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %t = "tile.load"(%tbl, %k) {padding = "undetermined", tile_shape = array<i64: 1>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32, #r>
    %t0 = "tile.reshape"(%t) : (tensor<1xi32, #r>) -> tensor<i32, #s>
    %p = tensor.extract %t0[] : tensor<i32, #s>
    %ta = "tile.load"(%a, %p, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %ta, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>
#r = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 4>, array<i64: 0>>
#s = #tile.slice<0 : i64, #r>

// The same loop with a kernel that also writes the table: a read ahead could see an
// entry before its write, so the copies are left out of any ring.
// CHECK-LABEL: func.func @paged_table_written
// CHECK-NOT:   tile.ring_alloc
// CHECK:       return
// SM80-LABEL: func.func @paged_table_written
// SM80-NOT:   tile.ring_alloc
func.func @paged_table_written(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %tbl: !tile.array<i32, 1 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %n = "tile.dim"(%tbl) {axis = 0 : i64} : (!tile.array<i32, 1 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %t = "tile.load"(%tbl, %k) {padding = "undetermined", tile_shape = array<i64: 1>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32, #r>
    %t0 = "tile.reshape"(%t) : (tensor<1xi32, #r>) -> tensor<i32, #s>
    %p = tensor.extract %t0[] : tensor<i32, #s>
    %ta = "tile.load"(%a, %p, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    %d = "tile.mma"(%ta, %ta, %acc) : (tensor<64x64xbf16, #sa>, tensor<64x64xbf16, #sa>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  %t9 = "tile.load"(%tbl, %c0) {padding = "undetermined", tile_shape = array<i64: 1>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32, #r>
  "tile.store"(%tbl, %t9, %c1) : (!tile.array<i32, 1 : i64>, tensor<1xi32, #r>, i32) -> ()
  "tile.store"(%c, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sb = #tile.shared<128 : i64, array<i64: 1, 0>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>
#opa = #tile.mma_operand<0 : i64, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>, 2 : i64>

// A in registers, made anew by each iteration (RMSNorm applied to A on its way in):
// the product stays synchronous.  In flight past its iteration (pending 1), it would
// still be reading its A registers when the next iteration writes them.  B's slot is
// released at the end of its own iteration.
// CHECK-LABEL: func.func @register_a
// CHECK:         "tile.ring_wait"(%[[R:.*]], %[[SLOT:.*]], %{{.*}})
// CHECK-NOT:     "tile.mma_async"
// CHECK:         "tile.mma"
// CHECK-NOT:     "tile.mma_wait"
// CHECK:         "tile.ring_release"(%[[R]], %[[SLOT]], %{{.*}})
// CHECK-NEXT:    scf.yield
// CHECK-NOT:   "tile.mma_wait"
// CHECK:       "tile.ring_free"
// SM80-LABEL: func.func @register_a
func.func @register_a(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %two = arith.constant dense<2.0> : tensor<64x64xbf16, #opa>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #opa>
    %sa = arith.mulf %ta, %two : tensor<64x64xbf16, #opa>
    %tb = "tile.load"(%b, %k, %j) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sb>
    %d = "tile.mma"(%sa, %tb, %acc) : (tensor<64x64xbf16, #opa>, tensor<64x64xbf16, #sb>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %i, %j) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#st = #tile.shared<128 : i64, array<i64: 0, 1>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// copy_parts (the kernel asks; backend/pipeline/copy_parts.py), a producer
// warpgroup: every use of the loaded tiles, through a permute, is a wgmma operand,
// so the ring gets a barrier per TMA box (tile.copy_parts on its ring_alloc) and
// the consumers' wait is left to the products (tile.copy_parts on the ring_wait);
// the producer's loop is unchanged.
// CHECK-LABEL: func.func @copy_parts
// CHECK:       %[[R:.*]] = "tile.ring_alloc"() {stages = 3 : i64, tile.copy_parts, tiles = [tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>, tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>]}
// CHECK:       scf.if
// CHECK:         "tile.ring_acquire"(%[[R]]
// CHECK:       } else {
// CHECK:         scf.for
// CHECK:           "tile.ring_wait"(%[[R]], %{{.*}}, %{{.*}}) {tile.copy_parts}
// CHECK-NEXT:      %[[TA:.*]] = "tile.ring_view"(%[[R]], %{{.*}}) {buffer = 0 : i64}
// CHECK-NEXT:      %[[TB:.*]] = "tile.ring_view"(%[[R]], %{{.*}}) {buffer = 1 : i64}
// CHECK-NEXT:      %[[TT:.*]] = "tile.permute"(%[[TB]])
// CHECK-NEXT:      "tile.mma_async"(%[[TA]], %[[TT]]
// On sm_80 (cp.async, no TMA boxes) the option changes nothing.
// SM80-LABEL: func.func @copy_parts
// SM80:       "tile.ring_alloc"() {stages = 3 : i64, tiles = [
// SM80:       "tile.ring_wait"(%{{.*}}, %{{.*}}, %{{.*}}) :
func.func @copy_parts(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32, tile.copy_parts = true, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16, #sa>
    %tb = "tile.load"(%b, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16, #sa>
    %tt = "tile.permute"(%tb) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16, #sa>) -> tensor<128x64xbf16, #st>
    %d = "tile.mma"(%ta, %tt, %acc) : (tensor<64x128xbf16, #sa>, tensor<128x64xbf16, #st>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %i, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#st = #tile.shared<128 : i64, array<i64: 0, 1>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// copy_parts, but B's tile is also stored as it is (threads reading the slot, no
// product to wait for its boxes): the ring keeps one barrier a slot and its wait.
// So does a loop without a producer warpgroup (@copy_parts_no_producer).
// CHECK-LABEL: func.func @copy_parts_read_elsewhere
// CHECK:       "tile.ring_alloc"() {stages = 3 : i64, tiles = [
// CHECK:       scf.for
// CHECK:         "tile.ring_wait"(%{{.*}}, %{{.*}}, %{{.*}}) :
func.func @copy_parts_read_elsewhere(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>, %e: !tile.array<bf16, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32, tile.copy_parts = true, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16, #sa>
    %tb = "tile.load"(%b, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16, #sa>
    %tt = "tile.permute"(%tb) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16, #sa>) -> tensor<128x64xbf16, #st>
    %d = "tile.mma"(%ta, %tt, %acc) : (tensor<64x128xbf16, #sa>, tensor<128x64xbf16, #st>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    "tile.store"(%e, %tb, %i, %k) : (!tile.array<bf16, 2 : i64>, tensor<64x128xbf16, #sa>, i32, i32) -> ()
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %i, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#st = #tile.shared<128 : i64, array<i64: 0, 1>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// CHECK-LABEL: func.func @copy_parts_no_producer
// CHECK:       "tile.ring_alloc"() {stages = 3 : i64, tiles = [
// CHECK:       scf.for
// CHECK:         "tile.ring_wait"(%{{.*}}, %{{.*}}, %{{.*}}) :
func.func @copy_parts_no_producer(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32, tile.copy_parts = true, tile.warp_specialize = false} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16, #sa>
    %tb = "tile.load"(%b, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16, #sa>
    %tt = "tile.permute"(%tb) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16, #sa>) -> tensor<128x64xbf16, #st>
    %d = "tile.mma"(%ta, %tt, %acc) : (tensor<64x128xbf16, #sa>, tensor<128x64xbf16, #st>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %i, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}

// -----

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
#st = #tile.shared<128 : i64, array<i64: 0, 1>>
#acc = #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>

// copy_parts, but the product sits in a branch: an iteration that skips it would
// release the slot with boxes nobody waited for, so the ring keeps its one wait.
// CHECK-LABEL: func.func @copy_parts_in_a_branch
// CHECK:       "tile.ring_alloc"() {stages = 3 : i64, tiles = [
// CHECK:       "tile.ring_wait"(%{{.*}}, %{{.*}}, %{{.*}}) :
func.func @copy_parts_in_a_branch(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %b: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<f32, 2 : i64>, %f: i1) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.num_stages = 3 : i32, tile.copy_parts = true, tile.warp_specialize = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xf32, #acc>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16, #sa>
    %tb = "tile.load"(%b, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16, #sa>
    %tt = "tile.permute"(%tb) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16, #sa>) -> tensor<128x64xbf16, #st>
    %d = scf.if %f -> (tensor<64x64xf32, #acc>) {
      %e = "tile.mma"(%ta, %tt, %acc) : (tensor<64x128xbf16, #sa>, tensor<128x64xbf16, #st>, tensor<64x64xf32, #acc>) -> tensor<64x64xf32, #acc>
      scf.yield %e : tensor<64x64xf32, #acc>
    } else {
      scf.yield %acc : tensor<64x64xf32, #acc>
    }
    scf.yield %d : tensor<64x64xf32, #acc>
  }
  "tile.store"(%c, %r, %i, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32, #acc>, i32, i32) -> ()
  return
}
