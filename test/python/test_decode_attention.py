"""CPU tests of paged decode attention and MLA decode (tileir.examples.decode_attention,
tileir.examples.mla_decode): the interpreter against a float64 reference computed over
each sequence's gathered pages (shuffled pages, NaN in every slot past a sequence's
end, ragged lengths, Tq new tokens causal among themselves, split-KV or not), the
generated sm_90a / sm_80 code run by the simulator, and the sm_90a cubin at the
intended tiles (ptxas: no spills; the pages through a TMA ring).  The GPU runs are
test_gpu_decode_attention.py."""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.examples import decode_attention as dec
from tileir.examples import mla_decode as mla
from tileir.kernel import spill_bytes
from tileir.sim import simulate

from test_tensor_cores import _sass, _sass_text


def _rel(out, ref):
    out = np.asarray(out, np.float64)
    assert np.isfinite(out).all(), "non-finite output (poison left, or NaN from the cache)"
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


def _decode_case(rng, batch, tq, heads, kv_heads, d, page, max_len, dtype=np.float32):
    lens = rng.integers(tq, max_len + 1, batch)
    return dec.random_case(rng, batch, tq, heads, kv_heads, d, page, lens, dtype)


@pytest.mark.parametrize("batch,tq,heads,kv_heads,page,splits", [
    (3, 1, 8, 2, 16, 1),          # GQA 4, one token, no split
    (2, 3, 4, 1, 16, 3),          # 3 speculative tokens, MQA, 3 splits
    (2, 8, 2, 2, 16, 2),          # MHA, 8 tokens (some straddle a page), 2 splits
    (1, 2, 6, 3, 64, 1),          # a group of 2 padded to 16 rows, page 64
    (4, 1, 4, 4, 16, None),       # the chooser's splits
])
def test_decode_matches_the_gathered_cache(batch, tq, heads, kv_heads, page, splits):
    rng = np.random.default_rng()
    d = 32
    q, kc, vc, table, lens = _decode_case(rng, batch, tq, heads, kv_heads, d, page, 5 * page - 3)
    scale = 1.0 / math.sqrt(d)
    out = np.full_like(q, np.nan)
    got = dec.paged_decode_attention(q, kc, vc, table, lens, scale, out, num_splits=splits)
    assert got is out
    assert _rel(out, dec.gather_reference(q, kc, vc, table, lens, scale)) < 1e-5


def test_more_splits_than_pages_leave_empty_splits_harmless():
    # a sequence of a few keys split 8 ways: most splits see no key at all
    rng = np.random.default_rng()
    q, kc, vc, table, lens = dec.random_case(rng, 2, 2, 4, 2, 32, 16, [2, 20])
    out = dec.paged_decode_attention(q, kc, vc, table, lens, 0.3, num_splits=8)
    assert out.dtype == q.dtype and out.shape == q.shape
    assert _rel(out, dec.gather_reference(q, kc, vc, table, lens, 0.3)) < 1e-5


@pytest.mark.parametrize("one_launch", [False, True])
def test_many_splits_merge_a_few_at_a_time(one_launch):
    # 13 splits of a 128-wide head, 8 heads a KV head: the merge (the combine launch,
    # or the last split block) takes 4 splits a step (a (4, 8, 128) tile), 4 steps,
    # the last with 3 splits past the end
    rng = np.random.default_rng()
    q, kc, vc, table, lens = _decode_case(rng, 2, 1, 16, 2, 128, 16, 20 * 16)
    _, calls = dec.launches(q, kc, vc, table, lens, 0.09, None, 13, one_launch)
    # the merge width: combine's last argument, the decode kernel's SC (then PS)
    assert len(calls) == (1 if one_launch else 2) and calls[-1][2][-2 if one_launch else -1] == 4
    out = dec.paged_decode_attention(q, kc, vc, table, lens, 0.09, num_splits=13,
                                     one_launch=one_launch)
    assert _rel(out, dec.gather_reference(q, kc, vc, table, lens, 0.09)) < 1e-5


def test_the_splits_chooser_fills_one_round_of_the_gpu_and_keeps_splits_long():
    assert dec.choose_splits(64 * 8, 512, sms=132) == 1       # 512 blocks: past one round
    assert dec.choose_splits(16 * 8, 512, sms=132) == 2       # 256 of 264 resident blocks
    assert dec.choose_splits(1 * 8, 512, sms=132) == 33       # 264
    assert dec.choose_splits(1 * 8, 16, sms=132) == 4         # at least 4 pages a split
    assert dec.choose_splits(64 * 2, 128, sms=132, per_sm=1) == 1   # MLA at batch 64
    assert dec.tiles(1, 4) == (4, 4) and dec.tiles(3, 8) == (4, 8) and dec.tiles(8, 4) == (8, 4)


# bench/decode_attention.py --short --short-batches 1 on an H200 (2026-11-29 20:11 UTC,
# the merge in one round of loads; batch 1, 8 KV heads of 4 Q heads x 128 columns, the
# merge in the kernel): us a call by (page, context) and split count, up to one block an SM.
MEASURED_SHORT = {
    (16, 256): {1: 10.85, 2: 10.25, 4: 8.90, 8: 8.76, 16: 9.43},
    (64, 256): {1: 5.75, 2: 6.99, 4: 7.51},
    (16, 512): {1: 17.60, 2: 13.63, 4: 10.65, 8: 9.68, 16: 10.14},
    (64, 512): {1: 8.19, 2: 8.15, 4: 8.04, 8: 7.86},
    (16, 1024): {1: 31.38, 2: 20.10, 4: 13.87, 8: 11.31, 16: 11.45},
    (64, 1024): {1: 13.07, 2: 10.64, 4: 9.30, 8: 8.47, 16: 8.89},
    (16, 2048): {1: 61.93, 2: 33.90, 4: 20.65, 8: 14.79, 16: 14.25},
    (64, 2048): {1: 23.08, 2: 15.59, 4: 11.85, 8: 9.77, 16: 9.86},
    (16, 4096): {1: 123.95, 2: 64.41, 4: 34.39, 8: 21.58, 16: 19.77},
    (64, 4096): {1: 43.96, 2: 25.40, 4: 16.70, 8: 12.25, 16: 11.56},
}


@pytest.mark.parametrize("page,ctx", sorted(MEASURED_SHORT))
def test_the_one_launch_split_model_follows_the_measured_calls(page, ctx):
    measured = MEASURED_SHORT[page, ctx]
    pages = ctx // page
    for splits, us in measured.items():
        assert abs(dec.split_time_us(splits, pages, page) / us - 1) < 0.16, splits
    # among the measured counts, the model's pick is within 7 % of the fastest
    pick = min(measured, key=lambda s: dec.split_time_us(s, pages, page))
    assert measured[pick] <= 1.07 * min(measured.values())


