"""Ahead of time: `Kernel.compile` through the on-disk cache, launching from it without
MLIR, and `tile-compile`.

The scenario of docs/runtime.md: a host with MLIR (this one) fills a cache; a GPU host
without MLIR — a subprocess that sets `sys.modules['mlir'] = None` — finds the cubins
there, or says how to put them there.  Processes that must agree on a key pin the
compiler fingerprint (a hash of tileir's sources), so colleagues editing the tree while
this runs cannot make it flaky; that the fingerprint tracks edits is test_cache's job.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tileir as ct
from tileir import cache as cache_mod
from tileir.cache import Cache, CacheCorruptError, cache_key
from tileir.examples.softmax import softmax
from tileir.examples.vector_add import vector_add
from tileir.errors import TileError
from tileir.kernel import spill_bytes
from tileir.specialization import (ArgSpecError, ArrayParam, ArraySpec, ScalarParam,
                                   classify_arg, format_arg_specs, parse_arg_specs)
from tileir.tools.aot import ptxas_resources

REPO = Path(__file__).resolve().parents[2]

# The specializations the examples launch with (aligned arrays; Constant tile sizes).
SPECS = {vector_add: "f32[1],f32[1],f32[1],1024", softmax: "bf16[2],bf16[2],1024"}
ARTIFACT_FILES = ["frontend.mlir", "gpu.mlir", "kernel.cubin", "kernel.ptx", "layout.mlir",
                  "llvm.mlir", "pipeline.mlir", "ptxas.log", "tile.mlir"]

PIN = ("import tileir.cache\n"
       "tileir.cache.compiler_fingerprint = lambda: 'pinned'\n")
NO_MLIR = ("import sys\n"
           "sys.modules['mlir'] = None     # a GPU host without the MLIR wheel\n")
# What a host without MLIR must never load (and could not).
COMPILER_MODULES = ("mlir.", "tileir.dialect", "tileir.passes", "tileir.backend",
                    "tileir.frontend.compiler", "tileir.interpreter")


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setattr(cache_mod, "compiler_fingerprint", lambda: "pinned")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.delenv("TILEIR_CACHE", raising=False)
    monkeypatch.delenv("TILEIR_CACHE_MAX_BYTES", raising=False)
    return Cache(tmp_path / "cache")


def python(code: str, env: dict[str, str] | None = None, *args: str):
    """Runs `code` in a fresh interpreter (the tileir of this checkout)."""
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def compile_without_mlir(kernel, root: Path, env: dict[str, str] | None = None,
                         grid: tuple[int, ...] | None = None):
    """A host without MLIR compiles `kernel` for sm_90a (for a launch over `grid` on 132
    SMs, if given): what it got, as JSON, or the error."""
    code = NO_MLIR + PIN + textwrap.dedent(f"""
        import hashlib, json, importlib
        import tileir as ct
        from tileir.specialization import parse_arg_specs
        kernel = getattr(importlib.import_module({kernel.fn.__module__!r}), {kernel.name!r})
        try:
            ck = kernel.compile(parse_arg_specs({SPECS[kernel]!r}), target="sm_90a",
                                grid={grid!r}, sm_count=132)
        except ct.TileError as e:
            print(json.dumps({{"error": type(e).__name__, "message": str(e)}}))
            sys.exit(0)
        try:
            ck.ir()
            ir_error = None
        except ct.TileError as e:
            ir_error = str(e)
        print(json.dumps({{
            "cubin_sha256": hashlib.sha256(ck.cubin).hexdigest(),
            "meta": ck.meta, "module": repr(ck.module), "cached": ck.loaded_from_cache,
            "tile_ir": ck.artifacts["tile"], "ir_error": ir_error,
            "compiler_loaded": sorted(m for m in sys.modules
                                      if m.startswith({COMPILER_MODULES!r})),
            "mlir": repr(sys.modules["mlir"])}}))
    """)
    out = python(code, {"TILEIR_CACHE_DIR": str(root), **(env or {})})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------
# No MLIR on the GPU host
# ---------------------------------------------------------------------------
# In --full (0.5 s, a fresh Python): test_cached_cubins_are_served_without_mlir keeps a
# host without MLIR importing tileir (and serving a kernel) with no compiler module loaded
@pytest.mark.slow
def test_tileir_imports_without_mlir():
    code = NO_MLIR + textwrap.dedent(f"""
        import tileir, tileir.kernel, tileir.cache, tileir.runtime, tileir.specialization
        import tileir.tools.aot, tileir.examples.vector_add, tileir.examples.softmax
        names = ["TileError", "TileCompilerExecutionError", "kernel", "function", "launch",
                 "ArraySpec", "Constant", "ConstInt", "Kernel", "CompiledKernel", "load",
                 "bfloat16", "PaddingMode"]
        print([n for n in names if not hasattr(tileir, n)])
        print(sorted(m for m in sys.modules if m.startswith({COMPILER_MODULES!r})))
    """)
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "[]"]


def test_cached_cubins_are_served_without_mlir(cache, pinned):
    filled = {k: k.compile(parse_arg_specs(spec), target="sm_90a", cache=cache)
              for k, spec in SPECS.items()}
    for kernel, ck in filled.items():
        assert ck.module is not None and not ck.loaded_from_cache
        assert ck.entry.path.parent == cache.root
        got = compile_without_mlir(kernel, cache.root)
        assert "error" not in got, got["message"]
        assert got["cached"] and got["module"] == "None"
        assert got["cubin_sha256"] == sha256(ck.cubin)
        assert got["meta"] == ck.meta
        assert got["tile_ir"] == ck.artifacts["tile"]        # every stage's text is there
        assert got["compiler_loaded"] == [] and got["mlir"] == "None"
        assert got["ir_error"].startswith(
            f"error: kernel '{kernel.name}' was loaded from the compile cache entry "
            f"{ck.entry.path}, which keeps each stage's IR as text but no MLIR module")


def test_a_grid_without_its_variant_in_the_cache_takes_the_kernel_as_written(cache, pinned,
                                                                              tmp_path):
    """A launch over a small grid wishes its tiles split across more blocks
    (tile-split-blocks); `tile-compile` knows no grid and caches the kernel as written.
    Without MLIR that one serves the launch: the split only buys speed."""
    specs = parse_arg_specs(SPECS[vector_add])
    plain = vector_add.compile(specs, target="sm_90a", cache=cache)
    wish = vector_add.grid_wish((10,), 132, specs)
    assert wish is not None           # the launch's specialization is another cache key
    params = vector_add.classify(specs, gpu=True)
    assert cache_key(vector_add, params, "sm_90a", {"grid_wish": wish}) != \
        cache_key(vector_add, params, "sm_90a")
    got = compile_without_mlir(vector_add, cache.root, grid=(10,))
    assert "error" not in got, got["message"]
    assert got["cached"] and got["cubin_sha256"] == sha256(plain.cubin)
    # (the launch's grid wish is computed by tileir.backend.layout.grid_wish, plain Python)
    assert got["meta"] == plain.meta and got["mlir"] == "None"
    assert [m for m in got["compiler_loaded"] if not m.startswith("tileir.backend")] == []
    # with nothing cached, the miss is still explained
    assert compile_without_mlir(vector_add, tmp_path / "empty", grid=(10,))["error"] == \
        "TileCompilerExecutionError"


def test_a_miss_without_mlir_says_how_to_fill_the_cache(cache, pinned, warm_tile_compile):
    got = compile_without_mlir(softmax, cache.root)
    key = cache_key(softmax, softmax.classify(parse_arg_specs(SPECS[softmax]), gpu=True),
                    "sm_90a")
    assert got["error"] == "TileCompilerExecutionError"
    lines = got["message"].splitlines()
    assert lines[0].startswith("error: kernel 'softmax' with --args 'bf16[2],bf16[2],1024' for "
                               "sm_90a is not in the compile cache, and cannot be compiled "
                               "here: the MLIR Python bindings are missing (")
    assert lines[1:3] == [f"  key:   {key}", f"  cache: {cache.root}"]
    command = lines[-1].strip()
    assert command == ("tile-compile tileir.examples.softmax:softmax --target sm_90a "
                       "--args 'bf16[2],bf16[2],1024'")
    # The command it prints is the fix: run it, and the same host now finds the cubin.
    argv = shlex.split(command)[1:] + ["--cache-dir", str(cache.root)]
    out = warm_tile_compile(*argv)
    assert out.returncode == 0, out.stderr
    assert compile_without_mlir(softmax, cache.root).get("cached")


def test_the_cache_disabled_is_a_miss_that_says_so(cache, pinned):
    vector_add.compile(parse_arg_specs(SPECS[vector_add]), target="sm_90a", cache=cache)
    got = compile_without_mlir(vector_add, cache.root, {"TILEIR_CACHE": "0"})
    assert got["error"] == "TileCompilerExecutionError"
    assert "  cache: disabled (TILEIR_CACHE=0)" in got["message"].splitlines()


def test_the_key_is_the_same_in_every_process():
    # Unpinned, and in two processes at once, so the whole key is compared; different
    # hash seeds would show any dependence on set or dict order.
    code = textwrap.dedent(f"""
        from tileir.cache import cache_key
        from tileir.examples.softmax import softmax
        from tileir.specialization import parse_arg_specs
        params = softmax.classify(parse_arg_specs({SPECS[softmax]!r}), gpu=True)
        print(cache_key(softmax, params, "sm_90a"))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed})
             for seed in ("1", "2")]
    keys = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        keys.append(out.strip())
    assert re.fullmatch(r"[0-9a-f]{64}", keys[0]) and keys[0] == keys[1]


