"""Running passes and stages: tile passes and upstream MLIR passes, mixed.

The input of a pipeline is verified before its first pass, and its output
after the last: the full Tile IR verifier before a tile pass and after one that
leaves Tile IR, MLIR's own verifier beside an upstream pass (which is what keeps
an assertion-enabled MLIR from aborting on broken IR) and after a lowering out of
Tile IR (`registry.LOWERINGS`).  A stage is a pipeline of its own, so a compile verifies after every stage.
Before an upstream pass MLIR's verifier runs always (the wheel asserts: broken IR
must be an error, not an abort).  With `verify_each` (tile-opt's way, as
mlir-opt's; elsewhere the knob TILEIR_VERIFY_EACH) the IR is verified between every
two passes, so that a pass that breaks it is named.  That is a debugging aid, not a precondition: a
pass of ours run on IR its predecessors made from verified IR meets valid IR
unless one of them has a bug, and between-pass verification was about a third
of a compile's CPU (bench/RESULTS.md, 2026-11-29).
"""

from __future__ import annotations

import contextvars
import dataclasses
import difflib
import re
from typing import Callable, Iterable, TextIO

from mlir import ir
from mlir.passmanager import PassManager

from tileir import knobs
from tileir.dialect import Diagnostic, TileIRError, verify
from tileir.dialect.diagnostics import from_mlir_error

from .registry import LOWERINGS, PASSES, STAGES

# Module attribute recording the last stage run on a module, so that a driver
# can continue from an `.mlir` file at any stage.  Absent means "frontend".
STAGE_ATTR = "tile.stage"

# Called after each pass with the pass name and the module.
AfterPassHook = Callable[[str, ir.Module], None]


class InternalError(Exception):
    """A pass raised something other than `TileIRError`: a bug in that pass."""

    def __init__(self, pass_name: str, error: Exception):
        self.pass_name = pass_name
        super().__init__(f"pass '{pass_name}' crashed: {self.describe(error)}")

    @staticmethod
    def describe(error: Exception) -> str:
        """`Type: message` on one line, without any embedded traceback."""
        return f"{type(error).__name__}: {_one_line(str(error))}"


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b")


def _one_line(text: str) -> str:
    # Exceptions raised inside `Operation.walk` callbacks come back wrapped in
    # a RuntimeError whose text embeds the inner traceback; its last
    # "SomeError: message" line is the original error.
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else ""


@dataclasses.dataclass(frozen=True)
class _Step:
    name: str
    run: Callable[[ir.Module], None]
    needs_tile_ir: bool
    # whether what it leaves is Tile IR (the tile verifier's, after it) or a later
    # stage's IR (MLIR's verifier: no tile op or function is left to check)
    leaves_tile_ir: bool


# --------------------------------------------------------------------------
# Pipeline text
# --------------------------------------------------------------------------
def parse_pipeline(text: str) -> list[str]:
    """'builtin.module(a,b{x=1},func.func(c))' or 'a,b' -> ['a', 'b{x=1}', 'func.func(c)']."""
    text = text.strip()
    anchor = "builtin.module("
    if text.startswith(anchor) and _closing_paren(text, len(anchor) - 1) == len(text) - 1:
        text = text[len(anchor):-1]
    if not text.strip():
        return []
    elements = [e.strip() for e in _split_top_level(text)]
    if any(not e for e in elements):
        raise TileIRError(f"empty pass name in pass pipeline '{text}'")
    return elements


_OPEN = {"(": ")", "{": "}", "[": "]"}


def _split_top_level(text: str) -> list[str]:
    """Splits on commas outside brackets and quotes; raises on unbalanced brackets."""
    parts, start, stack, quoted = [], 0, [], False
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in _OPEN:
            stack.append(_OPEN[ch])
        elif ch in _OPEN.values():
            if not stack or stack.pop() != ch:
                raise TileIRError(f"unbalanced '{ch}' at offset {i} in pass pipeline '{text}'")
        elif ch == "," and not stack:
            parts.append(text[start:i])
            start = i + 1
    if stack or quoted:
        missing = '"' if quoted else stack[-1]
        raise TileIRError(f"missing '{missing}' at the end of pass pipeline '{text}'")
    parts.append(text[start:])
    return parts


