// RUN: tile-opt %s -split-input-file --tile-cluster-rows | FileCheck %s

// A vocabulary log-sum-exp on a small grid ("split:64;free:6"): grid axis 2 becomes
// a cluster of 8 blocks (grid_scale, cluster); block b = bid(2) takes chunks b,
// b + 8, ... of the loop (ceil((n - b) / 8) iterations), and after the loop one
// gather hands every block the 8 partial (s, m) pairs, combined as an online
// softmax combines them, where the loop's results were used.  The maxima ignore
// NaN (cuTile's default ct.maximum(m, ct.max(t))), and so does the partials' one.

// CHECK-LABEL: func.func @lse
// CHECK-SAME:    tile.cluster = array<i64: 1, 1, 8>
// CHECK-SAME:    tile.grid_rewrites = ["tile-cluster-rows"]
// CHECK-SAME:    tile.grid_scale = array<i64: 2, 1, 8>
// CHECK:         %[[B:.*]] = "tile.bid"() {axis = 2 : i64}
// CHECK:         %[[N:.*]] = arith.floordivsi
// CHECK:         %[[R:.*]] = arith.subi %[[N]], %[[B]]
// CHECK:         %[[R7:.*]] = arith.addi %[[R]], %{{.*}}
// CHECK:         %[[CNT:.*]] = arith.divsi %[[R7]], %[[C8:.*]] : i32
// CHECK:         %[[L:.*]]:2 = scf.for %[[J:.*]] = %{{.*}} to %[[CNT]] step
// CHECK:           %[[JC:.*]] = arith.muli %[[J]], %[[C8]]
// CHECK:           %[[K:.*]] = arith.addi %[[B]], %[[JC]]
// CHECK:           "tile.load"(%{{.*}}, %{{.*}}, %[[K]])
// CHECK:           "tile.reduce"{{.*}}kind = "maxnum"
// CHECK:         %[[G:.*]]:2 = "tile.cluster_gather"(%[[L]]#1, %[[L]]#0) {axis = 2 : i64, size = 8 : i64} : (tensor<1xf32>, tensor<1xf32>) -> (tensor<8x1xf32>, tensor<8x1xf32>)
// CHECK:         %[[M:.*]] = "tile.reduce"(%[[G]]#0) {axis = 0 : i64, kind = "maxnum"}
// CHECK:         %[[MR:.*]] = "tile.reshape"(%[[M]])
// CHECK:         %[[MB:.*]] = "tile.broadcast"(%[[MR]]) : (tensor<1x1xf32>) -> tensor<8x1xf32>
// CHECK:         %[[D:.*]] = arith.subf %[[G]]#0, %[[MB]]
// CHECK:         %[[W:.*]] = math.exp %[[D]]
// CHECK:         %[[SW:.*]] = arith.mulf %[[G]]#1, %[[W]]
// CHECK:         %[[S:.*]] = "tile.reduce"(%[[SW]]) {axis = 0 : i64, kind = "sum"}
// CHECK:         %[[LOG:.*]] = math.log %[[S]]
// CHECK:         arith.addf %[[M]], %[[LOG]]
func.func @lse(%x: !tile.array<bf16, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:64;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %c8192 = arith.constant 8192 : i32
  %c8191 = arith.constant 8191 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %low = arith.constant dense<-1.000000e+30> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %n1 = arith.addi %n, %c8191 : i32
  %chunks = arith.floordivsi %n1, %c8192 : i32
  %r:2 = scf.for %k = %c0 to %chunks step %c1 iter_args(%s = %zero, %m = %low) -> (tensor<1xf32>, tensor<1xf32>) : i32 {
    %l = "tile.load"(%x, %row, %k) {padding = "neg_inf", tile_shape = array<i64: 1, 8192>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x8192xbf16>
    %t = arith.extf %l : tensor<1x8192xbf16> to tensor<1x8192xf32>
    %mx = "tile.reduce"(%t) {axis = 1 : i64, kind = "maxnum"} : (tensor<1x8192xf32>) -> tensor<1xf32>
    %m2 = arith.maxnumf %m, %mx : tensor<1xf32>
    %dm = arith.subf %m, %m2 : tensor<1xf32>
    %alpha = math.exp %dm : tensor<1xf32>
    %sa = arith.mulf %s, %alpha : tensor<1xf32>
    %m2r = "tile.reshape"(%m2) : (tensor<1xf32>) -> tensor<1x1xf32>
    %m2b = "tile.broadcast"(%m2r) : (tensor<1x1xf32>) -> tensor<1x8192xf32>
    %ts = arith.subf %t, %m2b : tensor<1x8192xf32>
    %e = math.exp %ts : tensor<1x8192xf32>
    %se = "tile.reduce"(%e) {axis = 1 : i64, kind = "sum"} : (tensor<1x8192xf32>) -> tensor<1xf32>
    %s2 = arith.addf %sa, %se : tensor<1xf32>
    scf.yield %s2, %m2 : tensor<1xf32>, tensor<1xf32>
  }
  %lg = math.log %r#0 : tensor<1xf32>
  %o = arith.addf %r#1, %lg : tensor<1xf32>
  "tile.store"(%out, %o, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}

// -----

// A loop that tile-reverse-rereads turned around (its counter used as n - 1 - k):
// block b takes its own chunks, last first: k = b + 8 * (cnt - 1 - j).  Sum, max
// and min partials each gather and reduce with their own kind (maxnumf's partials
// with maxnum: NaN ignored as the loop ignored it).

// CHECK-LABEL: func.func @stats
// CHECK:         %[[B:.*]] = "tile.bid"() {axis = 1 : i64}
// CHECK:         %[[L:.*]]:3 = scf.for
// CHECK:         %[[G:.*]]:3 = "tile.cluster_gather"(%[[L]]#0, %[[L]]#1, %[[L]]#2) {axis = 1 : i64, size = 4 : i64}
// CHECK:         "tile.reduce"(%[[G]]#0) {axis = 0 : i64, kind = "sum"}
// CHECK:         "tile.reduce"(%[[G]]#1) {axis = 0 : i64, kind = "maxnum"}
// CHECK:         "tile.reduce"(%[[G]]#2) {axis = 0 : i64, kind = "min"}
// CHECK:         %[[CNT:.*]] = arith.divsi
// CHECK:         %[[LAST:.*]] = arith.subi %[[CNT]], %{{.*}}
// CHECK:         scf.for %[[J:.*]] = %{{.*}} to %[[CNT]] step
// CHECK:           %[[I:.*]] = arith.subi %[[LAST]], %[[J]]
// CHECK:           %[[IC:.*]] = arith.muli %[[I]], %{{.*}}
// CHECK:           %[[K:.*]] = arith.addi %[[B]], %[[IC]]
// CHECK:           "tile.load"(%{{.*}}, %{{.*}}, %[[K]])
// CHECK:           "tile.store"(%{{.*}}, %{{.*}}, %{{.*}}, %[[K]])
func.func @stats(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "split:4;free:2"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %low = arith.constant dense<-3.0e+38> : tensor<1xf32>
  %high = arith.constant dense<3.0e+38> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %r:3 = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero, %m = %low, %q = %high) -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %tm = "tile.reduce"(%t) {axis = 1 : i64, kind = "max"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %tq = "tile.reduce"(%t) {axis = 1 : i64, kind = "min"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %s2 = arith.addf %s, %ts : tensor<1xf32>
    %m2 = arith.maxnumf %tm, %m : tensor<1xf32>
    %q2 = arith.minimumf %q, %tq : tensor<1xf32>
    scf.yield %s2, %m2, %q2 : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  }
  %a = arith.addf %r#0, %r#1 : tensor<1xf32>
  %b = arith.addf %a, %r#2 : tensor<1xf32>
  %br = "tile.reshape"(%b) : (tensor<1xf32>) -> tensor<1x1xf32>
  %bb = "tile.broadcast"(%br) : (tensor<1x1xf32>) -> tensor<1x256xf32>
  %last = arith.subi %n, %c1 : i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %j = arith.subi %last, %k : i32
    %t = "tile.load"(%x, %row, %j) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %u = arith.mulf %t, %bb : tensor<1x256xf32>
    "tile.store"(%y, %u, %row, %j) : (!tile.array<f32, 2 : i64>, tensor<1x256xf32>, i32, i32) -> ()
  }
  return
}

// -----

// A larger grid ("free:6" alone): clusters of 4 blocks, for a kernel whose second
// loop re-reads what its first loop read; the log-sum-exp above, one loop, stays.

// CHECK-LABEL: func.func @rereads_on_a_large_grid
// CHECK-SAME:    tile.cluster = array<i64: 1, 1, 4>
// CHECK:         "tile.cluster_gather"{{.*}}{axis = 2 : i64, size = 4 : i64}
// CHECK-LABEL: func.func @one_pass_on_a_large_grid
// CHECK-NOT:     tile.cluster
func.func @rereads_on_a_large_grid(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.grid_wish = "free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %s2 = arith.addf %s, %ts : tensor<1xf32>
    scf.yield %s2 : tensor<1xf32>
  }
  %br = "tile.reshape"(%r) : (tensor<1xf32>) -> tensor<1x1xf32>
  %bb = "tile.broadcast"(%br) : (tensor<1x1xf32>) -> tensor<1x256xf32>
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %u = arith.divf %t, %bb : tensor<1x256xf32>
    "tile.store"(%y, %u, %row, %k) : (!tile.array<f32, 2 : i64>, tensor<1x256xf32>, i32, i32) -> ()
  }
  return
}
func.func @one_pass_on_a_large_grid(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %s2 = arith.addf %s, %ts : tensor<1xf32>
    scf.yield %s2 : tensor<1xf32>
  }
  "tile.store"(%out, %r, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}

