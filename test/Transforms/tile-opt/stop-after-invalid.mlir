// RUN: not tile-opt %s -split-input-file --stop-after=frontend 2>&1 | FileCheck %s

// ...but stopping before the input's own stage is an error.

// CHECK: stop-after-invalid.mlir:[[@LINE+1]]:1: error: the input is already at stage 'tile', past 'frontend'
module attributes {tile.stage = "tile"} {
}

// -----

// CHECK: stop-after-invalid.mlir:[[@LINE+1]]:1: error: module attribute tile.stage = "bytecode" names no stage; stages: frontend, tile
module attributes {tile.stage = "bytecode"} {
}
