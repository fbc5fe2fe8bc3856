"""Attention forward as the cuTile and Triton tutorials write it.

One block computes BM rows of one head's output: it loads its Q tile once, then
walks the keys and values BN at a time with an online softmax in fp32 (the row
max `m` and sum `l` carried, the running output rescaled by exp2(m_old - m_new)),
and divides by `l` at the end.  Q is (batch, heads, seq, D); K and V are
(batch, heads // GROUP, seq_kv, D): GROUP query heads share a key/value head
(grouped-query attention).  A sequence need not be a multiple of the tiles: Q rows
past its end are zero padding that is never stored, and key columns past it are
masked to -inf.  With CAUSAL, query row r sees keys 0..r, and the loop stops at
the block's last row.

Launch: grid (cdiv(seq, BM), batch * heads).

Beside it, the same loop in three more settings (docs/attention.md, "Variable
lengths and the log-sum-exp"):
- `attention_lse`: `attention` that also stores each row's log-sum-exp, (batch,
  heads, seq) float32, natural log; a kernel of its own, so that `attention` stays
  the tutorial's source.
- `attention_varlen`: a batch of sequences of different lengths packed along one
  axis, as FlashAttention's varlen API takes them: Q (total_q, heads, D), K and V
  (total_k, kv_heads, D), sequence i at rows cu_seqlens[i]..cu_seqlens[i+1]; the
  log-sum-exp optional (`WITH_LSE`, compiled out when False).
- `flash_attention_varlen`: the host function that launches it, tiles chosen by D.
"""

import math

import numpy as np

import tileir as ct

LOG2E = 1.0 / math.log(2.0)
LN2 = math.log(2.0)


