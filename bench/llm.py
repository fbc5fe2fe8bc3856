"""tileir.llm against transformers on one GPU: decode and prefill of random-weight models
in real widths.

    python bench/llm.py [--out DIR] [--models llama3-8b,deepseek-v3-small] [--quick]
                        [--no-compile] [--profile] [--fuse-norm]
                        [--results-md bench/RESULTS.md]

Models: Llama-3-8B-shaped (all 32 layers, random bf16 weights) and a DeepSeek-V3-shaped
model with fewer layers and experts that fits one GPU (real widths: hidden 7168, MLA
with q_lora 1536 / kv_lora 512, 128 heads; 4 layers, the first dense, 32 routed experts
of 2048, 8 per token, 8 groups of which 4 are kept, one shared expert).

Cases, each in this run: batch-1 and batch-64 decode (128 new tokens after a 128-token
prompt; tokens/s over the decode steps alone, the median of `--runs` timed runs, 3 by
default, every run in the JSON) and a 2048-token prefill (ms).
Candidates: tileir.llm (decode steps replayed as CUDA graphs when the paged attention
kernels are installed), transformers eager, and transformers with a static cache and
torch.compile (mode "reduce-overhead"), all on the same weights (tileir.llm reads
transformers' own state dict).  Decode is also set against the weight-streaming
bound: the model's weight bytes over the run's measured copy bandwidth (the best of
large device-to-device copies, bytes read + written over time, as bench/llm_ops.py
measures it), the time a step needs to read every weight once.

Beside the defaults, batch-1 decode is also timed with the L2 prefetch, with the GEMVs'
first weight tiles loaded before their wait for the previous kernel
(`Backend.gemv_early_loads`), with the
one-row GEMMs on the wgmma tiles instead of tileir.llm.gemv (`Backend.decode_gemv`),
with O's and down's split K added up by a second launch instead of the GEMV's last
blocks (`Backend.gemv_ticket`), with RoPE and the cache write in one launch
(`Backend.rope_slots`), with the norms after O and down made in those GEMVs' tail
instead of launched (`Backend.gemv_norm_tail`), and with the norms before QKV and gate/up
in the GEMVs' prologue (`Backend.gemv_norm`; with --profile, the step by kernel of those
two too), and the prefill with SwiGLU in one kernel (`--fuse-norm`: with norms inside
GEMMs too).  (Without the ticket, O's and down's norms are launched as well: their tail
needs the GEMV to finish in its own launch.)

Prints a table, writes llm.json and llm.png into --out and, with --results-md,
appends a dated entry to that file.

Tensor parallelism (`--tp N`, one process a GPU under torchrun, multicast off):

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        torchrun --standalone --nproc-per-node 2 bench/llm.py --tp 2 [--quick]

Llama-3-8B-shaped and a DeepSeek-V3-shaped model too big for one GPU (14 layers, 128
routed experts: about 158 GB of bf16 weights), random bf16 weights made on each GPU
for its share (`RandomCheckpoint`): batch-1 and batch-64 decode tokens/s and a 2048-token
prefill at TP=N, against TP=1 on one of the GPUs (where the model fits) and against the
N GPUs' weight-streaming bound (the most weight bytes a rank holds over one GPU's
measured copy bandwidth).  Writes llm_tp.json (and the RESULTS entry) from rank 0.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_ops import copy_bandwidth  # noqa: E402

import transformers  # noqa: E402

from tileir.llm import LLM, SamplingParams  # noqa: E402
from tileir.llm import checkpoint  # noqa: E402
from tileir.llm.loader import DictCheckpoint  # noqa: E402

MODELS = checkpoint.SHAPED
PROMPT, NEW, PREFILL = 128, 128, 2048


def sync():
    torch.cuda.synchronize()


def hf_model(raw, model_dir):
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(raw, f)
    config = transformers.AutoConfig.from_pretrained(model_dir)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return model.to(torch.bfloat16).eval()


def weight_bytes(model) -> int:
    """Every parameter's bytes, as the issue counts them (Llama-3-8B: 16.06 GB; the
    embedding table is in the count, though a step gathers only its rows)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


# Timed runs of each decode figure (--runs): the table reports their median, the JSON
# every run (`timed_runs_s`, by figure), so one slow or fast run does not decide a
# ratio; tileir's and transformers' figures take the same count.
TIMED_RUNS = 3
RUNS: dict = {}          # figure key -> every timed run's seconds (filled by `median_s`)


def median_s(key: str, times: list[float]) -> float:
    RUNS[key] = times
    return float(np.median(times))


