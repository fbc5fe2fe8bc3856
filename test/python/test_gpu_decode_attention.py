"""GPU tests of paged decode attention and MLA decode (tileir.examples.decode_attention,
tileir.examples.mla_decode) against float32 torch attention over each sequence's
gathered pages: batch, query / KV heads (MHA, GQA, MQA), Tq = 1..8 new tokens (causal
among themselves), pages of 16 and 64 slots, ragged lengths, split-KV (chosen and
forced; the split contexts merged in the decode kernel or by a combine launch), bf16
and fp16 (decode: float32 too, on tf32), and decode captured in a CUDA graph and
replayed (the split-KV tickets zero after each replay, the output bit for bit the
same on a replay of the same inputs).  Fresh random inputs,
NaN-poisoned outputs, and NaN in the decode cache's unused slots (the MLA cache holds
stale finite tokens there: its contract).  Marked `gpu`: skipped cleanly without
one."""

from __future__ import annotations

import math

import pytest
from conftest import lazy_import

import tileir as ct
from tileir.examples import decode_attention as dec
from tileir.examples import mla_decode as mla

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")


@pytest.fixture(autouse=True)
def _gpu():
    from tileir.runtime.driver import has_gpu
    if not (has_gpu() and torch.cuda.is_available()):
        pytest.skip("no NVIDIA GPU")


def _table(lens, page):
    """A block table of shuffled pages (-1 past each sequence's pages) and the pool's size."""
    used = [math.ceil(n / page) for n in lens]
    num = sum(used) + 3
    ids = torch.randperm(num, device="cuda", dtype=torch.int32)
    table = torch.full((len(lens), max(used) + 2), -1, dtype=torch.int32, device="cuda")
    at = 0
    for i, u in enumerate(used):
        table[i, :u] = ids[at:at + u]
        at += u
    return table, num


def _cache(table, num, lens, page, width, dt, fill):
    """A paged cache (pages, page, *width) holding fresh random tokens of each sequence
    at its table's slots and `fill(shape)` everywhere else; the tokens, contiguous."""
    cache = fill((num, page, *width)).to(dt)
    seqs = []
    for i, n in enumerate(lens):
        u = math.ceil(n / page)
        x = torch.randn(n, *width, device="cuda").to(dt)
        block = cache[table[i, :u].long()].reshape(u * page, *width)
        block[:n] = x
        cache[table[i, :u].long()] = block.reshape(u, page, *width)
        seqs.append(x)
    return cache, seqs


def _attend(q, k, v, scale):
    """fp32 attention of one sequence's Tq tokens (Tq, H, Dk) over its keys (n, H, Dk),
    token t at position n - Tq + t."""
    tq, n = q.shape[0], k.shape[0]
    s = torch.einsum("thd,nhd->htn", q.float(), k.float()) * scale
    pos = n - tq + torch.arange(tq, device="cuda")
    s = s.masked_fill(torch.arange(n, device="cuda")[None, None, :] > pos[None, :, None],
                      float("-inf"))
    return torch.einsum("htn,nhd->thd", torch.softmax(s, -1), v.float())


def _err(out, ref):
    assert torch.isfinite(out).all(), "non-finite output"
    return (torch.linalg.norm(out.float() - ref) / torch.linalg.norm(ref)).item()


# (batch, Hq, Hkv, Tq, page, num_splits, dtype): each specialization compiles once, so
# the sweep is a covering list, not a product
DECODE_CASES = [
    (1, 32, 8, 1, 64, None, "bfloat16"),      # Llama-3-8B heads, the chooser's splits
    (5, 8, 8, 1, 16, 1, "float16"),           # MHA, no split
    (3, 16, 1, 3, 64, 5, "bfloat16"),         # MQA: a group of 16, 3 tokens
    (2, 12, 4, 8, 16, None, "float16"),       # a group of 3 (padded to 4), 8 tokens
    (4, 32, 8, 8, 64, 5, "bfloat16"),         # 32 rows a block, split
    (2, 32, 8, 2, 16, 1, "bfloat16"),
    (7, 64, 8, 1, 64, 3, "float16"),          # a group of 8
    (1, 8, 2, 4, 64, None, "float16"),
]


