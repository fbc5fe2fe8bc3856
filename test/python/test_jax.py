"""tileir.jax: cuTile's cutile_call from JAX programs (on JAX's CPU backend the kernel
runs in tileir's interpreter through a host callback; the GPU backend's buffer
callback with stand-ins here, for real in test_gpu_jax.py)."""

import numpy as np
import pytest

import tileir as ct

jax = pytest.importorskip("jax")
jnp = jax.numpy
from tileir.jax import InputOutput, OutputPlaceholder, cutile_call  # noqa: E402


@ct.kernel
def scale(x, y, c: ct.Constant[float], T: ct.Constant[int]):
    b = ct.bid(0)
    ct.store(y, (b,), ct.load(x, (b,), (T,)) * c)


@ct.kernel
def halve(x, T: ct.Constant[int]):
    b = ct.bid(0)
    ct.store(x, (b,), ct.load(x, (b,), (T,)) / 2)


@ct.kernel
def sincos(x, s, co, k: float, T: ct.Constant[int]):
    b = ct.bid(0)
    t = ct.astype(ct.load(x, (b,), (T,)), ct.float32) * k
    ct.store(s, (b,), ct.astype(ct.sin(t), s.dtype))
    ct.store(co, (b,), ct.astype(ct.cos(t), co.dtype))


@ct.kernel
def add_pair(xy, out, T: ct.Constant[int]):
    b = ct.bid(0)
    ct.store(out, (b,), ct.load(xy[0], (b,), (T,)) + ct.load(xy[1], (b,), (T,)))


@ct.kernel
def accumulate(x, acc, T: ct.Constant[int]):
    b = ct.bid(0)
    ct.store(acc, (b,), ct.load(acc, (b,), (T,)) + ct.load(x, (b,), (T,)))


def test_a_jitted_graph_of_calls_outputs_in_place_updates_and_several_outputs():
    @jax.jit
    def graph(x):
        grid = (ct.cdiv(x.shape[0], 4),)
        y = cutile_call(grid, scale, (x, OutputPlaceholder(x.shape, x.dtype), 3.0, 4))
        y = cutile_call(grid, halve, (InputOutput(y), 4))
        s, c = cutile_call(grid, sincos, (y, OutputPlaceholder(x.shape, x.dtype),
                                          OutputPlaceholder(x.shape, x.dtype), 2.0, 4))
        return s, c

    x = np.random.default_rng(0).standard_normal(10).astype(np.float32)   # ragged: 3 tiles
    s, c = graph(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(s), np.sin(x * 3.0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(c), np.cos(x * 3.0), rtol=1e-5, atol=1e-6)


def test_one_output_is_returned_bare_and_inputs_stay_unchanged():
    x = jnp.arange(8, dtype=jnp.float32)
    acc = jnp.ones(8, jnp.float32)
    got = cutile_call((2,), accumulate, (x, InputOutput(acc), 4))
    np.testing.assert_array_equal(np.asarray(got), np.arange(8) + 1)
    np.testing.assert_array_equal(np.asarray(acc), np.ones(8))        # JAX arrays are values


def test_bf16_arrays_and_tuple_parameters():
    r = np.random.default_rng(1)
    a, b = (jnp.asarray(r.standard_normal(64), dtype=jnp.bfloat16) for _ in range(2))
    out = cutile_call((4,), add_pair, ((a, b), OutputPlaceholder((64,), jnp.bfloat16), 16))
    assert out.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(out, np.float32),
                                  np.asarray((a.astype(jnp.float32) + b.astype(jnp.float32))
                                             .astype(jnp.bfloat16), np.float32))


@ct.kernel
def affine(x, y, ab: tuple[float, ct.Constant[int]], parts: tuple[ct.Array, ...],
           T: ct.Constant[int]):
    b = ct.bid(0)
    a, K = ab
    t = ct.load(x, (b,), (T,)) * a + K
    ct.store(y, (b,), t + ct.load(parts[0], (b,), (T,)) * ct.load(parts[1], (b,), (T,)))


def test_tuple_parameters_take_scalars_constants_and_arrays():
    """cuTile 1.7: a `tuple[...]` parameter takes a tuple, its runtime scalars static
    under jit as top-level ones, its Constant items compiled in, its arrays inputs."""
    x = jnp.arange(8, dtype=jnp.float32)
    p, q = jnp.full(8, 2.0, jnp.float32), jnp.full(8, 3.0, jnp.float32)

    @jax.jit
    def graph(x):
        return cutile_call((2,), affine, (x, OutputPlaceholder((8,), jnp.float32), (0.5, 4),
                                          (p, q), 4))

    np.testing.assert_array_equal(np.asarray(graph(x)), np.arange(8) * 0.5 + 4 + 6)
    ph = OutputPlaceholder((8,), jnp.float32)
    with pytest.raises(ct.TileTypeError, match=r"argument 'ab' of kernel 'affine' is annotated "
                       r"tuple\[None, Constant\[int\]\], a tuple of 2, got a tuple of 3"):
        cutile_call((2,), affine, (x, ph, (0.5, 4, 1), (p, q), 4))
    with pytest.raises(ct.TileTypeError, match=r"argument ab\[1\] of kernel 'affine' is a "
                       r"ct.Constant parameter: it takes a static Python value"):
        cutile_call((2,), affine, (x, ph, (0.5, x), (p, q), 4))
    with pytest.raises(ct.TileTypeError, match=r"argument 'parts' of kernel 'affine' is a tuple "
                       r"parameter \(tuple\[None, ...\]\): pass a tuple, got ArrayImpl"):
        cutile_call((2,), affine, (x, ph, (0.5, 4), p, 4))


