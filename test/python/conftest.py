"""Shared pytest setup: the `gpu` marker skips cleanly without an NVIDIA GPU."""

import numpy as np
import pytest


def _probe_gpu() -> bool:
    try:
        from cuda.bindings import driver
    except ImportError:
        return False
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, n = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and n > 0
    except Exception:   # the driver library itself is missing
        return False


# Asked once, as pytest loads this file, before any test module imports torch or JAX:
# cuda.bindings set up after another library has initialized CUDA looks up 34 driver
# entry points that the driver refuses (cuGetProcAddress_v2: invalid argument), which
# compute-sanitizer reports as API errors of the run (bench/RESULTS.md, 2026-11-26).
_HAVE_GPU = _probe_gpu()


def _have_gpu() -> bool:
    return _HAVE_GPU


def pytest_collection_modifyitems(config, items):
    if _have_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Tests never read or fill the user's compile cache (~/.cache/tileir)."""
    monkeypatch.setenv("TILEIR_CACHE_DIR", str(tmp_path_factory.mktemp("tileir-cache")))


@pytest.fixture
def rng():
    """Fresh random inputs every run; the seed is printed on failure."""
    seed = np.random.SeedSequence().entropy % 2**32
    print(f"seed={seed}")
    return np.random.default_rng(seed)


def refused_at_the_line(kernel, args, exc, message: str, filename: str):
    """Compiling `kernel` for `args` (to the frontend stage) raises `exc`, whose text
    holds `message` and names `filename` (the kernel's line); returns the error."""
    with pytest.raises(exc) as info:
        kernel.compile(args, stage="frontend")
    assert message in str(info.value), str(info.value)
    assert filename in str(info.value), str(info.value)
    return info.value
