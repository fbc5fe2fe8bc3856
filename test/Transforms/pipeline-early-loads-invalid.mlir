// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-pipeline-loops
// RUN: tile-opt %s -split-input-file -verify-diagnostics --target=sm_80 --tile-pipeline-loops

// `early_loads` names arrays no kernel before this one in the stream writes; one the
// kernel itself writes is refused at the write (on every target), and a name that
// is no argument at the kernel.

#sa = #tile.shared<128 : i64, array<i64: 1, 0>>
func.func @writes(%a: !tile.array<bf16, 2 : i64> {tile.aligned}, %c: !tile.array<bf16, 2 : i64> {tile.aligned}) attributes {tile.kernel, tile.arg_names = ["a", "c"], tile.early_loads = ["a", "c"], tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %n = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %t = "tile.load"(%a, %c0, %k) {padding = "zero", tile_shape = array<i64: 64, 64>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<64x64xbf16, #sa>
    // expected-error @+1 {{kernel 'writes': option early_loads names 'c', which this kernel writes here (tile.store); early_loads lists arrays that no kernel before this one in the stream writes (a model's weights), and a kernel that writes 'c' is such a kernel for its own next launch: drop 'c' from early_loads}}
    "tile.store"(%c, %t, %c0, %k) : (!tile.array<bf16, 2 : i64>, tensor<64x64xbf16, #sa>, i32, i32) -> ()
  }
  return
}

// -----

// expected-error @+1 {{kernel 'unknown': option early_loads names 'w', which is not one of its arguments (a, c)}}
func.func @unknown(%a: !tile.array<f32, 1 : i64>, %c: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.arg_names = ["a", "c"], tile.early_loads = ["w"]} {
  return
}
