"""CPU tests of the GPU backend: every example but matmul compiled to cubins, SASS checked.

Each example (vector_add, softmax, rmsnorm, layernorm, transpose) is compiled
ahead of time with `ArraySpec` arguments for sm_80 and sm_90a, in f32, f16 and
bf16, with aligned and unaligned arrays: 60 variants, each compiled and
disassembled once a run, when a test first asks for it (the `compiled` fixture),
into the run's own compile cache (new each run, so every run tests this tree's
compiler) and SASS kept by the cubin's hash: three tests read each variant, on
whichever xdist worker they run.  ptxas and cuobjdump come from the test extra
(pip install -e '.[test]'); without them the tests that need them skip and say why.
No GPU is needed.  The last tests read the backend's imports: each stage
(layout, pipeline, gpu, target) imports earlier stages only, and no modules in a circle.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import sass_text
from mlir import ir

import tileir as ct
from tileir.backend.target.toolchain import TARGETS, find_cuda_tool, find_ptxas
from tileir.dialect import TileIRError
from tileir.examples import layernorm, matmul, rmsnorm, softmax, transpose, vector_add
from tileir.passes import STAGES

DTYPES = ("float32", "float16", "bfloat16")
# Row kernels at the benchmarks' hidden size.
ROW = 8192


def _args(name: str, dtype: str, aligned: bool) -> tuple:
    a = lambda ndim: ct.ArraySpec(dtype, ndim, aligned=aligned)  # noqa: E731
    return {
        "vector_add": (a(1), a(1), a(1), 1024),
        "softmax": (a(2), a(2), ROW),
        "rmsnorm": (a(2), a(1), a(2), 1e-6, ROW),
        "layernorm": (a(2), a(1), a(1), a(2), 1e-5, ROW),
        "transpose": (a(2), a(2), 64, 32),
    }[name]


EXAMPLES = {k.name: k for k in (vector_add.vector_add, softmax.softmax, rmsnorm.rmsnorm,
                                layernorm.layernorm, transpose.transpose)}


@dataclasses.dataclass(frozen=True)
class Variant:
    example: str
    target: str
    dtype: str
    aligned: bool

    def __str__(self) -> str:
        alignment = "aligned" if self.aligned else "unaligned"
        return f"{self.example}-{self.target}-{self.dtype}-{alignment}"


VARIANTS = [Variant(e, t, d, a) for e in EXAMPLES for t in TARGETS for d in DTYPES
            for a in (True, False)]


def _in_fast_tier(v: Variant) -> bool:
    """5 of the 60 variants run in the fast tier (the rest: `tile-check --full`; each
    is a compile, ptxas and nvdisasm, ~0.5-1 s of CPU): each example once, the first
    two on sm_80 and the other three on sm_90a, the dtype and the alignment turning
    with the example and the target, so that the 5 hold each example, each dtype and
    every pair of (target, alignment).  The 10 that ran until 2026-11-29 (each example
    on both targets) are this and the other target's case of each example: its
    target's paths (each target's vector widths, aligned and not) are the other
    examples' here; `--full` runs every combination."""
    e, t = list(EXAMPLES).index(v.example), TARGETS.index(v.target)
    return (t == (e >= 2) and v.dtype == DTYPES[(e + t) % 3]
            and v.aligned == ((e + t) % 2 == 0))


_FAST = [v for v in VARIANTS if _in_fast_tier(v)]
for _pair in (lambda v: (v.target, v.aligned), lambda v: v.example, lambda v: v.dtype):
    assert {_pair(v) for v in _FAST} == {_pair(v) for v in VARIANTS}, \
        "the fast tier lost a combination"
TIERED_VARIANTS = [v if _in_fast_tier(v) else pytest.param(v, marks=pytest.mark.slow)
                   for v in VARIANTS]


@dataclasses.dataclass(frozen=True)
class Compiled:
    kernel: ct.CompiledKernel
    ptxas_report: str
    sass: str


