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
