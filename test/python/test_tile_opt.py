"""tile-opt on malformed input: a located error and exit status 1, never a crash.

Every case runs tile-opt in a subprocess: the MLIR wheel is built with
assertions, so a regression would abort (or segfault) the process, and that
must fail the test rather than kill pytest.  The subprocess is the warm tile-opt's
client (tools/tile_opt_server.py): each run is a fork of a process that has
imported tile-opt, and prints and exits (a signal too) as a fresh one does
(test_tile_opt_server.py checks that against `python -m tileir.tools.tile_opt`).
"""

from __future__ import annotations

import dataclasses
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tileir.tools import tile_opt_server as warm

TILE_OPT = [sys.executable, "-I", "-S", warm.__file__]


@pytest.fixture(autouse=True)
def _warm_tile_opt(tile_opt_server, monkeypatch):
    if tile_opt_server is not None:
        monkeypatch.setenv(warm.SERVER_ENV, tile_opt_server)

KERNEL = """\
func.func private @double(%t: tensor<16xf32>) -> tensor<16xf32>
    attributes {tile.function} {
  %r = arith.addf %t, %t : tensor<16xf32>
  return %r : tensor<16xf32>
}
func.func @kernel(%a: !tile.array<f32, 2 : i64>, %n: i32) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %t = "tile.load"(%a, %b, %c0) {tile_shape = array<i64: 1, 16>, padding = "zero"} : (!tile.array<f32, 2 : i64>, i32, i32) -> tensor<1x16xf32>
  %r = "tile.reshape"(%t) : (tensor<1x16xf32>) -> tensor<16xf32>
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %r) -> (tensor<16xf32>) : i32 {
    %d = func.call @double(%acc) : (tensor<16xf32>) -> tensor<16xf32>
    scf.yield %d : tensor<16xf32>
  }
  %m = "tile.reduce"(%s) {kind = "max", axis = 0 : i64} : (tensor<16xf32>) -> tensor<f32>
  %o = "tile.reshape"(%s) : (tensor<16xf32>) -> tensor<1x16xf32>
  "tile.store"(%a, %o, %b, %c0) : (!tile.array<f32, 2 : i64>, tensor<1x16xf32>, i32, i32) -> ()
  return
}
"""


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    where: str | None      # expected "line:col" of the first error, None if it has no place
    message: str           # a substring of the diagnostic
    args: tuple[str, ...] = ()


def _func(body: str, signature: str = "", attrs: str = "{tile.kernel}") -> bytes:
    return f"func.func @f({signature}) attributes {attrs} {{\n{body}\n  return\n}}\n".encode()


A2 = "!tile.array<f32, 2 : i64>"

