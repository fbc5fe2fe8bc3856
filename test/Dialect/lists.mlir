// RUN: tile-opt %s | tile-opt | FileCheck %s

// A list of arrays is one !tile.array argument per element; a run-time index
// selects one of them (a list of one is allowed: the frontend never makes it).

// CHECK-LABEL: func.func @select
// CHECK-SAME:    (%[[I:[^:]*]]: i32, %[[A:[^:]*]]: !tile.array<f32, 2 : i64>, %[[B:[^:]*]]: !tile.array<f32, 2 : i64>, %[[C:[^:]*]]: !tile.array<f32, 2 : i64>)
// CHECK:         %[[S:.*]] = "tile.select_array"(%[[I]], %[[A]], %[[B]], %[[C]]) : (i32, !tile.array<f32, 2 : i64>, !tile.array<f32, 2 : i64>, !tile.array<f32, 2 : i64>) -> !tile.array<f32, 2 : i64>
// CHECK:         "tile.dim"(%[[S]]) {axis = 1 : i64}
// CHECK:         "tile.select_array"(%[[I]], %[[A]]) : (i32, !tile.array<f32, 2 : i64>) -> !tile.array<f32, 2 : i64>
func.func @select(%i: i32, %a: !tile.array<f32, 2 : i64>, %b: !tile.array<f32, 2 : i64>, %c: !tile.array<f32, 2 : i64>) attributes {tile.kernel} {
  %s = "tile.select_array"(%i, %a, %b, %c) : (i32, !tile.array<f32, 2 : i64>, !tile.array<f32, 2 : i64>, !tile.array<f32, 2 : i64>) -> !tile.array<f32, 2 : i64>
  %d = "tile.dim"(%s) {axis = 1 : i64} : (!tile.array<f32, 2 : i64>) -> i32
  %one = "tile.select_array"(%i, %a) : (i32, !tile.array<f32, 2 : i64>) -> !tile.array<f32, 2 : i64>
  return
}

// CHECK-LABEL: func.func @unsigned
// CHECK:         "tile.select_array"(%{{.*}}, %{{.*}}, %{{.*}}) : (i32, !tile.array<ui8, 1 : i64>, !tile.array<ui8, 1 : i64>) -> !tile.array<ui8, 1 : i64>
func.func @unsigned(%i: i32, %a: !tile.array<ui8, 1 : i64>, %b: !tile.array<ui8, 1 : i64>) attributes {tile.function} {
  %s = "tile.select_array"(%i, %a, %b) : (i32, !tile.array<ui8, 1 : i64>, !tile.array<ui8, 1 : i64>) -> !tile.array<ui8, 1 : i64>
  return
}

// A list whose length is known at launch only is one argument, its table: an i64
// array of one row (address, dims, strides) per element.  `aligned` promises of
// every element what the tile.aligned argument attribute promises of an array.

// CHECK-LABEL: func.func @table
// CHECK-SAME:    (%[[T:[^:]*]]: !tile.array<i64, 2 : i64>, %[[I:[^:]*]]: i32)
// CHECK:         %[[N:.*]] = "tile.dim"(%[[T]]) {axis = 0 : i64}
// CHECK:         %[[A:.*]] = "tile.list_get"(%[[T]], %[[I]]) {aligned = false} : (!tile.array<i64, 2 : i64>, i32) -> !tile.array<bf16, 2 : i64>
// CHECK:         "tile.dim"(%[[A]]) {axis = 1 : i64}
// CHECK:         "tile.list_get"(%[[T]], %[[N]]) {aligned = true} : (!tile.array<i64, 2 : i64>, i32) -> !tile.array<f32, 1 : i64>
func.func @table(%t: !tile.array<i64, 2 : i64>, %i: i32) attributes {tile.kernel} {
  %n = "tile.dim"(%t) {axis = 0 : i64} : (!tile.array<i64, 2 : i64>) -> i32
  %a = "tile.list_get"(%t, %i) {aligned = false} : (!tile.array<i64, 2 : i64>, i32) -> !tile.array<bf16, 2 : i64>
  %d = "tile.dim"(%a) {axis = 1 : i64} : (!tile.array<bf16, 2 : i64>) -> i32
  %b = "tile.list_get"(%t, %n) {aligned = true} : (!tile.array<i64, 2 : i64>, i32) -> !tile.array<f32, 1 : i64>
  return
}