def test_one_launch_splits_follow_the_model_one_block_an_sm():
    one = dict(sms=132, one_launch=True)
    # batch 1, 8 KV heads (Llama-3-8B)
    assert dec.choose_splits(8, 4, page=64, **one) == 1          # 256 tokens: whole
    assert dec.choose_splits(8, 16, page=64, **one) == 8         # 1k
    assert dec.choose_splits(8, 16, page=16, **one) == 4         # 256 tokens, pages of 16
    assert dec.choose_splits(8, 512, page=64, **one) == 16       # 32k: one block an SM
    assert dec.choose_splits(2 * 8, 512, page=64, **one) == 8
    assert dec.choose_splits(16 * 8, 64, page=64, **one) == 1    # batch 16 fills the SMs
    assert dec.choose_splits(64 * 8, 64, page=64, **one) == 1
    for pages in (4, 16, 64, 512):               # the least modelled time, a power of two
        s = dec.choose_splits(8, pages, page=64, **one)
        assert s & (s - 1) == 0
        assert all(dec.split_time_us(s, pages, 64) <= dec.split_time_us(k, pages, 64)
                   for k in (1, 2, 4, 8, 16))
    # never a count between powers of two (1k in pages of 16 took 13.3 us in 11 splits,
    # 11.3 in 8; 4k in pages of 64 12.6 in 13, 11.6 in 16)
    assert dec.choose_splits(8, 64, page=16, **one) == 8
    assert dec.choose_splits(8, 64, page=64, **one) == 16
    assert dec.choose_splits(3, 64, page=64, **one) in (1, 2, 4, 8, 16, 32)
    with pytest.raises(ValueError, match="page size"):
        dec.choose_splits(8, 16, one_launch=True)


def _counting_case(rng, batch, tq, heads, kv_heads, d, page, max_len, spare=2):
    q, kc, vc, table, lens = _decode_case(rng, batch, tq, heads, kv_heads, d, page, max_len)
    # a bigger buffer than needed, its tail poisoned: only the first B * Hkv are used
    counters = np.zeros(batch * kv_heads + spare, np.int32)
    counters[batch * kv_heads:] = -7
    return q, kc, vc, table, lens, counters


@pytest.mark.parametrize("batch,tq,heads,kv_heads,page,splits", [
    (3, 1, 8, 2, 16, 2),          # GQA 4
    (2, 2, 4, 1, 16, 5),          # MQA, 2 tokens, 5 splits (some see no key)
    (2, 4, 8, 8, 64, 3),          # MHA, 4 tokens, page 64
    (4, 3, 12, 4, 16, 8),         # a group of 3 padded to 4, 8 splits
    (1, 1, 32, 8, 64, 7),         # Llama-3-8B's group, page 64
    (2, 1, 8, 2, 16, None),       # the chooser's (one-launch) splits
])
def test_one_launch_merges_in_the_last_split_block(batch, tq, heads, kv_heads, page, splits):
    rng = np.random.default_rng()
    d = 32
    q, kc, vc, table, lens, counters = _counting_case(rng, batch, tq, heads, kv_heads, d, page,
                                                      5 * page - 3)
    scale = 1.0 / math.sqrt(d)
    out, calls = dec.launches(q, kc, vc, table, lens, scale, np.full_like(q, np.nan), splits,
                              counters=counters)
    assert len(calls) == 1                                   # no combine launch
    ref = dec.gather_reference(q, kc, vc, table, lens, scale)
    for _ in range(2):                                       # the counters come back zero
        out[...] = np.nan
        dec.paged_decode_attention(q, kc, vc, table, lens, scale, out, num_splits=splits,
                                   counters=counters)
        assert _rel(out, ref) < 1e-5
        assert not counters[:batch * kv_heads].any() and (counters[batch * kv_heads:] == -7).all()
    # the same arithmetic, in the same order, as the combine launch (at the same splits)
    two = dec.paged_decode_attention(q, kc, vc, table, lens, scale, num_splits=calls[0][1][2],
                                     one_launch=False)
    assert np.array_equal(out, two)


@pytest.mark.parametrize("batch,tq,heads,kv_heads,page,splits", [
    (2, 1, 8, 2, 16, 1),          # unsplit: the pairs, then an odd page and the masked end
    (3, 3, 4, 1, 16, 3),          # split, 3 tokens
    (2, 2, 8, 8, 64, 2),          # MHA, pages of 64 (128-key steps)
])
def test_two_pages_a_step(batch, tq, heads, kv_heads, page, splits):
    rng = np.random.default_rng()
    d = 32
    q, kc, vc, table, lens = _decode_case(rng, batch, tq, heads, kv_heads, d, page, 11 * page)
    out = np.full_like(q, np.nan)
    dec.paged_decode_attention(q, kc, vc, table, lens, 0.2, out, num_splits=splits,
                               pages_per_step=2)
    assert _rel(out, dec.gather_reference(q, kc, vc, table, lens, 0.2)) < 1e-5
    with pytest.raises(ValueError, match="pages_per_step must be 1 or 2; got 4"):
        dec.paged_decode_attention(q, kc, vc, table, lens, 0.2, pages_per_step=4)


def test_bad_counters_are_named():
    q = np.zeros((2, 1, 4, 32), np.float32)
    cache = np.zeros((4, 16, 2, 32), np.float32)
    args = (q, cache, cache, np.zeros((2, 2), np.int32), np.ones(2, np.int32), 1.0)
    for bad in (np.zeros(3, np.int32), np.zeros(4, np.float32), np.zeros(8, np.int32)[::2]):
        with pytest.raises(ValueError, match="counters must be a contiguous int32"):
            dec.paged_decode_attention(*args, num_splits=2, counters=bad)


@pytest.mark.parametrize("bad,msg", [
    (dict(q=(2, 9, 4, 32)), "Tq = 9"),
    (dict(q=(2, 1, 3, 32)), "multiple of Hkv"),
    (dict(cache=(4, 24, 2, 32)), "page size 24"),
    (dict(lens=(3,)), "seq_lens"),
])
def test_bad_shapes_are_named(bad, msg):
    q = np.zeros(bad.get("q", (2, 1, 4, 32)), np.float32)
    cache = np.zeros(bad.get("cache", (4, 16, 2, 32)), np.float32)
    lens = np.ones(bad.get("lens", (2,)), np.int32)
    with pytest.raises(ValueError, match=msg):
        dec.paged_decode_attention(q, cache, cache, np.zeros((2, 2), np.int32), lens, 1.0)


