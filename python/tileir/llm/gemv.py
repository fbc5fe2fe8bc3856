"""Decode GEMVs: y = x @ W^T for a few rows of x (at most DECODE_ROWS), W (N, K) streamed once.

A decode step's GEMMs read every weight byte once and do almost no arithmetic with it,
so their speed is the fraction of copy bandwidth at which the weight streams.  These
kernels are shaped for that, as a cuTile user writes a GEMV:

- a block owns BN weight rows (a slice of N) and, with SPLIT > 1, one of SPLIT
  contiguous runs of K tiles: grid (cdiv(N, BN), SPLIT), enough blocks to keep every
  SM's loads in flight;
- each step loads a wide contiguous (BN, BK) weight tile and the few activation rows
  beside it (a (BM, BK) tile, BM the rows padded to a power of two);
- the product is transposed, W (BN, BK) @ x^T (BK, BM): the weight rows are the
  tensor cores' M and the activation rows their N (8 or 16), so no 64-row activation
  tile of padding is read (64 weight rows run on wgmma, 16 or 32 on mma.sync); or, with FMA, f32 products summed element-wise into a
  (BM, BN, BK) tile that is reduced along K once, after the loop (one activation
  row, and the float32 mode, whose f32 operands the tensor cores would take as tf32);
- with SPLIT = 1 the block applies the epilogue (the cast; the residual add of
  `gemv_add`; SwiGLU's silu(g) * u of `gemv_swiglu`, each projection rounded to the
  activation dtype first as transformers does) and stores y; with SPLIT > 1 it stores
  its f32 partial sums into `part` (SPLIT, M, N), and the SPLIT partials are added in
  the fixed order s = 0, 1, ..., SPLIT - 1 (the same bits on every run) before the
  epilogue: with TICKET (the plans' default) by the block of each N tile that finishes
  last, in the same launch; without, by `gemv_combine` (`gemv_combine_add`,
  `gemv_combine_swiglu`), a second launch.

The ticket: after storing its partial, each block adds 1 to its N tile's int32 counter
(`count[j]`, an atomic add with acquire-release ordering at device scope); the block
that draws SPLIT - 1 has the tile's other partials behind it.  The memory model: the
add's release half orders the whole block's partial stores before the ticket (a tile
atomic is the block's: the compiler gathers its threads at a barrier before the one
thread's `atom.acq_rel.gpu`), its acquire half orders the last block's reads after
every other ticket, and those reads are relaxed device-scope loads (`ld.relaxed.gpu`:
from L2, so no line an SM's L1 held before can be read stale).  The last block then
stores y and puts the counter back to 0, so the next launch (a later step, a CUDA
graph's replay) starts from zeros.  The counters are a buffer of the caller's
(`tileir.llm.backend.Backend` holds one, zeroed once) with an entry per N tile; the
blocks never wait for each other, so any grid size is safe.

With NORM, `gemv`, `gemv_swiglu` and `gemv_swiglu_fused` take the residual rows, RMSNorm's
weight g and eps for the norm's output: every block first finds its rows'
rsqrt(mean(x^2) + eps) over the whole of K (plain loads of x, whatever its split), then
feeds round(x * rs * g) to the product, rounded to the activation dtype as the separate
norm's output is (`Backend.gemv_norm`; a launch and the normed rows' round trip saved).
The rows then come from registers, not the ring: mma.sync reads them there, wgmma's B
is staged to shared memory each iteration (the weights' ring is unchanged), the next
iteration's rows loaded ahead.

`gemv_add_norm` is `gemv_add` with the next RMSNorm in its tail: each block that stores
an N tile of y (the tile's last split block, or every block at SPLIT = 1) then draws a
ticket on one grid-wide counter (`count[cdiv(N, BN)]`, after the tiles' own, as the
tiles' ticket is drawn); the block that draws the last reads all of y's rows back
(relaxed device-scope loads, as the partials) and writes RMSNorm(y) * g as the separate
norm computes it, then resets that counter (`Backend.gemv_norm_tail`: the norm's launch
after O and down saved; `norm_tail_fits`: the rows a block holds).

`gemv_qkv_rope` is Llama's decode QKV with `kernels.rope` and `write_slots` in its
epilogue (`Backend.qkv_rope`): a block owns BN / 2 rotary pairs of one head (the
rows h D + p0.. and h D + D/2 + p0.., two (BN/2, BK) weight tiles a step, two
accumulators), so it holds both halves of each pair it rotates; it stores q, k and v
into y as `gemv` does, q and k rotated at each row's position, and k (rotated) and v
into the paged cache at each row's slot: the three launches' bits, in one
(`qkv_rope_fits`: the plans it takes).

`gemv_swiglu` runs a loop a weight (each its own ring); `gemv_swiglu_fused` loads both
weights' tiles in one loop (one ring, no ramp between the two), a candidate the
decode sweep ranks (bench/sweep_llm_decode.py --gemv).

Early weight loads (`early_loading`, `Backend.gemv_early_loads`): each kernel may take its
weight arguments (`WEIGHTS`) as the `early_loads` kernel option, a promise that no
kernel before it in the stream writes them.  Launched programmatically on sm_90a, the
first weight tiles of every block's ring then start into shared memory before the
kernel's wait for the previous kernel, and only the activation rows' loads (which that
kernel wrote) wait (backend/pipeline/software_pipeline.py `load_early`).  Only the first
ring of a kernel, written in its body: `gemv_swiglu`'s up loop, a persistent
candidate's rings and the FMA form (plain loads, no ring) are as without it.

`plan` picks the tiles and the split for a shape; `tileir.llm.backend.Backend` routes
its GEMMs of at most DECODE_ROWS rows here when `decode_gemv` is set.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import tileir as ct
from tileir.examples import next_pow2

ZERO = ct.PaddingMode.ZERO
ACQ_REL, RELAXED = ct.MemoryOrder.ACQ_REL, ct.MemoryOrder.RELAXED
DEVICE = ct.MemoryScope.DEVICE


# columns of one row a load of the norm's prologue (2 KB of bf16, 16 bytes a thread of
# four warps): Llama-3-8B's rows in four loads, whatever the product's tiles (a one-warp
# block holds 32 f32 sums a thread; 2048 took it from 96 registers to 205)
ROW_TILE = 1024


@ct.function
def _inv_rms(x, eps, BM: ct.Constant[int]):
    """(BM, 1) f32: rsqrt(mean(x^2) + eps) of x's rows (those past x's last: 0), over all
    of K (every block, whatever its split: the norm needs the whole row).  A row at a
    time, in wide plain loads of x (not the product's (BM, BK) tiles, most of whose
    rows are padding at one row): the prologue is a few loads deep, not a K loop's."""
    rows = ct.arange(BM, dtype=np.int32)[:, None]
    inv = ct.zeros((BM, 1), dtype=ct.float32)
    for r in range(x.shape[0]):
        ss = ct.zeros((1, ROW_TILE), dtype=ct.float32)
        for k in range(ct.num_tiles(x, axis=1, shape=(1, ROW_TILE))):
            a = ct.astype(ct.load(x, index=(r, k), shape=(1, ROW_TILE), padding_mode=ZERO),
                          ct.float32)
            ss = ss + a * a
        rs = ct.rsqrt(ct.sum(ss, axis=1, keepdims=True) / x.shape[1] + eps)
        inv = ct.where(rows == r, rs, inv)
    return inv