# ---------------------------------------------------------------------------
# Kernel.compile and the disk cache, in one process
# ---------------------------------------------------------------------------
KERNEL_SOURCE = '''
import tileir as ct


@ct.kernel(num_warps=2)
def scale(a, b, k, TILE: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(b, index=(i,), tile=x * k)
'''
SCALE_ARGS = (ArraySpec("float32", 1), ArraySpec("float32", 1), 2.0, 256)


def fresh_kernel(tmp_path: Path, name: str):
    """The same kernel as a new Kernel object (nothing in memory), from its own file."""
    path = tmp_path / f"{name}.py"
    path.write_text(KERNEL_SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.scale


def test_a_miss_compiles_and_stores_every_stage(tmp_path, cache):
    ck = fresh_kernel(tmp_path, "miss").compile(SCALE_ARGS, target="sm_80", cache=cache)
    entry = ck.entry
    assert sorted(entry.names) == ARTIFACT_FILES
    assert sorted(p.name for p in entry.path.iterdir()) == sorted(
        ARTIFACT_FILES + ["manifest.json", "meta.json"])
    assert entry.cubin == ck.cubin and ck.cubin.startswith(b"\x7fELF")
    assert entry.text("kernel.ptx") == ck.artifacts["ptx"]
    assert entry.text("llvm.mlir") == ck.artifacts["llvm"]
    assert entry.text("ptxas.log") == ck.ptxas_report and "Used" in ck.ptxas_report
    assert json.loads((entry.path / "meta.json").read_text()) == ck.meta
    assert ck.meta["target"] == "sm_80" and ck.meta["num_threads"] == 64   # num_warps=2
    toolchain = ck.meta["toolchain"]
    assert toolchain["ptxas"].startswith("Build cuda_")
    assert toolchain["mlir"].startswith("xtc-mlir-python-bindings==")


def test_the_mlir_wheel_is_named_without_reading_every_distribution(monkeypatch, tmp_path):
    """The wheel that installed `mlir` is found among the dist-infos next to it, never
    by a scan of every installed distribution (3.9 s of a cold compile on the GPU
    machine); a package without a dist-info is named by where it is."""
    import importlib
    import importlib.metadata
    kernel = importlib.import_module("tileir.kernel")       # the module, not the decorator
    expected = sorted(importlib.metadata.packages_distributions()["mlir"])
    kernel._mlir_version.cache_clear()
    monkeypatch.setattr(importlib.metadata, "packages_distributions",
                        lambda: pytest.fail("scanned every distribution"))
    try:
        found = kernel._mlir_version()
        kernel._mlir_version.cache_clear()
        import mlir
        monkeypatch.setattr(mlir, "__path__", [str(tmp_path / "mlir")])
        bare = kernel._mlir_version()
    finally:
        kernel._mlir_version.cache_clear()
    assert [v.split("==")[0] for v in found.split(", ")] == expected
    assert bare == f"unknown ({tmp_path / 'mlir'})"


def test_a_hit_needs_no_compile_and_has_no_module(tmp_path, cache, monkeypatch):
    compiled = fresh_kernel(tmp_path, "first").compile(SCALE_ARGS, target="sm_90a", cache=cache)
    kernel_mod = sys.modules["tileir.kernel"]

    def no_compiling(*args, **kwargs):
        raise AssertionError("a cache hit compiled the kernel")

    monkeypatch.setattr(kernel_mod.Kernel, "_build", no_compiling)
    loaded = fresh_kernel(tmp_path, "second").compile(SCALE_ARGS, target="sm_90a", cache=cache)
    assert loaded.loaded_from_cache and loaded.module is None
    assert loaded.entry.path == compiled.entry.path
    assert loaded.cubin == compiled.cubin and loaded.cubin is loaded.cubin
    assert loaded.meta == compiled.meta and loaded.ptxas_report == compiled.ptxas_report
    assert loaded.runtime_params == compiled.runtime_params == [0, 1, 2]
    assert dict(loaded.artifacts) == compiled.artifacts
    with pytest.raises(ct.TileError, match=r"no MLIR module: read artifacts\['<stage>'\] "
                                           r"\(stages: frontend, tile, layout, pipeline, gpu, llvm, ptx, "
                                           r"cubin\), or set TILEIR_CACHE=0"):
        loaded.ir()


def test_memory_is_in_front_of_the_disk(tmp_path, cache):
    kernel = fresh_kernel(tmp_path, "memo")
    first = kernel.compile(SCALE_ARGS, target="sm_90a", cache=cache)
    cache.clear()
    assert kernel.compile(SCALE_ARGS, target="sm_90a", cache=cache) is first
    assert cache.entries() == []
    other = Cache(tmp_path / "other")           # compiling into another cache fills it
    assert kernel.compile(SCALE_ARGS, target="sm_90a", cache=other).entry.path.parent == \
        other.root


def test_the_cache_knobs_are_read_when_used(tmp_path, monkeypatch):
    kernel = fresh_kernel(tmp_path, "knobs")
    monkeypatch.delenv("TILEIR_CACHE", raising=False)
    monkeypatch.setenv("TILEIR_CACHE_DIR", str(tmp_path / "from-knob"))
    ck = kernel.compile(SCALE_ARGS, target="sm_90a")
    assert ck.entry.path.parent == tmp_path / "from-knob"
    monkeypatch.setenv("TILEIR_CACHE", "0")
    monkeypatch.setenv("TILEIR_CACHE_DIR", str(tmp_path / "unused"))
    off = kernel.compile(SCALE_ARGS, target="sm_80")
    assert off.entry.path is None and off.module is not None
    assert off.cubin.startswith(b"\x7fELF") and not (tmp_path / "unused").exists()


def test_a_damaged_cubin_is_caught_at_compile_and_compiled_again(tmp_path, cache):
    """Checked when the entry is read (not at launch); a host that can compile
    replaces it (test_cache.py has the other faults)."""
    path = fresh_kernel(tmp_path, "good").compile(SCALE_ARGS, target="sm_90a",
                                                  cache=cache).entry.path
    good = (path / "kernel.cubin").read_bytes()
    cubin = bytearray(good)
    cubin[-1] ^= 0xFF
    (path / "kernel.cubin").write_bytes(bytes(cubin))
    with pytest.raises(CacheCorruptError, match="'kernel.cubin' does not match its manifest"):
        cache.get(cache.entries()[0].key).cubin
    with pytest.warns(ct.TileCacheWarning, match="is damaged"):
        ck = fresh_kernel(tmp_path, "damaged").compile(SCALE_ARGS, target="sm_90a",
                                                       cache=cache)
    assert ck.cubin == good and not ck.loaded_from_cache


def test_unknown_targets_are_refused_by_name(tmp_path, cache):
    with pytest.raises(ct.TileValueError, match="unknown target 'sm_75'; tileir compiles for "
                                                "sm_80, sm_90a"):
        fresh_kernel(tmp_path, "target").compile(SCALE_ARGS, target="sm_75", cache=cache)


# ---------------------------------------------------------------------------
# Argument specs
# ---------------------------------------------------------------------------
def specialize(text: str) -> list[tuple[str, object]]:
    """`text` classified as for a GPU target, its literals taken as Constant values."""
    return [(f"p{i}", classify_arg("k", f"p{i}", ct.Constant[type(v)]
                                   if isinstance(v, (bool, int, float)) else None, v, gpu=True))
            for i, v in enumerate(parse_arg_specs(text))]


@pytest.mark.parametrize("text, canonical", [
    ("f32[1],f32[1],f32[1],1024", "f32[1],f32[1],f32[1],1024"),
    (" bfloat16[2] , bf16[2]!u, 1024 ", "bf16[2],bf16[2]!u,1024"),
    ("u8[3],bool[1],i64,f16,True,0.5,-3", "u8[3],bool[1],i64,f16,True,0.5,-3"),
    ("float64[0],int32,inf", "f64[0],i32,inf"),
    ("bf16[2]!L,f32[1]!Lu,f32[1]!uL", "bf16[2]!L,f32[1]!uL,f32[1]!uL"),
])
def test_arg_specs_round_trip_through_the_specialization(text, canonical):
    params = specialize(text)
    assert format_arg_specs(params) == canonical
    assert specialize(canonical) == params


def test_arg_specs_stand_for_the_arrays_and_scalars_they_describe():
    parsed = parse_arg_specs("f32[2],bf16[1]!u,i64,8192,2.5,True")
    assert parsed[:3] == [ArraySpec(ct.float32, 2, True), ArraySpec(ct.bfloat16, 1, False),
                          ScalarParam(ct.int64)]
    assert [(type(v), v) for v in parsed[3:]] == [(int, 8192), (float, 2.5), (bool, True)]
    params = vector_add.classify([*parse_arg_specs("f32[1],f32[1]!u,f32[1]!L"), 1024], gpu=True)
    assert [k for _, k in params] == [ArrayParam(ct.float32, 1, True),
                                      ArrayParam(ct.float32, 1, False),
                                      ArrayParam(ct.float32, 1, True, large=True), 1024]
    # A literal for a runtime scalar is typed as launch() types the value.
    assert [classify_arg("k", "n", None, v, gpu=True) for v in parse_arg_specs(
        "8192,3000000000,0.5,False")] == [ScalarParam(ct.int32), ScalarParam(ct.int64),
                                          ScalarParam(ct.float32), ScalarParam(ct.bool_)]
    # Without a target nothing is aligned: the interpreter's variants are shared.
    assert vector_add.classify(parse_arg_specs("f32[1],f32[1],f32[1],64"))[0][1] == \
        ArrayParam(ct.float32, 1, False)


@pytest.mark.parametrize("text, message, column", [
    ("f32[1],bf17[1]", "argument spec 2: unknown dtype 'bf17'; dtypes are bool, i8, i16, i32, "
                       "i64, u8, u16, u32, u64, f16, bf16, f32, f64", 7),
    ("f32[1],,1", "argument spec 2: empty (two commas in a row?)", 7),
    ("f32[1], TILE", "argument spec 2: 'TILE' is not one: write dtype[ndim] for an array", 8),
    ("f32[-1]", "argument spec 1: 'f32[-1]' is not one", 0),
    ("f32[1]!a", "argument spec 1: unknown array flags '!a': write !u (not aligned), !L "
                 "(many times the L2 cache) or both (!uL)", 0),
    ("f32[1]!uu", "argument spec 1: unknown array flags '!uu'", 0),
    ("f32[1]!", "argument spec 1: unknown array flags '!'", 0),
    ("'x'", "argument spec 1: ''x'' is not one", 0),
])
def test_bad_arg_specs_point_at_the_argument(text, message, column):
    with pytest.raises(ArgSpecError) as info:
        parse_arg_specs(text)
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"error: {message}")
    assert lines[1:] == [f"    {text}", f"    {' ' * column}^"]
    assert isinstance(info.value, ct.TileValueError)


