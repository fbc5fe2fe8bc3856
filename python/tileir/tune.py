"""`tileir.tune`: pick the fastest of a kernel's configurations by measuring each one
(cuTile's `cuda.tile.tune`).

    result = ct.tune.exhaustive_search(
        [{"tile": t, "occupancy": o} for t in (64, 128, 256) for o in (1, 2)],
        stream,
        grid_fn=lambda cfg: (ct.cdiv(n, cfg["tile"]),),
        kernel=vadd,
        args_fn=lambda cfg: (a, b, c, cfg["tile"]),
        hints_fn=lambda cfg: {"occupancy": cfg["occupancy"]})
    print(result.best.config, result.best.mean_us)

Each config is launched as `launch(stream, grid_fn(cfg), k, args_fn(cfg))`, where
`k` is `kernel` (or `kernel(cfg)` when `kernel` is a plain callable), with
`k.replace_hints(**hints_fn(cfg))` when `hints_fn` is given.  A config that fails to
compile or run (a tile shape that is not a power of two, a bad hint) is recorded in
`TuningResult.failures` as `(config, exception type, message)`; the search goes on.

Measurement (cuTile's method and numbers):

- phase 0: every config is launched 3 times to warm up (the first launch compiles),
  then timed over one batch of 5 runs;
- phase 1: the fastest config that has not converged runs another batch of 5, again
  and again, until 5 configs have converged (or every config has);
- phase 2: each remaining config, fastest first, runs batches until it converges or
  can no longer beat the 5th best: its mean minus its error margin lies above the 5th
  best's mean plus its margin.  Such a config keeps its unconverged measurement.

The error margin is the half-width of the 95% confidence interval of the mean,
`1.96 * sqrt(var / n)`.  A config has converged once it has at least 5 samples and
its margin is at most 1% of its mean or at most 0.5 us, or it has 1000 samples, or
its samples add up to more than 5 s.

Timing: a GPU launch is timed with CUDA events recorded around it on the launch's
stream (`torch.cuda.Event` for torch tensors, else the driver's `cuEvent*` on the
stream handle `runtime.launcher.stream_handle` resolves, `None` being the arrays'
current stream as for `launch`); an interpreted launch (NumPy arrays, or
TILEIR_INTERPRET=1) is synchronous and timed with `time.perf_counter` around it.

`flush_l2` (True by default, as in cuTile): before each timed GPU launch, a scratch
buffer of twice the GPU's L2 size is written on the launch's stream (a
`cuMemsetD32Async`, a new value each time), so the launch finds none of its data in
L2 from the launch before; the memset is enqueued before the start event and not
timed.  False measures with whatever L2 holds (the same arguments launch after
launch: warm).  H100, a read of 32 MiB: 13.7 us warm, 18.7 flushed.  The memset also
keeps the GPU busy while the launch is enqueued, so a kernel shorter than the launch
latency is timed alone; without it, launches back to back also count the GPU's
wait for each launch (a 4 MiB read: 9.5 us warm, 6.2 flushed).  The interpreter has
no L2: it accepts and ignores the flag.

With `single_run_timeout_sec`, the first launch of each config runs in a child
process (multiprocessing, "spawn") under that wall-time limit, so a kernel that
hangs costs its config (a `TimeoutError` failure) and not the search.

How this differs from cuTile:

- the phase-2 cutoff compares margins on both sides (cuTile stops a config whose
  mean minus margin reaches the 5th best's mean) and tightens as configs converge;
- an exception from `grid_fn`, `kernel(cfg)`, `hints_fn` or `replace_hints` is a
  failure of that config too (cuTile lets those propagate);
- without `hints_fn` the kernel is launched as given, keeping the specializations it
  compiled; configs with equal hints share one replaced kernel;
- the timeout child gets the kernel by reference (a `@kernel` defined at module
  level, imported there by name) and the arguments pickled (NumPy arrays copied,
  torch CUDA tensors shared through torch's CUDA IPC); it launches on its own
  default stream, and its limit covers that launch's compile too (on a GPU the
  on-disk compile cache then serves the parent's compile).  cuTile exports device
  buffers to its worker through its C extension instead;
- `successes` lists configs in search-space order (cuTile: in the order they
  converged).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import multiprocessing
import pickle
import sys
import time
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable, Generic, Sequence, TypeVar

from . import knobs
from .kernel import Kernel, _flat, _host_array, _is_array, kernel as make_kernel, launch

__all__ = ["exhaustive_search", "TuningResult", "Measurement"]

T = TypeVar("T")

# The measurement rules (cuTile's numbers): see the module docstring.
WARMUP_RUNS = 3
BATCH_RUNS = 5
MIN_SAMPLES = 5
TOP_K = 5
MAX_SAMPLES = 1000
MAX_TIME_US = 5_000_000.0
MAX_RELATIVE_MARGIN = 0.01
MAX_MARGIN_US = 0.5
Z_95 = 1.96                       # the normal quantile of a two-sided 95% interval

# How long a timeout child may take to start (import tileir), outside the run's limit.
WORKER_START_SEC = 120.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measurement(Generic[T]):
    """One config's timing."""

    config: T
    mean_us: float                 # the mean time of a launch, in microseconds
    num_samples: int               # timed launches
    error_margin_us: float         # half-width of the 95% confidence interval of the mean


