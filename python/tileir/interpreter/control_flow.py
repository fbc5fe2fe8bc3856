"""Rules for `scf.for`, `scf.if`, `scf.while` and `func.call`.

Region bodies are compiled once into `CompiledBlock`s and executed in the
enclosing frame (scf regions see the values around them).  Terminators
(`scf.yield`, `scf.condition`, `func.return`) are not steps: `execute`
returns their operands.
"""

from __future__ import annotations

import numpy as np
from mlir import ir

from .compiler import LAUNCH_SLOT, CompileContext, Step, execute, rule
from .dtypes import elem_of
from .errors import Fault, InterpreterError, add_note

# Tile IR helpers are inlined before code generation, so a recursive call can
# never run on the GPU; the interpreter still runs it, to this depth.
MAX_CALL_DEPTH = 64
# Call-site notes attached to an error raised inside nested calls, innermost first.
MAX_CALL_NOTES = 8


def _assign(frame, slots, values) -> None:
    for s, v in zip(slots, values):
        frame[s] = v


@rule("scf.for")
def _for(op, cx: CompileContext) -> Step:
    lb, ub, stride, *init = cx.slots(op.operands)
    iv, *carried_slots = cx.block_args(op.regions[0])
    body = cx.block(op.regions[0])
    outs = cx.define_all(op.results)
    e = elem_of(op.operands[0].type)
    unsigned = "unsignedCmp" in op.attributes
    if unsigned:
        # Bounds compare as unsigned; the induction variable keeps the signless bits.
        mask, signless = e.uint_max, e.storage

        def bound(v):
            return int(v) & mask

        def make_iv(i):
            return np.array(i, dtype=e.unsigned).view(signless)[()]
    else:
        bound, make_iv = int, e.storage.type

    def step(frame):
        lo, hi, by = bound(frame[lb]), bound(frame[ub]), bound(frame[stride])
        if by <= 0:
            raise Fault(f"the step must be positive, got {by}")
        values = [frame[s] for s in init]
        for i in range(lo, hi, by):
            frame[iv] = make_iv(i)
            _assign(frame, carried_slots, values)
            values = execute(body, frame)
        _assign(frame, outs, values)
    return step


@rule("scf.if")
def _if(op, cx: CompileContext) -> Step:
    cond = cx.slot(op.operands[0])
    then_block = cx.block(op.regions[0])
    else_block = cx.block(op.regions[1]) if len(op.regions[1].blocks) else None
    outs = cx.define_all(op.results)

    def step(frame):
        block = then_block if frame[cond] else else_block
        if block is not None:
            _assign(frame, outs, execute(block, frame))
    return step


@rule("scf.while")
def _while(op, cx: CompileContext) -> Step:
    init = cx.slots(op.operands)
    before_args = cx.block_args(op.regions[0])
    before = cx.block(op.regions[0])  # ends in scf.condition(%cond, forwarded...)
    after_args = cx.block_args(op.regions[1])
    after = cx.block(op.regions[1])
    outs = cx.define_all(op.results)

    def step(frame):
        values = [frame[s] for s in init]
        while True:
            _assign(frame, before_args, values)
            cond, *forwarded = execute(before, frame)
            if not cond:
                break
            _assign(frame, after_args, forwarded)
            values = execute(after, frame)
        _assign(frame, outs, forwarded)
    return step


@rule("func.call")
def _call(op, cx: CompileContext) -> Step:
    name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    callee = cx.function(name, at=op.location)
    ins, outs, where = cx.slots(op.operands), cx.define_all(op.results), op.location

    def step(frame):
        launch = frame[LAUNCH_SLOT]
        if launch.depth >= MAX_CALL_DEPTH:
            raise Fault(f"call depth exceeds {MAX_CALL_DEPTH} at a call to @{name}: unbounded "
                        f"recursion? (helpers are inlined for the GPU, so recursion cannot "
                        f"compile there)")
        callee_frame = callee.new_frame(launch)
        _assign(callee_frame, callee.arg_slots, [frame[s] for s in ins])
        launch.depth += 1
        try:
            results = execute(callee.body, callee_frame)
        except InterpreterError as e:
            if len(e.diagnostics[-1].notes) < MAX_CALL_NOTES:
                add_note(e, where, f"in the call to @{name} here")
            raise
        finally:
            launch.depth -= 1
        _assign(frame, outs, results)
    return step
