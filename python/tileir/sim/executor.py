"""The lockstep executor of `gpu`-stage IR (see tileir.sim).

Values: a scalar is a NumPy array of shape (threads,), a vector (threads, n), an
LLVM struct a tuple of values; pointers are int64 addresses (global, shared
offsets, or a tensor-map handle); a shared-memory memref is a `_SharedRef`.
Control flow runs under an active-thread mask: both sides of a divergent
`scf.if` run, each for its threads, and their results merge per thread.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from typing import Any, Callable, Mapping, Sequence

import ml_dtypes
import numpy as np
from mlir import ir

from . import hardware as hw
from .hardware import SimError

_DYNAMIC = -2147483648      # llvm.getelementptr's marker for a dynamic index


def np_dtype(t: ir.Type) -> np.dtype:
    return _np_dtype(str(t))


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
    if isinstance(t, ir.VectorType):
        return t.shape[0] * nbytes_of(t.element_type)
    if str(t) == "i1":
        return 1
    return np_dtype(t).itemsize


@dataclasses.dataclass
class _SharedRef:
    offset: np.ndarray      # byte offset of element 0, per thread
    dtype: np.dtype


BLOCKED = object()      # what `run` yields: every thread it runs is waiting


@dataclasses.dataclass
class ListTable:
    """A list of arrays passed as a table (`TableListParam`, `tile.list_get`): give one
    for such a parameter and `simulate` places the arrays in memory and the table, an
    int64 array of one row (address, dims, strides) per array, beside them."""

    arrays: Sequence[np.ndarray]


class _Block:
    """One thread block being executed."""

    def __init__(self, sim: "_Simulator", bid: tuple[int, int, int]):
        self.sim = sim
        self.bid = bid
        self.threads = sim.threads
        self.shared = hw.Shared(sim.meta["shared_bytes"])
        self.env: dict[ir.Value, Any] = {}
        self.version = 0          # bumped whenever an mbarrier changes
        self.waiting = ""         # what the last blocked wait waited for
        self.cluster: list["_Block"] = [self]   # the blocks of its cluster, by rank
        self.cluster_arrivals = 0  # barrier.cluster.arrive's so far
        self.cluster_waits = 0     # barrier.cluster.wait's so far


class _Simulator:
    def __init__(self, func: ir.Operation, meta: Mapping, grid, memory: hw.Memory,
                 tensor_maps: dict[int, hw.TensorMap]):
        self.func = func
        self.meta = meta
        self.grid = grid
        self.memory = memory
        self.tensor_maps = tensor_maps
        self.globals: dict[str, int] = {}      # constant globals' addresses (simulate)
        self.threads = meta["num_threads"]
        # arith.constant's value by (attribute, type): MLIR uniques both, so equal
        # constants share one key, hashed without printing them; and by the op
        self.constants: dict[tuple[ir.Attribute, ir.Type] | ir.Operation, Any] = {}
        # each block's ops as `run` needs them, read from the bindings once (not on
        # every trip of a loop: a K loop runs its body thousands of times per block)
        self.decoded: dict[ir.Block, list[tuple]] = {}
        self.operands: dict[ir.Operation, list[ir.Value]] = {}    # likewise, by op
        self.stdout = sys.stdout               # where device printf writes

    # -- values ---------------------------------------------------------------------
    def full(self, value, t: ir.Type) -> Any:
        if str(t).startswith("!llvm.struct"):
            return tuple(self.full(value, et) for et in _struct_types(t))
        if isinstance(t, ir.VectorType):
            return np.full((self.threads, t.shape[0]), value, np_dtype(t.element_type))
        return np.full(self.threads, value, np_dtype(t))

    # -- running --------------------------------------------------------------------
    # `run` is a generator: it yields BLOCKED when every thread it runs waits on an
    # mbarrier phase that has not completed, so that the other side of a divergent
    # branch (a producer warpgroup, say) can run on.  A block whose every path is
    # blocked with no barrier changing in between would hang on the GPU.
    def run_block(self, blk: _Block, args: list[Any]) -> None:
        body = self.func.regions[0].blocks[0]
        for a, v in zip(body.arguments, args):
            blk.env[a] = v
        version = None
        for signal in self.run(blk, body, np.ones(self.threads, bool)):
            if signal is BLOCKED:
                if version == blk.version:
                    raise SimError(f"block {blk.bid} would hang: {blk.waiting}")
                version = blk.version
        if any(blk.shared.bulk_reads()):
            raise SimError(f"block {blk.bid} exits while TMA stores may still read its "
                           f"shared memory (no cp.async.bulk.wait_group.read 0 at the end)")

    def run_cluster(self, blks: list[_Block], args: list[Any]) -> None:
        """Runs the blocks of one cluster side by side: each until it waits (on a
        cluster barrier or an mbarrier) or ends, round after round; a round in which
        no block moved on means the GPU would hang."""
        body = self.func.regions[0].blocks[0]
        for blk in blks:
            blk.cluster = blks
            for a, v in zip(body.arguments, args):
                blk.env[a] = v
        live = [(blk, self.run(blk, body, np.ones(self.threads, bool))) for blk in blks]
        while live:
            state = [(b.version, b.cluster_arrivals, b.cluster_waits) for b, _ in live]
            still = []
            for blk, gen in live:
                try:
                    next(gen)
                    still.append((blk, gen))
                except StopIteration:
                    if any(blk.shared.bulk_reads()):
                        raise SimError(f"block {blk.bid} exits while TMA stores may still "
                                       f"read its shared memory") from None
            if len(still) == len(live) and state == [
                    (b.version, b.cluster_arrivals, b.cluster_waits) for b, _ in still]:
                raise SimError(f"cluster of block {live[0][0].bid} would hang: "
                               f"{live[0][0].waiting}")
            live = still

    def run(self, blk: _Block, block: ir.Block, mask: np.ndarray):
        ops = self.decoded.get(block)
        if ops is None:
            ops = self.decoded[block] = [_decode(op.operation) for op in block.operations]
        for op, name, fn, values in ops:
            if name in ("scf.yield", "scf.condition", "gpu.return"):
                return [blk.env[v] for v in values]       # the terminator's operands
            if fn is None:
                raise SimError(f"{op.location}: the simulator has no model of '{name}'")
            try:
                out = fn(self, blk, op, mask)
                if name in SUSPENDING:
                    out = yield from out
            except SimError as e:
                if str(e).startswith("loc(") or " at block " in str(e):
                    raise
                raise SimError(f"{op.location}: '{name}' at block {blk.bid}: {e}") from None
            if out is not None:
                outs = out if isinstance(out, list) else [out]
                for r, v in zip(values, outs):
                    blk.env[r] = v
        return []

    def get(self, blk: _Block, v: ir.Value) -> Any:
        return blk.env[v]


def _decode(op: ir.Operation) -> tuple:
    """(op, name, its rule or None, its results) for `_Simulator.run`; for a
    terminator, its operands instead of its results."""
    name = op.name
    if name in ("scf.yield", "scf.condition", "gpu.return"):
        return op, name, None, list(op.operands)
    fn = OPS.get(name)
    if name == "llvm.inline_asm" and _asm(op).startswith("barrier.cluster.wait"):
        fn, name = _cluster_wait, "barrier.cluster.wait"
    if fn is None:
        fn = next((f for p, f in PREFIX_OPS if name.startswith(p)), None)
    return op, name, fn, list(op.results)


def _struct_types(t: ir.Type) -> list[ir.Type]:
    inner = str(t)[len("!llvm.struct<("):-2]
    return [ir.Type.parse(x.strip()) for x in _split(inner)]


def _split(s: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(s[start:i])
            start = i + 1
    out.append(s[start:])
    return [x for x in out if x.strip()]


def _uniform(x: np.ndarray, mask: np.ndarray, what: str) -> int:
    vals = np.unique(np.asarray(x)[mask])
    if len(vals) != 1:
        raise SimError(f"{what} differs between threads: {vals[:4]}")
    return int(vals[0])


def _where(cond: np.ndarray, a, b):
    if isinstance(a, tuple):
        return tuple(_where(cond, x, y) for x, y in zip(a, b))
    if isinstance(a, _SharedRef):
        return _SharedRef(np.where(cond, a.offset, b.offset), a.dtype)
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


def _operands(sim, blk, o):
    values = sim.operands.get(o)
    if values is None:
        values = sim.operands[o] = list(o.operands)
    return [blk.env[v] for v in values]


def _attr_int(o, name: str) -> int:
    return ir.IntegerAttr(o.attributes[name]).value


# -- arith ---------------------------------------------------------------------------
@op("arith.constant")
def _constant(sim, blk, o, mask):
    # constants are shared, read-only: no rule writes into its operands
    found = sim.constants.get(o)
    if found is None:
        attr, t = o.attributes["value"], o.results[0].type
        found = sim.constants.get((attr, t))
        if found is None:
            found = sim.constants[attr, t] = _make_constant(sim, attr, t)
        sim.constants[o] = found
    return found


def _make_constant(sim, attr, t):
    if isinstance(attr, ir.DenseElementsAttr):
        if not attr.is_splat:
            raise SimError("non-splat constants are not modelled")
        v = attr.get_splat_value()
        value = v.value if hasattr(v, "value") else v
        return sim.full(value, t)
    if isinstance(attr, ir.BoolAttr):
        return sim.full(attr.value, t)
    if isinstance(attr, ir.IntegerAttr):
        value = attr.value
        if str(t) == "i1":
            value = bool(value & 1)
        return sim.full(value, t)
    return sim.full(ir.FloatAttr(attr).value, t)


def _unsigned(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.bool_:
        return x
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _signed_like(x: np.ndarray, like: np.ndarray) -> np.ndarray:
    return x.astype(np.dtype(f"u{like.dtype.itemsize}")).view(like.dtype) \
        if like.dtype != np.bool_ else x.astype(bool)


def _binary(fn):
    def rule(sim, blk, o, mask):
        a, b = _operands(sim, blk, o)
        with np.errstate(all="ignore"):
            return fn(a, b).astype(np.asarray(a).dtype)
    return rule


def _div_si(a, b):
    b = np.where(b == 0, 1, b)
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


def _shift(fn):
    def rule(sim, blk, o, mask):
        a, b = _operands(sim, blk, o)
        bits = a.dtype.itemsize * 8
        amount = np.clip(b.astype(np.int64), 0, bits - 1)
        return fn(a, amount.astype(a.dtype))
    return rule


for _name, _fn in {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
    "arith.divsi": _div_si,
    "arith.remsi": lambda a, b: a - _div_si(a, b) * np.where(b == 0, 1, b),
    "arith.floordivsi": lambda a, b: np.floor_divide(a, np.where(b == 0, 1, b)),
    "arith.ceildivsi": lambda a, b: -np.floor_divide(-a, np.where(b == 0, 1, b)),
    "arith.divui": lambda a, b: _signed_like(_unsigned(a) // np.where(_unsigned(b) == 0, 1,
                                                                      _unsigned(b)), a),
    "arith.remui": lambda a, b: _signed_like(_unsigned(a) % np.where(_unsigned(b) == 0, 1,
                                                                     _unsigned(b)), a),
    "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
    "arith.maxui": lambda a, b: _signed_like(np.maximum(_unsigned(a), _unsigned(b)), a),
    "arith.minui": lambda a, b: _signed_like(np.minimum(_unsigned(a), _unsigned(b)), a),
    "arith.addf": lambda a, b: a + b, "arith.subf": lambda a, b: a - b,
    "arith.mulf": lambda a, b: a * b, "arith.divf": lambda a, b: a / b,
    "arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
    "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
    "arith.remf": np.fmod,
}.items():
    OPS[_name] = _binary(_fn)

OPS["arith.shli"] = _shift(lambda a, n: a << n)
OPS["arith.shrsi"] = _shift(lambda a, n: a >> n)
OPS["arith.shrui"] = _shift(lambda a, n: _signed_like(_unsigned(a) >> _unsigned(n), a))

_CMPI = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater,
         5: np.greater_equal}
_CMPI_U = {6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}


@op("arith.cmpi")
def _cmpi(sim, blk, o, mask):
    a, b = _operands(sim, blk, o)
    p = _attr_int(o, "predicate")
    if p in _CMPI:
        return _CMPI[p](a, b)
    return _CMPI_U[p](_unsigned(a), _unsigned(b))


@op("arith.cmpf")
def _cmpf(sim, blk, o, mask):
    a, b = _operands(sim, blk, o)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    p = _attr_int(o, "predicate")
    nan = np.isnan(a) | np.isnan(b)
    base = {1: a == b, 2: a > b, 3: a >= b, 4: a < b, 5: a <= b, 6: a != b,
            8: a == b, 9: a > b, 10: a >= b, 11: a < b, 12: a <= b, 13: a != b}
    if p == 0:
        return np.zeros(a.shape, bool)
    if p == 15:
        return np.ones(a.shape, bool)
    if p == 7:
        return ~nan
    if p == 14:
        return nan
    return (base[p] & ~nan) if p <= 6 else (base[p] | nan)


@op("arith.select")
def _select(sim, blk, o, mask):
    c, a, b = _operands(sim, blk, o)
    return _where(np.asarray(c, bool), a, b)


def _convert(fn):
    def rule(sim, blk, o, mask):
        (a,) = _operands(sim, blk, o)
        t = o.results[0].type
        dt = np_dtype(t.element_type if isinstance(t, ir.VectorType) else t)
        with np.errstate(all="ignore"):
            return fn(np.asarray(a), dt)
    return rule


def _int_convert(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    if dt == np.bool_:                 # to i1: the low bit
        return (a.astype(np.int64) & 1).astype(bool)
    if dt.kind in "iu":
        return a.astype(np.int64).astype(dt)
    return a.astype(np.float64).astype(dt)


OPS["arith.extsi"] = OPS["arith.trunci"] = OPS["arith.index_cast"] = OPS["arith.sitofp"] = \
    _convert(_int_convert)
OPS["arith.extui"] = OPS["arith.index_castui"] = OPS["arith.uitofp"] = \
    _convert(lambda a, dt: _unsigned(a).astype(np.uint64).astype(dt) if dt != np.bool_
             else (a & 1).astype(bool))
OPS["arith.extf"] = OPS["arith.truncf"] = \
    _convert(lambda a, dt: a.astype(np.float32).astype(dt) if a.dtype.itemsize < 4 <= dt.itemsize
             or dt.itemsize < 4 else a.astype(dt))


def _float_to_int(signed: bool):
    """fptosi / fptoui: a value whose truncation does not fit (as a signed, resp.
    unsigned, integer) is poison in LLVM (the lowering clamps first, elementwise.py),
    so the simulator refuses it."""
    def fn(a: np.ndarray, dt: np.dtype) -> np.ndarray:
        if dt == np.bool_:
            return fn(a, np.dtype(np.uint8)).astype(bool)
        t = np.trunc(a.astype(np.float64))
        as_int = np.dtype(f"{'i' if signed else 'u'}{dt.itemsize}")
        info = np.iinfo(as_int)
        bad = np.isnan(t) | (t < info.min) | (t > info.max)
        if bad.any():
            raise SimError(f"a float-to-int conversion of {a[bad].flat[0]!r} to "
                           f"{as_int} is out of range (poison)")
        return t.astype(as_int).view(dt)
    return fn


OPS["arith.fptosi"] = _convert(_float_to_int(True))
OPS["arith.fptoui"] = _convert(_float_to_int(False))


@op("arith.bitcast", "llvm.bitcast", "vector.bitcast")
def _bitcast(sim, blk, o, mask):
    (a,) = _operands(sim, blk, o)
    t = o.results[0].type
    a = np.ascontiguousarray(a)
    raw = a.view(np.uint8).reshape(sim.threads, -1)
    if isinstance(t, ir.VectorType):
        return raw.view(np_dtype(t.element_type)).reshape(sim.threads, t.shape[0])
    return raw.view(np_dtype(t)).reshape(sim.threads)


@op("arith.negf")
def _negf(sim, blk, o, mask):
    (a,) = _operands(sim, blk, o)
    return -a


_MATH = {"math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log, "math.log2": np.log2,
         "math.sqrt": np.sqrt, "math.rsqrt": lambda x: 1 / np.sqrt(x), "math.sin": np.sin,
         "math.cos": np.cos, "math.tan": np.tan, "math.tanh": np.tanh, "math.absf": np.abs,
         "math.floor": np.floor, "math.ceil": np.ceil, "math.erf": None,
         "math.log1p": np.log1p, "math.expm1": np.expm1, "math.sinh": np.sinh,
         "math.cosh": np.cosh, "math.atan2": np.arctan2,
         "math.fma": lambda a, b, c: a * b + c}   # inputs widened to f64: one rounding


def _math(sim, blk, o, mask):
    fn = _MATH.get(o.name)
    if fn is None:
        raise SimError(f"no model of {o.name}")
    args = _operands(sim, blk, o)
    with np.errstate(all="ignore"):
        out = fn(*[np.asarray(a, np.float64) for a in args])
    return out.astype(np.asarray(args[0]).dtype)


PREFIX_OPS.append(("math.", _math))


# -- control flow ------------------------------------------------------------------------
@op("scf.if")
def _if(sim, blk, o, mask):
    """Both sides of a divergent branch run as coroutines, each for its threads,
    switching where one waits on the other (a producer and its consumers)."""
    cond = np.asarray(blk.env[o.operands[0]], bool)
    regions = list(o.regions)
    sides = []
    for region, m in ((regions[0], mask & cond), (regions[1], mask & ~cond)):
        if len(region.blocks) and m.any():
            sides.append([sim.run(blk, region.blocks[0], m), None, False])
    while not all(done for _, _, done in sides):
        before = blk.version
        all_blocked = True
        for side in sides:
            if side[2]:
                continue
            try:
                signal = next(side[0])
                all_blocked = all_blocked and signal is BLOCKED
            except StopIteration as stop:
                side[1], side[2] = stop.value, True
                all_blocked = False
        if all_blocked and blk.version == before:
            yield BLOCKED                 # let an enclosing branch's other side run
    if not o.results:
        return None
    if len(sides) == 1:
        return sides[0][1]
    if not sides:
        return [sim.full(0, r.type) for r in o.results]
    return [_where(cond, x, y) for x, y in zip(sides[0][1], sides[1][1])]


@op("scf.for")
def _for(sim, blk, o, mask):
    ops = list(o.operands)
    lb = _uniform(blk.env[ops[0]], mask, "a loop's lower bound")
    ub = _uniform(blk.env[ops[1]], mask, "a loop's upper bound")
    step = _uniform(blk.env[ops[2]], mask, "a loop's step")
    carried = [blk.env[v] for v in ops[3:]]
    body = o.regions[0].blocks[0]
    iv_t = body.arguments[0].type
    for i in range(lb, ub, step):
        blk.env[body.arguments[0]] = sim.full(i, iv_t)
        for a, v in zip(list(body.arguments)[1:], carried):
            blk.env[a] = v
        carried = yield from sim.run(blk, body, mask)
    return carried


@op("scf.while")
def _while(sim, blk, o, mask):
    """Threads leave the loop when their own condition fails (a compare-and-swap loop
    diverges); the others run on, the leavers masked off, until none is left."""
    before, after = (r.blocks[0] for r in o.regions)
    carried = [blk.env[v] for v in o.operands]
    active, results = mask.copy(), None
    while True:
        for a, v in zip(before.arguments, carried):
            blk.env[a] = v
        out = yield from sim.run(blk, before, active)      # scf.condition's operands
        stay = np.asarray(out[0], bool) & active
        leaving = active & ~stay
        results = list(out[1:]) if results is None else \
            [_where(leaving, new, old) for new, old in zip(out[1:], results)]
        active = stay
        if not active.any():
            return results
        for a, v in zip(after.arguments, out[1:]):
            blk.env[a] = v
        carried = yield from sim.run(blk, after, active)


# -- gpu -------------------------------------------------------------------------------
@op("gpu.thread_id")
def _tid(sim, blk, o, mask):
    dim = str(o.attributes["dimension"])
    return np.arange(sim.threads, dtype=np.int64) if dim.endswith("x>") else \
        np.zeros(sim.threads, np.int64)


@op("gpu.block_id")
def _bid(sim, blk, o, mask):
    axis = "xyz".index(str(o.attributes["dimension"])[-2])
    return np.full(sim.threads, blk.bid[axis], np.int64)


@op("gpu.grid_dim")
def _grid_dim(sim, blk, o, mask):
    axis = "xyz".index(str(o.attributes["dimension"])[-2])
    return np.full(sim.threads, sim.grid[axis], np.int64)


@op("gpu.barrier", "nvvm.barrier0")
def _barrier(sim, blk, o, mask):
    if not mask.all():
        raise SimError("a block barrier reached by only some threads (the GPU would hang)")


@op("nvvm.barrier")
def _named_barrier(sim, blk, o, mask):
    """`bar.sync id, count`: the threads running here must be the `count` it waits for."""
    vals = _operands(sim, blk, o)
    count = _uniform(vals[1], mask, "a barrier's thread count") if len(vals) > 1 else \
        sim.threads
    ids = np.asarray(vals[0]) if np.ndim(vals[0]) else np.full(sim.threads, vals[0])
    for i in np.unique(ids[mask]):         # threads at different barriers: each its own
        if int((mask & (ids == i)).sum()) != count:
            raise SimError(f"barrier {int(i)} of {count} threads reached by "
                           f"{int((mask & (ids == i)).sum())} (the GPU would hang or pass "
                           f"early)")


@op("nvvm.bar.warp.sync")
def _warp_sync(sim, blk, o, mask):
    """`bar.warp.sync 0xffffffff`: every lane of each warp running here (threads run in
    lockstep in the simulator: only a warp reached by some of its lanes is wrong)."""
    warps = mask.reshape(-1, 32)
    if not (warps.all(axis=1) | ~warps.any(axis=1)).all():
        raise SimError("__syncwarp of the full mask reached by only some lanes of a warp")


@op("gpu.shuffle")
def _shuffle(sim, blk, o, mask):
    value, offset, width = _operands(sim, blk, o)
    mode = str(o.attributes["mode"])
    lane = np.arange(sim.threads) % 32
    base = np.arange(sim.threads) - lane
    off = np.asarray(offset).astype(np.int64)
    src = {"xor": lane ^ off, "idx": off, "down": lane + off, "up": lane - off}[
        next(m for m in ("xor", "idx", "down", "up") if m in mode)]
    valid = (src >= 0) & (src < 32)
    src = np.where(valid, src, lane) + base
    return [np.asarray(value)[src], valid]


@op("gpu.dynamic_shared_memory")
def _dyn_smem(sim, blk, o, mask):
    return _SharedRef(np.zeros(sim.threads, np.int64), np.dtype(np.uint8))


# -- memref (shared memory) ----------------------------------------------------------------
@op("memref.view")
def _view(sim, blk, o, mask):
    src, shift = blk.env[o.operands[0]], blk.env[o.operands[1]]
    t = ir.MemRefType(o.results[0].type)
    return _SharedRef(src.offset + np.asarray(shift, np.int64), np_dtype(t.element_type))


@op("memref.extract_aligned_pointer_as_index")
def _extract_ptr(sim, blk, o, mask):
    return blk.env[o.operands[0]].offset.copy()


@op("memref.load")
def _mload(sim, blk, o, mask):
    ref = blk.env[o.operands[0]]
    (idx,) = [blk.env[v] for v in list(o.operands)[1:]]
    addr = ref.offset + np.asarray(idx, np.int64) * ref.dtype.itemsize
    return _read(sim, blk, 3, addr, ref.dtype, mask, None)


@op("memref.store")
def _mstore(sim, blk, o, mask):
    value, ref = blk.env[o.operands[0]], blk.env[o.operands[1]]
    (idx,) = [blk.env[v] for v in list(o.operands)[2:]]
    addr = ref.offset + np.asarray(idx, np.int64) * ref.dtype.itemsize
    _write(sim, blk, 3, addr, np.asarray(value, ref.dtype), mask)


# -- memory --------------------------------------------------------------------------------
def _space(t: ir.Type) -> int:
    m = re.match(r"!llvm\.ptr(?:<(\d+)>)?", str(t))
    return int(m.group(1) or 0) if m else 0


def _read(sim, blk, space, addr, dtype, mask, count) -> np.ndarray:
    """Per active thread, `count` (None: one scalar) elements of `dtype` at `addr`."""
    n = dtype.itemsize * (count or 1)
    out = np.zeros((sim.threads, n), np.uint8)
    if mask.any():
        a = np.asarray(addr, np.int64)[mask]
        data = blk.shared.read(a, n) if space == 3 else sim.memory.read(a, n)
        out[mask] = data
    vals = out.view(dtype if dtype != np.bool_ else np.uint8)
    if dtype == np.bool_:
        vals = vals != 0
    return vals.reshape(sim.threads) if count is None else vals.reshape(sim.threads, count)


def _write(sim, blk, space, addr, value, mask) -> None:
    if not mask.any():
        return
    value = np.ascontiguousarray(value)
    if value.dtype == np.bool_:
        value = value.astype(np.uint8)
    raw = value.view(np.uint8).reshape(sim.threads, -1)[mask]
    a = np.asarray(addr, np.int64)[mask]
    if space == 3:
        blk.shared.write(a, raw)
    else:
        sim.memory.write(a, raw)


@op("llvm.load")
def _load(sim, blk, o, mask):
    (ptr,) = _operands(sim, blk, o)
    t = o.results[0].type
    space = _space(o.operands[0].type)
    if isinstance(t, ir.VectorType):
        return _read(sim, blk, space, ptr, np_dtype(t.element_type), mask, t.shape[0])
    return _read(sim, blk, space, ptr, np_dtype(t), mask, None)


@op("llvm.store")
def _store(sim, blk, o, mask):
    value, ptr = _operands(sim, blk, o)
    _write(sim, blk, _space(o.operands[1].type), ptr, value, mask)


@op("llvm.intr.masked.load")
def _masked_load(sim, blk, o, mask):
    ptr, m, passthru = _operands(sim, blk, o)
    t = o.results[0].type
    dtype = np_dtype(t.element_type)
    out = np.array(passthru, copy=True)
    for j in range(t.shape[0]):
        lane_mask = mask & np.asarray(m)[:, j]
        vals = _read(sim, blk, _space(o.operands[0].type), ptr + j * dtype.itemsize, dtype,
                     lane_mask, None)
        out[:, j] = np.where(lane_mask, vals, out[:, j])
    return out


@op("llvm.intr.masked.store")
def _masked_store(sim, blk, o, mask):
    value, ptr, m = _operands(sim, blk, o)
    dtype = np.asarray(value).dtype
    for j in range(np.asarray(value).shape[1]):
        _write(sim, blk, _space(o.operands[1].type), ptr + j * dtype.itemsize,
               np.asarray(value)[:, j], mask & np.asarray(m)[:, j])


@op("llvm.getelementptr")
def _gep(sim, blk, o, mask):
    base = np.asarray(blk.env[o.operands[0]], np.int64)
    elem = ir.TypeAttr(o.attributes["elem_type"]).value
    size = nbytes_of(elem)
    raw = list(ir.DenseI32ArrayAttr(o.attributes["rawConstantIndices"]))
    dyn = iter(list(o.operands)[1:])
    if len(raw) != 1:
        raise SimError("getelementptr with more than one index is not modelled")
    idx = np.asarray(blk.env[next(dyn)], np.int64) if raw[0] == _DYNAMIC else raw[0]
    return base + idx * size


@op("llvm.inttoptr", "llvm.ptrtoint", "llvm.addrspacecast")
def _ptr_cast(sim, blk, o, mask):
    (a,) = _operands(sim, blk, o)
    t = o.results[0].type
    return np.asarray(a).astype(np.int64) if str(t).startswith("!llvm.ptr") else \
        np.asarray(a).astype(np_dtype(t))


@op("llvm.mlir.undef", "llvm.mlir.poison")
def _undef(sim, blk, o, mask):
    return sim.full(0, o.results[0].type)


@op("llvm.insertvalue")
def _insertvalue(sim, blk, o, mask):
    s, v = _operands(sim, blk, o)
    (i,) = list(ir.DenseI64ArrayAttr(o.attributes["position"]))
    s = list(s)
    s[i] = v
    return tuple(s)


@op("llvm.extractvalue")
def _extractvalue(sim, blk, o, mask):
    (s,) = _operands(sim, blk, o)
    (i,) = list(ir.DenseI64ArrayAttr(o.attributes["position"]))
    return s[i]


@op("llvm.insertelement")
def _insertelement(sim, blk, o, mask):
    vec, v, i = _operands(sim, blk, o)
    out = np.array(vec, copy=True)
    out[np.arange(sim.threads), np.asarray(i, np.int64)] = v
    return out


@op("vector.from_elements")
def _from_elements(sim, blk, o, mask):
    return np.stack([np.asarray(v) for v in _operands(sim, blk, o)], axis=1)


@op("vector.extract")
def _vextract(sim, blk, o, mask):
    (v,) = [blk.env[o.operands[0]]]
    (pos,) = list(ir.DenseI64ArrayAttr(o.attributes["static_position"]))
    return np.asarray(v)[:, pos]


@op("vector.broadcast")
def _vbroadcast(sim, blk, o, mask):
    (v,) = _operands(sim, blk, o)
    n = o.results[0].type.shape[0]
    return np.repeat(np.asarray(v)[:, None], n, axis=1)


# -- inline PTX the lowering emits ----------------------------------------------------------
_F32_INSTRUCTIONS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                     "max": np.fmax, "min": np.fmin, "sqrt": np.sqrt, "ex2": np.exp2,
                     "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh}


_ATOM_DTYPES = {("f", 32): np.float32, ("f", 64): np.float64, ("f", 16): np.float16,
                ("s", 32): np.int32, ("s", 64): np.int64, ("u", 32): np.uint32,
                ("u", 64): np.uint64, ("b", 32): np.uint32, ("b", 64): np.uint64}


def _atom(sim, blk, o, mask, kind: str, cls: str, bits: int, args):
    """`atom.<sem>.<scope>.global.<kind>.<type>`: one thread after another (lane order),
    each reading the old value and writing the new; returns each thread's old value."""
    result_t = o.results[0].type
    if cls in ("b", "bf") and bits == 16 or (cls == "f" and bits == 16 and
                                             isinstance(result_t, ir.BF16Type)):
        dt_ = ml_dtypes.bfloat16
    else:
        dt_ = _ATOM_DTYPES[(cls, bits)]
    dt_ = np.dtype(dt_)
    ptr = np.asarray(args[0], np.int64)
    values = [np.asarray(a).view(dt_) if np.asarray(a).dtype.itemsize == dt_.itemsize
              else np.asarray(a).astype(dt_) for a in args[1:]]
    old = np.zeros(sim.threads, np_dtype(result_t))
    ops = {"add": lambda a, b: a + b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
           "xor": lambda a, b: a ^ b, "min": min, "max": max, "exch": lambda a, b: b}
    for t in np.nonzero(mask)[0]:
        one = np.zeros(sim.threads, bool)
        one[t] = True
        before = _read(sim, blk, 1, ptr, dt_, one, None)[t]
        if kind == "cas":
            new = values[1][t] if before.tobytes() == values[0][t].tobytes() else before
        else:
            with np.errstate(over="ignore"):
                new = dt_.type(ops[kind](before, values[0][t]))
        cell = np.zeros(sim.threads, dt_)
        cell[t] = new
        _write(sim, blk, 1, ptr, cell, one)
        old[t] = np.asarray(before).view(old.dtype) if old.dtype.itemsize == dt_.itemsize \
            else before
    return old