@dataclasses.dataclass(frozen=True, kw_only=True)
class TuningResult(Generic[T]):
    """Every config's outcome: `best` (the success with the least mean time), the
    `successes`, and the `failures` as `(config, exception type, message)`."""

    best: Measurement
    successes: Sequence[Measurement]
    failures: Sequence[tuple[T, type[BaseException], str]]

    def summary(self, *, top_k: int = 10, bottom_k: int = 2) -> str:
        """A table of the successes, fastest first (`*` marks the best; the `top_k`
        fastest and `bottom_k` slowest are shown), then the failures."""
        lines = [f"{len(self.successes)} succeeded, {len(self.failures)} failed"]
        lines += _ranked_lines(self.successes, self.best, top_k, bottom_k)
        if self.failures:
            lines.append(f"  {len(self.failures)} failed:")
            lines += _failure_lines(self.failures, top_k)
        if len(self.successes) > top_k + bottom_k or len(self.failures) > top_k:
            lines.append("Use .successes and .failures for the full results.")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _ranked_lines(successes: Sequence[Measurement], best: Measurement | None,
                  top_k: int, bottom_k: int) -> list[str]:
    ranked = sorted(successes, key=lambda m: m.mean_us)
    shown = list(range(len(ranked)))
    hidden = len(ranked) - top_k - bottom_k
    if hidden > 1:             # hiding a single line saves nothing: show it instead
        shown = shown[:top_k] + shown[len(ranked) - bottom_k:]
    cfg_w = max((len(str(m.config)) for m in ranked), default=0)
    mean_w = max((len(f"{m.mean_us:.1f}") for m in ranked), default=0)
    err_w = max((len(f"{m.error_margin_us:.1f}") for m in ranked), default=0)
    n_w = max((len(str(m.num_samples)) for m in ranked), default=0)
    star = _index_of(ranked, best)
    lines = []
    for i in shown:
        m = ranked[i]
        if hidden > 1 and i == len(ranked) - bottom_k:
            lines.append(f"    ... {hidden} more not shown")
        lines.append(f"{'*' if i == star else ' '} {str(m.config):<{cfg_w}}: "
                     f"{m.mean_us:>{mean_w}.1f}±{m.error_margin_us:<{err_w}.1f} us "
                     f"({m.num_samples:>{n_w}} samples)")
    return lines


def _index_of(ranked: list[Measurement], best: Measurement | None) -> int | None:
    """Where `best` is in `ranked`: the same object, else the first equal one (a result
    built by hand); None if neither (configs that do not compare, such as arrays)."""
    for i, m in enumerate(ranked):
        if m is best:
            return i
    for i, m in enumerate(ranked):
        try:
            if m == best:
                return i
        except Exception:
            return None
    return None


def _failure_lines(failures: Sequence[tuple[Any, type, str]], limit: int) -> list[str]:
    lines = []
    for cfg, exc_type, message in failures[:limit]:
        first = message.split("\n", 1)[0]     # our errors: file:line:col: error: what
        if len(first) > 160:
            first = first[:157] + "..."
        lines.append(f"    {cfg}: {exc_type.__name__}: {first}")
    if len(failures) > limit:
        lines.append(f"    ... {len(failures) - limit} more not shown")
    return lines


