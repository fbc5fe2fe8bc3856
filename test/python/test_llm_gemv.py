"""tileir.llm.gemv, the decode GEMVs: the interpreter against float64 NumPy (every kernel,
both products, split and whole K, a split finished by its last block's ticket or by the
combine launch, ragged shapes, 1 to 16 rows, bf16 and f32), the sm_90a code (TMA rings,
tensor cores, 16-byte loads, the ticket's ordering, no local memory, instructions per
weight byte) and tileir.sim running it; on the GPU, against torch at Llama-3-8B widths
(and the ticket's one launch against the two, run again and replayed in a CUDA graph)."""

import collections
import re

import numpy as np
import pytest
from conftest import sass_text

import tileir as ct
from tileir.llm import gemv as G

BF16 = pytest.importorskip("ml_dtypes").bfloat16


def _ref(x, ws, r, dtype):
    """float64 of the rounded inputs; SwiGLU rounds each projection to dtype first."""
    x64 = x.astype(np.float64)
    ys = [x64 @ w.astype(np.float64).T for w in ws]
    if len(ws) == 2:
        g, u = (y.astype(dtype).astype(np.float64) for y in ys)
        return g / (1.0 + np.exp(-g)) * u
    return ys[0] + (0.0 if r is None else r.astype(np.float64))


def _run(kind, x, ws, r, p: G.Plan, out_dtype, norm=None, count=None, hints=None):
    """Launch `kind` ('linear', 'add', 'swiglu', 'fused') as Backend._gemv does, in the
    interpreter, with norm = (g, eps) RMSNorm(x) * g in place of x; outputs and partials
    NaN-poisoned.  A split K is finished by the last block's ticket (p.ticket: counters
    `count`, zeros, asserted back to zero after) or by the combine launch.  hints: the
    kernel's options (a sweep candidate's, `G.Candidate.hints`)."""
    m, n = x.shape[0], ws[0].shape[0]
    lead = (2,) if kind in ("swiglu", "fused") else ()
    part = np.full(lead + (p.split, m, n), np.nan, np.float32)
    count = np.zeros(G.counters(n, p) + 3, np.int32) if count is None else count
    tiles = tuple(p)
    g, eps = norm if norm is not None else (x, 0.0)
    if kind != "add":
        tiles += (norm is not None,)
    if kind == "add":
        y = r.copy()                         # in place, as the residual stream
        args, fin = (x, ws[0], y, y, part, count), (G.gemv_combine_add, (part, y, y))
        kernel = G.gemv_add
    else:
        y = np.full((m, n), np.nan, out_dtype)
        if kind in ("swiglu", "fused"):
            kernel = G.gemv_swiglu if kind == "swiglu" else G.gemv_swiglu_fused
            args = (x, g, eps, ws[0], ws[1], y, part, count)
            fin = (G.gemv_combine_swiglu, (part, y))
        else:
            kernel, fin = G.gemv, (G.gemv_combine, (part, y))
            args = (x, g, eps, ws[0], y, part, count)
    if isinstance(hints, G.Candidate):       # its options for this kernel
        hints = hints.hints(kernel)
    if hints:
        kernel = kernel.replace_hints(**hints)
    ct.launch(None, G.grid(n, p), kernel, args + tiles)
    if p.split > 1 and not p.ticket:
        ctiles = G.combine_tiles(m, n, p)
        ct.launch(None, (ct.cdiv(n, ctiles[2]),), fin[0], fin[1] + ctiles)
    assert not count.any(), count            # the last blocks reset their counters
    return y


def _inputs(rng, kind, m, n, k, dtype):
    x = rng.standard_normal((m, k)).astype(dtype)
    ws = [(rng.standard_normal((n, k)) / np.sqrt(k)).astype(dtype)
          for _ in range(2 if kind in ("swiglu", "fused") else 1)]
    r = rng.standard_normal((m, n)).astype(dtype) if kind == "add" else None
    return x, ws, r


def _check(y, ref, dtype):
    """y against the float64 reference: no NaN left, within one output rounding."""
    y = y.astype(np.float64)
    assert not np.isnan(y).any()
    # bf16: one rounding of the output (and of each SwiGLU projection) against float64
    tol = 2e-2 if dtype == BF16 else 1e-5
    err = np.abs(y - ref).max() / max(1.0, np.abs(ref).max())
    assert err < tol, err


# the fast tier: each kernel on each product form, split and finish in bf16 (24 of 144
# cases); every row count in `tile-check --full`, and (0.03 s each) the float32 cases,
# the same kernels' paths in the other dtype: test_ticket_adds_the_splits_as_the_combine_does
# keeps float32 GEMVs (split, ticket and combine) in the fast tier
@pytest.mark.sweep(keep=("kind", "split", "fma", "ticket"))
@pytest.mark.parametrize("kind", ["linear", "add", "swiglu", "fused"])
@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("m", [1, 5, 16])
@pytest.mark.parametrize("split,fma,ticket", [(1, False, False), (3, False, True),
                                              (3, False, False), (1, True, False),
                                              (2, True, True), (2, True, False)])
def test_gemv_family_against_float64(kind, dtype, m, split, fma, ticket):
    """Ragged N (45: a partial weight-row tile) and K (100: three 32-wide tiles and a
    partial one); split 3 of 4 K tiles leaves the last split one tile, and split 2 two,
    added up by the last block's ticket or by the combine launch.  "fused":
    gemv_swiglu_fused, both weights in one loop (tensor cores only)."""
    if kind == "fused" and fma:
        pytest.skip("gemv_swiglu_fused has no FMA form")
    rng = np.random.default_rng()
    n, k = 45, 100
    x, ws, r = _inputs(rng, kind, m, n, k, dtype)
    p = G.Plan(G.next_pow2(m), 16, 32, split, fma, ticket)
    y = _run(kind, x, ws, r, p, dtype)
    _check(y, _ref(x, ws, r, dtype), dtype)


# the fast tier: each kernel, norm and dtype split two ways.  In --full (0.1 s each): the
# 4-way splits, the same ticket adding more partials in the same order; each
# [...-2-...] case keeps its kernel's ticket in the fast tier
@pytest.mark.sweep(keep=("kind", "norm", "dtype"))
@pytest.mark.parametrize("kind,norm", [("linear", False), ("linear", True), ("add", False),
                                       ("swiglu", False), ("swiglu", True), ("fused", True)])
@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "f32"])
def test_ticket_adds_the_splits_as_the_combine_does(kind, norm, split, dtype):
    """A split K finished by the last block of each weight-row slice (one launch) gives
    the combine kernel's bits (the partials added in the order s = 0..SPLIT-1 by both),
    is within rounding of float64 (with NORM: of the normed rows' product), and leaves
    its counters at zero, so a second launch on the same counters (other inputs) is
    right too.  3 rows, ragged N (45: three 16-row slices, the last partial; counters
    past them untouched) and K (200: seven 32-wide tiles, split 2 or 4 ways)."""
    rng = np.random.default_rng()
    m, n, k = 3, 45, 200
    p = G.Plan(4, 16, 32, split, False, True)
    count = np.zeros(G.counters(n, p) + 5, np.int32)
    assert G.counters(n, p) == 3 and G.counters(n, p._replace(ticket=False)) == 0
    for _ in range(2):
        x, ws, r = _inputs(rng, kind, m, n, k, dtype)
        nm = _norm_inputs(rng, x, k, dtype) if norm else None
        one = _run(kind, x, ws, r, p, dtype, norm=nm, count=count)
        two = _run(kind, x, ws, r, p._replace(ticket=False), dtype, norm=nm)
        assert one.dtype == two.dtype and one.tobytes() == two.tobytes()
        xr = _normed_ref(x, *nm, dtype) if norm else x
        _check(one, _ref(xr, ws, r, dtype), dtype)


def _tail(x, w, r, g, eps, p: G.Plan, dtype, count):
    """gemv_add_norm in the interpreter as Backend._gemv launches it: r updated in place
    (returned) and RMSNorm of its new rows (NaN-poisoned before)."""
    m, n = r.shape
    y = r.copy()
    part = np.full((p.split, m, n), np.nan, np.float32)
    out = np.full((m, n), np.nan, dtype)
    ct.launch(None, G.grid(n, p), G.gemv_add_norm,
              (x, w, y, y, part, count, g, eps, out) + tuple(p) + (G.next_pow2(n),))
    return y, out


def _separate_norm(y, g, eps, dtype):
    """The norm's own launch (Backend.rmsnorm's kernel) over y's rows."""
    from tileir.examples.rmsnorm import rmsnorm
    out = np.full(y.shape, np.nan, dtype)
    ct.launch(None, (y.shape[0],), rmsnorm, (y, g, out, eps, G.next_pow2(y.shape[1])))
    return out


# the fast tier: each split and row count in bf16; in --full (0.1 s each) the same in
# float32, the same tail's paths (the norm's bits against the separate kernel's) in
# the other dtype; test_norm_tail_over_rows_wider_than_a_kilobyte_tile keeps a float32
# tail in the fast tier
@pytest.mark.sweep(keep=("split", "m"))
@pytest.mark.parametrize("split", [1, 2, 4])
@pytest.mark.parametrize("m", [1, 3, 16])
@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "f32"])
def test_norm_tail_matches_the_separate_norm(split, m, dtype):
    """gemv_add_norm: the residual GEMV's rows as gemv_add stores them (the same
    launch's other blocks' tiles too), and RMSNorm of all of them written by the block
    that draws the grid's last ticket, bit for bit the separate rmsnorm launch over
    those rows and within rounding of float64; the counters (each N tile's and the
    grid's, after them) back at zero, those past them untouched, so a second launch on
    the same counters is right too.  Ragged N (45: three 16-row tiles, the last
    partial; the norm's 64-wide row tile past it zero) and K (200: seven 32-wide
    tiles, split 1, 2 or 4 ways); residual rows scaled by 3 (a norm taken as 1 is far
    off)."""
    rng = np.random.default_rng()
    n, k, eps = 45, 200, 1e-5
    p = G.Plan(G.next_pow2(m), 16, 32, split, False, split > 1)
    assert G.counters(n, p, tail=True) == 4
    count = np.zeros(G.counters(n, p, tail=True) + 3, np.int32)
    count[-3:] = 7                                  # not the launch's: left alone
    for _ in range(2):
        x, ws, r = _inputs(rng, "add", m, n, k, dtype)
        r = (3.0 * r.astype(np.float32)).astype(dtype)
        g = (0.5 + rng.random(n)).astype(dtype)
        y, out = _tail(x, ws[0], r, g, eps, p, dtype, count)
        assert not count[:-3].any() and (count[-3:] == 7).all(), count
        plain = _run("add", x, ws, r, p, dtype)
        assert y.tobytes() == plain.tobytes()
        assert out.tobytes() == _separate_norm(y, g, eps, dtype).tobytes()
        _check(out, _normed_ref(y, g, eps, np.float64), dtype)
        _check(y, _ref(x, ws, r, dtype), dtype)


def test_norm_tail_over_rows_wider_than_a_kilobyte_tile():
    """Rows of 2085 columns (a 4096-wide norm tile, 131 16-row weight tiles on the grid's
    ticket) and FMA products, one row: still the separate norm's bits."""
    rng = np.random.default_rng()
    m, n, k = 1, 2085, 64
    x, ws, r = _inputs(rng, "add", m, n, k, np.float32)
    g = (0.5 + rng.random(n)).astype(np.float32)
    p = G.Plan(1, 16, 32, 2, True, True)
    count = np.zeros(G.counters(n, p, tail=True), np.int32)
    y, out = _tail(x, ws[0], r, g, 1e-6, p, np.float32, count)
    assert not count.any()
    assert out.tobytes() == _separate_norm(y, g, 1e-6, np.float32).tobytes()
    _check(y, _ref(x, ws, r, np.float32), np.float32)


def test_norm_tail_needs_the_ticket_to_split():
    """A split K without TICKET would store y after the launch (the combine's): the
    kernel refuses it while compiling, naming the rule."""
    rng = np.random.default_rng()
    x, ws, r = _inputs(rng, "add", 1, 45, 100, np.float32)
    g = np.ones(45, np.float32)
    with pytest.raises(Exception, match="a split K needs TICKET"):
        _tail(x, ws[0], r, g, 1e-5, G.Plan(1, 16, 32, 2, False, False), np.float32,
              np.zeros(8, np.int32))


def _norm_inputs(rng, x, k, dtype):
    """RMSNorm's weight g (around 1, so the normed rows differ from x by more than its
    scale) and eps."""
    return (0.5 + rng.random(k)).astype(dtype), 1e-5


def _normed_ref(x, g, eps, dtype):
    """RMSNorm(x) * g in float64, rounded to dtype as the separate norm stores it."""
    x64 = x.astype(np.float64)
    rs = 1.0 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps)
    return (x64 * rs * g.astype(np.float64)).astype(dtype)


def _unfused(kind, x, ws, g, eps, p: G.Plan, dtype):
    """The app's path without the fusion: tileir.examples.rmsnorm's kernel (its output
    in dtype), then the GEMV of it."""
    from tileir.examples.rmsnorm import rmsnorm
    xn = np.full(x.shape, np.nan, dtype)
    ct.launch(None, (x.shape[0],), rmsnorm, (x, g, xn, eps, G.next_pow2(x.shape[1])))
    return _run(kind, xn, ws, None, p, dtype)


# the fast tier: each kernel in bf16 on each product form and block width; every row
# count and split in `tile-check --full`, and the float32 cases (0.03 s each), the same
# prologue in the other dtype: test_backend_fuses_the_norm_into_decode_gemvs[float32]
# keeps float32 normed GEMVs in the fast tier
@pytest.mark.sweep(keep=("kind", "fma", "bn"))
@pytest.mark.parametrize("kind", ["linear", "swiglu", "fused"])
@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("m", [1, 2, 7, 16])
@pytest.mark.parametrize("split,fma", [(1, False), (2, False), (3, False), (1, True),
                                       (3, True)])
@pytest.mark.parametrize("bn", [16, 64])
def test_norm_prologue_against_float64(kind, dtype, m, split, fma, bn):
    """NORM: RMSNorm(x) * g in the GEMV's prologue equals the separate norm (rounded to
    the activation dtype) and then the GEMV: against float64 of that, and against the
    unfused kernels themselves.  x scaled by 3 (mean square 9, so a missing or wrong
    norm is far outside the tolerance); ragged N (45) and K (100: the mean is over
    100 columns, the zero padding of the last tile adds nothing); with a split K every
    split finds the whole rows' norm.  64 weight rows: the tensor-core loop that loads
    the next iteration's rows ahead (one past the last: padding)."""
    if kind == "fused" and fma:
        pytest.skip("gemv_swiglu_fused has no FMA form")
    rng = np.random.default_rng()
    n, k = 45, 100
    x, ws, _ = _inputs(rng, kind, m, n, k, dtype)
    x = (3.0 * x.astype(np.float32) + 0.5).astype(dtype)
    g, eps = _norm_inputs(rng, x, k, dtype)
    p = G.Plan(G.next_pow2(m), bn, 32, split, fma)
    y = _run(kind, x, ws, None, p, dtype, norm=(g, eps))
    _check(y, _ref(_normed_ref(x, g, eps, dtype), ws, None, dtype), dtype)
    # the rows' norm in the prologue, not taken as 1: x itself is far off
    assert np.abs(y.astype(np.float64) - _ref(x, ws, None, dtype)).max() > 0.1
    # against the unfused kernels: the same rounding (one output ulp where the two
    # f32 sums of squares round a normed element differently)
    unfused = _unfused(kind, x, ws, g, eps, p, dtype).astype(np.float64)
    scale = max(1.0, np.abs(unfused).max())
    assert np.abs(y.astype(np.float64) - unfused).max() / scale < (
        1e-2 if dtype == BF16 else 1e-6)


@pytest.mark.parametrize("kind,bn,fma", [("linear", 16, True), ("linear", 64, False),
                                         ("swiglu", 16, False), ("fused", 64, False)])
