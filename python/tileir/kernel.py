"""`@kernel`, `@function`, `Constant[...]` and `launch` — the user's entry points.

A `Kernel` specializes on its arguments (array dtype and rank, scalar types,
`Constant` values), compiles each specialization once to Tile IR and runs the
requested stages; `launch` runs it on the interpreter (NumPy arrays, or any
arrays with TILEIR_INTERPRET=1).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from typing import Any, Callable, Sequence

import numpy as np
from mlir import ir

from . import dtypes as dt
from . import knobs
from .errors import TileError, TileTypeError, TileUnsupportedFeatureError, TileValueError
from .frontend.compiler import (ArrayParam, FunctionCompiler, ModuleBuilder, Param,
                                ScalarParam)
from .frontend.source import SourceInfo


@dataclasses.dataclass(frozen=True)
class ConstantAnnotation:
    type: type

    def __repr__(self) -> str:
        return f"Constant[{self.type.__name__}]"


class Constant:
    """`Constant[int]` / `Constant[bool]`: a parameter fixed at compile time (specialized)."""

    def __class_getitem__(cls, t):
        if t not in (int, bool, float):
            raise TypeError(f"Constant[...] takes int, bool or float, got {t!r}")
        return ConstantAnnotation(t)


ConstInt = Constant[int]
ConstBool = Constant[bool]

@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """An array argument described without data, for compiling ahead of time.

    `aligned=True` promises what docs/gpu-backend.md calls aligned: a 16-byte
    aligned base, unit last-dim stride and 16-byte multiple other strides.
    """

    dtype: Any
    ndim: int
    aligned: bool = True


DEFAULT_TARGET = "sm_90a"
GPU_STAGES = ("layout", "gpu", "llvm", "ptx", "cubin")

_CONTEXT: ir.Context | None = None


def mlir_context() -> ir.Context:
    """The MLIR context kernels are compiled in (one per process, tile dialect loaded)."""
    global _CONTEXT
    if _CONTEXT is None:
        from tileir.dialect import context
        _CONTEXT = context()
    return _CONTEXT


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
class Function:
    """A `@function` helper: compiled per call-site specialization, inlined by tile-inline."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        self._source: SourceInfo | None = None
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def source(self) -> SourceInfo:
        if self._source is None:
            self._source = SourceInfo(self.fn)
        return self._source

    def bind_helper_args(self, args, kwargs, make_error) -> dict[str, Any]:
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise make_error(f"bad arguments to @function '{self.name}{self.signature}': {e}")
        bound.apply_defaults()
        return dict(bound.arguments)

    def __call__(self, *args, **kwargs):
        raise TileError(f"@function '{self.name}' can only be called from a @kernel or "
                        f"another @function")


def function(fn: Callable) -> Function:
    """Marks a helper callable from kernels (`@tileir.function`)."""
    return Function(fn)


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class CompiledKernel:
    """One specialization of a kernel: its module and how launch arguments map to IR args."""

    kernel: "Kernel"
    module: ir.Module
    name: str
    params: list[tuple[str, Any]]        # (name, ArrayParam | ScalarParam | constant)
    stage: str
    target: str | None = None
    artifacts: dict[str, str | bytes] = dataclasses.field(default_factory=dict)
    meta: dict | None = None             # launch metadata once the `gpu` stage ran

    @property
    def cubin(self) -> bytes:
        if "cubin" not in self.artifacts:
            raise TileError(f"kernel '{self.name}' was compiled only to stage '{self.stage}'")
        return self.artifacts["cubin"]

    @property
    def runtime_params(self) -> list[int]:
        return [i for i, (_, k) in enumerate(self.params) if isinstance(k, Param)]

    def ir(self) -> str:
        return str(self.module)


