"""Every environment knob of tileir, declared in one place and read when used.

| variable | type | default | meaning |
|---|---|---|---|
| TILEIR_INTERPRET | bool | 0 | run every `launch` in the NumPy interpreter, whatever the arrays (GPU arrays are copied to the host and back) |
| TILEIR_DUMP_IR | bool | 0 | print each kernel's Tile IR to stderr after every stage |
| TILEIR_PTXAS | path | (lookup) | the ptxas to use for the `cubin` stage |
| TILEIR_LAUNCH_STAGE | str | tile | the last stage run before `launch` executes a kernel; `frontend` skips the tile-level passes (to bisect a pass bug) |
| TILEIR_SYNC_LAUNCH | bool | 0 | synchronize the stream after every GPU launch and report asynchronous errors (an out-of-bounds access, a trap) at the launch that caused them |
| TILEIR_PY_LAUNCH | bool | 0 | launch through the fast path's Python code even where its C extension is built (to compare, or to debug the extension); read when a kernel's dispatcher is made |
| TILEIR_CACHE | bool | 1 | use the on-disk compile cache; 0 compiles every specialization afresh and writes nothing |
| TILEIR_CACHE_DIR | str | ~/.cache/tileir | where the compile cache lives (one browsable directory per entry) |
| TILEIR_CACHE_MAX_BYTES | int | (none) | cap on the cache's size; past it the least recently used entries are evicted after each write |
| TILEIR_COMPILER_TIMEOUT_SEC | float | (none) | the longest one kernel's compile may take, in seconds, outside `tileir.compiler_timeout` (tileir.deadline) |
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Knob:
    name: str
    default: str
    doc: str

    def raw(self) -> str:
        return os.environ.get(self.name, self.default)

    def as_bool(self) -> bool:
        v = self.raw().strip().lower()
        if v in ("1", "true", "yes", "on"):
            return True
        if v in ("", "0", "false", "no", "off"):
            return False
        raise ValueError(f"environment variable {self.name}={self.raw()!r} is not a boolean "
                         f"(use 1 or 0)")


INTERPRET = Knob("TILEIR_INTERPRET", "0", "run launches in the NumPy interpreter")
DUMP_IR = Knob("TILEIR_DUMP_IR", "0", "print Tile IR to stderr after every stage")

PTXAS = Knob("TILEIR_PTXAS", "", "path of ptxas (default: looked up)")
LAUNCH_STAGE = Knob("TILEIR_LAUNCH_STAGE", "tile", "last stage run before launch executes")

ALL = (INTERPRET, DUMP_IR, PTXAS, LAUNCH_STAGE)

SYNC_LAUNCH = Knob("TILEIR_SYNC_LAUNCH", "0", "synchronize after every GPU launch")
CACHE = Knob("TILEIR_CACHE", "1", "use the on-disk compile cache")
CACHE_DIR = Knob("TILEIR_CACHE_DIR", "~/.cache/tileir", "compile cache directory")
CACHE_MAX_BYTES = Knob("TILEIR_CACHE_MAX_BYTES", "", "compile cache size cap in bytes (empty: none)")

PY_LAUNCH = Knob("TILEIR_PY_LAUNCH", "0", "use the Python launch fast path, not the C one")

COMPILER_TIMEOUT = Knob("TILEIR_COMPILER_TIMEOUT_SEC", "",
                        "longest compile of one kernel, seconds (empty: none)")

ALL = ALL + (SYNC_LAUNCH, CACHE, CACHE_DIR, CACHE_MAX_BYTES, PY_LAUNCH, COMPILER_TIMEOUT)
