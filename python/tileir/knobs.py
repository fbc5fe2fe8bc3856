"""Every environment knob of tileir, declared in one place and read when used.

| variable | type | default | meaning |
|---|---|---|---|
| TILEIR_INTERPRET | bool | 0 | run every `launch` in the NumPy interpreter, whatever the arrays (GPU arrays are copied to the host and back) |
| TILEIR_DUMP_IR | bool | 0 | print each kernel's Tile IR to stderr after every stage |
| TILEIR_LAUNCH_STAGE | str | tile | the last stage run before `launch` executes a kernel; `frontend` skips the tile-level passes (to bisect a pass bug) |
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

LAUNCH_STAGE = Knob("TILEIR_LAUNCH_STAGE", "tile", "last stage run before launch executes")

ALL = (INTERPRET, DUMP_IR, LAUNCH_STAGE)
