"""Kernels compiled for a small grid: tiles split across more blocks
(tile-split-blocks, tileir.backend.layout.split: the launcher's wish, which dims split and
how many ways, kernels that stay as written) and online softmax loops carried per
lane (tile-defer-online-reductions), run in the simulator against a float64
reference on ragged sizes.

The kernels are compiled to the gpu stage, what the simulator runs and where the
grid's rewrites and their metadata are final (since session 24: a cubin each cost
LLVM's NVPTX and ptxas, ~0.2 s, and proved nothing these tests check); a split
kernel's cubin is compiled by test_a_column_reduction_splits_along_the_columns, an
unsplit one's by test_a_row_reduction_stays_as_written_and_compiles_once."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from mlir import ir

import tileir as ct
from tileir.backend.layout import split as split_mod
from tileir.backend.layout.grid_wish import split_wish
from tileir.examples import llm_ops, rmsnorm, vector_add
from tileir.kernel import hardware_grid
from tileir.passes.defer_online_reductions import loops
from tileir.sim import simulate

BF16 = ml_dtypes.bfloat16


@pytest.mark.parametrize("grid,wish", [
    ((1, 1, 1), "split:64;free:7"),    # one block: at most 64 ways
    ((16, 1, 1), "split:8;free:6"),    # 16 x 8 = 128 blocks on 132 SMs
    ((64, 1, 1), "split:2;free:6"),
    ((4, 2, 1), "split:16;free:4;swap:1"),   # only axis 2 is free; 0 and 1 may swap
    ((67, 1, 1), "free:6"),            # more than one block for every two SMs: no split
    ((2, 3, 4), "swap:1"),             # no free axis: only the launch order
    ((70000, 3, 1), "free:4"),         # axis 0 does not fit axis 1's limit
])
def test_a_small_grid_asks_for_a_split(grid, wish):
    assert split_wish(grid, 132) == wish


def _rope_args(rng, tokens, heads, dim):
    half = dim // 2
    q = rng.standard_normal((tokens, heads, dim)).astype(BF16)
    angle = rng.uniform(0, 6.3, (tokens, half))
    cos, sin = np.cos(angle).astype(BF16), np.sin(angle).astype(BF16)
    out = np.full_like(q, np.nan)
    return (q, cos, sin, out, heads, half)


def _rope_ref(q, cos, sin):
    half = q.shape[-1] // 2
    q = q.astype(np.float64)
    c, s = cos.astype(np.float64)[:, None, :], sin.astype(np.float64)[:, None, :]
    x1, x2 = q[..., :half], q[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


# the fast tier: the first shape (split in 8) on each target; the others in `--full`
@pytest.mark.sweep(keep=("target",))
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("tokens,heads,dim,scale", [
    (1, 64, 128, [2, 1, 8]),       # Llama-3-70B queries at one token: 32 KB, 8 x 4 KB
    pytest.param(16, 32, 128, [2, 1, 4],    # 8B: 16 KB a token, 4 x 4 KB
                 marks=pytest.mark.slow),
    (3, 128, 64, [2, 1, 8]),       # DeepSeek-V3's rope dims; 3 tokens, ragged grid
    pytest.param(64, 64, 128, [2, 1, 2],    # the wish's 2 (64 x 2 blocks on 132 SMs)
                 marks=pytest.mark.slow),
    (1, 8, 128, None),             # 4 KB: as written
])
def test_rope_splits_its_heads_and_computes_the_same(target, tokens, heads, dim, scale, rng):
    args = _rope_args(rng, tokens, heads, dim)
    ck = llm_ops.rope.compile(args, stage="gpu", target=target, grid=(tokens,), sm_count=132)
    assert ck.meta.get("grid_scale") == scale
    simulate(ck, hardware_grid(ck.meta, (tokens, 1, 1)), args)
    np.testing.assert_allclose(args[3].astype(np.float64), _rope_ref(*args[:3]),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("n", [10_007, 4096, 1000])
def test_a_vector_add_on_few_blocks_splits_its_tile(n, rng):
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.full(n, np.nan, np.float32)
    grid = (ct.cdiv(n, 4096), 1, 1)
    args = (a, b, c, 4096)
    ck = vector_add.vector_add.compile(args, stage="gpu", target="sm_90a", grid=grid, sm_count=132)
    scale = ck.meta["grid_scale"]
    assert scale[:2] == [2, 1] and scale[2] == 8                 # 48 KB: 4 KB a block or more
    simulate(ck, hardware_grid(ck.meta, grid), args)
    np.testing.assert_allclose(c, a.astype(np.float64) + b, rtol=1e-6)


@ct.kernel
def column_sum(x, y, R: ct.Constant[int], C: ct.Constant[int]):
    j = ct.bid(0)
    t = ct.load(x, index=(0, j), shape=(R, C), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(j,), tile=ct.sum(t * t, axis=0))


@ct.kernel
def exp_chunks(x, y, C: ct.Constant[int]):
    row = ct.bid(0)
    for k in range(ct.num_tiles(x, axis=1, shape=(1, C))):
        t = ct.load(x, index=(row, k), shape=(1, C), padding_mode=ct.PaddingMode.ZERO)
        ct.store(y, index=(row, k), tile=ct.exp(t) * 0.5)


def test_a_column_reduction_splits_along_the_columns(rng):
    x = rng.standard_normal((37, 3000)).astype(np.float32)
    y = np.full(3000, np.nan, np.float32)
    args, grid = (x, y, 64, 1024), (3, 1, 1)
    ck = column_sum.compile(args, target="sm_90a", grid=grid, sm_count=132)   # (a cubin)
    assert ck.meta["grid_scale"][:2] == [2, 1]
    simulate(ck, hardware_grid(ck.meta, grid), args)
    np.testing.assert_allclose(y, (x.astype(np.float64) ** 2).sum(axis=0), rtol=1e-5)


def test_a_map_loop_splits_its_chunks(rng):
    x = rng.standard_normal((2, 5000)).astype(np.float32)
    y = np.full_like(x, np.nan)
    args, grid = (x, y, 4096), (2, 1, 1)
    ck = exp_chunks.compile(args, stage="gpu", target="sm_80", grid=grid, sm_count=108)
    assert ck.meta["grid_scale"] == [2, 1, 8]                  # 32 KB a chunk, 4 KB a block
    simulate(ck, hardware_grid(ck.meta, grid), args)
    np.testing.assert_allclose(y, np.exp(x.astype(np.float64)) * 0.5, rtol=1e-5)


def test_a_row_reduction_stays_as_written_and_compiles_once(rng):
    """RMSNorm reduces along its rows' only long dim: a compile for the split wish finds
    nothing to split, and later launches of that specialization on other small grids
    reuse it (no other variant)."""
    k = ct.kernel(rmsnorm.rmsnorm.fn)
    x = rng.standard_normal((2, 777)).astype(np.float32)
    args = (x, x[0].copy(), np.empty_like(x), 1e-6, 1024)
    assert k.grid_wish((2, 1, 1), 132) == "split:64;free:6"
    ck = k.compile(args, target="sm_90a", grid=(2,), sm_count=132)
    assert "grid_scale" not in ck.meta
    assert k.compile(args, target="sm_90a", grid=(8,), sm_count=132) is ck
    assert k.compile(args, target="sm_90a", stage="ptx") is not ck      # other stage


def test_retile_false_keeps_the_grid():
    k = ct.kernel(vector_add.vector_add.fn, retile=False)
    assert k.grid_wish((1, 1, 1), 132) is None


def test_the_chosen_dim_is_an_outer_one_with_the_most_bytes(rng):
    """RoPE's heads (dim 1) come before its head dim (dim 2, innermost), which
    would split too: the second candidate."""
    args = _rope_args(rng, 1, 64, 128)
    ck = llm_ops.rope.compile(args, target="sm_90a", stage="tile")
    func = next(op.operation for op in ck.module.body.operations
                if op.operation.name == "func.func")
    with func.context:
        cands = split_mod.candidates(func)
        assert [c.innermost for c in cands] == [False, True]
        loads = [op for op, _ in cands[0].memory if op.name == "tile.load"]
        assert {d for op, d in cands[0].memory} == {1} and len(loads) == 2
        assert cands[0].nbytes() == 32768                     # 2 loads, 2 stores of 8 KB
        assert split_mod.factor(cands[0], 64) == 8           # 4 KB a block
        assert split_mod.factor(cands[0], 2) == 2
        assert split_mod.factor(cands[0], 1) == 1


# ---------------------------------------------------------------------------
# Online softmax loops on small grids (tile-defer-online-reductions)
# ---------------------------------------------------------------------------
# the fast tier: the first fast shape on each target; the others in `--full`
@pytest.mark.sweep(keep=("target",))
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("m,n,chunk", [pytest.param(1, 128256, 8192, marks=pytest.mark.slow),
                                       pytest.param(3, 5000, 1024, marks=pytest.mark.slow),
                                       (2, 300, 512), (1, 1000, 4096)])
def test_online_softmax_loops_on_small_grids_carry_lanes(target, m, n, chunk, rng):
    x = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    x[0, :7] = -np.inf                      # masked logits
    lse, y = np.full(m, np.nan, np.float32), np.full_like(x, np.nan)
    for kernel, args in ((llm_ops.vocab_logsumexp, (x, lse, chunk)),
                         (llm_ops.vocab_softmax, (x, y, chunk))):
        ck = kernel.compile(args, stage="gpu", target=target, grid=(m,), sm_count=132)
        # (the softmax's second loop, a map, may also split: every block then runs
        # the first loop over the whole row and writes its slice of each chunk)
        assert "tile-defer-online-reductions" in ck.meta["grid_rewrites"]
        simulate(ck, hardware_grid(ck.meta, (m, 1, 1)), args)
    x64 = x.astype(np.float64)
    top = x64.max(axis=1, keepdims=True)
    e = np.exp(x64 - top)
    np.testing.assert_allclose(lse, (top + np.log(e.sum(axis=1, keepdims=True)))[:, 0],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-9)


def test_online_softmax_loops_on_large_grids_stay_as_written(rng):
    """A large grid keeps the per-chunk reductions; the small grid's variant is not
    reused for it."""
    k = ct.kernel(llm_ops.vocab_logsumexp.fn)
    x = rng.standard_normal((4, 3000)).astype(np.float32)
    args = (x, np.empty(4, np.float32), 1024)
    small = k.compile(args, stage="gpu", target="sm_90a", grid=(4,), sm_count=132)
    large = k.compile(args, stage="gpu", target="sm_90a", grid=(1000,), sm_count=132)
    assert small.meta["grid_rewrites"] == ["tile-cluster-rows", "tile-defer-online-reductions"]
    assert "grid_rewrites" not in large.meta
    assert k.compile(args, stage="gpu", target="sm_90a", grid=(8,), sm_count=132) is not large


def _kernel_func(module):
    return next(op.operation for op in module.body.operations
                if op.operation.name == "func.func")


def test_split_map_loops_still_load_ahead():
    """The softmax's loops on one row, dealt to a cluster's blocks (chunk index
    bid + 8 k, the second loop's bid + 8 (last - k)), are still maps over slabs: the
    register prefetch rotates both (passes/iterations.py follows those as one-to-one
    in k)."""
    x = ct.ArraySpec("bfloat16", 2, aligned=True)
    ck = ct.kernel(llm_ops.vocab_softmax.fn).compile(
        (x, x, 8192), target="sm_90a", stage="pipeline", grid=(1,), sm_count=132)
    func = _kernel_func(ck.module)
    # first loop: M, S and the next chunk; second loop: the next chunk
    assert [len(op.results) for op in loops(func)] == [3, 1]
    assert "tile.grid_scale" in func.attributes


def test_small_grids_keep_all_warps_for_chained_reductions():
    """LayerNorm's chained reductions take half the warps and an occupancy of 3 on a
    large grid; with a block per SM or fewer, occupancy is moot: all the warps."""
    from tileir.examples import layernorm
    a2, a1 = ct.ArraySpec("bfloat16", 2, aligned=True), ct.ArraySpec("bfloat16", 1, aligned=True)
    args = (a2, a1, a1, a2, 1e-6, 8192)
    k = ct.kernel(layernorm.layernorm.fn)
    for grid, want in (((8192,), (8, 3)), ((4,), (16, None))):
        func = _kernel_func(k.compile(args, target="sm_90a", stage="layout", grid=grid,
                                      sm_count=132).module)
        occ = func.attributes["tile.occupancy"] if "tile.occupancy" in func.attributes else None
        assert (ir.IntegerAttr(func.attributes["tile.num_warps"]).value,
                None if occ is None else ir.IntegerAttr(occ).value) == want


def test_small_grids_give_32_kb_blocks_32_warps(rng):
    """Fused add + RMSNorm streams 32 KB a block at 8192 columns: 32 warps on a small
    grid (a grid rewrite of its own, so the large grid's kernel stays at 16), 16 at
    4096 columns; the small grid's kernel computes the same (simulator)."""
    b2, b1 = ct.ArraySpec("bfloat16", 2, aligned=True), ct.ArraySpec("bfloat16", 1, aligned=True)
    k = ct.kernel(llm_ops.add_rmsnorm.fn)
    small = k.compile((b2, b2, b1, b2, 1e-6, 8192), stage="gpu", target="sm_90a", grid=(16,),
                      sm_count=132)
    large = k.compile((b2, b2, b1, b2, 1e-6, 8192), stage="gpu", target="sm_90a", grid=(8192,),
                      sm_count=132)
    narrow = k.compile((b2, b2, b1, b2, 1e-6, 4096), stage="gpu", target="sm_90a", grid=(16,),
                       sm_count=132)
    assert (small.meta["num_threads"], large.meta["num_threads"],
            narrow.meta["num_threads"]) == (1024, 512, 512)
    assert small.meta["grid_rewrites"] == ["small-grid-warps"]
    assert "grid_rewrites" not in large.meta
    m, n = 3, 8000
    x = rng.standard_normal((m, n)).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    y, r2 = np.full_like(x, np.nan), r.copy()
    args = (x, r2, w, y, 1e-6, 8192)
    ck = k.compile(args, stage="gpu", target="sm_90a", grid=(m,), sm_count=132)
    assert ck.meta["num_threads"] == 1024
    simulate(ck, (m,), args)
    h = x.astype(np.float64) + r
    np.testing.assert_allclose(r2, h, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y, h / np.sqrt((h * h).mean(1, keepdims=True) + 1e-6) * w,
                               rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------
# Launch order (tile-launch-order)
# ---------------------------------------------------------------------------
def test_swiglu_launches_along_its_rows_and_computes_the_same(rng):
    """Grid (rows, column tiles): the kernel reads its axes swapped and the launcher
    swaps the grid (grid_perm); the simulator runs the hardware grid."""
    g = rng.standard_normal((5, 3000)).astype(BF16)
    u = rng.standard_normal((5, 3000)).astype(BF16)
    out = np.full((5, 3000), np.nan, BF16)
    k = ct.kernel(llm_ops.silu_mul.fn)
    grid = (5, ct.cdiv(3000, 1024), 1)
    ck = k.compile((g, u, out, 1024), target="sm_90a", stage="gpu", grid=grid[:2],
                   sm_count=132)
    assert ck.meta["grid_perm"] == [1, 0, 2]
    assert hardware_grid(ck.meta, grid) == (3, 5, 1)
    simulate(ck, hardware_grid(ck.meta, grid), (g, u, out, 1024))
    g64, u64 = g.astype(np.float64), u.astype(np.float64)
    ref = g64 / (1 + np.exp(-g64)) * u64
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=1e-2, atol=1e-2)


def test_a_grid_whose_rows_exceed_axis_1_keeps_its_order():
    x = ct.ArraySpec("bfloat16", 2, aligned=True)
    k = ct.kernel(llm_ops.silu_mul.fn)
    ck = k.compile((x, x, x, 1024), target="sm_90a", grid=(70000, 14), sm_count=132)
    assert "grid_perm" not in ck.meta
