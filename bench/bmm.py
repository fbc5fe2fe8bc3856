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

    python bench/bmm.py --schedules [--out DIR] [--rounds 3] [--shapes TEXT]

instead times what the compiler could do differently for the batched kernel (bf16,
batch on grid axis 0, 128 x 128 x 64 as written), each compiled afresh (disk cache
off) and first checked against fp32 torch.bmm, against torch.bmm and the 2-d GEMM of
the same work, rounds in alternating order: `plain` (today's choices: 128 x 256
tiles, persistent, cluster pairs sharing B by multicast, ring across tiles,
TMA-store epilogue); `L2 ahead D` (persistent.L2_AHEAD = D: with each copy into
the ring, an L2 prefetch of the tiles D iterations further on, for operands that
miss L2, as a batched product's do: batches share nothing, so it reads 1.5x the
DRAM bytes of the 2-d GEMM, whose B every row tile shares); `stream-K` (the last
wave's tiles split along K: 32 x 1024^3 is 7.76 waves of 128 x 256 tile pairs on
132 SMs); `no cluster pairs`; `warp-specialized` (a producer warpgroup walks the
tiles ahead); `copy parts`; `per-warpgroup TMA store`; `not persistent`; the
tiles as written (128 x 128, not retiled: two blocks an SM, one's epilogue beside the
other's products) with 4 or 8 warps.  Medians
of the rounds as x torch.bmm, the widest spread between one candidate's rounds, and
the SM clock and board power while each runs back to back (NVML, where torch has
pynvml: whether the batched kernel's extra DRAM bytes cost it clock);
writes bmm_schedules.json.  Three rounds of the two default shapes: about 100 s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import threading
import time

import torch
from triton.testing import do_bench_cudagraph

import tileir as ct
from tileir.backend.layout import tma_store
from tileir.backend.pipeline import cluster_pairs, persistent
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


# --schedules: (name, kernel options, compiler state), the state as `_compiler` takes it
SCHEDULES = [
    ("plain", {}, {}),
    ("L2 ahead 4", {}, {"ahead": 4}),
    ("L2 ahead 8", {}, {"ahead": 8}),
    ("L2 ahead 16", {}, {"ahead": 16}),
    ("stream-K", {"stream_k": True}, {}),
    ("no cluster pairs", {}, {"pairs": False}),
    ("warp-specialized", {"warp_specialize": True, "persistent": True}, {}),
    ("copy parts", {"copy_parts": True}, {}),
    ("per-warpgroup TMA store", {}, {"group": 4}),
    ("not persistent", {"persistent": False}, {}),
    # as written, not retiled: 98 KB, two blocks an SM, one's epilogue beside the
    # other's products (a ping-pong of blocks), with one or two warpgroups
    ("128 x 128, 2 blocks/SM, 4 warps", {"retile": False, "num_warps": 4}, {}),
    ("128 x 128, 2 blocks/SM, 8 warps", {"retile": False}, {}),
]
SCHEDULE_SHAPES = [s for s in SHAPES if s[0] in ("32x1024^3", "8x4096^2x1024")]
_DEFAULTS = {"ahead": persistent.L2_AHEAD, "pairs": cluster_pairs.ENABLED,
             "group": tma_store.GROUP_WARPS}


def _compiler(ahead: int = _DEFAULTS["ahead"], pairs: bool = _DEFAULTS["pairs"],
              group: int = _DEFAULTS["group"]) -> None:
    """The compiler's module-level choices (read when a kernel compiles)."""
    persistent.L2_AHEAD = ahead
    cluster_pairs.ENABLED = pairs
    tma_store.GROUP_WARPS = group


def measure_schedules(label, bsz, m, n, k, rounds: int) -> dict:
    """Each SCHEDULES candidate of the batched kernel, torch.bmm and the 2-d GEMM."""
    dt = torch.bfloat16
    a = torch.randn(bsz, m, k, device="cuda", dtype=dt)
    b = torch.randn(bsz, k, n, device="cuda", dtype=dt)
    c = torch.empty(bsz, m, n, device="cuda", dtype=dt)
    ref = torch.bmm(a.float(), b.float())
    grid = bmm_grid(bsz, m, n, *TILES[:2], 0)
    args = (a, b, c, *TILES, 0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    fns, errors, compiled = {}, {}, {}
    for name, options, state in SCHEDULES:
        kernel = ct.kernel(bmm.fn, **options)       # its own specializations
        _compiler(**state)
        try:
            c.fill_(float("nan"))
            ct.launch(None, grid, kernel, args)     # compiles with this compiler state
            torch.cuda.synchronize()
            meta = kernel.compile(args, target="sm_90a", grid=grid, sm_count=sms).meta
        finally:
            _compiler()
        errors[name] = rel_err(c, ref)
        if not errors[name] < 1e-2:
            raise RuntimeError(f"{name} on {label}: relative error {errors[name]:.1e}")
        compiled[name] = {"cluster": meta.get("cluster"),
                          "persistent": bool(meta.get("persistent")),
                          "threads": meta["num_threads"], "shared_bytes": meta["shared_bytes"],
                          "workspace": meta.get("workspace")}
        fns[name] = (lambda kernel=kernel: ct.launch(None, grid, kernel, args))
    a2, b2, c2 = a.view(bsz * m, k), b[0], c.view(bsz * m, n)
    grid2 = (ct.cdiv(bsz * m, TILES[0]), ct.cdiv(n, TILES[1]), 1)
    fns["2-d GEMM"] = lambda: ct.launch(None, grid2, gemm, (a2, b2, c2, *TILES))
    fns["torch.bmm"] = lambda: torch.bmm(a, b)
    times = {name: [] for name in fns}
    for r in range(rounds):
        for name in (fns if r % 2 == 0 else reversed(list(fns))):
            times[name].append(do_bench_cudagraph(fns[name], rep=60, return_mode="median"))
    base = statistics.median(times["torch.bmm"])
    return {"shape": label, "torch.bmm TFLOP/s": 2 * bsz * m * n * k / base / 1e9,
            "x torch.bmm": {name: base / statistics.median(t) for name, t in times.items()},
            "spread": {name: max(t) / min(t) - 1 for name, t in times.items()},
            "under load": {name: under_load(fn) for name, fn in fns.items()},
            "errors": errors, "compiled": compiled}


def under_load(fn, seconds: float = 0.3) -> dict:
    """The SM clock (MHz) and board power (W), medians of NVML samples taken while `fn`
    runs back to back for about `seconds`: the batched kernel reads 1.5x the DRAM
    bytes of the 2-d GEMM of the same work (192 against 130 MiB at 32 x 1024^3) with
    the same instructions, and a power-capped chip pays for bytes in clock.  Empty
    where torch has no NVML (pynvml)."""
    try:
        torch.cuda.clock_rate()
        torch.cuda.power_draw()
    except Exception:                # (no such function, no pynvml, an NVMLError)
        return {}
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    each = (time.perf_counter() - start) / 10
    clocks, watts = [], []
    done = threading.Event()

    def sample():                    # (whatever stream the launches use)
        time.sleep(min(0.05, seconds / 4))          # past the first launches' ramp
        while not done.is_set():
            clocks.append(torch.cuda.clock_rate())
            watts.append(torch.cuda.power_draw() / 1000)
            time.sleep(0.005)
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        for _ in range(max(1, int(seconds / each))):
            fn()
        torch.cuda.synchronize()
    finally:
        done.set()
        sampler.join()
    if not clocks:
        return {}
    return {"sm_clock_mhz": statistics.median(clocks), "power_w": statistics.median(watts),
            "samples": len(clocks)}


def schedules_table(rows) -> str:
    names = list(rows[0]["x torch.bmm"])
    out = ["| candidate | " + " | ".join(f"{r['shape']} (torch.bmm {r['torch.bmm TFLOP/s']:.0f} "
                                         f"TFLOP/s)" for r in rows) + " |",
           "|---|" + "---|" * len(rows)]

    def load(r, name) -> str:
        u = r["under load"].get(name) or {}
        return f", {u['sm_clock_mhz']:.0f} MHz {u['power_w']:.0f} W" if u else ""
    for name in names:
        out.append(f"| {name} | " + " | ".join(
            f"{r['x torch.bmm'][name]:.3f}x (spread {100 * r['spread'][name]:.1f} %"
            f"{load(r, name)})" for r in rows) + " |")
    return "\n".join(out)


def main_schedules(args, device) -> int:
    os.environ["TILEIR_CACHE"] = "0"            # each candidate compiled in this process
    shapes = [s for s in SCHEDULE_SHAPES if args.shapes in s[0]] if args.shapes \
        else SCHEDULE_SHAPES
    rows = []
    for shape in shapes:
        rows.append(measure_schedules(*shape, args.rounds))
        print(schedules_table(rows[-1:]), flush=True)
    print(schedules_table(rows))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bmm_schedules.json"), "w") as f:
        json.dump({"device": device, "date": datetime.date.today().isoformat(),
                   "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


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
    p.add_argument("--schedules", action="store_true",
                   help="time the compiler's candidate schedules instead (see above)")
    p.add_argument("--rounds", type=int, default=3, help="--schedules: rounds of timings")
    args = p.parse_args(argv)
    dtypes = [{"bf16": torch.bfloat16, "fp16": torch.float16}[d] for d in args.dtypes.split(",")]
    device = torch.cuda.get_device_name()
    sm90 = torch.cuda.get_device_capability() >= (9, 0)
    print(f"{device}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
          flush=True)
    if args.schedules:
        return main_schedules(args, device)
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