# --------------------------------------------------------------------------
# Tools and compiling
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cuobjdump() -> str:
    try:
        find_ptxas()
    except TileIRError as e:
        pytest.skip(f"needs ptxas: {e.diagnostics[0].message}")
    path = find_cuda_tool("cuobjdump")
    if path is None:
        pytest.skip("needs cuobjdump: pip install -e '.[test]' (nvidia-cuda-cuobjdump), or "
                    "put a CUDA toolkit's bin/ on PATH")
    return path


class _Variants(dict):
    """Variant -> Compiled, each made on first use: the setup of a test pays for its
    own variant only, not for all 60 at once (disassembling is most of it: nvdisasm,
    which cuobjdump runs, takes about 0.3 s of CPU per cubin however small)."""

    def __init__(self, cuobjdump: str, session_dir: Path):
        super().__init__()
        self.cuobjdump, self.session_dir = cuobjdump, session_dir

    def __missing__(self, v: Variant) -> Compiled:
        ck, report = _compile(v)
        sass = sass_text(ck.cubin)          # (disassembled once a run: conftest)
        self[v] = Compiled(ck, report, sass)
        return self[v]


@pytest.fixture(scope="module")
def _variants(cuobjdump, session_dir) -> _Variants:
    return _Variants(cuobjdump, session_dir)


@pytest.fixture
def compiled(_variants, shared_compile_cache) -> _Variants:
    """The variants, compiled into the run's shared compile cache (another worker's
    compile of a variant is loaded, not repeated)."""
    return _variants


def _compile(v: Variant) -> tuple[ct.CompiledKernel, str]:
    # A fresh Kernel (no in-memory specializations): compiled here, or loaded from the
    # run's cache where a test on another worker compiled it.
    kernel = ct.kernel(EXAMPLES[v.example].__wrapped__)
    ck = kernel.compile(_args(v.example, v.dtype, v.aligned), target=v.target)
    return ck, ck.ptxas_report


def _sass(cuobjdump: str, cubin: bytes, name: str) -> str:
    """`cuobjdump -sass` of `cubin`, as conftest.sass_text gives it (once a run)."""
    return sass_text(cubin)


def _opcodes(sass: str, pattern: str) -> list[str]:
    return re.findall(rf"\b{pattern}\b", sass)


# --------------------------------------------------------------------------
# Every variant
# --------------------------------------------------------------------------
@pytest.mark.parametrize("v", TIERED_VARIANTS, ids=str)
def test_no_local_memory_spills(compiled, v: Variant):
    c = compiled[v]
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", c.ptxas_report)
    assert spills == [("0", "0")], f"{v}: ptxas reports spills:\n{c.ptxas_report}"
    local = _opcodes(c.sass, r"(?:LDL|STL)(?:\.\w+)*")
    assert not local, f"{v}: local-memory accesses in the SASS: {sorted(set(local))}"


@pytest.mark.parametrize("v", TIERED_VARIANTS, ids=str)
def test_global_accesses_are_16_bytes_only_when_aligned(compiled, v: Variant):
    sass = compiled[v].sass
    wide = {op: _opcodes(sass, rf"{op}\.E\.128") for op in ("LDG", "STG")}
    if v.aligned:
        assert wide["LDG"] and wide["STG"], \
            f"{v}: aligned arrays must get 16-byte loads and stores; found {wide}"
    else:
        # An unaligned base may not be 16-byte (or 8-byte) aligned: any vector
        # access could fault; the scalar path is all there is.
        vector = _opcodes(sass, r"(?:LDG|STG)\.E\.(?:64|128)")
        assert not vector, f"{v}: vector global accesses on unaligned arrays: {vector}"
        assert _opcodes(sass, "LDG") and _opcodes(sass, "STG"), f"{v}: no global accesses"


