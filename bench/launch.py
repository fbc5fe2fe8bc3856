"""Host cost of a launch: tileir against torch, Triton and the bare driver call.

    python bench/launch.py [--out DIR] [--launches 10000] [--profile]

The kernel is a user's `out = alpha * x + beta * y` (3 arrays, 2 runtime scalars)
over a tensor small enough that one block does it, so the GPU finishes each kernel
sooner than the host can enqueue the next: back-to-back launches then measure the
host path.  For each candidate, `--launches` back-to-back calls are timed twice:
`enqueue` (the loop alone) and `wall` (the loop and the final synchronize).  Rounds
are interleaved, every other one in reverse order (the first candidate of a round
measured up to 1 µs slower), and the median is reported.  Candidates:

- `tileir`: `ct.launch(None, grid, axpby, (x, y, out, alpha, beta, TILE))`, through
  the C fast path where it is built; `tileir (Python fast path)`: the same through
  the generated Python (TILEIR_PY_LAUNCH=1);
- `torch`: `torch.add(x, y, alpha=beta, out=out)` (one eager op, 3 tensors);
- `triton`: the same kernel written in Triton (`n` as a third scalar, for its mask);
- `driver (ctypes)` / `driver (cuda-bindings)`: cuLaunchKernel of tileir's compiled
  function with prebuilt parameters, from Python;
- `driver (C)`: the same from C (bench/launch_floor.c, in a process of its own): the
  floor no launcher goes under on this host; and in bursts of BURST launches, too
  few to fill the driver's queue: the host's own cost of the call.

`--profile` prints where tileir's time goes (cProfile, and the fast path's steps
timed one by one).  Prints a table, writes launch.json and launch.png to --out.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import statistics
import sys
import time

try:
    import torch
except ImportError:          # compile-only use on a machine without torch
    torch = None

import tileir as ct
from tileir.runtime import dispatch

N = 4096          # elements: one block of TILE
TILE = 4096
BURST = 256       # launches: fewer than the driver queues before the host waits


@ct.kernel
def axpby(x, y, out, alpha, beta, TILE: ct.Constant[int]):
    pid = ct.bid(0)
    a = ct.load(x, index=(pid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    b = ct.load(y, index=(pid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(pid,), tile=ct.astype(alpha * a + beta * b, out.dtype))


def triton_candidate(x, y, out, alpha, beta):
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def axpby_tt(x, y, out, alpha, beta, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        a = tl.load(x + offs, mask=mask)
        b = tl.load(y + offs, mask=mask)
        tl.store(out + offs, (alpha * a + beta * b).to(out.dtype.element_ty), mask=mask)

    grid = (triton.cdiv(N, TILE),)
    return lambda: axpby_tt[grid](x, y, out, alpha, beta, N, BLOCK=TILE)


def driver_candidates(args, grid):
    """cuLaunchKernel of tileir's own compiled function, parameters packed once."""
    from tileir.kernel import device_target
    from tileir.runtime import driver, launcher
    ck = axpby.compile(args, target=device_target([args[0]]))
    runtime_args = [args[i] for i in ck.runtime_params]
    bound = launcher.bind_args(ck.meta, runtime_args)
    block = launcher.block_of(ck.meta)
    shared = ck.meta["shared_bytes"]
    function = launcher._function(ck.cubin, ck.meta, 0, block[0], shared)
    stream = torch.cuda.current_stream().cuda_stream
    cu = driver.cuda()
    handle = cu.CUstream(stream)
    address = bound.params.address

    def bindings():
        cu.cuLaunchKernel(function, *grid, *block, shared, handle, address, 0)

    lib = ctypes.CDLL("libcuda.so.1")
    launch = lib.cuLaunchKernel
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    f = int(function)
    keep = bound.params                      # the packed values live as long as the closure

    def raw():
        keep                                 # noqa: B018 (kept alive)
        launch(f, *grid, *block, shared, stream, address, None)

    return {"driver (ctypes)": raw, "driver (cuda-bindings)": bindings}