@ct.function
def _normed(a, gk, inv, BK: ct.Constant[int], dtype):
    """RMSNorm(x) * g of x's tile a (gk: g's tile of the same columns), rounded to the
    activation dtype as the separate norm's output is (tileir.examples.rmsnorm) before
    the GEMV reads it."""
    g32 = ct.reshape(ct.astype(gk, ct.float32), (1, BK))
    return ct.astype(ct.astype(a, ct.float32) * inv * g32, dtype)


@ct.function
def _rows(x, g, inv, k, BM: ct.Constant[int], BK: ct.Constant[int],
          NORM: ct.Constant[bool]):
    """x's (BM, BK) tile k, with NORM as `_normed` makes it."""
    a = ct.load(x, index=(0, k), shape=(BM, BK), padding_mode=ZERO)
    if NORM:
        a = _normed(a, ct.load(g, index=(k,), shape=(BK,), padding_mode=ZERO), inv, BK,
                    x.dtype)
    return a


@ct.function
def _partial(x, g, inv, w, j, s, BM: ct.Constant[int], BN: ct.Constant[int],
             BK: ct.Constant[int], SPLIT: ct.Constant[int], FMA: ct.Constant[bool],
             NORM: ct.Constant[bool]):
    """(BM, BN) f32: x's first BM rows times W's rows j * BN.., over split s's K tiles
    (the s-th of SPLIT runs of cdiv(tiles, SPLIT) tiles); with NORM, RMSNorm(x) * g in
    place of x (inv: the rows' `_inv_rms`)."""
    tiles = ct.num_tiles(w, axis=1, shape=(BN, BK))
    per = ct.cdiv(tiles, SPLIT)
    first = s * per
    last = min(first + per, tiles)
    if FMA and BM == 1:
        # products summed per element, reduced along K once after the loop; one row
        # broadcast over the weight tile (a (BN, BK) product in the weight's layout)
        acc = ct.zeros((BN, BK), dtype=ct.float32)
        for k in range(first, last):
            a = _rows(x, g, inv, k, 1, BK, NORM)
            b = ct.load(w, index=(j, k), shape=(BN, BK), padding_mode=ZERO)
            acc = acc + ct.astype(a, ct.float32) * ct.astype(b, ct.float32)
        return ct.reshape(ct.sum(acc, axis=1), (1, BN))
    if FMA:
        acc = ct.zeros((BM, BN, BK), dtype=ct.float32)
        for k in range(first, last):
            a = _rows(x, g, inv, k, BM, BK, NORM)
            b = ct.load(w, index=(j, k), shape=(BN, BK), padding_mode=ZERO)
            acc = acc + ct.reshape(ct.astype(a, ct.float32), (BM, 1, BK)) \
                * ct.reshape(ct.astype(b, ct.float32), (1, BN, BK))
        return ct.sum(acc, axis=2)
    # tensor cores, transposed: the weight tile is the product's M, the rows its N
    acc = ct.zeros((BN, BM), dtype=ct.float32)
    if NORM and BN >= 64:
        # normed in registers, the rows leave the weights' ring: each iteration loads
        # the next one's rows and g first, so its product does not wait for them (at
        # 64 weight rows and more, wgmma's blocks of four warps, few an SM; a one-warp
        # mma.sync block has no registers for the copy, and more blocks beside it)
        xs = ct.load(x, index=(0, first), shape=(BM, BK), padding_mode=ZERO)
        gs = ct.load(g, index=(first,), shape=(BK,), padding_mode=ZERO)
        for k in range(first, last):
            a, gk = xs, gs
            xs = ct.load(x, index=(0, k + 1), shape=(BM, BK), padding_mode=ZERO)
            gs = ct.load(g, index=(k + 1,), shape=(BK,), padding_mode=ZERO)
            b = ct.load(w, index=(j, k), shape=(BN, BK), padding_mode=ZERO)
            acc = ct.mma(b, ct.transpose(_normed(a, gk, inv, BK, x.dtype)), acc)
        return ct.transpose(acc)
    for k in range(first, last):
        a = _rows(x, g, inv, k, BM, BK, NORM)
        b = ct.load(w, index=(j, k), shape=(BN, BK), padding_mode=ZERO)
        acc = ct.mma(b, ct.transpose(a), acc)
    return ct.transpose(acc)


@ct.function
def _split(part, index, shape, ORDERED: ct.Constant[bool]):
    """part's tile at `index`; ORDERED: relaxed device-scope loads, which read L2 (the
    ticket's reader: another block's partial, never a stale L1 line)."""
    if ORDERED:
        return ct.load(part, index=index, shape=shape, padding_mode=ZERO,
                       memory_order=RELAXED, memory_scope=DEVICE)
    return ct.load(part, index=index, shape=shape, padding_mode=ZERO)


@ct.function
def _sum_splits(part, j, SPLIT: ct.Constant[int], BM: ct.Constant[int],
                BC: ct.Constant[int], ORDERED: ct.Constant[bool]):
    """The SPLIT partials of part (SPLIT, M, N), columns j * BC.., added in the order
    s = 0, 1, ..., SPLIT - 1 (the combine kernels and the ticket's last block alike)."""
    acc = ct.reshape(_split(part, (0, 0, j), (1, BM, BC), ORDERED), (BM, BC))
    for s in ct.static_iter(range(1, SPLIT)):
        acc = acc + ct.reshape(_split(part, (s, 0, j), (1, BM, BC), ORDERED), (BM, BC))
    return acc


