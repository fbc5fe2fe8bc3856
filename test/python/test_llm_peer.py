"""The peer all-reduce of tileir.llm (tileir.llm.peer): `reduce_norm` in the interpreter,
every rank's run one after another (`peer.simulate`), against a float64 reference, and
its sm_90a code: the flags' compare-and-swaps at system scope by one thread of a block,
after the wait for the kernel before, no spills.  The two-GPU run is in test_llm_tp.py
(`test_nccl_two_gpus_match_one`)."""

import re

import ml_dtypes
import numpy as np
import pytest

from tileir.llm import peer


def _reference(parts, residual, g, eps):
    want = residual.astype(np.float64) + sum(p.astype(np.float64) for p in parts)
    rounded = want.astype(residual.dtype).astype(np.float64)
    return want, rounded / np.sqrt((rounded ** 2).mean(1, keepdims=True) + eps) * g


@pytest.mark.parametrize("ranks,rows,width,dtype", [
    (2, 5, 300, np.float32), (3, 1, 4096, np.float32), (4, 9, 257, np.float32),
    (2, 3, 7168, ml_dtypes.bfloat16)])
def test_every_rank_gets_the_same_sum_and_norm(rng, ranks, rows, width, dtype):
    parts = [rng.standard_normal((rows, width)).astype(dtype) for _ in range(ranks)]
    residual = rng.standard_normal((rows, width)).astype(dtype)
    g = (1 + 0.1 * rng.standard_normal(width)).astype(dtype)
    eps = 1e-5
    outs, before, after = peer.simulate(parts, residual, g, eps)
    want, ref = _reference(parts, residual, g.astype(np.float64), eps)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    for res, normed in outs:
        np.testing.assert_array_equal(res, outs[0][0])        # the same bits on every rank
        np.testing.assert_allclose(res.astype(np.float64), want, rtol=tol, atol=tol)
        np.testing.assert_allclose(normed.astype(np.float64), ref, rtol=tol, atol=tol)
    for b, a in zip(before, after):                           # every flag consumed or re-set
        np.testing.assert_array_equal(a, b)


def test_without_a_norm_only_the_residual(rng):
    parts = [rng.standard_normal((4, 96)).astype(np.float32) for _ in range(2)]
    residual = rng.standard_normal((4, 96)).astype(np.float32)
    outs, _, _ = peer.simulate(parts, residual, None, 0.0)
    want, _ = _reference(parts, residual, np.ones(96), 0.0)
    for res, normed in outs:
        assert normed is None
        np.testing.assert_allclose(res, want, rtol=1e-6, atol=1e-6)


def test_a_rank_that_has_not_arrived_holds_the_others(rng):
    # rank 0's flags say nothing of rank 1: run alone it would spin, so the interpreter's
    # run of a rank whose peers' flags are set consumes exactly those flags
    parts = [rng.standard_normal((2, 32)).astype(np.float32) for _ in range(2)]
    flags = [np.zeros((2, 2), np.int32) for _ in range(2)]
    flags[0][1] = 1                                        # rank 1 arrived at rank 0
    res = np.zeros((2, 32), np.float32)
    import tileir as ct
    ct.launch(None, (2,), peer.reduce_norm,
              peer.launch_args(parts, flags, 0, res, None, None, 0.0))
    np.testing.assert_array_equal(flags[0], 0)            # consumed
    np.testing.assert_array_equal(flags[1], [[1, 1], [0, 0]])   # rank 0 arrived at rank 1


def test_refuses_what_it_does_not_take():
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(ValueError, match="1 to 4 ranks"):
        peer.launch_args([x] * 5, [np.zeros((5, 2), np.int32)] * 5, 0, x, None, None, 0.0)
    big = np.zeros((peer.ROWS + 1, 8), np.float32)
    with pytest.raises(ValueError, match=f"at most {peer.ROWS} rows"):
        peer.launch_args([big] * 2, [np.zeros((2, 1), np.int32)] * 2, 0, big, None, None, 0.0)


def _sm90a(rows, width, ranks, rank, eps):
    """reduce_norm compiled for sm_90a at bf16 rows of `width`, with a norm: (its
    CompiledKernel, its PTX)."""
    bf = ml_dtypes.bfloat16
    parts = [np.zeros((rows, width), bf) for _ in range(ranks)]
    flags = [np.zeros((ranks, rows), np.int32) for _ in range(ranks)]
    residual, normed = np.zeros((rows, width), bf), np.zeros((rows, width), bf)
    args = peer.launch_args(parts, flags, rank, residual, np.zeros(width, bf), normed, eps)
    ck = peer.reduce_norm.compile(args, target="sm_90a", grid=(rows,), sm_count=132)
    ptx = ck.artifacts["ptx"]
    return ck, ptx.decode() if isinstance(ptx, bytes) else ptx


