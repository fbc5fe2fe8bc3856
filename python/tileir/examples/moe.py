"""DeepSeek-V3 mixture of experts: the router and the routed experts as tile kernels.

`route` is Hugging Face's `DeepseekV3TopkRouter`: float32 router logits, sigmoid
scores, the correction bias added for choosing only, n_group groups scored by the
sum of their two best biased scores, the topk_group best groups kept (the others'
experts masked to 0.0, as `masked_fill` does), top_k experts among them, and the
unbiased scores of those as weights (normalized when norm_topk_prob) times
routed_scaling_factor.  Two launches: `router_logits` (or `router_logits_f32`), then
`select_experts`, one token a block.

`experts` computes, per token t, sum_k w[t,k] * down_e(silu(gate_e(x_t)) * up_e(x_t))
with e = ids[t,k], in six launches (and a memset) with no host synchronization (the
LLM app replays decode steps as CUDA graphs, so every grid is sized by the worst
case and blocks with no work return at once):

1. `count_tokens`: an atomic add per (token, k) pair counts each expert's tokens; the
   old count it returns is the pair's slot among its expert's tokens.
2. `align_blocks`: each expert's count is rounded up to whole BM-row blocks and
   prefix-summed into its first row; each BM-row block of the sorted order learns
   its expert (-1 past the last one).
3. `permute_rows`: each pair's row of `hidden` is copied to its sorted row
   (expert's first row + slot), and that row is recorded for the combine.
4. `gate_up` (SwiGLU fused: silu(x W_g^T) * (x W_u^T) from two accumulators) and
   `down`: grouped GEMMs, one BM x BN output tile a block, every block reading one
   expert's weights.  For decode, `gate_up_decode` / `down_decode` compute the same
   transposed (weights as the product's rows, 16 tokens as its columns): each
   selected expert is one block row, so its weights are read once.
5. `combine`: each token sums its top_k rows, times their weights, in float32.

docs/moe.md has the schedules and what the compiler makes of them.
Sizes: T tokens, H hidden, I the experts' intermediate size, E experts, K = top_k.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import tileir as ct

from . import next_pow2
from .matmul import product_nt

ZERO = ct.PaddingMode.ZERO
NEG_INF = float("-inf")


# ----------------------------------------------------------------------------- routing

@ct.kernel
def router_logits(x, gate_w, logits, BT: ct.Constant[int], BE: ct.Constant[int],
                  BK: ct.Constant[int]):
    """logits = x @ gate_w^T in float32 for 16-bit x and gate_w: their products are exact
    on the tensor cores, and the accumulator is float32 (float32 operands would be
    rounded to tf32 there, which moves logits by ~1e-3 and flips expert choices: those
    take `router_logits_f32`)."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((BT, BE), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(BT, BK))):
        a = ct.load(x, index=(i, k), shape=(BT, BK), padding_mode=ZERO)
        w = ct.load(gate_w, index=(j, k), shape=(BE, BK), padding_mode=ZERO)
        acc = ct.mma(a, ct.transpose(w), acc)
    ct.store(logits, index=(i, j), tile=acc)


@ct.kernel
def router_logits_f32(x, gate_w, logits, BE: ct.Constant[int], BK: ct.Constant[int]):
    """One token's logits for BE experts with float32 products and sums (FMA units)."""
    t = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((BE, BK), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(1, BK))):
        a = ct.astype(ct.load(x, index=(t, k), shape=(1, BK), padding_mode=ZERO), ct.float32)
        w = ct.astype(ct.load(gate_w, index=(j, k), shape=(BE, BK), padding_mode=ZERO),
                      ct.float32)
        acc = acc + a * w
    ct.store(logits, index=(t, j), tile=ct.reshape(ct.sum(acc, axis=1), (1, BE)))