# ---------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------
def exhaustive_search(
        search_space: Sequence[T],
        stream,
        grid_fn: Callable[[T], tuple[int, ...]],
        kernel: Kernel | Callable[[T], Kernel],
        args_fn: Callable[[T], tuple[Any, ...]],
        hints_fn: Callable[[T], dict[str, Any]] | None = None,
        *,
        quiet: bool = False,
        single_run_timeout_sec: float | None = None,
        flush_l2: bool = True) -> TuningResult[T]:
    """Measures every config of `search_space` and returns the results, the fastest
    as `best` (the module docstring says how configs are launched and measured).

    `stream` is the stream every launch runs on (None: the arrays' current stream).
    `kernel` is the kernel to tune, or a callable mapping a config to one (return
    the same Kernel for configs that share one, so it compiles once per
    specialization).  `args_fn(cfg)` is called before every launch.  `hints_fn(cfg)`
    gives kernel options for `Kernel.replace_hints` (each value may be a ByTarget).
    `quiet` prints nothing; otherwise progress is shown on a terminal and the
    summary printed at the end.  `single_run_timeout_sec` runs each config's first
    launch in a child process under that wall-time limit (the kernel must be a
    module-level `@kernel` and the arguments picklable).  `flush_l2` evicts L2 before
    each timed GPU launch (the module docstring says how).

    Raises ValueError for an empty search space, and when every config failed.
    """
    if len(search_space) == 0:
        raise ValueError("Search space is empty.")
    if not isinstance(flush_l2, bool):
        raise TypeError(f"exhaustive_search(): flush_l2 must be True or False, got "
                        f"{flush_l2!r}")
    if not isinstance(kernel, Kernel) and not callable(kernel):
        raise TypeError(f"exhaustive_search() needs a @tileir.kernel or a callable mapping "
                        f"a config to one, got {type(kernel).__name__}")
    progress = _Progress(enabled=not quiet and _in_terminal())
    kernels = _KernelChooser(kernel, hints_fn)
    worker = _TimeoutWorker(single_run_timeout_sec) \
        if single_run_timeout_sec is not None else None
    failures: list[tuple[T, type[BaseException], str]] = []
    measured: list[_Candidate[T]] = []
    try:
        for order, cfg in enumerate(search_space):
            progress.show(0, "warmup & first batch", order, len(search_space), len(failures))
            candidate = _first_batch(cfg, order, stream, grid_fn, kernels, args_fn, worker,
                                     failures, flush_l2)
            if candidate is not None:
                measured.append(candidate)
        _converge_fastest(measured, failures, progress)
        _converge_rest(measured, failures, progress)
    finally:
        progress.done()
        if worker is not None:
            worker.close()
        for candidate in measured:
            candidate.close()
    survivors = [c for c in measured if not c.failed]
    if not survivors:
        raise ValueError(_no_valid_config(failures))
    successes = tuple(c.measurement() for c in survivors)
    best = min(successes, key=lambda m: m.mean_us)
    result = TuningResult(best=best, successes=successes, failures=tuple(failures))
    if not quiet:
        print(result)
    return result


def _first_batch(cfg, order: int, stream, grid_fn, kernels: "_KernelChooser", args_fn,
                 worker: "_TimeoutWorker | None", failures: list,
                 flush_l2: bool = True) -> "_Candidate | None":
    """Phase 0 for one config: the candidate, warmed up and timed once; None if it failed."""
    candidate = None
    try:
        candidate = _Candidate(cfg, order, stream, grid_fn(cfg), kernels.get(cfg), args_fn,
                               flush_l2)
        candidate.warmup(worker)
        candidate.run_batch()
    except Exception as e:
        if candidate is not None:
            candidate.close()
        if isinstance(e, _UnpicklableError):
            raise                   # a misuse of single_run_timeout_sec, not a bad config
        failures.append(_failure(cfg, e))
        return None
    return candidate


def _converge_fastest(measured: list["_Candidate"], failures: list,
                      progress: "_Progress") -> None:
    """Phase 1: batches for the fastest unconverged config until TOP_K have converged."""
    running = [c for c in measured if not c.converged()]
    target = min(TOP_K, len(measured))
    done = sum(c.converged() for c in measured)
    while running and done < TOP_K:
        progress.show(1, f"converging the top {target}", done, target, len(failures))
        candidate = min(running, key=_Candidate.rank)
        if not _batch(candidate, failures) or candidate.converged():
            running.remove(candidate)
        done = sum(c.converged() for c in measured)


