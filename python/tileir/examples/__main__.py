"""`python -m tileir.examples`: the main job — compile every example and run it.

With an NVIDIA GPU (and torch to hold device arrays) the kernels run on the GPU
against a float64 reference.  Without one they run in the NumPy interpreter, and
every GPU-capable example is still compiled to a cubin for `--target` (ptxas
report: registers, spills), so the GPU backend is exercised on any machine.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import time

import numpy as np

from . import NAMES, next_pow2

GPU_EXAMPLES = ("vector_add", "softmax", "rmsnorm", "layernorm", "transpose", "matmul",
                "attention")


def _gpu_ready() -> bool:
    try:
        import torch
    except ImportError:
        return False
    from tileir.runtime.driver import has_gpu
    return has_gpu() and torch.cuda.is_available()


def run_on_gpu(name: str, rng: np.random.Generator):
    """Runs example `name` on the GPU with torch tensors; returns (out, ref, rtol, atol)."""
    import torch

    import tileir as ct
    mod = importlib.import_module(f"tileir.examples.{name}")
    dev = lambda a: torch.from_numpy(a).cuda()  # noqa: E731
    if name == "vector_add":
        a, b = rng.standard_normal((2, 100_003)).astype(np.float32)
        c = torch.full((a.size,), float("nan"), device="cuda")
        ct.launch(None, (ct.cdiv(a.size, 1024),), mod.vector_add, (dev(a), dev(b), c, 1024))
        return c.cpu().numpy(), a.astype(np.float64) + b, 1e-6, 1e-6
    if name == "matmul":           # tensor cores: wgmma on Hopper, mma.sync on Ampere
        m, n, k = 1000, 777, 4100
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        ta, tb = dev(a).bfloat16(), dev(b).bfloat16()
        ct.launch(None, (ct.cdiv(m, 128), ct.cdiv(n, 128)), mod.matmul, (ta, tb, c, 128, 128, 64))
        ref = ta.double().cpu().numpy() @ tb.double().cpu().numpy()
        return c.float().cpu().numpy(), ref, 1e-2, 1e-2 * np.sqrt(k)
    if name == "attention":        # GQA, causal, a sequence not a multiple of the tiles
        b, h, hkv, s, d = 2, 8, 2, 1000, 128
        q, k, v = (rng.standard_normal((b, n, s, d)).astype(np.float32) for n in (h, hkv, hkv))
        tq, tk, tv = (dev(x).bfloat16() for x in (q, k, v))
        o = torch.full_like(tq, float("nan"))
        scale = 1.0 / np.sqrt(d)
        ct.launch(None, mod.grid(tq, 128), mod.attention,
                  (tq, tk, tv, o, scale, h, h // hkv, 128, 128, d, True))
        ref = mod.reference(*(x.double().cpu().numpy() for x in (tq, tk, tv)), scale, True)
        return o.float().cpu().numpy(), ref, 2e-2, 2e-2
    if name == "transpose":
        x = rng.standard_normal((1000, 777)).astype(np.float32)
        y = torch.full((777, 1000), float("nan"), device="cuda")
        ct.launch(None, (ct.cdiv(1000, 64), ct.cdiv(777, 64)), mod.transpose, (dev(x), y, 64, 64))
        return y.cpu().numpy(), x.T.astype(np.float64), 0.0, 0.0
    m, n = 257, 5000
    x = (rng.standard_normal((m, n)) + 1).astype(np.float32)
    w, b = rng.standard_normal((2, n)).astype(np.float32)
    y = torch.full((m, n), float("nan"), device="cuda")
    x64 = x.astype(np.float64)
    if name == "softmax":
        ct.launch(None, (m,), mod.softmax, (dev(x), y, next_pow2(n)))
        e = np.exp(x64 - x64.max(1, keepdims=True))
        ref = e / e.sum(1, keepdims=True)
    elif name == "rmsnorm":
        ct.launch(None, (m,), mod.rmsnorm, (dev(x), dev(w), y, 1e-6, next_pow2(n)))
        ref = x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True) + 1e-6) * w
    else:
        ct.launch(None, (m,), mod.layernorm, (dev(x), dev(w), dev(b), y, 1e-5, next_pow2(n)))
        mu = x64.mean(1, keepdims=True)
        ref = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(1, keepdims=True) + 1e-5) * w + b
    torch.cuda.synchronize()
    return y.cpu().numpy(), ref, 2e-5, 2e-5


def compile_report(name: str, target: str) -> str:
    """Compiles example `name` for `target` with aligned bf16 arrays; the ptxas summary."""
    import ml_dtypes

    import tileir as ct
    mod = importlib.import_module(f"tileir.examples.{name}")
    spec = lambda nd: ct.ArraySpec(ml_dtypes.bfloat16, nd)  # noqa: E731
    args = {"vector_add": (spec(1), spec(1), spec(1), 1024),
            "softmax": (spec(2), spec(2), 8192),
            "rmsnorm": (spec(2), spec(1), spec(2), 1e-6, 8192),
            "layernorm": (spec(2), spec(1), spec(1), spec(2), 1e-5, 8192),
            "transpose": (spec(2), spec(2), 64, 64),
            "matmul": (spec(2), spec(2), spec(2), 128, 128, 64),
            "attention": (spec(4), spec(4), spec(4), spec(4), 0.125, 32, 4, 128, 128, 128,
                          True)}[name]
    ck = getattr(mod, name).compile(args, target=target)
    report = ck.ptxas_report or ""
    regs = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    return (f"{target} cubin {len(ck.cubin)} B, {ck.meta['num_threads']} threads, "
            f"{regs.group(1) if regs else '?'} registers, "
            f"{spills.group(1) if spills else '?'} B spilled")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tileir.examples", description=__doc__)
    p.add_argument("names", nargs="*", default=list(NAMES), help=f"examples ({', '.join(NAMES)})")
    p.add_argument("--seed", type=int, default=None, help="random seed (fresh by default)")
    p.add_argument("--interpret", action="store_true", help="use the interpreter even with a GPU")
    p.add_argument("--target", default="sm_90a", choices=("sm_80", "sm_90a"),
                   help="target of the compile-only check when there is no GPU")
    p.add_argument("--show-ir", action="store_true", help="print each kernel's Tile IR")
    args = p.parse_args(argv)
    for name in args.names:
        if name not in NAMES:
            p.error(f"unknown example '{name}'")
    gpu = _gpu_ready() and not args.interpret
    if gpu:
        import torch
        print(f"backend: GPU ({torch.cuda.get_device_name()})")
    else:
        print(f"backend: NumPy interpreter (no usable GPU{' requested' if args.interpret else ''})"
              f"; GPU examples are also compiled to {args.target} cubins")
    seed = args.seed if args.seed is not None else int(time.time_ns() % 2**32)
    rng = np.random.default_rng(seed)
    print(f"seed: {seed}\n")
    print(f"{'example':<12} {'where':<12} {'max abs err':>12} {'max rel err':>12}  result")
    failed = 0
    for name in args.names:
        mod = importlib.import_module(f"tileir.examples.{name}")
        on_gpu = gpu and name in GPU_EXAMPLES
        t0 = time.perf_counter()
        out, ref, rtol, atol = run_on_gpu(name, rng) if on_gpu else mod.run(rng)
        ms = (time.perf_counter() - t0) * 1e3
        got = out.astype(np.float64)
        err = np.abs(got - ref)
        rel = err / np.maximum(np.abs(ref), 1e-30)
        ok = bool(np.all(np.isfinite(got)) and np.allclose(got, ref, rtol=rtol, atol=atol))
        failed += not ok
        print(f"{name:<12} {'gpu' if on_gpu else 'interpreter':<12} {err.max():>12.3e} "
              f"{rel.max():>12.3e}  {'ok' if ok else 'MISMATCH'} ({ms:.0f} ms)")
        if not gpu and name in GPU_EXAMPLES:
            try:
                print(f"{'':<12} compiled:    {compile_report(name, args.target)}")
            except Exception as e:   # no ptxas here: say so, the run above still counts
                print(f"{'':<12} compile-only check skipped: {str(e).splitlines()[0]}")
        if args.show_ir:
            for k in vars(mod).values():
                for ck in getattr(k, "_cache", {}).values():
                    if ck.module is not None:         # a kernel loaded from the cache has
                        print(ck.ir())                # its IR on disk (ck.entry), not here
    print(f"\n{len(args.names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