@ct.function
def _sum_splits_of(part, h, j, SPLIT: ct.Constant[int], BM: ct.Constant[int],
                   BC: ct.Constant[int], ORDERED: ct.Constant[bool]):
    """`_sum_splits` of part[h] (SwiGLU's (2, SPLIT, M, N): h 0 the gate, 1 the up)."""
    acc = ct.reshape(_split(part, (h, 0, 0, j), (1, 1, BM, BC), ORDERED), (BM, BC))
    for s in ct.static_iter(range(1, SPLIT)):
        acc = acc + ct.reshape(_split(part, (h, s, 0, j), (1, 1, BM, BC), ORDERED), (BM, BC))
    return acc


@ct.function
def _last(count, j, SPLIT: ct.Constant[int]):
    """Whether this block, its partial stored, is the last of N tile j's SPLIT blocks:
    a ticket drawn on count[j] (acquire-release at device scope; the module's
    docstring)."""
    ticket = ct.atomic_add(count, (j,), 1, memory_order=ACQ_REL, memory_scope=DEVICE)
    return ticket == SPLIT - 1


@ct.function
def _reset(count, j):
    """count[j] back to 0 for the next launch (every ticket of this one is drawn)."""
    ct.store(count, index=(j,), tile=ct.zeros((1,), dtype=ct.int32))


@ct.kernel
def gemv(x, g, eps, w, y, part, count, BM: ct.Constant[int], BN: ct.Constant[int],
         BK: ct.Constant[int], SPLIT: ct.Constant[int], FMA: ct.Constant[bool],
         TICKET: ct.Constant[bool], NORM: ct.Constant[bool]):
    """y = x @ W^T (SPLIT = 1), or split s's partial sums into part[s] (SPLIT > 1), with
    TICKET added up by the N tile's last block (count: its counters); with NORM,
    RMSNorm(x) * g (weight g, epsilon eps) in place of x."""
    j = ct.bid(0)
    s = ct.bid(1)
    inv = _inv_rms(x, eps, BM) if NORM else eps
    acc = _partial(x, g, inv, w, j, s, BM, BN, BK, SPLIT, FMA, NORM)
    if SPLIT == 1:
        ct.store(y, index=(0, j), tile=ct.astype(acc, y.dtype))
    else:
        ct.store(part, index=(s, 0, j), tile=ct.reshape(acc, (1, BM, BN)))
        if TICKET:
            if _last(count, j, SPLIT):
                total = _sum_splits(part, j, SPLIT, BM, BN, True)
                ct.store(y, index=(0, j), tile=ct.astype(total, y.dtype))
                _reset(count, j)


@ct.function
def _plus(acc, r, j, BM: ct.Constant[int], BN: ct.Constant[int], dtype):
    """acc + r's (BM, BN) tile j, rounded to dtype."""
    res = ct.astype(ct.load(r, index=(0, j), shape=(BM, BN), padding_mode=ZERO), ct.float32)
    return ct.astype(acc + res, dtype)


@ct.kernel
def gemv_add(x, w, r, y, part, count, BM: ct.Constant[int], BN: ct.Constant[int],
             BK: ct.Constant[int], SPLIT: ct.Constant[int], FMA: ct.Constant[bool],
             TICKET: ct.Constant[bool]):
    """y = x @ W^T + r (y may be r: the residual updated in place); SPLIT > 1 and
    TICKET as `gemv`."""
    j = ct.bid(0)
    s = ct.bid(1)
    acc = _partial(x, x, 0.0, w, j, s, BM, BN, BK, SPLIT, FMA, False)
    if SPLIT == 1:
        ct.store(y, index=(0, j), tile=_plus(acc, r, j, BM, BN, y.dtype))
    else:
        ct.store(part, index=(s, 0, j), tile=ct.reshape(acc, (1, BM, BN)))
        if TICKET:
            if _last(count, j, SPLIT):
                total = _sum_splits(part, j, SPLIT, BM, BN, True)
                ct.store(y, index=(0, j), tile=_plus(total, r, j, BM, BN, y.dtype))
                _reset(count, j)


@ct.function
def _norm_row(y, g, eps, out, row, TILE: ct.Constant[int]):
    """out[row] = RMSNorm(y[row]) * g, as `tileir.examples.rmsnorm` computes it (the
    whole row one (1, TILE) f32 tile, mean square as sum / N, then x * rsqrt(ms + eps)
    * g, one rounding to out's dtype).  The same arithmetic, but the sum of squares
    runs over this block's threads, not the rmsnorm launch's: the f32 sums may part in
    the last bit, and an output then rounds to the neighbouring bf16 value (on the
    H200: 3 of 65536 elements in one of six draws; bit for bit in the interpreter).  y
    read with relaxed device-scope loads (from L2: rows other blocks stored, never a
    stale L1 line)."""
    t = ct.astype(ct.load(y, index=(row, 0), shape=(1, TILE), padding_mode=ZERO,
                          memory_order=RELAXED, memory_scope=DEVICE), ct.float32)
    w = ct.load(g, index=(0,), shape=(TILE,), padding_mode=ZERO)
    ms = ct.sum(t * t, axis=1, keepdims=True) / y.shape[1]
    ct.store(out, index=(row, 0),
             tile=ct.astype(t * ct.rsqrt(ms + eps) * ct.astype(w, ct.float32), out.dtype))


@ct.function
def _norm_tail(y, g, eps, out, count, BM: ct.Constant[int], BN: ct.Constant[int],
               TILE: ct.Constant[int]):
    """The grid's ticket, taken by a block that stored its N tile of y: count[T] (T, the
    N tiles; past their own counters) drawn acquire-release at device scope, as `_last`
    draws a tile's.  The block that draws T - 1 has every tile of y behind it: it
    writes RMSNorm(y) * g of all y's rows into out (`_norm_row`, a row at a time) and
    puts count[T] back to 0."""
    tiles = ct.num_tiles(y, axis=1, shape=(BM, BN))
    ticket = ct.atomic_add(count, (tiles,), 1, memory_order=ACQ_REL, memory_scope=DEVICE)
    if ticket == tiles - 1:
        for row in range(y.shape[0]):
            _norm_row(y, g, eps, out, row, TILE)
        _reset(count, tiles)


