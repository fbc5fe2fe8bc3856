"""The shipped examples match a float64 NumPy reference in the interpreter, on ragged sizes.

Each runs with and without the tile-level passes (TILEIR_LAUNCH_STAGE), so a
pass that changes semantics fails here too.
"""

import numpy as np
import pytest

from tileir.examples import NAMES, layernorm, matmul, rmsnorm, softmax, transpose, vector_add

STAGES = ("frontend", "tile")


def check(result):
    out, ref, rtol, atol = result
    got = out.astype(np.float64)
    assert np.all(np.isfinite(got)), "output has NaNs: some element was not written"
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


@pytest.fixture(params=STAGES)
def stage(request, monkeypatch):
    monkeypatch.setenv("TILEIR_LAUNCH_STAGE", request.param)
    return request.param


@pytest.mark.parametrize("name", NAMES)
def test_example_default_sizes(name, stage, rng):
    import importlib
    check(importlib.import_module(f"tileir.examples.{name}").run(rng))


@pytest.mark.parametrize("n", [1, 1023, 1025, 4097])
def test_vector_add_ragged(n, rng):
    check(vector_add.run(rng, n=n, tile=256))


@pytest.mark.parametrize("m,n", [(1, 1), (5, 129), (8, 500)])
def test_row_kernels_ragged(m, n, rng):
    check(softmax.run(rng, m=m, n=n))
    check(rmsnorm.run(rng, m=m, n=n))
    check(layernorm.run(rng, m=m, n=n))


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_row_kernels_16bit(dtype, rng):
    import ml_dtypes
    d = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    for mod in (softmax, rmsnorm, layernorm):
        out, ref, _, _ = mod.run(rng, m=6, n=300, dtype=d)
        got = out.astype(np.float64)
        # one rounding of the f32 result to 16 bits: half an ulp, relative
        tol = 2 ** -8 if dtype == "bfloat16" else 2 ** -11
        np.testing.assert_allclose(got, ref, rtol=2 * tol, atol=1e-3)


@pytest.mark.parametrize("m,n,tm,tn", [(1, 1, 16, 16), (33, 65, 32, 16), (64, 64, 64, 64)])
def test_transpose_ragged(m, n, tm, tn, rng):
    check(transpose.run(rng, m=m, n=n, tm=tm, tn=tn))


@pytest.mark.parametrize("m,n,k,dtype", [(1, 1, 1, np.float32), (65, 33, 17, np.float32),
                                         (100, 70, 129, np.float16), (64, 64, 64, np.float32)])
def test_matmul_ragged(m, n, k, dtype, rng):
    check(matmul.run(rng, m=m, n=n, k=k, dtype=dtype, bm=32, bn=32, bk=16))


def test_main_job_reports_the_backend(capsys):
    from tileir.examples.__main__ import main
    assert main(["vector_add", "transpose", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "backend: NumPy interpreter" in out and "2 passed, 0 failed" in out