def _converge_rest(measured: list["_Candidate"], failures: list,
                   progress: "_Progress") -> None:
    """Phase 2: each unconverged config, fastest first, runs until it converges or
    cannot beat the TOP_K-th best.  The cutoff is recomputed as configs converge."""
    rest = sorted((c for c in measured if not c.converged() and not c.failed),
                  key=_Candidate.rank)
    for i, candidate in enumerate(rest):
        progress.show(2, "converging the rest", i, len(rest), len(failures))
        while not candidate.converged() and candidate.may_beat(_cutoff_us(measured)):
            if not _batch(candidate, failures):
                break


def _cutoff_us(measured: list["_Candidate"]) -> float:
    """What a config must beat to matter: the TOP_K-th best converged config's mean plus
    its margin (the slowest converged one's while fewer have converged)."""
    done = sorted((c for c in measured if c.converged()), key=lambda c: c.mean_us)
    if not done:
        return math.inf
    kth = done[min(TOP_K, len(done)) - 1]
    return kth.mean_us + kth.error_margin_us


def _batch(candidate: "_Candidate", failures: list) -> bool:
    """One more batch; False (the failure recorded, the candidate dropped) if it raised."""
    try:
        candidate.run_batch()
    except Exception as e:
        candidate.failed = True
        failures.append(_failure(candidate.config, e))
        return False
    return True


def _failure(cfg, e: Exception) -> tuple[Any, type[BaseException], str]:
    if isinstance(e, _ChildFailure):       # raised in the timeout child, reported here
        return (cfg, e.exc_type, e.message)
    return (cfg, type(e), str(e))


def _no_valid_config(failures: list) -> str:
    cfg, exc_type, message = failures[0]
    lines = [f"No valid config found in search space: all {len(failures)} failed"]
    lines += _failure_lines(failures, 10)
    lines.append(f"The first failure in full (config {cfg}):\n{exc_type.__name__}: {message}")
    return "\n".join(lines)


class _KernelChooser:
    """The kernel each config launches: `kernel` or `kernel(cfg)`, with its hints
    replaced; configs of the same kernel with equal hints share one replaced Kernel
    (hint values may be ByTargets, which do not hash: compared with ==)."""

    def __init__(self, kernel, hints_fn):
        self.kernel = kernel
        self.hints_fn = hints_fn
        self._made: list[tuple[Kernel, dict, Kernel]] = []

    def get(self, cfg) -> Kernel:
        base = self.kernel if isinstance(self.kernel, Kernel) else self.kernel(cfg)
        if not isinstance(base, Kernel):
            raise TypeError(f"kernel({cfg!r}) returned a {type(base).__name__}, not a "
                            f"@tileir.kernel")
        if self.hints_fn is None:
            return base
        hints = dict(self.hints_fn(cfg))
        for made_from, made_hints, made in self._made:
            if made_from is base and made_hints == hints:
                return made
        made = base.replace_hints(**hints)
        self._made.append((base, hints, made))
        return made


class _Candidate(Generic[T]):
    """One config under measurement: its launch, and its samples' running mean and
    variance (Welford's update)."""

    def __init__(self, config: T, order: int, stream, grid, kernel: Kernel, args_fn,
                 flush_l2: bool = True):
        self.config = config
        self.flush_l2 = flush_l2
        self.order = order
        self.stream = stream
        self.grid = grid
        self.kernel = kernel
        self.args_fn = args_fn
        self.timer = None          # chosen at the first launch, from its arguments
        self.failed = False
        self.num_samples = 0
        self.mean_us = 0.0
        self._m2 = 0.0             # the sum of squared deviations from the mean

    @property
    def error_margin_us(self) -> float:
        if self.num_samples < 2:
            return math.inf
        return Z_95 * math.sqrt(self._m2 / (self.num_samples - 1) / self.num_samples)

    def rank(self) -> tuple[float, float, int]:
        return (self.mean_us, self.error_margin_us, self.order)

    def converged(self) -> bool:
        if self.failed or self.num_samples < MIN_SAMPLES:
            return False
        margin = self.error_margin_us
        return (margin <= MAX_RELATIVE_MARGIN * self.mean_us or margin <= MAX_MARGIN_US
                or self.num_samples >= MAX_SAMPLES
                or self.mean_us * self.num_samples > MAX_TIME_US)

    def may_beat(self, cutoff_us: float) -> bool:
        return self.mean_us - self.error_margin_us <= cutoff_us

    def warmup(self, worker: "_TimeoutWorker | None") -> None:
        for i in range(WARMUP_RUNS):
            if i == 0 and worker is not None:
                worker.run(self.config, self.grid, self.kernel, self.args_fn(self.config))
            else:
                self._time_one()

    def run_batch(self) -> None:
        for _ in range(min(BATCH_RUNS, MAX_SAMPLES - self.num_samples)):
            self._add(self._time_one())

    def measurement(self) -> Measurement[T]:
        return Measurement(config=self.config, mean_us=self.mean_us,
                           num_samples=self.num_samples,
                           error_margin_us=self.error_margin_us)

    def close(self) -> None:
        close = getattr(self.timer, "close", None)
        if close is not None:
            close()

    def _time_one(self) -> float:
        args = self.args_fn(self.config)
        if self.timer is None:
            self.timer = _choose_timer(self.stream, args, flush_l2=self.flush_l2)
        return self.timer(lambda: launch(self.stream, self.grid, self.kernel, args))

    def _add(self, us: float) -> None:
        self.num_samples += 1
        delta = us - self.mean_us
        self.mean_us += delta / self.num_samples
        self._m2 += delta * (us - self.mean_us)


