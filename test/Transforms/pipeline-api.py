# RUN: %python %s | FileCheck %s
"""The Python pass API: run_passes, run_stage, STAGES, PASSES, print hooks."""

import io

from tileir import dialect, passes

KERNEL = """
func.func private @double(%x: i32) -> i32 attributes {tile.function} {
  %y = arith.addi %x, %x : i32
  return %y : i32
}
func.func @kernel(%a: !tile.array<i32, 1 : i64>) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %b2 = "tile.bid"() {axis = 0 : i64} : () -> i32
  %d = func.call @double(%b2) : (i32) -> i32
  %t = tensor.splat %d : tensor<16xi32>
  "tile.store"(%a, %t, %b) : (!tile.array<i32, 1 : i64>, tensor<16xi32>, i32) -> ()
  return
}
"""


def run(test):
    print(f"TEST: {test.__name__}")
    test()
    return test


def fresh():
    return dialect.parse(KERNEL, dialect.context())


# CHECK-LABEL: TEST: registry
# CHECK: stages: frontend tile{{( |$)}}
# CHECK: tile: tile-inline tile-canonicalize tile-guard-masks tile-licm tile-cse tile-reverse-rereads tile-reassociate-reductions tile-dce
# CHECK: tile-cse: merge identical pure ops
@run
def registry():
    print("stages:", " ".join(passes.STAGES))
    print("tile:", " ".join(passes.STAGES["tile"]))
    print("tile-cse:", passes.PASSES["tile-cse"].summary)


# CHECK-LABEL: TEST: mixed_pipeline
# CHECK: after tile-inline
# CHECK: after cse
# CHECK: after tile-cse
# CHECK-NOT: call @double
# CHECK: %[[B:.*]] = "tile.bid"
# CHECK-NOT: "tile.bid"
# CHECK: arith.addi %[[B]], %[[B]]
@run
def mixed_pipeline():
    module = fresh()
    passes.run_passes(module, ["tile-inline", "cse", "tile-cse"],
                      print_after_all=lambda name, m: print("after", name))
    print(module)


# CHECK-LABEL: TEST: stage_and_dump
# CHECK: stage before: frontend
# CHECK: // -----// IR Dump After tile-inline //----- //
# CHECK: // -----// IR Dump After tile-dce //----- //
# CHECK: stage after: tile
@run
def stage_and_dump():
    module = fresh()
    print("stage before:", passes.current_stage(module))
    dumps = io.StringIO()
    passes.run_stage(module, "tile", print_after_all=passes.ir_printer(dumps))
    print(dumps.getvalue())
    print("stage after:", passes.current_stage(module))


# CHECK-LABEL: TEST: errors
# CHECK: unknown pass 'tile-cxe'; did you mean 'tile-dce'?
# CHECK: unknown stage 'nonexistent'; stages: frontend, tile
# CHECK: untouched: True
@run
def errors():
    module = fresh()
    before = str(module)
    for bad in (lambda: passes.run_passes(module, ["tile-inline", "tile-cxe"]),
                lambda: passes.run_stage(module, "nonexistent")):
        try:
            bad()
        except dialect.TileIRError as e:
            print(e.diagnostics[0].message)
    # Names are resolved before anything runs: the failed pipeline changed nothing.
    print("untouched:", str(module) == before)
