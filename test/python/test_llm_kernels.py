"""tileir.llm's own kernels in the interpreter against float64 NumPy (and the fused
RoPE + cache writes against the two kernels they replace, their sm_90a code and
tileir.sim running it)."""

import collections

import numpy as np
import pytest

import tileir as ct
from tileir.llm import kernels as K


def _nan(shape, dtype=np.float32):
    return np.full(shape, np.nan, dtype)


def test_embedding_gathers_rows():
    rng = np.random.default_rng()
    table = rng.standard_normal((37, 70)).astype(np.float32)
    ids = rng.integers(0, 37, 11).astype(np.int32)
    out = _nan((11, 70))
    ct.launch(None, (11, ct.cdiv(70, 32)), K.embedding, (ids, table, out, 32))
    np.testing.assert_array_equal(out, table[ids])


@pytest.mark.parametrize("exact", [False, True])
def test_linear_family(exact):
    rng = np.random.default_rng()
    m, n, k = 13, 45, 70
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((2 * n, k)).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    grid = (ct.cdiv(m, 16), ct.cdiv(n, 32))
    y = _nan((m, n))
    ct.launch(None, grid, K.linear, (x, x, 0.0, w[:n], y, 16, 32, 32, exact, False))
    np.testing.assert_allclose(y, x64 @ w64[:n].T, rtol=1e-4, atol=1e-4)
    g = rng.standard_normal(k).astype(np.float32)
    xn = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-5) * g
    y = _nan((m, n))
    ct.launch(None, grid, K.linear, (x, g, 1e-5, w[:n], y, 16, 32, 32, exact, True))
    np.testing.assert_allclose(y, xn @ w64[:n].T, rtol=1e-4, atol=1e-4)
    res = r.copy()
    ct.launch(None, grid, K.linear_add, (x, w[:n], res, res, 16, 32, 32, exact))
    np.testing.assert_allclose(res, r + x64 @ w64[:n].T, rtol=1e-4, atol=1e-4)
    y = _nan((m, n))
    ct.launch(None, grid, K.linear_swiglu, (x, g, 1e-5, w[:n], w[n:], y, 16, 32, 32, exact,
                                            True))
    gt, u = xn @ w64[:n].T, xn @ w64[n:].T
    np.testing.assert_allclose(y, gt / (1 + np.exp(-gt)) * u, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("split_rows", [None, 8])
def test_swiglu_fused_or_as_two_gemms_and_silu_mul(split_rows):
    """Backend.linear_swiglu from 8 rows up as two GEMMs and silu_mul (split_swiglu_rows),
    below it and by default fused: the same bf16 result either way (each projection
    rounded to bf16 before silu(g) * u, as transformers)."""
    import ml_dtypes
    from tileir.llm.backend import Backend
    bf = ml_dtypes.bfloat16
    rng = np.random.default_rng()
    be = Backend("numpy", "bfloat16")
    be.split_swiglu_rows = split_rows
    m, n, k = 11, 40, 64
    x = rng.standard_normal((m, k)).astype(bf)
    wg, wu = ((rng.standard_normal((n, k)) * 0.1).astype(bf) for _ in range(2))
    calls = []
    silu_mul = be.silu_mul
    be.silu_mul = lambda *a, **kw: calls.append(1) or silu_mul(*a, **kw)
    y = be.linear_swiglu(x, wg, wu)
    assert len(calls) == (split_rows is not None)
    g = (x.astype(np.float64) @ wg.astype(np.float64).T).astype(bf).astype(np.float64)
    u = (x.astype(np.float64) @ wu.astype(np.float64).T).astype(bf).astype(np.float64)
    ref = g / (1 + np.exp(-g)) * u
    assert y.dtype == bf and np.isfinite(y.astype(np.float64)).all()
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


def test_head_linear():
    rng = np.random.default_rng()
    t, h, n, k = 5, 3, 20, 24
    x = rng.standard_normal((t, h, 40)).astype(np.float32)[:, :, 3:3 + k]   # a strided view
    w = rng.standard_normal((h, n, k)).astype(np.float32)
    y = _nan((t, h, n))
    ct.launch(None, (ct.cdiv(t, 16), h, ct.cdiv(n, 16)), K.head_linear,
              (x, w, y, 16, 16, 16, False))
    np.testing.assert_allclose(y, np.einsum("thk,hnk->thn", x.astype(np.float64), w),
                               rtol=1e-4, atol=1e-4)


def test_rope_at_positions():
    rng = np.random.default_rng()
    t, heads, half = 6, 3, 8
    x = rng.standard_normal((t, heads, 2 * half)).astype(np.float32)
    ang = rng.uniform(0, 6.3, (50, half))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = rng.integers(0, 50, t).astype(np.int32)
    out = _nan(x.shape)
    ct.launch(None, (t,), K.rope, (x, out, cos, sin, pos, 4, half))
    c, s = cos[pos][:, None, :].astype(np.float64), sin[pos][:, None, :].astype(np.float64)
    x1, x2 = x[..., :half].astype(np.float64), x[..., half:]
    np.testing.assert_allclose(out, np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1),
                               rtol=1e-5, atol=1e-6)


