"""GPU tests of code only sm_80 runs, on Hopper through the driver's JIT: the kernel is
compiled for sm_80 to PTX (compute_80) and launched from PTX (an sm_80 cubin cannot
load on sm_90)."""

import pytest

import tileir as ct

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def _launch_sm80(kernel, grid, args):
    from tileir.runtime import launcher
    ck = kernel.compile(args, stage="ptx", target="sm_80")
    launcher.launch(ck.artifacts["ptx"].encode(), ck.meta, grid,
                    [args[i] for i in ck.runtime_params])
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
    _launch_sm80(bf16_ones, (blocks, 1, 1), (acc, olds, t))
    assert acc.float().tolist() == [256.0] * 6
    got = olds.float().cpu().numpy()
    for r in range(6):
        assert sorted(got[r::6].tolist()) == [float(k) for k in range(256)]
