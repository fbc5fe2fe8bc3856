"""GPU launches of test_language's kernels (the Python constructs cuTile kernels use)
against the interpreter, and the launch fast path with compile-time constants of
every kind.

Marked `gpu`.  Each kernel runs on the GPU over torch CUDA tensors and in the
interpreter over NumPy copies of the same inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import lazy_import

import tileir as ct

import test_language as lang

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")


from test_gpu_cutile import both  # noqa: E402  (interpreter and GPU outputs)


@pytest.mark.parametrize("kernel,grid,args", [
    (lang.chained, (3,), (np.arange(8, dtype=np.int32) - 4, np.zeros(1, np.int32),
                          np.zeros((3, 8), np.int32), 4)),
    (lang.new_axes, (1,), (np.arange(8, dtype=np.float32), np.zeros((8, 8), np.float32),
                           np.zeros((2, 1, 4, 1), np.float32))),
    (lang.builtin_math, (1,), (np.arange(8, dtype=np.int32) - 4,
                               np.array([3, -3, 2, 5, 7, -2, 4, 1], np.int32),
                               *(np.zeros(8, np.int32) for _ in range(3)))),
    (lang.tuples, (3,), (np.arange(16, dtype=np.int32), np.zeros((2, 5), np.float32),
                         np.zeros((3, 4), np.int32), 4)),
    (lang.carried, (1,), (np.zeros(4, np.int32), np.zeros(4, np.int32),
                          np.zeros(4, np.float32), 2)),
    (lang.static_arith, (1,), (np.arange(4, dtype=np.int32), np.zeros(4, np.int32), 5)),
    (lang.dataclasses_in_kernels, (1,), (np.arange(4, dtype=np.int32), np.zeros(4, np.int32),
                                         np.zeros(4, np.float32))),
    (lang.state_in_loop, (1,), (np.arange(12, dtype=np.float32),
                                np.arange(12, dtype=np.float32), np.zeros(4, np.float32), 0)),
])
def test_language_kernels_on_the_gpu(kernel, grid, args):
    host, dev = both(kernel, grid, args)
    for h, d in zip(host, dev):
        np.testing.assert_array_equal(d, h)


def test_constants_of_every_kind_take_the_fast_path():
    """Launches alike but for a string, enum, None or dtype constant compile and file
    one plan each; launching them again (new tensors) takes those plans."""
    x = np.arange(8, dtype=np.float32) - 4
    kinds = [("relu", ct.RoundingMode.RN, None, np.int32),
             ("neg", ct.RoundingMode.RN, 0.5, np.float16),
             ("neg", ct.RoundingMode.RZ, 0.5, np.float16),
             ("gelu", ct.RoundingMode.RN, None, ct.float32),
             ("gelu", ct.RoundingMode.RN, None, np.dtype("float32"))]
    kernel = ct.kernel(lang.activation.fn)
    for _ in range(2):
        for consts in kinds:
            ref = np.zeros(8, np.dtype(consts[3]) if consts[3] is not ct.float32
                           else np.float32)
            ct.launch(None, (1,), kernel, (x, ref, *consts))         # the interpreter
            y = torch.zeros(8, dtype=getattr(torch, ref.dtype.name), device="cuda")
            ct.launch(None, (1,), kernel, (torch.from_numpy(x).cuda(), y, *consts))
            torch.cuda.synchronize()
            np.testing.assert_array_equal(y.cpu().numpy(), ref)
    plans = sum(len(d.plans) for d in kernel._dispatchers.values())
    assert plans == len(kinds), plans


def test_print_shows_values_as_cutile_does_on_the_gpu(capfd):
    x = torch.arange(4, dtype=torch.float32, device="cuda")
    ct.launch(None, (2,), lang.printed, (x, torch.zeros(4, device="cuda")))
    torch.cuda.synchronize()
    out = capfd.readouterr().out
    # each statement's line whole, once per block (blocks may interleave by statement)
    lines = [line for b in (0, 1) for line in lang.WANT.format(b=b).splitlines()]
    assert sorted(out.splitlines()) == sorted(lines), out


# ---------------------------------------------------------------------------
# Helpers returning arrays; run-time choices of arrays, views and pointers
# ---------------------------------------------------------------------------
import test_control_flow as cf      # noqa: E402


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_runtime_choices_of_arrays_views_and_pointers_on_the_gpu(n):
    """`tile.select_array` and the chosen slices' bounds and pointers on the GPU (the
    register path), against the interpreter; a store through a choice writes the
    chosen array only."""
    r = np.random.default_rng()
    x, y = (r.standard_normal(48).astype(np.float32) for _ in range(2))
    start = int(r.integers(0, 16))
    host, dev = both(cf.runtime_choices, (1,),
                     (x, y, np.full(64, np.nan, np.float32), n, start))
    for h, d in zip(host, dev):
        np.testing.assert_array_equal(d, h)


@pytest.mark.parametrize("kernel", ["arrays_through_loops",
                                    "aggregates_holding_arrays_through_loops",
                                    "handles_returned_from_loops"])
@pytest.mark.parametrize("n", [0, 1, 2, 4])
def test_loops_carrying_arrays_views_and_pointers_on_the_gpu(kernel, n):
    """Arrays a loop reassigns (by name, inside tuples and dataclass instances, or
    returned from inside it) against the interpreter: all three arrays compared."""
    r = np.random.default_rng()
    x, y = (r.standard_normal(32).astype(np.float32) for _ in range(2))
    host, dev = both(getattr(cf, kernel), (1,), (x, y, np.full(32, np.nan, np.float32), n))
    for h, d in zip(host, dev):
        np.testing.assert_array_equal(d, h)


@pytest.mark.parametrize("first", [0, 1])
def test_helpers_returning_arrays_and_ternaries_of_tuples_on_the_gpu(first):
    r = np.random.default_rng()
    x, y = (r.standard_normal(32).astype(np.float32) for _ in range(2))
    host, dev = both(cf.helpers_return_arrays, (1,),
                     (x, y, np.full(32, np.nan, np.float32), first, int(r.integers(0, 24))))
    np.testing.assert_array_equal(dev[2], host[2])
    for n in (-1, 1, 2, 3):
        host, dev = both(cf.runtime_ternaries_of_tuples, (1,),
                         (x[:8].copy(), np.full(16, np.nan, np.float32), n))
        np.testing.assert_allclose(dev[1], host[1], rtol=1e-6)
