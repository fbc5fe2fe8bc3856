// RUN: tile-opt %s | tile-opt | FileCheck %s

// Stream-K partial sums (dialect/stream_k.py) round-trip in generic form.
// CHECK-LABEL: func.func @partials
// CHECK:         "tile.partial_store"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64x64xf32>, i32, i1) -> ()
// CHECK:         "tile.partial_add"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64x64xf32>, i32, i1) -> tensor<64x64xf32>
func.func @partials(%acc: tensor<64x64xf32>, %slot: i32, %p: i1) -> tensor<64x64xf32> {
  "tile.partial_store"(%acc, %slot, %p) : (tensor<64x64xf32>, i32, i1) -> ()
  %s = "tile.partial_add"(%acc, %slot, %p) : (tensor<64x64xf32>, i32, i1) -> tensor<64x64xf32>
  return %s : tensor<64x64xf32>
}
