"""Batched GEMM with the batch on a grid axis: the plain cuTile-style source against
torch.bmm (cuBLAS), in one run.

    python bench/bmm.py [--out DIR]

The kernel is written as cuTile's BatchMatMul sample writes it (3-d (1, TM, TK) and
(1, TK, TN) loads reshaped for `mma`), with 128 x 128 x 64 tiles and no hints; the
batch is read from grid axis 0 (the sample's layout) or axis 2.  bf16 and fp16,
32 x 1024^3 and 8 x 4096 x 4096 x 1024.  Times: medians of CUDA-graph replays
(triton's do_bench_cudagraph).  Each result is first checked against torch.bmm.
Prints a table; writes bmm.json into --out.
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

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def bmm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int],
        BATCH_AXIS: ct.Constant[int]):
    z = ct.bid(BATCH_AXIS)
    i = ct.bid((BATCH_AXIS + 1) % 3)
    j = ct.bid((BATCH_AXIS + 2) % 3)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[2], TK)):
        a = ct.load(A, index=(z, i, k), shape=(1, TM, TK), padding_mode=ZERO).reshape((TM, TK))
        b = ct.load(B, index=(z, k, j), shape=(1, TK, TN), padding_mode=ZERO).reshape((TK, TN))
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(z, i, j), tile=acc.astype(C.dtype).reshape((1, TM, TN)))


SHAPES = [(32, 1024, 1024, 1024), (8, 4096, 4096, 1024)]
TILES = (128, 128, 64)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    args = p.parse_args(argv)
    device = torch.cuda.get_device_name()
    print(f"{device}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    rows = []
    tm, tn, tk = TILES
    for dt in (torch.bfloat16, torch.float16):
        for bsz, m, n, k in SHAPES:
            a = torch.randn(bsz, m, k, device="cuda", dtype=dt)
            b = torch.randn(bsz, k, n, device="cuda", dtype=dt)
            c = torch.full((bsz, m, n), float("nan"), device="cuda", dtype=dt)
            ref = torch.bmm(a, b)
            flops = 2 * bsz * m * n * k
            row = {"dtype": str(dt).split(".")[1], "shape": f"{bsz}x{m}x{n}x{k}",
                   "bmm": flops / do_bench_cudagraph(lambda: torch.bmm(a, b)) / 1e9}
            for name, axis, grid in (
                    ("batch first", 0, (bsz, ct.cdiv(m, tm), ct.cdiv(n, tn))),
                    ("batch last", 2, (ct.cdiv(m, tm), ct.cdiv(n, tn), bsz))):
                c.fill_(float("nan"))
                fn = lambda: ct.launch(None, grid, bmm, (a, b, c, tm, tn, tk, axis))  # noqa: E731
                fn()
                torch.cuda.synchronize()
                err = ((c.float() - ref.float()).norm() / ref.float().norm()).item()
                row[name] = flops / do_bench_cudagraph(fn) / 1e9
                row[name + " err"] = err
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("| dtype | B x M x N x K | torch.bmm TFLOP/s | batch first | batch last |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dtype']} | {r['shape']} | {r['bmm']:.0f} | "
              f"{r['batch first'] / r['bmm']:.3f}x | {r['batch last'] / r['bmm']:.3f}x |")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bmm.json"), "w") as f:
        json.dump({"device": device, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