def test_an_output_that_is_not_dense_is_refused():
    # the kernels write `out` through a reshaped view: a strided one would be a copy
    q = np.zeros((2, 1, 4, 32), np.float32)
    cache = np.zeros((4, 16, 2, 32), np.float32)
    out = np.zeros((2, 1, 4, 64), np.float32)[..., ::2]
    with pytest.raises(ValueError, match="not contiguous"):
        dec.paged_decode_attention(q, cache, cache, np.zeros((2, 2), np.int32),
                                   np.ones(2, np.int32), 1.0, out)


# In --full (0.7 s): sm_90a-2-3-16-1, one launch of a split run and merged by its last
# block; test_the_last_block_to_finish_merges_whatever_the_order[sm_90a-3-2-16] keeps
# that kernel's run in the simulator (the same pages of 16, splits and tokens) in the
# fast tier, and [sm_90a-1-1-16-2] two pages a step.  Since session 24 (the policy: a
# family's default configuration in the simulator, an option's run in --full) that one
# too: pages_per_step=2 is an option (the default 1); the fast tier keeps its numbers in
# the interpreter (test_two_pages_a_step) and the family's default in the simulator
# (test_the_last_block_to_finish_merges_whatever_the_order[sm_90a-3-2-16])
@pytest.mark.parametrize("target,splits,tq,page,ps", [
    pytest.param("sm_90a", 2, 3, 16, 1, marks=pytest.mark.slow),
    pytest.param("sm_90a", 1, 1, 16, 2, marks=pytest.mark.slow),   # two pages a step
    pytest.param("sm_90a", 1, 1, 64, 1, marks=pytest.mark.slow),
    pytest.param("sm_80", 1, 2, 16, 1, marks=pytest.mark.slow),
    pytest.param("sm_80", 3, 1, 64, 1, marks=pytest.mark.slow),
    pytest.param("sm_80", 2, 2, 16, 2, marks=pytest.mark.slow),
])
def test_the_generated_decode_runs_in_the_simulator(target, splits, tq, page, ps):
    rng = np.random.default_rng()
    q, kc, vc, table, lens = _decode_case(rng, 2, tq, 4, 2, 64, page, 5 * page + 5, np.float16)
    out = np.full_like(q, np.nan)
    out, calls = dec.launches(q, kc, vc, table, lens, 0.125, out, splits, pages_per_step=ps)
    for kernel, grid, args in calls:
        simulate(kernel.compile(args, stage="gpu", target=target), grid, args)
    assert _rel(out, dec.gather_reference(q, kc, vc, table, lens, 0.125)) < 2e-3


@pytest.mark.parametrize("target,splits,tq,page", [
    ("sm_90a", 3, 2, 16),
    pytest.param("sm_90a", 4, 1, 64, marks=pytest.mark.slow),
    pytest.param("sm_80", 3, 3, 16, marks=pytest.mark.slow),
])
def test_the_last_block_to_finish_merges_whatever_the_order(target, splits, tq, page):
    # the generated kernel run block by block in the simulator: for each (sequence, KV
    # head) one split held back (a different one each), the rest in a shuffled order.
    # Before it runs, the counters read splits - 1 and nothing is merged (the output
    # still NaN); after it, the output is right and the counters zero
    rng = np.random.default_rng()
    b, hkv = 2, 2
    q, kc, vc, table, lens = _decode_case(rng, b, tq, 4, hkv, 64, page, 3 * page + 5,
                                          np.float16)
    counters = np.zeros(b * hkv, np.int32)
    out = np.full_like(q, np.nan)
    out, calls = dec.launches(q, kc, vc, table, lens, 0.125, out, splits, counters=counters)
    (kernel, grid, args), = calls
    compiled = kernel.compile(args, stage="gpu", target=target)
    held = {(x, y): int(rng.integers(splits)) for x in range(b) for y in range(hkv)}
    first = [(x, y, z) for x in range(b) for y in range(hkv) for z in range(splits)
             if z != held[x, y]]
    rng.shuffle(first)
    simulate(compiled, grid, args, blocks=[tuple(map(int, i)) for i in first])
    assert (counters == splits - 1).all() and np.isnan(out).all()
    last = [(x, y, z) for (x, y), z in held.items()]
    simulate(compiled, grid, args, blocks=last)
    assert not counters.any()
    assert _rel(out, dec.gather_reference(q, kc, vc, table, lens, 0.125)) < 2e-3


def _decode_text(ck, tmp_path):
    ptx = ck.artifacts["ptx"]
    return ptx if isinstance(ptx, str) else ptx.decode(), _sass_text(ck.cubin, tmp_path)


# in --full (3.6 s of CPU: a cubin at Llama-3-8B's heads and its SASS): the same ticket
# (an acq_rel atomic at gpu scope, strong loads of the partials) is checked in SASS by
# test_llm_gemv's test_ticket_orders_the_partials_before_the_last_block_reads_them, and
# this kernel's merge in the last block runs in the simulator here
# (test_the_last_block_to_finish_merges_whatever_the_order)
@pytest.mark.slow
def test_the_ticket_is_acq_rel_at_gpu_scope_and_the_partials_bypass_l1(tmp_path):
    # Llama-3-8B's heads at batch 1, pages of 16, one launch: every consumer thread's
    # stores, a barrier, then one thread's atom.acq_rel.gpu (ptxas: MEMBAR.ALL.GPU
    # before the ATOMG, CCTL.IVALL after); the last block reads the partials with
    # ld.relaxed.gpu (LDG.E.STRONG.GPU: from L2), 16 bytes at a time where a thread's
    # part of the tile is inside the arrays (LDG.E.128.STRONG.GPU); no local memory
    ck = _decode_cubin(1, 16, True, batch=1)
    ptx, sass = _decode_text(ck, tmp_path)
    lines = ptx.splitlines()
    atoms = [i for i, line in enumerate(lines) if "atom." in line]
    assert len(atoms) == 1 and "atom.acq_rel.gpu.global.add.s32" in lines[atoms[0]], \
        [lines[i] for i in atoms]
    stores = [i for i, line in enumerate(lines) if "st.global" in line]
    before = [i for i in stores if i < atoms[0]]
    assert before, "no partial stored before the ticket"
    assert any("bar.sync" in line for line in lines[max(before):atoms[0]]), \
        "no barrier between the partials' stores and the ticket"
    loads = [i for i, line in enumerate(lines) if "ld.relaxed.gpu.global." in line]
    assert loads and min(loads) > atoms[0]
    assert any("ld.relaxed.gpu.global.v4.b32" in lines[i] for i in loads), "no 16-byte loads"
    sass_lines = sass.splitlines()
    atom = next(i for i, line in enumerate(sass_lines) if "ATOMG.E.ADD.S32.STRONG.GPU" in line)
    assert any("MEMBAR.ALL.GPU" in line for line in sass_lines[atom - 8:atom])
    assert any("CCTL.IVALL" in line for line in sass_lines[atom:atom + 4])
    assert sum("LDG.E.STRONG.GPU" in line for line in sass_lines) >= 16
    assert any("LDG.E.128.STRONG.GPU" in line for line in sass_lines)
    ops = _sass(ck.cubin, tmp_path)
    assert not ops["LDL"] and not ops["STL"], "local memory"
    assert ck.spills == (0, 0)


