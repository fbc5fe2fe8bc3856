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


def test_each_specialization_is_compiled_for_the_interpreter_once(monkeypatch, rng):
    """A launch in the interpreter runs its specialization's own interpreter compile
    (`CompiledKernel.interpreted`), made at its first launch and kept; another
    specialization (other dtypes, another constant) gets its own, and each computes
    its own result."""
    from tileir import interpreter
    compiles = []
    real = interpreter.compile_kernel

    def counted(module, name):
        compiles.append(name)
        return real(module, name)
    monkeypatch.setattr(interpreter, "compile_kernel", counted)

    @ct.kernel
    def scale(x, y, TILE: ct.Constant[int]):
        i = ct.bid(0)
        t = ct.load(x, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
        ct.store(y, index=(i,), tile=t * 3)

    x = rng.standard_normal(100).astype(np.float32)
    y = np.zeros(100, np.float32)
    ct.launch(None, (2,), scale, (x, y, 64))
    first = scale.compile((x, y, 64)).interpreted()
    y[:] = 0
    ct.launch(None, (2,), scale, (x, y, 64))
    assert scale.compile((x, y, 64)).interpreted() is first and compiles == ["scale"]
    np.testing.assert_array_equal(y, x * np.float32(3))
    x16, y16 = x.astype(np.float16), np.zeros(100, np.float16)
    ct.launch(None, (4,), scale, (x16, y16, 32))
    assert scale.compile((x16, y16, 32)).interpreted() is not first
    assert compiles == ["scale", "scale"]
    np.testing.assert_array_equal(y16, x16 * np.float16(3))


# In --full (~2.3 s where torch is installed: a worker's first import of torch): the
# fast tier launches DLPack arrays other than NumPy's in the interpreter, results landing
# in the caller's memory (test_device_arrays_need_the_gpu_or_the_knob), and reads torch
# tensors through torch's own accessors and DLPack table in test_dispatch's
# test_torch_tensors_key_as_their_lookups_say (with test_llm_tp's
# test_more_ranks_need_torchrun, the fast tier's only tests that import torch)
@pytest.mark.slow
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


# ---------------------------------------------------------------------------
# Bad input: each a clear tileir error naming the argument or the kernel line
# ---------------------------------------------------------------------------
A = np.ones(100, np.float32)


@pytest.mark.parametrize("args, error, message", [
    ((A, A, 128), ct.TileTypeError, r"kernel 'vector_add' takes 4 arguments \(a, b, c, TILE\), "
                                    r"got 3"),
    ((A, A, A, 128, 5), ct.TileTypeError, "takes 4 arguments"),
    (("x", A, A, 128), ct.TileTypeError, "argument 'a' of kernel 'vector_add' is str; kernels "
                                         "take arrays"),
    ((None, A, A, 128), ct.TileTypeError, "argument 'a' of kernel 'vector_add' is NoneType"),
    ((A, A, A, 128.0), ct.TileTypeError, r"argument 'TILE' of kernel 'vector_add' is "
                                         r"Constant\[int\] but got float"),
    ((A.astype(np.complex64), A, A, 128), ct.TileTypeError, "arrays of complex64 are not "
                                                            "supported"),
    ((A, A, A, 100), ct.TileValueError, r"vector_add.py:\d+:\d+: error: tile shape \(100,\) must "
                                        r"have power-of-two dims"),
    ((A.reshape(10, 10), A.reshape(10, 10), A.reshape(10, 10).copy(), 128), ct.TileTypeError,
     r"vector_add.py:\d+:\d+: error: shape \(128,\) has 1 dims but the array has 2"),
])
def test_bad_arguments_are_named(args, error, message):
    with pytest.raises(error, match=message):
        ct.launch(None, (1,), vector_add, args)


@pytest.mark.parametrize("grid, message", [
    ((0,), r"grid must be a tuple of 1 to 3 positive ints, got \(0,\)"),
    ((1, 1, 1, 1), "grid must be a tuple of 1 to 3 positive ints"),
    ((2.0,), "grid must be a tuple of 1 to 3 positive ints"),
    ((1, 65536), r"grid \(1, 65536, 1\) has 65536 blocks along axis 1; CUDA allows at most "
                 r"65535 there"),
    ((2**31,), "has 2147483648 blocks along axis 0; CUDA allows at most 2147483647"),
])
def test_bad_grids_are_refused_before_anything_runs(grid, message):
    c = np.full(100, np.nan, np.float32)
    with pytest.raises(ct.TileValueError, match=message):
        ct.launch(None, grid, vector_add, (A, A, c, 128))
    with pytest.raises(ct.TileValueError, match=message):
        vector_add.compile((A, A, c, 128), target="sm_90a", grid=grid)
    assert np.isnan(c).all()


def test_zero_size_arrays_run_and_write_nothing():
    z = np.zeros(0, np.float32)
    c = np.zeros(0, np.float32)
    ct.launch(None, (1,), vector_add, (z, z, c, 128))
    assert c.shape == (0,)


def test_dims_beyond_32_bits_are_refused_for_the_gpu():
    """The kernel ABI passes a dim as an i32: an array with more elements along one
    dim is refused by name (the interpreter refuses it too, located)."""
    huge = np.broadcast_to(np.zeros(1, np.float32), (2**31 + 5,))
    with pytest.raises(ct.TileValueError, match="argument 'a' of kernel 'vector_add': dim 0 "
                                                "has 2147483653 elements; a kernel indexes an "
                                                "array dim with 32 bits"):
        vector_add.compile((huge, huge, huge, 128), target="sm_90a")
    from tileir.errors import TileIRError
    with pytest.raises(TileIRError, match="more than i32 can index"):
        ct.launch(None, (1,), vector_add, (huge, huge, np.zeros(1, np.float32), 128))


def test_a_tile_too_large_for_registers_is_a_located_error():
    from tileir.errors import TileIRError
    with pytest.raises(TileIRError, match=r"vector_add.py:\d+:\d+: error: a tile of shape "
                                          r"\(1048576,\) and f32 needs 2048 registers a thread "
                                          r"on 512 threads .num_warps=16.; a thread has 255, "
                                          r"and past 1024 .*: use smaller tiles"):
        vector_add.compile((A, A, A, 1 << 20), target="sm_90a")
