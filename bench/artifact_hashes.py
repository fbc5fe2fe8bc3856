"""What a compiler change must leave alone: every stage's artifact of a sample of
kernels, and the simulator's output on them, as hashes to compare across commits.

    python bench/artifact_hashes.py out.json                  # cubin compiles (default)
    python bench/artifact_hashes.py out.json --mode gpu       # compiles stopping at `gpu`
    python bench/artifact_hashes.py out.json --mode chain     # `gpu`, its IR read, then `cubin`
    python bench/artifact_hashes.py out.json --mode sim       # tileir.sim outputs (seeded inputs)
    python bench/artifact_hashes.py --compare a.json b.json   # what differs, and why it may

Another commit's tree runs it with PYTHONPATH pointing at a copy of its package
(bench/RESULTS.md, 2026-11-29).  ptxas is not deterministic on some kernels (the
sm_90a GEMMs: the same PTX assembles to one of two cubins from run to run), so
`--compare` reports a differing cubin whose PTX is the same apart, with the PTX's
hash: `--ptxas-runs N` on such a kernel shows the cubins ptxas writes for it.
Compiles run with TILEIR_CACHE=0 (nothing from or to the disk cache).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import sys

os.environ["TILEIR_CACHE"] = "0"

import numpy as np  # noqa: E402

import tileir as ct  # noqa: E402


def _sha(data) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()[:16]


def _spec(dtype: str, ndim: int, **kw):
    return ct.ArraySpec(dtype, ndim, **kw)


def compile_jobs():
    """(name, kernel, args, target): the examples in three dtypes on both targets, the
    GEMMs, tileir.llm's GEMM kernels, an MoE expert GEMM and attention."""
    from tileir.examples import attention, layernorm, matmul, moe, rmsnorm, softmax, \
        transpose, vector_add
    from tileir.llm import kernels as llm
    a, bf = _spec, "bfloat16"
    jobs = []
    for t in ("sm_90a", "sm_80"):
        for d in ("float32", "float16", "bfloat16"):
            jobs += [(f"vector_add/{t}/{d}", vector_add.vector_add,
                      (a(d, 1), a(d, 1), a(d, 1), 1024), t),
                     (f"softmax/{t}/{d}", softmax.softmax, (a(d, 2), a(d, 2), 8192), t),
                     (f"rmsnorm/{t}/{d}", rmsnorm.rmsnorm,
                      (a(d, 2), a(d, 1), a(d, 2), 1e-6, 8192), t),
                     (f"layernorm/{t}/{d}", layernorm.layernorm,
                      (a(d, 2, aligned=False), a(d, 1), a(d, 1), a(d, 2), 1e-5, 8192), t),
                     (f"transpose/{t}/{d}", transpose.transpose,
                      (a(d, 2), a(d, 2), 64, 32), t)]
        for d in ("float16", "bfloat16"):
            jobs.append((f"matmul/{t}/{d}", matmul.matmul,
                         (a(d, 2), a(d, 2), a("float32", 2), 128, 128, 64), t))
    jobs += [
        ("linear/sm_90a", llm.linear,
         (a(bf, 2), a(bf, 2), 0.0, a(bf, 2), a(bf, 2), 64, 64, 64, False, False), "sm_90a"),
        ("linear_norm/sm_90a", llm.linear,
         (a(bf, 2), a(bf, 1), 1e-5, a(bf, 2), a(bf, 2), 64, 64, 64, False, True), "sm_90a"),
        ("linear_swiglu/sm_90a", llm.linear_swiglu,
         (a(bf, 2), a(bf, 1), 0.0, a(bf, 2), a(bf, 2), a(bf, 2), 64, 64, 64, False, False),
         "sm_90a"),
        ("moe_gate_up/sm_90a", moe.gate_up,
         (a(bf, 2), a(bf, 3), a(bf, 3), a("int32", 1), a(bf, 2), 16, 32, 16, False), "sm_90a"),
        ("attention/sm_90a", attention.attention,
         (a(bf, 4),) * 4 + (0.125, 8, 4, 128, 128, 128, True), "sm_90a"),
        ("attention/sm_80", attention.attention,
         (a("float16", 4),) * 4 + (0.125, 8, 4, 64, 64, 64, True), "sm_80"),
    ]
    return jobs


