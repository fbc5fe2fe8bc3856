"""Decode attention over a paged KV cache, and MLA decode: bandwidth against a device copy.

    python bench/decode_attention.py [--out DIR] [--quick] [--splits 1,4,16]
                                     [--only-mla] [--mla-variants [--mla-only WORDS]]
                                     [--mla-phases]
    python bench/decode_attention.py --short [--short-batches 1,4] [--out DIR]

Kernels: `tileir.examples.decode_attention.paged_decode_attention` and
`tileir.examples.mla_decode.mla_decode`, written the plain way (issue 29, items 3, 4).
Shapes (item 7):
- decode: Llama-3-8B heads (32 query / 8 KV, D = 128), bf16, pages of 64, one query
  token, batch 1 / 16 / 64, contexts 1k to 32k (every sequence that long);
- MLA: DeepSeek-V3 (128 heads, latent 512 + RoPE 64), bf16, pages of 64, one query
  token, batch 64, contexts 4k and 8k.
Each figure is a ratio taken in this run: the bytes a kernel must read (each K/V
page once; MLA: each latent row once) plus what it writes, over its time, against
the bandwidth of a device-to-device copy of 1 GiB (bytes read + written over its
time).  Beside it, decode's rows time torch's sum over a bf16 tensor of the same bytes
(CUDA-graph replay as ours): a kernel that streams those bytes once and writes a few,
with its own fixed cost, so "x same-size sum" (its time over ours) says how far a
batch-1 row is from the launch, ramp and tail any such kernel pays.  MLA also reports TFLOP/s (2 * B * H * ctx * (576 + 512)) and "x bound": its
bound is the longer of two times, its bytes at the copy's bandwidth and its FLOPs at
the tensor cores' dense bf16 peak (TENSOR_PEAK); at 128 heads a latent row of 1152
bytes feeds 2 * 128 * 1088 FLOPs, 242 FLOP/byte, about the H200's ratio of the two
(989 TFLOP/s / 4.2 TB/s = 235), so both times are within a few percent and the FLOPs'
is the longer.  --mla-variants times configurations of the MLA kernel (rows a
step, ring stages, the producer warpgroup, the products rotated or not:
`mla_decode.variant`; the LLM engine's pages of 16 slots) at batch 64, contexts 4k
and 8k, each checked against fp32 torch first; --mla-phases times a step of the
default MLA kernel against its two products alone (`mla_decode.scores_only`,
`values_only`), both split as by default with no softmax (`products_only`, also with
the pages in L2), against the kernel with the warpgroup split (`SPLIT`, `REPLICAS`,
`RESCALE` with fp fusion) and against the default and `RESCALE` reading one
sequence's pages for all (L2 serves every copy: the step without memory waits);
--mla-only WORDS keeps the variants whose name contains one; --only-mla leaves out
the decode shapes.  Times are medians of CUDA-graph
replays (GPU time) and of Python launches (do_bench: host cost
included).  --splits also times each listed num_splits beside the chooser's (to tune
`choose_splits`).  Each kernel is first checked against fp32 torch on ragged
lengths.  Prints a table; writes decode_attention.json and decode_attention.png into
--out (default bench/results).  --short (alone) times decode's latency where it is
latency-bound, the LLM engine's decode steps: batch 1 and 4, contexts 128 to 4k, pages
of 16 and 64, every split count of SHORT_SPLITS beside the chooser's, the split
contexts merged inside the kernel (one launch) and by the combine launch, and for
pages of 16 two pages an online-softmax step (`pages_per_step=2`); a table of
microseconds (CUDA-graph replay), decode_short.json (to tune `choose_splits`).
`run(out_dir)` is the entry for bench/attention.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys

import torch
from triton.testing import do_bench, do_bench_cudagraph

import tileir as ct
from tileir.backend.pipeline import cluster_pairs, software_pipeline
from tileir.examples import decode_attention as dec
from tileir.examples import mla_decode as mla

DT = torch.bfloat16
PAGE = 64
HQ, HKV, D = 32, 8, 128
MLA_H = 128
DECODE = [(b, ctx) for b in (1, 16, 64) for ctx in (1024, 2048, 4096, 8192, 16384, 32768)]
MLA_SHAPES = [(64, 4096), (64, 8192)]
# dense bf16 tensor-core peak of an H100 / H200 SXM (FLOP/s), for MLA's bound
TENSOR_PEAK = 989e12
# (name, rows a step, hints, cache page): the configurations --mla-variants times.
# The default keeps each step's products in it (product_rotation=False), so with the
# 2-stage ring of 64-row steps a slot is refilled a whole step before it is read;
# "rotated" (product_rotation=True): the copy of step j + 1 starts only once P c of
# step j - 1 is done, mid-step j; "fenced" (rotation_fence=True): rotated, with the
# softmax's exponentials kept before the wait for P c (ptxas otherwise waits first);
# "page 16": the LLM engine's cache pages, one page a step; "copy in parts"
# (copy_parts=True): each TMA box of a step (the latent's 64-column boxes, the RoPE
# part) completes its own barrier and the score product's k steps wait for the box
# they read, so the scores start on a step's first 8 KB instead of all 72 KB.
# Measured on an H200, 2026-11-29 (docs/attention.md, bench/RESULTS.md): unrotated 0.43
# of the bound, rotated 0.35, copy in parts 0.43; the warpgroup split 0.47.
# The default (mla_decode.default_hints) splits the warpgroups at 32 rows a step or
# more; the rows named for another schedule turn the split off (NOSPLIT) unless they
# name it: rotated and split spills (docs/attention.md).
NOSPLIT = {"warpgroup_split": False}
ROTATED = {"product_rotation": True, **NOSPLIT}
FENCED = {**ROTATED, "rotation_fence": True}
PARTS = {"copy_parts": True}
# the warpgroup split (backend/layout/warpgroup_split.py): warpgroup 0 alone computes the
# whole 64 x 64 score tile and the softmax and hands P and alpha over (owner_runs.py);
# with replicas, each warpgroup computes them itself, no exchange in the loop
# the split alone, its options off whatever the default (mla_decode.SPLIT_HINTS) adds
SPLIT = {"warpgroup_split": True, "early_rescale": False, "fp_fusion": False,
         "merged_handoffs": False, "pair_axis": None}
REPLICAS = {**SPLIT, "split_replicas": True}
# the owner's critical path (docs/attention.md, "Where the split step goes"): with
# early_rescale each warpgroup multiplies its half of O by alpha as soon as it holds
# it (the owner among its exponentials, the other before it waits for P), not both
# between P's hand-off and P c; fp_fusion makes the softmax's multiply-adds FFMAs
# (the owner's run: 225 -> 161 instructions a step)
RESCALE = {**SPLIT, "early_rescale": True}
FUSION = {"fp_fusion": True}
# a row whose name ends so compiles with the producer's indices (the page number read
# from the block table) after its wait for the slot, as before session 27
# (software_pipeline.INDICES_FIRST = False)
INDICES_AFTER = ", table read after the slot wait"
# ... and one ending so with the token pair sharing the RoPE box too (its rows halved
# between the pair's blocks; cluster_pairs.ROWS_BESIDE_OTHERS = True), not the latent's
# boxes alone
ROPE_SHARED = ", RoPE shared too"
# a row's compiler settings (module, attribute, value while the row runs), by the end
# of its name: compiled afresh (the disk cache off), and only for that row
SETTINGS = {INDICES_AFTER: (software_pipeline, "INDICES_FIRST", False),
            ROPE_SHARED: (cluster_pairs, "ROWS_BESIDE_OTHERS", True)}
MLA_VARIANTS = [
    ("bn64 (default: unrotated, warpgroup split, token pair, 2 stages)", 64, {}, PAGE),
    # the default without the token pair: a token's two head blocks each copying every
    # latent page alone, not as a (1, 2, 1) cluster sharing it by TMA multicast (the
    # kernel option `pair_axis`; docs/attention.md, "A token's blocks as a cluster pair")
    ("bn64 default, no token pair", 64, {"pair_axis": None}, PAGE),
    ("bn64 default" + ROPE_SHARED, 64, {}, PAGE),
    ("bn64 default" + INDICES_AFTER, 64, {}, PAGE),
    # a step's hand-offs (alpha, P) under one wait and one signal each way: no
    # named-barrier round trip between the owner's exponentials and P c
    # (docs/attention.md, "Merged hand-offs")
    ("bn64 default, merged hand-offs", 64, {"merged_handoffs": True}, PAGE),
    ("bn64 split, early rescale", 64, RESCALE, PAGE),
    ("bn64 split, fp fusion", 64, {**SPLIT, **FUSION}, PAGE),
    ("bn64 split, early rescale, fp fusion", 64, {**RESCALE, **FUSION}, PAGE),
    # the producer prefetching into L2 the pages of the step 1, 2 or 4 steps after the
    # one it copies (`l2_ahead`): a page is scattered in memory and read by no other
    # block but its token's other half, so each copy into the 2-stage ring meets DRAM
    # ("pages in L2" in --mla-phases: 2.05 against 2.38 us a step, session 27)
    ("bn64 default, L2 1 ahead", 64, {"l2_ahead": 1}, PAGE),
    ("bn64 default, L2 2 ahead", 64, {"l2_ahead": 2}, PAGE),
    ("bn64 split, early rescale, fp fusion, copy in parts", 64,
     {**RESCALE, **FUSION, **PARTS}, PAGE),
    ("bn32 split, early rescale, fp fusion", 32, {**RESCALE, **FUSION}, PAGE),
    # the hand-offs signalled through mbarriers instead of named barriers (racecheck
    # flags the named barriers' alpha and l hand-offs: docs/attention.md)
    ("bn64 split, mbarrier hand-offs", 64, {**SPLIT, "mbarrier_handoffs": True}, PAGE),
    # the steps to warpgroups 0 and 1 in turn (FlashMLA's alternation), in its plain
    # form: no run cut around its hand-off, every hand-off between barriers of both
    # warpgroups (docs/attention.md, "Alternating owners": modelled no better than the
    # split until the cut is built)
    ("bn64 alternating owners", 64, {**SPLIT, "alternate_owners": True}, PAGE),
    # the default with every hand-off between barriers of both warpgroups (no owner
    # ahead; racecheck reports nothing there: bench/RESULTS.md, session 23)
    ("bn64 default, unskewed hand-offs", 64, {"skewed_handoffs": False}, PAGE),
    ("bn64 no split (scores in both warpgroups)", 64, NOSPLIT, PAGE),
    ("bn64 warpgroup split, copy in parts", 64, {**SPLIT, **PARTS}, PAGE),
    ("bn64 split replicas (scores in each warpgroup)", 64, REPLICAS, PAGE),
    ("bn64 split replicas, copy in parts", 64, {**REPLICAS, **PARTS}, PAGE),
    ("bn32 warpgroup split (4 stages)", 32, SPLIT, PAGE),
    ("bn64 no split, copy in parts", 64, {**NOSPLIT, **PARTS}, PAGE),
    ("bn64 no producer", 64, {"warp_specialize": False, **NOSPLIT}, PAGE),
    ("bn64 rotated", 64, ROTATED, PAGE),
    ("bn64 fenced rotation", 64, FENCED, PAGE),
    ("bn32 no split", 32, NOSPLIT, PAGE),
    ("bn32 rotated", 32, ROTATED, PAGE),
    ("bn32 fenced rotation", 32, FENCED, PAGE),
    ("bn32 no split, copy in parts", 32, {**NOSPLIT, **PARTS}, PAGE),
    ("page 16 (bn16)", 16, {}, 16),
    ("page 16 (bn16) copy in parts", 16, PARTS, 16),
]


def timed(fn) -> dict:
    """Milliseconds: CUDA-graph replay (GPU time) and Python launches (do_bench, median)."""
    return {"graph": do_bench_cudagraph(fn, rep=100, return_mode="median"),
            "launch": do_bench(fn, warmup=25, rep=200, return_mode="median")}


def copy_bandwidth() -> float:
    """GB/s of a 1 GiB device-to-device copy (read + written), timed as launched: captured
    in a CUDA graph torch's copy is a memcpy node, which measured 2.77 TB/s on the H200
    (2026-11-28), below the decode kernel's own reads; launched, a copy measured 4.27
    (shared/ANCHORS.md)."""
    x = torch.empty(1 << 29, device="cuda", dtype=torch.int16)
    y = torch.empty_like(x)
    ms = do_bench(lambda: y.copy_(x), warmup=25, rep=200, return_mode="median")
    return 2 * x.numel() * x.element_size() / ms / 1e6


def paged(batch, ctx, width, shuffle=True, page=PAGE):
    """A cache of batch * ctx / page pages (shuffled: no two neighbours in memory) and
    its block table."""
    pages = batch * math.ceil(ctx / page)
    cache = torch.randn(pages, page, *width, device="cuda", dtype=DT)
    ids = torch.randperm(pages, device="cuda") if shuffle else torch.arange(pages, device="cuda")
    table = ids.to(torch.int32).reshape(batch, -1)
    return cache, table


def _err(out, ref) -> float:
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.norm(out.float() - ref) / torch.linalg.norm(ref)).item()


def check() -> dict:
    """Relative errors against fp32 torch over the gathered pages, ragged lengths, Tq = 2."""
    torch.manual_seed(0)
    lens = [1000, 77, 3001]
    b, tq = len(lens), 2
    kc, table = paged(b, max(lens), (HKV, D))
    vc = torch.randn_like(kc)
    q = torch.randn(b, tq, HQ, D, device="cuda", dtype=DT)
    seq = torch.tensor(lens, device="cuda", dtype=torch.int32)
    errs = {}
    ref = []
    for i, n in enumerate(lens):
        k = kc[table[i].long()].reshape(-1, HKV, D)[:n].repeat_interleave(HQ // HKV, 1)
        v = vc[table[i].long()].reshape(-1, HKV, D)[:n].repeat_interleave(HQ // HKV, 1)
        ref.append(_attend(q[i], k, v, 1 / math.sqrt(D)))
    ref = torch.stack(ref)
    counters = torch.zeros(b * HKV, device="cuda", dtype=torch.int32)
    for splits, one in ((None, True), (1, True), (7, True), (16, True), (7, False)):
        out = torch.full_like(q, float("nan"))
        dec.paged_decode_attention(q, kc, vc, table, seq, 1 / math.sqrt(D), out, num_splits=splits,
                                   one_launch=one, counters=counters)
        errs[f"decode splits={splits}{'' if one else ' +combine'}"] = _err(out, ref)
    if counters.any():
        errs["decode counters left nonzero"] = float("inf")
    kv, table = paged(b, max(lens), (576,))
    q = torch.randn(b, tq, MLA_H, 576, device="cuda", dtype=DT)
    for splits in (None, 1, 5):
        out = torch.full((b, tq, MLA_H, 512), float("nan"), device="cuda", dtype=DT)
        mla.mla_decode(q, kv, table, seq, 1 / math.sqrt(576), out, num_splits=splits)
        ref = []
        for i, n in enumerate(lens):
            lat = kv[table[i].long()].reshape(-1, 576)[:n]
            ref.append(_attend(q[i], lat[:, None].expand(-1, MLA_H, -1),
                               lat[:, None, :512].expand(-1, MLA_H, -1), 1 / math.sqrt(576)))
        errs[f"mla splits={splits}"] = _err(out, torch.stack(ref))
    return errs


def _attend(q, k, v, scale):
    tq, n = q.shape[0], k.shape[0]
    s = torch.einsum("thd,nhd->htn", q.float(), k.float()) * scale
    pos = n - tq + torch.arange(tq, device="cuda")
    s = s.masked_fill(torch.arange(n, device="cuda")[None, None, :] > pos[None, :, None],
                      float("-inf"))
    return torch.einsum("htn,nhd->thd", torch.softmax(s, -1), v.float())


def _decode_case(batch, ctx, page=PAGE):
    """Llama-3-8B's heads over `batch` sequences of `ctx` tokens, one new token each:
    the arrays, the bytes the kernel must move, and zeroed split-KV counters (passed
    to every call: one allocated per call would add a memset to each replay)."""
    kc, table = paged(batch, ctx, (HKV, D), page=page)
    vc = torch.randn_like(kc)
    q = torch.randn(batch, 1, HQ, D, device="cuda", dtype=DT)
    out = torch.empty_like(q)
    seq = torch.full((batch,), ctx, device="cuda", dtype=torch.int32)
    nbytes = 2 * batch * ctx * HKV * D * 2 + 2 * q.numel() * 2 + table.numel() * 4
    counters = torch.zeros(batch * HKV, device="cuda", dtype=torch.int32)
    return kc, vc, table, q, out, seq, nbytes, counters


def _sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def measure_decode(batch, ctx, copy_gbs, splits_list, tables_early=False) -> dict:
    """A row of the main table: the chosen splits, each of splits_list beside them, and
    with tables_early the chosen splits reading the lengths and first page numbers
    before the wait for the previous call (`paged_decode_attention(tables_early=True)`;
    the graph replays calls back to back, so that wait is for the call before)."""
    kc, vc, table, q, out, seq, nbytes, counters = _decode_case(batch, ctx)
    chosen = dec.choose_splits(batch * HKV, table.shape[1], _sms(), page=PAGE, one_launch=True)
    row = {"kernel": "decode", "batch": batch, "ctx": ctx, "bytes": nbytes, "splits": chosen}
    cases = [("tileir", None, False, None)] + [(f"splits={s}", s, False, None)
                                               for s in splits_list if s != chosen]
    if tables_early:
        cases.append(("tables early", None, True, None))
    gp = dec.tiles(1, HQ // HKV)[1]
    if chosen > dec.merge_width(chosen, gp, D, 4096):
        # the last block's merge in rounds of 4096 floats, as before session 27 (which
        # merges up to 8192 a round: dec.MERGE_FLOATS_PER_THREAD)
        cases.append(("4096-float merge rounds", None, False, 4096 // 128))
    # the fixed cost of any kernel that streams these bytes once and returns a little:
    # torch's sum over a bf16 tensor of the same size, timed the same way
    flat = torch.randn(nbytes // 2, device="cuda", dtype=torch.bfloat16)
    total = torch.empty((), device="cuda", dtype=torch.float32)
    t = timed(lambda: torch.sum(flat, 0, dtype=torch.float32, out=total))
    row["same-size sum"] = {mode: {"ms": ms, "GB/s": nbytes / ms / 1e6,
                                   "x copy": nbytes / ms / 1e6 / copy_gbs}
                            for mode, ms in t.items()}
    for key, s, early, floats in cases:
        def call(s=s, early=early, floats=floats):
            was = dec.MERGE_FLOATS_PER_THREAD
            dec.MERGE_FLOATS_PER_THREAD = floats or was
            try:
                return dec.paged_decode_attention(q, kc, vc, table, seq, 0.088, out,
                                                  num_splits=s, counters=counters,
                                                  tables_early=early)
            finally:
                dec.MERGE_FLOATS_PER_THREAD = was
        t = timed(call)
        row[key] = {mode: {"ms": ms, "GB/s": nbytes / ms / 1e6,
                           "x copy": nbytes / ms / 1e6 / copy_gbs} for mode, ms in t.items()}
    return row


# --short: decode latency at batch 1 and 4 over short contexts (the LLM engine's decode
# steps: issue 30), every split count beside the chooser's, merged in the kernel (one
# launch) or by the combine launch, pages of 16 (the engine's) and 64
SHORT_BATCHES = (1, 4)
SHORT_CONTEXTS = (128, 256, 512, 1024, 2048, 4096)
SHORT_PAGES = (16, 64)
SHORT_SPLITS = (1, 2, 4, 8, 16, 32)


def measure_short(batch, ctx, page) -> list[dict]:
    """Microseconds (CUDA-graph replay, median) of one decode call at each split count
    and both merges (pages of 16: also two pages an online-softmax step, merged in the
    kernel); a row per variant."""
    kc, vc, table, q, out, seq, nbytes, counters = _decode_case(batch, ctx, page)
    pages = table.shape[1]
    rows = []
    for one, ps in ((True, 1), (False, 1)) + (((True, 2),) if page == 16 else ()):
        chosen = dec.choose_splits(batch * HKV, pages, _sms(), page=page, one_launch=one)
        row = {"kernel": "decode short", "batch": batch, "ctx": ctx, "page": page,
               "one launch": one, "pages a step": ps, "chosen": chosen, "bytes": nbytes,
               "us": {}}
        for s in sorted({chosen, *(s for s in SHORT_SPLITS if s <= pages)}):
            ms = do_bench_cudagraph(
                lambda: dec.paged_decode_attention(q, kc, vc, table, seq, 0.088, out,
                                                   num_splits=s, one_launch=one,
                                                   counters=counters, pages_per_step=ps),
                rep=20, return_mode="median")
            row["us"][s] = ms * 1e3
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def short_table(rows) -> str:
    """A row per (batch, context, page, merge): microseconds at each split count, the
    chooser's marked with *, and the best."""
    out = ["decode latency, Llama-3-8B heads (32 / 8, D 128), bf16, one new token, "
           "CUDA-graph replay (us)",
           "| batch | context | page | merge | " + " | ".join(f"S={s}" for s in SHORT_SPLITS)
           + " | chooser | best |",
           "|---|---|---|---|" + "---|" * len(SHORT_SPLITS) + "---|---|"]
    for r in rows:
        cells = [(f"{r['us'][s]:.2f}" + ("*" if s == r["chosen"] else "")) if s in r["us"]
                 else "-" for s in SHORT_SPLITS]
        best = min(r["us"], key=r["us"].get)
        out.append(f"| {r['batch']} | {r['ctx']} | {r['page']} | "
                   f"{'in kernel' if r['one launch'] else '+combine'}"
                   f"{', 2 pages a step' if r['pages a step'] == 2 else ''} | "
                   + " | ".join(cells)
                   + f" | S={r['chosen']}: {r['us'][r['chosen']]:.2f} | "
                   f"S={best}: {r['us'][best]:.2f} |")
    return "\n".join(out)