@ct.kernel
def attention(Q, K, V, O, scale: float, H: ct.Constant[int], GROUP: ct.Constant[int],
              BM: ct.Constant[int], BN: ct.Constant[int], D: ct.Constant[int],
              CAUSAL: ct.Constant[bool]):
    mb = ct.bid(0)
    b = ct.bid(1) // H
    h = ct.bid(1) % H
    kvh = h // GROUP
    q = ct.load(Q, index=(b, h, mb, 0), shape=(1, 1, BM, D),
                padding_mode=ct.PaddingMode.ZERO).reshape((BM, D))
    qk_scale = scale * LOG2E                       # exp(x * scale) = exp2(x * qk_scale)
    m = ct.full((BM, 1), -np.inf, dtype=np.float32)
    l = ct.zeros((BM, 1), dtype=np.float32)
    acc = ct.zeros((BM, D), dtype=np.float32)
    rows = mb * BM + ct.arange(BM, dtype=np.int32)[:, None]
    n_kv = K.shape[2]
    if CAUSAL:
        trips = ct.cdiv(min((mb + 1) * BM, n_kv), BN)
    else:
        trips = ct.cdiv(n_kv, BN)
    for j in range(trips):
        k = ct.load(K, index=(b, kvh, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        s = ct.mma(q, ct.transpose(k), ct.zeros((BM, BN), dtype=np.float32))
        cols = j * BN + ct.arange(BN, dtype=np.int32)[None, :]
        keep = cols < n_kv
        if CAUSAL:
            keep = keep & (rows >= cols)
        s = ct.where(keep, s, -np.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True) * qk_scale)
        # (flushed to zero as cuTile's attention sample asks: a probability below
        # 2^-126 of a row whose largest is 1 changes neither the row's sum nor P V)
        p = ct.exp2(s * qk_scale - m_new, flush_to_zero=True)
        alpha = ct.exp2(m - m_new, flush_to_zero=True)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(b, kvh, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        acc = ct.mma(p.astype(Q.dtype), v, acc * alpha)
        m = m_new
    out = (acc / l).reshape((1, 1, BM, D)).astype(O.dtype)
    ct.store(O, index=(b, h, mb, 0), tile=out)



@ct.kernel
def attention_lse(Q, K, V, O, LSE, scale: float, H: ct.Constant[int],
                  GROUP: ct.Constant[int], BM: ct.Constant[int], BN: ct.Constant[int],
                  D: ct.Constant[int], CAUSAL: ct.Constant[bool]):
    """`attention`, and each query row's log-sum-exp of its scaled scores,
    ln(sum_j exp(scale * q.k_j)), into LSE (batch, heads, seq) float32."""
    mb = ct.bid(0)
    b = ct.bid(1) // H
    h = ct.bid(1) % H
    kvh = h // GROUP
    q = ct.load(Q, index=(b, h, mb, 0), shape=(1, 1, BM, D),
                padding_mode=ct.PaddingMode.ZERO).reshape((BM, D))
    qk_scale = scale * LOG2E
    m = ct.full((BM, 1), -np.inf, dtype=np.float32)
    l = ct.zeros((BM, 1), dtype=np.float32)
    acc = ct.zeros((BM, D), dtype=np.float32)
    rows = mb * BM + ct.arange(BM, dtype=np.int32)[:, None]
    n_kv = K.shape[2]
    if CAUSAL:
        trips = ct.cdiv(min((mb + 1) * BM, n_kv), BN)
    else:
        trips = ct.cdiv(n_kv, BN)
    for j in range(trips):
        k = ct.load(K, index=(b, kvh, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        s = ct.mma(q, ct.transpose(k), ct.zeros((BM, BN), dtype=np.float32))
        cols = j * BN + ct.arange(BN, dtype=np.int32)[None, :]
        keep = cols < n_kv
        if CAUSAL:
            keep = keep & (rows >= cols)
        s = ct.where(keep, s, -np.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True) * qk_scale)
        p = ct.exp2(s * qk_scale - m_new)
        alpha = ct.exp2(m - m_new)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(b, kvh, j, 0), shape=(1, 1, BN, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        acc = ct.mma(p.astype(Q.dtype), v, acc * alpha)
        m = m_new
    out = (acc / l).reshape((1, 1, BM, D)).astype(O.dtype)
    ct.store(O, index=(b, h, mb, 0), tile=out)
    # m is in log2 units of the scaled scores: ln(sum) = (m + log2(l)) * ln 2
    ct.store(LSE, index=(b, h, mb), tile=((m + ct.log2(l)) * LN2).reshape((1, 1, BM)))


@ct.kernel
def attention_varlen(Q, K, V, O, LSE, cu_seqlens_q, cu_seqlens_k, scale: float,
                     H: ct.Constant[int], GROUP: ct.Constant[int], BM: ct.Constant[int],
                     BN: ct.Constant[int], D: ct.Constant[int], CAUSAL: ct.Constant[bool],
                     WITH_LSE: ct.Constant[bool]):
    """Attention over a packed batch of sequences of different lengths.

    Q is (total_q, H, D), K and V (total_k, H // GROUP, D); sequence `b` owns the
    query rows cu_seqlens_q[b]..cu_seqlens_q[b+1] and the key rows
    cu_seqlens_k[b]..cu_seqlens_k[b+1] (int32 arrays of length batch + 1).  O is
    like Q.  With WITH_LSE, LSE (H, total_q) float32 gets each row's natural-log
    log-sum-exp; without it LSE is not read or written (pass any array).

    CAUSAL aligns the mask bottom-right, as FlashAttention does when the lengths
    differ: query i of a sequence of lq queries and lk keys sees keys
    0..i + lk - lq (the last query sees every key).  A query that sees no key (i <
    lq - lk, or lk = 0) gets zeros and a log-sum-exp of -inf.

    Every load is a whole tile of the packed arrays (TMA copies on sm_90a): block mb
    of sequence b takes Q's BM-row tile t = cu_seqlens_q[b] // BM + mb, which may
    hold rows of the neighbouring sequences too, and walks the BN-row tiles of K and
    V that cover the sequence's keys, masking the neighbours' keys off; only the
    sequence's own rows are stored.  A tile shared by two sequences is computed
    once for each.

    Launch: grid (cdiv(max_seqlen_q, BM) + 1, batch * H); blocks past their
    sequence's end return at once.
    """
    mb = ct.bid(0)
    b = ct.bid(1) // H
    h = ct.bid(1) % H
    kvh = h // GROUP
    q_start = ct.load(cu_seqlens_q, index=(b,), shape=())
    q_end = ct.load(cu_seqlens_q, index=(b + 1,), shape=())
    k_start = ct.load(cu_seqlens_k, index=(b,), shape=())
    k_end = ct.load(cu_seqlens_k, index=(b + 1,), shape=())
    t = q_start // BM + mb                   # the block's tile of Q's rows
    if t * BM >= q_end or q_start == q_end:
        return
    q = ct.load(Q, index=(t, h, 0), shape=(BM, 1, D),
                padding_mode=ct.PaddingMode.ZERO).reshape((BM, D))
    rows = t * BM + ct.arange(BM, dtype=np.int32)[:, None]
    qk_scale = scale * LOG2E
    m = ct.full((BM, 1), -np.inf, dtype=np.float32)
    l = ct.zeros((BM, 1), dtype=np.float32)
    acc = ct.zeros((BM, D), dtype=np.float32)
    last = k_end                             # one past the block's last visible key
    if CAUSAL:
        # query row r sees keys up to r + (k_end - q_end) (rows of the packed arrays)
        shift = k_end - q_end
        last = min((t + 1) * BM, q_end) + shift
    for j in range(k_start // BN, ct.cdiv(last, BN)):
        k = ct.load(K, index=(j, kvh, 0), shape=(BN, 1, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        s = ct.mma(q, ct.transpose(k), ct.zeros((BM, BN), dtype=np.float32))
        cols = j * BN + ct.arange(BN, dtype=np.int32)[None, :]
        if CAUSAL:      # (for the sequence's rows, r + shift < k_end: no end test)
            keep = (cols >= k_start) & (rows + shift >= cols)
        else:
            keep = (cols >= k_start) & (cols < k_end)
        s = ct.where(keep, s, -np.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True) * qk_scale)
        # a row that has seen no key yet keeps m = -inf: subtract 0 instead, so
        # that its p and alpha are 0 and 1, not exp2(-inf + inf) = NaN
        m_safe = ct.where(m_new == -np.inf, 0.0, m_new)
        p = ct.exp2(s * qk_scale - m_safe)
        alpha = ct.exp2(m - m_safe)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(j, kvh, 0), shape=(BN, 1, D),
                    padding_mode=ct.PaddingMode.ZERO).reshape((BN, D))
        acc = ct.mma(p.astype(Q.dtype), v, acc * alpha)
        m = m_new
    seen = l > 0.0                           # rows that saw at least one key
    out = acc / ct.where(seen, l, 1.0)
    mine = (rows >= q_start) & (rows < q_end)    # the sequence's own rows
    dims = ct.arange(D, dtype=np.int32)[None, :]
    ct.scatter(O, (rows, h, dims), out.astype(O.dtype), mask=mine)
    if WITH_LSE:
        lse = ct.where(seen, (m + ct.log2(ct.where(seen, l, 1.0))) * LN2, -np.inf)
        ct.scatter(LSE, (h, rows), lse, mask=mine)


def grid(q, bm: int) -> tuple[int, int, int]:
    batch, heads, seq, _ = q.shape
    return (ct.cdiv(seq, bm), batch * heads, 1)


def reference(q, k, v, scale: float, causal: bool) -> np.ndarray:
    """float64 attention of NumPy arrays (batch, heads, seq, D), keys grouped."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sq)[:, None] >= np.arange(sk)[None, :], s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def run(rng, batch=1, heads=4, kv_heads=2, seq=77, d=64, causal=True):
    """The interpreter's run of a small ragged case (bf16 would be slow in NumPy: f32)."""
    q = rng.standard_normal((batch, heads, seq, d)).astype(np.float32)
    k = rng.standard_normal((batch, kv_heads, seq, d)).astype(np.float32)
    v = rng.standard_normal((batch, kv_heads, seq, d)).astype(np.float32)
    o = np.full_like(q, np.nan)
    scale = 1.0 / math.sqrt(d)
    ct.launch(None, grid(q, 32), attention,
              (q, k, v, o, scale, heads, heads // kv_heads, 32, 32, d, causal))
    return o, reference(q, k, v, scale, causal), 1e-4, 1e-5


# ---------------------------------------------------------------------------
# variable-length batches from the host
# ---------------------------------------------------------------------------
# (BM, BN) by target and head dim.  sm_90a: 128-row blocks of two warpgroups; at
# D = 256 the (BM, D) accumulator alone takes 128 registers a thread, and 128-row K
# and V tiles leave no room for a second ring stage beside Q (docs/attention.md).
# sm_80 (mma.sync): the largest tiles ptxas fits in 255 registers without local
# memory (at D = 64 a 64 x 64 tile gets two warps, which spill).  sm_90a at D = 64:
# 256 x 64 on four consumer warpgroups (HINTS).
TILES = {"sm_90a": {64: (256, 64), 128: (128, 128), 256: (128, 64)},
         "sm_80": {64: (128, 32), 128: (64, 64), 256: (64, 32)}}


# Kernel options by target and head dim, beside the tiles.  sm_90a, D = 64: the
# softmax's issue, not the tensor cores, sets the pace there, and fp_fusion makes
# `s * scale - m` one FFMA an element, and 256 x 64 tiles on four consumer warpgroups
# (num_warps=16) give each scheduler four consumer warps to issue from (docs/attention.md,
# "Head dim 64").  Measured on the H200 (2026-11-29, bench/attention.py, B4 H32 S4096
# D64, TFLOP/s, full / causal): 469 / 402 so, 435 / 387 at 128 x 128 with fp_fusion,
# 414 / 373 plain at 128 x 128; cuDNN 456 / 427 in the same run.  D = 128: fp_fusion
# too (`s * scale - m` and `l * alpha + sum` as FFMA, 549 -> 483 loop instructions):
# H200, 2026-11-29 16:35 UTC, the fixed-length kernel at 128 x 128, TFLOP/s plain / fused
# (cuDNN): B4 S4096 full 529 / 560 (608), causal 532 / 512 (590); B1 S16384 full 533 /
# 573 (607), causal 530 / 574 (560); GQA 32/8 full 544 / 577 (608), causal 497 / 533 (538).
HINTS = {"sm_90a": {64: {"fp_fusion": True, "num_warps": 16}, 128: {"fp_fusion": True}},
         "sm_80": {}}
_varlen_kernels: dict = {}


def varlen_kernel(d: int, target: str = "sm_90a"):
    """The kernel `flash_attention_varlen` launches for head dim `d` on `target`:
    `attention_varlen`, with HINTS' options where it names some."""
    hints = HINTS[target].get(d)
    if not hints:
        return attention_varlen
    key = (target, d)
    if key not in _varlen_kernels:
        _varlen_kernels[key] = attention_varlen.replace_hints(**hints)
    return _varlen_kernels[key]


def varlen_tiles(d: int, target: str = "sm_90a") -> tuple[int, int]:
    """The (BM, BN) `flash_attention_varlen` launches for head dim `d` on `target`."""
    if d < 16 or d > 256 or d & (d - 1):
        raise ValueError(f"head dim {d} is not supported: a power of two in [16, 256]")
    table = TILES[target]
    return table.get(d) or (table[128] if d <= 128 else table[256])


def varlen_grid(max_seqlen_q: int, batch: int, heads: int, bm: int) -> tuple[int, int, int]:
    # a sequence's rows may start inside a tile: one tile more than its length needs
    return (ct.cdiv(max_seqlen_q, bm) + 1, batch * heads, 1)


def flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           scale, *, causal=True, out=None, lse=None):
    """Attention over a packed batch of sequences of different lengths.

    q (total_q, Hq, D), k and v (total_k, Hkv, D), Hq a multiple of Hkv (query head h
    reads key/value head h // (Hq // Hkv)); cu_seqlens_q and cu_seqlens_k int32 of
    length batch + 1, nondecreasing from 0 (sequence b's queries are rows
    cu_seqlens_q[b]..cu_seqlens_q[b+1] of q); max_seqlen_q at least the longest query
    length (it sizes the grid); max_seqlen_k is taken for FlashAttention's signature
    and checked positive-or-zero (the kernel reads the key lengths from
    cu_seqlens_k).  `causal` aligns bottom-right when a sequence's query and key
    lengths differ (see `attention_varlen`).  Returns `out` (total_q, Hq, D) in q's
    dtype (written into `out` when given); fills `lse` (Hq, total_q) float32 with the
    natural-log log-sum-exp of each row's scaled scores when given.

    torch CUDA tensors launch on torch's current stream; NumPy arrays run in the
    interpreter.  Tiles are chosen by the target and D (`varlen_tiles`)."""
    for name, x, rank in (("q", q, 3), ("k", k, 3), ("v", v, 3),
                          ("cu_seqlens_q", cu_seqlens_q, 1), ("cu_seqlens_k", cu_seqlens_k, 1)):
        if len(x.shape) != rank:
            raise ValueError(f"{name} must have {rank} dims; got shape {tuple(x.shape)}")
    total_q, hq, d = q.shape
    total_k, hkv, dk = k.shape
    if tuple(v.shape) != tuple(k.shape) or dk != d:
        raise ValueError(f"k and v must both be (total_k, Hkv, {d}); got {tuple(k.shape)} "
                         f"and {tuple(v.shape)}")
    if hkv == 0 or hq % hkv:
        raise ValueError(f"query heads ({hq}) must be a multiple of key/value heads ({hkv})")
    if cu_seqlens_q.shape[0] != cu_seqlens_k.shape[0] or cu_seqlens_q.shape[0] < 1:
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k must both have batch + 1 entries; got "
                         f"{cu_seqlens_q.shape[0]} and {cu_seqlens_k.shape[0]}")
    for name, x in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if "int32" not in str(x.dtype):
            raise ValueError(f"{name} must be int32; got {x.dtype}")
    if max_seqlen_q < 0 or max_seqlen_k < 0:
        raise ValueError(f"max_seqlen_q and max_seqlen_k must be >= 0; got {max_seqlen_q}, "
                         f"{max_seqlen_k}")
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise ValueError(f"q, k and v must have one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    on_torch = type(q).__module__.startswith("torch")
    target = _target(q) if on_torch else "sm_90a"
    bm, bn = varlen_tiles(d, target)
    if out is None:
        out = q.new_empty(q.shape) if on_torch else np.empty_like(q)
    elif tuple(out.shape) != tuple(q.shape) or out.dtype != q.dtype:
        raise ValueError(f"out must be {tuple(q.shape)} {q.dtype}; got {tuple(out.shape)} "
                         f"{out.dtype}")
    if lse is not None and (tuple(lse.shape) != (hq, total_q) or "float32" not in str(lse.dtype)):
        raise ValueError(f"lse must be ({hq}, {total_q}) float32; got {tuple(lse.shape)} "
                         f"{lse.dtype}")
    batch = cu_seqlens_q.shape[0] - 1
    if batch == 0 or total_q == 0 or max_seqlen_q == 0:
        return out
    if total_k == 0:                         # no keys anywhere (and no array to copy from)
        out[...] = 0
        if lse is not None:
            lse[...] = -np.inf
        return out
    # without lse the kernel's LSE parameter is compiled out: any array will do
    args = (q, k, v, out, cu_seqlens_q if lse is None else lse, cu_seqlens_q, cu_seqlens_k,
            float(scale), hq, hq // hkv, bm, bn, d, bool(causal), lse is not None)
    ct.launch(None, varlen_grid(max_seqlen_q, batch, hq, bm), varlen_kernel(d, target), args)
    return out


def _target(x) -> str:
    from tileir.kernel import device_target
    return device_target([x]) if x.is_cuda else "sm_90a"


def reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, scale: float, causal: bool
                     ) -> tuple[np.ndarray, np.ndarray]:
    """float64 (out (total_q, Hq, D), lse (Hq, total_q)) of packed NumPy arrays, causal
    aligned bottom-right; rows that see no key are 0 with a log-sum-exp of -inf."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    out = np.zeros(q.shape)
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1 = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        k0, k1 = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        qs = q[q0:q1].transpose(1, 0, 2)                         # (H, lq, D)
        ks, vs = (np.repeat(x[k0:k1].transpose(1, 0, 2), group, axis=0) for x in (k, v))
        s = qs @ ks.transpose(0, 2, 1) * scale                   # (H, lq, lk)
        if causal:
            lq, lk = q1 - q0, k1 - k0
            s = np.where(np.arange(lk)[None, :] <= np.arange(lq)[:, None] + lk - lq, s, -np.inf)
        mx = s.max(axis=-1, keepdims=True, initial=-np.inf)
        seen = np.isfinite(mx)
        p = np.exp(s - np.where(seen, mx, 0.0))
        total = p.sum(axis=-1, keepdims=True)
        o = np.where(seen, p @ vs / np.where(seen, total, 1.0), 0.0)
        out[q0:q1] = o.transpose(1, 0, 2)
        lse[:, q0:q1] = np.where(seen, mx + np.log(np.where(seen, total, 1.0)), -np.inf)[..., 0]
    return out, lse


def reference_lse(q, k, scale: float, causal: bool) -> np.ndarray:
    """float64 log-sum-exp (batch, heads, seq) of the scaled scores, keys grouped."""
    q, k = (np.asarray(x, dtype=np.float64) for x in (q, k))
    k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sq)[:, None] >= np.arange(sk)[None, :], s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    return (mx + np.log(np.exp(s - mx).sum(axis=-1, keepdims=True)))[..., 0]


def ragged_lengths(rng, batch: int, most: int) -> list[int]:
    """Sequence lengths for tests: 0, 1 and `most` among them, the rest random."""
    fixed = [0, 1, most][:batch]
    return fixed + [int(n) for n in rng.integers(0, most + 1, size=batch - len(fixed))]
