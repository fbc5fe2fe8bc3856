// RUN: tile-opt %s | tile-opt | FileCheck %s

// !tile.array<T, R : i64>: a view of global memory with R dynamic dims and
// strides.  Element types may be signed/unsigned; i1 is one byte per element.

// CHECK-LABEL: func.func @shapes
// CHECK-SAME:    (%[[A:.*]]: !tile.array<f32, 2 : i64>, %[[U:.*]]: !tile.array<ui8, 1 : i64>, %[[S:.*]]: !tile.array<si32, 3 : i64>, %[[B:.*]]: !tile.array<i1, 1 : i64>, %[[Z:.*]]: !tile.array<f16, 0 : i64>)
// CHECK:         "tile.dim"(%[[A]]) {axis = 0 : i64} : (!tile.array<f32, 2 : i64>) -> i32
// CHECK-NEXT:    "tile.dim"(%[[A]]) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
// CHECK-NEXT:    "tile.stride"(%[[A]]) {axis = 0 : i64} : (!tile.array<f32, 2 : i64>) -> i32
// CHECK-NEXT:    "tile.stride"(%[[A]]) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
// CHECK-NEXT:    "tile.dim"(%[[U]]) {axis = 0 : i64} : (!tile.array<ui8, 1 : i64>) -> i32
// CHECK-NEXT:    "tile.stride"(%[[S]]) {axis = 2 : i64} : (!tile.array<si32, 3 : i64>) -> i32
// CHECK-NEXT:    "tile.dim"(%[[B]]) {axis = 0 : i64} : (!tile.array<i1, 1 : i64>) -> i32
func.func @shapes(%a: !tile.array<f32, 2 : i64>, %u: !tile.array<ui8, 1 : i64>,
                  %s: !tile.array<si32, 3 : i64>, %b: !tile.array<i1, 1 : i64>,
                  %z: !tile.array<f16, 0 : i64>) attributes {tile.kernel} {
  %d0 = "tile.dim"(%a) {axis = 0 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %d1 = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %s0 = "tile.stride"(%a) {axis = 0 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %s1 = "tile.stride"(%a) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %du = "tile.dim"(%u) {axis = 0 : i64} : (!tile.array<ui8, 1 : i64>) -> i32
  %ss = "tile.stride"(%s) {axis = 2 : i64} : (!tile.array<si32, 3 : i64>) -> i32
  %db = "tile.dim"(%b) {axis = 0 : i64} : (!tile.array<i1, 1 : i64>) -> i32
  return
}

// Kernels take arrays and scalars; tile.arg_names records the Python names.

// CHECK-LABEL: func.func @scalars
// CHECK-SAME:    (%{{.*}}: !tile.array<bf16, 2 : i64>, %{{.*}}: i32, %{{.*}}: f32, %{{.*}}: i1)
// CHECK-SAME:    attributes {tile.arg_names = ["x", "n", "alpha", "flag"], tile.kernel}
func.func @scalars(%x: !tile.array<bf16, 2 : i64>, %n: i32, %alpha: f32, %flag: i1)
    attributes {tile.kernel, tile.arg_names = ["x", "n", "alpha", "flag"]} {
  return
}

// Helpers may take and return arrays.

// CHECK-LABEL: func.func private @pass_through
// CHECK-SAME:    (%[[X:.*]]: !tile.array<f64, 1 : i64>) -> !tile.array<f64, 1 : i64>
// CHECK:         return %[[X]] : !tile.array<f64, 1 : i64>
func.func private @pass_through(%x: !tile.array<f64, 1 : i64>) -> !tile.array<f64, 1 : i64>
    attributes {tile.function} {
  return %x : !tile.array<f64, 1 : i64>
}