def runs_of(model: str) -> dict:
    """Every timed run of the model's decode figures, seconds, by figure."""
    return {k.split("/", 1)[1]: v for k, v in RUNS.items() if k.startswith(model + "/")}


def hf_generate_s(model, ids, new, key, **kw) -> float:
    with torch.no_grad():
        mask = torch.ones_like(ids)
        for n in (1, new):              # warm-up / compile at both timed lengths (a static
            model.generate(ids, attention_mask=mask, do_sample=False,      # cache's size
                           max_new_tokens=n, min_new_tokens=n, **kw)       # is the length)
        runs = []
        for _ in range(TIMED_RUNS):
            times = []
            for n in (1, new):
                sync()
                t0 = time.perf_counter()
                model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=n,
                               min_new_tokens=n, **kw)
                sync()
                times.append(time.perf_counter() - t0)
            runs.append(times[1] - times[0])                         # the decode steps alone
    return median_s(key, runs)


def hf_prefill_ms(model, ids) -> float:
    with torch.no_grad():
        for _ in range(2):
            model(ids, logits_to_keep=1)
        sync()
        t0 = time.perf_counter()
        for _ in range(5):
            model(ids, logits_to_keep=1)
        sync()
    return (time.perf_counter() - t0) / 5 * 1e3


def ours_decode_s(llm, prompts, new, key) -> float:
    eng = llm.engine
    # warm-up at the timed lengths: every kernel compiled and every decode graph captured
    # (one a batch size and block-table width) before the timed runs
    for p in prompts:
        eng.add_request(p, SamplingParams(max_new_tokens=new, ignore_eos=True))
    while eng.has_work():
        eng.step()
    runs = []
    for _ in range(TIMED_RUNS):
        for p in prompts:
            eng.add_request(p, SamplingParams(max_new_tokens=new, ignore_eos=True))
        eng.step()                                          # prefill (not timed)
        sync()
        t0 = time.perf_counter()
        while eng.has_work():
            eng.step()
        sync()
        runs.append(time.perf_counter() - t0)
    return median_s(key, runs)


def ours_prefill_ms(llm, prompt) -> float:
    eng = llm.engine
    for i in range(3):
        eng.add_request(prompt, SamplingParams(max_new_tokens=1, ignore_eos=True))
        sync()
        t0 = time.perf_counter()
        eng.step()
        sync()
        if i == 2:
            return (time.perf_counter() - t0) * 1e3