@pytest.mark.parametrize("v", TIERED_VARIANTS, ids=str)
def test_every_stage_artifact(compiled, v: Variant):
    ck = compiled[v].kernel
    name, chip = ck.name, v.target
    assert list(ck.artifacts) == list(STAGES), f"{v}: artifacts {list(ck.artifacts)}"
    # Each IR artifact is the module after its stage, which it records.
    ir_markers = {
        "frontend": [f"func.func @{name}(", "tile.kernel"],
        "tile": [f"func.func @{name}(", 'tile.stage = "tile"'],
        "layout": ["#tile.blocked<", 'tile.stage = "layout"'],
        "gpu": [f"gpu.func @{name}(", 'tile.stage = "gpu"'],
        "llvm": [f"llvm.func @{name}(", f'chip = "{chip}"', 'tile.stage = "llvm"'],
    }
    for stage, markers in ir_markers.items():
        for marker in markers:
            assert marker in ck.artifacts[stage], f"{v}: the {stage} artifact lacks {marker!r}"
    ptx = ck.artifacts["ptx"]
    assert isinstance(ptx, str) and f".target {chip}\n" in ptx
    assert f".visible .entry {name}(" in ptx
    assert f".maxntid {ck.meta['num_threads']}, 1, 1" in ptx
    cubin = ck.artifacts["cubin"]
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF" and cubin == ck.cubin
    assert ck.meta["name"] == name and ck.meta["target"] == chip


@pytest.mark.parametrize("target", TARGETS)
def test_large_arrays_get_the_l2_policy_and_ptxas_takes_it(cuobjdump, target):
    """RMSNorm with a large `x` and `y` and a small weight: every 16-byte load of x
    carries the policy, made once; the weight's loads do not; ptxas assembles it."""
    kernel = ct.kernel(rmsnorm.rmsnorm.__wrapped__)
    spec = lambda ndim, large: ct.ArraySpec("bfloat16", ndim, large=large)  # noqa: E731
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TILEIR_CACHE", "0")
        ck = kernel.compile((spec(2, True), spec(1, False), spec(2, True), 1e-6, ROW),
                            target=target)
    ptx = ck.artifacts["ptx"]
    threads = ck.meta["num_threads"]
    vectors = ROW // 8 // threads                     # 16-byte loads of a row per thread
    assert ptx.count("createpolicy.fractional.L2::evict_last.b64") == 1
    # the interior path loads x with the policy (the edge path, rare, plainly); the
    # weight's loads are plain on both paths
    assert ptx.count("ld.global.L2::cache_hint.v4.b32") == vectors
    assert ptx.count("ld.global.v4.b32") == 3 * vectors
    # the interior path stores y streaming; the edge path plainly
    assert ptx.count("st.global.cs.v4.b32") == vectors
    assert ck.cubin[:4] == b"\x7fELF"


def test_streaming_stores_of_a_large_array_write_what_plain_ones_do():
    from tileir.sim import simulate
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 1000)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal(1000).astype(ml_dtypes.bfloat16)
    kernel = ct.kernel(rmsnorm.rmsnorm.__wrapped__)
    outs = []
    for large in (True, False):
        spec = ct.ArraySpec("bfloat16", 2, large=large)
        with pytest.MonkeyPatch.context() as env:
            env.setenv("TILEIR_CACHE", "0")
            ck = kernel.compile((spec, ct.ArraySpec("bfloat16", 1), spec, 1e-6, 1024),
                                target="sm_90a", stage="gpu")
        assert ("st.global.cs.v4.b32" in ck.artifacts["gpu"]) is large
        y = np.full((3, 1000), np.nan, ml_dtypes.bfloat16)
        simulate(ck, (3,), (x, w, y, 1e-6, 1024))
        outs.append(y.astype(np.float32))
    assert not np.isnan(outs[0]).any()
    np.testing.assert_array_equal(outs[0], outs[1])