@ct.kernel
def tuple_spec(x, t: tuple[int, tuple[ct.Array, ct.Array], ct.Constant[int]], u):
    pass


def test_tuple_args_have_specs():
    """A tuple parameter's spec is its items' specs in parentheses, separated by ';'
    (nested too); a Constant item is its value."""
    from tileir.specialization import TupleParam
    text = "f32[1],(i32;(f32[1];bf16[2]!u);8),()"
    params = tuple_spec.classify(parse_arg_specs(text), gpu=True)
    assert params[1][1] == TupleParam((ScalarParam(ct.int32), TupleParam(
        (ArrayParam(ct.float32, 1, True), ArrayParam(ct.bfloat16, 2, False))), 8))
    assert params[2][1] == TupleParam(())
    assert format_arg_specs(params) == text
    assert tuple_spec.classify(parse_arg_specs(format_arg_specs(params)), gpu=True) == params
    with pytest.raises(ArgSpecError, match=r"argument spec 2: '\(i32;\(f32\[1\]\)': a '\(' or "
                       r"'\[' without its closing one"):
        parse_arg_specs("f32[1],(i32;(f32[1])")


def test_no_args_is_an_empty_spec():
    assert parse_arg_specs("") == [] and format_arg_specs([]) == ""


# ---------------------------------------------------------------------------
# tile-compile
# ---------------------------------------------------------------------------
def tile_compile(*argv: str, env: dict[str, str] | None = None):
    """tile-compile in a subprocess, its compiler fingerprint pinned like the tests'."""
    code = PIN + "import sys\nfrom tileir.tools.aot import main\nsys.exit(main(sys.argv[1:]))\n"
    return python(code, env, *argv)


