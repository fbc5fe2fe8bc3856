// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @fence_kind() {
  // expected-error @+1 {{'tile.fence' op kind 'seq_cst' is not one of acquire, release}}
  "tile.fence"() {kind = "seq_cst", scope = "device"} : () -> ()
  return
}

// -----

func.func @fence_scope() {
  // expected-error @+1 {{'tile.fence' op scope 'grid' is not one of block, device, sys}}
  "tile.fence"() {kind = "acquire", scope = "grid"} : () -> ()
  return
}

// -----

func.func @load_scope(%f: !tile.array<i32, 1 : i64>, %i: i32) {
  // expected-error @+1 {{'tile.load' op tile.memory_scope must be one of block, device, sys, got "gpu"}}
  %t = "tile.load"(%f, %i) {padding = "zero", tile_shape = array<i64: 1>, tile.memory_scope = "gpu"} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32>
  return
}
