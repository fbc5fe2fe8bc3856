// RUN: tile-opt %s -split-input-file --tile-lower-to-gpu | FileCheck %s

// The kernel ABI (docs/gpu-backend.md): an array is a global pointer (16-byte
// aligned when specialized so), its dims as i32 and its strides as i64; a
// scalar is itself.  The block is 32 * num_warps threads; occupancy becomes
// ptxas' blocks-per-SM hint; the launch metadata is a JSON module attribute.

// CHECK-LABEL: module attributes {gpu.container_module, tile.kernel_meta = "{\22name\22: \22abi\22, \22num_threads\22: 64, \22shared_bytes\22: 0, \22params\22: [{\22kind\22: \22array\22, \22name\22: \22x\22, \22dtype\22: \22f32\22, \22ndim\22: 2, \22aligned\22: true}, {\22kind\22: \22array\22, \22name\22: \22v\22, \22dtype\22: \22f32\22, \22ndim\22: 1, \22aligned\22: false}, {\22kind\22: \22scalar\22, \22name\22: \22alpha\22, \22dtype\22: \22f32\22}, {\22kind\22: \22scalar\22, \22name\22: \22flag\22, \22dtype\22: \22i1\22}, {\22kind\22: \22scalar\22, \22name\22: \22n\22, \22dtype\22: \22i64\22}]}"}
// CHECK-NEXT:    gpu.module @tileir_kernels {
// CHECK-NEXT:      gpu.func @abi(
// CHECK-SAME:        %{{[^:]*}}: !llvm.ptr<1> {llvm.align = 16 : i64}, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i64, %{{[^:]*}}: i64,
// CHECK-SAME:        %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: i32, %{{[^:]*}}: i64,
// CHECK-SAME:        %{{[^:]*}}: f32, %{{[^:]*}}: i1, %{{[^:]*}}: i64)
// CHECK-SAME:        kernel attributes {known_block_size = array<i32: 64, 1, 1>, nvvm.minctasm = 3 : i32}
// CHECK-NEXT:        gpu.return
func.func @abi(%x: !tile.array<f32, 2 : i64> {tile.aligned}, %v: !tile.array<f32, 1 : i64>, %alpha: f32, %flag: i1, %n: i64) attributes {tile.kernel, tile.num_warps = 2 : i32, tile.occupancy = 3 : i32, tile.arg_names = ["x", "v", "alpha", "flag", "n"]} {
  return
}

// -----

// Aligned arrays: one 16-byte access per group of 8 bf16.  A tile entirely in
// bounds takes plain vector loads and stores (the address needs no stride:
// aligned means a unit last-dim stride); a tile at the edge checks each group:
// whole (a vector access), else masked per element; a load also skips the masks
// of a group wholly outside (the padding).

// CHECK-LABEL: gpu.func @aligned_bf16
// CHECK-SAME:    (%[[X:[^:]*]]: !llvm.ptr<1> {llvm.align = 16 : i64}, %{{[^:]*}}: i32, %[[XS:[^:]*]]: i64, %[[Y:[^:]*]]: !llvm.ptr<1> {llvm.align = 16 : i64}, %{{[^:]*}}: i32, %[[YS:[^:]*]]: i64)
// CHECK-SAME:    known_block_size = array<i32: 32, 1, 1>
// CHECK-NOT:     %[[XS]]
// CHECK:         %[[P:.*]] = llvm.getelementptr %[[X]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK:         %[[V:.*]] = scf.if %{{.*}} -> (vector<8xbf16>) {
// CHECK-NEXT:      %[[FULL:.*]] = llvm.load %[[P]] {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK-NEXT:      scf.yield %[[FULL]] : vector<8xbf16>
// CHECK-NEXT:    } else {
// CHECK:           %[[FIRST:.*]] = arith.cmpi ult, %[[C:.*]], %{{.*}} : i64
// CHECK:           %[[WHOLE:.*]] = arith.andi %[[FIRST]], %{{.*}} : i1
// CHECK-NEXT:      scf.if %[[WHOLE]] -> (vector<8xbf16>) {
// CHECK-NEXT:        llvm.load %[[P]] {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK:           } else {
// CHECK:             %[[BELOW:.*]] = arith.cmpi slt, %[[C]], %c0_i64 : i64
// CHECK-NEXT:        %[[ENDS:.*]] = arith.ori %[[FIRST]], %{{.*}} : i1
// CHECK-NEXT:        %[[TOUCH:.*]] = arith.ori %[[ENDS]], %[[BELOW]] : i1
// CHECK-NEXT:        scf.if %[[TOUCH]] -> (vector<8xbf16>) {
// CHECK-NEXT:          %[[MASK:.*]] = vector.from_elements %[[FIRST]], {{.*}} : vector<8xi1>
// CHECK-NEXT:          %[[PAD:.*]] = vector.broadcast %{{.*}} : bf16 to vector<8xbf16>
// CHECK-NEXT:          llvm.intr.masked.load %[[P]], %[[MASK]], %[[PAD]] {alignment = 16 : i32} : (!llvm.ptr<1>, vector<8xi1>, vector<8xbf16>) -> vector<8xbf16>
// CHECK:             } else {
// CHECK-NEXT:          %[[NONE:.*]] = vector.broadcast %{{.*}} : bf16 to vector<8xbf16>
// CHECK-NEXT:          scf.yield %[[NONE]] : vector<8xbf16>
// CHECK:         vector.extract %[[V]][7] : bf16 from vector<8xbf16>
// CHECK-NOT:     %[[YS]]
// CHECK:         %[[Q:.*]] = llvm.getelementptr %[[Y]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK-NEXT:    %[[VAL:.*]] = vector.from_elements {{.*}} : vector<8xbf16>
// CHECK:         scf.if %{{.*}} {
// CHECK-NEXT:      llvm.store %[[VAL]], %[[Q]] {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NEXT:    } else {
// CHECK:           llvm.store %[[VAL]], %[[Q]] {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK:           llvm.intr.masked.store %[[VAL]], %[[Q]], %{{.*}} {alignment = 16 : i32} : vector<8xbf16>, vector<8xi1> into !llvm.ptr<1>
// CHECK:         gpu.return
#l = #tile.blocked<array<i64: 8>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @aligned_bf16(%x: !tile.array<bf16, 1 : i64> {tile.aligned}, %y: !tile.array<bf16, 1 : i64> {tile.aligned}) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 256>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<256xbf16, #l>
  "tile.store"(%y, %t, %b) : (!tile.array<bf16, 1 : i64>, tensor<256xbf16, #l>, i32) -> ()
  return
}

// -----

// Unaligned arrays take the scalar path: the thread's first element is at its
// base coordinate times the runtime stride, each further register a constant
// number of strides on; at the edge each element is guarded on its own.