@pytest.mark.parametrize("b,hq,hkv,tq,page,splits,dtype", DECODE_CASES)
def test_decode_matches_fp32_over_the_gathered_cache(b, hq, hkv, tq, page, splits, dtype):
    dt, d = getattr(torch, dtype), 128
    lens = torch.randint(tq, 3000, (b,)).tolist()
    nan = lambda shape: torch.full(shape, float("nan"), device="cuda")  # noqa: E731
    table, num = _table(lens, page)
    kc, ks = _cache(table, num, lens, page, (hkv, d), dt, nan)
    vc, vs = _cache(table, num, lens, page, (hkv, d), dt, nan)
    q = torch.randn(b, tq, hq, d, device="cuda").to(dt)
    out = torch.full_like(q, float("nan"))
    scale = 1 / math.sqrt(d)
    got = dec.paged_decode_attention(q, kc, vc, table, torch.tensor(lens, dtype=torch.int32,
                                     device="cuda"), scale, out, num_splits=splits)
    assert got is out
    g = hq // hkv
    ref = torch.stack([_attend(q[i], ks[i].repeat_interleave(g, 1), vs[i].repeat_interleave(g, 1),
                               scale) for i in range(b)])
    assert _err(out, ref) < 1e-2


@pytest.mark.parametrize("page,tq,splits,one_launch,ps,early", [
    (16, 1, None, True, 1, False),  # the engine's pages, the chooser's one-launch splits
    (16, 1, None, False, 1, False),  # decode + combine
    (64, 1, 16, True, 1, False),    # 16 splits: two merge steps
    (16, 4, 8, True, 1, False),
    (64, 2, 3, False, 1, False),
    (16, 1, 4, True, 2, False),     # two pages a step
    (16, 3, 1, True, 2, False),
    # tables_early: the lengths and first pages read before the wait (the engine's
    # step inputs)
    pytest.param(64, 1, None, True, 1, True, id="tables-early"),
    pytest.param(64, 1, 16, True, 1, True, id="tables-early-16-splits"),
])
def test_decode_replays_in_a_cuda_graph(page, tq, splits, one_launch, ps, early):
    # Llama-3-8B's heads, batch 3, short ragged contexts: the call captured once with
    # the caller's counters, replayed over fresh caches, queries and lengths (the
    # engine's decode steps); each replay right, the counters zero after it, and a
    # second replay of the same inputs bit for bit the same (the fixed merge order)
    b, hq, hkv, d, cap = 3, 32, 8, 128, 700
    dt = torch.bfloat16
    table, num = _table([cap] * b, page)
    nan = lambda shape: torch.full(shape, float("nan"), device="cuda")  # noqa: E731
    kc, vc = nan((num, page, hkv, d)).to(dt), nan((num, page, hkv, d)).to(dt)
    q = torch.empty(b, tq, hq, d, device="cuda", dtype=dt)
    seq = torch.full((b,), cap, device="cuda", dtype=torch.int32)
    out = torch.empty_like(q)
    counters = torch.zeros(b * hkv + 5, device="cuda", dtype=torch.int32)
    counters[b * hkv:] = -7
    scale = 1 / math.sqrt(d)

    def call():
        dec.paged_decode_attention(q, kc, vc, table, seq, scale, out, num_splits=splits,
                                   one_launch=one_launch, counters=counters,
                                   pages_per_step=ps, tables_early=early)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                      # compiles outside the capture
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for _ in range(4):
        lens = torch.randint(tq, cap + 1, (b,)).tolist()
        k_new, ks = _cache(table, num, lens, page, (hkv, d), dt, nan)
        v_new, vs = _cache(table, num, lens, page, (hkv, d), dt, nan)
        kc.copy_(k_new)
        vc.copy_(v_new)
        q.copy_(torch.randn(b, tq, hq, d, device="cuda"))
        seq.copy_(torch.tensor(lens, dtype=torch.int32))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = torch.stack([_attend(q[i], ks[i].repeat_interleave(4, 1),
                                   vs[i].repeat_interleave(4, 1), scale) for i in range(b)])
        assert _err(out, ref) < 1e-2
        assert (counters[:b * hkv] == 0).all() and (counters[b * hkv:] == -7).all()
        first = out.clone()
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, first)


