"""The element-wise and row ops of LLM layers: tileir against torch eager, torch.compile
and a device copy, at prefill and decode sizes.

    python bench/llm_ops.py [--out DIR] [--rows 8192,64,16,1] [--ops rmsnorm,...] [--quick]

Ops (kernels in tileir/examples, written the plain way): RMSNorm, residual add +
RMSNorm, SwiGLU (silu(gate) * up), RoPE, LayerNorm at the hidden / intermediate
widths of Llama-3-8B, Llama-3-70B and DeepSeek-V3; softmax and log-sum-exp over a
128256-wide vocabulary row.  bf16 tensors, f32 math.

Each figure is taken in this run: GPU time from CUDA-graph replay (triton's
do_bench_cudagraph, median), turned into bandwidth from the bytes the op must move
(every input read once, every output written once) and divided by the bandwidth of
the best of three large device-to-device copies measured at the start of the run (`x copy`: at decode
sizes a launch's latency, not bandwidth, bounds every candidate); `vs compile` is
torch.compile's time over ours (> 1: we are faster).  Prints a table, writes
llm_ops.json and llm_ops.png into --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench_cudagraph

import tileir as ct
from tileir.examples import layernorm, llm_ops, next_pow2, rmsnorm

DT = torch.bfloat16
EPS = 1e-6
VOCAB = 128256
MODELS = {"llama3-8b": (4096, 14336, 32, 128), "llama3-70b": (8192, 28672, 64, 128),
          "deepseek-v3": (7168, 18432, 128, 64)}    # hidden, intermediate, heads, rope dim
OPS = ("rmsnorm", "add_rmsnorm", "swiglu", "rope", "layernorm", "softmax", "logsumexp")
SWIGLU_TILE = 1024
VOCAB_CHUNK = 8192


def ms(fn) -> float:
    return do_bench_cudagraph(fn, rep=50, return_mode="median")


def rnd(*shape):
    return torch.randn(*shape, device="cuda", dtype=DT)


def case(op: str, rows: int, model: str):
    """(label, bytes moved, ours, torch function, its args, check) for one op and size."""
    hidden, inter, heads, rdim = MODELS[model]
    if op in ("rmsnorm", "add_rmsnorm", "layernorm"):
        n = hidden
        x, w, b, y = rnd(rows, n), rnd(n), rnd(n), torch.empty(rows, n, device="cuda", dtype=DT)
        r = rnd(rows, n)
        tile = next_pow2(n)
        if op == "rmsnorm":
            return (n, 2 * rows * n * 2 + n * 2,
                    lambda: ct.launch(None, (rows,), rmsnorm.rmsnorm, (x, w, y, EPS, tile)),
                    lambda t, g: F.rms_norm(t, (n,), g, EPS), (x, w),
                    lambda: (y, F.rms_norm(x.float(), (n,), w.float(), EPS)))
        if op == "layernorm":
            return (n, 2 * rows * n * 2 + 2 * n * 2,
                    lambda: ct.launch(None, (rows,), layernorm.layernorm,
                                      (x, w, b, y, EPS, tile)),
                    lambda t, g, bb: F.layer_norm(t, (n,), g, bb, EPS), (x, w, b),
                    lambda: (y, F.layer_norm(x.float(), (n,), w.float(), b.float(), EPS)))
        r0 = r.clone()

        def torch_add_rms(t, res, g):        # vLLM's fused_add_rms_norm, out of place
            h = t + res
            return F.rms_norm(h, (n,), g, EPS), h

        def check():
            r.copy_(r0)
            ct.launch(None, (rows,), llm_ops.add_rmsnorm, (x, r, w, y, EPS, tile))
            h = x.float() + r0.float()
            return (torch.cat([y, r], 1), torch.cat([F.rms_norm(h, (n,), w.float(), EPS), h], 1))

        return (n, 4 * rows * n * 2 + n * 2,
                lambda: ct.launch(None, (rows,), llm_ops.add_rmsnorm, (x, r, w, y, EPS, tile)),
                torch_add_rms, (x, r0, w), check)
    if op == "swiglu":
        n = inter
        g, u, o = rnd(rows, n), rnd(rows, n), torch.empty(rows, n, device="cuda", dtype=DT)
        grid = (rows, ct.cdiv(n, SWIGLU_TILE))
        return (n, 3 * rows * n * 2,
                lambda: ct.launch(None, grid, llm_ops.silu_mul, (g, u, o, SWIGLU_TILE)),
                lambda a, bb: F.silu(a) * bb, (g, u),
                lambda: (o, F.silu(g.float()) * u.float()))
    if op == "rope":
        half = rdim // 2
        q = rnd(rows, heads, rdim)
        angle = torch.rand(rows, half, device="cuda") * 6.3
        cos, sin = angle.cos(), angle.sin()
        o = torch.empty_like(q)

        def torch_rope(t, c, s):
            x1, x2 = t[..., :half].float(), t[..., half:].float()
            c, s = c[:, None, :], s[:, None, :]
            return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).to(t.dtype)

        return (f"{heads}x{rdim}", 2 * q.numel() * 2 + 2 * cos.numel() * 4,
                lambda: ct.launch(None, (rows,), llm_ops.rope, (q, cos, sin, o, heads, half)),
                torch_rope, (q, cos, sin), lambda: (o, torch_rope(q, cos, sin)))
    x = rnd(rows, VOCAB) * 4
    if op == "softmax":
        y = torch.empty_like(x)
        return (VOCAB, 2 * x.numel() * 2,
                lambda: ct.launch(None, (rows,), llm_ops.vocab_softmax, (x, y, VOCAB_CHUNK)),
                lambda t: torch.softmax(t, -1), (x,),
                lambda: (y, torch.softmax(x.float(), -1)))
    out = torch.empty(rows, device="cuda", dtype=torch.float32)
    return (VOCAB, x.numel() * 2 + rows * 4,
            lambda: ct.launch(None, (rows,), llm_ops.vocab_logsumexp, (x, out, VOCAB_CHUNK)),
            lambda t: torch.logsumexp(t.float(), -1), (x,),
            lambda: (out, torch.logsumexp(x.float(), -1)))


def measure(op: str, rows: int, model: str) -> dict:
    width, nbytes, ours, fn, fn_args, check = case(op, rows, model)
    ours()
    torch.cuda.synchronize()
    out, ref = check()
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    compiled = torch.compile(fn, dynamic=False)
    compiled(*fn_args)
    t = {"tileir": ms(ours), "torch": ms(lambda: fn(*fn_args)),
         "torch.compile": ms(lambda: compiled(*fn_args))}
    return {"op": op, "model": model, "rows": rows, "width": width, "bytes": nbytes,
            "ms": t, "rel_err": err,
            "x copy": {k: nbytes / v / 1e9 / COPY_TBS[0] for k, v in t.items()},
            "vs compile": t["torch.compile"] / t["tileir"]}


COPY_TBS: list[float] = []     # the run's copy bandwidth, TB/s (bytes read + written / time)


def copy_bandwidth() -> float:
    """The best of device-to-device copies of 0.25 to 1.2 GB, bf16 and fp32 (bytes read +
    written over time): the bandwidth a memory-bound op can reach, measured once per
    run on buffers far beyond L2 (one size or dtype alone can land on a slow spot:
    a run on 2026-11-23 saw 2.43 TB/s from bf16 copies, 3.0 from fp32 ones)."""
    best = 0.0
    for nbytes in (256 * 2**20, 300_000_000, 600_000_000, 1_200_000_000):
        for dtype in (DT, torch.float32):
            src = torch.empty(nbytes // src_size(dtype), device="cuda", dtype=dtype)
            dst = torch.empty_like(src)
            best = max(best, 2 * src.numel() * src_size(dtype) / ms(lambda: dst.copy_(src))
                       / 1e9)
            del src, dst
    return best


def src_size(dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def table(rows: list[dict]) -> str:
    head = (f"{'op':<12} {'model':<12} {'rows':>5} {'width':>8} {'tileir us':>10} "
            f"{'x copy':>7} {'torch':>7} {'compile':>8} {'vs compile':>10} {'rel err':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        xc = r["x copy"]
        lines.append(f"{r['op']:<12} {r['model']:<12} {r['rows']:>5} {str(r['width']):>8} "
                     f"{r['ms']['tileir'] * 1e3:>10.1f} {xc['tileir']:>7.3f} {xc['torch']:>7.3f} "
                     f"{xc['torch.compile']:>8.3f} {r['vs compile']:>9.2f}x {r['rel_err']:>9.2e}")
    return "\n".join(lines)


def plot(rows: list[dict], path: str, device: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    prefill = [r for r in rows if r["rows"] >= 1024]
    decode = [r for r in rows if r["rows"] < 1024]
    fig, axes = plt.subplots(2, 1, figsize=(max(9, len(prefill) * 0.7), 8))
    for ax, sel, key, ylabel in ((axes[0], prefill, "x copy", "bandwidth / copy bandwidth"),
                                 (axes[1], decode, "vs compile", "torch.compile time / ours")):
        labels = [f"{r['op']}\n{r['model']}\n{r['rows']}" for r in sel]
        if key == "x copy":
            width = 0.27
            for i, who in enumerate(("tileir", "torch", "torch.compile")):
                ax.bar([k + (i - 1) * width for k in range(len(sel))],
                       [r[key][who] for r in sel], width, label=who)
            ax.legend()
        else:
            ax.bar(range(len(sel)), [r[key] for r in sel])
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(range(len(sel)), labels, fontsize=6)
        ax.set_ylabel(ylabel)
    axes[0].set_title(f"LLM ops, bf16, prefill (top) and decode (bottom) — {device}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "bench/out"))
    p.add_argument("--rows", default="8192,64,16,1")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--models", default=",".join(MODELS))
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    # one torch.compile per op and shape: past dynamo's default limit it would fall
    # back to eager for the later shapes
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 1024)
    device = torch.cuda.get_device_name()
    COPY_TBS.append(copy_bandwidth())
    print(f"copy bandwidth: {COPY_TBS[0]:.2f} TB/s")
    rows = []
    for op in args.ops.split(","):
        models = args.models.split(",") if op not in ("softmax", "logsumexp") else ["llama3-8b"]
        for model in models:
            for m in map(int, args.rows.split(",")):
                r = measure(op, m, model)
                rows.append(r)
                print(table([r]).splitlines()[-1], flush=True)
    print(f"\ndevice: {device}   date: {datetime.date.today()}   torch {torch.__version__}")
    print(table(rows))
    result = {"device": device, "date": str(datetime.date.today()), "torch": torch.__version__,
              "copy_TBs": COPY_TBS[0], "rows": rows}
    with open(os.path.join(args.out, "llm_ops.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(rows, os.path.join(args.out, "llm_ops.png"), device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