@pytest.mark.parametrize("m", [1, 5])
def test_norm_prologue_over_rows_longer_than_its_tile(kind, bn, fma, m):
    """The prologue reads each row in ROW_TILE-wide loads: a row of two and a part
    (K = 2 * ROW_TILE + 37), rows past M (BM = 8 at 5) zero, K split three ways."""
    rng = np.random.default_rng()
    n, k = 24, 2 * G.ROW_TILE + 37
    x, ws, _ = _inputs(rng, kind, m, n, k, np.float32)
    x = 3.0 * x - 1.0
    g, eps = _norm_inputs(rng, x, k, np.float32)
    p = G.Plan(G.next_pow2(m), bn, 256, 3, fma)
    y = _run(kind, x, ws, None, p, np.float32, norm=(g, eps))
    _check(y, _ref(_normed_ref(x, g, eps, np.float32), ws, None, np.float32), np.float32)


def test_empty_splits_and_rows_past_m_are_harmless():
    """More splits than K tiles (the last ones sum nothing) and BM above M (rows read as
    zeros, stores clipped to the output's rows: a view of a larger buffer keeps the
    rest)."""
    rng = np.random.default_rng()
    m, n, k = 3, 20, 40                       # two 32-wide tiles, four splits
    x, ws, r = _inputs(rng, "add", m, n, k, np.float32)
    for ticket in (False, True):
        p = G.Plan(8, 16, 32, 4, False, ticket)
        y = _run("add", x, ws, r, p, np.float32)
        _check(y, _ref(x, ws, r, np.float32), np.float32)
    big = np.full((5, n), 7.0, np.float32)
    part = np.zeros((1, 1, 1), np.float32)
    count = np.zeros(1, np.int32)
    ct.launch(None, G.grid(n, p._replace(split=1)), G.gemv,
              (x, x, 0.0, ws[0], big[:m], part, count) + tuple(p._replace(split=1))
              + (False,))
    np.testing.assert_allclose(big[:m], _ref(x, ws, None, np.float32), rtol=1e-5,
                               atol=1e-5)
    assert (big[m:] == 7.0).all()


def test_plan():
    # at one row, Llama-3-8B's swept shapes take their measured plans; O and down, split
    # in two, finish in their own launch
    for (n, k), want in G.SWEPT.items():
        assert G.plan(1, n, k) == want
        assert G.plan(2, n, k) == G.plan(2, n, k, swept=False)     # one row only
        assert want.ticket == (want.split > 1)
    assert G.SWEPT[4096, 4096].split == G.SWEPT[4096, 14336].split == 2
    # the rule, at one row: a block for every SM without splitting K
    for (n, k), (bn, bk) in {(6144, 4096): (32, 128), (4096, 4096): (16, 256),
                             (4096, 14336): (16, 256), (14336, 4096): (64, 128),
                             (128256, 4096): (64, 128)}.items():
        p = G.plan(1, n, k, swept=False)
        assert (p.bm, p.bn, p.bk, p.split, p.fma) == (8, bn, bk, 1, False), (n, k, p)
        assert ct.cdiv(n, p.bn) >= 132
    # too narrow even at 16 rows a block: K split until the SMs have a block each
    p = G.plan(1, 1024, 4096)
    assert (p.bn, p.split, p.ticket) == (16, 2, True)
    assert G.counters(1024, p) == 64 and G.counters(1024, p._replace(ticket=False)) == 0
    assert G.plan(1, 1024, 1024).split == 1           # 4 tiles: too short to split
    assert G.plan(9, 6144, 4096).bm == 16
    exact = G.plan(3, 4096, 4096, exact=True)
    assert exact.fma and exact.bm * exact.bn * exact.bk == 2048
    assert G.plan(3, 64, 64, on_gpu=False)[3:] == (2, False, True)
    assert not G.plan(3, 64, 32, on_gpu=False).ticket              # one K tile: no split
    for m in (0, 17):
        with pytest.raises(ValueError, match="1 to 16 rows"):
            G.plan(m, 64, 64)


# In --full (0.3 s each): the Backend tests' bfloat16 cases, the same routes (they do
# not depend on the dtype) in the other dtype; their float32 cases keep the routes in
# the fast tier, and the GEMVs' bf16 rounding is kept by the interpreter's sweeps
# (test_gemv_family_against_float64, test_ticket_adds_the_splits_as_the_combine_does)
BACKEND_DTYPES = ["float32", pytest.param("bfloat16", marks=pytest.mark.slow)]


@pytest.mark.parametrize("dtype", BACKEND_DTYPES)
def test_backend_routes_decode_rows_to_the_gemvs(dtype):
    """Backend.decode_gemv: linear, its residual form and SwiGLU at up to DECODE_ROWS
    rows launch the GEMVs (the interpreter's plan splits K: the last blocks add the
    splits up, or with gemv_ticket off the combines do), more rows and a fused norm the
    GEMM kernels; the answers are the GEMMs' within rounding; the counters end at
    zero."""
    from tileir.llm.backend import DECODE_ROWS, Backend
    rng = np.random.default_rng()
    b = Backend("numpy", dtype)
    b.decode_gemv = True
    launched = []
    run = b._launch
    b._launch = lambda grid, kernel, args: (launched.append(kernel.name),
                                            run(grid, kernel, args))
    k, n = 72, 40
    w, w2 = (b.asarray(rng.standard_normal((n, k)) / 8) for _ in range(2))
    for m, ticket in ((1, True), (1, False), (DECODE_ROWS, True), (DECODE_ROWS + 1, True)):
        b.gemv_ticket = ticket
        x = b.asarray(rng.standard_normal((m, k)))
        r = b.asarray(rng.standard_normal((m, n)))
        launched.clear()
        y, s = b.linear(x, w), b.linear_swiglu(x, w, w2)
        r_ref = r.astype(np.float64)
        added = b.linear(x, w, residual=r)
        gemv = {"gemv", "gemv_add", "gemv_swiglu"}
        if not ticket:
            gemv |= {"gemv_combine", "gemv_combine_add", "gemv_combine_swiglu"}
        assert (set(launched) == gemv) == (m <= DECODE_ROWS), (m, launched)
        assert b.gemv_tickets.buffers and b.gemv_tickets.all_zero()
        _check(y, _ref(x, [w], None, b.dtype), b.dtype)
        _check(s, _ref(x, [w, w2], None, b.dtype), b.dtype)
        _check(added, x.astype(np.float64) @ w.astype(np.float64).T + r_ref, b.dtype)
    launched.clear()
    b.linear(x[:2], w, norm=(b.asarray(np.ones(k)), 1e-5))
    assert launched == ["linear"]                 # a norm without gemv_norm: the GEMM's


@pytest.mark.parametrize("dtype", BACKEND_DTYPES)
def test_backend_fuses_the_norm_into_decode_gemvs(dtype):
    """Backend.gemv_norm: linear and linear_swiglu with norm = (g, eps) over at most
    DECODE_ROWS rows launch one GEMV with NORM (the interpreter's split K added up by
    its last blocks), no rmsnorm; more rows the GEMM kernels with their own NORM; the answers
    RMSNorm-then-product's within rounding.  `fuses_norm` answers per call."""
    from tileir.llm.backend import DECODE_ROWS, Backend
    rng = np.random.default_rng()
    b = Backend("numpy", dtype)
    b.decode_gemv = b.gemv_norm = True
    launched = []
    run = b._launch
    b._launch = lambda grid, kernel, args: (launched.append((kernel.name, args[-1])),
                                            run(grid, kernel, args))
    k, n = 72, 40
    w, w2 = (b.asarray(rng.standard_normal((n, k)) / 8) for _ in range(2))
    g = b.asarray(0.5 + rng.random(k))
    for m in (1, 5, DECODE_ROWS, DECODE_ROWS + 1):
        x = b.asarray(3.0 * rng.standard_normal((m, k)))
        xn = _normed_ref(x, g, 1e-5, b.dtype)
        assert b.fuses_norm(m, w, w2) == (m <= DECODE_ROWS)
        launched.clear()
        y = b.linear(x, w, norm=(g, 1e-5))
        s = b.linear_swiglu(x, w, w2, norm=(g, 1e-5))
        if m <= DECODE_ROWS:       # NORM set (the kernels' last argument), split K
            assert launched == [("gemv", True), ("gemv_swiglu", True)], launched
        else:
            assert [name for name, _ in launched] == ["linear", "linear_swiglu"], launched
        _check(y, _ref(xn, [w], None, b.dtype), b.dtype)
        _check(s, _ref(xn, [w, w2], None, b.dtype), b.dtype)
    with pytest.raises(ValueError, match="no fused norm"):
        b.linear(x[:1], w, residual=b.asarray(np.zeros((1, n))), norm=(g, 1e-5))
    with pytest.raises(ValueError, match="needs the weights"):
        b.fuses_norm(1)


@pytest.mark.parametrize("dtype", BACKEND_DTYPES)
def test_backend_norms_in_the_residual_gemvs_tail(dtype):
    """Backend.linear_add_norm: over at most DECODE_ROWS rows one gemv_add_norm launch
    updates the residual and returns its rows' norm (no rmsnorm launch), the separate
    norm's bits; with gemv_norm_tail off, or a split K finished by the combine launch
    (gemv_ticket off), or more rows, the residual GEMM alone and None (the caller
    norms); the counters back at zero."""
    from tileir.llm.backend import DECODE_ROWS, Backend
    rng = np.random.default_rng()
    b = Backend("numpy", dtype)
    b.decode_gemv = True
    assert b.gemv_ticket and not b.gemv_norm_tail       # the defaults
    b.gemv_norm_tail = True
    launched = []
    run = b._launch
    b._launch = lambda grid, kernel, args: (launched.append(kernel.name),
                                            run(grid, kernel, args))
    k, n = 72, 40
    w = b.asarray(rng.standard_normal((n, k)) / 8)
    g = b.asarray(0.5 + rng.random(n))
    cases = [(1, {}, ["gemv_add_norm"]), (DECODE_ROWS, {}, ["gemv_add_norm"]),
             (3, {"gemv_norm_tail": False}, ["gemv_add"]),
             (3, {"gemv_ticket": False}, ["gemv_add", "gemv_combine_add"]),
             (DECODE_ROWS + 1, {}, ["linear_add"])]
    for m, switches, want in cases:
        for name, value in switches.items():
            setattr(b, name, value)
        x = b.asarray(rng.standard_normal((m, k)))
        r = b.asarray(3.0 * rng.standard_normal((m, n)))
        before = r.astype(np.float64)
        launched.clear()
        normed = b.linear_add_norm(x, w, r, (g, 1e-5))
        assert launched == want, (m, switches, launched)
        _check(r, x.astype(np.float64) @ w.astype(np.float64).T + before, b.dtype)
        if want == ["gemv_add_norm"]:
            assert normed.tobytes() == b.rmsnorm(r, g, 1e-5).tobytes()
            _check(normed, _normed_ref(r, g, 1e-5, np.float64), b.dtype)
        else:
            assert normed is None
        assert b.gemv_tickets.all_zero()
        for name in switches:
            setattr(b, name, True)
    launched.clear()
    assert b.linear_add_norm(x[:1], w, r[:1], None) is None     # no norm after it
    assert launched == ["gemv_add"]


def test_fuses_norm_on_the_gpu_follows_the_gemv_route():
    """On the GPU the decode GEMVs take only one row of the swept shapes, so the norm is
    fused there and nowhere else: QKV's and gate/up's one row yes; the LM head (its
    wgmma kernel), two rows, or gemv_norm off: the norm's own launch; fuse_norm: the
    GEMM kernels fuse it whatever the rows."""
    from tileir.llm.backend import Backend

    class W:
        def __init__(self, n, k):
            self.shape = (n, k)
    b = Backend("numpy", "bfloat16")
    b.torch = object()                       # route as the CUDA backend does
    b.decode_gemv = b.gemv_norm = True
    qkv, gate, head = W(6144, 4096), W(14336, 4096), W(128256, 4096)
    assert b.fuses_norm(1, qkv) and b.fuses_norm(1, gate, gate)
    assert not b.fuses_norm(1, head) and not b.fuses_norm(2, qkv)
    assert not b.fuses_norm(1, qkv, head)   # every reader must take the fusion
    b.gemv_norm = False
    assert not b.fuses_norm(1, qkv)
    b.fuse_norm = True
    assert b.fuses_norm(1, qkv) and b.fuses_norm(300, head)


# ---------------------------------------------------------------- sm_90a code

def _sass_text(cubin: bytes, tmp_path) -> str:
    return sass_text(cubin, tmp_path)            # (disassembled once a run: conftest)


_INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)"
                   r"([^;]*);", re.M)


def _instructions(sass: str):
    """(address, opcode with modifiers, operands) of each SASS instruction."""
    return [(int(a, 16), op, rest) for a, op, rest in _INSN.findall(sass)]


def _loops(insns):
    """The bodies of backward branches: (start, end) addresses and the instructions."""
    out = []
    for addr, op, rest in insns:
        target = re.search(r"0x([0-9a-f]+)", rest)
        if op.startswith("BRA") and target and int(target.group(1), 16) < addr:
            lo = int(target.group(1), 16)
            out.append([i for i in insns if lo <= i[0] <= addr])
    return out


def _llama_args(kind, m, n, k, p, dtype=BF16, norm=False):
    x = np.zeros((m, k), dtype)
    w = np.zeros((n, k), dtype)
    y = np.zeros((m, n), dtype)
    lead = (2,) if kind in ("swiglu", "fused") else ()
    part = np.zeros(lead + (p.split, m, n), np.float32)
    count = np.zeros(max(1, G.counters(n, p)), np.int32)
    tiles = tuple(p)
    if kind == "add":
        return G.gemv_add, (x, w, y, y, part, count) + tiles
    g = np.zeros(k, dtype)                  # RMSNorm's weight (read with norm only)
    if kind == "swiglu":
        return G.gemv_swiglu, (x, g, 1e-5, w, w, y, part, count) + tiles + (norm,)
    if kind == "fused":
        return G.gemv_swiglu_fused, (x, g, 1e-5, w, w, y, part, count) + tiles + (norm,)
    return G.gemv, (x, g, 1e-5, w, y, part, count) + tiles + (norm,)


def _compile(kernel, args, grid, stage=None):
    return kernel.compile(args, stage, target="sm_90a", grid=tuple(grid) + (1,),
                          sm_count=132)


# Llama-3-8B's decode GEMMs: QKV, O + residual, gate/up + SwiGLU, down + residual
LLAMA = [("linear", 6144, 4096), ("add", 4096, 4096), ("swiglu", 14336, 4096),
         ("add", 4096, 14336)]