// CHECK-LABEL: gpu.func @unaligned_bf16
// CHECK-SAME:    (%[[X:[^:]*]]: !llvm.ptr<1>, %{{[^:]*}}: i32, %[[XS:[^:]*]]: i64, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: i32, %[[YS:[^:]*]]: i64)
// CHECK:         %[[O0:.*]] = arith.muli %{{.*}}, %[[XS]] : i64
// CHECK-NEXT:    %[[P0:.*]] = llvm.getelementptr %[[X]][%[[O0]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK:         %[[O1:.*]] = arith.muli %c1_i64{{.*}}, %[[XS]] : i64
// CHECK-NEXT:    %[[P1:.*]] = llvm.getelementptr %[[P0]][%[[O1]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK:         scf.if %{{.*}} -> (vector<1xbf16>, vector<1xbf16>) {
// CHECK-NEXT:      llvm.load %[[P0]] {alignment = 2 : i64} : !llvm.ptr<1> -> vector<1xbf16>
// CHECK-NEXT:      llvm.load %[[P1]] {alignment = 2 : i64} : !llvm.ptr<1> -> vector<1xbf16>
// CHECK:         } else {
// CHECK:           scf.if %{{.*}} -> (bf16) {
// CHECK-NEXT:        llvm.load %[[P0]] {alignment = 2 : i64} : !llvm.ptr<1> -> bf16
// CHECK-NEXT:        scf.yield
// CHECK-NEXT:      } else {
// CHECK-NEXT:        scf.yield %{{.*}} : bf16
// CHECK:         arith.muli %{{.*}}, %[[YS]] : i64
// CHECK:         llvm.store %{{.*}}, %{{.*}} {alignment = 2 : i64} : vector<1xbf16>, !llvm.ptr<1>
#l = #tile.blocked<array<i64: 2>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @unaligned_bf16(%x: !tile.array<bf16, 1 : i64>, %y: !tile.array<bf16, 1 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<64xbf16, #l>
  "tile.store"(%y, %t, %b) : (!tile.array<bf16, 1 : i64>, tensor<64xbf16, #l>, i32) -> ()
  return
}

// -----

// Loads from an array many times the L2 cache (`tile.large`, which launch()
// specializes on) carry an L2 evict_last policy, made once at the entry with
// createpolicy; other arrays' loads stay plain.  That is the default, when the
// kernel has no `tile.cache_hints`.