def c_floor(args, launches: int) -> tuple[float, float] | None:
    """(enqueue, wall) us per launch of the same cubin from C (bench/launch_floor.c),
    the median of its rounds; None where no C compiler is found."""
    import re
    import shutil
    import subprocess
    import tempfile
    from tileir.kernel import device_target
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print("no C compiler: no C floor")
        return None
    ck = axpby.compile(args, target=device_target([args[0]]))
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        exe, cubin = os.path.join(tmp, "launch_floor"), os.path.join(tmp, "axpby.cubin")
        subprocess.run([cc, "-O2", "-o", exe, os.path.join(here, "launch_floor.c"), "-ldl"],
                       check=True)
        with open(cubin, "wb") as f:
            f.write(ck.cubin)
        out = subprocess.run([exe, cubin, ck.name, str(ck.meta["num_threads"]),
                              str(ck.meta["shared_bytes"]), str(N), str(launches)],
                             check=True, capture_output=True, text=True).stdout
    rounds = [tuple(map(float, m)) for m in
              re.findall(r"enqueue ([\d.]+) us, wall ([\d.]+) us", out)]
    return (statistics.median(e for e, _ in rounds), statistics.median(w for _, w in rounds))


def timed(fn, launches: int) -> tuple[float, float]:
    """(enqueue, wall) microseconds per launch over `launches` back-to-back calls."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(launches):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / launches * 1e6, (t2 - t0) / launches * 1e6


def profile(fn, launches: int) -> None:
    import cProfile
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(launches):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


def fast_path_steps(kernel, grid, kargs, launches: int) -> dict[str, float]:
    """The fast path's steps timed one by one (each in a loop of its own), from the plan
    the launches above left: where the microseconds of a launch go."""
    import threading
    from tileir.runtime.dispatch import dynamic_values
    (kinds, d), = kernel._dispatchers.items()
    plan = d.plans[d.key_of(grid, kargs)]
    values = dynamic_values(kinds, kargs)
    views = plan.own.views
    handle = plan.current_stream(plan.device)
    plan._streams.setdefault(handle, plan._stream(handle))
    cu_stream = plan._streams[handle]
    language = "C" if d.native else "generated Python"

    def key():
        d.plans[d.key_of(grid, kargs)]

    def writes():
        for view, v in zip(views, values):
            view[0] = v

    def stream():
        plan._streams.get(plan.current_stream(plan.device))

    def driver_call():
        plan._launch(plan.function, *plan.grid, *plan.block, plan.shared, cu_stream,
                     plan.own.address, 0)

    steps = {f"argument key and plan lookup ({language})": key}
    if d.native:
        steps["C plan: stream, stores, cuLaunchKernel"] = \
            lambda: plan.native.launch(None, kargs, values)
    else:
        steps.update({"pointer and scalar stores": writes,
                      "torch current stream, its CUstream": stream,
                      "owner thread check": lambda: threading.get_ident() == plan.owner})
    steps.update({"cuLaunchKernel (cuda-bindings, prebuilt handles)": driver_call,
                  "the whole fast path (Dispatcher.fast)": lambda: d.fast(None, grid, kargs),
                  "tileir.launch": lambda: ct.launch(None, grid, kernel, kargs)})
    return {name: statistics.median(timed(fn, launches)[0] for _ in range(3))
            for name, fn in steps.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="bench/out")
    p.add_argument("--launches", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    x = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    y = torch.randn_like(x)
    out = torch.full_like(x, float("nan"))
    alpha, beta = 0.5, -2.0
    grid = (ct.cdiv(N, TILE),)
    kargs = (x, y, out, alpha, beta, TILE)

    # The same kernel twice: one dispatched in C (where the extension is built), one
    # through the generated Python (TILEIR_PY_LAUNCH is read when a dispatcher is made).
    kernels = {"tileir": axpby}
    if dispatch.use_native():
        kernels["tileir (Python fast path)"] = ct.kernel(axpby.fn)
    ref = (alpha * x.double() + beta * y.double()).to(torch.bfloat16)
    candidates = {}
    for name, kernel in kernels.items():
        if kernel is not axpby:
            os.environ["TILEIR_PY_LAUNCH"] = "1"
        out.fill_(float("nan"))
        ct.launch(None, grid, kernel, kargs)
        torch.cuda.synchronize()
        assert torch.equal(out, ref) or torch.allclose(out.float(), ref.float(), atol=2e-2), \
            f"{name}'s axpby gave wrong results"
        candidates[name] = lambda kernel=kernel: ct.launch(None, grid, kernel, kargs)
    os.environ.pop("TILEIR_PY_LAUNCH", None)
    ours = candidates["tileir"]
    print(f"tileir launches through the {'C' if dispatch.use_native() else 'Python'} "
          f"fast path")
    candidates["torch"] = lambda: torch.add(x, y, alpha=beta, out=out)
    tt = triton_candidate(x, y, out, alpha, beta)
    if tt is not None:
        candidates["triton"] = tt
    candidates.update(driver_candidates(kargs, (1, 1, 1)))
    for fn in candidates.values():            # warm up: compile, load, first-call paths
        for _ in range(200):
            fn()
    samples = {name: [] for name in candidates}
    for r in range(args.rounds):              # interleaved rounds, every other reversed:
        names = list(candidates)              # the first of a round measured slower
        for name in (names if r % 2 == 0 else reversed(names)):
            samples[name].append(timed(candidates[name], args.launches))
    floor = c_floor(kargs, args.launches)
    if floor is not None:
        samples["driver (C)"] = [floor]
        # Bursts too short to fill the launch queue: the host's own cost of the call,
        # below the rate at which the GPU retires these kernels back to back.
        samples[f"driver (C), bursts of {BURST}"] = [c_floor(kargs, BURST)]
    rows = []
    for name, s in samples.items():
        rows.append({"candidate": name,
                     "enqueue_us": statistics.median(e for e, _ in s),
                     "wall_us": statistics.median(w for _, w in s),
                     "wall_us_rounds": [round(w, 3) for _, w in s]})
    device = torch.cuda.get_device_name()
    print(f"host cost per launch, {args.launches} back-to-back launches, median of "
          f"{args.rounds} rounds ({device})")
    print(f"{'candidate':26} {'enqueue us':>11} {'wall us':>9}")
    for r in rows:
        print(f"{r['candidate']:26} {r['enqueue_us']:11.2f} {r['wall_us']:9.2f}")
    if args.profile:
        profile(ours, args.launches)
        steps = {}
        for name, kernel in kernels.items():
            steps[name] = fast_path_steps(kernel, grid, kargs, args.launches)
            print(f"{name}, step by step (us per launch):")
            for step, us in steps[name].items():
                print(f"  {step:48} {us:6.2f}")
    else:
        steps = None
    result = {"date": datetime.date.today().isoformat(), "device": device,
              "launches": args.launches, "rounds": args.rounds, "rows": rows,
              "steps": steps, "python": sys.version.split()[0],
              "torch": torch.__version__}
    with open(os.path.join(args.out, "launch.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(rows, os.path.join(args.out, "launch.png"), device)
    return 0


def plot(rows, path: str, device: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = [r["candidate"] for r in rows]
    ax.barh(names, [r["wall_us"] for r in rows], label="wall")
    ax.barh(names, [r["enqueue_us"] for r in rows], label="enqueue", alpha=0.6)
    ax.axvline(5.0, color="k", linestyle="--", linewidth=1, label="5 us target")
    ax.set_xlabel("microseconds per launch")
    ax.set_title(f"host cost of a launch ({device})")
    ax.invert_yaxis()
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