@ct.kernel
def select_experts(logits, bias, ids, weights, scaling: float, E: ct.Constant[int],
                   GROUPS: ct.Constant[int], TOPK_GROUP: ct.Constant[int],
                   TOPK: ct.Constant[int], KP: ct.Constant[int], NORM: ct.Constant[bool]):
    """One token a block: sigmoid scores, group-limited top-k, weights."""
    t = ct.bid(0)
    scores = 1.0 / (1.0 + ct.exp(-ct.load(logits, index=(t, 0), shape=(1, E))))
    choice = scores + ct.reshape(ct.astype(ct.load(bias, index=(0,), shape=(E,)), ct.float32),
                                 (1, E))

    # group score: the sum of each group's two best (a tie for the best counts twice)
    per = E // GROUPS
    grouped = ct.reshape(choice, (GROUPS, per))
    best = ct.argmax(grouped, axis=1, keepdims=True)
    lanes = ct.arange(per, dtype=ct.int32)[None, :]
    second = ct.max(ct.where(lanes == best, NEG_INF, grouped), axis=1)
    gscore = ct.max(grouped, axis=1) + second

    glanes = ct.arange(GROUPS, dtype=ct.int32)
    kept = ct.zeros((GROUPS,), dtype=ct.float32)
    for _ in range(TOPK_GROUP):
        hit = glanes == ct.argmax(gscore, axis=0)
        kept = ct.where(hit, 1.0, kept)
        gscore = ct.where(hit, NEG_INF, gscore)
    kept_e = ct.reshape(ct.broadcast_to(ct.reshape(kept, (GROUPS, 1)), (GROUPS, per)), (1, E))
    choice = ct.where(kept_e > 0.5, choice, 0.0)      # masked_fill(~mask, 0.0), not -inf

    elanes = ct.arange(E, dtype=ct.int32)[None, :]
    klanes = ct.arange(KP, dtype=ct.int32)[None, :]
    top_ids = ct.zeros((1, KP), dtype=ct.int32)
    top_w = ct.zeros((1, KP), dtype=ct.float32)
    for j in range(TOPK):
        e = ct.argmax(choice, axis=1, keepdims=True)
        hit = elanes == e
        s = ct.sum(ct.where(hit, scores, 0.0), axis=1, keepdims=True)
        top_ids = ct.where(klanes == j, e, top_ids)
        top_w = ct.where(klanes == j, s, top_w)
        choice = ct.where(hit, NEG_INF, choice)
    if NORM:
        top_w = top_w / (ct.sum(top_w, axis=1, keepdims=True) + 1e-20)
    ct.store(ids, index=(t, 0), tile=top_ids)
    ct.store(weights, index=(t, 0), tile=top_w * scaling)


# ----------------------------------------------------------------------------- sorting

@ct.kernel
def count_tokens(ids, counts, slot, BA: ct.Constant[int]):
    """counts[e] += 1 for each (token, k) pair of ids (flat); the old count is its slot."""
    i = ct.bid(0)
    pair = i * BA + ct.arange(BA, dtype=ct.int32)
    e = ct.load(ids, index=(i,), shape=(BA,), padding_mode=ZERO)
    old = ct.atomic_add(counts, ct.where(pair < ids.shape[0], e, -1), 1,
                        memory_order=ct.MemoryOrder.RELAXED)
    ct.store(slot, index=(i,), tile=old)


@ct.kernel
def align_blocks(counts, first_row, block_expert, BM: ct.Constant[int], E: ct.Constant[int],
                 MBT: ct.Constant[int]):
    """Experts' first rows in the BM-aligned sorted order; MBT blocks' experts a block."""
    c = ct.load(counts, index=(0,), shape=(E,), padding_mode=ZERO)
    rows = (c + (BM - 1)) // BM * BM
    end = ct.cumsum(rows, axis=0)
    start = end - rows
    if ct.bid(0) == 0:
        ct.store(first_row, index=(0,), tile=start)
    # the ends do not decrease: the owner of a row is the number of experts ending at or
    # before it (experts with no rows end where the one before them does)
    row = (ct.bid(0) * MBT + ct.arange(MBT, dtype=ct.int32))[:, None] * BM
    owner = ct.sum(ct.where(ct.reshape(end, (1, E)) <= row, 1, 0), axis=1)
    ct.store(block_expert, index=(ct.bid(0),), tile=ct.where(owner < E, owner, -1))


