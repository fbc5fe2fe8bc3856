"""Fuzzing the frontend and the GPU stages with random kernels, checked against the interpreter.

    python test/fuzz/fuzz_kernels.py [--fuzz-n 1000] [--seed 0] [--jobs 2] [--out DIR]

Each case is the source of a small cuTile-style kernel: two (T0, T1) tiles (T1 from 1
to 128) loaded at a block's row of tiles from float32, float16, bfloat16,
float8_e4m3fn, float64 or int8 arrays, contiguous or views of wider rows that start
on 16 bytes (so the groups a thread loads are vectors of 1 to 16 elements), cast to
the case's compute dtype (f32, f16, bf16, f64, i8, i32, i64, u32), a random
expression over them (element-wise math, comparisons and `where`, reductions
broadcast back, scans, transposes, casts, a short loop; control flow: `break` and
`continue`, helpers that return early, nested functions, chained comparisons, blocks
that return before storing; arrays and slices chosen at run time by a conditional
expression, a helper, a runtime `if` or a loop swapping two), stored to a third array
(of the compute dtype, i32, f64, f32, f16, bf16 or e4m3), launched over a ragged
array.
About one case in six is made invalid on purpose (a tile dim that is not a power
of two, a tile of the wrong rank, an unknown function or a library's such as
`np.ones` or `math.exp`, in the kernel or in a helper, a dtype the array cannot
take).

A valid case runs in the interpreter (NumPy, the oracle), then is compiled for
sm_90a and sm_80 (to cubins: NVPTX and ptxas run) and run in the simulator
(tileir.sim: the cubin stage's IR, thread by thread), and with `--gpu` launched on
the GPU; the outputs must agree.  An invalid case must raise a tileir error that
names the kernel's source line or the argument.  A finding is
anything else: a mismatch, a crash, an error without a place, an error whose first
location is outside the case's file ("error outside the user's file").  Reproducers
(`finding-<n>.py`) go to --out.

`run(n, seed)` is what `test/python/test_fuzz.py` calls for the short run that
`tile-check --full` includes.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import random
import re
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

TARGETS = ("sm_90a", "sm_80")
SM_COUNTS = {"sm_90a": 132, "sm_80": 108}      # an H100 SXM, an A100
RTOL = ATOL = 2e-3            # tanh and exp run approximate instructions on the GPU


@dataclasses.dataclass
class Finding:
    seed: int
    source: str
    what: str


# ---------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------
def _expr(rng: random.Random, names: list[str], depth: int, kind: str = "float") -> str:
    """A random expression of the tiles' shape over `names`, all of the case's compute
    dtype: `kind` "float" (f32, f64), "float16" (f16, bf16: no transcendentals) or
    "int" (i8 to i64, u32).  Integer
    forms keep clear of undefined behaviour (divisors 1 to 7, shifts below 8,
    exponents below 4) and wrap as both sides do."""
    if depth <= 0 or rng.random() < 0.25:
        return rng.choice(names)
    a = _expr(rng, names, depth - 1, kind)
    b = _expr(rng, names, depth - 1, kind)
    common = [
        f"({a} + {b})", f"({a} - {b})", f"({a} * {b})",
        f"ct.maximum({a}, {b})", f"ct.minimum({a}, {b})", f"ct.where({a} > {b}, {a}, {b})",
        f"(ct.sum({a}, axis=1, keepdims=True) + {b})",
        f"(ct.max({a}, axis=0, keepdims=True) - {b})",
        f"ct.transpose(ct.transpose({a}))", f"ct.cumsum({a}, axis=1)",
    ]
    if kind == "int":
        forms = common + [
            f"({a} // (({b} & 7) | 1))", f"({a} % (({b} & 7) | 1))", f"({a} ** ({b} & 3))",
            f"({a} & {b})", f"({a} | {b})", f"({a} ^ {b})", f"({a} << ({b} & 7))",
            f"({a} >> ({b} & 7))", f"ct.abs({a})", f"(~{a})",
            f"ct.astype(ct.astype({a}, ct.int16), {a}.dtype)",
            f"ct.min({a}, axis=1, keepdims=True)",
        ]
    else:
        forms = common + [
            f"({a} / (ct.abs({b}) + 1.0))", f"(-{a})", f"({a} * 0.5 + 1.25)",
            f"ct.astype(ct.astype({a}, ct.bfloat16), {a}.dtype)",
        ]
        if kind == "float":      # 16-bit floats round approximate results differently
            forms += [f"ct.exp(ct.minimum({a}, 8.0))", f"ct.sqrt(ct.abs({a}))",
                      f"ct.tanh({a})", f"ct.sin({a})"]
    return rng.choice(forms)


def _control_flow(rng: random.Random, body: list[str], names: list[str], kind: str,
                  compute: str) -> list[str]:
    """Adds Python control flow to the kernel `body` (a name it defines joins `names`):
    a loop leaving early by `break`/`continue` on its index, a helper returning early on
    a run-time condition, a nested function, a chained comparison, a block that returns
    before its store.  Conditions are on integers (the loop index, the block id), so the
    interpreter and the GPU take the same paths.  Returns module-level helper lines."""
    helpers: list[str] = []
    # some names are (T0, 1) (a reduction kept its dim): a value that two paths assign
    # is broadcast to (T0, T1) on both, so the paths agree on its shape
    full = f"ct.zeros((T0, T1), dtype=ct.{compute}) + "
    if rng.random() < 0.25:          # a for loop with break and continue
        trips, stop, skip = rng.randint(1, 4), rng.randint(0, 4), rng.randint(0, 1)
        body += [f"    cf = ct.zeros((T0, T1), dtype=ct.{compute})",
                 f"    for it in range({trips}):",
                 f"        if it == {stop}:",
                 "            break",
                 f"        if it % 2 == {skip}:",
                 "            continue",
                 f"        cf = cf + {_expr(rng, names, 1, kind)}"]
        names.append("cf")
    if rng.random() < 0.25:          # a helper that returns early
        helpers += ["def pick(t, u, flag):",
                    "    if flag:",
                    f"        return t * 0 + {_expr(rng, ['t', 'u'], 1, kind)}",
                    "    return t",
                    "", ""]
        body.append(f"    pk = pick({full}{rng.choice(names)}, {full}{rng.choice(names)}, "
                    f"i % 2 == {rng.randint(0, 1)})")
        names.append("pk")
    if rng.random() < 0.2:           # a nested function closing over a tile
        body += ["    def nest(t):",
                 f"        return {_expr(rng, ['t', 'a'], 1, kind)}",
                 f"    nd = nest({rng.choice(names)})"]
        names.append("nd")
    if rng.random() < 0.2:           # a chained comparison of run-time scalars
        body += [f"    ch = {full}{rng.choice(names)}",
                 f"    if 0 <= i < {rng.randint(1, 3)}:",
                 f"        ch = {full}{_expr(rng, names, 1, kind)}"]
        names.append("ch")
    if rng.random() < 0.15:          # a block that ends before its store
        body += [f"    if i == {rng.randint(0, 2)}:", "        return"]
    return helpers


def _array_choices(rng: random.Random, body: list[str], names: list[str],
                   compute: str) -> list[str]:
    """Adds arrays chosen at run time (a name it defines joins `names`): by a
    conditional expression, by a helper returning one or the other, by a loop swapping
    two, and slices chosen so.  `rng` is the case's second generator, so that adding
    these left the cases of older seeds as they were.  Returns module-level helper
    lines."""
    helpers: list[str] = []
    load = ("ct.astype(ct.load({src}, index={index}, shape=(T0, T1), "
            f"padding_mode=ct.PaddingMode.ZERO), ct.{compute})")
    if rng.random() < 0.15:          # a conditional expression of two arrays
        body.append(f"    src = x if i % 2 == {rng.randint(0, 1)} else y")
        body.append("    ce = " + load.format(src="src", index="(i, 0)"))
        names.append("ce")
    if rng.random() < 0.15:          # a helper returning one array or the other
        helpers += ["def which(u, w, flag):",
                    "    if flag:",
                    "        return u",
                    "    return w",
                    "", ""]
        body.append("    wh = " + load.format(src=f"which(y, x, i < {rng.randint(0, 3)})",
                                              index="(i, 0)"))
        names.append("wh")
    if rng.random() < 0.15:          # two arrays swapped in a loop
        body += ["    p, q = x, y",
                 f"    for it in range({rng.randint(0, 3)}):",
                 "        p, q = q, p",
                 "    sw = " + load.format(src="p", index="(i, 0)")]
        names.append("sw")
    if rng.random() < 0.15:          # slices (from the block's first row) chosen
        body += ["    rs = x.slice(0, i * T0, x.shape[0])",
                 f"    if i % 3 == {rng.randint(0, 2)}:",
                 "        rs = y.slice(0, i * T0, y.shape[0])",
                 "    sl = " + load.format(src="rs", index="(0, 0)")]
        names.append("sl")
    return helpers


def _unknown_call(rng: random.Random, result: str, helpers: list[str]) -> tuple[str, list]:
    """The invalid case "name": `result` passed to a function kernels cannot call, an
    unknown one or, half the time, a library's (NumPy, math, random), in the kernel or
    in a helper of the case's file, whose error must name the case's line first (not
    NumPy's source).  Returns the call and the import lines it needs.  `rng` is the
    case's third generator, so the other draws stay as older seeds made them."""
    if rng.random() < 0.5:
        return f"ct.not_a_function({result})", []
    calls = [f"(np.ones((T0, T1)) + {result})", f"math.exp({result})",
             f"({result} + random.random())", f"np.zeros_like({result})", f"lib({result})"]
    call = rng.choice(calls)
    if call.startswith("lib("):
        helpers += ["def lib(t):", "    return t + np.full(t.shape, 2.0)", "", ""]
    return call, ["import math", "import random", "", "import numpy as np", ""]


# compute dtypes: (name, kind); float32 most often
COMPUTE = [("float32", "float")] * 4 + [
    ("float16", "float16"), ("bfloat16", "float16"), ("float64", "float"), ("int32", "int"),
    ("int8", "int"), ("int64", "int"), ("uint32", "int")]
# relative and absolute tolerance by compute dtype (else RTOL)
COMPUTE_TOL = {"float16": 5e-3, "bfloat16": 3e-2}
OUT_TOL = {"float16": 2e-2, "bfloat16": 2e-2, "float8_e4m3fn": 0.13}


def generate(seed: int) -> tuple[str, dict]:
    """(kernel module source, case parameters) for `seed`."""
    rng = random.Random(seed)
    t0, t1 = rng.choice([1, 2, 4, 8, 16]), rng.choice([1, 2, 4, 8, 16, 32, 64, 128])
    in_dtype = rng.choice(["float32"] * 3 + ["float16", "float64", "int8", "bfloat16",
                                             "float8_e4m3fn"])
    compute, kind = rng.choice(COMPUTE)
    invalid = rng.choice([None] * 5 + ["shape", "rank", "name", "dtype"])
    body = []
    names = ["a", "b"]
    for j in range(rng.randint(0, 3)):
        body.append(f"    v{j} = {_expr(rng, names, rng.randint(1, 3), kind)}")
        names.append(f"v{j}")
    if rng.random() < 0.3:
        body.append(f"    acc = ct.zeros((T0, T1), dtype=ct.{compute})")
        body.append(f"    for _ in range({rng.randint(1, 3)}):")
        body.append(f"        acc = acc + {_expr(rng, names, 1, kind)}")
        names.append("acc")
    helpers = _control_flow(rng, body, names, kind, compute)
    chosen = len(names)
    helpers += _array_choices(random.Random(seed ^ 0x5EED), body, names, compute)
    result = _expr(rng, names[:chosen], 2, kind)
    if len(names) > chosen:          # (the draws of older seeds stay as they were)
        result = f"({result} + {' + '.join(names[chosen:])})"
    load_shape = "(T0, T1)"
    if invalid == "rank":
        load_shape = "(T0, T1, 2)"
    imports = []
    if invalid == "name":
        result, imports = _unknown_call(random.Random(seed ^ 0x11B), result, helpers)
    lines = [
        *imports,
        "import tileir as ct",
        "",
        "",
        *helpers,
        "@ct.kernel",
        "def k(x, y, out, T0: ct.Constant[int], T1: ct.Constant[int]):",
        "    i = ct.bid(0)",
        f"    a = ct.astype(ct.load(x, index=(i, 0), shape={load_shape}, "
        f"padding_mode=ct.PaddingMode.ZERO), ct.{compute})",
        "    b = ct.astype(ct.load(y, index=(i, 0), shape=(T0, T1), "
        f"padding_mode=ct.PaddingMode.ZERO), ct.{compute})",
        *body,
        f"    ct.store(out, index=(i, 0), tile=ct.astype({result}, out.dtype))",
        "",
    ]
    if invalid == "shape":
        t0 = rng.choice([3, 5, 12])
    rows = rng.randint(1, 3) * t0 - rng.randint(0, t0 - 1)
    cols = rng.randint(1, t1)
    outs = [compute, "int32", "float64"] if kind == "int" else \
        ["float32"] * 3 + ["float16", "bfloat16", "float8_e4m3fn"]
    # the inputs: contiguous, or views whose rows start 16-byte aligned (the vector path)
    case = {"t0": t0, "t1": t1, "rows": rows, "cols": cols, "invalid": invalid,
            "in_dtype": in_dtype, "aligned_rows": rng.random() < 0.4, "compute": compute,
            "out_dtype": "complex64" if invalid == "dtype" else rng.choice(outs)}
    return "\n".join(lines), case


# ---------------------------------------------------------------------------
# Checking
# ---------------------------------------------------------------------------
def _load(source: str, workdir: Path, seed: int):
    path = workdir / f"case_{seed}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"fuzz_case_{seed}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k, path


def _first_file(error: Exception) -> str | None:
    """The file an error names first (its first diagnostic's location), if any."""
    from tileir.errors import file_line_col
    diagnostics = getattr(error, "diagnostics", None)
    where = file_line_col(diagnostics[0].location) if diagnostics else None
    return where[0] if where else None


def _outside(error: Exception, path: Path) -> str | None:
    """The finding "error outside the user's file": the error names another file
    first (a library's source or tileir's), where the case's file should be."""
    first = _first_file(error)
    if first is None or Path(first).resolve() == path.resolve():
        return None
    return f"error outside the user's file (first at {first}): {type(error).__name__}: {error}"


def _located(error: Exception, path: Path) -> bool:
    text = str(error)
    return re.search(rf"{re.escape(path.name)}:\d+:\d+: error:", text) is not None or \
        re.search(r"argument '\w+' of kernel 'k'", text) is not None


def check(seed: int, workdir: Path, gpu: bool = False) -> Finding | None:
    import tileir as ct
    from tileir.errors import TileIRError
    from tileir.kernel import hardware_grid
    from tileir.sim import simulate
    source, case = generate(seed)
    try:
        kernel, path = _load(source, workdir, seed)
    except Exception as e:                         # a generator bug, not tileir's
        return Finding(seed, source, f"the case does not import: {e!r}")
    rng = np.random.default_rng(seed)
    rows, cols, t0, t1 = case["rows"], case["cols"], case["t0"], case["t1"]
    x, y = (_input(rng, case) for _ in range(2))
    out_dtype = _np_dtype(case["out_dtype"])
    grid = (-(-rows // t0), 1, 1)
    args = lambda out: (x, y, out, t0, t1)  # noqa: E731
    ref = np.full((rows, cols), _poison(out_dtype), out_dtype)
    try:
        ct.launch(None, grid, kernel, args(ref))
    except (TileIRError, ct.TileError) as e:
        if _outside(e, path):
            return Finding(seed, source, f"interpreter: {_outside(e, path)}"[:2000])
        if case["invalid"] and _located(e, path):
            return None
        return Finding(seed, source, f"interpreter: {type(e).__name__}: {e}"[:2000])
    except Exception:
        return Finding(seed, source, "interpreter crashed:\n" + traceback.format_exc()[-2000:])
    if case["invalid"]:
        return Finding(seed, source, f"the invalid case ({case['invalid']}) ran")
    if gpu:
        import torch
        tx, ty = _to_torch(x), _to_torch(y)
        tout = _to_torch(np.full((rows, cols), _poison(out_dtype), out_dtype))
        try:
            ct.launch(None, grid, kernel, (tx, ty, tout, t0, t1))
            torch.cuda.synchronize()
        except Exception:
            return Finding(seed, source, "GPU launch failed:\n" + traceback.format_exc()[-2000:])
        mismatch = _mismatch(_from_torch(tout, out_dtype), ref, out_dtype, case["compute"])
        if mismatch:
            return Finding(seed, source, f"GPU: {mismatch} (case {case})")
    # sm_80 has no instruction that rounds to fp8: such a store is refused there by name
    for target in TARGETS if case["out_dtype"] != "float8_e4m3fn" else ("sm_90a",):
        got = np.full((rows, cols), _poison(out_dtype), out_dtype)
        try:
            # as a launch compiles it: for its grid on a GPU of that target (the grid's
            # rewrites: split blocks, rows dealt to clusters, small-grid warps)
            ck = kernel.compile(args(got), target=target, grid=grid,
                                sm_count=SM_COUNTS[target])
            simulate(ck, hardware_grid(ck.meta, grid), args(got))
        except (TileIRError, ct.TileError) as e:
            what = _outside(e, path) or f"{type(e).__name__}: {e}"
            return Finding(seed, source, f"{target}: {what}"[:2000])
        except Exception:
            return Finding(seed, source, f"{target} crashed:\n" + traceback.format_exc()[-2000:])
        mismatch = _mismatch(got, ref, out_dtype, case["compute"])
        if mismatch:
            return Finding(seed, source, f"{target}: simulator {mismatch} (case {case})")
    return None


def _np_dtype(name: str) -> np.dtype:
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, name)) if name in ("bfloat16", "float8_e4m3fn") \
        else np.dtype(name)


_BITS_ONLY = ("bfloat16", "float8_e4m3fn", "float8_e5m2")   # torch takes them as bits


def _to_torch(a: np.ndarray):
    """A CUDA tensor with `a`'s values (ml_dtypes arrays through their bits)."""
    import torch
    if a.dtype.name in _BITS_ONLY:
        bits = np.ascontiguousarray(a).view(np.int16 if a.itemsize == 2 else np.uint8)
        return torch.from_numpy(bits).cuda().view(getattr(torch, a.dtype.name))
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


def _from_torch(t, dtype: np.dtype) -> np.ndarray:
    import torch
    if dtype.name in _BITS_ONLY:
        bits = t.view(torch.int16 if dtype.itemsize == 2 else torch.uint8)
        return bits.cpu().numpy().view(dtype)
    return t.cpu().numpy()


def _input(rng: np.random.Generator, case: dict) -> np.ndarray:
    """A (rows, cols) input of the case's dtype; a view of wider rows (each starting on
    16 bytes) if the case says so."""
    rows, cols, dtype = case["rows"], case["cols"], _np_dtype(case["in_dtype"])
    width = cols
    if case["aligned_rows"]:
        per = 16 // dtype.itemsize
        width = -(-cols // per) * per + per
    data = rng.standard_normal((rows, width)) * (20 if dtype.kind == "i" else 1)
    return data.astype(dtype)[:, :cols]


def _poison(dtype: np.dtype):
    """What an output holds before the kernel writes it: NaN, or -3 (wrapped) for ints."""
    return np.nan if dtype.kind in "fc" else np.array(-3).astype(dtype)


def _mismatch(got: np.ndarray, ref: np.ndarray, dtype, compute: str) -> str | None:
    g, r = got.astype(np.float64), ref.astype(np.float64)
    if np.dtype(compute).kind in "iu" if compute != "bfloat16" else False:
        tol = 0.0                         # integer arithmetic: exact, whatever the output
    else:                                 # one rounding to the output: up to one of its ulps
        tol = max(OUT_TOL.get(dtype.name, RTOL), COMPUTE_TOL.get(compute, 0.0))
    if np.allclose(g, r, rtol=tol, atol=tol, equal_nan=True):
        return None
    bad = tuple(np.argwhere(~np.isclose(g, r, rtol=tol, atol=tol, equal_nan=True))[0])
    return f"{g[bad]} vs the interpreter's {r[bad]} at {bad}"


def _check_one(seed: int, gpu: bool = False) -> Finding | None:
    with tempfile.TemporaryDirectory(prefix="tileir-kfuzz-") as d:
        return check(seed, Path(d), gpu)


def _pooled(seeds: list[int], jobs: int, script: str | None = None,
            gen=None, gpu: bool = False) -> list[Finding | None]:
    """`check` over `seeds` in `jobs` child processes, each going through its share in
    order and reporting every case as it ends.  A compile that kills its process (an
    abort inside LLVM or MLIR) ends that child mid-share: the case it was on is a
    finding with the child's last words, and a new child takes the rest.  `script`
    and `gen`: another fuzzer's file (run with `--cases`) and generator
    (fuzz_gemm.py); this one's by default.  `gpu`: the children also launch on the
    GPU (each its own CUDA context).  A line on stdout every twentieth of the run
    says how far it got."""
    import threading
    script, gen = script or __file__, gen or generate
    shares = [seeds[j::jobs] for j in range(jobs)]
    results: dict[int, Finding | None] = {}
    progress = _Progress(len(seeds))

    def work(share: list[int]) -> None:
        while share:
            done, last_words = _run_child(share, results, script, gen, gpu, progress)
            share = share[done:]
            if share:                        # the child died on share[0]
                results[share[0]] = Finding(share[0], gen(share[0])[0],
                                            f"the process died ({last_words})")
                progress.tick(True)
                share = share[1:]

    threads = [threading.Thread(target=work, args=(share,)) for share in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results.get(s) for s in seeds]


class _Progress:
    """Cases done and findings so far, printed every twentieth of the run (a run cut
    short by a time limit still says how far it got)."""

    def __init__(self, total: int):
        import threading
        self.total, self.done, self.found = total, 0, 0
        self.every = max(1, total // 20)
        self.lock = threading.Lock()

    def tick(self, finding: bool) -> None:
        with self.lock:
            self.done += 1
            self.found += finding
            if self.done % self.every == 0 or self.done == self.total:
                print(f"  {self.done} of {self.total} cases, {self.found} findings",
                      flush=True)


def _run_child(share: list[int], results: dict, script: str, gen, gpu: bool,
               progress: _Progress) -> tuple[int, str]:
    """Runs `share` in one child process: (how many cases it finished, its last words)."""
    import json
    import subprocess
    proc = subprocess.Popen([sys.executable, script, "--cases", ",".join(map(str, share)),
                             *(["--gpu"] if gpu else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = 0
    for line in proc.stdout:
        if not line.startswith("CASE "):
            continue
        seed, what = json.loads(line[5:])
        results[seed] = None if what is None else Finding(seed, gen(seed)[0], what)
        progress.tick(what is not None)
        done += 1
    err = proc.stderr.read()
    proc.wait()
    return done, f"exit {proc.returncode}: " + " | ".join(err.strip().splitlines()[-3:])[:2000]


def run(n: int, seed: int = 0, jobs: int = 1, out: Path | None = None,
        gpu: bool = False) -> list[Finding]:
    seeds = [seed * 1_000_003 + i for i in range(n)]
    os.environ.setdefault("TILEIR_CACHE", "0")
    # in children, so that a compile that aborts is a finding
    results = _pooled(seeds, max(1, jobs), gpu=gpu)
    findings = [f for f in results if f is not None]
    write_findings(out, findings)
    return findings


def write_findings(out: Path | None, findings: list[Finding]) -> None:
    """Each finding as a reproducer `finding-<i>.py` in `out`: its source, what went
    wrong as comments."""
    if out is None or not findings:
        return
    out.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(findings):
        (out / f"finding-{i}.py").write_text(
            f"# seed {f.seed}\n" + "".join(f"# {line}\n" for line in f.what.splitlines())
            + f.source)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fuzz-n", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", type=Path, default=Path("fuzz-findings"))
    p.add_argument("--gpu", action="store_true",
                   help="also launch each valid kernel on the GPU (torch tensors)")
    p.add_argument("--cases", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cases is not None:               # _run_child's child: report each case
        return serve_cases(args.cases, lambda seed: _check_one(seed, args.gpu))
    findings = run(args.fuzz_n, args.seed, args.jobs, args.out, args.gpu)
    return report(findings, f"{args.fuzz_n} kernels, seed {args.seed}", args.out)


def serve_cases(cases: str, check_one) -> int:
    """A pool child (`--cases`): runs each seed and prints its outcome as it ends."""
    import json
    for seed in map(int, cases.split(",")):
        found = check_one(seed)
        print("CASE " + json.dumps([seed, None if found is None else found.what]), flush=True)
    return 0


def report(findings: list[Finding], what: str, out: Path) -> int:
    """Prints a run's summary and its first findings; the exit status."""
    print(f"{what}: {len(findings)} findings"
          + (f" (reproducers in {out})" if findings else ""))
    for f in findings[:20]:
        print(f"  [seed {f.seed}] {f.what.splitlines()[0][:200]}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
