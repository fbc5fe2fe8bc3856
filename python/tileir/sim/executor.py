"""The lockstep executor of `gpu`-stage IR (see tileir.sim).

Values: a scalar is a NumPy array of shape (threads,), a vector (threads, n), an
LLVM struct a tuple of values; pointers are int64 addresses (global, shared
offsets, or a tensor-map handle); a shared-memory memref is a `SharedRef`.  A
block's values are kept by number (`_Simulator.vid`), not by `ir.Value`: hashing a
value goes through the bindings (~0.4 us), and the run loop reads and writes a few
per op.
Control flow runs under an active-thread mask: both sides of a divergent
`scf.if` run, each for its threads, and their results merge per thread.

This module holds the machine (blocks, threads, the run loop, `simulate`); the op
table and what the rules share are `rules.py`; the ops' models are `scalar_ops.py`
(arith, math, scf, gpu), `memory_ops.py` (memrefs, loads, stores, addresses, structs,
vectors), `ptx_ops.py` (inline PTX, clusters, printf) and `async_ops.py` (mbarriers,
TMA, cp.async, wgmma, mma.sync).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Mapping, Sequence

import numpy as np
from mlir import ir

from . import hardware as hw
from .hardware import SimError
from . import rules
from .rules import BLOCKED, OPS, PREFIX_OPS, SUSPENDING, np_dtype
from tileir.dialect.types import by_type
# the ops' rules register into OPS as their modules load; the decoder asks ptx_ops for
# the inline PTX's text and the cluster wait
from . import async_ops, memory_ops, scalar_ops  # noqa: F401
from .ptx_ops import asm_text, cluster_wait


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
        self.env: dict[int, Any] = {}        # by the value's number (_Simulator.vid)
        self.version = 0          # bumped whenever an mbarrier changes
        self.waiting = ""         # what the last blocked wait waited for
        self.cluster: list["_Block"] = [self]   # the blocks of its cluster, by rank
        # barrier.cluster.arrive's and .wait's so far, by thread: a warp-specialized
        # kernel's producer and consumer warps reach the same barrier phase at
        # different instructions
        self.cluster_arrivals = np.zeros(self.threads, np.int64)
        self.cluster_waits = np.zeros(self.threads, np.int64)
        self.named = hw.NamedBarriers()   # bar.sync / bar.arrive, replayed at the end
        self.registers = hw.RegisterPool(self.threads)   # setmaxnreg, checked at the end


def _progress(blk: _Block) -> tuple[int, int, int]:
    """What changes when a block of a cluster moves on: its mbarriers, its threads'
    cluster barrier arrivals and waits."""
    return blk.version, int(blk.cluster_arrivals.sum()), int(blk.cluster_waits.sum())


@dataclasses.dataclass
class _Parsed:
    """A `gpu` artifact parsed once in this process, with what `_Simulator.run` reads
    from the bindings (filled as it runs): every simulation of the kernel shares them,
    since they depend on the IR alone."""

    module: ir.Module
    func: ir.Operation
    decoded: dict = dataclasses.field(default_factory=dict)      # ir.Block -> its ops
    operands: dict = dataclasses.field(default_factory=dict)     # ir.Operation -> numbers
    ids: dict = dataclasses.field(default_factory=dict)          # ir.Value -> its number
    statics: dict = dataclasses.field(default_factory=dict)      # ir.Operation -> rules.static


# The context `gpu` artifacts are parsed in: made once (a fresh one costs ~10 ms, the
# dialects' loading included), apart from the compiler's (a copy of a module a compile
# kept is in the compiler's context).
_CONTEXT: ir.Context | None = None
# The last kernels simulated, by their `gpu` artifact's text, or by the copy of the
# module a compile here kept for the stage: a test simulates one kernel on several
# inputs or grids, and parsing and decoding it is a share of each run.
_PARSED: dict[tuple, _Parsed] = {}
_PARSED_KEPT = 8


def _parsed(artifacts) -> _Parsed:
    """The `gpu` stage of `artifacts` (a compile's `StageIR`, or any mapping with the
    stage's text) as a module of its own: a copy of the module the compile kept where
    it kept one (printing it and parsing the text back took 10 to 40 ms), else the
    text parsed."""
    kept = artifacts.kept("gpu") if hasattr(artifacts, "kept") else None
    key = ("module", kept) if kept is not None else ("text", artifacts["gpu"])
    found = _PARSED.pop(key, None)
    if found is None:
        module = _module_copy(kept) if kept is not None else _parse(key[1])
        found = _Parsed(module, _kernel(module))
        while len(_PARSED) >= _PARSED_KEPT:
            del _PARSED[next(iter(_PARSED))]          # the least recently simulated
    _PARSED[key] = found
    return found


def _parse(text: str) -> ir.Module:
    global _CONTEXT
    if _CONTEXT is None:
        from tileir.dialect import context as tile_context
        _CONTEXT = tile_context()
    with _CONTEXT:
        return ir.Module.parse(text)


def _module_copy(kept: ir.Operation) -> ir.Module:
    from tileir.passes.pipeline import _replace_module
    with kept.context:
        module = ir.Module.create(loc=kept.location)
        _replace_module(module, kept.clone())
    return module


class _Simulator:
    def __init__(self, parsed: _Parsed, meta: Mapping, grid, memory: hw.Memory,
                 tensor_maps: dict[int, hw.TensorMap]):
        func = parsed.func
        self.func = func
        self.meta = meta
        self.grid = grid
        self.memory = memory
        self.tensor_maps = tensor_maps
        self.globals: dict[str, int] = {}      # constant globals' addresses (simulate)
        self.threads = meta["num_threads"]
        # arith.constant's value by (attribute, type): MLIR uniques both, so equal
        # constants share one key, hashed without printing them; and by the op; and
        # llvm.mlir.undef's zeros by ("undef", type)
        self.constants: dict[tuple | ir.Operation | int, Any] = {}
        # each block's ops as `run` needs them, read from the bindings once (not on
        # every trip of a loop: a K loop runs its body thousands of times per block,
        # nor on every simulation of the kernel: `_Parsed`)
        self.decoded: dict[ir.Block, list[tuple]] = parsed.decoded
        self.operands: dict[ir.Operation, list[int]] = parsed.operands  # by op
        self.ids: dict[ir.Value, int] = parsed.ids       # a value's key in a block's env
        self.statics: dict[ir.Operation, Any] = parsed.statics    # rules.static
        self.stdout = sys.stdout               # where device printf writes
        # the op whose rule runs now, and its decoding's slots [operand numbers,
        # rules.static's answer]: rules find them without hashing the op (~0.8 us)
        self.op_now: ir.Operation | None = None
        self.slots_now: list = [None, None]

    # -- values ---------------------------------------------------------------------
    def vid(self, v: ir.Value) -> int:
        """The number of value `v`, its key in a block's `env` (numbered as first met)."""
        i = self.ids.get(v)
        if i is None:
            i = self.ids[v] = len(self.ids)
        return i

    def full(self, value, t: ir.Type) -> Any:
        fields = struct_types(t)
        if fields is not None:
            return tuple(self.full(value, et) for et in fields)
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
            blk.env[self.vid(a)] = v
        version = None
        for signal in self.run(blk, body, np.ones(self.threads, bool)):
            if signal is BLOCKED:
                if version == blk.version:
                    raise SimError(f"block {blk.bid} would hang: {blk.waiting}")
                version = blk.version
        _check_at_end(blk)
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
                blk.env[self.vid(a)] = v
        live = [(blk, self.run(blk, body, np.ones(self.threads, bool))) for blk in blks]
        while live:
            state = [_progress(b) for b, _ in live]
            still = []
            for blk, gen in live:
                try:
                    next(gen)
                    still.append((blk, gen))
                except StopIteration:
                    _check_at_end(blk)
                    if any(blk.shared.bulk_reads()):
                        raise SimError(f"block {blk.bid} exits while TMA stores may still "
                                       f"read its shared memory") from None
            if len(still) == len(live) and state == [_progress(b) for b, _ in still]:
                raise SimError(f"cluster of block {live[0][0].bid} would hang: "
                               f"{live[0][0].waiting}")
            live = still

    def run(self, blk: _Block, block: ir.Block, mask: np.ndarray):
        ops = self.decoded.get(block)
        if ops is None:
            ops = self.decoded[block] = [_decode(op.operation, self.vid)
                                         for op in block.operations]
        env = blk.env
        for op, name, fn, kind, values, slots in ops:
            if kind is _ENDS:
                return [env[v] for v in values]       # the terminator's operands
            if fn is None:
                raise SimError(f"{op.location}: the simulator has no model of '{name}'")
            try:
                self.op_now, self.slots_now = op, slots
                out = fn(self, blk, op, mask)
                if kind is _SUSPENDS:
                    out = yield from out
            except SimError as e:
                if str(e).startswith("loc(") or " at block " in str(e):
                    raise
                raise SimError(f"{op.location}: '{name}' at block {blk.bid}: {e}") from None
            if out is not None:
                if isinstance(out, list):
                    for r, v in zip(values, out):
                        env[r] = v
                elif values:
                    env[values[0]] = out
        return []

    def get(self, blk: _Block, v: ir.Value) -> Any:
        return blk.env[self.vid(v)]


def _check_at_end(blk: _Block) -> None:
    """What the executor's lockstep cannot see as it runs: the named barriers' and the
    register pool's waits, replayed once the block is done."""
    error = blk.named.check()
    if error is not None:
        raise SimError(f"block {blk.bid} would hang or race at its named barriers: {error}")
    error = blk.registers.check()
    if error is not None:
        raise SimError(f"block {blk.bid} would hang: {error}")


# What `_Simulator.run` does with an op besides running its rule (`_decode`)
_PLAIN, _SUSPENDS, _ENDS = "plain", "suspends", "ends"


def _decode(op: ir.Operation, vid) -> tuple:
    """(op, name, its rule or None, what run does with it, its results' numbers, the
    slots its rule's operand numbers and static answer are kept in) for
    `_Simulator.run`; for a terminator, its operands' numbers instead of its
    results'."""
    name = op.name
    if name in ("scf.yield", "scf.condition", "gpu.return"):
        return op, name, None, _ENDS, [vid(v) for v in op.operands], None
    fn = OPS.get(name)
    if name == "llvm.inline_asm" and asm_text(op).startswith("barrier.cluster.wait"):
        fn, name = cluster_wait, "barrier.cluster.wait"
    if fn is None:
        fn = next((f for p, f in PREFIX_OPS if name.startswith(p)), None)
    return op, name, fn, _SUSPENDS if name in SUSPENDING else _PLAIN, \
        [vid(v) for v in op.results], [None, None]


def struct_types(t: ir.Type) -> list[ir.Type] | None:
    """The field types of an `!llvm.struct` type, None for any other type (once per
    type: printing one takes ~15 us)."""
    return by_type("struct_fields", t, _struct_fields)


def _struct_fields(t: ir.Type) -> list[ir.Type] | None:
    text = str(t)
    if not text.startswith("!llvm.struct"):
        return None
    inner = text[len("!llvm.struct<("):-2]
    return [ir.Type.parse(x.strip(), t.context) for x in _split(inner)]


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
    parsed = _parsed(compiled.artifacts)
    # Integer wrap-around, inf and NaN are what the GPU computes, not errors: the rules
    # run under one errstate for the whole simulation (entering one per op was ~3 % of
    # a simulation's CPU).
    with parsed.module.context, np.errstate(all="ignore"):
        module, func = parsed.module, parsed.func
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
        sim = _Simulator(parsed, meta, grid, memory, tensor_maps)
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
            if any(g % d for g, d in zip(grid, dims)):
                raise SimError(f"kernel '{meta.get('name', '?')}' runs clusters of "
                               f"{tuple(dims)} blocks: grid {tuple(grid)} is not a "
                               f"multiple of it along every axis")
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


@rules.op("llvm.mlir.addressof")
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

