"""The pass registry and pipeline API: tileir.passes."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mlir import ir

from tileir import dialect, passes
from tileir.dialect import TileIRError
from tileir.passes import PASSES, STAGES, PassInfo
from tileir.passes.effects import PURE_TILE_OPS, READ_OPS, WRITE_OPS, Effect, Effects

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """\
func.func private @double(%x: i32) -> i32 attributes {tile.function} {
  %y = arith.addi %x, %x : i32
  return %y : i32
}
func.func @kernel(%a: !tile.array<i32, 1 : i64>, %n: i32) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %b2 = "tile.bid"() {axis = 0 : i64} : () -> i32
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %n step %c1 : i32 {
    %d = func.call @double(%b2) : (i32) -> i32
    %t = tensor.splat %d : tensor<1x16xi32>
    %u = "tile.broadcast"(%t) : (tensor<1x16xi32>) -> tensor<4x16xi32>
    %r = "tile.reshape"(%u) : (tensor<4x16xi32>) -> tensor<64xi32>
    "tile.store"(%a, %r, %b) : (!tile.array<i32, 1 : i64>, tensor<64xi32>, i32) -> ()
  }
  return
}
"""


@pytest.fixture
def module() -> ir.Module:
    return dialect.parse(KERNEL, dialect.context())


# --------------------------------------------------------------------------
# Registry and stages
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(PASSES))
def test_pass_module_is_named_after_its_flag(name):
    """Same name in the flag, the module and the pipeline (STYLE.md 1)."""
    info = PASSES[name]
    assert isinstance(info, PassInfo) and info.name == name and info.summary
    module = importlib.import_module(f"tileir.passes.{_stem(name).replace('-', '_')}")
    assert module.FLAG == name and module.run is info.run
    assert name in module.__doc__


# Where a stage's passes have their lit tests, as in MLIR: rewrites within our
# dialects in Transforms/, dialect conversions in Conversion/, code generation
# in Target/.
LIT_DIR_OF_STAGE = {"tile": "Transforms", "layout": "Transforms", "pipeline": "Transforms",
                    "gpu": "Conversion",
                    "llvm": "Conversion", "ptx": "Target", "cubin": "Target"}


@pytest.mark.parametrize("name", list(PASSES))
def test_pass_contract_and_lit_file(name):
    """One docstring with the contract, and one lit file per pass in its stage's
    directory that runs the pass by its flag (STYLE.md 1 and 3)."""
    module = importlib.import_module(f"tileir.passes.{_stem(name).replace('-', '_')}")
    for section in ("Flag:", f"--{name}", "Input/output:", "Precondition:", "Example:",
                    "before:", "after:"):
        assert section in module.__doc__, f"{name}: docstring lacks {section!r}"
    stages = [stage for stage, names in STAGES.items() if name in names]
    assert len(stages) == 1, f"{name} runs in stages {stages}; a pass belongs to one stage"
    assert stages[0] in LIT_DIR_OF_STAGE, \
        f"stage '{stages[0]}' is new: say in LIT_DIR_OF_STAGE where its passes' lit tests go"
    lit_file = ROOT / "test" / LIT_DIR_OF_STAGE[stages[0]] / f"{_stem(name)}.mlir"
    assert lit_file.is_file(), f"{name}: no lit test {lit_file.relative_to(ROOT)}"
    runs = [line for line in lit_file.read_text().splitlines() if line.startswith("// RUN:")]
    assert any(f"--{name}" in line for line in runs), \
        f"{lit_file.relative_to(ROOT)} has no RUN line running --{name}"


def _stem(flag: str) -> str:
    return flag.removeprefix("tile-")


def test_stages_are_ordered_and_resolvable(module):
    assert list(STAGES)[:2] == ["frontend", "tile"]
    assert STAGES["frontend"] == ()
    assert STAGES["tile"][0] == "tile-inline" and STAGES["tile"][-1] == "tile-dce"
    for stage, names in STAGES.items():
        passes.validate_pipeline(names, module.context)


@pytest.mark.parametrize("text, expected", [
    ("builtin.module(tile-inline,cse)", ["tile-inline", "cse"]),
    ("tile-inline, cse", ["tile-inline", "cse"]),
    ("builtin.module(func.func(cse,canonicalize),tile-dce)", ["func.func(cse,canonicalize)",
                                                             "tile-dce"]),
    ('inline{default-pipeline="canonicalize,cse"},cse',
     ['inline{default-pipeline="canonicalize,cse"}', "cse"]),
    ("builtin.module()", []),
    ("", []),
])
def test_parse_pipeline(text, expected):
    assert passes.parse_pipeline(text) == expected


@pytest.mark.parametrize("text, message", [
    ("a,,b", "empty pass name"),
    ("builtin.module(cse", "missing ')'"),
    ("cse)", "unbalanced ')'"),
    ('cse{x="1}', "missing '\"'"),
])
def test_parse_pipeline_errors(text, message):
    with pytest.raises(TileIRError, match=re.escape(message)):
        passes.parse_pipeline(text)


@pytest.mark.parametrize("name, message", [
    ("tile-cxe", "did you mean 'tile-dce'"),
    ("frobnicate", "unknown pass 'frobnicate'"),
    ("tile-cse{x=1}", "takes no options"),
    ("func.func(tile-cse)", "top level"),
    ("canonicalize{bogus=1}", "no such option bogus"),
])
def test_unknown_or_misused_pass_names(module, name, message):
    with pytest.raises(TileIRError, match=re.escape(message)):
        passes.validate_pipeline([name], module.context)


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------
def test_run_passes_mixes_tile_and_upstream_passes(module):
    seen = []
    passes.run_passes(module, ["tile-inline", "canonicalize", "tile-cse", "cse"],
                      print_after_all=lambda name, m: seen.append(name))
    assert seen == ["tile-inline", "canonicalize", "tile-cse", "cse"]
    text = str(module)
    assert "call" not in text and text.count('"tile.bid"') == 1


def test_bad_name_leaves_module_untouched(module):
    before = str(module)
    with pytest.raises(TileIRError, match="unknown pass"):
        passes.run_passes(module, ["tile-inline", "no-such-pass"])
    assert str(module) == before


def test_run_stage_records_the_stage(module):
    assert passes.current_stage(module) == "frontend"
    passes.run_stage(module, "tile")
    assert passes.current_stage(module) == "tile"
    assert 'tile.stage = "tile"' in str(module)
    text = str(module)
    # The tile stage is a fixed point.
    passes.run_passes(module, STAGES["tile"])
    assert str(module) == text


def test_tile_stage_optimizes(module):
    passes.run_stages(module, stop_after="tile")
    text = str(module)
    assert "@double" not in text                       # inlined, helper erased
    assert text.count('"tile.bid"') == 1                # merged
    assert "tile.broadcast" not in text and "tile.reshape" not in text  # folded into splats
    loop = text[text.index("scf.for"):]
    assert "tensor.splat" not in loop                   # hoisted out of the loop
    assert '"tile.store"' in loop


def test_run_stages_refuses_to_go_back(module):
    passes.run_stage(module, "tile")
    with pytest.raises(TileIRError, match="already at stage 'tile', past 'frontend'"):
        passes.run_stages(module, stop_after="frontend")
    with pytest.raises(TileIRError, match="unknown stage 'nonexistent'"):
        passes.run_stages(module, stop_after="nonexistent")


def test_ir_printer_format(module):
    import io
    out = io.StringIO()
    passes.run_passes(module, ["tile-dce"], print_after_all=passes.ir_printer(out))
    assert out.getvalue().startswith("// -----// IR Dump After tile-dce //----- //\nmodule {")


def test_crashing_pass_is_an_internal_error(module, monkeypatch):
    def crash(m):
        raise KeyError("oops")

    monkeypatch.setitem(PASSES, "tile-crash", PassInfo("tile-crash", "crashes", crash))
    with pytest.raises(passes.InternalError, match="pass 'tile-crash' crashed: KeyError"):
        passes.run_passes(module, ["tile-crash"])


def _break_axis(m: ir.Module) -> None:
    def visit(op):
        if op.name == "tile.bid":
            op.attributes["axis"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 7)
        return ir.WalkResult.ADVANCE

    with m.context:
        m.operation.walk(visit)


@pytest.mark.parametrize("how", ["argument", "knob"])
def test_pass_that_breaks_the_ir_is_named(module, monkeypatch, how):
    """Verifying between every two passes (tile-opt's way; TILEIR_VERIFY_EACH=1 for a
    compile) names the pass that broke the IR."""
    monkeypatch.setitem(PASSES, "tile-break", PassInfo("tile-break", "breaks", _break_axis))
    monkeypatch.setenv("TILEIR_VERIFY_EACH", "1" if how == "knob" else "0")
    with pytest.raises(TileIRError) as info:
        passes.run_passes(module, ["tile-break", "tile-cse"],
                          verify_each=True if how == "argument" else None)
    messages = [d.message for d in info.value.diagnostics]
    assert messages[0] == "the IR produced by 'tile-break' is invalid before 'tile-cse'"
    assert "axis 7 is out of range" in messages[1]


def test_broken_ir_is_caught_at_the_end_without_verify_each(module, monkeypatch):
    """Without verifying between passes, the output is still verified: the error
    names the passes that ran and the knob that finds which one broke it."""
    monkeypatch.setitem(PASSES, "tile-break", PassInfo("tile-break", "breaks", _break_axis))
    monkeypatch.setenv("TILEIR_VERIFY_EACH", "0")
    with pytest.raises(TileIRError) as info:
        passes.run_passes(module, ["tile-break", "tile-cse"])
    messages = [d.message for d in info.value.diagnostics]
    assert messages[0] == ("the IR produced by the passes 'tile-break', 'tile-cse' is invalid "
                           "at the end of the pipeline (TILEIR_VERIFY_EACH=1 verifies between "
                           "every two passes and names the one that broke it)")
    assert "axis 7 is out of range" in messages[1]


def test_ir_broken_before_an_upstream_pass_is_an_error_without_verify_each(module,
                                                                        monkeypatch):
    """MLIR's verifier runs before every upstream pass (the wheel asserts): a tile pass
    that breaks what MLIR checks is named, not passed on to abort the process."""
    def drop_axis(m: ir.Module) -> None:
        def visit(op):
            if op.name == "tile.bid":
                del op.attributes["axis"]
            return ir.WalkResult.ADVANCE

        m.operation.walk(visit)

    monkeypatch.setitem(PASSES, "tile-drop", PassInfo("tile-drop", "drops", drop_axis))
    monkeypatch.setenv("TILEIR_VERIFY_EACH", "0")
    with pytest.raises(TileIRError) as info:
        passes.run_passes(module, ["tile-drop", "canonicalize"])
    messages = [d.message for d in info.value.diagnostics]
    assert messages[0] == "the IR produced by 'tile-drop' is invalid before 'canonicalize'"
    assert 'attribute "axis" is expected but not provided' in messages[1], messages


def test_a_compile_verifies_between_passes_only_when_asked(module, monkeypatch):
    """A stage verifies its input once and its output once; TILEIR_VERIFY_EACH=1 (or
    verify_each=True) adds one verification before every pass after the first."""
    import tileir.passes.pipeline as pipeline
    seen = []
    real = pipeline.verify
    monkeypatch.setattr(pipeline, "verify", lambda m: (seen.append(1), real(m))[1])
    n = len(STAGES["tile"])
    for knob, expected in (("0", 2), ("1", n + 1)):
        monkeypatch.setenv("TILEIR_VERIFY_EACH", knob)
        seen.clear()
        passes.run_stage(dialect.parse(KERNEL, module.context), "tile")
        assert len(seen) == expected, (knob, len(seen))
    monkeypatch.setenv("TILEIR_VERIFY_EACH", "0")
    seen.clear()
    passes.run_stage(dialect.parse(KERNEL, module.context), "tile", verify_each=True)
    assert len(seen) == n + 1


def test_invalid_input_is_refused_before_any_pass():
    # Built with the bindings, not parsed, so it never met a verifier; if it
    # reached a pass unchecked, an assertion could abort: run in a subprocess.
    code = textwrap.dedent("""
        from mlir import ir
        from tileir import dialect, passes
        ctx = dialect.context()
        with ctx, ir.Location.unknown():
            module = ir.Module.create()
            with ir.InsertionPoint(module.body):
                ir.Operation.create("tile.bid", results=[ir.IntegerType.get_signless(32)])
        try:
            passes.run_stage(module, "tile")
        except dialect.TileIRError as e:
            print("refused:", e.diagnostics[0].message)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "refused: 'tile.bid' op attribute \"axis\" is expected but not provided" in proc.stdout


