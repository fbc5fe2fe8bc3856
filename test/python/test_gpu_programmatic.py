"""GPU: kernels launched programmatically (tile-programmatic-launch, the default on
sm_90a) keep the stream's order: each waits for the previous kernel before touching
memory, so chains of kernels that read what the last one wrote, and write what it
read, give exact results, between torch's kernels, across streams and in graphs."""

import pytest
from conftest import lazy_import

import tileir as ct

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")


def _bump(x, y, T: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(T,)) + 1)


bump = ct.kernel(_bump)
bump_in_order = ct.kernel(programmatic_launch=False)(_bump)
T = 1024


@ct.kernel
def copy_releasing(x, y, T: ct.Constant[int]):
    ct.grid_dependency_control_launch_dependents()     # the author's: no wait
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(T,)))


@ct.kernel
def slow_bump(x, y, R: ct.Constant[int], T: ct.Constant[int]):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    for _ in range(R):              # long enough that a reader started early sees old data
        t = t * 1 + 1
    ct.store(y, index=(i,), tile=t - R + 1)


def _case(n):
    a = torch.randint(-1000, 1000, (n,), dtype=torch.int32, device="cuda")
    return a, a.clone(), torch.full_like(a, -7)


@pytest.mark.parametrize("n", [4096 * T + 5, 3000])       # many waves (ragged), a few blocks
def test_chains_of_launches_keep_the_order(n):
    a, start, b = _case(n)
    grid = (ct.cdiv(n, T),)
    for i in range(100):
        ct.launch(None, grid, bump, (a, b, T))     # b = a + 1
        ct.launch(None, grid, bump, (b, a, T))     # a = b + 1: writes what the last one read
        if i % 10 == 0:
            a.add_(1)                              # torch's kernel, in between
            ct.launch(None, grid, bump_in_order, (a, b, T))
            ct.launch(None, grid, bump, (b, a, T))
    torch.cuda.synchronize()
    assert torch.equal(a, start + 230)


def test_a_kernel_that_only_releases_waits_for_the_one_before():
    """The author's launch_dependents without a wait: such a kernel is launched as any
    other, so it starts after the previous (programmatic) kernel has finished."""
    n = 16 * T
    a, start, b = _case(n)
    c = torch.full_like(a, -7)
    grid = (ct.cdiv(n, T),)
    for _ in range(5):
        ct.launch(None, grid, slow_bump, (a, b, 20000, T))    # b = a + 1, slowly
        ct.launch(None, grid, copy_releasing, (b, c, T))      # c = b
        ct.launch(None, grid, bump, (c, a, T))                # a = c + 1
    torch.cuda.synchronize()
    assert torch.equal(a, start + 10)


def test_chains_across_streams_and_in_a_graph():
    n = 512 * T + 3
    a, start, b = _case(n)
    grid = (ct.cdiv(n, T),)
    c = torch.full_like(a, -7)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    s1.wait_stream(torch.cuda.current_stream())
    for _ in range(20):
        ct.launch(s1, grid, bump, (a, b, T))        # b = a + 1
        e = torch.cuda.Event()
        e.record(s1)
        s2.wait_event(e)
        ct.launch(s2, grid, bump, (b, c, T))        # c = b + 1, on the other stream
        e2 = torch.cuda.Event()
        e2.record(s2)
        s1.wait_event(e2)
        ct.launch(s1, grid, bump, (c, a, T))        # a = c + 1
    torch.cuda.synchronize()
    assert torch.equal(a, start + 60)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(20):
            ct.launch(None, grid, bump, (a, b, T))
            ct.launch(None, grid, bump, (b, a, T))
    for r in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(a, start + 60 + 3 * 40)
