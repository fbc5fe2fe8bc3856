// RUN: tile-opt %s -split-input-file --tile-defer-online-reductions | FileCheck %s

// A vocabulary log-sum-exp on a small grid ("split:64;free:6"): the online max m and
// sum s become per-lane tiles M, S of the chunk's shape (inits: splats of -1e30 and
// 0 in that shape), the body is element-wise (no tile.reduce in the loop), and the
// row's m and s are reduced from the lanes after the loop, where the old results
// were used.

// CHECK-LABEL: func.func @lse
// CHECK-SAME:    tile.grid_rewrites = ["tile-defer-online-reductions"]
// CHECK-DAG:     %[[M0:.*]] = arith.constant dense<-1.000000e+30> : tensor<1x8192xf32>
// CHECK-DAG:     %[[S0:.*]] = arith.constant dense<0.000000e+00> : tensor<1x8192xf32>
// CHECK:         %[[L:.*]]:2 = scf.for {{.*}} iter_args(%[[S:.*]] = %[[S0]], %[[M:.*]] = %[[M0]]) -> (tensor<1x8192xf32>, tensor<1x8192xf32>)
// CHECK-NOT:       tile.reduce
// CHECK:           %[[T:.*]] = arith.extf
// CHECK:           %[[D:.*]] = arith.subf %[[T]], %[[M]]
// CHECK:           %[[A:.*]] = math.absf %[[D]]
// CHECK:           %[[N:.*]] = arith.negf %[[A]]
// CHECK:           %[[E:.*]] = math.exp %[[N]]
// CHECK:           %[[SE:.*]] = arith.mulf %[[S]], %[[E]]
// CHECK:           %[[GROWN:.*]] = arith.addf %[[SE]], %{{.*}}
// CHECK:           %[[KEPT:.*]] = arith.addf %[[S]], %[[E]]
// CHECK:           %[[UP:.*]] = arith.cmpf ogt, %[[D]], %{{.*}}
// CHECK:           %[[S2:.*]] = arith.select %[[UP]], %[[GROWN]], %[[KEPT]]
// CHECK:           %[[M2:.*]] = arith.maximumf %[[M]], %[[T]]
// CHECK:           scf.yield %[[S2]], %[[M2]]
// CHECK:         %[[MR:.*]] = "tile.reduce"(%[[L]]#1) {axis = 1 : i64, kind = "max"} : (tensor<1x8192xf32>) -> tensor<1xf32>
// CHECK:         %[[MB:.*]] = "tile.broadcast"
// CHECK:         %[[W:.*]] = math.exp
// CHECK:         %[[SW:.*]] = arith.mulf %[[L]]#0, %[[W]]
// CHECK:         %[[SR:.*]] = "tile.reduce"(%[[SW]]) {axis = 1 : i64, kind = "sum"}
// CHECK:         %[[LOG:.*]] = math.log %[[SR]]
// CHECK:         arith.addf %[[MR]], %[[LOG]]
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
    %mx = "tile.reduce"(%t) {axis = 1 : i64, kind = "max"} : (tensor<1x8192xf32>) -> tensor<1xf32>
    %m2 = arith.maximumf %m, %mx : tensor<1xf32>
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

// The same loop on a large grid (no split item in the wish, or no wish): as written.