CASES = [
    Case("empty", b"", "1:1", "nothing to parse"),
    Case("only_comments", b"// nothing here\n\n   // still nothing\n", "1:1", "nothing to parse"),
    Case("truncated", KERNEL.encode()[:300], None, "error:"),
    Case("garbage_ascii", b"@@@ ### !!! $$$\n", "1:2", "identifier expected to start with letter"),
    Case("random_binary", bytes(random.Random(7).randrange(256) for _ in range(512)), "1:",
         "not valid UTF-8"),
    Case("latin1_comment", b"func.func @f() {\n  // caf\xe9\n  return\n}\n", "2:9",
         "not valid UTF-8 (byte 0xe9)"),
    Case("nul_byte", b"func.func @f() {\n  return\x00\n}\n", "2:9", "NUL byte"),
    Case("bytecode", b"ML\xefR\x00\x05\x01\x02", "1:1", "MLIR bytecode is not supported"),
    Case("unknown_tile_op", _func('  %x = "tile.frobnicate"() : () -> i32'), "2:8",
         "unregistered operation 'tile.frobnicate'"),
    Case("unknown_dialect", _func('  "triton.dot"() : () -> ()'), "2:",
         "unregistered dialect"),
    Case("custom_form", _func("  %b = tile.bid {axis = 0 : i64} : i32"), "2:8",
         "'tile.bid' must be written in the generic form"),
    Case("unknown_type", b"func.func @f(%a: !tile.matrix<f32>) {\n  return\n}\n", "1:",
         "expected dynamic type"),
    Case("array_param_count", b"func.func @f(%a: !tile.array<f32>) {\n  return\n}\n", "1:",
         "expected 2 type arguments, but had 1"),
    Case("operand_count", _func('  %c = arith.constant 0 : i32\n'
                                '  %b = "tile.bid"(%c) {axis = 0 : i64} : (i32) -> i32'),
         "3:8", "expects exactly 0 operands, but got 1"),
    Case("wrong_operand_type", _func('  %d = "tile.dim"(%t) {axis = 0 : i64} : '
                                     '(tensor<4xf32>) -> i32', "%t: tensor<4xf32>", "{}"),
         "2:8", "expected base type 'tile.array' but got 'builtin.tensor'"),
    Case("type_mismatch_on_use", _func('  %r = "tile.reshape"(%t) : (tensor<16xf16>) -> '
                                       'tensor<4x4xf16>', "%t: tensor<16xf32>", "{}"),
         "2:23", "expects different type than prior uses"),
    Case("axis_out_of_range", _func('  %b = "tile.bid"() {axis = 3 : i64} : () -> i32'), "2:8",
         "axis 3 is out of range for the grid of rank 3"),
    Case("axis_i128", _func('  %b = "tile.bid"() {axis = 100000000000000000000000 : i128} : '
                            '() -> i32'), "2:8", "attribute 'axis' must be an i64 integer"),
    Case("tile_shape_i32", _func(f'  %t = "tile.load"(%a, %i, %i) {{tile_shape = array<i32: 4, 4>'
                                 f', padding = "zero"}} : ({A2}, i32, i32) -> tensor<4x4xf32>',
                                 f"%a: {A2}, %i: i32"),
         "2:8", "attribute 'tile_shape' must be an array<i64: ...>"),
    Case("bad_padding", _func(f'  %t = "tile.load"(%a, %i, %i) {{tile_shape = array<i64: 4, 4>'
                              f', padding = "ones"}} : ({A2}, i32, i32) -> tensor<4x4xf32>',
                              f"%a: {A2}, %i: i32"), "2:8", "unknown padding 'ones'"),
    Case("negative_array_rank", _func('  %d = "tile.dim"(%a) {axis = 0 : i64} : '
                                      '(!tile.array<f32, -1 : i64>) -> i32',
                                      "%a: !tile.array<f32, -1 : i64>", "{}"),
         "2:8", "malformed array type"),
    Case("non_power_of_two", _func("  %z = arith.constant dense<0.0> : tensor<3x4xf32>"), "2:8",
         "must have power-of-two dims; got 3"),
    Case("kernel_returns", b"func.func @f(%x: i32) -> i32 attributes {tile.kernel} {\n"
                           b"  return %x : i32\n}\n", "1:1", "must not return values"),
    Case("undefined_value", _func("  %x = arith.addi %nope, %nope : i32"), "2:19",
         "use of undeclared SSA value name"),
    Case("extra_brace", b"func.func @f() {\n  return\n}\n}\n", "3:2",
         "expected operation name in quotes"),
    Case("huge_dim", _func("  %z = arith.constant dense<0.0> : tensor<99999999999999999999xf32>"),
         "2:", "error:"),
    Case("deep_nesting", b"func.func @f() {\n" + b"scf.execute_region {" * 3000 + b"\n}\n",
         "2:5120", "nested more than 256 deep"),
    Case("duplicate_symbol", b"func.func @f() {\n  return\n}\nfunc.func @f() {\n  return\n}\n",
         "4:1", "redefinition of symbol named 'f'"),
    Case("call_missing_function", _func("  func.call @nowhere() : () -> ()"), "2:3",
         "'nowhere' does not reference a valid function"),
    Case("bad_stage_attribute", b'module attributes {tile.stage = "gpu9"} {\n}\n', "1:1",
         "names no stage", ("--stop-after=tile",)),
    Case("recursive_helper", b"func.func private @r(%x: i32) -> i32 attributes {tile.function} {\n"
                             b"  %y = func.call @r(%x) : (i32) -> i32\n  return %y : i32\n}\n",
         "2:8", "recursive call of tile.function @r", ("--tile-inline",)),
    Case("error_after_split", b"func.func @ok() {\n  return\n}\n// -----\n"
                              b'func.func @bad() {\n  %b = "tile.bid"() : () -> i32\n  return\n}\n',
         "6:8", "attribute \"axis\" is expected but not provided", ("-split-input-file",)),
]


def run_tile_opt(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*TILE_OPT, *args], input=stdin, capture_output=True, timeout=120)


def assert_clean_failure(proc: subprocess.CompletedProcess) -> str:
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode > 0, f"died of signal {-proc.returncode}" if proc.returncode < 0 \
        else f"exit status 0 for bad input; stderr:\n{stderr}"
    assert proc.returncode == 1, f"exit status {proc.returncode}; stderr:\n{stderr}"
    assert "Traceback" not in stderr, stderr
    assert "internal error" not in stderr, stderr
    assert "error:" in stderr, stderr
    return stderr


# Each case costs a Python start with MLIR (about 0.6 s of CPU): the fast tier runs one
# of each kind (bytes, parse, verify, pass errors), `tile-check --full` all of them.
FAST_CASES = {"empty", "garbage_ascii", "random_binary", "nul_byte", "bytecode",
              "unknown_dialect", "operand_count", "type_mismatch_on_use", "axis_out_of_range",
              "non_power_of_two", "undefined_value", "recursive_helper", "error_after_split"}


@pytest.mark.parametrize("case", [c if c.name in FAST_CASES else
                                  pytest.param(c, marks=pytest.mark.slow) for c in CASES],
                         ids=[c.name for c in CASES])