def bench_model(name, raw, args, copy_tbs):
    rng = np.random.default_rng(0)
    res = {"model": name}
    with tempfile.TemporaryDirectory() as d:
        model = hf_model(raw, d)
        wbytes = weight_bytes(model)
        bound_step_s = wbytes / (copy_tbs * 1e12)        # as the issue: 16.06 GB / 4.23 TB/s
        res.update(weight_gb=wbytes / 1e9, bound_tok_s=1 / bound_step_s)
        new = 16 if args.quick else NEW
        batches = (1,) if args.quick else (1, 64)
        prompts = {b: [rng.integers(0, raw["vocab_size"], PROMPT).tolist() for _ in range(b)]
                   for b in batches}
        long = rng.integers(0, raw["vocab_size"], 512 if args.quick else PREFILL).tolist()
        # transformers first, then tileir.llm on the same tensors
        for b in batches:
            ids = torch.tensor(prompts[b], device="cuda")
            res[f"hf_eager_b{b}_tok_s"] = b * (new - 1) / hf_generate_s(
                model, ids, new, f"{name}/hf_eager_b{b}")
        res["hf_eager_prefill_ms"] = hf_prefill_ms(model, torch.tensor([long], device="cuda"))
        if not args.no_compile:
            try:
                # transformers' own route: with a static cache, generate compiles the
                # decoding forward itself (compile_config; CUDA graphs by reduce-overhead).
                # Compiling model.forward by hand under generate fails in transformers 5
                # ("accessing tensor output of CUDAGraphs that has been overwritten").
                from transformers import CompileConfig
                model.generation_config.compile_config = CompileConfig(
                    fullgraph=True, mode="reduce-overhead")
                for b in batches:
                    ids = torch.tensor(prompts[b], device="cuda")
                    res[f"hf_compile_b{b}_tok_s"] = b * (new - 1) / hf_generate_s(
                        model, ids, new, f"{name}/hf_compile_b{b}",
                        cache_implementation="static")
            except Exception as e:                      # report, keep the rest of the run
                res["hf_compile_error"] = f"{type(e).__name__}: {e}"[:300]
        sd = dict(model.state_dict())
        try:
            llm = LLM(d, dtype="bfloat16", weights=DictCheckpoint(sd), max_batch=max(batches),
                      max_model_len=4096, num_pages=max(batches) * 24 + 160)
        except Exception as e:
            res["tileir_error"] = f"{type(e).__name__}: {e}"[:300]
            return res
        try:
            for b in batches:
                res[f"tileir_b{b}_tok_s"] = b * (new - 1) / ours_decode_s(
                    llm, prompts[b], new, f"{name}/tileir_b{b}")
            res["tileir_cuda_graphs"] = bool(llm.engine.graphs)
            res["tileir_prefill_ms"] = ours_prefill_ms(llm, long)
            # the prompt's SwiGLU in one two-accumulator kernel (by default two GEMMs
            # and silu_mul: Backend.split_swiglu_rows)
            split, llm.backend.split_swiglu_rows = llm.backend.split_swiglu_rows, None
            res["tileir_prefill_fused_swiglu_ms"] = ours_prefill_ms(llm, long)
            llm.backend.split_swiglu_rows = split
            res["tileir_b1_vs_bound"] = res["tileir_b1_tok_s"] / res["bound_tok_s"]
            if args.profile:
                res["profile_b1"] = profile_decode(llm, prompts[1], copy_tbs)
            for key, _, attr, value, profile in B1_ALTERNATIVES:
                if attr is None or (args.alternatives is not None
                                    and attr not in args.alternatives):
                    continue
                default = getattr(llm.backend, attr)
                setattr(llm.backend, attr, value)
                llm.engine.graphs.clear()
                try:
                    res[key] = (new - 1) / ours_decode_s(llm, prompts[1], new,
                                                         f"{name}/{key}")
                    if profile and args.profile:
                        res[profile] = profile_decode(llm, prompts[1], copy_tbs)
                finally:
                    setattr(llm.backend, attr, default)
                    llm.engine.graphs.clear()
            if args.fuse_norm:
                # the same with each RMSNorm inside the GEMM that reads it (fuse_norm)
                llm.backend.fuse_norm = True
                llm.engine.graphs.clear()
                res["tileir_fuse_norm_b1_tok_s"] = ((new - 1)
                                                    / ours_decode_s(llm, prompts[1], new,
                                                                    f"{name}/fuse_norm_b1"))
                res["tileir_fuse_norm_prefill_ms"] = ours_prefill_ms(llm, long)
        except Exception as e:                          # report, keep the rest of the run
            res["tileir_error"] = f"{type(e).__name__}: {e}"[:300]
        del llm, model, sd
        gc.collect()
        torch.cuda.empty_cache()
    return res


def _nbytes(t) -> int:
    return t.numel() * t.element_size()


# the decode step's GEMM weights by layer key, with the kernel that streams them
GEMM_KERNELS = (("qkv", "linear"), ("a", "linear"), ("q_b", "linear"), ("q", "linear"),
                ("o", "linear_add"), ("down", "linear_add"), ("sdown", "linear_add"),
                ("gate", "linear_swiglu"), ("up", "linear_swiglu"),
                ("sgate", "linear_swiglu"), ("sup", "linear_swiglu"))
GEMV_OF = {"linear": "gemv", "linear_add": "gemv_add", "linear_swiglu": "gemv_swiglu"}


def gemm_weight_bytes(llm) -> dict:
    """Weight bytes each GEMM kernel streams in one batch-1 decode step, by kernel name:
    with `decode_gemv`, the one-row shapes gemv.SWEPT takes under the GEMVs' names (the
    LM head keeps its GEMM kernel; O and down, a norm after each, gemv_add_norm with
    `gemv_norm_tail` where their blocks hold a row; Llama's QKV gemv_qkv_rope with
    `qkv_rope`)."""
    from tileir.llm import gemv as G
    be = llm.backend
    out = {"linear": _nbytes(llm.model.lm_head)}
    for layer in llm.model.layers:
        for key, kernel in GEMM_KERNELS:
            if key in layer:
                w = layer[key]
                if be.decode_gemv and tuple(w.shape) in G.SWEPT:
                    kernel = GEMV_OF[kernel]
                    if (kernel == "gemv_add" and key != "sdown" and be.gemv_norm_tail
                            and G.norm_tail_fits(w.shape[0], G.SWEPT[tuple(w.shape)],
                                                 be.wgmma)):
                        kernel = "gemv_add_norm"
                    if key == "qkv" and be.qkv_rope and G.qkv_rope_fits(
                            llm.cfg.head_dim, G.SWEPT[tuple(w.shape)]):
                        kernel = "gemv_qkv_rope"
                out[kernel] = out.get(kernel, 0) + _nbytes(w)
    return out