@ct.kernel
def gemv_add_norm(x, w, r, y, part, count, g, eps, out, BM: ct.Constant[int],
                  BN: ct.Constant[int], BK: ct.Constant[int], SPLIT: ct.Constant[int],
                  FMA: ct.Constant[bool], TICKET: ct.Constant[bool],
                  TILE: ct.Constant[int]):
    """`gemv_add` (y = x @ W^T + r, y may be r), then the next norm in its tail: out =
    RMSNorm(y) * g (weight g, epsilon eps; TILE: y's width rounded up to a power of
    two), written by the block that stores y's last N tile (`_norm_tail`, the grid's
    ticket on count[cdiv(N, BN)]).  A split K takes the tiles' tickets (TICKET must be
    set: the combine launch would store y after this one ends)."""
    ct.static_assert(SPLIT == 1 or TICKET,
                     "gemv_add_norm: a split K needs TICKET (its last blocks store y)")
    j = ct.bid(0)
    s = ct.bid(1)
    acc = _partial(x, x, 0.0, w, j, s, BM, BN, BK, SPLIT, FMA, False)
    if SPLIT == 1:
        ct.store(y, index=(0, j), tile=_plus(acc, r, j, BM, BN, y.dtype))
        _norm_tail(y, g, eps, out, count, BM, BN, TILE)
    else:
        ct.store(part, index=(s, 0, j), tile=ct.reshape(acc, (1, BM, BN)))
        if _last(count, j, SPLIT):
            total = _sum_splits(part, j, SPLIT, BM, BN, True)
            ct.store(y, index=(0, j), tile=_plus(total, r, j, BM, BN, y.dtype))
            _reset(count, j)
            _norm_tail(y, g, eps, out, count, BM, BN, TILE)


@ct.function
def _swiglu(gate, up, dtype):
    # transformers rounds each projection to the activation dtype before silu(g) * u
    g = ct.astype(ct.astype(gate, dtype), ct.float32)
    u = ct.astype(ct.astype(up, dtype), ct.float32)
    return ct.astype(g / (1.0 + ct.exp(-g)) * u, dtype)


@ct.function
def _swiglu_partials(gate, up, y, part, count, j, s, BM: ct.Constant[int],
                     BN: ct.Constant[int], SPLIT: ct.Constant[int],
                     TICKET: ct.Constant[bool]):
    """Split s's (BM, BN) gate and up partials into part[0, s] and part[1, s]; with
    TICKET, the N tile's last block adds them up and stores SwiGLU's y."""
    ct.store(part, index=(0, s, 0, j), tile=ct.reshape(gate, (1, 1, BM, BN)))
    ct.store(part, index=(1, s, 0, j), tile=ct.reshape(up, (1, 1, BM, BN)))
    if TICKET:
        if _last(count, j, SPLIT):
            gate = _sum_splits_of(part, 0, j, SPLIT, BM, BN, True)
            up = _sum_splits_of(part, 1, j, SPLIT, BM, BN, True)
            ct.store(y, index=(0, j), tile=_swiglu(gate, up, y.dtype))
            _reset(count, j)


@ct.kernel
def gemv_swiglu(x, g, eps, wg, wu, y, part, count, BM: ct.Constant[int],
                BN: ct.Constant[int], BK: ct.Constant[int], SPLIT: ct.Constant[int],
                FMA: ct.Constant[bool], TICKET: ct.Constant[bool], NORM: ct.Constant[bool]):
    """y = silu(x @ Wg^T) * (x @ Wu^T); SPLIT > 1: the two partials into part[0, s] and
    part[1, s] ((2, SPLIT, M, N)), finished by the last block (TICKET, as `gemv`) or by
    `gemv_combine_swiglu`.  NORM as `gemv` (the rows' norm found once, for both
    products)."""
    j = ct.bid(0)
    s = ct.bid(1)
    inv = _inv_rms(x, eps, BM) if NORM else eps
    gate = _partial(x, g, inv, wg, j, s, BM, BN, BK, SPLIT, FMA, NORM)
    up = _partial(x, g, inv, wu, j, s, BM, BN, BK, SPLIT, FMA, NORM)
    if SPLIT == 1:
        ct.store(y, index=(0, j), tile=_swiglu(gate, up, y.dtype))
    else:
        _swiglu_partials(gate, up, y, part, count, j, s, BM, BN, SPLIT, TICKET)


@ct.kernel
def gemv_swiglu_fused(x, g, eps, wg, wu, y, part, count, BM: ct.Constant[int],
                      BN: ct.Constant[int], BK: ct.Constant[int], SPLIT: ct.Constant[int],
                      FMA: ct.Constant[bool], TICKET: ct.Constant[bool],
                      NORM: ct.Constant[bool]):
    """`gemv_swiglu` with both weights' tiles in one loop (one ring of x, W_g and W_u
    tiles, as the MoE's gate_up_decode) instead of a loop a weight: no second ring's
    ramp between the two, at twice the ring's bytes a stage.  Tensor cores only (FMA is
    taken for the signature and must be False); TICKET and NORM as `gemv`."""
    j = ct.bid(0)
    s = ct.bid(1)
    inv = _inv_rms(x, eps, BM) if NORM else eps
    tiles = ct.num_tiles(wg, axis=1, shape=(BN, BK))
    per = ct.cdiv(tiles, SPLIT)
    first = s * per
    last = min(first + per, tiles)
    gate = ct.zeros((BN, BM), dtype=ct.float32)
    up = ct.zeros((BN, BM), dtype=ct.float32)
    if NORM and BN >= 64:
        xs = ct.load(x, index=(0, first), shape=(BM, BK), padding_mode=ZERO)
        gs = ct.load(g, index=(first,), shape=(BK,), padding_mode=ZERO)
    for k in range(first, last):
        if NORM and BN >= 64:   # as `_partial`: the next iteration's rows and g first
            a, gk = xs, gs
            xs = ct.load(x, index=(0, k + 1), shape=(BM, BK), padding_mode=ZERO)
            gs = ct.load(g, index=(k + 1,), shape=(BK,), padding_mode=ZERO)
            a = _normed(a, gk, inv, BK, x.dtype)
        else:
            a = ct.load(x, index=(0, k), shape=(BM, BK), padding_mode=ZERO)
            if NORM:
                gk = ct.load(g, index=(k,), shape=(BK,), padding_mode=ZERO)
                a = _normed(a, gk, inv, BK, x.dtype)
        xt = ct.transpose(a)
        gate = ct.mma(ct.load(wg, index=(j, k), shape=(BN, BK), padding_mode=ZERO), xt, gate)
        up = ct.mma(ct.load(wu, index=(j, k), shape=(BN, BK), padding_mode=ZERO), xt, up)
    if SPLIT == 1:
        ct.store(y, index=(0, j), tile=_swiglu(ct.transpose(gate), ct.transpose(up), y.dtype))
    else:
        _swiglu_partials(ct.transpose(gate), ct.transpose(up), y, part, count, j, s, BM, BN,
                         SPLIT, TICKET)


