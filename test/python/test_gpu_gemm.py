"""GPU tests of the tensor-core path against a float32/float64 torch reference.

Marked `gpu`: skipped cleanly without an NVIDIA GPU.  The plain cuTile-style GEMM
(one output tile per block, a K loop of two loads and an `mma`) and its variants:
bf16/fp16, fp8 (sm_90a), f32 through tf32; ragged M, N, K (1, 17, 127, 4097);
B transposed (a weight held as (N, K)); batched; a fused epilogue; unaligned
arrays (the synchronous path); and the sm_80 code (mma.sync, cp.async) run from
its PTX through the driver's JIT.  Fresh random inputs, outputs poisoned with NaN.
"""

from __future__ import annotations

import importlib

import pytest
from conftest import lazy_import

import tileir as ct
from tileir.runtime import launcher

from test_tensor_cores import (attention, batched_tiles, bgemm, gemm, gemm_f16_acc, gemm_i32,
                               gemm_nt, gemm_nt_fast_acc, gemm_widened_a, linear_silu,
                               lower_gemm)

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")


def _rel_err(out, ref) -> float:
    assert not out.isnan().any(), "some output elements were not written"
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


# relative Frobenius error: one rounding of the output (bf16: 2^-9) plus the f32 sums
TOL = {"bfloat16": 8e-3, "float16": 2e-3, "float32": 3e-3,   # f32: tf32 inputs
       "float8_e4m3fn": 6e-2}

def tol(dtype):
    """TOL of a torch dtype."""
    return TOL[str(dtype).removeprefix("torch.")]
SIZES = [1, 17, 127, 256, 4097]


def _run(kernel, a, b, out_dtype, tiles, nt=False, grid=None):
    m, n = a.shape[0], (b.shape[0] if nt else b.shape[1])
    c = torch.full((m, n), float("nan"), device="cuda", dtype=out_dtype)
    grid = grid or (ct.cdiv(m, tiles[0]), ct.cdiv(n, tiles[1]))
    ct.launch(None, grid, kernel, (a, b, c, *tiles))
    torch.cuda.synchronize()
    ref = a.double() @ (b.double().t() if nt else b.double())
    return c, ref


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("m", SIZES)
@pytest.mark.parametrize("n,k", [(17, 4097), (256, 64), (127, 1), (4097, 127)])
def test_plain_gemm_ragged(dtype, m, n, k):
    dtype = getattr(torch, dtype)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c, ref = _run(gemm, a, b, dtype, (128, 128, 64))
    assert _rel_err(c, ref) < tol(dtype)


@pytest.mark.parametrize("tiles", [(64, 64, 32), (128, 128, 64), (128, 256, 64), (64, 128, 64)])
@pytest.mark.parametrize("nt", [False, True])
def test_tile_shapes_and_transposed_weights(tiles, nt):
    m, n, k = 1000, 777, 1000
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) if nt else \
        torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c, ref = _run(gemm_nt if nt else gemm, a, b, torch.bfloat16, tiles, nt=nt)
    assert _rel_err(c, ref) < tol(torch.bfloat16)


@pytest.mark.parametrize("warps,tiles", [(8, (128, 128, 64)), (8, (128, 256, 64)),
                                         (4, (64, 128, 64))])
def test_warp_specialized_gemm(warps, tiles):
    kernel = ct.kernel(gemm.fn, warp_specialize=True, num_warps=warps)
    a = torch.randn(1000, 4097, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4097, 777, device="cuda", dtype=torch.bfloat16)
    c, ref = _run(kernel, a, b, torch.bfloat16, tiles)
    assert _rel_err(c, ref) < tol(torch.bfloat16)


def test_unaligned_operands_take_the_synchronous_path():
    big = torch.randn(300, 201, device="cuda", dtype=torch.bfloat16)
    a = big[:, 1:]                                   # base and rows not 16-byte aligned
    b = torch.randn(200, 136, device="cuda", dtype=torch.bfloat16)
    c, ref = _run(gemm, a, b, torch.bfloat16, (128, 128, 64))
    assert _rel_err(c, ref) < tol(torch.bfloat16)


