"""Compiles Tile IR functions into Python closures, once, and executes them.

Each SSA value of a function gets a *slot* in a flat list, the frame.  Each op
becomes a *step*: a closure `step(frame)` that reads its operands' slots and
writes its results' slots.  A block is a tuple of steps plus the slots its
terminator hands back.  Running a kernel is then a loop over steps with no IR
in sight, which is what makes a 1000-block grid cheap.

Slot 0 of every frame holds the `Launch` (block id, grid, call depth), so steps
need no second argument and no global state.

Op semantics live in the sibling rule modules: one function per op, registered
with `@rule`, called as `rule(op, cx)` with the `CompileContext`, returning the step.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np
from mlir import ir

from tileir.dialect.types import array_info

from .dtypes import elem_of, shape_of
from .errors import Fault, InterpreterError, UnsupportedOpError

Frame = list
Step = Callable[[Frame], None]
Rule = Callable[[ir.OpView, "CompileContext"], Step]

RULES: dict[str, Rule] = {}

# Terminators are not steps: the block that ends in one returns their operands.
TERMINATORS = frozenset({"scf.yield", "scf.condition", "func.return"})

LAUNCH_SLOT = 0


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Registers the decorated function as the interpreter rule for `names`."""
    def register(fn: Rule) -> Rule:
        for name in names:
            if name in RULES:
                raise ValueError(f"two interpreter rules for {name}")
            RULES[name] = fn
        return fn
    return register


@dataclasses.dataclass
class Launch:
    """Run-time state shared by every frame of one kernel launch."""

    grid: tuple[int, int, int]
    bid: tuple = (0, 0, 0)
    depth: int = 0
    print_pending: str = ""      # a tile.print line that continues (`more`)
    cluster: object = None       # the block's cluster (cluster_ops.ClusterExchange), if any
    # stream-K partial sums posted by slot (stream_k_ops)
    partials: dict = dataclasses.field(default_factory=dict)
    # the argument arrays' allocations, where addresses lead (pointer_ops.Memory)
    memory: object = None


@dataclasses.dataclass(frozen=True)
class CompiledBlock:
    steps: tuple[Step, ...]
    sites: tuple[tuple[str, ir.Location], ...]  # (op name, location) of each step
    results: tuple[int, ...]                    # slots of the terminator's operands


@dataclasses.dataclass
class CompiledFunction:
    name: str
    location: ir.Location
    arg_slots: tuple[int, ...] = ()
    num_slots: int = 0
    body: CompiledBlock | None = None  # None while the body is being compiled

    def new_frame(self, launch: Launch) -> Frame:
        frame = [None] * self.num_slots
        frame[LAUNCH_SLOT] = launch
        return frame


def _checked(step: Step, expected: tuple[tuple[int, np.dtype, tuple], ...]) -> Step:
    """`step`, followed by a check of its results against their IR types.

    NumPy promotes and casts silently (a store even rounds an f32 tile into a
    bf16 array), so a rule that returns the wrong dtype would otherwise yield
    a plausible wrong number.  The check costs well under a microsecond per op.
    A step the rule built with the check inside (`pure`: `CHECKED`) is kept as it is.
    """
    if not expected or getattr(step, CHECKED, False):
        return step
    if len(expected) == 1:
        (slot, dtype, shape), = expected

        def checked_one(frame):
            step(frame)
            value = frame[slot]
            if value.dtype is not dtype and value.dtype != dtype or value.shape != shape:
                raise wrong_result(value, dtype, shape)
        return checked_one

    def checked_step(frame):
        step(frame)
        for slot, dtype, shape in expected:
            value = frame[slot]
            if value.dtype is not dtype and value.dtype != dtype or value.shape != shape:
                raise wrong_result(value, dtype, shape)
    return checked_step


# The attribute of a step that checks its own result (`pure`'s), so `_checked` adds
# no second frame around it: a wrapper's call was ~10 % of an interpreted LLM test.
CHECKED = "_tileir_checks_its_result"