# ---------------------------------------------------------------------------
# Timing one launch
# ---------------------------------------------------------------------------
def _choose_timer(stream, args: Sequence[Any], *,
                  flush_l2: bool = True) -> Callable[[Callable[[], None]], float]:
    """How a config's launches are timed: a callable that runs a launch and returns its
    time in microseconds (with `flush_l2`, on the GPU, after evicting L2).  The tests
    replace this function to inject times."""
    if _interpreted(args):
        return _wall_time                # no L2 to flush
    device_arrays = [a for a in _flat(args) if _is_array(a) and not _host_array(a)]
    torch = sys.modules.get("torch")     # imported wherever torch tensors exist
    device = _device_of(device_arrays[0])
    flush = _L2Flush(device) if flush_l2 else None
    if torch is not None and isinstance(device_arrays[0], torch.Tensor):
        return _TorchTimer(torch, stream, device_arrays[0].device.index, flush)
    return _DriverTimer(stream, args, device, flush)


def _interpreted(args: Sequence[Any]) -> bool:
    """Whether `launch` runs these arguments in the interpreter (its own rule)."""
    return knobs.INTERPRET.as_bool() or all(_host_array(a) for a in _flat(args)
                                            if _is_array(a))


def _wall_time(run: Callable[[], None]) -> float:
    """An interpreted launch returns when it is done: wall time is its time."""
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1e6


def _device_of(array) -> int:
    from .runtime import arrays, driver
    ordinal = arrays.describe(array).device[1]
    return driver.current_device() if ordinal is None else ordinal


class _L2Flush:
    """Evicts the GPU's L2 before a timed launch: writes a scratch buffer of twice its
    size (device memory of its own, freed by `close`) on the launch's stream."""

    def __init__(self, device: int):
        from .runtime import driver
        self._driver = driver
        self._device = device
        self.nbytes = 2 * driver.l2_cache_bytes(device) // 4 * 4
        self._value = 0
        with driver.device_context(device):
            self._ptr = driver.check(f"cuMemAlloc of a {self.nbytes}-byte L2 flush buffer",
                                     driver.cuda().cuMemAlloc(self.nbytes))

    def __call__(self, stream: int) -> None:
        """Enqueues the flush on `stream` (a handle): a new value each time, so that every
        line is written, whatever the memory system makes of repeated values."""
        driver, cu = self._driver, self._driver.cuda()
        self._value = (self._value + 1) & 0xFFFFFFFF
        with driver.device_context(self._device):
            driver.check("cuMemsetD32Async (flushing L2)",
                         cu.cuMemsetD32Async(self._ptr, self._value, self.nbytes // 4,
                                             cu.CUstream(stream)))

    def close(self) -> None:
        if self._ptr is not None:
            with self._driver.device_context(self._device):
                self._driver.check("cuMemFree", self._driver.cuda().cuMemFree(self._ptr))
            self._ptr = None


