"""Launches on a machine with two or more GPUs: arrays on another device than the
current one, arrays on different devices, a stream of another device.  Skipped
cleanly where fewer than two GPUs are visible."""

import pytest
from conftest import _have_gpu

import tileir as ct
from tileir.errors import TileValueError
from tileir.examples import vector_add

pytestmark = pytest.mark.gpu
if not _have_gpu():     # asked before importing torch (3 s of CPU a pytest worker)
    pytest.skip("needs two GPUs", allow_module_level=True)
torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
    pytest.skip("needs two GPUs", allow_module_level=True)


def _case(device, n=5000):
    a = torch.randn(n, device=device)
    b = torch.randn(n, device=device)
    return a, b, torch.full((n,), float("nan"), device=device)


def test_arrays_on_another_device_run_there_checked_then_fast():
    k = ct.kernel(vector_add.vector_add.__wrapped__)
    torch.cuda.set_device(0)
    for _ in range(3):                       # checked path, then the fast path's plan
        a, b, c = _case("cuda:1")
        ct.launch(None, (ct.cdiv(5000, 1024),), k, (a, b, c, 1024))
        torch.cuda.synchronize(1)
        torch.testing.assert_close(c, a + b)
    a, b, c = _case("cuda:0")                # same shapes on the current device: its own plan
    ct.launch(None, (ct.cdiv(5000, 1024),), k, (a, b, c, 1024))
    torch.cuda.synchronize(0)
    torch.testing.assert_close(c, a + b)


def test_arrays_on_different_devices_are_refused_by_name():
    a, b, _ = _case("cuda:0")
    c = torch.empty(5000, device="cuda:1")
    with pytest.raises(TileValueError, match="different devices"):
        ct.launch(None, (5,), vector_add.vector_add, (a, b, c, 1024))


def test_a_stream_of_another_device_is_refused():
    a, b, c = _case("cuda:1")
    s = torch.cuda.Stream(device=0)
    with pytest.raises(TileValueError, match="cuda:1"):
        ct.launch(s, (5,), vector_add.vector_add, (a, b, c, 1024))