@ct.kernel
def permute_rows(x, ids, slot, first_row, sorted_row, xs, TOPK: ct.Constant[int],
                 BH: ct.Constant[int]):
    """Pair a = t * TOPK + k: x[t] goes to row first_row[ids[a]] + slot[a] of xs."""
    a = ct.bid(0)
    e = ct.load(ids, index=(a,), shape=())
    row = ct.load(first_row, index=(e,), shape=()) + ct.load(slot, index=(a,), shape=())
    ct.store(sorted_row, index=(a,), tile=row)
    t = a // TOPK
    for c in range(ct.num_tiles(x, axis=1, shape=(1, BH))):
        ct.store(xs, index=(row, c), tile=ct.load(x, index=(t, c), shape=(1, BH)))


# ----------------------------------------------------------------------------- experts

@ct.kernel
def gate_up(xs, w_gate, w_up, block_expert, act, BM: ct.Constant[int], BN: ct.Constant[int],
            BK: ct.Constant[int], EXACT: ct.Constant[bool]):
    """act = silu(xs W_g[e]^T) * (xs W_u[e]^T) for one BM x BN tile of one expert's rows."""
    mb = ct.bid(0)
    n = ct.bid(1)
    e = ct.load(block_expert, index=(mb,), shape=())
    if e < 0:
        return
    g = ct.zeros((BM, BN), dtype=ct.float32)
    u = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(xs, axis=1, shape=(BM, BK))):
        a = ct.load(xs, index=(mb, k), shape=(BM, BK), padding_mode=ZERO)
        wg = ct.load(w_gate, index=(e, n, k), shape=(1, BN, BK), padding_mode=ZERO)
        wu = ct.load(w_up, index=(e, n, k), shape=(1, BN, BK), padding_mode=ZERO)
        g = product_nt(a, ct.reshape(wg, (BN, BK)), g, EXACT)
        u = product_nt(a, ct.reshape(wu, (BN, BK)), u, EXACT)
    ct.store(act, index=(mb, n), tile=ct.astype(g / (1.0 + ct.exp(-g)) * u, act.dtype))


@ct.kernel
def down(act, w_down, block_expert, ys, BM: ct.Constant[int], BN: ct.Constant[int],
         BK: ct.Constant[int], EXACT: ct.Constant[bool]):
    """ys = act W_d[e]^T for one BM x BN tile of one expert's rows."""
    mb = ct.bid(0)
    n = ct.bid(1)
    e = ct.load(block_expert, index=(mb,), shape=())
    if e < 0:
        return
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(act, axis=1, shape=(BM, BK))):
        a = ct.load(act, index=(mb, k), shape=(BM, BK), padding_mode=ZERO)
        w = ct.load(w_down, index=(e, n, k), shape=(1, BN, BK), padding_mode=ZERO)
        acc = product_nt(a, ct.reshape(w, (BN, BK)), acc, EXACT)
    ct.store(ys, index=(mb, n), tile=ct.astype(acc, ys.dtype))


@ct.kernel
def gate_up_decode(xs, w_gate, w_up, block_expert, act, BT: ct.Constant[int],
                   BN: ct.Constant[int], BK: ct.Constant[int]):
    """gate_up for a few tokens an expert (decode): the products are transposed, BN weight
    rows as M (a 64-row wgmma) and the BT tokens as N, so a block reads BT rows of
    activations, not a 64-row tile of mostly padding, beside its expert's weights."""
    mb = ct.bid(0)
    n = ct.bid(1)
    e = ct.load(block_expert, index=(mb,), shape=())
    if e < 0:
        return
    g = ct.zeros((BN, BT), dtype=ct.float32)
    u = ct.zeros((BN, BT), dtype=ct.float32)
    for k in range(ct.num_tiles(xs, axis=1, shape=(BT, BK))):
        xt = ct.transpose(ct.load(xs, index=(mb, k), shape=(BT, BK), padding_mode=ZERO))
        wg = ct.load(w_gate, index=(e, n, k), shape=(1, BN, BK), padding_mode=ZERO)
        wu = ct.load(w_up, index=(e, n, k), shape=(1, BN, BK), padding_mode=ZERO)
        g = ct.mma(ct.reshape(wg, (BN, BK)), xt, g)
        u = ct.mma(ct.reshape(wu, (BN, BK)), xt, u)
    h = g / (1.0 + ct.exp(-g)) * u
    ct.store(act, index=(mb, n), tile=ct.astype(ct.transpose(h), act.dtype))


