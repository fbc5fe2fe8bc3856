"""tile-cluster-rows without a GPU: the rewritten kernel runs in the interpreter (a
cluster's blocks side by side) and gives the kernel's results; the PTX has the
cluster's shape, DSMEM reads and cluster barriers; sm_80 and large grids keep the
kernel as written.  (GPU runs: test_gpu_cluster.py.)"""

import numpy as np
import pytest
from mlir import ir

import tileir as ct
from tileir import interpreter
from tileir.dialect import TileIRError
from tileir.examples import llm_ops

SM = 132


def _layout(kernel, args, grid, target="sm_90a"):
    return kernel.compile(args, stage="layout", target=target, grid=grid, sm_count=SM)


def _run_rewritten(kernel, args, rows):
    """Runs the layout-stage IR of a `rows`-block launch in the interpreter on the grid
    the launcher would give it; returns its grid scale."""
    module = _layout(kernel, args, (rows,)).module
    func = module.body.operations[0]
    axis, _, s = ir.DenseI64ArrayAttr(func.attributes["tile.grid_scale"])
    grid = [rows, 1, 1]
    grid[axis] *= s
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    interpreter.run(module, kernel.name if hasattr(kernel, "name") else "k", tuple(grid), arrays)
    return s


def _softmax64(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("rows,n,chunk", [(1, 3000, 256), (3, 5000, 512), (2, 100, 256),
                                          (16, 2049, 128)])
def test_the_rewritten_softmax_and_logsumexp_run_in_the_interpreter(rows, n, chunk):
    rng = np.random.default_rng(rows * n)
    x = (rng.standard_normal((rows, n)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    lse = np.full((rows,), np.nan, np.float32)
    s = _run_rewritten(llm_ops.vocab_softmax, (x, y, chunk), rows)
    _run_rewritten(llm_ops.vocab_logsumexp, (x, lse, chunk), rows)
    assert s == min(8, 64 if rows == 1 else 8)
    np.testing.assert_allclose(y, _softmax64(x), rtol=1e-5, atol=1e-7)
    x64 = x.astype(np.float64)
    ref = x64.max(1) + np.log(np.exp(x64 - x64.max(1, keepdims=True)).sum(1))
    np.testing.assert_allclose(lse, ref, rtol=1e-6)


@ct.kernel
def row_stats(x, out, C: ct.Constant[int]):
    row = ct.bid(0)
    s = ct.zeros((1,), dtype=ct.float32)
    hi = ct.full((1,), -3.0e38, dtype=ct.float32)
    lo = ct.full((1,), 3.0e38, dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(1, C))):
        t = ct.load(x, index=(row, k), shape=(1, C), padding_mode=ct.PaddingMode.ZERO)
        s = s + ct.sum(t, axis=1)
        hi = ct.maximum(hi, ct.max(t, axis=1))
        lo = ct.minimum(lo, ct.min(t, axis=1))
    ct.store(out, index=(row, 0), tile=ct.reshape(s, (1, 1)))
    ct.store(out, index=(row, 1), tile=ct.reshape(hi, (1, 1)))
    ct.store(out, index=(row, 2), tile=ct.reshape(lo, (1, 1)))


def test_sum_max_and_min_partials_combine():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 1000)).astype(np.float32) + 2
    out = np.full((5, 3), np.nan, np.float32)
    _run_rewritten(row_stats, (x, out, 128), 5)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 24)))       # the padded last chunk
    ref = np.stack([xp.sum(1), xp.max(1), xp.min(1)], 1)
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_ptx_has_the_cluster_shape_dsmem_reads_and_cluster_barriers():
    x = np.zeros((1, 128256), np.float16)
    y = np.zeros_like(x)
    ck = llm_ops.vocab_softmax.compile((x, y, 8192), stage="ptx", target="sm_90a",
                                       grid=(1,), sm_count=SM)
    ptx = str(ck.module)
    assert ".reqnctapercluster 1, 1, 8" in ptx
    assert "mapa.shared::cluster.u32" in ptx and "ld.shared::cluster.b32" in ptx
    assert ptx.count("barrier.cluster.arrive.release.aligned") == 2
    assert ptx.count("barrier.cluster.wait.acquire.aligned") == 2
    assert ck.meta["cluster"] == [1, 1, 8] and ck.meta["grid_scale"] == [2, 1, 8]