def profile_decode(llm, prompts, copy_tbs, steps=16) -> list:
    """Each kernel's share of a decode step (CUPTI's kernel times over `steps` steps of
    the batch), and for the GEMMs their weight bytes over their time against the copy
    bandwidth.  The last row, kernel "(timeline)", is the device's time line of those
    steps (`timeline`)."""
    from torch.profiler import ProfilerActivity, profile
    eng = llm.engine
    for p in prompts:
        eng.add_request(p, SamplingParams(max_new_tokens=steps + 1, ignore_eos=True))
    eng.step()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        while eng.has_work():
            eng.step()
        sync()
    times = {}
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0)
        if us > 0:
            t = times.setdefault(e.key, [0.0, 0])
            t[0] += us
            t[1] += e.count
    total = sum(t for t, _ in times.values())
    wbytes = gemm_weight_bytes(llm)
    rows = []
    for name, (us, n) in sorted(times.items(), key=lambda kv: -kv[1][0]):
        row = {"kernel": name, "us_per_step": us / steps, "launches_per_step": n / steps,
               "share": us / total}
        if name in wbytes and wbytes[name]:
            row["x_copy"] = wbytes[name] / (us / steps * 1e-6) / (copy_tbs * 1e12)
        rows.append(row)
    rows.append({"kernel": "(timeline)", **timeline(prof, steps)})
    return rows


