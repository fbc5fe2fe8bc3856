"""`@kernel`, `@function`, `Kernel.compile` and `launch` — the user's entry points.

A `Kernel` specializes on its arguments (array dtype, rank and alignment, scalar
types, `Constant` values: see `tileir.specialization`), compiles each
specialization once and runs the requested stages; `launch` runs it on the GPU,
or on the interpreter (NumPy arrays, or any arrays with TILEIR_INTERPRET=1).

Importing this module needs no MLIR, and neither does launching a kernel whose
cubin is in the on-disk compile cache: MLIR, the frontend and the passes are
imported by the functions that compile.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import importlib.util
import inspect
import json
import os
import pathlib
import re
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from . import deadline, knobs
from .errors import (KernelOptionError, TileCacheWarning, TileCompilerExecutionError,
                     TileError, TileIRError, TileTypeError, TileUnsupportedFeatureError,
                     TileValueError)
from .frontend.source import SourceInfo
from .function import KernelEntry
from .annotations import param_annotation, tuple_constness
from .semantics import ByTarget, resolve_option
from .specialization import (RUNTIME_KINDS, ArrayParam, ConstantAnnotation, classify_arg,
                             format_arg_specs, leaf_values, typed_key)

if TYPE_CHECKING:
    from mlir import ir

    # tileir.cache is imported where it is used: `python -m tileir.cache` runs it as
    # __main__, which runpy warns about when `import tileir` has already loaded it.
    from .cache import Cache, Entry

DEFAULT_TARGET = "sm_90a"
# SMs of the GPUs a target is compiled for by default (H100/H200; A100), for compiles
# given a grid but no device
SM_COUNTS = {"sm_90a": 132, "sm_80": 108}
GPU_STAGES = ("layout", "pipeline", "gpu", "llvm", "ptx", "cubin")

_CONTEXT: ir.Context | None = None


def mlir_context() -> ir.Context:
    """The MLIR context kernels are compiled in (one per process, tile dialect loaded)."""
    global _CONTEXT
    if _CONTEXT is None:
        from tileir.dialect import context
        _CONTEXT = context()
    return _CONTEXT


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def spill_bytes(report: str) -> tuple[int, int]:
    """(stores, loads): the bytes every function of ptxas' resource report (`-v`)
    spills, summed.  A report without such a line (not ptxas' `-v` output) raises:
    a check for "no spills" must not pass on a report that says nothing."""
    found = _SPILLS.findall(report or "")
    if not found:
        raise TileError(f"no spill counts in ptxas' report:\n{(report or '').strip()}")
    return sum(int(s) for s, _ in found), sum(int(l) for _, l in found)


@dataclasses.dataclass
class CompiledKernel:
    """One specialization of a kernel: its artifacts and how launch arguments map to IR args.

    Compiled in this process, `module` is the IR after the last stage run.  Loaded
    from the compile cache (compiled ahead of time, maybe on another host), it
    has no `module` (None): `artifacts` reads each stage's artifact from the cache
    `entry` when asked for, and `ir()` says where the IR is instead.
    """

    kernel: "Kernel"
    module: ir.Module | None
    name: str
    params: list[tuple[str, Any]]        # (name, ArrayParam | ScalarParam | constant)
    stage: str
    target: str | None = None
    artifacts: Mapping[str, str | bytes] = dataclasses.field(default_factory=dict)
    meta: dict | None = None             # launch metadata once the `gpu` stage ran
    ptxas_report: str | None = None      # ptxas' resource report once the `cubin` stage ran
    entry: Entry | None = None           # the compile-cache entry it was stored in or loaded from
    # the interpreter's compile of `module`, made at the first launch in the interpreter
    _interpreted: Any = dataclasses.field(default=None, repr=False, compare=False)

    @classmethod
    def from_entry(cls, kernel: "Kernel", params: list[tuple[str, Any]], target: str,
                   entry: Entry) -> "CompiledKernel":
        """The `cubin`-stage specialization stored in a compile-cache entry (no MLIR needed)."""
        from .cache import PTXAS_REPORT
        artifacts = entry.stages()
        artifacts["cubin"]       # read and checked now: a damaged entry fails here, not at launch
        report = entry.text(PTXAS_REPORT) if PTXAS_REPORT in entry.names else None
        return cls(kernel, None, kernel.name, params, "cubin", target, artifacts, entry.meta,
                   report, entry)

    def interpreted(self):
        """This specialization as the interpreter runs it (`interpreter.compile_kernel`),
        from `module` at the first launch in the interpreter and kept: a launch then
        skips hashing the module's bytecode to find it (about a millisecond, each
        launch).  A change made to `module` after that launch is not seen (as a GPU
        launch runs the cubin whatever is done to `module`).  Compiled without the
        interpreter's cache by content (`interpreter.CACHE`, for `interpreter.run`):
        its key, the module's bytecode hashed, cost ~0.5 ms a specialization, and
        only ~4 % of the fast tier's specializations found another's compile there."""
        if self._interpreted is None:
            from tileir import interpreter
            self._interpreted = interpreter.compile_kernel(self.module, self.name)
        return self._interpreted

    @property
    def loaded_from_cache(self) -> bool:
        """True when this specialization came from the on-disk cache, not from a compile here."""
        return self.module is None and self.entry is not None

    @property
    def spills(self) -> tuple[int, int]:
        """(stores, loads): the bytes of local memory ptxas spilled to, from its report
        (every function of the cubin, summed); (0, 0) is a kernel that never spills."""
        if self.ptxas_report is None:
            raise TileError(f"kernel '{self.name}' has no ptxas report (stage "
                            f"'{self.stage}': compile to 'cubin')")
        return spill_bytes(self.ptxas_report)

    @property
    def cubin(self) -> bytes:
        if "cubin" not in self.artifacts:
            raise TileError(f"kernel '{self.name}' was compiled only to stage '{self.stage}'")
        return self.artifacts["cubin"]

    @property
    def runtime_params(self) -> list[int]:
        """The positions of the launch arguments that are kernel arguments (a list of
        arrays or a tuple is one position: `runtime_args` spreads it)."""
        return [i for i, (_, k) in enumerate(self.params) if isinstance(k, RUNTIME_KINDS)]

    def runtime_args(self, args: Sequence[Any]) -> list[Any]:
        """The kernel's arguments in ABI order: `Constant`s dropped, each list of
        arrays spread into its elements (one array argument each), each tuple into its
        runtime items (recursively; its Constant items dropped); a list passed as a
        table (`TableListParam`: an exported kernel's) is its table, one argument."""
        return [leaf for i in self.runtime_params
                for leaf in leaf_values(self.params[i][1], args[i])]

    def ir(self) -> str:
        if self.module is None:
            raise TileError(f"kernel '{self.name}' was loaded from the compile cache entry "
                            f"{self.entry.path}, which keeps each stage's IR as text but no "
                            f"MLIR module: read artifacts['<stage>'] (stages: "
                            f"{', '.join(self.artifacts)}), or set TILEIR_CACHE=0 to compile "
                            f"it here")
        return str(self.module)


class Kernel(KernelEntry):
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
        self._dispatchers: dict[str, Any] = {}    # argument kinds -> runtime.dispatch.Dispatcher
        self._fast = None                          # the latest dispatcher's fast path
        # the same for launches with programmatic_dependent_launch=True (their plans
        # launch with programmatic stream serialization where the kernel's meta allows)
        self._pdl_dispatchers: dict[str, Any] = {}
        self._fast_pdl = None
        self._may_retile: bool | None = None
        # (specialization, free grid axes) whose compile for a split wish split nothing
        self._no_split: set[tuple] = set()
        self._wishes: dict[tuple, str | None] = {}
        # what tileir acts on of each annotation (tileir.annotations.param_annotation)
        self.param_annotations = {p: param_annotation(self.annotations.get(p))
                                  for p in self.signature.parameters}
        self._const_mask = tuple(isinstance(self.param_annotations[p], ConstantAnnotation)
                                 for p in self.signature.parameters)
        # which items of each tuple parameter are Constants (the fast path's keys)
        self._tuple_consts = tuple(tuple_constness(self.param_annotations[p])
                                   for p in self.signature.parameters)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<tileir kernel {self.name}{self.signature}>"

    def replace_hints(self, **hints) -> "Kernel":
        """This kernel with some options replaced (cuTile's name; each value may be a
        ByTarget): a new Kernel with its own compiled specializations."""
        return kernel(self.fn, **{**self.options, **hints})

    def __call__(self, *args, **kwargs):
        # a TypeError, as cuTile's: a kernel is not a Python callable
        raise TypeError(f"tile kernels cannot be called directly: kernel '{self.name}' is "
                        f"launched with tileir.launch(stream, grid, {self.name}, args)")

    def source(self) -> SourceInfo:
        if self._source is None:
            self._source = SourceInfo(self.fn)
        return self._source

    # -- specialization ------------------------------------------------------
    def classify(self, args: Sequence[Any], gpu: bool = False) -> list[tuple[str, Any]]:
        """The specialization for `args`: `(name, ArrayParam | ScalarParam | constant)` each."""
        names = list(self.signature.parameters)
        if len(args) != len(names):
            raise TileTypeError(f"kernel '{self.name}' takes {len(names)} arguments "
                                f"({', '.join(names)}), got {len(args)}")
        return [(name, classify_arg(self.name, name, self.param_annotations[name], value, gpu))
                for name, value in zip(names, args)]

    def compile(self, args: Sequence[Any], stage: str | None = None,
                target: str | None = None, *, cache: Cache | None = None,
                grid: Sequence[int] | None = None,
                sm_count: int | None = None) -> CompiledKernel:
        """The specialization of this kernel for `args`, run up to `stage`.

        With a `target` (`"sm_80"`, `"sm_90a"`) the default stage is `cubin` and
        arrays specialize on alignment; `args` may hold `ArraySpec`s instead of
        arrays to compile ahead of time on a machine without a GPU.

        The `cubin` stage, what a launch needs, goes through the on-disk compile
        cache (`cache`, by default `Cache()`: TILEIR_CACHE_DIR; TILEIR_CACHE=0
        turns it off).  A hit needs no MLIR and gives a CompiledKernel without a
        `module`; a miss compiles and stores every stage's artifact.  In front of
        the disk, each Kernel keeps what it compiled or loaded in memory.

        `grid` (the launch's, with the GPU's `sm_count`, by default the target's)
        lets the compiler retile a tensor-core kernel for it (docs/tensor-cores.md,
        "Retiling"): the compiled kernel's `meta["grid_scale"]` then says how the
        launch grid maps to the hardware's.  `launch` passes both.
        """
        if stage is None:
            stage = "cubin" if target else "tile"
        if stage in GPU_STAGES and target is None:
            target = DEFAULT_TARGET
        params = self.classify(args, gpu=target is not None)
        wish = self.grid_wish(grid, sm_count or SM_COUNTS.get(target, 0), args) \
            if grid is not None and target is not None else None
        spec = (tuple((n, _key(k)) for n, k in params), target)
        if wish is not None and _grid_rewrite_kind(wish) is not None and any(
                (spec, k) in self._no_split for k in _no_rewrite_keys(wish)):
            wish = None           # this specialization rewrites nothing on such grids
        # An explicit cache is part of the in-memory key: compiling into it must fill it.
        key = (spec[0], stage, target, None if cache is None else cache.root, wish)
        ck = self._cache.get(key)
        if ck is None:
            if stage == "cubin":
                from .cache import Cache
                ck = self._load_or_build(params, target, cache or Cache(), wish,
                                         self._compiled_to_gpu(spec[0], target, wish))
            else:
                ck = self._build(params, stage, target, wish)
            self._cache[key] = ck
            if wish is not None and _grid_rewrite_kind(wish) is not None and \
                    ck.meta is not None and not ck.meta.get("grid_rewrites"):
                # Nothing rewritten for the grid (tileir.backend.layout.split: no dim splits,
                # or none keeps 2 blocks' worth of bytes, whatever the wish's count; no
                # online softmax loop; no loops to deal to a cluster): the kernel as
                # written, which launches of this specialization on any grid of this
                # kind with these free axes share.
                self._no_split.add((spec, _grid_rewrite_kind(wish)))
                self._cache.setdefault(key[:-1] + (None,), ck)
        return ck

    def grid_wish(self, grid: Sequence[int], sm_count: int,
                  args: Sequence[Any] = ()) -> str | None:
        """What a launch over `grid` with `args` would like from retiling
        (`backend.layout.grid_wish`: the grid's size against the GPU's, the arrays' short
        dims), for kernels that may retile: those whose source (or a helper's) names
        `mma` or `matmul`; for the others a split of their tiles across more blocks
        when the grid is small (`split_wish`; `compile` drops it for a specialization
        that split nothing before).  None for kernels that set `retile` (False: as
        written)."""
        if self.options.get("retile") is not None:
            return None
        if self._may_retile is None:
            from .cache import kernel_sources
            self._may_retile = any(re.search(r"\b(mma|matmul)\b", src["text"])
                                   for src in kernel_sources(self))
        # every launch asks: remembered per grid and argument shapes
        key = (tuple(grid), sm_count, tuple(getattr(a, "shape", None) for a in args))
        wish = self._wishes.get(key, _NO_WISH)
        if wish is _NO_WISH:
            from .backend.layout.grid_wish import grid_wish, short_dims, split_wish
            if self._may_retile:
                shapes = [tuple(a.shape) if _is_array(a) else None for a in args]
                wish = grid_wish(normalize_grid(grid), sm_count,
                                 short_dims(list(self.signature.parameters), shapes))
            else:
                wish = split_wish(normalize_grid(grid), sm_count)
            if len(self._wishes) >= _WISHES_PER_KERNEL:
                self._wishes.clear()
            self._wishes[key] = wish
        return wish

    def _remember(self, kinds: str, grid, args: Sequence[Any], plan,
                  programmatic_dependent_launch: bool = False) -> None:
        """Files `plan` for the fast path of launches like this one (`launch`), those
        with `programmatic_dependent_launch` apart."""
        from .runtime.dispatch import Dispatcher
        table = self._pdl_dispatchers if programmatic_dependent_launch else self._dispatchers
        d = table.get(kinds)
        if d is None:
            d = table[kinds] = Dispatcher(self.name, kinds, tuple_consts=self._tuple_consts)
        try:
            d.remember(grid, args, plan)
        except TypeError:            # an unhashable grid: such launches stay on the checked path
            return
        if programmatic_dependent_launch:
            self._fast_pdl = d.fast
        else:
            self._fast = d.fast

    def _compiled_to_gpu(self, spec, target: str, wish: str | None) -> CompiledKernel | None:
        """This specialization compiled (in memory) up to stage `llvm` or `gpu`, if it
        was: a `cubin` compile goes on from there instead of running the stages before
        again (the interpreter-then-simulator-then-cubin pattern of many tests and
        tools).  From `gpu` on no stage is rerun (the shared-memory budget sends only the
        `gpu` stage back), so going on gives what compiling from the start gives."""
        if knobs.dump_ir():                  # the dump shows every stage of this compile
            return None
        for stage in ("llvm", "gpu"):
            ck = self._cache.get((spec, stage, target, None, wish))
            if ck is not None and ck.module is not None:
                return ck
        return None

    def _load_or_build(self, params, target: str, cache: Cache,
                       wish: str | None = None,
                       earlier: CompiledKernel | None = None) -> CompiledKernel:
        """The `cubin`-stage specialization from the disk cache, or compiled and put there."""
        from .cache import PTXAS_REPORT, STAGE_FILES, cache_key
        key = cache_key(self, params, target, {"grid_wish": wish} if wish else None)
        loaded = self._from_cache(params, target, cache, key,
                                  f"kernel '{self.name}' is compiled again and the entry "
                                  f"replaced")
        if loaded is not None:
            return loaded
        if wish is not None and _mlir_import_error() is not None:
            # The grid's wish only buys speed (the rewrites keep every result): without
            # MLIR to compile it, the kernel as written serves, if it is cached (as
            # `tile-compile`, which knows no grid, leaves it).
            loaded = self._from_cache(params, target, cache,
                                      cache_key(self, params, target, None), "it is dropped")
            if loaded is not None:
                return loaded
        _require_mlir(self, params, target, key, cache)
        ck = self._build(params, "cubin", target, wish, earlier)
        files = {STAGE_FILES[stage]: data for stage, data in ck.artifacts.items()}
        if ck.ptxas_report is not None:
            files[PTXAS_REPORT] = ck.ptxas_report
        ck.entry = cache.put(key, self.name, files, ck.meta)
        return ck

    def _from_cache(self, params, target: str, cache: Cache, key: str,
                    damaged: str) -> CompiledKernel | None:
        """The specialization the cache entry `key` holds, or None: no entry, or one
        damaged (a warning ending in `damaged` says what happens next) or built by
        another toolchain, which are discarded."""
        from .cache import CacheCorruptError
        entry = cache.get(key)
        if entry is None:
            return None
        try:
            loaded = CompiledKernel.from_entry(self, params, target, entry)
        except CacheCorruptError:            # garbage of the right size
            warnings.warn(f"the compile cache entry {entry.path} is damaged (an artifact "
                          f"does not match its manifest): {damaged}", TileCacheWarning,
                          stacklevel=5)
            loaded = None
        if loaded is not None and not _built_by_another_toolchain(entry.meta):
            return loaded
        cache.discard(key)
        return None

    def _build(self, params, stage: str, target: str | None,
               wish: str | None = None,
               earlier: CompiledKernel | None = None) -> CompiledKernel:
        """Compiles with MLIR: imported here, so that tileir imports and launches without it.
        With `earlier` (this specialization at an earlier stage, `_compiled_to_gpu`),
        a copy of its module goes on from its stage."""
        from mlir import ir
        from tileir.dialect import verify as verify_module
        if target is not None:
            _check_target(target)
        ctx = mlir_context()
        with ctx, deadline.compiling(self.name):
            module = _copy_at_stage(earlier) if earlier is not None else None
            if module is not None:
                artifacts = StageIR(earlier.artifacts)
            else:
                module = self._frontend(ctx, params, target, wish)
                if stage == "frontend":
                    # (a compile going on verifies it before its first stage)
                    verify_module(module)
                artifacts = StageIR()
                artifacts.record("frontend", module)
            run_stages(module, stage, artifacts)
            meta_json = _string_attr(module, "tile.kernel_meta")     # from stage `gpu` on
            meta = None if meta_json is None else {**json.loads(meta_json), "target": target}
            fit = _string_attr(module, "tile.fit")        # backend/layout/budget.py
            if meta is not None and fit is not None:
                meta["fit"] = fit
            if meta is not None and "cubin" in artifacts:
                meta["toolchain"] = toolchain_versions()
            report = _string_attr(module, "tile.ptxas_report")
        return CompiledKernel(self, module, self.name, params, stage, target, artifacts,
                              meta, report)

    def _frontend(self, ctx, params, target: str | None, wish: str | None):
        """The kernel's module at stage `frontend` (not yet verified)."""
        from mlir import ir
        from .frontend.compiler import FunctionCompiler, ModuleBuilder
        mb = ModuleBuilder(ctx)
        fn = FunctionCompiler(mb, self.source()).build(self.name, params, kernel=True)
        self._apply_hints(fn, target)
        self._apply_early_loads(fn, params)
        if wish is not None:
            from .backend.layout.retile import WISH_ATTR
            fn.attributes[WISH_ATTR] = ir.StringAttr.get(wish)
        _dump(mb.module, "frontend")
        if target is not None:
            mb.module.operation.attributes["tile.target"] = ir.StringAttr.get(target)
        return mb.module

    def _apply_hints(self, fn, target: str | None) -> None:
        """Kernel options that steer the GPU stages become function attributes."""
        from mlir import ir
        i32 = ir.IntegerType.get_signless(32)
        target = target or ""
        for option, attr in (("num_warps", "tile.num_warps"), ("occupancy", "tile.occupancy"),
                             ("num_stages", "tile.num_stages")):
            value = resolve_option(self.options.get(option), target)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise KernelOptionError(f"kernel '{self.name}': option {option} must be a "
                                            f"positive int, got {value!r}")
                if option == "num_stages" and not 2 <= value <= 8:
                    raise KernelOptionError(f"kernel '{self.name}': option num_stages must be "
                                            f"2 to 8 (shared-memory stages of a pipelined "
                                            f"loop), got {value}")
                fn.attributes[attr] = ir.IntegerAttr.get(i32, value)
        ahead = self.options.get("l2_ahead")
        if ahead is not None:
            if isinstance(ahead, bool) or not isinstance(ahead, int) or not 0 <= ahead <= 16:
                raise KernelOptionError(f"kernel '{self.name}': option l2_ahead must be an "
                                        f"int from 0 to 16 (steps of a producer warpgroup's "
                                        f"L2 lookahead), got {ahead!r}")
            if ahead:
                fn.attributes["tile.l2_ahead"] = ir.IntegerAttr.get(i32, ahead)
        pair = resolve_option(self.options.get("pair_axis"), target)
        if pair is not None:
            if isinstance(pair, bool) or not isinstance(pair, int) or pair not in (0, 1, 2):
                raise KernelOptionError(f"kernel '{self.name}': option pair_axis must be a "
                                        f"grid axis, 0, 1 or 2 (the axis whose neighbouring "
                                        f"blocks run as a cluster of two), got {pair!r}")
            clash = [o for o in ("persistent", "stream_k", "copy_parts", "alternate_owners")
                     if self.options.get(o)]
            if self.options.get("block_order") in ("grouped", "reversed"):
                clash.append(f"block_order={self.options['block_order']!r}")
            if clash:
                what = clash[0] if "=" in clash[0] else f"{clash[0]}=True"
                raise KernelOptionError(f"kernel '{self.name}': option pair_axis={pair} "
                                        f"does not combine with {what} (the pair's blocks "
                                        f"share a ring of whole slots, one tile a block, "
                                        f"launched as written in the hardware's order)")
            from .backend.pipeline.cluster_pairs import REQUEST_ATTR
            fn.attributes[REQUEST_ATTR] = ir.IntegerAttr.get(i32, pair)
        for option in ("warp_specialize", "persistent", "tma_store", "stream_k",
                       "programmatic_launch", "l2_prefetch", "product_rotation",
                       "rotation_fence", "pingpong", "copy_parts", "fp_fusion",
                       "warpgroup_split", "split_replicas", "early_rescale",
                       "mbarrier_handoffs", "skewed_handoffs", "merged_handoffs",
                       "alternate_owners"):
            flag = self.options.get(option)
            if flag is not None:
                if not isinstance(flag, bool):
                    raise KernelOptionError(f"kernel '{self.name}': option {option} must be "
                                            f"True or False, got {flag!r}")
                fn.attributes[f"tile.{option}"] = ir.BoolAttr.get(flag)
        if self.options.get("alternate_owners") and (
                not self.options.get("warpgroup_split") or self.options.get("split_replicas")):
            # the alternation hands the owner's role from one warpgroup to the other:
            # it needs owners that run alone (not replicas)
            raise KernelOptionError(f"kernel '{self.name}': option alternate_owners=True "
                                    f"needs warpgroup_split=True without split_replicas "
                                    f"(got warpgroup_split="
                                    f"{self.options.get('warpgroup_split')!r}, split_replicas="
                                    f"{self.options.get('split_replicas')!r})")
        if self.options.get("merged_handoffs") and self.options.get("warpgroup_split") and (
                self.options.get("split_replicas") or self.options.get("mbarrier_handoffs")
                or self.options.get("alternate_owners")
                or self.options.get("skewed_handoffs") is False):
            # one wait and one signal for a step's hand-offs: an option of the owner's
            # skewed named-barrier protocol (owner_runs.merged_handoffs), which these
            # replace; without the split it does nothing, as the split's other options
            raise KernelOptionError(f"kernel '{self.name}': option merged_handoffs=True "
                                    f"needs the warpgroup split's skewed named-barrier "
                                    f"hand-offs (not split_replicas, mbarrier_handoffs, "
                                    f"alternate_owners or skewed_handoffs=False); got "
                                    + ", ".join(f"{k}={self.options.get(k)!r}" for k in (
                                        "split_replicas", "mbarrier_handoffs",
                                        "alternate_owners", "skewed_handoffs")))
        if self.options.get("fp_fusion"):
            _allow_contraction(fn)
        order = self.options.get("block_order")
        if order is not None:
            if order not in ("grouped", "linear", "reversed"):
                raise KernelOptionError(f"kernel '{self.name}': option block_order must be "
                                        f"'grouped', 'linear' or 'reversed', got {order!r}")
            fn.attributes["tile.block_order"] = ir.StringAttr.get(order)
        retile = self.options.get("retile")
        if retile is not None and retile is not False:
            fn.attributes["tile.retile"] = ir.DenseI64ArrayAttr.get(
                _retile_option(self.name, retile))
        hints = self.options.get("cache_hints")
        if hints is not None and not isinstance(hints, bool):
            raise KernelOptionError(f"kernel '{self.name}': option cache_hints must be True, "
                                    f"False or None (automatic), got {hints!r}")
        if hints is not None:
            fn.attributes["tile.cache_hints"] = ir.BoolAttr.get(hints)

    def _apply_early_loads(self, fn, params) -> None:
        """The `early_loads` option: the names of array arguments whose tiles a
        pipelined loop may start loading before the kernel's grid-dependency wait
        (`tile.early_loads`, backend/pipeline/software_pipeline.py `load_early`).  Each
        must name an array parameter; the pipeline stage refuses one the kernel
        writes (programmatic.py `early_arrays`)."""
        from mlir import ir
        names = self.options.get("early_loads")
        if names is None:
            return
        if isinstance(names, str) or not isinstance(names, (tuple, list)) or \
                not all(isinstance(n, str) for n in names):
            raise KernelOptionError(f"kernel '{self.name}': option early_loads must be a "
                                    f"tuple of argument names (arrays no kernel before "
                                    f"this one in the stream writes), got {names!r}")
        kinds = dict(params)
        for n in names:
            if n not in kinds:
                raise KernelOptionError(f"kernel '{self.name}': option early_loads names "
                                        f"{n!r}, which is not one of its parameters "
                                        f"({', '.join(kinds)})")
            if not isinstance(kinds[n], ArrayParam):
                raise KernelOptionError(f"kernel '{self.name}': option early_loads names "
                                        f"{n!r}, which is not an array here (got "
                                        f"{kinds[n]!r}); it lists arrays whose tiles may "
                                        f"be loaded before the wait for the previous kernel")
        if names:
            fn.attributes["tile.early_loads"] = ir.ArrayAttr.get(
                [ir.StringAttr.get(n) for n in dict.fromkeys(names)])

    def tile_ir(self, *args, stage: str = "tile") -> str:
        """The Tile IR of this kernel specialized for `args` (compile-time args as values)."""
        return self.compile(args, stage).ir()


class StageIR(Mapping):
    """A compile's artifacts by stage (`CompiledKernel.artifacts`): IR text, PTX text,
    cubin bytes.  An IR stage is kept as a copy of the module after it and printed
    when first read: a copy takes a millisecond where printing a `gpu`-stage module
    takes 10 to 30, and most compiles that stop before `cubin` (the interpreter's, the
    simulator's) never read most of their stages' text.  What is read is what
    printing the module right after its stage gave."""

    def __init__(self, earlier: Mapping | None = None):
        # stage -> its text or bytes, or a copy of the module after it (not yet printed)
        self._data: dict[str, Any] = dict(earlier._data) if isinstance(earlier, StageIR) \
            else dict(earlier or {})

    def record(self, stage: str, module: ir.Module) -> None:
        """Keeps a copy of `module` as it is after `stage`, to print when read."""
        self._data[stage] = module.operation.clone().operation   # (clone gives an OpView)

    def put(self, stage: str, data: str | bytes) -> None:
        self._data[stage] = data

    def kept(self, stage: str):
        """The copy of the module kept for `stage` (a detached `builtin.module` op,
        not to be changed), if it is kept and not yet printed; else None."""
        from mlir import ir
        kept = self._data.get(stage)
        return kept if isinstance(kept, ir.Operation) else None

    def module_copy(self, stage: str):
        """A new module like the one after `stage`, if that stage's copy is kept
        (not for a stage given as text or bytes); else None."""
        from mlir import ir
        kept = self.kept(stage)
        if kept is None:
            return None
        from tileir.passes.pipeline import _replace_module      # the stage driver's rewind
        module = ir.Module.create(loc=kept.location)
        _replace_module(module, kept.clone())
        return module

    def __getitem__(self, stage: str) -> str | bytes:
        data = self._data[stage]
        if isinstance(data, (str, bytes)):
            return data
        text = str(data)
        self._data[stage] = text     # (a copy that another StageIR shares stays there)
        return text

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"StageIR({list(self._data)})"


def _copy_at_stage(ck: "CompiledKernel"):
    """A copy of the module `ck` had after its stage (from its artifacts' copy, so that
    a change made to `ck.module` since does not carry over), or of `ck.module` if it
    still prints as it did then; None otherwise: the compile starts afresh."""
    from mlir import ir
    from tileir.passes.pipeline import _replace_module      # the stage driver's rewind
    if isinstance(ck.artifacts, StageIR):
        module = ck.artifacts.module_copy(ck.stage)
        if module is not None:
            return module
    if str(ck.module) != ck.artifacts.get(ck.stage):
        return None
    module = ir.Module.create(loc=ck.module.operation.location)
    _replace_module(module, ck.module.operation.clone())
    return module


def run_stages(module: ir.Module, stop_after: str,
               artifacts: StageIR | None = None) -> StageIR:
    """Runs the pipeline stages after `frontend` up to and including `stop_after`;
    returns each stage's artifact (IR; PTX text; cubin bytes), in `artifacts` if given."""
    artifacts = StageIR() if artifacts is None else artifacts
    if stop_after == "frontend":
        return artifacts
    from tileir import passes
    stages = list(passes.STAGES)
    if stop_after not in stages:
        raise TileValueError(f"unknown stage '{stop_after}'; stages are {', '.join(stages)}")
    clock = deadline.active()

    def record(name: str, module: ir.Module) -> None:
        _dump(module, name)
        if clock is not None:
            clock.check(f"after stage '{name}'")
        if name in ("ptx", "cubin"):
            from tileir.backend.target.toolchain import binary_object
            data = binary_object(module)[1].object
            artifacts.put(name, data.decode() if name == "ptx" else bytes(data))
        else:
            artifacts.record(name, module)

    passes.run_stages(module, stop_after=stop_after, after_stage=record)
    return artifacts


def _dump(module: ir.Module, stage: str) -> None:
    if knobs.dump_ir():
        print(f"// -----// Tile IR after stage '{stage}' //----- //\n{module}", file=sys.stderr)


def _string_attr(module: ir.Module, name: str) -> str | None:
    from mlir import ir
    attrs = module.operation.attributes
    return ir.StringAttr(attrs[name]).value if name in attrs else None


def _allow_contraction(fn) -> None:
    """`fastmath<contract>` on the f32 multiplies, adds and subtracts of a kernel (the
    option `fp_fusion`): LLVM then fuses a multiply into the add or subtract that takes
    its result (`fma.rn.f32`, one rounding) where it may."""
    from mlir import ir
    contract = ir.Attribute.parse("#arith.fastmath<contract>")

    def visit(op):
        op = op.operation
        if op.name in ("arith.mulf", "arith.addf", "arith.subf"):
            t = op.results[0].type
            elem = t.element_type if isinstance(t, ir.ShapedType) else t
            if isinstance(elem, ir.F32Type):
                op.attributes["fastmath"] = contract
        return ir.WalkResult.ADVANCE

    fn.operation.walk(visit)


def _retile_option(kernel: str, value: Any) -> list[int]:
    """`retile=(axis, factor)` -> [axis, num, den]; factor a power of two, 1/8 to 8."""
    from fractions import Fraction
    ok = isinstance(value, (tuple, list)) and len(value) == 2 and \
        isinstance(value[0], int) and not isinstance(value[0], bool) and 0 <= value[0] <= 2 \
        and isinstance(value[1], (int, float, Fraction)) and not isinstance(value[1], bool)
    if ok:
        f = Fraction(value[1]).limit_denominator(8)
        ok = f != 1 and f == value[1] and Fraction(1, 8) <= f <= 8 and \
            (f.numerator & (f.numerator - 1)) == 0 and (f.denominator & (f.denominator - 1)) == 0
    if not ok:
        raise KernelOptionError(f"kernel '{kernel}': option retile must be False, None "
                                f"(automatic) or (axis, factor) with axis 0, 1 or 2 and factor "
                                f"a power of two from 1/8 to 8 other than 1, e.g. (1, 2) or "
                                f"(1, 0.5); got {value!r}")
    return [value[0], f.numerator, f.denominator]


def _key(k: Any) -> Any:
    """A specialization entry as a key: constants typed (1, True and 1.0 differ, -0.0 and
    0.0 too, in a Constant tuple and a TupleParam as well: specialization.typed_key)."""
    return typed_key(k)


def _check_target(target: str) -> None:
    from tileir.backend.target.toolchain import TARGETS
    if target not in TARGETS:
        raise TileValueError(f"unknown target '{target}'; tileir compiles for "
                             f"{', '.join(TARGETS)}")


# ---------------------------------------------------------------------------
# The compile cache's side of compiling
# ---------------------------------------------------------------------------
def _built_by_another_toolchain(meta: dict) -> bool:
    """Whether a cached cubin was built by another ptxas or MLIR than this host would
    use.  The key holds tileir's sources and the pinned wheels, not the tools actually
    found (TILEIR_PTXAS, a CUDA toolkit on PATH, a hand-installed MLIR): a host that
    can compile checks what the entry recorded (a subprocess, once per process); a
    host that cannot (no MLIR or no ptxas: an ahead-of-time cache) uses the entry."""
    recorded = meta.get("toolchain")
    if not recorded:
        return False
    try:
        import mlir.ir  # noqa: F401
        here = toolchain_versions()
    except (ImportError, TileIRError):
        return False
    return any(recorded.get(tool) != here[tool] for tool in here)


def toolchain_versions() -> dict[str, str]:
    """What built a cubin, recorded in its metadata: ptxas' version and the MLIR wheel's.

    Recorded, not keyed: the key must be computable on a GPU host that has neither.
    """
    from tileir.backend.target.toolchain import find_ptxas
    return {"ptxas": _ptxas_version(find_ptxas()), "mlir": _mlir_version()}


@functools.cache
def _ptxas_version(ptxas: str) -> str:
    from tileir.backend.target.toolchain import ptxas_version
    return ptxas_version(ptxas)          # a subprocess: once per ptxas and process


@functools.cache
def _mlir_version() -> str:
    """The distribution that installed the `mlir` package, whatever its name: the
    dist-infos next to the package whose name says mlir (reading a few small files).
    A package without one (put on the path by hand) is "unknown (<its directory>)":
    asking every installed distribution instead (packages_distributions reads every
    RECORD) took 3.9 s of a 5.5 s cold compile on the GPU machine."""
    import mlir
    found = set()
    for root in {os.path.dirname(p) for p in getattr(mlir, "__path__", [])}:
        try:
            infos = [e for e in os.listdir(root)
                     if e.endswith(".dist-info") and "mlir" in e.lower()]
        except OSError:
            continue
        for info in infos:
            dist = importlib.metadata.PathDistribution(pathlib.Path(root, info))
            if "mlir" in _top_level(dist):
                found.add(f"{dist.metadata['Name']}=={dist.version}")
    if not found:
        where = sorted(getattr(mlir, "__path__", []))
        return f"unknown ({where[0] if where else 'mlir'})"
    return ", ".join(sorted(found))


def _top_level(dist: importlib.metadata.Distribution) -> set[str]:
    text = dist.read_text("top_level.txt")
    if text is not None:
        return set(text.split())
    return {f.parts[0] for f in dist.files or () if f.parts}


def _mlir_import_error() -> ImportError | None:
    """Why the MLIR Python bindings cannot be imported here, or None."""
    try:
        import mlir.ir  # noqa: F401
    except ImportError as e:
        return e
    return None


def _require_mlir(kernel: "Kernel", params, target: str, key: str, cache: Cache) -> None:
    """A cache miss is compiled; without MLIR, say what is missing and how to fill the cache."""
    error = _mlir_import_error()
    if error is not None:
        raise TileCompilerExecutionError(_miss_message(kernel, params, target, key, cache,
                                                       error)) from None


def _miss_message(kernel: "Kernel", params, target: str, key: str, cache: Cache,
                  error: ImportError) -> str:
    spec = format_arg_specs(params)
    where = str(cache.root) if cache.enabled else "disabled (TILEIR_CACHE=0)"
    return (f"kernel '{kernel.name}' with --args '{spec}' for {target} is not in the compile "
            f"cache, and cannot be compiled here: the MLIR Python bindings are missing "
            f"({error})\n"
            f"  key:   {key}\n"
            f"  cache: {where}\n"
            f"compile it ahead of time on a host with MLIR and ptxas and the same tileir "
            f"source, then copy that host's cache directory here (or point TILEIR_CACHE_DIR "
            f"at the copy):\n"
            f"    tile-compile {aot_reference(kernel)} --target {target} --args '{spec}'")


def aot_reference(kernel: "Kernel") -> str:
    """How tile-compile names `kernel`: `package.module:name` when its module imports
    by that name, else `path/to/file.py:name`."""
    module = kernel.fn.__module__
    path = inspect.getsourcefile(kernel.fn)
    try:
        spec = importlib.util.find_spec(module) if module != "__main__" else None
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin and path and os.path.exists(spec.origin) \
            and os.path.samefile(spec.origin, path):
        return f"{module}:{kernel.name}"
    return f"{path}:{kernel.name}"


def kernel(fn: Callable | None = None, **options) -> Kernel | Callable[[Callable], Kernel]:
    """Marks a tile kernel: `@tileir.kernel` or `@tileir.kernel(num_ctas=..., ...)`.

    Options: `occupancy` (cuTile: the thread blocks each SM should hold; the
    register budget follows) and the TileLang-style hints `num_warps` (threads
    per block / 32), `num_stages` (shared-memory stages of a software-pipelined
    loop, 2 to 8; default: what fits, up to 4), `block_order` ("grouped": a 2-d
    grid's blocks take their tiles in groups along axis 0 for L2 reuse, the
    default for tensor-core loops; "linear": the hardware's order; "reversed": the
    grouped order from its last tile, so the heaviest tiles of causal attention,
    whose trip count grows with `bid(0)`, start first and the light ones fill the
    tail; not for persistent kernels),
    `warp_specialize` (sm_90a: a producer warpgroup issues the pipelined loop's
    copies and hands its registers to the consumers; by default on sm_90a for
    grids smaller than the GPU, else off), `retile`
    (None, the default: a tensor-core kernel's tiles along one grid axis are
    rescaled for the launch's grid, twice as wide for a grid of many waves and
    up to 4 times narrower for one smaller than the GPU, where the kernel uses
    that axis's block index only to index tiles — its K tiles then up to as many
    times longer — and shrunk to 64 along an axis whose arrays have at most 64
    elements there (decode rows); False: the tiles as written;
    `(axis, factor)`: that rescaling, always; docs/tensor-cores.md),
    `persistent` (each block loops over tiles of the grid, as many blocks as fit
    the GPU, its pipelined loop running on from tile to tile; None, the default:
    on for a tensor-core kernel retiled wider for a grid of many waves on sm_90a
    unless it asks for warp specialization, else off), `stream_k` (True: a persistent
    tensor-core kernel whose last wave would be less than 90 % full splits its last
    waves' tiles along K between neighbouring blocks, so all blocks end together;
    off by default: measured slower on the H100, docs/tensor-cores.md), `tma_store` (sm_90a: a tensor-core accumulator is
    stored through shared memory by TMA, in slabs of 128-byte rows; on by
    default; False stores it from registers), `programmatic_launch` (sm_90a: the
    kernel waits for the previous kernel in the stream at its top and lets the next
    one launch, so launches overlap runs; on by default for kernels that place no
    `grid_dependency_control_*` themselves (those are launched so where the launch
    passes `programmatic_dependent_launch=True`, or always with True here), False
    launches it strictly after the previous kernel ends whatever the launch asks,
    docs/gpu-backend.md), `l2_prefetch` (sm_90a, a kernel launched programmatically:
    True issues, before its wait for the previous kernel, L2 prefetches of the tiles
    its pipelined loop's first stages load, so they stream in while that kernel
    still runs; off by default until measured, docs/gpu-backend.md),
    `early_loads` (sm_90a, a kernel launched programmatically: a tuple of array
    argument names, the author's promise that no kernel before this one in the stream
    writes them (a model's weights, say): the first pipelined loop's ring starts its
    first S - 1 tiles of those arrays into shared memory before the wait for the
    previous kernel, the other arrays' tiles of the same slots after it; an array
    the kernel itself writes is refused; none by default, docs/gpu-backend.md),
    `product_rotation` (sm_90a, a loop of two chained products such as attention's:
    True, the default, issues iteration j's first product beside the second of
    iteration j - 1; False keeps both in their iteration, which frees a ring slot an
    iteration earlier; docs/attention.md), `rotation_fence` (sm_90a, a rotated loop:
    True puts a CTA memory fence before the wait for the second product, the one
    instruction that keeps ptxas from placing that wait above the softmax's
    exponentials, which then run after the product instead of beside it; off by
    default until measured, docs/attention.md), `pingpong` (sm_90a, a rotated loop
    of a warp-specialized kernel with two consumer warpgroups: True makes the two
    take turns at issuing their products, one's softmax beside the other's
    products, FlashAttention-3's ping-pong; off by default until measured,
    docs/attention.md), `copy_parts` (sm_90a, a pipelined loop whose loaded tiles
    only feed wgmma products, not rotated: True gives each TMA box of a ring slot its
    own barrier, and each product's k steps wait only for the boxes they read, so the
    first product starts on the slot's first box; off by default until measured,
    backend/pipeline/copy_parts.py), `fp_fusion` (True lets a float32 multiply and
    the add or subtract that takes its result become one fused multiply-add, FFMA,
    rounded once, as Triton's `enable_fp_fusion` and nvcc's `-fmad` do: the f32
    `mulf`, `addf` and `subf` of the kernel carry `fastmath<contract>`; off by
    default until measured; docs/attention.md), `warpgroup_split` (sm_90a, a loop of two chained
    products on two consumer warpgroups that split the second's output by columns:
    True gives the scores, the softmax and its carried row statistics to warpgroup 0,
    which computes the whole score tile alone and hands P and the row scale to the
    other through shared memory; `split_replicas` True with it makes both warpgroups
    run that code, each its replica, with no exchange; `early_rescale` True with it
    has each warpgroup multiply its half of the accumulator by the handed-off row
    scale as soon as it holds it: the owner inside its run (beside the softmax's
    exponentials), the other right after the hand-off, not both after P's;
    `mbarrier_handoffs` True with it signals the hand-offs through two mbarriers
    (every thread's arrival a release, the waits acquires) instead of named
    barriers (`bar.arrive` / `bar.sync`); off by default until measured;
    `skewed_handoffs` (True by default) lets the owner run a step ahead through a
    hand-off whose layout allows it, False puts every hand-off between barriers of
    both warpgroups; `merged_handoffs` True with skewed hand-offs has a step's
    hand-offs (the row scale, then P) written side by side under one wait of the
    owner and one signal each way, instead of a named-barrier round trip each; off by
    default until measured; `alternate_owners` True with it gives the even steps to
    warpgroup 0 and the odd ones to warpgroup 1, FlashMLA's alternation (in a plain
    form: every hand-off waits for both warpgroups; off by default, docs/attention.md,
    "Alternating owners");
    backend/layout/warpgroup_split.py, backend/gpu/owner_runs.py),
    `pair_axis` (sm_90a, ignored below it; a kernel that is not persistent: a grid
    axis a, whose neighbouring blocks 2p and 2p + 1 then run as a cluster of two that
    share, by TMA multicast, the pipelined tiles of one loop both load alike: each block
    copies half of such a tile into both; the launch's grid must be even along a; for
    two blocks that read the same pages, MLA decode's two head blocks of a token; off
    by default, backend/pipeline/cluster_pairs.py),
    `l2_ahead` (sm_90a, a pipelined loop whose ring a producer warpgroup fills: an
    int D, with each step's copies an L2 prefetch of the tiles D steps later, so
    tiles that miss L2, a paged cache's scattered pages, come from DRAM before the
    ring has a slot for them; 0, the default, none; docs/attention.md) and
    `cache_hints` (16-byte loads
    carry an L2 `evict_last`
    policy: None, the default, for loads from arrays many times the L2 cache,
    where it measured faster on an H200, and not otherwise, where it measured
    slower; True or False for every load; docs/gpu-backend.md) steer the GPU
    stages; `num_ctas`, `opt_level` and `num_worker_warps` are accepted as in
    cuTile and recorded.  The interpreter ignores all of them.
    """
    known = {"num_ctas", "occupancy", "opt_level", "num_worker_warps", "num_warps",
             "cache_hints", "num_stages", "block_order", "warp_specialize", "retile",
             "persistent", "tma_store", "stream_k", "programmatic_launch", "l2_prefetch",
             "product_rotation", "rotation_fence", "pingpong", "copy_parts", "fp_fusion",
             "warpgroup_split", "split_replicas", "early_loads", "early_rescale",
             "mbarrier_handoffs", "skewed_handoffs", "merged_handoffs", "alternate_owners",
             "l2_ahead", "pair_axis"}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"unknown kernel option(s) {sorted(unknown)}; known: {sorted(known)}")
    check_cutile_options(options)

    def decorate(f: Callable) -> Kernel:
        if not isinstance(f, types.FunctionType):       # cuTile's check and message
            raise TypeError("`kernel` decorator must be applied to a Python function")
        return Kernel(f, options)

    return decorate if fn is None else decorate(fn)


