"""Where the L2 evict_last policy on loads pays: forced on vs off, across array sizes.

    python bench/l2_policy.py [--out DIR] [--shapes 4096x4096,8192x8192,...]

For each shape (bf16), RMSNorm, softmax and vector add run twice, compiled with
`cache_hints=True` (every 16-byte load carries the policy) and `cache_hints=False`
(none), each as a fraction of a device-to-device copy of the same tensor timed in
the same run (CUDA-graph replay).  The column `auto` says which of the two the
default picks for that shape: the policy on arrays at least
`runtime.arrays.LARGE_L2_MULTIPLE` times the GPU's L2.  Prints a table, writes
l2_policy.json and l2_policy.png into --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import torch
from triton.testing import do_bench_cudagraph

import tileir as ct
from tileir.examples import next_pow2, rmsnorm, softmax, vector_add
from tileir.runtime import arrays, driver

SHAPES = "4096x4096,8192x8192,12288x8192,16384x8192,32768x4096,32768x8192"


def graph_ms(fn) -> float:
    return do_bench_cudagraph(fn, rep=100, return_mode="median")


def run_shape(m: int, n: int) -> list[dict]:
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    x2 = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    copy_ms = graph_ms(lambda: y.copy_(x))
    copy_bw = 2 * x.numel() * 2 / copy_ms
    flat = x.view(-1), x2.view(-1), y.view(-1)
    work = {
        "rmsnorm": (rmsnorm.rmsnorm, (m,), (x, w, y, 1e-6, next_pow2(n)), 2 * x.numel() * 2),
        "softmax": (softmax.softmax, (m,), (x, y, next_pow2(n)), 2 * x.numel() * 2),
        "vector_add": (vector_add.vector_add, (ct.cdiv(x.numel(), 2048),), (*flat, 2048),
                       3 * x.numel() * 2),
    }
    auto = x.numel() * 2 >= arrays.large_bytes(x.device.index)
    rows = []
    for name, (kern, grid, args, nbytes) in work.items():
        row = {"kernel": name, "shape": f"{m}x{n}", "MB": x.numel() * 2 / 1e6, "auto": auto}
        for hints in (False, True):
            k = ct.kernel(cache_hints=hints)(kern.__wrapped__)
            ct.launch(None, grid, k, args)
            row["on" if hints else "off"] = nbytes / graph_ms(
                lambda: ct.launch(None, grid, k, args)) / copy_bw
        rows.append(row)
    return rows


def plot(rows: list[dict], path: str, device: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name in dict.fromkeys(r["kernel"] for r in rows):
        mine = [r for r in rows if r["kernel"] == name]
        ax.plot([r["MB"] for r in mine], [r["on"] / r["off"] for r in mine], "o-", label=name)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("array size (MB, bf16)")
    ax.set_ylabel("speed with the L2 policy / without")
    ax.set_title(f"L2 evict_last on loads — {device}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default=os.environ.get("OUT", "bench/results"))
    p.add_argument("--shapes", default=SHAPES)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    device = torch.cuda.get_device_name()
    l2 = driver.l2_cache_bytes(torch.cuda.current_device())
    rows = []
    for shape in args.shapes.split(","):
        m, n = map(int, shape.split("x"))
        rows += run_shape(m, n)
    print(f"device: {device}  L2 {l2 / 1e6:.1f} MB  large from "
          f"{arrays.LARGE_L2_MULTIPLE}x L2   date: {datetime.date.today()}")
    head = f"{'kernel':<11} {'shape':<11} {'MB':>7} {'off x copy':>10} {'on x copy':>10} " \
           f"{'on/off':>7} {'auto':>5}"
    print(head + "\n" + "-" * len(head))
    for r in rows:
        print(f"{r['kernel']:<11} {r['shape']:<11} {r['MB']:>7.0f} {r['off']:>10.3f} "
              f"{r['on']:>10.3f} {r['on'] / r['off']:>7.3f} {'on' if r['auto'] else 'off':>5}")
    with open(os.path.join(args.out, "l2_policy.json"), "w") as f:
        json.dump({"device": device, "date": str(datetime.date.today()), "l2_bytes": l2,
                   "rows": rows}, f, indent=1)
    plot(rows, os.path.join(args.out, "l2_policy.png"), device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
