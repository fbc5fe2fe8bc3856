// RUN: tile-opt %s -split-input-file --tile-programmatic-launch | FileCheck %s

!V = !tile.array<f32, 1 : i64>

// An sm_90a kernel (the default target) opens with the wait for the previous kernel
// and then the release of the next one, before anything else: its first access to
// memory comes after the wait, and it releases the next kernel only once it runs.
// CHECK-LABEL: func.func @copy
// CHECK-SAME:    tile.overlapped
// CHECK-NEXT:    "tile.grid_dependency"() {kind = "wait"} : () -> ()
// CHECK-NEXT:    "tile.grid_dependency"() {kind = "launch_dependents"} : () -> ()
// CHECK-NEXT:    "tile.bid"()
// CHECK:         "tile.load"
// CHECK-NOT:     "tile.grid_dependency"
// CHECK:         return
func.func @copy(%x: !V, %y: !V) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 64>} : (!V, i32) -> tensor<64xf32>
  "tile.store"(%y, %t, %b) : (!V, tensor<64xf32>, i32) -> ()
  return
}

// A tile function (not a kernel) is left alone: it runs inside a kernel's wait.
// CHECK-LABEL: func.func @helper
// CHECK-NOT:     "tile.grid_dependency"
// CHECK:         return
func.func @helper(%x: !V) attributes {tile.function} {
  return
}

// -----

!V = !tile.array<f32, 1 : i64>

// A kernel that places the waits itself keeps the author's placement; one whose
// option turned it off is launched as written.
// CHECK-LABEL: func.func @placed
// CHECK-NOT:     tile.overlapped
// CHECK-NEXT:    "tile.bid"()
// CHECK-NEXT:    "tile.grid_dependency"() {kind = "wait"}
// CHECK-NOT:     "tile.grid_dependency"() {kind = "wait"}
// CHECK:         return
func.func @placed(%x: !V, %y: !V) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  "tile.grid_dependency"() {kind = "wait"} : () -> ()
  %t = "tile.load"(%x, %b) {padding = "zero", tile_shape = array<i64: 64>} : (!V, i32) -> tensor<64xf32>
  "tile.store"(%y, %t, %b) : (!V, tensor<64xf32>, i32) -> ()
  return
}

// CHECK-LABEL: func.func @off
// CHECK-NOT:     "tile.grid_dependency"
// CHECK:         return
func.func @off(%x: !V) attributes {tile.kernel, tile.programmatic_launch = false} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  return
}

// -----

!V = !tile.array<f32, 1 : i64>

// sm_80 has no programmatic launch: nothing changes.
// CHECK-LABEL: func.func @ampere
// CHECK-NOT:     "tile.grid_dependency"
// CHECK:         return
module attributes {tile.target = "sm_80"} {
  func.func @ampere(%x: !V) attributes {tile.kernel} {
    %b = "tile.bid"() {axis = 0 : i64} : () -> i32
    return
  }
}