# cuTile's options, each a plain value or a ByTarget of values: (allowed, what).
_CUTILE_OPTIONS = {
    "num_ctas": (lambda v: v in (1, 2, 4, 8, 16), "a power of 2 in [1, 16]"),
    "occupancy": (lambda v: 1 <= v <= 32, "an int in [1, 32]"),
    "opt_level": (lambda v: 0 <= v <= 3, "an int in [0, 3]"),
    # (values other than 4 and 8 need CTK 13.5 in cuTile; tileir records the value)
    "num_worker_warps": (lambda v: v in (1, 2, 4, 8, 16, 32), "a power of 2 in [1, 32]"),
}


def check_cutile_options(options: dict[str, Any]) -> None:
    """cuTile's checks of `num_ctas`, `occupancy`, `opt_level`, `num_worker_warps`
    (None is each one's default; a ByTarget's every value is checked)."""
    for name, (ok, what) in _CUTILE_OPTIONS.items():
        value = options.get(name)
        for v in value.values() if isinstance(value, ByTarget) else [value]:
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or not ok(v):
                raise KernelOptionError(f"kernel option {name} must be {what} (or a "
                                        f"tileir.ByTarget of such), got {v!r}")


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
    out = tuple(dims + [1] * (3 - len(dims)))
    _check_grid_limits(out, "grid")
    return out