# In --full (3.2 s at tq 1): the same SASS properties (TMA ring, tensor cores, no local
# memory) on decode_narrow, the family's kernel for pages under 32 slots (here two a step);
# test_decode_streams_pages_through_a_tma_ring_without_spills[1-64-False] keeps them in
# the fast tier, and decode_narrow's two pages a step run in the simulator in it
# (test_the_generated_decode_runs_in_the_simulator[sm_90a-1-1-16-2])
@pytest.mark.slow
@pytest.mark.parametrize("tq", [1, 8])
def test_two_pages_a_step_compile_without_spills(tq, tmp_path):
    # pages of 16 two a step (decode_narrow, two warps): both pages' products on the
    # tensor cores, through the TMA ring, no local memory
    ck = _decode_cubin(tq, 16, True, batch=1, pages_per_step=2)
    assert ck.spills == (0, 0), ck.ptxas_report
    ops = _sass(ck.cubin, tmp_path)
    for op in ("UTMALDG", "HMMA", "LDSM"):
        assert ops[op], f"no {op} in the SASS: {sorted(ops)}"
    assert not ops["LDL"] and not ops["STL"], "local memory"


def _decode_cubin(tq, page, split, dtype=ml_dtypes.bfloat16, batch=16, pages_per_step=1):
    """The decode kernel for Llama-3-8B heads (32 / 8, D = 128) as a launch compiles it."""
    b, hq, hkv, d = batch, 32, 8, 128
    q = np.zeros((b, tq, hq, d), dtype)
    cache = np.zeros((64, page, hkv, d), dtype)
    table = np.zeros((b, 64), np.int32)
    _, calls = dec.launches(q, cache, cache, table, np.ones(b, np.int32), 0.088,
                            num_splits=4 if split else 1, pages_per_step=pages_per_step)
    kernel, grid, args = calls[0]
    return kernel.compile(args, target="sm_90a", grid=grid, sm_count=132)


@pytest.mark.parametrize("tq,page,split", [
    (1, 64, False),
    pytest.param(8, 64, True, marks=pytest.mark.slow),
    pytest.param(4, 16, True, marks=pytest.mark.slow),
])
def test_decode_streams_pages_through_a_tma_ring_without_spills(tq, page, split, tmp_path):
    ck = _decode_cubin(tq, page, split)
    report = ck.ptxas_report
    assert spill_bytes(report) == (0, 0), report
    ops = _sass(ck.cubin, tmp_path)
    for op in ("UTMALDG", "SYNCS", "HMMA", "LDSM"):
        assert ops[op], f"no {op} in the SASS: {sorted(ops)}"
    assert not ops["LDL"] and not ops["STL"], "local memory (spills)"


def test_the_ring_reads_the_block_table_ahead_and_q_is_converted_once():
    # the page of a later iteration is read from the table inside the loop, before the
    # ring's copy for it (software_pipeline.read_only_load)
    q = np.zeros((2, 1, 8, 64), np.float16)
    cache = np.zeros((8, 16, 2, 64), np.float16)
    _, calls = dec.launches(q, cache, cache, np.zeros((2, 4), np.int32), np.ones(2, np.int32),
                            0.1, num_splits=1)
    kernel, grid, args = calls[0]
    text = kernel.compile(args, stage="pipeline", target="sm_90a").ir()
    assert "tile.ring_alloc" in text, "the pages are not copied through a ring"
    loop = text[text.index("scf.for"):]
    assert loop.index('"tile.load"(%arg3') < loop.index('"tile.ring_load"(')
    # Q becomes the mma's A operand before each loop, not in it (hoist_invariant_conversions):
    # the conversions sit at the function body's indentation
    q_conv = [line for line in text.splitlines()
              if "convert_layout" in line and "-> tensor<16x64xf16, #tile.mma_operand<0" in line]
    assert q_conv and all(line.startswith("    %") for line in q_conv), q_conv



def _before_the_wait(ptx: str) -> str:
    return ptx[:ptx.index("griddepcontrol.wait")]


def _batch1_decode(tables_early: bool, stage: str):
    """Llama-3-8B's batch-1 decode launch over a 4k context in pages of 64, 16 splits."""
    b, hq, hkv, d, page = 1, 32, 8, 128, 64
    q = np.zeros((b, 1, hq, d), ml_dtypes.bfloat16)
    cache = np.zeros((66, page, hkv, d), ml_dtypes.bfloat16)
    table, lens = np.zeros((b, 64), np.int32), np.full(b, 4096, np.int32)
    _, calls = dec.launches(q, cache, cache, table, lens, 0.088, num_splits=16,
                            tables_early=tables_early)
    kernel, grid, args = calls[0]
    return kernel.compile(args, stage=stage, target="sm_90a", grid=grid, sm_count=132)


def test_tables_early_reads_the_length_and_first_pages_before_the_wait():
    # tables_early (the caller's promise: the kernel before it does not write the block
    # table or the lengths): the sequence length and the block table's page numbers of
    # the ring's first slots are loaded before griddepcontrol.wait (programmatic.py
    # hoist_early_loads)
    before = _before_the_wait(_batch1_decode(True, "ptx").artifacts["ptx"])
    # the length (one load), the pages of the ring's first two slots (K and V's index:
    # one load each, LLVM merges the pair) and the last page's loop's
    assert before.count("ld.global") >= 3, before[-2000:]
    assert "ld.global.v4" not in before and "cp.async.bulk" not in before, \
        "a K/V or q load (the previous kernel's output) moved before the wait"


# in --full (ptxas and a second compile, 4 s): the option's PTX in the fast tier above,
# and lit's pipeline-early-loads.mlir (@tables)
@pytest.mark.slow
def test_tables_early_compiles_without_spills_and_plain_reads_nothing_early():
    ck = _batch1_decode(True, "cubin")
    assert ck.spills == (0, 0), ck.ptxas_report
    before = _before_the_wait(_batch1_decode(False, "ptx").artifacts["ptx"])
    assert before.count("ld.global") == 0, before[-2000:]


