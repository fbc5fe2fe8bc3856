// RUN: tile-opt %s --tile-split-warpgroups --tile-assign-layouts --tile-pipeline-loops | FileCheck %s

// backend/pipeline/owner_pairs.py: the ring of an alternating owners' loop (the kernel
// option alternate_owners; tile-split-warpgroups made the loop of pairs of steps and the
// loop of the last step after it).  A slot holds one step's tiles; the steps of both
// loops count through the ring as one sequence g (2i and 2i + 1 in the pairs, then the
// last step's (end - lb) / s), each waiting for slot g % 2 at parity (g / 2) & 1 and
// releasing it after its P c; a producer warpgroup copies every step in one loop.
// MLA decode's loop narrowed as in split-warpgroups.mlir (one latent tile a step), its
// products not rotated (tile.product_rotation = false, as MLA decode's kernel says: a
// rotated loop of pairs is refused).

// CHECK-LABEL: func.func @alternating
// CHECK:         %[[RING:.*]] = "tile.ring_alloc"() {stages = 2 : i64, tiles = [tensor<1x64x128xbf16, #tile.shared<128 : i64, array<i64: 2, 1, 0>>>]}
// CHECK:         scf.if %{{.*}} {
// The producer: one loop over every step, pairs and the last alike.
// CHECK:           scf.for %[[K:.*]] = %[[LB:.*]] to %[[UB:.*]] step %[[S:[^ ]*]] : i32 {
// CHECK:             "tile.ring_acquire"(%[[RING]],
// CHECK-NEXT:        "tile.ring_load"(%[[RING]], %{{.*}}, %{{.*}}, %{{.*}}, %[[K]],
// CHECK-NEXT:        "tile.ring_commit"(%[[RING]])
// CHECK-NOT:         "tile.ring_load"
// CHECK:         } else {
// The consumers' pairs: steps g = 2i and g + 1, a slot each.
// CHECK:           %[[R:.*]]:3 = scf.for %[[I:.*]] = %[[LB]] to %[[END:.*]] step %[[S2:[^ ]*]] iter_args(
// CHECK-NEXT:        %[[D:.*]] = arith.subi %[[I]], %[[LB]] : i32
// CHECK-NEXT:        %[[PAIR:.*]] = arith.divui %[[D]], %[[S2]] : i32
// CHECK-NEXT:        %[[G0:.*]] = arith.muli %[[PAIR]], %[[TWO:.*]] : i32
// CHECK-NEXT:        %[[G1:.*]] = arith.addi %[[G0]], %[[ONE:.*]] : i32
// CHECK:             %[[SLOT0:.*]] = arith.remui %[[G0]], %[[TWO]] : i32
// CHECK-NEXT:        %[[R0:.*]] = arith.divui %[[G0]], %[[TWO]] : i32
// CHECK-NEXT:        %[[PAR0:.*]] = arith.andi %[[R0]], %[[ONE]] : i32
// CHECK-NEXT:        "tile.ring_wait"(%[[RING]], %[[SLOT0]], %[[PAR0]])
// CHECK:             "tile.mma"({{.*}}) {tile.owner = 0 : i64}
// CHECK:             "tile.mma"({{.*}}) : (tensor<64x64xbf16, #tile.mma_operand
// CHECK-NEXT:        %{{.*}} = arith.constant true
// CHECK-NEXT:        "tile.ring_release"(%[[RING]], %[[SLOT0]],
// CHECK:             %[[SLOT1:.*]] = arith.remui %[[G1]], %[[TWO]] : i32
// CHECK-NEXT:        %[[R1:.*]] = arith.divui %[[G1]], %[[TWO]] : i32
// CHECK-NEXT:        %[[PAR1:.*]] = arith.andi %[[R1]], %[[ONE]] : i32
// CHECK-NEXT:        "tile.ring_wait"(%[[RING]], %[[SLOT1]], %[[PAR1]])
// CHECK:             "tile.mma"({{.*}}) {tile.owner = 1 : i64}
// CHECK:             "tile.mma"({{.*}}) : (tensor<64x64xbf16, #tile.mma_operand
// CHECK-NEXT:        %{{.*}} = arith.constant true
// CHECK-NEXT:        "tile.ring_release"(%[[RING]], %[[SLOT1]],
// CHECK:             scf.yield
// The last step of an odd count: g = (end - lb) / s + its own count.
// CHECK:           %[[LAST:.*]]:3 = scf.for %[[J:.*]] = %[[END]] to %[[UB]] step %[[S]] iter_args(
// CHECK-NEXT:        %[[E:.*]] = arith.subi %[[END]], %[[LB]] : i32
// CHECK-NEXT:        %[[BEFORE:.*]] = arith.divui %[[E]], %[[S]] : i32
// CHECK-NEXT:        %[[F:.*]] = arith.subi %[[J]], %[[END]] : i32
// CHECK-NEXT:        %[[OWN:.*]] = arith.divui %[[F]], %[[S]] : i32
// CHECK-NEXT:        %[[G:.*]] = arith.addi %[[BEFORE]], %[[OWN]] : i32
// CHECK-NEXT:        %[[SLOT:.*]] = arith.remui %[[G]], %[[TWO]] : i32
// CHECK:             "tile.ring_wait"(%[[RING]], %[[SLOT]],
// CHECK:             "tile.ring_release"(%[[RING]], %[[SLOT]],
// CHECK:             scf.yield
// CHECK-NEXT:      } {tile.warpgroup_split
// The ring is freed after it.
// CHECK-NEXT:      "tile.ring_free"(%[[RING]])
// CHECK-NEXT:      "tile.broadcast"(%[[LAST]]#1)

func.func @alternating(%q_arr: !tile.array<bf16, 2 : i64> {tile.aligned}, %kv: !tile.array<bf16, 3 : i64> {tile.aligned},
                    %o_arr: !tile.array<f32, 2 : i64>, %n: i32, %steps: i32)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_split = true, tile.alternate_owners = true, tile.num_stages = 2 : i32,
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