def test_one_launch_agrees_with_decode_and_combine():
    # the same splits both ways: the merge's arithmetic and order are combine's
    b, hq, hkv, d, page = 2, 32, 8, 128, 16
    lens = [1000, 37]
    table, num = _table(lens, page)
    nan = lambda shape: torch.full(shape, float("nan"), device="cuda")  # noqa: E731
    kc, _ = _cache(table, num, lens, page, (hkv, d), torch.bfloat16, nan)
    vc, _ = _cache(table, num, lens, page, (hkv, d), torch.bfloat16, nan)
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.bfloat16)
    seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
    one = dec.paged_decode_attention(q, kc, vc, table, seq, 0.09, num_splits=11)
    two = dec.paged_decode_attention(q, kc, vc, table, seq, 0.09, num_splits=11,
                                     one_launch=False)
    assert torch.isfinite(one).all()
    assert (one.float() - two.float()).abs().max().item() <= 1e-2 * two.float().abs().max().item()


def test_decode_takes_float32_on_tf32_tensor_cores():
    b, hq, hkv, d, page = 3, 16, 4, 128, 16
    lens = [300, 5, 1000]
    table, num = _table(lens, page)
    nan = lambda shape: torch.full(shape, float("nan"), device="cuda")  # noqa: E731
    kc, ks = _cache(table, num, lens, page, (hkv, d), torch.float32, nan)
    vc, vs = _cache(table, num, lens, page, (hkv, d), torch.float32, nan)
    q = torch.randn(b, 2, hq, d, device="cuda")
    out = dec.paged_decode_attention(q, kc, vc, table, torch.tensor(lens, dtype=torch.int32,
                                     device="cuda"), 0.09)
    ref = torch.stack([_attend(q[i], ks[i].repeat_interleave(4, 1), vs[i].repeat_interleave(4, 1),
                               0.09) for i in range(b)])
    assert out.dtype == torch.float32 and _err(out, ref) < 1e-2


def test_decode_runs_on_a_side_stream_and_allocates_its_output():
    b, hq, hkv, d, page = 4, 32, 8, 128, 64
    lens = [4096, 1, 777, 64]
    table, num = _table(lens, page)
    kc, ks = _cache(table, num, lens, page, (hkv, d), torch.bfloat16,
                    lambda s: torch.randn(s, device="cuda"))
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.bfloat16)
    seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())      # the inputs are made there
    with torch.cuda.stream(stream):
        out = dec.paged_decode_attention(q, kc, kc, table, seq, 0.1)
    stream.synchronize()
    assert out.dtype == q.dtype and out.shape == q.shape
    ref = torch.stack([_attend(q[i], ks[i].repeat_interleave(4, 1), ks[i].repeat_interleave(4, 1),
                               0.1) for i in range(b)])
    assert _err(out, ref) < 1e-2


@pytest.mark.parametrize("b,tq,h,page,splits,dtype", [
    (1, 1, 128, 64, None, "bfloat16"),        # DeepSeek-V3, the chooser's splits
    (4, 2, 128, 16, 4, "float16"),
    (16, 1, 64, 64, 1, "bfloat16"),
    (2, 3, 128, 64, None, "float16"),
])
def test_mla_decode_matches_fp32(b, tq, h, page, splits, dtype):
    dt = getattr(torch, dtype)
    lens = torch.randint(tq, 2500, (b,)).tolist()
    stale = lambda shape: 100 * torch.randn(shape, device="cuda")  # noqa: E731
    table, num = _table(lens, page)
    kv, seqs = _cache(table, num, lens, page, (576,), dt, stale)
    q = torch.randn(b, tq, h, 576, device="cuda").to(dt)
    out = torch.full((b, tq, h, 512), float("nan"), device="cuda", dtype=dt)
    scale = 1 / math.sqrt(576)
    mla.mla_decode(q, kv, table, torch.tensor(lens, dtype=torch.int32, device="cuda"), scale,
                   out, num_splits=splits)
    ref = torch.stack([_attend(q[i], seqs[i][:, None].expand(-1, h, -1),
                               seqs[i][:, None, :512].expand(-1, h, -1), scale)
                       for i in range(b)])
    assert _err(out, ref) < 1e-2


