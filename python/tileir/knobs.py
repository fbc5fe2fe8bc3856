"""Every environment knob of tileir, declared in one place and read when used.

| variable | type | default | meaning |
|---|---|---|---|
| TILEIR_INTERPRET | bool | 0 | run every `launch` in the NumPy interpreter, whatever the arrays (GPU arrays are copied to the host and back) |
| TILEIR_DUMP_IR | bool | 0 | print each kernel's Tile IR to stderr after every stage |
| TILEIR_VERIFY_EACH | bool | 0 | verify the IR between every two passes of a compile, naming the pass that broke it (a compile verifies its input and every stage's output regardless; tile-opt verifies between passes always) |
| TILEIR_PTXAS | path | (lookup) | the ptxas to use for the `cubin` stage |
| TILEIR_LAUNCH_TARGET | str | (the GPU's) | compile GPU launches for this target instead of the device's own: `sm_80` on a Hopper GPU runs the Ampere code (its PTX, JIT-compiled by the driver), to test that path on the GPU at hand; read by every checked launch (a kernel's fast path keeps the code its first launch chose) |
| TILEIR_LAUNCH_STAGE | str | tile | the last stage run before `launch` executes a kernel; `frontend` skips the tile-level passes (to bisect a pass bug) |
| TILEIR_SYNC_LAUNCH | bool | 0 | synchronize the stream after every GPU launch and report asynchronous errors (an out-of-bounds access, a trap) at the launch that caused them |
| TILEIR_PROGRAMMATIC_LAUNCH | bool | 1 | launch kernels that open with the grid-dependency wait (`programmatic_launch`, sm_90a's default) with programmatic stream serialization, so that each starts while the one before it ends; 0 launches them plainly (one after the other: a profiler then sees each kernel's own time, not its wait); read when a kernel's dispatcher is made |
| TILEIR_PY_LAUNCH | bool | 0 | launch through the fast path's Python code even where its C extension is built (to compare, or to debug the extension); read when a kernel's dispatcher is made |
| TILEIR_CACHE | bool | 1 | use the on-disk compile cache; 0 compiles every specialization afresh and writes nothing |
| TILEIR_CACHE_DIR | str | ~/.cache/tileir | where the compile cache lives (one browsable directory per entry) |
| TILEIR_CACHE_MAX_BYTES | int | (none) | cap on the cache's size; past it the least recently used entries are evicted after each write |
| TILEIR_COMPILER_TIMEOUT_SEC | float | (none) | the longest one kernel's compile may take, in seconds, outside `tileir.compiler_timeout` (tileir.deadline) |
| TILEIR_TEMP_DIR | path | (the system's) | where compiles keep their scratch files (ptxas' input and output; a failed compile's PTX, kept for reproducing it); made if missing |
| TILEIR_JAX_FFI | bool | 1 | `tileir.jax.cutile_call` on JAX's CUDA backend launches through tileir's XLA FFI handler (native, no Python per call); 0 launches through `jax.experimental.buffer_callback` (tileir's checked Python launch); read when a call is traced |
| TILEIR_CC | str | (cc, gcc or clang on PATH) | the C compiler command that builds the XLA FFI handler on first use (runtime/xla_ffi.py) |

cuTile's variables are read as aliases of the knobs that do the same (`Knob.alias`);
where both are set, tileir's name wins:

| cuTile's variable | tileir's knob | notes |
|---|---|---|
| CUDA_TILE_COMPILER_TIMEOUT_SEC | TILEIR_COMPILER_TIMEOUT_SEC | |
| CUDA_TILE_CACHE_DIR | TILEIR_CACHE_DIR | `0`, `off`, `none` or empty turn the cache off (as TILEIR_CACHE=0), unless TILEIR_CACHE or TILEIR_CACHE_DIR is set |
| CUDA_TILE_CACHE_SIZE | TILEIR_CACHE_MAX_BYTES | (cuTile caps at 2 GB by default; tileir does not cap unless asked) |
| CUDA_TILE_TEMP_DIR | TILEIR_TEMP_DIR | |
| CUDA_TILE_LOGS | TILEIR_DUMP_IR | a comma-separated list of `CUTILEIR` and `TILEIR` (cuTile's IR, Tile IR): either prints tileir's IR after every stage; another word is an error |

CUDA_TILE_ENABLE_CRASH_DUMP has no counterpart (it dumps cuTile's own compiler,
tileiras, when that crashes) and is ignored.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Knob:
    name: str
    default: str
    doc: str
    # cuTile's variable for the same knob, read when `name` is not set
    alias: str | None = None

    def raw(self) -> str:
        given = self.source()
        return os.environ[given] if given is not None else self.default

    def source(self) -> str | None:
        """The variable the value comes from: `name`, else `alias`, where set; None for
        the default."""
        for var in (self.name, self.alias):
            if var is not None and var in os.environ:
                return var
        return None

    def is_set(self) -> bool:
        return self.source() is not None

    def as_bool(self) -> bool:
        v = self.raw().strip().lower()
        if v in ("1", "true", "yes", "on"):
            return True
        if v in ("", "0", "false", "no", "off"):
            return False
        raise ValueError(f"environment variable {self.source()}={self.raw()!r} is not a "
                         f"boolean (use 1 or 0)")


INTERPRET = Knob("TILEIR_INTERPRET", "0", "run launches in the NumPy interpreter")
DUMP_IR = Knob("TILEIR_DUMP_IR", "0", "print Tile IR to stderr after every stage")
# cuTile's logging switch: read by `dump_ir` where TILEIR_DUMP_IR is not set
CUTILE_LOGS = Knob("CUDA_TILE_LOGS", "", "cuTile's IR logs (CUTILEIR, TILEIR): dump the IR")
_LOG_WORDS = ("CUTILEIR", "TILEIR")


def dump_ir() -> bool:
    """Whether to print the IR after every stage: TILEIR_DUMP_IR, else whether
    CUDA_TILE_LOGS names one of cuTile's IR logs."""
    if DUMP_IR.is_set():
        return DUMP_IR.as_bool()
    words = [w.strip().upper() for w in CUTILE_LOGS.raw().split(",") if w.strip()]
    for w in words:
        if w not in _LOG_WORDS:
            raise ValueError(f"environment variable CUDA_TILE_LOGS={CUTILE_LOGS.raw()!r}: "
                             f"unexpected value {w!r}; supported values are "
                             f"{', '.join(_LOG_WORDS)} (or set TILEIR_DUMP_IR=1)")
    return bool(words)