# CUDA's grid limits: x up to 2^31 - 1 blocks, y and z up to 65535.
MAX_GRID = (2**31 - 1, 65535, 65535)


def _check_grid_limits(grid: tuple[int, int, int], what: str, kernel: str | None = None) -> None:
    for axis, (g, limit) in enumerate(zip(grid, MAX_GRID)):
        if g > limit:
            who = f"kernel '{kernel}': " if kernel else ""
            raise TileValueError(f"{who}{what} {tuple(grid)} has {g} blocks along axis "
                                 f"{axis}; CUDA allows at most {limit} there")


def _launch(stream, grid, kernel: Kernel, args: Sequence[Any], *,
            programmatic_dependent_launch: bool = False) -> None:
    """Runs `kernel` over `grid` with `args` (cuTile's `launch(stream, grid, kernel,
    kernel_args, /, *, programmatic_dependent_launch=False)`).

    NumPy arrays run in the interpreter; so does everything when the knob
    TILEIR_INTERPRET=1 is set (device arrays are copied to the host and back).

    `programmatic_dependent_launch=True` lets the kernel begin before the previous
    kernel in the stream has ended, as in cuTile: a kernel whose author placed
    `grid_dependency_control_wait` is launched with programmatic stream serialization
    then (its wait orders what follows it), and plainly without the flag; tileir's own
    wait at the top of every other sm_90a kernel makes their launches programmatic
    either way, and `@kernel(programmatic_launch=False)` makes them plain either way
    (docs/gpu-backend.md, "Programmatic launch").  The interpreter runs kernels one
    after another: it accepts the flag.

    A launch like an earlier one (torch tensors of the same dtypes, shapes, strides
    and alignment, scalars of the same kinds, the same grid) takes the kernel's fast
    path (runtime/dispatch.py); the first one of its kind is checked here in full,
    compiled, and prepared for the fast path.  Where the C extension is built,
    `tileir.launch` is its `launch`, which calls the fast path itself and comes here
    (`launch_checked`) for the rest.
    """
    pdl = programmatic_dependent_launch
    fast = getattr(kernel, "_fast_pdl" if pdl is True else "_fast", None) \
        if pdl is True or pdl is False else None          # else: the checked path refuses
    if fast is not None and fast(stream, grid, args):
        return
    launch_checked(stream, grid, kernel, args,
                   programmatic_dependent_launch=programmatic_dependent_launch)