def _flush(x):
    """f32 subnormals to signed zero (the `.ftz` of an instruction)."""
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x)


@op("llvm.inline_asm")
def _inline_asm(sim, blk, o, mask):
    asm = ir.StringAttr(o.attributes["asm_string"]).value
    args = _operands(sim, blk, o)
    if asm.startswith(("wgmma.fence", "wgmma.wait_group")):
        return tuple(args)                         # registers tied through the statement
    m = re.match(r"(add|sub|mul|div|sqrt)\.(rz|rm|rp)\.(ftz\.)?(f32|f64) ", asm)
    if m:                     # cuTile's directed roundings, exactly (interpreter.directed)
        from tileir.interpreter import directed
        t = np.float32 if m.group(4) == "f32" else np.float64
        x = [np.asarray(a, t) for a in args]
        if m.group(3):
            x = [_flush(v) for v in x]
        out = directed.sqrt(m.group(2), x[0], t) if m.group(1) == "sqrt" else \
            directed.binary(m.group(1), m.group(2), x[0], x[1], t)
        return _flush(out) if m.group(3) else out
    m = re.match(r"cvt\.(rz|rm|rp)\.(f16|f32)\.(f32|f64) ", asm)
    if m:                     # directed conversions (cvt.rm.f16.f32, cvt.rz.f32.f64)
        from tileir.interpreter import directed
        return directed.convert(m.group(1), np.asarray(args[0], m.group(3).replace("f", "float")),
                                m.group(2).replace("f", "float"))
    m = re.match(r"(\w+)\.(?:rn\.|full\.|approx\.)?(ftz\.)?(?:NaN\.)?f32 ", asm)
    if m and m.group(1) in _F32_INSTRUCTIONS:   # f32 arithmetic with cuTile's float options
        x = [np.asarray(a, np.float32) for a in args]
        if m.group(2):
            x = [_flush(v) for v in x]
        with np.errstate(all="ignore"):
            fn = _F32_INSTRUCTIONS[m.group(1)]
            if ".NaN." in asm:                    # max.NaN / min.NaN propagate NaN
                fn = np.maximum if m.group(1) == "max" else np.minimum
            out = fn(*x).astype(np.float32)
        return _flush(out) if m.group(2) else out
    m = re.match(r"atom\.\w+\.\w+\.global\.(\w+)\.(?:noftz\.)?(bf|[a-z])(\d+) ", asm)
    if m:
        return _atom(sim, blk, o, mask, m.group(1), m.group(2), int(m.group(3)), args)
    if "SK_WAIT_" in asm:          # stream-K: thread 0 waits for a partial's flag, clears it
        flag = _read(sim, blk, 1, args[0], np.dtype(np.int32), mask, None).view(np.int32)
        if (flag[mask] != 1).any():
            raise SimError(f"block {blk.bid} waits for a stream-K partial no block has "
                           f"written (on the GPU it would wait forever)")
        _write(sim, blk, 1, args[0], np.zeros(sim.threads, np.int32), mask)
        return None
    if asm.startswith("fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.b32"):
        _write(sim, blk, 1, args[0], np.asarray(args[1], np.int32), mask)
        return None
    if asm.startswith("griddepcontrol.") or asm.startswith("fence.acq_rel."):
        # one grid at a time, in program order; the wait's token (an i32 the policy
        # loads after it take as an operand) is 0
        return np.zeros(sim.threads, np.int32) if len(o.results) else None
    m = re.match(r"(ld|st)\.relaxed\.(?:cta|gpu|sys)\.global\.b(\d+) ", asm)
    if m:                                         # relaxed accesses: plain ones here
        bits = int(m.group(2))
        if m.group(1) == "st":
            value = np.asarray(args[1])
            value = (value.astype(np.uint16) & 0xFF).astype(np.uint8) if bits == 8 else \
                value.view(f"uint{bits}")
            _write(sim, blk, 1, args[0], value, mask)
            return None
        got = _read(sim, blk, 1, args[0], np.dtype(f"uint{bits}"), mask, None)
        return got.astype(np.int16) if bits == 8 else got.view(f"int{bits}")
    if asm.startswith("barrier.cluster.arrive"):
        if not mask.all():
            raise SimError("a cluster barrier reached by only some threads of a block")
        blk.cluster_arrivals += 1
        return None
    if asm.startswith("mapa.shared::cluster.u32"):
        return _mapa(blk, args)
    if asm.startswith("mbarrier.arrive.shared::cluster.b64 _,"):
        for t in np.nonzero(mask)[0]:
            owner, off = _cluster_address(blk, int(np.asarray(args[0])[t]), "mbarrier.arrive")
            _barrier_at(owner, off).arrive()
        return None
    m = re.match(r"ld\.shared::cluster\.b(\d+) ", asm)
    if m:
        return _load_cluster(sim, blk, args[0], int(m.group(1)), mask)
    if asm.startswith("trap;"):
        if mask.any():
            raise SimError(f"the kernel trapped (block {blk.bid}, threads "
                           f"{np.nonzero(mask)[0].tolist()[:8]})")
        return None
    if asm.startswith("setmaxnreg"):
        return None                               # registers are not modelled
    if asm.startswith("createpolicy"):
        return np.zeros(sim.threads, np.int64)
    # 16-byte accesses: streaming stores, loads with an L2 policy, stream-K partials
    m = re.match(r"(ld|st)\.global(?:\.cs|\.cg|\.L2::cache_hint)?\.v4\.(f32|b32) ", asm)
    if m:
        t = np.float32 if m.group(2) == "f32" else np.int32
        if m.group(1) == "st":
            _write(sim, blk, 1, args[0], np.stack([np.asarray(w, t) for w in args[1:5]], 1),
                   mask)
            return None
        words = _read(sim, blk, 1, args[0], np.dtype(t), mask, 4)
        return tuple(words[:, j] for j in range(4))
    if "wgmma.mma_async" in asm:
        return _wgmma_register_a(sim, blk, o, asm, args, mask)
    m = re.search(r"cvt\.rn\.f16x2\.(e4m3|e5m2)x2", asm)
    if m:                     # fp8 bits (low byte of a b16) -> f32 through f16
        t = hw.ELEM[m.group(1)][0]
        low = (np.asarray(args[0]).astype(np.int64) & 0xFF).astype(np.uint8)
        return low.view(t).astype(np.float32)
    m = re.search(r"cvt\.rn\.satfinite\.(e4m3|e5m2)x2\.f32", asm)
    if m:                     # (a, b) -> b16 with a's fp8 high, b's low; saturating
        t = hw.ELEM[m.group(1)][0]
        limit = float(ml_dtypes.finfo(t).max)
        with np.errstate(all="ignore"):
            hi, lo = (np.clip(np.asarray(x, np.float32), -limit, limit).astype(t)
                      .view(np.uint8).astype(np.int16) for x in args[:2])
        return (hi << 8) | lo
    raise SimError(f"no model of the inline PTX {asm[:60]!r}")


