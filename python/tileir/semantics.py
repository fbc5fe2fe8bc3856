"""Options of the tile language's operations, named as in cuTile: how memory is
ordered and scoped (atomics), how floats round, and per-target option values.

Nothing here imports MLIR: kernel options (`ByTarget`) are resolved on GPU hosts
that launch from the compile cache alone.
"""

from __future__ import annotations

import enum
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class MemoryOrder(enum.Enum):
    """The ordering an atomic (or a load/store) gives: `WEAK` is a plain access."""

    WEAK = "weak"
    RELAXED = "relaxed"
    ACQUIRE = "acquire"
    RELEASE = "release"
    ACQ_REL = "acq_rel"


class MemoryScope(enum.Enum):
    """Which threads an ordered access is ordered with (`NONE` goes with `WEAK`)."""

    NONE = "none"
    BLOCK = "block"
    CLUSTER = "cluster"
    DEVICE = "device"
    SYS = "sys"


class RoundingMode(enum.Enum):
    """How a float result is rounded: IEEE directions, or `FULL`/`APPROX` (f32
    division, square root, tanh, exp: the GPU's fast instructions)."""

    RN = "nearest_even"
    RZ = "zero"
    RM = "negative_inf"
    RP = "positive_inf"
    RA = "nearest_away"
    FULL = "full"
    APPROX = "approx"
    RZI = "nearest_int_to_zero"


class _Unspecified:
    def __repr__(self) -> str:
        return "UNSPECIFIED"


UNSPECIFIED = _Unspecified()


def _check_target(name: str) -> str:
    if not (isinstance(name, str) and name.startswith("sm_") and name[3:].isdigit()):
        raise ValueError(f"Invalid GPU architecture name: {name}, expected sm_<major><minor>")
    return name


class ByTarget(Generic[T]):
    """A kernel option with a value per GPU architecture:
    `@kernel(occupancy=ByTarget(sm_90=2, default=1))`.

    Resolved when a kernel is compiled for a target: that target's value if given
    (`sm_90a` finds `sm_90a`, then `sm_90`), else `default`, else the option's own
    default.
    """

    def __init__(self, *, default: Any = UNSPECIFIED, **value_by_target: Any):
        for name in value_by_target:
            _check_target(name.removesuffix("a"))
        self._default = default
        self._by_target = dict(value_by_target)

    def resolve(self, target: str, fallback: Any = None) -> Any:
        """The value for `target` (e.g. "sm_90a"), else `default`, else `fallback`."""
        for name in (target, target.removesuffix("a")):
            if name in self._by_target:
                return self._by_target[name]
        return fallback if self._default is UNSPECIFIED else self._default

    @property
    def by_target(self) -> dict[str, Any]:
        return dict(self._by_target)

    @property
    def default(self) -> Any:
        """The value for other targets (UNSPECIFIED: the option's own default)."""
        return self._default

    def values(self) -> list[Any]:
        """Every value it holds (for checking each like a plain option value)."""
        vals = list(self._by_target.values())
        return vals if self._default is UNSPECIFIED else [*vals, self._default]

    def __eq__(self, other) -> bool:
        return isinstance(other, ByTarget) and (self._default, self._by_target) == \
            (other._default, other._by_target)

    __hash__ = None

    def __repr__(self) -> str:
        items = [f"{k}={v!r}" for k, v in self._by_target.items()]
        if self._default is not UNSPECIFIED:
            items.append(f"default={self._default!r}")
        return f"ByTarget({', '.join(items)})"


def resolve_option(value: Any, target: str, fallback: Any = None) -> Any:
    """A kernel option's value for `target`: plain values stand for every target."""
    return value.resolve(target, fallback) if isinstance(value, ByTarget) else value
