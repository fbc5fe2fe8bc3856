"""MLA decode's merged hand-offs (the kernel option `merged_handoffs`, with the warpgroup
split's skewed named-barrier hand-offs; docs/attention.md, "Merged hand-offs"): a step's
alpha and P reach the other warpgroup under one wait and one signal each way instead
of a named-barrier round trip each.  CPU only: the SASS of DeepSeek's launch (what the
owner waits for between its exponentials and `P c`), the simulator against the default
kernel (the same arithmetic: bit for bit) and the float64 reference, and the option
combinations refused."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tileir.errors import KernelOptionError
from tileir.examples import mla_decode as mla
from tileir.kernel import spill_bytes
from tileir.sim import simulate

from test_mla_warpgroup_split import _deepseek, _deepseek_cubin, _split_loop

MERGED = {**mla.SPLIT_HINTS, "merged_handoffs": True}
SEPARATE = {**mla.SPLIT_HINTS, "merged_handoffs": False}     # the default
EMPTY, FULL = 8, 9                      # the hand-offs' named barriers (owner_runs.py)


def _bars(loop: list[str]) -> list[tuple[int, str, int]]:
    """(line, SYNC or ARV, barrier id) of the loop's named-barrier instructions."""
    out = []
    for i, line in enumerate(loop):
        m = re.search(r" BAR\.(SYNC|ARV)\S* 0x([0-9a-f]+), 0x100", line)
        if m:
            out.append((i, m.group(1), int(m.group(2), 16)))
    return out


def _offsets(loop: list[str], op: str) -> list[int]:
    """The immediate offsets of the loop's shared-memory `op` (STS, STSM) addresses."""
    return [int(m.group(1), 16) for line in loop
            for m in [re.search(" " + op + r"(?:\.[A-Z0-9]+)* \[R\d+\+0x([0-9a-f]+)\]", line)]
            if m]


def test_merged_handoffs_wait_once_a_step(tmp_path):
    # separate hand-offs (the default: split, early rescale, FFMA): 2 waits and 2
    # arrivals each way a step, the owner's second wait on empty (for the other
    # warpgroup to have read alpha) between its last exponential and its first
    # HGMMA.64x256x16; merged: one of each, the owner's one wait before its
    # exponentials, alpha and P in separate bytes
    default = _split_loop(_deepseek_cubin(SEPARATE), tmp_path)
    merged_ck = _deepseek_cubin(MERGED)
    report = merged_ck.ptxas_report
    assert "C7513" not in report and "C7520" not in report, report
    assert spill_bytes(report) == (0, 0), report
    merged = _split_loop(merged_ck, tmp_path)
    assert not [line for line in merged if " STL" in line or " LDL" in line]
    for loop, each in ((default, 2), (merged, 1)):
        kinds = sorted((kind, bar) for _, kind, bar in _bars(loop))
        assert kinds == sorted([("SYNC", EMPTY), ("ARV", FULL), ("SYNC", FULL),
                                ("ARV", EMPTY)] * each), kinds
    for loop, owner_waits in ((default, 1), (merged, 0)):
        last_exp = max(i for i, line in enumerate(loop) if "MUFU.EX2" in line)
        first_pc = min(i for i, line in enumerate(loop) if "HGMMA.64x256x16" in line)
        waits = [(i, bar) for i, kind, bar in _bars(loop)
                 if kind == "SYNC" and bar == EMPTY and last_exp < i < first_pc]
        assert len(waits) == owner_waits, (waits, last_exp, first_pc)
    # the owner's one wait on empty comes before its first exponential
    first_exp = min(i for i, line in enumerate(merged) if "MUFU.EX2" in line)
    assert [i for i, kind, bar in _bars(merged) if (kind, bar) == ("SYNC", EMPTY)][0] < \
        first_exp
    # alpha (64 f32, STS) and P (64 x 64 bf16, STSM) side by side: P's bytes start past
    # alpha's, so the owner writes P while the other warpgroup may still read alpha
    sts, stsm = _offsets(merged, "STS"), _offsets(merged, "STSM")
    assert len(stsm) == 4 and sts and min(stsm) >= max(sts) + 4
    assert min(stsm) > min(_offsets(default, "STSM")) - 1      # (default: both at 0)
    assert set(_offsets(default, "STSM")) & set(_offsets(default, "STS"))


@pytest.mark.parametrize("batch, splits, tq, page, bn, hints", [
    (1, 1, 2, 64, 64, MERGED),
    pytest.param(2, 3, 3, 64, 64, MERGED, marks=pytest.mark.slow),     # 3 tokens, 3 splits
    pytest.param(1, 2, 1, 32, 32, MERGED, marks=pytest.mark.slow),     # 32 rows a step
    # the split alone: O's rescale by both warpgroups after the hand-offs, between them
    pytest.param(1, 1, 2, 64, 64, {"warpgroup_split": True, "early_rescale": False,
                                   "fp_fusion": False, "merged_handoffs": True},
                 marks=pytest.mark.slow),
])
def test_merged_handoffs_compute_what_the_default_computes(batch, splits, tq, page, bn,
                                                           hints):
    # the simulator (warp roles, named barriers: a protocol whose waits and arrivals do
    # not balance hangs there) on a ragged case with stale unused slots: the merged
    # kernel writes the same bits as the kernel with the same hints but separate
    # hand-offs (only the signals differ), and both match the float64 reference
    rng = np.random.default_rng()
    lens = rng.integers(tq, 3 * page + 5, batch)
    q, kv, table, lens = mla.random_case(rng, batch, tq, 64, page, lens, np.float16)
    outs = []
    for h in ({**hints, "merged_handoffs": False}, hints):
        out = np.full((batch, tq, 64, 512), np.nan, np.float16)
        out, calls = mla.launches(q, kv, table, lens, 0.3, out, splits, bn=bn, hints=h)
        for kernel, grid, args in calls:
            simulate(kernel.compile(args, stage="gpu", target="sm_90a"), grid, args)
        outs.append(out)
    assert np.array_equal(outs[0], outs[1], equal_nan=True)
    ref = mla.reference(q, kv, table, lens, 0.3)
    assert np.abs(outs[1].astype(np.float64) - ref).max() / np.abs(ref).max() < 2e-3


@pytest.mark.parametrize("hints", [
    {**MERGED, "split_replicas": True},
    {**MERGED, "mbarrier_handoffs": True},
    {**MERGED, "skewed_handoffs": False},
    {**MERGED, "alternate_owners": True, "early_rescale": False},
])
def test_merged_handoffs_need_the_skewed_named_barrier_protocol(hints):
    with pytest.raises(KernelOptionError, match="merged_handoffs=True needs the warpgroup "
                                                "split's skewed named-barrier hand-offs"):
        _deepseek(hints, stage="frontend")


def test_merged_handoffs_do_nothing_without_the_split(tmp_path):
    # like the split's other options, merged_handoffs does nothing where the split is
    # not taken (pages of 16: mla_decode.default_hints leaves the split off; or turned
    # off): the same cubin as without it
    for bn, hints in ((16, {}), (64, {"warpgroup_split": False})):
        plain = mla.variant(**{**mla.default_hints(bn, hints), **hints})
        merged = mla.variant(**{**mla.default_hints(bn, hints), **hints,
                                "merged_handoffs": True})
        assert merged is not plain
        a = _deepseek({**hints, "merged_handoffs": True}, stage="gpu", bn=bn)
        b = _deepseek(hints, stage="gpu", bn=bn)
        assert "nvvm.barrier.arrive" not in str(a)
        assert str(a).replace("merged_handoffs = true, ", "") == str(b)