# the fast tier: qkv at one row alone.  In --full (0.7 s): qkv-16, the same mma.sync
# m16n8k16 ring at 16 activation rows; test_tensor_core_plan_streams_weights_through_tma_rings
# [qkv-1] keeps the rule's tensor-core plan, its ring and SASS in the fast tier
@pytest.mark.sweep
@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("kind,n,k", LLAMA, ids=["qkv", "o", "gate_up", "down"])
def test_tensor_core_plan_streams_weights_through_tma_rings(kind, n, k, m, tmp_path):
    """The plan's kernels: each weight (and activation) tile a TMA box into a ring of
    STAGES slots (as many loads in flight a block), the weight rows the product's M
    (wgmma 64 x 8 or 16 at 64 rows, mma.sync m16n8k16 at 16 or 32), no local memory,
    the shared memory the plan counts on (its blocks an SM), and a steady loop of few
    instructions per weight byte (the tensor cores and TMA do the work: no per-element
    address arithmetic)."""
    p = G.plan(m, n, k, swept=False)                 # the rule's tensor-core plan
    kernel, args = _llama_args(kind, m, n, k, p)
    grid = G.grid(n, p)
    ring = _compile(kernel, args, grid, "pipeline").ir()
    rings = [int(s) for s in re.findall(r'"tile.ring_alloc"\(\) \{stages = (\d+)', ring)]
    assert rings == [G.STAGES] * (2 if kind == "swiglu" else 1), rings
    ck = _compile(kernel, args, grid)
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      ck.ptxas_report) == [("0", "0")], ck.ptxas_report
    tile_bytes = (p.bn + p.bm) * p.bk * 2
    assert G.STAGES * tile_bytes <= ck.meta["shared_bytes"] < G.STAGES * tile_bytes + 2048
    insns = _instructions(_sass_text(ck.cubin, tmp_path))
    ops = collections.Counter(op.split(".")[0] for _, op, _ in insns)
    mma = "HGMMA" if p.bn == 64 else "HMMA"
    assert ops["UTMALDG"] and ops[mma], ops
    assert not ops["LDL"] and not ops["STL"], ops
    # the rows are the product's N: 64 x 8 or 64 x 16, not a 64-row activation tile
    ptx = ck.artifacts["ptx"]
    if p.bn == 64:
        shapes = set(re.findall(r"wgmma\.mma_async\S*\.(m\d+n\d+k\d+)", ptx))
        assert shapes == {f"m64n{p.bm}k16"}, shapes
    else:
        assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16" in ptx
    # the steady loop: the innermost that issues the products and the next tiles' TMA
    # loads (the longer backward branches are the mbarrier waits' out-of-line retries
    # jumping back into it); its instructions per weight byte an iteration
    warps = ck.meta["num_threads"] // 32
    steady = [body for body in _loops(insns)
              if {mma, "UTMALDG"} <= {op.split(".")[0] for _, op, _ in body}]
    assert steady, "no loop issues the products and the loads"
    body = min(steady, key=len)
    products = sum(op.split(".")[0] == mma for _, op, _ in body)
    # wgmma: one 64 x BM x 16 a K step; mma.sync: one 16 x 8 x 16 a (row block, K step,
    # 8 rows)
    assert products == (p.bk // 16 if p.bn == 64 else p.bn // 16 * p.bk // 16 * p.bm // 8)
    per_byte = len(body) * warps / (p.bn * p.bk * 2)
    assert per_byte < 0.1, per_byte     # 0.02-0.05: 165-250 instructions, 1-4 warps, 8-16 KB


# In --full (the family's SASS and simulator proofs beyond its first, the policy of
# session 24): the fused kernel's ring and SASS.  The fast tier keeps its numbers in the
# interpreter (test_gemv_family_against_float64[...-fused]) and the family's TMA ring and
# tensor-core SASS (test_tensor_core_plan_streams_weights_through_tma_rings[qkv-1])
@pytest.mark.slow
def test_fused_swiglu_streams_both_weights_through_one_ring(tmp_path):
    """gemv_swiglu_fused at gate/up's widths, 32 weight rows: one ring of STAGES slots
    (x, W_g and W_u tiles: 74 KB, 3 blocks an SM), mma.sync, no local memory."""
    p = G.Plan(8, 32, 128, 1, False)
    kernel, args = _llama_args("fused", 1, 14336, 4096, p)
    grid = G.grid(14336, p)
    ring = _compile(kernel, args, grid, "pipeline").ir()
    assert re.findall(r'"tile.ring_alloc"\(\) \{stages = (\d+)', ring) == [str(G.STAGES)]
    ck = _compile(kernel, args, grid)
    assert re.findall(r"(\d+) bytes spill stores", ck.ptxas_report) == ["0"]
    assert ck.meta["shared_bytes"] < G.STAGES * (2 * p.bn + p.bm) * p.bk * 2 + 2048
    ops = collections.Counter(op.split(".")[0]
                              for _, op, _ in _instructions(_sass_text(ck.cubin, tmp_path)))
    assert ops["UTMALDG"] and ops["HMMA"] and not ops["LDL"] and not ops["STL"], ops


# the fast tier: each product form once (down's ticket is o's, at a longer K).  In
# --full (0.9 s): gate_up_split, the same wgmma ticket's ordering on gemv_swiglu's two
# partials; [o] keeps the tensor-core ticket's SASS in the fast tier, [qkv_fma_split] the
# FMA form's, and test_generated_code_in_the_simulator[swiglu-64-128-2-False-True] runs
# gemv_swiglu's ticket in the simulator.
# Since session 24 every case in --full (the family's SASS proofs beyond its first): the
# fast tier keeps the ticket's sums in the interpreter
# (test_ticket_adds_the_splits_as_the_combine_does) and in the simulator
# (test_generated_code_in_the_simulator[add-64-128-2-False-True])
@pytest.mark.slow
@pytest.mark.sweep(keep=("kind",))
@pytest.mark.parametrize("kind,n,k,p", [
    ("add", 4096, 4096, G.SWEPT[4096, 4096]), ("add", 4096, 14336, G.SWEPT[4096, 14336]),
    pytest.param("swiglu", 14336, 4096, G.Plan(8, 64, 128, 2, False, True),
                 marks=pytest.mark.slow),
    ("linear", 6144, 4096, G.Plan(1, 8, 512, 2, True, True))],
    ids=["o", "down", "gate_up_split", "qkv_fma_split"])
def test_ticket_orders_the_partials_before_the_last_block_reads_them(kind, n, k, p,
                                                                     tmp_path):
    """The one-launch split K's sm_90a code: the block's partial stores, then a block
    barrier and the release fence (MEMBAR.GPU) before the one ticket
    (ATOMG.ADD.S32.STRONG.GPU: acq_rel at device scope), L1 invalidated after it (the
    acquire half: CCTL.IVALL), the partials read back with strong device-scope loads
    (from L2) and only after the ticket, the counter reset by the last store; the
    weights still stream through the TMA ring, no local memory, no spills."""
    kernel, args = _llama_args(kind, 1, n, k, p)
    ck = _compile(kernel, args, G.grid(n, p))
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      ck.ptxas_report) == [("0", "0")], ck.ptxas_report
    insns = _instructions(_sass_text(ck.cubin, tmp_path))
    ops = [op for _, op, _ in insns]
    atoms = [i for i, op in enumerate(ops) if op.startswith("ATOM")]
    assert [ops[i] for i in atoms] == ["ATOMG.E.ADD.S32.STRONG.GPU"], ops
    t = atoms[0]
    stores = [i for i, op in enumerate(ops[:t]) if op.startswith("STG")]
    assert stores, "no partial stored before the ticket"
    between = ops[stores[-1]:t]
    assert any(op.startswith("BAR.SYNC") for op in between), between
    assert "MEMBAR.ALL.GPU" in between, between
    assert "CCTL.IVALL" in ops[t:t + 4], ops[t:t + 4]
    strong = [i for i, op in enumerate(ops) if op.startswith("LDG") and "STRONG.GPU" in op]
    assert strong and min(strong) > t, (strong, t)
    # the partials (f32 words) come back one element a strong load: every split's
    # (BM rows x BN columns x SPLIT, SwiGLU's two) spread over the block's threads (the
    # FMA form's 16 words held alike by several threads: at most that many a thread)
    words = (2 if kind == "swiglu" else 1) * p.split * p.bm * p.bn
    if p.fma:
        assert len(strong) <= words, (len(strong), words)
    else:
        assert len(strong) * ck.meta["num_threads"] == words, (len(strong), words)
    last_store = max(i for i, op in enumerate(ops) if op.startswith("STG"))
    assert last_store > max(strong) and not any(op.startswith("UTMASTG") for op in ops)
    assert "UTMALDG" in {op.split(".")[0] for op in ops} or p.fma, "the weights' ring"
    assert not any(op.startswith(("LDL", "STL")) for op in ops)


def _tail_args(m, n, k, p, dtype=BF16):
    """gemv_add_norm's arguments at a shape (zeros: compiled, not run)."""
    x, w = np.zeros((m, k), dtype), np.zeros((n, k), dtype)
    y, out = np.zeros((m, n), dtype), np.zeros((m, n), dtype)
    part = np.zeros((p.split, m, n), np.float32)
    count = np.zeros(G.counters(n, p, tail=True), np.int32)
    return (x, w, y, y, part, count, np.zeros(n, dtype), 1e-5, out) + tuple(p) + (
        G.next_pow2(n),)


# In --full (1.0 s): down, the same split K's tile ticket then grid ticket at a longer K;
# test_norm_tail_orders_the_rows_before_the_grid_ticket[o-1] keeps that path in the
# fast tier, [o_split1-1] the grid's ticket alone.
# Since session 24 every case in --full (the family's SASS proofs beyond its first): the
# fast tier keeps the norm tail's rows in the interpreter
# (test_norm_tail_matches_the_separate_norm, split and whole) and the backend's route to
# it (test_backend_norms_in_the_residual_gemvs_tail)
@pytest.mark.slow
@pytest.mark.sweep(keep=("n", "k", "p"))        # 16 rows: the interpreter's tests keep them
@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("n,k,p", [
    pytest.param(4096, 4096, G.SWEPT[4096, 4096], id="o"),
    pytest.param(4096, 14336, G.SWEPT[4096, 14336], id="down", marks=pytest.mark.slow),
    pytest.param(4096, 4096, G.Plan(8, 64, 128, 1, False), id="o_split1")])
def test_norm_tail_orders_the_rows_before_the_grid_ticket(n, k, p, m, tmp_path):
    """gemv_add_norm's sm_90a code at Llama-3-8B's widths: after y's stores (the tile's
    last split block's, or every block's at split 1) a block barrier and the release
    fence (MEMBAR.ALL.GPU) before the grid's ticket, the last ATOMG (acq_rel at GPU
    scope), L1 invalidated after it; the new rows read back only after it, with strong
    GPU-scope loads (from L2), a row's 4096 columns over the block's threads; the normed
    rows and the counter's reset stored last; the weights still on the TMA ring, no
    local memory, no spills."""
    p = p._replace(bm=max(p.bm, m))
    ck = _compile(G.gemv_add_norm, _tail_args(m, n, k, p), G.grid(n, p))
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      ck.ptxas_report) == [("0", "0")], ck.ptxas_report
    ops = [op for _, op, _ in _instructions(_sass_text(ck.cubin, tmp_path))]
    atoms = [i for i, op in enumerate(ops) if op.startswith("ATOM")]
    # a tile's ticket (split K), then the grid's
    assert [ops[i] for i in atoms] == ["ATOMG.E.ADD.S32.STRONG.GPU"] * (1 + (p.split > 1))
    t = atoms[-1]
    stores = [i for i, op in enumerate(ops[:t]) if op.startswith("STG")]
    assert stores and (p.split == 1 or stores[-1] > atoms[0]), "no y tile before the ticket"
    between = ops[stores[-1]:t]
    assert any(op.startswith("BAR.SYNC") for op in between), between
    assert "MEMBAR.ALL.GPU" in between, between
    assert "CCTL.IVALL" in ops[t:t + 4], ops[t:t + 4]
    rows = [i for i, op in enumerate(ops) if op == "LDG.E.U16.STRONG.GPU"]
    assert rows and min(rows) > t, (rows, t)
    threads = ck.meta["num_threads"]
    assert len(rows) * threads >= n and (threads != 128 or len(rows) * threads == n)
    last_store = max(i for i, op in enumerate(ops) if op.startswith("STG"))
    assert last_store > max(rows)
    assert "UTMALDG" in {op.split(".")[0] for op in ops}, "the weights' ring"
    assert not any(op.startswith(("LDL", "STL")) for op in ops)


# In --full since session 24 (ptxas's proofs of the rule, 3 s): the fast tier keeps the
# norm tail's numbers in the interpreter (test_norm_tail_matches_the_separate_norm) and
# its refusal of a split without the ticket (test_norm_tail_needs_the_ticket_to_split)
@pytest.mark.slow
@pytest.mark.parametrize("n,p", [
    pytest.param(7168, G.Plan(16, 64, 128, 2, False, True), id="wgmma_7168"),
    # (a fitting mma.sync and FMA block: wgmma_7168 keeps the fitting path)
    pytest.param(2048, G.Plan(16, 16, 256, 1, False), id="mma_sync_2048", marks=pytest.mark.slow),
    pytest.param(8192, G.Plan(1, 8, 256, 1, True), id="fma_8192", marks=pytest.mark.slow),
    pytest.param(4096, G.Plan(8, 16, 256, 1, False), id="mma_sync_4096")])
def test_norm_tail_fits_the_blocks_it_takes(n, p):
    """gemv.norm_tail_fits at its limits (TAIL_PER_THREAD f32 of the row a thread, the
    threads the rule assumes of each product form): the blocks are as wide as assumed
    and hold a row that fits without local memory; a row twice that (4096 columns on a
    one-warp mma.sync block) is refused (it spilled 2.3 KB)."""
    fits = G.norm_tail_fits(n, p)
    assert fits == (n <= G.TAIL_PER_THREAD * (128 if p.fma or p.bn >= 64 else 32))
    # sm_80 has no wgmma: a 64-row block is one mma.sync warp there
    assert G.norm_tail_fits(n, p, wgmma=False) == (fits and (p.fma or n <= 2048))
    ck = _compile(G.gemv_add_norm, _tail_args(p.bm, n, 4096, p), G.grid(n, p))
    assert ck.meta["num_threads"] >= (128 if p.fma or p.bn >= 64 else 32)
    if fits:
        assert re.findall(r"(\d+) bytes spill stores", ck.ptxas_report) == ["0"]
    else:                                   # why the rule refuses it
        assert re.findall(r"(\d+) bytes spill stores", ck.ptxas_report) != ["0"]


# In --full since session 24 (the family's simulator runs beyond its first two): the
# fast tier keeps the tail's rows in the interpreter
# (test_norm_tail_matches_the_separate_norm) and the family's ticket in the simulator
# (test_generated_code_in_the_simulator[add-64-128-2-False-True])
@pytest.mark.slow
@pytest.mark.parametrize("split,bn", [
    (2, 64),
    # (the grid ticket at split 1 and on mma.sync: the SASS tests keep both paths)
    pytest.param(1, 64, marks=pytest.mark.slow), pytest.param(2, 16, marks=pytest.mark.slow)])
def test_norm_tail_in_the_simulator(split, bn):
    """gemv_add_norm's sm_90a code in tileir.sim: 3 rows of 1000 (ragged: a partial
    weight-row tile, a 1024-wide norm tile), K 256 split two ways (wgmma's 64-row
    tiles or mma.sync's 16) or whole (the producer warpgroup's ring): the residual as
    gemv_add's own sm_90a code makes it, the normed rows bit for bit the rmsnorm
    kernel's sm_90a code over them, counters back at zero."""
    from tileir.examples.rmsnorm import rmsnorm
    from tileir.kernel import hardware_grid
    from tileir.sim import simulate

    def sim(kernel, args, grid):
        grid = tuple(grid) + (1,) * (3 - len(grid))
        ck = kernel.compile(args, "gpu", target="sm_90a", grid=grid, sm_count=132)
        simulate(ck, hardware_grid(ck.meta, grid), args)

    rng = np.random.default_rng()
    m, n, k, eps = 3, 1000, 256, 1e-5
    x, ws, r = _inputs(rng, "add", m, n, k, BF16)
    r = (3.0 * r.astype(np.float32)).astype(BF16)
    g = (0.5 + rng.random(n)).astype(BF16)
    p = G.Plan(8, bn, 128, split, False, split > 1)
    args = list(_tail_args(m, n, k, p))
    y, out = r.copy(), np.full((m, n), np.nan, BF16)
    args[:9] = x, ws[0], y, y, np.full((split, m, n), np.nan, np.float32), args[5], g, \
        eps, out
    sim(G.gemv_add_norm, tuple(args), G.grid(n, p))
    assert not args[5].any()
    plain = r.copy()
    sim(G.gemv_add, (x, ws[0], plain, plain, np.full((split, m, n), np.nan, np.float32),
                     np.zeros(G.counters(n, p) + 1, np.int32)) + tuple(p), G.grid(n, p))
    assert y.tobytes() == plain.tobytes()
    ref = np.full((m, n), np.nan, BF16)
    sim(rmsnorm, (y, g, ref, eps, G.next_pow2(n)), (m,))
    assert out.tobytes() == ref.tobytes()
    _check(out, _normed_ref(y, g, eps, np.float64), BF16)


# In --full (0.6 s each): add and swiglu, the same 16-byte loads of the partials in the
# other combine kernels of the family; test_combines_use_16_byte_loads[linear] keeps
# the property in the fast tier (and the simulator runs gemv_combine_add:
# test_generated_code_in_the_simulator[add-64-128-2-False-False])
# Since session 24 [linear] too (the family's SASS proofs beyond its first): the fast
# tier keeps the combines' sums in the interpreter (test_gemv_family_against_float64,
# split without the ticket)
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["linear", pytest.param("add", marks=pytest.mark.slow),
                                  pytest.param("swiglu", marks=pytest.mark.slow)])