# in --full (the option's simulator proof, 2.2 s): its PTX in the fast tier
# (test_tables_early_reads_the_length_and_first_pages_before_the_wait) and the family's
# default in the simulator (test_the_last_block_to_finish_merges_whatever_the_order)
@pytest.mark.slow
@pytest.mark.parametrize("splits,page", [(1, 16), (3, 64)])
def test_tables_early_runs_like_the_plain_decode_in_the_simulator(splits, page):
    # the hoisted loads change no result: the simulator's run of both forms, a ragged
    # case (the last pages part-filled), bit for bit
    rng = np.random.default_rng()
    q, kc, vc, table, lens = _decode_case(rng, 2, 1, 8, 2, 64, page, 5 * page + 5, np.float16)
    outs = []
    for early in (False, True):
        out = np.full_like(q, np.nan)
        out, calls = dec.launches(q, kc, vc, table, lens, 0.125, out, splits,
                                  tables_early=early)
        for kernel, grid, args in calls:
            simulate(kernel.compile(args, stage="gpu", target="sm_90a"), grid, args)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert _rel(outs[1], dec.gather_reference(q, kc, vc, table, lens, 0.125)) < 2e-3


# -- MLA decode -------------------------------------------------------------------------

@pytest.mark.parametrize("batch,tq,heads,page,splits", [
    (2, 1, 64, 16, 1),
    (2, 2, 128, 16, 2),
    pytest.param(3, 4, 64, 64, 3, marks=pytest.mark.slow),
    pytest.param(1, 1, 128, 64, None, marks=pytest.mark.slow),
])
def test_mla_decode_matches_the_naive_reference(batch, tq, heads, page, splits):
    rng = np.random.default_rng()
    lens = rng.integers(tq, 3 * page + 7, batch)
    q, kv, table, lens = mla.random_case(rng, batch, tq, heads, page, lens)
    scale = 1.0 / math.sqrt(576)
    out = np.full((batch, tq, heads, 512), np.nan, np.float32)
    mla.mla_decode(q, kv, table, lens, scale, out, num_splits=splits)
    assert _rel(out, mla.reference(q, kv, table, lens, scale)) < 1e-5


def test_mla_rescales_exactly_where_the_maxima_jump():
    # small latents on each sequence's first page, large ones on its fourth: the row
    # maxima rise by far more than the exponentials' range at steps 0 and 3 (so the
    # accumulator's old terms are scaled by alpha = exp2(m_old - m_new) ~ 0 there) and
    # little at the others (16-key steps)
    rng = np.random.default_rng()
    batch, tq, heads, page = 2, 2, 64, 16
    lens = rng.integers(5 * page, 7 * page, batch)
    q, kv, table, lens = mla.random_case(rng, batch, tq, heads, page, lens)
    kv[table[:, 0]] *= 0.05
    kv[table[:, 3]] *= 6.0
    scale = 1.0 / math.sqrt(576)
    out = np.full((batch, tq, heads, 512), np.nan, np.float32)
    mla.mla_decode(q, kv, table, lens, scale, out, num_splits=1)
    assert _rel(out, mla.reference(q, kv, table, lens, scale)) < 1e-5


# the schedules these tests pin down keep both warpgroups on the scores; the warpgroup
# split (the default at 32 rows a step or more) has its own: test_mla_warpgroup_split.py
NOSPLIT = {"warpgroup_split": False}
ROTATED = {"product_rotation": True, **NOSPLIT}
PARTS = {"copy_parts": True, **NOSPLIT}


@pytest.mark.parametrize("splits,tq,page,bn,hints", [
    # in --full: the rotation_fence case below runs this configuration with one fence more
    pytest.param(2, 1, 32, 32, ROTATED, marks=pytest.mark.slow),
    # the default: 64 rows, 2 stages, which at 64 rows is the warpgroup split: in --full,
    # as test_mla_warpgroup_split's test_the_split_kernel_runs_in_the_simulator
    # [1-1-2-64-64-hints0] runs that kernel at this configuration (1 sequence, 2
    # tokens, pages and steps of 64)
    pytest.param(1, 2, 64, 64, None, marks=pytest.mark.slow),
    pytest.param(1, 2, 16, 16, None, marks=pytest.mark.slow),
    pytest.param(3, 1, 64, 32, {"warp_specialize": False}, marks=pytest.mark.slow),
    # P c of step j - 1 beside step j: in --full, the rotation_fence case below runs the
    # rotated products (with one fence more, split in two)
    pytest.param(1, 2, 64, 64, ROTATED, marks=pytest.mark.slow),
    # since session 24 in --full (the unsplit schedules' options; the fast tier runs the
    # default, the warpgroup split, in the simulator: test_mla_warpgroup_split's
    # test_the_split_kernel_runs_in_the_simulator[1-1-2-64-64-hints0], and copy_parts'
    # boxes: test_copy_parts_boxes_read_match_the_shared_layout)
    pytest.param(2, 1, 32, 32, {**ROTATED, "rotation_fence": True},   # a fence before
                 marks=pytest.mark.slow),                              # P c's wait
    pytest.param(1, 2, 64, 64, PARTS,                # a barrier per TMA box of a step
                 marks=pytest.mark.slow),
    pytest.param(2, 3, 16, 16, PARTS, marks=pytest.mark.slow),
])
def test_the_generated_mla_runs_in_the_simulator(splits, tq, page, bn, hints):
    # a producer warpgroup (unless asked not to), the products in their step or
    # rotated: the simulator runs the warp roles, the ring's barriers and the wgmma
    # groups in flight
    rng = np.random.default_rng()
    lens = rng.integers(tq, 3 * page + 5, 1)
    q, kv, table, lens = mla.random_case(rng, 1, tq, 64, page, lens, np.float16)
    out = np.full((1, tq, 64, 512), np.nan, np.float16)
    out, calls = mla.launches(q, kv, table, lens, 0.3, out, splits, bn=bn, hints=hints)
    for kernel, grid, args in calls:
        simulate(kernel.compile(args, stage="gpu", target="sm_90a"), grid, args)
    assert _rel(out, mla.reference(q, kv, table, lens, 0.3)) < 2e-3


