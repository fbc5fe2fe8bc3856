"""tile-inline: inline calls of `tile.function` helpers, then erase unused helpers.

Flag:          --tile-inline
Input/output:  Tile IR with `func.call`s -> Tile IR without calls to helpers.
Precondition:  verified IR; helpers are single-block `func.func`s marked
               `tile.function` and do not recurse (recursion is an error at the
               call that closes the cycle).  Calls are inlined callees-first,
               so helpers calling helpers cost one copy per call.  Inlined ops
               get the location `callsite(<op in helper> at <call>)`, so errors
               point at the user's helper line and say where it was called.
               Private helpers left without references are erased.  Upstream
               `inline` cannot do this: IRDL ops have no inliner interface.

Example:
  before:  func.func private @twice(%x: i32) -> i32 attributes {tile.function} {...}
           %r = func.call @twice(%v) : (i32) -> i32     // @twice returns x + x
  after:   %r = arith.addi %v, %v : i32
"""

from __future__ import annotations

from mlir import ir

from tileir.dialect import FUNCTION_ATTR, Diagnostic, TileIRError
from tileir.dialect.diagnostics import map_locations

from .effects import lookup_callee, ops_of

FLAG = "tile-inline"
SUMMARY = "inline calls of tile.function helpers (call-site locations), erase unused helpers"


def run(module: ir.Module) -> None:
    with module.context:
        functions = _functions(module.operation)
        # Build and check the whole call graph before changing anything, so an
        # error leaves the module as it was.
        graph = {func: _helper_calls(func) for func in functions}
        for func in _callees_first(graph):
            for call in graph[func]:
                _inline_call(call)
        _erase_unused_helpers(module.operation, functions)


def _symbol(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _is_helper(func: ir.Operation | None) -> bool:
    return func is not None and FUNCTION_ATTR in func.attributes


def _functions(root: ir.Operation) -> list[ir.Operation]:
    """Every `func.func` under `root` (nested modules included)."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.func":
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def _helper_calls(func: ir.Operation) -> list[ir.Operation]:
    """The calls of `tile.function` helpers inside `func`, in program order."""
    calls: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call" and _is_helper(lookup_callee(op.operation)):
            calls.append(op.operation)
        return ir.WalkResult.ADVANCE

    # Checked after the walk: an exception raised inside a walk callback comes
    # back as a RuntimeError wrapping its traceback.
    func.walk(visit)
    for call in calls:
        _check_inlinable(call, lookup_callee(call))
    return calls


def _check_inlinable(call: ir.Operation, callee: ir.Operation) -> None:
    blocks = len(list(callee.regions[0].blocks))
    if blocks != 1:
        what = "has no body" if blocks == 0 else f"has {blocks} blocks"
        raise TileIRError([Diagnostic(call.location, f"cannot inline @{_symbol(callee)}: it "
                                      f"{what}; tile.function helpers are single-block")])


def _callees_first(graph: dict[ir.Operation, list[ir.Operation]]) -> list[ir.Operation]:
    """Functions in post-order of the call graph; raises at a call that recurses."""
    order: list[ir.Operation] = []
    active: list[ir.Operation] = []  # the current call chain
    done: set[ir.Operation] = set()

    def visit(func: ir.Operation) -> None:
        active.append(func)
        for call in graph[func]:
            callee = lookup_callee(call)
            if callee in active:
                chain = [*active[active.index(callee):], callee]
                names = " -> ".join(f"@{_symbol(f)}" for f in chain)
                raise TileIRError([Diagnostic(
                    call.location, f"recursive call of tile.function @{_symbol(callee)} "
                    f"cannot be inlined (call chain {names}); tile helpers must not recurse")])
            if callee not in done:
                visit(callee)
        active.pop()
        done.add(func)
        order.append(func)

    for func in graph:
        if func not in done:
            visit(func)
    return order


def _inline_call(call: ir.Operation) -> None:
    # Work on a detached copy of the callee: its ops move into the caller, the
    # copy (with its func.return) is then dropped.
    copy = lookup_callee(call).clone(ip=False)
    body = copy.regions[0].blocks[0]
    for argument, operand in zip(body.arguments, call.operands):
        argument.replace_all_uses_with(operand)
    returned: list[ir.Value] = []
    for op in ops_of(body):
        if op.name == "func.return":
            returned = list(op.operands)
            continue
        op.move_before(call)
        _relocate(op, call.location)
    for result, value in zip(call.results, returned):
        result.replace_all_uses_with(value)
    call.erase()
    copy.erase()


def _inlined_location(loc: ir.Location, call_loc: ir.Location) -> ir.Location:
    known = loc.is_a_file() or loc.is_a_callsite() or loc.is_a_name() or loc.is_a_fused()
    return ir.Location.callsite(loc, [call_loc]) if known else call_loc


def _relocate(root: ir.Operation, call_loc: ir.Location) -> None:
    """Gives `root` and everything inside it a call-site location."""
    map_locations(root, lambda loc: _inlined_location(loc, call_loc))


def _referenced_symbols(root: ir.Operation) -> set[str]:
    """Every symbol named by a symbol-reference attribute under `root`."""
    names: set[str] = set()

    def collect(attr: ir.Attribute) -> None:
        if isinstance(attr, ir.FlatSymbolRefAttr):
            names.add(attr.value)
        elif isinstance(attr, ir.SymbolRefAttr):
            names.update(str(attr).lstrip("@").split("::@"))
        elif isinstance(attr, ir.ArrayAttr):
            for element in attr:
                collect(element)
        elif isinstance(attr, ir.DictAttr):
            for i in range(len(attr)):
                collect(attr[i].attr)

    def visit(op: ir.Operation) -> ir.WalkResult:
        for _, attr in op.attributes.items():
            collect(attr)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return names


def _erase_unused_helpers(root: ir.Operation, functions: list[ir.Operation]) -> None:
    referenced = _referenced_symbols(root)
    for func in functions:
        private = func.attributes.get("sym_visibility") is not None and \
            ir.StringAttr(func.attributes["sym_visibility"]).value == "private"
        if _is_helper(func) and private and _symbol(func) not in referenced:
            func.erase()