class _TorchTimer:
    """torch CUDA events recorded around the launch on its stream (the L2 flushed
    first, before the start event, where asked)."""

    def __init__(self, torch, stream, device: int | None, flush: _L2Flush | None = None):
        self._stream = _torch_stream(torch, stream, device)
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._flush = flush

    def __call__(self, run: Callable[[], None]) -> float:
        if self._flush is not None:
            self._flush(self._stream.cuda_stream)
        self._start.record(self._stream)
        run()
        self._end.record(self._stream)
        self._end.synchronize()
        return self._start.elapsed_time(self._end) * 1000.0

    def close(self) -> None:
        if self._flush is not None:
            self._flush.close()


def _torch_stream(torch, stream, device: int | None):
    """The torch stream a launch on `stream` runs on (None: torch's current one, as
    `launch` takes it; a handle or another library's stream: wrapped)."""
    if stream is None:
        return torch.cuda.current_stream(device)
    if isinstance(stream, torch.cuda.Stream):
        return stream
    from .runtime.launcher import stream_handle
    index = torch.cuda.current_device() if device is None else device
    return torch.cuda.ExternalStream(stream_handle(stream, (), index), device=index)


class _DriverTimer:
    """Driver events (cuEventRecord) around the launch on its stream handle (the L2
    flushed first, where asked)."""

    def __init__(self, stream, args: Sequence[Any], device: int, flush: _L2Flush | None = None):
        from .runtime import driver
        from .runtime.launcher import stream_handle
        self._driver = driver
        self._device = device
        self._flush = flush
        self._stream = stream_handle(stream, args, device)
        cu = driver.cuda()
        flags = cu.CUevent_flags.CU_EVENT_DEFAULT
        with driver.device_context(device):
            self._events = [driver.check("cuEventCreate", cu.cuEventCreate(flags))
                            for _ in range(2)]

    def __call__(self, run: Callable[[], None]) -> float:
        driver, cu = self._driver, self._driver.cuda()
        start, end = self._events
        stream = cu.CUstream(self._stream)
        if self._flush is not None:
            self._flush(self._stream)
        with driver.device_context(self._device):
            driver.check("cuEventRecord", cu.cuEventRecord(start, stream))
            run()
            driver.check("cuEventRecord", cu.cuEventRecord(end, stream))
            driver.check("cuEventSynchronize", cu.cuEventSynchronize(end))
            ms = driver.check("cuEventElapsedTime", cu.cuEventElapsedTime(start, end))
        return ms * 1000.0

    def close(self) -> None:
        cu = self._driver.cuda()
        with self._driver.device_context(self._device):
            for event in self._events:
                self._driver.check("cuEventDestroy", cu.cuEventDestroy(event))
        self._events = []
        if self._flush is not None:
            self._flush.close()


# ---------------------------------------------------------------------------
# The first launch under a time limit, in a child process
# ---------------------------------------------------------------------------
class _UnpicklableError(ValueError):
    """single_run_timeout_sec with a kernel or arguments a child cannot receive."""


class _ChildFailure(Exception):
    """An exception the timeout child raised, reported by type and message."""

    def __init__(self, exc_type: type[BaseException], message: str):
        super().__init__(message)
        self.exc_type = exc_type
        self.message = message


@dataclasses.dataclass(frozen=True)
class _KernelRef:
    """A Kernel as a child imports it: its function's module and qualified name (a
    Kernel itself does not pickle: its name now names the Kernel, not the function)
    and its options."""

    module: str
    qualname: str
    options: dict

    @classmethod
    def of(cls, kernel: Kernel, cfg) -> "_KernelRef":
        fn = kernel.fn
        if "<locals>" in fn.__qualname__ or not fn.__module__:
            raise _UnpicklableError(
                f"single_run_timeout_sec runs each config's first launch in a child process, "
                f"which imports the kernel by name, but kernel '{kernel.name}' (config "
                f"{cfg!r}) is defined inside a function ({fn.__qualname__}); define it at "
                f"module level, or pass single_run_timeout_sec=None")
        return cls(fn.__module__, fn.__qualname__, dict(kernel.options))

    def resolve(self) -> Kernel:
        obj = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        return make_kernel(obj.fn if isinstance(obj, Kernel) else obj, **self.options)


