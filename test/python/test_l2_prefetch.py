"""The `l2_prefetch` kernel option: a programmatically launched sm_90a kernel brings
its ring's first tiles into L2 before its grid-dependency wait
(backend/pipeline/software_pipeline.py `prefetch_first`, rules/ring.py `_prefetch_l2`).

CPU tier: the PTX and SASS of the decode GEMM, the option off leaving the PTX as it
was, the kernel in tileir.sim.  GPU tier: the decode GEMM's answer with the option on.
"""

import re

import numpy as np
import pytest

import tileir as ct
from tileir.errors import KernelOptionError
from tileir.kernel import hardware_grid
from tileir.llm import kernels as K

PREFETCH = "cp.async.bulk.prefetch.tensor"
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global"      # (not the TMA store)
# the tensor map operand and the coordinates of a TMA instruction in PTX
_MAP = re.compile(r"\[(%rd\d+), \{([^}]*)\}\]")


def _bf(*shape, fill=0.0):
    import ml_dtypes
    return np.full(shape, fill, ml_dtypes.bfloat16)


def _decode_args():
    """Llama-3-8B's QKV projection at one token: 1 x 6144 x 4096 bf16."""
    return (_bf(1, 4096), _bf(4096), 1e-5, _bf(6144, 4096), _bf(1, 6144),
            128, 128, 64, False, False)


DECODE_GRID = (1, 48, 1)


def _compile(kernel, args, grid, stage=None):
    return kernel.compile(args, stage, target="sm_90a", grid=grid, sm_count=132)


# In --full since session 24 (the policy: an option's SASS proof in --full): the fast
# tier keeps the option's PTX (test_option_off_leaves_the_ptx_unchanged,
# test_no_prefetch_without_programmatic_launch), its prefetches in the simulator
# (test_prefetching_gemm_in_the_simulator[producer]) and the GEMVs' rings taking it
# (test_llm_gemv's test_l2_prefetch_option_reaches_the_gemv_rings)
@pytest.mark.slow
def test_decode_gemm_prefetches_its_first_tiles_before_the_wait(tmp_path):
    from test_tensor_cores import _sass, _sass_text
    on = K.linear.replace_hints(l2_prefetch=True)
    ir = _compile(on, _decode_args(), DECODE_GRID, "pipeline").ir()
    stages = int(re.search(r'"tile.ring_alloc"\(\) \{stages = (\d+)', ir).group(1))
    # two ring loads (x and w), each prefetched for the first S - 1 iterations
    assert ir.count('"tile.prefetch_l2"') == 2 * (stages - 1)
    assert "tile.producer_warps" in ir             # the warp-specialized producer's ring

    ck = _compile(on, _decode_args(), DECODE_GRID)
    ptx = ck.artifacts["ptx"].splitlines()
    wait = [i for i, line in enumerate(ptx) if "griddepcontrol.wait" in line]
    prefetches = [i for i, line in enumerate(ptx) if PREFETCH in line]
    loads = [line for line in ptx if TMA_LOAD in line]
    assert len(wait) == 1
    # each 64 x 128 bf16 tile is two boxes of one 128-byte swizzle row (64 elements)
    assert len(prefetches) == 2 * 2 * (stages - 1)
    assert max(prefetches) < wait[0], "a prefetch after the wait overlaps nothing"
    assert all(".2d.L2.global.tile [" in ptx[i] for i in prefetches)
    # through the maps the ring's loads use (so clipped boxes are clipped alike), and
    # along their rows
    used = {_MAP.search(line).groups() for line in loads}
    got = {_MAP.search(ptx[i]).groups() for i in prefetches}
    assert {m for m, _ in got} == {m for m, _ in used}
    rows = {(m, c.split(", ")[1]) for m, c in used}
    assert {(m, c.split(", ")[1]) for m, c in got} == rows
    # ptxas took it and kept the order: the TMA prefetches (UTMAPF) before the wait
    # (ACQBULK) and its release of the next kernel (PREEXIT), the loads after
    ops = _sass(ck.cubin, tmp_path)
    assert ops["UTMAPF"] == len(prefetches), sorted(ops)
    assert ops["UTMALDG"] and ops["HGMMA"]
    sass = _sass_text(ck.cubin, tmp_path).splitlines()
    at = {op: [i for i, line in enumerate(sass) if re.search(rf"\b{op}\b", line)]
          for op in ("UTMAPF", "ACQBULK", "PREEXIT", "UTMALDG")}
    assert len(at["ACQBULK"]) == 1
    assert max(at["UTMAPF"]) < at["ACQBULK"][0] < at["PREEXIT"][0] < min(at["UTMALDG"])


def test_option_off_leaves_the_ptx_unchanged():
    # (the PTX stage: what is compared is the PTX; ptxas adds nothing to it)
    args = _decode_args()
    default = _compile(K.linear, args, DECODE_GRID, "ptx").artifacts["ptx"]
    off = _compile(K.linear.replace_hints(l2_prefetch=False), args, DECODE_GRID, "ptx")
    assert PREFETCH not in default
    assert off.artifacts["ptx"] == default


