"""A `cubin` compile of a specialization already compiled to stage `gpu` goes on from a
copy of that module instead of compiling from the start (Kernel._compiled_to_gpu):
what it gives (every stage's artifact, the metadata, the shared-memory budget's
choice) is what a compile from the start gives; a module changed since its stage is
not used."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tileir as ct
from tileir.kernel import Kernel
from tileir.examples import vector_add


@ct.kernel
def gemm(A, B, C, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((tm, tn), dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        a = ct.load(A, index=(i, k), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, index=(k, j), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(i, j), tile=ct.astype(acc, C.dtype))


@pytest.fixture
def frontends(monkeypatch) -> list[str]:
    """The kernels whose frontend ran, one entry a run."""
    ran = []
    build = Kernel._frontend

    def counted(self, *args):
        ran.append(self.name)
        return build(self, *args)

    monkeypatch.setattr(Kernel, "_frontend", counted)
    monkeypatch.setenv("TILEIR_CACHE", "0")          # every cubin compiled, none loaded
    return ran


def _report(ck) -> str:
    return re.sub(r"Compile time = [\d.]+ ms", "", ck.ptxas_report)


def _cases():
    a = np.zeros(1000, np.float32)
    yield pytest.param(vector_add.vector_add, (a, a, a.copy(), 256), None, "sm_90a", id="add")
    # 2 x (128 x 128 + 128 x 256) fp16 = 192 KiB past sm_80's 163: the budget rewinds
    # the gpu stage to shorter K tiles (meta['fit'])
    h = np.zeros((4096, 4096), np.float16)
    # in --full (2.3 s of CPU): the fast tier goes on from the gpu stage with "add", and
    # test_budget's sm_80 GEMMs keep the rewind to shorter K tiles
    yield pytest.param(gemm, (h, h, h, 128, 256, 128), (32, 16, 1), "sm_80", id="gemm-fit",
                       marks=pytest.mark.slow)


@pytest.mark.parametrize("kernel, args, grid, target", list(_cases()))
def test_going_on_from_the_gpu_stage_gives_what_compiling_from_the_start_gives(
        frontends, kernel, args, grid, target):
    opts = {"grid": grid, "sm_count": 132} if grid else {}
    fresh = ct.kernel(kernel.__wrapped__).compile(args, target=target, **opts)
    assert frontends == [kernel.name]
    again = ct.kernel(kernel.__wrapped__)
    gpu = again.compile(args, stage="gpu", target=target, **opts)
    cubin = again.compile(args, target=target, **opts)
    assert frontends == [kernel.name] * 2, "the cubin compile ran the frontend again"
    assert cubin.module is not gpu.module and str(gpu.module) == gpu.artifacts["gpu"]
    assert cubin.artifacts == fresh.artifacts
    assert cubin.meta == fresh.meta
    assert _report(cubin) == _report(fresh)
    if grid:
        assert "K tiles 2 times shorter" in cubin.meta["fit"]


@pytest.mark.parametrize("printed", [False, True], ids=["kept", "printed"])
def test_a_module_changed_after_its_stage_does_not_change_the_cubin(frontends, printed):
    """The cubin compile goes on from the copy of the module kept for the gpu stage
    (StageIR), whatever was done to `module` since; where that copy is gone (printed
    when its artifact was read), from `module` if it still prints as the artifact,
    else afresh from the frontend."""
    a = np.zeros(1000, np.float32)
    args = (a, a, a.copy(), 256)
    k = ct.kernel(vector_add.vector_add.__wrapped__)
    gpu = k.compile(args, stage="gpu", target="sm_80")
    if printed:
        assert "gpu.module" in gpu.artifacts["gpu"]
    with gpu.module.context:
        from mlir import ir
        gpu.module.operation.attributes["test.changed"] = ir.UnitAttr.get()
    cubin = k.compile(args, target="sm_80")
    assert frontends == ["vector_add"] * (2 if printed else 1)
    assert "test.changed" not in cubin.artifacts["llvm"]
    assert cubin.artifacts == ct.kernel(vector_add.vector_add.__wrapped__).compile(
        args, target="sm_80").artifacts
