"""The tile kernels of tileir.llm that the examples do not already have.

Written as a cuTile user writes them: one block per row or output tile, plain
loads and stores, f32 math, a cast on the way out.

- `embedding`: rows of a table gathered by id (the token embedding; also the
  last-token rows of a prefill batch);
- `linear`, `linear_add`, `linear_swiglu`: y = x @ W^T for a weight stored as
  Hugging Face does (out_features, in_features), the residual add fused into the
  epilogue (`linear_add`, in place: y may be r), or SwiGLU's silu(x @ Wg^T) * (x @ Wu^T)
  from two accumulators (`linear_swiglu`); EXACT sums f32 products on the FMA units
  instead of the tensor cores (which take f32 as tf32; `examples.matmul.product_nt`):
  the float32 mode's GEMMs;
  NORM applies RMSNorm with weight g to x's rows on the way in (the norm's launch and
  its output's round trip saved; its rows read twice);
- `head_linear`: one weight per head, y[t, h] = x[t, h] @ W[h]^T (MLA's absorbed
  W_UK and W_UV);
- `add`: y += x;
- `rope`: rotary embedding at each token's position, cos and sin read from a table;
- `rope_write_slots`: RoPE of q and k and the K/V cache write in one launch (Llama's
  attention: q and k rotated in place, the rotated k and v into their cache slot);
  `rope_write_latent` the same for MLA's latent row (k_rope rotated, the row cached);
- `copy_heads`: (T, H, w) rows copied between views (a one-head source broadcast):
  MLA's expanded prompt form assembles its padded q, k and v with it;
- `write_slots`: rows written into a paged cache at their slots (page * PAGE + offset);
- `gather_pages`: one sequence's pages copied out of a paged cache into rows;
- `attention_exact`: attention with f32 products on the FMA units (the float32 mode's);
- `argmax_rows`, `sample_rows`: greedy, and temperature / top-k / top-p sampling by
  the Gumbel-max rule (thresholds found by a 16-way search over the row, 8 passes; see
  sample_rows); `argmax_tiles` + `argmax_merge`: greedy over a wide row in two launches
  (a block a tile of the row, then one a row over their maxima).
"""

import tileir as ct
from tileir.examples.matmul import product_nt

ZERO = ct.PaddingMode.ZERO
NEG_INF = ct.PaddingMode.NEG_INF


@ct.kernel
def embedding(ids, table, out, TILE: ct.Constant[int]):
    t = ct.bid(0)
    j = ct.bid(1)
    row = ct.load(ids, index=(t,), shape=(1,)).item()
    vals = ct.load(table, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
    ct.store(out, index=(t, j), tile=ct.astype(vals, out.dtype))


@ct.function
def _product(x, g, eps, w, i, j, BM: ct.Constant[int], BN: ct.Constant[int],
             BK: ct.Constant[int], EXACT: ct.Constant[bool], NORM: ct.Constant[bool]):
    """x @ w^T for rows i, columns j; with NORM, RMSNorm(x) * g in place of x (a first pass
    over the rows' K tiles for their mean square)."""
    nt = ct.num_tiles(x, axis=1, shape=(BM, BK))
    if NORM:
        ss = ct.zeros((BM, 1), dtype=ct.float32)
        for k in range(nt):
            a = ct.astype(ct.load(x, index=(i, k), shape=(BM, BK), padding_mode=ZERO),
                          ct.float32)
            ss = ss + ct.sum(a * a, axis=1, keepdims=True)
        inv = ct.rsqrt(ss / x.shape[1] + eps)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(nt):
        a = ct.load(x, index=(i, k), shape=(BM, BK), padding_mode=ZERO)
        if NORM:
            gk = ct.astype(ct.load(g, index=(k,), shape=(BK,), padding_mode=ZERO), ct.float32)
            # rounded to x's dtype as the separate norm's output would be
            a = ct.astype(ct.astype(a, ct.float32) * inv * ct.reshape(gk, (1, BK)), x.dtype)
        b = ct.load(w, index=(j, k), shape=(BN, BK), padding_mode=ZERO)
        acc = product_nt(a, b, acc, EXACT)
    return acc


@ct.kernel
def linear(x, g, eps, w, y, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int],
           EXACT: ct.Constant[bool], NORM: ct.Constant[bool]):
    i = ct.bid(0)
    j = ct.bid(1)
    acc = _product(x, g, eps, w, i, j, BM, BN, BK, EXACT, NORM)
    ct.store(y, index=(i, j), tile=ct.astype(acc, y.dtype))


