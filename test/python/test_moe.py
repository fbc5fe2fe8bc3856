"""CPU tests of the DeepSeek-V3 mixture-of-experts kernels (tileir.examples.moe): the
router and the routed experts in the interpreter against float64 NumPy at small
ragged sizes (16 experts in 4 groups, 2 groups kept, top 4; H and I not multiples of
the tiles), the whole chain compiled for sm_90a with the GPU's tiles and run by the
simulator, and the sm_90a cubins at DeepSeek-V3's shapes (H 7168, I 2048, 256
experts, top 8 of 4 groups out of 8): tensor cores, TMA, no spills.  The GPU runs
are test_gpu_moe.py."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from tileir.examples import moe
from tileir.kernel import hardware_grid
from tileir.sim import simulate

from test_tensor_cores import _sass

BF16 = ml_dtypes.bfloat16
SMALL = dict(top_k=4, n_group=4, topk_group=2, routed_scaling_factor=2.5)
V3 = dict(H=7168, I=2048, E=256, top_k=8, n_group=8, topk_group=4, routed_scaling_factor=2.5)


def make_router(rng, t, h, e, dtype, bias_scale=0.1):
    x = rng.standard_normal((t, h)).astype(dtype)
    gate = (rng.standard_normal((e, h)) / np.sqrt(h)).astype(dtype)
    bias = (rng.standard_normal(e) * bias_scale).astype(np.float32)
    return x, gate, bias


def make_experts(rng, e, h, i, dtype):
    w_gate_up = (rng.standard_normal((e, 2 * i, h)) / np.sqrt(h)).astype(dtype)
    w_down = (rng.standard_normal((e, h, i)) / np.sqrt(i)).astype(dtype)
    return w_gate_up, w_down


def assert_same_routing(ids, weights, ref_ids, ref_weights, masked, gscore, topk_group,
                        tol=1e-5, rtol=1e-5, max_ties=0.05):
    """Our choice against the reference's, ties aside: per token the same experts with the
    same weights, or a near-tie (the biased, masked scores of the two choices agree to
    `tol`, or the kept groups were a near-tie) on at most `max_ties` of the tokens."""
    ids = np.asarray(ids)
    weights = np.asarray(weights, np.float64)
    assert ids.dtype == np.int32 and weights.dtype == np.float64
    t = ids.shape[0]
    differ = 0
    for r in range(t):
        if set(ids[r]) == set(ref_ids[r]):
            ours = dict(zip(ids[r], weights[r]))
            np.testing.assert_allclose([ours[e] for e in ref_ids[r]], ref_weights[r],
                                       rtol=rtol, atol=tol, err_msg=f"token {r}")
            continue
        differ += 1
        assert len(set(ids[r])) == ids.shape[1], f"token {r}: an expert twice: {ids[r]}"
        g = np.sort(gscore[r])[::-1]
        group_tie = g[topk_group - 1] - g[topk_group] < tol
        same_values = np.allclose(np.sort(masked[r, ids[r]]), np.sort(masked[r, ref_ids[r]]),
                                  atol=tol, rtol=0)
        assert group_tie or same_values, (
            f"token {r}: chose {sorted(ids[r])}, reference {sorted(ref_ids[r])}, scores "
            f"{masked[r, ids[r]]} against {masked[r, ref_ids[r]]}")
    assert differ <= max(1, max_ties * t), f"{differ} of {t} tokens chose differently"


# ----------------------------------------------------------------------------- routing

@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("norm", [True, False])
def test_routing_matches_the_reference(dtype, norm):
    rng = np.random.default_rng()
    x, gate, bias = make_router(rng, 37, 100, 16, dtype)
    kw = dict(SMALL, norm_topk_prob=norm)
    ids, weights = moe.route(x, gate, bias, **kw)
    ref_ids, ref_w, masked, gscore = moe.reference_route(x, gate, bias, **kw)
    assert ids.shape == (37, 4) and weights.dtype == np.float32
    assert_same_routing(ids, weights, ref_ids, ref_w, masked, gscore, SMALL["topk_group"])


def test_routing_with_pairs_of_experts_in_8_groups_and_top_3():
    """Groups of two (the group score is both), top_k not a power of two."""
    rng = np.random.default_rng()
    x, gate, bias = make_router(rng, 50, 48, 16, np.float32)
    kw = dict(top_k=3, n_group=8, topk_group=3, routed_scaling_factor=1.0,
              norm_topk_prob=False)
    ids, weights = moe.route(x, gate, bias, **kw)
    assert ids.shape == (50, 3)
    assert_same_routing(ids, weights, *moe.reference_route(x, gate, bias, **kw), 3)


def test_routing_keeps_unchosen_groups_at_zero_like_masked_fill():
    """With a bias that makes every kept expert's biased score negative but a few, the
    experts of dropped groups (0.0 after masked_fill) beat the kept ones, as in
    transformers: the choice must include them, and the weights are their scores."""
    rng = np.random.default_rng()
    x, gate, bias = make_router(rng, 29, 64, 16, np.float32)
    bias[:] = -2.0
    bias[rng.choice(16, 3, replace=False)] = 0.5
    kw = dict(SMALL, norm_topk_prob=True)
    ids, weights = moe.route(x, gate, bias, **kw)
    ref_ids, ref_w, masked, gscore = moe.reference_route(x, gate, bias, **kw)
    picked = np.take_along_axis(masked, ids.astype(np.int64), axis=1)
    assert (picked == 0.0).any(), "no expert of a dropped group was chosen"
    # the zeros tie: compare the scores chosen, and the weights' sums (normalized: 2.5)
    np.testing.assert_allclose(np.sort(picked, 1),
                               np.sort(np.take_along_axis(masked, ref_ids, 1), 1), atol=1e-6)
    np.testing.assert_allclose(weights.sum(1), 2.5, rtol=1e-5)


def test_routing_refuses_what_the_kernel_does_not_take():
    x, gate, bias = make_router(np.random.default_rng(), 4, 32, 16, np.float32)
    with pytest.raises(ValueError, match="power-of-two number of experts"):
        moe.route(x, gate[:12], bias[:12], top_k=2, n_group=4, topk_group=2,
                  routed_scaling_factor=1.0, norm_topk_prob=True)
    with pytest.raises(ValueError, match="topk_group=5"):
        moe.route(x, gate, bias, top_k=2, n_group=4, topk_group=5, routed_scaling_factor=1.0,
                  norm_topk_prob=True)
    with pytest.raises(ValueError, match=r"gate_weight is \(16, 31\)"):
        moe.route(x, gate[:, :31], bias, **SMALL, norm_topk_prob=True)


# ----------------------------------------------------------------------------- experts

def run_experts(rng, t, h, i, e, top_k, dtype, ids=None, tiles=None):
    x = rng.standard_normal((t, h)).astype(dtype)
    w_gate_up, w_down = make_experts(rng, e, h, i, dtype)
    if ids is None:
        ids = np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32)
    weights = rng.uniform(0.1, 1.0, (t, top_k)).astype(np.float32)
    out = np.full((t, h), np.nan, dtype)
    if tiles is None:
        assert moe.experts(x, ids, weights, w_gate_up, w_down, out=out) is out
    else:
        moe._launch_all(moe.plan_experts(x, ids, weights, w_gate_up, w_down, out, tiles)[0])
    return out, moe.reference_experts(x, ids, weights, w_gate_up, w_down)


def _close(out, ref, rel):
    out = out.astype(np.float64)
    assert np.isfinite(out).all()
    assert np.abs(out - ref).max() <= rel * np.abs(ref).max(), np.abs(out - ref).max()


@pytest.mark.parametrize("t", [1, 5, 37])
@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("decode", [False, True])
def test_experts_match_the_reference(t, dtype, decode):
    tiles = moe.Tiles(decode, 16, 32, 32)
    out, ref = run_experts(np.random.default_rng(), t, 100, 72, 16, 4, dtype, tiles=tiles)
    _close(out, ref, 1e-5 if dtype == np.float32 else 2e-2)


@pytest.mark.parametrize("decode", [False, True])
def test_experts_with_skewed_routing_span_several_blocks_and_skip_idle_experts(decode):
    """Every token on experts 0, 3 and 11 (each over several 16-row blocks), the others
    idle but for 5 and 6."""
    rng = np.random.default_rng()
    t = 45
    ids = np.stack([rng.permutation([3, 11, 5 + (r % 2), 0]) for r in range(t)])
    out, ref = run_experts(rng, t, 70, 40, 16, 4, np.float32, ids.astype(np.int32),
                           moe.Tiles(decode, 16, 32, 32))
    _close(out, ref, 1e-5)


def test_exact_experts_sum_float32_products_on_the_fma_units():
    """exact=True: the reference mode's experts (float32 products and sums), in the
    interpreter and, for sm_90a, compiled without tensor-core products."""
    rng = np.random.default_rng()
    x = rng.standard_normal((9, 100)).astype(np.float32)
    w_gate_up, w_down = make_experts(rng, 16, 100, 72, np.float32)
    ids = np.stack([rng.choice(16, 4, replace=False) for _ in range(9)]).astype(np.int32)
    weights = rng.uniform(0.1, 1.0, (9, 4)).astype(np.float32)
    out = moe.experts(x, ids, weights, w_gate_up, w_down, exact=True)
    _close(out, moe.reference_experts(x, ids, weights, w_gate_up, w_down), 1e-5)
    launches, _ = moe.plan_experts(x, ids, weights, w_gate_up, w_down, tiles=moe.EXACT_TILES,
                                   exact=True)
    for kernel, grid, args in launches:
        if kernel in (moe.gate_up, moe.down):
            ptx = kernel.compile(args, stage="ptx", target="sm_90a").artifacts["ptx"]
            assert "mma" not in ptx and "mul.rn.f32" in ptx       # products in f32, not tf32
    with pytest.raises(ValueError, match="prefill kernels' form"):
        moe.plan_experts(x, ids, weights, w_gate_up, w_down, tiles=moe.Tiles(True, 16, 32, 32),
                         exact=True)


def test_experts_with_12_experts_and_top_3():
    """E not a power of two (only the router needs one), top_k = 3."""
    out, ref = run_experts(np.random.default_rng(), 19, 50, 24, 12, 3, np.float32)
    _close(out, ref, 1e-5)


def test_routing_then_experts():
    rng = np.random.default_rng()
    x, gate, bias = make_router(rng, 23, 96, 16, np.float32)
    w_gate_up, w_down = make_experts(rng, 16, 96, 48, np.float32)
    ids, weights = moe.route(x, gate, bias, **SMALL, norm_topk_prob=True)
    out = moe.experts(x, ids, weights, w_gate_up, w_down)
    _close(out, moe.reference_experts(x, ids, weights, w_gate_up, w_down), 1e-5)


def test_experts_refuse_mismatched_shapes():
    rng = np.random.default_rng()
    x = np.zeros((3, 32), np.float32)
    w_gate_up, w_down = make_experts(rng, 4, 32, 16, np.float32)
    ids = np.zeros((3, 2), np.int32)
    w = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"w_down is \(4, 16, 32\)"):
        moe.experts(x, ids, w, w_gate_up, w_down.transpose(0, 2, 1))
    with pytest.raises(ValueError, match="int32"):
        moe.experts(x, ids.astype(np.int64), w, w_gate_up, w_down)
    with pytest.raises(ValueError, match=r"out is \(3, 31\)"):
        moe.experts(x, ids, w, w_gate_up, w_down, out=np.zeros((3, 31), np.float32))


def test_grids_depend_on_shapes_only():
    """CUDA graphs replay the launches: two routings of the same shapes launch the same
    grids, sized for the worst case."""
    rng = np.random.default_rng()
    x = np.zeros((9, 32), np.float32)
    w_gate_up, w_down = make_experts(rng, 16, 32, 16, np.float32)
    w = np.ones((9, 4), np.float32)
    spread = np.stack([rng.choice(16, 4, replace=False) for _ in range(9)]).astype(np.int32)
    piled = np.tile(np.arange(4, dtype=np.int32), (9, 1))
    grids = [[g for _, g, _ in moe.plan_experts(x, ids, w, w_gate_up, w_down)[0]]
             for ids in (spread, piled)]
    assert grids[0] == grids[1]


@pytest.mark.parametrize("bm", [16, 64, 128])
def test_the_worst_case_block_count_bounds_every_routing(bm):
    rng = np.random.default_rng()
    for e, pairs in ((16, 3), (16, 160), (256, 8), (256, 512), (256, 16384)):
        bound = moe.sorted_blocks(pairs, e, bm)
        for counts in (rng.multinomial(pairs, np.ones(e) / e),
                       rng.multinomial(pairs, rng.dirichlet(np.full(e, 0.05))),
                       np.bincount(np.arange(pairs) % min(e, pairs), minlength=e),
                       np.r_[pairs - min(e, pairs) + 1, np.ones(min(e, pairs) - 1, int),
                             np.zeros(e - min(e, pairs), int)]):
            assert counts.sum() == pairs
            assert (-(-counts // bm)).sum() <= bound


# ----------------------------------------------------------------------------- the GPU's code

def _simulate_all(launches, sms):
    for kernel, grid, args in launches:
        grid = tuple(grid) + (1,) * (3 - len(grid))
        ck = kernel.compile(args, stage="gpu", target="sm_90a", grid=grid, sm_count=sms)
        simulate(ck, hardware_grid(ck.meta, grid), args, sm_count=sms)


@pytest.mark.slow
@pytest.mark.parametrize("t,h,tiles,sms,used", [
    (20, 200, moe.Tiles(True, 16, 64, 64), 132, 16),     # decode's transposed kernels
    (20, 200, moe.Tiles(False, 64, 128, 64), 132, 16),   # prefill's kernels, narrowed
    (40, 456, moe.Tiles(False, 128, 128, 64), 1, 10),    # many waves: widened, persistent
], ids=["decode", "narrowed", "persistent"])
def test_the_generated_sm90a_chain_computes_the_experts(t, h, tiles, sms, used):
    """Route and experts as the GPU runs them (bf16, wgmma, TMA rings, the retiled and
    persistent variants the launch's grid asks for), by the simulator.  With `used` < 16
    the tokens go to experts 0..used-1 only, so the persistent blocks' walk meets blocks
    with no expert (which return) before tiles with work: down's 4 column tiles of H = 456
    become 2 of 256, walked 8 row blocks at a time, and blocks 10..15 are empty."""
    rng = np.random.default_rng()
    i, e = 136, 16
    x, gate, bias = make_router(rng, t, h, e, BF16)
    kw = dict(SMALL, norm_topk_prob=True)
    launches, ids, weights = moe.plan_route(x, gate, bias, **kw)
    _simulate_all(launches, sms)
    assert_same_routing(ids, weights, *moe.reference_route(x, gate, bias, **kw),
                        SMALL["topk_group"])
    if used < e:
        ids = np.stack([rng.choice(used, 4, replace=False) for _ in range(t)]).astype(np.int32)
    w_gate_up, w_down = make_experts(rng, e, h, i, BF16)
    out = np.full((t, h), np.nan, BF16)
    launches, _ = moe.plan_experts(x, ids, weights, w_gate_up, w_down, out, tiles=tiles)
    _simulate_all(launches, sms)
    _close(out, moe.reference_experts(x, ids, weights, w_gate_up, w_down), 2e-2)


@pytest.mark.slow
def test_the_generated_sm90a_float32_router_chooses_as_transformers():
    """The float32 router (FMA units) as the GPU runs it, on a ragged width."""
    rng = np.random.default_rng()
    x, gate, bias = make_router(rng, 9, 100, 16, np.float32)
    kw = dict(SMALL, norm_topk_prob=True)
    launches, ids, weights = moe.plan_route(x, gate, bias, **kw)
    assert launches[0][0] is moe.router_logits_f32
    _simulate_all(launches, 132)
    assert_same_routing(ids, weights, *moe.reference_route(x, gate, bias, **kw),
                        SMALL["topk_group"])


def _report(ck):
    report = ck.ptxas_report or ""
    spills = re.search(r"(\d+) bytes spill stores", report)
    return int(spills.group(1)) if spills else None


def _standin(shape, dtype):
    """An array of `shape` whose memory is one element: a view with the real strides (the
    compiler reads shapes, strides, dtype and alignment, never the data; nothing runs)."""
    strides = np.cumprod((1,) + shape[:0:-1])[::-1] * np.dtype(dtype).itemsize
    return np.lib.stride_tricks.as_strided(np.zeros(8, dtype), shape, tuple(strides))


def _v3_launches(t, dtype=BF16):
    """Every launch of route + experts at DeepSeek-V3's shapes for t tokens."""
    h, i, e, k = V3["H"], V3["I"], V3["E"], V3["top_k"]
    kw = {k_: V3[k_] for k_ in ("top_k", "n_group", "topk_group", "routed_scaling_factor")}
    x = np.zeros((t, h), dtype)
    route, _, w = moe.plan_route(x, np.zeros((e, h), dtype), np.zeros(e, np.float32), **kw,
                                 norm_topk_prob=True)
    experts, _ = moe.plan_experts(x, np.zeros((t, k), np.int32), w,
                                  _standin((e, 2 * i, h), dtype), _standin((e, h, i), dtype),
                                  tiles=moe.expert_tiles(t * k, e, True,
                                                         np.dtype(dtype).itemsize))
    return route + experts


# T = 1, 16 and 64 take the decode tiles (16-row blocks, one an expert), 2048 the
# prefill ones (64-row wgmma tiles): the fast tier keeps 64 (the router, gate_up and
# down cubins on wgmma and TMA without spills); 2048 (6 s of CPU) in --full, beside
# test_llm_kernels' wgmma GEMMs in the fast tier (test_prompt_residual_gemms_take_their_
# swept_tiles, test_llama_8b_gemms_run_on_wgmma_and_tma["qkv decode, norm fused"])
@pytest.mark.parametrize("t", [pytest.param(1, marks=pytest.mark.slow),
                               pytest.param(16, marks=pytest.mark.slow), 64,
                               pytest.param(2048, marks=pytest.mark.slow)])
def test_deepseek_v3_cubins_use_tensor_cores_and_tma_without_spills(t, tmp_path):
    for kernel, grid, args in _v3_launches(t):
        grid = tuple(grid) + (1,) * (3 - len(grid))
        ck = kernel.compile(args, target="sm_90a", grid=grid, sm_count=132)
        name = kernel.name
        assert _report(ck) == 0, f"{name}: spills\n{ck.ptxas_report}"
        if kernel in (moe.gate_up, moe.down, moe.router_logits):
            ops = _sass(ck.cubin, tmp_path)
            # the experts' 64- and 128-row tiles on wgmma; the router's 16 rows on mma.sync
            mma = "HMMA" if kernel is moe.router_logits else "HGMMA"
            for op in (mma, "UTMALDG"):
                assert ops[op], f"{name}: no {op} in the SASS: {sorted(ops)}"
            assert not ops["LDL"] and not ops["STL"], f"{name}: local memory"


@pytest.mark.slow
@pytest.mark.parametrize("t", [64, 2048])
def test_float32_cubins_without_spills_and_the_router_on_the_fma_units(t, tmp_path):
    for kernel, grid, args in _v3_launches(t, np.float32):
        grid = tuple(grid) + (1,) * (3 - len(grid))
        ck = kernel.compile(args, target="sm_90a", grid=grid, sm_count=132)
        assert _report(ck) == 0, f"{kernel.name}: spills\n{ck.ptxas_report}"
        if kernel is moe.router_logits_f32:
            assert not _sass(ck.cubin, tmp_path)["HGMMA"]  # no tf32 rounding of the logits