def launch_checked(stream, grid, kernel: Kernel, args: Sequence[Any], *,
                   programmatic_dependent_launch: bool = False) -> None:
    """`launch` without the fast path: every check, the compile, a new plan."""
    pdl = programmatic_dependent_launch
    if not isinstance(pdl, bool):
        raise TypeError(f"launch(): programmatic_dependent_launch must be True or False, got "
                        f"{pdl!r}")
    if not isinstance(kernel, Kernel):
        raise TileTypeError(f"launch() needs a @tileir.kernel, got {type(kernel).__name__}")
    if not isinstance(args, (tuple, list)):
        raise TileTypeError(f"launch() takes the kernel arguments as a tuple, got "
                            f"{type(args).__name__}")
    dims = normalize_grid(grid)
    # (the arrays of a list or tuple argument count as arrays: a list of host arrays runs
    # in the interpreter, and one on the host in a GPU launch is reported by name)
    arrays = [a for a in _flat(args) if _is_array(a)]
    if knobs.INTERPRET.as_bool() or all(_host_array(a) for a in arrays):
        from .host import run_interpreted
        run_interpreted(kernel.compile(args, stage=knobs.LAUNCH_STAGE.raw()), dims, args)
        return
    from .runtime import dispatch, driver, launcher
    if not driver.has_gpu():
        raise TileUnsupportedFeatureError(
            f"kernel '{kernel.name}' got device arrays but no CUDA GPU is usable here; set "
            f"TILEIR_INTERPRET=1 to run it in the interpreter")
    on_device = [a for a in arrays if not _host_array(a)]  # a host one is reported below
    ck = kernel.compile(args, target=device_target(on_device), grid=dims,
                        sm_count=_sm_count(on_device[0]))
    image = launch_image(ck, on_device)
    hw_grid = hardware_grid(ck.meta, dims)
    consts = kernel._tuple_consts
    kinds = None if knobs.SYNC_LAUNCH.as_bool() else \
        dispatch.arg_kinds(args, kernel._const_mask, consts)
    if kinds is not None:
        flat, positions = dispatch.spread(kinds, args, ck.runtime_params, consts)
        plan = dispatch.make_plan(image, ck.meta, hw_grid, flat, positions,
                                  native=dispatch.LIST not in kinds and dispatch.TUPLE not in kinds,
                                  programmatic_dependent_launch=pdl)
        kernel._remember(kinds, grid, args, plan, pdl)
        first = plan.native.launch if plan.native is not None else plan.launch
        if first(stream, flat, dispatch.dynamic_values(kinds, args, consts)):
            return
    launcher.launch(image, ck.meta, hw_grid, ck.runtime_args(args), stream,
                    programmatic_dependent_launch=pdl)