# The combine kernels: a split K's second launch (plans without TICKET), the partials
# added as the ticket's last block adds them (`_sum_splits`: the same bits).

@ct.kernel
def gemv_combine(part, y, SPLIT: ct.Constant[int], BM: ct.Constant[int],
                 BC: ct.Constant[int]):
    """y = the sum of part's (SPLIT, M, N) partials, cast to y's dtype."""
    j = ct.bid(0)
    ct.store(y, index=(0, j),
             tile=ct.astype(_sum_splits(part, j, SPLIT, BM, BC, False), y.dtype))


@ct.kernel
def gemv_combine_add(part, r, y, SPLIT: ct.Constant[int], BM: ct.Constant[int],
                     BC: ct.Constant[int]):
    """y = the sum of part's partials + r (y may be r)."""
    j = ct.bid(0)
    ct.store(y, index=(0, j),
             tile=_plus(_sum_splits(part, j, SPLIT, BM, BC, False), r, j, BM, BC, y.dtype))


@ct.kernel
def gemv_combine_swiglu(part, y, SPLIT: ct.Constant[int], BM: ct.Constant[int],
                        BC: ct.Constant[int]):
    """y = silu(gate) * up from part (2, SPLIT, M, N): the gate's and the up's partials."""
    j = ct.bid(0)
    gate = _sum_splits_of(part, 0, j, SPLIT, BM, BC, False)
    up = _sum_splits_of(part, 1, j, SPLIT, BM, BC, False)
    ct.store(y, index=(0, j), tile=_swiglu(gate, up, y.dtype))


# QKV with RoPE and the K/V cache write in its epilogue (Llama's decode attention input):
# a block owns BN / 2 rotary pairs of one head, so both halves of each pair it rotates
# are its own.

@ct.function
def _pair_partial(x, g, inv, w, c1, c2, s, BM: ct.Constant[int], HB: ct.Constant[int],
                  BK: ct.Constant[int], SPLIT: ct.Constant[int], FMA: ct.Constant[bool],
                  NORM: ct.Constant[bool]):
    """Two (BM, HB) f32 products: x's first BM rows times W's row tiles c1 and c2 of HB
    rows each (a head's rows p0.. and D/2 + p0..: both halves of HB rotary pairs), over
    split s's K tiles, as `_partial` makes one: each step loads the two (HB, BK) weight
    tiles beside the rows (the bytes of one (2 HB, BK) tile), and each weight row's
    products are summed as `_partial` sums them at twice the tile."""
    tiles = ct.num_tiles(w, axis=1, shape=(HB, BK))
    per = ct.cdiv(tiles, SPLIT)
    first = s * per
    last = min(first + per, tiles)
    if FMA and BM == 1:
        acc1 = ct.zeros((HB, BK), dtype=ct.float32)
        acc2 = ct.zeros((HB, BK), dtype=ct.float32)
        for k in range(first, last):
            a = ct.astype(_rows(x, g, inv, k, 1, BK, NORM), ct.float32)
            b1 = ct.load(w, index=(c1, k), shape=(HB, BK), padding_mode=ZERO)
            b2 = ct.load(w, index=(c2, k), shape=(HB, BK), padding_mode=ZERO)
            acc1 = acc1 + a * ct.astype(b1, ct.float32)
            acc2 = acc2 + a * ct.astype(b2, ct.float32)
        return (ct.reshape(ct.sum(acc1, axis=1), (1, HB)),
                ct.reshape(ct.sum(acc2, axis=1), (1, HB)))
    if FMA:
        acc1 = ct.zeros((BM, HB, BK), dtype=ct.float32)
        acc2 = ct.zeros((BM, HB, BK), dtype=ct.float32)
        for k in range(first, last):
            a = ct.reshape(ct.astype(_rows(x, g, inv, k, BM, BK, NORM), ct.float32),
                           (BM, 1, BK))
            b1 = ct.load(w, index=(c1, k), shape=(HB, BK), padding_mode=ZERO)
            b2 = ct.load(w, index=(c2, k), shape=(HB, BK), padding_mode=ZERO)
            acc1 = acc1 + a * ct.reshape(ct.astype(b1, ct.float32), (1, HB, BK))
            acc2 = acc2 + a * ct.reshape(ct.astype(b2, ct.float32), (1, HB, BK))
        return ct.sum(acc1, axis=2), ct.sum(acc2, axis=2)
    # tensor cores, transposed as `_partial`: each half tile its own product's M
    acc1 = ct.zeros((HB, BM), dtype=ct.float32)
    acc2 = ct.zeros((HB, BM), dtype=ct.float32)
    for k in range(first, last):
        a = ct.transpose(_rows(x, g, inv, k, BM, BK, NORM))
        acc1 = ct.mma(ct.load(w, index=(c1, k), shape=(HB, BK), padding_mode=ZERO), a, acc1)
        acc2 = ct.mma(ct.load(w, index=(c2, k), shape=(HB, BK), padding_mode=ZERO), a, acc2)
    return ct.transpose(acc1), ct.transpose(acc2)


@ct.function
def _row_ids(positions, slots, BM: ct.Constant[int]):
    """Each row's position and cache slot, (BM, 1) each (the rows past M: 0), loaded
    before the K loop: nothing waits for them until the epilogue, so their latency
    passes while the weights stream (the tables' rows at the positions are gathered
    after the loop: a load that waited on these here would hold up the first weight
    loads behind it)."""
    pos = ct.load(positions, index=(0,), shape=(BM,), padding_mode=ZERO)
    slot = ct.load(slots, index=(0,), shape=(BM,), padding_mode=ZERO)
    return ct.reshape(pos, (BM, 1)), ct.reshape(slot, (BM, 1))