def _mla_cubin(splits, bn, hints=None):
    """MLA decode at DeepSeek-V3's shapes, batch 64, as a launch compiles it."""
    b = 64
    q = np.zeros((b, 1, 128, 576), ml_dtypes.bfloat16)
    kv = np.zeros((64, 64, 576), ml_dtypes.bfloat16)
    out = np.zeros((b, 1, 128, 512), ml_dtypes.bfloat16)
    _, calls = mla.launches(q, kv, np.zeros((b, 64), np.int32), np.ones(b, np.int32), 0.04,
                            out, splits, bn=bn, hints=hints)
    kernel, grid, args = calls[0]
    return kernel.compile(args, target="sm_90a", grid=grid, sm_count=132)


def _main_loop(lines):
    """(first, last) line of the SASS loop that waits for the scores with P c still in
    flight (`DEPBAR.LE gsb0, 0x1`): the innermost backward branch around it."""
    addr = [int(m.group(1), 16) if (m := re.match(r"\s+/\*([0-9a-f]+)\*/", line)) else None
            for line in lines]
    rotated = [i for i, line in enumerate(lines) if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in line]
    loops = []
    for i, line in enumerate(lines):
        m = re.search(r"BRA (?:`\()?0x([0-9a-f]+)", line)
        if m and addr[i] is not None and int(m.group(1), 16) < addr[i]:
            start = addr.index(int(m.group(1), 16)) if int(m.group(1), 16) in addr else None
            if start is not None and any(start <= r <= i for r in rotated):
                loops.append((start, i))
    assert loops, "no loop around the rotated products"
    return min(loops, key=lambda t: t[1] - t[0])


@pytest.mark.slow
@pytest.mark.parametrize("splits", [3, 1])
def test_mla_runs_on_wgmma_and_tma_with_the_latent_tile_shared(splits, tmp_path):
    # one latent tile in shared memory serves Q.c^T and P.c; 2 consumer warpgroups split
    # the (64, 512) f32 accumulator by columns, a producer warpgroup issues the copies
    # (setmaxnreg), and the products are rotated: both score products of step j
    # (q_nope c^T, then q_rope r^T onto it) and P c of step j - 1 in flight, the scores
    # waited for alone (product_rotation=True; the default keeps each step's products
    # in it).  Not serialized by ptxas, no local memory in that loop (ptxas keeps a few
    # scalars of the prologue and epilogue there: outside it)
    ck = _mla_cubin(splits, bn=32, hints=ROTATED)      # the counts are a 32-row step's
    assert ck.meta["num_threads"] == 384
    report = ck.ptxas_report
    assert "C7513" not in report and "C7520" not in report and "C7519" not in report, report
    text = _sass_text(ck.cubin, tmp_path)
    ops = _sass(ck.cubin, tmp_path)
    for op in ("HGMMA", "UTMALDG", "SYNCS"):
        assert ops[op], f"no {op} in the SASS: {sorted(ops)}"
    assert ops["USETMAXREG"] == 2
    lines = text.splitlines()
    first, last = _main_loop(lines)
    loop = lines[first:last + 1]
    assert sum("HGMMA.64x16x16" in line for line in loop) == 36       # 576 / 16 k-steps
    assert sum("HGMMA.64x256x16" in line for line in loop) == 2       # 32 / 16
    assert not [line for line in loop if " STL" in line or " LDL" in line], \
        "local memory inside the loop"


def _loop_around(lines, inside):
    """(first, last) line of the innermost SASS loop (a backward branch) around a line
    for which `inside` holds."""
    addr = [int(m.group(1), 16) if (m := re.match(r"\s+/\*([0-9a-f]+)\*/", line)) else None
            for line in lines]
    loops = []
    for i, line in enumerate(lines):
        m = re.search(r"BRA (?:`\()?0x([0-9a-f]+)", line)
        if m and addr[i] is not None and int(m.group(1), 16) in addr[:i]:
            start = addr.index(int(m.group(1), 16))
            if any(inside(x) for x in lines[start:i + 1]):
                loops.append((start, i))
    assert loops, "no loop around the products"
    return min(loops, key=lambda t: t[1] - t[0])


# In --full (2.3 s of CPU, a DeepSeek cubin of its own): the unsplit, unrotated schedule's
# SASS; the fast tier runs it in the simulator (test_the_generated_mla_runs_in_the_simulator
# [1-2-64-64-hints6], 64 rows a step, no split, no rotation), checks its two-warpgroup
# score loop in the SASS (test_mla_phase_kernels_compile_like_the_mla_loop[scores_only-...])
# and the default schedule's SASS (test_mla_warpgroup_split's
# test_the_owner_alone_runs_the_scores_and_hands_p_over)
@pytest.mark.slow
def test_unrotated_mla_frees_each_slot_in_its_own_step(tmp_path):
    # the default, product_rotation=False (the ring has 2 stages at 64 rows a step): a
    # step issues its scores (q_nope c^T and q_rope r^T as one group), waits once, runs
    # the softmax, issues P c and waits for it, then releases its slot -- no wgmma group
    # left in flight across steps, so the producer refills the slot a whole step before
    # it is read.  Still a producer warpgroup, no local memory
    ck = _mla_cubin(1, bn=64, hints=NOSPLIT)
    assert ck.meta["num_threads"] == 384 and "2 stages" in ck.meta["fit"], ck.meta["fit"]
    report = ck.ptxas_report
    assert "C7513" not in report and spill_bytes(report) == (0, 0), report
    lines = _sass_text(ck.cubin, tmp_path).splitlines()
    first, last = _loop_around(lines, lambda line: "HGMMA.64x256x16" in line)
    loop = lines[first:last + 1]
    assert sum("HGMMA.64x32x16" in line for line in loop) == 36      # 64 keys, 2 warpgroups
    assert sum("HGMMA.64x256x16" in line for line in loop) == 4
    assert not [line for line in loop if "DEPBAR.LE gsb0, 0x1" in line], "a product in flight"
    # the 36 score wgmmas in one group (issue_chains), then P c: two waits a step
    assert sum("WARPGROUP.DEPBAR.LE gsb0, 0x0" in line for line in loop) == 2
    pv = max(i for i, line in enumerate(loop) if "HGMMA.64x256x16" in line)
    release = [i for i, line in enumerate(loop) if "SYNCS.ARRIVE" in line]
    assert release and all(i > pv for i in release), "the slot is released before P c"
    assert not [line for line in loop if " STL" in line or " LDL" in line]


