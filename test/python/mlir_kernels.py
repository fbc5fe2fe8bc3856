"""Hand-written Tile IR kernels for ops the Python frontend does not emit (a tile
constant whose elements differ, an element at run-time indices, a while loop that
carries a tile), shared by the simulator tests and the GPU tests.  `TARGET` stands
for the target chip; `compile_mlir` takes one through the stages."""

from __future__ import annotations

import json

import numpy as np


def table_kernel(t: str, table: np.ndarray) -> str:
    """y = x (+, xor for i1) a 32 x 16 constant `table` of element type `t`, 2 warps."""
    values = "[" + ", ".join("[" + ", ".join(
        ("true" if v else "false") if t == "i1" else str(int(v)) if t == "i32" else
        f"{float(v):.1f}" for v in row) + "]" for row in table) + "]"
    op = {"f32": "arith.addf", "bf16": "arith.addf", "f8E4M3FN": "arith.addf",
          "i32": "arith.addi", "i1": "arith.xori"}[t]
    return f"""
module attributes {{tile.target = "TARGET"}} {{
func.func @table(%x: !tile.array<{t}, 2 : i64>, %y: !tile.array<{t}, 2 : i64>) attributes {{tile.kernel, tile.num_warps = 2 : i32}} {{
  %c0 = arith.constant 0 : i32
  %k = arith.constant dense<{values}> : tensor<32x16x{t}>
  %a = "tile.load"(%x, %c0, %c0) {{padding = "zero", tile_shape = array<i64: 32, 16>}} : (!tile.array<{t}, 2 : i64>, i32, i32) -> tensor<32x16x{t}>
  %s = {op} %a, %k : tensor<32x16x{t}>
  "tile.store"(%y, %s, %c0, %c0) : (!tile.array<{t}, 2 : i64>, tensor<32x16x{t}>, i32, i32) -> ()
  return
}}
}}
"""


# y[:] = x[i, j] for a 32 x 64 tile x: tensor.extract at run-time indices
PICK = """
module attributes {tile.target = "TARGET"} {
func.func @pick(%x: !tile.array<f32, 2 : i64>, %y: !tile.array<f32, 1 : i64>, %i: i32, %j: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%x, %c0, %c0) {padding = "zero", tile_shape = array<i64: 32, 64>} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<32x64xf32>
  %ii = arith.index_cast %i : i32 to index
  %jj = arith.index_cast %j : i32 to index
  %e = tensor.extract %t[%ii, %jj] : tensor<32x64xf32>
  %v = tensor.splat %e : tensor<64xf32>
  "tile.store"(%y, %v, %c0) : (!tile.array<f32, 1 : i64>, tensor<64xf32>, i32) -> ()
  return
}
}
"""

# doubles a 256-element tile until its first element reaches `bound`: y = the tile,
# n[0] = the doublings (scf.while carrying a counter and a tile)
GROW = """
module attributes {tile.target = "TARGET"} {
func.func @grow(%x: !tile.array<f32, 1 : i64>, %y: !tile.array<f32, 1 : i64>, %n: !tile.array<i32, 1 : i64>, %bound: f32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %t0 = "tile.load"(%x, %c0) {padding = "zero", tile_shape = array<i64: 256>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<256xf32>
  %r:2 = scf.while (%i = %c0, %t = %t0) : (i32, tensor<256xf32>) -> (i32, tensor<256xf32>) {
    %z = arith.constant 0 : index
    %e = tensor.extract %t[%z] : tensor<256xf32>
    %go = arith.cmpf olt, %e, %bound : f32
    scf.condition(%go) %i, %t : i32, tensor<256xf32>
  } do {
  ^bb0(%j: i32, %u: tensor<256xf32>):
    %k = arith.addi %j, %c1 : i32
    %v = arith.addf %u, %u : tensor<256xf32>
    scf.yield %k, %v : i32, tensor<256xf32>
  }
  "tile.store"(%y, %r#1, %c0) : (!tile.array<f32, 1 : i64>, tensor<256xf32>, i32) -> ()
  %ns = tensor.splat %r#0 : tensor<1xi32>
  "tile.store"(%n, %ns, %c0) : (!tile.array<i32, 1 : i64>, tensor<1xi32>, i32) -> ()
  return
}
}
"""


def compile_mlir(text: str, target: str, stop_after: str) -> tuple[dict, dict]:
    """(artifacts by stage, launch metadata) of a hand-written kernel for `target`."""
    from mlir import ir
    from tileir.dialect import context as tile_context
    from tileir.kernel import run_stages
    with tile_context():
        module = ir.Module.parse(text.replace("TARGET", target))
        artifacts = run_stages(module, stop_after)
        meta = json.loads(ir.StringAttr(module.operation.attributes["tile.kernel_meta"]).value)
    return artifacts, {**meta, "target": target}
