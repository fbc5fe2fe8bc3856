"""`compiler_timeout`: a limit on the wall time one kernel's compile may take.

    with tileir.compiler_timeout(10):          # seconds
        tileir.launch(stream, grid, kernel, args)

A compile past the limit raises `TileCompilerTimeoutError`: the pipeline checks
the clock after every stage, and ptxas (an external process) is stopped when the
time left runs out.  The limit applies to compiles that start inside the `with`;
outside any, TILEIR_COMPILER_TIMEOUT_SEC (seconds; empty: none; cuTile's
CUDA_TILE_COMPILER_TIMEOUT_SEC where tileir's is not set) applies.  Like
cuTile's, the setting is per thread of control only in that it is a context
variable: threads and asyncio tasks each see their own.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from typing import Iterator

from .errors import TileCompilerTimeoutError
from .knobs import COMPILER_TIMEOUT

_LIMIT: contextvars.ContextVar[float | None] = contextvars.ContextVar("tileir_compiler_timeout",
                                                                      default=None)
_ACTIVE: contextvars.ContextVar["Deadline | None"] = contextvars.ContextVar(
    "tileir_compile_deadline", default=None)


def _check_seconds(value, what: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number of seconds > 0, got {value!r}") from None
    if not seconds > 0:
        raise ValueError(f"{what} must be a number of seconds > 0, got {value!r}")
    return seconds


@contextlib.contextmanager
def compiler_timeout(timeout_sec: float) -> Iterator[None]:
    """Compiles started inside take at most `timeout_sec` seconds each."""
    token = _LIMIT.set(_check_seconds(timeout_sec, "compiler_timeout"))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def current_limit() -> float | None:
    limit = _LIMIT.get()
    if limit is not None:
        return limit
    raw = COMPILER_TIMEOUT.raw().strip()
    return _check_seconds(raw, COMPILER_TIMEOUT.source()) if raw else None


class Deadline:
    """The clock of one compile."""

    def __init__(self, kernel: str, limit: float | None):
        self.kernel, self.limit, self.start = kernel, limit, time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def remaining(self) -> float | None:
        return None if self.limit is None else max(self.limit - self.elapsed(), 0.0)

    def check(self, where: str) -> None:
        if self.limit is not None and self.elapsed() > self.limit:
            raise self.expired(where)

    def expired(self, where: str) -> TileCompilerTimeoutError:
        return TileCompilerTimeoutError(
            f"compiling kernel '{self.kernel}' took {self.elapsed():.2f} s, past the "
            f"compiler_timeout of {self.limit:g} s ({where}); raise the limit "
            f"(tileir.compiler_timeout, TILEIR_COMPILER_TIMEOUT_SEC) or simplify the kernel")


@contextlib.contextmanager
def compiling(kernel: str) -> Iterator[Deadline]:
    """The deadline of a compile of `kernel` that starts now (nested compiles share the
    outer one)."""
    outer = _ACTIVE.get()
    if outer is not None:
        yield outer
        return
    deadline = Deadline(kernel, current_limit())
    token = _ACTIVE.set(deadline)
    try:
        yield deadline
    finally:
        _ACTIVE.reset(token)


def active() -> Deadline | None:
    """The deadline of the compile running now, if any."""
    return _ACTIVE.get()
