"""MLA decode's warpgroup split (the kernel options `warpgroup_split`, `split_replicas`):
the plan the layout stage makes for FlashMLA's schedule
(tileir.backend.layout.warpgroup_split), the layouts it gives the owned ops, and the
owner warpgroup running them alone (backend/gpu/owner_runs.py); docs/attention.md,
"The warpgroup split".  CPU only: the plan's marks on DeepSeek-V3's loop, the loops
it leaves alone and why, the SASS of both forms, and both in the simulator against
the naive reference; at the end, the alternating owners (`alternate_owners`) through
every stage."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from mlir import ir

from tileir.backend.layout import warpgroup_split as ws
from tileir.examples import mla_decode as mla
from tileir.kernel import spill_bytes
from tileir.passes import effects
from tileir.sim import simulate

from test_decode_attention import _loop_around
from test_tensor_cores import _sass_text

# the split alone, its options off whatever the default (mla_decode.SPLIT_HINTS) adds
SPLIT = {"warpgroup_split": True, "early_rescale": False, "fp_fusion": False,
         "merged_handoffs": False, "pair_axis": None}
REPLICAS = {**SPLIT, "split_replicas": True}
RESCALE = {**SPLIT, "early_rescale": True}
MBARRIERS = {**SPLIT, "mbarrier_handoffs": True}


def _deepseek_launch(kernel_hints=None, bn=64):
    """The first launch of MLA decode at DeepSeek-V3's shapes (batch 64, 128 heads,
    pages of 64): (kernel, grid, args)."""
    b = 64
    q = np.zeros((b, 1, 128, 576), ml_dtypes.bfloat16)
    kv = np.zeros((64, 64, 576), ml_dtypes.bfloat16)
    out = np.zeros((b, 1, 128, 512), ml_dtypes.bfloat16)
    _, calls = mla.launches(q, kv, np.zeros((b, 64), np.int32), np.ones(b, np.int32), 0.04,
                            out, 1, bn=bn, hints=kernel_hints)
    return calls[0]


def _deepseek(kernel_hints=None, stage="layout", bn=64):
    """DeepSeek's first launch (`_deepseek_launch`) compiled for sm_90a up to `stage`."""
    kernel, grid, args = _deepseek_launch(kernel_hints, bn)
    return kernel.compile(args, stage=stage, target="sm_90a", grid=grid, sm_count=132).module


def _deepseek_cubin(kernel_hints):
    kernel, grid, args = _deepseek_launch(kernel_hints)
    return kernel.compile(args, target="sm_90a", grid=grid, sm_count=132)


def _walk(module) -> list[ir.Operation]:
    out = []
    module.operation.walk(lambda op: out.append(op.operation) or ir.WalkResult.ADVANCE)
    return out


def test_the_mla_loop_plans_its_scores_for_one_warpgroup():
    ops = _walk(_deepseek(SPLIT))
    loops = [op for op in ops if ws.PLAN_ATTR in op.attributes and op.name == "scf.for"]
    assert len(loops) == 1
    plan = ir.DictAttr(loops[0].attributes[ws.PLAN_ATTR])
    # a 64-key step: Q (64 x 576 bf16, 72 KB) read by both warpgroups and the latent
    # row block (72 KB) split by columns, 216 KB; owned, 144 KB
    assert list(ir.DenseI64ArrayAttr(plan["score_bytes"])) == [221184, 147456]
    # P (64 x 64 bf16) and alpha (64 f32) cross once a step; l is read after the loop
    assert ir.IntegerAttr(plan["handoff_bytes"]).value == 64 * 64 * 2 + 64 * 4
    assert list(ir.DenseI64ArrayAttr(plan["owned_results"])) == [1]
    products = [op for op in ops if op.name == "tile.mma"]
    owned = [op for op in products if ws.OWNER_ATTR in op.attributes]
    assert len(products) == 3 and len(owned) == 2            # q_nope c^T, q_rope r^T
    pc = next(op for op in products if ws.OWNER_ATTR not in op.attributes)
    p = effects.defining_op(pc.operands[0])
    if p.name == "tile.convert_layout":        # (today's exchange of P's halves)
        p = effects.defining_op(p.operands[0])
    assert p.name == "arith.truncf" and ws.HANDOFF_ATTR in p.attributes
    handoffs = [op for op in ops if ws.HANDOFF_ATTR in op.attributes]
    assert sorted(op.name for op in handoffs) == ["arith.truncf", "math.exp2"]
    # no load, store or ring op is owned: the copies serve both warpgroups
    assert not [op for op in ops if ws.OWNER_ATTR in op.attributes and
                not ws._pure(op) and op.name != "tile.mma"]


def test_the_score_products_take_one_warpgroups_layout():
    # the layout stage plans each owned product for 4 warps (m64n64: the whole score
    # tile) and gives its results' ops that layout; P reaches P c's A operand as it is
    # (the other warpgroup holds replicas), the rest keeps the default's layouts
    ops = _walk(_deepseek(SPLIT))
    owned = [op for op in ops if op.name == "tile.mma" and ws.OWNER_ATTR in op.attributes]
    one = "#tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>"
    assert len(owned) == 2 and all(one in str(op.results[0].type) for op in owned)
    pc = next(op for op in ops if op.name == "tile.mma" and ws.OWNER_ATTR not in op.attributes)
    assert "array<i64: 4, 2>, array<i64: 64, 256>" in str(pc.results[0].type)
    loop = next(op for op in ops if ws.PLAN_ATTR in op.attributes)
    inside = effects.ops_under(loop)
    # one conversion in the loop (P's, lowered to nothing); the default has the same one
    # from the column halves, an exchange through shared memory
    assert [op for op in inside if op.name == "tile.convert_layout"] == \
        [effects.defining_op(pc.operands[0])]
    default = [op for op in _walk(_deepseek()) if op.name == "tile.convert_layout"]
    assert len(default) == 1