try:        # the launch in C (runtime/_fastlaunch.c), where setup.py built it
    from .runtime import _fastlaunch as _c_launch
    _c_launch.set_checked_launch(launch_checked)
    _c_launch.set_const_key(typed_key)
    launch = _c_launch.launch
except (ImportError, AttributeError):       # (or an older build of it: reinstall)
    launch = _launch


def hardware_grid(meta: Mapping[str, Any], grid: tuple[int, int, int]) -> tuple[int, int, int]:
    """The grid the hardware runs for a launch over `grid`: the same, or with its axes
    permuted (`meta["grid_perm"]`, tile-launch-order), then the axis a retiled or split
    kernel rescaled (`meta["grid_scale"] = [axis, num, den]`, an axis of the permuted
    grid) times den / num.  A kernel of clusters launched as written (`meta["cluster"]`,
    not persistent) needs that grid to be a multiple of the cluster's shape: a
    TileValueError otherwise (the driver would refuse the launch)."""
    out = _scaled_grid(meta, grid)
    cluster = meta.get("cluster")
    if cluster and not meta.get("persistent") and any(g % d for g, d in zip(out, cluster)):
        raise TileValueError(
            f"kernel '{meta['name']}' runs clusters of {tuple(cluster)} blocks (the kernel "
            f"option pair_axis, or a cluster the compiler chose), so the grid the hardware "
            f"runs must be a multiple of that along every axis; got {tuple(out)} for the "
            f"launch's grid {tuple(grid)}")
    return out