def wrong_result(value, dtype: np.dtype, shape: tuple) -> Fault:
    return Fault(f"interpreter bug: the result is a {value.dtype} value of shape "
                 f"{value.shape}, but its IR type needs {dtype} of shape {shape}")


def execute(block: CompiledBlock, frame: Frame) -> list:
    """Runs the steps of `block` and returns its terminator's operand values."""
    i = 0
    try:
        for i, step in enumerate(block.steps):
            step(frame)
    except InterpreterError:
        raise  # already located, at a nested op
    except Fault as e:
        name, loc = block.sites[i]
        raise InterpreterError.at(loc, f"'{name}': {e}") from None
    except Exception as e:
        name, loc = block.sites[i]
        raise InterpreterError.at(
            loc, f"interpreter rule for '{name}' failed: {type(e).__name__}: {e}") from e
    return [frame[s] for s in block.results]


class _Scope:
    """The slot map of the function being compiled (its regions share it)."""

    def __init__(self) -> None:
        self.slots: dict[ir.Value, int] = {}
        self.size = LAUNCH_SLOT + 1


class CompileContext:
    """Compiles the functions of one module; the object every rule receives."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.symbols = ir.SymbolTable(module.operation)
        self.functions: dict[str, CompiledFunction] = {}
        self._scope: _Scope | None = None

    # -- values --------------------------------------------------------------
    def slot(self, value: ir.Value) -> int:
        """The slot of a value defined earlier (an operand)."""
        return self._scope.slots[value]

    def slots(self, values: Sequence[ir.Value]) -> tuple[int, ...]:
        return tuple(self._scope.slots[v] for v in values)

    def define(self, value: ir.Value) -> int:
        """A fresh slot for a value this op defines (a result or block argument)."""
        scope = self._scope
        scope.slots[value] = scope.size
        scope.size += 1
        return scope.size - 1

    def define_all(self, values: Sequence[ir.Value]) -> tuple[int, ...]:
        return tuple(self.define(v) for v in values)

    # -- ops, blocks, functions ------------------------------------------------
    def op(self, op: ir.OpView) -> Step:
        # `op.operation.name`, not `op.name`: some op views (func.func) use
        # `name` for their symbol.
        name = op.operation.name
        fn = RULES.get(name)
        if fn is None:
            raise UnsupportedOpError.at(op.location, f"no interpreter rule for {name}")
        try:
            step = fn(op.opview, self)
        except Fault as e:  # a form of the op the rule does not handle
            raise UnsupportedOpError.at(op.location, f"'{name}': {e}") from None
        return _checked(step, self._expected_results(op))

    def _expected_results(self, op: ir.OpView) -> tuple[tuple[int, np.dtype, tuple], ...]:
        """(slot, storage dtype, shape) of each tile or scalar result of `op` (arrays
        and the pipeline stage's rings are objects, not NumPy values)."""
        return tuple((self.slot(v), elem_of(v.type).storage, shape_of(v.type))
                     for v in op.results
                     if array_info(v.type) is None and str(v.type) != "!tile.ring")

    def block(self, region: ir.Region) -> CompiledBlock:
        """Compiles the single block of `region`; its arguments must be defined already."""
        blocks = list(region.blocks)
        if len(blocks) != 1:
            owner = region.owner
            raise UnsupportedOpError.at(
                owner.location, f"'{owner.operation.name}' has a region with {len(blocks)} "
                f"blocks; the interpreter runs structured control flow only (one block per "
                f"region)")
        steps, sites, results = [], [], ()
        for op in blocks[0].operations:
            if op.operation.name in TERMINATORS:
                results = self.slots(op.operands)
                continue
            steps.append(self.op(op))
            sites.append((op.operation.name, op.location))
        return CompiledBlock(tuple(steps), tuple(sites), results)

    def block_args(self, region: ir.Region) -> tuple[int, ...]:
        """Defines the arguments of the (single) block of `region`."""
        return self.define_all(list(region.blocks[0].arguments))

    def function(self, name: str, *, at: ir.Location | None = None) -> CompiledFunction:
        """The compiled `func.func @name`, compiling it on first use.

        The function is registered before its body is compiled, so a recursive
        `func.call` finds it (the call checks the depth at run time).
        """
        if name in self.functions:
            return self.functions[name]
        try:
            op = self.symbols[name]
        except KeyError:
            raise InterpreterError.at(at, f"no function @{name} in the module") from None
        if op.operation.name != "func.func" or not len(op.regions[0].blocks):
            raise InterpreterError.at(at, f"@{name} is not a func.func with a body, so the "
                                      f"interpreter cannot run it")
        fn = CompiledFunction(name, op.location)
        self.functions[name] = fn
        outer, self._scope = self._scope, _Scope()
        try:
            fn.arg_slots = self.block_args(op.regions[0])
            fn.body = self.block(op.regions[0])
            fn.num_slots = self._scope.size
        finally:
            self._scope = outer
        return fn


# ---------------------------------------------------------------------------
# Step builders for the common shapes of rules
# ---------------------------------------------------------------------------
def pure(op: ir.OpView, cx: CompileContext, fn: Callable[..., object]) -> Step:
    """A step computing the single result of `op` as `fn(*operand values)`, checked
    against the result's IR type in the same step (what `_checked` would add around
    it, without a second call: this is the innermost loop of the interpreter)."""
    ins = cx.slots(op.operands)
    out = cx.define(op.result)
    expected = cx._expected_results(op)
    if not expected:
        return _pure_unchecked(ins, out, fn)
    (_, dtype, shape), = expected
    # Unrolled by arity.  `is not` first: a result's dtype is almost always the very
    # dtype object (NumPy's and ml_dtypes' are singletons); `!=` decides otherwise.
    if len(ins) == 0:
        def step(frame):
            frame[out] = v = fn()
            if v.dtype is not dtype and v.dtype != dtype or v.shape != shape:
                raise wrong_result(v, dtype, shape)
    elif len(ins) == 1:
        a, = ins

        def step(frame):
            frame[out] = v = fn(frame[a])
            if v.dtype is not dtype and v.dtype != dtype or v.shape != shape:
                raise wrong_result(v, dtype, shape)
    elif len(ins) == 2:
        a, b = ins

        def step(frame):
            frame[out] = v = fn(frame[a], frame[b])
            if v.dtype is not dtype and v.dtype != dtype or v.shape != shape:
                raise wrong_result(v, dtype, shape)
    elif len(ins) == 3:
        a, b, c = ins

        def step(frame):
            frame[out] = v = fn(frame[a], frame[b], frame[c])
            if v.dtype is not dtype and v.dtype != dtype or v.shape != shape:
                raise wrong_result(v, dtype, shape)
    else:
        def step(frame):
            frame[out] = v = fn(*[frame[i] for i in ins])
            if v.dtype is not dtype and v.dtype != dtype or v.shape != shape:
                raise wrong_result(v, dtype, shape)
    setattr(step, CHECKED, True)
    return step


def _pure_unchecked(ins: tuple[int, ...], out: int, fn: Callable[..., object]) -> Step:
    """`pure`'s step for a result with no NumPy type to check (an array, a ring)."""
    if len(ins) == 1:
        a, = ins

        def step(frame):
            frame[out] = fn(frame[a])
    elif len(ins) == 2:
        a, b = ins

        def step(frame):
            frame[out] = fn(frame[a], frame[b])
    else:
        def step(frame):
            frame[out] = fn(*[frame[i] for i in ins])
    return step


def constant(op: ir.OpView, cx: CompileContext, value) -> Step:
    """A step writing a value known at compile time into `op`'s result.  The value is
    checked against the result's IR type once, here, where it passes (the same value
    every time, and its dtype and shape cannot change); one that does not is left to
    `_checked`'s check at run time, which reports it at the op, as for any step."""
    out = cx.define(op.result)

    def step(frame):
        frame[out] = value
    expected = cx._expected_results(op)
    if expected:
        (_, dtype, shape), = expected
        dt, sh = getattr(value, "dtype", None), getattr(value, "shape", None)
        if dt is not None and sh is not None and dt == dtype and sh == shape:
            setattr(step, CHECKED, True)
    return step
