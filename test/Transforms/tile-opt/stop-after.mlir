// RUN: tile-opt %s --stop-after=tile | FileCheck %s --check-prefix=TILE
// RUN: tile-opt %s --stop-after=frontend | FileCheck %s --check-prefix=FRONTEND
// RUN: tile-opt %s --run-stage=tile | FileCheck %s --check-prefix=TILE
// RUN: not tile-opt %s --stop-after=bogus 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tile-opt %s --stop-after=tile --tile-cse 2>&1 | FileCheck %s --check-prefix=BOTH

// The tile stage inlines, folds, hoists, merges and sweeps, and records the
// stage on the module; --stop-after=frontend runs nothing.

func.func private @twice(%t: tensor<16xf32>) -> tensor<16xf32> attributes {tile.function} {
  %r = arith.addf %t, %t : tensor<16xf32>
  return %r : tensor<16xf32>
}

// TILE:          module attributes {tile.stage = "tile"}
// TILE-NOT:      @twice
// TILE-LABEL:    func.func @kernel
// TILE-SAME:       (%[[A:.*]]: !tile.array<f32, 1 : i64>)
// TILE:            %[[B:.*]] = "tile.bid"() {axis = 0 : i64}
// TILE-NEXT:       %[[T:.*]] = "tile.load"(%[[A]], %[[B]])
// TILE-NEXT:       %[[R:.*]] = arith.addf %[[T]], %[[T]]
// TILE-NEXT:       "tile.store"(%[[A]], %[[R]], %[[B]])
// TILE-NEXT:       return

// FRONTEND-NOT:   tile.stage
// FRONTEND:       func.func private @twice
// FRONTEND-LABEL: func.func @kernel
// FRONTEND:         "tile.reshape"
// FRONTEND:         call @twice

// UNKNOWN: tile-opt: error: argument --stop-after: invalid choice: 'bogus' (choose from 'frontend', 'tile'
// BOTH: tile-opt: error: give either passes or a stage (--stop-after/--run-stage), not both

func.func @kernel(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %b2 = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%a, %b) {tile_shape = array<i64: 16>, padding = "zero"} : (!tile.array<f32, 1 : i64>, i32) -> tensor<16xf32>
  %same = "tile.reshape"(%t) : (tensor<16xf32>) -> tensor<16xf32>
  %dead = "tile.reshape"(%t) : (tensor<16xf32>) -> tensor<4x4xf32>
  %r = func.call @twice(%same) : (tensor<16xf32>) -> tensor<16xf32>
  "tile.store"(%a, %r, %b2) : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
  return
}
