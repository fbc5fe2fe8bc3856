"""GPU tests of tile-cluster-rows: reducing loops of a small grid dealt to a cluster's blocks.

Decode-sized launches (1 to 64 rows) of kernels that stream a long row in chunks:
the vocabulary softmax and log-sum-exp of tileir.examples.llm_ops, and loops
carrying a plain sum, max and min.  Fresh random inputs, outputs poisoned with
NaN, ragged widths (fewer chunks than blocks in a cluster, a partial last chunk),
a float64 reference.  Each launch checks what the compiler did: on sm_90a a small
grid's kernel is rewritten (`tile-cluster-rows` in its grid rewrites, a cluster
in its metadata), a large grid's is not.
"""

import pytest
from conftest import lazy_import

import tileir as ct
from tileir.examples import llm_ops

from test_cluster_rows import row_stats     # sum, max and min of each row, C at a time

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")

DTYPES = {"f32": "float32", "bf16": "bfloat16"}
TOL = {"float32": (1e-5, 1e-6), "bfloat16": (1.6e-2, 1e-5)}

def tol(dtype):
    """TOL of a torch dtype."""
    return TOL[str(dtype).removeprefix("torch.")]


def _compiled(kernel, args, grid):
    """The CompiledKernel a launch of `kernel` over `grid` with `args` runs."""
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    return kernel.compile(args, target="sm_90a", grid=grid, sm_count=sm)


def _clustered(kernel, args, grid) -> bool:
    meta = _compiled(kernel, args, grid).meta
    return "tile-cluster-rows" in (meta.get("grid_rewrites") or []) and bool(meta.get("cluster"))


def _rows(rows, n, dtype):
    return torch.randn(rows, n, device="cuda", dtype=dtype) * 3


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 3, 16, 64])
@pytest.mark.parametrize("n", [128256, 5000, 300])
def test_vocab_softmax_and_logsumexp_at_decode_sizes(dtype, rows, n):
    d = getattr(torch, DTYPES[dtype])
    x = _rows(rows, n, d)
    y = torch.full_like(x, float("nan"))
    lse = torch.full((rows,), float("nan"), device="cuda")
    ct.launch(None, (rows,), llm_ops.vocab_softmax, (x, y, 1024))
    ct.launch(None, (rows,), llm_ops.vocab_logsumexp, (x, lse, 1024))
    torch.cuda.synchronize()
    ref = torch.softmax(x.double(), 1)
    rtol, atol = tol(d)
    assert not y.isnan().any() and not lse.isnan().any()
    torch.testing.assert_close(y.double(), ref.to(d).double(), rtol=rtol, atol=atol)
    torch.testing.assert_close(lse.double(), torch.logsumexp(x.double(), 1),
                               rtol=1e-5, atol=1e-5)
    assert _clustered(llm_ops.vocab_logsumexp, (x, lse, 1024), (rows,))
    assert _clustered(llm_ops.vocab_softmax, (x, y, 1024), (rows,))


def test_a_large_grid_keeps_one_block_a_row_for_one_pass():
    x = _rows(512, 4096, torch.float32)
    lse = torch.full((512,), float("nan"), device="cuda")
    ct.launch(None, (512,), llm_ops.vocab_logsumexp, (x, lse, 1024))
    torch.cuda.synchronize()
    torch.testing.assert_close(lse.double(), torch.logsumexp(x.double(), 1),
                               rtol=1e-5, atol=1e-5)
    assert not _clustered(llm_ops.vocab_logsumexp, (x, lse, 1024), (512,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,n", [(300, 20000), (1000, 128256 // 4 + 3)])
def test_a_large_grid_deals_a_rereading_softmax_to_clusters_of_four(dtype, rows, n):
    d = getattr(torch, DTYPES[dtype])
    x = _rows(rows, n, d)
    y = torch.full_like(x, float("nan"))
    ct.launch(None, (rows,), llm_ops.vocab_softmax, (x, y, 2048))
    torch.cuda.synchronize()
    rtol, atol = tol(d)
    assert not y.isnan().any()
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), 1).to(d).double(),
                               rtol=rtol, atol=atol)
    meta = _compiled(llm_ops.vocab_softmax, (x, y, 2048), (rows,)).meta
    assert meta["cluster"] == [1, 1, 4]


@pytest.mark.parametrize("rows,n", [(1, 100000), (5, 3000), (16, 640), (2, 1)])
def test_sum_max_and_min_loops_at_decode_sizes(rows, n):
    x = _rows(rows, n, torch.float32)
    out = torch.full((rows, 3), float("nan"), device="cuda")
    ct.launch(None, (rows,), row_stats, (x, out, 512))
    torch.cuda.synchronize()
    x64 = x.double()
    # padding zeros take part in max and min of a ragged last chunk, as written
    pad = (-n) % 512
    xp = torch.nn.functional.pad(x64, (0, pad)) if pad else x64
    ref = torch.stack([x64.sum(1), xp.max(1).values, xp.min(1).values], 1)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-4)
    assert _clustered(row_stats, (x, out, 512), (rows,))


def test_cluster_launches_replay_in_a_cuda_graph():
    x = _rows(4, 50000, torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    ct.launch(None, (4,), llm_ops.vocab_softmax, (x, y, 2048))      # compile outside
    torch.cuda.synchronize()
    y.fill_(float("nan"))
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            ct.launch(s.cuda_stream, (4,), llm_ops.vocab_softmax, (x, y, 2048))
    g.replay()
    torch.cuda.synchronize()
    ref = torch.softmax(x.double(), 1).to(torch.bfloat16).double()
    torch.testing.assert_close(y.double(), ref, rtol=1.6e-2, atol=1e-5)