@ct.function
def _rope_slots_epilogue(acc1, acc2, y, cos, sin, pos, slot, cache, h, p0, c1, c2,
                         BM: ct.Constant[int], HB: ct.Constant[int], D: ct.Constant[int]):
    """The block's two halves of HB rotary pairs of head h (columns p0.. of each half), as
    gemv, rope and write_slots leave them: rounded to y's dtype and stored into y (the
    QKV rows) at half tiles c1 and c2; for a q or k head first rotated in f32 by cos and
    sin at each row's position pos (`_row_ids`) and rounded again (`kernels.rope`'s
    arithmetic); for a k or v head also stored into the cache (pages, PAGE, 2 Hkv, D) at
    each row's slot (head h - Hq: k heads first, then v)."""
    hkv = cache.shape[2] // 2
    hq = y.shape[1] // D - 2 * hkv
    cols = p0 + ct.arange(HB, dtype=ct.int32)[None, :]
    y1 = ct.astype(acc1, y.dtype)
    y2 = ct.astype(acc2, y.dtype)
    if h < hq + hkv:
        c = ct.gather(cos, (pos, cols))
        sn = ct.gather(sin, (pos, cols))
        x1 = ct.astype(y1, ct.float32)
        x2 = ct.astype(y2, ct.float32)
        y1 = ct.astype(x1 * c - x2 * sn, y.dtype)
        y2 = ct.astype(x2 * c + x1 * sn, y.dtype)
    ct.store(y, index=(0, c1), tile=y1)
    ct.store(y, index=(0, c2), tile=y2)
    if h >= hq:
        page = slot // cache.shape[1]
        row = slot % cache.shape[1]
        mine = ct.arange(BM, dtype=ct.int32)[:, None] < y.shape[0]   # rows past M: none
        ct.scatter(cache, (page, row, h - hq, cols), ct.astype(y1, cache.dtype), mask=mine)
        ct.scatter(cache, (page, row, h - hq, cols + D // 2), ct.astype(y2, cache.dtype),
                   mask=mine)


@ct.kernel
def gemv_qkv_rope(x, g, eps, w, y, part, count, cos, sin, positions, cache, slots,
                  BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int],
                  SPLIT: ct.Constant[int], FMA: ct.Constant[bool], TICKET: ct.Constant[bool],
                  NORM: ct.Constant[bool], D: ct.Constant[int]):
    """Llama's QKV projection at decode, finished as `gemv` then `kernels.rope` (q and k
    rotated in place) then `write_slots` (k and v into the cache) leave it, in one
    launch, the same bits: y = x @ W^T (W: the q, k and v heads' rows, head dim D, as
    stored), q and k heads rotated at positions (cos and sin: (positions, D / 2) f32
    tables, "rotate half" pairs (i, D/2 + i)), and the k (rotated) and v heads into
    cache (pages, PAGE, 2 Hkv, D) at slots (M,).  Block j owns BN / 2 pairs of one head
    (rows h D + p0.. and h D + D/2 + p0..; D / BN blocks a head): both halves of what it
    rotates.  SPLIT, TICKET and NORM as `gemv`: the tile's last split block applies the
    epilogue (a split needs TICKET: a combine launch could not rotate)."""
    ct.static_assert(BN % 2 == 0 and D % BN == 0,
                     "gemv_qkv_rope: a block owns BN / 2 rotary pairs of one head, so BN "
                     "must be even and divide the head dim D")
    ct.static_assert(SPLIT == 1 or TICKET,
                     "gemv_qkv_rope: a split K needs TICKET (its last blocks rotate and "
                     "write the cache)")
    HB = BN // 2
    PER = D // BN                  # blocks a head
    j = ct.bid(0)
    s = ct.bid(1)
    h = j // PER
    p0 = (j % PER) * HB
    c1 = h * 2 * PER + j % PER     # the head's first-half rows p0.., in HB-row tiles
    c2 = c1 + PER                  # ... and its second-half rows D/2 + p0..
    pos, slot = _row_ids(positions, slots, BM)
    inv = _inv_rms(x, eps, BM) if NORM else eps
    acc1, acc2 = _pair_partial(x, g, inv, w, c1, c2, s, BM, HB, BK, SPLIT, FMA, NORM)
    if SPLIT == 1:
        _rope_slots_epilogue(acc1, acc2, y, cos, sin, pos, slot, cache, h, p0, c1, c2, BM,
                             HB, D)
    else:
        ct.store(part, index=(s, 0, c1), tile=ct.reshape(acc1, (1, BM, HB)))
        ct.store(part, index=(s, 0, c2), tile=ct.reshape(acc2, (1, BM, HB)))
        if _last(count, j, SPLIT):
            acc1 = _sum_splits(part, c1, SPLIT, BM, HB, True)
            acc2 = _sum_splits(part, c2, SPLIT, BM, HB, True)
            _rope_slots_epilogue(acc1, acc2, y, cos, sin, pos, slot, cache, h, p0, c1, c2,
                                 BM, HB, D)
            _reset(count, j)


# ----------------------------------------------------------------------------- host side

# Each decode GEMV kernel's weight arguments: what no kernel of a decode step writes, so
# what the kernel may take as its `early_loads` option (`early_loading`).
WEIGHTS = {"gemv": ("w",), "gemv_add": ("w",), "gemv_add_norm": ("w",),
           "gemv_swiglu": ("wg", "wu"), "gemv_swiglu_fused": ("wg", "wu"),
           "gemv_qkv_rope": ("w",)}


def early_hints(kernel) -> dict:
    """The kernel option that lets `kernel` (a decode GEMV) start its first weight tiles
    before its wait for the previous kernel: `early_loads` on its weights (`WEIGHTS`)."""
    return {"early_loads": WEIGHTS[kernel.name]}


def early_loading(kernel):
    """`kernel` (a decode GEMV, or one with candidate options) with `early_hints`."""
    return kernel.replace_hints(**early_hints(kernel))


SM_SHARED = 233472      # bytes of shared memory an SM of sm_90 holds (228 KB)
STAGES = 4              # the ring the compiler builds for the plan's tiles (what fits, <= 4)
# (BN, BK) a block, widest first: 64 weight rows on wgmma (64 x 8 or 16), 32 and 16 on
# mma.sync (one warp a block); a weight tile of 16 or 8 KB
TILES = ((64, 128), (32, 128), (16, 256))