class Kernel:
    """A `@kernel` entry point."""

    def __init__(self, fn: Callable, options: dict[str, Any]):
        self.fn = fn
        self.name = fn.__name__
        self.options = options
        self.signature = inspect.signature(fn)
        try:
            self.annotations = inspect.get_annotations(fn, eval_str=True)
        except Exception as e:  # an annotation that does not evaluate is a user error
            raise TileTypeError(f"cannot evaluate the annotations of kernel '{self.name}': "
                                f"{e}") from None
        self._source: SourceInfo | None = None
        self._cache: dict[tuple, CompiledKernel] = {}
        self._prepared: dict[tuple, "_PreparedLaunch"] = {}
        self._const_mask = tuple(isinstance(self.annotations.get(p), ConstantAnnotation)
                                 for p in self.signature.parameters)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<tileir kernel {self.name}{self.signature}>"

    def __call__(self, *args, **kwargs):
        raise TileError(f"kernel '{self.name}' is launched with tileir.launch(stream, grid, "
                        f"{self.name}, args), not called directly")

    def source(self) -> SourceInfo:
        if self._source is None:
            self._source = SourceInfo(self.fn)
        return self._source

    # -- specialization ------------------------------------------------------
    def classify(self, args: Sequence[Any], gpu: bool = False) -> list[tuple[str, Any]]:
        names = list(self.signature.parameters)
        if len(args) != len(names):
            raise TileTypeError(f"kernel '{self.name}' takes {len(names)} arguments "
                                f"({', '.join(names)}), got {len(args)}")
        out = []
        for name, value in zip(names, args):
            ann = self.annotations.get(name)
            if isinstance(ann, ConstantAnnotation):
                out.append((name, _constant_arg(self.name, name, ann, value)))
            else:
                out.append((name, _runtime_kind(self.name, name, value, gpu)))
        return out

    def compile(self, args: Sequence[Any], stage: str | None = None,
                target: str | None = None) -> CompiledKernel:
        """The specialization of this kernel for `args`, run up to `stage`.

        With a `target` (`"sm_80"`, `"sm_90a"`) the default stage is `cubin` and
        arrays specialize on alignment; `args` may hold `ArraySpec`s instead of
        arrays to compile ahead of time on a machine without a GPU.
        """
        if stage is None:
            stage = "cubin" if target else "tile"
        if stage in GPU_STAGES and target is None:
            target = DEFAULT_TARGET
        params = self.classify(args, gpu=target is not None)
        key = (tuple((n, _key(k)) for n, k in params), stage, target)
        ck = self._cache.get(key)
        if ck is None:
            ck = self._build(params, stage, target)
            self._cache[key] = ck
        return ck

    def _build(self, params, stage: str, target: str | None) -> CompiledKernel:
        ctx = mlir_context()
        with ctx:
            mb = ModuleBuilder(ctx)
            fn = FunctionCompiler(mb, self.source()).build(self.name, params, kernel=True)
            self._apply_hints(fn)
            from tileir.dialect import verify
            verify(mb.module)
            _dump(mb.module, "frontend")
            if target is not None:
                mb.module.operation.attributes["tile.target"] = ir.StringAttr.get(target)
            artifacts = {"frontend": str(mb.module)}
            artifacts.update(run_stages(mb.module, stage))
            meta = None
            if "tile.kernel_meta" in mb.module.operation.attributes:
                import json
                meta = json.loads(ir.StringAttr(
                    mb.module.operation.attributes["tile.kernel_meta"]).value)
                meta["target"] = target
        return CompiledKernel(self, mb.module, self.name, params, stage, target, artifacts,
                              meta)

    def _apply_hints(self, fn) -> None:
        """Kernel options that steer the GPU stages become function attributes."""
        i32 = ir.IntegerType.get_signless(32)
        for option, attr in (("num_warps", "tile.num_warps"), ("occupancy", "tile.occupancy")):
            value = self.options.get(option)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise TileValueError(f"kernel '{self.name}': option {option} must be a "
                                         f"positive int, got {value!r}")
                fn.attributes[attr] = ir.IntegerAttr.get(i32, value)
        hints = self.options.get("cache_hints", False)
        if not isinstance(hints, bool):
            raise TileValueError(f"kernel '{self.name}': option cache_hints must be a bool, "
                                 f"got {hints!r}")
        fn.attributes["tile.cache_hints"] = ir.BoolAttr.get(hints)

    def tile_ir(self, *args, stage: str = "tile") -> str:
        """The Tile IR of this kernel specialized for `args` (compile-time args as values)."""
        return self.compile(args, stage).ir()