def _start() -> tuple[str, dict]:
    """The device's name and the time, then every kernel checked against fp32 torch
    (`check`), printed; returns (device, errors)."""
    device = torch.cuda.get_device_name()
    print(f"{device}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
          flush=True)
    errs = check()
    print("relative error vs fp32 (ragged lengths 1000/77/3001, Tq 2):", json.dumps(errs),
          flush=True)
    return device, errs


def run_short(out_dir: str, batches=SHORT_BATCHES, contexts=SHORT_CONTEXTS,
              pages=SHORT_PAGES) -> list[dict]:
    """--short: every (batch, context, page) of SHORT_* (or those given); prints the
    table, writes decode_short.json into out_dir."""
    device, errs = _start()
    rows = []
    for batch in batches:
        for ctx in contexts:
            for page in pages:
                rows += measure_short(batch, ctx, page)
    print(short_table(rows))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "decode_short.json"), "w") as f:
        json.dump({"device": device, "checks": errs, "rows": rows}, f, indent=1)
    print(f"wrote {os.path.join(out_dir, 'decode_short.json')}")
    return rows


def mla_bound_ms(nbytes, flops, copy_gbs) -> float:
    """MLA's bound: the longer of its bytes at the copy's bandwidth and its FLOPs at the
    tensor cores' peak, in ms."""
    return max(nbytes / copy_gbs / 1e6, flops / TENSOR_PEAK * 1e3)


