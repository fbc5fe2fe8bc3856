"""tileir.jax: cuTile's cutile_call from JAX programs (on JAX's CPU backend the kernel
runs in tileir's interpreter through a host callback; the GPU backend's paths with
stand-ins here, for real in test_gpu_jax.py: the XLA FFI handler, registered for the
CPU and recording its launches instead of calling the driver, and the buffer
callback)."""

import re
import struct
import subprocess
from pathlib import Path

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
    monkeypatch.setenv("TILEIR_JAX_FFI", "0")       # (the FFI handler's path: tests below)
    assert not tj.uses_ffi() and "TILEIR_JAX_FFI=0" in tj.ffi_status()
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


# ---------------------------------------------------------------------------
# The XLA FFI handler (runtime/xla_ffi.py, _xla_ffi.c) on JAX's CPU backend
# ---------------------------------------------------------------------------
@pytest.fixture
def ffi(monkeypatch):
    """cutile_call's GPU path run on JAX's CPU backend: the FFI handler registered for
    the CPU too, the call compiled for sm_90a and "loaded" on a fake device (context
    0xC0, function 0xF0), the driver replaced by the handler's recorder."""
    import tileir.jax as tj
    from tileir.runtime import xla_ffi
    try:
        xla_ffi.register("cpu")
    except xla_ffi.XlaFfiUnavailable as e:
        pytest.skip(f"the FFI handler cannot be built here: {e}")
    monkeypatch.setattr(tj.jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(tj, "_ffi_error", [])
    monkeypatch.setattr(xla_ffi, "set_driver", lambda: None)
    monkeypatch.setattr(tj, "_ffi_device",
                        lambda: xla_ffi.Device("sm_90a", None, 50 << 20, (0,)))
    monkeypatch.setattr(xla_ffi, "load_devices",
                        lambda desc, images, ordinals: [(0, desc.grid, 0xC0, 0xF0)])
    xla_ffi.record(1)
    yield xla_ffi
    xla_ffi.record(0)


def _address(x) -> int:
    return x.unsafe_buffer_pointer()


def test_the_ffi_handler_compiles_warning_free_against_jaxlibs_header(tmp_path):
    from tileir.runtime import xla_ffi
    try:
        cc, include = xla_ffi.compiler(), xla_ffi.header_dir()
    except xla_ffi.XlaFfiUnavailable as e:
        pytest.skip(str(e))
    done = subprocess.run([*cc, *xla_ffi.FLAGS, "-Werror", "-Wpedantic", f"-I{include}",
                           str(xla_ffi.SOURCE), "-o", str(tmp_path / "h.so")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # built once per source, header and compiler, atomically, into the folder asked
    first = xla_ffi.build(out_dir=tmp_path)
    assert xla_ffi.build(out_dir=tmp_path) == first and first.parent == tmp_path
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []
    # it speaks the FFI API version of the header it was compiled against
    text = (Path(include) / "xla" / "ffi" / "api" / "c_api.h").read_text()
    minor = int(re.search(r"#define XLA_FFI_API_MINOR (\d+)", text).group(1))
    assert xla_ffi.api_version() == (0, minor)


def test_a_compile_failure_says_why_and_how_to_reproduce(tmp_path, monkeypatch):
    from tileir.runtime import xla_ffi
    header = tmp_path / "include" / "xla" / "ffi" / "api" / "c_api.h"
    header.parent.mkdir(parents=True)
    header.write_text("")
    monkeypatch.setenv("TILEIR_CC", "false")            # a compiler that always fails
    with pytest.raises(xla_ffi.XlaFfiUnavailable, match="reproduce with: false .*_xla_ffi.c"):
        xla_ffi.build(include=str(tmp_path / "include"), out_dir=tmp_path)


def test_ffi_call_launches_with_xlas_buffers_and_the_packed_parameters(ffi):
    import tileir.jax as tj
    assert tj.uses_ffi() and "XLA FFI API 0." in tj.ffi_status()
    n = 1000
    x = jnp.asarray(np.random.default_rng(0).standard_normal(n), jnp.float32)
    f = jax.jit(lambda x: cutile_call((ct.cdiv(n, 256),), scale,
                                      (x, OutputPlaceholder(x.shape, x.dtype), 2.0, 256)))
    y = f(x)
    (r,) = ffi.records()
    assert (r["function"], r["context"], r["grid"]) == (0xF0, 0xC0, (4, 1, 1))
    ck = scale.compile((ct.ArraySpec(np.float32, 1), ct.ArraySpec(np.float32, 1), 2.0, 256),
                       target="sm_90a")
    assert r["block"] == (ck.meta["num_threads"], 1, 1) and r["shared"] == ck.meta["shared_bytes"]
    assert r["programmatic"]              # (an sm_90a kernel waits for its predecessor)
    # per array: the XLA buffer's address, the i32 dim, the i64 stride in elements
    assert struct.unpack("<Qi4xqQi4xq", r["params"]) == (_address(x), n, 1, _address(y), n, 1)
    f(x)                                  # the executable again: no new call is filed
    assert len(ffi.records()) == 1 and ffi.library().tileir_xla_ffi_calls() >= 1


def test_ffi_outputs_in_place_updates_scalars_and_tuples_reach_their_slots(ffi):
    x, acc = jnp.arange(8, dtype=jnp.float32), jnp.ones(8, jnp.float32)
    got = jax.jit(lambda x, acc: cutile_call((2,), accumulate, (x, InputOutput(acc), 4)))(x, acc)
    (r,) = ffi.records()
    # the InputOutput is its output buffer (aliased to the input), everywhere it is passed
    assert struct.unpack("<Qi4xqQi4xq", r["params"]) == (_address(x), 8, 1, _address(got), 8, 1)
    s, c = jax.jit(lambda x: cutile_call((4,), sincos, (x, OutputPlaceholder((8,), jnp.float32),
                                                        OutputPlaceholder((8,), jnp.float32),
                                                        0.75, 2)))(x)
    (r,) = ffi.records()
    # a runtime scalar is packed at trace time (static under jit), here as f32
    assert struct.unpack_from("<Q", r["params"], 24)[0] == _address(s)
    assert struct.unpack_from("<Q", r["params"], 48)[0] == _address(c)
    assert struct.unpack_from("<f", r["params"], 72) == (0.75,)
    p, q = jnp.full(8, 2.0, jnp.float32), jnp.full(8, 3.0, jnp.float32)
    y = OutputPlaceholder((8,), jnp.float32)
    out = jax.jit(lambda x, p, q: cutile_call((2,), affine, (x, y, (0.5, 4), (p, q), 4)))(x, p, q)
    (r,) = ffi.records()
    # x, y, then the tuple's runtime leaves: the scalar 0.5 (its Constant item compiled
    # in), the two arrays
    words = struct.unpack("<Qi4xqQi4xqf4xQi4xqQi4xq", r["params"])
    assert words == (_address(x), 8, 1, _address(out), 8, 1, 0.5, _address(p), 8, 1,
                     _address(q), 8, 1)


def test_ffi_under_vmap_launches_once_per_batch_element(ffi):
    xs = jnp.arange(30, dtype=jnp.float32).reshape(3, 10)
    acc = jnp.ones(10, jnp.float32)

    def call(x, acc):
        return cutile_call((2,), accumulate, (x, InputOutput(acc), 4))

    out = jax.jit(jax.vmap(call, in_axes=(0, None)))(xs, acc)
    assert out.shape == (3, 10)
    records = ffi.records()
    # each element's x and its own accumulator (the unbatched InputOutput broadcast);
    # 10 floats are 40 bytes apart, not 16-byte aligned: compiled for unaligned arrays
    assert [struct.unpack_from("<Q", r["params"], 0)[0] - _address(xs) for r in records] == \
        [0, 40, 80]
    assert [struct.unpack_from("<Q", r["params"], 24)[0] - _address(out) for r in records] == \
        [0, 40, 80]
    # an unbatched operand is the same buffer for every element
    accs = jnp.ones((2, 16), jnp.float32)
    out = jax.vmap(call, in_axes=(None, 0))(jnp.arange(16, dtype=jnp.float32), accs)
    records = ffi.records()
    assert len({struct.unpack_from("<Q", r["params"], 0)[0] for r in records}) == 1
    assert [struct.unpack_from("<Q", r["params"], 24)[0] - _address(out) for r in records] == \
        [0, 64]
    # nested: one launch per element of both batch dims
    out = jax.vmap(jax.vmap(call, in_axes=(0, None)), in_axes=(None, 0))(xs, jnp.ones((2, 10)))
    assert out.shape == (2, 3, 10) and len(ffi.records()) == 6


@ct.kernel
def mm(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(ct.bid(0), k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, ct.bid(1)), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, c.dtype))


def test_ffi_encodes_tma_descriptors_for_xlas_buffers(ffi):
    from tileir.runtime import tensor_maps
    a, b = jnp.ones((256, 128), jnp.bfloat16), jnp.ones((128, 192), jnp.bfloat16)
    c = jax.jit(lambda a, b: cutile_call((2, 2), mm, (a, b, OutputPlaceholder((256, 192),
                                                                              jnp.bfloat16),
                                                      128, 128, 64)))(a, b)
    (r,) = ffi.records()
    ck = mm.compile((ct.ArraySpec(jnp.bfloat16, 2),) * 3 + (128, 128, 64), target="sm_90a",
                    grid=(2, 2, 1))
    maps = ck.meta["tensor_maps"]
    assert len(maps) == 3
    # the recorder writes cuTensorMapEncodeTiled's arguments into each 128-byte slot
    slots = [r["params"][-128 * (3 - k):][:128] for k in range(3)]
    for m, slot, x in zip(maps, slots, (a, b, c)):
        address, = struct.unpack_from("<Q", slot, 0)
        data_type, rank, _, swizzle, l2, _ = slot[8:14]
        dims = struct.unpack_from(f"<{rank}Q", slot, 16)
        box = struct.unpack_from(f"<{rank}I", slot, 88)
        assert address == _address(x) and rank == 2
        assert dims == tuple(reversed(x.shape)) and l2 == 3                  # 256B promotion
        assert swizzle == {0: 0, 32: 1, 64: 2, 128: 3}[m["swizzle"]] and data_type == 9  # bf16
        assert list(reversed(box)) == tensor_maps.clipped_box(m["box"], m.get("clip"), x.shape)


def test_ffi_errors_name_the_kernel_and_the_cause(ffi, monkeypatch):
    import tileir.jax as tj
    from tileir.runtime import xla_ffi
    x = jnp.arange(8, dtype=jnp.float32)
    filed = []
    prepare = tj._ffi_prepare
    monkeypatch.setattr(tj, "_ffi_prepare", lambda *a: filed.append(prepare(*a)) or filed[-1])
    ffi.record(2)                             # every launch fails
    with pytest.raises(Exception, match=r"cuLaunchKernelEx\('halve'.*CUDA_ERROR_ILLEGAL_ADDRESS"):
        jax.jit(lambda x: cutile_call((2,), halve, (InputOutput(x), 4)))(x).block_until_ready()
    index, key = filed[-1]
    one = jax.ShapeDtypeStruct((8,), jnp.float32)
    with pytest.raises(Exception, match="lacks its i64 attributes tileir_call and tileir_key"):
        jax.ffi.ffi_call(xla_ffi.TARGET, one)(x).block_until_ready()
    with pytest.raises(Exception, match="prepared by another process: trace the function again"):
        jax.ffi.ffi_call(xla_ffi.TARGET, one)(x, tileir_call=np.int64(index),
                                              tileir_key=np.int64(key ^ 1)).block_until_ready()
    nine = jax.ShapeDtypeStruct((9,), jnp.float32)
    with pytest.raises(Exception, match=r"result 0 has shape \(9,\), the call was prepared "
                                        r"for \(8,\)"):
        jax.ffi.ffi_call(xla_ffi.TARGET, nine)(x, tileir_call=np.int64(index),
                                               tileir_key=np.int64(key)).block_until_ready()


def test_without_the_ffi_handler_calls_take_the_buffer_callback(monkeypatch):
    import tileir.jax as tj
    from jax.experimental import buffer_callback as bc
    from tileir.runtime import xla_ffi

    def refuse(platform="CUDA", target=None):
        raise xla_ffi.XlaFfiUnavailable("no C compiler (a test)")

    monkeypatch.setattr(tj.jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(tj, "_ffi_error", [])
    monkeypatch.setattr(xla_ffi, "register", refuse)
    used = []
    monkeypatch.setattr(bc, "buffer_callback", lambda *a, **k: used.append(a) or
                        (lambda *ins: tuple(np.zeros(o.shape, o.dtype) for o in a[1])))
    with pytest.warns(RuntimeWarning, match="buffer_callback.*no C compiler"):
        assert not tj.uses_ffi()
    assert tj.ffi_status() == "buffer_callback: no C compiler (a test)"
    cutile_call((2,), halve, (InputOutput(jnp.zeros(8)), 4))
    assert len(used) == 1


def test_on_the_cpu_backend_calls_run_in_the_interpreter_not_the_ffi():
    import tileir.jax as tj
    assert not tj.uses_ffi() and "interpreter" in tj.ffi_status()
