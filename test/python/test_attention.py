"""CPU tests of the tutorial attention kernel (tileir.examples.attention): the generated
code of both targets run by the simulator against a float64 reference (ragged
length, grouped K/V heads, causal or not), and the sm_90a kernel at 128 x 128 tiles
as the GPU runs it: tensor cores, TMA copies, mbarriers, no local memory
(docs/attention.md).  The GPU runs are test_gpu_attention.py."""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.examples import attention as example
from tileir.examples import decode_attention as dec_example
from tileir.sim import simulate

from test_tensor_cores import _sass, _sass_text


@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=pytest.mark.slow)])
@pytest.mark.parametrize("causal", [False, True])
def test_the_generated_attention_computes_attention(target, causal):
    rng = np.random.default_rng()
    b, h, hkv, s, d = 1, 2, 1, 100, 64
    q, k, v = (rng.standard_normal((b, n, s, d)).astype(np.float16) for n in (h, hkv, hkv))
    o = np.full_like(q, np.nan)
    args = _args(q, k, v, o, 64, 64, causal)
    simulate(example.attention.compile(args, stage="gpu", target=target),
             example.grid(q, 64), args)
    ref = example.reference(q, k, v, 1 / math.sqrt(d), causal)
    assert np.isfinite(o).all()
    assert np.linalg.norm(o.astype(np.float64) - ref) / np.linalg.norm(ref) < 2e-3


@pytest.mark.parametrize("causal", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_128x128_attention_runs_on_tma_and_wgmma_without_local_memory(causal, tmp_path):
    q = np.zeros((4, 32, 4096, 128), ml_dtypes.bfloat16)
    ck = example.attention.compile((q, q, q, q, 0.088, 32, 1, 128, 128, 128, causal),
                                   target="sm_90a", grid=(32, 128, 1), sm_count=132)
    ops = _sass(ck.cubin, tmp_path)
    for op in ("HGMMA", "UTMALDG", "SYNCS"):
        assert ops[op], f"no {op} in the SASS: {sorted(ops)}"
    assert not ops["LDL"] and not ops["STL"], "local memory (spills)"
    # Q, K and V through shared memory, the scores and output in registers: one
    # 128-row block of two consumer warpgroups and a producer one that issues the
    # copies and gives its registers to them, its grid as written
    assert ck.meta["num_threads"] == 384 and "grid_scale" not in ck.meta
    assert ops["USETMAXREG"] == 2
    # the products rotated (product_rotation.py): P V of the previous iteration still
    # runs while the scores are waited for
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in _sass_text(ck.cubin, tmp_path)


def test_the_mask_runs_only_where_it_may_drop_elements():
    q = np.zeros((1, 1, 1000, 64), np.float16)
    text = example.attention.tile_ir(q, q, q, q, 0.125, 1, 1, 64, 64, 64, True)
    loop = text[text.index("scf.for"):]
    # the select sits in the else branch of the all-kept test
    assert loop.index("scf.if") < loop.index("} else {") < loop.index("arith.select")


# ---------------------------------------------------------------------------
# variable-length batches, the log-sum-exp, head dims, fp16 (attention_varlen,
# attention_lse, flash_attention_varlen)
# ---------------------------------------------------------------------------
def _packed(rng, lq, lk, h, hkv, d, dtype):
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], h, d)).astype(dtype)
    k = rng.standard_normal((cu_k[-1], hkv, d)).astype(dtype)
    v = rng.standard_normal((cu_k[-1], hkv, d)).astype(dtype)
    return q, k, v, cu_q, cu_k


