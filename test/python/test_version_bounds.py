"""tile-version-bounds (backend/pipeline/version_bounds.py) end to end, in the simulator: blocks
whose tiles lie inside their arrays run the unchecked version, the others the checked
one, and both compute what the interpreter does.  The simulator refuses any access
outside an argument array, so a block sent down the wrong version is caught."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

import tileir as ct
from tileir.examples import llm_ops
from tileir.sim import simulate

from mlir_kernels import compile_mlir

TARGETS = ("sm_90a", "sm_80")


@ct.kernel
def shifted_map(x, y, T: ct.Constant[int]):
    """y's tile (i, j) from x's tile (i - 1, j): row tile -1 reads padding."""
    i, j = ct.bid(0), ct.bid(1)
    t = ct.load(x, index=(i - 1, j), shape=(2, T), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(i, j), tile=t * 2.0 + 1.0)


def _versioned(kernel, args, target) -> bool:
    ir_text = str(kernel.compile(args, stage="pipeline", target=target).module)
    return "tile.in_bounds" in ir_text


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m,n", [(6, 96), (5, 100), (1, 7)])
def test_edge_and_interior_blocks_take_their_versions(target, m, n, rng):
    x = rng.standard_normal((m, n)).astype(np.float32)
    y = np.full((m, n), np.nan, np.float32)
    args = (x, y, 32)
    assert _versioned(shifted_map, args, target)
    ck = shifted_map.compile(args, stage="gpu", target=target)
    simulate(ck, (ct.cdiv(m, 2), ct.cdiv(n, 32)), args)
    shifted = np.zeros_like(x)
    shifted[2:] = x[:-2]
    np.testing.assert_array_equal(y, shifted * 2 + 1)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tokens,heads,heads_tile", [(3, 8, 8), (2, 6, 8)])
def test_rope_with_heads_that_fill_the_tile_or_not(target, tokens, heads, heads_tile, rng):
    """8 heads fill the tile (every block unchecked); 6 do not (every block checked)."""
    half = 16
    q = rng.standard_normal((tokens, heads, 2 * half)).astype(np.float32)
    angle = rng.random((tokens, half)).astype(np.float32) * 6.3
    cos, sin = np.cos(angle), np.sin(angle)
    out = np.full_like(q, np.nan)
    args = (q, cos, sin, out, heads_tile, half)
    ck = llm_ops.rope.compile(args, stage="gpu", target=target)
    simulate(ck, (tokens, 1, 1), args)
    x1, x2 = q[..., :half], q[..., half:]
    c, s = cos[:, None], sin[:, None]
    ref = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def _top_if(module: ir.Module) -> ir.Operation:
    """The gpu.func's top-level scf.if with the most ops under it: the versions."""
    best, size = None, -1
    for op in module.body.operations:
        if op.operation.name != "gpu.module":
            continue
        for f in op.regions[0].blocks[0].operations:
            if f.operation.name != "gpu.func":
                continue
            for inner in f.regions[0].blocks[0].operations:
                if inner.operation.name == "scf.if":
                    n = len(str(inner))
                    if n > size:
                        best, size = inner.operation, n
    return best


# sm_80 in --full (2.4 s of CPU): the versioning is done before the lowering splits by
# target; sm_80's lowering of the same accesses is kept by the other tests here
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=pytest.mark.slow)])
def test_the_unchecked_version_has_no_per_thread_branches(target):
    q = ct.ArraySpec("bfloat16", 3, aligned=True)
    c = ct.ArraySpec("float32", 2, aligned=True)
    module = llm_ops.rope.compile((q, c, c, q, 32, 64), stage="gpu", target=target).module
    versions = _top_if(module)
    then_text, else_text = ("\n".join(str(op) for op in region.blocks[0].operations)
                            for region in versions.regions)
    assert "scf.if" not in then_text
    assert then_text.count("llvm.load") == 6         # x twice, cos and sin 2 x 16 bytes
    assert else_text.count("scf.if") >= 4          # each access checks its thread


RANK0 = """
module attributes {tile.target = "TARGET"} {
func.func @scalar(%s: !tile.array<f64, 0 : i64>, %o: !tile.array<f64, 0 : i64>, %r: !tile.array<f64, 0 : i64>) attributes {tile.kernel} {
  %t = "tile.load"(%s) {padding = "zero", tile_shape = array<i64>} : (!tile.array<f64, 0 : i64>) -> tensor<f64>
  %c = arith.constant dense<1.5> : tensor<f64>
  %u = arith.addf %t, %c : tensor<f64>
  "tile.store"(%o, %u) : (!tile.array<f64, 0 : i64>, tensor<f64>) -> ()
  %v = "tile.load"(%s) {padding = "zero", tile_shape = array<i64>, tile.memory_scope = "device"} : (!tile.array<f64, 0 : i64>) -> tensor<f64>
  "tile.store"(%r, %v) {tile.memory_scope = "device"} : (!tile.array<f64, 0 : i64>, tensor<f64>) -> ()
  return
}
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_rank_0_arrays_load_and_store_their_element(target):
    """(Before this pass, lowering a rank-0 access crashed: no coordinates to address.)"""
    import types
    artifacts, meta = compile_mlir(RANK0, target, "gpu")
    assert "tile.in_bounds" in artifacts["pipeline"]
    s, o, r = np.array(2.25), np.array(np.nan), np.array(np.nan)
    compiled = types.SimpleNamespace(meta=meta, runtime_params=[0, 1, 2], artifacts=artifacts)
    simulate(compiled, (2, 1, 1), (s, o, r))
    assert o == 3.75 and r == 2.25


GATHERED = """
module attributes {tile.target = "TARGET"} {
func.func @gathered(%idx: !tile.array<i32, 1 : i64>, %x: !tile.array<f32, 1 : i64>, %y: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %c0 = arith.constant 0 : index
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%idx, %b) {padding = "zero", tile_shape = array<i64: 1>} : (!tile.array<i32, 1 : i64>, i32) -> tensor<1xi32>
  %row = tensor.extract %t[%c0] : tensor<1xi32>
  %v = "tile.load"(%x, %row) {padding = "zero", tile_shape = array<i64: 64>} : (!tile.array<f32, 1 : i64>, i32) -> tensor<64xf32>
  "tile.store"(%y, %v, %b) : (!tile.array<f32, 1 : i64>, tensor<64xf32>, i32) -> ()
  return
}
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_an_index_read_from_memory_stays_checked(target, rng):
    """Block 2's index points past x: its load pads, in the version whose own tiles fit."""
    import types
    artifacts, meta = compile_mlir(GATHERED, target, "gpu")
    idx = np.array([1, 0, 7], np.int32)
    x = rng.standard_normal(100).astype(np.float32)        # tile 1 is ragged (36 of 64)
    y = np.full(3 * 64, np.nan, np.float32)
    compiled = types.SimpleNamespace(meta=meta, runtime_params=[0, 1, 2], artifacts=artifacts)
    simulate(compiled, (3, 1, 1), (idx, x, y))
    padded = np.concatenate([x, np.zeros(28, np.float32)])
    np.testing.assert_array_equal(y, np.concatenate([padded[64:], padded[:64], np.zeros(64)]))