@ct.kernel
def linear_add(x, w, r, y, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int],
               EXACT: ct.Constant[bool]):
    i = ct.bid(0)
    j = ct.bid(1)
    acc = _product(x, x, 0.0, w, i, j, BM, BN, BK, EXACT, False)
    res = ct.load(r, index=(i, j), shape=(BM, BN), padding_mode=ZERO)
    ct.store(y, index=(i, j), tile=ct.astype(acc + ct.astype(res, ct.float32), y.dtype))


@ct.kernel
def linear_swiglu(x, g, eps, wg, wu, y, BM: ct.Constant[int], BN: ct.Constant[int],
                  BK: ct.Constant[int], EXACT: ct.Constant[bool], NORM: ct.Constant[bool]):
    i = ct.bid(0)
    j = ct.bid(1)
    gate = _product(x, g, eps, wg, i, j, BM, BN, BK, EXACT, NORM)
    up = _product(x, g, eps, wu, i, j, BM, BN, BK, EXACT, NORM)
    # transformers rounds each projection to the activation dtype before silu(g) * u
    gate = ct.astype(ct.astype(gate, y.dtype), ct.float32)
    up = ct.astype(ct.astype(up, y.dtype), ct.float32)
    ct.store(y, index=(i, j), tile=ct.astype(gate / (1.0 + ct.exp(-gate)) * up, y.dtype))


@ct.kernel
def head_linear(x, w, y, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int],
                EXACT: ct.Constant[bool]):
    i = ct.bid(0)
    h = ct.bid(1)
    j = ct.bid(2)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=2, shape=(BM, 1, BK))):
        a = ct.reshape(ct.load(x, index=(i, h, k), shape=(BM, 1, BK), padding_mode=ZERO),
                       (BM, BK))
        b = ct.reshape(ct.load(w, index=(h, j, k), shape=(1, BN, BK), padding_mode=ZERO),
                       (BN, BK))
        acc = product_nt(a, b, acc, EXACT)
    ct.store(y, index=(i, h, j), tile=ct.reshape(ct.astype(acc, y.dtype), (BM, 1, BN)))


@ct.kernel
def add(x, y, TILE: ct.Constant[int]):
    i = ct.bid(0)
    j = ct.bid(1)
    a = ct.astype(ct.load(x, index=(i, j), shape=(1, TILE), padding_mode=ZERO), ct.float32)
    b = ct.astype(ct.load(y, index=(i, j), shape=(1, TILE), padding_mode=ZERO), ct.float32)
    ct.store(y, index=(i, j), tile=ct.astype(a + b, y.dtype))


@ct.function
def _angle(cos, sin, positions, t, HALF: ct.Constant[int]):
    """(cos, sin) of token t's position, (1, 1, HALF) f32 rows of the tables."""
    p = ct.load(positions, index=(t,), shape=(1,)).item()
    c = ct.reshape(ct.load(cos, index=(p, 0), shape=(1, HALF)), (1, 1, HALF))
    s = ct.reshape(ct.load(sin, index=(p, 0), shape=(1, HALF)), (1, 1, HALF))
    return c, s


@ct.function
def _halves(x, t, HEADS: ct.Constant[int], HALF: ct.Constant[int]):
    """Token t's heads of x (T, H, 2 * HALF): their first and second halves, f32."""
    x1 = ct.load(x, index=(t, 0, 0), shape=(1, HEADS, HALF), padding_mode=ZERO)
    x2 = ct.load(x, index=(t, 0, 1), shape=(1, HEADS, HALF), padding_mode=ZERO)
    return ct.astype(x1, ct.float32), ct.astype(x2, ct.float32)


@ct.function
def _rotated(x1, x2, c, s):
    """The "rotate half" form: (x1 cos - x2 sin, x2 cos + x1 sin)."""
    return x1 * c - x2 * s, x2 * c + x1 * s


