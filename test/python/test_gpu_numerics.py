"""GPU tests of numerics: directed rounding on both targets, and code only sm_80 runs
(bfloat16 atomic adds by compare-and-swap).  sm_80 runs on Hopper through the
driver's JIT: the kernel is compiled for sm_80 to PTX (compute_80) and launched from
PTX (an sm_80 cubin cannot load on sm_90)."""

import ml_dtypes
import pytest
from conftest import lazy_import

import tileir as ct

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")


def _launch(kernel, grid, args, target="sm_80"):
    from tileir.runtime import launcher
    if target == "sm_80":
        ck = kernel.compile(args, stage="ptx", target="sm_80")
        image = ck.artifacts["ptx"].encode()
    else:
        ck = kernel.compile(args, target=target)
        image = ck.cubin
    launcher.launch(image, ck.meta, grid, [args[i] for i in ck.runtime_params])
    torch.cuda.synchronize()


@ct.kernel
def bf16_ones(acc, olds, T: ct.Constant[int]):
    i = ct.bid(0)
    lanes = ct.arange(T, dtype=ct.int32) + i * T
    old = ct.atomic_add(acc, lanes % 6, ct.full((T,), 1.0, ct.bfloat16))
    ct.store(olds, index=(i,), tile=old)


def test_bfloat16_atomic_add_by_compare_and_swap_under_contention():
    """1536 adds of 1.0 into 6 bf16 slots from 48 blocks (the two halves of each 32-bit
    word contended by the same warps): each slot ends at exactly 256, and the old
    values each slot handed out are 0..255 once each."""
    t, blocks = 32, 48
    acc = torch.zeros(6, dtype=torch.bfloat16, device="cuda")
    olds = torch.full((t * blocks,), float("nan"), dtype=torch.bfloat16, device="cuda")
    _launch(bf16_ones, (blocks, 1, 1), (acc, olds, t))
    assert acc.float().tolist() == [256.0] * 6
    got = olds.float().cpu().numpy()
    for r in range(6):
        assert sorted(got[r::6].tolist()) == [float(k) for k in range(256)]


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_directed_rounding_on_the_gpu_matches_the_exact_oracle(target, dtype):
    """add/sub/mul/truediv/sqrt toward zero, -inf and +inf: the GPU's bits against the
    interpreter's exact rounding (interpreter/directed.py)."""
    import numpy as np
    from test_directed_rounding import DTYPES, _values, rounded
    t, n = DTYPES[dtype], 64
    for mode in range(3):
        rng = np.random.default_rng()
        a, b = _values(rng, n, t), _values(rng, n, t)[::-1].copy()
        want = np.full((5, n), np.nan, t)
        ct.launch(None, (1,), rounded, (a, b, want, mode, n))
        ta, tb = (torch.from_numpy(v.view(np.uint16) if v.itemsize == 2 else v).cuda()
                  for v in (a, b))
        if t is ml_dtypes.bfloat16:
            ta, tb = ta.view(torch.bfloat16), tb.view(torch.bfloat16)
        elif t is np.float16:
            ta, tb = ta.view(torch.float16), tb.view(torch.float16)
        out = torch.full((5, n), float("nan"), dtype=ta.dtype, device="cuda")
        _launch(rounded, (1, 1, 1), (ta, tb, out, mode, n), target)
        got = out.cpu()
        got = got.view(torch.int16).numpy().view(t) if t in (ml_dtypes.bfloat16, np.float16) \
            else got.numpy()
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_a_release_acquire_hand_off_between_blocks_on_the_gpu():
    """Block 0 writes 16 KB, then raises a flag with a release store; block 1 spins on
    an acquire load of the flag and copies the data: it must see all of it, launch
    after launch (fresh data each time)."""
    import numpy as np
    from test_memory_order import handoff
    t = 4096
    for k in range(20):
        data = torch.zeros(t, dtype=torch.int32, device="cuda")
        flag = torch.zeros(1, dtype=torch.int32, device="cuda")
        out = torch.full((t,), -1, dtype=torch.int32, device="cuda")
        ct.launch(None, (2,), handoff, (data, flag, out, t))
        torch.cuda.synchronize()
        np.testing.assert_array_equal(out.cpu().numpy(), np.arange(t) * 3 + 1)
