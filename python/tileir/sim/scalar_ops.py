"""The simulator's models of scalar and per-thread ops: `arith` and `math` element-wise,
`scf` control flow under the active-thread mask, and the `gpu` dialect's ids, barriers
and shuffles (rules registered in `rules.OPS`)."""

from __future__ import annotations

import numpy as np
from mlir import ir

from .rules import (BLOCKED, OPS, PREFIX_OPS, SharedRef, SimError, attr_int, np_dtype,
                       op, operands, static, uniform, where)


# -- arith ---------------------------------------------------------------------------
@op("arith.constant")
def _constant(sim, blk, o, mask):
    # constants are shared, read-only: no rule writes into its operands.  Kept for this
    # simulation by the op's decoding slots (their id: an int, hashed without the
    # bindings; they live as long as the parsed kernel) or by the op
    key = id(sim.slots_now) if o is sim.op_now else o
    found = sim.constants.get(key)
    if found is None:
        attr, t = o.attributes["value"], o.results[0].type
        found = sim.constants.get((attr, t))
        if found is None:
            found = sim.constants[attr, t] = _make_constant(sim, attr, t)
        sim.constants[key] = found
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


def _predicate(o) -> int:
    return attr_int(o, "predicate")


def _result_element_dtype(o) -> np.dtype:
    t = o.results[0].type
    return np_dtype(t.element_type if isinstance(t, ir.VectorType) else t)


