"""GPU: tileir.jax on JAX's CUDA backend — cutile_call launches the compiled kernel on
XLA's stream with XLA's buffers (jax.experimental.buffer_callback), under jit and
vmap, in order with XLA's own work; ragged sizes, against NumPy in float64."""

import os

import numpy as np
import pytest

import tileir as ct

pytestmark = pytest.mark.gpu
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # leave memory to torch
jax = pytest.importorskip("jax")
jnp = jax.numpy
from tileir.jax import InputOutput, OutputPlaceholder, cutile_call  # noqa: E402

from test_jax import add_pair, halve, scale, sincos  # noqa: E402  (the CPU tests' kernels)


def _gpu():
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


if _gpu() is None or jax.default_backend() != "gpu":
    pytest.skip("JAX has no GPU backend here", allow_module_level=True)


def _rand(n, dtype=jnp.float32, seed=None):
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.standard_normal(n).astype(np.float32)).astype(dtype)


@pytest.mark.parametrize("n", [1000, 4096, 1])
def test_a_jitted_call_writes_its_output(n):
    x = _rand(n)
    T = 256
    f = jax.jit(lambda x: cutile_call((ct.cdiv(n, T),), scale,
                                      (x * 2.0, OutputPlaceholder(x.shape, x.dtype), 1.5, T)) - 1.0)
    got = np.asarray(f(x))
    np.testing.assert_allclose(got, np.asarray(x, np.float64) * 3.0 - 1.0, rtol=1e-6, atol=1e-6)


def test_input_output_updates_in_place_and_chains():
    n, T = 3000, 512
    x = _rand(n)

    @jax.jit
    def f(x):
        y = cutile_call((ct.cdiv(n, T),), scale, (x, OutputPlaceholder(x.shape, x.dtype), 4.0, T))
        z = cutile_call((ct.cdiv(n, T),), halve, (InputOutput(y), T))
        return z, x + 1.0                   # x itself is not touched

    z, x1 = f(x)
    np.testing.assert_allclose(np.asarray(z), np.asarray(x, np.float64) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(x1), np.asarray(x, np.float64) + 1.0, rtol=1e-6)
    # eagerly too (no jit): the aliased buffer is the returned array
    y = _rand(n)
    np.testing.assert_allclose(np.asarray(cutile_call((ct.cdiv(n, T),), halve,
                                                      (InputOutput(y), T))),
                               np.asarray(y, np.float64) / 2, rtol=1e-6)


def test_several_outputs_bf16_and_a_tuple_of_arrays():
    n, T = 777, 128
    x = _rand(n, jnp.bfloat16)
    s, c = cutile_call((ct.cdiv(n, T),), sincos,
                       (x, OutputPlaceholder((n,), jnp.bfloat16),
                        OutputPlaceholder((n,), jnp.float32), 0.75, T))
    t = np.asarray(x.astype(jnp.float32), np.float64) * 0.75
    np.testing.assert_allclose(np.asarray(s.astype(jnp.float32)), np.sin(t), atol=1e-2)
    np.testing.assert_allclose(np.asarray(c), np.cos(t), atol=1e-5)
    a, b = _rand(n, seed=1), _rand(n, seed=2)
    out = jax.jit(lambda a, b: cutile_call((ct.cdiv(n, T),), add_pair,
                                           ((a, b), OutputPlaceholder((n,), a.dtype), T)))(a, b)
    np.testing.assert_allclose(np.asarray(out), np.asarray(a, np.float64) + np.asarray(b),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(os.environ.get("TILEIR_SANITIZER") == "initcheck",
                    reason="XLA's own while loop (its loop_add_fusion) reads memory initcheck "
                           "sees as unset: a lax.map with no tileir kernel in it gets 1001 "
                           "such reports (bench/RESULTS.md, 2026-11-26)")
def test_vmap_runs_the_kernel_per_batch_element():
    n, T = 300, 128
    xs = jnp.stack([_rand(n, seed=s) for s in range(3)])
    f = jax.vmap(lambda x: cutile_call((ct.cdiv(n, T),), scale,
                                       (x, OutputPlaceholder(x.shape, x.dtype), -2.0, T)))
    np.testing.assert_allclose(np.asarray(jax.jit(f)(xs)), np.asarray(xs, np.float64) * -2.0,
                               rtol=1e-6)