def test_combines_use_16_byte_loads(kind, tmp_path):
    m, n = 1, 4096
    p = G.plan(m, n, 4096)
    lead = (2,) if kind == "swiglu" else ()
    part = np.zeros(lead + (p.split, m, n), np.float32)
    y = np.zeros((m, n), BF16)
    kernel, args = {"linear": (G.gemv_combine, (part, y)),
                    "add": (G.gemv_combine_add, (part, y, y)),
                    "swiglu": (G.gemv_combine_swiglu, (part, y))}[kind]
    ctiles = G.combine_tiles(m, n, p)
    ck = _compile(kernel, args + ctiles, (ct.cdiv(n, ctiles[2]),))
    ops = collections.Counter(op for _, op, _ in _instructions(_sass_text(ck.cubin, tmp_path)))
    assert ops["LDG.E.128"] or ops["LDG.E.128.CONSTANT"], sorted(ops)
    assert not any(op.startswith(("LDL", "STL")) for op in ops)


# norm=False in --full: the same FMA product without the prologue that norm=True adds.
# Since session 24 norm=True too (the family's SASS proofs beyond its first): the fast
# tier keeps the FMA form's sums in the interpreter (test_gemv_family_against_float64's
# fma cases, test_norm_prologue_against_float64's)
@pytest.mark.slow
@pytest.mark.parametrize("norm", [pytest.param(False, marks=pytest.mark.slow), True])
def test_fma_product_loads_16_bytes_and_reduces_after_the_loop(norm, tmp_path):
    """One row on the FMA units (QKV's swept plan): the weight tile in 16-byte loads,
    the product summed per element in the loop (no shuffle or barrier there) and
    reduced once after it; with NORM too (the norm's sum of squares reduced before the
    loop, g read beside the weight)."""
    p = G.Plan(1, 8, 256, 1, True)
    kernel, args = _llama_args("linear", 1, 6144, 4096, p, norm=norm)
    ck = _compile(kernel, args, G.grid(4096, p))
    assert re.findall(r"(\d+) bytes spill stores", ck.ptxas_report) == ["0"]
    insns = _instructions(_sass_text(ck.cubin, tmp_path))
    loops = [b for b in _loops(insns) if any(op.startswith("LDG.E.128") for _, op, _ in b)]
    assert loops
    body = max(loops, key=len)
    assert not any(op.startswith(("SHFL", "BAR", "LDL", "STL")) for _, op, _ in body)
    assert any(op.startswith("SHFL") for _, op, _ in insns)      # after the loop


def _rings(ir_text: str):
    """(stages, [tile types]) of each ring the pipeline made."""
    return [(int(st), re.findall(r"tensor<[^>]*>>", tiles)) for st, tiles in re.findall(
        r'"tile.ring_alloc"\(\) \{stages = (\d+) : i64, tiles = \[(.*?)\]\}', ir_text)]


# the fast tier: each kind's first plan (gate/up's swept wgmma plan, qkv on mma.sync);
# the 64-row wgmma plan, 16 rows and split K in --full (1-1.5 s of CPU each).  In --full
# too (1.3 s): gate_up_fused, the same staged K-major B for wgmma on the family's fused
# kernel; [gate_up_swept] keeps the norm's wgmma staging in the fast tier, and
# test_candidates_compile_for_sm90a_without_spills[swiglu14336x4096-fused/64x128/s4/pers]
# the fused kernel's ring.
# Since session 24 every case in --full (the family's SASS proofs beyond its first): the
# fast tier keeps the prologue's numbers in the interpreter
# (test_norm_prologue_against_float64) and in the simulator
# (test_generated_code_in_the_simulator[linear-16-256-1-True-False])
@pytest.mark.slow
@pytest.mark.sweep(keep=("kind",))
@pytest.mark.parametrize("kind,m,n,k,p", [
    ("swiglu", 1, 14336, 4096, G.SWEPT[14336, 4096]),        # gate/up's plan: wgmma, 128 rows
    ("swiglu", 1, 14336, 4096, G.Plan(8, 64, 128, 1, False)),   # wgmma, 64 rows
    pytest.param("fused", 1, 14336, 4096, G.Plan(8, 64, 128, 1, False),
                 marks=pytest.mark.slow),
    ("linear", 1, 6144, 4096, G.Plan(8, 32, 128, 1, False)),    # mma.sync, 32 rows
    ("linear", 16, 6144, 4096, G.Plan(16, 32, 128, 1, False)),
    ("linear", 1, 6144, 4096, G.Plan(8, 64, 128, 2, False)),    # split K
], ids=["gate_up_swept", "gate_up_64", "gate_up_fused", "qkv_32", "qkv_32_m16",
        "qkv_split"])
def test_norm_prologue_keeps_the_weight_ring(kind, m, n, k, p, tmp_path):
    """NORM at Llama-3-8B's widths: each weight ring as without it (the weight tiles, the
    stages); the activation rows leave the ring (the norm reads them with plain loads,
    and the product takes them normed from registers: staged to shared memory for
    wgmma's B, a K-major 8 x 128 tile), so shared memory grows by that staging tile at
    most; no local memory; the weights still on TMA and the tensor cores."""
    kernel, plain = _llama_args(kind, m, n, k, p, norm=False)
    _, normed = _llama_args(kind, m, n, k, p, norm=True)
    grid = G.grid(n, p)
    ir_plain = _compile(kernel, plain, grid, "pipeline").ir()
    before = _rings(ir_plain)
    ir_normed = _compile(kernel, normed, grid, "pipeline").ir()
    after = _rings(ir_normed)
    if p.bn >= 64:
        # wgmma's B: the normed rows staged K-major with a 128-byte swizzle (N, 8 or 16
        # rows, is too narrow to swizzle), and the product synchronous: the next
        # iteration rewrites the staging tile
        assert re.search(rf"tensor<{p.bk}x{p.bm}xbf16, #tile.shared<128 : i64, "
                         r"array<i64: 0, 1>>>", ir_normed), "no K-major staged B"
        assert "tile.mma_async" not in ir_normed and "tile.mma_async" in ir_plain
    x_tile = f"tensor<{p.bm}x{p.bk}xbf16"
    assert before and all(any(t.startswith(x_tile) for t in tiles) for _, tiles in before)
    assert after == [(st, [t for t in tiles if not t.startswith(x_tile)])
                     for st, tiles in before], (before, after)
    ck0 = _compile(kernel, plain, grid)
    ck = _compile(kernel, normed, grid)
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      ck.ptxas_report) == [("0", "0")], ck.ptxas_report
    assert ck.meta["shared_bytes"] <= ck0.meta["shared_bytes"] + 2048, (
        ck.meta["shared_bytes"], ck0.meta["shared_bytes"])
    ops = collections.Counter(op.split(".")[0]
                              for _, op, _ in _instructions(_sass_text(ck.cubin, tmp_path)))
    mma = "HGMMA" if p.bn >= 64 else "HMMA"
    assert ops["UTMALDG"] and ops[mma] and ops["LDG"], ops
    assert not ops["LDL"] and not ops["STL"], ops


def test_l2_prefetch_option_reaches_the_gemv_rings():
    """Backend.l2_prefetch launches the GEMVs with the option: the first weight tiles
    prefetched into L2 before the grid-dependency wait."""
    p = G.plan(1, 4096, 4096)
    kernel, args = _llama_args("add", 1, 4096, 4096, p)
    ptx = _compile(kernel.replace_hints(l2_prefetch=True), args,
                   G.grid(4096, p)).artifacts["ptx"].splitlines()
    wait = [i for i, line in enumerate(ptx) if "griddepcontrol.wait" in line]
    pf = [i for i, line in enumerate(ptx) if "cp.async.bulk.prefetch.tensor" in line]
    assert len(wait) == 1 and pf and max(pf) < wait[0]


# In --full too: swiglu-64-128-2-False-False (0.4 s), the combine launch after a second
# kernel of the family (add-64-128-2-False-False keeps the combine in the simulator in
# the fast tier, swiglu-64-128-2-False-True gemv_swiglu's split); swiglu-64-128-2-True-False
# (0.3 s), the normed rows staged for wgmma's B (linear-64-128-1-True-False keeps them)
@pytest.mark.parametrize("kind,bn,bk,split,norm,ticket", [
    # since session 24 the fast tier keeps two runs of the family (the policy: one or
    # two simulator runs a kernel family): add-64-128-2-False-True (wgmma, split K and
    # the ticket, the swept O and down plans' path) and linear-16-256-1-True-False
    # (mma.sync with the norm's prologue); in --full: the combine launch (its sums in
    # the interpreter: test_gemv_family_against_float64), gemv_swiglu's and gemv's
    # split (test_ticket_adds_the_splits_as_the_combine_does), 64-row linear with the norm
    # (test_norm_prologue_against_float64)
    pytest.param("add", 64, 128, 2, False, False, marks=pytest.mark.slow),
    ("add", 64, 128, 2, False, True),
    pytest.param("swiglu", 64, 128, 2, False, False, marks=pytest.mark.slow),
    pytest.param("swiglu", 64, 128, 2, False, True, marks=pytest.mark.slow),
    pytest.param("linear", 16, 256, 2, False, True, marks=pytest.mark.slow),
    # in --full: the cases around it run the same mma.sync product (split with the
    # ticket; whole with the norm)
    pytest.param("linear", 16, 256, 1, False, False, marks=pytest.mark.slow),
    pytest.param("swiglu", 64, 128, 2, True, False, marks=pytest.mark.slow),
    ("linear", 16, 256, 1, True, False),
    pytest.param("linear", 64, 128, 1, True, False, marks=pytest.mark.slow)])
def test_generated_code_in_the_simulator(kind, bn, bk, split, norm, ticket):
    """sm_90a code in tileir.sim on a ragged shape: 3 rows, 96 weight rows (a partial
    64-row tile on wgmma; six 16-row blocks on mma.sync), 328 columns (three 128-wide
    tiles or two 256-wide, the last partial), K split two ways then the combine or the
    last block's ticket (its counters back at zero after), or whole; with norm, RMSNorm
    in the prologue (the normed rows staged into shared memory for wgmma's B, or in
    registers for mma.sync)."""
    from tileir.kernel import hardware_grid
    from tileir.sim import simulate
    rng = np.random.default_rng()
    m, n, k = 3, 96, 328
    x, ws, r = _inputs(rng, kind, m, n, k, BF16)
    g, eps = _norm_inputs(rng, x, k, BF16)
    p = G.Plan(8, bn, bk, split, False, ticket)
    lead = (2,) if kind == "swiglu" else ()
    part = np.full(lead + (p.split, m, n), np.nan, np.float32)
    count = np.zeros(G.counters(n, p) + 2, np.int32)
    flag = ()
    if kind == "add":
        y = r.copy()
        kernel, args = G.gemv_add, (x, ws[0], y, y, part, count)
        fin, fargs = G.gemv_combine_add, (part, y, y)
    elif kind == "swiglu":
        y = np.full((m, n), np.nan, BF16)
        kernel, args = G.gemv_swiglu, (x, g, eps, ws[0], ws[1], y, part, count)
        fin, fargs = G.gemv_combine_swiglu, (part, y)
        flag = (norm,)
    else:
        y = np.full((m, n), np.nan, BF16)
        kernel, args = G.gemv, (x, g, eps, ws[0], y, part, count)
        fin, fargs = G.gemv_combine, (part, y)
        flag = (norm,)
    launches = [(kernel, args + tuple(p) + flag, G.grid(n, p))]
    if split > 1 and not ticket:
        ctiles = G.combine_tiles(m, n, p)
        launches.append((fin, fargs + ctiles, (ct.cdiv(n, ctiles[2]),)))
    for kern, a, grid in launches:
        grid = tuple(grid) + (1,) * (3 - len(grid))
        ck = kern.compile(a, "gpu", target="sm_90a", grid=grid, sm_count=132)
        simulate(ck, hardware_grid(ck.meta, grid), a)
    _check(y, _ref(_normed_ref(x, g, eps, BF16) if norm else x, ws, r, BF16), BF16)
    assert not count.any(), count


# ---------------------------------------------------------------- sweep candidates

_KINDS = {(6144, 4096): "linear", (4096, 4096): "add", (4096, 14336): "add",
          (14336, 4096): "swiglu"}
CANDIDATES = [pytest.param(n, k, c, id=f"{_KINDS[n, k]}{n}x{k}-{c.name}")
              for (n, k), cs in G.CANDIDATES.items() for c in cs]
# The candidates whose compiles (and, the first two, simulator runs) the fast tier kept
# until session 24 (now none: `_tiered(CANDIDATES, 0)` below says why):
# each option path once (the fused SwiGLU walked persistent; a split K of 4 finished by
# the ticket, persistent; two warps a mma.sync block, persistent; a deep ring with its
# early weight loads); the others, the same paths at other tiles, wait for `--full`.
# In --full (0.8 s): the compile of "32x128/s8", the same 8-stage mma.sync ring without
# early loads; [linear6144x4096-32x128/s8/early] keeps the ring's depth (its stages are
# checked alike) in the fast tier.  In --full too (1.4 s): the compile of
# "32x256/s8/w2/pers", two warps a mma.sync block walked persistent: the fast tier keeps
# the persistent walk's code ([...-64x128/k4/s6/pers], [...-fused/64x128/s4/pers], and
# both in the simulator), the 8-stage mma.sync ring ([linear6144x4096-32x128/s8/early])
# and its plan's numbers (test_candidates_against_float64[...-32x256/s8/w2/pers])
_FAST_CANDIDATES = ("fused/64x128/s4/pers", "64x128/k4/s6/pers", "32x128/s8/early",
                    "32x256/s8/w2/pers", "32x128/s8")


def _tiered(cases, fast: int):
    """cases, all but those of the first `fast` names of _FAST_CANDIDATES marked slow."""
    keep = _FAST_CANDIDATES[:fast]
    return [c if c.values[2].name in keep else
            pytest.param(*c.values, id=c.id, marks=pytest.mark.slow) for c in cases]


def _kind_of(n, k, c):
    return "fused" if c.fused else _KINDS[n, k]


@pytest.mark.parametrize("n,k,c", CANDIDATES)
def test_candidates_against_float64(n, k, c):
    """Each sweep candidate's plan and options in the interpreter, on a ragged shape of
    its own tiles: 2.5 weight-row tiles plus one row, K of 2 x SPLIT tiles and a partial
    one (each split's run ends ragged or short), 1 row (and 3 on the tensor cores),
    bf16 and NaN-poisoned outputs against float64 (the persistent walk itself runs in the
    simulator below: the interpreter runs the user's grid)."""
    rng = np.random.default_rng()
    p, kind = c.plan, _kind_of(n, k, c)
    nn = 2 * p.bn + p.bn // 2 + 1
    kk = 2 * p.split * p.bk + p.bk // 2 + 3
    for m in (1,) if p.fma else (1, 3):
        x, ws, r = _inputs(rng, kind, m, nn, kk, BF16)
        y = _run(kind, x, ws, r, p, BF16, hints=c)
        _check(y, _ref(x, ws, r, BF16), BF16)


