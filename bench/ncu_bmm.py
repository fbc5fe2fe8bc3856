"""One batched GEMM launch for ncu: torch.bmm (cuBLAS) or tileir's `bmm` with the batch on
grid axis 0 or 2, 32 x 1024^3 bf16 by default, the profiled launch the third inside the
NVTX range "measure" (two warm launches first, compiles outside it), so that ncu's counts
of DRAM bytes, L2 hits and the SM clock say where the batched kernel's ~4 % against
cuBLAS (and against its own 2-d GEMM of the same work) goes:

    ncu --nvtx --nvtx-include "measure/" --launch-skip 2 --launch-count 1 \\
        --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,\\
    dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__cycles_elapsed.avg.per_second \\
        python3 bench/ncu_bmm.py axis0

Without ncu it prints each form's time (CUDA events, median of 20).
"""

import argparse

import torch

import tileir as ct
from tileir.examples.bmm import bmm, bmm_grid

TILES = (128, 128, 64)


def call(form, a, b, c):
    if form == "torch":
        return lambda: torch.bmm(a, b, out=c)
    axis = {"axis0": 0, "axis2": 2}[form]
    bsz, m, k = a.shape
    n = b.shape[2]
    grid = bmm_grid(bsz, m, n, TILES[0], TILES[1], axis)
    args = (a, b, c, *TILES, axis)
    return lambda: ct.launch(None, grid, bmm, args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("form", choices=("torch", "axis0", "axis2"))
    ap.add_argument("--shape", default="32,1024,1024,1024", help="B,M,N,K")
    args = ap.parse_args(argv)
    bsz, m, n, k = map(int, args.shape.split(","))
    a = torch.randn(bsz, m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(bsz, k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(bsz, m, n, device="cuda", dtype=torch.bfloat16)
    fn = call(args.form, a, b, c)
    fn()                                   # compiles outside the range
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("measure")
    times = []
    for _ in range(20):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    torch.cuda.nvtx.range_pop()
    times.sort()
    t = times[len(times) // 2]
    print(f"{args.form}: {t * 1e3:.1f} us, {2 * bsz * m * n * k / t / 1e9:.0f} TFLOP/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
