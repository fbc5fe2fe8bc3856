"""DeepSeek-V3 multi-head latent attention (MLA), decode, in the absorbed form.

Every token of the cache keeps one 576-wide row shared by all heads: the latent
c_kv (512) and the RoPE key k_rope (64).  The query arrives absorbed: q_nope @ W_UK
(512) then q_rope (64).  So attention is Q . [c_kv; k_rope]^T for the scores and
P . c_kv for the output: a latent page is both the keys and the values.

One block serves HB = 64 heads of one query token (a 64-row wgmma tile; grid
(B * Tq, H / 64, splits)), walking the sequence's latent pages BN = 64 rows at a
time (or a page, if smaller) through the block table with the online softmax of
`tileir.examples.decode_attention`, whose host helpers, causal rule (token t of Tq at
position seq_len - Tq + t) and split-KV combine it shares.  num_warps=8 (a hint):
two warpgroups split the (64, 512) f32 accumulator by columns, 128 registers each.
On sm_90a a producer warpgroup copies the pages through a TMA ring (2 stages of
72 KB at 64 rows a step, beside Q's 72 KB).  `product_rotation=False` (a hint):
each step's two products stay in it, so a slot is released after its own P . c_kv
and refilled a whole step before it is read; rotated (FlashAttention-3's overlap
of the softmax with the previous step's P . c_kv) a slot is held a step longer and
each 64-row step waited for its own copy.  On an H200, 2026-11-29, B64 at 4k and
8k: 0.43 of the bound unrotated, 0.35 rotated, 0.33 at 32 rows a step, 0.20 at the
LLM engine's 16-slot pages (docs/attention.md, "Decode and MLA decode").
`mla_decode(..., bn=, hints=)` runs other configurations
(bench/decode_attention.py --mla-variants times them; `hints={"copy_parts": True}`
waits for a step's TMA boxes one by one, each before the score k steps that read
it; the scores and the softmax run in one warpgroup, which hands P and the row scale to
the other and runs a step ahead of it (FlashMLA's split; `warpgroup_split`, the
default at 32 rows a step or more: 0.47 of the bound at 64 rows, `default_hints`;
`hints={"warpgroup_split": False}` turns it off; with it, `early_rescale` has each
warpgroup rescale its half of O as soon as it holds the row scale, `fp_fusion` fuses the
softmax's multiply-adds, `mbarrier_handoffs` signals the hand-offs through mbarriers,
`merged_handoffs` gives a step's two hand-offs (alpha, P) one wait and one signal each
way: level with the separate ones, opt-in); with the split, where a token has two
blocks of heads (DeepSeek's 128), the two run as a (1, 2, 1) cluster sharing each
latent page by TMA multicast (`pair_axis=1`, `PAIR_HINTS`: 0.51 against 0.48-0.49 of
the bound; `hints={"pair_axis": None}` turns it off); `scores_only` and `values_only` are
the loop's two products alone, and `products_only` both split as by default with no
softmax, for timing them (--mla-phases).
The latents past a token are masked in the scores only, so a cache's unused slots
must hold finite numbers (zeros, stale tokens).
"""

import math

import numpy as np

import tileir as ct

from . import decode_attention as dec

