"""DeepSeek-V3 routed experts: tileir's MoE kernels against torch, in one run.

    python bench/moe.py [--out DIR] [--experts 256] [--quick]

One MoE layer at DeepSeek-V3's shapes (H 7168, I 2048 per expert, 256 experts, top 8
of 4 groups out of 8, routed scaling 2.5; random bf16 weights, 22.5 GB), routed by
`moe.route` on random tokens:

* decode, T = 1, 16, 64 tokens: experts (tileir's chosen schedule, and a few others
  beside it: VARIANTS) as GB/s of the selected experts' weights (each
  selected expert's gate/up/down once: the bytes a decode step must read) against a
  device copy's bandwidth measured in this run; against torch: a loop over the
  selected experts of torch matmuls (what transformers' DeepseekV3MoE runs), and
  torch._grouped_mm where this torch has it;
* prefill, T = 2048: TFLOP/s of the useful work (2 * T * top_k * 3 * H * I) of the
  same three, and the router's share.

Times are medians of CUDA-graph replays (`do_bench_cudagraph`: the whole step is
captured, so the kernels' launches are the graph's); torch's expert loop syncs on the
routing (`torch.where`, `.tolist()`), so it is timed with `do_bench` instead.  Prints
a table, writes moe.json and moe.png into --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import torch
from triton.testing import do_bench, do_bench_cudagraph

from tileir.examples import moe

HERE = os.path.dirname(os.path.abspath(__file__))
H, I, TOP_K = 7168, 2048, 8
ROUTING = dict(top_k=TOP_K, n_group=8, topk_group=4, routed_scaling_factor=2.5,
               norm_topk_prob=True)
# other schedules beside expert_tiles' choice (all compile without spills at these shapes)
VARIANTS = {"decode": [moe.Tiles(True, 16, 128, 64), moe.Tiles(True, 16, 64, 128),
                       moe.Tiles(False, 64, 128, 64)],
            "prefill": [moe.Tiles(False, 128, 128, 64), moe.Tiles(False, 64, 64, 64)]}


def ms_graph(fn) -> float:
    return do_bench_cudagraph(fn, rep=100, return_mode="median")


def ms_eager(fn) -> float:
    return do_bench(fn, warmup=5, rep=100, return_mode="median")


def copy_tbps() -> float:
    """A 1 GiB device copy, read + written, timed as launched (captured in a CUDA graph,
    torch's copy is a memcpy node, which measured 2.77 TB/s on the H200, not 4.2+)."""
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    return 2 * x.numel() / ms_eager(lambda: y.copy_(x)) / 1e9


# ----------------------------------------------------------------------------- torch
def torch_loop(x, ids, w, w_gate_up, w_down):
    """transformers' loop: for each selected expert, its tokens through three matmuls."""
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in torch.unique(ids).tolist():
        tok, k = torch.where(ids == e)
        h = x[tok] @ w_gate_up[e].T
        y = (torch.nn.functional.silu(h[:, :I]) * h[:, I:]) @ w_down[e].T
        out.index_add_(0, tok, y * w[tok, k].unsqueeze(1))
    return out.to(x.dtype)


def torch_grouped(x, ids, w, w_gate_up, w_down):
    """torch._grouped_mm over the tokens sorted by expert (no host synchronization)."""
    e = w_gate_up.shape[0]
    order = torch.argsort(ids.reshape(-1), stable=True)
    counts = torch.zeros(e, dtype=torch.int32, device=x.device).index_add_(
        0, ids.reshape(-1), torch.ones_like(ids.reshape(-1)))
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    xs = x[order // TOP_K]
    h = torch._grouped_mm(xs, w_gate_up.transpose(-2, -1), offs=offs)
    y = torch._grouped_mm(torch.nn.functional.silu(h[:, :I]) * h[:, I:],
                          w_down.transpose(-2, -1), offs=offs)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    out.index_add_(0, order // TOP_K, y.float() * w.reshape(-1)[order].unsqueeze(1))
    return out.to(x.dtype)


# ----------------------------------------------------------------------------- runs
def rel_err(out, ref) -> float:
    if out.isnan().any():
        return float("nan")
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def measure(t, layer, copy, variants: bool) -> dict:
    gate, bias, w_gate_up, w_down = layer
    x = torch.randn(t, H, device="cuda").bfloat16()
    ids, w = moe.route(x, gate, bias, **ROUTING)
    selected = torch.unique(ids).numel()
    weight_bytes = selected * 3 * H * I * 2
    flop = 2 * t * TOP_K * 3 * H * I
    ref = torch_loop(x, ids, w, w_gate_up, w_down)
    row = {"T": t, "experts_selected": selected, "weight_GB": weight_bytes / 1e9,
           "ms": {}, "rel_err": {}}

    def tileir_experts(tiles=None):
        out = torch.empty_like(x)

        def fn():
            moe._launch_all(moe.plan_experts(x, ids, w, w_gate_up, w_down, out, tiles)[0])
        return fn, out

    chosen = moe.expert_tiles(t * TOP_K, w_gate_up.shape[0], True)
    row["schedule"] = _tiles_name(chosen)
    tries = [("tileir", chosen)] + [(f"tileir {_tiles_name(v)}", v) for v in
                                     (VARIANTS["decode" if chosen.decode else "prefill"]
                                      if variants else [])]
    for name, tiles in tries:
        try:
            fn, out = tileir_experts(tiles)
            fn()
            row["rel_err"][name] = rel_err(out, ref)
            row["ms"][name] = ms_graph(fn)
        except Exception as e:                  # noqa: BLE001 (reported, not hidden)
            row.setdefault("errors", {})[name] = f"{type(e).__name__}: {str(e)[:300]}"
    row["ms"]["tileir route"] = ms_graph(lambda: moe.route(x, gate, bias, **ROUTING))

    def step():
        moe.experts(x, *moe.route(x, gate, bias, **ROUTING), w_gate_up, w_down)
    row["ms"]["tileir route+experts"] = ms_graph(step)
    row["ms"]["torch loop"] = ms_eager(lambda: torch_loop(x, ids, w, w_gate_up, w_down))
    if hasattr(torch, "_grouped_mm"):
        try:
            row["rel_err"]["torch grouped_mm"] = rel_err(
                torch_grouped(x, ids, w, w_gate_up, w_down), ref)
            fn = lambda: torch_grouped(x, ids, w, w_gate_up, w_down)  # noqa: E731
            try:
                row["ms"]["torch grouped_mm"] = ms_graph(fn)
            except Exception:                   # noqa: BLE001 (not capturable: eager)
                row["ms"]["torch grouped_mm"] = ms_eager(fn)
        except Exception as e:                  # noqa: BLE001 (reported, not hidden)
            row["torch grouped_mm error"] = f"{type(e).__name__}: {str(e)[:300]}"
    experts_only = {k: v for k, v in row["ms"].items() if not k.startswith("tileir route")}
    row["weight GB/s"] = {k: weight_bytes / v / 1e6 for k, v in experts_only.items()}
    row["x copy"] = {k: v / (copy * 1e3) for k, v in row["weight GB/s"].items()}
    row["TFLOP/s"] = {k: flop / v / 1e9 for k, v in experts_only.items()}
    return row


def _tiles_name(tiles) -> str:
    kind = "decode" if tiles.decode else "prefill"
    return f"{kind} {tiles.bm}x{tiles.bn}x{tiles.bk}"


def table(rows, metric, title) -> str:
    cols = list(dict.fromkeys(c for r in rows for c in r[metric]))
    head = f"{'T':>6} {'experts':>8} " + " ".join(f"{c:>26}" for c in cols)
    lines = [title, head, "-" * len(head)]
    for r in rows:
        cells = [("-" if c not in r[metric] else f"{r[metric][c]:9.1f}" +
                  (f" ({r['x copy'][c]:4.2f}x copy)" if metric == "weight GB/s" else ""))
                 for c in cols]
        lines.append(f"{r['T']:>6} {r['experts_selected']:>8} " +
                     " ".join(f"{c:>26}" for c in cells))
    lines.append("route alone, route + experts (ms): " + ", ".join(
        f"T={r['T']}: {r['ms']['tileir route']:.3f}, {r['ms']['tileir route+experts']:.3f}"
        for r in rows))
    lines += [f"T={r['T']}: torch grouped_mm failed: {r['torch grouped_mm error']}"
              for r in rows if "torch grouped_mm error" in r]
    lines += [f"T={r['T']}: {k} failed: {v}" for r in rows for k, v in r.get("errors", {}).items()]
    lines.append("tileir's schedule: " + ", ".join(f"T={r['T']}: {r['schedule']}" for r in rows))
    lines.append("rel err vs the torch loop: " + "; ".join(
        f"T={r['T']}: " + ", ".join(f"{k} {v:.1e}" for k, v in r["rel_err"].items())
        for r in rows))
    return "\n".join(lines)


def plot(decode, prefill, copy, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5))
    for ax, rows, metric in ((a, decode, "weight GB/s"), (b, prefill, "TFLOP/s")):
        if not rows:
            continue
        cols = list(dict.fromkeys(c for r in rows for c in r[metric]))
        width = 0.8 / len(cols)
        for i, c in enumerate(cols):
            ax.bar([x + i * width for x in range(len(rows))],
                   [r[metric].get(c, 0) for r in rows], width, label=c)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))])
        ax.set_xticklabels([f"T={r['T']}" for r in rows])
        ax.set_ylabel(metric)
        ax.legend(fontsize=7)
    if decode:
        a.axhline(copy * 1e3, color="k", linestyle="--", linewidth=1)
        a.set_title(f"decode: expert weights read (dashed: copy {copy:.2f} TB/s)")
    b.set_title("prefill: useful TFLOP/s")
    fig.suptitle(f"DeepSeek-V3 routed experts on {torch.cuda.get_device_name()}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--experts", type=int, default=256, help="experts (256: 22.5 GB of weights)")
    p.add_argument("--quick", action="store_true", help="T = 1 and 2048 only")
    p.add_argument("--no-variants", action="store_true",
                   help="only expert_tiles' schedule (not the VARIANTS beside it)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    device = torch.cuda.get_device_name()
    copy = copy_tbps()
    print(f"{device}: device copy {copy:.2f} TB/s")
    e = args.experts
    layer = ((torch.randn(e, H, device="cuda") / H ** 0.5).bfloat16(),
             torch.randn(e, device="cuda") * 0.01,
             torch.randn(e, 2 * I, H, device="cuda", dtype=torch.bfloat16).div_(H ** 0.5),
             torch.randn(e, H, I, device="cuda", dtype=torch.bfloat16).div_(I ** 0.5))
    result = {"device": device, "date": datetime.date.today().isoformat(), "copy_TBps": copy,
              "torch": torch.__version__, "experts": e, "H": H, "I": I, "top_k": TOP_K,
              "decode": [], "prefill": []}
    for t in ([1] if args.quick else [1, 16, 64]):
        result["decode"].append(measure(t, layer, copy, not args.no_variants))
        print(f"  decode T={t}: " + ", ".join(f"{k} {v:.0f} GB/s"
                                              for k, v in result["decode"][-1]
                                              ["weight GB/s"].items()), flush=True)
    result["prefill"].append(measure(2048, layer, copy, not args.no_variants))
    print(table(result["decode"], "weight GB/s", "[decode] expert weights GB/s (x copy)"))
    print(table(result["prefill"], "TFLOP/s", "[prefill] useful TFLOP/s"))
    with open(os.path.join(args.out, "moe.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    plot(result["decode"], result["prefill"], copy, os.path.join(args.out, "moe.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
