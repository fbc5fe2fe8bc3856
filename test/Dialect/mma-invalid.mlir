// RUN: tile-opt %s -split-input-file -verify-diagnostics

func.func @rank1(%a: tensor<16xf32>) {
  // expected-error @+1 {{'tile.mma' op operands must both be 2-D (M x K, K x N) or 3-D (batched); got ranks 1 and 1}}
  %0 = "tile.mma"(%a, %a, %a) : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @mixed_ranks(%a: tensor<2x16x16xf32>, %b: tensor<16x16xf32>, %c: tensor<2x16x16xf32>) {
  // expected-error @+1 {{'tile.mma' op operands must both be 2-D (M x K, K x N) or 3-D (batched); got ranks 3 and 2}}
  %0 = "tile.mma"(%a, %b, %c) : (tensor<2x16x16xf32>, tensor<16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  return
}

// -----

func.func @contraction_mismatch(%a: tensor<16x8xf32>, %b: tensor<16x16xf32>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'tile.mma' op contraction dims differ: a is [16, 8], b is [16, 16] (a's last dim must equal b's second-to-last)}}
  %0 = "tile.mma"(%a, %b, %c) : (tensor<16x8xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return
}

// -----

func.func @operand_types_differ(%a: tensor<16x16xf16>, %b: tensor<16x16xbf16>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'tile.mma' op operand element types differ: f16 and bf16 (convert one first; only the two fp8 types mix)}}
  %0 = "tile.mma"(%a, %b, %c) : (tensor<16x16xf16>, tensor<16x16xbf16>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return
}

// -----

func.func @batch_mismatch(%a: tensor<2x16x16xf32>, %b: tensor<4x16x16xf32>, %c: tensor<2x16x16xf32>) {
  // expected-error @+1 {{'tile.mma' op batch dims differ: 2 and 4}}
  %0 = "tile.mma"(%a, %b, %c) : (tensor<2x16x16xf32>, tensor<4x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  return
}

// -----

func.func @accumulator_shape(%a: tensor<16x8xf32>, %b: tensor<8x32xf32>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'tile.mma' op accumulator shape [16, 16] should be [16, 32]}}
  %0 = "tile.mma"(%a, %b, %c) : (tensor<16x8xf32>, tensor<8x32xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return
}

// -----

func.func @bf16_accumulator(%a: tensor<16x16xbf16>, %c: tensor<16x16xbf16>) {
  // expected-error @+1 {{'tile.mma' op accumulator element type bf16 is not allowed for bf16 operands (allowed: f32)}}
  %0 = "tile.mma"(%a, %a, %c) : (tensor<16x16xbf16>, tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
  return
}

// -----

func.func @i8_into_i8(%a: tensor<16x16xi8>, %c: tensor<16x16xi8>) {
  // expected-error @+1 {{'tile.mma' op accumulator element type i8 is not allowed for i8 operands (allowed: i32)}}
  %0 = "tile.mma"(%a, %a, %c) : (tensor<16x16xi8>, tensor<16x16xi8>, tensor<16x16xi8>) -> tensor<16x16xi8>
  return
}

// -----

func.func @unsupported_operands(%a: tensor<16x16xi32>, %c: tensor<16x16xi32>) {
  // expected-error @+1 {{'tile.mma' op mma does not take i32 operands; supported: f16, bf16, f32, f64, i8}}
  %0 = "tile.mma"(%a, %a, %c) : (tensor<16x16xi32>, tensor<16x16xi32>, tensor<16x16xi32>) -> tensor<16x16xi32>
  return
}

// -----

func.func @result_not_acc(%a: tensor<16x16xf16>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'tile.mma' op result type tensor<16x16xf16> must equal the accumulator type tensor<16x16xf32>}}
  %0 = "tile.mma"(%a, %a, %c) : (tensor<16x16xf16>, tensor<16x16xf16>, tensor<16x16xf32>) -> tensor<16x16xf16>
  return
}

// -----

func.func @mma_two_operands(%a: tensor<16x16xf16>) {
  // expected-error @+1 {{op expects exactly 3 operands, but got 2}}
  %0 = "tile.mma"(%a, %a) : (tensor<16x16xf16>, tensor<16x16xf16>) -> tensor<16x16xf16>
  return
}

// -----

func.func @matmul_f32_to_f16(%a: tensor<16x16xf32>) {
  // expected-error @+1 {{'tile.matmul' op result element type f16 is not allowed for f32 operands (allowed: f32)}}
  %0 = "tile.matmul"(%a, %a) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf16>
  return
}

// -----

func.func @matmul_i8_to_i8(%a: tensor<16x16xi8>) {
  // expected-error @+1 {{'tile.matmul' op result element type i8 is not allowed for i8 operands (allowed: i32)}}
  %0 = "tile.matmul"(%a, %a) : (tensor<16x16xi8>, tensor<16x16xi8>) -> tensor<16x16xi8>
  return
}

// -----

func.func @matmul_result_shape(%a: tensor<16x8xf32>, %b: tensor<8x32xf32>) {
  // expected-error @+1 {{'tile.matmul' op result shape [16, 16] should be [16, 32]}}
  %0 = "tile.matmul"(%a, %b) : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<16x16xf32>
  return
}

// -----

func.func @matmul_unsupported(%a: tensor<16x16xi16>) {
  // expected-error @+1 {{'tile.matmul' op matmul does not take i16 operands; supported: f16, bf16, f32, f64, i8}}
  %0 = "tile.matmul"(%a, %a) : (tensor<16x16xi16>, tensor<16x16xi16>) -> tensor<16x16xi32>
  return
}

// -----

func.func @fast_acc_not_fp8(%a: tensor<16x16xf16>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'tile.mma' op tile.fast_acc is only for fp8 operands (f8E4M3FN, f8E5M2), got f16}}
  %0 = "tile.mma"(%a, %a, %c) {tile.fast_acc} : (tensor<16x16xf16>, tensor<16x16xf16>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return
}

// -----

func.func @fast_acc_not_unit(%a: tensor<16x32xf8E4M3FN>, %b: tensor<32x16xf8E4M3FN>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'tile.mma' op tile.fast_acc must be a unit attribute, got 1 : i64}}
  %0 = "tile.mma"(%a, %b, %c) {tile.fast_acc = 1} : (tensor<16x32xf8E4M3FN>, tensor<32x16xf8E4M3FN>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return
}
