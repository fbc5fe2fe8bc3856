"""tile-split-blocks on decode-sized element-wise ops: each kernel as written (no
split) against splits into blocks of at least MIN_BLOCK_BYTES, vs torch.compile.

    python bench/split_sweep.py [--out DIR] [--rows 1,16,64] [--ops rope,swiglu]

RoPE and SwiGLU of bench/llm_ops.py at Llama-3-8B/70B and DeepSeek-V3 widths.
Every variant is compiled afresh (TILEIR_CACHE=0 is set here: the compile cache
does not key on the thresholds), its output checked against torch, and timed by
CUDA-graph replay in the same run as torch.compile.  SPLIT_ABOVE is lowered to 0
so each threshold's split is seen; "none" is the kernel as written.  Prints a table
(vs compile per threshold, and the grid scale chosen) and writes split_sweep.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ["TILEIR_CACHE"] = "0"

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import llm_ops as B  # noqa: E402

from tileir.backend.layout import split  # noqa: E402
from tileir.examples import llm_ops  # noqa: E402

THRESHOLDS = (None, 8192, 4096, 2048, 1024, 512)
KERNELS = {"rope": llm_ops.rope, "swiglu": llm_ops.silu_mul}


def fresh(kernel) -> None:
    """Forget what `kernel` compiled and prepared (in-memory caches and fast path)."""
    kernel._cache.clear()
    kernel._no_split.clear()
    kernel._dispatchers.clear()
    kernel._wishes.clear()
    kernel._fast = None


def run_case(op: str, model: str, rows: int) -> dict:
    width, nbytes, ours, fn, fn_args, check = B.case(op, rows, model)
    compiled = torch.compile(fn, dynamic=False)
    compiled(*fn_args)
    t_compile = B.ms(lambda: compiled(*fn_args))
    row = {"op": op, "model": model, "rows": rows, "compile_ms": t_compile, "splits": {}}
    for mbb in THRESHOLDS:
        split.SPLIT_ABOVE, split.MIN_BLOCK_BYTES = (1 << 62, 1 << 62) if mbb is None \
            else (0, mbb)
        fresh(KERNELS[op])
        ours()
        torch.cuda.synchronize()
        out, ref = check()
        err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
        if err > 1e-2:
            raise SystemExit(f"{op} {model} {rows}: relative error {err:.2e} at {mbb}")
        scale = next((ck.meta.get("grid_scale") for ck in KERNELS[op]._cache.values()), None)
        t = B.ms(ours)
        row["splits"][str(mbb or "none")] = {"ms": t, "vs compile": t_compile / t,
                                             "grid_scale": scale}
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=".")
    p.add_argument("--rows", default="1,16,64")
    p.add_argument("--ops", default="rope,swiglu")
    args = p.parse_args(argv)
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 1024)
    saved = split.SPLIT_ABOVE, split.MIN_BLOCK_BYTES
    rows = []
    try:
        for op in args.ops.split(","):
            for model in B.MODELS:
                for m in map(int, args.rows.split(",")):
                    rows.append(run_case(op, model, m))
                    r = rows[-1]
                    cells = " ".join(f"{k}:{v['vs compile']:.2f}"
                                     f"{'' if not v['grid_scale'] else 'x' + str(v['grid_scale'][2])}"
                                     for k, v in r["splits"].items())
                    print(f"{op:<7} {model:<12} {m:>3}  {cells}", flush=True)
    finally:
        split.SPLIT_ABOVE, split.MIN_BLOCK_BYTES = saved
    os.makedirs(args.out, exist_ok=True)
    device = torch.cuda.get_device_name()
    with open(os.path.join(args.out, "split_sweep.json"), "w") as f:
        json.dump({"device": device, "thresholds": [str(t or "none") for t in THRESHOLDS],
                   "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