class Plan(NamedTuple):
    """A decode GEMV's schedule: BM activation rows (M padded), BN weight rows and BK
    columns a tile, SPLIT runs of K (grid (cdiv(N, BN), SPLIT)), FMA products or the
    tensor cores', and with a split K whether the last block of each N tile adds the
    partials up (TICKET: one launch) or the combine kernel does (a second launch).
    The kernels take the fields in this order, as their constants."""
    bm: int
    bn: int
    bk: int
    split: int
    fma: bool
    ticket: bool = False


# One-row plans a sweep found fastest (H200, 2026-11-29, `bench/sweep_llm_decode.py 1
# --gemv`, weight bytes x copy bandwidth; bench/RESULTS.md), by (N, K) at Llama-3-8B's
# widths: QKV 0.79 on the FMA units (the wgmma tiles 0.64, cuBLAS 0.72), O 0.65 at 64
# rows x 128 split in two (0.52, 0.60), down 0.85 at 64 x 256 split in two (0.75,
# 0.87), SwiGLU's gate/up 0.89 at 128 x 128 (0.79, 0.83).  `plan`'s rule chose 0.50-0.71.
# (Those split figures include the combine's launch; O and down now finish in their
# own launch, TICKET: `--gemv` times both as "gemv/plan/l2pf" and "gemv/plan/combine".)
SWEPT = {
    (6144, 4096): Plan(1, 8, 256, 1, True),
    (4096, 4096): Plan(8, 64, 128, 2, False, True),
    (4096, 14336): Plan(8, 64, 256, 2, False, True),
    (14336, 4096): Plan(8, 128, 128, 1, False),
}


# Candidates for the one-row sweep (bench/sweep_llm_decode.py --gemv times each beside
# SWEPT; nothing routes to them until a measurement names one in ROUTED).  Each names a
# plan and the kernel options it takes: `persistent` (one block an SM walking the N
# tiles with its ring running on from tile to tile: no ramp between a block's tiles;
# gemv_swiglu's two loops a tile ramp in each), `stages` (the ring's depth: more
# weight bytes in flight a block), `fused` (gate/up: gemv_swiglu_fused, both weights
# through one ring), `warps` (num_warps: a 32-row mma.sync tile on two warps), `early`
# (the `early_loads` option on the weights, `early_hints`: a ring form's first weight
# tiles before the wait for the previous kernel; QKV's alternative to the FMA form).
# docs/llm.md, "Where the one-row GEMVs lose copy bandwidth", gives the model that
# proposed them (`bench/sweep_llm_decode.py --model`).
class Candidate(NamedTuple):
    name: str
    plan: Plan
    persistent: bool = False
    stages: int | None = None
    fused: bool = False
    warps: int | None = None
    early: bool = False

    def hints(self, kernel=None) -> dict:
        """The kernel options (`Kernel.replace_hints`) besides l2_prefetch; with `early`
        and the decode GEMV `kernel` it launches, that kernel's `early_hints` too."""
        out = dict(early_hints(kernel)) if self.early and kernel is not None else {}
        if self.persistent:
            out["persistent"] = True
        if self.stages:
            out["num_stages"] = self.stages
        if self.warps:
            out["num_warps"] = self.warps
        return out


CANDIDATES = {
    (6144, 4096): (         # QKV: the tensor cores' form with 8-stage rings (the FMA form's
        # 24 KB in flight an SM are short of the 28 KB needed); two warps a block (one
        # issues the loop too slowly for an SM's share in the model)
        Candidate("16x256/s8/pers", Plan(8, 16, 256, 1, False), True, 8),
        Candidate("32x256/s8/w2/pers", Plan(8, 32, 256, 1, False), True, 8, warps=2),
        Candidate("32x128/s8", Plan(8, 32, 128, 1, False), False, 8),
        # ... and with its first weight tiles loaded before the wait (the FMA form has no
        # ring to load early: docs/llm.md, "Early weight loads")
        Candidate("32x128/s8/early", Plan(8, 32, 128, 1, False), False, 8, early=True),
    ),
    (4096, 4096): (         # O: K whole (no ticket's tail), persistent, 8 stages
        # deeper rings loaded early: more of each block's 16 tiles in flight before the
        # wait (down's 6-stage ring gained 8 % from early loads, its 4-stage plan 0.2 %)
        Candidate("64x128/k2/s6/early", Plan(8, 64, 128, 2, False, True), False, 6,
                  early=True),
        Candidate("64x128/k2/s8/early", Plan(8, 64, 128, 2, False, True), False, 8,
                  early=True),
        Candidate("32x128/k1/s8/early", Plan(8, 32, 128, 1, False), False, 8, early=True),
        Candidate("32x128/k1/s8/pers", Plan(8, 32, 128, 1, False), True, 8),
        Candidate("32x256/k1/s8/w2/pers", Plan(8, 32, 256, 1, False), True, 8, warps=2),
        Candidate("16x256/k1/s8/pers", Plan(8, 16, 256, 1, False), True, 8),
        Candidate("64x128/k2/s8/pers", Plan(8, 64, 128, 2, False, True), True, 8),
        Candidate("64x128/k4/s6/pers", Plan(8, 64, 128, 4, False, True), True, 6),
    ),
    (4096, 14336): (        # down: deeper rings, finer tiles (the 128-block grid: 4 SMs idle)
        Candidate("64x256/k2/s6", Plan(8, 64, 256, 2, False, True), False, 6),
        # ... with its first 5 weight tiles a block loaded before the wait (routed)
        Candidate("64x256/k2/s6/early", Plan(8, 64, 256, 2, False, True), False, 6,
                  early=True),
        Candidate("32x256/k2/s8/w2/pers", Plan(8, 32, 256, 2, False, True), True, 8, warps=2),
        Candidate("32x256/k4/s8/pers", Plan(8, 32, 256, 4, False, True), True, 8),
        Candidate("64x128/k4/s8/pers", Plan(8, 64, 128, 4, False, True), True, 8),
    ),
    (14336, 4096): (        # gate/up: one ring for both weights (no ramp between them)
        # deeper rings loaded early (as O's and down's routed candidates)
        Candidate("128x128/s6/early", Plan(8, 128, 128, 1, False), False, 6, early=True),
        Candidate("64x128/s8/early", Plan(8, 64, 128, 1, False), False, 8, early=True),
        Candidate("fused/64x128/s4/pers", Plan(8, 64, 128, 1, False), True, 4, True),
        Candidate("fused/32x128/s8/pers", Plan(8, 32, 128, 1, False), True, 8, True),
        Candidate("64x128/s8/pers", Plan(8, 64, 128, 1, False), True, 8),
        Candidate("128x128/s6/pers", Plan(8, 128, 128, 1, False), True, 6),
    ),
}