// CHECK-LABEL: func.func @lse_large_grid
// CHECK-NOT:     tile.grid_rewrites
// CHECK:         scf.for
// CHECK:           "tile.reduce"{{.*}}kind = "max"
// CHECK:           "tile.reduce"{{.*}}kind = "sum"
func.func @lse_large_grid(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %c4 = arith.constant 4 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %low = arith.constant dense<0xFF800000> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %r:2 = scf.for %k = %c0 to %c4 step %c1 iter_args(%m = %low, %s = %zero) -> (tensor<1xf32>, tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "neg_inf", tile_shape = array<i64: 1, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x1024xf32>
    %mx = "tile.reduce"(%t) {axis = 1 : i64, kind = "max"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %m2 = arith.maximumf %mx, %m : tensor<1xf32>
    %dm = arith.subf %m, %m2 : tensor<1xf32>
    %alpha = math.exp %dm : tensor<1xf32>
    %sa = arith.mulf %alpha, %s : tensor<1xf32>
    %m2r = "tile.reshape"(%m2) : (tensor<1xf32>) -> tensor<1x1xf32>
    %m2b = "tile.broadcast"(%m2r) : (tensor<1x1xf32>) -> tensor<1x1024xf32>
    %ts = arith.subf %t, %m2b : tensor<1x1024xf32>
    %e = math.exp %ts : tensor<1x1024xf32>
    %se = "tile.reduce"(%e) {axis = 1 : i64, kind = "sum"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %s2 = arith.addf %se, %sa : tensor<1xf32>
    scf.yield %m2, %s2 : tensor<1xf32>, tensor<1xf32>
  }
  %lg = math.log %r#1 : tensor<1xf32>
  %o = arith.addf %r#0, %lg : tensor<1xf32>
  "tile.store"(%out, %o, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}

// -----

// Operands in the other orders and an init of -inf (which becomes the most
// negative finite float) on a small grid: rewritten.  A loop whose new maximum is
// also stored in the loop (a value of the recurrence used outside it): as written.

// CHECK-LABEL: func.func @lse_swapped
// CHECK:         arith.constant dense<-3.40282347E+38> : tensor<1x1024xf32>
// CHECK:         scf.for
// CHECK-NOT:       tile.reduce
// CHECK:           scf.yield
// CHECK-LABEL: func.func @max_also_stored
// CHECK:         scf.for
// CHECK:           "tile.reduce"{{.*}}kind = "max"
func.func @lse_swapped(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:8;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %c4 = arith.constant 4 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %low = arith.constant dense<0xFF800000> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %r:2 = scf.for %k = %c0 to %c4 step %c1 iter_args(%m = %low, %s = %zero) -> (tensor<1xf32>, tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "neg_inf", tile_shape = array<i64: 1, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x1024xf32>
    %mx = "tile.reduce"(%t) {axis = 1 : i64, kind = "max"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %m2 = arith.maximumf %mx, %m : tensor<1xf32>
    %dm = arith.subf %m, %m2 : tensor<1xf32>
    %alpha = math.exp %dm : tensor<1xf32>
    %sa = arith.mulf %alpha, %s : tensor<1xf32>
    %m2r = "tile.reshape"(%m2) : (tensor<1xf32>) -> tensor<1x1xf32>
    %m2b = "tile.broadcast"(%m2r) : (tensor<1x1xf32>) -> tensor<1x1024xf32>
    %ts = arith.subf %t, %m2b : tensor<1x1024xf32>
    %e = math.exp %ts : tensor<1x1024xf32>
    %se = "tile.reduce"(%e) {axis = 1 : i64, kind = "sum"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %s2 = arith.addf %se, %sa : tensor<1xf32>
    scf.yield %m2, %s2 : tensor<1xf32>, tensor<1xf32>
  }
  %lg = math.log %r#1 : tensor<1xf32>
  %o = arith.addf %r#0, %lg : tensor<1xf32>
  "tile.store"(%out, %o, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}
func.func @max_also_stored(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:8;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %c4 = arith.constant 4 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %low = arith.constant dense<-1.0e30> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %r:2 = scf.for %k = %c0 to %c4 step %c1 iter_args(%m = %low, %s = %zero) -> (tensor<1xf32>, tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "neg_inf", tile_shape = array<i64: 1, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x1024xf32>
    %mx = "tile.reduce"(%t) {axis = 1 : i64, kind = "max"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %m2 = arith.maximumf %mx, %m : tensor<1xf32>
    "tile.store"(%out, %m2, %k) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
    %dm = arith.subf %m, %m2 : tensor<1xf32>
    %alpha = math.exp %dm : tensor<1xf32>
    %sa = arith.mulf %alpha, %s : tensor<1xf32>
    %m2r = "tile.reshape"(%m2) : (tensor<1xf32>) -> tensor<1x1xf32>
    %m2b = "tile.broadcast"(%m2r) : (tensor<1x1xf32>) -> tensor<1x1024xf32>
    %ts = arith.subf %t, %m2b : tensor<1x1024xf32>
    %e = math.exp %ts : tensor<1x1024xf32>
    %se = "tile.reduce"(%e) {axis = 1 : i64, kind = "sum"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %s2 = arith.addf %se, %sa : tensor<1xf32>
    scf.yield %m2, %s2 : tensor<1xf32>, tensor<1xf32>
  }
  %lg = math.log %r#1 : tensor<1xf32>
  %o = arith.addf %r#0, %lg : tensor<1xf32>
  "tile.store"(%out, %o, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}

// -----

// cuTile's default, ct.maximum(m, ct.max(t)): both maxima ignore NaN (maxnumf, reduce
// kind maxnum), and so do the lanes' maximum and the reduction after the loop.  A
// loop that mixes the two (maxnumf of a NaN-propagating reduce max) has no per-lane
// form with the same NaN behaviour: as written.

// CHECK-LABEL: func.func @lse_ignoring_nan
// CHECK:         scf.for
// CHECK-NOT:       tile.reduce
// CHECK:           arith.maxnumf %{{.*}} : tensor<1x1024xf32>
// CHECK:           scf.yield
// CHECK:         "tile.reduce"(%{{.*}}) {axis = 1 : i64, kind = "maxnum"} : (tensor<1x1024xf32>) -> tensor<1xf32>
// CHECK-LABEL: func.func @lse_mixed_nan
// CHECK:         scf.for
// CHECK:           "tile.reduce"{{.*}}kind = "max"
// CHECK:           arith.maxnumf
func.func @lse_ignoring_nan(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:8;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %c4 = arith.constant 4 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %low = arith.constant dense<-1.0e30> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %r:2 = scf.for %k = %c0 to %c4 step %c1 iter_args(%m = %low, %s = %zero) -> (tensor<1xf32>, tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "neg_inf", tile_shape = array<i64: 1, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x1024xf32>
    %mx = "tile.reduce"(%t) {axis = 1 : i64, kind = "maxnum"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %m2 = arith.maxnumf %m, %mx : tensor<1xf32>
    %dm = arith.subf %m, %m2 : tensor<1xf32>
    %alpha = math.exp %dm : tensor<1xf32>
    %sa = arith.mulf %s, %alpha : tensor<1xf32>
    %m2r = "tile.reshape"(%m2) : (tensor<1xf32>) -> tensor<1x1xf32>
    %m2b = "tile.broadcast"(%m2r) : (tensor<1x1xf32>) -> tensor<1x1024xf32>
    %ts = arith.subf %t, %m2b : tensor<1x1024xf32>
    %e = math.exp %ts : tensor<1x1024xf32>
    %se = "tile.reduce"(%e) {axis = 1 : i64, kind = "sum"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %s2 = arith.addf %sa, %se : tensor<1xf32>
    scf.yield %m2, %s2 : tensor<1xf32>, tensor<1xf32>
  }
  %lg = math.log %r#1 : tensor<1xf32>
  %o = arith.addf %r#0, %lg : tensor<1xf32>
  "tile.store"(%out, %o, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}
func.func @lse_mixed_nan(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:8;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %c4 = arith.constant 4 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %low = arith.constant dense<-1.0e30> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %r:2 = scf.for %k = %c0 to %c4 step %c1 iter_args(%m = %low, %s = %zero) -> (tensor<1xf32>, tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "neg_inf", tile_shape = array<i64: 1, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x1024xf32>
    %mx = "tile.reduce"(%t) {axis = 1 : i64, kind = "max"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %m2 = arith.maxnumf %m, %mx : tensor<1xf32>
    %dm = arith.subf %m, %m2 : tensor<1xf32>
    %alpha = math.exp %dm : tensor<1xf32>
    %sa = arith.mulf %s, %alpha : tensor<1xf32>
    %m2r = "tile.reshape"(%m2) : (tensor<1xf32>) -> tensor<1x1xf32>
    %m2b = "tile.broadcast"(%m2r) : (tensor<1x1xf32>) -> tensor<1x1024xf32>
    %ts = arith.subf %t, %m2b : tensor<1x1024xf32>
    %e = math.exp %ts : tensor<1x1024xf32>
    %se = "tile.reduce"(%e) {axis = 1 : i64, kind = "sum"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %s2 = arith.addf %sa, %se : tensor<1xf32>
    scf.yield %m2, %s2 : tensor<1xf32>, tensor<1xf32>
  }
  %lg = math.log %r#1 : tensor<1xf32>
  %o = arith.addf %r#0, %lg : tensor<1xf32>
  "tile.store"(%out, %o, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}

// -----

// A NaN start with the NaN-ignoring maxima (maxnumf, maxnum): the first trip's
// maximum drops the NaN, which a lane's start (a float's maximum) would not: as written.

// CHECK-LABEL: func.func @lse_nan_start
// CHECK:         scf.for
// CHECK:           "tile.reduce"{{.*}}kind = "maxnum"
// CHECK:           scf.yield
func.func @lse_nan_start(%x: !tile.array<f32, 2 : i64>, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.grid_wish = "split:8;free:6"} {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %c4 = arith.constant 4 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<1xf32>
  %nan = arith.constant dense<0x7FC00000> : tensor<1xf32>
  %row = "tile.bid"() {axis = 0 : i64} : () -> i32
  %r:2 = scf.for %k = %c0 to %c4 step %c1 iter_args(%m = %nan, %s = %zero) -> (tensor<1xf32>, tensor<1xf32>) : i32 {
    %t = "tile.load"(%x, %row, %k) {padding = "neg_inf", tile_shape = array<i64: 1, 1024>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x1024xf32>
    %mx = "tile.reduce"(%t) {axis = 1 : i64, kind = "maxnum"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %m2 = arith.maxnumf %mx, %m : tensor<1xf32>
    %dm = arith.subf %m, %m2 : tensor<1xf32>
    %alpha = math.exp %dm : tensor<1xf32>
    %sa = arith.mulf %alpha, %s : tensor<1xf32>
    %m2r = "tile.reshape"(%m2) : (tensor<1xf32>) -> tensor<1x1xf32>
    %m2b = "tile.broadcast"(%m2r) : (tensor<1x1xf32>) -> tensor<1x1024xf32>
    %ts = arith.subf %t, %m2b : tensor<1x1024xf32>
    %e = math.exp %ts : tensor<1x1024xf32>
    %se = "tile.reduce"(%e) {axis = 1 : i64, kind = "sum"} : (tensor<1x1024xf32>) -> tensor<1xf32>
    %s2 = arith.addf %se, %sa : tensor<1xf32>
    scf.yield %m2, %s2 : tensor<1xf32>, tensor<1xf32>
  }
  %lg = math.log %r#1 : tensor<1xf32>
  %o = arith.addf %r#0, %lg : tensor<1xf32>
  "tile.store"(%out, %o, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32>, i32) -> ()
  return
}
