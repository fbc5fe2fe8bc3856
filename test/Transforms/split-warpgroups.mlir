// RUN: tile-opt %s -split-input-file --tile-split-warpgroups | FileCheck %s
// RUN: tile-opt %s -split-input-file --tile-split-warpgroups --tile-assign-layouts | FileCheck %s --check-prefix=LAYOUT

// tile-split-warpgroups, backend/layout/warpgroup_split.py: in a kernel that asks for it
// (warpgroup_split=True), the scores of a two-product loop, the softmax and the row
// statistics it carries are planned for warpgroup 0 alone; P and the row scale alpha
// are handed to the other warpgroup once a step.  MLA decode's loop, narrowed: Q
// (64, 128), a latent tile c (64, 128) that is both K and V, the output (64, 128) f32
// split by columns over two warpgroups (8 warps), a guarded mask on the scores.

// CHECK-LABEL: func.func @mla_like
// The latent tile and its view stay the ring's: read by both warpgroups.
// CHECK:         scf.for
// CHECK:           %[[C:.*]] = "tile.load"
// CHECK-NOT:       tile.owner
// CHECK-NEXT:      %[[CV:.*]] = "tile.reshape"
// CHECK-NOT:       tile.owner
// CHECK-NEXT:      %[[CT:.*]] = "tile.permute"(%[[CV]]) {permutation = array<i64: 1, 0>} :
// The score product, the mask's guard test and the mask (all only the owner reads)
// CHECK-NEXT:      %[[S:.*]] = "tile.mma"(%{{.*}}, %[[CT]], %{{.*}}) {tile.owner = 0 : i64}
// CHECK:           arith.cmpi sle, {{.*}} {tile.owner = 0 : i64} : i32
// CHECK-NEXT:      scf.if
// CHECK:             "tile.iota"() {tile.owner = 0 : i64}
// CHECK:             arith.select {{.*}} {tile.owner = 0 : i64}
// CHECK:           } {tile.owner = 0 : i64}
// CHECK:           "tile.reduce"({{.*}}) {axis = 1 : i64, kind = "maxnum", tile.owner = 0 : i64}
// CHECK:           %[[MNEW:.*]] = arith.maxnumf {{.*}} {tile.owner = 0 : i64}
// alpha: owned, handed off (O's rescale reads it); its broadcast onto O is not owned
// CHECK:           %[[ALPHA:.*]] = math.exp2 {{.*}} {tile.handoff = array<i64: 0>, tile.owner = 0 : i64}
// CHECK-NEXT:      %[[AB:.*]] = "tile.broadcast"(%[[ALPHA]]) : (tensor<64x1xf32>) -> tensor<64x128xf32>
// CHECK-NEXT:      %[[ACC:.*]] = arith.mulf %{{.*}}, %[[AB]] : tensor<64x128xf32>
// CHECK:           %[[P:.*]] = math.exp2 {{.*}} {tile.owner = 0 : i64}
// CHECK-NEXT:      %[[L:.*]] = arith.addf {{.*}} {tile.owner = 0 : i64}
// P in bf16: handed off, the second product's A operand; that product is not owned
// CHECK-NEXT:      %[[PB:.*]] = arith.truncf %[[P]] {tile.handoff = array<i64: 0>, tile.owner = 0 : i64}
// CHECK-NEXT:      %[[O:.*]] = "tile.mma"(%[[PB]], %[[CV]], %[[ACC]]) :
// CHECK-NEXT:      scf.yield %[[O]], %[[L]], %[[MNEW]]
// A step hands off 64 x 64 bf16 + 64 f32 bytes; the scores' operands a step are
// 2 x 16 KB (Q, by both warpgroups) + 16 KB split by columns, 32 KB owned; l is used
// after the loop.
// CHECK-NEXT:    } {tile.warpgroup_split = {handoff_bytes = 8448 : i64, owned_results = array<i64: 1>, owner = 0 : i64, score_bytes = array<i64: 49152, 32768>}}

