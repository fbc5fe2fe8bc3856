// RUN: tile-opt %s -split-input-file --tile-assign-layouts | FileCheck %s

// Global accesses get coalesced layouts: 16 bytes (4 x f32) per thread along
// the last dim, 32 lanes, then warps.  A block streams two 1024 x 4-byte tiles,
// 8 KiB: two 16-byte vectors per thread is 256 threads, 8 warps.  Element-wise
// ops keep their operands' layout, so nothing is converted.

// CHECK-LABEL: func.func @coalesced
// CHECK-SAME:    attributes {tile.kernel, tile.num_warps = 8 : i32}
// CHECK:         %[[X:.*]] = "tile.load"({{.*}}) -> tensor<1024xf32, [[L:#tile.blocked<array<i64: 4>, array<i64: 32>, array<i64: 8>, array<i64: 0>>]]>
// CHECK-NEXT:    %[[Y:.*]] = "tile.load"({{.*}}) -> tensor<1024xf32, [[L]]>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[X]], %[[Y]] : tensor<1024xf32, [[L]]>
// CHECK-NEXT:    "tile.store"(%{{.*}}, %[[S]], %{{.*}}) : (!tile.array<f32, 1 : i64>, tensor<1024xf32, [[L]]>, i32) -> ()
// CHECK-NEXT:    return
func.func @coalesced(%a: !tile.array<f32, 1 : i64>, %b: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %bid = "tile.bid"() {axis = 0 : i64} : () -> i32
  %x = "tile.load"(%a, %bid) {padding = "zero", tile_shape = array<i64: 1024>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<1024xf32>
  %y = "tile.load"(%b, %bid) {padding = "zero", tile_shape = array<i64: 1024>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<1024xf32>
  %s = arith.addf %x, %y : tensor<1024xf32>
  "tile.store"(%b, %s, %bid) : (!tile.array<f32, 1 : i64>, tensor<1024xf32>, i32) -> ()
  return
}

// -----

// What a block streams sets its warps: the row of x (16 KiB of bf16) counts, the
// weight row every block reads (a block-invariant index) does not; 512 threads
// of two 16-byte vectors each: 16 warps.

// CHECK-LABEL: func.func @streamed_bytes_set_the_warps
// CHECK-SAME:    tile.num_warps = 16 : i32
func.func @streamed_bytes_set_the_warps(%x: !tile.array<bf16, 2 : i64>, %w: !tile.array<bf16, 1 : i64>, %y: !tile.array<bf16, 2 : i64>) attributes {tile.kernel} {
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%x, %row, %c0) {padding = "zero", tile_shape = array<i64: 1, 8192>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x8192xbf16>
  %g = "tile.load"(%w, %c0) {padding = "zero", tile_shape = array<i64: 8192>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<8192xbf16>
  %g2 = "tile.reshape"(%g) : (tensor<8192xbf16>) -> tensor<1x8192xbf16>
  %p = arith.mulf %t, %g2 : tensor<1x8192xbf16>
  "tile.store"(%y, %p, %row, %c0) : (!tile.array<bf16, 2 : i64>, tensor<1x8192xbf16>, i32, i32) -> ()
  return
}

// -----

// A kernel that loads nothing block-dependent counts its largest tile: a
// 32 KiB f32 store, two vectors per thread, is 1024 threads, capped at 16 warps.

// CHECK-LABEL: func.func @no_streamed_load
// CHECK-SAME:    tile.num_warps = 16 : i32
func.func @no_streamed_load(%y: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %one = arith.constant dense<1.0> : tensor<8192xf32>
  "tile.store"(%y, %one, %i) : (!tile.array<f32, 1 : i64>, tensor<8192xf32>, i32) -> ()
  return
}

// -----

// The narrowest element type accessed at a shape sets its layout: the f32 load
// takes the 8-per-thread layout of the bf16 store, so the truncation needs no
// conversion (256 x 2 bytes: one warp).

// CHECK-LABEL: func.func @narrowest_type_sets_the_layout
// CHECK-SAME:    tile.num_warps = 1 : i32
// CHECK:         %[[T:.*]] = "tile.load"({{.*}}) -> tensor<256xf32, [[L:#tile.blocked<array<i64: 8>, array<i64: 32>, array<i64: 1>, array<i64: 0>>]]>
// CHECK-NEXT:    %[[H:.*]] = arith.truncf %[[T]] : tensor<256xf32, [[L]]> to tensor<256xbf16, [[L]]>
// CHECK-NEXT:    "tile.store"(%{{.*}}, %[[H]], %{{.*}})
func.func @narrowest_type_sets_the_layout(%a: !tile.array<f32, 1 : i64>, %b: !tile.array<bf16, 1 : i64>) attributes {tile.kernel} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%a, %i) {padding = "zero", tile_shape = array<i64: 256>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<256xf32>
  %h = arith.truncf %t : tensor<256xf32> to tensor<256xbf16>
  "tile.store"(%b, %h, %i) : (!tile.array<bf16, 1 : i64>, tensor<256xbf16>, i32) -> ()
  return
}

// -----

// A row softmax: the reduction result is a slice of the row's layout; the
// keepdims reshape gets the parent back and the broadcast keeps it, both
// without data movement.

// CHECK-LABEL: func.func @row_softmax
// CHECK-SAME:    tile.num_warps = 2 : i32
// CHECK:         %[[T:.*]] = "tile.load"({{.*}}) -> tensor<1x1024xbf16, [[L:#tile.blocked<array<i64: 1, 8>, array<i64: 1, 32>, array<i64: 1, 2>, array<i64: 1, 0>>]]>
// CHECK-NEXT:    %[[F:.*]] = arith.extf %[[T]] : tensor<1x1024xbf16, [[L]]> to tensor<1x1024xf32, [[L]]>
// CHECK-NEXT:    %[[M:.*]] = "tile.reduce"(%[[F]]) {axis = 1 : i64, kind = "max"} : (tensor<1x1024xf32, [[L]]>) -> tensor<1xf32, #tile.slice<1 : i64, [[L]]>>
// CHECK-NEXT:    %[[M2:.*]] = "tile.reshape"(%[[M]]) : (tensor<1xf32, #tile.slice<1 : i64, [[L]]>>) -> tensor<1x1xf32, [[L]]>
// CHECK-NEXT:    %[[MB:.*]] = "tile.broadcast"(%[[M2]]) : (tensor<1x1xf32, [[L]]>) -> tensor<1x1024xf32, [[L]]>
// CHECK-NEXT:    %[[D:.*]] = arith.subf %[[F]], %[[MB]] : tensor<1x1024xf32, [[L]]>
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[D]] : tensor<1x1024xf32, [[L]]>
// CHECK-NEXT:    %[[O:.*]] = arith.truncf %[[E]]
// CHECK-NEXT:    "tile.store"(%{{.*}}, %[[O]], %{{.*}}, %{{.*}})
// CHECK-NEXT:    return
func.func @row_softmax(%x: !tile.array<bf16, 2 : i64>, %y: !tile.array<bf16, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %row, %c0) {padding = "neg_inf", tile_shape = array<i64: 1, 1024>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x1024xbf16>
  %f = arith.extf %t : tensor<1x1024xbf16> to tensor<1x1024xf32>
  %m = "tile.reduce"(%f) {axis = 1 : i64, kind = "max"} : (tensor<1x1024xf32>) -> tensor<1xf32>
  %m2 = "tile.reshape"(%m) : (tensor<1xf32>) -> tensor<1x1xf32>
  %mb = "tile.broadcast"(%m2) : (tensor<1x1xf32>) -> tensor<1x1024xf32>
  %d = arith.subf %f, %mb : tensor<1x1024xf32>
  %e = math.exp %d : tensor<1x1024xf32>
  %o = arith.truncf %e : tensor<1x1024xf32> to tensor<1x1024xbf16>
  "tile.store"(%y, %o, %row, %c0) : (!tile.array<bf16, 2 : i64>, tensor<1x1024xbf16>, i32, i32) -> ()
  return
}

// -----

// A broadcast source made where the broadcast needs it: RoPE's (1, 64) row of cos,
// reshaped to (1, 1, 64) and broadcast over the (1, 32, 64) heads, is loaded
// already replicated across the heads' threads (the load's 4 x 8 lanes and 8 warps
// along its unit dim 0 hold copies), so neither the broadcast nor its two uses
// convert anything.

// CHECK-LABEL: func.func @rope_half
// CHECK:         "tile.load"({{.*}}) -> tensor<1x32x64xbf16, [[L:#tile.blocked<array<i64: 1, 1, 8>, array<i64: 1, 4, 8>, array<i64: 1, 8, 1>, array<i64: 2, 1, 0>>]]>
// CHECK:         %[[C:.*]] = "tile.load"({{.*}}) -> tensor<1x64xf32, #tile.blocked<array<i64: 1, 8>, array<i64: 4, 8>, array<i64: 8, 1>, array<i64: 1, 0>>>
// CHECK-NEXT:    %[[C3:.*]] = "tile.reshape"(%[[C]]) {{.*}} -> tensor<1x1x64xf32, [[L]]>
// CHECK-NEXT:    %[[CB:.*]] = "tile.broadcast"(%[[C3]]) {{.*}} -> tensor<1x32x64xf32, [[L]]>
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %{{.*}}, %[[CB]] : tensor<1x32x64xf32, [[L]]>
// CHECK-NEXT:    arith.addf %[[P]], %[[CB]] : tensor<1x32x64xf32, [[L]]>
// CHECK-NOT:     tile.convert_layout
func.func @rope_half(%x: !tile.array<bf16, 3 : i64>, %c: !tile.array<f32, 2 : i64>, %y: !tile.array<bf16, 3 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %t = "tile.bid"() {axis = 0 : i64} : () -> i32
  %a = "tile.load"(%x, %t, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 32, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x32x64xbf16>
  %af = arith.extf %a : tensor<1x32x64xbf16> to tensor<1x32x64xf32>
  %cs = "tile.load"(%c, %t, %c0) {padding = "zero", tile_shape = array<i64: 1, 64>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x64xf32>
  %c3 = "tile.reshape"(%cs) : (tensor<1x64xf32>) -> tensor<1x1x64xf32>
  %cb = "tile.broadcast"(%c3) : (tensor<1x1x64xf32>) -> tensor<1x32x64xf32>
  %p = arith.mulf %af, %cb : tensor<1x32x64xf32>
  %q = arith.addf %p, %cb : tensor<1x32x64xf32>
  %o = arith.truncf %q : tensor<1x32x64xf32> to tensor<1x32x64xbf16>
  "tile.store"(%y, %o, %t, %c0, %c0) : (!tile.array<bf16, 3 : i64>, tensor<1x32x64xbf16>, i32, i32, i32) -> ()
  return
}

// -----

// A permute permutes the layout for free; the store wants the coalesced
// layout of its own shape, so a conversion (through shared memory, in the gpu
// stage) goes right before it.

// CHECK-LABEL: func.func @transpose
// CHECK-SAME:    tile.num_warps = 8 : i32
// CHECK:         %[[T:.*]] = "tile.load"({{.*}}) -> tensor<64x32xf32, [[LOAD:#tile.blocked<array<i64: 1, 4>, array<i64: 4, 8>, array<i64: 8, 1>, array<i64: 1, 0>>]]>
// CHECK-NEXT:    %[[P:.*]] = "tile.permute"(%[[T]]) {{.*}} -> tensor<32x64xf32, [[PERM:#tile.blocked<array<i64: 4, 1>, array<i64: 8, 4>, array<i64: 1, 8>, array<i64: 0, 1>>]]>
// CHECK-NEXT:    %[[C:.*]] = "tile.convert_layout"(%[[P]]) : (tensor<32x64xf32, [[PERM]]>) -> tensor<32x64xf32, [[STORE:#tile.blocked<array<i64: 1, 4>, array<i64: 2, 16>, array<i64: 8, 1>, array<i64: 1, 0>>]]>
// CHECK-NEXT:    "tile.store"(%{{.*}}, %[[C]], %{{.*}}, %{{.*}}) : (!tile.array<f32, 2 : i64>, tensor<32x64xf32, [[STORE]]>, i32, i32) -> ()
func.func @transpose(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 2 : i64>) attributes {tile.kernel} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %t = "tile.load"(%x, %i, %j) {padding = "zero", tile_shape = array<i64: 64, 32>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x32xf32>
  %p = "tile.permute"(%t) {permutation = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  "tile.store"(%y, %p, %j, %i) : (!tile.array<f32, 2 : i64>, tensor<32x64xf32>, i32, i32) -> ()
  return
}

// -----

// Loop-carried tiles keep their initial value's layout: an element-wise op
// converts its second operand to its first's layout, and the yielded value is
// converted back to the loop's layout.

// CHECK-LABEL: func.func @loop_carried
// CHECK:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<32x64xf32, [[HOME:#tile.blocked<array<i64: 1, 4>, array<i64: 2, 16>, array<i64: 8, 1>, array<i64: 1, 0>>]]>
// CHECK:         %[[ACC:.*]] = scf.for {{.*}} iter_args(%[[S:.*]] = %[[ZERO]]) -> (tensor<32x64xf32, [[HOME]]>)
// CHECK:           %[[P:.*]] = "tile.permute"({{.*}}) -> tensor<32x64xf32, [[PERM:#tile.blocked<array<i64: 4, 1>, array<i64: 8, 4>, array<i64: 1, 8>, array<i64: 0, 1>>]]>
// CHECK-NEXT:      %[[SC:.*]] = "tile.convert_layout"(%[[S]]) : (tensor<32x64xf32, [[HOME]]>) -> tensor<32x64xf32, [[PERM]]>
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[P]], %[[SC]] : tensor<32x64xf32, [[PERM]]>
// CHECK-NEXT:      %[[BACK:.*]] = "tile.convert_layout"(%[[SUM]]) : (tensor<32x64xf32, [[PERM]]>) -> tensor<32x64xf32, [[HOME]]>
// CHECK-NEXT:      scf.yield %[[BACK]] : tensor<32x64xf32, [[HOME]]>
// CHECK:         "tile.store"(%{{.*}}, %[[ACC]], %{{.*}}, %{{.*}}) : (!tile.array<f32, 2 : i64>, tensor<32x64xf32, [[HOME]]>, i32, i32) -> ()
func.func @loop_carried(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 2 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<32x64xf32>
  %acc = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<32x64xf32>) : i32 {
    %t = "tile.load"(%x, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 32>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<64x32xf32>
    %p = "tile.permute"(%t) {permutation = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %s2 = arith.addf %p, %s : tensor<32x64xf32>
    scf.yield %s2 : tensor<32x64xf32>
  }
  "tile.store"(%y, %acc, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<32x64xf32>, i32, i32) -> ()
  return
}

// -----

// A num_warps the kernel asks for is kept (512 x f16 alone would get one
// warp); both branches of an scf.if and its result share one layout; iotas
// and splat constants take the layout of their shape.

// CHECK-LABEL: func.func @given_num_warps
// CHECK-SAME:    attributes {tile.kernel, tile.num_warps = 2 : i32}
// CHECK:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<512xf32, [[L:#tile.blocked<array<i64: 8>, array<i64: 32>, array<i64: 2>, array<i64: 0>>]]>
// CHECK-NEXT:    %[[ACC:.*]] = scf.for {{.*}} iter_args(%[[S:.*]] = %[[ZERO]]) -> (tensor<512xf32, [[L]]>)
// CHECK-NEXT:      %[[T:.*]] = "tile.load"({{.*}}) -> tensor<512xf16, [[L]]>
// CHECK-NEXT:      %[[F:.*]] = arith.extf %[[T]] : tensor<512xf16, [[L]]> to tensor<512xf32, [[L]]>
// CHECK-NEXT:      %[[S2:.*]] = arith.addf %[[S]], %[[F]] : tensor<512xf32, [[L]]>
// CHECK-NEXT:      scf.yield %[[S2]] : tensor<512xf32, [[L]]>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[R:.*]] = scf.if %{{.*}} -> (tensor<512xf32, [[L]]>) {
// CHECK-NEXT:      scf.yield %[[ACC]] : tensor<512xf32, [[L]]>
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[IOTA:.*]] = "tile.iota"() : () -> tensor<512xi32, [[L]]>
// CHECK-NEXT:      %[[FI:.*]] = arith.sitofp %[[IOTA]] : tensor<512xi32, [[L]]> to tensor<512xf32, [[L]]>
// CHECK-NEXT:      scf.yield %[[FI]] : tensor<512xf32, [[L]]>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[H:.*]] = arith.truncf %[[R]] : tensor<512xf32, [[L]]> to tensor<512xf16, [[L]]>
// CHECK-NEXT:    "tile.store"(%{{.*}}, %[[H]], %{{.*}})
// CHECK-NEXT:    return
func.func @given_num_warps(%a: !tile.array<f16, 1 : i64>, %n: i32, %flag: i1) attributes {tile.kernel, tile.num_warps = 2 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<512xf32>
  %acc = scf.for %i = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<512xf32>) : i32 {
    %t = "tile.load"(%a, %i) {padding = "zero", tile_shape = array<i64: 512>} : (!tile.array<f16, 1 : i64>, i32) -> tensor<512xf16>
    %f = arith.extf %t : tensor<512xf16> to tensor<512xf32>
    %s2 = arith.addf %s, %f : tensor<512xf32>
    scf.yield %s2 : tensor<512xf32>
  }
  %r = scf.if %flag -> (tensor<512xf32>) {
    scf.yield %acc : tensor<512xf32>
  } else {
    %io = "tile.iota"() : () -> tensor<512xi32>
    %fi = arith.sitofp %io : tensor<512xi32> to tensor<512xf32>
    scf.yield %fi : tensor<512xf32>
  }
  %h = arith.truncf %r : tensor<512xf32> to tensor<512xf16>
  "tile.store"(%a, %h, %c0) : (!tile.array<f16, 1 : i64>, tensor<512xf16>, i32) -> ()
  return
}

// -----

// A K loop of mma (sm_90a, the default target): the accumulator, what the loop
// carries and the splat that starts it take the wgmma layout (two warpgroups
// stacked along M, 64 x 128 each: 8 warps); the loads that only feed the product
// go to shared memory with a 128-byte swizzle, B through its transpose, which
// permutes the order for free; after the loop the cast stays in the accumulator
// layout and the store converts once.

// CHECK-LABEL: func.func @mma_loop
// CHECK-SAME:    tile.num_warps = 8 : i32
// CHECK:         %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<128x128xf32, [[ACC:#tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 128>>]]>
// CHECK:         scf.for {{.*}} iter_args(%[[A:.*]] = %[[Z]]) -> (tensor<128x128xf32, [[ACC]]>)
// CHECK:           "tile.load"{{.*}} -> tensor<128x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>
// CHECK:           %[[W:.*]] = "tile.load"{{.*}} -> tensor<128x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>
// CHECK:           %[[WT:.*]] = "tile.permute"(%[[W]]) {{.*}} -> tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 0, 1>>>
// CHECK-NOT:       tile.convert_layout
// CHECK:           "tile.mma"(%{{.*}}, %[[WT]], %[[A]]) {{.*}} -> tensor<128x128xf32, [[ACC]]>
// CHECK:         arith.truncf {{.*}} to tensor<128x128xbf16, [[ACC]]>
// CHECK-NEXT:    "tile.convert_layout"
// CHECK-NEXT:    "tile.store"
func.func @mma_loop(%a: !tile.array<bf16, 2 : i64>, %w: !tile.array<bf16, 2 : i64>, %c: !tile.array<bf16, 2 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %z = arith.constant dense<0.0> : tensor<128x128xf32>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<128x128xf32>) : i32 {
    %ta = "tile.load"(%a, %i, %k) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
    %tw = "tile.load"(%w, %j, %k) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
    %tb = "tile.permute"(%tw) {permutation = array<i64: 1, 0>} : (tensor<128x64xbf16>) -> tensor<64x128xbf16>
    %d = "tile.mma"(%ta, %tb, %acc) : (tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
    scf.yield %d : tensor<128x128xf32>
  }
  %h = arith.truncf %r : tensor<128x128xf32> to tensor<128x128xbf16>
  "tile.store"(%c, %h, %i, %j) : (!tile.array<bf16, 2 : i64>, tensor<128x128xbf16>, i32, i32) -> ()
  return
}

// -----

// A packed (tokens, heads, D) array's tile of one head is (M, 1, D), its unit dim
// in the middle: it feeds the product from shared memory as a (1, 1, M, D) tile
// does, the reshape dropping the unit dim for free (attention_varlen's K).

// CHECK-LABEL: func.func @packed_heads_operand
// CHECK:         %[[K:.*]] = "tile.load"{{.*}} -> tensor<128x1x64xbf16, #tile.shared<128 : i64, array<i64: 2, 1, 0>>>
// CHECK-NEXT:    %[[K2:.*]] = "tile.reshape"(%[[K]]) {{.*}} -> tensor<128x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>
// CHECK-NEXT:    %[[KT:.*]] = "tile.permute"(%[[K2]])
// CHECK-NOT:     tile.convert_layout
// CHECK:         "tile.mma"(%{{.*}}, %[[KT]], %{{.*}})
func.func @packed_heads_operand(%q: !tile.array<bf16, 2 : i64>, %k: !tile.array<bf16, 3 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %h = "tile.bid"() {axis = 0 : i64} : () -> i32
  %z = arith.constant dense<0.0> : tensor<128x128xf32>
  %tq = "tile.load"(%q, %c0, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
  %tk = "tile.load"(%k, %c0, %h, %c0) {padding = "zero", tile_shape = array<i64: 128, 1, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<128x1x64xbf16>
  %tk2 = "tile.reshape"(%tk) : (tensor<128x1x64xbf16>) -> tensor<128x64xbf16>
  %tkt = "tile.permute"(%tk2) {permutation = array<i64: 1, 0>} : (tensor<128x64xbf16>) -> tensor<64x128xbf16>
  %d = "tile.mma"(%tq, %tkt, %z) : (tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
  "tile.store"(%c, %d, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<128x128xf32>, i32, i32) -> ()
  return
}

// -----

// Into an aligned array on sm_90a the stored accumulator keeps its layout: the
// gpu stage stores it by TMA from shared memory (backend/gpu/tma_store.py), no
// conversion; with the kernel option tma_store=False it converts as above.

// CHECK-LABEL: func.func @tma_store
// CHECK:         %[[H:.*]] = arith.truncf {{.*}} to tensor<128x128xbf16, [[ACC:#tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 128>>]]>
// CHECK-NEXT:    "tile.store"(%{{.*}}, %[[H]], %{{.*}}, %{{.*}}) : (!tile.array<bf16, 2 : i64>, tensor<128x128xbf16, [[ACC]]>, i32, i32)
// CHECK-LABEL: func.func @no_tma_store
// CHECK:         arith.truncf
// CHECK-NEXT:    "tile.convert_layout"
// CHECK-NEXT:    "tile.store"
module {
func.func @tma_store(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %z = arith.constant dense<0.0> : tensor<128x128xf32>
  %ta = "tile.load"(%a, %c0, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
  %tb = "tile.load"(%a, %c0, %c0) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16>
  %d = "tile.mma"(%ta, %tb, %z) : (tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %h = arith.truncf %d : tensor<128x128xf32> to tensor<128x128xbf16>
  "tile.store"(%c, %h, %c0, %c0) : (!tile.array<bf16, 2 : i64>, tensor<128x128xbf16>, i32, i32) -> ()
  return
}
}

// -----

module {
func.func @no_tma_store(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.tma_store = false} {
  %c0 = arith.constant 0 : i32
  %z = arith.constant dense<0.0> : tensor<128x128xf32>
  %ta = "tile.load"(%a, %c0, %c0) {padding = "zero", tile_shape = array<i64: 128, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<128x64xbf16>
  %tb = "tile.load"(%a, %c0, %c0) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16>
  %d = "tile.mma"(%ta, %tb, %z) : (tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %h = arith.truncf %d : tensor<128x128xf32> to tensor<128x128xbf16>
  "tile.store"(%c, %h, %c0, %c0) : (!tile.array<bf16, 2 : i64>, tensor<128x128xbf16>, i32, i32) -> ()
  return
}
}

// -----

// A batched product's (1, M, N) tile, reshaped from its accumulator (cuTile's
// BatchMatMul), keeps the accumulator's registers: the reshape only adds a leading
// unit dim (`array<i64: 1, ...>`), and the store takes the TMA path of a 2-d one
// (its box one plane of the 3-d array).  Into an unaligned array it converts.

// CHECK-LABEL: func.func @batched_tma_store
// CHECK:         %[[H:.*]] = arith.truncf {{.*}} to tensor<128x128xbf16, #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 128>>>
// CHECK-NEXT:    %[[R:.*]] = "tile.reshape"(%[[H]]) : (tensor<128x128xbf16, #tile.mma_acc<3 : i64, array<i64: 8, 1>, array<i64: 64, 128>>>) -> tensor<1x128x128xbf16, [[ACC3:#tile.mma_acc<3 : i64, array<i64: 1, 8, 1>, array<i64: 1, 64, 128>>]]>
// CHECK-NEXT:    "tile.store"(%{{.*}}, %[[R]], %{{.*}}, %{{.*}}, %{{.*}}) : (!tile.array<bf16, 3 : i64>, tensor<1x128x128xbf16, [[ACC3]]>, i32, i32, i32)
// CHECK-LABEL: func.func @batched_unaligned_store
// CHECK:         "tile.reshape"(%{{.*}}) : (tensor<128x128xbf16
// CHECK-SAME:    -> tensor<1x128x128xbf16, #tile.mma_acc<3 : i64, array<i64: 1, 8, 1>, array<i64: 1, 64, 128>>>
// CHECK-NEXT:    %[[C:.*]] = "tile.convert_layout"
// CHECK-SAME:    -> tensor<1x128x128xbf16, #tile.blocked<
// CHECK-NEXT:    "tile.store"(%{{.*}}, %[[C]],
module {
func.func @batched_tma_store(%a: !tile.array<bf16, 3 : i64> {tile.aligned}, %c: !tile.array<bf16, 3 : i64> {tile.aligned}) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %z = "tile.bid"() {axis = 2 : i64} : () -> i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %la = "tile.load"(%a, %z, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 128, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x128x64xbf16>
  %ta = "tile.reshape"(%la) : (tensor<1x128x64xbf16>) -> tensor<128x64xbf16>
  %lb = "tile.load"(%a, %z, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 64, 128>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x128xbf16>
  %tb = "tile.reshape"(%lb) : (tensor<1x64x128xbf16>) -> tensor<64x128xbf16>
  %d = "tile.mma"(%ta, %tb, %zero) : (tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %h = arith.truncf %d : tensor<128x128xf32> to tensor<128x128xbf16>
  %r = "tile.reshape"(%h) : (tensor<128x128xbf16>) -> tensor<1x128x128xbf16>
  "tile.store"(%c, %r, %z, %c0, %c0) : (!tile.array<bf16, 3 : i64>, tensor<1x128x128xbf16>, i32, i32, i32) -> ()
  return
}
}

// -----

module {
func.func @batched_unaligned_store(%a: !tile.array<bf16, 3 : i64> {tile.aligned}, %c: !tile.array<bf16, 3 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %z = "tile.bid"() {axis = 2 : i64} : () -> i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %la = "tile.load"(%a, %z, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 128, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x128x64xbf16>
  %ta = "tile.reshape"(%la) : (tensor<1x128x64xbf16>) -> tensor<128x64xbf16>
  %lb = "tile.load"(%a, %z, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 64, 128>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x128xbf16>
  %tb = "tile.reshape"(%lb) : (tensor<1x64x128xbf16>) -> tensor<64x128xbf16>
  %d = "tile.mma"(%ta, %tb, %zero) : (tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %h = arith.truncf %d : tensor<128x128xf32> to tensor<128x128xbf16>
  %r = "tile.reshape"(%h) : (tensor<128x128xbf16>) -> tensor<1x128x128xbf16>
  "tile.store"(%c, %r, %z, %c0, %c0) : (!tile.array<bf16, 3 : i64>, tensor<1x128x128xbf16>, i32, i32, i32) -> ()
  return
}
}

// -----

// On sm_80 the same product is mma.sync: 2 x 4 warps of 64 x 32; the shared
// operands stay in shared memory (ldmatrix reads them a k step at a time).
// `matmul` is an mma into a zero accumulator, then a cast.

// CHECK-LABEL: func.func @matmul_sm80
// CHECK:         %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<128x128xf32, [[ACC:#tile.mma_acc<2 : i64, array<i64: 2, 4>, array<i64: 16, 8>>]]>
// CHECK:         "tile.mma"(%{{.*}}, %{{.*}}, %[[Z]]) : (tensor<128x32xf16, #tile.shared<64 : i64, array<i64: 1, 0>>>, tensor<32x128xf16, #tile.shared<128 : i64, array<i64: 1, 0>>>, tensor<128x128xf32, [[ACC]]>)
// CHECK-NEXT:    arith.truncf {{.*}} to tensor<128x128xf16, [[ACC]]>
module attributes {tile.target = "sm_80"} {
func.func @matmul_sm80(%a: !tile.array<f16, 2 : i64>, %c: !tile.array<f16, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %ta = "tile.load"(%a, %c0, %c0) {padding = "zero", tile_shape = array<i64: 128, 32>} : (!tile.array<f16, 2 : i64>, i32, i32) -> tensor<128x32xf16>
  %tb = "tile.load"(%a, %c0, %c0) {padding = "zero", tile_shape = array<i64: 32, 128>} : (!tile.array<f16, 2 : i64>, i32, i32) -> tensor<32x128xf16>
  %m = "tile.matmul"(%ta, %tb) : (tensor<128x32xf16>, tensor<32x128xf16>) -> tensor<128x128xf16>
  "tile.store"(%c, %m, %c0, %c0) : (!tile.array<f16, 2 : i64>, tensor<128x128xf16>, i32, i32) -> ()
  return
}
}

// -----

// A product no tensor-core instruction fits (M = 8) runs on the FMA units: the
// accumulator takes the home layout of its shape, the operands are loaded into
// unswizzled row-major shared memory.

// CHECK-LABEL: func.func @fma_product
// CHECK:         "tile.load"{{.*}} -> tensor<8x32xf16, #tile.shared<0 : i64, array<i64: 1, 0>>>
// CHECK:         "tile.load"{{.*}} -> tensor<32x64xf16, #tile.shared<0 : i64, array<i64: 1, 0>>>
// CHECK:         "tile.mma"{{.*}} -> tensor<8x64xf32, #tile.blocked<
func.func @fma_product(%a: !tile.array<f16, 2 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %ta = "tile.load"(%a, %i, %i) {padding = "zero", tile_shape = array<i64: 8, 32>} : (!tile.array<f16, 2 : i64>, i32, i32) -> tensor<8x32xf16>
  %tb = "tile.load"(%a, %i, %i) {padding = "zero", tile_shape = array<i64: 32, 64>} : (!tile.array<f16, 2 : i64>, i32, i32) -> tensor<32x64xf16>
  %zero = arith.constant dense<0.0> : tensor<8x64xf32>
  %acc = "tile.mma"(%ta, %tb, %zero) : (tensor<8x32xf16>, tensor<32x64xf16>, tensor<8x64xf32>) -> tensor<8x64xf32>
  "tile.store"(%c, %acc, %i, %i) : (!tile.array<f32, 2 : i64>, tensor<8x64xf32>, i32, i32) -> ()
  return
}

// -----

// scf.while: the before region's arguments take the inits' layouts, the after
// region yields them back, and what scf.condition forwards keeps its layout into
// the after region's arguments and the results.

// CHECK-LABEL: func.func @grow
// CHECK:         %[[T0:.*]] = "tile.load"{{.*}} -> tensor<256xf32, [[L:#tile.blocked<[^>]*>[^>]*>[^>]*>[^>]*>[^>]*>]]>
// CHECK:         scf.while (%{{.*}} = %{{.*}}, %{{.*}} = %[[T0]]) : (i32, tensor<256xf32, [[L]]>) -> (i32, tensor<256xf32, [[L]]>)
// CHECK:           scf.condition(%{{.*}}) %{{.*}}, %{{.*}} : i32, tensor<256xf32, [[L]]>
// CHECK:         ^bb0(%{{.*}}: i32, %{{.*}}: tensor<256xf32, [[L]]>):
// CHECK:           scf.yield %{{.*}}, %{{.*}} : i32, tensor<256xf32, [[L]]>
func.func @grow(%x: !tile.array<f32, 1 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %t0 = "tile.load"(%x, %c0) {padding = "zero", tile_shape = array<i64: 256>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<256xf32>
  %r:2 = scf.while (%i = %c0, %t = %t0) : (i32, tensor<256xf32>) -> (i32, tensor<256xf32>) {
    %go = arith.cmpi slt, %i, %n : i32
    scf.condition(%go) %i, %t : i32, tensor<256xf32>
  } do {
  ^bb0(%j: i32, %u: tensor<256xf32>):
    %k = arith.addi %j, %c1 : i32
    %v = arith.addf %u, %u : tensor<256xf32>
    scf.yield %k, %v : i32, tensor<256xf32>
  }
  "tile.store"(%x, %r#1, %c0) : (!tile.array<f32, 1 : i64>, tensor<256xf32>, i32) -> ()
  return
}

// -----

// A select's mask is made where the values it selects from are: the iota in a slice
// of the product's accumulator layout, the compare in that layout, the broadcast over
// the rows in place -- no exchange (attention's key mask, collect_mask_sources).
// CHECK-LABEL: func.func @masked_scores
// CHECK:       %[[I:.*]] = "tile.iota"() : () -> tensor<64xi32, #tile.slice<0 : i64, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>>
// CHECK:       arith.cmpi slt, %{{.*}}, %{{.*}} : tensor<1x64xi32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
// CHECK:       "tile.broadcast"(%{{.*}}) : (tensor<1x64xi1, #tile.mma_acc<{{.*}}>>) -> tensor<64x64xi1, #tile.mma_acc<{{.*}}>>
// CHECK-NOT:   tile.convert_layout
// CHECK:       arith.select
module attributes {tile.stage = "tile", tile.target = "sm_90a"} {
  func.func @masked_scores(%arg0: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg1: !tile.array<bf16, 2 : i64> {tile.aligned}, %arg2: !tile.array<f32, 2 : i64> {tile.aligned}, %arg3: i32) attributes {tile.arg_names = ["Q", "K", "S", "n"], tile.kernel} {
    %cst = arith.constant dense<0xFF800000> : tensor<64x64xf32>
    %cst_0 = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
    %c0_i32 = arith.constant 0 : i32
    %0 = "tile.bid"() {axis = 0 : i64} : () -> i32
    %1 = "tile.load"(%arg0, %0, %c0_i32) {padding = "undetermined", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %2 = "tile.load"(%arg1, %c0_i32, %c0_i32) {padding = "undetermined", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %3 = "tile.permute"(%2) {permutation = array<i64: 1, 0>} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
    %4 = "tile.mma"(%1, %3, %cst_0) : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %5 = "tile.iota"() : () -> tensor<64xi32>
    %6 = "tile.reshape"(%5) : (tensor<64xi32>) -> tensor<1x64xi32>
    %splat = tensor.splat %arg3 : tensor<1x64xi32>
    %7 = arith.cmpi slt, %6, %splat : tensor<1x64xi32>
    %8 = "tile.broadcast"(%7) : (tensor<1x64xi1>) -> tensor<64x64xi1>
    %9 = arith.select %8, %4, %cst : tensor<64x64xi1>, tensor<64x64xf32>
    "tile.store"(%arg2, %9, %0, %c0_i32) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
    return
  }
}

// -----

// A tile read by two products (MLA's latent page: the keys of Q.c^T, the values of
// P.c) goes to shared memory once: every use is an operand, one through a transpose
// (a change of order); neither product converts it.
// CHECK-LABEL: func.func @latent_keys_and_values
// CHECK:         scf.for
// CHECK:           %[[C:.*]] = "tile.load"{{.*}} -> tensor<64x128xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>
// CHECK-NEXT:      %[[CT:.*]] = "tile.permute"(%[[C]]) {{.*}} -> tensor<128x64xbf16, #tile.shared<128 : i64, array<i64: 0, 1>>>
// CHECK-NEXT:      "tile.mma"(%{{.*}}, %[[CT]], %{{.*}})
// CHECK:           "tile.mma"(%{{.*}}, %[[C]], %{{.*}})
func.func @latent_keys_and_values(%q: !tile.array<bf16, 2 : i64>, %kv: !tile.array<bf16, 2 : i64>, %o: !tile.array<f32, 2 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %tq = "tile.load"(%q, %c0, %c0) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16>
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %zs = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x128xf32>) : i32 {
    %c = "tile.load"(%kv, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16>
    %ct = "tile.permute"(%c) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16>) -> tensor<128x64xbf16>
    %s = "tile.mma"(%tq, %ct, %zs) : (tensor<64x128xbf16>, tensor<128x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %p = arith.truncf %s : tensor<64x64xf32> to tensor<64x64xbf16>
    %d = "tile.mma"(%p, %c, %acc) : (tensor<64x64xbf16>, tensor<64x128xbf16>, tensor<64x128xf32>) -> tensor<64x128xf32>
    scf.yield %d : tensor<64x128xf32>
  }
  "tile.store"(%o, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x128xf32>, i32, i32) -> ()
  return
}

// -----

// A loop-invariant operand in registers (a Q tile whose leading dims are not 1, so
// it is not a shared-memory operand) is converted to the mma operand layout once,
// before the loop, not in every iteration.
// CHECK-LABEL: func.func @invariant_operand
// CHECK:         %[[Q:.*]] = "tile.convert_layout"{{.*}} -> tensor<16x64xbf16, #tile.mma_operand<0
// CHECK-NEXT:    scf.for
// CHECK-NOT:       tile.convert_layout
// CHECK:           "tile.mma"(%[[Q]],

func.func @invariant_operand(%q: !tile.array<bf16, 3 : i64>, %kv: !tile.array<bf16, 2 : i64>, %o: !tile.array<f32, 2 : i64>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %q3 = "tile.load"(%q, %c0, %c0, %c0) {padding = "zero", tile_shape = array<i64: 4, 4, 64>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<4x4x64xbf16>
  %tq = "tile.reshape"(%q3) : (tensor<4x4x64xbf16>) -> tensor<16x64xbf16>
  %z = arith.constant dense<0.0> : tensor<16x64xf32>
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<16x64xf32>) : i32 {
    %c = "tile.load"(%kv, %k, %c0) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16>
    %ct = "tile.permute"(%c) {permutation = array<i64: 1, 0>} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
    %d = "tile.mma"(%tq, %ct, %acc) : (tensor<16x64xbf16>, tensor<64x64xbf16>, tensor<16x64xf32>) -> tensor<16x64xf32>
    scf.yield %d : tensor<16x64xf32>
  }
  "tile.store"(%o, %r, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<16x64xf32>, i32, i32) -> ()
  return
}
