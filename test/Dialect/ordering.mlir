// RUN: tile-opt %s | tile-opt | FileCheck %s

// CHECK-LABEL: func.func @ordered
// CHECK:         "tile.load"(%{{.*}}, %{{.*}}) {padding = "zero", tile.memory_scope = "device", tile_shape = array<i64: 1>}
// CHECK-NEXT:    "tile.fence"() {kind = "acquire", scope = "device"} : () -> ()
// CHECK-NEXT:    "tile.fence"() {kind = "release", scope = "sys"} : () -> ()
// CHECK-NEXT:    "tile.store"(%{{.*}}, %{{.*}}, %{{.*}}) {tile.memory_scope = "block"}
func.func @ordered(%f: !tile.array<i32, 1 : i64>, %i: i32) attributes {tile.function} {
  %t = "tile.load"(%f, %i) {padding = "zero", tile_shape = array<i64: 1>, tile.memory_scope = "device"} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32>
  "tile.fence"() {kind = "acquire", scope = "device"} : () -> ()
  "tile.fence"() {kind = "release", scope = "sys"} : () -> ()
  "tile.store"(%f, %t, %i) {tile.memory_scope = "block"} : (!tile.array<i32, 1 : i64>, tensor<1xi32>, i32) -> ()
  return
}