# --------------------------------------------------------------------------
# What the GPU stages refuse
# --------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_an_mma_no_tensor_core_fits_runs_on_the_fma_units(target, tmp_path):
    """M = 8 fits no tensor-core instruction: the product is computed by each thread
    from shared operands, in a loop over K (no HMMA/HGMMA, and still no local memory)."""
    kernel = ct.kernel(matmul.matmul.__wrapped__)
    args = (ct.ArraySpec("float16", 2), ct.ArraySpec("float16", 2), ct.ArraySpec("float32", 2),
            8, 64, 32)
    ck = kernel.compile(args, target=target)
    sass = _sass(find_cuda_tool("cuobjdump"), ck.cubin, "fma_mma")
    assert "HMMA" not in sass and "HGMMA" not in sass and "FFMA" in sass
    assert not _opcodes(sass, "LDL") and not _opcodes(sass, "STL")


# 6.5 s of CPU (90 arrays through every stage and ptxas): `tile-check --full` only
@pytest.mark.slow
def test_too_many_parameters_is_a_located_error_not_a_ptxas_failure(tmp_path):
    """90 three-d arrays (4320 bytes of parameters: 48 an array, its i64 strides
    aligned) build; 91 (4368 bytes, past ptxas' 4352 at PTX ISA 8.0) are refused by
    name, pointing at lists, before ptxas."""
    import importlib.util

    def kernel(n):
        path = tmp_path / f"many_{n}.py"
        names = ", ".join(f"a{i}" for i in range(n))
        body = "".join(f"    ct.store(a{i}, index=(0, 0, 0), tile=ct.load(a{i}, index=(0, 0, 0), "
                       f"shape=(1, 1, 4)) + 1.0)\n" for i in range(n))
        path.write_text(f"import tileir as ct\n\n\n@ct.kernel\ndef many({names}):\n{body}")
        spec = importlib.util.spec_from_file_location(f"many_{n}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.many, [ct.ArraySpec(ct.float32, 3)] * n, path

    k, args, _ = kernel(90)
    assert k.compile(args, target="sm_90a").cubin
    k, args, path = kernel(91)
    with pytest.raises(TileIRError, match=r"kernel 'many' takes 4368 bytes of parameters "
                                          r"\(91 arrays and 0 scalars\).*4352.*as a list") as e:
        k.compile(args, target="sm_80")
    assert f"{path.name}:5:1" in str(e.value)


@ct.kernel
def _batched_product(a, c):
    t = ct.load(a, index=(0, 0, 0), shape=(2, 16, 16))
    acc = ct.zeros((2, 16, 16), dtype=ct.float32)
    ct.store(c, index=(0, 0, 0), tile=ct.mma(t, t, acc))


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_a_product_of_several_batches_is_one_product_a_batch(target):
    """The frontend splits a 3-d product of 2 batches into two 2-d products (the
    tensor-core rules take one a block; a 3-d tile op is refused at the layout stage,
    test/Transforms/assign-layouts-invalid.mlir) and stacks the results."""
    from tileir.sim import simulate
    rng = np.random.default_rng()
    a = rng.standard_normal((2, 16, 16)).astype(np.float16)
    c = np.full((2, 16, 16), np.nan, np.float32)
    ck = _batched_product.compile((a, c), stage="gpu", target=target)
    simulate(ck, (1,), (a, c))
    want = a.astype(np.float64) @ a.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-2, atol=1e-2)