# In --full (3.0 s of CPU, a DeepSeek cubin of its own): split_replicas' SASS; the fast
# tier runs the replicas' code (gpu stage) in the simulator, [1-1-2-64-64-hints4] of
# test_the_split_kernel_runs_in_the_simulator, and checks the split's SASS at DeepSeek's
# launch in test_the_owner_alone_runs_the_scores_and_hands_p_over
@pytest.mark.slow
def test_replicas_run_whole_scores_in_each_warpgroup_without_barriers(tmp_path):
    # split_replicas=True: each consumer warpgroup issues the 36 k steps of the whole
    # 64 x 64 score tile (m64n64k16) and its half of P c (4 x m64n256k16, P from its
    # own registers); no exchange of row maxima or P: no barrier, no shared-memory store
    # or load in the loop; no local memory, the producer warpgroup and setmaxnreg
    ck = _deepseek_cubin(REPLICAS)
    assert ck.meta["num_threads"] == 384 and "2 stages" in ck.meta["fit"], ck.meta["fit"]
    report = ck.ptxas_report
    assert "C7513" not in report and "C7520" not in report and spill_bytes(report) == (0, 0), \
        report
    loop = _split_loop(ck, tmp_path)
    assert sum("HGMMA.64x64x16" in line for line in loop) == 36
    assert sum("HGMMA.64x256x16" in line for line in loop) == 4
    for op in (" BAR.", " STS", " LDS", "STSM", "LDSM", " STL", " LDL"):
        assert not [line for line in loop if op in line], f"{op.strip()} in the loop"


def test_the_owner_alone_runs_the_scores_and_hands_p_over(tmp_path):
    # warpgroup_split=True: the 36 score wgmmas and the softmax behind one branch (taken
    # by warpgroup 0 alone); alpha and P handed over through shared memory, each by a
    # pair of named barriers: the owner waits on empty, writes (P by stmatrix), arrives
    # on full and goes on with its own registers; the other waits on full, reads (P by
    # ldmatrix) and arrives on empty.  No barrier of both warpgroups in the loop: the
    # owner may run a step ahead (its P c half and the next scores beside the other's)
    ck = _deepseek_cubin(SPLIT)
    assert ck.meta["num_threads"] == 384 and "2 stages" in ck.meta["fit"], ck.meta["fit"]
    report = ck.ptxas_report
    assert "C7513" not in report and "C7520" not in report, report
    loop = _split_loop(ck, tmp_path)
    scores = [i for i, line in enumerate(loop) if "HGMMA.64x64x16" in line]
    pc = [i for i, line in enumerate(loop) if "HGMMA.64x256x16" in line]
    assert len(scores) == 36 and len(pc) == 4 and scores[-1] < pc[0]
    # a forward branch over the owner's run, just before its first wgmma
    assert [line for line in loop[:scores[0]] if re.search(r"@!?P\d BRA", line)], \
        "no branch around the owner's products"
    stsm = [i for i, line in enumerate(loop) if "STSM" in line]
    ldsm = [i for i, line in enumerate(loop) if "LDSM" in line]
    assert len(stsm) == 4 and len(ldsm) == 4 and max(stsm) < min(ldsm) < pc[0]
    empty, full = 8, 9                  # after the ping-pong's turns 6, 7
    bars = [re.search(r"BAR\.(SYNC\.DEFER_BLOCKING|ARV) 0x(\d+), 0x100", line)
            for line in loop if " BAR." in line]
    assert all(bars) and sorted((b.group(1)[:4], int(b.group(2))) for b in bars) == \
        sorted([("SYNC", empty), ("ARV", full), ("SYNC", full), ("ARV", empty)] * 2)
    # no local memory: P leaves the owner's branch packed in pairs (16 registers);
    # unpacked, ptxas spilled 32 bytes around the hand-offs
    assert spill_bytes(report) == (0, 0), report
    assert not [line for line in loop if " STL" in line or " LDL" in line]
    # the row maxima: a thread's 16 scores of a row meet in a tree of 4 dependent
    # FMNMX before the first shuffle (rules/reduce.py; a chain was 15 deep)
    assert _fmnmx_depth(loop) == 4


# In --full (8.5 s of CPU, a DeepSeek cubin of its own): copy_parts' waits in the SASS;
# the fast tier runs copy_parts with the split in the simulator, [1-1-1-64-64-hints3] of
# test_the_split_kernel_runs_in_the_simulator, and checks the split's SASS at DeepSeek's
# launch in test_the_owner_alone_runs_the_scores_and_hands_p_over
@pytest.mark.slow
def test_the_owner_alone_copied_in_parts_waits_per_box_and_both_wait_before_p_c(tmp_path):
    # copy_parts=True with the split: the owner's score k steps wait for the boxes they
    # read (its run is a block of its own), and P c, which both warpgroups run after it,
    # waits again for the 8 boxes of the latent it reads (at once for the owner, whose
    # boxes landed; the other warpgroup waits for them here, having waited for none)
    ck = _deepseek_cubin({**SPLIT, "copy_parts": True})
    assert "C7513" not in ck.ptxas_report and "C7520" not in ck.ptxas_report
    loop = _split_loop(ck, tmp_path)
    scores = [i for i, line in enumerate(loop) if "HGMMA.64x64x16" in line]
    pc = [i for i, line in enumerate(loop) if "HGMMA.64x256x16" in line]
    waits = [i for i, line in enumerate(loop) if "SYNCS.PHASECHK" in line]
    assert len([i for i in waits if i < scores[-1]]) == 9
    assert len([i for i in waits if scores[-1] < i < pc[0]]) == 8
    assert not [line for line in loop if " STL" in line or " LDL" in line]


