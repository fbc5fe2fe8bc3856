"""Cost of a tileir kernel called from JAX: `y = a * x + 1` under jax.jit, against the
same jnp expression, at 4k and 4M elements.

    python bench/jax_call.py [--calls 2000] [--sizes 4096,4194304] [--out PATH]

Rows, per size:

- `jnp`: `jax.jit(lambda x: a * x + 1.0)`, XLA's own fused kernel;
- `tileir ffi`: `jax.jit` of `cutile_call` of the tileir kernel `axpb`, launched by
  tileir's XLA FFI handler (TILEIR_JAX_FFI=1, the default);
- `tileir callback`: the same through `jax.experimental.buffer_callback` and tileir's
  checked Python launch (TILEIR_JAX_FFI=0), with --callback-calls calls;
- `tileir torch`: `ct.launch` of the same kernel on torch tensors (in a process of its
  own, so that its profiler and JAX's do not share CUPTI): the kernel's device time
  as tileir launches it outside JAX; `tileir torch 2y` the same writing two output
  buffers in turn, as the jitted calls' results come from XLA's allocator.

Columns: `host us`, the wall time of --calls back-to-back jitted calls divided by
their number (the dispatch loop alone; JAX returns before the GPU is done), then
`total us` with the final block_until_ready; `vs jnp`, host us over jnp's; `device
us`, the median duration of the kernel as the profiler sees it on the GPU
(jax.profiler for JAX rows, torch.profiler for torch); `chain us`, the wall time per
kernel of one jitted function that calls it --chain times in a row (jnp's
separated by optimization barriers, so XLA cannot fuse them): a device-time check
that needs no profiler.  The medians of --rounds rounds; rows interleaved per round.

Targets (issue 32): `tileir ffi` host us within 1.5x of jnp's; its device us equal to
`tileir torch`'s.  Prints a table; writes JSON to --out (a file, or a directory that
gets jax_call.json).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import tileir as ct  # noqa: E402

A = 1.5
TILE = 1024
HERE = os.path.dirname(os.path.abspath(__file__))


@ct.kernel
def axpb(x, y, a: float, TILE: ct.Constant[int]):
    pid = ct.bid(0)
    t = ct.load(x, index=(pid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(pid,), tile=t * a + 1.0)


# ---------------------------------------------------------------------------
# JAX
# ---------------------------------------------------------------------------
def jax_candidates(n: int, chain: int) -> dict:
    """name -> (one jitted call, a jitted chain of `chain` calls, the kernel's name on
    the device or None for XLA's own, how it launches)."""
    import jax
    import jax.numpy as jnp
    from tileir.jax import OutputPlaceholder, cutile_call

    grid = (ct.cdiv(n, TILE),)

    def tile(x):
        return cutile_call(grid, axpb, (x, OutputPlaceholder(x.shape, x.dtype), A, TILE))

    def chained(step):
        def run(x):
            for _ in range(chain):
                x = jax.lax.optimization_barrier(step(x))
            return x
        return jax.jit(run)

    import tileir.jax as tj
    out = {"jnp": (jax.jit(lambda x: A * x + 1.0), chained(lambda x: A * x + 1.0), None,
                   "XLA")}
    for name, ffi in (("tileir ffi", "1"), ("tileir callback", "0")):
        os.environ["TILEIR_JAX_FFI"] = ffi         # read when the call is traced
        one, many = jax.jit(tile), chained(tile)
        x = jnp.zeros(n, jnp.float32)
        one(x).block_until_ready()                 # traced (and compiled) now
        many(x).block_until_ready()
        through = "ffi" if tj.uses_ffi() else \
            "buffer_callback" if jax.default_backend() == "gpu" else "interpreter"
        out[name] = (one, many, "axpb", through)
    os.environ["TILEIR_JAX_FFI"] = "1"
    return out


def time_calls(f, x, calls: int) -> tuple[float, float]:
    """(dispatch loop, loop + block_until_ready) in us per call."""
    y = f(x)
    y.block_until_ready()
    t0 = time.perf_counter()
    for _ in range(calls):
        y = f(x)
    t1 = time.perf_counter()
    y.block_until_ready()
    t2 = time.perf_counter()
    return (t1 - t0) / calls * 1e6, (t2 - t0) / calls * 1e6


def time_chain(g, x, chain: int, reps: int = 5) -> float:
    """us per kernel of the chained function (its best of `reps`)."""
    g(x).block_until_ready()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        g(x).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return best / chain * 1e6


def jax_device_us(f, x, kernel: str | None, calls: int = 200) -> float | None:
    """The median duration of the kernel's GPU events in a jax.profiler trace of
    `calls` calls (XLA's own kernels when `kernel` is None); None when the trace has
    none."""
    import jax
    folder = tempfile.mkdtemp(prefix="jax-call-trace-")
    f(x).block_until_ready()
    jax.profiler.start_trace(folder)
    try:
        for _ in range(calls):
            y = f(x)
        y.block_until_ready()
    finally:
        jax.profiler.stop_trace()
    paths = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    if not paths:
        return None
    data = jax.profiler.ProfileData.from_file(paths[0])
    durations = []
    for plane in data.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            if "stream" not in line.name.lower():
                continue
            for e in line.events:
                name = e.name
                if name.lower().startswith(("memcpy", "memset")):
                    continue
                if kernel is None or kernel in name:
                    durations.append(e.duration_ns / 1e3)
    return statistics.median(durations) if durations else None


# ---------------------------------------------------------------------------
# torch (a process of its own)
# ---------------------------------------------------------------------------
def torch_part(sizes: list[int], calls: int, outputs: int = 1) -> dict:
    """tileir's launch of the kernel on torch tensors, writing `outputs` output buffers
    in turn: 1, one y for every call; 2, two alternating, as a jitted function's
    results come from XLA's allocator when each call's result replaces the last (the
    like-for-like device time: at 4M floats one y stays in the 60 MB L2 beside x,
    two do less)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    out = {}
    for n in sizes:
        x = torch.randn(n, device="cuda")
        ys = [torch.empty_like(x) for _ in range(outputs)]
        grid = (ct.cdiv(n, TILE),)

        def run(i):
            ct.launch(None, grid, axpb, (x, ys[i % outputs], A, TILE))
        run(0)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(calls):
            run(i)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(200):
                run(i)
            torch.cuda.synchronize()
        durations = [e.time_range.elapsed_us() for e in prof.events()
                     if "axpb" in e.name and str(e.device_type).endswith("CUDA")]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(calls):
            run(i)
        end.record()
        torch.cuda.synchronize()
        out[n] = {"host_us": (t1 - t0) / calls * 1e6, "total_us": (t2 - t0) / calls * 1e6,
                  "device_us": statistics.median(durations) if durations else None,
                  "events_us": start.elapsed_time(end) * 1e3 / calls,
                  "ok": all(bool(torch.allclose(y, A * x + 1.0)) for y in ys)}
    return out


# ---------------------------------------------------------------------------
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--callback-calls", type=int, default=200)
    p.add_argument("--chain", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sizes", default="4096,4194304")
    p.add_argument("--out", default=os.path.join(HERE, "results", "jax_call.json"))
    p.add_argument("--torch-part", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.torch_part:
        print(json.dumps({outputs: torch_part(sizes, args.calls, outputs)
                          for outputs in (1, 2)}))
        return 0

    import jax
    import jax.numpy as jnp
    import numpy as np
    import tileir.jax as tj
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; tileir.jax: "
          f"{tj.ffi_status()}", flush=True)
    rows = []
    for n in sizes:
        x = jnp.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32))
        cands = jax_candidates(n, args.chain)
        want = np.asarray(x, np.float64) * A + 1.0
        host: dict = {k: [] for k in cands}
        total: dict = {k: [] for k in cands}
        for r in range(args.rounds):
            order = list(cands) if r % 2 == 0 else list(reversed(cands))
            for name in order:
                calls = args.callback_calls if name == "tileir callback" else args.calls
                h, t = time_calls(cands[name][0], x, calls)
                host[name].append(h)
                total[name].append(t)
        for name, (one, many, kernel, through) in cands.items():
            ok = bool(np.allclose(np.asarray(one(x)), want, rtol=1e-5, atol=1e-5))
            try:
                device = jax_device_us(one, x, kernel)
            except Exception as e:                 # a profiler that cannot run here
                print(f"  ({name}: no profile: {e})", flush=True)
                device = None
            rows.append({"n": n, "path": name, "through": through,
                         "host_us": statistics.median(host[name]),
                         "total_us": statistics.median(total[name]), "device_us": device,
                         "chain_us": time_chain(many, x, args.chain), "ok": ok,
                         "calls": args.callback_calls if name == "tileir callback"
                         else args.calls})
    done = subprocess.run([sys.executable, __file__, "--torch-part", "--sizes", args.sizes,
                           "--calls", str(args.calls)], capture_output=True, text=True)
    if done.returncode == 0:
        for outputs, torch_rows in json.loads(done.stdout.strip().splitlines()[-1]).items():
            path = "tileir torch" + ("" if outputs == "1" else f" {outputs}y")
            for n, r in torch_rows.items():
                rows.append({"n": int(n), "path": path, "host_us": r["host_us"],
                             "total_us": r["total_us"], "device_us": r["device_us"],
                             "chain_us": r["events_us"], "ok": r["ok"],
                             "calls": args.calls})
    else:
        print(f"(torch part failed: {done.stderr.strip()[-2000:]})")

    print(f"\n{'n':>9} {'path':<16} {'launch':<15} {'host us':>8} {'total us':>9} "
          f"{'vs jnp':>7} {'device us':>9} {'chain us':>9} ok")
    for n in sizes:
        jnp_host = next(r["host_us"] for r in rows if r["n"] == n and r["path"] == "jnp")
        for r in (r for r in rows if r["n"] == n):
            r["vs_jnp"] = r["host_us"] / jnp_host
            dev = "-" if r["device_us"] is None else f"{r['device_us']:.2f}"
            print(f"{n:>9} {r['path']:<16} {r.get('through', 'torch'):<15} "
                  f"{r['host_us']:>8.1f} {r['total_us']:>9.1f} "
                  f"{r['vs_jnp']:>6.2f}x {dev:>9} {r['chain_us']:>9.2f} "
                  f"{'yes' if r['ok'] else 'NO'}")
    verdict = {}
    for n in sizes:
        by = {r["path"]: r for r in rows if r["n"] == n}
        ffi = by.get("tileir ffi")

        def device_ratio(row):
            return (ffi["device_us"] / row["device_us"] if ffi and row and ffi["device_us"]
                    and row["device_us"] else None)
        verdict[n] = {
            "host_within_1.5x_of_jnp": ffi is not None and ffi["vs_jnp"] <= 1.5,
            "device_vs_torch": device_ratio(by.get("tileir torch")),
            "device_vs_torch_2y": device_ratio(by.get("tileir torch 2y"))}
    print("\ntargets:", json.dumps(verdict))
    out = args.out
    if os.path.isdir(out):
        out = os.path.join(out, "jax_call.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                   "device": jax.devices()[0].device_kind, "jax": jax.__version__,
                   "ffi_status": tj.ffi_status(), "rows": rows, "targets": verdict}, f,
                  indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
