"""Programmatic dependent launch for every sm_90a kernel (pass tile-programmatic-launch).

A kernel launched with programmatic stream serialization may begin while the kernel
before it in the stream is still running, once every block of that kernel has
executed `griddepcontrol.launch_dependents`; its own `griddepcontrol.wait` then
blocks until that kernel has finished and its writes are visible.  So a kernel that
waits before anything else and then lets its dependents launch overlaps its launch
(the blocks placed, their parameters read) with the previous kernel's run: in graph
replay on the H100, RoPE of Llama-3-70B at one token went from 1.36 to 0.91 us, and
LayerNorm of Llama-3-8B at 64 rows from 2.20 to 1.77 (bench/RESULTS.md).

The rewrite is the two ops at the top of the kernel's body (after its leading L2
prefetches and early ring loads, if the pipeliner put some there: see `_wait_point`
and `early_arrays`), the wait first,
before any access to memory, so whatever the previous kernel wrote is what this one reads,
and nothing it reads or writes is touched before that kernel is done: the order of
kernels in the stream is kept.  The dependents it lets launch wait in the same way:
they hold their SM slots while waiting, but only once all of this kernel's blocks
have begun, so no block of this kernel waits for a slot they hold.  A kernel launched without
the attribute (torch's, a kernel of another library) starts after this one ends, as
always.

Left alone: kernels for other targets (sm_80 has no programmatic launch), kernels
that place `grid_dependency_control_*` themselves (the author's placement stands),
and kernels whose `programmatic_launch` option is False.  The launcher takes the
kernel's `programmatic_launch` meta (backend/gpu/lower.py) and launches through
cuLaunchKernelEx with the attribute.

A kernel whose author placed the ops is launched as cuTile launches it: with the
attribute only where the launch asks (`launch(..., programmatic_dependent_launch=True)`,
meta `programmatic_on_request`), since its ops say what may run early only then (a
read before its wait is safe in a plain launch, and races in a programmatic one);
its `programmatic_launch=True` option asks for every launch of it (if it waits).
`launch_mode` decides, once, for the pass's placement and for the author's.
"""

from __future__ import annotations

from mlir import ir

from tileir.dialect import TileIRError
from tileir.dialect.debug import GridDependencyOp
from tileir.dialect.ring import PrefetchL2Op, RingAcquireOp, RingAllocOp, RingLoadOp
from tileir.dialect.tile import SCOPE_ATTR
from tileir.dialect.verifier import kernel_functions, module_chip

from .pure_slices import first_writes, pure_slice

# The kernel option (kernel.py): False keeps the kernel's launches strictly ordered.
OPTION_ATTR = "tile.programmatic_launch"
# Set by this pass on a kernel it gave the ops: its wait opens the body, so every launch
# of it may be programmatic.
PLACED_HERE_ATTR = "tile.overlapped"
# The kernel option `early_loads` (kernel.py): names of array arguments no kernel before
# this one in the stream writes (`early_arrays`)
EARLY_LOADS_ATTR = "tile.early_loads"
# Wait first: a kernel releases its dependents only once it runs, so at most one
# kernel's blocks wait ahead.  Released before its own wait, each waiting kernel would
# let the next one launch, a cascade of waiting blocks that took the SM slots of the
# running one (bench/RESULTS.md: LayerNorm at 64 rows 1.77 us this way, 3.16 the other).
KINDS = ("wait", "launch_dependents")


def overlap_launches(module: ir.Module) -> None:
    if not module_chip(module).startswith("sm_90"):
        return
    for func in kernel_functions(module):
        if _turned_off(func) or _placed(func):
            continue
        hoist_early_loads(func)
        with func.location, _wait_point(func):
            for kind in KINDS:
                GridDependencyOp(kind)
        func.attributes[PLACED_HERE_ATTR] = ir.UnitAttr.get()


