"""Decode attention over a paged KV cache (flash-decoding), written the plain way.

Each sequence b of a batch brings Tq new query tokens (1, or a few for speculative
decoding) whose keys and values are already in the cache.  The cache is paged:
`k_cache[p, i, h]` is slot i of page p for KV head h, and `block_table[b, j]` is the
page holding keys j*PAGE .. j*PAGE+PAGE-1 of sequence b.  `seq_lens[b]` counts the
new tokens too; query token t sits at position seq_lens[b] - Tq + t and sees the
keys at positions up to its own.

One block serves one KV head of one sequence (or one split of its context): its
GROUP = Hq // Hkv query heads and all Tq tokens are the rows of one Q tile, so each
K/V page is read once for all of them, and both products run on the tensor cores
(`ct.mma`; the rows are padded with zeros up to 16, the smallest mma tile).  The
loop walks the sequence's pages through the block table with an online softmax in
fp32 (`exp2`), as `tileir.examples.attention` does.  It runs in two parts: the
pages every row sees whole (no mask), then the last one or two, where the causal
rule among the new tokens and the end of the sequence cut in.

Split-KV: when batch x KV heads blocks cannot fill the GPU, grid axis 2 cuts each
context into `num_splits` ranges of pages; each block writes its output over its
keys (f32) and the log2-sum-exp of its rows, then takes a ticket on its (sequence,
KV head)'s counter (an acq_rel atomic add at device scope); the block that draws the
last merges the splits in order 0..S-1 with `combine`'s arithmetic, writes the
output and resets the counter: one launch.  `one_launch=False` merges by a second
launch, `combine`, instead.  `pages_per_step=2` runs two whole pages an
online-softmax step (pages of 16: 32 keys a step).

Host entry: `paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens,
scale)` with torch CUDA tensors (torch's current stream) or NumPy arrays (the
interpreter).
"""

import math

import numpy as np

import tileir as ct

from . import next_pow2

LOG2E = 1.0 / math.log(2.0)
NUM_SMS = 132        # an H200; with torch tensors the host entry asks for the real count
RELAXED, ACQ_REL = ct.MemoryOrder.RELAXED, ct.MemoryOrder.ACQ_REL
DEVICE = ct.MemoryScope.DEVICE


@ct.function
def _online_softmax_step(s, v, m, l, acc, qk_scale, dtype):
    """One page of the online softmax: scores s (raw q.k), its values v; the running row
    maximum m (log2 units), sum l and output acc, updated."""
    m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True) * qk_scale)
    p = ct.exp2(s * qk_scale - m_new)
    alpha = ct.exp2(m - m_new)
    l = l * alpha + ct.sum(p, axis=1, keepdims=True)
    acc = ct.mma(p.astype(dtype), v, acc * alpha)
    return m_new, l, acc


@ct.function
def _page_scores(q, K, TABLE, b, j, kvh, PAGE, D):
    """q k^T for the keys of page j of sequence b (raw, f32)."""
    page = ct.load(TABLE, index=(b, j), shape=())
    k = ct.load(K, index=(page, kvh, 0, 0), shape=(1, 1, PAGE, D)).reshape((PAGE, D))
    return ct.mma(q, ct.transpose(k), ct.zeros((q.shape[0], PAGE), dtype=np.float32))


@ct.function
def _page_values(p, V, TABLE, b, j, i, kvh, acc, PAGE, D):
    """acc + P v for page j of sequence b, P the columns i * PAGE.. of p."""
    page = ct.load(TABLE, index=(b, j), shape=())
    v = ct.load(V, index=(page, kvh, 0, 0), shape=(1, 1, PAGE, D)).reshape((PAGE, D))
    return ct.mma(ct.extract(p, index=(0, i), shape=(p.shape[0], PAGE)), v, acc)