def _scaled_grid(meta: Mapping[str, Any], grid: tuple[int, int, int]) -> tuple[int, int, int]:
    """`grid` with its axes permuted and rescaled as `hardware_grid` says, its limits
    checked."""
    perm = meta.get("grid_perm")
    if perm:                          # tile-launch-order: the kernel reads axes swapped
        grid = tuple(grid[p] for p in perm)
    scale = meta.get("grid_scale")
    if not scale:
        if perm:
            _check_grid_limits(grid, "the hardware grid (the launch's, axes swapped)",
                               meta["name"])
        return grid
    axis, num, den = scale
    if grid[axis] * den % num:
        raise TileValueError(
            f"kernel '{meta['name']}' computes {num}/{den} of a tile per block along grid axis "
            f"{axis} (retiled), so that axis of the grid must be a multiple of {num}; got "
            f"grid {tuple(grid)}")
    out = list(grid)
    out[axis] = grid[axis] * den // num
    _check_grid_limits(tuple(out), "the hardware grid (the launch's, retiled)", meta["name"])
    return tuple(out)


_SM_COUNTS: dict[int, int] = {}
_NO_WISH = object()
_WISHES_PER_KERNEL = 1024


def _sm_count(array) -> int:
    """The SM count of the GPU holding `array` (remembered per device; 0 without one)."""
    if type(array).__module__ == "torch" and hasattr(array, "device"):
        index = array.device.index
    else:
        from .runtime.arrays import describe
        index = describe(array).device[1]
    n = _SM_COUNTS.get(index)
    if n is None:
        from .runtime import driver
        if not driver.has_gpu():
            return 0
        if index is None:              # an array that does not say (empty): the current GPU
            index = driver.current_device()
        n = _SM_COUNTS[index] = driver.sm_count(index)
    return n