# Since session 24 every candidate's compile and simulator run in --full (the family's
# SASS and simulator proofs beyond its first): the fast tier keeps each candidate's plan
# and options in the interpreter (test_candidates_against_float64) and the family's
# tensor-core SASS (test_tensor_core_plan_streams_weights_through_tma_rings[qkv-1])
@pytest.mark.parametrize("n,k,c", _tiered(CANDIDATES, 0))
def test_candidates_compile_for_sm90a_without_spills(n, k, c, tmp_path):
    """Each candidate at its Llama-3-8B width, sm_90a: no local memory, the ring depth
    it asks (tensor cores: TMA into `stages` slots, HGMMA or HMMA) or the FMA form's
    16-byte loads, a persistent kernel where it asks one, and shared memory an SM
    holds."""
    p, kind = c.plan, _kind_of(n, k, c)
    kernel, args = _llama_args(kind, 1, n, k, p)
    kernel = kernel.replace_hints(l2_prefetch=True, **c.hints(kernel))
    grid = G.grid(n, p)
    ck = _compile(kernel, args, grid)
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      ck.ptxas_report) == [("0", "0")], ck.ptxas_report
    assert bool(ck.meta.get("persistent")) == c.persistent
    assert ck.meta["shared_bytes"] <= G.SM_SHARED - 1024
    ops = collections.Counter(op.split(".")[0] for _, op, _ in
                              _instructions(_sass_text(ck.cubin, tmp_path)))
    assert not ops["LDL"] and not ops["STL"], ops
    if p.fma:
        assert ops["LDG"] and not ops["UTMALDG"], ops
        return
    ring = _compile(kernel, args, grid, "pipeline").ir()
    stages = [int(v) for v in re.findall(r'"tile.ring_alloc"\(\) \{stages = (\d+)', ring)]
    assert stages and set(stages) == {c.stages or G.STAGES}, stages
    assert ops["UTMALDG"] and ops["HGMMA" if p.bn >= 64 else "HMMA"], ops
    if c.early:         # its first weight tiles issued before the wait, the rows' after
        before, after, waits = _early_ptx(ck)
        assert waits == 1 and len(before) == (c.stages - 1) * (p.bk * 2 // 128)
        assert len(set(before)) == 1 and set(after) - set(before)


@pytest.mark.parametrize("n,k,c", _tiered(CANDIDATES, 0))        # (see above)
def test_candidates_in_the_simulator(n, k, c):
    """The candidates' sm_90a code in tileir.sim on a ragged grid (4 weight-row tiles, the
    last partial, times the split; K of 2 x SPLIT tiles, the last partial): a persistent
    one on 3 blocks, each walking several tiles with its ring running on across them
    (and, split, across the tiles' K runs; the tickets drawn inside the walk), the
    counters back at zero, 3 rows (1 on the FMA form) against float64."""
    from tileir.kernel import hardware_grid
    from tileir.sim import simulate
    rng = np.random.default_rng()
    p, kind = c.plan, _kind_of(n, k, c)
    m, nn, kk = 1 if p.fma else 3, 3 * p.bn + p.bn // 2, 2 * p.split * p.bk - p.bk // 2 + 8
    x, ws, r = _inputs(rng, kind, m, nn, kk, BF16)
    lead = (2,) if kind in ("swiglu", "fused") else ()
    part = np.full(lead + (p.split, m, nn), np.nan, np.float32)
    count = np.zeros(G.counters(nn, p) + 2, np.int32)
    if kind == "add":
        y = r.copy()
        kernel, args = G.gemv_add, (x, ws[0], y, y, part, count) + tuple(p)
    else:
        y = np.full((m, nn), np.nan, BF16)
        kernel = {"linear": G.gemv, "swiglu": G.gemv_swiglu,
                  "fused": G.gemv_swiglu_fused}[kind]
        args = (x, x, 0.0) + tuple(ws) + (y, part, count) + tuple(p) + (False,)
    kernel = kernel.replace_hints(**c.hints(kernel))
    grid = G.grid(nn, p) + (1,)
    ck = kernel.compile(args, "gpu", target="sm_90a", grid=grid, sm_count=132)
    assert bool(ck.meta.get("persistent")) == c.persistent
    simulate(ck, hardware_grid(ck.meta, grid), args, sm_count=3)
    _check(y, _ref(x, ws, r, BF16), BF16)
    assert not count.any(), count


# ---------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 7, 16])
@pytest.mark.parametrize("kind,n,k", LLAMA + [("linear", 128256 // 8, 4096)],
                         ids=["qkv", "o", "gate_up", "down", "head_slice"])
def test_plan_on_the_gpu_against_torch(kind, n, k, m):
    """The Backend's route (plan, l2_prefetch, combine) at Llama-3-8B widths against a
    float32 torch product of the same bf16 inputs."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tileir.llm.backend import Backend
    b = Backend("cuda", "bfloat16")
    b.decode_gemv = True
    g = torch.Generator(device="cuda").manual_seed(m * 7919 + n)
    x = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    ws = [(torch.randn(n, k, device="cuda", generator=g) / k ** 0.5).to(torch.bfloat16)
          for _ in range(2 if kind == "swiglu" else 1)]
    gf = [x.float() @ w.float().T for w in ws]
    if kind == "swiglu":
        gt, ut = (t.to(torch.bfloat16).float() for t in gf)
        ref = torch.nn.functional.silu(gt) * ut
        y = b.linear_swiglu(x, ws[0], ws[1])
    elif kind == "add":
        r = torch.randn(m, n, device="cuda", generator=g).to(torch.bfloat16)
        ref = gf[0] + r.float()
        y = b.linear(x, ws[0], residual=r)
    else:
        ref = gf[0]
        y = b.linear(x, ws[0], out=torch.full((m, n), float("nan"), device="cuda",
                                                dtype=torch.bfloat16))
    torch.cuda.synchronize()
    assert not y.isnan().any()
    err = ((y.float() - ref).abs().max() / ref.abs().max().clamp(min=1.0)).item()
    assert err < 2e-2, err


def _gpu_gemv(torch, kind, p: G.Plan, x, ws, y, count, hints=None):
    """One decode GEMV as Backend._gemv launches it on the GPU (l2_prefetch; the combine
    launch after a split K without the ticket); y: the output (for "add" the residual,
    updated in place); hints: a sweep candidate's options ("fused" in kind: both
    weights through one ring)."""
    m, n = x.shape[0], ws[0].shape[0]
    lead = (2,) if kind in ("swiglu", "fused") else ()
    part = torch.full(lead + (p.split, m, n), float("nan"), device="cuda",
                      dtype=torch.float32)
    if kind == "add":
        kernel, args, fin = G.gemv_add, (x, ws[0], y, y, part, count), \
            (G.gemv_combine_add, (part, y, y))
    elif kind in ("swiglu", "fused"):
        kernel = G.gemv_swiglu if kind == "swiglu" else G.gemv_swiglu_fused
        args = (x, x, 0.0, ws[0], ws[1], y, part, count)
        fin = (G.gemv_combine_swiglu, (part, y))
    else:
        kernel, args, fin = G.gemv, (x, x, 0.0, ws[0], y, part, count), \
            (G.gemv_combine, (part, y))
    flag = () if kind == "add" else (False,)
    if isinstance(hints, G.Candidate):       # its options for this kernel
        hints = hints.hints(kernel)
    ct.launch(None, G.grid(n, p), kernel.replace_hints(l2_prefetch=True, **(hints or {})),
              args + tuple(p) + flag)
    if p.split > 1 and not p.ticket:
        ctiles = G.combine_tiles(m, n, p)
        ct.launch(None, (ct.cdiv(n, ctiles[2]),), fin[0], fin[1] + ctiles)


@pytest.mark.gpu
@pytest.mark.parametrize("n,k,c", CANDIDATES)
def test_candidates_on_the_gpu_against_torch(n, k, c):
    """Each sweep candidate as the sweep launches it (its options, l2_prefetch) at its
    Llama-3-8B width, one row: twice on the same counters (back at zero after each),
    NaN-poisoned outputs, within rounding of a float32 torch product of the same bf16
    inputs; a persistent kernel walks the whole grid on one block an SM."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    kind, p = _kind_of(n, k, c), c.plan
    gen = torch.Generator(device="cuda").manual_seed(n + k + p.bn * p.bk + p.split)
    bf = torch.bfloat16
    count = torch.zeros(G.counters(n, p) + 7, device="cuda", dtype=torch.int32)
    for _ in range(2):
        x = torch.randn(1, k, device="cuda", generator=gen).to(bf)
        ws = [(torch.randn(n, k, device="cuda", generator=gen) / k ** 0.5).to(bf)
              for _ in range(2 if kind in ("swiglu", "fused") else 1)]
        r = torch.randn(1, n, device="cuda", generator=gen).to(bf)
        y = r.clone() if kind == "add" else \
            torch.full((1, n), float("nan"), device="cuda", dtype=bf)
        _gpu_gemv(torch, kind, p, x, ws, y, count, hints=c)
        torch.cuda.synchronize()
        gf = [x.float() @ w.float().T for w in ws]
        if kind in ("swiglu", "fused"):
            gt, ut = (t.to(bf).float() for t in gf)
            ref = torch.nn.functional.silu(gt) * ut
        else:
            ref = gf[0] + (r.float() if kind == "add" else 0.0)
        assert not y.isnan().any() and not count.any()
        err = ((y.float() - ref).abs().max() / ref.abs().max().clamp(min=1.0)).item()
        assert err < 2e-2, err


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 5])
@pytest.mark.parametrize("kind,n,k,p", [
    ("add", 4096, 4096, G.SWEPT[4096, 4096]), ("add", 4096, 14336, G.SWEPT[4096, 14336]),
    ("swiglu", 14336, 4096, G.Plan(8, 64, 128, 2, False, True)),
    ("linear", 6144, 4096, G.Plan(8, 32, 128, 4, False, True)),
    ("linear", 6144, 4096, G.Plan(1, 8, 512, 2, True, True))],
    ids=["o", "down", "gate_up_split2", "qkv_split4", "qkv_fma_split2"])
def test_ticket_on_the_gpu_matches_the_combine(kind, n, k, p, m):
    """The one-launch split K at Llama-3-8B widths: the combine launch's bits, run after
    run on the same counters, and replayed in a CUDA graph (new inputs copied in before
    each replay) the same again; the counters at zero after each; within rounding of a
    float32 torch product of the same bf16 inputs."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    if p.fma and m > 1:
        pytest.skip("the FMA form takes one row")
    gen = torch.Generator(device="cuda").manual_seed(m * 7919 + n + k + p.split)
    bf = torch.bfloat16

    def inputs():
        x = torch.randn(m, k, device="cuda", generator=gen).to(bf)
        ws = [(torch.randn(n, k, device="cuda", generator=gen) / k ** 0.5).to(bf)
              for _ in range(2 if kind == "swiglu" else 1)]
        r = torch.randn(m, n, device="cuda", generator=gen).to(bf)
        return x, ws, r

    def reference(x, ws, r):
        gf = [x.float() @ w.float().T for w in ws]
        if kind == "swiglu":
            gt, ut = (t.to(bf).float() for t in gf)
            return torch.nn.functional.silu(gt) * ut
        return gf[0] + (r.float() if kind == "add" else 0.0)

    def fresh_y(r):
        return r.clone() if kind == "add" else \
            torch.full((m, n), float("nan"), device="cuda", dtype=bf)

    count = torch.zeros(G.counters(n, p) + 7, device="cuda", dtype=torch.int32)
    two_launch = p._replace(ticket=False)
    for _ in range(2):                                 # the counters reset themselves
        x, ws, r = inputs()
        one, two = fresh_y(r), fresh_y(r)
        _gpu_gemv(torch, kind, p, x, ws, one, count)
        _gpu_gemv(torch, kind, two_launch, x, ws, two, count)
        torch.cuda.synchronize()
        assert not one.isnan().any() and torch.equal(one, two)
        assert not count.any()
        ref = reference(x, ws, r)
        err = ((one.float() - ref).abs().max() / ref.abs().max().clamp(min=1.0)).item()
        assert err < 2e-2, err
    # a CUDA graph of the one launch, replayed on new inputs copied into its buffers
    x, ws, r = inputs()
    y = fresh_y(r)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        _gpu_gemv(torch, kind, p, x, ws, y, count)     # compiled before the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            _gpu_gemv(torch, kind, p, x, ws, y, count)
    torch.cuda.synchronize()
    for _ in range(4):
        x2, ws2, r2 = inputs()
        x.copy_(x2)
        for w, w2 in zip(ws, ws2):
            w.copy_(w2)
        y.copy_(fresh_y(r2))
        graph.replay()
        two = fresh_y(r2)
        _gpu_gemv(torch, kind, two_launch, x2, ws2, two, count)
        torch.cuda.synchronize()
        assert torch.equal(y, two) and not count.any()


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 5, 16])
@pytest.mark.parametrize("n,k,split1", [(4096, 4096, False), (4096, 14336, False),
                                        (4096, 4096, True)], ids=["o", "down", "o_split1"])
def test_norm_tail_on_the_gpu_matches_the_two_kernels(n, k, split1, m):
    """gemv_add_norm at Llama-3-8B's O and down (the swept plan Backend takes at one
    row, its rows widened to m: K split in two with the tiles' tickets; or whole, every
    block taking the grid's ticket)
    against the two-kernel path (gemv_add of the same plan, then the rmsnorm launch as
    Backend.rmsnorm makes it): the residual bit for bit and the normed rows within one
    bf16 step of them (the tail sums a row's squares over its block's threads, the
    rmsnorm launch over its own: their f32 sums may part in the last bit, and a row's
    outputs then round apart here and there: on the H200, 2026-11-29, 3 of 65536 in
    one of six draws), run after run on the same counters (at zero after each), then
    replayed in a CUDA graph on new inputs copied in; the normed rows within bf16
    rounding of float64."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tileir.examples.rmsnorm import rmsnorm
    p = G.plan(1, n, k)._replace(bm=max(8, G.next_pow2(m)))    # the swept plan's blocks
    if split1:
        p = p._replace(split=1, ticket=False)
    assert G.norm_tail_fits(n, p)
    gen = torch.Generator(device="cuda").manual_seed(m * 7919 + n + k + split1)
    bf, eps = torch.bfloat16, 1e-5
    count = torch.zeros(G.counters(n, p, tail=True) + 7, device="cuda", dtype=torch.int32)

    def inputs():
        x = torch.randn(m, k, device="cuda", generator=gen).to(bf)
        w = (torch.randn(n, k, device="cuda", generator=gen) / k ** 0.5).to(bf)
        r = (3 * torch.randn(m, n, device="cuda", generator=gen)).to(bf)
        g = (0.5 + torch.rand(n, device="cuda", generator=gen)).to(bf)
        return x, w, r, g

    def part():
        return torch.full((p.split, m, n), float("nan"), device="cuda", dtype=torch.float32)

    def tail(x, w, y, g, out):
        ct.launch(None, G.grid(n, p), G.gemv_add_norm.replace_hints(l2_prefetch=True),
                  (x, w, y, y, part(), count, g, eps, out) + tuple(p) + (G.next_pow2(n),))

    def two(x, w, r, g):
        y = r.clone()
        ct.launch(None, G.grid(n, p), G.gemv_add.replace_hints(l2_prefetch=True),
                  (x, w, y, y, part(), count) + tuple(p))
        out = torch.full((m, n), float("nan"), device="cuda", dtype=bf)
        ct.launch(None, (m,), rmsnorm, (y, g, out, eps, G.next_pow2(n)))
        return y, out

    for _ in range(2):
        x, w, r, g = inputs()
        y, out = r.clone(), torch.full((m, n), float("nan"), device="cuda", dtype=bf)
        tail(x, w, y, g, out)
        y2, out2 = two(x, w, r, g)
        torch.cuda.synchronize()
        assert not out.isnan().any() and not count.any()
        _bitwise(torch, y, y2, "y")
        _within_a_step(torch, out, out2, "out")
        y64 = y.double()
        ref = y64 / torch.sqrt((y64 * y64).mean(1, keepdim=True) + eps) * g.double()
        assert ((out.double() - ref).abs().max() / ref.abs().max()).item() < 1e-2
    x, w, r, g = inputs()
    y, out = r.clone(), torch.full((m, n), float("nan"), device="cuda", dtype=bf)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        tail(x, w, y, g, out)                          # compiled before the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            tail(x, w, y, g, out)
    torch.cuda.synchronize()
    for _ in range(4):
        x2, w2, r2, g2 = inputs()
        for a, b in ((x, x2), (w, w2), (y, r2), (g, g2)):
            a.copy_(b)
        out.fill_(float("nan"))
        graph.replay()
        y2, out2 = two(x2, w2, r2, g2)
        torch.cuda.synchronize()
        _bitwise(torch, y, y2, "y (graph)")
        _within_a_step(torch, out, out2, "out (graph)")
        assert not count.any()


def _within_a_step(torch, got, want, what):
    """got and want (bf16) at most one representable step apart anywhere, and equal in
    all but a few of every thousand elements."""
    step = torch.finfo(torch.bfloat16).eps * want.float().abs().clamp_min(
        torch.finfo(torch.bfloat16).tiny)
    diff = (got.float() - want.float()).abs()
    apart = int((diff > 0).sum())
    assert (diff <= step).all() and apart <= got.numel() // 1000, (
        f"{what}: {apart} of {got.numel()} elements differ, at most by "
        f"{diff.max().item():.3g} ({(diff / step).max().item():.2f} steps)")


def _bitwise(torch, got, want, what):
    """got == want bit for bit; else how many elements differ, where, and by how much."""
    if torch.equal(got, want):
        return
    bad = (got != want).nonzero()
    diff = (got.double() - want.double()).abs()
    raise AssertionError(f"{what}: {bad.shape[0]} of {got.numel()} elements differ (rows "
                         f"{sorted(set(bad[:, 0].tolist()))[:16]}), at most by "
                         f"{diff.max().item():.3g} (largest value {want.abs().max().item():.3g})")