# A warm tile-compile: one interpreter imports it (pinned, as `tile_compile`'s does) and
# forks a child a run, which takes the run's argv, working directory, environment and
# files for stdout and stderr and exits with main's status, as `python -c` would; the
# parent, single-threaded and never running main, is the state right after the imports
# (tools/tile_opt_server.py forks tile-opt alike).  ~0.4 s of CPU a run less
WARM = PIN + textwrap.dedent("""
    import json, os, sys, traceback
    from tileir.tools.aot import main
    replies = os.fdopen(os.dup(1), "w")
    for line in sys.stdin:
        run = json.loads(line)
        sys.stdout.flush(); sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            for fd, path in ((1, run["stdout"]), (2, run["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            os.chdir(run["cwd"])
            os.environ.clear()
            os.environ.update(run["env"])
            sys.argv = ["-c", *run["argv"]]
            try:
                code = main(run["argv"])
            except SystemExit as e:
                code = e.code
            except BaseException:
                traceback.print_exc()
                code = 1
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(code or 0)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), file=replies, flush=True)
""")


@pytest.fixture(scope="module")
def warm_tile_compile(tmp_path_factory):
    """`tile_compile` through a warm interpreter (WARM): the same result (returncode,
    stdout, stderr) for a fraction of the start-up.  (The parent has not imported MLIR,
    1 thread: a child that compiles imports and starts it as a fresh process does.)"""
    proc = subprocess.Popen([sys.executable, "-c", WARM], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    folder = tmp_path_factory.mktemp("warm-tile-compile")

    def run(*argv: str, env: dict[str, str] | None = None):
        out, err = folder / "stdout", folder / "stderr"
        proc.stdin.write(json.dumps({"argv": list(argv), "cwd": os.getcwd(),
                                     "env": {**os.environ, **(env or {})},
                                     "stdout": str(out), "stderr": str(err)}) + "\n")
        proc.stdin.flush()
        status = proc.stdout.readline()
        assert status, "the warm tile-compile died"
        return subprocess.CompletedProcess(["tile-compile", *argv], int(status),
                                           out.read_text(), err.read_text())

    yield run
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def parse_report(stdout: str) -> list[dict[str, str]]:
    """The entry blocks tile-compile prints."""
    lines = stdout.splitlines()
    blocks = []
    for head, key, path in zip(lines[0:-1:3], lines[1:-1:3], lines[2:-1:3]):
        name, target, status, resources = re.fullmatch(
            r"(\w+)  (\w+)  (compiled|cached)  (.*)  [\d.]+ (?:B|KiB|MiB)", head).groups()
        blocks.append({"kernel": name, "target": target, "status": status,
                       "resources": resources, "key": key.split()[1], "path": path.split()[1]})
    return blocks


def test_tile_compile_fills_the_cache_for_each_target(cache, pinned, warm_tile_compile):
    argv = ("tileir.examples.vector_add:vector_add", "--args", SPECS[vector_add],
            "--target", "sm_90a", "--target", "sm_80", "--cache-dir", str(cache.root))
    out = warm_tile_compile(*argv)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    blocks = parse_report(out.stdout)
    assert out.stdout.splitlines()[-1] == f"2 entries in {cache.root}"
    assert [(b["kernel"], b["target"], b["status"]) for b in blocks] == [
        ("vector_add", "sm_90a", "compiled"), ("vector_add", "sm_80", "compiled")]
    for block in blocks:
        entry = cache.get(block["key"])
        assert str(entry.path) == block["path"] and entry.target == block["target"]
        assert sorted(entry.names) == ARTIFACT_FILES and entry.cubin.startswith(b"\x7fELF")
        assert block["resources"] == ptxas_resources(entry.text("ptxas.log"))
        assert re.fullmatch(r"\d+ registers, no spills", block["resources"])
        # ... and it is the entry that Kernel.compile looks up.
        params = vector_add.classify(parse_arg_specs(SPECS[vector_add]), gpu=True)
        assert block["key"] == cache_key(vector_add, params, block["target"])
    again = warm_tile_compile(*argv)
    assert [(b["status"], b["key"]) for b in parse_report(again.stdout)] == \
        [("cached", b["key"]) for b in blocks]


def test_tile_compile_loads_kernels_from_files(tmp_path, cache):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "shared.py").write_text("BLOCK = 256\n")
    (tmp_path / "kernels" / "scale.py").write_text("from shared import BLOCK\n" + KERNEL_SOURCE)
    out = tile_compile(str(tmp_path / "kernels" / "scale.py") + ":scale", "--args",
                       "f32[1],f32[1]!u,f32,256", "--cache-dir", str(cache.root))
    assert out.returncode == 0, out.stderr
    (block,) = parse_report(out.stdout)
    assert (block["kernel"], block["target"]) == ("scale", "sm_90a")        # the default
    meta = cache.get(block["key"]).meta
    assert [p.get("aligned") for p in meta["params"]] == [True, False, None]


