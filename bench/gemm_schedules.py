"""A/B of the large-GEMM schedules: what each piece of the persistent kernel buys.

    python bench/gemm_schedules.py [--out DIR] [--rounds 3] [--shapes 4096x4096x4096,...]

The plain cuTile-style source (`gemm_nt`: C = A @ W^T, bf16, W held as (N, K)) as
the launcher compiles it, against ablations that rebuild what the compiler did
before a change (compiled afresh in this process, the disk cache off):
* `plain`: 128 x 128 tiles as written, retiled for the grid (today: 128 x 256,
  persistent, ring across tiles, TMA-store epilogue by each warp, neighbouring
  tiles in cluster pairs sharing B by TMA multicast);
* `no cluster pairs`: each block loads its own B tiles (`cluster_pairs.ENABLED`
  off);
* `block-wide TMA store`: the epilogue's slabs stored by thread 0 after block
  barriers (5 a tile), not by each warp for its own rows;
* `per-warpgroup TMA store`: each warpgroup stores its 64 rows of a slab as one box
  after a named barrier of its own (`tma_store.GROUP_WARPS = 4`);
* `gated TMA store`: the warps write their rows and signal mbarriers, thread 0 stores
  whole slabs (`tma_store.GATED`);
* `ring per tile`: persistent, each tile's K loop pipelined in place (ring filled
  per tile) - `flatten_tile_loop` switched off;
* `whole-tile epilogue`: the TMA store's buffers hold the whole tile (one barrier,
  3 ring stages instead of 4) - Triton's arrangement;
* `64-byte slabs x4`: slabs of 32 columns in 4 buffers (the same 32 KB; twice
  the barriers, no wait for a store's reads);
* `no TMA store`: the accumulator converted through shared memory and stored from
  registers (`tma_store=False`);
* `not persistent`: one block per tile (`persistent=False`);
* `stream-K`: the last waves' tiles split along K between neighbouring blocks
  (`stream_k=True`, opt-in);
* Triton: its persistent TMA matmul (bench/gemm.py), 128 x 256 x 64, 3 stages;
* cuBLAS: `torch.matmul`, the reference of every ratio.
Each candidate is timed `--rounds` times (CUDA-graph replay medians), rounds in
alternating order; the table gives the median ratio to cuBLAS and the widest
spread between one candidate's rounds.  Writes gemm_schedules.json and .png.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

os.environ["TILEIR_CACHE"] = "0"            # every variant compiled in this process

import torch                                 # noqa: E402
import triton                                # noqa: E402
from triton.testing import do_bench_cudagraph  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))
sys.path.insert(0, HERE)
import tileir as ct                          # noqa: E402
from tileir.backend.layout import tma_store                     # noqa: E402
from tileir.backend.pipeline import cluster_pairs, persistent   # noqa: E402
from test_tensor_cores import gemm_nt        # noqa: E402
import gemm as gemm_bench                    # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 6144, 4096), (8192, 4096, 4096),
          (8192, 28672, 4096), (8192, 4096, 14336)]
TILE = (128, 128, 64)
_FLATTEN = persistent.flatten_tile_loop
_BUFFERS = tma_store.BUFFERS
_SLAB = tma_store.SLAB_ROW_BYTES
_PER_WARP = tma_store.PER_WARP
_GROUP = tma_store.GROUP_WARPS
_GATED = tma_store.GATED
_PAIRS = cluster_pairs.ENABLED


def _compiler(flatten: bool = True, buffers: int = _BUFFERS, slab: int = _SLAB,
              per_warp: bool = _PER_WARP, group: int = _GROUP, gated: bool = _GATED,
              pairs: bool = _PAIRS) -> None:
    cluster_pairs.ENABLED = pairs
    persistent.flatten_tile_loop = _FLATTEN if flatten else (lambda *a: False)
    tma_store.BUFFERS = buffers
    tma_store.SLAB_ROW_BYTES = slab
    tma_store.PER_WARP = per_warp
    tma_store.GROUP_WARPS = group
    tma_store.GATED = gated


VARIANTS = {                     # name: (kernel options, compiler state)
    "plain": ({}, {}),
    "no cluster pairs": ({}, {"pairs": False}),
    "block-wide TMA store": ({}, {"per_warp": False}),
    "per-warpgroup TMA store": ({}, {"group": 4}),
    "gated TMA store": ({}, {"gated": True}),
    "ring per tile": ({}, {"flatten": False}),
    "whole-tile epilogue": ({}, {"buffers": 4}),
    "64-byte slabs x4": ({}, {"buffers": 4, "slab": 64}),
    "no TMA store": ({"tma_store": False}, {}),
    "not persistent": ({"persistent": False}, {}),
    "stream-K": ({"stream_k": True}, {}),
}


def ms(fn) -> float:
    return do_bench_cudagraph(fn, rep=60, return_mode="median")


def triton_run(a, w, c):
    from triton.tools.tensor_descriptor import TensorDescriptor
    m, k = a.shape
    n = w.shape[0]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a_d = TensorDescriptor.from_tensor(a, [128, 64])
    w_d = TensorDescriptor.from_tensor(w, [256, 64])
    c_d = TensorDescriptor.from_tensor(c, [128, 256])
    grid = (min(sms, triton.cdiv(m, 128) * triton.cdiv(n, 256)),)
    return lambda: gemm_bench._triton_persistent[grid](
        a_d, w_d, c_d, m, n, k, BM=128, BN=256, BK=64, GROUP=8, SMS=sms, num_warps=8,
        num_stages=3)


def measure(m, n, k, rounds: int) -> dict:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ w.float().t()
    grid = (ct.cdiv(m, TILE[0]), ct.cdiv(n, TILE[1]))
    fns = {}
    for name, (options, state) in VARIANTS.items():
        kernel = ct.kernel(gemm_nt.fn, **options)
        _compiler(**state)
        try:
            fn = (lambda kernel=kernel: ct.launch(None, grid, kernel, (a, w, c, *TILE)))
            c.fill_(float("nan"))
            fn()                                   # compiles with this compiler state
            torch.cuda.synchronize()
        finally:
            _compiler()
        err = ((c.float() - ref).norm() / ref.norm()).item()
        if err > 1e-2:
            raise RuntimeError(f"{name} on {m}x{n}x{k}: relative error {err:.1e}")
        fns[name] = fn
    fns["Triton"] = triton_run(a, w, c)
    fns["cuBLAS"] = lambda: torch.matmul(a, w.t())
    times = {name: [] for name in fns}
    for r in range(rounds):
        for name in (fns if r % 2 == 0 else reversed(list(fns))):
            times[name].append(ms(fns[name]))
    base = statistics.median(times["cuBLAS"])
    row = {"m": m, "n": n, "k": k,
           "x cuBLAS": {name: base / statistics.median(t) for name, t in times.items()},
           "spread": max(max(t) / min(t) - 1 for t in times.values()),
           "cuBLAS TFLOP/s": 2 * m * n * k / base / 1e9}
    return row


def table(rows) -> str:
    names = list(rows[0]["x cuBLAS"])
    head = f"{'M x N x K':<20}" + "".join(f"{n:>21}" for n in names) + "   spread"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['m']}x{r['n']}x{r['k']:<10}"[:20].ljust(20) +
                     "".join(f"{r['x cuBLAS'][n]:21.3f}" for n in names) +
                     f"   {r['spread']:.3f}")
    return "\n".join(lines)


def plot(rows, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [n for n in rows[0]["x cuBLAS"] if n != "cuBLAS"]
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        ax.bar([x + i * width for x in range(len(rows))],
               [r["x cuBLAS"][name] for r in rows], width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))])
    ax.set_xticklabels([f"{r['m']}x{r['n']}x{r['k']}" for r in rows], fontsize=7)
    ax.set_ylim(0.8, 1.1)
    ax.set_ylabel("x cuBLAS (same run)")
    ax.legend(fontsize=7)
    ax.set_title(f"GEMM schedules, bf16, on {torch.cuda.get_device_name()}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--shapes", help="MxNxK,... (default: 4096^3, 8192^3, the prefill shapes)")
    p.add_argument("--variants", help="names of VARIANTS to time, comma-separated (default: all)")
    args = p.parse_args()
    if args.variants:
        keep = args.variants.split(",")
        for name in list(VARIANTS):
            if name not in keep:
                del VARIANTS[name]
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")] \
        if args.shapes else SHAPES
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for m, n, k in shapes:
        rows.append(measure(m, n, k, args.rounds))
        print(table(rows[-1:]), flush=True)
    print(table(rows))
    result = {"device": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(),
              "torch": torch.__version__, "triton": triton.__version__, "rows": rows}
    with open(os.path.join(args.out, "gemm_schedules.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(rows, os.path.join(args.out, "gemm_schedules.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