@ct.kernel
def down_decode(act, w_down, block_expert, ys, BT: ct.Constant[int], BN: ct.Constant[int],
                BK: ct.Constant[int]):
    """down for a few tokens an expert, transposed as gate_up_decode is."""
    mb = ct.bid(0)
    n = ct.bid(1)
    e = ct.load(block_expert, index=(mb,), shape=())
    if e < 0:
        return
    acc = ct.zeros((BN, BT), dtype=ct.float32)
    for k in range(ct.num_tiles(act, axis=1, shape=(BT, BK))):
        at = ct.transpose(ct.load(act, index=(mb, k), shape=(BT, BK), padding_mode=ZERO))
        w = ct.load(w_down, index=(e, n, k), shape=(1, BN, BK), padding_mode=ZERO)
        acc = ct.mma(ct.reshape(w, (BN, BK)), at, acc)
    ct.store(ys, index=(mb, n), tile=ct.astype(ct.transpose(acc), ys.dtype))


@ct.kernel
def combine(ys, sorted_row, weights, out, TOPK: ct.Constant[int], BH: ct.Constant[int]):
    """out[t] = sum_k weights[t, k] * ys[sorted_row[t, k]], summed in float32."""
    t = ct.bid(0)
    for c in range(ct.num_tiles(out, axis=1, shape=(1, BH))):
        acc = ct.zeros((1, BH), dtype=ct.float32)
        for k in range(TOPK):
            row = ct.load(sorted_row, index=(t, k), shape=())
            w = ct.load(weights, index=(t, k), shape=())
            y = ct.load(ys, index=(row, c), shape=(1, BH), padding_mode=ZERO)
            acc = acc + w * ct.astype(y, ct.float32)
        ct.store(out, index=(t, c), tile=ct.astype(acc, out.dtype))


# ----------------------------------------------------------------------------- host side

ROUTE_BT = 16           # tokens a router-logits block (an mma.sync M: decode wastes little)
ROUTE_BK = 64
PAIRS_BA = 256          # (token, k) pairs a counting block
ALIGN_MBT = 16          # sorted blocks an alignment block assigns
ROW_BH = 1024           # columns a copy step of permute_rows / combine


class _Arrays:
    """Allocation on the side of the caller's arrays: torch CUDA tensors or NumPy."""

    def __init__(self, like):
        self.torch = type(like).__module__.startswith("torch")
        self.like = like

    def empty(self, shape, dtype):
        if self.torch:
            import torch
            return torch.empty(shape, dtype=dtype, device=self.like.device)
        # the interpreter: poisoned, so that a read of something no kernel wrote shows
        # (NaN rows, or an index far out of bounds)
        if np.issubdtype(np.dtype(dtype), np.integer):
            return np.full(shape, -(1 << 30), dtype)
        return np.full(shape, np.nan, dtype)

    def zeros(self, shape, dtype):
        if self.torch:
            import torch
            return torch.zeros(shape, dtype=dtype, device=self.like.device)
        return np.zeros(shape, dtype)

    @property
    def int32(self):
        if self.torch:
            import torch
            return torch.int32
        return np.int32

    @property
    def float32(self):
        if self.torch:
            import torch
            return torch.float32
        return np.float32


def _dtype_name(a) -> str:
    return str(a.dtype).removeprefix("torch.")


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def route(hidden, gate_weight, correction_bias, *, top_k: int, n_group: int, topk_group: int,
          routed_scaling_factor: float, norm_topk_prob: bool):
    """DeepseekV3TopkRouter: hidden (T, H), gate_weight (E, H), correction_bias (E,) float32
    -> (topk_ids (T, top_k) int32, topk_weights (T, top_k) float32).

    torch CUDA tensors run on torch's current stream, NumPy arrays in the interpreter."""
    launches, ids, weights = plan_route(
        hidden, gate_weight, correction_bias, top_k=top_k, n_group=n_group,
        topk_group=topk_group, routed_scaling_factor=routed_scaling_factor,
        norm_topk_prob=norm_topk_prob)
    _launch_all(launches)
    return ids, weights


