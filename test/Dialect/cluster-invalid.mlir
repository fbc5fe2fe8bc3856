// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @axis(%m: tensor<1xf32>) {
  // expected-error @+1 {{'tile.cluster_gather' op axis must be a grid axis (0, 1 or 2), got 3}}
  %g = "tile.cluster_gather"(%m) {axis = 3 : i64, size = 8 : i64} : (tensor<1xf32>) -> tensor<8x1xf32>
  return
}

// -----

func.func @size(%m: tensor<1xf32>) {
  // expected-error @+1 {{'tile.cluster_gather' op size must be a power of two in 2..16, got 6}}
  %g = "tile.cluster_gather"(%m) {axis = 2 : i64, size = 6 : i64} : (tensor<1xf32>) -> tensor<6x1xf32>
  return
}

// -----

func.func @too_big(%m: tensor<1xf32>) {
  // expected-error @+1 {{'tile.cluster_gather' op size must be a power of two in 2..16, got 32}}
  %g = "tile.cluster_gather"(%m) {axis = 2 : i64, size = 32 : i64} : (tensor<1xf32>) -> tensor<32x1xf32>
  return
}

// -----

func.func @stacked(%m: tensor<1xf32>) {
  // expected-error @+1 {{'tile.cluster_gather' op result 0 must be tensor<4x1xf32> (the operand stacked 4 times), got tensor<8x1xf32>}}
  %g = "tile.cluster_gather"(%m) {axis = 2 : i64, size = 4 : i64} : (tensor<1xf32>) -> tensor<8x1xf32>
  return
}

// -----

func.func @element_type(%m: tensor<1xf32>) {
  // expected-error @+1 {{'tile.cluster_gather' op result 0 must be tensor<4x1xf32> (the operand stacked 4 times), got tensor<4x1xf16>}}
  %g = "tile.cluster_gather"(%m) {axis = 2 : i64, size = 4 : i64} : (tensor<1xf32>) -> tensor<4x1xf16>
  return
}

// -----

func.func @bits(%m: tensor<4xi1>) {
  // expected-error @+1 {{'tile.cluster_gather' op operand 0: elements of 16, 32 or 64 bits travel between blocks, got i1}}
  %g = "tile.cluster_gather"(%m) {axis = 2 : i64, size = 4 : i64} : (tensor<4xi1>) -> tensor<4x4xi1>
  return
}

// -----

func.func @counts(%m: tensor<1xf32>) {
  // expected-error @+1 {{'tile.cluster_gather' op one result per operand, and at least one: got 1 operands and 2 results}}
  %g:2 = "tile.cluster_gather"(%m) {axis = 2 : i64, size = 4 : i64} : (tensor<1xf32>) -> (tensor<4x1xf32>, tensor<4x1xf32>)
  return
}