// CHECK-LABEL: gpu.func @l2_policy_on_large_arrays
// CHECK-SAME:    (%[[X:[^:]*]]: !llvm.ptr<1> {llvm.align = 16 : i64}, %{{[^:]*}}: i32, %{{[^:]*}}: i64, %[[W:[^:]*]]: !llvm.ptr<1>
// CHECK-NEXT:    %[[POL:.*]] = llvm.inline_asm "createpolicy.fractional.L2::evict_last.b64 $0, 1.0;", "=l"  : () -> i64
// CHECK:         %[[PX:.*]] = llvm.getelementptr %[[X]]
// CHECK:         scf.if
// CHECK-NEXT:      llvm.inline_asm "ld.global.L2::cache_hint.v4.b32 {$0, $1, $2, $3}, [$4], $5;", "=r,=r,=r,=r,l,l" %[[PX]], %[[POL]] : (!llvm.ptr<1>, i64) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK:           vector.bitcast %{{.*}} : vector<4xi32> to vector<8xbf16>
// CHECK:         %[[PW:.*]] = llvm.getelementptr %[[W]]
// CHECK:         scf.if
// CHECK-NEXT:      llvm.load %[[PW]] {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
#l = #tile.blocked<array<i64: 8>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @l2_policy_on_large_arrays(%x: !tile.array<bf16, 1 : i64> {tile.aligned, tile.large}, %w: !tile.array<bf16, 1 : i64> {tile.aligned}, %y: !tile.array<bf16, 1 : i64> {tile.aligned, tile.large}) attributes {tile.kernel, tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 256>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<256xbf16, #l>
  %g = "tile.load"(%w, %c0) {padding = "zero", tile_shape = array<i64: 256>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<256xbf16, #l>
  %p = arith.mulf %t, %g : tensor<256xbf16, #l>
  "tile.store"(%y, %p, %b) : (!tile.array<bf16, 1 : i64>, tensor<256xbf16, #l>, i32) -> ()
  return
}

// -----

// `tile.cache_hints = true` puts the policy on every 16-byte load, except one
// that a store precedes (the policy load is inline PTX that LLVM may move like
// pure code); `false` on none, large arrays included.

// CHECK-LABEL: gpu.func @cache_hints_on
// CHECK:         llvm.inline_asm "createpolicy.fractional.L2::evict_last.b64
// CHECK:         llvm.inline_asm "ld.global.L2::cache_hint.v4.b32
// CHECK:         llvm.store
// CHECK-NOT:     ld.global.L2::cache_hint
// CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK:         gpu.return
#l = #tile.blocked<array<i64: 8>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @cache_hints_on(%x: !tile.array<bf16, 1 : i64> {tile.aligned}, %y: !tile.array<bf16, 1 : i64> {tile.aligned}) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = true} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 256>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<256xbf16, #l>
  "tile.store"(%y, %t, %b) : (!tile.array<bf16, 1 : i64>, tensor<256xbf16, #l>, i32) -> ()
  %u = "tile.load"(%y, %b) {padding = "zero", tile_shape = array<i64: 256>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<256xbf16, #l>
  "tile.store"(%x, %u, %b) : (!tile.array<bf16, 1 : i64>, tensor<256xbf16, #l>, i32) -> ()
  return
}

// -----

// CHECK-LABEL: gpu.func @cache_hints_off
// CHECK-NOT:     createpolicy
// CHECK-NOT:     cache_hint
// CHECK:         gpu.return
#l = #tile.blocked<array<i64: 8>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @cache_hints_off(%x: !tile.array<bf16, 1 : i64> {tile.aligned, tile.large}, %y: !tile.array<bf16, 1 : i64> {tile.aligned, tile.large}) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 256>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<256xbf16, #l>
  "tile.store"(%y, %t, %b) : (!tile.array<bf16, 1 : i64>, tensor<256xbf16, #l>, i32) -> ()
  return
}

// -----

// A reduction within one warp: the thread's own elements first, then a
// butterfly of xor shuffles over the 5 lane bits.  No shared memory, no
// barrier.

// CHECK-LABEL: module attributes {gpu.container_module, tile.kernel_meta = "{\22name\22: \22reduce_in_warp\22, \22num_threads\22: 32, \22shared_bytes\22: 0,
// CHECK-LABEL: gpu.func @reduce_in_warp
// CHECK-NOT:     gpu.dynamic_shared_memory
// CHECK:         %[[E0:.*]] = vector.extract %[[V:.*]][0] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E1:.*]] = vector.extract %[[V]][1] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E2:.*]] = vector.extract %[[V]][2] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E3:.*]] = vector.extract %[[V]][3] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[S1:.*]] = arith.addf %[[E0]], %[[E1]] : f32
// CHECK-NEXT:    %[[S2:.*]] = arith.addf %[[S1]], %[[E2]] : f32
// CHECK-NEXT:    %[[S3:.*]] = arith.addf %[[S2]], %[[E3]] : f32
// CHECK:         %[[R1:.*]], %{{.*}} = gpu.shuffle xor %[[S3]], %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    %[[T1:.*]] = arith.addf %[[S3]], %[[R1]] : f32
// CHECK:         %[[R2:.*]], %{{.*}} = gpu.shuffle xor %[[T1]], %c2_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    %[[T2:.*]] = arith.addf %[[T1]], %[[R2]] : f32
// CHECK:         %[[R4:.*]], %{{.*}} = gpu.shuffle xor %[[T2]], %c4_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    %[[T4:.*]] = arith.addf %[[T2]], %[[R4]] : f32
// CHECK:         %[[R8:.*]], %{{.*}} = gpu.shuffle xor %[[T4]], %c8_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    %[[T8:.*]] = arith.addf %[[T4]], %[[R8]] : f32
// CHECK:         %[[R16:.*]], %{{.*}} = gpu.shuffle xor %[[T8]], %c16_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    %[[SUM:.*]] = arith.addf %[[T8]], %[[R16]] : f32
// CHECK-NOT:     gpu.barrier
// CHECK:         vector.from_elements %[[SUM]] : vector<1xf32>
// CHECK-NOT:     gpu.barrier
// CHECK:         gpu.return
#row = #tile.blocked<array<i64: 1, 4>, array<i64: 1, 32>, array<i64: 1, 1>, array<i64: 1, 0>>
func.func @reduce_in_warp(%x: !tile.array<f32, 2 : i64> {tile.aligned}, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %c0 = arith.constant 0 : i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b, %c0) {padding = "zero", tile_shape = array<i64: 1, 128>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x128xf32, #row>
  %s = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x128xf32, #row>) -> tensor<1xf32, #tile.slice<1 : i64, #row>>
  "tile.store"(%out, %s, %b) : (!tile.array<f32, 1 : i64>, tensor<1xf32, #tile.slice<1 : i64, #row>>, i32) -> ()
  return
}

// -----

// A max within the thread is a tree: pairs first, then pairs of pairs (8 of a
// row in 3 dependent steps, not a chain of 7); any order gives the same bits.
// (A float sum keeps its chain above: its rounding follows the order.)

// CHECK-LABEL: gpu.func @reduce_max_tree_in_warp
// CHECK:         %[[E0:.*]] = vector.extract %[[V:.*]][0] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E1:.*]] = vector.extract %[[V]][1] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E2:.*]] = vector.extract %[[V]][2] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E3:.*]] = vector.extract %[[V]][3] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E4:.*]] = vector.extract %[[W:.*]][0] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E5:.*]] = vector.extract %[[W]][1] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E6:.*]] = vector.extract %[[W]][2] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[E7:.*]] = vector.extract %[[W]][3] : f32 from vector<4xf32>
// CHECK-NEXT:    %[[M01:.*]] = arith.maximumf %[[E0]], %[[E1]] : f32
// CHECK-NEXT:    %[[M23:.*]] = arith.maximumf %[[E2]], %[[E3]] : f32
// CHECK-NEXT:    %[[M45:.*]] = arith.maximumf %[[E4]], %[[E5]] : f32
// CHECK-NEXT:    %[[M67:.*]] = arith.maximumf %[[E6]], %[[E7]] : f32
// CHECK-NEXT:    %[[M03:.*]] = arith.maximumf %[[M01]], %[[M23]] : f32
// CHECK-NEXT:    %[[M47:.*]] = arith.maximumf %[[M45]], %[[M67]] : f32
// CHECK-NEXT:    %[[M:.*]] = arith.maximumf %[[M03]], %[[M47]] : f32
// CHECK:         %[[R1:.*]], %{{.*}} = gpu.shuffle xor %[[M]], %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    arith.maximumf %[[M]], %[[R1]] : f32
// CHECK:         gpu.return
#row = #tile.blocked<array<i64: 1, 8>, array<i64: 1, 32>, array<i64: 1, 1>, array<i64: 1, 0>>
func.func @reduce_max_tree_in_warp(%x: !tile.array<f32, 2 : i64> {tile.aligned}, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %c0 = arith.constant 0 : i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b, %c0) {padding = "neg_inf", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32, #row>
  %s = "tile.reduce"(%t) {axis = 1 : i64, kind = "max"} : (tensor<1x256xf32, #row>) -> tensor<1xf32, #tile.slice<1 : i64, #row>>
  "tile.store"(%out, %s, %b) : (!tile.array<f32, 1 : i64>, tensor<1xf32, #tile.slice<1 : i64, #row>>, i32) -> ()
  return
}

// -----

// Across warps: after the lane shuffles, the warps' partials meet in shared
// memory (one dynamic buffer at the kernel entry, sized in the metadata),
// written before and read after a barrier.

// CHECK-LABEL: module attributes {gpu.container_module, tile.kernel_meta = "{\22name\22: \22reduce_across_warps\22, \22num_threads\22: 64, \22shared_bytes\22: {{[1-9][0-9]*}},
// CHECK-LABEL: gpu.func @reduce_across_warps
// CHECK-NEXT:    %[[SMEM:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK-COUNT-5: gpu.shuffle xor %{{.*}} : f32
// CHECK:         %[[BUF:.*]] = memref.view %[[SMEM]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<{{[0-9]+}}xf32, #gpu.address_space<workgroup>>
// CHECK:         memref.store %{{.*}}, %[[BUF]][%{{.*}}]
// CHECK:         gpu.barrier
// CHECK:         memref.load %[[BUF]][%{{.*}}]
// CHECK:         arith.maximumf
// CHECK:         gpu.return
#row = #tile.blocked<array<i64: 1, 4>, array<i64: 1, 32>, array<i64: 1, 2>, array<i64: 1, 0>>
func.func @reduce_across_warps(%x: !tile.array<f32, 2 : i64> {tile.aligned}, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 2 : i32, tile.cache_hints = false} {
  %c0 = arith.constant 0 : i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b, %c0) {padding = "neg_inf", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32, #row>
  %s = "tile.reduce"(%t) {axis = 1 : i64, kind = "max"} : (tensor<1x256xf32, #row>) -> tensor<1xf32, #tile.slice<1 : i64, #row>>
  "tile.store"(%out, %s, %b) : (!tile.array<f32, 1 : i64>, tensor<1xf32, #tile.slice<1 : i64, #row>>, i32) -> ()
  return
}

// -----

// argmax carries (value, index) pairs: the index is the element's coordinate
// along the axis; b replaces a when it is NaN and a is not, when it is greater,
// or on a tie (equal, or both NaN) when its index is lower.  Both halves of a
// pair travel through the shuffles; the result is the index.

// CHECK-LABEL: gpu.func @argmax_in_warp
// CHECK:         %[[NA:.*]] = arith.cmpf uno, %[[VA:.*]], %[[VA]] : f32
// CHECK-NEXT:    %[[NB:.*]] = arith.cmpf uno, %[[VB:.*]], %[[VB]] : f32
// CHECK-NEXT:    %[[EQ:.*]] = arith.cmpf oeq, %[[VA]], %[[VB]] : f32
// CHECK:         arith.cmpf ogt, %[[VB]], %[[VA]] : f32
// CHECK:         %[[V:.*]] = arith.select %[[TAKE:.*]], %[[VB]], %[[VA]] : f32
// CHECK-NEXT:    %[[I:.*]] = arith.select %[[TAKE]], %{{.*}}, %{{.*}} : i32
// CHECK:         gpu.shuffle xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK:         gpu.shuffle xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : i32
// CHECK-NOT:     gpu.barrier
// CHECK:         gpu.return
#row = #tile.blocked<array<i64: 1, 4>, array<i64: 1, 32>, array<i64: 1, 1>, array<i64: 1, 0>>
func.func @argmax_in_warp(%x: !tile.array<f32, 2 : i64> {tile.aligned}, %out: !tile.array<i32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b, %c0) {padding = "neg_inf", tile_shape = array<i64: 1, 128>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x128xf32, #row>
  %m = "tile.reduce"(%t) {axis = 1 : i64, kind = "argmax"} : (tensor<1x128xf32, #row>) -> tensor<1xi32, #tile.slice<1 : i64, #row>>
  "tile.store"(%out, %m, %b) : (!tile.array<i32, 1 : i64>, tensor<1xi32, #tile.slice<1 : i64, #row>>, i32) -> ()
  return
}

// -----

// Across warps, argmin's pairs take two shared buffers side by side: the values
// at offset 0, the indices 16-byte aligned after them (2 warps x 32 lanes).

// CHECK-LABEL: gpu.func @argmin_across_warps
// CHECK:         memref.view %{{.*}}[%c0{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK:         memref.view %{{.*}}[%c256{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xi32, #gpu.address_space<workgroup>>
// CHECK:         gpu.barrier
// CHECK:         arith.cmpf olt
// CHECK:         gpu.return
#row = #tile.blocked<array<i64: 1, 4>, array<i64: 1, 32>, array<i64: 1, 2>, array<i64: 1, 0>>
func.func @argmin_across_warps(%x: !tile.array<f32, 2 : i64> {tile.aligned}, %out: !tile.array<i32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 2 : i32} {
  %c0 = arith.constant 0 : i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b, %c0) {padding = "pos_inf", tile_shape = array<i64: 1, 256>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x256xf32, #row>
  %m = "tile.reduce"(%t) {axis = 1 : i64, kind = "argmin"} : (tensor<1x256xf32, #row>) -> tensor<1xi32, #tile.slice<1 : i64, #row>>
  "tile.store"(%out, %m, %b) : (!tile.array<i32, 1 : i64>, tensor<1xi32, #tile.slice<1 : i64, #row>>, i32) -> ()
  return
}

// -----

// The NaN-ignoring kinds and the float options: maxnum combines with maxnumf
// (PTX max.f32, which returns the operand that is not NaN); a sum with rz and ftz
// combines with add.rz.ftz.f32; an f16 sum with rm adds in f32 and rounds each step
// back to f16 downward (cvt.rm.f16.f32), one rounding of the exact sum; argminnum's
// b wins when a is NaN and b is not (a NaN is the worst value, not the extreme).

// CHECK-LABEL: gpu.func @reduce_options_in_warp
// CHECK-COUNT-3: arith.maxnumf %{{.*}} : f32
// CHECK:         llvm.inline_asm "add.rz.ftz.f32 $0, $1, $2;", "=f,f,f"
// CHECK:         %[[W:.*]] = llvm.inline_asm "add.rm.f32 $0, $1, $2;", "=f,f,f"
// CHECK-NEXT:    %[[H:.*]] = llvm.inline_asm "cvt.rm.f16.f32 $0, $1;", "=h,f" %[[W]] : (f32) -> f16
// CHECK-NEXT:    arith.extf %[[H]] : f16 to f32
// CHECK:         %[[NA:.*]] = arith.cmpf uno, %[[VA:.*]], %[[VA]] : f32
// CHECK-NEXT:    %[[NB:.*]] = arith.cmpf uno, %[[VB:.*]], %[[VB]] : f32
// CHECK:         %[[NOTB:.*]] = arith.xori %[[NB]], %{{.*}} : i1
// CHECK-NEXT:    %[[LONE:.*]] = arith.andi %[[NA]], %[[NOTB]] : i1
// CHECK-NEXT:    %[[LT:.*]] = arith.cmpf olt, %[[VB]], %[[VA]] : f32
// CHECK-NEXT:    arith.ori %[[LONE]], %[[LT]] : i1
// CHECK:         gpu.return
#row = #tile.blocked<array<i64: 1, 4>, array<i64: 1, 32>, array<i64: 1, 1>, array<i64: 1, 0>>
func.func @reduce_options_in_warp(%x: !tile.array<f32, 2 : i64> {tile.aligned}, %h: !tile.array<f16, 2 : i64> {tile.aligned}, %out: !tile.array<f32, 1 : i64>, %hout: !tile.array<f16, 1 : i64>, %iout: !tile.array<i32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %c0 = arith.constant 0 : i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b, %c0) {padding = "zero", tile_shape = array<i64: 1, 128>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x128xf32, #row>
  %m = "tile.reduce"(%t) {axis = 1 : i64, kind = "maxnum"} : (tensor<1x128xf32, #row>) -> tensor<1xf32, #tile.slice<1 : i64, #row>>
  "tile.store"(%out, %m, %b) : (!tile.array<f32, 1 : i64>, tensor<1xf32, #tile.slice<1 : i64, #row>>, i32) -> ()
  %s = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum", tile.rounding = "rz", tile.ftz = "true"} : (tensor<1x128xf32, #row>) -> tensor<1xf32, #tile.slice<1 : i64, #row>>
  "tile.store"(%out, %s, %b) : (!tile.array<f32, 1 : i64>, tensor<1xf32, #tile.slice<1 : i64, #row>>, i32) -> ()
  %th = "tile.load"(%h, %b, %c0) {padding = "zero", tile_shape = array<i64: 1, 128>} : (!tile.array<f16, 2 : i64>, i32, i32) -> tensor<1x128xf16, #row>
  %sh = "tile.reduce"(%th) {axis = 1 : i64, kind = "sum", tile.rounding = "rm"} : (tensor<1x128xf16, #row>) -> tensor<1xf16, #tile.slice<1 : i64, #row>>
  "tile.store"(%hout, %sh, %b) : (!tile.array<f16, 1 : i64>, tensor<1xf16, #tile.slice<1 : i64, #row>>, i32) -> ()
  %a = "tile.reduce"(%t) {axis = 1 : i64, kind = "argminnum"} : (tensor<1x128xf32, #row>) -> tensor<1xi32, #tile.slice<1 : i64, #row>>
  "tile.store"(%iout, %a, %b) : (!tile.array<i32, 1 : i64>, tensor<1xi32, #tile.slice<1 : i64, #row>>, i32) -> ()
  return
}

// -----

// arith.truncf with a directed roundingmode (cuTile's astype RZ, RM, RP) rounds once:
// f64 -> f32 by cvt.rm.f32.f64, then to f16 by cvt.rm.f16.f32 in the same direction
// (the f16 numbers are f32 numbers: two roundings one way are one); to bf16 toward
// zero by bits (the f32's top half; a NaN kept quiet).

// CHECK-LABEL: gpu.func @directed_truncf
// CHECK:         %[[W:.*]] = llvm.inline_asm "cvt.rm.f32.f64 $0, $1;", "=f,d" %{{.*}} : (f64) -> f32
// CHECK-NEXT:    llvm.inline_asm "cvt.rm.f16.f32 $0, $1;", "=h,f" %[[W]] : (f32) -> f16
// CHECK:         %[[F:.*]] = arith.truncf %{{.*}} : f64 to f32
// CHECK-NEXT:    %[[BITS:.*]] = arith.bitcast %[[F]] : f32 to i32
// CHECK:         arith.shrui %[[BITS]], %{{.*}} : i32
// CHECK-NOT:     arith.truncf
// CHECK:         arith.bitcast %{{.*}} : i16 to bf16
#row = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @directed_truncf(%x: !tile.array<f64, 1 : i64> {tile.aligned}, %h: !tile.array<f16, 1 : i64>, %b: !tile.array<bf16, 1 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%x, %c0) {padding = "zero", tile_shape = array<i64: 32>} : (!tile.array<f64, 1 : i64>, i32) -> tensor<32xf64, #row>
  %d = arith.truncf %t downward : tensor<32xf64, #row> to tensor<32xf16, #row>
  "tile.store"(%h, %d, %c0) : (!tile.array<f16, 1 : i64>, tensor<32xf16, #row>, i32) -> ()
  %f = arith.truncf %t : tensor<32xf64, #row> to tensor<32xf32, #row>
  %z = arith.truncf %f toward_zero : tensor<32xf32, #row> to tensor<32xbf16, #row>
  "tile.store"(%b, %z, %c0) : (!tile.array<bf16, 1 : i64>, tensor<32xbf16, #row>, i32) -> ()
  return
}

// -----

// Across 16 warps whose lanes all hold the same partial: each warp writes its
// partial once (a 16-float buffer, 64 bytes), then lane l of every warp loads
// warp (l mod 16)'s and four xor shuffles (1, 2, 4, 8) combine them: one
// shared-memory load per thread instead of sixteen.

// CHECK-LABEL: module attributes {gpu.container_module, tile.kernel_meta = "{\22name\22: \22reduce_across_16_warps\22, \22num_threads\22: 512, \22shared_bytes\22: 64,
// CHECK-LABEL: gpu.func @reduce_across_16_warps
// CHECK-COUNT-5: gpu.shuffle xor %{{.*}} : f32
// CHECK:         %[[BUF:.*]] = memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16xf32, #gpu.address_space<workgroup>>
// CHECK:         memref.store %{{.*}}, %[[BUF]][%{{.*}}]
// CHECK:         gpu.barrier
// CHECK-COUNT-1: memref.load %[[BUF]][%{{.*}}]
// CHECK-NOT:     memref.load
// CHECK:         gpu.shuffle xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    arith.addf
// CHECK:         gpu.shuffle xor %{{.*}}, %c2_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    arith.addf
// CHECK:         gpu.shuffle xor %{{.*}}, %c4_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    arith.addf
// CHECK:         gpu.shuffle xor %{{.*}}, %c8_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NEXT:    arith.addf
// CHECK-NOT:     gpu.shuffle
// CHECK:         gpu.return
#row = #tile.blocked<array<i64: 1, 4>, array<i64: 1, 32>, array<i64: 1, 16>, array<i64: 1, 0>>
func.func @reduce_across_16_warps(%x: !tile.array<f32, 2 : i64> {tile.aligned}, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 16 : i32} {
  %c0 = arith.constant 0 : i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b, %c0) {padding = "zero", tile_shape = array<i64: 1, 2048>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x2048xf32, #row>
  %s = "tile.reduce"(%t) {axis = 1 : i64, kind = "sum"} : (tensor<1x2048xf32, #row>) -> tensor<1xf32, #tile.slice<1 : i64, #row>>
  "tile.store"(%out, %s, %b) : (!tile.array<f32, 1 : i64>, tensor<1xf32, #tile.slice<1 : i64, #row>>, i32) -> ()
  return
}

// -----

// A layout conversion goes through a scratch tile in dynamic shared memory, laid
// out row by row with a swizzle (64-byte rows here: 16 f32): every thread writes
// its registers (here one per row: scalars), a barrier, then reads its new ones
// (here 4 consecutive floats: vectors).  It is the kernel's first exchange and is
// in no loop, so no barrier is needed before the writes.  16 x 16 x 4 bytes,
// rounded to the swizzle period.

// CHECK-LABEL: module attributes {gpu.container_module, tile.kernel_meta = "{\22name\22: \22convert_layout\22, \22num_threads\22: 32, \22shared_bytes\22: 1024,
// CHECK-LABEL: gpu.func @convert_layout
// CHECK-NEXT:    %[[SMEM:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK-NEXT:    %[[ADDR:.*]] = memref.extract_aligned_pointer_as_index %[[SMEM]]
// CHECK:         %[[BASE:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<3>
// CHECK-NOT:     gpu.barrier
// CHECK-COUNT-8: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK-NEXT:    gpu.barrier
// CHECK-NOT:     llvm.store
// CHECK-COUNT-2: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xf32>
// CHECK-NOT:     gpu.barrier
// CHECK:         llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
#ld = #tile.blocked<array<i64: 1, 4>, array<i64: 8, 4>, array<i64: 1, 1>, array<i64: 1, 0>>
#pm = #tile.blocked<array<i64: 4, 1>, array<i64: 4, 8>, array<i64: 1, 1>, array<i64: 0, 1>>
func.func @convert_layout(%x: !tile.array<f32, 2 : i64> {tile.aligned}, %y: !tile.array<f32, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %j = "tile.bid"() {axis = 1 : i64} : () -> i32
  %t = "tile.load"(%x, %i, %j) {padding = "zero", tile_shape = array<i64: 16, 16>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<16x16xf32, #ld>
  %p = "tile.permute"(%t) {permutation = array<i64: 1, 0>} : (tensor<16x16xf32, #ld>) -> tensor<16x16xf32, #pm>
  %c = "tile.convert_layout"(%p) : (tensor<16x16xf32, #pm>) -> tensor<16x16xf32, #ld>
  "tile.store"(%y, %c, %j, %i) : (!tile.array<f32, 2 : i64>, tensor<16x16xf32, #ld>, i32, i32) -> ()
  return
}

// -----

// A conversion between layouts that place every element on the same thread
// and register (equal as linear maps) moves nothing.

// CHECK-LABEL: module attributes {gpu.container_module, tile.kernel_meta = "{\22name\22: \22free_convert\22, \22num_threads\22: 32, \22shared_bytes\22: 0,
// CHECK-LABEL: gpu.func @free_convert
// CHECK-NOT:     gpu.dynamic_shared_memory
// CHECK-NOT:     memref
// CHECK-NOT:     gpu.barrier
// CHECK:         gpu.return
#a = #tile.blocked<array<i64: 1, 1>, array<i64: 1, 32>, array<i64: 1, 1>, array<i64: 1, 0>>
#b = #tile.blocked<array<i64: 1, 1>, array<i64: 1, 32>, array<i64: 1, 1>, array<i64: 0, 1>>
func.func @free_convert(%x: !tile.array<f32, 2 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%x, %c0, %c0) {padding = "zero", tile_shape = array<i64: 1, 32>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x32xf32, #a>
  %c = "tile.convert_layout"(%t) : (tensor<1x32xf32, #a>) -> tensor<1x32xf32, #b>
  "tile.store"(%x, %c, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<1x32xf32, #b>, i32, i32) -> ()
  return
}

// -----

// Control flow on tiles: a loop-carried tile becomes one iter_arg per register
// the thread holds (2 here), as do the results of an scf.if.

// CHECK-LABEL: gpu.func @control_flow
// CHECK-SAME:    (%{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: i32, %{{[^:]*}}: i64, %[[N:[^:]*]]: i32, %[[FLAG:[^:]*]]: i1)
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[ACC:.*]]:2 = scf.for %{{.*}} = %{{.*}} to %[[N]] step %{{.*}} iter_args(%[[S0:.*]] = %[[ZERO]], %[[S1:.*]] = %[[ZERO]]) -> (f32, f32) : i32 {
// CHECK:           %[[L0:.*]] = vector.extract %{{.*}}[0] : f32 from vector<1xf32>
// CHECK-NEXT:      %[[L1:.*]] = vector.extract %{{.*}}[0] : f32 from vector<1xf32>
// CHECK-NEXT:      %[[A0:.*]] = arith.addf %[[S0]], %[[L0]] : f32
// CHECK-NEXT:      %[[A1:.*]] = arith.addf %[[S1]], %[[L1]] : f32
// CHECK-NEXT:      scf.yield %[[A0]], %[[A1]] : f32, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[R:.*]]:2 = scf.if %[[FLAG]] -> (f32, f32) {
// CHECK-NEXT:      scf.yield %[[ACC]]#0, %[[ACC]]#1 : f32, f32
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[N0:.*]] = arith.negf %[[ACC]]#0 : f32
// CHECK-NEXT:      %[[N1:.*]] = arith.negf %[[ACC]]#1 : f32
// CHECK-NEXT:      scf.yield %[[N0]], %[[N1]] : f32, f32
// CHECK-NEXT:    }
// CHECK:         vector.from_elements %[[R]]#0 : vector<1xf32>
// CHECK:         vector.from_elements %[[R]]#1 : vector<1xf32>
#l = #tile.blocked<array<i64: 2>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @control_flow(%x: !tile.array<f32, 1 : i64>, %n: i32, %flag: i1) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64xf32, #l>
  %acc = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<64xf32, #l>) : i32 {
    %t = "tile.load"(%x, %k) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<64xf32, #l>
    %s2 = arith.addf %s, %t : tensor<64xf32, #l>
    scf.yield %s2 : tensor<64xf32, #l>
  }
  %r = scf.if %flag -> (tensor<64xf32, #l>) {
    scf.yield %acc : tensor<64xf32, #l>
  } else {
    %neg = arith.negf %acc : tensor<64xf32, #l>
    scf.yield %neg : tensor<64xf32, #l>
  }
  "tile.store"(%x, %r, %c0) : (!tile.array<f32, 1 : i64>, tensor<64xf32, #l>, i32) -> ()
  return
}

// -----

// Element-wise ops apply per register.  16-bit transcendentals run in f32
// (libdevice has none for bf16); exp uses the fast hardware approximation; f32
// division is div.full.f32.

// CHECK-LABEL: gpu.func @math
// CHECK:         %[[T0:.*]] = vector.extract %{{.*}}[0] : bf16 from vector<1xbf16>
// CHECK:         %[[W0:.*]] = arith.extf %[[T0]] : bf16 to f32
// CHECK-NEXT:    %[[E0:.*]] = math.exp %[[W0]] fastmath<afn> : f32
// CHECK-NEXT:    %[[N0:.*]] = arith.truncf %[[E0]] : f32 to bf16
// CHECK:         %[[F0:.*]] = arith.extf %[[N0]] : bf16 to f32
// CHECK:         %[[U0:.*]] = vector.extract %{{.*}}[0] : f32 from vector<1xf32>
// CHECK:         llvm.inline_asm "div.full.f32 $0, $1, $2;", "=f,f,f" %[[F0]], %[[U0]] : (f32, f32) -> f32
#l = #tile.blocked<array<i64: 2>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @math(%x: !tile.array<bf16, 1 : i64>, %y: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.cache_hints = false} {
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%x, %c0) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<bf16, 1 : i64>, i32) -> tensor<64xbf16, #l>
  %e = math.exp %t : tensor<64xbf16, #l>
  %f = arith.extf %e : tensor<64xbf16, #l> to tensor<64xf32, #l>
  %u = "tile.load"(%y, %c0) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<64xf32, #l>
  %q = arith.divf %f, %u : tensor<64xf32, #l>
  "tile.store"(%y, %q, %c0) : (!tile.array<f32, 1 : i64>, tensor<64xf32, #l>, i32) -> ()
  return
}

// -----

// A tile constant whose elements differ is a constant table in global memory
// (an llvm.mlir.global of the gpu.module, its elements' bits); each thread loads
// the elements its registers hold, at the row-major index of their coordinates.
// An element of a tile at run-time indices (tensor.extract) comes from the
// threads that hold it through a shared slot, between barriers.

// CHECK:       llvm.mlir.global internal constant @__tile_table_0(dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi32>) {addr_space = 1 : i32} : !llvm.array<8 x i32>
// CHECK-LABEL: gpu.func @table(
// CHECK:         %[[T:.*]] = llvm.mlir.addressof @__tile_table_0 : !llvm.ptr<1>
// CHECK:         %[[P:.*]] = llvm.getelementptr %[[T]][%{{.*}}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
// CHECK:         llvm.load %[[P]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// The extract: every register compares its coordinate with the index; the holder
// stores; a barrier; everyone loads the slot.
// CHECK:         scf.if
// CHECK:           memref.store
// CHECK:         gpu.barrier
// CHECK:         memref.load
#l8 = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @table(%x: !tile.array<i32, 1 : i64>, %n: i32) attributes {tile.kernel, tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : i32
  %t = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi32, #l8>
  %i = arith.index_cast %n : i32 to index
  %e = tensor.extract %t[%i] : tensor<8xi32, #l8>
  %s = tensor.splat %e : tensor<8xi32, #l8>
  %y = arith.addi %t, %s : tensor<8xi32, #l8>
  "tile.store"(%x, %y, %c0) : (!tile.array<i32, 1 : i64>, tensor<8xi32, #l8>, i32) -> ()
  return
}

// -----

// Sub-tiles go through a row-major scratch tile in shared memory: the source is
// stored at its elements' row-major offsets, a barrier, and each thread loads its
// result elements from there plus the run-time offset (row i times 16).  An
// insert stores the destination, a barrier, then the value over it (the later
// store wins), a barrier, the loads; a concat stores both halves with no barrier
// between (they do not overlap).

// CHECK-LABEL: gpu.func @slices(
// CHECK:         memref.store
// CHECK:         gpu.barrier
// CHECK:         arith.muli %{{.*}}, %{{.*}} : i32
// CHECK:         memref.load
// CHECK:         memref.store
// CHECK:         gpu.barrier
// CHECK:         memref.store
// CHECK:         gpu.barrier
// CHECK:         memref.load
// CHECK:         memref.store
// CHECK-NOT:     gpu.barrier
// CHECK:         memref.store
// CHECK:         gpu.barrier
// CHECK:         memref.load
#s2 = #tile.blocked<array<i64: 1, 1>, array<i64: 4, 8>, array<i64: 1, 1>, array<i64: 1, 0>>
#s1 = #tile.blocked<array<i64: 1, 1>, array<i64: 2, 16>, array<i64: 1, 1>, array<i64: 1, 0>>
func.func @slices(%x: !tile.array<f32, 2 : i64>, %i: i32) attributes {tile.kernel, tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %t = "tile.load"(%x, %c0, %c0) {padding = "zero", tile_shape = array<i64: 4, 32>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<4x32xf32, #s2>
  %o = arith.muli %i, %c2 : i32
  %e = "tile.extract_slice"(%t, %o, %c0) : (tensor<4x32xf32, #s2>, i32, i32) -> tensor<2x16xf32, #s1>
  %n = "tile.insert_slice"(%t, %e, %o, %c0) : (tensor<4x32xf32, #s2>, tensor<2x16xf32, #s1>, i32, i32) -> tensor<4x32xf32, #s2>
  %h = "tile.concat"(%e, %e) {axis = 0 : i64} : (tensor<2x16xf32, #s1>, tensor<2x16xf32, #s1>) -> tensor<4x16xf32, #s2>
  "tile.store"(%x, %n, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<4x32xf32, #s2>, i32, i32) -> ()
  "tile.store"(%x, %h, %c0, %c0) : (!tile.array<f32, 2 : i64>, tensor<4x16xf32, #s2>, i32, i32) -> ()
  return
}

// -----

// Element-indexed memory: each register's address is base + index * stride, it
// acts where its mask holds and its index is in [0, dim); a gather is a guarded
// load, an atomic one `atom` in PTX with the op's order and scope.  The 16
// elements sit in 16 of 32 lanes, replicated in the other half: only the lanes
// with bit 4 clear (the owners) do the atomic, and the old values reach the
// replicas through shared memory.

// CHECK-LABEL: gpu.func @indexed(
// CHECK:         arith.cmpi sge
// CHECK:         arith.cmpi slt
// CHECK:         scf.if
// CHECK:           llvm.load
// CHECK:         arith.andi %{{.*}}, %{{.*}} : i32
// CHECK:         scf.if
// CHECK:           llvm.inline_asm has_side_effects "atom.relaxed.cta.global.add.s32 $0, [$1], $2;"
// CHECK:         memref.store
// CHECK:         gpu.barrier
// CHECK:         memref.load
#h = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @indexed(%x: !tile.array<f32, 1 : i64>, %c: !tile.array<i32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : i32
  %i = "tile.iota"() : () -> tensor<16xi32, #h>
  %m = arith.constant dense<true> : tensor<16xi1, #h>
  %p = arith.constant dense<0.0> : tensor<16xf32, #h>
  %g = "tile.gather"(%x, %m, %p, %i) {check_bounds = 1 : i64} : (!tile.array<f32, 1 : i64>, tensor<16xi1, #h>, tensor<16xf32, #h>, tensor<16xi32, #h>) -> tensor<16xf32, #h>
  %o = "tile.atomic_rmw"(%c, %i, %m, %i) {check_bounds = 1 : i64, kind = "add", memory_order = "relaxed", memory_scope = "block"} : (!tile.array<i32, 1 : i64>, tensor<16xi32, #h>, tensor<16xi1, #h>, tensor<16xi32, #h>) -> tensor<16xi32, #h>
  "tile.store"(%x, %g, %c0) : (!tile.array<f32, 1 : i64>, tensor<16xf32, #h>, i32) -> ()
  "tile.store"(%c, %o, %c0) : (!tile.array<i32, 1 : i64>, tensor<16xi32, #h>, i32) -> ()
  return
}

// -----

// A tile atomic is the block's: with release ordering (here acq_rel) a barrier
// comes first, so the one thread's `atom` publishes what every thread stored
// before it; the broadcast of its old value ends with a barrier (the acquire side).

// CHECK-LABEL: gpu.func @ticket(
// CHECK:         llvm.store
// CHECK:         gpu.barrier
// CHECK:         scf.if
// CHECK:           llvm.inline_asm has_side_effects "atom.acq_rel.gpu.global.add.s32 $0, [$1], $2;"
// CHECK:         memref.store
// CHECK:         gpu.barrier
// CHECK:         memref.load
#t = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @ticket(%x: !tile.array<f32, 1 : i64>, %c: !tile.array<i32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : i32
  %v = arith.constant dense<1.0> : tensor<32xf32, #t>
  "tile.store"(%x, %v, %c0) : (!tile.array<f32, 1 : i64>, tensor<32xf32, #t>, i32) -> ()
  %i = arith.constant dense<0> : tensor<1xi32, #t>
  %m = arith.constant dense<true> : tensor<1xi1, #t>
  %one = arith.constant dense<1> : tensor<1xi32, #t>
  %o = "tile.atomic_rmw"(%c, %one, %m, %i) {check_bounds = 1 : i64, kind = "add", memory_order = "acq_rel", memory_scope = "device"} : (!tile.array<i32, 1 : i64>, tensor<1xi32, #t>, tensor<1xi1, #t>, tensor<1xi32, #t>) -> tensor<1xi32, #t>
  "tile.store"(%c, %o, %c0) : (!tile.array<i32, 1 : i64>, tensor<1xi32, #t>, i32) -> ()
  return
}

// -----

// A line printed by several tile.print ops (`more`) becomes one gpu.printf in
// thread 0, the tile's conversion repeated per element in brackets; the tile's
// elements reach thread 0 through shared memory.  A failed assert prints and traps.

// CHECK-LABEL: gpu.func @debug(
// CHECK:         memref.store
// CHECK:         gpu.barrier
// CHECK:         memref.load
// CHECK:         scf.if
// CHECK:           gpu.printf "x=%5.2f t=[%d, %d, %d, %d]\0A"
// CHECK:         scf.if
// CHECK:           gpu.printf "f.py:3: assertion failed (block [%d,%d,%d], thread %d)\0A"
// CHECK:           llvm.inline_asm has_side_effects "trap;"
#d = #tile.blocked<array<i64: 1>, array<i64: 32>, array<i64: 1>, array<i64: 0>>
func.func @debug(%x: f32) attributes {tile.kernel, tile.num_warps = 1 : i32} {
  %t = "tile.iota"() : () -> tensor<4xi32, #d>
  %z = arith.constant dense<9> : tensor<4xi32, #d>
  %c = arith.cmpi slt, %t, %z : tensor<4xi32, #d>
  "tile.print"(%x) {format = "x=%5.2f", more = 1 : i64} : (f32) -> ()
  "tile.print"(%t) {format = " t=%d", more = 1 : i64} : (tensor<4xi32, #d>) -> ()
  "tile.print"() {format = "\0A", more = 0 : i64} : () -> ()
  "tile.assert"(%c) {message = "f.py:3: assertion failed"} : (tensor<4xi1, #d>) -> ()
  return
}

// -----

// A list's element chosen at run time: every ABI value of the array (base, dims,
// strides) through a chain of selects, array 0 where no other index matches.

// CHECK-LABEL: gpu.func @select_array
// CHECK-SAME:    (%[[I:[^:]*]]: i32, %[[P0:[^:]*]]: !llvm.ptr<1> {llvm.align = 16 : i64}, %[[D0:[^:]*]]: i32, %[[S0:[^:]*]]: i64, %[[P1:[^:]*]]: !llvm.ptr<1>, %[[D1:[^:]*]]: i32, %[[S1:[^:]*]]: i64, %[[P2:[^:]*]]: !llvm.ptr<1> {llvm.align = 16 : i64}, %[[D2:[^:]*]]: i32, %[[S2:[^:]*]]: i64)
// CHECK:         %[[IS1:.*]] = arith.cmpi eq, %[[I]], %c1_i32
// CHECK-NEXT:    %[[P:.*]] = arith.select %[[IS1]], %[[P1]], %[[P0]] : !llvm.ptr<1>
// CHECK-NEXT:    %[[D:.*]] = arith.select %[[IS1]], %[[D1]], %[[D0]] : i32
// CHECK-NEXT:    %[[S:.*]] = arith.select %[[IS1]], %[[S1]], %[[S0]] : i64
// CHECK:         %[[IS2:.*]] = arith.cmpi eq, %[[I]], %c2_i32
// CHECK-NEXT:    arith.select %[[IS2]], %[[P2]], %[[P]] : !llvm.ptr<1>
// CHECK-NEXT:    arith.select %[[IS2]], %[[D2]], %[[D]] : i32
// CHECK-NEXT:    %[[STRIDE:.*]] = arith.select %[[IS2]], %[[S2]], %[[S]] : i64
// CHECK-NEXT:    arith.trunci %[[STRIDE]] : i64 to i32
func.func @select_array(%i: i32, %a: !tile.array<f32, 1 : i64> {tile.aligned}, %b: !tile.array<f32, 1 : i64>, %c: !tile.array<f32, 1 : i64> {tile.aligned}) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.arg_names = ["i", "xs[0]", "xs[1]", "xs[2]"]} {
  %s = "tile.select_array"(%i, %a, %b, %c) : (i32, !tile.array<f32, 1 : i64>, !tile.array<f32, 1 : i64>, !tile.array<f32, 1 : i64>) -> !tile.array<f32, 1 : i64>
  %d = "tile.dim"(%s) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  %st = "tile.stride"(%s) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  return
}

// -----

// An element of a list passed as a table: its row's words (address, dims, strides)
// loaded at row * stride0 + word * stride1 when the row is inside the table (and
// its rows hold 1 + 2 * rank words), zeros (an empty array: loads read padding,
// stores write nothing) when not.

// CHECK-LABEL: gpu.func @list_get
// CHECK-SAME:    (%[[P:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32, %[[W:[^:]*]]: i32, %[[S0:[^:]*]]: i64, %[[S1:[^:]*]]: i64, %[[I:[^:]*]]: i32)
// CHECK:         %[[I64:.*]] = arith.extsi %[[I]] : i32 to i64
// CHECK:         %[[N64:.*]] = arith.extui %[[N]] : i32 to i64
// CHECK:         %[[ROWS:.*]] = arith.cmpi ult, %[[I64]], %[[N64]] : i64
// CHECK:         %[[WIDE:.*]] = arith.cmpi sge, %[[W]], %c3_i32 : i32
// CHECK:         %[[IN:.*]] = arith.andi %[[ROWS]], %[[WIDE]] : i1
// CHECK:         %[[WORDS:.*]]:3 = scf.if %[[IN]] -> (i64, i64, i64) {
// CHECK:           %[[ROW:.*]] = arith.muli %[[I64]], %[[S0]] : i64
// CHECK-COUNT-3:   llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:         } else {
// CHECK:           scf.yield %c0_i64, %c0_i64, %c0_i64 : i64, i64, i64
// CHECK:         llvm.inttoptr %[[WORDS]]#0 : i64 to !llvm.ptr<1>
// CHECK:         arith.trunci %[[WORDS]]#1 : i64 to i32
func.func @list_get(%t: !tile.array<i64, 2 : i64>, %i: i32) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.arg_names = ["xs", "i"]} {
  %a = "tile.list_get"(%t, %i) {aligned = false} : (!tile.array<i64, 2 : i64>, i32) -> !tile.array<f32, 1 : i64>
  %d = "tile.dim"(%a) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  %st = "tile.stride"(%a) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  return
}

// -----

// An array's address is a GEP to the indexed element (index * stride, in i64) and a
// ptrtoint; an array made of an address is an inttoptr with the dims truncated to
// the ABI's i32; raw memory is one unchecked dim and a unit stride.

// CHECK-LABEL: gpu.func @addresses
// CHECK-SAME:    (%[[P:[^:]*]]: !llvm.ptr<1>, %[[D0:[^:]*]]: i32, %[[D1:[^:]*]]: i32, %[[S0:[^:]*]]: i64, %[[S1:[^:]*]]: i64, %[[I:[^:]*]]: i32, %[[N:[^:]*]]: i64)
// CHECK:         %[[I64:.*]] = arith.extsi %[[I]] : i32 to i64
// CHECK:         %[[OFF:.*]] = arith.muli %[[I64]], %[[S0]] : i64
// CHECK:         %[[AT:.*]] = llvm.getelementptr %[[P]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK:         %[[ADDR:.*]] = llvm.ptrtoint %[[AT]] : !llvm.ptr<1> to i64
// CHECK:         llvm.inttoptr %[[ADDR]] : i64 to !llvm.ptr<1>
// CHECK:         arith.trunci %[[N]] : i64 to i32
// CHECK:         llvm.inttoptr %[[ADDR]] : i64 to !llvm.ptr<1>
func.func @addresses(%a: !tile.array<f32, 2 : i64>, %i: i32, %n: i64) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.arg_names = ["a", "i", "n"]} {
  %p = "tile.array_address"(%a, %i, %i) : (!tile.array<f32, 2 : i64>, i32, i32) -> i64
  %v = "tile.make_array"(%p, %n, %n) : (i64, i64, i64) -> !tile.array<f32, 1 : i64>
  %d = "tile.dim"(%v) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  %m = "tile.raw_memory"(%p) : (i64) -> !tile.array<f32, 1 : i64>
  %e = "tile.dim"(%m) {axis = 0 : i64} : (!tile.array<f32, 1 : i64>) -> i32
  return
}