def _llama_against_transformers(tmp_path, dtype, switches) -> set:
    """Llama-3-8B widths, two layers, the backend's `switches` on, one sequence at a
    time so that every decode step's GEMMs are one-row products (where the GPU takes
    the GEMVs: gemv.SWEPT).  bf16: eight one-token prompts, each alone, their logits
    against transformers' fp32 within twice its own bf16 run's error, as test_gpu_llm;
    float32: 32 greedy tokens of two prompts, each generated alone (the exact FMA
    GEMVs), identical to transformers' generate.  Returns the (kernel name, last
    argument) pairs launched."""
    import gc
    import shutil
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from test_gpu_llm import (LLAMA3_8B_2L, _hf_last_logits, _ours_last_logits, _rel,
                              _save_hf)
    from tileir.llm import LLM
    raw = LLAMA3_8B_2L
    rng = np.random.default_rng()
    try:
        model = _save_hf(raw, tmp_path, torch.float32)
        if dtype == "bfloat16":
            prompts = [[int(t)] for t in rng.integers(0, raw["vocab_size"], 8)]
            fp32 = _hf_last_logits(model, prompts)
            hf16 = _hf_last_logits(model.to(torch.bfloat16), prompts)
        else:
            torch.backends.cuda.matmul.allow_tf32 = False
            prompts = [rng.integers(0, raw["vocab_size"], n).tolist() for n in (5, 64)]
            with torch.no_grad():
                theirs = []
                for p in prompts:
                    ids = torch.tensor([p], device="cuda")
                    out = model.generate(ids, attention_mask=torch.ones_like(ids),
                                         do_sample=False, max_new_tokens=32,
                                         min_new_tokens=32)
                    theirs.append(out[0, len(p):].tolist())
        del model
        gc.collect()
        torch.cuda.empty_cache()
        llm = LLM(str(tmp_path), dtype=dtype, max_model_len=512, max_batch=8)
        be = llm.backend
        for name in switches:
            setattr(be, name, True)
        launched = set()
        run = be._launch
        # (name, last argument); gemv_qkv_rope's NORM flag sits before its head dim
        be._launch = lambda grid, kernel, args: (
            launched.add((kernel.name, args[-2 if kernel.name == "gemv_qkv_rope" else -1])),
            run(grid, kernel, args))
        if dtype == "bfloat16":
            ours = torch.cat([_ours_last_logits(llm, [p]) for p in prompts])
            assert torch.isfinite(ours).all()
            err, hf_err = _rel(ours, fp32), _rel(hf16, fp32)
            assert err < max(2 * hf_err, 1e-3) and err < 2e-2, (err, hf_err)
        else:
            ours = [llm.generate([p], max_new_tokens=32, ignore_eos=True)[0].token_ids
                    for p in prompts]
            assert ours == theirs
        return launched
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_llama_on_decode_gemvs_matches_transformers(tmp_path, dtype):
    """Backend.decode_gemv on: QKV, O, gate/up and down of the one-row steps on the
    GEMVs (asserted from the launches; a decode step's QKV on gemv_qkv_rope, `qkv_rope`'s
    default), the model against transformers (`_llama_against_transformers`)."""
    launched = _llama_against_transformers(tmp_path, dtype, ("decode_gemv",))
    names = {name for name, _ in launched}
    # a one-token prompt's QKV runs on gemv (RoPE and the cache write after it), a decode
    # step's on gemv_qkv_rope (float32's 32 greedy steps; bfloat16 times prompts only)
    qkv = "gemv" if dtype == "bfloat16" else "gemv_qkv_rope"
    assert {qkv, "gemv_add", "gemv_swiglu"} <= names, names


def _torch_normed(torch, x, g, eps):
    """RMSNorm(x) * g in float32, rounded to x's dtype as tileir.examples.rmsnorm's
    output (the reference's GEMV input)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * g.float()).to(x.dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("plan_of", ["route", "rule"])
@pytest.mark.parametrize("m", [1, 7, 16])
@pytest.mark.parametrize("kind,n,k", [("linear", 6144, 4096), ("swiglu", 14336, 4096),
                                      ("fused", 14336, 4096), ("linear", 4096, 4096)],
                         ids=["qkv", "gate_up", "gate_up_fused", "square_split"])
def test_norm_gemvs_on_the_gpu_against_torch(kind, n, k, m, plan_of):
    """NORM on the GPU at Llama-3-8B widths, the kernels launched as Backend._gemv does:
    "route" the plan the backend takes (one row: the swept plans, QKV on the FMA units;
    more rows: the rule's), "rule" the rule's tensor-core plan (wgmma at 64 rows,
    mma.sync at 16 or 32, the 4096-wide product split in two); against a float32 torch
    product of the separately normed bf16 rows."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    if kind == "fused" and plan_of == "route":
        pytest.skip("gemv_swiglu_fused is not the backend's route")
    if plan_of == "route" and m > 1:
        pytest.skip("above one row the route's plan is the rule's")
    p = G.plan(m, n, k, swept=plan_of == "route")
    if kind == "fused" and p.fma:
        pytest.skip("gemv_swiglu_fused has no FMA form")
    gen = torch.Generator(device="cuda").manual_seed(m * 7919 + n + len(kind))
    x = (3 * torch.randn(m, k, device="cuda", generator=gen)).to(torch.bfloat16)
    g = (0.5 + torch.rand(k, device="cuda", generator=gen)).to(torch.bfloat16)
    eps = 1e-5
    ws = [(torch.randn(n, k, device="cuda", generator=gen) / k ** 0.5).to(torch.bfloat16)
          for _ in range(1 if kind == "linear" else 2)]
    y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    lead = () if kind == "linear" else (2,)
    part = torch.full(lead + (p.split, m, n), float("nan"), device="cuda",
                      dtype=torch.float32)
    count = torch.zeros(max(1, G.counters(n, p)), device="cuda", dtype=torch.int32)
    kernel = {"linear": G.gemv, "swiglu": G.gemv_swiglu, "fused": G.gemv_swiglu_fused}[kind]
    fin = G.gemv_combine if kind == "linear" else G.gemv_combine_swiglu
    ct.launch(None, G.grid(n, p), kernel.replace_hints(l2_prefetch=True),
              (x, g, eps, *ws, y, part, count) + tuple(p) + (True,))
    if p.split > 1 and not p.ticket:
        ctiles = G.combine_tiles(m, n, p)
        ct.launch(None, (ct.cdiv(n, ctiles[2]),), fin, (part, y) + ctiles)
    torch.cuda.synchronize()
    assert not count.any()
    xn = _torch_normed(torch, x, g, eps).float()
    gf = [xn @ w.float().T for w in ws]
    if kind == "linear":
        ref = gf[0]
    else:
        gt, ut = (t.to(torch.bfloat16).float() for t in gf)
        ref = torch.nn.functional.silu(gt) * ut
    assert not y.isnan().any()
    err = ((y.float() - ref).abs().max() / ref.abs().max().clamp(min=1.0)).item()
    assert err < 2e-2, err
    # x itself (no norm) is far off: the prologue's norm is applied
    raw = x.float() @ ws[0].float().T
    if kind == "linear":
        assert ((y.float() - raw).abs().max() / raw.abs().max()).item() > 0.1


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_llama_with_norms_in_the_gemvs_matches_transformers(tmp_path, dtype):
    """Backend.decode_gemv and gemv_norm on: every one-row step's QKV and gate/up with
    the norm in their prologue (asserted from the launches), the model against
    transformers (`_llama_against_transformers`)."""
    launched = _llama_against_transformers(tmp_path, dtype, ("decode_gemv", "gemv_norm"))
    qkv = "gemv" if dtype == "bfloat16" else "gemv_qkv_rope"     # prompts; decode steps
    assert {(qkv, True), ("gemv_swiglu", True)} <= launched, launched


def test_a_routed_candidate_is_what_the_backend_launches(monkeypatch):
    """gemv.ROUTED names, per one-row shape, the candidate a GPU sweep measured faster:
    Backend launches its plan, its kernel (the fused SwiGLU) and its options (a
    Kernel of their own), and the products are right; other row counts, float32 (the
    FMA form) and unrouted shapes keep their plans; a name no candidate has is an
    error naming the shape's candidates."""
    from tileir.llm.backend import Backend
    rng = np.random.default_rng()
    k, n = 96, 40
    down = G.Candidate("16x32/k3/s6/pers", G.Plan(8, 16, 32, 3, False, True), True, 6)
    fused = G.Candidate("fused/16x32", G.Plan(8, 16, 32, 1, False), False, 4, True)
    monkeypatch.setattr(G, "CANDIDATES", {(n, k): (down,), (2 * n, k): (fused,)})
    monkeypatch.setattr(G, "ROUTED", {(n, k): down.name, (2 * n, k): fused.name})
    b = Backend("numpy", "bfloat16")
    b.decode_gemv = b.gemv_routed = True
    launched = []
    run = b._launch
    b._launch = lambda grid, kernel, args: (launched.append((kernel.name, grid,
                                                             dict(kernel.options))),
                                            run(grid, kernel, args))
    x = b.asarray(rng.standard_normal((1, k)))
    w = b.asarray(rng.standard_normal((n, k)) / 8)
    r = b.asarray(rng.standard_normal((1, n)))
    ref = x.astype(np.float64) @ w.astype(np.float64).T + r.astype(np.float64)
    b.linear(x, w, residual=r)
    _check(r, ref, b.dtype)
    (name, grid, options), = launched
    assert name == "gemv_add" and grid == G.grid(n, down.plan)
    assert options["persistent"] and options["num_stages"] == 6
    launched.clear()
    wg, wu = (b.asarray(rng.standard_normal((2 * n, k)) / 8) for _ in range(2))
    y = b.linear_swiglu(x, wg, wu)
    g64 = x.astype(np.float64) @ wg.astype(np.float64).T
    u64 = x.astype(np.float64) @ wu.astype(np.float64).T
    _check(y, g64 / (1 + np.exp(-g64)) * u64, b.dtype)
    assert [(nm, o.get("num_stages")) for nm, _, o in launched] == [("gemv_swiglu_fused", 4)]
    launched.clear()
    b.linear(b.asarray(rng.standard_normal((2, k))), w, residual=b.asarray(
        rng.standard_normal((2, n))))                   # two rows: the plan's rule
    assert [(nm, "persistent" in o) for nm, _, o in launched] == [("gemv_add", False)]
    launched.clear()
    b.gemv_routed = False                                # the default: the plan's kernel
    b.linear(x, w, residual=r)
    assert [(nm, g, "persistent" in o) for nm, g, o in launched] == [
        ("gemv_add", G.grid(n, b._plan(1, n, k)), False)]
    b.gemv_routed = True
    launched.clear()
    f32 = Backend("numpy", "float32")
    f32.decode_gemv = True
    assert f32._plan(1, n, k) == G.plan(1, n, k, exact=True, on_gpu=False)
    monkeypatch.setattr(G, "ROUTED", {(n, k): "no such plan"})
    with pytest.raises(ValueError, match=r"16x32/k3/s6/pers"):
        b.linear(x, w, residual=r)


# ------------------------------------------------------------ early weight loads
# The `early_loads` option on the GEMVs' weights (gemv.early_loading,
# Backend.gemv_early_loads; backend/pipeline/software_pipeline.py `load_early`): the
# first ring's first S - 1 weight tiles issued before the grid-dependency wait.

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global"      # (not the TMA store)
_MAP = re.compile(r"\[(%rd\d+), \{[^}]*\}\]")


def _early_ptx(ck):
    """(TMA loads before the wait, after it) of `ck`'s PTX, each as its tensor map
    register; the wait's count."""
    ptx = ck.artifacts["ptx"].splitlines()
    waits = [i for i, line in enumerate(ptx) if "griddepcontrol.wait" in line]
    loads = [(i, _MAP.search(line).group(1)) for i, line in enumerate(ptx) if TMA_LOAD in line]
    at = waits[0] if waits else -1
    return [m for i, m in loads if i < at], [m for i, m in loads if i > at], len(waits)


# In --full (1.6 s): down, the same prologue's early loads on gemv_add (3 stages of
# 64 x 256 tiles); [o] keeps that path in the fast tier, [gate_up] the producer warps'.
# Since session 24 every case in --full (the family's SASS proofs beyond its first): the
# fast tier keeps early_loads' PTX (test_early_loads_change_nothing_without_a_programmatic
# _launch), its refusal (test_early_loads_refuses_an_array_the_kernel_writes) and its
# launches in the interpreter (test_backend_launches_the_gemvs_with_early_loads)
@pytest.mark.slow
@pytest.mark.parametrize("kind,n,k,p,threads", [
    ("add", 4096, 4096, G.SWEPT[4096, 4096], 128),          # O: the prologue, 4 stages
    pytest.param("add", 4096, 14336, G.SWEPT[4096, 14336], 128,
                 marks=pytest.mark.slow),                   # down: 3 stages, 64 x 256
    ("swiglu", 14336, 4096, G.SWEPT[14336, 4096], 256),     # gate/up: the producer warps
    pytest.param("linear", 6144, 4096, G.Plan(8, 32, 128, 1, False), 32,
                 marks=pytest.mark.slow)],                  # QKV's ring form: mma.sync
    ids=["o", "down", "gate_up", "qkv_ring"])
def test_early_loads_issue_the_weight_tiles_before_the_wait(kind, n, k, p, threads,
                                                             tmp_path):
    """Llama-3-8B's one-row GEMVs with early_loads on their weights, sm_90a: the PTX
    issues (S - 1) x (boxes of a weight tile) TMA loads before `griddepcontrol.wait`,
    all through one tensor map (the weight's; gemv_swiglu: its first loop's, W_g), and
    the activation rows' loads, through another map, after it; ptxas keeps that order
    (every early UTMALDG before ACQBULK, the wait, and PREEXIT, the release of the
    next kernel) and spills nothing."""
    kernel, args = _llama_args(kind, 1, n, k, p)
    ck = _compile(G.early_loading(kernel), args, G.grid(n, p))
    assert ck.meta["num_threads"] == threads
    ring = _compile(G.early_loading(kernel), args, G.grid(n, p), "pipeline").ir()
    stages = int(re.search(r'"tile.ring_alloc"\(\) \{stages = (\d+)', ring).group(1))
    before, after, waits = _early_ptx(ck)
    boxes = p.bk * 2 // 128                   # 128-byte swizzle rows of a bf16 tile
    assert waits == 1
    assert len(before) == (stages - 1) * boxes, (len(before), stages)
    assert len(set(before)) == 1              # the weight's map only
    assert set(after) - set(before), "the activation rows' loads follow the wait"
    # the plain kernel issues the same loads, all after its wait
    plain_before, plain_after, _ = _early_ptx(_compile(kernel, args, G.grid(n, p)))
    assert not plain_before and len(plain_after) == len(before) + len(after)
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      ck.ptxas_report) == [("0", "0")], ck.ptxas_report
    ops = [op for _, op, _ in _instructions(_sass_text(ck.cubin, tmp_path))]
    at = {name: [i for i, op in enumerate(ops) if op.split(".")[0] == name]
          for name in ("UTMALDG", "ACQBULK", "PREEXIT", "LDL", "STL")}
    assert len(at["ACQBULK"]) == 1 and not at["LDL"] and not at["STL"], at
    early = [i for i in at["UTMALDG"] if i < at["ACQBULK"][0]]
    assert len(early) == len(before), (len(early), len(before))
    assert at["ACQBULK"][0] < at["PREEXIT"][0]


def test_early_loads_change_nothing_without_a_programmatic_launch():
    """A kernel launched plainly (`programmatic_launch=False`: no wait, the kernel
    starts after the one before it ends) compiles with early_loads as without; and
    without the option, the GEMVs' PTX is the plain kernel's (`early_loads=()`)."""
    p = G.SWEPT[4096, 4096]
    kernel, args = _llama_args("add", 1, 4096, 4096, p)
    grid = G.grid(4096, p)
    plain = kernel.replace_hints(programmatic_launch=False)
    # the PTX stage: the option's effect is the PTX's, ptxas adds nothing to compare
    ptx = _compile(plain, args, grid, "ptx").artifacts["ptx"]
    early = _compile(G.early_loading(plain), args, grid, "ptx").artifacts["ptx"]
    assert "griddepcontrol" not in early and early == ptx
    assert _compile(kernel.replace_hints(early_loads=()), args, grid, "ptx").artifacts[
        "ptx"] == _compile(kernel, args, grid, "ptx").artifacts["ptx"]