// -----

// Left as written: a large grid (no wish); a loop carrying something other than
// a reduction (s' = 2 s + x); a sum that starts from 1 (each block would add it);
// a store after the loop into an array the kernel reads (one block's write would
// reach another block's read); a loop storing a fixed tile every iteration.

// CHECK-LABEL: func.func @large_grid
// CHECK-NOT:     tile.cluster
// CHECK-LABEL: func.func @not_a_reduction
// CHECK-NOT:     tile.cluster
// CHECK-LABEL: func.func @sum_from_one
// CHECK-NOT:     tile.cluster
// CHECK-LABEL: func.func @reads_what_it_stores
// CHECK-NOT:     tile.cluster
// CHECK-LABEL: func.func @fixed_store
// CHECK-NOT:     tile.cluster
func.func @large_grid(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %s2 = arith.addf %s, %ts : tensor<1xf32>
    scf.yield %s2 : tensor<1xf32>
  }
  "tile.store"(%out, %r, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}
func.func @not_a_reduction(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:64;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %s1 = arith.addf %s, %s : tensor<1xf32>
    %s2 = arith.addf %s1, %ts : tensor<1xf32>
    scf.yield %s2 : tensor<1xf32>
  }
  "tile.store"(%out, %r, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}
func.func @sum_from_one(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:64;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %one = arith.constant dense<1.000000e+00> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %one) -> (tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %s2 = arith.addf %s, %ts : tensor<1xf32>
    scf.yield %s2 : tensor<1xf32>
  }
  "tile.store"(%out, %r, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}