# --------------------------------------------------------------------------
# Effects (what DCE, CSE and LICM rely on)
# --------------------------------------------------------------------------
def test_every_tile_op_has_declared_effects():
    unclassified = set(dialect.DIALECT.ops) - PURE_TILE_OPS - READ_OPS - WRITE_OPS
    assert not unclassified, (f"classify {sorted(unclassified)} in passes/effects.py: "
                              f"IRDL ops carry no memory effects, the tile passes need them")


def test_effects(module):
    ops = {}

    def visit(op):
        ops.setdefault(op.name, op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    effects = Effects()
    assert effects.of(ops["tile.bid"]) == Effect.PURE
    assert effects.of(ops["tile.store"]) == Effect.WRITE
    assert effects.of(ops["func.call"]) == Effect.PURE        # @double only adds
    assert effects.of(ops["scf.for"]) == Effect.WRITE         # its body stores
    assert effects.removable(ops["tile.reshape"])
    assert not effects.removable(ops["func.return"])
    assert effects.speculatable(ops["tile.broadcast"])
    assert not effects.speculatable(ops["func.call"])


def test_a_softmax_second_pass_runs_backwards_and_streams():
    """tile-reverse-rereads then the register prefetch, on the vocabulary softmax as a
    user writes it: the second loop (a map over row slabs) counts n - 1 - k and
    carries the next slab's tile, loaded before the current one is stored."""
    import numpy as np
    from tileir.examples import llm_ops
    x = np.zeros((4, 1000), np.float32)
    module = llm_ops.vocab_softmax.compile((x, x, 256), stage="pipeline", target="sm_90a").module
    func = next(op.operation for op in module.body.operations
                if op.operation.name == "func.func")
    loops = [op.operation for op in func.regions[0].blocks[0].operations
             if op.operation.name == "scf.for"]
    assert len(loops) == 2
    body = [op.operation for op in loops[1].regions[0].blocks[0].operations]
    names = [op.name for op in body]
    assert len(loops[1].results) == 1                       # the prefetched tile
    assert names[names.index("tile.load") - 1] == "arith.subi"
    assert names.index("tile.load") < names.index("tile.store")


# --------------------------------------------------------------------------
# Verifying between passes on real compiles
# --------------------------------------------------------------------------
@pytest.mark.parametrize("example, target", [("matmul", "sm_90a"), ("softmax", "sm_80")])
def test_verifying_between_every_pass_refuses_nothing_and_changes_nothing(
        example, target, monkeypatch):
    """A compile with TILEIR_VERIFY_EACH=1 verifies between every two passes (and MLIR's
    PassManagers inside the llvm and ptx stages after each of theirs): on the examples
    nothing is refused, and every stage's artifact, the PTX included, is the default
    compile's, which verifies only each stage's input and output."""
    import tileir as ct
    import tileir.passes.pipeline as pipeline
    from tileir.examples import matmul, softmax
    spec = lambda dtype, ndim: ct.ArraySpec(dtype, ndim)  # noqa: E731
    kernel, args = {
        "matmul": (matmul.matmul, (spec("float16", 2), spec("float16", 2),
                                   spec("float32", 2), 128, 128, 64)),
        "softmax": (softmax.softmax, (spec("float32", 2), spec("float32", 2), 1024)),
    }[example]
    real = pipeline.verify
    calls = []
    monkeypatch.setattr(pipeline, "verify", lambda m: (calls.append(1), real(m))[1])
    artifacts, verified = {}, {}
    for knob in ("0", "1"):
        monkeypatch.setenv("TILEIR_VERIFY_EACH", knob)
        calls.clear()
        ck = ct.kernel(kernel.__wrapped__).compile(args, stage="ptx", target=target)
        artifacts[knob], verified[knob] = dict(ck.artifacts), len(calls)
    assert artifacts["1"] == artifacts["0"]
    tile_passes = sum(len(STAGES[s]) for s in ("tile", "layout", "pipeline", "gpu"))
    assert verified["1"] >= tile_passes > verified["0"], verified