BROKEN = '''
import tileir as ct


@ct.kernel
def broken(a, TILE: ct.Constant[int]):
    x = ct.load(a, index=(ct.bid(0),), shape=(TILE,))
    ct.store(a, index=(ct.bid(0),), tile=x + undefined_name)


def helper():
    pass
'''


@pytest.mark.parametrize("argv, status, stderr", [
    (["tileir.examples.vector_add:vector_add", "--args", "f32[1],bf17[1]"], 2,
     "tile-compile: error: argument spec 2: unknown dtype 'bf17'; dtypes are bool, i8, i16, "
     "i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8E4M3FN, f8E5M2, f4E2M1FN, f8E8M0FNU (or "
     "their long names, e.g. float32)\n"
     "    f32[1],bf17[1]\n"
     "           ^\n"),
    (["vector_add", "--args", "f32[1]"], 2,
     "tile-compile: error: KERNEL must be MODULE:NAME (e.g. tileir.examples.softmax:softmax or "
     "path/to/kernels.py:softmax), got 'vector_add'\n"),
    (["tileir.examples.vector_add:vadd", "--args", "f32[1]"], 1,
     "tile-compile: error: module 'tileir.examples.vector_add' has no kernel 'vadd'; its "
     "kernels: vector_add\n"),
    (["tileir.examples.vector_add:run", "--args", "f32[1]"], 1,
     "tile-compile: error: 'run' in module 'tileir.examples.vector_add' is a function, not a "
     "@tileir.kernel; its kernels: vector_add\n"),
    (["tileir.examples.nope:k", "--args", "f32[1]"], 1,
     "tile-compile: error: cannot import module 'tileir.examples.nope': No module named "
     "'tileir.examples.nope'; name a module on sys.path, or a .py file by its path\n"),
    (["{tmp}/missing.py:k", "--args", "f32[1]"], 1,
     "tile-compile: error: cannot import '{tmp}/missing.py': no such file\n"),
    (["{tmp}/syntax.py:k", "--args", "f32[1]"], 1,
     "{tmp}/syntax.py:2:7: error: syntax error: invalid syntax\n"
     "    def k(:\n"
     "          ^\n"),
    (["{tmp}/needs.py:k", "--args", "f32[1]"], 1,
     "tile-compile: error: importing '{tmp}/needs.py' raised ModuleNotFoundError: No module "
     "named 'no_such_dependency'\n"),
    (["{tmp}/broken.py:broken", "--args", "f32[1],64"], 1,
     "{tmp}/broken.py:8:46: error: name 'undefined_name' is not defined\n"
     "        ct.store(a, index=(ct.bid(0),), tile=x + undefined_name)\n"
     "                                                 ^\n"),
    # (in --full, the next two: their messages are the launch's, which test_launch checks
    # in-process, and the target's case below keeps a TileError reaching tile-compile's
    # error line; each case is a fresh Python, ~0.5 s of CPU)
    pytest.param(["tileir.examples.vector_add:vector_add", "--args", "f32[1],f32[1]"], 1,
                 "tile-compile: error: kernel 'vector_add' takes 4 arguments (a, b, c, TILE), "
                 "got 2\n", marks=pytest.mark.slow),
    pytest.param(["tileir.examples.vector_add:vector_add", "--args", "f32[1],f32[1],f32[1],1.5"],
                 1, "tile-compile: error: argument 'TILE' of kernel 'vector_add' is "
                 "Constant[int] but got float 1.5\n", marks=pytest.mark.slow),
    (["tileir.examples.vector_add:vector_add", "--args", SPECS[vector_add], "--target",
      "sm_75"], 1,
     "tile-compile: error: unknown target 'sm_75'; tileir compiles for sm_80, sm_90a\n"),
])
def test_tile_compile_errors_are_diagnostics(tmp_path, cache, argv, status, stderr,
                                            warm_tile_compile):
    (tmp_path / "syntax.py").write_text("import tileir as ct\ndef k(:\n    pass\n")
    (tmp_path / "needs.py").write_text("import tileir as ct\nimport no_such_dependency\n")
    (tmp_path / "broken.py").write_text(BROKEN)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    out = warm_tile_compile(*argv, "--cache-dir", str(cache.root))
    assert (out.returncode, out.stderr) == (status, stderr.replace("{tmp}", str(tmp_path)))
    assert out.stdout == "" and cache.entries() == []


