"""Tuning sweep for the row kernels: warps per block x occupancy x L2 policy, plus launch overhead.

    python bench/sweep_rows.py [--shape 16384x8192]

Prints, per variant, bandwidth as a fraction of a device copy measured in the
same run (CUDA-graph replay), and the host-side cost of one `tileir.launch` (no
GPU work waited for).
"""

import argparse
import time

import torch
from triton.testing import do_bench_cudagraph

import tileir as ct
from tileir.examples import layernorm, next_pow2, rmsnorm, softmax, vector_add


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="16384x8192")
    args = p.parse_args()
    m, n = map(int, args.shape.split("x"))
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    copy = do_bench_cudagraph(lambda: y.copy_(x), return_mode="median")
    nbytes = 2 * m * n * 2
    tn = next_pow2(n)
    cases = {"softmax": (softmax.softmax.fn, lambda k: (x, y, tn)),
             "rmsnorm": (rmsnorm.rmsnorm.fn, lambda k: (x, w, y, 1e-6, tn)),
             "layernorm": (layernorm.layernorm.fn, lambda k: (x, w, b, y, 1e-5, tn))}
    print(f"{torch.cuda.get_device_name()}  {m}x{n} bf16  copy {nbytes / copy / 1e9:.2f} TB/s")
    for name, (fn, mkargs) in cases.items():
        for nw, occ, hints in [(nw, occ, h) for nw, occ in ((8, None), (16, None), (16, 4))
                               for h in (None, True, False)]:
            if True:
                opts = {"num_warps": nw, "cache_hints": hints} | (
                    {"occupancy": occ} if occ else {})
                k = ct.kernel(**opts)(fn)
                a = mkargs(k)
                try:
                    ct.launch(None, (m,), k, a)
                    t = do_bench_cudagraph(lambda: ct.launch(None, (m,), k, a),
                                           return_mode="median")
                except Exception as e:  # a variant that cannot launch (registers) is reported
                    print(f"{name:<10} warps={nw:<3} occ={occ} hints={hints}  failed: "
                          f"{str(e)[:80]}")
                    continue
                print(f"{name:<10} warps={nw:<3} occ={str(occ):<5} hints={hints!s:<5} "
                      f"{copy / t:6.3f} x copy")
    a, bb, c = x.view(-1), y.view(-1), torch.empty_like(x).view(-1)
    vargs = (a, bb, c, 2048)
    grid = (ct.cdiv(a.numel(), 2048),)
    ct.launch(None, grid, vector_add.vector_add, vargs)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        ct.launch(None, grid, vector_add.vector_add, vargs)
    host = (time.perf_counter() - t0) / 200
    torch.cuda.synchronize()
    print(f"host cost of one launch (vector_add, enqueue only): {host * 1e6:.1f} us")


if __name__ == "__main__":
    main()
