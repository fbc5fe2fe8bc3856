// RUN: tile-opt %s --tile-inline --pass-pipeline='canonicalize' --tile-cse --print-ir-after-all 2>%t.dump >/dev/null
// RUN: FileCheck %s < %t.dump

// One dump per pass, in command-line order, each showing that pass's result.

func.func private @id(%x: i32) -> i32 attributes {tile.function} {
  return %x : i32
}

// CHECK:      // -----// IR Dump After tile-inline //----- //
// CHECK-NEXT: module {
// CHECK-NOT:    call @id
// CHECK:        "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:   "tile.bid"() {axis = 0 : i64}
// CHECK:      // -----// IR Dump After canonicalize //----- //
// CHECK:        "tile.bid"() {axis = 0 : i64}
// CHECK-NEXT:   "tile.bid"() {axis = 0 : i64}
// CHECK:      // -----// IR Dump After tile-cse //----- //
// CHECK:        %[[B:.*]] = "tile.bid"() {axis = 0 : i64}
// CHECK-NOT:    "tile.bid"
// CHECK:        arith.addi %[[B]], %[[B]]
// CHECK-NOT:  IR Dump After
func.func @kernel() -> i32 attributes {tile.function} {
  %a = "tile.bid"() {axis = 0 : i64} : () -> i32
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %c = func.call @id(%b) : (i32) -> i32
  %s = arith.addi %a, %c : i32
  return %s : i32
}
