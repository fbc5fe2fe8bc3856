"""The tensor-parallel decode step's reduction, alone: `tileir.llm.peer.reduce_norm` (the
partial sums read over peer memory, residual add and RMSNorm in one kernel) against
what it replaces, NCCL's all-reduce followed by the add and the norm (tileir kernels),
at decode rows (1 to 64) and the widths of Llama-3-8B (4096) and DeepSeek-V3 (7168).
Each case: 64 reductions captured in one CUDA graph (a step's worth for Llama-3-8B),
the graph's time over 64; results checked against a float64 sum first.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --standalone --nproc-per-node 2 bench/tp_allreduce.py [--out DIR]

Prints a table, writes tp_allreduce.json (rank 0).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os

import torch
import torch.distributed as dist

from tileir.llm import parallel
from tileir.llm.backend import Backend

CALLS = 64


def graph_us(fn, reps=20) -> float:
    """Microseconds a call: CALLS calls of fn in one CUDA graph, replayed."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(CALLS):
            fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / (reps * CALLS)


def case(shard, be, rows, width, eps=1e-5) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(1234 + shard.rank)
    mine = torch.randn(rows, width, generator=gen, device="cuda").to(torch.bfloat16)
    residual0 = torch.randn(rows, width, generator=torch.Generator(device="cuda")
                            .manual_seed(99), device="cuda").to(torch.bfloat16)
    g = torch.ones(width, device="cuda", dtype=torch.bfloat16)
    everyone = [torch.empty_like(mine) for _ in range(shard.size)]
    dist.all_gather(everyone, mine)
    want = residual0.double() + sum(p.double() for p in everyone)
    out = {"rows": rows, "width": width}

    residual = residual0.clone()
    part = shard.partial_out(rows, width)
    if part is not None:
        part.copy_(mine)
        normed = shard.reduce_into(be, part, residual, (g, eps))
        torch.cuda.synchronize()
        out["peer_error"] = ((residual.double() - want).abs().max() / want.abs().max()).item()
        ref = want / want.pow(2).mean(1, keepdim=True).add(eps).sqrt()
        out["peer_norm_error"] = ((normed.double() - ref).abs().max()).item()

        def peer():                      # the slots alternate call by call, as in a step
            p = shard.partial_out(rows, width)
            shard.reduce_into(be, p, residual, (g, eps))
        out["peer_us"] = graph_us(peer)

    plain = mine.clone()

    def nccl():
        dist.all_reduce(plain)
        be.add_(plain, residual)
        be.rmsnorm(residual, g, eps)
    out["nccl_add_norm_us"] = graph_us(nccl)

    def nccl_only():
        dist.all_reduce(plain)
    out["nccl_us"] = graph_us(nccl_only)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args()
    os.environ["TILEIR_PEER_REDUCE"] = "1"
    shard = parallel.init("cuda", int(os.environ.get("WORLD_SIZE", "2")))
    be = Backend("cuda", "bfloat16")
    rows_list, widths = (1, 8, 64), (4096, 7168)
    results = []
    for width in widths:
        shard._peer.clear()
        shard.connect(be, width)
        for rows in rows_list:
            results.append(case(shard, be, rows, width))
    if shard.rank == 0:
        device = torch.cuda.get_device_name()
        lines = [f"{shard.size} x {device}: one reduction, us (64 in a CUDA graph)",
                 "| rows | width | peer reduce+add+norm | NCCL all-reduce | NCCL + add + norm"
                 " | speedup | peer error |", "|---|---|---|---|---|---|---|"]
        for r in results:
            peer = r.get("peer_us")
            lines.append(f"| {r['rows']} | {r['width']} | {peer or float('nan'):.2f} | "
                         f"{r['nccl_us']:.2f} | {r['nccl_add_norm_us']:.2f} | "
                         f"{r['nccl_add_norm_us'] / peer if peer else float('nan'):.2f} | "
                         f"{r.get('peer_error', float('nan')):.1e} |")
        print("\n".join(lines))
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "tp_allreduce.json"), "w") as f:
            json.dump({"device": device, "ranks": shard.size,
                       "date": datetime.date.today().isoformat(), "results": results}, f,
                      indent=1)


if __name__ == "__main__":
    main()