def test_no_prefetch_without_programmatic_launch():
    kernel = K.linear.replace_hints(l2_prefetch=True, programmatic_launch=False)
    ptx = _compile(kernel, _decode_args(), DECODE_GRID, "ptx").artifacts["ptx"]
    assert PREFETCH not in ptx and "griddepcontrol" not in ptx


def test_option_must_be_a_bool():
    with pytest.raises(KernelOptionError, match="l2_prefetch must be True or False"):
        K.linear.replace_hints(l2_prefetch="yes").compile(_decode_args(), "pipeline",
                                                          target="sm_90a")


# prologue in --full since session 24 (an option's second simulator run): [producer]
# keeps the prefetches in the simulator, with the predicated-off ones past the end
@pytest.mark.parametrize("specialize", [pytest.param(False, marks=pytest.mark.slow), True],
                         ids=["prologue", "producer"])
def test_prefetching_gemm_in_the_simulator(specialize, rng):
    """A ragged decode GEMM (K of 3 tiles, fewer than the ring's stages: the prefetches
    past the end are predicated off) with the option on, as the GPU runs it: the
    plain prologue and the warp-specialized producer."""
    import ml_dtypes
    from tileir.sim import simulate
    bf = ml_dtypes.bfloat16
    m, n, k = 1, 96, 328
    x = rng.standard_normal((m, k)).astype(bf)
    g = rng.standard_normal(k).astype(bf)
    w = rng.standard_normal((n, k)).astype(bf)
    y = np.full((m, n), np.nan, bf)
    args = (x, g, 0.0, w, y, 128, 64, 64, False, False)
    kernel = K.linear.replace_hints(l2_prefetch=True, warp_specialize=specialize)
    grid = (1, 2, 1)
    ck = _compile(kernel, args, grid, "gpu")
    launch = hardware_grid(ck.meta, grid)
    assert "nvvm.cp.async.bulk.tensor.prefetch" in ck.ir()
    # a producer warpgroup beside the 4 consumer warps when specialized
    assert ck.meta["num_threads"] == (256 if specialize else 128)
    simulate(ck, launch, args)
    ref = x.astype(np.float64) @ w.astype(np.float64).T
    assert not np.isnan(y.astype(np.float32)).any()
    assert np.abs(y.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2


@pytest.mark.gpu
def test_chained_decode_gemms_with_prefetch_on_the_gpu():
    """Each GEMM reads the row the one before it writes, launched early: its
    prefetches of that row race the writes (a wasted fetch), its loads after the wait
    see them.  The same bits as without the option, and the right answer."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    n, steps = 4096, 8
    ws = [torch.randn(n, n, dtype=torch.bfloat16, device="cuda") / 64 for _ in range(2)]
    x0 = torch.randn(1, n, dtype=torch.bfloat16, device="cuda")
    outs = []
    for kernel in (K.linear, K.linear.replace_hints(l2_prefetch=True)):
        rows = [x0] + [torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
                       for _ in range(steps)]
        for i in range(steps):
            ct.launch(None, (1, n // 128, 1), kernel,
                      (rows[i], rows[i], 0.0, ws[i % 2], rows[i + 1], 128, 128, 64, False,
                       False))
        torch.cuda.synchronize()
        outs.append(rows)
    for a, b in zip(*outs):
        assert torch.equal(a, b)          # the same code after the wait: the same bits
    ref = outs[1][0].double() @ ws[0].double().T
    got = outs[1][1].double()
    assert not got.isnan().any()
    assert (got - ref).abs().max() / ref.abs().max() < 1e-2


@pytest.mark.parametrize("on", [False, True])
def test_backend_launches_its_gemms_with_the_option(on, rng):
    """Backend.l2_prefetch: linear, linear_add and linear_swiglu (the decode-tuned
    kernels too, on the GPU) launch with the option, one kernel object per GEMM kernel; the
    interpreter's answers are those of the kernels without it."""
    from tileir.llm.backend import Backend
    b = Backend("numpy", "float32")
    b.l2_prefetch = on
    launched = []
    run = b._launch
    b._launch = lambda grid, kernel, args: (launched.append(kernel), run(grid, kernel, args))
    x = rng.standard_normal((3, 40)).astype(np.float32)
    w, w2 = (rng.standard_normal((24, 40)).astype(np.float32) for _ in range(2))
    r = rng.standard_normal((3, 24)).astype(np.float32)
    y = b.linear(x, w)
    ref = x.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    b.linear(x, w, residual=r)
    b.linear_swiglu(x, w, w2)
    b.linear(x, w)
    names = [k.name for k in launched]
    assert names == ["linear", "linear_add", "linear_swiglu", "linear"]
    assert all(bool(k.options.get("l2_prefetch")) == on for k in launched)
    assert launched[0] is launched[3]          # made once per kernel