def artifact_hashes(mode: str) -> dict:
    out = {}
    for name, kernel, args, target in compile_jobs():
        if mode == "chain":             # the gpu stage first, its text read, then cubin
            kernel.compile(args, stage="gpu", target=target).artifacts["gpu"]
        ck = kernel.compile(args, stage="gpu" if mode == "gpu" else "cubin", target=target)
        out[name] = {stage: _sha(data) for stage, data in ck.artifacts.items()}
    return out


def sim_hashes() -> dict:
    """The simulator's outputs on fixed inputs (seed 7): GEMMs, softmax, layernorm and a
    transpose on both targets, ragged sizes."""
    import ml_dtypes
    from tileir.examples import layernorm, softmax, transpose
    from tileir.sim import simulate
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "python"))
    from test_tensor_cores import gemm, gemm_nt
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(7)
    out = {}
    for t in ("sm_90a", "sm_80"):
        a = rng.standard_normal((130, 200)).astype(bf16)
        b = rng.standard_normal((200, 72)).astype(bf16)
        at = rng.standard_normal((72, 96)).astype(bf16)
        bt = rng.standard_normal((130, 96)).astype(bf16)
        x = rng.standard_normal((37, 1000)).astype(np.float32)
        w, bias = rng.standard_normal((2, 1000)).astype(np.float32)
        y = rng.standard_normal((100, 77)).astype(np.float32)
        cases = [("gemm", gemm, (a, b, np.full((130, 72), np.nan, bf16), 64, 64, 64), (3, 2)),
                 ("gemm_nt", gemm_nt, (at, bt, np.full((72, 130), np.nan, bf16), 64, 64, 32),
                  (2, 3)),
                 ("softmax", softmax.softmax, (x, np.full_like(x, np.nan), 1024), (37,)),
                 ("layernorm", layernorm.layernorm,
                  (x, w, bias, np.full_like(x, np.nan), 1e-5, 1024), (37,)),
                 ("transpose", transpose.transpose,
                  (y, np.full((77, 100), np.nan, np.float32), 64, 32), (2, 3))]
        for name, kernel, args, grid in cases:
            simulate(kernel.compile(args, stage="gpu", target=t), grid, args)
            result = args[2] if name.startswith("gemm") else args[-3] \
                if name == "layernorm" else args[1]
            out[f"{name}/{t}"] = {"output": _sha(np.ascontiguousarray(result).tobytes())}
    return out


def ptxas_runs(name: str, runs: int) -> collections.Counter:
    """The cubins ptxas writes for kernel `name`'s PTX over `runs` runs."""
    from tileir.backend.target.toolchain import Target, assemble
    _, kernel, args, target = next(j for j in compile_jobs() if j[0] == name)
    ptx = kernel.compile(args, stage="ptx", target=target).artifacts["ptx"]
    return collections.Counter(_sha(assemble(ptx, Target(target))[0]) for _ in range(runs))


def compare(a: dict, b: dict) -> int:
    """Prints what differs; returns how many differences are not a cubin of the same PTX."""
    bad = 0
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name, {}), b.get(name, {})
        for stage in sorted(set(x) | set(y)):
            if x.get(stage) == y.get(stage):
                continue
            same_ptx = stage == "cubin" and x.get("ptx") is not None and \
                x.get("ptx") == y.get("ptx")
            print(f"{name} {stage}: {x.get(stage)} vs {y.get(stage)}"
                  + (f" (the same PTX {x['ptx']}: ptxas' choice, see --ptxas-runs)"
                     if same_ptx else ""))
            bad += not same_ptx
    n = sum(len(v) for v in a.values())
    print(f"{len(a)} kernels, {n} hashes; {bad} differences besides cubins of the same PTX")
    return bad


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?")
    p.add_argument("--mode", choices=("cubin", "gpu", "chain", "sim"), default="cubin")
    p.add_argument("--compare", nargs=2, metavar="JSON")
    p.add_argument("--ptxas-runs", nargs=2, metavar=("KERNEL", "N"))
    args = p.parse_args()
    if args.compare:
        a, b = (json.load(open(f)) for f in args.compare)
        return 1 if compare(a, b) else 0
    if args.ptxas_runs:
        print(dict(ptxas_runs(args.ptxas_runs[0], int(args.ptxas_runs[1]))))
        return 0
    if not args.out:
        p.error("give an output file, --compare or --ptxas-runs")
    result = sim_hashes() if args.mode == "sim" else artifact_hashes(args.mode)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    print(f"tileir from {os.path.dirname(ct.__file__)}: {len(result)} entries in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