def _device_of(arrays) -> int:
    """The ordinal of the device holding the first device array (else the current one)."""
    from .runtime import arrays as rt_arrays, driver
    for a in arrays:
        info = rt_arrays.describe(a)
        if info.is_cuda:
            return info.device[1]
    return driver.current_device()


def device_target(arrays) -> str:
    """The compile target for the device holding the first device array: its own, or
    TILEIR_LAUNCH_TARGET where that code can run there."""
    from .runtime import driver
    ordinal = _device_of(arrays)
    major, minor = driver.compute_capability(ordinal)
    forced = knobs.LAUNCH_TARGET.raw().strip()
    if forced:
        if forced not in ("sm_80", "sm_90a"):
            raise TileValueError(f"TILEIR_LAUNCH_TARGET={forced!r}: tileir targets sm_80 and "
                                 f"sm_90a")
        if not driver.runs_on(forced, "ptx", (major, minor)):
            raise TileUnsupportedFeatureError(
                f"TILEIR_LAUNCH_TARGET={forced}: its code cannot run on GPU {ordinal} "
                f"(compute capability {major}.{minor})")
        return forced
    if major == 9:
        return "sm_90a"
    if major == 8:
        return "sm_80"
    raise TileUnsupportedFeatureError(f"GPU {ordinal} has compute capability {major}.{minor}; "
                                      f"tileir targets sm_80 (Ampere) and sm_90a (Hopper)")


