"""CPU tests of the tutorial attention kernel (tileir.examples.attention): the generated
code of both targets run by the simulator against a float64 reference (ragged
length, grouped K/V heads, causal or not), and the sm_90a kernel at 128 x 128 tiles
as the GPU runs it: tensor cores, TMA copies, mbarriers, no local memory
(docs/attention.md).  The GPU runs are test_gpu_attention.py."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from tileir.examples import attention as example
from tileir.sim import simulate

from test_tensor_cores import _sass


@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=pytest.mark.slow)])
@pytest.mark.parametrize("causal", [False, True])
def test_the_generated_attention_computes_attention(target, causal):
    rng = np.random.default_rng()
    b, h, hkv, s, d = 1, 2, 1, 100, 64
    q, k, v = (rng.standard_normal((b, n, s, d)).astype(np.float16) for n in (h, hkv, hkv))
    o = np.full_like(q, np.nan)
    args = (q, k, v, o, 1 / math.sqrt(d), h, h // hkv, 64, 64, d, causal)
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
    # 128-row block of two warpgroups, its grid as written
    assert ck.meta["num_threads"] == 256 and "grid_scale" not in ck.meta


def test_the_mask_runs_only_where_it_may_drop_elements():
    q = np.zeros((1, 1, 1000, 64), np.float16)
    text = example.attention.tile_ir(q, q, q, q, 0.125, 1, 1, 64, 64, 64, True)
    loop = text[text.index("scf.for"):]
    # the select sits in the else branch of the all-kept test
    assert loop.index("scf.if") < loop.index("} else {") < loop.index("arith.select")