ROTATED = {"product_rotation": True}
PARTS = {"copy_parts": True}
# the split alone, its options off whatever the default (mla_decode.SPLIT_HINTS) adds
SPLIT = {"warpgroup_split": True, "early_rescale": False, "fp_fusion": False,
         "merged_handoffs": False, "pair_axis": None}
REPLICAS = {**SPLIT, "split_replicas": True}
RESCALE = {**SPLIT, "early_rescale": True}
FUSION = {"fp_fusion": True}
ALTERNATE = {**SPLIT, "alternate_owners": True}


@pytest.mark.parametrize("bn,hints", [
    (64, {}),                                  # the default: 64 rows, 2 stages, unrotated
    (64, {"warp_specialize": False}),          # the consumers issue the copies
    (64, ROTATED),                             # P c of step j - 1 beside step j
    (32, {}),
    (32, ROTATED),
    (32, {**ROTATED, "warp_specialize": False}),
    (16, {}),                                  # one 16-slot page a step
    (32, {**ROTATED, "rotation_fence": True}),  # the exponentials beside P c
    (64, {**ROTATED, "rotation_fence": True}),
    (64, PARTS),                               # a barrier per TMA box, waited per k step
    (32, PARTS),
    (16, PARTS),
    # the warpgroup split: scores and softmax by warpgroup 0, a step ahead; replicas:
    # by each warpgroup, no exchange
    pytest.param(64, SPLIT, id="split-64"),
    pytest.param(32, SPLIT, id="split-32"),
    pytest.param(64, {**SPLIT, **PARTS}, id="split-parts-64"),
    pytest.param(64, REPLICAS, id="replicas-64"),
    pytest.param(32, REPLICAS, id="replicas-32"),
    pytest.param(64, {**REPLICAS, **PARTS}, id="replicas-parts-64"),
    # O rescaled where each warpgroup holds alpha (early_rescale), the softmax's FFMAs
    pytest.param(64, RESCALE, id="rescale-64"),
    pytest.param(64, {**SPLIT, **FUSION}, id="split-fusion-64"),
    pytest.param(64, {**RESCALE, **FUSION}, id="rescale-fusion-64"),
    pytest.param(64, {**RESCALE, **FUSION, **PARTS}, id="rescale-fusion-parts-64"),
    pytest.param(32, {**RESCALE, **FUSION}, id="rescale-fusion-32"),
    # the hand-offs on mbarriers (.release arrivals, .acquire waits)
    pytest.param(64, {**SPLIT, "mbarrier_handoffs": True}, id="mbarrier-64"),
    # alternating owners: the steps to warpgroups 0 and 1 in turn (the plain form)
    pytest.param(64, ALTERNATE, id="alternate-64"),
    pytest.param(32, ALTERNATE, id="alternate-32"),
    # the default's hints with a step's hand-offs under one wait and one signal
    pytest.param(64, {**RESCALE, **FUSION, "merged_handoffs": True}, id="merged-64"),
    pytest.param(32, {**RESCALE, **FUSION, "merged_handoffs": True}, id="merged-32"),
    # the producer's L2 lookahead (the prefetch is a hint: the same results)
    pytest.param(64, {**RESCALE, **FUSION, "l2_ahead": 2}, id="ahead-64"),
    pytest.param(64, {**RESCALE, **FUSION, "merged_handoffs": True, "l2_ahead": 2},
                 id="merged-ahead-64"),
    # the default (at 128 heads a token's two head blocks as a (1, 2, 1) cluster sharing
    # each latent page by TMA multicast, the kernel option pair_axis) without the pair,
    # and with the L2 lookahead
    pytest.param(64, {"pair_axis": None}, id="unpaired-64"),
    pytest.param(32, {"pair_axis": None}, id="unpaired-32"),
    pytest.param(64, {"l2_ahead": 1}, id="pair-ahead-64"),
])
def test_mla_configurations_match_fp32(bn, hints):
    # the configurations bench/decode_attention.py --mla-variants times, each correct
    b, tq, h, page = 3, 2, 128, 64
    dt = torch.bfloat16
    lens = [2, 700, 2049]
    stale = lambda shape: 100 * torch.randn(shape, device="cuda")  # noqa: E731
    table, num = _table(lens, page)
    kv, seqs = _cache(table, num, lens, page, (576,), dt, stale)
    q = torch.randn(b, tq, h, 576, device="cuda").to(dt)
    seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
    scale = 1 / math.sqrt(576)
    ref = torch.stack([_attend(q[i], seqs[i][:, None].expand(-1, h, -1),
                               seqs[i][:, None, :512].expand(-1, h, -1), scale)
                       for i in range(b)])
    for splits in (1, 3):
        out = torch.full((b, tq, h, 512), float("nan"), device="cuda", dtype=dt)
        mla.mla_decode(q, kv, table, seq, scale, out, num_splits=splits, bn=bn, hints=hints)
        assert _err(out, ref) < 1e-2, (splits, bn, hints)