def test_fp8_gemm():
    a = torch.randn(1000, 512, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(777, 512, device="cuda").to(torch.float8_e4m3fn)
    c, ref = _run(gemm_nt, a, w, torch.bfloat16, (128, 128, 64), nt=True)
    assert _rel_err(c, ref) < tol(torch.bfloat16)


@pytest.mark.parametrize("dtype", ["float16", "float8_e4m3fn"])
def test_f16_accumulator_gemm(dtype):
    """mma into a float16 accumulator (cuTile allows it for f16 and fp8 operands): f32
    sums on the tensor cores, one rounding to f16 per K tile; ragged M, N and K."""
    dtype = getattr(torch, dtype)
    a = (torch.randn(1000, 520, device="cuda") * 0.5).to(dtype)
    b = (torch.randn(520, 776, device="cuda") * 0.5).to(dtype)
    c, ref = _run(gemm_f16_acc, a, b, torch.float16, (128, 128, 64))
    assert _rel_err(c, ref) < 4e-3


@pytest.mark.parametrize("fast", [False, True])
def test_e4m3_times_e5m2_gemm(fast):
    """Mixed fp8 operands, not promoted: one QGMMA of the two types.  The fp8 tensor
    cores sum with fewer bits than f32 (H100, 2026-11-26, K 4096: 1.1e-3 relative with
    the sums kept there across the loop, `use_fast_acc=True`; 1.0e-4 with each tile's
    K summed there and the rest in f32, cuTile's default)."""
    a = torch.randn(1000, 4096, device="cuda").to(torch.float8_e4m3fn)
    w = (torch.randn(777, 4096, device="cuda") * 4).to(torch.float8_e5m2)
    c, ref = _run(gemm_nt_fast_acc if fast else gemm_nt, a, w, torch.float32,
                  (128, 128, 64), nt=True)
    err = _rel_err(c, ref)
    print(f"fp8 e4m3 x e5m2, K 4096, {'fast' if fast else 'f32'} sums: {err:.2e}")
    assert err < (4e-3 if fast else 4e-4), err


@pytest.mark.parametrize("da,db", [("uint8", "uint8"), ("int8", "uint8"),
                                   ("uint8", "int8"), ("int8", "int8")])
def test_int8_products_are_exact(da, db):
    """cuTile's int8 / uint8 products into int32, every pairing: exact (uint8 through
    the signed product and row or column sums); ragged M, N, K."""
    da = getattr(torch, da)
    db = getattr(torch, db)
    def draw(shape, d):
        info = torch.iinfo(d)
        return torch.randint(info.min, info.max + 1, shape, device="cuda").to(d)
    a, b = draw((300, 517), da), draw((517, 170), db)
    c = torch.full((300, 170), -3, device="cuda", dtype=torch.int32)
    ct.launch(None, (ct.cdiv(300, 64), ct.cdiv(170, 64)), gemm_i32, (a, b, c, 64, 64, 32))
    torch.cuda.synchronize()
    assert torch.equal(c.cpu().long(), a.cpu().long() @ b.cpu().long())


@pytest.mark.parametrize("batch", [1, 2])
def test_batched_mma_tiles(batch):
    """3-d mma tiles (a batch of 1 too; tile extents are powers of two): one 2-d product
    a batch on the tensor cores."""
    a = torch.randn(batch, 300, 96, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(batch, 96, 64, device="cuda", dtype=torch.bfloat16)
    c = torch.full((batch, 300, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    ct.launch(None, (ct.cdiv(300, 64),), batched_tiles, (a, b, c, batch, 64, 64, 32))
    torch.cuda.synchronize()
    assert _rel_err(c, a.double() @ b.double()) < tol(torch.bfloat16)


def test_a_widened_operand_feeds_the_tensor_cores():
    """f16 A widened to f32 in registers times f32 B: tf32 wgmma with A staged through
    K-major shared memory (wgmma takes no tf32 A from registers)."""
    a = torch.randn(1000, 300, device="cuda", dtype=torch.float16)
    b = torch.randn(300, 200, device="cuda")
    c = torch.full((1000, 200), float("nan"), device="cuda")
    ct.launch(None, (ct.cdiv(1000, 64), ct.cdiv(200, 64)), gemm_widened_a, (a, b, c, 64, 64, 32))
    torch.cuda.synchronize()
    assert _rel_err(c, a.double() @ b.double()) < tol(torch.float32)


@pytest.mark.parametrize("nt", [False, True])
def test_tf32_gemm(nt):
    a = torch.randn(500, 300, device="cuda")
    b = torch.randn(200, 300, device="cuda") if nt else torch.randn(300, 200, device="cuda")
    c, ref = _run(gemm_nt if nt else gemm, a, b, torch.float32, (64, 64, 32), nt=nt)
    assert _rel_err(c, ref) < tol(torch.float32)


def test_batched_gemm():
    a = torch.randn(5, 300, 200, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(5, 200, 170, device="cuda", dtype=torch.bfloat16)
    c = torch.full((5, 300, 170), float("nan"), device="cuda", dtype=torch.bfloat16)
    ct.launch(None, (ct.cdiv(300, 64), ct.cdiv(170, 64), 5), bgemm, (a, b, c, 64, 64, 32))
    torch.cuda.synchronize()
    assert _rel_err(c, a.double() @ b.double()) < tol(torch.bfloat16)


def test_fused_epilogue():
    x = torch.randn(1000, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(777, 512, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(777, device="cuda", dtype=torch.bfloat16)
    y = torch.full((1000, 777), float("nan"), device="cuda", dtype=torch.bfloat16)
    ct.launch(None, (ct.cdiv(1000, 128), ct.cdiv(777, 128)), linear_silu,
              (x, w, bias, y, 0.5, 128, 128, 64))
    torch.cuda.synchronize()
    h = 0.5 * (x.double() @ w.double().t()) + bias.double()
    assert _rel_err(y, h / (1 + torch.exp(-h))) < tol(torch.bfloat16)


@pytest.mark.parametrize("dtype,tiles", [("bfloat16", (128, 128, 64)),
                                         ("float32", (64, 64, 32))])    # f32: tf32
@pytest.mark.parametrize("nt", [False, True])
def test_sm80_code_through_the_ptx_jit(nt, dtype, tiles):
    """The Ampere path (cp.async ring, ldmatrix, mma.sync m16n8k16; m16n8k8 for f32 as
    tf32) compiled for sm_80 and run from its PTX, which the driver compiles for this
    GPU."""
    dtype = getattr(torch, dtype)
    m, n, k = 300, 200, 520
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(n, k, device="cuda", dtype=dtype) if nt else \
        torch.randn(k, n, device="cuda", dtype=dtype)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    kernel = gemm_nt if nt else gemm
    args = (a, b, c, *tiles)
    ck = kernel.compile(args, target="sm_80")
    assert ".target sm_80" in ck.artifacts["ptx"]
    assert "mma.sync.aligned.m16n8k" + ("8" if dtype == torch.float32 else "16") in \
        ck.artifacts["ptx"]
    launcher.launch(ck.artifacts["ptx"].encode(), ck.meta,
                    (ct.cdiv(m, tiles[0]), ct.cdiv(n, tiles[1]), 1),
                    [args[i] for i in ck.runtime_params])
    torch.cuda.synchronize()
    ref = a.double() @ (b.double().t() if nt else b.double())
    assert _rel_err(c, ref) < tol(dtype)


def test_attention_with_p_in_registers():
    seq, d = 1000, 64
    q, k, v = (torch.randn(seq, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.full((seq, d), float("nan"), device="cuda")
    ct.launch(None, (ct.cdiv(seq, 64),), attention, (q, k, v, o, 0.125, 64, 64, d))
    torch.cuda.synchronize()
    s = q.double() @ k.double().t() * 0.125
    # padded keys past the end score 0: the kernel sees ceil(1000 / 64) * 64 keys
    pad = ct.cdiv(seq, 64) * 64 - seq
    s_pad = torch.cat([s, torch.zeros(seq, pad, device="cuda", dtype=torch.float64)], 1)
    v_pad = torch.cat([v.double(), torch.zeros(pad, d, device="cuda", dtype=torch.float64)])
    ref = torch.softmax(s_pad, -1) @ v_pad
    assert _rel_err(o, ref) < 1e-2


def test_cached_launch_does_no_compile_work(monkeypatch):
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.full((256, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    k = ct.kernel(gemm.fn)
    ct.launch(None, (2, 2), k, (a, b, c, 128, 128, 64))
    kernel_module = importlib.import_module("tileir.kernel")   # the module, not ct.kernel

    def refuse(*args, **kwargs):
        raise AssertionError("a cached launch compiled")

    monkeypatch.setattr(kernel_module.Kernel, "_build", refuse)
    for _ in range(3):
        ct.launch(None, (2, 2), k, (a, b, c, 128, 128, 64))
    torch.cuda.synchronize()
    assert _rel_err(c, a.double() @ b.double()) < tol(torch.bfloat16)



@pytest.mark.parametrize("m,n,retile", [
    (4096, 2300, None),          # 32 x 18 blocks: retiled 128 x 256 by the launcher, ragged N
    (64, 6144, None),            # a decode grid (1 x 48): retiled 128 x 64
    (300, 1000, (1, 2)),         # asked for: 3 x 8 blocks run as 3 x 4
    (70, 1000, (1, 0.25)),       # asked for: 128 x 32 tiles, 32 blocks along N
])
def test_retiled_gemm_matches_torch(m, n, retile):
    kernel = gemm_nt if retile is None else ct.kernel(gemm_nt.fn, retile=retile)
    a = torch.randn(m, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, 256, device="cuda", dtype=torch.bfloat16)
    c, ref = _run(kernel, a, w, torch.bfloat16, (128, 128, 64), nt=True)
    assert _rel_err(c, ref) < tol(torch.bfloat16)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("nt", [True, False])
@pytest.mark.parametrize("m,n,k", [(4096, 2296, 1000), (2048, 8192, 4104), (4096, 4096, 64)])
def test_cluster_pair_gemm_matches_torch(dtype, nt, m, n, k):
    """The plain source on a grid even along M and 4+ blocks an SM: retiled 128 x 256,
    persistent, neighbouring row tiles in (2, 1, 1) clusters that multicast the B tile
    they share (its halves, one from each block); ragged N and K (rows of 16-byte
    multiples: TMA copies them)."""
    dtype = getattr(torch, dtype)
    from tileir.runtime import driver
    kernel = gemm_nt if nt else gemm
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(*((n, k) if nt else (k, n)), device="cuda", dtype=dtype)
    grid = (ct.cdiv(m, 128), ct.cdiv(n, 128))
    ck = kernel.compile((a, b, torch.empty(m, n, device="cuda", dtype=dtype), 128, 128, 64),
                        target="sm_90a", grid=grid,
                        sm_count=driver.sm_count(driver.current_device()))
    assert ck.meta["cluster"] == [2, 1, 1] and "multicast" in ck.artifacts["gpu"]
    c, ref = _run(kernel, a, b, dtype, (128, 128, 64), nt=nt)
    assert _rel_err(c, ref) < tol(dtype)


def test_cluster_pair_gemm_with_a_fused_epilogue():
    """silu(alpha * x @ w^T + bias) in cluster pairs: the epilogue after a shared ring."""
    m, n, k = 4096, 3072, 1000
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    ct.launch(None, (ct.cdiv(m, 128), ct.cdiv(n, 128)), linear_silu,
              (x, w, bias, y, 0.5, 128, 128, 64))
    torch.cuda.synchronize()
    h = 0.5 * (x.double() @ w.double().t()) + bias.double()
    assert _rel_err(y, h * torch.sigmoid(h)) < tol(torch.bfloat16)


@pytest.mark.parametrize("ws", [False, True])
@pytest.mark.parametrize("m,n,k", [(4096, 2300, 1000), (1000, 777, 4097), (300, 8192, 256)])
def test_persistent_gemm_matches_torch(ws, m, n, k):
    """One block per SM walking the (retiled) grid's tiles; fresh NaN-poisoned outputs."""
    kernel = ct.kernel(gemm_nt.fn, persistent=True, warp_specialize=ws)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c, ref = _run(kernel, a, w, torch.bfloat16, (128, 128, 64), nt=True)
    assert _rel_err(c, ref) < tol(torch.bfloat16)


@pytest.mark.parametrize("m,n,k,options", [
    (2000, 1800, 1000, {"persistent": True, "retile": False}),   # 240 tiles, all split
    (1111, 3333, 777, {"persistent": True, "retile": False}),    # ragged everywhere
    (4096, 4096, 4097, {}),          # the plain source as launched: 128 x 256, ragged K
    (8192, 6144, 513, {}),           # 11 whole waves, the last 216 tiles split
])
def test_stream_k_gemm_matches_torch(m, n, k, options):
    """stream_k=True: the last waves' tiles split along K between neighbouring blocks
    (a partial sum handed over in the stream's workspace); fresh NaN-poisoned
    outputs, and the same product without it."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    on = ct.kernel(gemm_nt.fn, stream_k=True, **options)
    off = ct.kernel(gemm_nt.fn, **options) if options else gemm_nt
    c, ref = _run(on, a, w, torch.bfloat16, (128, 128, 64), nt=True)
    assert _rel_err(c, ref) < tol(torch.bfloat16)
    c2, _ = _run(off, a, w, torch.bfloat16, (128, 128, 64), nt=True)
    assert _rel_err(c2, ref) < tol(torch.bfloat16)
    import numpy as np
    from test_tensor_cores import BF16
    grid = (ct.cdiv(m, 128), ct.cdiv(n, 128))
    specs = [np.empty(t.shape, BF16) for t in (a, w, c)]
    ck = on.compile((*specs, 128, 128, 64), target="sm_90a", grid=grid,
                    sm_count=torch.cuda.get_device_properties(0).multi_processor_count)
    assert ck.meta.get("workspace"), "stream-K did not apply"


def test_stream_k_gemms_on_two_streams_and_in_a_graph():
    """Two streams' launches overlap, each with its own workspace; a launch captured
    in a CUDA graph on a stream not seen before (its workspace made during the
    capture) replays correctly."""
    kernel = ct.kernel(gemm_nt.fn, persistent=True, retile=False, stream_k=True)
    m, n, k = 2000, 1800, 1000
    a = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    w = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    c = [torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
         for _ in range(3)]
    grid = (ct.cdiv(m, 128), ct.cdiv(n, 128))
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    for _ in range(5):
        for i, s in enumerate(streams):
            with torch.cuda.stream(s):
                ct.launch(None, grid, kernel, (a[i], w[i], c[i], 128, 128, 64))
    torch.cuda.synchronize()
    for i in range(2):
        assert _rel_err(c[i], a[i].double() @ w[i].double().t()) < tol(torch.bfloat16)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ct.launch(None, grid, kernel, (a[2], w[2], c[2], 128, 128, 64))
    for _ in range(3):
        c[2].fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert _rel_err(c[2], a[2].double() @ w[2].double().t()) < tol(torch.bfloat16)


@pytest.mark.parametrize("tiles,warps", [((64, 64, 64), 4), ((128, 128, 128), 8)])
def test_persistent_ring_across_tiles_of_different_lengths(tiles, warps):
    """Tile row i sums K tiles 0..i: blocks move between tiles of 1 to 12 trips while
    their ring runs on (the next tile's first copies in flight during this tile's
    last iterations)."""
    bm = tiles[0]
    rows = 12
    m, n = rows * bm, 1000
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    kernel = ct.kernel(lower_gemm.fn, persistent=True, retile=False, num_warps=warps)
    c, _ = _run(kernel, a, b, torch.bfloat16, tiles)
    mask = torch.kron(torch.tril(torch.ones(rows, rows, device="cuda", dtype=torch.float64)),
                      torch.ones(bm, bm, device="cuda", dtype=torch.float64))
    ref = (a.double() * mask) @ b.double()
    assert _rel_err(c, ref) < tol(torch.bfloat16)


@pytest.mark.parametrize("m", [1, 16, 63, 64, 65])
@pytest.mark.parametrize("n,k", [(512, 1000), (6144, 4096), (1000, 4097)])
def test_decode_gemm_on_the_tiles_of_its_launch_matches_torch(m, n, k):
    """Decode launches of the plain 128 x 128 x 64 source: rows shrunk to 64 (m <= 64),
    N narrowed and K lengthened for grids smaller than the GPU, A's TMA box cut to
    the rows that exist, a warp-specialized ring; fresh NaN-poisoned outputs."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c, ref = _run(gemm_nt, a, w, torch.bfloat16, (128, 128, 64), nt=True)
    assert _rel_err(c, ref) < tol(torch.bfloat16)