def test_vmap_launches_once_per_batch_element():
    xs = jnp.arange(24, dtype=jnp.float32).reshape(3, 8)
    got = jax.vmap(lambda v: cutile_call((2,), scale, (v, OutputPlaceholder(v.shape, v.dtype),
                                                       2.0, 4)))(xs)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(xs) * 2)


def test_the_same_array_twice_is_one_array_updated_in_place():
    x = jnp.arange(8, dtype=jnp.float32)
    got = cutile_call((2,), accumulate, (x, InputOutput(x), 4))         # acc += acc
    np.testing.assert_array_equal(np.asarray(got), np.arange(8) * 2)


def test_bad_arguments_are_clear_errors():
    x = jnp.arange(8, dtype=jnp.float32)
    ph = OutputPlaceholder((8,), jnp.float32)
    with pytest.raises(ct.TileTypeError, match=r"takes 4 arguments \(x, y, c, T\), got 3"):
        cutile_call((2,), scale, (x, ph, 4))
    with pytest.raises(ct.TileTypeError, match=r"'c' of kernel 'scale' is a ct.Constant "
                                               r"parameter: it takes a static Python value"):
        cutile_call((2,), scale, (x, ph, jnp.float32(2.0), 4))
    with pytest.raises(ct.TileTypeError, match="is a str; cutile_call takes JAX arrays"):
        cutile_call((2,), scale, (x, "y", 2.0, 4))
    with pytest.raises(ct.TileTypeError, match="takes the kernel's arguments as a tuple"):
        cutile_call((2,), scale, [x, ph, 2.0, 4])
    with pytest.raises(ct.TileTypeError, match="needs a @tileir.kernel"):
        cutile_call((2,), scale.fn, (x, ph, 2.0, 4))
    with pytest.raises(ct.TileValueError, match="OutputPlaceholder"):
        cutile_call((2,), scale, (x, OutputPlaceholder((8,), "no-such-dtype"), 2.0, 4))

    def call(x, k):
        return cutile_call((2,), sincos, (x, ph, ph, k, 4))

    with pytest.raises(ct.TileTypeError, match=r"'k' of kernel 'sincos' is a scalar "
                                               r"parameter: .*static_argnums"):
        jax.jit(call)(x, 2.0)
    np.testing.assert_allclose(np.asarray(jax.jit(call, static_argnums=1)(x, 2.0)[0]),
                               np.sin(np.arange(8) * 2.0), rtol=1e-5, atol=1e-6)

    @ct.kernel
    def broken(x, y, T: ct.Constant[int]):
        ct.store(y, (ct.bid(0),), ct.load(x, (ct.bid(0),), (T,)) @ 2)

    with pytest.raises(ct.TileTypeError, match=r"test_jax.py:\d+"):   # at trace time, located
        jax.jit(lambda x: cutile_call((2,), broken, (x, ph, 4)))(x)


def test_other_backends_are_refused_with_the_reason(monkeypatch):
    import tileir.jax as tj
    monkeypatch.setattr(tj.jax, "default_backend", lambda: "tpu")
    with pytest.raises(ct.TileUnsupportedFeatureError, match="CUDA GPU backend.*'tpu'"):
        cutile_call((2,), halve, (InputOutput(jnp.zeros(8)), 4))


def test_on_the_gpu_backend_the_kernel_launches_on_xlas_stream_with_its_buffers(monkeypatch):
    """The GPU path (run for real by test_gpu_jax.py): a buffer callback whose inputs
    are XLA's buffers, outputs allocated by XLA, each InputOutput aliased to its input
    and passed as that output buffer everywhere its array appears; the launch goes on
    XLA's stream, at the callback's execute stage only."""
    import types

    import tileir.jax as tj
    from jax.experimental import buffer_callback as bc
    monkeypatch.setattr(tj.jax, "default_backend", lambda: "gpu")
    launched, seen = [], {}

    def fake_buffer_callback(callback, result_shape_dtypes, *, input_output_aliases,
                             vmap_method):
        seen.update(aliases=input_output_aliases, vmap=vmap_method)

        def run(*inputs):
            ins = [np.asarray(a) for a in inputs]
            outs = [np.full(o.shape, -1.0, o.dtype) for o in result_shape_dtypes]
            for k, j in input_output_aliases.items():
                outs[j] = ins[k].copy()
            for stage in (bc.ExecutionStage.PREPARE, bc.ExecutionStage.EXECUTE):
                callback(types.SimpleNamespace(stage=stage, stream=1234), tuple(outs), *ins)
            seen.update(ins=ins, outs=outs)
            return tuple(outs)
        return run

    monkeypatch.setattr(bc, "buffer_callback", fake_buffer_callback)
    import importlib
    monkeypatch.setattr(importlib.import_module("tileir.kernel"), "launch",
                        lambda *a: launched.append(a))
    x, io = jnp.arange(8.0), jnp.ones(8)
    cutile_call((2,), sincos, (x, OutputPlaceholder((8,), jnp.float32), InputOutput(io),
                               0.5, 4))
    assert seen["aliases"] == {1: 1} and seen["vmap"] == "sequential"
    (stream, grid, kernel, args), = launched                 # once: at the execute stage
    assert (stream, grid, kernel) == (1234, (2, 1, 1), sincos)
    assert args[0] is seen["ins"][0]                         # XLA's input buffer
    assert args[1] is seen["outs"][0] and args[2] is seen["outs"][1]   # its outputs
    np.testing.assert_array_equal(args[2], np.ones(8))       # the aliased input's values
    assert args[3:] == (0.5, 4)


def test_without_jax_the_call_says_what_is_missing(monkeypatch):
    import tileir.jax as tj
    monkeypatch.setattr(tj, "HAS_JAX", False)
    with pytest.raises(ct.TileUnsupportedFeatureError, match="pip install jax"):
        cutile_call((1,), halve, ())
