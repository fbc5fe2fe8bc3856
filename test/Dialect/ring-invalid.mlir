// RUN: tile-opt %s -split-input-file -verify-diagnostics

// A ring buffer that is not a shared-memory tile: reported on the allocation and on
// each load into it, not a crash (found by fuzz_mlir.py --seed 20261210).
#s = #tile.shared<128 : i64, array<i64: 1, 0>>
func.func @not_a_tile(%a: !tile.array<f32, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %true = arith.constant true
  // expected-error @+1 {{'tile.ring_alloc' op ring tiles live in shared memory (#tile.shared); got !tile.array<f32, 2 : i64>}}
  %r = "tile.ring_alloc"() {stages = 2 : i64, tiles = [!tile.array<f32, 2 : i64>, tensor<8x32xf32, #s>]} : () -> !tile.ring
  // expected-error @+1 {{'tile.ring_load' op buffer 0 of the ring is not a tile: !tile.array<f32, 2 : i64>}}
  "tile.ring_load"(%r, %c0, %true, %a, %c0, %c0) {buffer = 0 : i64} : (!tile.ring, i32, i1, !tile.array<f32, 2 : i64>, i32, i32) -> ()
  return
}

// -----

// An L2 prefetch mirrors a ring load: a shared-memory tile of the array's rank and
// element type.
func.func @prefetch_not_shared(%a: !tile.array<bf16, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %true = arith.constant true
  // expected-error @+1 {{'tile.prefetch_l2' op the tile's boxes are those of a shared-memory tile (#tile.shared); got tensor<64x64xbf16>}}
  "tile.prefetch_l2"(%true, %a, %c0, %c0) {tile = tensor<64x64xbf16>} : (i1, !tile.array<bf16, 2 : i64>, i32, i32) -> ()
  return
}

// -----

#s = #tile.shared<128 : i64, array<i64: 1, 0>>
func.func @prefetch_rank(%a: !tile.array<bf16, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %true = arith.constant true
  // expected-error @+1 {{'tile.prefetch_l2' op a rank-2 array takes 2 indices and a rank-2 tile; got 1 and tensor<64x64xbf16, #tile.shared<128 : i64, array<i64: 1, 0>>>}}
  "tile.prefetch_l2"(%true, %a, %c0) {tile = tensor<64x64xbf16, #s>} : (i1, !tile.array<bf16, 2 : i64>, i32) -> ()
  return
}

// -----

#s = #tile.shared<128 : i64, array<i64: 1, 0>>
func.func @prefetch_dtype(%a: !tile.array<f16, 2 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %true = arith.constant true
  // expected-error @+1 {{'tile.prefetch_l2' op the tile holds bf16, the array f16}}
  "tile.prefetch_l2"(%true, %a, %c0, %c0) {tile = tensor<64x64xbf16, #s>} : (i1, !tile.array<f16, 2 : i64>, i32, i32) -> ()
  return
}