# In --full (2.1 s): mma_sync_split, early loads on a mma.sync ring split by the ticket;
# [o_prologue] keeps a ticket's split (runs shorter than the ring's prologue) with early
# loads in the simulator, test_generated_code_in_the_simulator[linear-16-256-2-False-True]
# the mma.sync ring's ticket there, and test_candidates_compile_for_sm90a_without_spills
# [linear6144x4096-32x128/s8/early] early loads on a mma.sync ring in the fast tier.
# Since session 24 every case in --full (the family's simulator runs beyond its first
# two): the fast tier keeps early_loads' PTX order
# (test_early_loads_change_nothing_without_a_programmatic_launch) and its answers in the
# interpreter, bit for bit those without it (test_backend_launches_the_gemvs_with_early_loads)
@pytest.mark.slow
@pytest.mark.parametrize("kind,p,hints,norm", [
    ("add", G.Plan(8, 64, 128, 2, False, True), {"warp_specialize": False}, False),
    ("add", G.Plan(8, 64, 128, 2, False, True), {"warp_specialize": True}, False),
    ("swiglu", G.Plan(8, 64, 128, 1, False), {}, False),
    pytest.param("linear", G.Plan(8, 16, 256, 2, False, True), {}, False,
                 marks=pytest.mark.slow),
    ("linear", G.Plan(8, 64, 128, 1, False), {}, True)],
    ids=["o_prologue", "o_producer", "gate_up", "mma_sync_split", "normed"])
def test_early_loads_in_the_simulator(kind, p, hints, norm, rng):
    """sm_90a code with early_loads in tileir.sim, ragged: 3 rows, 96 weight rows (a
    partial tile), 328 columns (K of three 128-wide tiles, or two 256-wide, the last
    partial: a split's run shorter than the ring's prologue, whose loads past it are
    predicated off), the prologue and the producer warps, gemv_swiglu's two rings (the
    first loaded early), a split finished by the ticket, and the normed rows (from
    registers: a ring of weights alone).  NaN-poisoned outputs against float64, and
    the same bits as the kernel without the option."""
    from tileir.kernel import hardware_grid
    from tileir.sim import simulate
    m, n, k = 3, 96, 328
    x, ws, r = _inputs(rng, kind, m, n, k, BF16)
    g, eps = _norm_inputs(rng, x, k, BF16)
    outs = []
    for early in (False, True):
        lead = (2,) if kind == "swiglu" else ()
        part = np.full(lead + (p.split, m, n), np.nan, np.float32)
        count = np.zeros(G.counters(n, p) + 2, np.int32)
        if kind == "add":
            y = r.copy()
            kernel, args = G.gemv_add, (x, ws[0], y, y, part, count)
        else:
            y = np.full((m, n), np.nan, BF16)
            kernel = G.gemv_swiglu if kind == "swiglu" else G.gemv
            args = (x, g, eps) + tuple(ws) + (y, part, count)
        args += tuple(p) + (() if kind == "add" else (norm,))
        kernel = kernel.replace_hints(**hints)
        if early:
            kernel = G.early_loading(kernel)
        grid = tuple(G.grid(n, p)) + (1,)
        ck = kernel.compile(args, "gpu", target="sm_90a", grid=grid, sm_count=132)
        if early:
            gpu = ck.ir()
            assert gpu.index("griddepcontrol.wait") > gpu.index("nvvm.cp.async.bulk.tensor")
        simulate(ck, hardware_grid(ck.meta, grid), args)
        assert not count.any(), count
        outs.append(y)
    _check(outs[1], _ref(_normed_ref(x, g, eps, BF16) if norm else x, ws, r, BF16), BF16)
    assert np.array_equal(outs[0].view(np.uint16), outs[1].view(np.uint16))


def test_early_loads_refuses_an_array_the_kernel_writes():
    """early_loads on an array the kernel stores to is refused at the pipeline stage,
    naming the argument and showing the store's source line; a name that is no
    parameter, a scalar or a bare string, at the option."""
    from tileir.errors import KernelOptionError, TileIRError
    p = G.SWEPT[4096, 4096]
    kernel, args = _llama_args("add", 1, 4096, 4096, p)
    with pytest.raises(TileIRError) as e:
        _compile(kernel.replace_hints(early_loads=("w", "y")), args, G.grid(4096, p),
                 "pipeline")
    text = str(e.value)
    assert "option early_loads names 'y', which this kernel writes here" in text, text
    assert "gemv.py" in text and "ct.store(y" in text, text
    for bad, what in ((("wt",), "names 'wt', which is not one of its parameters"),
                      (("BN",), "names 'BN', which is not an array here"),
                      ("w", "must be a tuple of argument names")):
        with pytest.raises(KernelOptionError, match=re.escape(what)):
            _compile(kernel.replace_hints(early_loads=bad), args, G.grid(4096, p),
                     "pipeline")


def test_backend_launches_the_gemvs_with_early_loads(rng):
    """Backend.gemv_early_loads: each decode GEMV (gemv, gemv_add, gemv_swiglu,
    gemv_add_norm) launched with early_loads on its weights (gemv.WEIGHTS), one kernel
    object each, none without it; the interpreter's answers are those without it (it
    ignores the option), bit for bit."""
    from tileir.llm.backend import Backend
    x = rng.standard_normal((2, 40)).astype(BF16)
    w, w2 = ((rng.standard_normal((24, 40)) / 8).astype(BF16) for _ in range(2))
    r = rng.standard_normal((2, 24)).astype(BF16)
    g = rng.standard_normal(24).astype(BF16)
    outs = []
    for early in (False, True):
        b = Backend("numpy", "bfloat16")
        b.decode_gemv, b.gemv_norm_tail, b.gemv_early_loads = True, True, early
        launched = []
        run = b._launch
        b._launch = lambda grid, kernel, args: (launched.append(kernel), run(grid, kernel, args))
        res = r.copy()
        outs.append([b.linear(x, w), b.linear_swiglu(x, w, w2), b.linear(x, w),
                     b.linear_add_norm(x, w, res, (g, 1e-5)), res])
        gemvs = [k for k in launched if k.name in G.WEIGHTS]
        assert [k.name for k in gemvs] == ["gemv", "gemv_swiglu", "gemv", "gemv_add_norm"]
        assert all(k.options.get("early_loads") == (G.WEIGHTS[k.name] if early else None)
                   for k in launched), [(k.name, k.options.get("early_loads"))
                                        for k in launched]
        assert gemvs[0] is gemvs[2]             # made once per kernel
    for a, c in zip(*outs):
        assert a is not None and np.array_equal(a.view(np.uint16), c.view(np.uint16))


