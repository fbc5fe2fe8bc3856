"""Prefill attention, the tutorial source at one shape of bench/attention.py, for ncu:
four launches of the kernel at the tiles and variant named on the command line, the
first three to compile and warm up, each timed with CUDA events beside cuDNN's SDPA.
The fourth's counters say where a 128 x 128 iteration's time goes at head dim 128,
full attention, the shapes at 0.84-0.88 of cuDNN on the H200 (bench/RESULTS.md,
session 25): the tensor pipe's busy fraction, warp stalls per SASS instruction (the
ping-pong's named barriers, the wgmma waits, the producer's TMA), L2 traffic of K/V.

    ncu --target-processes all -k regex:attention --launch-skip 3 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats \\
        --section SourceCounters --section MemoryWorkloadAnalysis \\
        -o att_d128 python3 bench/ncu_attention.py --tiles 128x128
    ncu --import att_d128.ncu-rep --page source --csv --print-source sass > att_d128.csv

Without ncu it prints each launch's time and TFLOP/s against cuDNN's in the same run.
"""

import argparse
import math
import os
import sys

import torch
from torch.nn.attention import SDPBackend

sys.path.insert(0, os.path.dirname(__file__))

import attention as bench  # noqa: E402

LAUNCHES = 4


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="B4 H32 S4096 D128",
                    help="a label of bench/attention.py's SHAPES (default: %(default)s)")
    ap.add_argument("--tiles", default="128x128",
                    help="BMxBN[:variant], as bench/attention.py's --tiles takes one")
    args = ap.parse_args(argv)
    shapes = [s for s in bench.SHAPES if s[0] == args.shape]
    if not shapes:
        raise SystemExit(f"ncu_attention: no shape {args.shape!r}; one of: "
                         f"{', '.join(s[0] for s in bench.SHAPES)}")
    tiles = bench.parse_tiles(args.tiles)
    if len(tiles) != 1:
        raise SystemExit("ncu_attention: one tile shape at a time")
    label, b, h, hkv, s, d, causal = shapes[0]
    bm, bn, variant, _ = tiles[0]
    q = torch.randn(b, h, s, d, device="cuda", dtype=bench.DT)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=bench.DT)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=bench.DT)
    o = torch.full_like(q, float("nan"))
    flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
    ref = bench.sdpa(q, k, v, causal, SDPBackend.CUDNN_ATTENTION)
    cudnn_ms = bench.do_bench(lambda: bench.sdpa(q, k, v, causal,
                                                 SDPBackend.CUDNN_ATTENTION))
    print(f"{label}, {bench.tile_key(bm, bn, variant)}; cuDNN {cudnn_ms * 1e3:.0f} us, "
          f"{flops / cudnn_ms / 1e9:.0f} TFLOP/s", flush=True)
    call = bench.tileir_call(q, k, v, o, causal, bm, bn, variant)
    for i in range(LAUNCHES):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
        print(f"launch {i}: {ms * 1e3:.0f} us, {flops / ms / 1e9:.0f} TFLOP/s, "
              f"{cudnn_ms / ms:.2f} of cuDNN", flush=True)
    err = bench.rel_err(o, ref)
    print(f"relative error against cuDNN: {err:.1e}")
    return 0 if math.isfinite(err) and err < 2e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