def timeline(prof, steps) -> dict:
    """Where a step's time goes on the device: from the first kernel's start to the
    last one's end (span), the time some kernel runs (busy: the union of the kernels'
    intervals), the time none does (idle: launch gaps, the host), and the kernels'
    summed durations (above busy where programmatic launches overlap a kernel's wait
    with the one before), each a step."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type.name == "CUDA" and e.time_range.end > e.time_range.start)
    if not spans:
        return {}
    busy, (lo, hi) = 0.0, spans[0]
    for a, b in spans[1:]:
        if a > hi:
            busy, lo, hi = busy + hi - lo, a, b
        else:
            hi = max(hi, b)
    busy += hi - lo
    span = max(b for _, b in spans) - spans[0][0]
    return {"span_us_per_step": span / steps, "busy_us_per_step": busy / steps,
            "idle_us_per_step": (span - busy) / steps,
            "kernel_us_per_step": sum(b - a for a, b in spans) / steps}


def profile_table(rows) -> str:
    lines = ["| kernel | us / step | launches / step | share | weights x copy |",
             "|---|---|---|---|---|"]
    line = next((p for p in rows if p["kernel"] == "(timeline)"), None)
    rows = [p for p in rows if p is not line]
    for p in rows[:25]:
        xc = f"{p['x_copy']:.2f}" if "x_copy" in p else ""
        lines.append(f"| {p['kernel'][:60]} | {p['us_per_step']:.1f} | "
                     f"{p['launches_per_step']:.0f} | {p['share']:.1%} | {xc} |")
    if line and "span_us_per_step" in line:
        lines.append(f"\nA step on the device: {line['span_us_per_step']:.1f} us from the first "
                     f"kernel's start to the last one's end, {line['busy_us_per_step']:.1f} us "
                     f"with a kernel running, {line['idle_us_per_step']:.1f} us with none; the "
                     f"kernels' durations add up to {line['kernel_us_per_step']:.1f} us.")
    return "\n".join(lines)


# batch-1 decode beside the defaults, in the table's order: (result key, what differs,
# the Backend attribute set for the row and its value there, the key of the row's
# decode step by kernel with --profile).  Defaults: Backend's docstrings.
B1_ALTERNATIVES = (
    # the decode GEMMs' first weight tiles prefetched into L2 before the wait for the
    # previous kernel (off by default since 2026-11-29: bench/RESULTS.md)
    ("tileir_l2_prefetch_b1_tok_s", "first weight tiles prefetched into L2", "l2_prefetch",
     True, "profile_l2_prefetch_b1"),
    # the GEMVs' weight tiles all loaded after the wait for the previous kernel (by
    # default the first ones start into their rings before it: `early_loads`)
    ("tileir_no_gemv_early_loads_b1_tok_s", "weight tiles after the wait",
     "gemv_early_loads", False, "profile_no_gemv_early_loads_b1"),
    # the candidates gemv.ROUTED names (deeper rings with early loads), not the swept plans
    ("tileir_gemv_routed_b1_tok_s", "routed candidates (down, O)", "gemv_routed", True,
     None),
    # the one-row GEMMs on the wgmma tiles, not tileir.llm.gemv's GEMVs
    ("tileir_no_decode_gemv_b1_tok_s", "one-row GEMMs on wgmma tiles", "decode_gemv",
     False, None),
    # O's and down's split K added up by the combine kernel's second launch, not by the
    # GEMV's last block (its ticket)
    ("tileir_gemv_combine_b1_tok_s", "split GEMVs with a combine launch", "gemv_ticket",
     False, None),
    # RoPE and the K/V cache write in one launch (rope_write_slots), not two
    ("tileir_rope_slots_b1_tok_s", "RoPE and the cache write in one launch", "rope_slots",
     True, None),
    # Llama's decode QKV as the GEMV, then rope and write_slots: two launches a layer
    # more than the default (gemv_qkv_rope: RoPE and the K/V cache write in its epilogue)
    ("tileir_no_qkv_rope_b1_tok_s", "RoPE and the cache write after the QKV GEMV",
     "qkv_rope", False, "profile_no_qkv_rope_b1"),
    # paged decode attention reading its lengths and first page numbers before its wait
    # for the QKV GEMV (`tables_early`), not after it
    ("tileir_decode_tables_early_b1_tok_s", "decode attention's tables read before its wait",
     "decode_tables_early", True, None),
    # the norms after O + residual and down + residual in those GEMVs' tail, not launched
    ("tileir_norm_tail_b1_tok_s", "norms after O and down in their tail, not launched",
     "gemv_norm_tail", True, "profile_norm_tail_b1"),
    # the norms before QKV and gate/up in the one-row GEMVs' prologue; the LM head keeps
    # its wgmma kernel, so the final norm stays
    ("tileir_gemv_norm_b1_tok_s", "norms in the GEMVs' prologue", "gemv_norm", True,
     "profile_gemv_norm_b1"),
    # --fuse-norm: each RMSNorm inside the GEMM that reads it (timed with the prefill)
    ("tileir_fuse_norm_b1_tok_s", "norms fused into GEMMs", None, None, None),
)


def table(results) -> str:
    lines = ["| model | case | tileir.llm | transformers eager | transformers compile | "
             "tileir / compile | tileir / bound |", "|---|---|---|---|---|---|---|"]
    for r in results:
        if "tileir_error" in r:
            lines.append(f"| {r['model']} | - | {r['tileir_error']} | | | | |")
        if "hf_compile_error" in r:
            lines.append(f"| {r['model']} | - | | | {r['hf_compile_error']} | | |")
        for b in (1, 64):
            if f"hf_eager_b{b}_tok_s" not in r:
                continue
            ours, comp = r.get(f"tileir_b{b}_tok_s"), r.get(f"hf_compile_b{b}_tok_s")
            bound = f"{ours / r['bound_tok_s']:.2f}" if ours and b == 1 else ""
            lines.append(
                f"| {r['model']} | decode b{b} (tok/s) | {ours or 0:.1f} | "
                f"{r[f'hf_eager_b{b}_tok_s']:.1f} | {comp or 0:.1f} | "
                f"{(ours / comp) if ours and comp else 0:.2f} | {bound} |")
        if "hf_eager_prefill_ms" in r:
            ours = r.get("tileir_prefill_ms")
            lines.append(f"| {r['model']} | prefill (ms) | {ours or 0:.1f} | "
                         f"{r['hf_eager_prefill_ms']:.1f} | | "
                         f"{(r['hf_eager_prefill_ms'] / ours) if ours else 0:.2f} (vs eager) | |")
        if "tileir_prefill_fused_swiglu_ms" in r:
            lines.append(f"| {r['model']} | prefill, SwiGLU in one kernel (ms) | "
                         f"{r['tileir_prefill_fused_swiglu_ms']:.1f} | | | "
                         f"{r['hf_eager_prefill_ms'] / r['tileir_prefill_fused_swiglu_ms']:.2f} "
                         f"(vs eager) | |")
        for key, case, *_ in B1_ALTERNATIVES:
            if key in r:
                lines.append(f"| {r['model']} | decode b1, {case} (tok/s) | {r[key]:.1f} "
                             f"| | | | {r[key] / r['bound_tok_s']:.2f} |")
        lines.append(f"| {r['model']} | bound b1 (tok/s) | {r['bound_tok_s']:.1f} "
                     f"({r['weight_gb']:.2f} GB) | | | | |")
    return "\n".join(lines)


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    for ax, r in zip(axes[0], results):
        labels, vals = [], []
        for key, label in (("tileir_b1_tok_s", "tileir b1"), ("hf_eager_b1_tok_s", "hf eager b1"),
                           ("hf_compile_b1_tok_s", "hf compile b1"), ("bound_tok_s", "bound b1")):
            if key in r:
                labels.append(label)
                vals.append(r[key])
        ax.bar(labels, vals)
        ax.set_title(r["model"])
        ax.set_ylabel("decode tokens / s")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# ----------------------------------------------------------------------------- --tp N

TP_MODELS = {
    "llama3-8b": (checkpoint.shaped("llama3-8b"), True),
    # too big for one H200 at bf16 (~158 GB); ~79 GB a rank at TP=2
    "deepseek-v3-14l-128e": (checkpoint.shaped("deepseek-v3-small", num_hidden_layers=14,
                                               n_routed_experts=128), False),
}


class RandomCheckpoint:
    """Random bf16 weights made on demand on this process's GPU, each from a seed of its
    name, so every rank draws the same tensor and makes only those it asks for (its
    experts); no file, no host copy.  Drawn as checkpoint.random_weights draws them."""

    def __init__(self, raw, seed=0):
        from tileir.llm import config
        self.shapes = checkpoint._names(config.from_dict(raw), raw)
        self.std, self.seed = raw.get("initializer_range", 0.02), seed

    def __contains__(self, name):
        return name in self.shapes

    def names(self):
        return self.shapes.keys()

    def get(self, name):
        import zlib
        gen = torch.Generator(device="cuda").manual_seed(self.seed * 1_000_003
                                                         + zlib.crc32(name.encode()))
        w = torch.randn(self.shapes[name], generator=gen, device="cuda", dtype=torch.bfloat16)
        if name.endswith("norm.weight"):
            return w.mul_(0.1).add_(1.0)
        return w.mul_(0.1 if name.endswith("e_score_correction_bias") else self.std)


def model_bytes(llm, token: bool = False) -> int:
    """The weight bytes this rank holds (each array once), as the single-GPU bound counts
    them (every weight, the embedding table too), less DeepSeek's whole kv_b: decode
    reads it as W_UK and W_UV, which are counted.  token: what one token's step reads
    (batch 1): of the routed experts only the top_k / n_routed_experts share a token is
    routed to, spread evenly over the ranks."""
    m, seen, total = llm.model, set(), 0
    share = (llm.cfg.num_experts_per_tok / llm.cfg.n_routed_experts
             if token and getattr(llm.cfg, "n_routed_experts", 0) else 1.0)
    for layer in [{"embed": m.embed, "lm_head": m.lm_head, "norm": m.norm}] + m.layers:
        for k, a in layer.items():
            if k == "kv_b" or id(a) in seen or not isinstance(a, torch.Tensor):
                continue
            seen.add(id(a))
            total += _nbytes(a) * (share if k in ("w_gate_up", "w_down") else 1.0)
    return int(total)


def bench_tp_model(name, raw, fits_one, args, copy_tbs, shard, host_group):
    import torch.distributed as dist
    rng = np.random.default_rng(0)
    new = 16 if args.quick else NEW
    batches = (1,) if args.quick else (1, 64)
    prompts = {b: [rng.integers(0, raw["vocab_size"], PROMPT).tolist() for _ in range(b)]
               for b in batches}
    long = rng.integers(0, raw["vocab_size"], 512 if args.quick else PREFILL).tolist()
    res = {"model": name, "tp": shard.size}
    kw = dict(dtype="bfloat16", weights=RandomCheckpoint(raw), max_batch=max(batches),
              max_model_len=4096, num_pages=max(batches) * 24 + 160,
              cuda_graphs=not args.no_cuda_graphs)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(raw, f)

        def decode_and_prefill(llm, key):
            for b in batches:
                res[f"{key}_b{b}_tok_s"] = b * (new - 1) / ours_decode_s(
                    llm, prompts[b], new, f"{name}/{key}_b{b}")
            res[f"{key}_prefill_ms"] = ours_prefill_ms(llm, long)
            res[f"{key}_cuda_graphs"] = bool(llm.engine.graphs)

        if fits_one and not args.no_tp1:          # TP=1 on rank 0's GPU, the others wait
            if shard.rank == 0:
                try:
                    llm = LLM(d, **kw)
                    res["tp1_weight_gb"] = model_bytes(llm) / 1e9
                    decode_and_prefill(llm, "tp1")
                    del llm
                except Exception as e:
                    res["tp1_error"] = f"{type(e).__name__}: {e}"[:300]
                gc.collect()
                torch.cuda.empty_cache()
            dist.barrier(group=host_group)
        try:
            llm = LLM(d, tensor_parallel_size=shard.size, **kw)
            rank_bytes = torch.tensor([model_bytes(llm), model_bytes(llm, token=True)],
                                      device="cuda", dtype=torch.float64)
            dist.all_reduce(rank_bytes, op=dist.ReduceOp.MAX)
            res["rank_weight_gb"] = rank_bytes[0].item() / 1e9
            res["rank_token_gb"] = rank_bytes[1].item() / 1e9     # read by a batch-1 step
            res["bound_tok_s"] = copy_tbs * 1e12 / rank_bytes[1].item()
            decode_and_prefill(llm, "tp")
            res["tp_peer_all_reduce"] = llm.model.shard.peer is not None
            if res["tp_peer_all_reduce"]:     # batch 1 again with every all-reduce NCCL's
                llm.model.shard.use_peer(False)
                llm.engine.graphs.clear()
                res["tp_nccl_b1_tok_s"] = (new - 1) / ours_decode_s(llm, prompts[1], new,
                                                                    f"{name}/tp_nccl_b1")
                llm.model.shard.use_peer(True)
            res["tp_b1_vs_bound"] = res["tp_b1_tok_s"] / res["bound_tok_s"]
            for b in batches:
                if f"tp1_b{b}_tok_s" in res:
                    res[f"speedup_b{b}"] = res[f"tp_b{b}_tok_s"] / res[f"tp1_b{b}_tok_s"]
            del llm
        except Exception as e:
            res["tp_error"] = f"{type(e).__name__}: {e}"[:300]
        gc.collect()
        torch.cuda.empty_cache()
    return res


def _fmt(x, spec=".1f", none=""):
    return none if x is None else format(x, spec)


def tp_table(results) -> str:
    lines = ["| model | case | TP=N | TP=1 | speedup | TP=N / bound |",
             "|---|---|---|---|---|---|"]
    for r in results:
        n, model = r["tp"], r["model"]
        for err in ("tp1_error", "tp_error"):
            if err in r:
                lines.append(f"| {model} | {err} | {r[err]} | | | |")
        for b in (1, 64):
            ours = r.get(f"tp_b{b}_tok_s")
            if ours is None:
                continue
            one = r.get(f"tp1_b{b}_tok_s")
            bound = _fmt(ours / r["bound_tok_s"], ".2f") if b == 1 else ""
            lines.append(f"| {model} | decode b{b} (tok/s), TP={n} | {ours:.1f} | "
                         f"{_fmt(one, none='does not fit')} | "
                         f"{_fmt(ours / one if one else None, '.2f')} | {bound} |")
        if "tp_nccl_b1_tok_s" in r:
            ours, one = r["tp_nccl_b1_tok_s"], r.get("tp1_b1_tok_s")
            lines.append(f"| {model} | decode b1, NCCL all-reduces (tok/s), TP={n} | "
                         f"{ours:.1f} | {_fmt(one, none='does not fit')} | "
                         f"{_fmt(ours / one if one else None, '.2f')} | "
                         f"{ours / r['bound_tok_s']:.2f} |")
        if "tp_prefill_ms" in r:
            ours, one = r["tp_prefill_ms"], r.get("tp1_prefill_ms")
            lines.append(f"| {model} | prefill (ms), TP={n} | {ours:.1f} | {_fmt(one)} | "
                         f"{_fmt(one / ours if one else None, '.2f')} | |")
        if "bound_tok_s" in r:
            lines.append(f"| {model} | bound b1 (tok/s), TP={n} | {r['bound_tok_s']:.1f} "
                         f"({r.get('rank_token_gb', r['rank_weight_gb']):.2f} GB a token "
                         f"reads, of {r['rank_weight_gb']:.2f} GB a rank) | | | |")
    return "\n".join(lines)


def main_tp(args):
    import torch.distributed as dist
    from tileir.llm import parallel
    # the peer all-reduce (opt-in in the app) timed, and batch 1 again without it
    os.environ.setdefault("TILEIR_PEER_REDUCE", "1")
    shard = parallel.init("cuda", args.tp)        # multicast off, NCCL, this rank's GPU
    host_group = dist.new_group(backend="gloo")    # waits on the host (TP=1 on rank 0)
    device = torch.cuda.get_device_name()
    copy_tbs = copy_bandwidth()
    first = shard.rank == 0
    if first:
        print(f"{args.tp} x {device}; copy bandwidth {copy_tbs:.2f} TB/s a GPU (read + "
              f"write)", flush=True)
    os.makedirs(args.out, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    results = []
    names = args.models.split(",") if args.models else list(TP_MODELS)
    unknown = [n for n in names if n not in TP_MODELS]
    if unknown:
        sys.exit(f"--tp models are {', '.join(TP_MODELS)}; not {', '.join(unknown)}")
    for name in names:
        raw, fits_one = TP_MODELS[name]
        results.append(bench_tp_model(name, copy.deepcopy(raw), fits_one, args, copy_tbs,
                                      shard, host_group))
        results[-1]["timed_runs_s"] = runs_of(name)
        if first:
            print(json.dumps(results[-1], indent=1), flush=True)
            with open(os.path.join(args.out, "llm_tp.json"), "w") as f:
                json.dump({"device": device, "tp": args.tp, "date": stamp,
                           "copy_tbs": copy_tbs, "torch": torch.__version__,
                           "results": results}, f, indent=1)
    if first:
        text = tp_table(results)
        print(text)
        if args.results_md:
            with open(args.results_md, "a") as f:
                f.write(f"\n## tileir.llm tensor parallelism — {args.tp} x {device}, {stamp}\n\n"
                        f"`torchrun --nproc-per-node {args.tp} bench/llm.py --tp {args.tp}` "
                        f"(copy bandwidth {copy_tbs:.2f} TB/s a GPU, torch "
                        f"{torch.__version__}):\n\n{text}\n")
    parallel.shutdown()


def main():
    global TIMED_RUNS
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--models", default=None,
                    help=f"default: {','.join(MODELS)} (with --tp: {','.join(TP_MODELS)})")
    ap.add_argument("--quick", action="store_true", help="batch 1, 16 tokens, 512-token prefill")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--fuse-norm", action="store_true",
                    help="also time batch-1 decode and the prefill with fuse_norm (slower: "
                         "2.5x at batch 1 on an H200, 2026-11-29)")
    ap.add_argument("--results-md", default=None)
    ap.add_argument("--profile", action="store_true",
                    help="each kernel's share of a batch-1 decode step (torch.profiler)")
    ap.add_argument("--tp", type=int, default=1, metavar="N",
                    help="tensor parallelism over N GPUs (run under torchrun --nproc-per-node "
                         "N): TP=N against TP=1 and the N GPUs' bound, no transformers")
    ap.add_argument("--no-tp1", action="store_true", help="with --tp: skip the TP=1 runs")
    ap.add_argument("--no-cuda-graphs", action="store_true",
                    help="with --tp: decode eagerly (the collectives outside any graph)")
    ap.add_argument("--runs", type=int, default=TIMED_RUNS, metavar="N",
                    help=f"timed runs of each decode figure; the median is reported, every "
                         f"run is in the JSON (default {TIMED_RUNS})")
    ap.add_argument("--alternatives", default=None, metavar="ATTR,...",
                    help="time only these batch-1 alternatives, by Backend attribute (" +
                         ", ".join(a for _, _, a, _, _ in B1_ALTERNATIVES if a) +
                         "; default all, '' none)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs: at least 1")
    TIMED_RUNS = args.runs
    if args.alternatives is not None:
        args.alternatives = [a for a in args.alternatives.split(",") if a]
        unknown = set(args.alternatives) - {a for _, _, a, _, _ in B1_ALTERNATIVES}
        if unknown:
            ap.error(f"--alternatives: no such row {sorted(unknown)}")
    if args.tp > 1:
        return main_tp(args)
    args.models = args.models or ",".join(MODELS)
    os.makedirs(args.out, exist_ok=True)
    device = torch.cuda.get_device_name()
    copy_tbs = copy_bandwidth()                        # TB/s, bytes read + written
    print(f"{device}; copy bandwidth {copy_tbs:.2f} TB/s (read + write)")
    results = []
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    for name in args.models.split(","):
        results.append(bench_model(name, copy.deepcopy(MODELS[name]), args, copy_tbs))
        results[-1]["timed_runs_s"] = runs_of(name)
        print(json.dumps(results[-1], indent=1), flush=True)
        with open(os.path.join(args.out, "llm.json"), "w") as f:     # after each model
            json.dump({"device": device, "date": stamp, "copy_tbs": copy_tbs,
                       "torch": torch.__version__, "transformers": transformers.__version__,
                       "results": results}, f, indent=1)
    text = table(results)
    for r in results:
        if r.get("profile_b1"):
            text += f"\n\n{r['model']}, batch-1 decode step by kernel:\n\n" + profile_table(
                r["profile_b1"])
        for _, case, attr, _, profile in B1_ALTERNATIVES:
            if profile and r.get(profile):
                text += (f"\n\n{r['model']}, batch-1 decode step by kernel, {case} "
                         f"({attr}):\n\n" + profile_table(r[profile]))
    print(text)
    plot(results, os.path.join(args.out, "llm.png"))
    if args.results_md:
        with open(args.results_md, "a") as f:
            f.write(f"\n## tileir.llm against transformers — {device}, {stamp}\n\n"
                    f"`python bench/llm.py` (copy bandwidth {copy_tbs:.2f} TB/s, torch "
                    f"{torch.__version__}, transformers {transformers.__version__}):\n\n"
                    f"{text}\n")


if __name__ == "__main__":
    main()
