// RUN: tile-opt %s --stop-after=tile | FileCheck %s
// RUN: tile-opt %s --stop-after=tile | tile-opt --stop-after=tile | FileCheck %s

// The module records its stage, so a driver resumes from there: an input
// already at the tile stage has nothing left to do up to 'tile' (the call stays,
// since tile-inline does not run again), and re-running is a no-op.

// CHECK:       module attributes {tile.stage = "tile"}
// CHECK-LABEL: func.func @already_tile
// CHECK-NEXT:    call @helper() : () -> ()
module attributes {tile.stage = "tile"} {
  func.func private @helper() attributes {tile.function} {
    return
  }
  func.func @already_tile() attributes {tile.kernel} {
    func.call @helper() : () -> ()
    return
  }
}