def _mlp_chain(torch, layers, xs, early: bool, graph: bool):
    """Llama-3-8B's one-row GEMVs in a step's order, each reading the rows the one before
    it wrote (launched programmatically: its blocks wait for that kernel, and with
    `early` load their first weight tiles before the wait): per layer O + residual
    (x += q @ Wo^T, q the layer before's product; the first layer's a copy of xs),
    gate/up + SwiGLU (h), down + residual (x += h @ Wd^T), then a 4096 x 4096 product
    on the tensor cores' ring (q = x @ Wq^T, 32 x 128 tiles: the ring form a QKV
    candidate takes).  h and q NaN-poisoned before the run; `graph`: captured once
    (after a warm-up run outside it), replayed once from the same inputs."""
    bf = torch.bfloat16
    plans = {"o": G.SWEPT[4096, 4096], "down": G.SWEPT[4096, 14336],
             "gate_up": G.SWEPT[14336, 4096], "q": G.Plan(8, 32, 128, 1, False)}
    kernels = {"o": G.gemv_add, "down": G.gemv_add, "gate_up": G.gemv_swiglu, "q": G.gemv}
    kernels = {k: G.early_loading(v) if early else v for k, v in kernels.items()}
    count = torch.zeros(256, device="cuda", dtype=torch.int32)
    parts = {k: torch.full(((2,) if k == "gate_up" else ()) + (p.split, 1, 14336),
                           float("nan"), device="cuda", dtype=torch.float32)
             for k, p in plans.items()}
    x = xs.clone()
    h = torch.full((1, 14336), float("nan"), device="cuda", dtype=bf)
    qs = [torch.full((1, 4096), float("nan"), device="cuda", dtype=bf) for _ in layers]

    x0 = xs.clone()         # the first O's input (never written: O reads it while its
                            # blocks write x, the residual, in place)

    def step():
        src = x0
        for i, (wo, wg, wu, wd, wq) in enumerate(layers):
            ct.launch(None, G.grid(4096, plans["o"]), kernels["o"],
                      (src, wo, x, x, parts["o"], count) + tuple(plans["o"]))
            ct.launch(None, G.grid(14336, plans["gate_up"]), kernels["gate_up"],
                      (x, x, 0.0, wg, wu, h, parts["gate_up"], count)
                      + tuple(plans["gate_up"]) + (False,))
            ct.launch(None, G.grid(4096, plans["down"]), kernels["down"],
                      (h, wd, x, x, parts["down"], count) + tuple(plans["down"]))
            ct.launch(None, G.grid(4096, plans["q"]), kernels["q"],
                      (x, x, 0.0, wq, qs[i], parts["q"], count) + tuple(plans["q"])
                      + (False,))
            src = qs[i]

    if graph:
        step()                              # compiled, warmed up, outside the capture
        torch.cuda.synchronize()
        x.copy_(xs)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                step()
        torch.cuda.synchronize()
        for q in qs:
            q.fill_(float("nan"))
        h.fill_(float("nan"))
        x.copy_(xs)
        g.replay()
    else:
        step()
    torch.cuda.synchronize()
    assert not count.any()
    return x, h, qs


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["eager", "graph", "plain_launch"])
def test_early_loads_on_the_gpu_in_a_chain(mode, monkeypatch):
    """Four layers of the decode step's GEMVs with early_loads on their weights, each
    reading what the kernel before it wrote: the same bits as without the option (the
    activation rows still load after the wait), no NaN left, the first layer within
    rounding of a float32 torch chain of the same bf16 inputs; eager, replayed from a
    CUDA graph, and launched without programmatic stream serialization
    (TILEIR_PROGRAMMATIC_LAUNCH=0: each kernel starts after the one before it ends, its
    wait a no-op, the early loads then just loads)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    graph = mode == "graph"
    gen = torch.Generator(device="cuda").manual_seed(int(np.random.SeedSequence().entropy
                                                         % 2**31))
    bf = torch.bfloat16

    def weight(n, k):
        return (torch.randn(n, k, device="cuda", generator=gen) / k ** 0.5).to(bf)

    layers = [(weight(4096, 4096), weight(14336, 4096), weight(14336, 4096),
               weight(4096, 14336), weight(4096, 4096)) for _ in range(4)]
    xs = torch.randn(1, 4096, device="cuda", generator=gen).to(bf)
    plain = _mlp_chain(torch, layers, xs, early=False, graph=graph)
    if mode == "plain_launch":      # (read when a kernel's dispatcher is made: the early
        monkeypatch.setenv("TILEIR_PROGRAMMATIC_LAUNCH", "0")   # kernels are new objects)
    early = _mlp_chain(torch, layers, xs, early=True, graph=graph)
    for a, b in zip([plain[0], plain[1]] + plain[2], [early[0], early[1]] + early[2]):
        assert not b.isnan().any()
        assert torch.equal(a, b)
    wo, wg, wu, wd, wq = layers[0]
    x1 = (xs.float() @ wo.float().T + xs.float()).to(bf)
    gt, ut = ((x1.float() @ w.float().T).to(bf).float() for w in (wg, wu))
    hh = (torch.nn.functional.silu(gt) * ut).to(bf)
    x2 = hh.float() @ wd.float().T + x1.float()
    q = x2.to(bf).float() @ wq.float().T
    got = early[2][0].float()
    assert ((got - q).abs().max() / q.abs().max()).item() < 3e-2


# ------------------------------------------------- QKV with RoPE and the cache write

def _qkv_rope_inputs(rng, m, hq, hkv, d, k, dtype, pages=6, page=4):
    """Random QKV inputs (x, g, w), RoPE tables at 64 positions, each row's position
    and its slot on shuffled pages, and a cache of random values (the slots the launch
    does not write must keep them)."""
    n = (hq + 2 * hkv) * d
    x = rng.standard_normal((m, k)).astype(dtype)
    g = (1 + 0.1 * rng.standard_normal(k)).astype(dtype)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(dtype)
    ang = rng.uniform(0, 2 * np.pi, (64, d // 2))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    positions = rng.integers(0, 64, m).astype(np.int32)
    slots = rng.permutation(pages * page)[:m].astype(np.int32)
    cache = rng.standard_normal((pages, page, 2 * hkv, d)).astype(dtype)
    return x, g, w, cos, sin, positions, slots, cache


def _qkv_rope_args(inputs, p: G.Plan, norm: bool):
    """gemv_qkv_rope's arguments for inputs (`_qkv_rope_inputs`) and plan p: y and the
    partials NaN-poisoned, the cache a copy; returns (args, y, cache, count)."""
    x, g, w, cos, sin, positions, slots, cache = inputs
    m, n, d = x.shape[0], w.shape[0], cache.shape[3]
    y = np.full((m, n), np.nan, x.dtype)
    part = np.full((p.split, m, n), np.nan, np.float32)
    count = np.zeros(G.counters(n, p) + 2, np.int32)
    c = cache.copy()
    args = (x, g, 1e-5, w, y, part, count, cos, sin, positions, c, slots) + tuple(p) + (
        norm, d)
    return args, y, c, count


def _three_launches(inputs, p: G.Plan, norm: bool):
    """What the fused kernel must equal: `gemv` (the same plan), then `kernels.rope` of
    q and k in place, then `write_slots` of k and v, as Backend.rope_write_slots
    launches them; returns (qkv, cache)."""
    from tileir.examples import next_pow2
    from tileir.llm import kernels as K
    x, g, w, cos, sin, positions, slots, cache = inputs
    m, n = x.shape[0], w.shape[0]
    pages, page, kv2, d = cache.shape
    hq = n // d - kv2
    y = np.full((m, n), np.nan, x.dtype)
    part = np.full((p.split, m, n), np.nan, np.float32)
    count = np.zeros(G.counters(n, p) + 2, np.int32)
    ct.launch(None, G.grid(n, p), G.gemv, (x, g, 1e-5, w, y, part, count) + tuple(p) + (norm,))
    if p.split > 1 and not p.ticket:
        ctiles = G.combine_tiles(m, n, p)
        ct.launch(None, (ct.cdiv(n, ctiles[2]),), G.gemv_combine, (part, y) + ctiles)
    heads = y.reshape(m, -1, d)[:, :hq + kv2 // 2]
    ct.launch(None, (m,), K.rope, (heads, heads, cos, sin, positions, next_pow2(hq + kv2 // 2),
                                   d // 2))
    c = cache.copy()
    tile = min(next_pow2(kv2 * d), 1024)
    ct.launch(None, (m, ct.cdiv(kv2 * d, tile)), K.write_slots,
              (y[:, hq * d:], c.reshape(pages, page, -1), slots, page, tile))
    return y, c


def _check_qkv_rope(inputs, y, c, want_y, want_c, bitwise: bool):
    """The fused launch's qkv rows and cache against the three launches': no NaN left,
    bit for bit (bitwise) or within one bf16 rounding; the slots the rows own written,
    every other slot of the cache as it was."""
    x, *_, slots, cache = inputs
    assert not np.isnan(y.astype(np.float32)).any()
    pages, page = cache.shape[:2]
    flat, was = c.reshape(pages * page, -1), cache.reshape(pages * page, -1)
    rest = np.setdiff1d(np.arange(pages * page), slots)
    assert flat[rest].tobytes() == was[rest].tobytes()
    if bitwise:
        assert y.tobytes() == want_y.tobytes()
        assert c.tobytes() == want_c.tobytes()
        return
    for got, want in ((y, want_y), (c, want_c)):
        got, want = got.astype(np.float64), want.astype(np.float64)
        # one rounding of the larger of the two, and for the rotated heads one rounding of
        # their inputs carried through the rotation: a product row rounded a step apart
        # (its sums in the GPU's order) moves x1 c - x2 s by up to that step of x1 and x2,
        # which cancellation can leave far above the result's own step (a run with seed
        # unknown: 2^-7 apart at |want| ~ 0.6, two steps of the result, 2026-11-29)
        ulp = 2.0 ** -7 if x.dtype == BF16 else 1e-6
        step = ulp * np.maximum(np.abs(want), np.abs(got)) + ulp / 2 * np.abs(want).max()
        assert (np.abs(got - want) <= step + 1e-30).all(), np.abs(got - want).max()


# every product form and finish: FMA at one row (QKV's swept plan, shrunk) and at
# several, the tensor cores' 16-, 32- and 64-row tiles (halves of 8-32 rows), K split
# with the ticket, the norm in the prologue
QKV_ROPE_PLANS = [
    pytest.param(G.Plan(1, 8, 32, 1, True), 1, False, id="fma-1row"),
    pytest.param(G.Plan(4, 8, 32, 1, True), 3, False, id="fma-3rows"),
    pytest.param(G.Plan(4, 16, 32, 2, True, True), 3, True, id="fma-split-norm"),
    pytest.param(G.Plan(8, 16, 32, 2, False, True), 5, False, id="tc16-split"),
    pytest.param(G.Plan(8, 32, 32, 3, False, True), 7, True, id="tc32-split3-norm"),
    pytest.param(G.Plan(16, 64, 32, 1, False), 16, False, id="tc64-16rows"),
]


@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("p,m,norm", QKV_ROPE_PLANS)
def test_qkv_rope_matches_gemv_rope_and_write_slots(p, m, norm, dtype, rng):
    """gemv_qkv_rope in the interpreter: the QKV rows (q and k rotated, v plain) and the
    cache (k rotated and v at each row's slot, on shuffled pages) bit for bit what
    gemv, rope and write_slots leave, for GQA heads of 64 (4 q, 2 kv) over a ragged K
    of 200, 1 to 16 rows at random positions; y and the partials NaN-poisoned, every
    other cache slot untouched, the tickets back at zero."""
    inputs = _qkv_rope_inputs(rng, m, 4, 2, 64, 200, dtype)
    want_y, want_c = _three_launches(inputs, p, norm)
    args, y, c, count = _qkv_rope_args(inputs, p, norm)
    ct.launch(None, G.grid(want_y.shape[1], p), G.gemv_qkv_rope, args)
    _check_qkv_rope(inputs, y, c, want_y, want_c, bitwise=True)
    assert not count.any(), count


def test_qkv_rope_refuses_plans_whose_blocks_split_a_pair():
    """A block must own both halves of its rotary pairs: BN dividing the head dim, and a
    split K finished by its own blocks (TICKET); otherwise the compile-time assertion,
    at the kernel's source line, and qkv_rope_fits says no (the backend then launches
    gemv, rope and write_slots)."""
    from tileir.errors import TileIRError
    rng = np.random.default_rng()
    inputs = _qkv_rope_inputs(rng, 2, 2, 1, 16, 64, BF16)
    for p, what in ((G.Plan(2, 32, 32, 1, True), "BN must be even and divide the head dim"),
                    (G.Plan(2, 16, 32, 2, False, False), "a split K needs TICKET")):
        assert not G.qkv_rope_fits(16, p)
        args, *_ = _qkv_rope_args(inputs, p, False)
        with pytest.raises(TileIRError) as e:
            ct.launch(None, G.grid(64, p), G.gemv_qkv_rope, args)
        text = str(e.value)
        assert what in text and "gemv.py" in text and "ct.static_assert(" in text, text
    assert G.qkv_rope_fits(16, G.Plan(2, 16, 32, 2, False, True))
    assert G.qkv_rope_fits(128, G.SWEPT[6144, 4096])


def _qkv_llama_args(p: G.Plan, m=1, hq=32, hkv=8, d=128, k=4096):
    """gemv_qkv_rope's arguments at Llama-3-8B's QKV (zeros: for compiling)."""
    n = (hq + 2 * hkv) * d
    x, w, y = np.zeros((m, k), BF16), np.zeros((n, k), BF16), np.zeros((m, n), BF16)
    part = np.zeros((p.split, m, n), np.float32)
    count = np.zeros(max(1, G.counters(n, p)), np.int32)
    cos = np.zeros((8192, d // 2), np.float32)
    ids = np.zeros(m, np.int32)
    cache = np.zeros((64, 64, 2 * hkv, d), BF16)
    return n, (x, np.zeros(k, BF16), 1e-5, w, y, part, count, cos, cos.copy(), ids, cache,
               ids.copy()) + tuple(p) + (False, d)


# In --full since session 24 (the family's SASS proofs beyond its first), as the two
# tests below: the fast tier keeps gemv_qkv_rope's numbers for every plan form in the
# interpreter (test_qkv_rope_matches_gemv_rope_and_write_slots) and the backend's route
# to it (test_backend_routes_decode_qkv_to_gemv_qkv_rope)
@pytest.mark.slow
def test_qkv_rope_fma_plan_streams_as_the_gemv(tmp_path):
    """QKV's swept plan (FMA, 8 weight rows: two 4-row half tiles a step) at Llama-3-8B's
    widths on sm_90a: no local memory, the steady loop's weight loads 16 bytes wide with
    no shuffle or barrier in it (the K sum reduced once after the loop, as `gemv`'s),
    and no more loop instructions a weight byte than `gemv`'s at the same plan (one
    pass over a 4 KB weight tile an iteration either way)."""
    p = G.SWEPT[6144, 4096]
    n, args = _qkv_llama_args(p)
    ck = _compile(G.gemv_qkv_rope, args, G.grid(n, p))
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      ck.ptxas_report) == [("0", "0")], ck.ptxas_report
    kernel, plain = _llama_args("linear", 1, 6144, 4096, p)
    ck0 = _compile(kernel, plain, G.grid(6144, p))

    def loop_insns_per_byte(c):
        insns = _instructions(_sass_text(c.cubin, tmp_path))
        body = max((b for b in _loops(insns) if any(op.startswith("LDG.E.128")
                                                    for _, op, _ in b)), key=len)
        assert not any(op.startswith(("SHFL", "BAR", "LDL", "STL")) for _, op, _ in body)
        warps = c.meta["num_threads"] // 32
        return len(body) * warps / (p.bn * p.bk * 2), insns
    fused, insns = loop_insns_per_byte(ck)
    plain_rate, _ = loop_insns_per_byte(ck0)
    assert fused <= plain_rate, (fused, plain_rate)
    assert not any(op.startswith(("LDL", "STL")) for _, op, _ in insns)


@pytest.mark.parametrize("p", [
    pytest.param(G.Plan(8, 32, 128, 1, False), id="tc32", marks=pytest.mark.slow),
    # in --full (4 s): tc32 kept the ring, the early loads and the products in the fast
    # tier until session 24 (see test_qkv_rope_fma_plan_streams_as_the_gemv)
    pytest.param(G.Plan(8, 64, 128, 2, False, True), id="tc64-split", marks=pytest.mark.slow)])
def test_qkv_rope_tensor_core_plans_keep_the_tma_ring(p, tmp_path):
    """The tensor-core plans at Llama-3-8B's QKV on sm_90a, with early loads as the
    backend launches them: the weights' half tiles through TMA into the ring, the first
    of them issued before the wait for the previous kernel, mma.sync on them, no local
    memory."""
    n, args = _qkv_llama_args(p)
    ck = _compile(G.early_loading(G.gemv_qkv_rope), args, G.grid(n, p))
    ptx = ck.artifacts["ptx"].splitlines()
    wait = [i for i, line in enumerate(ptx) if "griddepcontrol.wait" in line]
    tma = [i for i, line in enumerate(ptx) if TMA_LOAD in line]
    assert len(wait) == 1 and any(i < wait[0] for i in tma), (wait, tma)
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      ck.ptxas_report) == [("0", "0")], ck.ptxas_report
    ops = collections.Counter(op.split(".")[0]
                              for _, op, _ in _instructions(_sass_text(ck.cubin, tmp_path)))
    assert ops["UTMALDG"] and ops["HMMA"], ops
    assert not ops["LDL"] and not ops["STL"], ops


@pytest.mark.parametrize("p,m,norm", [
    # since session 24 in --full too: fma-swept and tc32-split (see
    # test_qkv_rope_fma_plan_streams_as_the_gemv)
    pytest.param(G.Plan(1, 8, 256, 1, True), 1, False, id="fma-swept", marks=pytest.mark.slow),
    pytest.param(G.Plan(8, 32, 128, 2, False, True), 3, False, id="tc32-split",
                 marks=pytest.mark.slow),
    # in --full: the FMA form over 3 rows with the norm (3 s; the interpreter's
    # fma-split-norm cases keep the norm's epilogue in the fast tier), half tiles of 8
    # rows on mma.sync (25 s) and 16 rows of 64-row tiles, K split, the norm (7 s);
    # tc32-split keeps the tensor cores' path in the fast tier
    pytest.param(G.Plan(4, 8, 256, 1, True), 3, True, id="fma-3rows-norm",
                 marks=pytest.mark.slow),
    pytest.param(G.Plan(8, 16, 256, 1, False), 5, False, id="tc16", marks=pytest.mark.slow),
    pytest.param(G.Plan(16, 64, 128, 2, False, True), 9, True, id="tc64-split-norm-16rows",
                 marks=pytest.mark.slow)])
def test_qkv_rope_generated_code_in_the_simulator(p, m, norm):
    """gemv_qkv_rope's sm_90a code in tileir.sim on a ragged shape (GQA heads of 64: 4
    q, 2 kv; K = 328, its last weight tile partial): the QKV rows and the cache within
    one bf16 rounding of the interpreter's gemv, rope and write_slots (the product's
    sums run in the GPU's order), every other cache slot untouched, the tickets back
    at zero."""
    from tileir.kernel import hardware_grid
    from tileir.sim import simulate
    rng = np.random.default_rng()
    inputs = _qkv_rope_inputs(rng, m, 4, 2, 64, 328, BF16)
    want_y, want_c = _three_launches(inputs, G.Plan(p.bm, 16, 32, 1, False), norm)
    args, y, c, count = _qkv_rope_args(inputs, p, norm)
    grid = G.grid(want_y.shape[1], p) + (1,)
    ck = G.gemv_qkv_rope.compile(args, "gpu", target="sm_90a", grid=grid, sm_count=132)
    simulate(ck, hardware_grid(ck.meta, grid), args)
    _check_qkv_rope(inputs, y, c, want_y, want_c, bitwise=False)
    assert not count.any(), count


@pytest.mark.gpu
@pytest.mark.parametrize("p,m", [
    pytest.param(G.SWEPT[6144, 4096], 1, id="fma-swept"),
    pytest.param(G.plan(5, 6144, 4096), 5, id="rule-5rows"),
    pytest.param(G.Plan(16, 64, 128, 2, False, True), 16, id="tc64-split-16rows")])
def test_qkv_rope_on_the_gpu_matches_the_three_launches(p, m):
    """gemv_qkv_rope at Llama-3-8B's QKV (32 q and 8 kv heads of 128) on the GPU against
    the same plan's gemv, then rope and write_slots, launched twice (the second from a
    CUDA graph's replay): the QKV rows and the written cache slots within one bf16
    step of theirs (the FMA and mma sums may run in another order) and equal in all but
    a few per thousand, the other slots of a NaN-poisoned cache untouched, the tickets
    back at zero."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tileir.examples import next_pow2
    from tileir.llm import kernels as K
    hq, hkv, d, k, page, pages = 32, 8, 128, 4096, 64, 40
    n = (hq + 2 * hkv) * d
    gen = torch.Generator(device="cuda").manual_seed(int(np.random.SeedSequence().entropy
                                                         % 2**31))
    bf = torch.bfloat16
    x = torch.randn(m, k, device="cuda", generator=gen).to(bf)
    w = (torch.randn(n, k, device="cuda", generator=gen) / k ** 0.5).to(bf)
    ang = torch.rand(8192, d // 2, device="cuda", generator=gen) * 6.3
    cos, sin = ang.cos(), ang.sin()
    pos = torch.randint(0, 8192, (m,), device="cuda", generator=gen, dtype=torch.int32)
    slots = torch.randperm(pages * page, device="cuda", generator=gen)[:m].to(torch.int32)
    count = torch.zeros(G.counters(n, p) + 1, device="cuda", dtype=torch.int32)
    part = torch.empty(p.split, m, n, device="cuda", dtype=torch.float32)

    def fresh():
        return (torch.full((m, n), float("nan"), device="cuda", dtype=bf),
                torch.full((pages, page, 2 * hkv, d), float("nan"), device="cuda", dtype=bf))
    y0, c0 = fresh()
    ct.launch(None, G.grid(n, p), G.gemv, (x, x, 0.0, w, y0, part, count) + tuple(p) + (False,))
    heads = y0.view(m, -1, d)[:, :hq + hkv]
    ct.launch(None, (m,), K.rope, (heads, heads, cos, sin, pos, next_pow2(hq + hkv), d // 2))
    ct.launch(None, (m, 2), K.write_slots, (y0[:, hq * d:], c0.view(pages, page, -1), slots,
                                            page, 1024))
    y, c = fresh()
    kernel = G.early_loading(G.gemv_qkv_rope)
    args = (x, x, 0.0, w, y, part, count, cos, sin, pos, c, slots) + tuple(p) + (False, d)
    ct.launch(None, G.grid(n, p), kernel, args)
    torch.cuda.synchronize()
    first = (y.clone(), c.clone())
    y.fill_(float("nan"))
    c.fill_(float("nan"))
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(graph, stream=s):
            ct.launch(None, G.grid(n, p), kernel, args)
    graph.replay()
    torch.cuda.synchronize()
    assert not count.any()
    rows = slots.long()
    for yy, cc in (first, (y, c)):
        assert not yy.isnan().any()
        _within_a_step(torch, yy, y0, "qkv rows")
        flat, flat0 = cc.view(pages * page, -1), c0.view(pages * page, -1)
        _within_a_step(torch, flat[rows], flat0[rows], "cache slots")
        rest = torch.ones(pages * page, dtype=torch.bool, device="cuda")
        rest[rows] = False
        assert flat[rest].isnan().all()


@pytest.mark.gpu
def test_llama_with_qkv_rope_matches_transformers(tmp_path):
    """Backend.qkv_rope (with decode_gemv) in float32: 32 greedy tokens of each prompt,
    generated alone, identical to transformers' generate, the one-row decode steps' QKV
    on gemv_qkv_rope (the exact FMA plan; asserted from the launches).  bf16's decode
    steps: test_gpu_llm.py's test_qkv_rope_decode_logits_match_transformers."""
    launched = _llama_against_transformers(tmp_path, "float32", ("decode_gemv", "qkv_rope"))
    names = {name for name, _ in launched}
    assert "gemv_qkv_rope" in names, names


@pytest.mark.parametrize("d", [16, 8], ids=["fits", "head-narrower-than-the-tile"])
def test_backend_routes_decode_qkv_to_gemv_qkv_rope(d, rng):
    """Backend.linear_rope_write_slots with decode_gemv and qkv_rope: where the plan's
    blocks own rotary pairs of one head (the interpreter's 16-row tiles, K split with the
    ticket, against a head of 16) one launch of gemv_qkv_rope with early loads on its
    weight; where they would not (heads of 8) gemv, rope and write_slots, as with
    qkv_rope off.  The QKV rows and the cache are the same bits either way."""
    from tileir.llm.backend import Backend
    inputs = _qkv_rope_inputs(rng, 3, 4, 2, d, 64, BF16)
    x, g, w, cos, sin, positions, slots, cache = inputs
    outs = []
    for on in (True, False):
        b = Backend("numpy", "bfloat16")
        b.decode_gemv, b.qkv_rope = True, on
        launched = []
        run = b._launch
        b._launch = lambda grid, kernel, args: (launched.append(kernel), run(grid, kernel, args))
        c = cache.copy()
        outs.append((b.linear_rope_write_slots(x, w, cos, sin, positions, c, slots), c))
        names = [k.name for k in launched]
        if on and d == 16:
            assert names == ["gemv_qkv_rope"], names
            assert launched[0].options.get("early_loads") == ("w",)
        else:
            assert names == ["gemv", "rope", "write_slots"], names
    (y, c), (y0, c0) = outs
    assert y.tobytes() == y0.tobytes() and c.tobytes() == c0.tobytes()
    assert not np.isnan(y.astype(np.float32)).any()