@pytest.mark.parametrize("kernel,page", [("scores_only", 64), ("values_only", 64),
                                         ("scores_only", 16), ("values_only", 16),
                                         ("products_only", 64)])
def test_mla_phase_kernels_match_fp32(kernel, page):
    # the MLA loop's products alone (bench/decode_attention.py --mla-phases), each over
    # whole steps of the gathered cache (a last step's stale slots count)
    kernel = getattr(mla, kernel)
    b, h, dt = 3, 128, torch.bfloat16
    lens = [2, 700, 2049]
    stale = lambda shape: torch.randn(shape, device="cuda")  # noqa: E731
    table, num = _table(lens, page)
    kv, _ = _cache(table, num, lens, page, (576,), dt, stale)
    q = torch.randn(b, 1, h, 576, device="cuda").to(dt)
    width = min(64, page) if kernel is mla.scores_only else 512
    out = torch.full((b, 1, h, width), float("nan"), device="cuda")
    k, grid, args = mla.phase_launch(kernel, q, kv, table,
                                     torch.tensor(lens, dtype=torch.int32, device="cuda"), out)
    ct.launch(None, grid, k, args)
    bn = min(64, page)
    ref = []
    for i, n in enumerate(lens):
        steps = -(-n // bn)
        lat = kv[table[i].long()].reshape(-1, 576)[:steps * bn].float()
        if kernel is mla.scores_only:
            ref.append((q[i].float() @ lat.T).reshape(1, h, steps, bn).amax(2))
        elif kernel is mla.products_only:      # the split's products, no softmax
            ref.append((q[i].float() @ lat.T).to(dt).float() @ lat[:, :512])
        else:
            p = torch.exp2(q[i, :, :, :bn].float() / 64).to(dt).float()
            ref.append(p.repeat(1, 1, steps) @ lat[:, :512])
    assert _err(out, torch.stack(ref)) < 1e-2


def test_mla_refuses_float32_on_the_gpu_by_name():
    q = torch.zeros(1, 1, 64, 576, device="cuda")
    kv = torch.zeros(4, 16, 576, device="cuda")
    with pytest.raises(ValueError, match="bf16 or fp16"):
        mla.mla_decode(q, kv, torch.zeros(1, 4, dtype=torch.int32, device="cuda"),
                       torch.ones(1, dtype=torch.int32, device="cuda"), 1.0)


@pytest.mark.parametrize("splits", [1, 2])
def test_mla_token_pair_gives_the_unpaired_bits(splits):
    # a token's two head blocks as a (1, 2, 1) cluster (the kernel option pair_axis):
    # the same arithmetic in the same order as the unpaired kernel, so the same bits,
    # at 20 ragged sequences (past the 8 tokens a group of the grouped block order takes)
    b, h, page = 20, 128, 64
    dt = torch.bfloat16
    lens = torch.randint(1, 1500, (b,)).tolist()
    stale = lambda shape: 100 * torch.randn(shape, device="cuda")  # noqa: E731
    table, num = _table(lens, page)
    kv, _ = _cache(table, num, lens, page, (576,), dt, stale)
    q = torch.randn(b, 1, h, 576, device="cuda").to(dt)
    seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
    outs = []
    for hints in ({"pair_axis": None}, {"pair_axis": 1}):
        out = torch.full((b, 1, h, 512), float("nan"), device="cuda", dtype=dt)
        mla.mla_decode(q, kv, table, seq, 0.0417, out, num_splits=splits, hints=hints)
        outs.append(out)
    assert not outs[0].isnan().any() and torch.equal(outs[0], outs[1])