def plan_route(hidden, gate_weight, correction_bias, *, top_k, n_group, topk_group,
               routed_scaling_factor, norm_topk_prob):
    """`route`'s launches as (kernel, grid, args), and the outputs they fill."""
    t, h = hidden.shape
    e = gate_weight.shape[0]
    if gate_weight.shape[1] != h:
        raise ValueError(f"gate_weight is {tuple(gate_weight.shape)}: expected (experts, {h}) "
                         f"for hidden of width {h} (nn.Linear's layout)")
    if tuple(correction_bias.shape) != (e,):
        raise ValueError(f"correction_bias is {tuple(correction_bias.shape)}: expected ({e},)")
    if n_group < 1 or e % n_group or not _is_pow2(e) or not _is_pow2(e // n_group) \
            or e // n_group < 2:
        raise ValueError(f"{e} experts in {n_group} groups: the kernel takes a power-of-two "
                         "number of experts in groups of a power of two (at least 2) each")
    if not 1 <= topk_group <= n_group:
        raise ValueError(f"topk_group={topk_group} must be in 1..n_group={n_group}")
    if not 1 <= top_k <= topk_group * (e // n_group):
        raise ValueError(f"top_k={top_k} must be in 1..{topk_group * (e // n_group)} "
                         f"(the experts of {topk_group} groups)")
    arrays = _Arrays(hidden)
    ids = arrays.empty((t, top_k), arrays.int32)
    weights = arrays.empty((t, top_k), arrays.float32)
    if t == 0:
        return [], ids, weights
    launches = []
    logits = arrays.empty((t, e), arrays.float32)
    sixteen = {"bfloat16", "float16"}
    if _dtype_name(hidden) in sixteen and _dtype_name(gate_weight) == _dtype_name(hidden):
        # few tokens: narrow expert tiles, so that more blocks stream the gate's rows
        be = min(e, 32 if t <= 64 else 128)
        launches.append((router_logits, (ct.cdiv(t, ROUTE_BT), ct.cdiv(e, be)),
                         (hidden, gate_weight, logits, ROUTE_BT, be, ROUTE_BK)))
    else:
        be = min(e, 32)
        launches.append((router_logits_f32, (t, ct.cdiv(e, be)),
                         (hidden, gate_weight, logits, be, ROUTE_BK)))
    launches.append((select_experts, (t,),
                     (logits, correction_bias, ids, weights, float(routed_scaling_factor), e,
                      n_group, topk_group, top_k, next_pow2(top_k), bool(norm_topk_prob))))
    return launches, ids, weights


class Tiles(NamedTuple):
    """The grouped GEMMs' schedule: `decode` picks gate_up_decode / down_decode (weights
    as M, BM tokens as N); BM rows of the sorted order a block, BN output columns, BK."""
    decode: bool
    bm: int
    bn: int
    bk: int


def expert_tiles(pairs: int, experts: int, on_gpu: bool, itemsize: int = 2) -> Tiles:
    """The schedule for `pairs` (token, expert) pairs over `experts` experts.

    Each expert's rows start a block, so BM is about what an expert gets: a decode
    step (a few tokens an expert) takes 16-token blocks of the transposed kernels,
    one block an expert, which reads its weights once; prefill takes 64- or 128-row
    tiles on wgmma by the tokens an expert gets (padding each expert's rows to BM
    costs up to BM - 1 rows of work an expert).  float32 operands (tf32 on the tensor
    cores) take half as wide prefill tiles: gate_up's two accumulators and its operand
    tiles would pass 255 registers.  The interpreter takes small tiles."""
    per_expert = pairs / max(1, min(experts, pairs))
    if not on_gpu:
        return Tiles(per_expert <= 4, 16, 32, 32)
    if per_expert <= 16:
        return Tiles(True, 16, 64, 64)
    return Tiles(False, 64 if per_expert < 256 else 128, 128 if itemsize <= 2 else 64, 64)


# exact products: (16, 32) output tiles of 16-long K steps, a (16, 32, 16) f32 product
# tile on the FMA units (as tileir.llm's float32 GEMMs)
EXACT_TILES = Tiles(False, 16, 32, 16)


def sorted_blocks(pairs: int, experts: int, bm: int) -> int:
    """The most BM-row blocks `pairs` pairs can need when each expert's rows start a block:
    sum_e cdiv(n_e, BM) <= (pairs - active) / BM + active, active <= min(E, pairs)."""
    return min(experts, pairs) + pairs // bm


def experts(hidden, topk_ids, topk_weights, w_gate_up, w_down, out=None, *, exact=False):
    """sum_k topk_weights[t,k] * down_e(silu(gate_e(x_t)) * up_e(x_t)), e = topk_ids[t,k].

    hidden (T, H); w_gate_up (E, 2I, H): each expert's gate_proj rows, then its
    up_proj rows; w_down (E, H, I).  Returns `out` (T, H) in hidden's dtype.
    torch CUDA tensors run on torch's current stream, NumPy arrays in the interpreter;
    no launch waits for the device or sizes its grid by the routing.  exact: float32
    products and sums on the FMA units (a float32 model's reference mode; the tensor
    cores would round float32 operands to tf32), in the prefill kernels' form."""
    launches, out = plan_experts(hidden, topk_ids, topk_weights, w_gate_up, w_down, out,
                                 EXACT_TILES if exact else None, exact=exact)
    _launch_all(launches)
    return out


def plan_experts(hidden, topk_ids, topk_weights, w_gate_up, w_down, out=None, tiles=None, *,
                 exact=False):
    """`experts`' launches as (kernel, grid, args), and `out`; `tiles` (a `Tiles`)
    overrides `expert_tiles`' choice (the simulator tests run the GPU's)."""
    t, h = hidden.shape
    e, two_i, h_w = w_gate_up.shape
    i_size = two_i // 2
    if h_w != h or two_i % 2:
        raise ValueError(f"w_gate_up is {tuple(w_gate_up.shape)}: expected (experts, 2 * "
                         f"intermediate, {h}) for hidden of width {h}")
    if tuple(w_down.shape) != (e, h, i_size):
        raise ValueError(f"w_down is {tuple(w_down.shape)}: expected ({e}, {h}, {i_size})")
    if topk_ids.shape != topk_weights.shape or topk_ids.shape[0] != t:
        raise ValueError(f"topk_ids {tuple(topk_ids.shape)} and topk_weights "
                         f"{tuple(topk_weights.shape)} must both be ({t}, top_k)")
    if _dtype_name(topk_ids) != "int32" or _dtype_name(topk_weights) != "float32":
        raise ValueError(f"topk_ids must be int32 and topk_weights float32 (what `route` "
                         f"returns); got {_dtype_name(topk_ids)} and "
                         f"{_dtype_name(topk_weights)}")
    arrays = _Arrays(hidden)
    if out is None:
        out = arrays.empty((t, h), hidden.dtype)
    elif tuple(out.shape) != (t, h) or out.dtype != hidden.dtype:
        raise ValueError(f"out is {tuple(out.shape)} {out.dtype}: expected ({t}, {h}) "
                         f"{hidden.dtype}")
    top_k = topk_ids.shape[1]
    pairs = t * top_k
    if pairs == 0:
        return [], out
    itemsize = 4 if _dtype_name(hidden) == "float32" else 2
    decode, bm, bn, bk = tiles or expert_tiles(pairs, e, arrays.torch, itemsize)
    if exact and decode:
        raise ValueError("exact products run in the prefill kernels' form: Tiles(False, ...)")
    blocks = sorted_blocks(pairs, e, bm)
    flat_ids = topk_ids.reshape(-1)
    counts = arrays.zeros((e,), arrays.int32)
    slot = arrays.empty((pairs,), arrays.int32)
    first_row = arrays.empty((e,), arrays.int32)
    block_expert = arrays.empty((blocks,), arrays.int32)
    sorted_row = arrays.empty((t, top_k), arrays.int32)
    xs = arrays.empty((blocks * bm, h), hidden.dtype)     # sorted rows, later the experts' outputs
    act = arrays.empty((blocks * bm, i_size), hidden.dtype)
    bh = min(next_pow2(h), ROW_BH)

    return [
        (count_tokens, (ct.cdiv(pairs, PAIRS_BA),), (flat_ids, counts, slot, PAIRS_BA)),
        (align_blocks, (ct.cdiv(blocks, ALIGN_MBT),),
         (counts, first_row, block_expert, bm, next_pow2(e), ALIGN_MBT)),
        (permute_rows, (pairs,),
         (hidden, flat_ids, slot, first_row, sorted_row.reshape(-1), xs, top_k, bh)),
        (gate_up_decode, (blocks, ct.cdiv(i_size, bn)),
         (xs, w_gate_up[:, :i_size, :], w_gate_up[:, i_size:, :], block_expert, act,
          bm, bn, bk)) if decode else
        (gate_up, (blocks, ct.cdiv(i_size, bn)),
         (xs, w_gate_up[:, :i_size, :], w_gate_up[:, i_size:, :], block_expert, act,
          bm, bn, bk, exact)),
        (down_decode, (blocks, ct.cdiv(h, bn)), (act, w_down, block_expert, xs, bm, bn, bk))
        if decode else
        (down, (blocks, ct.cdiv(h, bn)), (act, w_down, block_expert, xs, bm, bn, bk, exact)),
        (combine, (t,), (xs, sorted_row, topk_weights, out, top_k, bh)),
    ], out


def _launch_all(launches):
    for kernel, grid, args in launches:
        ct.launch(None, grid, kernel, args)


# ----------------------------------------------------------------------------- references

def reference_route(hidden, gate_weight, correction_bias, *, top_k, n_group, topk_group,
                    routed_scaling_factor, norm_topk_prob):
    """float64 NumPy routing as DeepseekV3TopkRouter computes it; also the biased, masked
    scores the choice was made on (a test tells ties from errors with them)."""
    x = np.asarray(hidden, np.float64)
    w = np.asarray(gate_weight, np.float64)
    scores = 1.0 / (1.0 + np.exp(-(x @ w.T)))
    t, e = scores.shape
    choice = scores + np.asarray(correction_bias, np.float64)[None, :]
    grouped = choice.reshape(t, n_group, e // n_group)
    gscore = np.sort(grouped, axis=2)[:, :, -2:].sum(axis=2)
    groups = np.argsort(-gscore, axis=1, kind="stable")[:, :topk_group]
    keep = np.zeros((t, n_group), bool)
    np.put_along_axis(keep, groups, True, axis=1)
    masked = np.where(np.repeat(keep, e // n_group, axis=1), choice, 0.0)
    ids = np.argsort(-masked, axis=1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(scores, ids, axis=1)
    if norm_topk_prob:
        weights = weights / (weights.sum(axis=1, keepdims=True) + 1e-20)
    return ids, weights * routed_scaling_factor, masked, gscore


def reference_experts(hidden, topk_ids, topk_weights, w_gate_up, w_down):
    """float64 NumPy routed experts."""
    x = np.asarray(hidden, np.float64)
    wgu = np.asarray(w_gate_up, np.float64)
    wd = np.asarray(w_down, np.float64)
    i_size = wgu.shape[1] // 2
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for e, w in zip(np.asarray(topk_ids)[t], np.asarray(topk_weights, np.float64)[t]):
            g = wgu[e, :i_size] @ x[t]
            u = wgu[e, i_size:] @ x[t]
            out[t] += w * (wd[e] @ (g / (1.0 + np.exp(-g)) * u))
    return out


def run(rng, t=29, h=100, i=72, e=16, dtype=np.float32):
    """The examples' convention: route + experts on ragged sizes in the interpreter, the
    experts' output against float64 for the routing chosen (test_moe.py checks the
    routing itself against transformers' rules)."""
    x = rng.standard_normal((t, h)).astype(dtype)
    gate = (rng.standard_normal((e, h)) / np.sqrt(h)).astype(dtype)
    bias = (rng.standard_normal(e) * 0.1).astype(np.float32)
    w_gate_up = (rng.standard_normal((e, 2 * i, h)) / np.sqrt(h)).astype(dtype)
    w_down = (rng.standard_normal((e, h, i)) / np.sqrt(i)).astype(dtype)
    ids, weights = route(x, gate, bias, top_k=4, n_group=4, topk_group=2,
                         routed_scaling_factor=2.5, norm_topk_prob=True)
    out = np.full((t, h), np.nan, dtype)
    experts(x, ids, weights, w_gate_up, w_down, out=out)
    return out, reference_experts(x, ids, weights, w_gate_up, w_down), 1e-4, 1e-5
