"""Batched GEMM with the batch on a grid axis: the plain cuTile-style source against
torch.bmm (cuBLAS), in one run.

    python bench/bmm.py [--out DIR] [--quick] [--shapes TEXT] [--dtypes bf16,fp16]

The kernel is written as cuTile's BatchMatMul sample writes it: (1, TM, TK) and
(1, TK, TN) loads reshaped to 2-d for `mma`, the accumulator cast and reshaped to a
(1, TM, TN) store, no hints.  Launched with the batch on grid axis 0 (the sample's
grid) and on axis 2, at 128 x 128 x 64 tiles (the compiler retiles them for the
grid), and at the sample's own 128 x 256 x 128.  For scale, the 2-d GEMM of the same
work, (B M) x N x K with one B, as tileir's plain GEMM and as torch.mm.  Shapes
B x M x N x K, bf16 and fp16: 32 x 1024^3, 8 x 4096^3, 8 x 4096^2 x 1024, and
batched products of LLMs: attention's scores (64 x 128 x 4096 x 128) and P V
(64 x 128 x 128 x 4096), MoE experts (8 x 512 x 14336 x 4096), MLA's absorbed
projection (128 heads x 1024 x 512 x 128).  Times: medians of CUDA-graph replays
(triton's do_bench_cudagraph); TFLOP/s count 2 B M N K.  Each result is first
checked against an fp32 torch.bmm (relative Frobenius error, outputs poisoned with
NaN); each variant's compiled form (cluster, persistence, retiling, TMA store) is
recorded.  Prints a table; writes bmm.json and bmm.png into --out.
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
from tileir.examples.bmm import bmm, bmm_grid

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """The 2-d GEMM of the same source, for scale."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[1], TK)):
        a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
        b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(i, j), tile=acc.astype(C.dtype))


# (label, B, M, N, K)
SHAPES = [
    ("32x1024^3", 32, 1024, 1024, 1024),
    ("8x4096^3", 8, 4096, 4096, 4096),
    ("8x4096^2x1024", 8, 4096, 4096, 1024),
    ("scores 64x128x4096x128", 64, 128, 4096, 128),
    ("PV 64x128x128x4096", 64, 128, 128, 4096),
    ("MoE 8x512x14336x4096", 8, 512, 14336, 4096),
    ("MLA 128x1024x512x128", 128, 1024, 512, 128),
]
TILES = (128, 128, 64)
SAMPLE_TILES = (128, 256, 128)            # cuTile's BatchMatMul
# (column, tiles, batch axis)
VARIANTS = [("batch axis 0", TILES, 0), ("batch axis 2", TILES, 2),
            ("sample tiles", SAMPLE_TILES, 0)]


