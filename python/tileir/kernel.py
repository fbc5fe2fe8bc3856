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
    def classify(self, args: Sequence[Any]) -> list[tuple[str, Any]]:
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
                out.append((name, _runtime_kind(self.name, name, value)))
        return out

    def compile(self, args: Sequence[Any], stage: str = "tile") -> CompiledKernel:
        """The specialization of this kernel for `args`, run up to `stage`."""
        params = self.classify(args)
        key = (tuple((n, _key(k)) for n, k in params), stage)
        ck = self._cache.get(key)
        if ck is None:
            ck = self._build(params, stage)
            self._cache[key] = ck
        return ck

    def _build(self, params, stage: str) -> CompiledKernel:
        ctx = mlir_context()
        with ctx:
            mb = ModuleBuilder(ctx)
            FunctionCompiler(mb, self.source()).build(self.name, params, kernel=True)
            from tileir.dialect import verify
            verify(mb.module)
            _dump(mb.module, "frontend")
            run_stages(mb.module, stage)
        return CompiledKernel(self, mb.module, self.name, params, stage)

    def tile_ir(self, *args, stage: str = "tile") -> str:
        """The Tile IR of this kernel specialized for `args` (compile-time args as values)."""
        return self.compile(args, stage).ir()


def run_stages(module: ir.Module, stop_after: str) -> None:
    """Runs the pipeline stages after `frontend` up to and including `stop_after`."""
    if stop_after == "frontend":
        return
    from tileir import passes
    stages = list(passes.STAGES)
    if stop_after not in stages:
        raise TileValueError(f"unknown stage '{stop_after}'; stages are {', '.join(stages)}")
    for name in stages[1:stages.index(stop_after) + 1]:
        passes.run_stage(module, name)
        _dump(module, name)


def _dump(module: ir.Module, stage: str) -> None:
    if knobs.DUMP_IR.as_bool():
        print(f"// -----// Tile IR after stage '{stage}' //----- //\n{module}", file=sys.stderr)


def _key(k: Any) -> Any:
    if isinstance(k, (bool, int, float)):
        return (type(k).__name__, k)
    return k


def kernel(fn: Callable | None = None, **options) -> Kernel | Callable[[Callable], Kernel]:
    """Marks a tile kernel: `@tileir.kernel` or `@tileir.kernel(num_ctas=..., ...)`.

    Options (`num_ctas`, `occupancy`, `opt_level`, `num_worker_warps`) are
    accepted as in cuTile and recorded for the GPU backend; the interpreter
    ignores them.
    """
    known = {"num_ctas", "occupancy", "opt_level", "num_worker_warps"}
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


def _runtime_kind(kname: str, pname: str, value: Any) -> Any:
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
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        d = dt.from_any(value.dtype)
        if d is None:
            raise TileTypeError(f"argument '{pname}' of kernel '{kname}': arrays of "
                                f"{value.dtype} are not supported")
        return ArrayParam(d, len(value.shape))
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
    ck = kernel.compile(args, stage=knobs.LAUNCH_STAGE.raw())
    if knobs.INTERPRET.as_bool() or all(_host_array(a) for a in args if _is_array(a)):
        from .host import run_interpreted
        run_interpreted(ck, dims, args)
        return
    raise TileUnsupportedFeatureError(
        f"kernel '{kernel.name}' got device arrays, and the GPU backend is not built yet; set "
        f"TILEIR_INTERPRET=1 to run it in the interpreter (arrays are copied to the host)")


def _is_array(a) -> bool:
    return hasattr(a, "dtype") and hasattr(a, "shape") and not isinstance(a, np.generic)


def _host_array(a) -> bool:
    if isinstance(a, np.ndarray):
        return True
    dev = getattr(a, "device", None)
    return type(a).__module__.startswith("torch") and getattr(dev, "type", None) == "cpu"