def test_malformed_input_gives_located_error(case: Case, tmp_path: Path):
    path = tmp_path / f"{case.name}.mlir"
    path.write_bytes(case.data)
    stderr = assert_clean_failure(run_tile_opt(str(path), *case.args))
    assert case.message in stderr, stderr
    if case.where is not None:
        assert f"{path}:{case.where}" in stderr, stderr


def test_at_least_twenty_cases():
    assert len(CASES) >= 20


@pytest.mark.parametrize("args, message", [
    (("--pass-pipeline=no-such-pass",), "tile-opt: error: unknown pass 'no-such-pass'"),
    (("--pass-pipeline=builtin.module(cse",), "missing ')'"),
    (("--pass-pipeline=canonicalize{bogus=1}",), "no such option bogus"),
    (("--pass-pipeline=func.func(tile-dce)",), "tile passes run on the whole module"),
])
def test_bad_pipeline(args, message, tmp_path: Path):
    path = tmp_path / "ok.mlir"
    path.write_text("func.func @f() {\n  return\n}\n")
    proc = run_tile_opt(str(path), *args)
    stderr = proc.stderr.decode()
    assert proc.returncode in (1, 2) and "Traceback" not in stderr, stderr
    assert message in stderr
    assert proc.stdout == b""


@pytest.mark.parametrize("target, message", [
    ("missing.mlir", "No such file or directory"),
    (".", "Is a directory"),
])
def test_unreadable_input(target, message, tmp_path: Path):
    stderr = assert_clean_failure(run_tile_opt(str(tmp_path / target)))
    assert f"tile-opt: error: cannot read '{tmp_path / target}': {message}" in stderr


def test_stdin_is_named_in_diagnostics():
    bad = b'"tile.bid"() {axis = 5 : i64} : () -> i32\n'
    stderr = assert_clean_failure(run_tile_opt(stdin=bad))
    assert stderr.startswith("<stdin>:1:1: error: 'tile.bid' op axis 5 is out of range")


def test_every_split_is_reported(tmp_path: Path):
    chunks = ['"tile.iota"() : () -> tensor<4x4xi32>', "func.func @ok() {\n  return\n}",
              '"tile.bid"() : () -> i32']
    path = tmp_path / "splits.mlir"
    path.write_text("\n// -----\n".join(chunks) + "\n")
    proc = run_tile_opt(str(path), "-split-input-file")
    stderr = assert_clean_failure(proc)
    assert re.findall(r"splits\.mlir:(\d+):\d+: error", stderr) == ["1", "7"]
    assert b"func.func @ok" in proc.stdout


def test_valid_kernel_round_trips_through_the_tile_stage(tmp_path: Path):
    path = tmp_path / "kernel.mlir"
    path.write_text(KERNEL)
    first = run_tile_opt(str(path), "--stop-after=tile")
    assert first.returncode == 0, first.stderr.decode()
    second = run_tile_opt("--stop-after=tile", stdin=first.stdout)
    assert second.returncode == 0 and second.stdout == first.stdout


def _mutants(seed: int, count: int) -> list[str]:
    """Byte-level mutations of a valid kernel: deletions, duplications, stray tokens."""
    rng = random.Random(seed)
    tokens = ['"tile.bid"', "tensor<3xf32>", "{", "}", "(", ")", "<", ">", ":", "%b", "i64",
              "axis = 9 : i64", "array<i32: 1>", "-1", "99999999999999999999", "^bb1:",
              "scf.yield", "!tile.array<f32>", '"nan"', "tile.function"]
    mutants = []
    for _ in range(count):
        text = list(KERNEL)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text))
            choice = rng.random()
            if choice < 0.4:
                del text[i:i + rng.randint(1, 12)]
            elif choice < 0.8:
                text[i:i] = list(rng.choice(tokens))
            else:
                j = rng.randrange(len(text))
                text[i:i] = text[j:j + rng.randint(1, 30)]
        mutants.append("".join(text).replace("// -----", "//"))
    return mutants


# a fuzz sweep: the fast tier runs the mutants through every stage; stopped after
# `tile` and through an explicit pipeline in `tile-check --full`
@pytest.mark.sweep
@pytest.mark.parametrize("args", [(), ("--stop-after=tile",),
                                  ("--pass-pipeline=canonicalize,tile-canonicalize,cse",)])
def test_mutated_kernels_never_crash(args, tmp_path: Path):
    # One process for all mutants (split chunks): a single abort fails the test.
    path = tmp_path / "mutants.mlir"
    path.write_text("\n// -----\n".join(_mutants(seed=len(args), count=60)))
    proc = run_tile_opt(str(path), "-split-input-file", *args)
    stderr = proc.stderr.decode()
    assert proc.returncode in (0, 1), f"status {proc.returncode}:\n{stderr[-2000:]}"
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