# -- thread-block clusters -------------------------------------------------------------
# A `mapa` address: the block's rank + 1 above bit 24, the shared offset below it.
_RANK_SHIFT = 24


def _asm(o) -> str:
    return ir.StringAttr(o.attributes["asm_string"]).value


def _mapa(blk, args):
    addr, rank = (np.asarray(a, np.int64) for a in args)
    if (rank < 0).any() or (rank >= len(blk.cluster)).any():
        raise SimError(f"mapa to a block rank outside the cluster of {len(blk.cluster)}: "
                       f"{np.unique(rank)[:4]}")
    if (addr >= 1 << _RANK_SHIFT).any():
        raise SimError("mapa of an address that is not a shared-memory offset of this block")
    return ((rank + 1) << _RANK_SHIFT | addr).astype(np.int32)


def _cluster_address(blk, addr: int, what: str):
    """(the block, its shared offset) a `mapa` address names."""
    rank = addr >> _RANK_SHIFT
    if rank == 0:
        raise SimError(f"{what} of a shared::cluster address mapa did not make")
    return blk.cluster[rank - 1], addr & ((1 << _RANK_SHIFT) - 1)


def _load_cluster(sim, blk, addr, bits: int, mask):
    """`ld.shared::cluster`: each thread reads the block its address names."""
    addr = np.asarray(addr, np.int64)
    dtype = np.dtype(f"uint{bits}")
    out = np.zeros(sim.threads, dtype)
    for t in np.nonzero(mask)[0]:
        owner, at = _cluster_address(blk, int(addr[t]), "ld.shared::cluster")
        off = np.array([at], np.int64)
        out[t] = owner.shared.read(off, bits // 8).view(dtype)[0, 0]
    return out.view(f"int{bits}")


def _cluster_wait(sim, blk, o, mask):
    """`barrier.cluster.wait`: until every block of the cluster has arrived as often as
    this one (a wait before this block's own arrive is an error)."""
    if not mask.all():
        raise SimError("a cluster barrier reached by only some threads of a block")
    blk.cluster_waits += 1
    if blk.cluster_waits > blk.cluster_arrivals:
        raise SimError("barrier.cluster.wait without an arrive before it")
    while any(b.cluster_arrivals < blk.cluster_waits for b in blk.cluster):
        blk.waiting = f"a cluster barrier (phase {blk.cluster_waits}) some block never reaches"
        yield BLOCKED
    return None


@op("gpu.printf")
def _printf(sim, blk, o, mask):
    """Device printf: each active thread's line, threads in order (C conversions, the
    `ll` length dropped for Python)."""
    from tileir.dialect.debug import PRINTF_CONVERSION
    fmt = re.sub(PRINTF_CONVERSION, lambda m: re.sub(r"(hh|h|ll|l|z|j|t)(?=.$)", "", m.group(0)),
                 ir.StringAttr(o.attributes["format"]).value)
    args = [np.broadcast_to(np.asarray(a), (sim.threads,)) for a in _operands(sim, blk, o)]
    for t in np.nonzero(mask)[0]:
        values = tuple(float(a[t]) if a.dtype.kind == "f" else int(a[t]) for a in args)
        sim.stdout.write(fmt % values)


# -- tensor cores, copies, barriers ---------------------------------------------------------
def _barrier_at(blk, addr: int, changing: bool = True) -> hw.Barrier:
    """The mbarrier at `addr`; `changing`: the caller is about to change it (which
    wakes the threads waiting on it)."""
    b = blk.shared.barriers.get(addr)
    if b is None:
        raise SimError(f"no initialized mbarrier at shared offset {addr}")
    if changing:
        blk.version += 1
    return b


@op("nvvm.mbarrier.init")
def _mb_init(sim, blk, o, mask):
    addr, count = _operands(sim, blk, o)
    for a, c in zip(np.asarray(addr)[mask], np.asarray(count)[mask]):
        blk.shared.check_unread(int(a), hw.BARRIER_BYTES, "an mbarrier's initialization")
        blk.shared.barriers[int(a)] = hw.Barrier(int(c), int(c))


@op("nvvm.mbarrier.inval")
def _mb_inval(sim, blk, o, mask):
    (addr,) = _operands(sim, blk, o)
    for a in np.asarray(addr)[mask]:
        blk.shared.barriers.pop(int(a), None)


@op("nvvm.mbarrier.arrive")
def _mb_arrive(sim, blk, o, mask):
    (addr,) = _operands(sim, blk, o)
    for a in np.asarray(addr)[mask]:
        _barrier_at(blk, int(a)).arrive()
    return np.zeros(sim.threads, np.int64)


@op("nvvm.mbarrier.arrive.expect_tx")
def _mb_arrive_tx(sim, blk, o, mask):
    addr, tx = _operands(sim, blk, o)
    for a, n in zip(np.asarray(addr)[mask], np.asarray(tx)[mask]):
        b = _barrier_at(blk, int(a))
        b.expect_tx(int(n))
        b.arrive()
    return np.zeros(sim.threads, np.int64) if o.results else None


@op("nvvm.mbarrier.try_wait.parity")
def _mb_wait(sim, blk, o, mask):
    addr, parity, _ = _operands(sim, blk, o)
    for a, p in zip(np.asarray(addr)[mask], np.asarray(parity)[mask]):
        while True:
            b = _barrier_at(blk, int(a), changing=False)
            if b.ready(int(p)):
                break
            blk.waiting = (f"a wait on the mbarrier at shared offset {int(a)} for parity "
                           f"{int(p)}: {b.phase} phases completed, {b.pending} arrivals "
                           f"and {b.tx} bytes still pending")
            yield BLOCKED
    return None


@op("nvvm.cp.async.bulk.tensor.shared.cluster.global")
def _tma(sim, blk, o, mask):
    """A TMA load into this block's shared memory, or with a multicast mask into that of
    each block of the cluster the mask names (the same offset, completing bytes on the
    mbarrier at the same offset in each)."""
    vals = _operands(sim, blk, o)
    # operands: dst, tensor map, coords..., mbar, im2col offsets..., [multicast mask],
    # [L2 hint], [predicate]
    sizes = list(ir.DenseI32ArrayAttr(o.attributes["operandSegmentSizes"]))
    if sizes[4] or any(sizes[6:]):
        raise SimError("only TMA loads without im2col offsets, L2 hint or predicate are "
                       "modelled")
    dst, tmap = vals[0], vals[1]
    coords, mbar = vals[2:2 + sizes[2]], vals[2 + sizes[2]]
    multicast = vals[3 + sizes[2]] if sizes[5] else None
    for t in np.nonzero(mask)[0]:
        tm = sim.tensor_maps.get(int(tmap[t]))
        if tm is None:
            raise SimError(f"no tensor map behind parameter value {int(tmap[t])}")
        targets = [blk]
        if multicast is not None:
            bits = int(multicast[t]) & 0xFFFF
            if bits >> len(blk.cluster):
                raise SimError(f"TMA multicast mask {bits:#x} names blocks outside the "
                               f"cluster of {len(blk.cluster)}")
            targets = [b for r, b in enumerate(blk.cluster) if bits >> r & 1]
        for b in targets:
            n = hw.tma_load(sim.memory, b.shared, tm, int(dst[t]),
                            [int(c[t]) for c in coords])
            _barrier_at(b, int(mbar[t])).complete_tx(n)


@op("nvvm.cp.async.bulk.tensor.global.shared.cta")
def _tma_store(sim, blk, o, mask):
    vals = _operands(sim, blk, o)
    tmap, src, coords = vals[0], vals[1], vals[2:]
    if len(o.operands) != 2 + len(coords):
        raise SimError("only TMA stores without predicate or cache hint are modelled")
    for t in np.nonzero(mask)[0]:
        tm = sim.tensor_maps.get(int(tmap[t]))
        if tm is None:
            raise SimError(f"no tensor map behind parameter value {int(tmap[t])}")
        hw.tma_store(sim.memory, blk.shared, tm, int(src[t]), [int(c[t]) for c in coords],
                     int(t))


@op("nvvm.cp.async.bulk.commit.group")
def _bulk_commit(sim, blk, o, mask):
    for t in np.nonzero(mask)[0]:
        blk.shared.bulk_commit(int(t))


@op("nvvm.cp.async.bulk.wait_group")
def _bulk_wait(sim, blk, o, mask):
    if "read" not in o.attributes:
        raise SimError("only cp.async.bulk.wait_group.read is modelled")
    for t in np.nonzero(mask)[0]:
        blk.shared.bulk_wait(int(t), _attr_int(o, "group"))


@op("nvvm.stmatrix")
def _stmatrix(sim, blk, o, mask):
    vals = _operands(sim, blk, o)
    ptr, words = vals[0], vals[1:]
    trans = "col" in str(o.attributes["layout"])
    _whole_warps(mask, "stmatrix")
    active = mask.reshape(-1, 32).all(1)                     # the warps that run it
    warps = int(active.sum())
    p = np.asarray(ptr, np.int64).reshape(-1, 32)[active]
    lane = np.arange(32)
    for j, w in enumerate(words):
        pair = np.asarray(w, np.int32).reshape(-1, 32)[active].view(np.uint16) \
            .reshape(warps, 32, 2)
        mat = np.zeros((warps, 8, 8), np.uint16)
        for e in range(2):
            if not trans:   # thread t: row t / 4, elements 2 (t % 4) and the next
                mat[:, lane // 4, 2 * (lane % 4) + e] = pair[:, :, e]
            else:           # thread t: column t / 4, rows 2 (t % 4) and the next
                mat[:, 2 * (lane % 4) + e, lane // 4] = pair[:, :, e]
        rows = p[:, 8 * j:8 * j + 8].reshape(-1)                 # lanes 8j.. point at rows
        blk.shared.write(rows, np.ascontiguousarray(mat).view(np.uint8).reshape(-1, 16))


@op("nvvm.cp.async.shared.global")
def _cp_async(sim, blk, o, mask):
    vals = _operands(sim, blk, o)
    dst, src = vals[:2]
    size = _attr_int(o, "size")
    cp = np.asarray(vals[2] if len(vals) > 2 else np.full(sim.threads, size), np.int64)
    if not mask.any():
        return
    t = np.nonzero(mask)[0]
    data = np.zeros((t.size, size), np.uint8)
    for n in np.unique(cp[t]):
        sel = t[cp[t] == n]
        if n:
            data[np.isin(t, sel), :n] = sim.memory.read(np.asarray(src, np.int64)[sel], int(n))
    blk.shared.write(np.asarray(dst, np.int64)[t], data)


def _nothing(sim, blk, o, mask):
    return None


for _name in ("nvvm.fence.proxy", "nvvm.fence.mbarrier.init", "nvvm.cp.async.commit.group",
              "nvvm.cp.async.wait.group", "nvvm.wgmma.fence.aligned",
              "nvvm.wgmma.commit.group.sync.aligned"):
    OPS[_name] = _nothing


@op("nvvm.wgmma.wait.group.sync.aligned")
def _wgmma_wait(sim, blk, o, mask):
    return None


def _warpgroups(sim, mask):
    """The warpgroups a wgmma runs in: all of whose threads are here (none of a
    group: not its turn; some: an error, wgmma is warpgroup-collective)."""
    for g in range(sim.threads // 128):
        sel = slice(128 * g, 128 * (g + 1))
        if not mask[sel].any():
            continue
        if not mask[sel].all():
            raise SimError("a wgmma reached by part of a warpgroup")
        yield g, sel


def _whole_warps(mask: np.ndarray, what: str) -> None:
    warps = mask.reshape(-1, 32)
    if (warps.any(1) & ~warps.all(1)).any():
        raise SimError(f"{what} reached by part of a warp")


@op("nvvm.wgmma.mma_async")
def _wgmma(sim, blk, o, mask):
    acc, desc_a, desc_b = [blk.env[v] for v in o.operands]
    shape = str(o.attributes["shape"])
    m, n, k = (int(x) for x in re.findall(r"= (\d+)", shape))
    ta = re.search(r"<(\w+)>", str(o.attributes["typeA"])).group(1)
    tb = re.search(r"<(\w+)>", str(o.attributes["typeB"])).group(1)     # (e4m3 x e5m2)
    a_kmajor = "row" in str(o.attributes["layoutA"])
    b_kmajor = "col" in str(o.attributes["layoutB"])
    out = np.stack([np.asarray(x, np.float32) for x in acc])      # (regs, threads)
    if "zero" in str(o.attributes["scaleD"]):                     # D = A * B
        out = np.zeros_like(out)
    for g, sel in _warpgroups(sim, mask):
        da = _uniform(np.asarray(desc_a)[sel], np.ones(128, bool), "wgmma descriptor A")
        db = _uniform(np.asarray(desc_b)[sel], np.ones(128, bool), "wgmma descriptor B")
        A = hw.to_float(hw.read_operand(blk.shared, da, 64, k, a_kmajor, ta), ta)
        B = hw.to_float(hw.read_operand(blk.shared, db, n, k, b_kmajor, tb), tb)   # n x k
        _accumulate(out, 128 * g, n, A @ B.T)
    return tuple(out[i] for i in range(out.shape[0]))


def _accumulate(out: np.ndarray, first: int, n: int, product: np.ndarray) -> None:
    """out[reg, thread] += product at the accumulator fragment's (row, col), in f32."""
    t, i, r, c = hw.wgmma_accumulator_index(n)
    d = out[i, first + t].astype(np.float64) + product[r, c]
    out[i, first + t] = d.astype(np.float32)


def _wgmma_register_a(sim, blk, o, asm, args, mask):
    mt = re.search(r"\.m64n(\d+)k16\.f32\.(\w+)\.", asm)
    n, elem = int(mt.group(1)), mt.group(2)
    nd = n // 2
    acc, a_words, desc_b = args[:nd], args[nd:nd + 4], args[nd + 4]
    tnsp_b = asm.rstrip().rstrip("}").rstrip().rstrip(";").split(",")[-1].strip() == "1"
    dtype = hw.ELEM[elem][0]
    afrag = hw.a_fragment_coords()
    out = [np.array(x, np.float32, copy=True) for x in acc]
    for g, sel in _warpgroups(sim, mask):
        db = _uniform(np.asarray(desc_b)[sel], np.ones(128, bool), "wgmma descriptor B")
        B = hw.to_float(hw.read_operand(blk.shared, db, n, 16, not tnsp_b, elem), elem)
        A = np.zeros((64, 16))
        for w in range(4):
            for lane in range(32):
                t = 128 * g + 32 * w + lane
                vals = np.concatenate([np.asarray(a_words[j])[t:t + 1].view(dtype)
                                       for j in range(4)])
                for i in range(8):
                    r, c = afrag[(lane, i)]
                    A[16 * w + r, c] = float(vals[i])
        stacked = np.stack(out)
        _accumulate(stacked, 128 * g, n, A @ B.T)
        out = list(stacked)
    return tuple(out)


@op("nvvm.ldmatrix")
def _ldmatrix(sim, blk, o, mask):
    (ptr,) = _operands(sim, blk, o)
    num = _attr_int(o, "num")
    trans = "col" in str(o.attributes["layout"])
    _whole_warps(mask, "ldmatrix")
    warps = sim.threads // 32
    p = np.asarray(ptr, np.int64).reshape(warps, 32)
    lane = np.arange(32)
    words = []
    for j in range(num):
        rows = p[:, 8 * j:8 * j + 8].reshape(-1)                 # lanes 8j.. point at rows
        mat = blk.shared.read(rows, 16).view(np.uint16).reshape(warps, 8, 8)
        if not trans:       # thread t: row t / 4, elements 2 (t % 4) and the next
            pair = np.stack([mat[:, lane // 4, 2 * (lane % 4)],
                             mat[:, lane // 4, 2 * (lane % 4) + 1]], axis=-1)
        else:               # thread t: column t / 4, rows 2 (t % 4) and the next
            pair = np.stack([mat[:, 2 * (lane % 4), lane // 4],
                             mat[:, 2 * (lane % 4) + 1, lane // 4]], axis=-1)
        words.append(np.ascontiguousarray(pair).view(np.int32).reshape(sim.threads))
    return tuple(words) if num > 1 else words[0]


def _fragment_index(coords: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    lane, i, r, c = zip(*[(ln, ii, rr, cc) for (ln, ii), (rr, cc) in coords.items()])
    return tuple(np.array(x) for x in (lane, i, r, c))


_A16 = _fragment_index(hw.a_fragment_coords())
_B16 = _fragment_index(hw.b_fragment_coords())
_C16 = _fragment_index(hw.c_fragment_coords())
_ATF32 = _fragment_index(hw.a_fragment_coords_tf32())
_BTF32 = _fragment_index(hw.b_fragment_coords_tf32())


@op("nvvm.mma.sync")
def _mma_sync(sim, blk, o, mask):
    vals = _operands(sim, blk, o)
    k = int(re.search(r"k = (\d+)", str(o.attributes["shape"])).group(1))
    elem = re.search(r"<(\w+)>", str(o.attributes["multiplicandAPtxType"])).group(1)
    if len(o.operands) != 10 or (k, elem == "tf32") not in ((16, False), (8, True)):
        raise SimError("only mma.sync.m16n8k16 (16-bit types) and m16n8k8 (tf32) are "
                       "modelled")
    a_words, b_words, c = vals[:4], vals[4:6], vals[6:10]
    dtype = hw.ELEM[elem][0]
    _whole_warps(mask, "mma.sync")
    warps = sim.threads // 32

    def elements(ws):        # (threads, elements) of the packed operand
        raw = np.concatenate([np.ascontiguousarray(np.asarray(w)).view(np.uint8)
                              .reshape(sim.threads, -1) for w in ws], axis=1)
        return raw.view(dtype).astype(np.float64).reshape(warps, 32, -1)

    va, vb = elements(a_words), elements(b_words)
    if elem == "tf32":          # the tensor core reads the top 19 bits of each f32
        va, vb = hw.to_float(va.astype(np.float32), elem), hw.to_float(vb.astype(np.float32),
                                                                        elem)
    vc = np.stack([np.asarray(x, np.float64) for x in c], axis=1).reshape(warps, 32, 4)
    A = np.zeros((warps, 16, k))
    B = np.zeros((warps, k, 8))
    C = np.zeros((warps, 16, 8))
    lane, i, r, col = _ATF32 if k == 8 else _A16
    A[:, r, col] = va[:, lane, i]
    lane, i, r, col = _BTF32 if k == 8 else _B16
    B[:, r, col] = vb[:, lane, i]
    lane, i, r, col = _C16
    C[:, r, col] = vc[:, lane, i]
    D = (C + A @ B).astype(np.float32)
    out = np.zeros((warps, 32, 4), np.float32)
    out[:, lane, i] = D[:, r, col]
    out = out.reshape(sim.threads, 4)
    return tuple(out[:, j] for j in range(4))


# ---------------------------------------------------------------------------
# Launching
# ---------------------------------------------------------------------------
def simulate(compiled, grid: Sequence[int], args: Sequence[Any], *,
             blocks: Sequence[tuple[int, int, int]] | None = None,
             sm_count: int = 3) -> None:
    """Runs a kernel compiled to the `gpu` stage (or later) on NumPy arguments.

    `compiled` is a `CompiledKernel` (its `gpu` artifact and metadata are used);
    `args` are the kernel's arguments as `launch` takes them (arrays are NumPy and
    are written in place).  `blocks` restricts the run to some block ids (all by
    default).  A persistent kernel walks `grid` on `sm_count` blocks (few, so that
    each block takes several tiles), as the launcher runs it on one block per SM.
    """
    from tileir.dialect import context as tile_context
    from tileir.runtime.arrays import describe
    from tileir.runtime.tensor_maps import clipped_box, encode_args
    meta = compiled.meta
    # a CompiledKernel spreads list-of-arrays arguments; a stand-in with only
    # `runtime_params` (the tests' hand-made modules) has none
    runtime = compiled.runtime_args(args) if hasattr(compiled, "runtime_args") else \
        [args[i] for i in compiled.runtime_params]
    # a list passed as a table: its arrays, then the table (filled once they have
    # addresses), stand for it
    lists = {id(a): list(a.arrays) for a in runtime if isinstance(a, ListTable)}
    for spec, a in zip(meta["params"], runtime):
        if isinstance(a, ListTable):
            _check_list_table(compiled, spec["name"], a)
    tables = {i: np.zeros((len(x), 1 + 2 * (x[0].ndim if x else 0)), np.int64)
              for i, x in lists.items()}
    runtime = [tables[id(a)] if isinstance(a, ListTable) else a for a in runtime]
    arrays = [a for a in runtime if isinstance(a, np.ndarray)] + \
        [x for xs in lists.values() for x in xs]
    grid = tuple(list(grid) + [1] * (3 - len(grid)))
    ctx = tile_context()
    with ctx:
        module = ir.Module.parse(compiled.artifacts["gpu"])
        func = _kernel(module)
        consts = _constant_tables(module)           # the module's constant globals
        extra = []
        if meta.get("workspace"):       # stream-K: its workspace, last
            from tileir.runtime.launcher import persistent_grid
            from tileir.runtime.workspace import size
            hw_grid = persistent_grid(meta, grid, sm_count)
            extra.append(np.zeros(size(int(meta["workspace"]), hw_grid[0]), np.uint8))
        memory = hw.Memory(arrays + list(consts.values()) + extra)
        globals_at = dict(zip(consts, memory.addresses[len(arrays):]))
        abi: list[Any] = []
        tensor_maps: dict[int, hw.TensorMap] = {}
        infos = {}
        addr_of = dict(zip(map(id, arrays), memory.addresses))
        for key, xs in lists.items():
            for row, x in zip(tables[key], xs):
                info = describe(x)
                row[:] = [addr_of[id(x)], *info.shape, *info.strides]
            at = addr_of[id(tables[key])] - hw.BASE_ADDRESS
            memory.bytes[at:at + tables[key].nbytes] = tables[key].view(np.uint8).reshape(-1)
        for i, (spec, a) in enumerate(zip(meta["params"], runtime)):
            if spec["kind"] == "array":
                info = describe(a)
                info = type(info)(addr_of[id(a)], info.shape, info.strides, info.dtype,
                                  info.device)
                infos[i] = info
                abi += [info.ptr] + list(info.shape) + list(info.strides)
            else:
                abi.append(a)
        if meta.get("persistent"):
            from tileir.runtime.launcher import persistent_grid
            abi += list(grid)
            grid = persistent_grid(meta, grid, sm_count)
        if meta.get("workspace"):       # stream-K: flags and one slot per block, zeroed
            abi.append(memory.addresses[-1])
        for k, tm in enumerate(meta.get("tensor_maps", ())):
            box = clipped_box(tm["box"], tm.get("clip"), infos[tm["param"]].shape)
            e = encode_args(infos[tm["param"]], box, tm["swizzle"], meta["name"],
                            meta["params"][tm["param"]]["name"])
            handle = 0x1000 + k
            tensor_maps[handle] = hw.TensorMap(e["address"], e["dims"], e["strides"], e["box"],
                                               infos[tm["param"]].itemsize,
                                               tm["swizzle"])
            abi.append(handle)
        sim = _Simulator(func, meta, grid, memory, tensor_maps)
        sim.globals.update(globals_at)
        body = func.regions[0].blocks[0]
        values = []
        for arg, v in zip(body.arguments, abi):
            values.append(sim.full(v, arg.type) if not isinstance(v, bool) else
                          sim.full(int(v), arg.type))
        ids = blocks if blocks is not None else [
            (x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
        if meta.get("workspace"):
            # stream-K: block b waits for a partial of block b + 1 (never the other way),
            # so running the blocks last to first meets every wait
            ids = list(reversed(ids))
        dims = meta.get("cluster")
        if dims:                        # whole clusters: those of the blocks asked for
            origins = dict.fromkeys(tuple(b - b % d for b, d in zip(bid, dims)) for bid in ids)
            for origin in origins:
                members = [(origin[0] + x, origin[1] + y, origin[2] + z)
                           for z in range(dims[2]) for y in range(dims[1]) for x in range(dims[0])]
                sim.run_cluster([_Block(sim, bid) for bid in members], values)
        else:
            for bid in ids:
                sim.run_block(_Block(sim, bid), values)
    memory.copy_out(arrays)


def _check_list_table(compiled, name: str, table: ListTable) -> None:
    """The arrays of a ListTable for parameter `name`: C-contiguous (the simulator lays
    them out as they are), of the element dtype and rank the kernel was compiled for."""
    from tileir.specialization import TableListParam
    element = next((k.element for n, k in getattr(compiled, "params", ())
                    if n == name and isinstance(k, TableListParam)), None)
    for i, x in enumerate(table.arrays):
        what = f"element {i} of the ListTable for '{name}'"
        if not x.flags.c_contiguous:
            raise SimError(f"{what} is not C-contiguous: the simulator places arrays in "
                           f"memory as they are laid out")
        if element is not None and (x.ndim != element.ndim or
                                    np.dtype(x.dtype) != element.dtype.numpy):
            raise SimError(f"{what} is a {x.ndim}-d {x.dtype} array; the kernel takes "
                           f"{element.ndim}-d {element.dtype.name} arrays")


def _constant_tables(module: ir.Module) -> dict[str, np.ndarray]:
    """name -> contents of each `llvm.mlir.global` constant of the gpu.module."""
    out = {}
    for op_ in module.body.operations:
        if op_.operation.name != "gpu.module":
            continue
        for g in op_.operation.regions[0].blocks[0].operations:
            g = g.operation
            if g.name == "llvm.mlir.global":
                name = ir.StringAttr(g.attributes["sym_name"]).value
                out[name] = np.array(ir.DenseElementsAttr(g.attributes["value"])).copy()
    return out


@op("llvm.mlir.addressof")
def _addressof(sim, blk, o, mask):
    name = ir.FlatSymbolRefAttr(o.attributes["global_name"]).value
    if name not in sim.globals:
        raise SimError(f"no constant global @{name} in the module")
    return np.full(sim.threads, sim.globals[name], np.int64)


def _kernel(module: ir.Module) -> ir.Operation:
    for op_ in module.body.operations:
        if op_.operation.name == "gpu.module":
            for f in op_.operation.regions[0].blocks[0].operations:
                if f.operation.name == "gpu.func":
                    return f.operation
    raise SimError("no gpu.func in the module: compile to the 'gpu' stage first")


__all__ = ["ListTable", "simulate", "SimError"]