def test_write_slots_and_gather_pages():
    rng = np.random.default_rng()
    pages, page, width = 7, 4, 24
    cache = rng.standard_normal((pages, page, width)).astype(np.float32)
    before = cache.copy()
    src = rng.standard_normal((5, width)).astype(np.float32)
    slots = np.array([9, 10, 11, 12, 27], np.int32)
    ct.launch(None, (5, 1), K.write_slots, (src, cache, slots, page, 32))
    expect = before.reshape(-1, width).copy()
    expect[slots] = src
    np.testing.assert_array_equal(cache.reshape(-1, width), expect)
    table = np.array([[2, 3, 6, 0], [1, 5, 0, 0]], np.int32)
    out = _nan((10, width))
    ct.launch(None, (3, 1), K.gather_pages, (cache, table, 0, out, page, 32))
    np.testing.assert_array_equal(out, cache[[2, 3, 6]].reshape(-1, width)[:10])


def _rope_ref(x, cos, sin, pos):
    """float64 "rotate half" of x (T, H, D) at positions pos."""
    half = x.shape[-1] // 2
    c, s = cos[pos][:, None, :].astype(np.float64), sin[pos][:, None, :].astype(np.float64)
    x1, x2 = x[..., :half].astype(np.float64), x[..., half:].astype(np.float64)
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def _rope_case(rng, t, half, dtype, width):
    """cos/sin tables of 50 positions, t positions, t scattered slots in 7 pages of 4,
    rows (t, width) and a NaN-poisoned cache (the slots' rows written, the rest kept)."""
    ang = rng.uniform(0, 6.3, (50, half))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = rng.integers(0, 50, t).astype(np.int32)
    slots = rng.choice(28, t, replace=False).astype(np.int32)
    rows = rng.standard_normal((t, width)).astype(dtype)
    return cos, sin, pos, slots, rows


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("hq,hkv", [(6, 3), (4, 1), (8, 2)])
def test_rope_write_slots_is_rope_then_write_slots(dtype, hq, hkv):
    """Backend.rope_write_slots, one launch: q and k rotated in place, k (rotated) and v
    in the cache at their slots, every other cache row untouched; bit for bit the two
    kernels' result (`rope_slots` off), and within a rounding of float64.  Ragged head
    counts (6 q heads and 6 k/v heads: tiles of 8, the rest padding), 5 tokens."""
    from tileir.llm.backend import Backend
    rng = np.random.default_rng()
    be = Backend("numpy", dtype)
    t, d, page = 5, 16, 4
    cos, sin, pos, slots, qkv = _rope_case(rng, t, d // 2, be.dtype, (hq + 2 * hkv) * d)
    cache = np.full((7, page, 2 * hkv, d), np.nan, be.dtype)
    outs = []
    for fused in (True, False):
        be.rope_slots = fused
        x, c = qkv.copy(), cache.copy()
        launched = []
        run = be._launch
        be._launch = lambda grid, kernel, args: (launched.append(kernel.name),
                                                 run(grid, kernel, args))
        be.rope_write_slots(x, cos, sin, pos, c, slots)
        be._launch = run
        assert launched == (["rope_write_slots"] if fused else ["rope", "write_slots"])
        outs.append((x, c))
    (x, c), (x2, c2) = outs
    assert x.tobytes() == x2.tobytes() and c.tobytes() == c2.tobytes()
    heads = qkv.reshape(t, -1, d)
    ref = heads.astype(np.float64)
    ref[:, :hq + hkv] = _rope_ref(heads[:, :hq + hkv], cos, sin, pos)
    tol = 1e-2 if dtype == "bfloat16" else 1e-6
    np.testing.assert_allclose(x.reshape(t, -1, d).astype(np.float64), ref, rtol=tol,
                               atol=tol)
    flat = c.reshape(-1, 2 * hkv, d)
    np.testing.assert_array_equal(flat[slots], x.reshape(t, -1, d)[:, hq:])
    rest = np.setdiff1d(np.arange(flat.shape[0]), slots)
    assert np.isnan(flat[rest].astype(np.float32)).all()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("rank,rp", [(24, 16), (32, 8)])
def test_rope_write_latent_is_rope_then_write_slots(dtype, rank, rp):
    """Backend.rope_write_latent, one launch: the latent rows' k_rope (their last rp
    columns) rotated in place, the rows into the cache at their slots, the rest of the
    cache untouched; bit for bit `rope` then `write_slots`; the rows are views of a wider
    projection output (MLA's q_a and kv_a stacked), as in the model."""
    from tileir.llm.backend import Backend
    rng = np.random.default_rng()
    be = Backend("numpy", dtype)
    t, page, qa = 5, 4, 12
    cos, sin, pos, slots, a = _rope_case(rng, t, rp // 2, be.dtype, qa + rank + rp)
    cache = np.full((7, page, rank + rp), np.nan, be.dtype)
    outs = []
    for fused in (True, False):
        be.rope_slots = fused
        x, c = a.copy(), cache.copy()
        be.rope_write_latent(x[:, qa:], rank, cos, sin, pos, c, slots)
        outs.append((x, c))
    (x, c), (x2, c2) = outs
    assert x.tobytes() == x2.tobytes() and c.tobytes() == c2.tobytes()
    tol = 1e-2 if dtype == "bfloat16" else 1e-6
    want = _rope_ref(a[:, None, qa + rank:], cos, sin, pos)[:, 0]
    np.testing.assert_allclose(x[:, qa + rank:].astype(np.float64), want, rtol=tol, atol=tol)
    assert x[:, :qa + rank].tobytes() == a[:, :qa + rank].tobytes()
    flat = c.reshape(-1, rank + rp)
    np.testing.assert_array_equal(flat[slots], x[:, qa:])
    rest = np.setdiff1d(np.arange(flat.shape[0]), slots)
    assert np.isnan(flat[rest].astype(np.float32)).all()


def _llama_rope_args(t, pages, page, hq=32, hkv=8, d=128, dtype=None):
    """rope_write_slots' arguments at Llama-3-8B's heads (zeros; views of one qkv)."""
    import ml_dtypes
    dtype = dtype or ml_dtypes.bfloat16
    heads = np.zeros((t, hq + 2 * hkv, d), dtype)
    cache = np.zeros((pages, page, 2 * hkv, d), dtype)
    cos = np.zeros((4096, d // 2), np.float32)
    return (heads[:, :hq], heads[:, hq:hq + hkv], heads[:, hq + hkv:], cos, cos,
            np.zeros(t, np.int32), cache[:, :, :hkv], cache[:, :, hkv:],
            np.zeros(t, np.int32), hq, hkv, d // 2, page)


# in --full: rope_write_slots is off by default (Backend's rope_slots); its sm_90a code
# runs in the simulator in the fast tier (test_generated_rope_write_slots_in_the_simulator)
@pytest.mark.slow
def test_rope_write_slots_sm90a_code(tmp_path):
    """Llama-3-8B's heads (32 q, 8 k, 8 v of 128): one block a token, no local memory or
    spills, the rows loaded and stored in 16-byte vectors (the element-wise forms in
    the code are the ragged edges' fallback)."""
    from test_llm_gemv import _instructions, _sass_text
    ck = K.rope_write_slots.compile(_llama_rope_args(1, 64, 16), target="sm_90a",
                                    grid=(1, 1, 1), sm_count=132)
    assert ck.spills == (0, 0), ck.ptxas_report
    ops = collections.Counter(op for _, op, _ in _instructions(_sass_text(ck.cubin,
                                                                           tmp_path)))
    assert not any(op.startswith(("LDL", "STL")) for op in ops), "local memory"
    assert ops["STG.E.128"] and ops["LDG.E.128"], sorted(ops)


# In --full since session 24 (the policy: a kernel family's first SASS check and one or
# two simulator runs in the fast tier, the proofs of its options in --full): rope_write_slots
# is off by default (Backend's rope_slots); the fast tier keeps its numbers in the
# interpreter (test_rope_write_slots_is_rope_then_write_slots, 12 cases) and the family's
# code in the simulator (test_generated_gemm_epilogues_in_the_simulator,
# test_generated_sampling_in_the_simulator)
@pytest.mark.slow
def test_generated_rope_write_slots_in_the_simulator():
    """The sm_90a code in tileir.sim: 3 tokens, 6 q heads and 2 k/v heads of 32, pages
    of 4: the interpreter's bits (rope then write_slots)."""
    import ml_dtypes
    from tileir.llm.backend import Backend
    from tileir.sim import simulate
    rng = np.random.default_rng()
    bf = ml_dtypes.bfloat16
    t, hq, hkv, d, page = 3, 6, 2, 32, 4
    cos, sin, pos, slots, qkv = _rope_case(rng, t, d // 2, bf, (hq + 2 * hkv) * d)
    cache = np.full((7, page, 2 * hkv, d), np.nan, bf)
    be = Backend("numpy", "bfloat16")
    be.rope_slots = False
    want_x, want_c = qkv.copy(), cache.copy()
    be.rope_write_slots(want_x, cos, sin, pos, want_c, slots)
    heads = qkv.reshape(t, -1, d)
    args = (heads[:, :hq], heads[:, hq:hq + hkv], heads[:, hq + hkv:], cos, sin, pos,
            cache[:, :, :hkv], cache[:, :, hkv:], slots, 8, 2, d // 2, page)
    ck = K.rope_write_slots.compile(args, stage="gpu", target="sm_90a", grid=(t, 1, 1))
    simulate(ck, (t, 1, 1), args)
    assert qkv.tobytes() == want_x.tobytes() and cache.tobytes() == want_c.tobytes()


def _sample_ref(l, u, temp, k, p):
    l = l.astype(np.float64)
    keep = np.ones_like(l, bool)
    if k > 0:
        keep &= l >= np.sort(l)[::-1][k - 1]
    if p < 1 and temp > 0:
        order = np.argsort(-l)
        probs = np.exp((l - l.max()) / temp) * keep
        probs /= probs.sum()
        mass = np.cumsum(probs[order])
        n = int(np.searchsorted(mass, p * (1 - 1e-9))) + 1   # the smallest prefix holding p
        kept = np.zeros_like(keep)
        kept[order[:n]] = True
        keep &= kept
    g = -np.log(-np.log(np.maximum(u.astype(np.float64), 1e-20)))
    return int(np.argmax(np.where(keep, l + temp * g, -np.inf)))


def test_argmax_and_sampling():
    rng = np.random.default_rng()
    b, v = 6, 300
    logits = (rng.standard_normal((b, v)) * 3).astype(np.float32)
    out = np.full(b, -1, np.int32)
    ct.launch(None, (b,), K.argmax_rows, (logits, out, 128))
    np.testing.assert_array_equal(out, logits.argmax(axis=1))
    # in two launches (the engine's greedy path over a row of several tiles), with a
    # tie between two tiles (the first index wins, as np.argmax's) and a ragged last tile
    logits[1, 40] = logits[1, 290] = logits[1].max() + 1
    best = np.full((b, 3), np.nan, np.float32)
    best_i = np.full((b, 3), -1, np.int32)
    out = np.full(b, -1, np.int32)
    ct.launch(None, (b, 3), K.argmax_tiles, (logits, best, best_i, 128))
    ct.launch(None, (b,), K.argmax_merge, (best, best_i, out, 4))
    np.testing.assert_array_equal(out, logits.argmax(axis=1))
    assert out[1] == 40
    logits[2] = np.nan                  # a NaN row: a token of the vocabulary, 0
    ct.launch(None, (b, 3), K.argmax_tiles, (logits, best, best_i, 128))
    ct.launch(None, (b,), K.argmax_merge, (best, best_i, out, 4))
    assert out[2] == 0 and out[1] == 40
    u = rng.uniform(size=(b, v)).astype(np.float32)
    temp = np.array([0.0, 1.0, 0.7, 1.3, 1.0, 0.5], np.float32)
    top_k = np.array([0, 0, 5, 0, 40, 1], np.int32)
    top_p = np.array([1.0, 1.0, 1.0, 0.6, 0.9, 0.5], np.float32)
    out = np.full(b, -1, np.int32)
    ct.launch(None, (b,), K.sample_rows, (logits, u, temp, top_k, top_p, out, 128, 16, 8))
    ref = [_sample_ref(logits[i], u[i], temp[i], top_k[i], top_p[i]) for i in range(b)]
    assert out.tolist() == ref


# ---- the generated code: sm_90a as the GPU runs it, and in the simulator

def _bf(*shape):
    import ml_dtypes
    return np.zeros(shape, ml_dtypes.bfloat16)


# "qkv decode" in --full: "qkv decode, norm fused" compiles the same linear with the norm.
# In --full too: "gate/up decode" (1.3 s) and "down + residual, 64 rows" (1.1 s), the same
# SASS properties (HGMMA, UTMALDG, no local memory) on the family's SwiGLU and residual
# epilogues; "qkv decode, norm fused" keeps them in the fast tier,
# test_prompt_residual_gemms_take_their_swept_tiles linear_add's wgmma SASS, and
# test_generated_gemm_epilogues_in_the_simulator runs both epilogues in the simulator
@pytest.mark.parametrize("name,kernel,args,grid", [
    pytest.param("qkv decode", K.linear, (_bf(1, 4096), _bf(1, 4096), 0.0, _bf(6144, 4096),
                                          _bf(1, 6144), 128, 128, 64, False, False),
                 (1, 48, 1), marks=pytest.mark.slow),
    ("qkv decode, norm fused", K.linear, (_bf(1, 4096), _bf(4096), 1e-5, _bf(6144, 4096),
                                          _bf(1, 6144), 128, 128, 64, False, True), (1, 48, 1)),
    pytest.param("gate/up decode", K.linear_swiglu,
                 (_bf(1, 4096), _bf(1, 4096), 0.0, _bf(14336, 4096), _bf(14336, 4096),
                  _bf(1, 14336), 128, 64, 64, False, False), (1, 224, 1),
                 marks=pytest.mark.slow),
    pytest.param("down + residual, 64 rows", K.linear_add,
                 (_bf(64, 14336), _bf(4096, 14336), _bf(64, 4096), _bf(64, 4096), 128, 128,
                  64, False), (1, 32, 1), marks=pytest.mark.slow),
])
def test_llama_8b_gemms_run_on_wgmma_and_tma(name, kernel, args, grid, tmp_path):
    from test_tensor_cores import _sass
    ck = kernel.compile(args, target="sm_90a", grid=grid, sm_count=132)
    ops = _sass(ck.cubin, tmp_path)
    assert ops["HGMMA"] and ops["UTMALDG"], sorted(ops)
    assert not ops["LDL"] and not ops["STL"], "local memory (spills)"


def test_generated_gemm_epilogues_in_the_simulator():
    import ml_dtypes
    from tileir.sim import simulate
    rng = np.random.default_rng()
    bf = ml_dtypes.bfloat16
    m, n, k = 5, 96, 200
    x = rng.standard_normal((m, k)).astype(bf)
    w = rng.standard_normal((2 * n, k)).astype(bf)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    r = rng.standard_normal((m, n)).astype(bf)
    ref = r.astype(np.float64) + x64 @ w64[:n].T
    args = (x, w[:n], r, r, 128, 128, 64, False)                 # in place: y is r
    simulate(K.linear_add.compile(args, stage="gpu", target="sm_90a"), (1, 1, 1), args)
    assert np.abs(r.astype(np.float64) - ref).max() / np.abs(ref).max() < 1e-2
    y = np.full((m, n), np.nan, bf)
    args = (x, x, 0.0, w[:n], w[n:], y, 128, 64, 64, False, False)
    simulate(K.linear_swiglu.compile(args, stage="gpu", target="sm_90a"), (1, 2, 1), args)
    g, u = x64 @ w64[:n].T, x64 @ w64[n:].T
    ref = g / (1 + np.exp(-g)) * u
    assert np.abs(y.astype(np.float64) - ref).max() / np.abs(ref).max() < 2e-2


def test_generated_sampling_in_the_simulator():
    from tileir.sim import simulate
    rng = np.random.default_rng()
    b, v = 3, 700
    logits = (rng.standard_normal((b, v)) * 3).astype(np.float32)
    u = rng.uniform(size=(b, v)).astype(np.float32)
    temp = np.array([0.0, 0.8, 1.2], np.float32)
    top_k = np.array([0, 7, 0], np.int32)
    top_p = np.array([1.0, 1.0, 0.7], np.float32)
    out = np.full(b, -1, np.int32)
    args = (logits, u, temp, top_k, top_p, out, 256, 16, 8)
    simulate(K.sample_rows.compile(args, stage="gpu", target="sm_90a"), (b, 1, 1), args)
    assert out.tolist() == [_sample_ref(logits[i], u[i], temp[i], top_k[i], top_p[i])
                            for i in range(b)]
    # greedy in two launches, bf16 logits as the LM head writes them, a ragged last tile
    import ml_dtypes
    lb = logits.astype(ml_dtypes.bfloat16)
    best = np.full((b, 3), np.nan, np.float32)
    best_i = np.full((b, 3), -1, np.int32)
    out = np.full(b, -1, np.int32)
    args = (lb, best, best_i, 256)
    simulate(K.argmax_tiles.compile(args, stage="gpu", target="sm_90a"), (b, 3, 1), args)
    args = (best, best_i, out, 4)
    simulate(K.argmax_merge.compile(args, stage="gpu", target="sm_90a"), (b, 1, 1), args)
    np.testing.assert_array_equal(out, lb.astype(np.float32).argmax(axis=1))


@pytest.mark.parametrize("s,l,causal", [(13, 13, True), (3, 29, True), (1, 37, False)])
def test_attention_exact(s, l, causal):
    rng = np.random.default_rng()
    h, hkv, d = 4, 2, 24
    q = rng.standard_normal((1, h, s, d)).astype(np.float32)
    k = rng.standard_normal((1, hkv, l, d)).astype(np.float32)
    v = rng.standard_normal((1, hkv, l, d)).astype(np.float32)
    o = np.full_like(q, np.nan)
    ct.launch(None, (ct.cdiv(s, 8), h), K.attention_exact,
              (q, k, v, o, 0.3, h, h // hkv, 8, 16, 32, causal))
    k64, v64 = (np.repeat(x.astype(np.float64), h // hkv, axis=1) for x in (k, v))
    sc = q.astype(np.float64) @ np.swapaxes(k64, -1, -2) * 0.3
    if causal:                                  # the last query row sees the last key
        sc = np.where(np.arange(s)[:, None] + (l - s) >= np.arange(l)[None, :], sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    np.testing.assert_allclose(o, (p / p.sum(-1, keepdims=True)) @ v64, rtol=1e-5, atol=1e-5)


# head dim 256 in --full: the same kernel at 128 keeps the path (no local memory, FMA).
# In --full since session 24 (the policy: a kernel family's first SASS check and one or
# two simulator runs in the fast tier, the proofs of its options in --full): [128-8] too: the
# fast tier keeps attention_exact's numbers in the interpreter (test_attention_exact) and
# the family's SASS (test_llama_8b_gemms_run_on_wgmma_and_tma, test_prompt_residual_gemms
# _take_their_swept_tiles)
@pytest.mark.parametrize("d,bm", [pytest.param(128, 8, marks=pytest.mark.slow),
                                  pytest.param(256, 4, marks=pytest.mark.slow)])
def test_attention_exact_compiles_without_spills(d, bm, tmp_path):
    from test_tensor_cores import _sass
    q = np.zeros((1, 32, 300, d), np.float32)
    k = np.zeros((1, 8, 300, d), np.float32)
    ck = K.attention_exact.compile((q, k, k, q, 0.1, 32, 4, bm, 16, d, True),
                                   target="sm_90a", grid=(ct.cdiv(300, bm), 32, 1),
                                   sm_count=132)
    ops = _sass(ck.cubin, tmp_path)
    assert not ops["LDL"] and not ops["STL"], "local memory (spills)"
    assert not ops["HMMA"] and not ops["HGMMA"], "float32 products on the tensor cores"


def test_prompt_residual_gemms_take_their_swept_tiles(tmp_path):
    """Backend._gemm: a residual GEMM (O, down) of PREFILL_ROWS rows or more launches
    with _PREFILL's 128 x 256 x 64 tiles as written (the retiled 128 x 128 x 64 ran at
    0.6x cuBLAS at 2048 rows), fewer rows with the source's; the kernel compiles for
    sm_90a to m64n256 products without spills."""
    import ml_dtypes
    from test_tensor_cores import _sass_text
    from tileir.llm import backend as B
    be = B.Backend("numpy", "bfloat16")
    be.torch = object()            # the swept tiles are the CUDA backend's (_gemm asks)
    kernel, tiles = be._gemm(K.linear_add, 2048, 4096, None)
    assert tiles == (128, 256, 64) and kernel.options.get("retile") is False
    assert be._gemm(K.linear_add, B.PREFILL_ROWS - 1, 4096, None) == (K.linear_add,
                                                                       (128, 128, 64))
    assert be._gemm(K.linear_add, 2048, 1024, None)[1] == (128, 128, 64)  # not swept
    bf = ml_dtypes.bfloat16
    m, n, k = 2048, 4096, 4096
    args = (np.zeros((m, k), bf), np.zeros((n, k), bf), np.zeros((m, n), bf),
            np.zeros((m, n), bf), *tiles, False)
    ck = kernel.compile(args, target="sm_90a", grid=(m // 128, n // 256, 1), sm_count=132)
    assert ck.spills == (0, 0), ck.ptxas_report
    assert "HGMMA.64x256x16" in _sass_text(ck.cubin, tmp_path)
