// RUN: tile-opt %s | tile-opt | FileCheck %s

// tile.mma: a @ b + acc, result type = acc type.  tile.matmul: a @ b.
// Allowed: f16 x f16 -> f16|f32, bf16 x bf16 -> f32, f32 -> f32, f64 -> f64, i8 -> i32,
// fp8 x fp8 (either type each) -> f16|f32.

// CHECK-LABEL: func.func @mma_dtypes
// CHECK:         "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64x16xf16>, tensor<16x32xf16>, tensor<64x32xf32>) -> tensor<64x32xf32>
// CHECK-NEXT:    "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64x16xf16>, tensor<16x32xf16>, tensor<64x32xf16>) -> tensor<64x32xf16>
// CHECK-NEXT:    "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<64x32xf32>) -> tensor<64x32xf32>
// CHECK-NEXT:    "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<16x8xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT:    "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<16x8xf64>, tensor<8x16xf64>, tensor<16x16xf64>) -> tensor<16x16xf64>
// CHECK-NEXT:    "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<16x32xi8>, tensor<32x16xi8>, tensor<16x16xi32>) -> tensor<16x16xi32>
func.func @mma_dtypes(%a16: tensor<64x16xf16>, %b16: tensor<16x32xf16>, %c32: tensor<64x32xf32>, %c16: tensor<64x32xf16>,
                      %abf: tensor<64x16xbf16>, %bbf: tensor<16x32xbf16>,
                      %a32: tensor<16x8xf32>, %b32: tensor<8x16xf32>, %acc32: tensor<16x16xf32>,
                      %a64: tensor<16x8xf64>, %b64: tensor<8x16xf64>, %acc64: tensor<16x16xf64>,
                      %a8: tensor<16x32xi8>, %b8: tensor<32x16xi8>, %acc8: tensor<16x16xi32>) attributes {tile.function} {
  %0 = "tile.mma"(%a16, %b16, %c32) : (tensor<64x16xf16>, tensor<16x32xf16>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %1 = "tile.mma"(%a16, %b16, %c16) : (tensor<64x16xf16>, tensor<16x32xf16>, tensor<64x32xf16>) -> tensor<64x32xf16>
  %2 = "tile.mma"(%abf, %bbf, %c32) : (tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %3 = "tile.mma"(%a32, %b32, %acc32) : (tensor<16x8xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %4 = "tile.mma"(%a64, %b64, %acc64) : (tensor<16x8xf64>, tensor<8x16xf64>, tensor<16x16xf64>) -> tensor<16x16xf64>
  %5 = "tile.mma"(%a8, %b8, %acc8) : (tensor<16x32xi8>, tensor<32x16xi8>, tensor<16x16xi32>) -> tensor<16x16xi32>
  return
}

// The two fp8 types mix (e4m3 x e5m2, as the tensor cores take them), into f32 or f16.
// CHECK-LABEL: func.func @mma_fp8_mix
// CHECK:         "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64x32xf8E4M3FN>, tensor<32x64xf8E5M2>, tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK-NEXT:    "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>, tensor<64x64xf16>) -> tensor<64x64xf16>
func.func @mma_fp8_mix(%a: tensor<64x32xf8E4M3FN>, %b: tensor<32x64xf8E5M2>, %a5: tensor<64x32xf8E5M2>, %c: tensor<64x64xf32>, %h: tensor<64x64xf16>) attributes {tile.function} {
  %0 = "tile.mma"(%a, %b, %c) : (tensor<64x32xf8E4M3FN>, tensor<32x64xf8E5M2>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %1 = "tile.mma"(%a5, %b, %h) : (tensor<64x32xf8E5M2>, tensor<32x64xf8E5M2>, tensor<64x64xf16>) -> tensor<64x64xf16>
  return
}

// `tile.fast_acc` (fp8 only): the products may be summed on the tensor cores across
// a whole loop (cuTile's use_fast_acc=True).
// CHECK-LABEL: func.func @mma_fast_acc
// CHECK:         "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) {tile.fast_acc} : (tensor<64x32xf8E4M3FN>, tensor<32x64xf8E5M2>, tensor<64x64xf32>) -> tensor<64x64xf32>
func.func @mma_fast_acc(%a: tensor<64x32xf8E4M3FN>, %b: tensor<32x64xf8E5M2>, %c: tensor<64x64xf32>) attributes {tile.function} {
  %0 = "tile.mma"(%a, %b, %c) {tile.fast_acc} : (tensor<64x32xf8E4M3FN>, tensor<32x64xf8E5M2>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return
}

// CHECK-LABEL: func.func @batched_mma
// CHECK:         "tile.mma"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<4x64x16xf16>, tensor<4x16x32xf16>, tensor<4x64x32xf32>) -> tensor<4x64x32xf32>
func.func @batched_mma(%a: tensor<4x64x16xf16>, %b: tensor<4x16x32xf16>, %c: tensor<4x64x32xf32>) attributes {tile.function} {
  %0 = "tile.mma"(%a, %b, %c) : (tensor<4x64x16xf16>, tensor<4x16x32xf16>, tensor<4x64x32xf32>) -> tensor<4x64x32xf32>
  return
}

// CHECK-LABEL: func.func @matmul_dtypes
// CHECK:         "tile.matmul"(%{{.*}}, %{{.*}}) : (tensor<64x16xf16>, tensor<16x32xf16>) -> tensor<64x32xf16>
// CHECK-NEXT:    "tile.matmul"(%{{.*}}, %{{.*}}) : (tensor<64x16xf16>, tensor<16x32xf16>) -> tensor<64x32xf32>
// CHECK-NEXT:    "tile.matmul"(%{{.*}}, %{{.*}}) : (tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<64x32xbf16>
// CHECK-NEXT:    "tile.matmul"(%{{.*}}, %{{.*}}) : (tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<64x32xf32>
// CHECK-NEXT:    "tile.matmul"(%{{.*}}, %{{.*}}) : (tensor<16x32xi8>, tensor<32x16xi8>) -> tensor<16x16xi32>
// CHECK-NEXT:    "tile.matmul"(%{{.*}}, %{{.*}}) : (tensor<2x16x32xf32>, tensor<2x32x16xf32>) -> tensor<2x16x16xf32>
func.func @matmul_dtypes(%a16: tensor<64x16xf16>, %b16: tensor<16x32xf16>, %abf: tensor<64x16xbf16>, %bbf: tensor<16x32xbf16>,
                         %a8: tensor<16x32xi8>, %b8: tensor<32x16xi8>, %a3: tensor<2x16x32xf32>, %b3: tensor<2x32x16xf32>) attributes {tile.function} {
  %0 = "tile.matmul"(%a16, %b16) : (tensor<64x16xf16>, tensor<16x32xf16>) -> tensor<64x32xf16>
  %1 = "tile.matmul"(%a16, %b16) : (tensor<64x16xf16>, tensor<16x32xf16>) -> tensor<64x32xf32>
  %2 = "tile.matmul"(%abf, %bbf) : (tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<64x32xbf16>
  %3 = "tile.matmul"(%abf, %bbf) : (tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<64x32xf32>
  %4 = "tile.matmul"(%a8, %b8) : (tensor<16x32xi8>, tensor<32x16xi8>) -> tensor<16x16xi32>
  %5 = "tile.matmul"(%a3, %b3) : (tensor<2x16x32xf32>, tensor<2x32x16xf32>) -> tensor<2x16x16xf32>
  return
}