@ct.function
def _pages_step(q, K, V, TABLE, b, j, kvh, m, l, acc, qk_scale, dtype, PAGE, D, PS):
    """One online-softmax step over PS = 2 pages seen whole, j the first: each page's
    scores by its own product (its K page straight from the ring), side by side in
    one (rows, 2 * PAGE) tile for one max, one exp2 and one rescale, then each page's
    P v.  (Four pages of 16 a step spill on sm_90a: 255 registers, 60 bytes, at
    Tq = 1 with two warps; with four the 16-key products fall to the FMA units.)"""
    s = ct.cat((_page_scores(q, K, TABLE, b, j, kvh, PAGE, D),
                _page_scores(q, K, TABLE, b, j + 1, kvh, PAGE, D)), axis=1)
    m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True) * qk_scale)
    p = ct.exp2(s * qk_scale - m_new)
    alpha = ct.exp2(m - m_new)
    l = l * alpha + ct.sum(p, axis=1, keepdims=True)
    p = p.astype(dtype)
    acc = acc * alpha
    for i in ct.static_iter(range(PS)):
        acc = _page_values(p, V, TABLE, b, j + i, i, kvh, acc, PAGE, D)
    return m_new, l, acc


# num_warps (a hint): the compiler gives a 16-row product one warp, which must then
# hold the last page's V in registers (it is masked there) and spills; four share it.
# Pages of 16 take `decode_narrow`: a (16, 16) score tile split four ways is below
# mma.sync's 16 x 8 and would run on the FMA units; two warps keep it on the tensor cores
@ct.kernel(num_warps=4)
def decode(Q, K, V, TABLE, LENS, O, OP, LSE, COUNT, scale: float, TQ: ct.Constant[int],
           GP: ct.Constant[int], PAGE: ct.Constant[int], D: ct.Constant[int],
           SPLIT: ct.Constant[bool], MERGE: ct.Constant[bool], SC: ct.Constant[int],
           PS: ct.Constant[int]):
    b = ct.bid(0)
    kvh = ct.bid(1)
    split = ct.bid(2)
    splits = ct.num_blocks(2)
    rows = TQ * GP
    tq = Q.shape[1]
    n = ct.load(LENS, index=(b,), shape=())
    # this split's pages; pages before `full` are seen whole by every query row
    pages = ct.cdiv(n, PAGE)
    per = ct.cdiv(pages, splits)
    first = min(split * per, pages)
    last = min(first + per, pages)
    full = max(first, min(last, (n - tq + 1) // PAGE))
    # row r is token r // GP; it sees keys at positions <= n - tq + r // GP
    token = ct.arange(rows, dtype=np.int32)[:, None] // GP
    limit = n - tq + ct.minimum(token, tq - 1)
    qk_scale = scale * LOG2E
    m = ct.full((rows, 1), -1e30, dtype=np.float32)   # finite: a row may see no key yet
    l = ct.zeros((rows, 1), dtype=np.float32)
    acc = ct.zeros((rows, D), dtype=np.float32)
    # Q is (B, Tq, Hkv, GROUP, D): the group's heads of every new token, one tile
    q = ct.load(Q, index=(b, 0, kvh, 0, 0), shape=(1, TQ, 1, GP, D),
                padding_mode=ct.PaddingMode.ZERO).reshape((rows, D))
    if PS == 1:
        for j in range(first, full):
            page = ct.load(TABLE, index=(b, j), shape=())
            k = ct.load(K, index=(page, kvh, 0, 0), shape=(1, 1, PAGE, D)).reshape((PAGE, D))
            v = ct.load(V, index=(page, kvh, 0, 0), shape=(1, 1, PAGE, D)).reshape((PAGE, D))
            s = ct.mma(q, ct.transpose(k), ct.zeros((rows, PAGE), dtype=np.float32))
            m, l, acc = _online_softmax_step(s, v, m, l, acc, qk_scale, Q.dtype)
    else:
        # PS pages a step while whole groups remain; the rest go one by one below
        groups = (full - first) // PS
        for g in range(groups):
            m, l, acc = _pages_step(q, K, V, TABLE, b, first + g * PS, kvh, m, l, acc,
                                    qk_scale, Q.dtype, PAGE, D, PS)
        full = first + groups * PS
    for j in range(full, last):
        # the last page(s): slots past the sequence hold anything (NaN too), so V is
        # zeroed there as well as the scores masked
        page = ct.load(TABLE, index=(b, j), shape=())
        k = ct.load(K, index=(page, kvh, 0, 0), shape=(1, 1, PAGE, D)).reshape((PAGE, D))
        v = ct.load(V, index=(page, kvh, 0, 0), shape=(1, 1, PAGE, D)).reshape((PAGE, D))
        pos = j * PAGE + ct.arange(PAGE, dtype=np.int32)
        v = ct.where(pos[:, None] < n, v, 0)
        s = ct.mma(q, ct.transpose(k), ct.zeros((rows, PAGE), dtype=np.float32))
        s = ct.where(pos[None, :] <= limit, s, -np.inf)
        m, l, acc = _online_softmax_step(s, v, m, l, acc, qk_scale, Q.dtype)
    # a split whose keys a row cannot see leaves l = 0: output 0, log-sum-exp -inf
    out = acc / ct.where(l > 0, l, 1.0)
    if SPLIT:
        ct.store(OP, index=(b, split, 0, kvh, 0, 0), tile=out.reshape((1, 1, TQ, 1, GP, D)))
        ct.store(LSE, index=(b, split, 0, kvh, 0),
                 tile=(m + ct.log2(l)).reshape((1, 1, TQ, 1, GP)))
        if MERGE:
            # a ticket, after the stores: acq_rel at device scope releases this block's
            # partial (the whole block's stores: the atomic is the tile's) and, in the
            # block that draws the last ticket, acquires every other split's
            ticket = ct.atomic_add(COUNT, (b, kvh), 1, memory_order=ACQ_REL,
                                   memory_scope=DEVICE)
            if ticket == splits - 1:
                _merge_splits(OP, LSE, O, b, kvh, GP, D, SC)
                # ready for the next launch (a CUDA graph's replay, the next layer)
                ct.store(COUNT, index=(b, kvh), tile=ct.zeros((1, 1), dtype=np.int32))
    else:
        ct.store(O, index=(b, 0, kvh, 0, 0), tile=out.reshape((1, TQ, 1, GP, D)).astype(O.dtype))


decode_narrow = decode.replace_hints(num_warps=2)
# `tables_early`: the sequence lengths and the block table among the `early_loads` (a
# caller's promise that no kernel just before this one writes them, as the LLM engine's
# step inputs, copied from the host before its first kernel): the length and the page
# numbers of the ring's first slots are read before the wait for the previous kernel
# (backend/pipeline/programmatic.py `hoist_early_loads`), not in a chain after it
TABLES = ("TABLE", "LENS")
decode_tables_early = decode.replace_hints(early_loads=TABLES)
decode_narrow_tables_early = decode_narrow.replace_hints(early_loads=TABLES)


@ct.function
def _merge_step(lse, o, m, l, acc):
    """SC splits into the running merge of one token's rows: each split's output o
    (SC, GP, DC) weighted by 2^(its log2-sum-exp lse (SC, GP, 1) - the largest so far);
    m, l: the running maximum and sum of weights (1, GP, 1), acc the weighted sum."""
    m_new = ct.maximum(m, ct.max(lse, axis=0, keepdims=True))
    alpha = ct.exp2(m - m_new)
    w = ct.exp2(lse - m_new)
    l = l * alpha + ct.sum(w, axis=0, keepdims=True)
    acc = acc * alpha + ct.sum(o * w, axis=0, keepdims=True)
    return m_new, l, acc


@ct.function
def _merge_splits(OP, LSE, O, b, kvh, GP, D, SC):
    """The split-KV merge of sequence b, KV head kvh, inside the decode kernel (the block
    that drew the last ticket): `combine`'s arithmetic and order (SC splits a step,
    0..S-1, one token at a time, all D columns), so the result does not depend on
    which block came last.  The partials are read with relaxed device-scope loads
    (ld.relaxed.gpu: from L2, never a stale L1 line)."""
    for t in range(O.shape[1]):
        m = ct.full((1, GP, 1), -1e30, dtype=np.float32)
        l = ct.zeros((1, GP, 1), dtype=np.float32)
        acc = ct.zeros((1, GP, D), dtype=np.float32)
        for c in range(ct.num_tiles(LSE, axis=1, shape=(1, SC, 1, 1, GP))):
            lse = ct.load(LSE, index=(b, c, t, kvh, 0), shape=(1, SC, 1, 1, GP),
                          padding_mode=ct.PaddingMode.NEG_INF, memory_order=RELAXED,
                          memory_scope=DEVICE).reshape((SC, GP, 1))
            o = ct.load(OP, index=(b, c, t, kvh, 0, 0), shape=(1, SC, 1, 1, GP, D),
                        padding_mode=ct.PaddingMode.ZERO, memory_order=RELAXED,
                        memory_scope=DEVICE).reshape((SC, GP, D))
            m, l, acc = _merge_step(lse, o, m, l, acc)
        ct.store(O, index=(b, t, kvh, 0, 0),
                 tile=(acc / l).reshape((1, 1, 1, GP, D)).astype(O.dtype))


@ct.kernel
def combine(OP, LSE, O, GP: ct.Constant[int], DC: ct.Constant[int], SC: ct.Constant[int]):
    """Merges the splits of one (sequence, token, KV head) over DC output columns: each
    split's output weighted by 2^(its log2-sum-exp - the largest).  OP (B, S, Tq * Hkv,
    GROUP, D) and LSE (B, S, Tq * Hkv, GROUP) are the S splits of each sequence (views
    of the split kernel's outputs); O is (B, Tq, Hkv, GROUP, D).  SC splits are merged
    at a time (one load of each, their maximum and sums over the split axis), so a
    context cut into many splits costs a few dependent steps, not one a split."""
    b = ct.bid(0)
    kvh = ct.bid(1)
    hkv = O.shape[2]
    chunks = O.shape[4] // DC
    t = ct.bid(2) // chunks
    col = ct.bid(2) % chunks
    m = ct.full((1, GP, 1), -1e30, dtype=np.float32)
    l = ct.zeros((1, GP, 1), dtype=np.float32)
    acc = ct.zeros((1, GP, DC), dtype=np.float32)
    for c in range(ct.num_tiles(LSE, axis=1, shape=(1, SC, 1, GP))):
        # splits past the last: log-sum-exp -inf, weight 0
        lse = ct.load(LSE, index=(b, c, t * hkv + kvh, 0), shape=(1, SC, 1, GP),
                      padding_mode=ct.PaddingMode.NEG_INF).reshape((SC, GP, 1))
        o = ct.load(OP, index=(b, c, t * hkv + kvh, 0, col), shape=(1, SC, 1, GP, DC),
                    padding_mode=ct.PaddingMode.ZERO).reshape((SC, GP, DC))
        m, l, acc = _merge_step(lse, o, m, l, acc)
    ct.store(O, index=(b, t, kvh, 0, col), tile=(acc / l).reshape((1, 1, 1, GP, DC)).astype(O.dtype))


def combine_launch(op, lse, o5, splits: int, gp: int, dc: int, floats: int = 4096):
    """The combine kernel's (kernel, grid, args) for split outputs op (B * splits, Tq,
    Hkv, GROUP, D), lse (B * splits, Tq, Hkv, GROUP) into o5 (B, Tq, Hkv, GROUP, D), dc
    columns a block: as many splits at a time as keep a block's tile at `floats` floats
    (the decode kernel's merge rounds: the same order, the same bits)."""
    b, tq, hkv, group, d = o5.shape
    sc = merge_width(splits, gp, dc, floats)
    return (combine, (b, hkv, tq * (d // dc)),
            (op.reshape(b, splits, tq * hkv, group, d), lse.reshape(b, splits, tq * hkv, group),
             o5, gp, dc, sc))


# The partial-output floats a thread holds in one round of the split-KV merge (the last
# block's inside the decode kernel, `_merge_splits`, and `combine`'s): SC splits a round
# (`merge_width`) with SC x GP x D <= this x the decode kernel's threads.  64: Llama-3-8B's
# batch-1 contexts (13 or 16 splits of 4 heads x 128, 4 warps) merge in one round of
# loads instead of two: H200, 2026-11-29 19:37 UTC, 13.51 -> 12.61 us at 4k, 15.85 ->
# 15.08 at 8k (one run; bench/decode_attention.py times the old rounds beside each row,
# its column "4096-float merge rounds"; 249 registers at Tq = 1, 233 at Tq = 8, no
# spills); pages of 16 (`decode_narrow`, 2 warps) keep the 4096 floats a round they had.
MERGE_FLOATS_PER_THREAD = 64


def merge_floats(kernel) -> int:
    """The floats a merge round takes in the decode kernel `kernel` (its threads')."""
    return MERGE_FLOATS_PER_THREAD * 32 * kernel.options["num_warps"]


def merge_width(splits: int, gp: int, dc: int, floats: int = 4096) -> int:
    """Splits merged a step (a power of two): as many as keep the step's (SC, GP, DC)
    tile of partial outputs at `floats` floats."""
    sc = max(1, min(next_pow2(splits), floats // (gp * dc)))
    return 1 << (sc.bit_length() - 1)


def tiles(tq: int, group: int) -> tuple[int, int]:
    """(TQ, GP): tokens and heads of the Q tile, powers of two, at least 16 rows."""
    gp = next_pow2(group)
    t = next_pow2(tq)
    while t * gp < 16:
        t *= 2
    return t, gp


# One-launch split-KV (the merge inside the decode kernel): a block's time, modelled
# from `bench/decode_attention.py --short --short-batches 1` (H200, 2026-11-29 20:11
# UTC, after the merge went to one round of loads; Llama-3-8B's 8 KV heads of 4 Q heads
# x 128 columns, pages of 16 and 64, contexts of 128 to 4k, 61 points, least squares
# of the relative error: within 17 % of every point, 4 % on average):
#   FIXED_US (start, Q, the table's first reads, the stores)
#   + one online-softmax step a page: STEP_US + STEP_KEY_US a key of it
#   + with S > 1 splits, the last block's merge: MERGE_US + MERGE_SPLIT_US a split
#     (the other splits' outputs and log-sum-exps read back from L2, in order).
# At batch 1 the 8 (sequence, KV head) blocks leave 124 SMs idle: splits shorten the
# page loop at the price of the merge.  A 256-token context in 64-slot pages runs
# best whole (5.8 us; 4 splits 7.5), 1k best in 8 splits (8.5 against 13.1 whole).
# Split counts are powers of two: the two others measured ran 1-2 us behind both
# neighbours, against the model (1k in pages of 16: 11 splits 13.3 us, 8 11.3, 16
# 11.5; 4k in pages of 64: 13 splits 12.6, 16 11.6, 8 12.3).
# One block an SM: with two (32 splits of 8 heads, 4k in pages of 64) the call took
# 15.6 us against 11.6 at 16, past what the model says; at the contexts where
# more splits would pay (16k and up) 16 splits of 8 heads already stream the cache at
# most of the copy bandwidth.
FIXED_US = 3.43
STEP_US = 0.41
STEP_KEY_US = 0.0030
MERGE_US = 2.21
MERGE_SPLIT_US = 0.245


def split_time_us(splits: int, max_pages: int, page: int) -> float:
    """The modelled time of one (sequence, KV head)'s decode over max_pages pages of
    `page` slots cut into `splits` ranges (one-launch merge; see above)."""
    steps = ct.cdiv(max_pages, splits)
    merge = MERGE_US + MERGE_SPLIT_US * splits if splits > 1 else 0.0
    return FIXED_US + steps * (STEP_US + STEP_KEY_US * page) + merge


def choose_splits(blocks: int, max_pages: int, sms: int = NUM_SMS, per_sm: int = 2, *,
                  page: int | None = None, one_launch: bool = False) -> int:
    """Splits of each context for a grid of `blocks` (sequence, head group) blocks.

    With a second launch merging them (`one_launch=False`): as many as keep every
    block in one round of the GPU's `sms * per_sm` resident blocks (equal splits take
    equal time: a second, partial round would idle the rest), each split at least 4
    pages long; none when the blocks fill a round already.  With the merge in the
    kernel (`one_launch`; `page`: the slots of a page): at most one block an SM (see
    above), the power of two of the least modelled time (`split_time_us`), the fewer
    splits on a tie."""
    if not one_launch:
        return max(1, min((sms * per_sm) // blocks, ct.cdiv(max_pages, 4)))
    if page is None:
        raise ValueError("choose_splits(one_launch=True) needs the page size")
    cap = max(1, min(sms // blocks, max_pages))
    counts = [1 << k for k in range(cap.bit_length())]      # the powers of two <= cap
    return min(counts, key=lambda s: (round(split_time_us(s, max_pages, page), 6), s))


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _check(q, cache, block_table, seq_lens, names):
    if q.ndim != 4 or cache.ndim != 4:
        raise ValueError(f"{names}: q must be (B, Tq, Hq, D) and the cache (pages, PAGE, Hkv, D); "
                         f"got {tuple(q.shape)} and {tuple(cache.shape)}")
    b, tq, hq, d = q.shape
    _, page, hkv, dk = cache.shape
    if dk != d or hq % hkv:
        raise ValueError(f"{names}: head dims {d} / {dk} must match and Hq = {hq} be a "
                         f"multiple of Hkv = {hkv}")
    if not 1 <= tq <= 8:
        raise ValueError(f"{names}: Tq = {tq} query tokens per sequence; 1 to 8 are taken")
    if page & (page - 1) or page < 16:
        raise ValueError(f"{names}: page size {page} must be a power of two >= 16")
    if tuple(block_table.shape)[:1] != (b,) or tuple(seq_lens.shape) != (b,):
        raise ValueError(f"{names}: block_table must be (B, max_pages) and seq_lens (B,) "
                         f"for B = {b}; got {tuple(block_table.shape)}, {tuple(seq_lens.shape)}")


def _check_out(out, shape, names):
    """`out` is written through a reshaped view: it must have the shape and be dense."""
    dense = out.is_contiguous() if _is_torch(out) else out.flags.c_contiguous
    if tuple(out.shape) != tuple(shape) or not dense:
        raise ValueError(f"{names}: out must be a contiguous array of shape {tuple(shape)}; "
                         f"got {tuple(out.shape)}{'' if dense else ', not contiguous'}")


def _empty(like, shape, f32: bool):
    if _is_torch(like):
        import torch
        return torch.empty(shape, device=like.device, dtype=torch.float32 if f32 else like.dtype)
    return np.empty(shape, dtype=np.float32 if f32 else like.dtype)


def _sms(x) -> int:
    if _is_torch(x) and x.is_cuda:
        import torch
        return torch.cuda.get_device_properties(x.device).multi_processor_count
    return NUM_SMS


def _counters(counters, b: int, hkv: int, like):
    """The tickets of the one-launch merge as a (B, Hkv) int32 view (first B * Hkv
    elements of `counters`, which must be zero), or a fresh zeroed array."""
    if counters is None:
        if _is_torch(like):
            import torch
            return torch.zeros((b, hkv), device=like.device, dtype=torch.int32)
        return np.zeros((b, hkv), np.int32)
    n = counters.numel() if _is_torch(counters) else counters.size
    dense = counters.is_contiguous() if _is_torch(counters) else counters.flags.c_contiguous
    if str(counters.dtype) not in ("int32", "torch.int32") or n < b * hkv or not dense:
        raise ValueError(f"paged_decode_attention: counters must be a contiguous int32 array "
                         f"of at least B * Hkv = {b} * {hkv} = {b * hkv} elements (zero); got "
                         f"{counters.dtype} of {n}{'' if dense else ', not contiguous'}")
    return counters.reshape(-1)[:b * hkv].reshape(b, hkv)


def launches(q, k_cache, v_cache, block_table, seq_lens, scale, out=None, num_splits=None,
             one_launch=True, counters=None, pages_per_step=1, tables_early=False):
    """The launches of one decode call: (out, [(kernel, grid, args), ...])."""
    _check(q, k_cache, block_table, seq_lens, "paged_decode_attention")
    if pages_per_step not in (1, 2):
        raise ValueError(f"paged_decode_attention: pages_per_step must be 1 or 2; got "
                         f"{pages_per_step!r}")
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        raise ValueError(f"paged_decode_attention: v_cache {tuple(v_cache.shape)} must have "
                         f"k_cache's shape {tuple(k_cache.shape)}")
    b, tq, hq, d = q.shape
    _, page, hkv, _ = k_cache.shape
    group = hq // hkv
    if out is None:
        out = _empty(q, (b, tq, hq, d), False)
    _check_out(out, (b, tq, hq, d), "paged_decode_attention")
    if num_splits is None:
        num_splits = choose_splits(b * hkv, block_table.shape[1], _sms(q), page=page,
                                   one_launch=one_launch)
    t, gp = tiles(tq, group)
    q5 = q.reshape(b, tq, hkv, group, d)
    o5 = out.reshape(b, tq, hkv, group, d)
    # the caches as (pages, Hkv, PAGE, D) views: a page of one head is a 2-d tile
    kv = [c.permute(0, 2, 1, 3) if _is_torch(c) else c.transpose(0, 2, 1, 3)
          for c in (k_cache, v_cache)]
    if tables_early:
        kernel = decode_tables_early if page >= 32 else decode_narrow_tables_early
    else:
        kernel = decode if page >= 32 else decode_narrow
    head = (q5, kv[0], kv[1], block_table, seq_lens, o5)
    tail = (float(scale), t, gp, page, d)
    if num_splits == 1:
        # the partial arrays and counters are not used: stand-ins of their ranks that
        # nothing writes, views of inputs (a simulator that copies arrays back would
        # clobber the output with a view of it)
        return out, [(kernel, (b, hkv, 1),
                      (*head, q5.reshape(b, 1, tq, hkv, group, d),
                       seq_lens.reshape(b, 1, 1, 1, 1), seq_lens.reshape(b, 1), *tail,
                       False, False, 1, pages_per_step))]
    # the splits' outputs (f32) and log2-sum-exps, (B, S, Tq, Hkv, GROUP[, D])
    op = _empty(q, (b, num_splits, tq, hkv, group, d), True)
    lse = _empty(q, (b, num_splits, tq, hkv, group), True)
    if one_launch:
        count = _counters(counters, b, hkv, q)
        return out, [(kernel, (b, hkv, num_splits),
                      (*head, op, lse, count, *tail, True, True,
                       merge_width(num_splits, gp, d, merge_floats(kernel)),
                       pages_per_step))]
    return out, [(kernel, (b, hkv, num_splits),
                  (*head, op, lse, seq_lens.reshape(b, 1), *tail, True, False, 1,
                   pages_per_step)),
                 combine_launch(op.reshape(b * num_splits, tq, hkv, group, d),
                                lse.reshape(b * num_splits, tq, hkv, group), o5, num_splits,
                                gp, d, merge_floats(kernel))]


def paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens, scale, out=None, *,
                           num_splits=None, one_launch=True, counters=None,
                           pages_per_step=1, tables_early=False):
    """softmax(q k^T * scale) v over each sequence's pages, causal among its Tq new
    tokens; returns out (B, Tq, Hq, D) in q's dtype.

    num_splits: ranges of pages each context is cut into (None: `choose_splits`).
    one_launch: split contexts are merged inside the decode kernel, by the last split
    block of each (sequence, KV head) to finish (a ticket counter); False: by a second
    launch, `combine`.  counters: the tickets, a contiguous int32 array of at least
    B * Hkv elements that must be ZERO when passed (each launch leaves them zero
    again; a caller that reuses one buffer, e.g. across CUDA-graph replays, allocates
    it zeroed once; a launch cut short by an error can leave it nonzero; two launches
    that may run at once, on two streams, need a buffer each).  None: a fresh zeroed
    array per call.  pages_per_step: pages (1 or 2) of one online-softmax
    step where every row sees them whole (each page's own products, one max, one exp2
    and one rescale for both: 32-key steps from the engine's pages of 16).
    tables_early: the caller promises that the kernel just before this call in the
    stream (one of tileir's, launched programmatically) does not write block_table or
    seq_lens; the kernel then reads the length and its first pages' numbers before its
    wait for that kernel (on sm_90a: `decode_tables_early`)."""
    out, calls = launches(q, k_cache, v_cache, block_table, seq_lens, scale, out, num_splits,
                          one_launch, counters, pages_per_step, tables_early)
    for kernel, grid, args in calls:
        ct.launch(None, grid, kernel, args)
    return out


def gather_reference(q, k_cache, v_cache, block_table, seq_lens, scale) -> np.ndarray:
    """float64 decode attention of NumPy arrays: each sequence's keys gathered from
    its pages, causal among the new tokens."""
    q = np.asarray(q, np.float64)
    b, tq, hq, d = q.shape
    page, hkv = k_cache.shape[1], k_cache.shape[2]
    out = np.empty((b, tq, hq, d))
    for i in range(b):
        n = int(seq_lens[i])
        ids = np.asarray(block_table[i][:ct.cdiv(n, page)])
        k = np.asarray(k_cache[ids], np.float64).reshape(-1, hkv, d)[:n]
        v = np.asarray(v_cache[ids], np.float64).reshape(-1, hkv, d)[:n]
        k, v = (np.repeat(x, hq // hkv, axis=1) for x in (k, v))      # (n, hq, d)
        s = np.einsum("thd,nhd->htn", q[i], k) * scale
        pos = n - tq + np.arange(tq)
        s = np.where(np.arange(n)[None, None, :] <= pos[None, :, None], s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        out[i] = np.einsum("htn,nhd->thd", p, v)
    return out


def random_case(rng, batch, tq, heads, kv_heads, d, page, lens, dtype=np.float32,
                spare_pages=3):
    """A paged cache with shuffled pages, NaN in every slot past a sequence's end."""
    lens = np.asarray(lens, np.int32)
    max_pages = int(ct.cdiv(int(lens.max()), page)) + 1
    num_pages = int(sum(ct.cdiv(int(n), page) for n in lens)) + spare_pages
    k_cache = np.full((num_pages, page, kv_heads, d), np.nan, dtype)
    v_cache = np.full_like(k_cache, np.nan)
    table = np.full((batch, max_pages), -1, np.int32)
    ids = rng.permutation(num_pages)
    at = 0
    for i, n in enumerate(lens):
        used = ct.cdiv(int(n), page)
        table[i, :used] = ids[at:at + used]
        at += used
        kv = rng.standard_normal((2, used * page, kv_heads, d)).astype(dtype)
        kv[:, n:] = np.nan
        k_cache[table[i, :used]] = kv[0].reshape(used, page, kv_heads, d)
        v_cache[table[i, :used]] = kv[1].reshape(used, page, kv_heads, d)
    q = rng.standard_normal((batch, tq, heads, d)).astype(dtype)
    return q, k_cache, v_cache, table, lens


def run(rng, batch=3, tq=2, heads=8, kv_heads=2, d=32, page=16):
    """The interpreter's run of a small ragged case with split-KV."""
    lens = rng.integers(tq, 5 * page, batch)
    q, kc, vc, table, lens = random_case(rng, batch, tq, heads, kv_heads, d, page, lens)
    scale = 1.0 / math.sqrt(d)
    out = np.full_like(q, np.nan)
    paged_decode_attention(q, kc, vc, table, lens, scale, out, num_splits=2)
    return out, gather_reference(q, kc, vc, table, lens, scale), 1e-4, 1e-5