# In --full (2.0 s): fp_fusion=True, the same early rescale's placement in the SASS with
# the softmax's FFMA fusion on; test_the_split_kernel_runs_in_the_simulator
# [1-3-1-32-32-hints9] runs both together.
# [False] in --full too (12 s of CPU: three DeepSeek cubins of their own): early_rescale's
# code runs in the simulator in the fast tier ([1-3-1-32-32-hints9]), the split's SASS is
# checked by test_the_owner_alone_runs_the_scores_and_hands_p_over
@pytest.mark.slow
@pytest.mark.parametrize("fp_fusion", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_each_warpgroup_rescales_o_as_soon_as_it_holds_alpha(fp_fusion, tmp_path):
    # early_rescale=True: the owner multiplies its half of O by alpha inside its run,
    # among the softmax's exponentials (before it hands alpha over), and the other
    # warpgroup right after reading alpha, before it waits for P; after P's hand-off
    # both go straight to P c.  Without the option both do the 128 multiplies a thread
    # between P's hand-off and P c
    hints = {**RESCALE, "fp_fusion": True} if fp_fusion else RESCALE
    ck = _deepseek_cubin(hints)
    report = ck.ptxas_report
    assert spill_bytes(report) == (0, 0) and not re.search(r"C75(13|20)", report), report
    loop = _split_loop(ck, tmp_path)
    bars = [(i, re.search(r"BAR\.(SYNC\.DEFER_BLOCKING|ARV) 0x(\d+)", line))
            for i, line in enumerate(loop) if " BAR." in line]
    arrive = [i for i, b in bars if b.group(1) == "ARV" and b.group(2) == "9"]
    wait = [i for i, b in bars if b.group(1) != "ARV" and b.group(2) == "9"]
    assert len(arrive) == 2 and len(wait) == 2, bars      # alpha, then P
    exps = [i for i, line in enumerate(loop) if "MUFU.EX2" in line]
    fmul = [i for i, line in enumerate(loop) if re.search(r"\bFMUL\b", line)]
    pc = min(i for i, line in enumerate(loop) if "HGMMA.64x256x16" in line)
    # the owner's 128 among its exponentials, before alpha's hand-off
    owner = [i for i in fmul if exps[0] < i < arrive[0]]
    assert len(owner) >= 128 and max(owner) > exps[len(exps) // 2], (len(owner), exps)
    # the other's 128 after reading alpha, before waiting for P
    other = [i for i in fmul if wait[0] < i < wait[1]]
    assert len(other) == 128, len(other)
    # none after P's hand-off
    assert not [i for i in fmul if min(wait[1], arrive[1]) < i < pc]
    assert not [line for line in loop if " STL" in line or " LDL" in line]
    assert _fmnmx_depth(loop) == 4          # the row maxima's tree (rules/reduce.py)
    # the option changes nothing without the split
    plain = _deepseek_cubin({"warpgroup_split": False})
    assert _deepseek_cubin({"warpgroup_split": False, "early_rescale": True}).cubin == \
        plain.cubin


# In --full (5.7 s of CPU, a DeepSeek cubin of its own): the mbarrier hand-offs' SASS;
# the fast tier runs them in the simulator, [1-2-2-64-64-hints7] of
# test_the_split_kernel_runs_in_the_simulator, and checks the split's SASS at DeepSeek's
# launch in test_the_owner_alone_runs_the_scores_and_hands_p_over
@pytest.mark.slow
def test_hand_offs_on_mbarriers_signal_through_syncs_not_named_barriers(tmp_path):
    # mbarrier_handoffs=True: each hand-off waits on an mbarrier's phase (the owner on
    # *empty*, the other warpgroup on *full*) and every thread of the side that is done
    # arrives on the other (.release): in the loop, 2 waits and 2 arrivals a hand-off
    # (alpha, P) beside the slot's wait and release, and no named barrier
    ck = _deepseek_cubin(MBARRIERS)
    assert "C7513" not in ck.ptxas_report and "C7520" not in ck.ptxas_report
    loop = _split_loop(ck, tmp_path)
    assert not [line for line in loop if " BAR." in line]
    assert sum("SYNCS.PHASECHK" in line for line in loop) == 1 + 2 * 2
    assert sum("SYNCS.ARRIVE" in line for line in loop) == 1 + 2 * 2
    stsm = [i for i, line in enumerate(loop) if "STSM" in line]
    ldsm = [i for i, line in enumerate(loop) if "LDSM" in line]
    assert len(stsm) == 4 and len(ldsm) == 4


# In --full since session 24 (the policy: a family's default configuration once or
# twice in the simulator, each option's simulator proof in --full): the fast tier keeps
# the skewed default's hand-offs in the simulator (test_the_split_kernel_runs_in_the_simulator
# [1-1-2-64-64-hints0], [1-3-1-32-32-hints9]) and the split's SASS
# (test_the_owner_alone_runs_the_scores_and_hands_p_over)
@pytest.mark.slow
def test_unskewed_hand_offs_run_in_the_simulator():
    # skewed_handoffs=False (bench/race_mla.py --no-skew, an A/B for racecheck): every
    # hand-off between two barriers of both warpgroups, no named-barrier arrive left
    # in the kernel, the owner no longer ahead; the same results
    rng = np.random.default_rng()
    lens = rng.integers(2, 3 * 64 + 5, 1)
    q, kv, table, lens = mla.random_case(rng, 1, 2, 64, 64, lens, np.float16)
    out = np.full((1, 2, 64, 512), np.nan, np.float16)
    out, calls = mla.launches(q, kv, table, lens, 0.3, out, 1, bn=64,
                              hints={**RESCALE, "skewed_handoffs": False})
    kernel, grid, args = calls[0]
    ck = kernel.compile(args, stage="gpu", target="sm_90a")
    named = [op for op in _walk(ck.module) if op.name == "nvvm.barrier.arrive"]
    assert not named, "a named-barrier arrive without the skew"
    skewed = mla.variant(**{**mla.SPLIT_HINTS, **RESCALE}).compile(args, stage="gpu",
                                                                    target="sm_90a")
    assert [op for op in _walk(skewed.module) if op.name == "nvvm.barrier.arrive"]
    simulate(ck, grid, args)
    ref = mla.reference(q, kv, table, lens, 0.3)
    assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 2e-3


def _fmnmx_depth(lines: list[str]) -> int:
    """The longest chain of dependent FMNMX (through their registers) feeding the
    first SHFL.BFLY of `lines`."""
    depth: dict[str, int] = {}
    for line in lines:
        m = re.search(r"FMNMX (R\d+), (R\d+)(?:\.reuse)?, (R\d+)", line)
        if m:
            dst, a, b = m.groups()
            depth[dst] = 1 + max(depth.get(a, 0), depth.get(b, 0))
            continue
        m = re.search(r"SHFL\.BFLY PT, R\d+, (R\d+)", line)
        if m:
            return depth.get(m.group(1), 0)
        m = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?[A-Z][A-Z0-9_.]*\s+(R\d+)", line)
        if m:                       # another write of the register ends its chain
            depth.pop(m.group(1), None)
    raise AssertionError("no SHFL.BFLY in the loop")


def _split_loop(ck, tmp_path) -> list[str]:
    lines = _sass_text(ck.cubin, tmp_path).splitlines()
    first, last = _loop_around(lines, lambda line: "HGMMA.64x256x16" in line)
    return lines[first:last + 1]


@pytest.mark.parametrize("kernel, warps, why", [
    ("mla", 4, "two consumer warpgroups"),
    ("values_only", 8, "not computed from a product of the loop"),
    ("scores_only", 8, "0 products accumulate"),
])
def test_the_plan_says_why_it_leaves_a_loop_alone(kernel, warps, why):
    b = 2
    q = np.zeros((b, 1, 64, 576), ml_dtypes.bfloat16)
    kv = np.zeros((4, 64, 576), ml_dtypes.bfloat16)
    table, lens = np.zeros((b, 4), np.int32), np.ones(b, np.int32)
    if kernel == "mla":
        out = np.zeros((b, 1, 64, 512), ml_dtypes.bfloat16)
        _, calls = mla.launches(q, kv, table, lens, 0.04, out, 1)
        k, _, args = calls[0]
    else:
        k = getattr(mla, kernel)
        out = np.zeros((b, 1, 64, 64 if kernel == "scores_only" else 512), np.float32)
        k, _, args = mla.phase_launch(k, q, kv, table, lens, out)
    module = k.compile(args, stage="tile", target="sm_90a").module
    loops = [op for op in _walk(module) if op.name == "scf.for"]
    reasons = [ws.plan_loop(loop, "sm_90a", warps) for loop in loops]
    assert reasons and all(isinstance(r, str) for r in reasons)
    assert any(why in r for r in reasons), reasons


@pytest.mark.parametrize("batch, splits, tq, page, bn, hints", [
    (1, 1, 2, 64, 64, SPLIT),
    # in --full (1.4 s): 2 splits at pages of 32, the same split kernel's paths:
    # [1-2-2-64-64-hints7] keeps 2 splits, [1-3-1-32-32-hints9] pages and bn of 32
    pytest.param(1, 2, 1, 32, 32, SPLIT, marks=pytest.mark.slow),
    pytest.param(2, 3, 3, 64, 64, SPLIT, marks=pytest.mark.slow),   # 3 tokens, 3 splits
    # since session 24 in --full (each option's simulator proof; the fast tier keeps the
    # split alone, hints0, and the pair measured fastest, hints9): copy_parts (its boxes'
    # layout: test_decode_attention's test_copy_parts_boxes_read_match_the_shared_layout),
    # replicas and the hand-offs on mbarriers (the fast tier keeps the split's plan:
    # split-warpgroups.mlir, test_the_mla_loop_plans_its_scores_for_one_warpgroup)
    pytest.param(1, 1, 1, 64, 64, {**SPLIT, "copy_parts": True},   # a barrier per TMA
                 marks=pytest.mark.slow),                           # box too
    pytest.param(1, 1, 2, 64, 64, REPLICAS,             # both warpgroups run the scores
                 marks=pytest.mark.slow),
    pytest.param(1, 2, 1, 32, 32, REPLICAS, marks=pytest.mark.slow),
    # O rescaled where alpha is: in --full (2.2 s): [1-3-1-32-32-hints9] (0.8 s) keeps
    # early_rescale in the simulator in the fast tier (with fp_fusion: the pair measured
    # fastest), [1-2-2-64-64-hints7] two splits of the split kernel at 2 tokens
    pytest.param(2, 2, 2, 64, 64, RESCALE, marks=pytest.mark.slow),
    pytest.param(1, 2, 2, 64, 64, MBARRIERS,            # hand-offs on mbarriers
                 marks=pytest.mark.slow),
    pytest.param(1, 3, 1, 32, 32, {**MBARRIERS, **RESCALE}, marks=pytest.mark.slow),
    (1, 3, 1, 32, 32, {**RESCALE, "fp_fusion": True}),   # the pair measured fastest
    # the producer's L2 lookahead (`l2_ahead`): its prefetch of step k + 2's pages reads
    # the table at k + 2 where that is a step, else at k (prefetch off)
    (2, 2, 1, 64, 64, {**RESCALE, "fp_fusion": True, "l2_ahead": 2}),
    pytest.param(1, 1, 3, 64, 64, {**RESCALE, "copy_parts": True}, marks=pytest.mark.slow),
])
def test_the_split_kernel_runs_in_the_simulator(batch, splits, tq, page, bn, hints):
    # the split kernel through the gpu stage, the owner alone or replicas: the
    # simulator's run (warp roles, named barriers, each warpgroup's wgmmas) of a ragged
    # case (unused slots stale) against the float64 reference
    _simulated_against_the_reference(batch, splits, tq, page, bn, hints, heads=64)


def _simulated_against_the_reference(batch, splits, tq, page, bn, hints, heads):
    """MLA decode's launches of a ragged case (unused slots stale) of `heads` heads,
    each through the gpu stage and the simulator, against the float64 reference;
    returns the first launch's compiled meta."""
    rng = np.random.default_rng()
    lens = rng.integers(tq, 3 * page + 5, batch)
    q, kv, table, lens = mla.random_case(rng, batch, tq, heads, page, lens, np.float16)
    out = np.full((batch, tq, heads, 512), np.nan, np.float16)
    out, calls = mla.launches(q, kv, table, lens, 0.3, out, splits, bn=bn, hints=hints)
    metas = []
    for kernel, grid, args in calls:
        ck = kernel.compile(args, stage="gpu", target="sm_90a")
        simulate(ck, grid, args)
        metas.append(ck.meta)
    ref = mla.reference(q, kv, table, lens, 0.3)
    assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 2e-3
    return metas[0]


# -- alternating owners (the kernel option `alternate_owners`; docs/attention.md,
# "Alternating owners"): the steps to warpgroups 0 and 1 in turn, through every stage
# in the plain form (no run cut around its hand-off, hand-offs between barriers of
# both warpgroups)

ALTERNATE = {**SPLIT, "alternate_owners": True}


def test_alternate_owners_unroll_the_loop_into_pairs_of_owned_steps():
    # DeepSeek's loop becomes a loop over pairs of steps, the first step of a pair
    # owned by warpgroup 0 and the second by warpgroup 1 (each its own score chain,
    # mask, maxima, P and alpha, with the hand-off marks of a step), then the loop as
    # it was for the last step of an odd count (owner 0); each owner's score products
    # are one warpgroup's m64n64 (the other holds replicas), P c stays split by columns
    ops = _walk(_deepseek(ALTERNATE))
    loops = [op for op in ops if op.name == "scf.for" and ws.PLAN_ATTR in op.attributes]
    assert len(loops) == 2
    pairs, last = loops
    plans = [ir.DictAttr(loop.attributes[ws.PLAN_ATTR]) for loop in loops]
    assert list(ir.DenseI64ArrayAttr(plans[0][ws.OWNERS_KEY])) == [0, 1]
    assert ws.OWNERS_KEY not in plans[1] and ir.IntegerAttr(plans[1]["owner"]).value == 0
    assert last.operands[0] == pairs.operands[1]        # from where the pairs end
    for plan in plans:      # a step's bytes either way
        assert list(ir.DenseI64ArrayAttr(plan["score_bytes"])) == [221184, 147456]
        assert ir.IntegerAttr(plan["handoff_bytes"]).value == 64 * 64 * 2 + 64 * 4
    # the row sums l (carried 1), kept by column and summed along the rows after the
    # loop, carried as (64, 1) row sums: they cross between the owners like m, none
    # kept apart; the last step carries the pairs' results, and its l is the loop's
    # sum along the rows (O's divisor, the log-sum-exp)
    assert list(ir.DenseI64ArrayAttr(plans[0]["row_sums"])) == []
    assert list(ir.DenseI64ArrayAttr(plans[0]["carried_owners"])) == [-1, 1, 1]
    assert list(ir.DenseI64ArrayAttr(plans[1]["carried_owners"])) == [-1, 0, 0]
    assert list(last.operands)[3:] == list(pairs.results)
    assert [list(ir.RankedTensorType(r.type).shape) for r in last.results] == \
        [[64, 512], [64, 1], [64, 1]]
    assert not [op for op in ops if op.name == "tile.reduce" and
                ir.StringAttr(op.attributes["kind"]).value == "sum" and
                op.operands[0] in list(last.results)]
    one = "#tile.mma_acc<3 : i64, array<i64: 4, 1>, array<i64: 64, 64>>"

    def owners(loop, name):
        return [ir.IntegerAttr(op.attributes[ws.OWNER_ATTR]).value
                if ws.OWNER_ATTR in op.attributes else None
                for op in effects.ops_under(loop) if op.name == name]

    scores = [op for op in effects.ops_under(pairs)
              if op.name in ("tile.mma", "tile.mma_async") and ws.OWNER_ATTR in op.attributes]
    assert len(scores) == 4 and all(one in str(op.results[0].type) for op in scores)
    assert sorted(owners(pairs, "tile.mma"), key=str) == [0, 0, 1, 1, None, None]
    assert sorted(owners(last, "tile.mma"), key=str) == [0, 0, None]
    assert not [op for op in effects.ops_under(last) if ws.OWNER_ATTR in op.attributes
                and ir.IntegerAttr(op.attributes[ws.OWNER_ATTR]).value == 1]
    # each copy hands off its own P and alpha (truncf, exp2), in step order
    handoffs = [(op.name, ir.IntegerAttr(op.attributes[ws.OWNER_ATTR]).value)
                for op in effects.ops_under(pairs) if ws.HANDOFF_ATTR in op.attributes]
    assert sorted(handoffs) == sorted([("math.exp2", 0), ("arith.truncf", 0),
                                       ("math.exp2", 1), ("arith.truncf", 1)])
    # what one owner hands the other: step 2i's m (maxnumf) and row sums (addf) to
    # warpgroup 1; step 2i + 1's are carried (carried_owners above)
    crossing = sorted((op.name, ir.IntegerAttr(op.attributes[ws.OWNER_ATTR]).value)
                      for op in effects.ops_under(pairs) if ws.CROSS_ATTR in op.attributes)
    assert crossing == [("arith.addf", 0), ("arith.maxnumf", 0)]


def test_alternate_owners_need_the_owner_alone():
    from tileir.errors import KernelOptionError
    for hints in ({"warpgroup_split": False, "alternate_owners": True},
                  {**REPLICAS, "alternate_owners": True}):
        with pytest.raises(KernelOptionError, match="alternate_owners=True needs "
                                                    "warpgroup_split=True"):
            _deepseek(hints, stage="frontend")


def _alternating_case(tq, page, bn, splits, steps):
    """((q, kv, table, lens), the NaN-poisoned output, the launches) of an alternating
    owners' MLA over one sequence a count of `steps` (the last step ragged, stale slots
    past each sequence)."""
    rng = np.random.default_rng()
    lens = np.array([(s - 1) * bn + int(rng.integers(tq, bn + 1)) for s in steps])
    batch = len(lens)
    q, kv, table, lens = mla.random_case(rng, batch, tq, 64, page, lens, np.float16)
    out = np.full((batch, tq, 64, 512), np.nan, np.float16)
    out, calls = mla.launches(q, kv, table, lens, 0.3, out, splits, bn=bn, hints=ALTERNATE)
    return (q, kv, table, lens), out, calls


def _check_alternating(out, case):
    """out against the float64 reference of `case`, no poison left."""
    ref = mla.reference(*case, 0.3)
    assert not np.isnan(out).any()
    assert np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max() < 2e-3


def _pair_loops(module):
    """The loops the layout stage unrolled into owned pairs."""
    return [op for op in _walk(module) if op.name == "scf.for" and ws.PLAN_ATTR in op.attributes
            and ws.OWNERS_KEY in ir.DictAttr(op.attributes[ws.PLAN_ATTR])]


@pytest.mark.parametrize("tq, page, bn, splits, steps", [
    (1, 64, 64, 1, (1, 2, 3)),      # the last step alone, a pair, a pair and the last
    (2, 64, 64, 1, (4, 5)),         # two pairs (m across the back edge), and the last
    (1, 32, 32, 2, (9, 6)),         # 32 rows a step, splits of 5 and 4, 3 and 3 steps
])
def test_alternate_owners_unrolled_loop_runs_like_the_loop(tq, page, bn, splits, steps):
    # the layout stage's IR (pairs, remainder, owner marks) in the Tile IR interpreter
    # against the float64 reference: odd and even step counts, ragged lengths, stale
    # slots past each sequence, the output NaN-poisoned
    from tileir import interpreter
    case, out, calls = _alternating_case(tq, page, bn, splits, steps)
    kernel, grid, args = calls[0]
    module = kernel.compile(args, stage="layout", target="sm_90a").module
    assert _pair_loops(module)
    # the kernel's arguments less its constants (HB, PAGE, BN, SPLIT: folded in)
    interpreter.run(module, kernel.name, grid, list(args)[:8])
    for k, g, a in calls[1:]:           # the split-KV combine
        mla.ct.launch(None, g, k, a)
    _check_alternating(out, case)


def test_alternate_owners_ring_holds_one_step_a_slot():
    # the pipeline stage (backend/pipeline/owner_pairs.py): one ring whose slot is one
    # step's latent and RoPE tiles, a producer loop copying every step, and in the
    # consumers a wait and a release per step: two in the pairs' body, one in the last
    # step's; the ring freed after the last step
    ops = _walk(_deepseek(ALTERNATE, stage="pipeline"))
    allocs = [op for op in ops if op.name == "tile.ring_alloc"]
    assert len(allocs) == 1
    tiles = [str(t) for t in ir.ArrayAttr(allocs[0].attributes["tiles"])]
    assert [t.split(",")[0] for t in tiles] == ["tensor<1x64x512xbf16", "tensor<1x64x64xbf16"]
    loops = [op for op in ops if op.name == "scf.for"]
    producer = [lp for lp in loops if any(o.name == "tile.ring_load"
                                          for o in effects.ops_under(lp))]
    assert len(producer) == 1 and \
        sum(o.name == "tile.ring_load" for o in effects.ops_under(producer[0])) == 2
    pairs = next(lp for lp in loops if ws.PLAN_ATTR in lp.attributes and
                 ws.OWNERS_KEY in ir.DictAttr(lp.attributes[ws.PLAN_ATTR]))
    last = next(lp for lp in loops if lp.operands[0] == pairs.operands[1])

    def count(loop, name):
        return sum(o.name == name for o in effects.ops_under(loop))

    assert (count(pairs, "tile.ring_wait"), count(pairs, "tile.ring_release")) == (2, 2)
    assert (count(last, "tile.ring_wait"), count(last, "tile.ring_release")) == (1, 1)
    free = [op for op in ops if op.name == "tile.ring_free"]
    body = [o.operation for o in last.block.operations]
    assert len(free) == 1 and body.index(free[0]) == body.index(last) + 1


@pytest.mark.parametrize("tq, page, bn, splits, steps", [
    # in --full (3.5 s): the last step alone and 32-row steps with split-KV; the two
    # pairs' case (the back edge, the last step after pairs) keeps the alternation's
    # gpu stage in the fast tier, the interpreter cases below its semantics at each count
    pytest.param(1, 64, 64, 1, (1, 2, 3), marks=pytest.mark.slow),  # last alone, pair(s)
    (2, 64, 64, 1, (4, 5)),         # two pairs (m across the back edge), and the last
    pytest.param(1, 32, 32, 2, (9, 6), marks=pytest.mark.slow),     # 32 rows, splits 5+4, 3+3
])
def test_alternate_owners_run_in_the_simulator(tq, page, bn, splits, steps):
    # the whole alternation in the simulator against the float64 reference, odd and even
    # step counts: the ring of the pairs and the last step (waits, parities, releases,
    # the producer's one loop), each step's owned ops in a run of its owner's warpgroup
    # alone (owner_runs.lower_alternating), m, alpha and P crossing between them, the
    # carried m and row sums across the back edge
    case, out, calls = _alternating_case(tq, page, bn, splits, steps)
    for kernel, grid, args in calls:
        simulate(kernel.compile(args, stage="gpu", target="sm_90a"), grid, args)
    _check_alternating(out, case)


def _alternating_cubin():
    return _deepseek_cubin(ALTERNATE)


# in --full (4 s): the MLA family's SASS in the fast tier is
# test_the_owner_alone_runs_the_scores_and_hands_p_over's
@pytest.mark.slow
def test_alternate_owners_sass_of_deepseeks_launch(tmp_path):
    # DeepSeek's launch: each step's score chain is
    # 36 HGMMA.64x64x16 issued together (the pairs' two steps and the last step's), each
    # step's P c 4 HGMMA.64x256x16 a warpgroup; the producer warpgroup and its ring of
    # two 72 KB slots beside Q
    ck = _alternating_cubin()
    assert ck.meta["num_threads"] == 384 and "2 stages" in ck.meta["fit"], ck.meta["fit"]
    assert not re.search(r"C75(13|20)", ck.ptxas_report), ck.ptxas_report
    lines = _sass_text(ck.cubin, tmp_path).splitlines()
    scores = [i for i, line in enumerate(lines) if "HGMMA.64x64x16" in line]
    assert len(scores) == 3 * 36
    assert sum("HGMMA.64x256x16" in line for line in lines) == 3 * 4
    # three groups of 36, nothing but descriptor moves between a group's wgmmas
    groups = [scores[k:k + 36] for k in range(0, len(scores), 36)]
    for g in groups:
        assert not [line for line in lines[g[0]:g[-1]]
                    if re.search(r"\b(BAR|SYNCS|MUFU|BRA)\b", line)], "a group is cut"


# in --full (ptxas, 4 s: the option's ptxas proof): the alternation's compiled code runs
# in the simulator in the fast tier (test_alternate_owners_run_in_the_simulator
# [2-64-64-1-steps1]) and the MLA family's SASS is
# test_the_owner_alone_runs_the_scores_and_hands_p_over's
@pytest.mark.slow
def test_alternate_owners_do_not_spill_on_deepseeks_launch():
    # (1908 bytes of stores with the row sums kept by column in each owner, 520 with
    # them in one set of registers and the descriptors kept in the loop; none with the
    # sums by row)
    ck = _alternating_cubin()
    assert ck.spills == (0, 0), ck.ptxas_report


def test_alternate_owners_refuse_what_the_pairs_ring_does_not_take():
    # rotated products and copies in parts are not built for the loop of pairs: refused
    # at the user's loop, by name
    from tileir.errors import TileIRError
    for extra, what in (({"product_rotation": True}, "product_rotation=True"),
                        ({"copy_parts": True}, "copy_parts=True")):
        with pytest.raises(TileIRError) as err:
            _deepseek({**ALTERNATE, **extra}, stage="pipeline")
        text = str(err.value)
        assert what in text and "for j in range(first, last):" in text, text


def test_rotated_products_are_not_built_with_the_split():
    # rotated in a split loop, the products gave non-finite output on the H200
    # (software_pipeline.split_not_rotated): a caller's rotation means the unsplit
    # rotated loop, and a kernel that asks for both is refused at the user's loop
    from tileir.errors import TileIRError
    assert mla.default_hints(64, {"product_rotation": True}) == {}
    assert mla.default_hints(64, {}) == mla.SPLIT_HINTS
    with pytest.raises(TileIRError) as err:
        _deepseek({**SPLIT, "product_rotation": True}, stage="pipeline")
    text = str(err.value)
    assert "product_rotation=True with warpgroup_split=True" in text and \
        "for j in range(first, last):" in text, text
    _deepseek({"product_rotation": True}, stage="pipeline")     # unsplit: rotated


# in --full (1 s): test_alternate_owners_run_in_the_simulator[2-64-64-1-steps1] keeps
# the alternation's gpu stage in the fast tier
@pytest.mark.slow
def test_alternate_owners_at_pages_of_16_run_in_the_simulator():
    # 16 rows a step (the LLM engine's pages): the same alternation, 5 steps (two pairs
    # and the last)
    case, out, calls = _alternating_case(1, 16, 16, 1, (5,))
    kernel, grid, args = calls[0]
    module = kernel.compile(args, stage="layout", target="sm_90a").module
    assert _pair_loops(module)
    simulate(kernel.compile(args, stage="gpu", target="sm_90a"), grid, args)
    _check_alternating(out, case)


# -- a token's two head blocks as a cluster pair (the kernel option `pair_axis`;
# docs/attention.md, "A token's blocks as a cluster pair"): each copies half of every
# latent page into both by TMA multicast

PAIR = {"pair_axis": 1}


def test_a_tokens_blocks_share_the_latent_by_multicast(tmp_path):
    # DeepSeek's launch (the default split) as (1, 2, 1) clusters: the latent's 8 boxes
    # of a page, 4 copied by each block with .multicast::cluster, the RoPE box by each
    # block alone (one box, read by the latent's tensor map too); the same ring, shared
    # memory, registers and loop as without the pair; three cluster barriers (the
    # barriers' initialization, the producer's and the consumers' closing one)
    ck = _deepseek_cubin({})                                 # the default: paired
    alone = _deepseek_cubin({"pair_axis": None})
    assert ck.meta["cluster"] == [1, 2, 1] and alone.meta.get("cluster") is None
    assert ck.meta["shared_bytes"] == alone.meta["shared_bytes"]
    assert spill_bytes(ck.ptxas_report) == (0, 0)
    assert not re.search(r"C75\d\d", ck.ptxas_report)
    text = _sass_text(ck.cubin, tmp_path)
    count = lambda pat: len(re.findall(pat, text))      # noqa: E731
    assert count(r"UTMALDG\.3D\.MULTICAST") == 4 and count(r"UTMALDG\.3D ") == 1
    assert count(r"UCGABAR_ARV") == 3 and count(r"UCGABAR_WAIT") == 3
    assert count(r"HGMMA\.64x64x16") == 36 and count(r"HGMMA\.64x256x16") == 4


@pytest.mark.parametrize("batch,splits,tq,page,bn,hints", [
    # 9 tokens: past the 8 a group of the grouped block order takes, which would give
    # a pair's blocks different tokens (a paired kernel keeps the hardware's order)
    (9, 1, 1, 64, 64, PAIR),
    (2, 2, 1, 64, 64, {**PAIR, "l2_ahead": 2}),       # each block prefetches its pages
    pytest.param(1, 2, 2, 32, 32, PAIR, marks=pytest.mark.slow),
    # the split's other forms paired (the default pairs them where H / 64 is even)
    pytest.param(3, 2, 1, 64, 64, {**PAIR, "split_replicas": True}, marks=pytest.mark.slow),
    pytest.param(3, 2, 1, 64, 64, {**PAIR, "merged_handoffs": True},
                 marks=pytest.mark.slow),
    pytest.param(3, 1, 1, 64, 64, {**PAIR, "mbarrier_handoffs": True},
                 marks=pytest.mark.slow),
])
def test_a_tokens_pair_runs_in_the_simulator(batch, splits, tq, page, bn, hints):
    # 128 heads: two blocks a token, run as one cluster (multicast copies into the
    # peer, remote releases, the producer warps' own closing cluster barrier) against
    # the float64 reference
    meta = _simulated_against_the_reference(batch, splits, tq, page, bn, hints, heads=128)
    assert meta["cluster"] == [1, 2, 1]


def test_a_pair_needs_an_even_axis_and_a_kernel_launched_as_written():
    import tileir as ct
    from tileir.errors import KernelOptionError
    from tileir.kernel import hardware_grid
    # 64 heads: one block a token, no pair to make
    q = np.zeros((2, 1, 64, 576), np.float32)
    kv = np.zeros((4, 64, 576), np.float32)
    with pytest.raises(ValueError, match="H / 64 must be even; got H = 64"):
        mla.launches(q, kv, np.zeros((2, 4), np.int32), np.ones(2, np.int32), 0.1,
                     hints=PAIR)
    with pytest.raises(KernelOptionError, match="pair_axis must be a grid axis"):
        mla.variant(pair_axis=3).compile(*_deepseek_args(), target="sm_90a")
    with pytest.raises(KernelOptionError, match="does not combine with copy_parts"):
        mla.variant(pair_axis=1, copy_parts=True).compile(*_deepseek_args(), target="sm_90a")
    with pytest.raises(KernelOptionError, match="does not combine with block_order='grouped'"):
        mla.variant(pair_axis=1, block_order="grouped").compile(*_deepseek_args(),
                                                                target="sm_90a")
    # a launch whose grid is odd along the cluster's axis
    with pytest.raises(ct.TileValueError, match=r"clusters of \(1, 2, 1\) blocks"):
        hardware_grid({"name": "mla", "cluster": [1, 2, 1]}, (64, 1, 1))
    assert hardware_grid({"name": "mla", "cluster": [1, 2, 1]}, (64, 2, 3)) == (64, 2, 3)


def test_the_pair_is_the_default_where_a_token_has_two_head_blocks():
    import tileir as ct
    from tileir.errors import KernelOptionError
    both = {**mla.SPLIT_HINTS, **mla.PAIR_HINTS}
    assert mla.default_hints(64, {}, pairs=True) == both
    assert mla.default_hints(64, {}) == mla.SPLIT_HINTS                 # an odd H / 64
    assert mla.default_hints(16, {}, pairs=True) == {}                  # pages of 16
    assert mla.default_hints(64, {"block_order": "linear"}, pairs=True) == both
    for hints in ({"persistent": True}, {"stream_k": True}, {"copy_parts": True},
                  {"alternate_owners": True}, {"warp_specialize": False},
                  {"block_order": "grouped"}):
        assert "pair_axis" not in mla.default_hints(64, hints, pairs=True), hints
    # a caller's persistent kernel is not paired (the pair refuses it)
    ck = _deepseek_cubin({"persistent": True})
    assert ck.meta.get("cluster") is None
    with pytest.raises(KernelOptionError, match="does not combine with persistent=True"):
        mla.variant(pair_axis=1, persistent=True).compile(*_deepseek_args(), target="sm_90a")
    # 64 heads: one block a token, no pair asked for
    q = np.zeros((2, 1, 64, 576), np.float32)
    _, calls = mla.launches(q, np.zeros((4, 64, 576), np.float32), np.zeros((2, 4), np.int32),
                            np.ones(2, np.int32), 0.1)
    assert "pair_axis" not in calls[0][0].options
    # sm_80 has no TMA multicast: the option is ignored there, as the other sm_90a ones
    kernel, grid, args = _deepseek_launch()
    assert kernel.options.get("pair_axis") == 1
    assert kernel.compile(args, stage="gpu", target="sm_80").meta.get("cluster") is None
    # a value per target
    paired = kernel.replace_hints(pair_axis=ct.ByTarget(sm_90a=1))
    assert paired.compile(args, stage="gpu", target="sm_90a").meta["cluster"] == [1, 2, 1]


def test_the_simulator_refuses_a_cluster_barrier_of_part_of_a_warp():
    from tileir.sim.executor import SimError
    from tileir.sim.ptx_ops import _whole_warps
    mask = np.zeros(256, bool)
    mask[128:] = True                                    # warps 4-7: fine
    _whole_warps(mask, "barrier.cluster.arrive")
    mask[5] = True                                       # one thread of warp 0
    with pytest.raises(SimError, match="only some threads of a warp"):
        _whole_warps(mask, "barrier.cluster.arrive")


def _deepseek_args():
    _, _, args = _deepseek_launch()
    return (args,)


def test_the_rope_box_shared_too_where_asked(monkeypatch, tmp_path):
    # cluster_pairs.ROWS_BESIDE_OTHERS (off until measured): the RoPE tile, one box read
    # from the latent's cache, is shared in half rows as well, through a tensor map of
    # its own box (32 of its 64 rows): all five of a page's copies multicast, the same
    # shared memory, no spills, and the same results in the simulator
    from tileir.backend.pipeline import cluster_pairs
    monkeypatch.setenv("TILEIR_CACHE", "0")
    monkeypatch.setattr(cluster_pairs, "ROWS_BESIDE_OTHERS", True)
    monkeypatch.setattr(mla, "_variants", {})
    ck = _deepseek_cubin({})
    assert sorted(tuple(t["box"]) for t in ck.meta["tensor_maps"]) == [
        (1, 1, 1, 64, 64), (1, 32, 64), (1, 64, 64)]
    assert ck.meta["shared_bytes"] == 229408 and spill_bytes(ck.ptxas_report) == (0, 0)
    text = _sass_text(ck.cubin, tmp_path)
    assert len(re.findall(r"UTMALDG\.3D\.MULTICAST", text)) == 5
    assert not re.search(r"UTMALDG\.3D ", text)
    _simulated_against_the_reference(9, 1, 1, 64, 64, {}, heads=128)
    _simulated_against_the_reference(1, 2, 2, 32, 32, {}, heads=128)