def compiled_form(kernel, args, grid, out_param) -> dict:
    """What the launch runs: cluster, persistence, retiling, shared memory, TMA store."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    meta = kernel.compile(args, target="sm_90a", grid=grid, sm_count=sms).meta
    return {"cluster": meta.get("cluster"), "persistent": bool(meta.get("persistent")),
            "grid_scale": meta.get("grid_scale"), "shared_bytes": meta["shared_bytes"],
            "tma_store": any(t["param"] == out_param for t in meta.get("tensor_maps", []))}


def rel_err(out, ref) -> float:
    if out.isnan().any():
        return float("nan")
    return ((out.float() - ref).norm() / ref.norm()).item()


def measure(label, bsz, m, n, k, dt, sm90) -> dict:
    a = torch.randn(bsz, m, k, device="cuda", dtype=dt)
    b = torch.randn(bsz, k, n, device="cuda", dtype=dt)
    c = torch.empty(bsz, m, n, device="cuda", dtype=dt)
    ref = torch.bmm(a.float(), b.float())
    flops = 2 * bsz * m * n * k
    tflops = lambda fn: flops / do_bench_cudagraph(fn) / 1e9  # noqa: E731
    row = {"dtype": str(dt).split(".")[1], "shape": label, "bmm": tflops(lambda: torch.bmm(a, b)),
           "errors": {}, "compiled": {}}
    for name, (tm, tn, tk), axis in VARIANTS:
        grid = bmm_grid(bsz, m, n, tm, tn, axis)
        args = (a, b, c, tm, tn, tk, axis)
        c.fill_(float("nan"))
        ct.launch(None, grid, bmm, args)
        torch.cuda.synchronize()
        row["errors"][name] = rel_err(c, ref)
        row[name] = tflops(lambda: ct.launch(None, grid, bmm, args))
        if sm90:
            row["compiled"][name] = compiled_form(bmm, args, grid, 2)
    # the 2-d GEMM of the same work: every batch's rows against B[0]
    a2, b2, c2 = a.view(bsz * m, k), b[0], c.view(bsz * m, n)
    grid2 = (ct.cdiv(bsz * m, TILES[0]), ct.cdiv(n, TILES[1]), 1)
    args2 = (a2, b2, c2, *TILES)
    c2.fill_(float("nan"))
    ct.launch(None, grid2, gemm, args2)
    torch.cuda.synchronize()
    row["errors"]["2-d"] = rel_err(c2, a2.float() @ b2.float())
    row["2-d"] = tflops(lambda: ct.launch(None, grid2, gemm, args2))
    row["2-d torch.mm"] = tflops(lambda: torch.mm(a2, b2))
    if sm90:
        row["compiled"]["2-d"] = compiled_form(gemm, args2, grid2, 2)
    return row


def table(rows) -> str:
    out = ["| dtype | B x M x N x K | torch.bmm TFLOP/s | batch axis 0 | batch axis 2 | "
           "sample tiles (128x256x128) | 2-d GEMM x torch.mm | worst error |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r[name] / r['bmm']:.3f}x" for name, _, _ in VARIANTS]
        worst = max(r["errors"].values())
        out.append(f"| {r['dtype']} | {r['shape']} | {r['bmm']:.0f} | " + " | ".join(cells) +
                   f" | {r['2-d'] / r['2-d torch.mm']:.3f}x | {worst:.1e} |")
    return "\n".join(out)


def plot(rows, path, device):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    keys = ["bmm"] + [name for name, _, _ in VARIANTS] + ["2-d", "2-d torch.mm"]
    labels = {"bmm": "torch.bmm", "2-d": "tileir 2-d (B M) x N x K"}
    fig, ax = plt.subplots(figsize=(13, 5))
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        ax.bar([x + i * width for x in range(len(rows))], [r.get(key) or 0 for r in rows],
               width, label=labels.get(key, key if key.startswith("2-d") else f"tileir {key}"))
    ax.set_xticks([x + 0.4 for x in range(len(rows))])
    ax.set_xticklabels([f"{r['dtype']} {r['shape']}" for r in rows], rotation=25, ha="right",
                       fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"batched GEMM, batch on a grid axis — {device}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--quick", action="store_true", help="the first two shapes, first dtype")
    p.add_argument("--shapes", default="", help="only shapes whose label holds this text")
    p.add_argument("--dtypes", default="bf16,fp16", help="bf16, fp16 or both (comma)")
    args = p.parse_args(argv)
    dtypes = [{"bf16": torch.bfloat16, "fp16": torch.float16}[d] for d in args.dtypes.split(",")]
    device = torch.cuda.get_device_name()
    sm90 = torch.cuda.get_device_capability() >= (9, 0)
    print(f"{device}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
          flush=True)
    rows = []
    shapes = [s for s in (SHAPES[:2] if args.quick else SHAPES) if args.shapes in s[0]]
    for dt in dtypes[:1] if args.quick else dtypes:
        for shape in shapes:
            rows.append(measure(*shape, dt, sm90))
            print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bmm.json"), "w") as f:
        json.dump({"device": device, "rows": rows}, f, indent=1)
    plot(rows, os.path.join(args.out, "bmm.png"), device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
