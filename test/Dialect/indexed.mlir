// RUN: tile-opt %s | tile-opt | FileCheck %s

// CHECK-LABEL: func.func @indexed
// CHECK:         "tile.gather"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {check_bounds = 1 : i64} : (!tile.array<f32, 1 : i64>, tensor<16xi1>, tensor<16xf32>, tensor<16xi32>) -> tensor<16xf32>
// CHECK:         "tile.scatter"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {check_bounds = 0 : i64}
// CHECK:         "tile.atomic_rmw"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {check_bounds = 1 : i64, kind = "add", memory_order = "acq_rel", memory_scope = "device"}
// CHECK:         "tile.atomic_cas"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {check_bounds = 1 : i64, memory_order = "relaxed", memory_scope = "block"}
func.func @indexed(%x: !tile.array<f32, 1 : i64>, %c: !tile.array<i32, 1 : i64>, %i: tensor<16xi32>, %m: tensor<16xi1>, %p: tensor<16xf32>, %u: tensor<16xi32>) attributes {tile.function} {
  %0 = "tile.gather"(%x, %m, %p, %i) {check_bounds = 1 : i64} : (!tile.array<f32, 1 : i64>, tensor<16xi1>, tensor<16xf32>, tensor<16xi32>) -> tensor<16xf32>
  "tile.scatter"(%x, %p, %m, %i) {check_bounds = 0 : i64} : (!tile.array<f32, 1 : i64>, tensor<16xf32>, tensor<16xi1>, tensor<16xi32>) -> ()
  %1 = "tile.atomic_rmw"(%c, %u, %m, %i) {check_bounds = 1 : i64, kind = "add", memory_order = "acq_rel", memory_scope = "device"} : (!tile.array<i32, 1 : i64>, tensor<16xi32>, tensor<16xi1>, tensor<16xi32>) -> tensor<16xi32>
  %2 = "tile.atomic_cas"(%c, %u, %u, %m, %i) {check_bounds = 1 : i64, memory_order = "relaxed", memory_scope = "block"} : (!tile.array<i32, 1 : i64>, tensor<16xi32>, tensor<16xi32>, tensor<16xi1>, tensor<16xi32>) -> tensor<16xi32>
  return
}