# --------------------------------------------------------------------------
# tile-opt --emit=cubin
# --------------------------------------------------------------------------
def test_tile_opt_refuses_to_write_a_cubin_to_a_terminal(tmp_path: Path, tile_opt_server):
    # through the warm tile-opt's client where there is one (conftest.tile_opt_server:
    # the run takes the client's stdout, the terminal, as a fresh tile-opt would)
    kernel = tmp_path / "k.mlir"
    kernel.write_text("func.func @k() attributes {tile.kernel} {\n  return\n}\n")
    if tile_opt_server is None:
        command, env = [sys.executable, "-m", "tileir.tools.tile_opt"], None
    else:
        from tileir.tools import tile_opt_server as warm
        command = [sys.executable, "-I", "-S", warm.__file__]
        env = {**os.environ, warm.SERVER_ENV: tile_opt_server}
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run([*command, str(kernel), "--emit=cubin"], stdout=terminal,
                              stderr=subprocess.PIPE, timeout=120, env=env)
    finally:
        os.close(terminal)
    os.set_blocking(controller, False)
    try:
        written = os.read(controller, 4096)
    except (BlockingIOError, OSError):      # nothing was written (EIO: the terminal closed)
        written = b""
    finally:
        os.close(controller)
    assert proc.returncode == 2, proc.stderr.decode()
    assert b"tile-opt: error: refusing to write a cubin to a terminal; give -o FILE or " \
           b"redirect stdout" in proc.stderr
    assert written == b""


def _schedule(kernel, args, target):
    """(num_warps, tile.occupancy or None) the layout stage chose for `kernel`."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TILEIR_CACHE", "0")
        module = ct.kernel(kernel.__wrapped__).compile(args, stage="layout",
                                                       target=target).module
    func = next(op.operation for op in module.body.operations
                if op.operation.name == "func.func")
    occ = func.attributes["tile.occupancy"] if "tile.occupancy" in func.attributes else None
    return (ir.IntegerAttr(func.attributes["tile.num_warps"]).value,
            None if occ is None else ir.IntegerAttr(occ).value)


@pytest.mark.parametrize("example, dtype, aligned, target, want", [
    # two chained block-wide reductions of 8192 bf16: half the 16 warps, 24 warps a SM
    ("layernorm", "bfloat16", True, "sm_90a", (8, 3)),
    ("softmax", "bfloat16", True, "sm_90a", (8, 3)),
    # what spilled under that register cap keeps the plain schedule
    ("layernorm", "float32", True, "sm_90a", (16, None)),
    ("layernorm", "bfloat16", True, "sm_80", (16, None)),
    ("softmax", "bfloat16", False, "sm_90a", (16, None)),
    # one reduction: the plain schedule
    ("rmsnorm", "bfloat16", True, "sm_90a", (16, None)),
])
def test_chained_reductions_get_more_smaller_blocks(example, dtype, aligned, target, want):
    assert _schedule(EXAMPLES[example], _args(example, dtype, aligned), target) == want


def test_warps_leave_each_thread_a_vector_of_the_largest_load():
    """RoPE's two 4 KB half rows: 8 warps (16-byte loads a thread), not the 16 its
    8.5 KB a block would ask; 64 heads (8 KB halves) keep 16."""
    from tileir.examples import llm_ops
    for heads, want in ((32, 8), (64, 16)):
        q = ct.ArraySpec("bfloat16", 3, aligned=True)
        c = ct.ArraySpec("float32", 2, aligned=True)
        assert _schedule(llm_ops.rope, (q, c, c, q, heads, 64), "sm_90a") == (want, None)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_a_reduction_right_after_another_needs_one_barrier(target):
    """Each block-wide reduction publishes its partials between barriers; the one that
    protects the buffer from the previous exchange's readers is left out when the
    partials go to other bytes in the same block.  LayerNorm (mean, then variance):
    2 barriers, not 3; a chunked log-sum-exp (max, then sum, in the loop): 3, not 4
    (the first exchange of a loop body keeps its barrier)."""
    from tileir.examples import llm_ops
    arr = lambda n, dt="bfloat16": ct.ArraySpec(dt, n, aligned=True)  # noqa: E731
    for kernel, args, want in (
            (layernorm.layernorm, (arr(2), arr(1), arr(1), arr(2), 1e-6, 8192), 2),
            (llm_ops.vocab_logsumexp, (arr(2), arr(1, "float32"), 8192), 3)):
        with pytest.MonkeyPatch.context() as env:
            env.setenv("TILEIR_CACHE", "0")
            ck = ct.kernel(kernel.__wrapped__).compile(args, target=target)
        ptx = ck.artifacts["ptx"]
        ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
        assert len(re.findall(r"\bbar(?:rier)?\.sync\b", ptx)) == want, kernel.name


# ---------------------------------------------------------------------------
# The backend's layering: one subpackage per stage, imports running one way
# ---------------------------------------------------------------------------
BACKEND_STAGES = ("layout", "pipeline", "gpu", "target")      # in pipeline order (README)


def _backend_imports() -> dict[str, set[str]]:
    """Each module of tileir.backend (dotted, "gpu.rules.ring") -> the backend modules it
    imports, at its top or inside a function alike (a late import breaks no circle)."""
    root = Path(ct.__file__).parent / "backend"
    files = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        files[".".join(("tileir", "backend") + parts)] = path

    def known(name: str) -> str | None:            # a module's name, or its package's
        while name not in files and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in files and name.startswith("tileir.backend.") else None

    graph = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                         for a in node.names]         # a module, or a name of one
            else:
                continue
            found |= {m for m in map(known, names) if m and m != module}
        graph[module.removeprefix("tileir.backend.")] = \
            {m.removeprefix("tileir.backend.") for m in found}
    return {m: deps for m, deps in graph.items() if m != "tileir.backend"}


def test_backend_stages_import_only_earlier_stages():
    """layout -> pipeline -> gpu -> target: a module may import its own stage or an
    earlier one, never a later one; every module sits in one stage's subpackage."""
    graph = _backend_imports()
    stage = {m: m.split(".")[0] for m in graph}
    assert {m for m, s in stage.items() if s not in BACKEND_STAGES} == set()
    later = sorted(f"{m} imports {d}" for m, deps in graph.items() for d in deps
                   if BACKEND_STAGES.index(stage[d]) > BACKEND_STAGES.index(stage[m]))
    assert later == [], "an earlier stage imports a later one:\n" + "\n".join(later)