def run_stages(module: ir.Module, stop_after: str) -> dict[str, str | bytes]:
    """Runs the pipeline stages after `frontend` up to and including `stop_after`;
    returns each stage's artifact (IR text; PTX text; cubin bytes)."""
    if stop_after == "frontend":
        return {}
    from tileir import passes
    stages = list(passes.STAGES)
    if stop_after not in stages:
        raise TileValueError(f"unknown stage '{stop_after}'; stages are {', '.join(stages)}")
    artifacts: dict[str, str | bytes] = {}
    for name in stages[1:stages.index(stop_after) + 1]:
        passes.run_stage(module, name)
        _dump(module, name)
        if name in ("ptx", "cubin"):
            from tileir.backend.target import binary_object
            data = binary_object(module)[1].object
            artifacts[name] = data.decode() if name == "ptx" else bytes(data)
        else:
            artifacts[name] = str(module)
    return artifacts


def _dump(module: ir.Module, stage: str) -> None:
    if knobs.DUMP_IR.as_bool():
        print(f"// -----// Tile IR after stage '{stage}' //----- //\n{module}", file=sys.stderr)


def _key(k: Any) -> Any:
    if isinstance(k, (bool, int, float)):
        return (type(k).__name__, k)
    return k


def kernel(fn: Callable | None = None, **options) -> Kernel | Callable[[Callable], Kernel]:
    """Marks a tile kernel: `@tileir.kernel` or `@tileir.kernel(num_ctas=..., ...)`.

    Options: `occupancy` (cuTile: the thread blocks each SM should hold; the
    register budget follows) and the TileLang-style hint `num_warps` (threads
    per block / 32) and `cache_hints` (default False: 16-byte loads of data each
    block streams skip L1, data every block re-reads stays there; measured slower
    on an H200 for row kernels, see bench/RESULTS.md) steer the GPU stages; `num_ctas`, `opt_level` and
    `num_worker_warps` are accepted as in cuTile and recorded.  The interpreter
    ignores all of them.
    """
    known = {"num_ctas", "occupancy", "opt_level", "num_worker_warps", "num_warps",
             "cache_hints"}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"unknown kernel option(s) {sorted(unknown)}; known: {sorted(known)}")
    if fn is None:
        return lambda f: Kernel(f, options)
    return Kernel(fn, options)


