"""`python -m tileir.examples`: the main job — compile every example and run it.

Kernels run on the GPU when the GPU backend and a device are present; until
then (and on machines without a GPU) they run in the NumPy interpreter, and
this says so.
"""

import argparse
import importlib
import sys
import time

import numpy as np

from . import NAMES


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tileir.examples", description=__doc__)
    p.add_argument("names", nargs="*", default=list(NAMES), help=f"examples ({', '.join(NAMES)})")
    p.add_argument("--seed", type=int, default=None, help="random seed (fresh by default)")
    p.add_argument("--show-ir", action="store_true", help="print each kernel's Tile IR")
    args = p.parse_args(argv)
    print("backend: NumPy interpreter (the GPU backend is not built yet; no GPU is needed)")
    seed = args.seed if args.seed is not None else int(time.time_ns() % 2**32)
    rng = np.random.default_rng(seed)
    print(f"seed: {seed}\n")
    print(f"{'example':<12} {'shape':<22} {'max abs err':>12} {'max rel err':>12}  result")
    failed = 0
    for name in args.names:
        if name not in NAMES:
            p.error(f"unknown example '{name}'")
        mod = importlib.import_module(f"tileir.examples.{name}")
        t0 = time.perf_counter()
        out, ref, rtol, atol = mod.run(rng)
        dt_ms = (time.perf_counter() - t0) * 1e3
        got = out.astype(np.float64)
        err = np.abs(got - ref)
        rel = err / np.maximum(np.abs(ref), 1e-30)
        ok = bool(np.all(np.isfinite(got)) and np.allclose(got, ref, rtol=rtol, atol=atol))
        failed += not ok
        print(f"{name:<12} {str(out.shape):<22} {err.max():>12.3e} {rel.max():>12.3e}  "
              f"{'ok' if ok else 'MISMATCH'} ({dt_ms:.0f} ms)")
        if args.show_ir:
            for k in vars(mod).values():
                if hasattr(k, "_cache"):
                    for ck in k._cache.values():
                        print(ck.ir())
    print(f"\n{len(args.names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
