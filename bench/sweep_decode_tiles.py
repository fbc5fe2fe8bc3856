"""Tuning sweep for decode GEMMs: tile shapes x ring stages x warp specialization.

    python bench/sweep_decode_tiles.py [--out DIR] [--shapes 16x4096x4096,1x6144x4096]

The plain source (`test_tensor_cores.gemm_nt`, weight as (N, K)) with retiling
off and the tiles given explicitly, against cuBLAS (`torch.matmul`) in the same
run (CUDA-graph replay medians); also the source as launched by default (the
compiler's choice, column "plain").  Prints each variant as x cuBLAS, the best
four per shape, and writes decode_sweep.json.  This is the measurement behind
the retiling policy for decode grids (docs/tensor-cores.md, "Retiling").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
from triton.testing import do_bench_cudagraph

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))

import tileir as ct  # noqa: E402
from test_tensor_cores import gemm_nt  # noqa: E402

TILES = [(64, 32, 256), (64, 64, 128), (64, 128, 64), (64, 128, 128), (128, 32, 128),
         (128, 64, 128), (128, 128, 64)]
SHAPES = "16x6144x4096,16x4096x4096,16x28672x4096,16x4096x14336,1x4096x4096,1x4096x14336," \
         "64x4096x4096,64x6144x4096"
SMEM = 200 * 1024            # a ring of at most this many bytes (the rest: barriers, epilogue)


def ms(fn) -> float:
    return do_bench_cudagraph(fn, rep=50, return_mode="median")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--shapes", default=SHAPES, help="MxNxK,...")
    p.add_argument("--budget-s", type=float, default=400, help="stop adding variants after")
    args = p.parse_args()
    kernels = {}

    def kernel(stages, ws):
        if (stages, ws) not in kernels:
            kernels[stages, ws] = ct.kernel(gemm_nt.fn, retile=False, num_stages=stages,
                                            warp_specialize=ws)
        return kernels[stages, ws]

    start = time.time()
    result = {"device": torch.cuda.get_device_name(), "shapes": {}}
    for shape in args.shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = a.float() @ w.float().t()
        t_cublas = ms(lambda: torch.matmul(a, w.t()))
        plain = ms(lambda: ct.launch(None, (ct.cdiv(m, 128), ct.cdiv(n, 128)), gemm_nt,
                                     (a, w, c, 128, 128, 64)))
        row = {"plain": t_cublas / plain}
        for bm, bn, bk in TILES:
            per_stage = (bm + bn) * bk * 2
            for stages in sorted({min(s, SMEM // per_stage) for s in (4, 6)}):
                for ws in (False, True):
                    if stages < 2 or time.time() - start > args.budget_s:
                        continue
                    grid = (ct.cdiv(m, bm), ct.cdiv(n, bn))

                    def run(grid=grid, kern=kernel(stages, ws), t=(bm, bn, bk)):
                        ct.launch(None, grid, kern, (a, w, c, *t))
                    c.fill_(float("nan"))
                    run()
                    torch.cuda.synchronize()
                    err = ((c.float() - ref).norm() / ref.norm()).item()
                    if not err < 2e-2:
                        print(f"  {bm}x{bn}x{bk} st{stages} ws{int(ws)}: WRONG (rel err {err})")
                        continue
                    row[f"{bm}x{bn}x{bk} st{stages} ws{int(ws)}"] = t_cublas / ms(run)
        best = sorted(((v, k_) for k_, v in row.items() if k_ != "plain"), reverse=True)[:4]
        print(f"{shape}: plain {row['plain']:.2f}x cuBLAS; best: " +
              ", ".join(f"{k_} {v:.2f}" for v, k_ in best), flush=True)
        result["shapes"][shape] = row
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "decode_sweep.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