def overlaps(func: ir.Operation) -> bool:
    """Whether this pass will open the kernel with its wait (on an sm_90 module): the
    option leaves it on and its author placed none of the ops."""
    return not _turned_off(func) and not _placed(func)


def _early_read(op: ir.Operation, early: set[int]) -> bool:
    """Whether op is a plain `tile.load` (not a relaxed or acquiring one, which must
    read afresh where it stands) of an array the `early_loads` option names."""
    if op.name != "tile.load" or SCOPE_ATTR in op.attributes:
        return False
    array = op.operands[0]
    return isinstance(array.owner, ir.Block) and array.arg_number in early


def hoist_early_loads(func: ir.Operation) -> None:
    """Moves the plain loads of the kernel's `early_loads` arrays at the top level of
    its body, with the pure ops that compute their indices (from the arguments, the
    block indices and other such loads), to the top of the body, in body order, so
    that they run before the wait `_wait_point` puts after them.

    Paged decode attention reads its sequence's length, then the block table's page
    numbers for the ring's first slots, then those pages: three memory latencies in a
    chain after the wait.  With the length and the table among `early_loads` (arrays
    the step's host copy wrote before any kernel), the first two are read while the
    previous kernel still runs.  Loads inside loops and branches stay (their trips are
    not known before the wait), and so does every load whose index needs anything
    else: an argument the kernel writes is refused by `early_arrays` first."""
    early = early_arrays(func)
    if not early:
        return
    body = func.regions[0].blocks[0]
    order = [op.operation for op in body.operations]
    moved: list[ir.Operation] = []
    for op in order:
        if not _early_read(op, early):
            continue
        ops = pure_slice(func, list(op.operands),
                         lambda v: isinstance(v.owner, ir.Block) and v.owner == body,
                         before=op, reads=lambda o: _early_read(o, early))
        if ops is None:
            continue
        moved.extend(o for o in ops + [op] if o not in moved)
    if not moved:
        return
    anchor = next(op for op in order if op not in moved)
    for op in sorted(moved, key=order.index):
        op.move_before(anchor)


def _wait_point(func: ir.Operation) -> ir.InsertionPoint:
    """Where the wait goes: the top of the body, or after the ops the pipeliner put at
    its top to run while the previous kernel still runs:

      - L2 prefetches (`tile.prefetch_l2`, software_pipeline.py's `l2_prefetch`
        option), which read nothing into this kernel;
      - the first pipelined loop's ring (`tile.ring_alloc`: shared memory and its
        barriers), its prologue's acquires of fresh slots and its TMA loads of the
        arrays the kernel's `early_loads` option names (software_pipeline.py
        `load_early`): real reads, safe only because no kernel before this one in
        the stream writes those arrays (the author's promise; `early_arrays` refuses
        an array this kernel writes);
      - plain loads of those arrays that `hoist_early_loads` moved to the top.

    The wait goes after the last prefetch or early load in the body's leading run of
    such ops and pure ones (indices, loop bounds): a ring load of any other array (the
    same slots' activation rows), like any other op with effects, ends the run, so it
    follows the wait; and a ring allocated and acquired at the top with no early load
    after it (a kernel without the option) stays after the wait, as it always was."""
    from tileir.passes import effects       # (passes import the backend: not at load)
    classify = effects.Effects()
    ops = [op.operation for op in func.regions[0].blocks[0].operations]
    early = None
    last = None
    for i, op in enumerate(ops):
        if op.name == PrefetchL2Op.OPERATION_NAME:
            last = i
        elif op.name in (RingAllocOp.OPERATION_NAME, RingAcquireOp.OPERATION_NAME):
            continue         # (before the wait only where early loads into it follow)
        elif op.name == RingLoadOp.OPERATION_NAME:
            early = early_arrays(func) if early is None else early
            array = op.operands[3]
            if not isinstance(array.owner, ir.Block) or array.arg_number not in early:
                break
            last = i
        elif op.name == "tile.load":
            early = early_arrays(func) if early is None else early
            if not _early_read(op, early):
                break
            last = i             # (hoist_early_loads put it here)
        elif op.regions or classify.of(op) != effects.Effect.PURE:
            break
    if last is None:
        return ir.InsertionPoint(ops[0])
    return ir.InsertionPoint.after(ops[last])