// tile-assign-layouts reads the marks: the owned product is planned for one warpgroup
// (the whole 64 x 64 score tile, replicated in the other), the second one as before
// (two warpgroups, 64 of O's columns each); P reaches its A operand by a conversion
// between layouts that differ only in the replicas' warps.
// LAYOUT-LABEL: func.func @mla_like
// LAYOUT:         "tile.mma"({{.*}}) {tile.owner = 0 : i64} : ({{.*}}) -> tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
// LAYOUT:         %[[PB:.*]] = arith.truncf {{.*}} to tensor<64x64xbf16, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
// LAYOUT-NEXT:    %[[PA:.*]] = "tile.convert_layout"(%[[PB]]) : {{.*}} -> tensor<64x64xbf16, #tile.mma_operand<0 : i64, #tile.mma_acc<3 : i64, array<i64: 4, 2>, array<i64: 64, 64>>, 2 : i64>>
// LAYOUT-NEXT:    "tile.mma"(%[[PA]], {{.*}}) -> tensor<64x128xf32, #tile.mma_acc<3 : i64, array<i64: 4, 2>, array<i64: 64, 64>>>
// The loops left alone keep the kernel's warps: no product of four.
// LAYOUT-LABEL: func.func @four_warps
// LAYOUT-LABEL: func.func @not_asked
// LAYOUT-NOT:     array<i64: 4, 1>
// LAYOUT-LABEL: func.func @scores_stored
// LAYOUT-NOT:     array<i64: 4, 1>

