"""GPU launches of cuTile's names (test_cutile_api's kernels) against the interpreter.

Marked `gpu`.  Each kernel runs on the GPU over torch CUDA tensors and in the
interpreter over NumPy copies of the same fresh random inputs; outputs are
poisoned first.  Atomics run with real contention between blocks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import lazy_import

import tileir as ct

import test_cutile_api as api
import test_cutile_views as views

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")


def both(kernel, grid, args, poison=np.nan):
    """(interpreter outputs, GPU outputs) of `kernel` over copies of `args` (NumPy):
    every array argument, as NumPy arrays, in order."""
    host = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    dev = [torch.from_numpy(a.copy()).cuda() if isinstance(a, np.ndarray) else a for a in args]
    ct.launch(None, grid, kernel, tuple(host))
    ct.launch(None, grid, kernel, tuple(dev))
    torch.cuda.synchronize()
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    return [host[i] for i in arrays], [dev[i].cpu().numpy() for i in arrays]


def rng():
    return np.random.default_rng()


def test_functional_operators_on_the_gpu():
    r = rng()
    a = r.standard_normal(100).astype(np.float32)
    b = r.standard_normal(100).astype(np.float32) + 3
    host, dev = both(api.float_functions, (4,), (a, b, np.full(100, np.nan, np.float32), 32))
    np.testing.assert_allclose(dev[2], host[2], rtol=1e-5, atol=1e-4)
    i = r.integers(-1000, 1000, 100).astype(np.int32)
    j = (r.integers(1, 50, 100) * r.choice([-1, 1], 100)).astype(np.int32)
    host, dev = both(api.int_functions, (4,), (i, j, np.zeros(100, np.int32), 32))
    np.testing.assert_array_equal(dev[2], host[2])


def test_nan_handling_and_float_options_on_the_gpu():
    a = np.array([1, np.nan, 3, -np.nan] * 8, np.float32)
    b = np.array([2, 5, np.nan, -1] * 8, np.float32)
    host, dev = both(api.nan_handling, (1,), (a, b, np.zeros(32, np.float32), 32))
    np.testing.assert_array_equal(dev[2], host[2])
    r = rng()
    a = r.standard_normal(32).astype(np.float32)
    b = r.standard_normal(32).astype(np.float32) + 4
    host, dev = both(api.float_options, (1,), (a, b, np.zeros(32, np.float32), 32))
    np.testing.assert_allclose(dev[2], host[2], rtol=1e-5, atol=1e-5)
    tiny = np.float32(1e-40)
    a = np.array([tiny, -tiny, 1.0, 0.0] * 8, np.float32)
    host, dev = both(api.flushes, (1,), (a, np.zeros(32, np.float32), 32))
    np.testing.assert_array_equal(dev[1], host[1])


def test_pieces_and_bytes_on_the_gpu():
    r = rng()
    t, blocks = 16, 2                  # the kernel extracts block i's side of 2
    x = r.standard_normal((t, t)).astype(np.float32)
    y = r.standard_normal((t, t)).astype(np.float32)
    host, dev = both(api.pieces, (blocks,), api.pieces_args(x, y, blocks))
    np.testing.assert_allclose(dev[2], host[2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dev[2], api.pieces_reference(x, y, blocks), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(dev[3], np.frombuffer(dev[2].tobytes(), np.uint8))
    np.testing.assert_array_equal(dev[4], dev[2].ravel())


def test_scans_and_reductions_with_combine_functions_on_the_gpu():
    r = rng()
    t = 16
    x = r.standard_normal((t, t)).astype(np.float32)
    outs = [np.zeros(s, np.float32) for s in [(t, t), (t, t), (t,), (t,), (t, t), (t,)]]
    host, dev = both(api.scans, (1,), (x, *outs, t))
    for h, d in zip(host[1:], dev[1:]):
        np.testing.assert_allclose(d, h, rtol=1e-5, atol=1e-5)
    x = r.integers(-2**30, 2**30, 32).astype(np.int32)
    host, dev = both(api.int_scans, (1,), (x, np.zeros(32, np.int32), 32))
    np.testing.assert_array_equal(dev[1], host[1])


def test_gather_scatter_and_contended_atomics_on_the_gpu():
    r = rng()
    n, t, blocks = 1000, 128, 64
    x = r.standard_normal(n).astype(np.float32)
    idx = r.integers(-5, n + 5, t * blocks).astype(np.int32)
    stats = np.array([-10**9, 10**9, 0, 0, 0, -1, 0, 0], np.int32)
    args = (x, idx, np.full(t * blocks, np.nan, np.float32), np.zeros(8, np.int32), stats,
            np.zeros(t * blocks, np.int32), t)
    host, dev = both(api.indexed, (blocks,), args)
    np.testing.assert_array_equal(dev[2], host[2])                     # gathered
    np.testing.assert_array_equal(dev[3], host[3])                     # histogram
    np.testing.assert_array_equal(dev[4][:6], host[4][:6])             # max, min, count, ...
    assert 7 <= dev[4][6] < 7 + blocks and 1 <= dev[4][7] <= blocks    # some block's value
    assert dev[5].sum() == t                                           # one block swapped
    acc, out = np.zeros(4, np.float32), np.full(32, 9.0, np.float32)
    host, dev = both(api.atomic_floats, (1,), (acc, out, 32))
    np.testing.assert_array_equal(dev[0], host[0])
    np.testing.assert_array_equal(dev[1], host[1])


def test_raw_memory_and_foreign_pointers_on_the_gpu():
    """cuTile 1.7's RawArrayMemory (every method, atomics contended by the blocks) and
    foreign pointers (from_foreign views: the same array, transposed, compile-time
    metadata, a slice's pointer through a helper) on torch CUDA tensors."""
    r = rng()
    t, blocks = 16, 2
    x = r.standard_normal((8, 16)).astype(np.float32)
    stats = np.array([99, -10**9, 10**9, 0, 0, -1, 0, 0, 0, 99], np.int32)
    args = (x, np.zeros(8, np.int32), np.full((blocks, t), np.nan, np.float32), stats, t)
    host, dev = both(api.raw_memory, (blocks,), args)
    np.testing.assert_allclose(dev[2], host[2], rtol=1e-5, atol=1e-5)    # loads by offset
    np.testing.assert_array_equal(dev[1][:4], host[1][:4])                # contended adds
    # the old values: each of the 4 counters saw 0..7 once, whichever block got which
    # (blocks interleave: under compute-sanitizer 40 + 72, in a plain run 24 + 88)
    assert dev[1][4] + dev[1][5] == host[1][4] + host[1][5] == 4 * sum(range(8))
    assert all(4 * sum(range(4)) <= v <= 4 * sum(range(4, 8)) for v in dev[1][4:6])
    np.testing.assert_array_equal(dev[3][:6], host[3][:6])
    assert dev[3][6] in (7, 8) and dev[3][7] in (1, 2) and dev[3][8] == 1 and dev[3][9] == 99
    u = np.array([1, 3000000000, 5], np.uint32)
    f = np.array([1.5, 0.5, 1.5, 8.0], np.float32)
    host, dev = both(api.raw_scalar_and_unsigned, (1,), (u, f, np.zeros(4, np.float32)))
    for h, d in zip(host, dev):
        np.testing.assert_array_equal(d, h)
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    host, dev = both(api.foreign, (1,), (x, np.full((4, 8), np.nan, np.float32), 5))
    np.testing.assert_array_equal(dev[1], host[1])


@pytest.mark.parametrize("kind", range(6), ids=api._KINDS[:6])
def test_every_commutative_atomic_on_every_dtype_on_the_gpu(kind):
    """Contended by two blocks of 256 elements on 4 slots; signed types with negative
    values (a 64-bit add is `atom.add.u64`), floats with integer values (exact in any
    order).  xchg and cas: test_gather_scatter_and_contended_atomics_on_the_gpu."""
    import ml_dtypes
    r, t = rng(), 256
    for name in api._ATOMIC_DTYPES[api._KINDS[kind]]:
        if name == "bfloat16":
            dtype, tdtype = ml_dtypes.bfloat16, torch.bfloat16
        else:
            dtype, tdtype = np.dtype(name), getattr(torch, name)
        # sums stay exact in any order: 16-bit floats hold integers to 256 (bfloat16)
        low, high = (-1, 2) if name in ("float16", "bfloat16") else \
            (0 if name.startswith("uint") else -40, 40)
        vals = r.integers(low, high, t).astype(dtype)
        acc = np.array([3, 5, 7, 9, 11, 0], dtype)
        ct.launch(None, (2,), api.atomic_every_kind, (acc, vals, t, kind))

        def dev(a):
            x = torch.from_numpy(a.view(np.int16) if name == "bfloat16" else a).cuda()
            return x.view(tdtype) if name == "bfloat16" else x
        dacc = dev(np.array([3, 5, 7, 9, 11, 0], dtype))
        ct.launch(None, (2,), api.atomic_every_kind, (dacc, dev(vals), t, kind))
        got = dacc.view(torch.int16).cpu().numpy().view(dtype) if name == "bfloat16" \
            else dacc.cpu().numpy()
        np.testing.assert_array_equal(got.astype(np.float64), acc.astype(np.float64),
                                      err_msg=f"{api._KINDS[kind]} on {name}")


def test_fp8_scan_on_the_gpu():
    import ml_dtypes
    x = np.array([1, 0, 2, 1, 0, 1, 1, 2] * 2, ml_dtypes.float8_e4m3fn)
    host = np.zeros(16, ml_dtypes.float8_e4m3fn)
    ct.launch(None, (1,), api.fp8_scan, (x, host, 16))
    f8 = lambda a: torch.from_numpy(a.view(np.uint8)).cuda().view(torch.float8_e4m3fn)  # noqa
    out = f8(np.zeros(16, ml_dtypes.float8_e4m3fn))
    ct.launch(None, (1,), api.fp8_scan, (f8(x), out, 16))
    got = out.view(torch.uint8).cpu().numpy().view(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(got.astype(np.float64), host.astype(np.float64))
    np.testing.assert_array_equal(got.astype(np.float64), np.cumsum(x.astype(np.float64)))


@pytest.mark.parametrize("dst", ["float8_e4m3fn", "float8_e5m2"])
def test_f64_to_fp8_rounds_once_on_the_gpu(dst):
    """Just past, just before and on the tie between 1 and the next fp8 value up."""
    import ml_dtypes
    d = getattr(ml_dtypes, dst)
    up = float(np.nextafter(np.array(1.0, d), np.array(2.0, d)))
    tie = (1.0 + up) / 2
    x = rng().standard_normal(32) * 4
    x[:4] = [tie + 2**-30, -(tie + 2**-30), tie - 2**-30, tie]
    want = api._nearest(x, d)
    out = torch.zeros(32, dtype=getattr(torch, dst), device="cuda")
    ct.launch(None, (1,), api.float_casts, (torch.from_numpy(x).cuda(), out, 32))
    got = out.view(torch.uint8).cpu().numpy().view(d)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    assert got[0] == up and got[1] == -up and got[2] == 1.0 and got[3] == 1.0


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_integer_abs_and_power_on_the_gpu(dtype):
    r, info = rng(), np.iinfo(dtype)
    x = r.integers(-9, 10, 256).astype(dtype)
    n = r.integers(-3, 12, 256).astype(dtype)
    x[:6], n[:6] = [info.min, 0, 1, -1, -1, 0], [1, -2, -5, -3, -4, 0]
    host, dev = both(api.int_abs_pow, (1,), (x, n, np.zeros(256, dtype), np.zeros(256, dtype),
                                             256))
    np.testing.assert_array_equal(dev[2], host[2])
    np.testing.assert_array_equal(dev[3], host[3])


def test_fp8_reductions_on_the_gpu():
    import ml_dtypes
    x = np.tile(np.array([1, 0, 2, 1, 3, 1, 0, 2] * 4, ml_dtypes.float8_e4m3fn), (4, 1))
    x[1] *= np.array(-1, ml_dtypes.float8_e4m3fn)
    xd = torch.from_numpy(x.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
    s, m, i = (torch.zeros(5, device="cuda"), torch.zeros(4, device="cuda"),
               torch.zeros(4, dtype=torch.int32, device="cuda"))
    ct.launch(None, (1,), api.fp8_reductions, (xd, s, m, i, 32))
    xf = x.astype(np.float64)
    np.testing.assert_array_equal(s.cpu().numpy(), np.append(xf.sum(1), xf.sum()))
    np.testing.assert_array_equal(m.cpu().numpy(), xf.max(1))
    np.testing.assert_array_equal(i.cpu().numpy(), xf.argmin(1))


@pytest.mark.parametrize("src", [np.float32, np.float16, np.float64])
def test_float_to_int_saturates_on_the_gpu(src):
    vals = [np.nan, np.inf, -np.inf, 1e30, -1e30, -0.5, -1.0, -1.5, 0.9, 127.9, 128.0,
            -128.5, 255.9, 256.0, 65504.0, -65504.0, 3e9, -3e9, 2.0**31, -2.0**31, 2.0**63,
            2.0**64, 7.0, -7.0] + [0.0] * 8
    with np.errstate(over="ignore"):
        x = np.array(vals, np.float64).astype(src)
    for dst in (np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64):
        host, dev = both(api.float_casts, (1,), (x, np.zeros(32, dst), 32))
        np.testing.assert_array_equal(dev[1], host[1], err_msg=f"{src} -> {dst}")


@pytest.mark.parametrize("dst", ["float8_e4m3fn", "float8_e5m2"])
def test_rounding_to_fp8_saturates_on_the_gpu(dst):
    import ml_dtypes
    d = getattr(ml_dtypes, dst)
    top = float(ml_dtypes.finfo(d).max)
    x = np.array([np.inf, -np.inf, np.nan, 1000.0, -1000.0, 449.0, 464.0, 470.0, 1e5, -7e4,
                  top, -top, 1.5, -0.0] + [0.25] * 18, np.float32)
    host = np.zeros(32, d)
    ct.launch(None, (1,), api.float_casts, (x, host, 32))
    out = torch.zeros(32, dtype=getattr(torch, dst), device="cuda")
    ct.launch(None, (1,), api.float_casts, (torch.from_numpy(x).cuda(), out, 32))
    got = out.view(torch.uint8).cpu().numpy().view(d)
    np.testing.assert_array_equal(got.astype(np.float64), host.astype(np.float64))


def test_tfloat32_on_the_gpu():
    r = rng()
    x = (r.standard_normal(64) * 1000).astype(np.float32)
    host, dev = both(api.to_tf32, (1,), (x, np.zeros(64, np.float32), 64))
    np.testing.assert_array_equal(dev[1], host[1])
    a = r.standard_normal((16, 16)).astype(np.float32)
    b = r.standard_normal((16, 16)).astype(np.float32)
    host, dev = both(api.tf32_product, (1,), (a, b, np.zeros((16, 16), np.float32), 16))
    np.testing.assert_allclose(dev[2], host[2], rtol=1e-4, atol=1e-4)


def test_compile_time_helpers_and_annotations_on_the_gpu():
    x = np.arange(16, dtype=np.float32)
    host, dev = both(api.compile_time, (1,), (x, np.zeros(16, np.float32), 16, 0))
    np.testing.assert_array_equal(dev[1], host[1])
    x = np.arange(64, dtype=np.float32)
    host, dev = both(api.annotated, (1,), (x, np.zeros(64, np.float32), 5, 64, 2.0))
    np.testing.assert_array_equal(dev[1], host[1])


def test_device_print_prints_once_per_block(capfd):
    x = torch.arange(4, dtype=torch.float32, device="cuda")
    ct.launch(None, (2,), api.debugged, (x, 4))
    torch.cuda.synchronize()
    out = capfd.readouterr().out
    # each statement's line whole, once per block (blocks run at once: their lines
    # may interleave statement by statement)
    lines = [line for b in (0, 1) for line in api.WANT_PRINTED.format(b=b).splitlines()]
    assert sorted(out.splitlines()) == sorted(lines), out


@pytest.mark.skipif(bool(os.environ.get("TILEIR_SANITIZER")),
                    reason="traps on purpose: under compute-sanitizer the trap is an error")
def test_a_failed_device_assert_traps_with_the_user_s_line(tmp_path):
    """In a child process: a trap leaves the CUDA context unusable."""
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(__import__('os').path.dirname(__file__))!r})
        import tileir as ct
        import test_cutile_api as api
        x = torch.tensor([1.0, 2.0, 1000.0, 3.0], device="cuda")
        ct.launch(None, (1,), api.debugged, (x, 4))
        torch.cuda.synchronize()
        print("NOT REACHED")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0 and "NOT REACHED" not in r.stdout
    assert "test_cutile_api.py" in r.stdout and "assertion failed: values are small" in r.stdout


def test_advanced_indexing_and_grid_dependency_on_the_gpu():
    r = rng()
    x = r.standard_normal((10, 40)).astype(np.float32)
    rows = np.array([0, 3, 9, 12, -1, 5, 7, 2], np.int32)
    args = (x, rows, np.zeros((8, 48), np.float32), np.zeros((10, 40), np.float32), 16)
    host, dev = both(api.advanced, (3,), args)
    np.testing.assert_array_equal(dev[2], host[2])
    np.testing.assert_array_equal(dev[3], host[3])


def test_array_slices_and_tiled_views_on_the_gpu():
    r = rng()
    a = r.standard_normal((300, 70)).astype(np.float32)
    indptr = np.array([0, 4, 7, 150, 151, 300], np.int32)
    host, dev = both(views.ragged_rows, (5, 5), (a, np.zeros_like(a), indptr, 16, 16))
    np.testing.assert_array_equal(dev[1], host[1])
    x = r.standard_normal((19, 37)).astype(np.float32)
    host, dev = both(views.tiled_copy, (3, 3), (x, np.zeros_like(x), np.zeros(2, np.int32),
                                               8, 16))
    np.testing.assert_array_equal(dev[1], host[1])
    np.testing.assert_array_equal(dev[2], host[2])
    x = r.standard_normal(1000).astype(np.float32)
    host, dev = both(views.sliding, (1,), (x, np.zeros(1000, np.float32), 64, 37))
    np.testing.assert_array_equal(dev[1], host[1])
    x = np.arange(20, dtype=np.float32)
    host, dev = both(views.through_helpers, (1,), (x, np.zeros(20, np.float32),
                                                   np.zeros(20, np.float32), 3, 14, 8))
    np.testing.assert_array_equal(dev[1], host[1])
    np.testing.assert_array_equal(dev[2], host[2])
    a = r.standard_normal((300, 128)).astype(np.float16)
    b = r.standard_normal((128, 128)).astype(np.float16)
    indptr = np.array([0, 10, 170, 171, 300], np.int32)
    host, dev = both(views.grouped_gemm, (4, 2), (a, b, np.zeros((300, 128), np.float16),
                                                  indptr, 64, 64, 32))
    np.testing.assert_allclose(dev[2].astype(np.float32), host[2].astype(np.float32),
                               rtol=2e-2, atol=5e-2)


def test_tiled_view_atomic_stores_contend_across_blocks_on_the_gpu():
    r = rng()
    shape, tile, steps = (500, 600), (64, 64), (16, 48)        # tiles overlap four deep
    x, y, b = (r.integers(-5, 5, shape).astype(np.int32) for _ in range(3))
    grid = (-(-shape[0] // steps[0]), -(-shape[1] // steps[1]))
    host, dev = both(views.atomic_tiles, grid, (x, y, b, *tile, *steps))
    np.testing.assert_array_equal(dev[0], host[0])
    np.testing.assert_array_equal(dev[2], host[2])


def test_while_loops_and_a_spin_lock_across_many_blocks_on_the_gpu():
    blocks = 256
    lock, hits, counter = (torch.zeros(n, dtype=torch.int32, device="cuda")
                           for n in (1, blocks, 1))
    ct.launch(None, (blocks,), api.spin_lock, (lock, hits, counter))
    torch.cuda.synchronize()
    assert lock.item() == 0 and hits.sum().item() == blocks and counter.item() == blocks
    x = torch.ones(64, device="cuda")
    y, n = torch.zeros(64, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda")
    ct.launch(None, (1,), api.doubling, (x, y, n, 40.0))
    assert n.item() == 6 and (y == 64).all()


def test_orders_and_one_element_loads_on_the_gpu():
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    args = (x, np.zeros((2, 2), np.float32), np.zeros((4, 4), np.float32),
            np.zeros(1, np.float32))
    host, dev = both(api.ordered, (1,), args)
    for h, d in zip(host[1:], dev[1:]):
        np.testing.assert_array_equal(d, h)


def test_products_of_several_batches_on_the_gpu():
    r = rng()
    a = r.standard_normal((1, 16, 16)).astype(np.float32)
    b = r.standard_normal((2, 16, 16)).astype(np.float32)
    host, dev = both(api.broadcast_batches, (1,), (a, b, np.zeros((2, 16, 16), np.float32),
                                                    2, 16))
    # f32 products run as tf32 on the tensor cores: 10 mantissa bits, errors ~1e-3 of
    # the largest result (an f16 product of 2 batches is exact: test_backend's)
    np.testing.assert_allclose(dev[2], host[2], rtol=0, atol=3e-3 * np.abs(host[2]).max())


# (programmatic dependent launches: test_gpu.py, checked and fast paths)


# ---------------------------------------------------------------------------
# Lists of arrays (test_cutile_lists' kernels)
# ---------------------------------------------------------------------------
def both_lists(kernel, grid, args):
    """(interpreter, GPU) values of every array and list-of-arrays argument of `kernel`
    over copies of `args`: lists become lists of torch CUDA tensors on the GPU."""
    def host(a):
        return [x.copy() for x in a] if isinstance(a, list) else \
            a.copy() if isinstance(a, np.ndarray) else a

    def dev(a):
        if isinstance(a, list):
            return [torch.from_numpy(x.copy()).cuda() for x in a]
        return torch.from_numpy(a.copy()).cuda() if isinstance(a, np.ndarray) else a

    h, d = [host(a) for a in args], [dev(a) for a in args]
    ct.launch(None, grid, kernel, tuple(h))
    ct.launch(None, grid, kernel, tuple(d))
    torch.cuda.synchronize()
    back = [[x.cpu().numpy() for x in a] if isinstance(a, list) else
            a.cpu().numpy() if hasattr(a, "cpu") else a for a in d]
    return h, back


def test_lists_of_arrays_on_the_gpu():
    import test_cutile_lists as lists
    r = rng()
    for n in (1, 3, 8):
        arrays = [r.integers(0, 100, (16, 16)).astype(np.int32) for _ in range(n)]
        host, dev = both_lists(lists.sum_over_len, (1,), (arrays, np.zeros((16, 16), np.int32)))
        np.testing.assert_array_equal(dev[1], sum(arrays))
    arrays = [r.integers(0, 100, (16, 16)).astype(np.int32) for _ in range(3)]
    for kernel in (lists.constant_indices, lists.tile_indices):
        host, dev = both_lists(kernel, (1,), (arrays, np.zeros((16, 16), np.int32)))
        np.testing.assert_array_equal(dev[1], host[1])
    sizes = [5, 64, 33, 17]
    xs = [r.standard_normal(n).astype(np.float32) for n in sizes]
    host, dev = both_lists(lists.copy_block_s_array, (4, 4),
                           (xs, [np.zeros(n, np.float32) for n in sizes], 16))
    for h, d in zip(host[1], dev[1]):
        np.testing.assert_array_equal(d, h)
    arrays = [r.standard_normal(40).astype(np.float32) for _ in range(3)]
    host, dev = both_lists(lists.helpers_take_lists, (3,),
                           (arrays, np.zeros(40, np.float32), 2, 16))
    np.testing.assert_allclose(dev[1], host[1], rtol=1e-6)


@pytest.mark.parametrize("tiles", [(64, 64, 32), (128, 128, 64), (16, 8, 16)])
def test_cutile_s_grouped_gemm_on_the_gpu(tiles):
    """cuTile's test_group_gemm shapes and ours, ragged, fp16 on the tensor cores."""
    import test_cutile_lists as lists
    r = rng()
    for groups in ([(4, 4, 4)], [(2, 4, 4), (8, 6, 6), (12, 16, 8)], lists.GROUPS,
                   [(300, 200, 256), (1, 72, 64), (129, 64, 512)]):
        args = lists.grouped_args(r, tiles, groups, num_sm=4)
        host, dev = both_lists(lists.grouped_matmul_kernel, (4,), args)
        for a, b, c in zip(args[0], args[1], dev[2]):
            want = a.astype(np.float32) @ b.astype(np.float32)
            np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-2,
                                       atol=5e-2 * max(1.0, np.abs(want).max() / 16))


@pytest.mark.parametrize("grid", [(2, 2, 3), (2, 1, 3), (16, 16, 2)])
def test_a_gemm_per_grid_layer_selected_from_lists_on_the_gpu(grid):
    """Retiled (and on sm_90a persistent for many waves) for the launch's grid."""
    import test_cutile_lists as lists
    args = lists.batched_args(rng(), g=grid[2], m=128 * grid[0], n=128 * grid[1], k=320)
    host, dev = both_lists(lists.list_batched_gemm, grid, args)
    for a, b, c in zip(args[0], args[1], dev[2]):
        np.testing.assert_allclose(c.astype(np.float32),
                                   a.astype(np.float32) @ b.astype(np.float32),
                                   rtol=2e-2, atol=1e-1)


def test_list_launches_take_the_fast_path():
    """The second launch like the first (new tensors, same shapes) goes through the
    kernel's dispatcher: one plan, filed under a kinds string with the list ("L"), its
    tensor maps re-encoded for the new pointers of each list element (TMA GEMMs)."""
    import test_cutile_lists as lists
    r = rng()
    for kernel, grid, make in (
            (ct.kernel(lists.sum_over_len.fn), (1,),
             lambda: ([torch.from_numpy(r.integers(0, 100, (16, 16)).astype(np.int32)).cuda()
                       for _ in range(3)], torch.zeros((16, 16), dtype=torch.int32,
                                                       device="cuda"))),
            (ct.kernel(lists.list_batched_gemm.fn), (2, 2, 3),
             lambda: tuple([torch.from_numpy(x).cuda() for x in a] if isinstance(a, list)
                           else a for a in lists.batched_args(r, g=3, k=192)))):
        for _ in range(3):
            args = make()
            ct.launch(None, grid, kernel, args)
            torch.cuda.synchronize()
            if grid == (1,):
                assert torch.equal(args[1], sum(args[0]))
            else:
                for a, b, c in zip(*args[:3]):
                    ref = a.float() @ b.float()
                    assert ((c.float() - ref).norm() / ref.norm()).item() < 5e-3
        plans = {k: len(d.plans) for k, d in kernel._dispatchers.items()}
        assert len(plans) == 1 and "L" in next(iter(plans)) and sum(plans.values()) == 1


def test_a_list_with_a_host_array_is_refused_on_a_gpu_launch():
    import test_cutile_lists as lists
    arrays = [torch.zeros((16, 16), dtype=torch.int32, device="cuda"),
              torch.zeros((16, 16), dtype=torch.int32)]
    out = torch.zeros((16, 16), dtype=torch.int32, device="cuda")
    with pytest.raises(ct.TileValueError, match=r"argument 'arrays\[1\]' of kernel "
                                                r"'sum_over_len' is in host memory"):
        ct.launch(None, (1,), lists.sum_over_len, (arrays, out))
    # a launch that works after one that failed, and again (the fast path the second time)
    arrays[1] = arrays[1].cuda() + 1
    for _ in range(2):
        ct.launch(None, (1,), lists.sum_over_len, (arrays, out))
    torch.cuda.synchronize()
    assert (out == 1).all()


# ---------------------------------------------------------------------------
# cuTile 1.7's options and signatures (test_reduction_options, test_cutile_functions)
# ---------------------------------------------------------------------------
def _on_gpu(kernel, grid, args):
    """The array outputs of `kernel` launched on the GPU over copies of `args` (NumPy;
    bfloat16 arrays travel as their bits)."""
    import ml_dtypes

    def dev(a):
        if a.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(a.view(np.int16).copy()).cuda().view(torch.bfloat16)
        return torch.from_numpy(a.copy()).cuda()

    def host(a, like):
        if like.dtype == ml_dtypes.bfloat16:
            return a.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
        return a.cpu().numpy()
    moved = [dev(a) if isinstance(a, np.ndarray) else a for a in args]
    ct.launch(None, grid, kernel, tuple(moved))
    torch.cuda.synchronize()
    return [host(m, a) for m, a in zip(moved, args) if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("prop", [0, 1])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_reductions_ignore_nan_unless_asked_on_the_gpu(dtype, prop):
    """PTX max.f32 (maxnumf) returns the operand that is not NaN; argmax's pairs treat
    NaN as the worst value (or the extreme, with propagate_nan): the GPU gives the
    interpreter's results."""
    import test_reduction_options as red
    t = red.DTYPES[dtype]
    x = red._rows(rng(), 16).astype(t)
    args = (x, np.zeros((3, 8), t), np.zeros((3, 8), np.int32), 16, prop)
    host = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    ct.launch(None, (1,), red.extremes, tuple(host))
    _, v, i = _on_gpu(red.extremes, (1,), args)
    np.testing.assert_array_equal(v.astype(np.float32), host[1].astype(np.float32))
    np.testing.assert_array_equal(i, host[2])


@pytest.mark.parametrize("prod", [0, 1])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_directed_and_flushing_reductions_on_the_gpu(dtype, prod):
    """add.rz.f32 and kin, cvt.rm.f16.f32 after each 16-bit step, .ftz: the GPU's
    results bracket the exact values as the interpreter's do (its order of steps is
    its own)."""
    import test_reduction_options as red
    x = red.directed_rows(dtype, prod, rng())
    args = (x, np.zeros((4, 4), red.DTYPES[dtype]), 16, prod)
    _, got = _on_gpu(red.rounded_sums, (1,), args)
    red.check_directed(got, x, prod)
    _, got = _on_gpu(red.flushing, (1,), (red.FLUSH_ROWS, np.zeros((5, 4), np.float32), 16))
    red.check_flushed(got)


@pytest.mark.parametrize("src,dst,modes", [
    (np.float32, np.float16, "rz"), (np.float64, np.float32, "rz rm rp"),
    (np.float64, np.float16, "rz"), ("float32", "bfloat16", "rz"),
    ("bfloat16", "float16", "rz rm rp"), (np.float16, "bfloat16", "rz")])
def test_directed_astype_on_the_gpu(src, dst, modes):
    """The hardware's cvt.rz/rm/rp (and bf16 by bits) agree with the exact oracle, bit
    for bit, on random and edge values."""
    import ml_dtypes
    import test_cutile_functions as fns
    from tileir.interpreter import directed
    src, dst = (getattr(ml_dtypes, d) if d == "bfloat16" else np.dtype(d).type
                for d in (src, dst))
    x = fns._edge_values(src, dst, rng())
    bits = {2: np.uint16, 4: np.uint32}[np.dtype(dst).itemsize]
    for m, mode in enumerate(("rz", "rm", "rp")):
        if mode in modes.split():
            want = directed.convert(mode, x.astype(np.float64), dst)
            _, got = _on_gpu(fns.converted, (1,), (x, np.zeros(64, dst), m, 0, 64))
            same = (got.view(bits) == want.view(bits)) | (np.isnan(got) & np.isnan(want))
            assert same.all(), (mode, x[~same], got[~same], want[~same])


def test_arange_num_tiles_vector_products_and_scalar_bits_on_the_gpu():
    import test_cutile_functions as fns
    args = (np.zeros((5, 8), np.int32), np.zeros(8, np.float32), np.zeros(8, np.int8), -5, 3)
    host = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    ct.launch(None, (1,), fns.ranges, tuple(host))
    for g, h in zip(_on_gpu(fns.ranges, (1,), args), host[:3]):
        np.testing.assert_array_equal(g, h)
    x = np.arange(6 * 20, dtype=np.float32).reshape(6, 20)
    _, y = _on_gpu(fns.transposed_copy, (1,), (x, np.zeros((20, 6), np.float32), 8, 4))
    np.testing.assert_array_equal(y, x.T)
    r = rng()
    a, b = r.standard_normal(16).astype(np.float32), r.standard_normal((16, 32)).astype(np.float32)
    c = r.standard_normal((2, 16, 32)).astype(np.float32)
    outs = [np.zeros(1, np.float32), np.zeros(32, np.float32), np.zeros(32, np.float32),
            np.zeros((2, 32), np.float32), np.zeros((2, 32), np.float32)]
    got = _on_gpu(fns.vector_products, (1,), (a, b, c, *outs))[3:]
    want = [np.array([a @ a]), a @ b, b.T @ a, a @ c, np.transpose(c, (0, 2, 1)) @ a]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    o, f = _on_gpu(fns.scalar_bits, (1,), (np.zeros(2, np.uint32), np.zeros(1, np.float32), 0))
    assert list(o) == [0x3F800000, 0xFFFFFFFF] and f[0] == np.float32(np.pi)