class _TimeoutWorker:
    """A spawned child that runs one launch at a time; a launch past `limit_sec`
    kills it (the next config starts a new one)."""

    def __init__(self, limit_sec: float):
        if not limit_sec > 0:
            raise ValueError(f"single_run_timeout_sec must be a positive number of seconds, "
                             f"got {limit_sec!r}")
        self.limit_sec = limit_sec
        self._process = None
        self._conn = None

    def run(self, cfg, grid, kernel: Kernel, args) -> None:
        job = _pickle_job(cfg, grid, kernel, args)
        conn = self._start()
        conn.send_bytes(job)
        if not conn.poll(self.limit_sec):
            self._stop()
            raise TimeoutError(f"the launch ran past single_run_timeout_sec="
                               f"{self.limit_sec} s and was stopped")
        try:
            kind, *rest = conn.recv()
        except (EOFError, OSError):
            code = self._stop()
            raise RuntimeError(f"the timeout child process died during the launch (exit "
                               f"code {code})") from None
        if kind == "unresolvable":
            raise _UnpicklableError(
                f"single_run_timeout_sec runs each config's first launch in a child process, "
                f"which could not receive config {cfg!r}'s kernel or arguments: {rest[0]}")
        if kind == "error":
            raise _ChildFailure(*rest)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send_bytes(b"")      # asks the child to exit
            except OSError:
                pass
            self._process.join(timeout=5)
        self._stop()

    def _start(self):
        if self._process is not None and self._process.is_alive():
            return self._conn
        self._stop()
        ctx = multiprocessing.get_context("spawn")
        conn, child_conn = ctx.Pipe()
        process = ctx.Process(target=_worker_main, args=(child_conn,), daemon=True,
                              name="tileir-tune-timeout")
        process.start()
        child_conn.close()
        self._process, self._conn = process, conn
        if not conn.poll(WORKER_START_SEC):
            self._stop()
            raise RuntimeError(f"the timeout child process did not start within "
                               f"{WORKER_START_SEC:.0f} s")
        conn.recv()                             # "ready": tileir imported
        return conn

    def _stop(self) -> int | None:
        process, self._process = self._process, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if process is None:
            return None
        if process.is_alive():
            process.kill()
        process.join()
        return process.exitcode


def _pickle_job(cfg, grid, kernel: Kernel, args) -> bytes:
    job = (tuple(grid), _KernelRef.of(kernel, cfg), tuple(args))
    try:
        # multiprocessing's pickler: torch registers its CUDA-tensor sharing there
        return bytes(ForkingPickler.dumps(job))
    except Exception as e:
        raise _UnpicklableError(
            f"single_run_timeout_sec runs each config's first launch in a child process, so "
            f"the grid, kernel options and arguments must be picklable; those of config "
            f"{cfg!r} are not ({type(e).__name__}: {e}); make them picklable, or pass "
            f"single_run_timeout_sec=None") from None


def _worker_main(conn) -> None:
    """The timeout child: runs each job's launch to completion and says how it went."""
    conn.send(("ready",))
    kernels: list[tuple[_KernelRef, Kernel]] = []   # each compiles once per specialization
    while True:
        try:
            job = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not job:
            return
        try:
            grid, ref, args = pickle.loads(job)
            kernel = next((k for r, k in kernels if r == ref), None)
            if kernel is None:
                kernel = ref.resolve()
                kernels.append((ref, kernel))
        except Exception as e:
            conn.send(("unresolvable", f"{type(e).__name__}: {e}"))
            continue
        try:
            launch(None, grid, kernel, args)
            _synchronize(args)
        except Exception as e:
            conn.send(("error", _sendable_type(type(e)), str(e)))
        else:
            conn.send(("ok",))


def _synchronize(args) -> None:
    """Waits for a GPU launch to finish (an interpreted one already has)."""
    if _interpreted(args):
        return
    from .runtime import driver
    device = _device_of(next(a for a in _flat(args) if _is_array(a) and not _host_array(a)))
    with driver.device_context(device):
        driver.check("cuCtxSynchronize", driver.cuda().cuCtxSynchronize())


def _sendable_type(exc_type: type) -> type:
    try:
        pickle.dumps(exc_type)
    except Exception:
        return RuntimeError
    return exc_type


# ---------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------
class _Progress:
    """One line of progress, rewritten in place (on a terminal only)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._shown = False

    def show(self, phase: int, what: str, n: int, total: int, errors: int) -> None:
        if not self.enabled:
            return
        print(f"\r\033[K[phase {phase}/2] {what}: {n}/{total} | errors: {errors}", end="",
              flush=True)
        self._shown = True

    def done(self) -> None:
        if self._shown:
            print("\r\033[K", end="", flush=True)
            self._shown = False


def _in_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False