func.func @mla_like(%q_arr: !tile.array<bf16, 2 : i64>, %kv: !tile.array<bf16, 3 : i64>,
                    %o_arr: !tile.array<f32, 2 : i64>, %n: i32, %steps: i32)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_split = true} {
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

// -----

// Left alone: the loop of @mla_like, but the kernel has 4 warps (one warpgroup owns
// everything already), does not ask, or stores the scores inside the loop (both
// warpgroups would need them: the split hands over only P and the row scale).  A
// kernel that asked gets the reason on the loop.
// CHECK-LABEL: func.func @four_warps
// CHECK-NOT:   tile.owner
// CHECK-NOT:   tile.warpgroup_split = {
// CHECK:       } {tile.warpgroup_split_skipped = "4 warps: the split needs two consumer warpgroups (8 warps)
// CHECK:       return
func.func @four_warps(%q_arr: !tile.array<bf16, 2 : i64>, %kv: !tile.array<bf16, 3 : i64>,
                    %o_arr: !tile.array<f32, 2 : i64>, %s_arr: !tile.array<f32, 2 : i64>, %steps: i32)
    attributes {tile.kernel, tile.num_warps = 4 : i32, tile.warpgroup_split = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zs = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %zo = arith.constant dense<0.000000e+00> : tensor<64x128xf32>
  %m0 = arith.constant dense<-1.000000e+30> : tensor<64x1xf32>
  %qt = "tile.load"(%q_arr, %c0, %c0) {padding = "undetermined", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16>
  %r:2 = scf.for %j = %c0 to %steps step %c1 iter_args(%acc = %zo, %m = %m0) -> (tensor<64x128xf32>, tensor<64x1xf32>) : i32 {
    %ct = "tile.load"(%kv, %j, %c0, %c0) {padding = "undetermined", tile_shape = array<i64: 1, 64, 128>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x128xbf16>
    %c = "tile.reshape"(%ct) : (tensor<1x64x128xbf16>) -> tensor<64x128xbf16>
    %cT = "tile.permute"(%c) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16>) -> tensor<128x64xbf16>
    %s = "tile.mma"(%qt, %cT, %zs) : (tensor<64x128xbf16>, tensor<128x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %mx = "tile.reduce"(%s) {axis = 1 : i64, kind = "maxnum"} : (tensor<64x64xf32>) -> tensor<64xf32>
    %mx2 = "tile.reshape"(%mx) : (tensor<64xf32>) -> tensor<64x1xf32>
    %mnew = arith.maxnumf %m, %mx2 : tensor<64x1xf32>
    %dm = arith.subf %m, %mnew : tensor<64x1xf32>
    %alpha = math.exp2 %dm : tensor<64x1xf32>
    %ab = "tile.broadcast"(%alpha) : (tensor<64x1xf32>) -> tensor<64x128xf32>
    %accs = arith.mulf %acc, %ab : tensor<64x128xf32>
    %mb = "tile.broadcast"(%mnew) : (tensor<64x1xf32>) -> tensor<64x64xf32>
    %sd = arith.subf %s, %mb : tensor<64x64xf32>
    %p = math.exp2 %sd : tensor<64x64xf32>
    %pb = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xbf16>
    %o = "tile.mma"(%pb, %c, %accs) : (tensor<64x64xbf16>, tensor<64x128xbf16>, tensor<64x128xf32>) -> tensor<64x128xf32>
    scf.yield %o, %mnew : tensor<64x128xf32>, tensor<64x1xf32>
  }
  "tile.store"(%o_arr, %r#0, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x128xf32>, i32, i32) -> ()
  return
}

// -----

// Left alone: the loop of @mla_like, but the kernel has 4 warps (one warpgroup owns
// everything already), does not ask, or stores the scores inside the loop (both
// warpgroups would need them: the split hands over only P and the row scale).  A
// kernel that asked gets the reason on the loop.
// CHECK-LABEL: func.func @not_asked
// CHECK-NOT:   tile.owner
// CHECK-NOT:   tile.warpgroup_split
// CHECK:       return
func.func @not_asked(%q_arr: !tile.array<bf16, 2 : i64>, %kv: !tile.array<bf16, 3 : i64>,
                    %o_arr: !tile.array<f32, 2 : i64>, %s_arr: !tile.array<f32, 2 : i64>, %steps: i32)
    attributes {tile.kernel, tile.num_warps = 8 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zs = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %zo = arith.constant dense<0.000000e+00> : tensor<64x128xf32>
  %m0 = arith.constant dense<-1.000000e+30> : tensor<64x1xf32>
  %qt = "tile.load"(%q_arr, %c0, %c0) {padding = "undetermined", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16>
  %r:2 = scf.for %j = %c0 to %steps step %c1 iter_args(%acc = %zo, %m = %m0) -> (tensor<64x128xf32>, tensor<64x1xf32>) : i32 {
    %ct = "tile.load"(%kv, %j, %c0, %c0) {padding = "undetermined", tile_shape = array<i64: 1, 64, 128>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x128xbf16>
    %c = "tile.reshape"(%ct) : (tensor<1x64x128xbf16>) -> tensor<64x128xbf16>
    %cT = "tile.permute"(%c) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16>) -> tensor<128x64xbf16>
    %s = "tile.mma"(%qt, %cT, %zs) : (tensor<64x128xbf16>, tensor<128x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %mx = "tile.reduce"(%s) {axis = 1 : i64, kind = "maxnum"} : (tensor<64x64xf32>) -> tensor<64xf32>
    %mx2 = "tile.reshape"(%mx) : (tensor<64xf32>) -> tensor<64x1xf32>
    %mnew = arith.maxnumf %m, %mx2 : tensor<64x1xf32>
    %dm = arith.subf %m, %mnew : tensor<64x1xf32>
    %alpha = math.exp2 %dm : tensor<64x1xf32>
    %ab = "tile.broadcast"(%alpha) : (tensor<64x1xf32>) -> tensor<64x128xf32>
    %accs = arith.mulf %acc, %ab : tensor<64x128xf32>
    %mb = "tile.broadcast"(%mnew) : (tensor<64x1xf32>) -> tensor<64x64xf32>
    %sd = arith.subf %s, %mb : tensor<64x64xf32>
    %p = math.exp2 %sd : tensor<64x64xf32>
    %pb = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xbf16>
    %o = "tile.mma"(%pb, %c, %accs) : (tensor<64x64xbf16>, tensor<64x128xbf16>, tensor<64x128xf32>) -> tensor<64x128xf32>
    scf.yield %o, %mnew : tensor<64x128xf32>, tensor<64x1xf32>
  }
  "tile.store"(%o_arr, %r#0, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x128xf32>, i32, i32) -> ()
  return
}

// -----

// Left alone: the loop of @mla_like, but the kernel has 4 warps (one warpgroup owns
// everything already), does not ask, or stores the scores inside the loop (both
// warpgroups would need them: the split hands over only P and the row scale).  A
// kernel that asked gets the reason on the loop.
// CHECK-LABEL: func.func @scores_stored
// CHECK-NOT:   tile.owner
// CHECK-NOT:   tile.warpgroup_split = {
// CHECK:       } {tile.warpgroup_split_skipped = "tile.store reads an owned value inside the loop
// CHECK:       return
func.func @scores_stored(%q_arr: !tile.array<bf16, 2 : i64>, %kv: !tile.array<bf16, 3 : i64>,
                    %o_arr: !tile.array<f32, 2 : i64>, %s_arr: !tile.array<f32, 2 : i64>, %steps: i32)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_split = true} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zs = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %zo = arith.constant dense<0.000000e+00> : tensor<64x128xf32>
  %m0 = arith.constant dense<-1.000000e+30> : tensor<64x1xf32>
  %qt = "tile.load"(%q_arr, %c0, %c0) {padding = "undetermined", tile_shape = array<i64: 64, 128>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x128xbf16>
  %r:2 = scf.for %j = %c0 to %steps step %c1 iter_args(%acc = %zo, %m = %m0) -> (tensor<64x128xf32>, tensor<64x1xf32>) : i32 {
    %ct = "tile.load"(%kv, %j, %c0, %c0) {padding = "undetermined", tile_shape = array<i64: 1, 64, 128>} : (!tile.array<bf16, 3 : i64>, i32, i32, i32) -> tensor<1x64x128xbf16>
    %c = "tile.reshape"(%ct) : (tensor<1x64x128xbf16>) -> tensor<64x128xbf16>
    %cT = "tile.permute"(%c) {permutation = array<i64: 1, 0>} : (tensor<64x128xbf16>) -> tensor<128x64xbf16>
    %s = "tile.mma"(%qt, %cT, %zs) : (tensor<64x128xbf16>, tensor<128x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
    "tile.store"(%s_arr, %s, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x64xf32>, i32, i32) -> ()
    %mx = "tile.reduce"(%s) {axis = 1 : i64, kind = "maxnum"} : (tensor<64x64xf32>) -> tensor<64xf32>
    %mx2 = "tile.reshape"(%mx) : (tensor<64xf32>) -> tensor<64x1xf32>
    %mnew = arith.maxnumf %m, %mx2 : tensor<64x1xf32>
    %dm = arith.subf %m, %mnew : tensor<64x1xf32>
    %alpha = math.exp2 %dm : tensor<64x1xf32>
    %ab = "tile.broadcast"(%alpha) : (tensor<64x1xf32>) -> tensor<64x128xf32>
    %accs = arith.mulf %acc, %ab : tensor<64x128xf32>
    %mb = "tile.broadcast"(%mnew) : (tensor<64x1xf32>) -> tensor<64x64xf32>
    %sd = arith.subf %s, %mb : tensor<64x64xf32>
    %p = math.exp2 %sd : tensor<64x64xf32>
    %pb = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xbf16>
    %o = "tile.mma"(%pb, %c, %accs) : (tensor<64x64xbf16>, tensor<64x128xbf16>, tensor<64x128xf32>) -> tensor<64x128xf32>
    scf.yield %o, %mnew : tensor<64x128xf32>, tensor<64x1xf32>
  }
  "tile.store"(%o_arr, %r#0, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<64x128xf32>, i32, i32) -> ()
  return
}

// -----

// alternate_owners=True with the split: the loop of @mla_like unrolled by two, step 2i
// owned by warpgroup 0 and step 2i + 1 by warpgroup 1 (the same marks, the same hand-off
// marks: P and alpha to both warpgroups), then a loop of the last step of an odd count
// (at most one trip, owner 0), carrying the pairs' results.  The row sums l, kept by
// column and summed along the rows after the loop, are carried as (64, 1) row sums
// (l * alpha + sum(p, rows), by the step's own reduce), so they cross between the owners
// like m: what the other owner reads is marked tile.owner_handoff (step 2i's m and l, to
// warpgroup 1); step 2i + 1's m and l are carried to the next pair's step 2i
// (carried_owners: acc none, l 1, m 1).
// CHECK-LABEL: func.func @alternating
// CHECK:         %[[TRIPS:.*]] = arith.ceildivsi %{{.*}}, %[[S:.*]] : i32
// CHECK:         %[[S2:.*]] = arith.muli %[[S]], %[[TWO:.*]] : i32
// CHECK:         %[[PAIRS:.*]] = arith.divsi %[[TRIPS]], %[[TWO]] : i32
// CHECK:         %[[SPAN:.*]] = arith.muli %[[PAIRS]], %[[S2]] : i32
// CHECK:         %[[END:.*]] = arith.addi %[[LB:.*]], %[[SPAN]] : i32
// The initial row sums: the initial l summed along its rows.
// CHECK-NEXT:    %[[R0:.*]] = "tile.reduce"(%{{.*}}) {axis = 1 : i64, kind = "sum"} : (tensor<64x64xf32>) -> tensor<64xf32>
// CHECK-NEXT:    %[[L0:.*]] = "tile.reshape"(%[[R0]]) : (tensor<64xf32>) -> tensor<64x1xf32>
// CHECK-NEXT:    %[[R:.*]]:3 = scf.for %[[I:.*]] = %[[LB]] to %[[END]] step %[[S2]] iter_args(%[[ACC:.*]] = %{{.*}}, %[[L:.*]] = %[[L0]], %[[M:.*]] = %{{.*}}) -> (tensor<64x128xf32>, tensor<64x1xf32>, tensor<64x1xf32>)
// CHECK-NEXT:      %[[J1:.*]] = arith.addi %[[I]], %[[S]] : i32
// Step 2i: warpgroup 0's scores, mask, maxima from the carried m, P, alpha, row sums.
// CHECK-NEXT:      "tile.load"(%{{.*}}, %[[I]],
// CHECK-NOT:       tile.owner = 1
// CHECK:           "tile.mma"({{.*}}) {tile.owner = 0 : i64}
// CHECK:             "tile.iota"() {tile.owner = 0 : i64}
// CHECK:           %[[M0:.*]] = arith.maxnumf %[[M]], %{{.*}} {tile.owner = 0 : i64, tile.owner_handoff = array<i64: 0>}
// CHECK:           %[[A0:.*]] = math.exp2 {{.*}} {tile.handoff = array<i64: 0>, tile.owner = 0 : i64}
// CHECK:           %[[E0:.*]] = math.exp2 {{.*}} {tile.owner = 0 : i64} : tensor<64x64xf32>
// CHECK-NEXT:      %[[LS0:.*]] = arith.mulf %[[L]], %[[A0]] {tile.owner = 0 : i64} : tensor<64x1xf32>
// CHECK-NEXT:      %[[RS0:.*]] = "tile.reduce"(%[[E0]]) {axis = 1 : i64, kind = "sum", tile.owner = 0 : i64}
// CHECK-NEXT:      %[[RR0:.*]] = "tile.reshape"(%[[RS0]]) {tile.owner = 0 : i64}
// CHECK-NEXT:      %[[LN0:.*]] = arith.addf %[[LS0]], %[[RR0]] {tile.owner = 0 : i64, tile.owner_handoff = array<i64: 0>} : tensor<64x1xf32>
// CHECK-NEXT:      %[[P0:.*]] = arith.truncf %[[E0]] {tile.handoff = array<i64: 0>, tile.owner = 0 : i64}
// CHECK-NEXT:      %[[O0:.*]] = "tile.mma"(%[[P0]], {{.*}}) :
// Step 2i + 1: the same ops, warpgroup 1's, from step 2i's m and row sums.
// CHECK-NEXT:      "tile.load"(%{{.*}}, %[[J1]],
// CHECK-NOT:       tile.owner = 0
// CHECK:           "tile.mma"({{.*}}) {tile.owner = 1 : i64}
// CHECK:             "tile.iota"() {tile.owner = 1 : i64}
// CHECK:           } {tile.owner = 1 : i64}
// CHECK:           %[[M1:.*]] = arith.maxnumf %[[M0]], %{{.*}} {tile.owner = 1 : i64}
// CHECK:           %[[A1:.*]] = math.exp2 {{.*}} {tile.handoff = array<i64: 0>, tile.owner = 1 : i64}
// CHECK:           %[[LS1:.*]] = arith.mulf %[[LN0]], %[[A1]] {tile.owner = 1 : i64}
// CHECK:           %[[LN1:.*]] = arith.addf %[[LS1]], %{{.*}} {tile.owner = 1 : i64}
// CHECK-NEXT:      %[[P1:.*]] = arith.truncf {{.*}} {tile.handoff = array<i64: 0>, tile.owner = 1 : i64}
// CHECK-NEXT:      %[[O1:.*]] = "tile.mma"(%[[P1]], {{.*}}) :
// CHECK-NEXT:      scf.yield %[[O1]], %[[LN1]], %[[M1]]
// The pair loop's plan: a step's bytes, the owners in turn, the carried values'
// owners at the back edge, no sums kept apart.
// CHECK-NEXT:    } {tile.warpgroup_split = {carried_owners = array<i64: -1, 1, 1>, handoff_bytes = 8448 : i64, owned_results = array<i64: 1>, owners = array<i64: 0, 1>, row_sums = array<i64>, score_bytes = array<i64: 49152, 32768>}}
// The last step of an odd count: a loop of at most one trip from where the pairs end,
// owner 0's step; its row sums are what the loop's sum along the rows was.
// CHECK-NEXT:    %[[LAST:.*]]:3 = scf.for %{{.*}} = %[[END]] to %{{.*}} step %[[S]] iter_args(%{{.*}} = %[[R]]#0, %{{.*}} = %[[R]]#1, %{{.*}} = %[[R]]#2)
// CHECK-NOT:       tile.owner = 1
// CHECK:           "tile.mma"({{.*}}) {tile.owner = 0 : i64}
// CHECK:         } {tile.warpgroup_split = {carried_owners = array<i64: -1, 0, 0>, handoff_bytes = 8448 : i64, owned_results = array<i64: 1>, owner = 0 : i64, row_sums = array<i64>, score_bytes = array<i64: 49152, 32768>}}
// CHECK-NEXT:    %[[LB1:.*]] = "tile.broadcast"(%[[LAST]]#1) : (tensor<64x1xf32>) -> tensor<64x128xf32>
// CHECK-NEXT:    arith.divf %[[LAST]]#0, %[[LB1]]

// The owned layouts do not change: each owner's score product is one warpgroup's
// m64n64 (the other holds replicas); P c stays split by columns.
// LAYOUT-LABEL: func.func @alternating
// LAYOUT:         "tile.mma"({{.*}}) {tile.owner = 0 : i64} : ({{.*}}) -> tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
// LAYOUT:         "tile.mma"({{.*}}) -> tensor<64x128xf32, #tile.mma_acc<3 : i64, array<i64: 4, 2>, array<i64: 64, 64>>>
// LAYOUT:         "tile.mma"({{.*}}) {tile.owner = 1 : i64} : ({{.*}}) -> tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
// LAYOUT:         "tile.mma"({{.*}}) -> tensor<64x128xf32, #tile.mma_acc<3 : i64, array<i64: 4, 2>, array<i64: 64, 64>>>
// LAYOUT:         "tile.mma"({{.*}}) {tile.owner = 0 : i64} : ({{.*}}) -> tensor<64x64xf32, #tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>>
// LAYOUT:         "tile.mma"({{.*}}) -> tensor<64x128xf32, #tile.mma_acc<3 : i64, array<i64: 4, 2>, array<i64: 64, 64>>>
func.func @alternating(%q_arr: !tile.array<bf16, 2 : i64>, %kv: !tile.array<bf16, 3 : i64>,
                    %o_arr: !tile.array<f32, 2 : i64>, %n: i32, %steps: i32)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_split = true,
                   tile.alternate_owners = true} {
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