def early_arrays(func: ir.Operation) -> set[int]:
    """The argument numbers of the arrays the kernel's `early_loads` option names (by
    the kernel's `tile.arg_names`; `argN` for IR without them): arrays whose tiles may
    be loaded before the wait for the previous kernel, because the author promises no
    kernel before this one in the stream writes them (a model's weights).

    Refused, with the write's source line: an array some op of this kernel writes
    (`tile.store`, `scatter`, an atomic).  Its next launch would be a kernel before
    itself that writes it, and nothing in the kernel could say which of its reads
    see which launch's writes."""
    if EARLY_LOADS_ATTR not in func.attributes:
        return set()
    names = [ir.StringAttr(a).value for a in ir.ArrayAttr(func.attributes[EARLY_LOADS_ATTR])]
    params = func.regions[0].blocks[0].arguments
    args = [ir.StringAttr(a).value for a in ir.ArrayAttr(func.attributes["tile.arg_names"])] \
        if "tile.arg_names" in func.attributes else [f"arg{i}" for i in range(len(params))]
    kernel = ir.StringAttr(func.attributes["sym_name"]).value
    out = {}
    for name in names:
        if name not in args:
            raise TileIRError(f"kernel '{kernel}': option early_loads names {name!r}, which "
                              f"is not one of its arguments ({', '.join(args)})",
                              func.location)
        out[args.index(name)] = name

    writes = [op for i, op in first_writes(func).items() if i in out]
    if writes:
        op = writes[0]
        name = out[op.operands[0].arg_number]
        raise TileIRError(f"kernel '{kernel}': option early_loads names {name!r}, which "
                          f"this kernel writes here ({op.name}); early_loads lists arrays "
                          f"that no kernel before this one in the stream writes (a model's "
                          f"weights), and a kernel that writes {name!r} is such a kernel "
                          f"for its own next launch: drop {name!r} from early_loads",
                          op.location)
    return set(out)


ALWAYS, ON_REQUEST = "always", "on_request"


def launch_mode(func: ir.Operation) -> str | None:
    """How the kernel is launched (backend/gpu/lower.py's meta; runtime/launcher.py):

    - ALWAYS with programmatic stream serialization: the wait this pass put at its top
      orders everything it does, or its author placed a wait and set the
      `programmatic_launch=True` option;
    - ON_REQUEST: its author placed `grid_dependency_control_*` (and left the option
      unset): programmatically where the launch passes
      `programmatic_dependent_launch=True`, as cuTile does, else plainly (its ops then
      wait for nothing), so its reads before the wait are safe unless asked for;
    - None, plainly: the option is False, or the kernel has none of the ops.  A kernel
      that only releases its dependents is never launched programmatically unasked:
      it would start as soon as the previous kernel released it, with nothing to
      wait for that kernel's writes."""
    if _option(func) is False:
        return None
    if PLACED_HERE_ATTR in func.attributes:
        return ALWAYS
    kinds = _placed(func)
    if not kinds:
        return None
    return ALWAYS if _option(func) is True and "wait" in kinds else ON_REQUEST


def _option(func: ir.Operation) -> bool | None:
    if OPTION_ATTR not in func.attributes:
        return None
    return ir.BoolAttr(func.attributes[OPTION_ATTR]).value


def _turned_off(func: ir.Operation) -> bool:
    return _option(func) is False


def _placed(func: ir.Operation) -> set[str]:
    """The kinds of the kernel's `tile.grid_dependency` ops."""
    kinds: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == GridDependencyOp.OPERATION_NAME:
            kinds.add(ir.StringAttr(op.attributes["kind"]).value)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return kinds