def _constant_arg(kname: str, pname: str, ann: ConstantAnnotation, value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    ok = isinstance(value, ann.type) and (ann.type is bool or not isinstance(value, bool)) \
        or (ann.type is float and isinstance(value, int) and not isinstance(value, bool))
    if not ok:
        raise TileTypeError(f"argument '{pname}' of kernel '{kname}' is {ann!r} but got "
                            f"{type(value).__name__} {value!r}")
    return value


def _runtime_kind(kname: str, pname: str, value: Any, gpu: bool = False) -> Any:
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return ScalarParam(dt.bool_)
    if isinstance(value, int):
        return ScalarParam(dt.int32 if -(1 << 31) <= value < (1 << 31) else dt.int64)
    if isinstance(value, float):
        return ScalarParam(dt.float32)
    if isinstance(value, np.generic):
        d = dt.from_numpy(value.dtype)
        if d is None:
            raise TileTypeError(f"argument '{pname}' of kernel '{kname}': unsupported scalar "
                                f"dtype {value.dtype}")
        return ScalarParam(d)
    if isinstance(value, ArraySpec):
        d = dt.from_any(value.dtype)
        if d is None:
            raise TileTypeError(f"argument '{pname}' of kernel '{kname}': unknown dtype "
                                f"{value.dtype!r}")
        return ArrayParam(d, value.ndim, value.aligned and gpu)
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        d = dt.from_any(value.dtype)
        if d is None:
            raise TileTypeError(f"argument '{pname}' of kernel '{kname}': arrays of "
                                f"{value.dtype} are not supported")
        aligned = False
        if gpu:
            from .runtime import arrays
            aligned = arrays.aligned(arrays.describe(value))
        return ArrayParam(d, len(value.shape), aligned)
    raise TileTypeError(f"argument '{pname}' of kernel '{kname}' is {type(value).__name__}; "
                        f"kernels take arrays (NumPy, torch, cupy), Python numbers and "
                        f"Constant[...] values")


# ---------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------
def normalize_grid(grid) -> tuple[int, int, int]:
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
        grid = (int(grid),)
    if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3:
        raise TileValueError(f"grid must be a tuple of 1 to 3 positive ints, got {grid!r}")
    dims = []
    for g in grid:
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 1:
            raise TileValueError(f"grid must be a tuple of 1 to 3 positive ints, got {grid!r}")
        dims.append(int(g))
    return tuple(dims + [1] * (3 - len(dims)))


def launch(stream, grid, kernel: Kernel, args: Sequence[Any]) -> None:
    """Runs `kernel` over `grid` with `args` (cuTile's `launch(stream, grid, kernel, args)`).

    NumPy arrays run in the interpreter; so does everything when the knob
    TILEIR_INTERPRET=1 is set (device arrays are copied to the host and back).
    """
    if not isinstance(kernel, Kernel):
        raise TileTypeError(f"launch() needs a @tileir.kernel, got {type(kernel).__name__}")
    if not isinstance(args, (tuple, list)):
        raise TileTypeError(f"launch() takes the kernel arguments as a tuple, got "
                            f"{type(args).__name__}")
    dims = normalize_grid(grid)
    arrays = [a for a in args if _is_array(a)]
    if knobs.INTERPRET.as_bool() or all(_host_array(a) for a in arrays):
        from .host import run_interpreted
        run_interpreted(kernel.compile(args, stage=knobs.LAUNCH_STAGE.raw()), dims, args)
        return
    sig = _torch_signature(kernel, args)
    prepared = kernel._prepared.get(sig) if sig is not None else None
    if prepared is not None:
        prepared.launch(dims, args, stream)
        return
    from .runtime import driver, launcher
    if not driver.has_gpu():
        raise TileUnsupportedFeatureError(
            f"kernel '{kernel.name}' got device arrays but no CUDA GPU is usable here; set "
            f"TILEIR_INTERPRET=1 to run it in the interpreter")
    ck = kernel.compile(args, target=device_target(arrays))
    runtime_args = [args[i] for i in ck.runtime_params]
    launcher.launch(ck.cubin, ck.meta, dims, runtime_args, stream)
    if sig is not None:                  # checked once: later launches only pack and enqueue
        kernel._prepared[sig] = _PreparedLaunch(ck, runtime_args)


# ---------------------------------------------------------------------------
# The fast path: launches whose argument signature was fully checked before
# ---------------------------------------------------------------------------
def _torch_signature(kernel: Kernel, args: Sequence[Any]) -> tuple | None:
    """What the specialization and the checks depend on, computed cheaply for torch
    tensors and Python scalars; None (take the checked path) for anything else."""
    sig = []
    for a, const in zip(args, kernel._const_mask):
        if const:
            sig.append((type(a), a))
        elif type(a).__module__ == "torch" and hasattr(a, "data_ptr"):
            if not a.is_cuda:
                return None
            if any(n > _I32_MAX for n in a.shape):
                return None
            sig.append((a.dtype, a.dim(), a.device.index, _torch_aligned(a)))
        elif type(a) is int:
            sig.append((int, -(1 << 31) <= a < (1 << 31)))
        elif type(a) in (float, bool):
            sig.append(type(a))
        else:
            return None
    return tuple(sig) if len(args) == len(kernel._const_mask) else None


_I32_MAX = 2**31 - 1


def _torch_aligned(t) -> bool:
    """`runtime.arrays.aligned(describe(t))` for a torch tensor, without building the
    description (the hot path of every launch; test_launch checks they agree)."""
    shape, strides, size = t.shape, t.stride(), t.element_size()
    last = len(shape) - 1
    return t.data_ptr() % 16 == 0 and all(
        n == 1 or (st == 1 if i == last else (st * size) % 16 == 0)
        for i, (n, st) in enumerate(zip(shape, strides)))


class _PreparedLaunch:
    """A specialization whose first launch went through every check: the function is
    loaded and the argument kinds are known, so a launch only packs and enqueues."""

    def __init__(self, ck: CompiledKernel, runtime_args: Sequence[Any]):
        from .runtime import launcher
        from .runtime.arrays import describe
        self.ck = ck
        self.meta = ck.meta
        self.indices = ck.runtime_params
        self.device = describe(next(a for a in runtime_args
                                    if hasattr(a, "data_ptr"))).device[1]
        self.block = (ck.meta["num_threads"], 1, 1)
        self.shared = ck.meta["shared_bytes"]
        self.function = launcher._function(ck.cubin, ck.meta, self.device,
                                           self.block[0], self.shared)
        self.scalars = {i: launcher.param_dtype(ck.name, p)
                        for i, p in zip(self.indices, ck.meta["params"])
                        if p["kind"] == "scalar"}
        self.last_grid = None
        import torch       # the signature of a prepared launch has torch tensors
        self.raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

    def launch(self, grid, args, stream) -> None:
        import ctypes
        from .runtime import driver, launcher
        values = []
        for i in self.indices:
            a = args[i]
            d = self.scalars.get(i)
            if d is None:
                values.append(ctypes.c_uint64(a.data_ptr()))
                values.extend(ctypes.c_int32(n) for n in a.shape)
                values.extend(ctypes.c_int64(st) for st in a.stride())
            else:
                values.append(launcher.pack_scalar(d, a, f"argument #{i}"))
        params = launcher.PackedParams(values)
        if grid != self.last_grid:                 # checked once per distinct grid
            launcher.check_grid(self.ck.name, grid)
            self.last_grid = grid
        if stream is None and self.raw_stream is not None:
            handle = self.raw_stream(self.device)  # torch's current stream, without a Stream object
        else:
            handle = launcher.stream_handle(stream, args, self.device)
        with driver.device_context(self.device):
            driver.launch_kernel(self.function, grid, self.block, self.shared, handle,
                                 params.address, self.ck.name)
            if knobs.SYNC_LAUNCH.as_bool():
                driver.synchronize(handle, self.ck.name)


def device_target(arrays) -> str:
    """The compile target for the device holding the first device array."""
    from .runtime import arrays as rt_arrays, driver
    ordinal = driver.current_device()
    for a in arrays:
        info = rt_arrays.describe(a)
        if info.is_cuda:
            ordinal = info.device[1]
            break
    major, minor = driver.compute_capability(ordinal)
    if major == 9:
        return "sm_90a"
    if major == 8:
        return "sm_80"
    raise TileUnsupportedFeatureError(f"GPU {ordinal} has compute capability {major}.{minor}; "
                                      f"tileir targets sm_80 (Ampere) and sm_90a (Hopper)")


def _is_array(a) -> bool:
    return hasattr(a, "dtype") and hasattr(a, "shape") and not isinstance(a, np.generic)


def _host_array(a) -> bool:
    if isinstance(a, np.ndarray):
        return True
    dev = getattr(a, "device", None)
    return type(a).__module__.startswith("torch") and getattr(dev, "type", None) == "cpu"