def _check_varlen(o, lse, q, k, v, cu_q, cu_k, causal, tol):
    ref, ref_lse = example.reference_varlen(q, k, v, cu_q, cu_k, 1 / math.sqrt(q.shape[-1]),
                                            causal)
    assert np.isfinite(o).all()
    err = np.linalg.norm(o.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err < tol, err
    if lse is not None:
        # rows that see no key: -inf on both sides; the others close
        assert (np.isneginf(lse) == np.isneginf(ref_lse)).all()
        seen = np.isfinite(ref_lse)
        assert not np.isnan(lse).any()
        np.testing.assert_allclose(lse[seen], ref_lse[seen], rtol=0, atol=tol)


# lengths (queries, keys) per sequence: empty sequences, one token, q shorter and
# longer than k, lengths across several tiles and not multiples of them
RAGGED = [([0, 1, 77, 5, 40, 130], [3, 1, 60, 0, 90, 130]),
          ([1, 9, 0, 33], [1, 200, 0, 33])]


# In --full (0.3 s each): lengths1; the fast tier's lengths0 cases keep its paths (one
# token, an empty sequence, keys longer than queries and across tiles) and more (queries
# longer than keys, sequences without keys, several query tiles) on both masks
@pytest.mark.parametrize("lengths", [RAGGED[0], pytest.param(RAGGED[1],
                                                             marks=pytest.mark.slow)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h,hkv", [(4, 2), pytest.param(3, 3, marks=pytest.mark.slow)])
@pytest.mark.parametrize("with_lse", [pytest.param(False, marks=pytest.mark.slow), True])
def test_varlen_in_the_interpreter(lengths, causal, h, hkv, with_lse):
    rng = np.random.default_rng()
    q, k, v, cu_q, cu_k = _packed(rng, *lengths, h, hkv, 32, np.float32)
    o = np.full_like(q, np.nan)
    lse = np.full((h, q.shape[0]), np.nan, np.float32) if with_lse else None
    got = example.flash_attention_varlen(q, k, v, cu_q, cu_k, max(lengths[0]), max(lengths[1]),
                                         1 / math.sqrt(32), causal=causal, out=o, lse=lse)
    assert got is o
    _check_varlen(o, lse, q, k, v, cu_q, cu_k, causal, 1e-5)


@pytest.mark.parametrize("d", [64, 128, pytest.param(256, marks=pytest.mark.slow)])
def test_varlen_head_dims_and_fp16_in_the_interpreter(d):
    rng = np.random.default_rng()
    q, k, v, cu_q, cu_k = _packed(rng, [50, 3], [70, 3], 2, 1, d, np.float16)
    lse = np.full((2, q.shape[0]), np.nan, np.float32)
    o = example.flash_attention_varlen(q, k, v, cu_q, cu_k, 50, 70, 1 / math.sqrt(d),
                                       causal=True, lse=lse)
    assert o.dtype == np.float16 and o.shape == q.shape
    _check_varlen(o, lse, q, k, v, cu_q, cu_k, True, 2e-3)


def test_varlen_takes_views_of_a_fused_qkv_projection():
    rng = np.random.default_rng()
    cu = np.array([0, 40, 47], np.int32)
    qkv = rng.standard_normal((47, 4 + 2 + 2, 32)).astype(np.float32)
    q, k, v = qkv[:, :4], qkv[:, 4:6], qkv[:, 6:]         # strided, not contiguous
    lse = np.full((4, 47), np.nan, np.float32)
    o = example.flash_attention_varlen(q, k, v, cu, cu, 40, 40, 1 / math.sqrt(32), lse=lse)
    _check_varlen(o, lse, q, k, v, cu, cu, True, 1e-5)


def test_varlen_without_any_key_gives_zeros_and_minus_infinity():
    q = np.ones((5, 2, 64), np.float32)
    k = np.zeros((0, 1, 64), np.float32)
    lse = np.full((2, 5), np.nan, np.float32)
    o = example.flash_attention_varlen(q, k, k, np.array([0, 2, 5], np.int32),
                                       np.zeros(3, np.int32), 3, 0, 0.125, lse=lse)
    assert (o == 0).all() and np.isneginf(lse).all()


def test_varlen_refuses_what_it_cannot_run():
    q = np.zeros((10, 4, 64), np.float32)
    k = np.zeros((10, 3, 64), np.float32)
    cu = np.array([0, 10], np.int32)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        example.flash_attention_varlen(q, k, k, cu, cu, 10, 10, 0.1)
    with pytest.raises(ValueError, match="int32"):
        example.flash_attention_varlen(q, q, q, cu.astype(np.int64), cu, 10, 10, 0.1)
    with pytest.raises(ValueError, match=r"lse must be \(4, 10\) float32"):
        example.flash_attention_varlen(q, q, q, cu, cu, 10, 10, 0.1,
                                       lse=np.zeros((10, 4), np.float32))
    with pytest.raises(ValueError, match="head dim 96"):
        example.varlen_tiles(96)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_lse_in_the_interpreter(causal):
    rng = np.random.default_rng()
    b, h, hkv, s, d = 2, 4, 2, 77, 32
    q = rng.standard_normal((b, h, s, d)).astype(np.float32)
    k, v = (rng.standard_normal((b, hkv, s, d)).astype(np.float32) for _ in range(2))
    o = np.full_like(q, np.nan)
    lse = np.full((b, h, s), np.nan, np.float32)
    scale = 1 / math.sqrt(d)
    ct.launch(None, example.grid(q, 32), example.attention_lse,
              (q, k, v, o, lse, scale, h, h // hkv, 32, 32, d, causal))
    np.testing.assert_allclose(o, example.reference(q, k, v, scale, causal), rtol=0, atol=1e-5)
    np.testing.assert_allclose(lse, example.reference_lse(q, k, scale, causal), rtol=0, atol=1e-5)


def _simulated_varlen(target, causal, d, dtype, tiles, lengths,
                      kernel=example.attention_varlen):
    rng = np.random.default_rng()
    h, hkv = 2, 1
    q, k, v, cu_q, cu_k = _packed(rng, *lengths, h, hkv, d, dtype)
    o = np.full_like(q, np.nan)
    lse = np.full((h, q.shape[0]), np.nan, np.float32)
    bm, bn = tiles
    args = (q, k, v, o, lse, cu_q, cu_k, 1 / math.sqrt(d), h, h // hkv, bm, bn, d, causal, True)
    if target == "sm_90a":
        # the form the GPU runs: a producer warpgroup split inside the block's `if`
        # (blocks past their sequence's end skip the ring and the split alike)
        text = str(kernel.compile(args, stage="pipeline", target=target).module)
        guard = text.index("scf.if")
        assert guard < text.index("tile.ring_alloc") < text.index("tile.is_producer"), text
    simulate(kernel.compile(args, stage="gpu", target=target),
             example.varlen_grid(max(lengths[0]), len(lengths[0]), h, bm), args)
    _check_varlen(o, lse, q, k, v, cu_q, cu_k, causal, 2e-3)


# the fast tier: causal on sm_90a; not causal (the same loop, its mask an end test
# instead of the diagonal) in --full, and in the interpreter in the fast tier
# (test_varlen_in_the_interpreter)
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=pytest.mark.slow)])
@pytest.mark.parametrize("causal", [pytest.param(False, marks=pytest.mark.slow), True])
@pytest.mark.parametrize("lengths", [
    # a zero-length query sequence, a zero-length key one, one token, q shorter than k
    ([0, 1, 70, 9], [5, 0, 100, 9]),
    # arrays shorter than a tile (TMA boxes cut to the array's rows)
    pytest.param(([5, 3], [7, 2]), marks=pytest.mark.slow)])
def test_the_generated_varlen_attention_computes_attention(target, causal, lengths):
    _simulated_varlen(target, causal, 64, np.float16, (64, 64), lengths)     # fp16


@pytest.mark.slow
@pytest.mark.parametrize("target,d,tiles", [("sm_90a", 128, (64, 64)),
                                            ("sm_90a", 256, (64, 64)),
                                            ("sm_80", 256, (64, 32))])
def test_the_generated_varlen_attention_at_larger_head_dims(target, d, tiles):
    _simulated_varlen(target, True, d, ml_dtypes.bfloat16, tiles, ([30, 1], [80, 1]))


@pytest.mark.slow
@pytest.mark.parametrize("d", [64, 128, 256])
def test_the_varlen_plan_the_host_launches_computes_attention(d):
    # sm_90a at flash_attention_varlen's tiles and options (fp_fusion at D = 64, 128): the
    # TMA ring, the masked first and last K tiles, a Q tile shared by two sequences,
    # the scattered rows
    kernel = example.varlen_kernel(d)
    assert (kernel is not example.attention_varlen) == (d in (64, 128))
    _simulated_varlen("sm_90a", True, d, ml_dtypes.bfloat16, example.varlen_tiles(d),
                      ([100, 0, 60], [150, 3, 60]), kernel)


def _compiled_varlen(d, tiles, causal, target="sm_90a", with_lse=False):
    q = np.zeros((4096, 32, d), ml_dtypes.bfloat16)
    k = np.zeros((4096, 8, d), ml_dtypes.bfloat16)
    cu = np.zeros(5, np.int32)
    lse = np.zeros((32, 4096), np.float32) if with_lse else cu
    # the kernel flash_attention_varlen launches at this head dim (its HINTS' options)
    return example.varlen_kernel(d, target).compile(
        (q, k, k, q, lse, cu, cu, 0.088, 32, 4, *tiles, d, causal, with_lse), target=target)


# the fast tier keeps the benchmarks' head dim, causal (the masked diagonal blocks);
# the other head dims and the unmasked loop alone in `tile-check --full`.
# Since session 24 (the policy: a kernel family's first SASS check and its default
# configuration in the simulator in the fast tier, each option's SASS and simulator
# proofs in --full): [128-True] too: the family's SASS is
# test_128x128_attention_runs_on_tma_and_wgmma_without_local_memory[False], the varlen
# kernel's compiled code runs in the simulator
# (test_the_generated_varlen_attention_computes_attention[lengths0-True-sm_90a]) and its
# numbers in the interpreter (test_varlen_in_the_interpreter)
@pytest.mark.slow
@pytest.mark.parametrize("d,causal", [
    pytest.param(64, False, marks=pytest.mark.slow), pytest.param(64, True, marks=pytest.mark.slow),
    pytest.param(128, False, marks=pytest.mark.slow), (128, True),
    pytest.param(256, False, marks=pytest.mark.slow),
    pytest.param(256, True, marks=pytest.mark.slow)])
def test_varlen_runs_on_tma_and_wgmma_without_local_memory(d, causal, tmp_path):
    tiles = example.varlen_tiles(d, "sm_90a")
    assert tiles == {64: (256, 64), 128: (128, 128), 256: (128, 64)}[d]
    ck = _compiled_varlen(d, tiles, causal)
    ops = _sass(ck.cubin, tmp_path)
    for op in ("HGMMA", "UTMALDG", "SYNCS"):
        assert ops[op], f"no {op} in the SASS: {sorted(ops)}"
    # the loop sits inside the block's `if <it has rows>`, and still gets a producer
    # warpgroup (a guard uniform across the block: block ids and cu_seqlens), which
    # gives its registers to the two consumer warpgroups (four at D = 64: HINTS)
    assert ck.meta["num_threads"] == (640 if d == 64 else 384)
    assert ops["USETMAXREG"] == 2
    assert ck.meta["shared_bytes"] <= 232448
    assert ck.spills == (0, 0), ck.ptxas_report
    assert not ops["LDL"] and not ops["STL"], "local memory (spills)"
    # wgmma not serialized (C7510-C7520), setmaxnreg not ignored (C7507, C7508)
    assert not re.search(r"C75(0[78]|1\d|20)", ck.ptxas_report), ck.ptxas_report


# In --full (2 s of CPU): the fast tier keeps the varlen kernel's producer and SASS
# (test_varlen_runs_on_tma_and_wgmma_without_local_memory) and the log-sum-exp output's
# numbers (test_varlen_in_the_interpreter, with_lse=True)
@pytest.mark.slow
def test_varlen_with_the_log_sum_exp_keeps_its_producer_without_local_memory(tmp_path):
    # the second scattered output in the consumers' epilogue, after setmaxnreg
    ck = _compiled_varlen(128, example.varlen_tiles(128, "sm_90a"), True, with_lse=True)
    ops = _sass(ck.cubin, tmp_path)
    assert ck.meta["num_threads"] == 384 and ops["USETMAXREG"] == 2
    assert ck.spills == (0, 0), ck.ptxas_report
    assert not ops["LDL"] and not ops["STL"], "local memory (spills)"


@pytest.mark.slow
def test_varlen_for_sm_80_is_mma_sync_without_local_memory(tmp_path):
    for d in (64, 128, 256):
        ck = _compiled_varlen(d, example.varlen_tiles(d, "sm_80"), True, "sm_80")
        assert ".target sm_80" in ck.artifacts["ptx"]
        assert "mma.sync.aligned.m16n8k16" in ck.artifacts["ptx"]
        ops = _sass(ck.cubin, tmp_path)
        assert ops["HMMA"] and ops["LDSM"], sorted(ops)
        assert not ops["LDL"] and not ops["STL"], (d, ck.ptxas_report)


def _d256_at_128x128(causal):
    q = np.zeros((4, 32, 4096, 256), ml_dtypes.bfloat16)
    return example.attention.compile((q, q, q, q, 0.0625, 32, 1, 128, 128, 256, causal),
                                     target="sm_90a", grid=(32, 128, 1), sm_count=132)


# 4.6 s of CPU; the fast tier keeps D = 256 at 128 x 64, the tiles that are used
@pytest.mark.slow
def test_head_dim_256_at_128x128_fits_shared_memory_without_a_ring(tmp_path):
    # two 128 x 256 K and V stages beside Q do not fit (327 840 B): the budget drops
    # the ring, and the loop's K and V tiles are reused by the epilogue (192 KiB)
    ck = _d256_at_128x128(False)
    assert ck.meta["shared_bytes"] <= 232448
    assert ck.meta["fit"].endswith("no ring (the threads copy each iteration's tiles)")
    ops = _sass(ck.cubin, tmp_path)
    assert ops["HGMMA"] and not ops["UTMALDG"], sorted(ops)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="a 128 x 128 score tile, a 128 x 256 accumulator "
                   "and the copies' staging pass 255 registers: ptxas spills ~850 B; "
                   "128 x 64 tiles fit (2 stages, 248 registers, no spills)")
def test_head_dim_256_at_128x128_needs_no_local_memory():
    ck = _d256_at_128x128(False)
    assert ck.spills == (0, 0), ck.ptxas_report


# In --full (2 s of CPU): the same kernel's ring, wgmma and TMA without local memory at
# head dim 128 are test_128x128_attention_runs_on_tma_and_wgmma_without_local_memory's
@pytest.mark.slow
def test_head_dim_256_at_128x64_keeps_a_ring_without_local_memory(tmp_path):
    q = np.zeros((4, 32, 4096, 256), ml_dtypes.bfloat16)
    ck = example.attention.compile((q, q, q, q, 0.0625, 32, 1, 128, 64, 256, False),
                                   target="sm_90a", grid=(32, 128, 1), sm_count=132)
    assert ck.meta["fit"].endswith(": 2 stages"), ck.meta["fit"]
    ops = _sass(ck.cubin, tmp_path)
    for op in ("HGMMA", "UTMALDG", "SYNCS"):
        assert ops[op], f"no {op} in the SASS: {sorted(ops)}"
    assert ck.spills == (0, 0), ck.ptxas_report


@pytest.mark.slow
def test_head_dim_256_at_128x128_without_a_ring_computes_attention():
    rng = np.random.default_rng()
    b, h, s, d = 1, 1, 150, 256
    q, k, v = (rng.standard_normal((b, h, s, d)).astype(np.float16) for _ in range(3))
    o = np.full_like(q, np.nan)
    args = (q, k, v, o, 1 / math.sqrt(d), h, 1, 128, 128, d, True)
    ck = example.attention.compile(args, stage="gpu", target="sm_90a")
    assert "no ring" in ck.meta["fit"]
    simulate(ck, example.grid(q, 128), args)
    ref = example.reference(q, k, v, 1 / math.sqrt(d), True)
    assert np.isfinite(o).all()
    assert np.linalg.norm(o.astype(np.float64) - ref) / np.linalg.norm(ref) < 2e-3


# ---------------------------------------------------------------------------
# pingpong=True: the two consumer warpgroups take turns at the tensor cores
# (tile-pingpong, backend/pipeline/pingpong.py; docs/attention.md)
# ---------------------------------------------------------------------------
PINGPONG = example.attention.replace_hints(pingpong=True)


@pytest.mark.parametrize("causal", [False, True])
def test_pingpong_leaves_the_interpreter_alone(causal):
    # a schedule of the GPU's warpgroups: the interpreter runs the same tile code
    rng = np.random.default_rng()
    b, h, hkv, s, d = 1, 4, 2, 77, 32
    q, k, v = (rng.standard_normal((b, n, s, d)).astype(np.float32) for n in (h, hkv, hkv))
    outs = []
    for kernel in (example.attention, PINGPONG):
        o = np.full_like(q, np.nan)
        ct.launch(None, example.grid(q, 32), kernel,
                  (q, k, v, o, 1 / math.sqrt(d), h, h // hkv, 32, 32, d, causal))
        outs.append(o)
    np.testing.assert_array_equal(outs[0], outs[1])
    ref = example.reference(q, k, v, 1 / math.sqrt(d), causal)
    np.testing.assert_allclose(outs[1], ref, rtol=1e-4, atol=1e-5)


def _pingpong_loop(text: str) -> list[str]:
    """The SASS instructions from the consumers' turn wait (a `BAR.SYNC` on a register
    id) to the first wgmma wait after it."""
    ins = [m.group(1).strip() for m in re.finditer(r"^\s+/\*[0-9a-f]+\*/\s+([^;]*);", text,
                                                    re.M)]
    start = next(i for i, x in enumerate(ins) if re.match(r"BAR\.SYNC\S* R\d+, 0x100", x))
    end = next(i for i in range(start, len(ins)) if ins[i].startswith("WARPGROUP.DEPBAR"))
    return ins[start:end + 1]


# the fast tier: head dim 128 without the mask (two cubins and their SASS, ~4 s of CPU
# each case); causal and head dim 64 in --full: their turns are run in the simulator by
# test_pingpong_runs_in_the_simulator (64, causal) and
# test_pingpong_alternates_in_each_of_two_loops_in_the_simulator.
# Since session 24 (the policy: a kernel family's first SASS check and its default
# configuration in the simulator in the fast tier, each option's SASS and simulator
# proofs in --full): [128-False] too (as every
# pingpong simulator run below but the broken alternation's): the fast tier keeps the
# turns in the pipeline IR, forced and chosen against not
# (test_pingpong_is_not_chosen_at_head_dim_64_nor_for_a_gemm), the interpreter's answers
# (test_pingpong_leaves_the_interpreter_alone) and the simulator's check of the
# alternation (test_the_simulator_catches_a_broken_alternation[start-...])
@pytest.mark.parametrize("d,causal", [pytest.param(128, False, marks=pytest.mark.slow),
                                      pytest.param(128, True, marks=pytest.mark.slow),
                                      pytest.param(64, False, marks=pytest.mark.slow),
                                      pytest.param(64, True, marks=pytest.mark.slow)])
def test_pingpong_turns_around_the_products_in_the_sass(d, causal, tmp_path):
    q = np.zeros((4, 32, 4096, d), ml_dtypes.bfloat16)
    args = (q, q, q, q, 1 / math.sqrt(d), 32, 1, 128, 128, d, causal)
    plain, pp = (kernel.compile(args, target="sm_90a", grid=(32, 128, 1), sm_count=132)
                 for kernel in (example.attention, PINGPONG))
    ops, text = _sass(pp.cubin, tmp_path), _sass_text(pp.cubin, tmp_path)
    assert not ops["LDL"] and not ops["STL"], "local memory (spills)"
    assert pp.spills == (0, 0), pp.ptxas_report
    assert ops["HGMMA"] == _sass(plain.cubin, tmp_path)["HGMMA"]
    assert pp.meta["num_threads"] == 384 and ops["USETMAXREG"] == 2
    # the loop: wait for my turn (bar.sync 6 + w, 256: a register id), issue the scores'
    # and P V's wgmmas, hand the turn over (bar.arrive 7 - w, 256), then wait for the
    # scores alone
    loop = _pingpong_loop(text)
    assert loop[-1] == "WARPGROUP.DEPBAR.LE gsb0, 0x1", loop[-3:]
    assert re.match(r"BAR\.ARV R\d+, 0x100", loop[-2]), loop[-3:]
    hgmma = [x for x in loop if x.startswith("HGMMA")]
    assert len(hgmma) == d // 16 + 128 // 16 and hgmma[-1].endswith("gsb0"), hgmma
    assert not any(x.startswith("BAR") for x in loop[1:-2]), loop
    # warpgroup 1 lets warpgroup 0 go first, and warpgroup 0 takes its last pass, at the
    # first turn barrier (after the consumers' 1 and the TMA store groups' 2 .. 5)
    assert len(re.findall(r"BAR\.ARV 0x6, 0x100", text)) == 1
    assert len(re.findall(r"BAR\.SYNC\S* 0x6, 0x100", text)) == 1
    assert "used 16 barriers" in pp.ptxas_report    # register ids: ptxas reserves all 16


def _gqa_inputs(rng, h, hkv, s, d):
    """Random float16 q (1, h, s, d) and k, v (1, hkv, s, d)."""
    return tuple(rng.standard_normal((1, n, s, d)).astype(np.float16) for n in (h, hkv, hkv))


def _args(q, k, v, o, bm, bn, causal):
    """The tutorial kernel's arguments for q, k, v into o at (bm, bn) tiles."""
    h, hkv, d = q.shape[1], k.shape[1], q.shape[3]
    return (q, k, v, o, 1 / math.sqrt(d), h, h // hkv, bm, bn, d, causal)


def _check_attention(o, q, k, v, causal):
    """o is finite and within 2e-3 (relative, Frobenius) of float64 attention."""
    ref = example.reference(q, k, v, 1 / math.sqrt(q.shape[3]), causal)
    o = o.astype(np.float64)
    assert np.isfinite(o).all()
    assert np.linalg.norm(o - ref) / np.linalg.norm(ref) < 2e-3


def _simulate_pingpong(kernel, s, d, bn, causal, h=2, hkv=1):
    """The outputs of `kernel` and of the plain one, simulated on the same inputs."""
    rng = np.random.default_rng()
    q, k, v = _gqa_inputs(rng, h, hkv, s, d)
    outs = []
    for kern in (kernel, example.attention):
        o = np.full_like(q, np.nan)
        args = _args(q, k, v, o, 128, bn, causal)
        ck = kern.compile(args, stage="gpu", target="sm_90a")
        assert ("nvvm.barrier.arrive" in str(ck.module)) == (kern is kernel)
        simulate(ck, example.grid(q, 128), args)
        outs.append(o)
    return outs, example.reference(q, k, v, 1 / math.sqrt(d), causal)


# ragged lengths: 1 key tile (the rotated loop runs no trip: only the start and end of
# the alternation), 2, and causal blocks of 1, 3 and 5 tiles (every block its own count).
# The fast tier keeps (40, 64, False); in --full the 300-long cases (2-3 s of CPU each)
# and (100, 64, True) (0.5 s): causal blocks of several 64-key tiles, ragged, with the
# turns are kept by test_reversed_block_order_computes_every_tile_once_in_the_simulator
# (pingpong=True forced: 2, 4 and 5 key tiles a block, GQA) and the two-loop test,
# 128-key tiles by the SASS test
# (in --full since session 24: see test_pingpong_turns_around_the_products_in_the_sass)
@pytest.mark.parametrize("s,bn,causal", [pytest.param(40, 64, False, marks=pytest.mark.slow),
                                         pytest.param(100, 64, True, marks=pytest.mark.slow),
                                         pytest.param(300, 64, True, marks=pytest.mark.slow),
                                         pytest.param(300, 128, False,
                                                      marks=pytest.mark.slow)])
def test_pingpong_runs_in_the_simulator(s, bn, causal):
    # the simulator replays the named barriers per warp as the hardware counts them
    # (sim.hardware.NamedBarriers): a turn that never comes or is never taken fails here
    # (GQA: two query heads on one key/value head)
    (o, plain), ref = _simulate_pingpong(PINGPONG, s, 64, bn, causal)
    np.testing.assert_array_equal(o, plain)       # the turns order issue, not arithmetic
    o = o.astype(np.float64)
    assert np.isfinite(o).all()
    assert np.linalg.norm(o - ref) / np.linalg.norm(ref) < 2e-3


# end in --full since session 24: [start] keeps the simulator's check of the turns
@pytest.mark.parametrize("left_out,error", [("start", "waits at barrier 6"),
                                            pytest.param("end", "left with 128 of 256 arrivals",
                                                         marks=pytest.mark.slow)])
def test_the_simulator_catches_a_broken_alternation(left_out, error, monkeypatch):
    # the same pass without the start (warpgroup 0 waits for a pass that never comes) or
    # the end (warpgroup 1's last pass never taken): the simulator must say so
    from mlir import ir
    from tileir.backend.pipeline import pingpong
    from tileir.dialect.ring import TurnOp
    from tileir.sim import SimError

    def broken(loop, first, last):
        with loop.location:
            TurnOp("wait", ip=ir.InsertionPoint(first))
            TurnOp("pass", ip=ir.InsertionPoint.after(last))
            if left_out != "start":
                TurnOp("pass", 1, ip=ir.InsertionPoint(loop))
            if left_out != "end":
                TurnOp("wait", 0, ip=ir.InsertionPoint.after(loop))

    monkeypatch.setenv("TILEIR_CACHE", "0")      # (nothing of this compile is kept)
    monkeypatch.setattr(pingpong, "_take_turns", broken)
    fresh = example.attention.replace_hints(pingpong=True)   # (not PINGPONG's compiles)
    with pytest.raises(SimError, match=error):
        _simulate_pingpong(fresh, 300, 64, 64, False)


# ---------------------------------------------------------------------------
# Unasked, the compiler chooses the ping-pong where the GPU measured a gain: the
# tutorial kernel at head dim >= 128 (backend/pipeline/pingpong.py, MIN_HEAD_DIM)
# ---------------------------------------------------------------------------
UNPINGPONGED = example.attention.replace_hints(pingpong=False)


def _choice(ck) -> str:
    """What tile-pingpong decided for a compiled kernel, from its pipeline-stage IR (what
    TILEIR_DUMP_IR prints)."""
    found = re.search(r'tile\.pingpong_choice = "([^"]*)"', ck.artifacts["pipeline"])
    return found.group(1) if found else ""


# In --full since session 24 (see test_pingpong_turns_around_the_products_in_the_sass):
# the choice and its reason in the IR are test_pingpong_is_not_chosen_at_head_dim_64_nor
# _for_a_gemm's, the chosen kernel's SASS at head dim 128 is
# test_128x128_attention_runs_on_tma_and_wgmma_without_local_memory[False]'s
@pytest.mark.slow
@pytest.mark.parametrize("s,causal", [(200, True), pytest.param(300, False,
                                                               marks=pytest.mark.slow)])
def test_the_plain_kernel_at_head_dim_128_chooses_pingpong_in_the_simulator(s, causal):
    # the tutorial source as written, no hint: turns at head dim 128 (ragged: blocks of
    # one and two key tiles, causal a different count per block; GQA), the same bits as
    # with pingpong=False, and the reason in the IR, naming the source line of the loop
    rng = np.random.default_rng()
    h, hkv, d = 2, 1, 128
    q, k, v = _gqa_inputs(rng, h, hkv, s, d)
    outs = []
    for kernel in (example.attention, UNPINGPONGED):
        o = np.full_like(q, np.nan)
        args = _args(q, k, v, o, 128, 128, causal)
        ck = kernel.compile(args, stage="gpu", target="sm_90a")
        chosen = kernel is example.attention
        assert ("nvvm.barrier.arrive" in str(ck.module)) == chosen
        if chosen:
            assert re.fullmatch(r"attention\.py:\d+: ping-pong of the two consumer warpgroups "
                                r"\(chosen: an attention loop of head dim 128 >= 128.*",
                                _choice(ck)), _choice(ck)
        else:
            assert _choice(ck) == ""          # turned off: nothing decided
        simulate(ck, example.grid(q, 128), args)
        outs.append(o)
    np.testing.assert_array_equal(outs[0], outs[1])
    _check_attention(outs[0], q, k, v, causal)


def test_pingpong_is_not_chosen_at_head_dim_64_nor_for_a_gemm():
    # head dim 64 (measured -1.6 to +0.2 %): no turns, and the reason; a GEMM's loop is
    # no candidate: nothing said, its IR as before
    q = np.zeros((1, 2, 300, 64), ml_dtypes.bfloat16)
    args = (q, q, q, q, 0.125, 2, 1, 128, 128, 64, True)
    ck = example.attention.compile(args, stage="pipeline", target="sm_90a")
    assert '"tile.turn"' not in ck.artifacts["pipeline"]
    assert "no ping-pong: head dim 64 < 128" in _choice(ck), _choice(ck)
    forced = PINGPONG.compile(args, stage="pipeline", target="sm_90a")
    assert '"tile.turn"' in forced.artifacts["pipeline"]
    assert "(asked: pingpong=True)" in _choice(forced)
    from tileir.examples import matmul
    a = np.zeros((512, 512), ml_dtypes.bfloat16)
    gemm = matmul.matmul.compile((a, a, np.zeros((512, 512), np.float32), 128, 128, 64),
                                 stage="pipeline", target="sm_90a")
    assert "tile.mma_async" in gemm.artifacts["pipeline"]
    assert "pingpong" not in gemm.artifacts["pipeline"]
    assert '"tile.turn"' not in gemm.artifacts["pipeline"]


# In --full since session 24 (see test_pingpong_turns_around_the_products_in_the_sass)
@pytest.mark.slow
def test_pingpong_in_the_varlen_kernel_runs_in_the_simulator():
    # the loop inside the block's guard, its bounds read from cu_seqlens (an array the
    # kernel never writes, so both warpgroups read the same trip count); sequences
    # without queries (the guard skipped) or without keys (no trip at all)
    rng = np.random.default_rng()
    h, hkv, d, causal = 2, 1, 64, True
    q, k, v, cu_q, cu_k = _packed(rng, [0, 130, 70, 9], [5, 200, 0, 9], h, hkv, d,
                                  np.float16)
    o = np.full_like(q, np.nan)
    lse = np.full((h, q.shape[0]), np.nan, np.float32)
    args = (q, k, v, o, lse, cu_q, cu_k, 1 / math.sqrt(d), h, h // hkv, 128, 64, d, causal,
            True)
    ck = example.attention_varlen.replace_hints(pingpong=True).compile(
        args, stage="gpu", target="sm_90a")
    assert "nvvm.barrier.arrive" in str(ck.module), "no turns"
    simulate(ck, example.varlen_grid(130, 4, h, 128), args)
    _check_varlen(o, lse, q, k, v, cu_q, cu_k, causal, 2e-3)


@ct.kernel(pingpong=True)
def _split_causal(Q, K, V, O, scale: float, H: ct.Constant[int], BM: ct.Constant[int],
                  BN: ct.Constant[int], D: ct.Constant[int]):
    """Causal attention with the key tiles below the diagonal in one loop (no mask) and
    the diagonal ones in a second (masked), as FlashAttention-3 splits them."""
    mb = ct.bid(0)
    b = ct.bid(1) // H
    h = ct.bid(1) % H
    q = ct.load(Q, index=(b, h, mb, 0), shape=(1, 1, BM, D),
                padding_mode=ct.PaddingMode.ZERO).reshape((BM, D))
    qk_scale = scale * example.LOG2E
    m = ct.full((BM, 1), -np.inf, dtype=np.float32)
    l = ct.zeros((BM, 1), dtype=np.float32)
    acc = ct.zeros((BM, D), dtype=np.float32)
    rows = mb * BM + ct.arange(BM, dtype=np.int32)[:, None]
    n_kv = K.shape[2]
    below = min(mb * BM, n_kv) // BN
    for j in range(below):
        k = ct.load(K, index=(b, h, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        s = ct.mma(q, ct.transpose(k), ct.zeros((BM, BN), dtype=np.float32))
        v = ct.load(V, index=(b, h, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        m, l, acc = dec_example._online_softmax_step(s, v, m, l, acc, qk_scale, Q.dtype)
    for j in range(below, ct.cdiv(min((mb + 1) * BM, n_kv), BN)):
        k = ct.load(K, index=(b, h, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        s = ct.mma(q, ct.transpose(k), ct.zeros((BM, BN), dtype=np.float32))
        cols = j * BN + ct.arange(BN, dtype=np.int32)[None, :]
        s = ct.where((cols < n_kv) & (rows >= cols), s, -np.inf)
        v = ct.load(V, index=(b, h, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        m, l, acc = dec_example._online_softmax_step(s, v, m, l, acc, qk_scale, Q.dtype)
    ct.store(O, index=(b, h, mb, 0), tile=(acc / l).reshape((1, 1, BM, D)).astype(O.dtype))


# In --full since session 24 (see test_pingpong_turns_around_the_products_in_the_sass)
@pytest.mark.slow
def test_pingpong_alternates_in_each_of_two_loops_in_the_simulator():
    # the unmasked and the diagonal loop each take turns with their own start and end
    # (the first on the producer's ring, the second on the consumers' own), and the
    # blocks' loops run 0, 2 and 4 trips below the diagonal
    rng = np.random.default_rng()
    s, d, h = 300, 64, 2
    q, k, v = (rng.standard_normal((1, h, s, d)).astype(np.float16) for _ in range(3))
    o = np.full_like(q, np.nan)
    args = (q, k, v, o, 1 / math.sqrt(d), h, 128, 64, d)
    text = str(_split_causal.compile(args, stage="pipeline", target="sm_90a").module)
    assert text.count('"tile.turn"') == 8 and text.count("tile.ring_alloc") == 2, text
    simulate(_split_causal.compile(args, stage="gpu", target="sm_90a"),
             example.grid(q, 128), args)
    _check_attention(o, q, k, v, True)


# ---------------------------------------------------------------------------
# GPU: pingpong=True against torch's SDPA (math backend) in fp32
# ---------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("b,h,hkv,s,d", [(1, 4, 4, 128, 64), (2, 8, 2, 1000, 128),
                                         (3, 6, 3, 77, 64), (1, 2, 1, 513, 128),
                                         (1, 4, 1, 4099, 128)])
@pytest.mark.parametrize("bn", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_pingpong_matches_sdpa_on_the_gpu(b, h, hkv, s, d, bn, causal, dtype):
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dt = getattr(torch, dtype)
    q = torch.randn(b, h, s, d, device="cuda", dtype=dt)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
    o = torch.full_like(q, float("nan"))
    ct.launch(None, example.grid(q, 128), PINGPONG,
              (q, k, v, o, 1.0 / math.sqrt(d), h, h // hkv, 128, bn, d, causal))
    torch.cuda.synchronize()
    group = h // hkv
    with sdpa_kernel(SDPBackend.MATH):
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float().repeat_interleave(group, dim=1),
            v.float().repeat_interleave(group, dim=1), is_causal=causal)
    assert torch.isfinite(o).all()
    err = (torch.linalg.norm(o.float() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2, err


@pytest.mark.gpu
@pytest.mark.parametrize("b,h,hkv,s,dtype,bn", [(2, 8, 2, 1000, "bfloat16", 128),
                                                (1, 4, 1, 4099, "float16", 64),
                                                (3, 6, 3, 77, "bfloat16", 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_the_chosen_pingpong_matches_sdpa_and_the_plain_schedule_on_the_gpu(b, h, hkv, s,
                                                                           dtype, bn, causal):
    # the tutorial kernel as written at head dim 128 (ping-pong chosen by the compiler)
    # against fp32 SDPA, and bit for bit against pingpong=False: the turns order issue
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dt, d = getattr(torch, dtype), 128
    q = torch.randn(b, h, s, d, device="cuda", dtype=dt)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
    outs = []
    for kernel in (example.attention, UNPINGPONGED):
        o = torch.full_like(q, float("nan"))
        ct.launch(None, example.grid(q, 128), kernel,
                  (q, k, v, o, 1.0 / math.sqrt(d), h, h // hkv, 128, bn, d, causal))
        outs.append(o)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1])
    group = h // hkv
    with sdpa_kernel(SDPBackend.MATH):
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float().repeat_interleave(group, dim=1),
            v.float().repeat_interleave(group, dim=1), is_causal=causal)
    assert torch.isfinite(outs[0]).all()
    err = (torch.linalg.norm(outs[0].float() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2, err


# ---------------------------------------------------------------------------
# Head dim 64 (docs/attention.md, "Head dim 64"): fp_fusion=True (s * scale - m as
# one FFMA) and 256 x 64 tiles on four consumer warpgroups (num_warps=16)
# ---------------------------------------------------------------------------
FUSED = example.attention.replace_hints(fp_fusion=True)
FOUR_WARPGROUPS = example.attention.replace_hints(num_warps=16)


# In --full (5.4 s of CPU: the plain and fused kernels at head dim 64, two cubins of their
# own): fp_fusion's FFMAs in the SASS.  The fast tier runs the fused kernel's gpu stage
# (its contracted softmax) in the simulator and the interpreter
# (test_fp_fusion_computes_attention_in_the_simulator_and_the_interpreter[64-True]) and
# checks the attention kernel's SASS at head dim 128
# (test_128x128_attention_runs_on_tma_and_wgmma_without_local_memory[False])
@pytest.mark.slow
def test_fp_fusion_makes_the_softmax_one_ffma_an_element(tmp_path):
    # the softmax's subtract of s * scale - m (and l * alpha + sum) fused into the
    # multiplies: an instruction fewer an element, the product and layout untouched
    q = np.zeros((4, 32, 4096, 64), ml_dtypes.bfloat16)
    args = (q, q, q, q, 0.125, 32, 1, 128, 128, 64, False)
    plain, fused = (kernel.compile(args, target="sm_90a", grid=(32, 128, 1), sm_count=132)
                    for kernel in (example.attention, FUSED))
    assert "fastmath<contract>" in fused.artifacts["tile"]
    assert "fastmath<contract>" not in plain.artifacts["tile"]
    assert "fma.rn.f32" in fused.artifacts["ptx"] and "fma.rn.f32" not in plain.artifacts["ptx"]
    p, f = _sass(plain.cubin, tmp_path), _sass(fused.cubin, tmp_path)
    # 64 scores a thread an iteration, in each of the loop's two copies (the first trip
    # and the rotated loop)
    assert f["FFMA"] >= 2 * 64 and not p["FFMA"], (p["FFMA"], f["FFMA"])
    fp_ops = lambda ops: ops["FFMA"] + ops["FMUL"] + ops["FADD"]        # noqa: E731
    assert fp_ops(p) - fp_ops(f) >= 2 * 64, (fp_ops(p), fp_ops(f))
    assert f["HGMMA"] == p["HGMMA"] and f["MUFU"] == p["MUFU"]
    assert not f["LDL"] and not f["STL"], "local memory (spills)"
    assert fused.meta["num_threads"] == 384


@pytest.mark.parametrize("d,causal", [(64, True), pytest.param(128, False,
                                                               marks=pytest.mark.slow)])
def test_fp_fusion_computes_attention_in_the_simulator_and_the_interpreter(d, causal):
    rng = np.random.default_rng()
    h, hkv, s = 2, 1, 200
    q, k, v = _gqa_inputs(rng, h, hkv, s, d)
    ref = example.reference(q, k, v, 1 / math.sqrt(d), causal)
    o = np.full_like(q, np.nan)
    args = _args(q, k, v, o, 128, 128, causal)
    simulate(FUSED.compile(args, stage="gpu", target="sm_90a"), example.grid(q, 128), args)
    _check_attention(o, q, k, v, causal)
    q32, k32, v32 = (x.astype(np.float32) for x in (q, k, v))
    o32 = np.full_like(q32, np.nan)
    ct.launch(None, example.grid(q32, 64), FUSED,
              _args(q32, k32, v32, o32, 64, 64, causal))
    np.testing.assert_allclose(o32, ref, rtol=0, atol=1e-4)


# In --full (two cubins, ~5 s of CPU): the fast tier keeps the four warpgroups' code in
# the simulator (test_four_consumer_warpgroups_compute_attention_in_the_simulator)
@pytest.mark.slow
def test_four_consumer_warpgroups_at_256x64_fit_without_local_memory(tmp_path):
    # head dim 64, 256 query rows a block: a producer warpgroup and four consumer ones
    # (64 rows each), 112 registers each after setmaxnreg, 4 ring stages of 16 KiB
    # beside Q's 32 KiB; 256 x 128 tiles would spill (S, P of the rotation and O pass 112)
    q = np.zeros((4, 32, 4096, 64), ml_dtypes.bfloat16)
    for causal in (False, True):
        ck = FOUR_WARPGROUPS.compile((q, q, q, q, 0.125, 32, 1, 256, 64, 64, causal),
                                     target="sm_90a", grid=(16, 128, 1), sm_count=132)
        ops = _sass(ck.cubin, tmp_path)
        assert ck.meta["num_threads"] == 640 and ops["USETMAXREG"] == 2
        assert ck.spills == (0, 0), ck.ptxas_report
        # the launch count register_shares balances the pool with (ptxas's, not a guess)
        assert "Used 96 registers" in ck.ptxas_report, ck.ptxas_report
        assert not ops["LDL"] and not ops["STL"], "local memory (spills)"
        assert ops["HGMMA"] and ops["UTMALDG"]
        assert ck.meta["shared_bytes"] <= 232448
        # no ping-pong (it alternates two warpgroups): nothing decided, nothing said
        assert _choice(ck) == ""


def test_register_shares_are_paid_from_what_the_producer_releases():
    # setmaxnreg.inc takes registers only from the block's own pool (what dec released):
    # 640 threads launch at 96, so a producer keeping 40 releases 7 168 registers and
    # four consumer warpgroups at 112 ask 8 192 -- the block hung on the H200
    from tileir.backend.pipeline.rings import launch_registers, register_shares
    for warps, launch, shares in ((8, 168, (40, 232)), (12, 128, (40, 152)),
                                  (16, 96, (32, 112))):
        assert launch_registers(128 + 32 * warps) == launch
        assert register_shares(warps) == shares
        producer, consumer = shares
        assert 32 * warps * (consumer - launch) <= 128 * (launch - producer)


def test_the_simulator_refuses_increases_the_pool_cannot_pay(monkeypatch):
    # the shares of the first four-warpgroup kernel (40 / 112 at 640 threads): the
    # simulator replays the block's register pool and names the hang
    from tileir.backend.pipeline import software_pipeline
    from tileir.sim import SimError
    monkeypatch.setattr(software_pipeline, "register_shares", lambda warps: (40, 112))
    h, hkv, s, d = 2, 1, 90, 64
    q, k, v = (np.zeros((1, n, s, d), np.float16) for n in (h, hkv, hkv))
    args = (q, k, v, np.zeros_like(q), 0.125, h, h // hkv, 256, 64, d, False)
    # a kernel object of its own: its compiled specializations keep the patched shares
    ck = example.attention.replace_hints(num_warps=16).compile(args, stage="gpu",
                                                              target="sm_90a")
    with pytest.raises(SimError, match=r"setmaxnreg.inc to 112 waits for good: the block's "
                                       r"640 threads launch with 96 registers each, the "
                                       r"decreases release 7168 registers and the "
                                       r"increases ask 8192"):
        simulate(ck, example.grid(q, 256), args)


# Since session 24 (the policy: a kernel family's first SASS check and its default
# configuration in the simulator in the fast tier, each option's SASS and simulator
# proofs in --full): [300-True] too: the
# fast tier keeps the four warpgroups' register shares (test_register_shares_are_paid_from
# _what_the_producer_releases) and their kernel's gpu code in the simulator up to the
# pool's check (test_the_simulator_refuses_increases_the_pool_cannot_pay)
@pytest.mark.parametrize("s,causal", [pytest.param(300, True, marks=pytest.mark.slow),
                                      pytest.param(100, False, marks=pytest.mark.slow)])
def test_four_consumer_warpgroups_compute_attention_in_the_simulator(s, causal):
    # causal blocks of 1 and 2 Q tiles (5 key tiles of 64 for the second), ragged, GQA
    rng = np.random.default_rng()
    h, hkv, d = 2, 1, 64
    q, k, v = _gqa_inputs(rng, h, hkv, s, d)
    o = np.full_like(q, np.nan)
    args = _args(q, k, v, o, 256, 64, causal)
    ck = FOUR_WARPGROUPS.compile(args, stage="gpu", target="sm_90a")
    assert "tile.is_producer" in ck.artifacts["pipeline"]
    simulate(ck, example.grid(q, 256), args)
    _check_attention(o, q, k, v, causal)


# persistent=True with a producer warpgroup: one block an SM walks the (mb, head)
# tiles, the producer copying the next tile's K and V while the consumers finish this
# one (specialize_tile_loop, backend/pipeline/persistent.py; the products not rotated)
PERSISTENT = example.attention.replace_hints(persistent=True, warp_specialize=True)


# Since session 24 (the policy: a kernel family's first SASS check and its default
# configuration in the simulator in the fast tier, each option's SASS and simulator
# proofs in --full): [True] too: the fast
# tier keeps the persistent walk with a producer warpgroup (specialize_tile_loop) in the
# simulator on the GEMM (test_simt's test_persistent_gemm_runs_correctly[sm_90a-True-8-..])
# and the attention family's default schedule (test_the_generated_attention_computes_attention)
@pytest.mark.parametrize("causal", [pytest.param(True, marks=pytest.mark.slow),
                                    pytest.param(False, marks=pytest.mark.slow)])
def test_persistent_attention_walks_its_tiles_in_the_simulator(causal):
    # 2 blocks walk 6 tiles (3 Q tiles x 2 heads; causal: 1, 2 and 3 key tiles each,
    # ragged): the ring's slots and phases run on from one tile to the next
    rng = np.random.default_rng()
    h, hkv, s, d = 2, 1, 300, 64
    q, k, v = _gqa_inputs(rng, h, hkv, s, d)
    o = np.full_like(q, np.nan)
    args = _args(q, k, v, o, 128, 128, causal)
    ck = PERSISTENT.compile(args, stage="gpu", target="sm_90a")
    assert ck.meta.get("persistent") and "tile.is_producer" in ck.artifacts["pipeline"]
    simulate(ck, example.grid(q, 128), args, sm_count=2)
    _check_attention(o, q, k, v, causal)


@pytest.mark.slow
def test_persistent_attention_keeps_its_producer_without_local_memory(tmp_path):
    q = np.zeros((4, 32, 4096, 64), ml_dtypes.bfloat16)
    ck = PERSISTENT.compile((q, q, q, q, 0.125, 32, 1, 128, 128, 64, True), target="sm_90a",
                            grid=(32, 128, 1), sm_count=132)
    ops = _sass(ck.cubin, tmp_path)
    assert ck.meta["num_threads"] == 384 and ops["USETMAXREG"] == 2
    assert ck.spills == (0, 0), ck.ptxas_report
    assert not ops["LDL"] and not ops["STL"]


# block_order="reversed": the grouped order from its last tile, the causal blocks with
# the most key tiles first (backend/pipeline/block_order.py)
REVERSED = example.attention.replace_hints(block_order="reversed")


# Since session 24 (the policy: a kernel family's first SASS check and its default
# configuration in the simulator in the fast tier, each option's SASS and simulator
# proofs in --full): in --full: lit keeps
# block_order="reversed"'s remapping of the block ids (group-blocks.mlir, @reversed), the
# fast tier the attention family's default order in the simulator
# (test_the_generated_attention_computes_attention)
@pytest.mark.slow
def test_reversed_block_order_computes_every_tile_once_in_the_simulator():
    # 3 Q tiles x 2 heads, causal (2, 4 and 5 key tiles of 64), with the ping-pong
    # forced so that its turns are checked on the remapped block ids
    rng = np.random.default_rng()
    h, hkv, s, d = 2, 1, 300, 64
    q, k, v = _gqa_inputs(rng, h, hkv, s, d)
    o = np.full_like(q, np.nan)
    args = _args(q, k, v, o, 128, 64, True)
    ck = REVERSED.replace_hints(pingpong=True).compile(args, stage="gpu", target="sm_90a")
    assert "nvvm.barrier.arrive" in str(ck.module), "no turns"
    assert "(asked: pingpong=True)" in _choice(ck)
    simulate(ck, example.grid(q, 128), args)
    _check_attention(o, q, k, v, True)


@pytest.mark.gpu
@pytest.mark.parametrize("variant,bm,bn", [("fused", 128, 128), ("four", 256, 64),
                                           ("persistent", 128, 128), ("reversed", 128, 128)])
@pytest.mark.parametrize("b,h,hkv,s,d,dtype", [(1, 4, 1, 4099, 64, "bfloat16"),
                                               (3, 6, 3, 77, 64, "float16"),
                                               (1, 2, 1, 513, 128, "bfloat16")])
@pytest.mark.parametrize("causal", [False, True])
def test_head_dim_64_variants_match_sdpa_on_the_gpu(variant, bm, bn, b, h, hkv, s, d, dtype,
                                                    causal):
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    kernel = {"fused": FUSED, "four": FOUR_WARPGROUPS, "persistent": PERSISTENT,
              "reversed": REVERSED}[variant]
    dt = getattr(torch, dtype)
    q = torch.randn(b, h, s, d, device="cuda", dtype=dt)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=dt)
    o = torch.full_like(q, float("nan"))
    ct.launch(None, example.grid(q, bm), kernel,
              (q, k, v, o, 1.0 / math.sqrt(d), h, h // hkv, bm, bn, d, causal))
    torch.cuda.synchronize()
    group = h // hkv
    with sdpa_kernel(SDPBackend.MATH):
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float().repeat_interleave(group, dim=1),
            v.float().repeat_interleave(group, dim=1), is_causal=causal)
    assert torch.isfinite(o).all()
    err = (torch.linalg.norm(o.float() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2, err