LOG2E = 1.0 / math.log(2.0)
DL, DR = 512, 64           # latent rank, RoPE dim
DEFAULT_BN = 64            # latent rows a step, at most a page (see the module docstring)
# The warpgroup split (`warpgroup_split`: the scores and softmax by warpgroup 0, P and
# the row scale handed to the other, which runs P c a step behind) at 32 rows a step
# or more: on an H200, 2026-11-29 07:00 UTC, batch 64, 4k and 8k, 0.47 of the bound
# at 64 rows against 0.43 without it, 0.38 at 32 rows against 0.33; at 16 rows
# (pages of 16) not measured, so not taken.  With it, `early_rescale` (each warpgroup
# rescales its half of O before P c: the owner between its exponentials) and
# `fp_fusion` (FFMA in the softmax) gave 0.49 / 0.49 of the bound at 4k / 8k against
# the split alone's 0.48 / 0.46 in one run (H200, 2026-11-29 09:30 UTC); the DeepSeek
# models matched transformers with all three (test_gpu_llm, H200, 2026-11-29 13:50 UTC).
# `merged_handoffs` (a step's alpha and P under one wait and one signal each way) is
# not among them: ahead of the separate hand-offs by 0.5-1.5 % in three runs while the
# producer read the block table after its slot wait, level with them once it reads it
# before (H200, 2026-11-29 19:07-19:27 UTC, bench/RESULTS.md, session 27).
SPLIT_ROWS = 32
SPLIT_HINTS = {"warpgroup_split": True, "early_rescale": True, "fp_fusion": True}
# With the split, a token's two blocks of heads (DeepSeek's 128) as a (1, 2, 1) cluster
# that shares each latent page by TMA multicast (`pair_axis=1`: each block copies half
# of a page's boxes into both; L2 serves a page once a token instead of twice, and the
# two blocks walk the pages together): on an H200, 2026-11-29 20:42 UTC, batch 64, two
# runs, 0.51 / 0.52 and 0.51 / 0.51 of the bound at 4k / 8k against 0.49 / 0.48 for the
# same kernel unpaired in the same runs; the same bits (test_gpu_decode_attention).
# Not with the options pair_axis refuses (copy_parts, alternate_owners, persistent,
# stream_k, a grouped or reversed block order) or that were not run paired (rotated
# products, no producer warpgroup); on sm_80 the option is ignored.
PAIR_HINTS = {"pair_axis": 1}
UNPAIRED = ("copy_parts", "alternate_owners", "product_rotation", "persistent", "stream_k")


def default_hints(rows: int, hints: dict | None = None, pairs: bool = False) -> dict:
    """The hints a launch of `rows` latent rows a step takes unless its caller's
    `hints` say otherwise: SPLIT_HINTS at SPLIT_ROWS or more, none of them where
    `hints` turn the split off (its companions are options of the split) or ask for
    rotated products (`product_rotation`: not built with the split, so a caller's
    rotation means the unsplit rotated loop); with them PAIR_HINTS where `pairs` (a
    token has an even number of head blocks) and `hints` leave the pair's options as
    measured (`pair_axis=None` turns it off)."""
    hints = hints or {}
    if rows < SPLIT_ROWS or not hints.get("warpgroup_split", True) or \
            hints.get("product_rotation"):
        return {}
    out = dict(SPLIT_HINTS)
    if pairs and hints.get("warp_specialize", True) and \
            not any(hints.get(o) for o in UNPAIRED) and \
            hints.get("block_order") in (None, "linear"):
        out.update(PAIR_HINTS)
    return out