# In --full (3.3 s of CPU: two cubins and their SASS): copy_parts' per-box waits before
# the score k steps are checked in the SASS of the schedule MLA takes at 64 rows (the
# warpgroup split) by test_mla_warpgroup_split's
# test_the_owner_alone_copied_in_parts_waits_per_box_and_both_wait_before_p_c, and this
# schedule with copy_parts runs in the simulator
# (test_the_generated_mla_runs_in_the_simulator, PARTS)
@pytest.mark.slow
def test_mla_copied_in_parts_waits_for_each_box_before_its_k_steps(tmp_path):
    # copy_parts=True: a 64-row step's 72 KB arrive as 9 TMA boxes (the latent's 8 of
    # 64 columns, then the RoPE part), each completing a barrier of its own; the
    # consumers wait for box b just before the 4 score k steps that read it, so the
    # scores start on the step's first 8 KB, and P c (which reads every box after
    # them) waits for none again.  Not serialized (ptxas adds a warpgroup.arrive after
    # each wait, C7519, as CUTLASS writes one), no local memory, the slot released
    # after P c as before
    ck = _mla_cubin(1, bn=64, hints=PARTS)
    assert ck.meta["num_threads"] == 384 and "2 stages" in ck.meta["fit"], ck.meta["fit"]
    report = ck.ptxas_report
    assert spill_bytes(report) == (0, 0) and not re.search(r"C75(10|13|20)", report), report
    lines = _sass_text(ck.cubin, tmp_path).splitlines()
    first, last = _loop_around(lines, lambda line: "HGMMA.64x256x16" in line)
    loop = lines[first:last + 1]
    steps = []
    for line in loop:
        for name, op in (("wait", "SYNCS.PHASECHK"), ("score", "HGMMA.64x32x16"),
                         ("P c", "HGMMA.64x256x16"), ("release", "SYNCS.ARRIVE"),
                         ("barrier", "BAR.SYNC")):
            if op in line:
                steps.append(name)
    # the row maxima's and P's exchanges between the warpgroups: 4 barriers
    assert steps == (["wait"] + ["score"] * 4) * 9 + ["barrier"] * 4 + ["P c"] * 4 + \
        ["release"], steps
    assert not [line for line in loop if " STL" in line or " LDL" in line]
    # the same kernel without the option: one wait for the whole step, before the scores
    plain = _sass_text(_mla_cubin(1, bn=64, hints=NOSPLIT).cubin, tmp_path).splitlines()
    first, last = _loop_around(plain, lambda line: "HGMMA.64x256x16" in line)
    waits = [i for i, line in enumerate(plain[first:last + 1]) if "SYNCS.PHASECHK" in line]
    scores = [i for i, line in enumerate(plain[first:last + 1]) if "HGMMA.64x32x16" in line]
    assert len(waits) == 1 and waits[0] < scores[0]


