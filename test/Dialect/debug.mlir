// RUN: tile-opt %s | tile-opt | FileCheck %s

// CHECK-LABEL: func.func @debug
// CHECK:         "tile.print"(%{{.*}}) {format = "x=%5.2f", more = 1 : i64} : (f32) -> ()
// CHECK-NEXT:    "tile.print"(%{{.*}}) {format = " t=%d", more = 1 : i64} : (tensor<4xi32>) -> ()
// CHECK-NEXT:    "tile.print"() {format = "\0A", more = 0 : i64} : () -> ()
// CHECK-NEXT:    "tile.assert"(%{{.*}}) {message = "f.py:3: assertion failed"} : (tensor<4xi1>) -> ()
func.func @debug(%x: f32, %t: tensor<4xi32>, %c: tensor<4xi1>) attributes {tile.function} {
  "tile.print"(%x) {format = "x=%5.2f", more = 1 : i64} : (f32) -> ()
  "tile.print"(%t) {format = " t=%d", more = 1 : i64} : (tensor<4xi32>) -> ()
  "tile.print"() {format = "\0A", more = 0 : i64} : () -> ()
  "tile.assert"(%c) {message = "f.py:3: assertion failed"} : (tensor<4xi1>) -> ()
  return
}

// CHECK-LABEL: func.func @dependency
// CHECK:         "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:    "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
func.func @dependency() attributes {tile.function} {
  "tile.grid_dependency"() {kind = "wait"} : () -> ()
  "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
  return
}