def test_sm90a_code_signals_at_system_scope_after_the_wait():
    ck, ptx = _sm90a(peer.ROWS, 4096, 2, 0, 1e-5)
    atoms = re.findall(r"atom\.(\w+)\.(\w+)\.global\.cas\.b32", ptx)
    assert sorted(set(atoms)) == [("acquire", "sys"), ("release", "sys")], atoms
    first = min(ptx.index(f"atom.{o}.sys") for o in ("acquire", "release"))
    assert ptx.index("griddepcontrol.wait") < first     # the GEMM's partial is complete
    # one thread of the block swaps (tid 0), the block learns the result through shared
    # memory behind a barrier
    assert re.search(r"setp\.(?:eq|ne)\.b32\s+%p\d+, %r\d+, 0;", ptx)
    assert "bar.sync" in ptx
    assert ck.spills == (0, 0), ck.ptxas_report


def test_deepseek_width_reads_peers_without_tma():
    # 7168 wide (a 8192 tile): the partials are read with plain vector loads (the peers'
    # memory is mapped, not described to a tensor map), no spills
    n = 4
    ck, ptx = _sm90a(64, 7168, n, 1, 1e-6)
    assert "cp.async.bulk.tensor" not in ptx
    # one arrival and one wait a rank (the rank is a run-time value: its own skipped)
    assert len(re.findall(r"atom\.release\.sys", ptx)) == n
    assert len(re.findall(r"atom\.acquire\.sys", ptx)) == n
    assert ck.spills == (0, 0), ck.ptxas_report


@pytest.mark.gpu
def test_two_ranks_on_one_gpu_streams(rng):
    """The protocol on hardware without a second GPU: two "ranks" on two streams of one
    GPU, their buffers plain device memory, each rank's kernel spinning on the flags
    the other's kernel sets, 40 rounds through the two slots with a new partial a
    round (written on the rank's stream first, as the GEMM would): every round's
    residual and norm against float64, the same bits on both ranks."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from tileir.llm.backend import Backend
    be = Backend("cuda", "bfloat16")
    n, rows, width, eps = 2, 37, 4096, 1e-5
    bf = torch.bfloat16
    parts = [[torch.full((peer.ROWS, width), float("nan"), dtype=bf, device="cuda")
              for _ in range(n)] for _ in range(peer.SLOTS)]
    flags = [[torch.zeros((n, peer.ROWS), dtype=torch.int32, device="cuda")
              for _ in range(n)] for _ in range(peer.SLOTS)]
    g = torch.tensor(1 + 0.1 * rng.standard_normal(width), dtype=bf, device="cuda")
    residual0 = torch.tensor(rng.standard_normal((rows, width)), dtype=bf, device="cuda")
    residuals = [residual0.clone() for _ in range(n)]
    streams = [torch.cuda.Stream() for _ in range(n)]
    want = residual0.double()
    torch.cuda.synchronize()
    for k in range(40):
        s = k % peer.SLOTS
        new = [torch.tensor(rng.standard_normal((rows, width)), dtype=bf, device="cuda")
               for _ in range(n)]
        torch.cuda.synchronize()
        want = (want + sum(p.double() for p in new)).to(bf).double()
        normed = [torch.full((rows, width), float("nan"), dtype=bf, device="cuda")
                  for _ in range(n)]
        for r in range(n):
            with torch.cuda.stream(streams[r]):
                parts[s][r][:rows].copy_(new[r])
                args = peer.launch_args([p[:rows] for p in parts[s]], flags[s], r,
                                        residuals[r], g, normed[r], eps)
                be._launch((rows,), peer.reduce_norm, args)
        torch.cuda.synchronize()
        ref = want / want.pow(2).mean(1, keepdim=True).add(eps).sqrt() * g.double()
        for r in range(n):
            assert torch.equal(residuals[r], residuals[0]), k
            err = (residuals[r].double() - want).abs().max().item()
            assert err <= 1e-2 * want.abs().max().item(), (k, r, err)
            nerr = (normed[r].double() - ref).abs().max().item()
            assert nerr <= 3e-2 * ref.abs().max().item(), (k, r, nerr)
    for s in range(peer.SLOTS):                        # every flag consumed
        assert all(int(f.abs().sum()) == 0 for f in flags[s])
