// RUN: tile-opt %s | tile-opt | FileCheck %s

// Element-wise math is arith/math on tensors; where is arith.select with an
// i1 tile; dtype conversion is the arith cast ops.

// CHECK-LABEL: func.func @arith_and_math
// CHECK-SAME:    (%[[X:.*]]: tensor<64xf32>, %[[Y:.*]]: tensor<64xf32>, %[[I:.*]]: tensor<64xi32>)
// CHECK:         %[[S:.*]] = arith.addf %[[X]], %[[Y]] : tensor<64xf32>
// CHECK-NEXT:    %[[M:.*]] = arith.mulf %[[S]], %[[Y]] : tensor<64xf32>
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[M]] : tensor<64xf32>
// CHECK-NEXT:    math.sqrt %[[E]] : tensor<64xf32>
// CHECK-NEXT:    math.fma %[[X]], %[[Y]], %[[E]] : tensor<64xf32>
// CHECK-NEXT:    arith.maximumf %[[X]], %[[Y]] : tensor<64xf32>
// CHECK-NEXT:    arith.divsi %[[I]], %[[I]] : tensor<64xi32>
// CHECK-NEXT:    arith.shli %[[I]], %[[I]] : tensor<64xi32>
// CHECK-NEXT:    arith.xori %[[I]], %[[I]] : tensor<64xi32>
func.func @arith_and_math(%x: tensor<64xf32>, %y: tensor<64xf32>, %i: tensor<64xi32>) attributes {tile.function} {
  %s = arith.addf %x, %y : tensor<64xf32>
  %m = arith.mulf %s, %y : tensor<64xf32>
  %e = math.exp %m : tensor<64xf32>
  %r = math.sqrt %e : tensor<64xf32>
  %f = math.fma %x, %y, %e : tensor<64xf32>
  %mx = arith.maximumf %x, %y : tensor<64xf32>
  %d = arith.divsi %i, %i : tensor<64xi32>
  %sh = arith.shli %i, %i : tensor<64xi32>
  %xo = arith.xori %i, %i : tensor<64xi32>
  return
}

// CHECK-LABEL: func.func @select
// CHECK:         %[[C:.*]] = arith.cmpf olt, %{{.*}}, %{{.*}} : tensor<16x16xf32>
// CHECK-NEXT:    arith.select %[[C]], %{{.*}}, %{{.*}} : tensor<16x16xi1>, tensor<16x16xf32>
// CHECK-NEXT:    arith.cmpi slt, %{{.*}}, %{{.*}} : i32
func.func @select(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>, %i: i32) attributes {tile.function} {
  %c = arith.cmpf olt, %a, %b : tensor<16x16xf32>
  %w = arith.select %c, %a, %b : tensor<16x16xi1>, tensor<16x16xf32>
  %s = arith.cmpi slt, %i, %i : i32
  return
}

// CHECK-LABEL: func.func @conversions
// CHECK:         arith.extf %{{.*}} : tensor<32xf16> to tensor<32xf32>
// CHECK-NEXT:    arith.truncf %{{.*}} : tensor<32xf32> to tensor<32xbf16>
// CHECK-NEXT:    arith.sitofp %{{.*}} : tensor<32xi32> to tensor<32xf32>
// CHECK-NEXT:    arith.uitofp %{{.*}} : tensor<32xi8> to tensor<32xf16>
// CHECK-NEXT:    arith.fptosi %{{.*}} : tensor<32xf32> to tensor<32xi32>
// CHECK-NEXT:    arith.fptoui %{{.*}} : tensor<32xf32> to tensor<32xi8>
// CHECK-NEXT:    arith.extsi %{{.*}} : tensor<32xi8> to tensor<32xi32>
// CHECK-NEXT:    arith.extui %{{.*}} : tensor<32xi1> to tensor<32xi32>
// CHECK-NEXT:    arith.trunci %{{.*}} : tensor<32xi32> to tensor<32xi8>
func.func @conversions(%h: tensor<32xf16>, %f: tensor<32xf32>, %i: tensor<32xi32>, %b: tensor<32xi8>, %p: tensor<32xi1>) attributes {tile.function} {
  %0 = arith.extf %h : tensor<32xf16> to tensor<32xf32>
  %1 = arith.truncf %f : tensor<32xf32> to tensor<32xbf16>
  %2 = arith.sitofp %i : tensor<32xi32> to tensor<32xf32>
  %3 = arith.uitofp %b : tensor<32xi8> to tensor<32xf16>
  %4 = arith.fptosi %f : tensor<32xf32> to tensor<32xi32>
  %5 = arith.fptoui %f : tensor<32xf32> to tensor<32xi8>
  %6 = arith.extsi %b : tensor<32xi8> to tensor<32xi32>
  %7 = arith.extui %p : tensor<32xi1> to tensor<32xi32>
  %8 = arith.trunci %i : tensor<32xi32> to tensor<32xi8>
  return
}

// Scalars use the same ops.

// CHECK-LABEL: func.func @scalars
// CHECK:         arith.addi %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    arith.ceildivsi %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    math.absf %{{.*}} : f32
func.func @scalars(%n: i32, %f: f32) attributes {tile.kernel} {
  %0 = arith.addi %n, %n : i32
  %1 = arith.ceildivsi %n, %n : i32
  %2 = math.absf %f : f32
  return
}