# One-row shapes routed to a candidate (its name in CANDIDATES[n, k]) where a GPU sweep
# measured it faster than SWEPT's plan by more than runs of one plan move (~2 %):
# `Backend` launches the candidate's plan, kernel and options where `gemv_routed` is
# set (off: the step measured no gain from these two, backend.py).  down: 6 stages with
# early loads, 0.891 of copy against the plan's 0.848 with them and 0.846 without (H200,
# 2026-11-29 09:16 UTC, `bench/sweep_llm_decode.py 1 --early`, best of three).
# O: 8 stages with early loads, 0.705 against the plan's 0.653 with them (09:24 UTC).
ROUTED: dict[tuple[int, int], str] = {(4096, 14336): "64x256/k2/s6/early",
                                      (4096, 4096): "64x128/k2/s8/early"}


def routed(m: int, n: int, k: int) -> Candidate | None:
    """The candidate ROUTED takes for an (m, k) x (n, k)^T product, or None."""
    if m != 1 or (n, k) not in ROUTED:
        return None
    name = ROUTED[n, k]
    for c in CANDIDATES.get((n, k), ()):
        if c.name == name:
            return c
    raise ValueError(f"gemv.ROUTED[{n}, {k}] = {name!r} names no candidate of that shape; "
                     f"CANDIDATES has {[c.name for c in CANDIDATES.get((n, k), ())]}")


def plan(m: int, n: int, k: int, *, exact: bool = False, on_gpu: bool = True,
         sm_count: int = 132, swept: bool = True) -> Plan:
    """The schedule for an (m, k) x (n, k)^T product: at one row, a shape a sweep
    measured takes its fastest plan (SWEPT); otherwise the rule below.

    On the GPU: the widest of TILES whose grid gives every SM a block (so a split K, and
    its combine launch, only where N is too narrow for that even at 16 rows a block:
    then K split in two until it does, while the SMs hold every block at once and each
    split keeps 8 tiles).  Llama-3-8B at one row: QKV 192 blocks of 32 rows, O and
    down 256 of 16, gate/up 224 of 64, the LM head 2004 of 64; a ring of STAGES tiles
    is 41-74 KB of shared memory, 3-5 blocks an SM.  exact (f32 operands, which the
    tensor cores would take as tf32) sums f32 products on the FMA units over
    (BM, BN, BK) tiles of 2048 products.  The interpreter takes small tiles, and a split
    wherever K has two tiles, so that the tests run the split's code.  A split K is
    finished in its own launch (TICKET) everywhere; `Backend.gemv_ticket` = False (the
    sweep's and bench/llm.py's comparison) takes the combine launch instead."""
    if not 1 <= m <= 16:
        raise ValueError(f"a decode GEMV takes 1 to 16 rows, got {m}")
    if not on_gpu:
        split = 2 if k > 32 else 1
        return Plan(next_pow2(m), 16, 32, split, exact, split > 1)
    if exact:
        bm = next_pow2(m)
        return Plan(bm, max(1, 2048 // (bm * 64)), 64, 1, True)
    if swept and m == 1 and (n, k) in SWEPT:        # measured (swept=False: the rule's)
        return SWEPT[n, k]
    bm = 8 if m <= 8 else 16
    bn, bk = next(((bn, bk) for bn, bk in TILES if ct.cdiv(n, bn) >= sm_count), TILES[-1])
    blocks, tiles = ct.cdiv(n, bn), ct.cdiv(k, bk)
    resident = SM_SHARED // (STAGES * (bn + bm) * bk * 2 + 2048)  # + barriers, reserve
    split = 1
    while (blocks * split < sm_count and blocks * split * 2 <= resident * sm_count
           and tiles // (split * 2) >= 8):
        split *= 2
    return Plan(bm, bn, bk, split, False, split > 1)


def grid(n: int, p: Plan) -> tuple[int, int]:
    return ct.cdiv(n, p.bn), p.split


def combine_tiles(m: int, n: int, p: Plan) -> tuple[int, int, int]:
    """(SPLIT, BM, BC) of the combine kernels: the split, the rows rounded up to a power
    of two, and columns a block (at most 4096 partials a block's tiles)."""
    bm = next_pow2(m)
    return p.split, bm, max(1, min(next_pow2(n), 4096 // (next_pow2(p.split) * bm)))


# f32 elements a thread holds at most of the norm tail's row, one (1, next_pow2(N)) tile
# as in the separate norm (whose bits it must give): at 128 a one-warp block spilled
# (4096 columns on mma.sync's 32 threads: 2.3 KB of local memory), at 64 none did (7168
# on wgmma's 128 threads, 2048 on 32)
TAIL_PER_THREAD = 64


def norm_tail_fits(n: int, p: Plan, wgmma: bool = True) -> bool:
    """Whether gemv_add_norm's blocks of plan p hold a row n wide in registers: a
    mma.sync block (tensor cores, BN under 64, or any BN without wgmma: sm_80) is one
    warp, wgmma's and the FMA form's 128 threads or more."""
    threads = 32 if not p.fma and (p.bn < 64 or not wgmma) else 128
    return next_pow2(n) <= TAIL_PER_THREAD * threads


def counters(n: int, p: Plan, tail: bool = False) -> int:
    """The counters a launch of plan p over n weight rows takes (TICKET: one an N
    tile; tail, `gemv_add_norm`: one more after them, the grid's)."""
    if tail:
        return ct.cdiv(n, p.bn) + 1
    return ct.cdiv(n, p.bn) if p.split > 1 and p.ticket else 0


def qkv_rope_fits(d: int, p: Plan) -> bool:
    """Whether `gemv_qkv_rope` takes plan p at head dim d: a block's BN rows are BN / 2
    rotary pairs of one head (BN even, dividing d), and it finishes in its own launch
    (split 1, or TICKET: the tile's last block rotates)."""
    return p.bn % 2 == 0 and d % p.bn == 0 and (p.split == 1 or p.ticket)