@ct.function
def _rotate_into(x, out, t, c, s, HEADS: ct.Constant[int], HALF: ct.Constant[int]):
    """Token t's heads of x rotated by (c, s) and stored into out (x itself: in place);
    returns the two halves as stored, in out's dtype."""
    x1, x2 = _halves(x, t, HEADS, HALF)
    r1, r2 = _rotated(x1, x2, c, s)
    b1, b2 = ct.astype(r1, out.dtype), ct.astype(r2, out.dtype)
    ct.store(out, index=(t, 0, 0), tile=b1)
    ct.store(out, index=(t, 0, 1), tile=b2)
    return b1, b2


@ct.function
def _into_slot(cache, page, row, b1, b2, HEADS: ct.Constant[int], HALF: ct.Constant[int]):
    """The rotated halves of a token's heads into slot `row` of `page` of the cache
    (pages, PAGE, heads, 2 * HALF)."""
    ct.store(cache, index=(page, row, 0, 0),
             tile=ct.reshape(ct.astype(b1, cache.dtype), (1, 1, HEADS, HALF)))
    ct.store(cache, index=(page, row, 0, 1),
             tile=ct.reshape(ct.astype(b2, cache.dtype), (1, 1, HEADS, HALF)))


@ct.kernel
def rope(x, out, cos, sin, positions, HEADS: ct.Constant[int], HALF: ct.Constant[int]):
    t = ct.bid(0)
    c, s = _angle(cos, sin, positions, t, HALF)
    _rotate_into(x, out, t, c, s, HEADS, HALF)


@ct.kernel
def rope_write_slots(q, k, v, cos, sin, positions, k_cache, v_cache, slots,
                     QH: ct.Constant[int], KH: ct.Constant[int], HALF: ct.Constant[int],
                     PAGE: ct.Constant[int]):
    """`rope` of q (T, Hq, D) and k (T, Hkv, D) in place, and k (rotated) and v (T, Hkv,
    D) into k_cache and v_cache (pages, PAGE, Hkv, D) at slots (T,): `rope` then
    `write_slots` in one launch, the same bits (the same f32 rotation; v copied).  q, k
    and v are views of the QKV projection's output that do not overlap: every element
    is loaded once before it is stored.  QH, KH: the head counts rounded up to powers
    of two."""
    t = ct.bid(0)
    c, s = _angle(cos, sin, positions, t, HALF)
    _rotate_into(q, q, t, c, s, QH, HALF)
    b1, b2 = _rotate_into(k, k, t, c, s, KH, HALF)   # the prompt's attention reads k here
    slot = ct.load(slots, index=(t,), shape=(1,)).item()
    page, row = slot // PAGE, slot % PAGE
    _into_slot(k_cache, page, row, b1, b2, KH, HALF)
    rows = ct.load(v, index=(t, 0, 0), shape=(1, KH, 2 * HALF), padding_mode=ZERO)
    ct.store(v_cache, index=(page, row, 0, 0),
             tile=ct.reshape(ct.astype(rows, v_cache.dtype), (1, 1, KH, 2 * HALF)))


@ct.kernel
def rope_write_latent(ckv, kr, cos, sin, positions, cache_ckv, cache_kr, slots,
                      R: ct.Constant[int], HALF: ct.Constant[int], PAGE: ct.Constant[int]):
    """MLA's latent row [c_kv, k_rope] (views ckv (T, r) and kr (T, 1, rp) of it): `rope`
    of k_rope in place and the row, k_rope rotated, into the cache's views cache_ckv
    (pages, PAGE, r) and cache_kr (pages, PAGE, 1, rp) at slots: `rope` then
    `write_slots` in one launch, the same bits.  R: r rounded up to a power of two."""
    t = ct.bid(0)
    c, s = _angle(cos, sin, positions, t, HALF)
    b1, b2 = _rotate_into(kr, kr, t, c, s, 1, HALF)
    slot = ct.load(slots, index=(t,), shape=(1,)).item()
    page, row = slot // PAGE, slot % PAGE
    _into_slot(cache_kr, page, row, b1, b2, 1, HALF)
    lat = ct.load(ckv, index=(t, 0), shape=(1, R), padding_mode=ZERO)
    ct.store(cache_ckv, index=(page, row, 0),
             tile=ct.reshape(ct.astype(lat, cache_ckv.dtype), (1, 1, R)))