def test_the_warm_tile_compile_exits_and_prints_as_a_fresh_one(tmp_path, cache,
                                                              warm_tile_compile):
    """What the tests above see through WARM is what a fresh interpreter gives: a
    malformed command line (argparse's exit, 2) and an error main returns (1), in the
    test's working directory and environment."""
    (tmp_path / "syntax.py").write_text("import tileir as ct\ndef k(:\n    pass\n")
    for argv in (["vector_add", "--args", "f32[1]"],
                 [f"{tmp_path}/syntax.py:k", "--args", "f32[1]", "--target", "sm_75"]):
        argv += ["--cache-dir", str(cache.root)]
        fresh, warm = tile_compile(*argv), warm_tile_compile(*argv)
        assert (warm.returncode, warm.stdout, warm.stderr) == \
            (fresh.returncode, fresh.stdout, fresh.stderr)
        assert fresh.returncode in (1, 2) and fresh.stderr


def test_tile_compile_refuses_a_disabled_cache(cache, warm_tile_compile):
    out = warm_tile_compile("tileir.examples.vector_add:vector_add", "--args",
                            SPECS[vector_add], "--cache-dir", str(cache.root),
                            env={"TILEIR_CACHE": "0"})
    assert (out.returncode, out.stderr) == (1, "tile-compile: error: the compile cache is "
                                               "disabled (TILEIR_CACHE=0), so nothing would be "
                                               "stored; unset TILEIR_CACHE to fill it\n")