def launch_image(ck: CompiledKernel, arrays) -> bytes:
    """What a launch loads: the cubin, or, where the cubin's machine code cannot run on
    the device (sm_80 code on a Hopper GPU, TILEIR_LAUNCH_TARGET), the PTX, which the
    driver JIT-compiles for it."""
    from .runtime import driver
    cc = driver.compute_capability(_device_of(arrays))
    if driver.runs_on(ck.target, "cubin", cc):
        return ck.cubin
    ptx = ck.artifacts["ptx"]
    return ptx.encode() if isinstance(ptx, str) else bytes(ptx)


def _grid_rewrite_kind(wish: str) -> str | None:
    """What an element-wise kernel's wish (backend/layout/grid_wish.split_wish) says but for the
    split count: "split;free:<mask>;swap:1" for a small grid, "free:<mask>;swap:1" for a
    larger one (either item may be missing); None for a product kernel's wish."""
    from .backend.layout.grid_wish import parse
    items = parse(wish)
    if set(items) - {"split", "free", "swap"} or not {"free", "swap"} & set(items):
        return None
    rest = ";".join(f"{k}:{items[k]}" for k in ("free", "swap") if k in items)
    return ("split;" if "split" in items else "") + rest


def _no_rewrite_keys(wish: str) -> list[str]:
    """The records that show a wish rewrites nothing: its own kind's, and for a larger
    grid also the small grid's (every pass that may rewrite for a larger grid would
    have for a small one)."""
    kind = _grid_rewrite_kind(wish)
    return [kind] if kind.startswith("split;") else [kind, "split;" + kind]


def _flat(args: Sequence[Any]):
    """The items of `args` with lists and tuples (nested ones too) spread."""
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flat(a)
        else:
            yield a


def _is_array(a) -> bool:
    return hasattr(a, "dtype") and hasattr(a, "shape") and \
        not isinstance(a, (np.generic, type))        # (np.int32, a Constant, is a type)


def _host_array(a) -> bool:
    if isinstance(a, np.ndarray):
        return True
    dev = getattr(a, "device", None)
    return type(a).__module__.startswith("torch") and getattr(dev, "type", None) == "cpu"
