// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @gather_index_count(%x: !tile.array<f32, 2 : i64>, %i: tensor<16xi32>, %m: tensor<16xi1>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'tile.gather' op expected 2 index tiles (one per array dim), got 1}}
  %0 = "tile.gather"(%x, %m, %p, %i) {check_bounds = 1 : i64} : (!tile.array<f32, 2 : i64>, tensor<16xi1>, tensor<16xf32>, tensor<16xi32>) -> tensor<16xf32>
  return
}

// -----

func.func @gather_shapes(%x: !tile.array<f32, 1 : i64>, %i: tensor<16xi32>, %m: tensor<8xi1>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'tile.gather' op mask has shape [8], the indices [16]}}
  %0 = "tile.gather"(%x, %m, %p, %i) {check_bounds = 1 : i64} : (!tile.array<f32, 1 : i64>, tensor<8xi1>, tensor<16xf32>, tensor<16xi32>) -> tensor<16xf32>
  return
}

// -----

func.func @atomic_kind(%c: !tile.array<f32, 1 : i64>, %i: tensor<16xi32>, %m: tensor<16xi1>, %u: tensor<16xf32>) {
  // expected-error @+1 {{'tile.atomic_rmw' op atomic and needs an integer array, got f32}}
  %0 = "tile.atomic_rmw"(%c, %u, %m, %i) {check_bounds = 1 : i64, kind = "and", memory_order = "acq_rel", memory_scope = "device"} : (!tile.array<f32, 1 : i64>, tensor<16xf32>, tensor<16xi1>, tensor<16xi32>) -> tensor<16xf32>
  return
}

// -----

func.func @atomic_order(%c: !tile.array<i32, 1 : i64>, %i: tensor<16xi32>, %m: tensor<16xi1>, %u: tensor<16xi32>) {
  // expected-error @+1 {{'tile.atomic_rmw' op memory_order 'weak' is not one of relaxed, acquire, release, acq_rel}}
  %0 = "tile.atomic_rmw"(%c, %u, %m, %i) {check_bounds = 1 : i64, kind = "add", memory_order = "weak", memory_scope = "device"} : (!tile.array<i32, 1 : i64>, tensor<16xi32>, tensor<16xi1>, tensor<16xi32>) -> tensor<16xi32>
  return
}