def test_a_large_grid_deals_a_softmax_row_to_four_blocks():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((300, 700)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    k = ct.kernel(llm_ops.vocab_softmax.fn)
    assert k.grid_wish((300,), SM) == "free:6"
    ck = k.compile((x, y, 128), target="sm_90a", grid=(300,), sm_count=SM)
    assert ck.meta["cluster"] == [1, 1, 4] and ck.meta["grid_rewrites"] == ["tile-cluster-rows"]
    assert _run_rewritten(k, (x, y, 128), 300) == 4
    np.testing.assert_allclose(y, _softmax64(x), rtol=1e-5, atol=1e-7)


def test_a_kernel_that_rewrites_nothing_shares_one_variant_across_grids():
    x = np.zeros((300, 700), np.float32)
    out = np.zeros((300,), np.float32)
    k = ct.kernel(llm_ops.vocab_logsumexp.fn)
    large = k.compile((x, out, 128), target="sm_90a", grid=(300,), sm_count=SM)
    assert "grid_rewrites" not in large.meta
    assert k.compile((x, out, 128), target="sm_90a", grid=(500,), sm_count=SM) is large
    small = k.compile((x, out, 128), target="sm_90a", grid=(4,), sm_count=SM)
    assert small is not large and "tile-cluster-rows" in small.meta["grid_rewrites"]


@pytest.mark.parametrize("target,grid", [("sm_80", (1,)), ("sm_90a", (4096,))])
def test_sm80_and_large_grids_keep_the_kernel(target, grid):
    x = np.zeros((grid[0], 4096), np.float32)
    out = np.zeros((grid[0],), np.float32)
    module = _layout(llm_ops.vocab_logsumexp, (x, out, 1024), grid, target).module
    text = str(module)
    assert "tile.cluster" not in text and "cluster_gather" not in text


def test_a_gather_outside_a_cluster_launch_is_a_located_error():
    x = np.zeros((1, 4096), np.float32)
    out = np.zeros((1,), np.float32)
    kernel = ct.kernel(llm_ops.vocab_logsumexp.__wrapped__)       # its module is changed
    module = _layout(kernel, (x, out, 1024), (1,)).module
    del module.body.operations[0].attributes["tile.cluster"]
    with pytest.raises(TileIRError, match="launch without such clusters"):
        interpreter.run(module, "vocab_logsumexp", (1, 1, 8), [x, out])


def test_a_grid_that_is_not_whole_clusters_is_refused():
    x = np.zeros((1, 4096), np.float32)
    out = np.zeros((1,), np.float32)
    module = _layout(llm_ops.vocab_logsumexp, (x, out, 1024), (1,)).module
    with pytest.raises(TileIRError, match="not a whole number of clusters"):
        interpreter.run(module, "vocab_logsumexp", (1, 1, 4), [x, out])


@ct.kernel
def chunked_layernorm(x, y, C: ct.Constant[int]):
    """Three passes over a long row, C columns at a time: a mean, a variance about it,
    the normalized row; two reductions to gather, one after the other."""
    row = ct.bid(0)
    n = x.shape[1]
    chunks = ct.num_tiles(x, axis=1, shape=(1, C))
    s = ct.zeros((1,), dtype=ct.float32)
    for k in range(chunks):
        s = s + ct.sum(ct.load(x, index=(row, k), shape=(1, C),
                               padding_mode=ct.PaddingMode.ZERO), axis=1)
    mean = ct.reshape(s / n, (1, 1))
    v = ct.zeros((1,), dtype=ct.float32)
    for k in range(chunks):
        t = ct.load(x, index=(row, k), shape=(1, C), padding_mode=ct.PaddingMode.ZERO)
        cols = ct.arange(C, dtype=ct.int32)[None, :] + k * C
        d = ct.where(cols < n, t - mean, 0.0)
        v = v + ct.sum(d * d, axis=1)
    inv = ct.reshape(ct.rsqrt(v / n + 1e-5), (1, 1))
    for k in range(chunks):
        t = ct.load(x, index=(row, k), shape=(1, C), padding_mode=ct.PaddingMode.ZERO)
        ct.store(y, index=(row, k), tile=(t - mean) * inv)


def test_two_gathers_in_a_row_in_the_interpreter_and_the_simulator():
    """Each of the first two loops ends in a gather; the simulator runs the cluster's
    blocks side by side through both (the second gather waits on the first one's
    closing barrier first)."""
    from tileir.kernel import hardware_grid
    from tileir.sim import simulate
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, 1000)) + 3).astype(np.float32)
    ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    y = np.full_like(x, np.nan)
    assert _run_rewritten(chunked_layernorm, (x, y, 128), 2) == 8
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    y = np.full_like(x, np.nan)
    ck = chunked_layernorm.compile((x, y, 128), stage="gpu", target="sm_90a", grid=(2,),
                                   sm_count=SM)
    assert ck.meta["cluster"] == [1, 1, 8]
    assert str(ck.module).count("mapa.shared::cluster") >= 2
    simulate(ck, hardware_grid(ck.meta, (2, 1, 1)), (x, y, 128))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


GATHER_IN_A_BRANCH = """
func.func @k(%out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.cluster = array<i64: 1, 1, 2>} {
  %c0 = arith.constant 0 : i32
  %b = "tile.bid"() {axis = 2 : i64} : () -> i32
  %first = arith.cmpi eq, %b, %c0 : i32
  scf.if %first {
    %v = arith.constant dense<1.0> : tensor<1xf32>
    %g = "tile.cluster_gather"(%v) {axis = 2 : i64, size = 2 : i64} : (tensor<1xf32>) -> tensor<2x1xf32>
  }
  return
}
"""


def test_a_gather_some_blocks_never_reach_is_an_error_not_a_hang():
    import time
    from tileir.dialect import context, parse
    with context():
        module = parse(GATHER_IN_A_BRANCH)
        start = time.monotonic()
        with pytest.raises(TileIRError, match="ended without reaching this gather"):
            interpreter.run(module, "k", (1, 1, 2), [np.zeros(1, np.float32)])
        assert time.monotonic() - start < 30
