"""Memory-bound kernels at bandwidth: tileir vs a device copy, torch eager and torch.compile.

    python bench/memory_bound.py [--out DIR] [--shapes 16384x8192,4096x4096] [--quick]

Every figure is a ratio taken in this run: achieved bandwidth (bytes each kernel
must move, read + written, over its time) against a device-to-device copy of the
same tensor.  Two timings per candidate (tileir, torch eager, torch.compile, copy):
`graph` replays the call captured in a CUDA graph (GPU time only: what the
kernels are worth), `launch` calls it from Python with triton's do_bench (host
launch cost included, which short kernels feel).  The kernels are the shipped
examples, written the plain way (one whole row per block).  Prints a table,
writes memory_bound.json and memory_bound.png into --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench, do_bench_cudagraph

import tileir as ct
from tileir.examples import layernorm, next_pow2, rmsnorm, softmax, vector_add

DTYPE = torch.bfloat16
EPS = 1e-6


def timed(fn) -> dict:
    """Milliseconds: CUDA-graph replay (GPU time) and Python launches (do_bench, median)."""
    return {"graph": do_bench_cudagraph(fn, rep=100, return_mode="median"),
            "launch": do_bench(fn, warmup=25, rep=200, return_mode="median")}


def workloads(m: int, n: int):
    """(name, bytes moved, ours, torch eager, torch function to compile, check)."""
    x = torch.randn(m, n, device="cuda", dtype=DTYPE)
    y = torch.empty_like(x)
    w = torch.randn(n, device="cuda", dtype=DTYPE)
    b = torch.randn(n, device="cuda", dtype=DTYPE)
    a2 = torch.randn(m, n, device="cuda", dtype=DTYPE)
    flat_a, flat_b, flat_c = x.view(-1), a2.view(-1), y.view(-1)
    e = x.element_size()
    tile_n = next_pow2(n)
    vadd_tile = 2048
    rows = (m,)

    def ours_vadd():
        ct.launch(None, (ct.cdiv(m * n, vadd_tile),), vector_add.vector_add,
                  (flat_a, flat_b, flat_c, vadd_tile))

    def ours_softmax():
        ct.launch(None, rows, softmax.softmax, (x, y, tile_n))

    def ours_rms():
        ct.launch(None, rows, rmsnorm.rmsnorm, (x, w, y, EPS, tile_n))

    def ours_ln():
        ct.launch(None, rows, layernorm.layernorm, (x, w, b, y, EPS, tile_n))

    def torch_rms(t, g):
        return F.rms_norm(t, (n,), g, EPS)

    def torch_ln(t, g, bb):
        return F.layer_norm(t, (n,), g, bb, EPS)

    return [
        ("vector_add", 3 * m * n * e, ours_vadd, lambda: torch.add(flat_a, flat_b, out=flat_c),
         (torch.add, (flat_a, flat_b)), lambda: (flat_c, flat_a.float() + flat_b.float())),
        ("softmax", 2 * m * n * e, ours_softmax, lambda: torch.softmax(x, -1),
         (lambda t: torch.softmax(t, -1), (x,)), lambda: (y, torch.softmax(x.float(), -1))),
        ("rmsnorm", 2 * m * n * e + n * e, ours_rms, lambda: torch_rms(x, w),
         (torch_rms, (x, w)), lambda: (y, torch_rms(x.float(), w.float()))),
        ("layernorm", 2 * m * n * e + 2 * n * e, ours_ln, lambda: torch_ln(x, w, b),
         (torch_ln, (x, w, b)), lambda: (y, torch_ln(x.float(), w.float(), b.float()))),
    ], x, y


def run_shape(m: int, n: int) -> list[dict]:
    loads, x, y = workloads(m, n)
    copy_ms = timed(lambda: y.copy_(x))
    copy_bytes = 2 * m * n * x.element_size()
    rows = []
    for name, nbytes, ours, eager, (fn, fn_args), check in loads:
        ours()
        torch.cuda.synchronize()
        out, ref = check()
        err = ((out.float() - ref).norm() / ref.norm()).item()
        compiled = torch.compile(fn)
        compiled(*fn_args)
        t = {"tileir": timed(ours), "torch": timed(eager),
             "torch.compile": timed(lambda: compiled(*fn_args)), "copy": copy_ms}
        row = {"kernel": name, "shape": f"{m}x{n}", "bytes": nbytes, "ms": t, "rel_err": err}
        for mode in ("graph", "launch"):
            copy_bw = copy_bytes / copy_ms[mode] / 1e9          # bytes/ms/1e9 = TB/s
            bw = {k: nbytes / v[mode] / 1e9 for k, v in t.items() if k != "copy"}
            row[mode] = {"TB/s": bw, "copy TB/s": copy_bw,
                         "x copy": {k: v / copy_bw for k, v in bw.items()}}
        rows.append(row)
    return rows


def table(rows: list[dict], mode: str) -> str:
    head = (f"{'kernel':<11} {'shape':<11} {'tileir TB/s':>11} {'x copy':>7} {'torch':>7} "
            f"{'compile':>8} {'vs compile':>10} {'rel err':>9}")
    lines = [f"[{mode}]", head, "-" * len(head)]
    for r in rows:
        xc = r[mode]["x copy"]
        speedup = r["ms"]["torch.compile"][mode] / r["ms"]["tileir"][mode]
        lines.append(f"{r['kernel']:<11} {r['shape']:<11} {r[mode]['TB/s']['tileir']:>11.3f} "
                     f"{xc['tileir']:>7.3f} {xc['torch']:>7.3f} {xc['torch.compile']:>8.3f} "
                     f"{speedup:>9.2f}x {r['rel_err']:>9.2e}")
    return "\n".join(lines)


def plot(rows: list[dict], path: str, device: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['kernel']}\n{r['shape']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 1.3), 4.5))
    width = 0.27
    for i, who in enumerate(("tileir", "torch", "torch.compile")):
        ax.bar([k + (i - 1) * width for k in range(len(rows))],
               [r["graph"]["x copy"][who] for r in rows], width, label=who)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylabel("bandwidth / device copy bandwidth (CUDA graph replay)")
    ax.set_title(f"memory-bound kernels, bf16 — {device}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default=os.environ.get("OUT", "bench/results"))
    p.add_argument("--shapes", default="16384x8192,4096x4096")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    device = torch.cuda.get_device_name()
    rows = []
    for shape in args.shapes.split(","):
        m, n = map(int, shape.split("x"))
        rows += run_shape(m, n)
    print(f"device: {device}   date: {datetime.date.today()}   torch {torch.__version__}")
    print(table(rows, "graph"))
    print(table(rows, "launch"))
    result = {"device": device, "date": str(datetime.date.today()), "torch": torch.__version__,
              "rows": rows}
    with open(os.path.join(args.out, "memory_bound.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(rows, os.path.join(args.out, "memory_bound.png"), device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