def _unsigned(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.bool_:
        return x
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _signed_like(x: np.ndarray, like: np.ndarray) -> np.ndarray:
    return x.astype(np.dtype(f"u{like.dtype.itemsize}")).view(like.dtype) \
        if like.dtype != np.bool_ else x.astype(bool)


def _binary(fn):
    def rule(sim, blk, o, mask):
        a, b = operands(sim, blk, o)
        # (wrapping, inf and NaN as the GPU's: `simulate` runs under np.errstate ignore)
        return fn(a, b).astype(np.asarray(a).dtype)
    return rule


def _div_si(a, b):
    b = np.where(b == 0, 1, b)
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


def _shift(fn):
    def rule(sim, blk, o, mask):
        a, b = operands(sim, blk, o)
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
    a, b = operands(sim, blk, o)
    p = static(sim, o, _predicate)
    if p in _CMPI:
        return _CMPI[p](a, b)
    return _CMPI_U[p](_unsigned(a), _unsigned(b))


@op("arith.cmpf")
def _cmpf(sim, blk, o, mask):
    a, b = operands(sim, blk, o)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    p = static(sim, o, _predicate)
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
    c, a, b = operands(sim, blk, o)
    return where(np.asarray(c, bool), a, b)


def _convert(fn):
    def rule(sim, blk, o, mask):
        (a,) = operands(sim, blk, o)
        dt = static(sim, o, _result_element_dtype)
        return fn(np.asarray(a), dt)        # (under simulate's np.errstate ignore)
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
    (a,) = operands(sim, blk, o)
    t = o.results[0].type
    a = np.ascontiguousarray(a)
    raw = a.view(np.uint8).reshape(sim.threads, -1)
    if isinstance(t, ir.VectorType):
        return raw.view(np_dtype(t.element_type)).reshape(sim.threads, t.shape[0])
    return raw.view(np_dtype(t)).reshape(sim.threads)


@op("arith.negf")
def _negf(sim, blk, o, mask):
    (a,) = operands(sim, blk, o)
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
    args = operands(sim, blk, o)
    out = fn(*[np.asarray(a, np.float64) for a in args])    # (under simulate's errstate)
    return out.astype(np.asarray(args[0]).dtype)


PREFIX_OPS.append(("math.", _math))


# -- control flow ------------------------------------------------------------------------
@op("scf.if")
def _if(sim, blk, o, mask):
    """Both sides of a divergent branch run as coroutines, each for its threads,
    switching where one waits on the other (a producer and its consumers)."""
    cond = np.asarray(operands(sim, blk, o)[0], bool)
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
    return [where(cond, x, y) for x, y in zip(sides[0][1], sides[1][1])]


@op("scf.for")
def _for(sim, blk, o, mask):
    ops = operands(sim, blk, o)
    lb = uniform(ops[0], mask, "a loop's lower bound")
    ub = uniform(ops[1], mask, "a loop's upper bound")
    step = uniform(ops[2], mask, "a loop's step")
    carried = ops[3:]
    body = o.regions[0].blocks[0]
    iv, *args = [sim.vid(a) for a in body.arguments]
    iv_t = body.arguments[0].type
    for i in range(lb, ub, step):
        blk.env[iv] = sim.full(i, iv_t)
        for a, v in zip(args, carried):
            blk.env[a] = v
        carried = yield from sim.run(blk, body, mask)
    return carried


@op("scf.while")
def _while(sim, blk, o, mask):
    """Threads leave the loop when their own condition fails (a compare-and-swap loop
    diverges); the others run on, the leavers masked off, until none is left."""
    before, after = (r.blocks[0] for r in o.regions)
    carried = operands(sim, blk, o)
    before_args = [sim.vid(a) for a in before.arguments]
    after_args = [sim.vid(a) for a in after.arguments]
    active, results = mask.copy(), None
    while True:
        for a, v in zip(before_args, carried):
            blk.env[a] = v
        out = yield from sim.run(blk, before, active)      # scf.condition's operands
        stay = np.asarray(out[0], bool) & active
        leaving = active & ~stay
        results = list(out[1:]) if results is None else \
            [where(leaving, new, old) for new, old in zip(out[1:], results)]
        active = stay
        if not active.any():
            return results
        for a, v in zip(after_args, out[1:]):
            blk.env[a] = v
        carried = yield from sim.run(blk, after, active)


# -- gpu -------------------------------------------------------------------------------
@op("gpu.thread_id")
def _tid(sim, blk, o, mask):
    return np.arange(sim.threads, dtype=np.int64) if static(sim, o, _axis) == 0 else \
        np.zeros(sim.threads, np.int64)


@op("gpu.block_id")
def _bid(sim, blk, o, mask):
    return np.full(sim.threads, blk.bid[static(sim, o, _axis)], np.int64)


@op("gpu.grid_dim")
def _grid_dim(sim, blk, o, mask):
    return np.full(sim.threads, sim.grid[static(sim, o, _axis)], np.int64)


def _axis(o) -> int:
    """0, 1, 2 for a `#gpu<dim x>` (y, z) dimension attribute."""
    return "xyz".index(str(o.attributes["dimension"])[-2])


@op("gpu.barrier", "nvvm.barrier0")
def _barrier(sim, blk, o, mask):
    if not mask.all():
        raise SimError("a block barrier reached by only some threads (the GPU would hang)")
    blk.named.record("sync", np.zeros(sim.threads, np.int64), sim.threads, mask, o)


@op("nvvm.barrier")
def _named_barrier(sim, blk, o, mask):
    """`bar.sync id, count`: recorded for the replay of the block's barriers
    (hardware.NamedBarriers); at most `count` threads may reach it at once here."""
    _named(sim, blk, o, mask, "sync")


@op("nvvm.barrier.arrive")
def _named_arrive(sim, blk, o, mask):
    """`bar.arrive id, count`: counts towards the barrier's phase without waiting."""
    _named(sim, blk, o, mask, "arrive")


def _named(sim, blk, o, mask, kind: str) -> None:
    vals = operands(sim, blk, o)
    if o.name == "nvvm.barrier.arrive":      # (id?, number_of_threads)
        bar, count = vals if len(vals) == 2 else (0, vals[0])
    else:                                    # (id?, number_of_threads?, predicate?)
        has_id, has_count = static(sim, o, _barrier_segments)
        bar = vals[0] if has_id else 0
        count = vals[has_id] if has_count else sim.threads
    count = uniform(count, mask, "a barrier's thread count") if np.ndim(count) else int(count)
    ids = np.asarray(bar) if np.ndim(bar) else np.full(sim.threads, bar)
    for i in np.unique(ids[mask]):           # threads at different barriers: each its own
        if int((mask & (ids == i)).sum()) > count:
            raise SimError(f"barrier {int(i)} of {count} threads reached by "
                           f"{int((mask & (ids == i)).sum())} at once")
    blk.named.record(kind, ids.astype(np.int64), count, mask, o)


def _barrier_segments(o) -> tuple[int, int]:
    """Whether `nvvm.barrier` has its id and its thread count (optional operands)."""
    sizes = list(ir.DenseI32ArrayAttr(o.attributes["operandSegmentSizes"]))
    return sizes[0], sizes[1]


@op("nvvm.bar.warp.sync")
def _warp_sync(sim, blk, o, mask):
    """`bar.warp.sync 0xffffffff`: every lane of each warp running here (threads run in
    lockstep in the simulator: only a warp reached by some of its lanes is wrong)."""
    warps = mask.reshape(-1, 32)
    if not (warps.all(axis=1) | ~warps.any(axis=1)).all():
        raise SimError("__syncwarp of the full mask reached by only some lanes of a warp")


@op("gpu.shuffle")
def _shuffle(sim, blk, o, mask):
    value, offset, width = operands(sim, blk, o)
    mode = static(sim, o, lambda o: str(o.attributes["mode"]))
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
    return SharedRef(np.zeros(sim.threads, np.int64), np.dtype(np.uint8))