@ct.kernel
def copy_heads(src, dst, HEADS: ct.Constant[int], W: ct.Constant[int]):
    """dst[t] = src[t] for (T, H, w) views (H, w at most HEADS, W); a source of one head
    is broadcast to all of dst's."""
    t = ct.bid(0)
    if src.shape[1] == 1:
        row = ct.load(src, index=(t, 0, 0), shape=(1, 1, W), padding_mode=ZERO)
        tile = ct.broadcast_to(row, (1, HEADS, W))
    else:
        tile = ct.load(src, index=(t, 0, 0), shape=(1, HEADS, W), padding_mode=ZERO)
    ct.store(dst, index=(t, 0, 0), tile=ct.astype(tile, dst.dtype))


@ct.kernel
def write_slots(src, cache, slots, PAGE: ct.Constant[int], TILE: ct.Constant[int]):
    t = ct.bid(0)
    j = ct.bid(1)
    slot = ct.load(slots, index=(t,), shape=(1,)).item()
    row = ct.load(src, index=(t, j), shape=(1, TILE), padding_mode=ZERO)
    ct.store(cache, index=(slot // PAGE, slot % PAGE, j),
             tile=ct.reshape(ct.astype(row, cache.dtype), (1, 1, TILE)))


@ct.kernel
def gather_pages(cache, block_table, b, out, PAGE: ct.Constant[int], TILE: ct.Constant[int]):
    p = ct.bid(0)
    j = ct.bid(1)
    page = ct.load(block_table, index=(b, p), shape=(1, 1)).item()
    rows = ct.load(cache, index=(page, 0, j), shape=(1, PAGE, TILE), padding_mode=ZERO)
    ct.store(out, index=(p, j), tile=ct.reshape(rows, (PAGE, TILE)))


@ct.kernel
def attention_exact(Q, K, V, O, scale: float, H: ct.Constant[int], GROUP: ct.Constant[int],
                    BM: ct.Constant[int], BN: ct.Constant[int], D: ct.Constant[int],
                    CAUSAL: ct.Constant[bool]):
    """The float32 mode's attention: the tutorial kernel's online softmax with both
    products summed on the FMA units (the tensor cores would take f32 as tf32).  Q (1, H,
    S, D), K and V (1, H // GROUP, L, D); CAUSAL aligns the last query with the last key
    (row r of S sees keys up to L - S + r).  Grid (cdiv(S, BM), H)."""
    mb = ct.bid(0)
    h = ct.bid(1)
    kvh = h // GROUP
    q = ct.astype(ct.reshape(ct.load(Q, index=(0, h, mb, 0), shape=(1, 1, BM, D),
                                     padding_mode=ZERO), (BM, 1, D)), ct.float32)
    m = ct.full((BM, 1), -3.0e38, dtype=ct.float32)
    l = ct.zeros((BM, 1), dtype=ct.float32)
    acc = ct.zeros((BM, D), dtype=ct.float32)
    n_q = Q.shape[2]
    n_kv = K.shape[2]
    rows = mb * BM + ct.arange(BM, dtype=ct.int32)[:, None] + (n_kv - n_q)
    for j in range(ct.cdiv(n_kv, BN)):
        k = ct.astype(ct.reshape(ct.load(K, index=(0, kvh, j, 0), shape=(1, 1, BN, D),
                                         padding_mode=ZERO), (1, BN, D)), ct.float32)
        s = ct.sum(q * k, axis=2) * scale
        cols = j * BN + ct.arange(BN, dtype=ct.int32)[None, :]
        keep = cols < n_kv
        if CAUSAL:
            keep = keep & (rows >= cols)
        s = ct.where(keep, s, -3.0e38)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.where(keep, ct.exp(s - m_new), 0.0)
        alpha = ct.exp(m - m_new)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.astype(ct.reshape(ct.load(V, index=(0, kvh, j, 0), shape=(1, 1, BN, D),
                                         padding_mode=ZERO), (1, BN, D)), ct.float32)
        acc = acc * alpha + ct.sum(ct.reshape(p, (BM, BN, 1)) * v, axis=1)
        m = m_new
    out = ct.reshape(acc / l, (1, 1, BM, D))
    ct.store(O, index=(0, h, mb, 0), tile=ct.astype(out, O.dtype))


@ct.kernel
def argmax_rows(logits, out, C: ct.Constant[int]):
    row = ct.bid(0)
    best = ct.full((1,), -3.0e38, dtype=ct.float32)
    best_i = ct.zeros((1,), dtype=ct.int32)
    for k in range(ct.num_tiles(logits, axis=1, shape=(1, C))):
        t = ct.astype(ct.load(logits, index=(row, k), shape=(1, C), padding_mode=NEG_INF),
                      ct.float32)
        m = ct.max(t, axis=1)
        i = ct.astype(ct.argmax(t, axis=1), ct.int32) + k * C
        take = m > best                       # the first maximum wins, as np.argmax's
        best_i = ct.where(take, i, best_i)
        best = ct.where(take, m, best)
    ct.store(out, index=(row,), tile=best_i)


# Greedy over a vocabulary-wide row: `argmax_rows` walks the row's tiles in one block,
# each tile's load waiting for the one before (on the H200, 2026-11-29, 23.5 us of a
# Llama-3-8B batch-1 step for 32 tiles of 4096 logits); split, each block takes one
# tile and a second launch picks the row's first maximum among the tiles' maxima.

@ct.kernel
def argmax_tiles(logits, best, best_i, C: ct.Constant[int]):
    """Block (row, k): the maximum of tile k (C logits) of the row and the first index
    holding it, into best[row, k] and best_i[row, k]."""
    row, k = ct.bid(0), ct.bid(1)
    t = ct.astype(ct.load(logits, index=(row, k), shape=(1, C), padding_mode=NEG_INF),
                  ct.float32)
    m = ct.max(t, axis=1, keepdims=True)
    i = ct.astype(ct.argmax(t, axis=1, keepdims=True), ct.int32) + k * C
    ct.store(best, index=(row, k), tile=m)
    ct.store(best_i, index=(row, k), tile=i)


@ct.kernel
def argmax_merge(best, best_i, out, S: ct.Constant[int]):
    """Block row: the first index of the row's maximum from its tiles' maxima (S: a power
    of two at least their count); the tiles are in index order, so of the tiles that
    hold the maximum the first holds the first index."""
    row = ct.bid(0)
    m = ct.load(best, index=(row, 0), shape=(1, S), padding_mode=NEG_INF)
    i = ct.load(best_i, index=(row, 0), shape=(1, S), padding_mode=ZERO)
    top = ct.max(m, axis=1, keepdims=True)
    first = ct.min(ct.where(m == top, i, 2147483647), axis=1)
    # no tile equal to the maximum (a NaN row): token 0, never an id past the vocabulary
    ct.store(out, index=(row,), tile=ct.where(first == 2147483647, 0, first))


@ct.function
def _counts(logits, row, cand, floor, m, inv_t, C: ct.Constant[int], MASS: ct.Constant[bool]):
    """For each of W candidate thresholds x (a (W, 1) tile): how many logits of the row
    are >= x, or (MASS) their softmax(l / T) mass above `floor` too, unnormalised."""
    n = ct.zeros(cand.shape, dtype=ct.float32)
    for k in range(ct.num_tiles(logits, axis=1, shape=(1, C))):
        t = ct.astype(ct.load(logits, index=(row, k), shape=(1, C), padding_mode=NEG_INF),
                      ct.float32)
        keep = t >= cand                                  # (W, C)
        if MASS:
            e = ct.where(t >= ct.reshape(floor, (1, 1)),
                         ct.exp((t - ct.reshape(m, (1, 1))) * ct.reshape(inv_t, (1, 1))), 0.0)
            n = n + ct.sum(ct.where(keep, e, 0.0), axis=1, keepdims=True)
        else:
            n = n + ct.sum(ct.where(keep, 1.0, 0.0), axis=1, keepdims=True)
    return n


@ct.function
def _threshold(logits, row, lo, hi, goal, floor, m, inv_t, C: ct.Constant[int],
               W: ct.Constant[int], ROUNDS: ct.Constant[int], MASS: ct.Constant[bool]):
    """The largest x in [lo, hi) whose count (or mass) of logits >= x reaches `goal`,
    given that lo's does and hi's does not: ROUNDS rounds of W-way search, each one pass
    over the row that counts at W evenly spaced candidates and keeps the interval between
    the last that reaches the goal and the next (the interval shrinks (W + 1)-fold)."""
    steps = ct.astype(ct.arange(W, dtype=ct.int32), ct.float32)[:, None] + 1.0   # (W, 1)
    for _ in range(ROUNDS):
        width = (hi - lo) * (1.0 / (W + 1))
        cand = ct.reshape(lo, (1, 1)) + steps * ct.reshape(width, (1, 1))
        ok = _counts(logits, row, cand, floor, m, inv_t, C, MASS) >= ct.reshape(goal, (1, 1))
        n_ok = ct.sum(ct.where(ok, 1.0, 0.0))             # the counts fall as x grows
        lo = lo + width * n_ok
        hi = lo + width
    return lo


@ct.kernel
def sample_rows(logits, uniform, temperature, top_k, top_p, out, C: ct.Constant[int],
                W: ct.Constant[int], ROUNDS: ct.Constant[int]):
    """Sample one token per row of logits.

    The token is argmax(l + T * g) over the kept set, g = -log(-log(u)) Gumbel noise
    from the given uniforms: for T > 0 that is a draw from softmax(l / T) renormalised
    over the kept set (the Gumbel-max rule), and T = 0 is greedy.  The kept set is
    {l >= lo}: top-k's lo is the largest value with at least k logits at or above it,
    top-p's the largest with at least top_p of the (top-k-restricted) probability mass
    at or above it, each found by `_threshold`'s W-way search over [min, max + 1] of the
    row, ROUNDS passes (k <= 0 and p >= 1 keep everything).
    """
    row = ct.bid(0)
    chunks = ct.num_tiles(logits, axis=1, shape=(1, C))
    m = ct.full((1,), -3.0e38, dtype=ct.float32)
    lo = ct.full((1,), 3.0e38, dtype=ct.float32)
    for k in range(chunks):
        t = ct.astype(ct.load(logits, index=(row, k), shape=(1, C), padding_mode=NEG_INF),
                      ct.float32)
        m = ct.maximum(m, ct.max(t, axis=1))
        lo = ct.minimum(lo, ct.min(ct.where(t > -3.0e38, t, 3.0e38), axis=1))
    temp = ct.astype(ct.load(temperature, index=(row,), shape=(1,)), ct.float32)
    kk = ct.astype(ct.load(top_k, index=(row,), shape=(1,)), ct.float32)
    pp = ct.astype(ct.load(top_p, index=(row,), shape=(1,)), ct.float32)
    inv_t = 1.0 / ct.maximum(temp, 1e-6)
    floor = lo
    if kk.item() > 0.0:
        floor = _threshold(logits, row, lo, m + 1.0, kk, lo, m, inv_t, C, W, ROUNDS, False)
    if (pp.item() < 1.0) & (temp.item() > 0.0):
        cand = ct.reshape(floor, (1, 1))
        total = ct.reshape(_counts(logits, row, cand, floor, m, inv_t, C, True), (1,))
        floor = _threshold(logits, row, floor, m + 1.0, pp * total, floor, m, inv_t, C, W,
                           ROUNDS, True)
    best = ct.full((1,), -3.0e38, dtype=ct.float32)
    best_i = ct.zeros((1,), dtype=ct.int32)
    for k in range(chunks):
        t = ct.astype(ct.load(logits, index=(row, k), shape=(1, C), padding_mode=NEG_INF),
                      ct.float32)
        u = ct.astype(ct.load(uniform, index=(row, k), shape=(1, C), padding_mode=ZERO),
                      ct.float32)
        g = -ct.log(-ct.log(ct.maximum(u, 1e-20)))
        score = ct.where(t >= ct.reshape(floor, (1, 1)), t + ct.reshape(temp, (1, 1)) * g,
                         -3.0e38)
        mk = ct.max(score, axis=1)
        i = ct.astype(ct.argmax(score, axis=1), ct.int32) + k * C
        take = mk > best
        best_i = ct.where(take, i, best_i)
        best = ct.where(take, mk, best)
    ct.store(out, index=(row,), tile=best_i)