func.func @reads_what_it_stores(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:64;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %s2 = arith.addf %s, %ts : tensor<1xf32>
    scf.yield %s2 : tensor<1xf32>
  }
  %old = "tile.load"(%out, %row) {padding = "zero", tile_shape = array<i64: 1>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<1xf32>
  %acc = arith.addf %old, %r : tensor<1xf32>
  "tile.store"(%out, %acc, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}
func.func @fixed_store(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:64;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
    %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
    %s2 = arith.addf %s, %ts : tensor<1xf32>
    "tile.store"(%out, %s2, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
    scf.yield %s2 : tensor<1xf32>
  }
  return
}

// -----

// sm_80 has no clusters: as written.

// CHECK-LABEL: func.func @ampere
// CHECK-NOT:     tile.cluster
module attributes {tile.target = "sm_80"} {
  func.func @ampere(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:64;free:6"} {
    %c1 = arith.constant 1 : i32
    %c0 = arith.constant 0 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
    %row = "tile.bid"() {axis = 0 : i64} : () -> i32
    %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
    %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<1xf32>) : i32 {
      %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32>
      %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xf32>) -> tensor<1xf32>
      %s2 = arith.addf %s, %ts : tensor<1xf32>
      scf.yield %s2 : tensor<1xf32>
    }
    "tile.store"(%out, %r, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
    return
  }
}

// -----

// A sum of i8 elements: tile.cluster_gather moves 16-, 32- and 64-bit elements
// only, so as written (the kernel fuzzer's case 1126003652 failed to verify).

// CHECK-LABEL: func.func @bytes
// CHECK-NOT:     tile.cluster
func.func @bytes(%x: !tile.array<i8, 2 : i64>, %out: !tile.array<i8, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:64;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %zero = arith.constant dense<0> : tensor<1xi8>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.dim"(%x) {axis = 1 : i64} : (!tile.array<i8, 2 : i64>) -> i32
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<1xi8>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "zero", tile_shape = array<i64: 1, 256>} : (!tile.array<i8, 2 : i64>, i32, i32) -> tensor<1x256xi8>
    %ts = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x256xi8>) -> tensor<1xi8>
    %s2 = arith.addi %s, %ts : tensor<1xi8>
    scf.yield %s2 : tensor<1xi8>
  }
  "tile.store"(%out, %r, %row) : (!tile.array<i8, 1 : i64>, tensor<1xi8>, i32) -> ()
  return
}