def test_tile_compile_is_the_installed_command_and_documents_the_syntax():
    tomllib = pytest.importorskip("tomllib")          # Python 3.11+
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["tile-compile"] == "tileir.tools.aot:main"
    out = subprocess.run([sys.executable, "-m", "tileir.tools.aot", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for syntax in ("bf16[2]", "f32[1]!u", "i64", "Constant[...]", "MODULE:NAME", "--cache-dir"):
        assert syntax in out.stdout


@pytest.mark.parametrize("report, resources", [
    ("ptxas info    : Function properties for k\n"
     "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
     "ptxas info    : Used 40 registers, used 1 barriers", "40 registers, no spills"),
    ("    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
     "ptxas info    : Used 255 registers", "255 registers, spills: 12 B stored, 16 B loaded"),
    (None, "no ptxas report"),
])
def test_ptxas_resources(report, resources):
    assert ptxas_resources(report) == resources


def test_spill_bytes_sums_every_function_and_refuses_a_report_without_counts():
    report = ("ptxas info    : Function properties for a\n"
              "    0 bytes stack frame, 780 bytes spill stores, 812 bytes spill loads\n"
              "ptxas info    : Function properties for b\n"
              "    0 bytes stack frame, 0 bytes spill stores, 4 bytes spill loads\n")
    assert spill_bytes(report) == (780, 816)       # '780 bytes' is not '0 bytes'
    with pytest.raises(TileError, match="no spill counts"):
        spill_bytes("ptxas info    : Used 40 registers")


# ---------------------------------------------------------------------------
# GPU: a cubin compiled here runs where MLIR is absent
# ---------------------------------------------------------------------------
@pytest.mark.gpu
def test_a_cached_kernel_launches_without_mlir(cache, pinned):
    torch = pytest.importorskip("torch")
    vector_add.compile(parse_arg_specs(SPECS[vector_add]), target=device_target(torch),
                       cache=cache)
    code = NO_MLIR + PIN + textwrap.dedent("""
        import tileir as ct
        from tileir.runtime import driver
        driver.has_gpu()     # cuda.bindings set up before torch (conftest.py says why)
        import torch
        from tileir.examples.vector_add import vector_add
        n = 10_007
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        c = torch.full((n,), float("nan"), device="cuda")
        ct.launch(None, (ct.cdiv(n, 1024),), vector_add, (a, b, c, 1024))
        torch.cuda.synchronize()
        print(torch.equal(c, a + b), [m for m in sys.modules if m.startswith("mlir.")])
    """)
    out = python(code, {"TILEIR_CACHE_DIR": str(cache.root)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "[]"]


def device_target(torch) -> str:
    return "sm_90a" if torch.cuda.get_device_capability()[0] == 9 else "sm_80"
