"""The simulator's op table and what its rules share: how IR types map to NumPy dtypes,
a shared-memory reference, the marker of waiting threads, per-thread helpers (a value
uniform across the running threads, a masked select), and `op`, the decorator that
registers a rule.  The machine is `executor.py`; the rules are the `*_ops.py` modules.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import ml_dtypes
import numpy as np
from mlir import ir

from tileir.dialect.types import by_type

from .hardware import SimError

DYNAMIC = -2147483648      # llvm.getelementptr's marker for a dynamic index


def np_dtype(t: ir.Type) -> np.dtype:
    return by_type("dtype", t, lambda t: _np_dtype(str(t)))


@functools.lru_cache(maxsize=None)
def _np_dtype(s: str) -> np.dtype:
    table = {"i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
             "index": np.int64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
             "f32": np.float32, "f64": np.float64, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
             "f8E5M2": ml_dtypes.float8_e5m2}
    if s in table:
        return np.dtype(table[s])
    if s.startswith("!llvm.ptr"):
        return np.dtype(np.int64)
    raise SimError(f"no simulated representation for type {s}")


def nbytes_of(t: ir.Type) -> int:
    return by_type("nbytes", t, _nbytes_of)


def _nbytes_of(t: ir.Type) -> int:
    if isinstance(t, ir.VectorType):
        return t.shape[0] * nbytes_of(t.element_type)
    if str(t) == "i1":
        return 1
    return np_dtype(t).itemsize


def static(sim, o: ir.Operation, make: Callable[[ir.Operation], Any]) -> Any:
    """`make(o)`: what a rule reads of op `o` itself (attributes, types), not of the
    values it runs on; read once per op (kept with the parsed kernel, `sim.statics`),
    not on every trip of a loop."""
    if o is sim.op_now:              # the running rule's op: its slot, not a hash of it
        found = sim.slots_now[1]
        if found is None:
            found = sim.slots_now[1] = make(o)
        return found
    found = sim.statics.get(o)
    if found is None:
        found = sim.statics[o] = make(o)
    return found


@dataclasses.dataclass
class SharedRef:
    offset: np.ndarray      # byte offset of element 0, per thread
    dtype: np.dtype


BLOCKED = object()      # what `run` yields: every thread it runs is waiting



def uniform(x: np.ndarray, mask: np.ndarray, what: str) -> int:
    vals = np.asarray(x)[mask]
    # one comparison with the first value where they agree (a sort, np.unique, costs
    # ~4x as much and a loop's bounds are asked on every trip into it); np.unique,
    # as ever, to decide and to name the values where they do not
    if vals.size and (vals == vals[0]).all():
        return int(vals[0])
    vals = np.unique(vals)
    if len(vals) != 1:
        raise SimError(f"{what} differs between threads: {vals[:4]}")
    return int(vals[0])


def where(cond: np.ndarray, a, b):
    if isinstance(a, tuple):
        return tuple(where(cond, x, y) for x, y in zip(a, b))
    if isinstance(a, SharedRef):
        return SharedRef(np.where(cond, a.offset, b.offset), a.dtype)
    a = np.asarray(a)
    c = cond if a.ndim == 1 else cond[:, None]
    return np.where(c, a, b)


# ---------------------------------------------------------------------------
# The op table
# ---------------------------------------------------------------------------
OPS: dict[str, Callable] = {}
PREFIX_OPS: list[tuple[str, Callable]] = []
# ops whose rules are generators (they run regions or wait)
SUSPENDING = frozenset({"scf.if", "scf.for", "scf.while", "nvvm.mbarrier.try_wait.parity",
                        "barrier.cluster.wait"})


def op(*names):
    def deco(fn):
        for n in names:
            OPS[n] = fn
        return fn
    return deco


def operands(sim, blk, o):
    """The values of op `o`'s operands in block `blk` (their numbers read once per op)."""
    if o is sim.op_now:              # the running rule's op: its slot, not a hash of it
        ids = sim.slots_now[0]
        if ids is None:
            ids = sim.slots_now[0] = [sim.vid(v) for v in o.operands]
    else:
        ids = sim.operands.get(o)
        if ids is None:
            ids = sim.operands[o] = [sim.vid(v) for v in o.operands]
    env = blk.env
    return [env[i] for i in ids]


def attr_int(o, name: str) -> int:
    return ir.IntegerAttr(o.attributes[name]).value
