"""Llama-3-8B's one-row decode GEMVs as `Backend` launches them (gemv.plan's tiles and
split, the tickets, no L2 prefetch), for ncu: one launch of the product named on the
command line, after 8 others over 8 weight copies (no launch finds its weights in L2).

    ncu --target-processes all -k regex:gemv --launch-skip 8 --launch-count 1 \\
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \\
        --section LaunchStats --section Occupancy python3 bench/ncu_gemv.py o

Without ncu it prints each launch's time (CUDA events, the median of 3 rounds of 8) as
a fraction of a device copy of the weight bytes.
"""

import argparse

import torch

import tileir as ct
from tileir.llm import gemv as G

SHAPES = {"qkv": (6144, 4096, G.gemv), "o": (4096, 4096, G.gemv_add),
          "gate_up": (14336, 4096, G.gemv_swiglu), "down": (4096, 14336, G.gemv_add)}
COPIES = 8


def launches(name):
    """The 8 launches' closures of one product, each over its own weight copy."""
    n, k, kind = SHAPES[name]
    p = G.plan(1, n, k)
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(COPIES)]
    wu = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
          for _ in range(COPIES)] if kind is G.gemv_swiglu else ws
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    y = torch.zeros(1, n, device="cuda", dtype=torch.bfloat16)
    lead = (2,) if kind is G.gemv_swiglu else ()
    part = torch.empty(lead + (p.split, 1, n), device="cuda", dtype=torch.float32)
    count = torch.zeros(max(1, G.counters(n, p)), device="cuda", dtype=torch.int32)

    def one(i):
        if kind is G.gemv_add:
            args = (x, ws[i], y, y, part, count) + tuple(p)
        elif kind is G.gemv_swiglu:     # (x as RMSNorm's weight: unread without NORM)
            args = (x, x, 0.0, ws[i], wu[i], y, part, count) + tuple(p) + (False,)
        else:
            args = (x, x, 0.0, ws[i], y, part, count) + tuple(p) + (False,)
        return lambda: ct.launch(None, G.grid(n, p), kind, args)

    nbytes = n * k * 2 * (2 if kind is G.gemv_swiglu else 1)
    return p, [one(i) for i in range(COPIES)], nbytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(SHAPES))
    args = ap.parse_args(argv)
    p, calls, nbytes = launches(args.name)
    print(args.name, p, G.grid(SHAPES[args.name][0], p), flush=True)
    src = torch.empty(nbytes // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    times, copy = [], []
    for _ in range(3):
        for fn in calls:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        copy.append(a.elapsed_time(b))
    times.sort()
    copy.sort()
    # a copy moves nbytes twice (read and write): its time is 2 * nbytes at copy speed
    print(f"{args.name}: {times[len(times) // 2] * 1e3:.1f} us a launch, "
          f"{copy[1] / 2 / times[len(times) // 2]:.2f} of copy speed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