def _mla_figures(t, nbytes, flops, copy_gbs) -> dict:
    bound = mla_bound_ms(nbytes, flops, copy_gbs)
    return {mode: {"ms": ms, "GB/s": nbytes / ms / 1e6, "TFLOP/s": flops / ms / 1e9,
                   "x copy": nbytes / ms / 1e6 / copy_gbs, "x bound": bound / ms}
            for mode, ms in t.items()}


def _mla_case(batch, ctx, page=PAGE):
    kv, table = paged(batch, ctx, (576,), page=page)
    q = torch.randn(batch, 1, MLA_H, 576, device="cuda", dtype=DT)
    out = torch.empty(batch, 1, MLA_H, 512, device="cuda", dtype=DT)
    seq = torch.full((batch,), ctx, device="cuda", dtype=torch.int32)
    nbytes = batch * ctx * 576 * 2 + q.numel() * 2 + out.numel() * 2 + table.numel() * 4
    flops = 2 * batch * MLA_H * ctx * (576 + 512)
    return kv, table, q, out, seq, nbytes, flops


def measure_mla(batch, ctx, copy_gbs, splits_list) -> dict:
    kv, table, q, out, seq, nbytes, flops = _mla_case(batch, ctx)
    chosen = dec.choose_splits(batch * (MLA_H // 64), table.shape[1],
                               torch.cuda.get_device_properties(0).multi_processor_count, 1)
    row = {"kernel": "mla", "batch": batch, "ctx": ctx, "bytes": nbytes, "flops": flops,
           "splits": chosen, "bound ms": mla_bound_ms(nbytes, flops, copy_gbs)}
    for s in [None] + [s for s in splits_list if s != chosen]:
        t = timed(lambda: mla.mla_decode(q, kv, table, seq, 0.0417, out, num_splits=s))
        key = "tileir" if s is None else f"splits={s}"
        row[key] = _mla_figures(t, nbytes, flops, copy_gbs)
    return row


def check_mla(bn, hints, page=PAGE) -> float:
    """Relative error of one MLA configuration against fp32 torch: batch 64 of ragged
    lengths, one token, unsplit (the grid, and so the compiled variant, that is timed)
    and split in two."""
    torch.manual_seed(1)
    lens = torch.randint(1, 3000, (64,)).tolist()
    b, tq = len(lens), 1
    kv, table = paged(b, max(lens), (576,), page=page)
    q = torch.randn(b, tq, MLA_H, 576, device="cuda", dtype=DT)
    seq = torch.tensor(lens, device="cuda", dtype=torch.int32)
    worst = 0.0
    for splits in (1, 2):
        out = torch.full((b, tq, MLA_H, 512), float("nan"), device="cuda", dtype=DT)
        mla.mla_decode(q, kv, table, seq, 1 / math.sqrt(576), out, num_splits=splits, bn=bn,
                       hints=hints)
        ref = []
        for i, n in enumerate(lens):
            lat = kv[table[i].long()].reshape(-1, 576)[:n]
            ref.append(_attend(q[i], lat[:, None].expand(-1, MLA_H, -1),
                               lat[:, None, :512].expand(-1, MLA_H, -1), 1 / math.sqrt(576)))
        worst = max(worst, _err(out, torch.stack(ref)))
    return worst


def mla_variants(copy_gbs, only=()) -> list[dict]:
    """Each configuration of MLA_VARIANTS (`only`: those whose name contains one of
    these words) at batch 64, contexts 4k and 8k (CUDA-graph times): printed as a
    table, best first; the rows for the JSON."""
    rows = []
    cases = {}
    for name, bn, hints, page in MLA_VARIANTS:
        if only and not any(word in name for word in only):
            continue
        row = {"variant": name, "bn": bn, "hints": hints, "page": page}
        setting = next((v for end, v in SETTINGS.items() if name.endswith(end)), None)
        if setting:    # a compiler setting, not a hint: compiled afresh, and only here
            module, attr, value = setting
            cache = os.environ.get("TILEIR_CACHE")
            os.environ["TILEIR_CACHE"] = "0"
            saved = getattr(module, attr)
            setattr(module, attr, value)
            mla._variants.clear()
        try:
            row["error"] = check_mla(bn, hints, page)
            for batch, ctx in MLA_SHAPES:
                if (batch, ctx, page) not in cases:      # one cache per page size
                    cases[batch, ctx, page] = _mla_case(batch, ctx, page)
                kv, table, q, out, seq, nbytes, flops = cases[batch, ctx, page]
                t = timed(lambda: mla.mla_decode(q, kv, table, seq, 0.0417, out, bn=bn,
                                                 hints=hints))
                row[f"ctx={ctx}"] = _mla_figures(t, nbytes, flops, copy_gbs)
        except Exception as e:       # a configuration that does not compile: say why
            row["failed"] = f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            if setting:
                setattr(module, attr, saved)
                mla._variants.clear()
                if cache is None:
                    os.environ.pop("TILEIR_CACHE")
                else:
                    os.environ["TILEIR_CACHE"] = cache
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("MLA variants, batch 64 (CUDA graph): TB/s, TFLOP/s, x bound")
    print("| variant | error | " + " | ".join(f"ctx {c // 1024}k TB/s | TFLOP/s | x bound"
                                           for _, c in MLA_SHAPES) + " |")
    print("|---|---|" + "---|---|---|" * len(MLA_SHAPES))
    ok = [r for r in rows if "failed" not in r]
    ok.sort(key=lambda r: -r[f"ctx={MLA_SHAPES[0][1]}"]["graph"]["x bound"])
    for r in ok:
        cells = []
        for _, c in MLA_SHAPES:
            g = r[f"ctx={c}"]["graph"]
            cells.append(f"{g['GB/s'] / 1e3:.2f} | {g['TFLOP/s']:.0f} | {g['x bound']:.2f}")
        print(f"| {r['variant']} | {r['error']:.1e} | " + " | ".join(cells) + " |")
    for r in rows:
        if "failed" in r:
            print(f"| {r['variant']} | failed: {r['failed']} |")
    return rows


def check_phases() -> float:
    """Worst relative error of `mla_decode.scores_only` / `values_only` against fp32
    torch: batch 3 of ragged lengths, one token, pages of 64."""
    torch.manual_seed(2)
    lens = [2, 700, 2049]
    kv, table = paged(len(lens), max(lens), (576,))
    q = torch.randn(len(lens), 1, MLA_H, 576, device="cuda", dtype=DT)
    seq = torch.tensor(lens, device="cuda", dtype=torch.int32)
    worst = 0.0
    for kernel, width in ((mla.scores_only, 64), (mla.values_only, 512),
                          (mla.products_only, 512)):
        out = torch.full((len(lens), 1, MLA_H, width), float("nan"), device="cuda")
        k, grid, args = mla.phase_launch(kernel, q, kv, table, seq, out)
        ct.launch(None, grid, k, args)
        ref = []
        for i, n in enumerate(lens):
            steps = -(-n // 64)
            lat = kv[table[i].long()].reshape(-1, 576)[:steps * 64].float()
            if kernel is mla.scores_only:
                ref.append((q[i].float() @ lat.T).reshape(1, MLA_H, steps, 64).amax(2))
            elif kernel is mla.products_only:
                ref.append((q[i].float() @ lat.T).to(DT).float() @ lat[:, :512])
            else:
                p = torch.exp2(q[i, :, :, :64].float() / 64).to(DT).float()
                ref.append(p.repeat(1, 1, steps) @ lat[:, :512])
        worst = max(worst, _err(out, torch.stack(ref)))
    return worst


def mla_phases() -> list[dict]:
    """Time a step of the default MLA kernel against its two products alone
    (`mla_decode.scores_only`, `values_only`: the same pages, tiles, warps and stages),
    batch 64 at MLA_SHAPES (CUDA graph): microseconds and cycles at the peak's 1.83 GHz
    a 64-key step of one block; the rest is the softmax, its exchanges and the turn.
    "mla" and "mla, pages in L2" are the default, a token's two blocks paired (since
    session 28); the "early rescale, fp fusion" columns are the same kernel unpaired
    (SPLIT sets pair_axis=None), so each pair of columns is the pair's A/B with the pages
    from DRAM and from L2; the phase kernels are unpaired."""
    err = check_phases()
    print(f"MLA phases: relative error of the phase kernels vs fp32: {err:.1e}", flush=True)
    rows = []
    for batch, ctx in MLA_SHAPES:
        kv, table, q, out, seq, _, _ = _mla_case(batch, ctx)
        steps = ctx // 64
        row = {"batch": batch, "ctx": ctx, "error": err}
        row["mla"] = timed(lambda: mla.mla_decode(q, kv, table, seq, 0.0417, out,
                                                  num_splits=1))["graph"]
        row["mla_split"] = timed(lambda: mla.mla_decode(q, kv, table, seq, 0.0417, out,
                                                        num_splits=1, hints=SPLIT))["graph"]
        row["mla_replicas"] = timed(lambda: mla.mla_decode(q, kv, table, seq, 0.0417, out,
                                                           num_splits=1,
                                                           hints=REPLICAS))["graph"]
        row["mla_rescale"] = timed(lambda: mla.mla_decode(q, kv, table, seq, 0.0417, out,
                                                          num_splits=1,
                                                          hints={**RESCALE, **FUSION}))["graph"]
        # every sequence's table names the first one's pages (4.7 MB at 4k: L2 holds
        # them): the same work with the copies served from L2, so the step's time
        # without waiting for memory
        shared = table[:1].expand_as(table).contiguous()
        row["mla_l2"] = timed(lambda: mla.mla_decode(q, kv, shared, seq, 0.0417, out,
                                                     num_splits=1))["graph"]
        row["mla_rescale_l2"] = timed(
            lambda: mla.mla_decode(q, kv, shared, seq, 0.0417, out, num_splits=1,
                                   hints={**RESCALE, **FUSION}))["graph"]
        for kernel, width in ((mla.scores_only, 64), (mla.values_only, 512),
                              (mla.products_only, 512)):
            o = torch.empty(batch, 1, MLA_H, width, device="cuda")
            k, grid, args = mla.phase_launch(kernel, q, kv, table, seq, o)
            row[k.name] = timed(lambda: ct.launch(None, grid, k, args))["graph"]
        # the split's products without the softmax, the pages in L2 (no memory waits)
        o = torch.empty(batch, 1, MLA_H, 512, device="cuda")
        k, grid, args = mla.phase_launch(mla.products_only, q, kv, shared, seq, o)
        row["products_only_l2"] = timed(lambda: ct.launch(None, grid, k, args))["graph"]
        per = {key: row[key] * 1e3 / steps
               for key in ("mla", "mla_split", "mla_replicas", "mla_rescale", "mla_l2",
                           "mla_rescale_l2", "scores_only", "values_only", "products_only",
                           "products_only_l2")}
        row["us a step"] = per
        row["cycles a step"] = {key: v * 1.83e3 for key, v in per.items()}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("MLA phases, batch 64 (CUDA graph): a 64-key step of one block, us (cycles at "
          "1.83 GHz)")
    print("| context | mla | scores only | P c only | mla - both | mla, warpgroup split "
          "| mla, split replicas | mla, split, early rescale, fp fusion | mla, pages in L2 "
          "| early rescale, fp fusion, pages in L2 | split products only (no softmax) "
          "| split products only, pages in L2 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        u = r["us a step"]
        rest = u["mla"] - u["scores_only"] - u["values_only"]
        print(f"| {r['ctx'] // 1024}k | " + " | ".join(
            f"{v:.3f} ({v * 1.83e3:.0f})" for v in (u["mla"], u["scores_only"],
                                                   u["values_only"], rest,
                                                   u["mla_split"], u["mla_replicas"],
                                                   u["mla_rescale"], u["mla_l2"],
                                                   u["mla_rescale_l2"], u["products_only"],
                                                   u["products_only_l2"])) + " |")
    return rows


def table_text(rows, copy_gbs) -> str:
    out = [f"device copy: {copy_gbs:.0f} GB/s (read + written)",
           "| kernel | batch | context | splits | ms (graph) | GB/s | x copy | TFLOP/s "
           "| x bound | ms (launch) | best other splits (graph x copy) "
           "| tables early (graph x copy) | 4096-float merge rounds (graph x copy) "
           "| same-size sum (graph x copy) | x same-size sum |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g, lau = r["tileir"]["graph"], r["tileir"]["launch"]
        others = [(k, v["graph"]["x copy"]) for k, v in r.items() if k.startswith("splits=")]
        best = max(others, key=lambda kv: kv[1]) if others else None
        tf = f"{g['TFLOP/s']:.0f}" if "TFLOP/s" in g else "-"
        xb = f"{g['x bound']:.2f}" if "x bound" in g else "-"
        early = f"{r['tables early']['graph']['x copy']:.2f}" if "tables early" in r else "-"
        one = f"{r['4096-float merge rounds']['graph']['x copy']:.2f}" \
            if "4096-float merge rounds" in r else "-"
        ref = r.get("same-size sum", {}).get("graph")
        ref_x = f"{ref['x copy']:.2f}" if ref else "-"
        vs_ref = f"{ref['ms'] / g['ms']:.2f}" if ref else "-"
        out.append(f"| {r['kernel']} | {r['batch']} | {r['ctx']} | {r['splits']} | "
                   f"{g['ms']:.4f} | {g['GB/s']:.0f} | {g['x copy']:.2f} | {tf} | {xb} | "
                   f"{lau['ms']:.4f} | {f'{best[0]}: {best[1]:.2f}' if best else '-'} | "
                   f"{early} | {one} | {ref_x} | {vs_ref} |")
    return "\n".join(out)


def plot(rows, path, device):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(10, 5))
    for batch in sorted({r["batch"] for r in rows if r["kernel"] == "decode"}):
        rs = [r for r in rows if r["kernel"] == "decode" and r["batch"] == batch]
        ax.plot([r["ctx"] for r in rs], [r["tileir"]["graph"]["x copy"] for r in rs], "o-",
                label=f"decode B{batch} (32/8 heads, D128)")
    rs = [r for r in rows if r["kernel"] == "mla"]
    if rs:
        ax.plot([r["ctx"] for r in rs], [r["tileir"]["graph"]["x bound"] for r in rs], "s--",
                label="MLA B64 (128 heads), x its bound")
    ax.axhline(0.8, color="gray", lw=0.8, ls=":")
    ax.axhline(0.7, color="gray", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (tokens, page 64)")
    ax.set_ylabel("bytes read / time ÷ device copy bandwidth")
    ax.set_title(f"paged decode attention, bf16 — {device}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run(out_dir: str, quick: bool = False, splits_list=(), only_mla: bool = False,
        variants: bool = False, phases: bool = False, only_variants=(),
        tables_early: bool = False) -> list[dict]:
    """Measures every shape (`only_mla`: MLA's; `variants`: and MLA's configurations,
    those whose name contains a word of `only_variants` if any; `phases`: and MLA's two
    products alone; `tables_early`: and each decode shape with `tables_early`); prints
    the tables; writes JSON and PNG into out_dir."""
    device, errs = _start()
    bad = [k for k, e in errs.items() if not e < 2e-2]
    if bad:
        print(f"MISMATCH: {', '.join(bad)} (the timings below time a wrong kernel)", flush=True)
    copy_gbs = copy_bandwidth()
    rows = []
    shapes = [] if only_mla else DECODE[2:4] + DECODE[8:10] if quick else DECODE
    for batch, ctx in shapes:
        rows.append(measure_decode(batch, ctx, copy_gbs, splits_list, tables_early))
        print(json.dumps(rows[-1]), flush=True)
    for batch, ctx in MLA_SHAPES[:1] if quick else MLA_SHAPES:
        rows.append(measure_mla(batch, ctx, copy_gbs, splits_list))
        print(json.dumps(rows[-1]), flush=True)
    print(table_text(rows, copy_gbs))
    var_rows = mla_variants(copy_gbs, only_variants) if variants else []
    phase_rows = mla_phases() if phases else []
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "decode_attention.json"), "w") as f:
        json.dump({"device": device, "copy GB/s": copy_gbs, "tensor peak": TENSOR_PEAK,
                   "checks": errs, "rows": rows, "mla variants": var_rows,
                   "mla phases": phase_rows}, f, indent=1)
    plot(rows, os.path.join(out_dir, "decode_attention.png"), device)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    p.add_argument("--quick", action="store_true", help="four decode shapes and one MLA shape")
    p.add_argument("--splits", default="", help="also time these num_splits (comma-separated)")
    p.add_argument("--only-mla", action="store_true", help="MLA decode's shapes only")
    p.add_argument("--tables-early", action="store_true",
                   help="also time each decode shape reading its lengths and first page "
                        "numbers before the wait for the previous call (tables_early)")
    p.add_argument("--mla-variants", action="store_true",
                   help="also time MLA_VARIANTS (rows a step, stages, producer warpgroup)")
    p.add_argument("--short", action="store_true",
                   help="decode latency at batch 1 and 4, contexts 128 to 4k, pages 16 and "
                        "64, each split count, merged in the kernel or by combine (only)")
    p.add_argument("--short-batches", default="1,4",
                   help="with --short: these batch sizes (comma-separated)")
    p.add_argument("--short-contexts", default=",".join(map(str, SHORT_CONTEXTS)),
                   help="with --short: these contexts (comma-separated)")
    p.add_argument("--short-pages", default=",".join(map(str, SHORT_PAGES)),
                   help="with --short: these page sizes (comma-separated)")
    p.add_argument("--mla-only", default="",
                   help="with --mla-variants: only the variants whose name contains one of "
                        "these words (comma-separated), e.g. 'default,split'")
    p.add_argument("--mla-phases", action="store_true",
                   help="also time MLA's two products alone against the whole step")
    args = p.parse_args(argv)
    if args.short:
        ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
        run_short(args.out, ints(args.short_batches), ints(args.short_contexts),
                  ints(args.short_pages))
        return 0
    splits = [int(s) for s in args.splits.split(",") if s]
    run(args.out, args.quick, splits, args.only_mla, args.mla_variants, args.mla_phases,
        [w for w in args.mla_only.split(",") if w], args.tables_early)
    return 0


if __name__ == "__main__":
    sys.exit(main())