def test_backend_modules_import_no_circle():
    graph = _backend_imports()
    done, path = set(), []

    def visit(m: str) -> list[str] | None:         # a circle through m, or None
        if m in path:
            return path[path.index(m):] + [m]
        if m in done:
            return None
        path.append(m)
        for d in sorted(graph[m]):
            circle = visit(d)
            if circle:
                return circle
        path.pop()
        done.add(m)
        return None

    for m in sorted(graph):
        circle = visit(m)
        assert circle is None, "backend modules import each other in a circle: " + \
            " -> ".join(circle)


def test_the_lowerings_constants_are_the_ops_arith_builds():
    """LoweringContext.const builds its `arith.constant` with `ir.Operation.create` (half
    the cost of the dialect's builder): the same op, type, value and location as
    `arith.ConstantOp` gives, for integers and floats, the default i32 among them."""
    from mlir import ir
    from mlir.dialects import arith
    from tileir.backend.gpu.context import LoweringContext
    from tileir.dialect import context

    def built(make) -> str:
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            make()
        return module.operation.get_asm(enable_debug_info=True)

    with context(), ir.Location.file("k.py", 7, 3):
        for value, t in [(5, None), (-1, ir.IntegerType.get_signless(64)),
                         (1, ir.IntegerType.get_signless(1)), (3, ir.F32Type.get()),
                         (2, ir.F16Type.get())]:
            want_t = t or ir.IntegerType.get_signless(32)
            attr = ir.IntegerAttr.get(want_t, value) if isinstance(want_t, ir.IntegerType) \
                else ir.FloatAttr.get(want_t, float(value))
            got = built(lambda: LoweringContext.const(value, t))
            assert got == built(lambda: arith.ConstantOp(want_t, attr))
            assert "arith.constant" in got and 'loc("k.py":7:3)' in got