VERIFY_EACH = Knob("TILEIR_VERIFY_EACH", "0", "verify the IR between every two passes")
PTXAS = Knob("TILEIR_PTXAS", "", "path of ptxas (default: looked up)")
LAUNCH_STAGE = Knob("TILEIR_LAUNCH_STAGE", "tile", "last stage run before launch executes")
LAUNCH_TARGET = Knob("TILEIR_LAUNCH_TARGET", "", "target of GPU launches (empty: the device's)")

ALL = (INTERPRET, DUMP_IR, VERIFY_EACH, PTXAS, LAUNCH_STAGE, LAUNCH_TARGET)

SYNC_LAUNCH = Knob("TILEIR_SYNC_LAUNCH", "0", "synchronize after every GPU launch")
CACHE = Knob("TILEIR_CACHE", "1", "use the on-disk compile cache")
CACHE_DIR = Knob("TILEIR_CACHE_DIR", "~/.cache/tileir", "compile cache directory",
                 alias="CUDA_TILE_CACHE_DIR")
CACHE_MAX_BYTES = Knob("TILEIR_CACHE_MAX_BYTES", "",
                       "compile cache size cap in bytes (empty: none)",
                       alias="CUDA_TILE_CACHE_SIZE")
# what turns cuTile's cache off when given as CUDA_TILE_CACHE_DIR
_CACHE_DIR_OFF = ("0", "off", "none", "")


def cache_enabled() -> bool:
    """TILEIR_CACHE; where it is not set, cuTile's CUDA_TILE_CACHE_DIR=off (0, none,
    empty) turns the cache off, unless TILEIR_CACHE_DIR names a directory."""
    if CACHE.is_set() or CACHE_DIR.source() != CACHE_DIR.alias:
        return CACHE.as_bool()
    return CACHE_DIR.raw().strip().lower() not in _CACHE_DIR_OFF


def cache_dir() -> str:
    """TILEIR_CACHE_DIR, else CUDA_TILE_CACHE_DIR (unless it says off), else the default."""
    if CACHE_DIR.source() == CACHE_DIR.alias and \
            CACHE_DIR.raw().strip().lower() in _CACHE_DIR_OFF:
        return CACHE_DIR.default
    return CACHE_DIR.raw()


PY_LAUNCH = Knob("TILEIR_PY_LAUNCH", "0", "use the Python launch fast path, not the C one")
PROGRAMMATIC_LAUNCH = Knob("TILEIR_PROGRAMMATIC_LAUNCH", "1",
                           "programmatic stream serialization for programmatic_launch kernels")

COMPILER_TIMEOUT = Knob("TILEIR_COMPILER_TIMEOUT_SEC", "",
                        "longest compile of one kernel, seconds (empty: none)",
                        alias="CUDA_TILE_COMPILER_TIMEOUT_SEC")
TEMP_DIR = Knob("TILEIR_TEMP_DIR", "", "where compiles keep scratch files (empty: the system's)",
                alias="CUDA_TILE_TEMP_DIR")


def temp_dir() -> str | None:
    """TILEIR_TEMP_DIR (or CUDA_TILE_TEMP_DIR), made if missing; None: the system's."""
    path = TEMP_DIR.raw().strip()
    if not path:
        return None
    path = os.path.expanduser(path)
    os.makedirs(path, exist_ok=True)
    return path


JAX_FFI = Knob("TILEIR_JAX_FFI", "1",
               "cutile_call on JAX's CUDA backend through the XLA FFI handler (0: buffer_callback)")
CC = Knob("TILEIR_CC", "", "C compiler for the XLA FFI handler (empty: cc, gcc or clang)")

ALL = ALL + (SYNC_LAUNCH, CACHE, CACHE_DIR, CACHE_MAX_BYTES, PY_LAUNCH, PROGRAMMATIC_LAUNCH,
             COMPILER_TIMEOUT, TEMP_DIR, CUTILE_LOGS, JAX_FFI, CC)
