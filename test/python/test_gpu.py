"""GPU tests: the examples (except matmul), a reduction and a transpose sweep, against torch.

Marked `gpu`: skipped cleanly without an NVIDIA GPU.  Fresh random inputs every
run, outputs poisoned with NaN (an unwritten element fails), ragged sizes, and
both the aligned (16-byte vector) and unaligned (column-offset view) variants.
"""

import numpy as np
import pytest
from conftest import lazy_import

import tileir as ct
from tileir.examples import layernorm, next_pow2, rmsnorm, softmax, transpose, vector_add

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")

DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
# tolerance of one rounding of an f32 result to the output type, plus f32 noise
TOL = {"float32": (2e-5, 1e-5), "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}

def tol(dtype):
    """TOL of a torch dtype."""
    return TOL[str(dtype).removeprefix("torch.")]


def rand(*shape, dtype, offset=False):
    """A fresh random CUDA tensor; with `offset`, a view whose base is not 16-byte aligned."""
    if not offset:
        return torch.randn(*shape, device="cuda", dtype=dtype)
    big = torch.randn(*shape[:-1], shape[-1] + 1, device="cuda", dtype=dtype)
    return big[..., 1:]


def poisoned(*shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def close(out, ref):
    rtol, atol = tol(out.dtype)
    assert not out.isnan().any(), "some output elements were not written"
    torch.testing.assert_close(out.float(), ref.float(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 1000, 65536 + 17])
@pytest.mark.parametrize("offset", [False, True])
def test_vector_add(dtype, n, offset):
    d = getattr(torch, DTYPES[dtype])
    a, b = rand(n, dtype=d, offset=offset), rand(n, dtype=d, offset=offset)
    c = poisoned(n, dtype=d)
    ct.launch(None, (ct.cdiv(n, 1024),), vector_add.vector_add, (a, b, c, 1024))
    close(c, a.float() + b.float())


ROWS = [(1, 1), (7, 1000), (64, 4096), (3, 8192 + 5)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", ROWS)
@pytest.mark.parametrize("offset", [False, True])
def test_softmax(dtype, m, n, offset):
    d = getattr(torch, DTYPES[dtype])
    x = rand(m, n, dtype=d, offset=offset) * 4
    y = poisoned(m, n, dtype=d)
    ct.launch(None, (m,), softmax.softmax, (x, y, next_pow2(n)))
    close(y, torch.softmax(x.double(), dim=-1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", ROWS)
@pytest.mark.parametrize("offset", [False, True])
def test_rmsnorm(dtype, m, n, offset):
    d = getattr(torch, DTYPES[dtype])
    x, w = rand(m, n, dtype=d, offset=offset), rand(n, dtype=d)
    y = poisoned(m, n, dtype=d)
    ct.launch(None, (m,), rmsnorm.rmsnorm, (x, w, y, 1e-6, next_pow2(n)))
    x64 = x.double()
    ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    close(y, ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", ROWS)
@pytest.mark.parametrize("offset", [False, True])
def test_layernorm(dtype, m, n, offset):
    d = getattr(torch, DTYPES[dtype])
    x = rand(m, n, dtype=d, offset=offset) + 3
    w, b = rand(n, dtype=d), rand(n, dtype=d)
    y = poisoned(m, n, dtype=d)
    ct.launch(None, (m,), layernorm.layernorm, (x, w, b, y, 1e-5, next_pow2(n)))
    ref = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
    close(y, ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,tm,tn", [(1, 1, 16, 16), (300, 170, 64, 32), (1024, 1000, 64, 64),
                                       (33, 4097, 32, 128), (4096, 32, 128, 16)])
def test_transpose_sweep(dtype, m, n, tm, tn):
    d = getattr(torch, DTYPES[dtype])
    x = rand(m, n, dtype=d)
    y = poisoned(n, m, dtype=d)
    ct.launch(None, (ct.cdiv(m, tm), ct.cdiv(n, tn)), transpose.transpose, (x, y, tm, tn))
    assert torch.equal(y, x.t())


@ct.kernel
def reduce_rows(x, out, KIND: ct.Constant[int], AXIS: ct.Constant[int],
                TM: ct.Constant[int], TN: ct.Constant[int]):
    """out[i] (AXIS=1) or out[j] (AXIS=0) = reduction of one (TM, TN) tile, padded neutrally."""
    i = ct.bid(0)
    if KIND == 0:
        t = ct.load(x, index=(i, 0) if AXIS == 1 else (0, i), shape=(TM, TN),
                    padding_mode=ct.PaddingMode.ZERO)
        r = ct.sum(ct.astype(t, ct.float32), axis=AXIS)
    elif KIND == 1:
        t = ct.load(x, index=(i, 0) if AXIS == 1 else (0, i), shape=(TM, TN),
                    padding_mode=ct.PaddingMode.NEG_INF)
        r = ct.max(t, axis=AXIS)
    else:
        t = ct.load(x, index=(i, 0) if AXIS == 1 else (0, i), shape=(TM, TN),
                    padding_mode=ct.PaddingMode.POS_INF)
        r = ct.min(t, axis=AXIS)
    ct.store(out, index=(i,), tile=r)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("kind", [0, 1, 2])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("m,n,tm,tn", [(37, 100, 16, 128), (256, 512, 16, 512), (5, 3000, 8, 4096),
                                       (1000, 7, 256, 8)])
def test_reduction_sweep(dtype, kind, axis, m, n, tm, tn):
    d = getattr(torch, DTYPES[dtype])
    if axis == 0:
        m, n, tm, tn = n, m, tn, tm       # reduce columns: tiles span all rows
    x = rand(m, n, dtype=d)
    blocks = ct.cdiv(m, tm) if axis == 1 else ct.cdiv(n, tn)
    if (axis == 1 and n > tn) or (axis == 0 and m > tm):
        pytest.skip("the tile must span the reduced axis")
    out = poisoned(blocks * (tm if axis == 1 else tn), dtype=torch.float32)
    ct.launch(None, (blocks,), reduce_rows, (x, out, kind, axis, tm, tn))
    xf = x.double()
    ref = (xf.sum(axis), xf.amax(axis), xf.amin(axis))[kind]
    got = out[:ref.numel()]
    torch.testing.assert_close(got.double(), ref, rtol=1e-5 if kind == 0 else 0,
                               atol=1e-3 if kind == 0 else 0)


@ct.kernel
def arg_rows(x, out, ARGMAX: ct.Constant[bool], AXIS: ct.Constant[int],
             TM: ct.Constant[int], TN: ct.Constant[int], FLOAT: ct.Constant[bool],
             NAN: ct.Constant[bool]):
    """out[i] = argmax/argmin of one (TM, TN) tile along AXIS; float tiles pad with the
    infinity that never wins (integer tiles pad with 0: callers load whole tiles)."""
    i = ct.bid(0)
    where = (i, 0) if AXIS == 1 else (0, i)
    if not FLOAT:
        t = ct.load(x, index=where, shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    elif ARGMAX:
        t = ct.load(x, index=where, shape=(TM, TN), padding_mode=ct.PaddingMode.NEG_INF)
    else:
        t = ct.load(x, index=where, shape=(TM, TN), padding_mode=ct.PaddingMode.POS_INF)
    if ARGMAX:
        r = ct.argmax(t, axis=AXIS, propagate_nan=NAN)
    else:
        r = ct.argmin(t, axis=AXIS, propagate_nan=NAN)
    ct.store(out, index=(i,), tile=r)


@pytest.mark.parametrize("dtype", ["f32", "bf16", "i32"])
@pytest.mark.parametrize("argmax", [True, False])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("propagate_nan", [False, True])
@pytest.mark.parametrize("m,n,tm,tn", [(37, 100, 16, 128), (5, 3000, 8, 4096),
                                       (3, 8000, 1, 8192), (1000, 7, 256, 8), (64, 512, 4, 512)])
def test_argmax_argmin_sweep(dtype, argmax, axis, propagate_nan, m, n, tm, tn):
    """First occurrence wins (few distinct values: many ties); a NaN (some rows hold
    NaNs) is ignored, cuTile's default, or with propagate_nan counts as the extreme, as
    NumPy's argmax decides."""
    if axis == 0:
        m, n, tm, tn = n, m, tn, tm       # reduce columns: tiles span all rows
    if (axis == 1 and n > tn) or (axis == 0 and m > tm):
        pytest.skip("the tile must span the reduced axis")
    if dtype == "i32" and (m % tm or n % tn):
        pytest.skip("integer tiles pad with 0, which could win: whole tiles only")
    if dtype == "i32":
        x = torch.randint(-8, 8, (m, n), device="cuda", dtype=torch.int32)
    else:
        x = torch.randint(-8, 8, (m, n), device="cuda").to(getattr(torch, DTYPES[dtype]))
        x[torch.rand(m, n, device="cuda") < 0.002] = float("nan")
    blocks = ct.cdiv(m, tm) if axis == 1 else ct.cdiv(n, tn)
    out = torch.full((blocks * (tm if axis == 1 else tn),), -7, device="cuda",
                     dtype=torch.int32)
    ct.launch(None, (blocks,), arg_rows,
              (x, out, argmax, axis, tm, tn, dtype != "i32", propagate_nan))
    xs = x.float().cpu().numpy()
    if propagate_nan:
        ref = (np.argmax if argmax else np.argmin)(xs, axis=axis)
    else:           # NaN ignored: as the worst value (no slice here is all NaN)
        worst = -np.inf if argmax else np.inf
        ref = (np.argmax if argmax else np.argmin)(np.where(np.isnan(xs), worst, xs), axis=axis)
    assert np.array_equal(out[:ref.size].cpu().numpy(), ref)


def test_argument_errors_before_launch():
    a = torch.randn(100, device="cuda")
    with pytest.raises(ct.TileValueError, match="host memory"):
        # a host tensor among device tensors is caught before the launch
        ct.launch(None, (1,), vector_add.vector_add, (a, torch.randn(100), a, 128))
    with pytest.raises(ct.TileTypeError, match="do not support"):
        z = torch.zeros(100, device="cuda", dtype=torch.complex64)
        ct.launch(None, (1,), vector_add.vector_add, (z, z, z, 128))


@ct.kernel
def chunked_row_sum(x, out, TN: ct.Constant[int]):
    """A loop carrying a tile, a reduction to a scalar, a runtime branch on it."""
    row = ct.bid(0)
    acc = ct.zeros((1, TN), dtype=ct.float32)
    for j in range(ct.num_tiles(x, 1, (1, TN))):
        t = ct.load(x, index=(row, j), shape=(1, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.astype(t, ct.float32)
    s = ct.sum(acc)
    if s < 0:
        s = -s
    ct.store(out, index=(row,), tile=s)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("m,n,tn", [(3, 1, 64), (17, 1000, 128), (64, 4097, 512)])
def test_loops_and_branches(dtype, m, n, tn):
    x = rand(m, n, dtype=getattr(torch, DTYPES[dtype]))
    out = poisoned(m, dtype=torch.float32)
    ct.launch(None, (m,), chunked_row_sum, (x, out, tn))
    ref = x.double().sum(-1).abs()
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("example", ["vector_add", "rmsnorm", "softmax"])
@pytest.mark.parametrize("offset", [False, True])
def test_large_arrays_take_the_l2_policy(monkeypatch, example, offset):
    """Arrays over the large-array line specialize as large and their 16-byte loads
    carry the L2 policy (unaligned arrays have no 16-byte loads): correct either way,
    through the checked launch and the fast path.  The line is lowered to 1 MiB so
    that modest arrays cross it."""
    from tileir.runtime import arrays
    from tileir.specialization import ArrayParam
    monkeypatch.setattr(arrays, "large_bytes", lambda ordinal: 1 << 20)
    d = torch.bfloat16
    m, n = 301, 2000 - 8         # rows of 16-byte multiples, ragged against the 2048 tile;
    #                              a row array is 1.2 MB, w 4 KB
    if example == "vector_add":
        k = ct.kernel(vector_add.vector_add.__wrapped__)
        a, b = rand(m * n, dtype=d, offset=offset), rand(m * n, dtype=d, offset=offset)
        out = poisoned(m * n, dtype=d)
        args, grid, ref = (a, b, out, 2048), (ct.cdiv(m * n, 2048),), a.float() + b.float()
        large = {"a": True, "b": True, "c": True}
    elif example == "rmsnorm":
        k = ct.kernel(rmsnorm.rmsnorm.__wrapped__)
        x, w, out = rand(m, n, dtype=d, offset=offset), rand(n, dtype=d), poisoned(m, n, dtype=d)
        args, grid = (x, w, out, 1e-6, next_pow2(n)), (m,)
        xf = x.float()
        ref = xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * w.float()
        large = {"x": True, "w": False, "y": True}
    else:
        k = ct.kernel(softmax.softmax.__wrapped__)
        x, out = rand(m, n, dtype=d, offset=offset), poisoned(m, n, dtype=d)
        args, grid, ref = (x, out, next_pow2(n)), (m,), torch.softmax(x.float(), -1)
        large = {"x": True, "y": True}
    for _ in range(2):                                     # checked path, then the fast path
        out.fill_(float("nan"))
        ct.launch(None, grid, k, args)
        torch.cuda.synchronize()
        close(out, ref)
    # one compiled variant (a larger grid's wish that rewrote nothing is also filed
    # under no wish)
    (ck,) = {id(c): c for c in k._cache.values()}.values()
    assert {name: kind.large for name, kind in ck.params
            if isinstance(kind, ArrayParam)} == large
    assert ("L2::cache_hint" in ck.artifacts["ptx"]) is not offset


# ---------------------------------------------------------------------------
# Hand-written Tile IR (test/python/mlir_kernels.py): tables, single elements,
# while loops carrying tiles
# ---------------------------------------------------------------------------
def _launch_mlir(text: str, args, grid, target: str = "sm_90a") -> None:
    import torch
    from mlir_kernels import compile_mlir
    from tileir.runtime import launcher
    artifacts, meta = compile_mlir(text, target, "ptx" if target == "sm_80" else "cubin")
    image = artifacts["ptx"].encode() if target == "sm_80" else artifacts["cubin"]
    launcher.launch(image, meta, grid, args)        # sm_80: PTX through the driver's JIT
    torch.cuda.synchronize()


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("t", ["f32", "bf16", "i32", "i1"])
def test_tile_constant_tables_on_the_gpu(t, target):
    import torch
    from mlir_kernels import table_kernel
    table = np.arange(32 * 16).reshape(32, 16) % 7 - 3
    if t == "i1":
        table = table > 0
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32,
             "i1": torch.bool}[t]
    x = torch.ones(32, 16, device="cuda", dtype=dtype)
    y = torch.zeros(32, 16, device="cuda", dtype=dtype)
    _launch_mlir(table_kernel(t, table), (x, y), (1, 1, 1), target)
    want = ~torch.tensor(table) if t == "i1" else torch.tensor(table, dtype=torch.float64) + 1
    assert torch.equal(y.cpu().to(want.dtype), want)


def test_an_element_at_run_time_indices_on_the_gpu():
    import torch
    from mlir_kernels import PICK
    x = torch.randn(32, 64, device="cuda")
    for i, j in [(0, 0), (5, 17), (31, 63)]:
        y = torch.full((64,), float("nan"), device="cuda")
        _launch_mlir(PICK, (x, y, i, j), (1, 1, 1))
        assert torch.equal(y, x[i, j].expand(64))


def test_a_while_loop_carrying_tiles_on_the_gpu():
    import torch
    from mlir_kernels import GROW
    x = torch.rand(256, device="cuda") + 0.5
    x[0] = 1.0
    y = torch.full((256,), float("nan"), device="cuda")
    n = torch.zeros(1, device="cuda", dtype=torch.int32)
    _launch_mlir(GROW, (x, y, n, 40.0), (1, 1, 1))
    assert n.item() == 6 and torch.equal(y, x * 64)


@pytest.mark.parametrize("n", [128256, 5000, 300])
def test_a_chunked_row_logsumexp_on_the_gpu(n):
    """A vocabulary-wide row reduced 512 columns at a time, the next chunk's load
    issued before this chunk's math (register_prefetch.py)."""
    import torch
    from test_tensor_cores import row_logsumexp
    x = torch.randn(64, n, device="cuda")
    out = torch.full((64,), float("nan"), device="cuda")
    ct.launch(None, (16,), row_logsumexp, (x, out, 4, 512))
    torch.cuda.synchronize()
    assert torch.allclose(out.double(), torch.logsumexp(x.double(), 1), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# The launch path: the fast path (runtime/dispatch.py) against the checked one
# ---------------------------------------------------------------------------
@ct.kernel
def axpby(x, y, out, alpha, beta, TILE: ct.Constant[int]):
    pid = ct.bid(0)
    a = ct.load(x, index=(pid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    b = ct.load(y, index=(pid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(pid,), tile=ct.astype(alpha * a + beta * b, out.dtype))


def _axpby_case(n, offset=False, d=None):
    d = torch.float32 if d is None else d
    x, y = rand(n, dtype=d, offset=offset), rand(n, dtype=d, offset=offset)
    return x, y, poisoned(n, dtype=d)


def _plans(kernel):
    return sum(len(d.plans) for table in (kernel._dispatchers, kernel._pdl_dispatchers)
               for d in table.values())


@ct.kernel
def pdl_producer(x, y, T: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(T,))
    ct.grid_dependency_control_launch_dependents()        # the consumer may start
    ct.store(y, index=(ct.bid(0),), tile=t * 2.0)


@ct.kernel
def pdl_consumer(y, z, T: ct.Constant[int]):
    ct.grid_dependency_control_wait()                    # the producer is done
    ct.store(z, index=(ct.bid(0),), tile=ct.load(y, index=(ct.bid(0),), shape=(T,)) + 1.0)


@pytest.mark.parametrize("py_launch", [False, True])
def test_programmatic_launches_take_the_fast_path(py_launch, monkeypatch):
    """Kernels with grid_dependency_control_* launched with cuTile's
    programmatic_dependent_launch=True go by cuLaunchKernelEx with programmatic stream
    serialization from the fast path too (C, or Python with TILEIR_PY_LAUNCH=1): a
    producer/consumer pair, fresh data every round; without the flag, plainly."""
    monkeypatch.setenv("TILEIR_PY_LAUNCH", "1" if py_launch else "0")
    producer, consumer = (ct.kernel(k.__wrapped__) for k in (pdl_producer, pdl_consumer))
    n = 1 << 20
    for i in range(20):
        x = torch.randn(n, device="cuda")
        y, z = poisoned(n, dtype=torch.float32), poisoned(n, dtype=torch.float32)
        # (the producer has no wait: launched programmatically, its stores to y could
        # land before the poisoning fill's)
        ct.launch(None, (n // 1024,), producer, (x, y, 1024))
        ct.launch(None, (n // 1024,), consumer, (y, z, 1024),
                  programmatic_dependent_launch=i % 4 != 3)
        torch.cuda.synchronize()
        torch.testing.assert_close(z, x * 2 + 1)
    assert _plans(producer) == 1 and _plans(consumer) == 2
    flagged = next(iter(next(iter(consumer._pdl_dispatchers.values())).plans.values()))
    assert flagged.programmatic and (flagged.native is None) == py_launch
    plain = next(iter(next(iter(consumer._dispatchers.values())).plans.values()))
    assert not plain.programmatic


@ct.kernel
def tuple_axpby(out, xs: tuple[ct.Array, ct.Array], ab: tuple[float, ct.Constant[float]],
                T: ct.Constant[int]):
    i = ct.bid(0)
    a, B = ab
    t = ct.load(xs[0], (i,), shape=(T,)) * a + ct.load(xs[1], (i,), shape=(T,)) * B
    ct.store(out, (i,), t)


@pytest.mark.parametrize("py_launch", [False, True])
def test_tuple_arguments_launch_and_take_the_fast_path(py_launch, monkeypatch):
    """Tuples of tensors and scalars (cuTile 1.7): fresh pointers and scalars each launch
    go through one plan (the generated Python's: the C half keys no tuples); a new
    value of the Constant item compiles and files another."""
    monkeypatch.setenv("TILEIR_PY_LAUNCH", "1" if py_launch else "0")
    k = ct.kernel(tuple_axpby.__wrapped__)
    n = 5000
    for i, (a, b) in enumerate([(0.5, 2.0), (3.0, 2.0), (-1.0, 2.0), (1.0, 4.0)]):
        x, y = rand(n, dtype=torch.float32), rand(n, dtype=torch.float32)
        out = poisoned(n, dtype=torch.float32)
        ct.launch(None, (ct.cdiv(n, 1024),), k, (out, (x, y), (a, b), 1024))
        torch.cuda.synchronize()
        close(out, a * x.double() + b * y.double())
        assert _plans(k) == (1 if i < 3 else 2)
    assert all(not d.native for d in k._dispatchers.values())


def test_fast_path_follows_pointers_shapes_and_scalars():
    k = ct.kernel(axpby.__wrapped__)
    seen = set()
    for n, offset, alpha, beta in [(1000, False, 0.5, -2.0), (1000, False, 3.0, 0.25),
                                   (1000, True, 1.0, 1.0), (5000, False, -1.0, 2.0),
                                   (1000, False, 2.0, 2.0), (5000, True, 0.0, 1.0)]:
        x, y, out = _axpby_case(n, offset)          # fresh pointers every time
        ct.launch(None, (ct.cdiv(n, 1024),), k, (x, y, out, alpha, beta, 1024))
        torch.cuda.synchronize()
        close(out, alpha * x.double() + beta * y.double())
        seen.add((n, offset))
        assert _plans(k) == len(seen)              # one plan per shape and alignment


def test_fast_path_declines_what_the_checked_path_rejects():
    k = ct.kernel(axpby.__wrapped__)
    x, y, out = _axpby_case(1000)
    ct.launch(None, (1,), k, (x, y, out, 0.5, 0.5, 1024))
    with pytest.raises(ct.TileValueError, match="float32"):
        ct.launch(None, (1,), k, (x, y, out, 1e300, 0.5, 1024))
    with pytest.raises(ct.TileValueError, match="host memory"):
        ct.launch(None, (1,), k, (x.cpu(), y, out, 0.5, 0.5, 1024))
    with pytest.raises(ct.TileTypeError, match="takes 6 arguments"):
        ct.launch(None, (1,), k, (x, y, out, 0.5, 1024))
    with pytest.raises(ct.TileValueError, match="grid"):
        ct.launch(None, (0,), k, (x, y, out, 0.5, 0.5, 1024))


def test_launches_honor_the_stream_and_are_captured_in_cuda_graphs():
    k = ct.kernel(axpby.__wrapped__)
    n = 3000
    x, y, out = _axpby_case(n)
    args = (x, y, out, 2.0, -1.0, 1024)
    ct.launch(None, (3,), k, args)                   # compiled and prepared outside capture
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):                    # None: torch's current stream
        out.fill_(float("nan"))
        ct.launch(None, (3,), k, args)
    side.synchronize()
    close(out, 2.0 * x.double() - y.double())
    out.fill_(float("nan"))
    ct.launch(side, (3,), k, args)                   # a torch stream given
    ct.launch(side.cuda_stream, (3,), k, args)       # a raw handle
    side.synchronize()
    close(out, 2.0 * x.double() - y.double())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):                    # the capture stream is torch's current one
        ct.launch(None, (3,), k, args)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        close(out, 2.0 * x.double() - y.double())


def test_launches_from_threads():
    """Threads share the plans (one lock per plan); a fresh thread has no current
    context until the launch makes the device's primary context current."""
    import threading
    k = ct.kernel(axpby.__wrapped__)
    n = 4096
    x, y, _ = _axpby_case(n)
    outs = [poisoned(n, dtype=torch.float32) for _ in range(4)]
    ct.launch(None, (4,), k, (x, y, outs[0], 1.0, 1.0, 1024))
    errors = []

    def work(i):
        try:
            for r in range(200):
                ct.launch(None, (4,), k, (x, y, outs[i], float(i), float(r), 1024))
            torch.cuda.synchronize()
        except Exception as e:          # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, out in enumerate(outs):
        close(out, i * x.double() + 199 * y.double())


def test_a_launch_while_another_context_is_current():
    """The fast path does not query the thread's context: the driver refuses a launch
    while another context is current, and the plan makes it again in the device's
    primary context, leaving the thread's own one current after."""
    from tileir.runtime import driver
    k = ct.kernel(axpby.__wrapped__)
    x, y, out = _axpby_case(2048)
    ct.launch(None, (2,), k, (x, y, out, 1.0, 1.0, 1024))       # the plan
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    cu = driver.cuda()
    try:
        ctx = driver.check("cuCtxCreate", cu.cuCtxCreate(None, 0, driver._device(0)))
    except TypeError:                     # bindings before CUDA 13 take (flags, device)
        ctx = driver.check("cuCtxCreate", cu.cuCtxCreate(0, driver._device(0)))
    try:                                  # cuCtxCreate made the new context current
        ct.launch(0, (2,), k, (x, y, out, 3.0, -1.0, 1024))
        assert int(driver.check("cuCtxGetCurrent", cu.cuCtxGetCurrent())) == int(ctx)
    finally:
        driver.check("cuCtxPopCurrent", cu.cuCtxPopCurrent())
        driver.check("cuCtxDestroy", cu.cuCtxDestroy(ctx))
    torch.cuda.synchronize()
    close(out, 3.0 * x.double() - y.double())


# ---------------------------------------------------------------------------
# The LLM-layer examples (examples/llm_ops.py), ragged sizes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("m,n", [(1, 1000), (37, 4096 + 24), (5, 7168)])
def test_llm_ops_examples(m, n):
    from tileir.examples import llm_ops
    d = torch.bfloat16
    x, r, w = rand(m, n, dtype=d), rand(m, n, dtype=d), rand(n, dtype=d)
    r0, y = r.clone(), poisoned(m, n, dtype=d)
    ct.launch(None, (m,), llm_ops.add_rmsnorm, (x, r, w, y, 1e-6, next_pow2(n)))
    h = x.float() + r0.float()
    close(r, h)
    close(y, h * torch.rsqrt((h * h).mean(-1, keepdim=True) + 1e-6) * w.float())

    g, u, o = rand(m, n, dtype=d), rand(m, n, dtype=d), poisoned(m, n, dtype=d)
    ct.launch(None, (m, ct.cdiv(n, 1024)), llm_ops.silu_mul, (g, u, o, 1024))
    close(o, torch.nn.functional.silu(g.float()) * u.float())

    heads, half = 8, 32
    q = rand(m, heads, 2 * half, dtype=d)
    angle = torch.rand(m, half, device="cuda") * 6.3
    cos, sin = angle.cos(), angle.sin()
    qo = poisoned(m, heads, 2 * half, dtype=d)
    ct.launch(None, (m,), llm_ops.rope, (q, cos, sin, qo, heads, half))
    x1, x2, c, s = q[..., :half].float(), q[..., half:].float(), cos[:, None], sin[:, None]
    close(qo, torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1))

    v = rand(m, 13 * n + 5, dtype=d) * 4
    lse = poisoned(m, dtype=torch.float32)
    sm = poisoned(*v.shape, dtype=d)
    ct.launch(None, (m,), llm_ops.vocab_logsumexp, (v, lse, 2048))
    ct.launch(None, (m,), llm_ops.vocab_softmax, (v, sm, 2048))
    close(lse, torch.logsumexp(v.double(), -1))
    close(sm, torch.softmax(v.float(), -1))


# ---------------------------------------------------------------------------
# Small grids split across more blocks (tile-split-blocks), ragged sizes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("tokens,heads,dim,offset", [
    (1, 64, 128, False), (1, 128, 64, True), (3, 32, 128, False), (16, 64, 128, True),
    (5, 8, 64, False)])
def test_rope_on_decode_grids_splits_its_heads(tokens, heads, dim, offset):
    from tileir.examples import llm_ops
    from tileir.kernel import device_target
    d, half = torch.bfloat16, dim // 2
    q = rand(tokens, heads, dim, dtype=d, offset=offset)
    angle = torch.rand(tokens, half, device="cuda") * 6.3
    cos, sin = angle.cos().to(d), angle.sin().to(d)
    qo = poisoned(tokens, heads, dim, dtype=d)
    args = (q, cos, sin, qo, heads, half)
    ct.launch(None, (tokens,), llm_ops.rope, args)
    x1, x2, c, s = q[..., :half].float(), q[..., half:].float(), cos[:, None].float(), \
        sin[:, None].float()
    close(qo, torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ck = llm_ops.rope.compile(args, target=device_target([q]), grid=(tokens,), sm_count=sms)
    if heads * dim >= 4096 and tokens < 64:    # 16 KB a token: split (test_split.py)
        assert ck.meta["grid_scale"][2] >= 2


@pytest.mark.parametrize("m,n", [(2, 5000), (1, 70_000), (3, 1000)])
def test_map_and_column_kernels_on_small_grids(m, n):
    from test_split import column_sum, exp_chunks
    x, y = rand(m, n, dtype=torch.float32), poisoned(m, n, dtype=torch.float32)
    ct.launch(None, (m,), exp_chunks, (x, y, 4096))
    close(y, torch.exp(x.double()).float() * 0.5)
    cols = poisoned(n, dtype=torch.float32)
    ct.launch(None, (ct.cdiv(n, 1024),), column_sum, (x, cols, 64, 1024))
    close(cols, (x.double() ** 2).sum(0).float())


# ---------------------------------------------------------------------------
# Unusual arrays: zero-size, strided views
# ---------------------------------------------------------------------------
def test_zero_size_tensors_launch_and_write_nothing():
    z = torch.zeros(0, device="cuda")
    out = torch.zeros(0, device="cuda")
    ct.launch(None, (1,), vector_add.vector_add, (z, z, out, 1024))
    torch.cuda.synchronize()
    assert out.numel() == 0


@pytest.mark.parametrize("step", [2, 3])
def test_strided_views_are_read_and_written_through_their_strides(step):
    base = torch.randn(5000 * step, device="cuda")
    a, b = base[::step], torch.randn(5000, device="cuda")
    big = torch.full((5000 * step,), float("nan"), device="cuda")
    c = big[::step]
    ct.launch(None, (ct.cdiv(5000, 1024),), vector_add.vector_add, (a, b, c, 1024))
    close(c, a + b)
    assert big.isnan().sum().item() == 5000 * (step - 1)      # nothing between written
    x = torch.randn(7, 2 * 1000, device="cuda")[:, ::2]          # rows with a column stride
    w = torch.randn(1000, device="cuda")
    y = poisoned(7, 1000, dtype=torch.float32)
    ct.launch(None, (7,), rmsnorm.rmsnorm, (x, w, y, 1e-6, 1024))
    x64 = x.double()
    close(y, x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double())


# ---------------------------------------------------------------------------
# Tiles two columns wide: a thread's group is a two-element vector, read element by
# element where it straddles the array's edge (LLVM's two-element masked load aborted)
# ---------------------------------------------------------------------------
@ct.kernel
def _pair_copy(x, y, TM: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(TM, 2), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(i, j), tile=t)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64", "int8"])
@pytest.mark.parametrize("cols", [1, 5])
def test_two_element_groups_at_the_edge(dtype, cols):
    # views of rows that start on 16 bytes: the aligned (vector) path
    dtype = getattr(torch, dtype)
    base = (torch.randn(37, 16, device="cuda") * 10 + 20).to(dtype)
    x = base[:, :cols]
    out = torch.full((37, 16), 7, device="cuda", dtype=dtype)
    y = out[:, :cols + 1]
    ct.launch(None, (2, ct.cdiv(cols + 1, 2)), _pair_copy, (x, y, 32))
    ref = torch.full((37, 16), 7, device="cuda", dtype=dtype)
    ref[:, :cols] = x
    ref[:, cols] = 0                      # the padding of the straddling group
    assert torch.equal(out, ref)