def test_copy_parts_boxes_read_match_the_shared_layout():
    # the boxes a k step waits for hold every byte it reads (the layout's reference
    # offsets): MLA's latent tile (64, 512) bf16 with 128-byte swizzle, 8 boxes of 64
    # columns, as q_nope c^T's B (K-major: a k step's 16 columns in one box) and as
    # P c's B (N-major: each k step reads a row of every box)
    from tileir.backend.layout.mma_layouts import Shared
    from tileir.backend.pipeline.copy_parts import boxes_read
    shape, eb = (64, 512), 2
    lay = Shared(128, (1, 0))
    box_bytes, box_elems = lay.box_bytes(shape, eb), lay.box_elems(shape, eb)
    boxes = lay.num_boxes(shape, eb)
    assert (boxes, box_elems) == (8, 64)
    for name, view, k_dim in (("c^T", lay.permuted((1, 0)), 0), ("c", lay, 0)):
        vshape = (512, 64) if name == "c^T" else shape
        kext = vshape[k_dim]
        for k0 in range(0, kext, 16):
            read = {view.offset((k, n) if k_dim == 0 else (n, k), vshape, eb) // box_bytes
                    for k in range(k0, k0 + 16) for n in range(vshape[1 - k_dim])}
            waited = set(boxes_read(view.order, k_dim, (k0, k0 + 16), box_elems, boxes))
            assert read <= waited, (name, k0, read, waited)
            if name == "c^T":
                assert waited == {k0 // 64}, (k0, waited)
            else:
                assert waited == set(range(8))


# In --full (2 s of CPU: a cubin and its SASS): the fast tier runs this option's code
# in the simulator (test_the_generated_mla_runs_in_the_simulator, rotation_fence=True),
# and an MLA cubin's SASS in test_mla_warpgroup_split's
# test_the_owner_alone_runs_the_scores_and_hands_p_over
@pytest.mark.slow
def test_fenced_rotation_keeps_the_exponentials_beside_p_c(tmp_path):
    # rotation_fence=True: a fence before the wait for P c of step j - 1, so ptxas keeps
    # the wait below the softmax's exponentials (without it ptxas moved the wait up
    # to right after the exchanges of the row maxima: the exponentials waited for P c)
    ck = _mla_cubin(1, bn=32, hints={**ROTATED, "rotation_fence": True})
    assert "C7513" not in ck.ptxas_report and ck.spills == (0, 0)
    lines = _sass_text(ck.cubin, tmp_path).splitlines()
    first, last = _main_loop(lines)
    loop = lines[first:last + 1]
    scores = next(i for i, line in enumerate(loop) if "DEPBAR.LE gsb0, 0x1" in line)
    pc = next(i for i, line in enumerate(loop) if "DEPBAR.LE gsb0, 0x0" in line)
    between = loop[scores:pc]
    # P of a 64 x 32 step: 8 elements a thread, each an exponential, before the wait
    assert sum("MUFU.EX2" in line for line in between) >= 8, "exponentials after the wait"
    # the fence a few instructions before the wait (two SASS text lines an instruction)
    assert any("MEMBAR" in line for line in loop[pc - 16:pc]), "no fence before the wait"


# the fast tier: each kernel once and each step's shape once (a step of one page, of
# four 16-slot pages, half a page); in --full (0.1-0.8 s each) the other six pairs,
# the same kernels on the same step shapes
_PHASE_FAST = {("scores_only", 2, 64, 32), ("values_only", 1, 64, 64),
               ("products_only", 3, 16, 64)}


@pytest.mark.parametrize("kernel,tq,page,bn", [
    pytest.param(kernel, *shape, id="-".join(map(str, shape + (kernel,))),
                 marks=() if (kernel, *shape) in _PHASE_FAST else pytest.mark.slow)
    for shape in [(1, 64, 64), (3, 16, 64), (2, 64, 32)]
    for kernel in ["scores_only", "values_only", "products_only"]])
def test_mla_phase_kernels_match_their_reference(kernel, tq, page, bn):
    # the MLA loop's products alone (bench/decode_attention.py --mla-phases times them):
    # the interpreter against float64 over the gathered pages, ragged lengths
    rng = np.random.default_rng()
    kernel = getattr(mla, kernel)
    lens = rng.integers(tq, 3 * page + 7, 3)
    q, kv, table, lens = mla.random_case(rng, 3, tq, 128, page, lens)
    width = min(bn, page) if kernel is mla.scores_only else 512
    out = np.full((3, tq, 128, width), np.nan, np.float32)
    k, grid, args = mla.phase_launch(kernel, q, kv, table, lens, out, bn=bn)
    ct.launch(None, grid, k, args)
    ref = mla.phase_reference(kernel, q, kv, table, lens, bn=bn)
    assert _rel(out, ref) < 1e-5


def _exact_phase_inputs(rng, kernel, q, kv):
    """f16 inputs whose P (rounded to f16 in the kernel and in the reference) is the
    same in both, so a tight tolerance holds: integer scores, exact in f32 whatever the
    order of the sums, for the products' P; for values_only's P = exp2(q / 64), q a
    multiple of 64, a power of two.  (With random q one P in a few thousand lies within
    ex2.approx's error of an f16 rounding boundary; rounded the other way and times a
    stale row of ~100, it moves the result by ~1.5e-5 of its norm.)"""
    kv = np.round(kv.astype(np.float32)).astype(kv.dtype)
    if kernel is mla.values_only:
        q = (64 * rng.integers(-2, 3, q.shape)).astype(q.dtype)
    else:
        q = rng.integers(-2, 3, q.shape).astype(q.dtype)
    return q, kv


# Since session 24 scores_only in --full too (the MLA family's SASS beyond its first):
# the phase kernels' numbers stay in the fast tier in the interpreter
# (test_mla_phase_kernels_match_their_reference), the MLA family's SASS is
# test_mla_warpgroup_split's test_the_owner_alone_runs_the_scores_and_hands_p_over
@pytest.mark.parametrize("kernel,product,count", [
    pytest.param("scores_only", "HGMMA.64x32x16", 36, marks=pytest.mark.slow),
    # (the same loop with the other product: scores_only keeps the phase kernels' path)
    pytest.param("values_only", "HGMMA.64x256x16", 4, marks=pytest.mark.slow),
    # both products split over the warpgroups as `mla` by default, no softmax: the
    # owner's 36 whole-tile score k steps (its P handed over as `mla`'s is).  In --full
    # (2.2 s): scores_only keeps the phase kernels' compile and simulator run in the fast
    # tier, and test_mla_warpgroup_split's
    # test_the_owner_alone_runs_the_scores_and_hands_p_over the owner's 36 k steps
    pytest.param("products_only", "HGMMA.64x64x16", 36, marks=pytest.mark.slow)])
def test_mla_phase_kernels_compile_like_the_mla_loop(kernel, product, count, tmp_path):
    # the same warps, producer warpgroup and 2-stage ring as `mla` at 64 rows a step,
    # its product's wgmmas in the loop, no local memory; and the simulator runs them
    kernel = getattr(mla, kernel)
    b = 64
    q = np.zeros((b, 1, 128, 576), ml_dtypes.bfloat16)
    kv = np.zeros((64, 64, 576), ml_dtypes.bfloat16)
    out = np.zeros((b, 1, 128, 64 if kernel is mla.scores_only else 512), np.float32)
    k, grid, args = mla.phase_launch(kernel, q, kv, np.zeros((b, 64), np.int32),
                                     np.ones(b, np.int32), out)
    ck = k.compile(args, target="sm_90a", grid=grid, sm_count=132)
    assert ck.meta["num_threads"] == 384 and ck.spills == (0, 0)
    lines = _sass_text(ck.cubin, tmp_path).splitlines()
    first, last = _loop_around(lines, lambda line: product in line)
    loop = lines[first:last + 1]
    assert sum(product in line for line in loop) == count
    assert not [line for line in loop if " STL" in line or " LDL" in line]
    rng = np.random.default_rng()
    lens = rng.integers(1, 3 * 64 + 5, 1)
    q, kv, table, lens = mla.random_case(rng, 1, 1, 64, 64, lens, np.float16)
    q, kv = _exact_phase_inputs(rng, kernel, q, kv)
    out = np.full((1, 1, 64, out.shape[-1]), np.nan, np.float32)
    k, grid, args = mla.phase_launch(kernel, q, kv, table, lens, out)
    simulate(k.compile(args, stage="gpu", target="sm_90a"), grid, args)
    assert _rel(out, mla.phase_reference(kernel, q, kv, table, lens)) < 1e-5


def test_mla_masks_only_the_last_step():
    # tile-guard-masks puts the mask's iota, compare and select under an scf.if that
    # only a step reaching past the token's position takes
    q = np.zeros((2, 1, 128, 576), np.float16)
    kv = np.zeros((8, 64, 576), np.float16)
    out = np.zeros((2, 1, 128, 512), np.float16)
    _, calls = mla.launches(q, kv, np.zeros((2, 8), np.int32), np.ones(2, np.int32), 0.04, out, 1)
    kernel, _, args = calls[0]
    text = kernel.tile_ir(*args)
    loop = text[text.index("scf.for"):]
    guard = loop.index("scf.if")
    assert guard < loop.index("} else {") < loop.index('"tile.iota"') < \
        loop.index("arith.select %", loop.index('"tile.iota"'))


def test_mla_refuses_shapes_it_does_not_take():
    q = np.zeros((1, 1, 96, 576), np.float32)
    kv = np.zeros((4, 16, 576), np.float32)
    with pytest.raises(ValueError, match="multiple of 64"):
        mla.mla_decode(q, kv, np.zeros((1, 4), np.int32), np.ones(1, np.int32), 1.0)


def test_the_llm_backend_passes_one_counters_buffer_it_owns():
    # Backend.attention_decode: the paged kernel with the backend's tickets (allocated
    # once, zero after every call), the split contexts merged in the one launch
    from tileir.llm.backend import Backend
    be = Backend("numpy", "float32")
    rng = np.random.default_rng()
    for batch in (3, 2, 3):
        q, kc, vc, table, lens = _decode_case(rng, batch, 1, 8, 2, 32, 16, 9 * 16)
        out = be.attention_decode(q[:, 0], kc, vc, table, lens, lens.tolist(), 0.17)
        ref = dec.gather_reference(q, kc, vc, table, lens, 0.17)[:, 0]
        assert _rel(out, ref) < 1e-5
        counters = be.decode_tickets.at_least(batch * 2)
        assert counters is be.decode_tickets.at_least(1) and be.decode_tickets.all_zero()
    assert len(be.decode_tickets.buffers) == 1