def _closing_paren(text: str, open_index: int) -> int | None:
    depth = 0
    for i in range(open_index, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return None


# --------------------------------------------------------------------------
# Resolving names
# --------------------------------------------------------------------------
def validate_pipeline(names: Iterable[str], context: ir.Context) -> None:
    """Raises `TileIRError` naming the first pass that does not exist."""
    for name in names:
        _resolve(name, context)


def _resolve(name: str, context: ir.Context) -> _Step:
    name = name.strip()
    if name in PASSES:
        return _Step(name, PASSES[name].run, needs_tile_ir=True,
                     leaves_tile_ir=name not in LOWERINGS)
    base = name.split("{", 1)[0].strip()
    if base in PASSES:
        raise TileIRError(f"pass '{base}' takes no options (got '{name}')")
    if any(tile_pass in name for tile_pass in PASSES):
        raise TileIRError(f"'{name}': tile passes run on the whole module; put them at the top "
                          f"level of the pipeline, not inside an op anchor")
    return _upstream(name, context)


def _upstream(name: str, context: ir.Context) -> _Step:
    try:
        manager = PassManager.parse(f"builtin.module({name})", context)
    except ValueError as e:
        raise TileIRError(_unknown_pass_message(name, str(e))) from None

    def run(module: ir.Module) -> None:
        manager.enable_verifier(upstream_verifier())
        try:
            manager.run(module.operation)
        except ir.MLIRError as e:
            raise TileIRError(from_mlir_error(e)) from None

    return _Step(name, run, needs_tile_ir=False, leaves_tile_ir=False)


def _unknown_pass_message(name: str, mlir_message: str) -> str:
    if "does not refer to a registered pass" in mlir_message:
        close = difflib.get_close_matches(name, list(PASSES), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else \
            f"; tile passes: {', '.join(PASSES)} (upstream MLIR pass names work too)"
        return f"unknown pass '{name}'{hint}"
    return f"invalid pass '{name}': {_mlir_reason(name, mlir_message)}"


_PARSER_PREFIX = re.compile(r"^.*?PassPipeline Parser:\d+:\d+: error: |^<Pass-Options-Parser>: ")


def _mlir_reason(name: str, mlir_message: str) -> str:
    """MLIR's pipeline-parser complaint without its echo of the pipeline and caret line."""
    lines = [line.strip() for line in mlir_message.splitlines()]
    kept = [_PARSER_PREFIX.sub("", line) for line in lines
            if line and line != name and set(line) - {"^", "~", " "}]
    return "; ".join(kept)


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------
def run_passes(module: ir.Module, names: Iterable[str], *,
               print_after_all: AfterPassHook | None = None,
               verify_each: bool | None = None) -> None:
    """Runs `names` (tile or upstream passes) in order on `module`, verifying its
    input and its output (and between every two passes with `verify_each`; None:
    the TILEIR_VERIFY_EACH knob).

    Each pass runs inside `module.context`.
    Raises `TileIRError` (located diagnostics) when the IR is invalid or a pass
    fails, and `InternalError` when a pass crashes.  Every name is resolved
    before anything runs, so an unknown name leaves the module untouched.
    """
    steps = [_resolve(name, module.context) for name in names]
    _run_steps(module, steps, print_after_all, verify_each, verify_input=True)


# Whether the passes running now verify between every two passes: MLIR PassManagers
# that a tile pass runs inside it (the `llvm` and `ptx` stages' conversions) verify
# after each of their passes only then (`upstream_verifier`).
_VERIFY_EACH: contextvars.ContextVar[bool] = contextvars.ContextVar("verify_each",
                                                                   default=True)


def upstream_verifier() -> bool:
    """Whether an MLIR PassManager run by a pass should verify after each of its passes
    (`PassManager.enable_verifier`): when the pipeline running it verifies between
    passes, and outside one (a pass run by hand)."""
    return _VERIFY_EACH.get()


def _run_steps(module: ir.Module, steps: list[_Step], print_after_all: AfterPassHook | None,
               verify_each: bool | None, *, verify_input: bool) -> None:
    if verify_each is None:
        verify_each = knobs.VERIFY_EACH.as_bool()
    token = _VERIFY_EACH.set(verify_each)
    try:
        _run_verified(module, steps, print_after_all, verify_each, verify_input)
    finally:
        _VERIFY_EACH.reset(token)


def _run_verified(module: ir.Module, steps: list[_Step], print_after_all: AfterPassHook | None,
                  verify_each: bool, verify_input: bool) -> None:
    previous: _Step | None = None
    for step in steps:
        # MLIR's own verifier (C++, cheap) before an upstream pass always: the MLIR
        # wheel asserts, and a pass of ours that broke the IR must not abort the
        # process there; the tile verifier between passes only with verify_each
        if verify_each or (previous is None and verify_input) or not step.needs_tile_ir:
            _verify_between(module, previous, step)
        _run_step(step, module)
        if print_after_all is not None:
            print_after_all(step.name, module)
        previous = step
    if previous is not None:
        # without verify_each the passes before the last were not checked one by one
        _verify_between(module, previous, None,
                        culprits=None if verify_each else [s.name for s in steps])


def _run_step(step: _Step, module: ir.Module) -> None:
    try:
        # Passes build types and attributes: they run inside the module's context.
        with module.context:
            step.run(module)
    except TileIRError:
        raise
    except Exception as e:  # a crash inside our pass: report it as a bug of that pass
        raise InternalError(step.name, e) from e


def _verify_between(module: ir.Module, previous: _Step | None, following: _Step | None,
                    culprits: list[str] | None = None) -> None:
    """Verifies `module` between `previous` and `following` (either None at an end).
    `culprits`: the passes that may have broken the IR, where more than `previous`."""
    tile_rules = following.needs_tile_ir if following else previous.leaves_tile_ir
    try:
        if tile_rules:
            verify(module)
        else:
            _verify_mlir(module)
    except TileIRError as e:
        if previous is None:
            raise
        what = f"before '{following.name}'" if following else "at the end of the pipeline"
        if culprits is not None and len(culprits) > 1:
            names = ", ".join(f"'{name}'" for name in culprits)
            header = Diagnostic(None, f"the IR produced by the passes {names} is invalid "
                                f"{what} (TILEIR_VERIFY_EACH=1 verifies between every two "
                                f"passes and names the one that broke it)")
        else:
            header = Diagnostic(None, f"the IR produced by '{previous.name}' is invalid {what}")
        raise TileIRError([header, *e.diagnostics]) from None


def _verify_mlir(module: ir.Module) -> None:
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        raise TileIRError(from_mlir_error(e)) from None


# --------------------------------------------------------------------------
# Stages
# --------------------------------------------------------------------------
def _check_stage(stage: str) -> None:
    if stage not in STAGES:
        raise TileIRError(f"unknown stage '{stage}'; stages: {', '.join(STAGES)}")


def current_stage(module: ir.Module) -> str:
    """The last stage run on `module` (its `tile.stage` attribute), or "frontend"."""
    attrs = module.operation.attributes
    if STAGE_ATTR not in attrs:
        return "frontend"
    attr = attrs[STAGE_ATTR]
    stage = attr.value if isinstance(attr, ir.StringAttr) else str(attr)
    if stage not in STAGES:
        raise TileIRError([Diagnostic(module.operation.location,
                                      f"module attribute {STAGE_ATTR} = {attr} names no stage; "
                                      f"stages: {', '.join(STAGES)}")])
    return stage


def run_stage(module: ir.Module, stage: str, *,
              print_after_all: AfterPassHook | None = None,
              verify_each: bool | None = None) -> None:
    """Runs one stage's passes and records the stage on the module (verifying as
    `run_passes` does)."""
    _run_stage(module, stage, print_after_all, verify_each, verify_input=True)


def _run_stage(module: ir.Module, stage: str, print_after_all: AfterPassHook | None,
               verify_each: bool | None, *, verify_input: bool) -> None:
    _check_stage(stage)
    steps = [_resolve(name, module.context) for name in STAGES[stage]]
    _run_steps(module, steps, print_after_all, verify_each, verify_input=verify_input)
    with module.context:
        module.operation.attributes[STAGE_ATTR] = ir.StringAttr.get(stage)


def run_stages(module: ir.Module, *, stop_after: str,
               print_after_all: AfterPassHook | None = None,
               after_stage: Callable[[str, ir.Module], None] | None = None,
               verify_each: bool | None = None) -> None:
    """Runs every stage after the module's current one, up to and including `stop_after`
    (`after_stage(name, module)` after each).  The input is verified before the first
    stage, the output of each stage after it (between its passes too with
    `verify_each`; None: the TILEIR_VERIFY_EACH knob).

    Shared memory is a budget (tileir.backend.layout.budget): when the `gpu` stage finds the
    rings the `pipeline` stage made too deep for it, the module goes back to where
    it was before `pipeline`, the kernel's rings are capped, and both stages run
    again; `after_stage` sees them again too.  Registers are checked after `cubin`:
    where ptxas gave a thread more than lets the blocks an SM that the rings were
    planned for share it, the stages from `pipeline` on run once more, planned for
    the blocks that fit (`_Fit.registers`)."""
    _check_stage(stop_after)
    names = list(STAGES)
    start = names.index(current_stage(module))
    stop = names.index(stop_after)
    if stop < start:
        raise TileIRError(f"the input is already at stage '{names[start]}', past "
                          f"'{stop_after}'", module.operation.location)
    todo = names[start + 1:stop + 1]
    fit = _Fit()
    i = 0
    while i < len(todo):
        stage = todo[i]
        fit.before(stage, module)
        try:
            # a stage's input is the verified output of the one before (or of a
            # rewind to a copy of one), except the first's
            _run_stage(module, stage, print_after_all, verify_each,
                       verify_input=stage == todo[0])
        except TileIRError as e:
            back = fit.replan(module, e)
            if back is None or back not in todo:
                raise
            i = todo.index(back)
            continue
        fit.after(stage, module)
        back = fit.registers(stage, module)
        if back is not None and back in todo:
            i = todo.index(back)
            continue
        if after_stage is not None:
            after_stage(stage, module)
        i += 1


class _Fit:
    """The stage driver's side of the shared-memory budget (tileir.backend.layout.budget):
    copies of the module before `layout` and before `pipeline` to rewind to, and
    the choices tried."""

    def __init__(self):
        from tileir.backend.layout.budget import Budget
        self.saved: dict[str, ir.Operation] = {}
        self.budget = Budget()
        self.planned = 0                 # the blocks an SM the last `pipeline` planned for
        self.register_replanned = False

    def before(self, stage: str, module: ir.Module) -> None:
        # the module before `layout` never changes (a rewind sets attributes on a copy);
        # the one before `pipeline` does after each rerun of `layout`
        if stage == "pipeline" or (stage == "layout" and "layout" not in self.saved):
            self.saved[stage] = module.operation.clone()

    def after(self, stage: str, module: ir.Module) -> None:
        if stage == "pipeline":
            from tileir.backend.layout.budget import rings_of
            from tileir.backend.pipeline.software_pipeline import PLANNED_BLOCKS_ATTR
            self.budget.pipelined(rings_of(module))
            self.planned = max([ir.IntegerAttr(op.attributes[PLANNED_BLOCKS_ATTR]).value
                                for op in module.body.operations
                                if PLANNED_BLOCKS_ATTR in op.attributes] or [0])

    def registers(self, stage: str, module: ir.Module) -> str | None:
        """After `cubin`: "pipeline" (the module put back before it, the kernel marked
        with the blocks that fit) where ptxas' registers a thread, times the block's
        threads, leave an SM fewer blocks than the rings were planned for (their
        stages split the SM's shared memory among blocks that cannot all be there);
        else None.  Once a compile."""
        import json
        import re
        from tileir.backend.layout.budget import FIT_ATTR
        from tileir.backend.pipeline.software_pipeline import (REGISTER_BLOCKS_ATTR,
                                                               REGS_PER_SM)
        attrs = module.operation.attributes
        if (stage != "cubin" or self.register_replanned or self.planned < 2
                or "pipeline" not in self.saved or "tile.ptxas_report" not in attrs
                or "tile.kernel_meta" not in attrs):
            return None
        used = re.search(r"Used (\d+) registers", ir.StringAttr(attrs["tile.ptxas_report"]).value)
        threads = json.loads(ir.StringAttr(attrs["tile.kernel_meta"]).value).get("num_threads")
        if used is None or not threads:
            return None
        regs = -(-int(used.group(1)) // 8) * 8          # allocated 8 at a time
        fits = max(1, REGS_PER_SM // (regs * threads))
        if fits >= self.planned:
            return None
        self.register_replanned = True
        self.budget.notes.append(
            f"registers: ptxas gave {used.group(1)} a thread x {threads} threads, so "
            f"{fits} block(s) an SM, not the {self.planned} the rings were planned for: "
            f"planned again for {fits}")
        _replace_module(module, self.saved["pipeline"].clone())
        with module.context:
            i32 = ir.IntegerType.get_signless(32)
            for op in module.body.operations:
                if "tile.kernel" in op.attributes:
                    op.attributes[REGISTER_BLOCKS_ATTR] = ir.IntegerAttr.get(i32, fits)
            module.operation.attributes[FIT_ATTR] = ir.StringAttr.get(
                "; ".join(self.budget.notes))
        return "pipeline"

    def replan(self, module: ir.Module, error: TileIRError) -> str | None:
        """The stage to run again after `module` was put back before it with the next
        choice's attributes, for a shared-memory `error`; None for other errors.  An
        overflow no choice mends is raised here, with the numbers."""
        from tileir.backend.layout.budget import FIT_ATTR, SharedMemoryOverflow, refusal
        if not isinstance(error, SharedMemoryOverflow):
            return None
        choice = self.budget.next(error, "layout" in self.saved) \
            if "pipeline" in self.saved else None
        if choice is None:
            raise TileIRError(refusal(error, self.budget.rings, self.budget.notes),
                              error.loc) from None
        back, attrs = choice
        _replace_module(module, self.saved[back].clone())
        with module.context:
            i32 = ir.IntegerType.get_signless(32)
            for op in module.body.operations:
                if "tile.kernel" in op.attributes:
                    for name, value in attrs.items():
                        op.attributes[name] = ir.IntegerAttr.get(i32, value)
            module.operation.attributes[FIT_ATTR] = ir.StringAttr.get(
                "; ".join(self.budget.notes))
        return back


def _replace_module(module: ir.Module, saved: ir.Operation) -> None:
    """`module` becomes `saved` (a detached module op): its ops and attributes."""
    body = module.body
    for op in list(body.operations):
        op.erase()
    for op in list(saved.regions[0].blocks[0].operations):
        body.append(op)
    attrs = module.operation.attributes
    for name in list(attrs):                 # (the map iterates over names)
        del attrs[name]
    for name in list(saved.attributes):
        attrs[name] = saved.attributes[name]
    saved.erase()


# --------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------
def ir_printer(stream: TextIO, *, debug_info: bool = False) -> AfterPassHook:
    """A `print_after_all` hook writing MLIR-style IR dumps to `stream`."""

    def dump(pass_name: str, module: ir.Module) -> None:
        stream.write(f"// -----// IR Dump After {pass_name} //----- //\n")
        stream.write(module.operation.get_asm(enable_debug_info=debug_info))
        stream.write("\n")

    return dump
