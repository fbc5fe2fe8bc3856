"""launch(): argument handling, the interpreter knob, and host/device array bridging."""

import numpy as np
import pytest

import tileir as ct
from tileir.examples.vector_add import vector_add


class FakeDeviceArray:
    """Looks like a device array (dtype/shape, DLPack via a host buffer) but is not NumPy."""

    def __init__(self, arr):
        self.arr = arr
        self.dtype = arr.dtype
        self.shape = arr.shape

    def __dlpack__(self, **kwargs):
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def test_device_arrays_need_the_gpu_or_the_knob(monkeypatch, rng):
    a = rng.standard_normal(300).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    c = np.zeros(300, np.float32)
    args = (FakeDeviceArray(a), FakeDeviceArray(b), FakeDeviceArray(c), 128)
    monkeypatch.delenv("TILEIR_INTERPRET", raising=False)
    from tileir.runtime.driver import has_gpu
    if has_gpu():       # a GPU is there: the host memory behind the fake array is refused
        with pytest.raises(ct.TileValueError, match="host memory"):
            ct.launch(None, (3,), vector_add, args)
    else:
        with pytest.raises(ct.TileUnsupportedFeatureError, match="TILEIR_INTERPRET=1"):
            ct.launch(None, (3,), vector_add, args)
    monkeypatch.setenv("TILEIR_INTERPRET", "1")
    ct.launch(None, (3,), vector_add, args)
    np.testing.assert_array_equal(c, a + b)          # results landed in the caller's memory


def test_bad_knob_value_is_reported(monkeypatch):
    monkeypatch.setenv("TILEIR_INTERPRET", "maybe")
    a = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="TILEIR_INTERPRET='maybe' is not a boolean"):
        ct.launch(None, (1,), vector_add, (a, a, a, 8))


def test_scalar_arguments_and_grid_forms(rng):
    @ct.kernel
    def axpy(x, y, alpha, TILE: ct.Constant[int]):
        i = ct.bid(0)
        t = ct.load(x, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
        u = ct.load(y, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
        ct.store(y, index=(i,), tile=alpha * t + u)

    x = rng.standard_normal(1000)
    y = rng.standard_normal(1000)
    want = 2.5 * x + y
    ct.launch(None, ct.cdiv(1000, 256), axpy, (x, y, 2.5, 256))   # an int grid works too
    np.testing.assert_allclose(y, want, rtol=1e-6)                 # alpha is f32, x is f64


def test_torch_cpu_tensors_in_place(rng):
    torch = pytest.importorskip("torch")
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(777, dtype=dtype)
        b = torch.randn(777, dtype=dtype)
        c = torch.full((777,), float("nan"), dtype=dtype)
        ct.launch(None, (ct.cdiv(777, 256),), vector_add, (a, b, c, 256))
        assert torch.equal(c, a + b)


def test_large_arrays_are_judged_by_their_bytes(monkeypatch):
    from tileir.runtime import arrays
    monkeypatch.setattr(arrays, "large_bytes", lambda ordinal: 1000)
    info = lambda shape, device: arrays.DeviceArrayInfo(  # noqa: E731
        0, shape, (shape[1], 1), ct.float16, device)
    assert arrays.nbytes(info((10, 50), ("cuda", 0))) == 1000
    assert arrays.large(info((10, 50), ("cuda", 0)))
    assert not arrays.large(info((10, 49), ("cuda", 0)))
    assert not arrays.large(info((10, 50), ("cpu", 0)))         # host arrays never are
    assert not arrays.large(info((10, 50), ("cuda", None)))     # nor an unknown device's