@ct.function
def _step_scores(KV, TABLE, b, j, q_nope, q_rope, HB: ct.Constant[int],
                 PAGE: ct.Constant[int], BN: ct.Constant[int]):
    """Step j of sequence b: its BN latent rows c (BN, 512) from the page the block
    table names, and their raw scores q_nope c^T + q_rope k_rope^T, (HB, BN) f32."""
    page = ct.load(TABLE, index=(b, j // (PAGE // BN)), shape=())
    i = j % (PAGE // BN)
    c = ct.load(KV, index=(page, i, 0), shape=(1, BN, DL)).reshape((BN, DL))
    r = ct.load(KV, index=(page, i, DL // DR), shape=(1, BN, DR)).reshape((BN, DR))
    s = ct.mma(q_nope, ct.transpose(c), ct.zeros((HB, BN), dtype=np.float32))
    return c, ct.mma(q_rope, ct.transpose(r), s)


@ct.kernel(num_warps=8, product_rotation=False)
def mla(Q, KV, TABLE, LENS, O, OP, LSE, scale: float, HB: ct.Constant[int],
        PAGE: ct.Constant[int], BN: ct.Constant[int], SPLIT: ct.Constant[bool]):
    bt = ct.bid(0)                        # sequence b, token t
    hb = ct.bid(1)                        # heads hb*HB ..
    split = ct.bid(2)
    splits = ct.num_blocks(2)
    tq = Q.shape[1]
    b = bt // tq
    t = bt % tq
    n = ct.load(LENS, index=(b,), shape=())
    limit = n - tq + t                    # the last key this token sees
    steps = ct.cdiv(limit + 1, BN)        # BN keys a step: PAGE // BN steps a page
    per = ct.cdiv(steps, splits)
    first = min(split * per, steps)
    last = min(first + per, steps)
    q_nope = ct.load(Q, index=(b, t, hb, 0), shape=(1, 1, HB, DL)).reshape((HB, DL))
    q_rope = ct.load(Q, index=(b, t, hb, DL // DR), shape=(1, 1, HB, DR)).reshape((HB, DR))
    qk_scale = scale * LOG2E
    m = ct.full((HB, 1), -1e30, dtype=np.float32)
    l = ct.zeros((HB, BN), dtype=np.float32)   # row sums by column, summed after the loop
    acc = ct.zeros((HB, DL), dtype=np.float32)
    for j in range(first, last):
        c, s = _step_scores(KV, TABLE, b, j, q_nope, q_rope, HB, PAGE, BN)
        # keys past the token's position: masked (only the last step has them; their
        # latents then weigh 0, so the cache's unused slots must hold finite numbers)
        pos = j * BN + ct.arange(BN, dtype=np.int32)
        s = ct.where(pos[None, :] <= limit, s, -np.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True) * qk_scale)
        # rescaled every step: a lazy rescale (only where a row's max grew past 2^8)
        # measured no faster on the H200 (0.42 against 0.43 of the bound, 2026-11-29):
        # it saves 128 multiplies a thread but adds an exchange of the growth test
        alpha = ct.exp2(m - m_new, flush_to_zero=True)
        acc = acc * alpha
        l = l * alpha
        p = ct.exp2(s * qk_scale - m_new, flush_to_zero=True)
        l = l + p
        acc = ct.mma(p.astype(Q.dtype), c, acc)
        m = m_new
    l = ct.sum(l, axis=1, keepdims=True)
    out = acc / ct.where(l > 0, l, 1.0)
    if SPLIT:
        ct.store(OP, index=(b * splits + split, t, hb, 0, 0), tile=out.reshape((1, 1, 1, HB, DL)))
        ct.store(LSE, index=(b * splits + split, t, hb, 0),
                 tile=(m + ct.log2(l)).reshape((1, 1, 1, HB)))
    else:
        ct.store(O, index=(b, t, hb, 0, 0), tile=out.reshape((1, 1, 1, HB, DL)).astype(O.dtype))


_variants: dict = {}


def variant(**hints):
    """`mla` with some hints replaced (`num_stages`, `warp_specialize`, `product_rotation`,
    `rotation_fence`, `copy_parts`, `fp_fusion`, `warpgroup_split`: the scores and
    softmax by warpgroup 0, P and alpha handed over; with it `split_replicas`: by each
    warpgroup, no exchange; `early_rescale`: O rescaled where alpha is held;
    `mbarrier_handoffs`: the hand-offs on mbarriers; `merged_handoffs`: alpha and P
    under one wait and one signal a step; `alternate_owners`: the steps to
    warpgroups 0 and 1 in turn, in the plain form, docs/attention.md; `pair_axis=1`:
    a token's two head blocks as a cluster pair sharing each latent page by TMA
    multicast), one
    Kernel (and its compiled specializations) per set of hints: for timing
    configurations against each other (bench/decode_attention.py --mla-variants)."""
    key = tuple(sorted(hints.items()))
    if not key:
        return mla
    if key not in _variants:
        _variants[key] = mla.replace_hints(**hints)
    return _variants[key]


def launches(q, kv_cache, block_table, seq_lens, scale, out=None, num_splits=None, hb=64,
             bn=DEFAULT_BN, hints=None):
    """The launches of one MLA decode call: (out, [(kernel, grid, args), ...]); `bn`
    latent rows a step, `hints` those of `variant` over `default_hints`
    (`{"warpgroup_split": False}` keeps both warpgroups on the scores)."""
    if q.ndim != 4 or q.shape[-1] != DL + DR or kv_cache.ndim != 3 or \
            kv_cache.shape[-1] != DL + DR:
        raise ValueError(f"mla_decode: q must be (B, Tq, H, {DL + DR}) and kv_cache (pages, PAGE, "
                         f"{DL + DR}); got {tuple(q.shape)} and {tuple(kv_cache.shape)}")
    b, tq, h, _ = q.shape
    page = kv_cache.shape[1]
    if h % hb or not 1 <= tq <= 8 or page & (page - 1) or page < 16:
        raise ValueError(f"mla_decode: H = {h} must be a multiple of {hb}, Tq = {tq} in 1..8 "
                         f"and the page {page} a power of two >= 16")
    if tuple(block_table.shape)[:1] != (b,) or tuple(seq_lens.shape) != (b,):
        raise ValueError(f"mla_decode: block_table must be (B, max_pages) and seq_lens (B,) "
                         f"for B = {b}; got {tuple(block_table.shape)}, {tuple(seq_lens.shape)}")
    if dec._is_torch(q) and q.is_cuda and q.element_size() > 2:
        raise ValueError(f"mla_decode: on the GPU q and kv_cache must be bf16 or fp16 (got "
                         f"{q.dtype}): a 64 x 576 f32 Q tile and its latent ring do not fit "
                         f"a block's shared memory; the interpreter (NumPy) takes float32")
    if out is None:
        out = dec._empty(q, (b, tq, h, DL), False)
    dec._check_out(out, (b, tq, h, DL), "mla_decode")
    if num_splits is None:
        # one block an SM (225 KB of shared memory)
        num_splits = dec.choose_splits(b * tq * (h // hb), block_table.shape[1], dec._sms(q), 1)
    o5 = out.reshape(b, tq, h // hb, hb, DL)     # heads in blocks of HB
    grid = (b * tq, h // hb, num_splits)
    if (hints or {}).get("pair_axis") == 1 and (h // hb) % 2:
        raise ValueError(f"mla_decode: hints pair_axis=1 pairs a token's blocks of {hb} "
                         f"heads, so H / {hb} must be even; got H = {h}")
    kernel = variant(**{**default_hints(min(bn, page), hints, pairs=(h // hb) % 2 == 0),
                        **(hints or {})})
    if num_splits == 1:
        return out, [(kernel, grid, (q, kv_cache, block_table, seq_lens, o5, o5,
                                     seq_lens.reshape(b, 1, 1, 1), float(scale), hb, page,
                                     min(bn, page), False))]
    op = dec._empty(q, (b * num_splits, tq, h // hb, hb, DL), True)
    lse = dec._empty(q, (b * num_splits, tq, h // hb, hb), True)
    return out, [(kernel, grid, (q, kv_cache, block_table, seq_lens, o5, op, lse, float(scale),
                                 hb, page, min(bn, page), True)),
                 dec.combine_launch(op, lse, o5, num_splits, hb, 128)]


def mla_decode(q, kv_cache, block_table, seq_lens, scale, out=None, *, num_splits=None,
               bn=DEFAULT_BN, hints=None):
    """softmax(q . kv^T * scale) @ kv[:, :512] over each sequence's latent pages, causal
    among its Tq new tokens; returns out (B, Tq, H, 512) in q's dtype.  `bn` and `hints`
    (`variant`'s) choose another configuration of the kernel."""
    out, calls = launches(q, kv_cache, block_table, seq_lens, scale, out, num_splits, bn=bn,
                          hints=hints)
    for kernel, grid, args in calls:
        ct.launch(None, grid, kernel, args)
    return out


def reference(q, kv_cache, block_table, seq_lens, scale) -> np.ndarray:
    """float64 MLA decode of NumPy arrays over the gathered latent cache."""
    q = np.asarray(q, np.float64)
    b, tq, h, _ = q.shape
    page = kv_cache.shape[1]
    out = np.empty((b, tq, h, DL))
    for i in range(b):
        n = int(seq_lens[i])
        ids = np.asarray(block_table[i][:ct.cdiv(n, page)])
        kv = np.asarray(kv_cache[ids], np.float64).reshape(-1, DL + DR)[:n]
        s = np.einsum("thd,nd->thn", q[i], kv) * scale
        pos = n - tq + np.arange(tq)
        s = np.where(np.arange(n)[None, None, :] <= pos[:, None, None], s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        out[i] = p @ kv[:, :DL]
    return out


def random_case(rng, batch, tq, heads, page, lens, dtype=np.float32, spare_pages=2):
    """A paged latent cache with shuffled pages; the slots past each sequence's end hold
    stale tokens (large finite values: a kernel that weighs them shows it)."""
    q, kc, _, table, lens = dec.random_case(rng, batch, tq, 1, 1, DL + DR, page, lens, dtype,
                                            spare_pages)
    kv = kc[:, :, 0]
    stale = np.isnan(kv)
    kv[stale] = (100 * rng.standard_normal(int(stale.sum()))).astype(dtype)
    q = rng.standard_normal((batch, tq, heads, DL + DR)).astype(dtype)
    return q, kv, table, lens


def run(rng, batch=2, tq=2, heads=64, page=16):
    """The interpreter's run of a small ragged case with split-KV."""
    lens = rng.integers(tq, 4 * page, batch)
    q, kv, table, lens = random_case(rng, batch, tq, heads, page, lens)
    scale = 1.0 / math.sqrt(DL + DR)
    out = np.full((batch, tq, heads, DL), np.nan, np.float32)
    mla_decode(q, kv, table, lens, scale, out, num_splits=2)
    return out, reference(q, kv, table, lens, scale), 1e-4, 1e-5


# -- the loop's two products alone, for timing them (bench/decode_attention.py
# --mla-phases): a step of `mla` is its scores, its softmax and exchanges, and P c;
# these kernels walk the same pages with the same tiles, warps and hints (and the
# producer warpgroup and 2 stages `mla` gets at 64 rows) and run one product each,
# so the GPU measures each product's time a step, and the full kernel's time less
# theirs is the softmax's (docs/attention.md, "Where the unrotated loop's time
# goes").  Each keeps its product's result alive with one cheap op a step.

@ct.function
def _phase_block(Q, LENS, BN: ct.Constant[int]):
    """A phase kernel's block: its sequence b, token t, head block hb, and the BN-row
    steps of the sequence's whole cache."""
    bt = ct.bid(0)
    tq = Q.shape[1]
    b = bt // tq
    return b, bt % tq, ct.bid(1), ct.cdiv(ct.load(LENS, index=(b,), shape=()), BN)


@ct.kernel(num_warps=8, product_rotation=False, warp_specialize=True, num_stages=2)
def scores_only(Q, KV, TABLE, LENS, S, HB: ct.Constant[int], PAGE: ct.Constant[int],
                BN: ct.Constant[int]):
    """The elementwise maximum over a sequence's steps of its (HB, BN) score tiles
    Q . [c_kv; k_rope]^T (unscaled, unmasked: a last step's slots past the sequence
    count too); S is (B, Tq, H / HB, HB, BN) f32."""
    b, t, hb, steps = _phase_block(Q, LENS, BN)
    q_nope = ct.load(Q, index=(b, t, hb, 0), shape=(1, 1, HB, DL)).reshape((HB, DL))
    q_rope = ct.load(Q, index=(b, t, hb, DL // DR), shape=(1, 1, HB, DR)).reshape((HB, DR))
    top = ct.full((HB, BN), -np.inf, dtype=np.float32)
    for j in range(steps):
        _, s = _step_scores(KV, TABLE, b, j, q_nope, q_rope, HB, PAGE, BN)
        top = ct.maximum(top, s)           # (a sum would fold into the product)
    ct.store(S, index=(b, t, hb, 0, 0), tile=top.reshape((1, 1, 1, HB, BN)))


@ct.kernel(num_warps=8, product_rotation=False, warp_specialize=True, num_stages=2)
def values_only(Q, KV, TABLE, LENS, O, HB: ct.Constant[int], PAGE: ct.Constant[int],
                BN: ct.Constant[int]):
    """The sum over a sequence's steps of P . c_kv with one P for all of them, made in
    registers as the softmax's is: P = exp2(Q[:, :BN] / 64) rounded to Q's dtype; O is
    (B, Tq, H / HB, HB, 512) f32."""
    b, t, hb, steps = _phase_block(Q, LENS, BN)
    q = ct.load(Q, index=(b, t, hb, 0), shape=(1, 1, HB, BN)).reshape((HB, BN))
    p = ct.exp2(q.astype(np.float32) * (1.0 / 64)).astype(Q.dtype)
    acc = ct.zeros((HB, DL), dtype=np.float32)
    for j in range(steps):
        page = ct.load(TABLE, index=(b, j // (PAGE // BN)), shape=())
        i = j % (PAGE // BN)
        c = ct.load(KV, index=(page, i, 0), shape=(1, BN, DL)).reshape((BN, DL))
        acc = ct.mma(p, c, acc)
    ct.store(O, index=(b, t, hb, 0, 0), tile=acc.reshape((1, 1, 1, HB, DL)))


@ct.kernel(num_warps=8, product_rotation=False, warp_specialize=True, num_stages=2,
           warpgroup_split=True)
def products_only(Q, KV, TABLE, LENS, O, HB: ct.Constant[int], PAGE: ct.Constant[int],
                  BN: ct.Constant[int]):
    """`mla`'s loop with the softmax left out, split over the warpgroups as `mla` is by
    default: warpgroup 0 computes each step's scores and hands them over as P, rounded
    to Q's dtype (no maximum, no exponential, no row scale); both multiply P by c_kv,
    each its half of O.  O is (B, Tq, H / HB, HB, 512) f32, the sum over a sequence's
    steps of P c_kv (a last step's slots past the sequence count too)."""
    b, t, hb, steps = _phase_block(Q, LENS, BN)
    q_nope = ct.load(Q, index=(b, t, hb, 0), shape=(1, 1, HB, DL)).reshape((HB, DL))
    q_rope = ct.load(Q, index=(b, t, hb, DL // DR), shape=(1, 1, HB, DR)).reshape((HB, DR))
    acc = ct.zeros((HB, DL), dtype=np.float32)
    for j in range(steps):
        c, s = _step_scores(KV, TABLE, b, j, q_nope, q_rope, HB, PAGE, BN)
        acc = ct.mma(s.astype(Q.dtype), c, acc)
    ct.store(O, index=(b, t, hb, 0, 0), tile=acc.reshape((1, 1, 1, HB, DL)))


def phase_launch(kernel, q, kv_cache, block_table, seq_lens, out, bn=DEFAULT_BN, hb=64):
    """(kernel, grid, args) of `scores_only`, `values_only` or `products_only` over
    `mla_decode`'s grid (unsplit); `out` (B, Tq, H, BN) or (B, Tq, H, 512), f32."""
    b, tq, h, _ = q.shape
    page = kv_cache.shape[1]
    o5 = out.reshape(b, tq, h // hb, hb, out.shape[-1])
    return kernel, (b * tq, h // hb, 1), (q, kv_cache, block_table, seq_lens, o5, hb, page,
                                         min(bn, page))


def phase_reference(kernel, q, kv_cache, block_table, seq_lens, bn=DEFAULT_BN) -> np.ndarray:
    """float64 results of `scores_only`, `values_only` or `products_only` over the
    gathered pages."""
    dtype = np.asarray(q).dtype
    q = np.asarray(q, np.float64)
    b, tq, h, _ = q.shape
    page = kv_cache.shape[1]
    bn = min(bn, page)
    outs = []
    for i in range(b):
        steps = -(-int(seq_lens[i]) // bn)
        ids = np.asarray(block_table[i][:-(-steps * bn // page)])
        kv = np.asarray(kv_cache[ids], np.float64).reshape(-1, DL + DR)[:steps * bn]
        if kernel is scores_only:
            s = np.einsum("thd,nd->thn", q[i], kv).reshape(tq, h, steps, bn)
            outs.append(s.max(axis=2))
        elif kernel is products_only:
            p = np.einsum("thd,nd->thn", q[i], kv).astype(dtype).astype(np.float64)
            outs.append(np.einsum("thn,nd->thd", p, kv[:, :DL]))
        else:
            p = np.exp2(q[i, :, :, :bn] / 64).astype(dtype).astype(np.float64)
            outs.append(np.einsum("thn,nd->thd", np.tile(p, (1, 1, steps)), kv[:, :DL]))
    return np.stack(outs)
