"""Runs kernels written for NVIDIA's `cuda.tile` under cuTile itself or under tileir.

The kernel files beside this one (`kernels_*.py`) are written as a cuTile user writes
them: they `import cuda.tile as ct` and nothing of tileir.  Run under tileir, a file is
ported the way the README promises, by changing that one line to `import tileir as ct`
(the changed copy is written to a temporary folder, so errors name its lines, which are
the original's).  Each file's `cases(rng)` yields the launches to make: a name, the
kernel, the grid, the arguments (NumPy arrays and Python scalars), the indices of the
arguments the kernel writes, and a NumPy reference of those outputs.

    python test/parity/harness.py run --impl cuda.tile --out ct.npz   # needs cuTile + GPU
    python test/parity/harness.py run --impl tileir --out ti.npz      # GPU, else interpreter
    python test/parity/harness.py compare ct.npz ti.npz               # table; rc 1 on a mismatch
    python test/parity/harness.py merge ct.npz ct-rerun.npz --out all.npz   # later runs win

Inputs come from `--seed` (the same for both runs), outputs are poisoned before each
launch, and every output is checked against its reference in the run that made it.
`compare` then checks the two implementations against each other: integers and
booleans bit for bit, floats to the case's tolerance.  What a case prints (device
printf) is captured and compared too.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
IMPORT_CUTILE = "import cuda.tile as ct"
IMPORT_TILEIR = "import tileir as ct"
KEEP = "keep"          # a Case's `poison` that keeps the given values (initial state)


@dataclass
class Case:
    """One launch: `kernel` over `grid` with `args`; `outputs` index the arguments it
    writes, `reference(*args)` gives their expected values (a list, in that order)."""
    name: str
    kernel: Any
    grid: tuple[int, ...]
    args: list[Any]
    outputs: list[int]
    reference: Callable[..., list[np.ndarray]] | None
    rtol: float = 1e-5
    atol: float = 1e-6
    prints: bool = False            # compare what the launch prints
    poison: Any = None              # outputs are filled with it first (None: NaN / 0xA5 bytes)
    run: Callable[..., Any] | None = None   # launches itself: run(ct, stream, args)
    notes: dict[str, str] = field(default_factory=dict)


def kernel_files() -> list[Path]:
    return sorted(HERE.glob("kernels_*.py"))


def load(path: Path, impl: str):
    """The module at `path` under `impl` ("cuda.tile" or "tileir")."""
    text = path.read_text()
    if IMPORT_CUTILE not in text:
        raise ValueError(f"{path.name} does not `{IMPORT_CUTILE}`")
    if impl == "tileir":
        text = text.replace(IMPORT_CUTILE, IMPORT_TILEIR)
    elif impl != "cuda.tile":
        raise ValueError(f"unknown implementation {impl!r}")
    folder = Path(tempfile.mkdtemp(prefix=f"parity-{impl}-"))
    copy = folder / path.name
    copy.write_text(text)
    name = f"parity_{impl.replace('.', '_')}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, copy)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------
# Arrays on the device and back
# ---------------------------------------------------------------------------
def _is_bf16(a: np.ndarray) -> bool:
    return a.dtype.name == "bfloat16"


def to_device(a, torch):
    if not isinstance(a, np.ndarray):
        return a
    if _is_bf16(a):
        return torch.from_numpy(a.view(np.uint16).copy()).cuda().view(torch.bfloat16)
    return torch.from_numpy(a.copy()).cuda()


def to_host(t, like: np.ndarray) -> np.ndarray:
    if _is_bf16(like):
        import torch
        return t.view(torch.uint16).cpu().numpy().view(like.dtype)
    return t.cpu().numpy()


def poisoned(a: np.ndarray, value) -> np.ndarray:
    if isinstance(value, str) and value == KEEP:
        return a.copy()
    out = np.empty_like(a)
    if value is not None:
        out[...] = value
    elif a.dtype.kind == "f" or _is_bf16(a) or a.dtype.kind == "V":
        out[...] = np.nan
    elif a.dtype == np.bool_:
        out[...] = True
    else:
        out.view(np.uint8)[...] = 0xA5
    return out


@contextlib.contextmanager
def captured_stdout():
    """What is printed: to file descriptor 1 (device printf goes there) and to
    `sys.stdout` (the interpreter's prints, which pytest may have redirected)."""
    sys.stdout.flush()
    saved = os.dup(1)
    python = io.StringIO()
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 1)
        box = io.StringIO()
        try:
            with contextlib.redirect_stdout(python):
                yield box
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            f.seek(0)
            box.write(f.read().decode(errors="replace") + python.getvalue())


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------
def have_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def run_case(ct, case: Case, gpu: bool) -> dict[str, Any]:
    """Launches `case`; its outputs (NumPy), what it printed, and any error."""
    args = [poisoned(a, case.poison) if i in case.outputs else
            a.copy() if isinstance(a, np.ndarray) else a for i, a in enumerate(case.args)]
    result: dict[str, Any] = {"outputs": [], "printed": "", "error": None}
    try:
        if gpu:
            import torch
            dev = [to_device(a, torch) for a in args]
            stream = torch.cuda.current_stream()
            with captured_stdout() as box:
                if case.run is not None:
                    case.run(ct, stream, dev)
                else:
                    ct.launch(stream, case.grid, case.kernel, tuple(dev))
                torch.cuda.synchronize()
            result["outputs"] = [to_host(dev[i], args[i]) for i in case.outputs]
        else:
            with captured_stdout() as box:
                if case.run is not None:
                    case.run(ct, None, args)
                else:
                    ct.launch(None, case.grid, case.kernel, tuple(args))
            result["outputs"] = [args[i] for i in case.outputs]
        result["printed"] = box.getvalue()
    except Exception as e:   # reported, not raised: one case does not stop the run
        result["error"] = f"{type(e).__name__}: {e}"
        result["trace"] = traceback.format_exc()
    return result


def close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """None if `got` matches `want`, else what differs."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if _is_bf16(got) or got.dtype.kind == "f" or want.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        if bad.any():
            i = np.argwhere(bad)[0]
            return (f"{int(bad.sum())} of {bad.size} differ; first at {tuple(int(v) for v in i)}:"
                    f" {g[tuple(i)]!r} vs {w[tuple(i)]!r}")
        return None
    if not np.array_equal(got, want):
        bad = got != want
        i = np.argwhere(bad)[0]
        return (f"{int(bad.sum())} of {bad.size} differ; first at {tuple(int(v) for v in i)}:"
                f" {got[tuple(i)]!r} vs {want[tuple(i)]!r}")
    return None


def fingerprint(args, outputs=()) -> str:
    """A digest of a case's inputs (not of the `outputs`, which are poisoned): two runs
    compare only where their inputs agree."""
    import hashlib
    h = hashlib.sha1()
    for i, a in enumerate(args):
        if i in outputs:
            h.update(b"out")
        elif isinstance(a, np.ndarray):
            h.update(f"{a.dtype.str}{a.shape}".encode() + np.ascontiguousarray(a).tobytes())
        elif isinstance(a, (list, tuple)):
            h.update(fingerprint(a).encode())
        else:
            h.update(repr(a).encode())
    return h.hexdigest()[:16]


def all_cases(impl: str, seed: int, only: str | None = None):
    """(ct, name, case) for every case; (None, file name, error) for a file that does not
    load under `impl` (a name it lacks, say)."""
    for path in kernel_files():
        try:
            module = load(path, impl)
        except Exception as e:
            if not only or only in path.stem:
                yield None, path.stem, e
            continue
        rng = np.random.default_rng(seed)
        for case in module.cases(rng):
            name = f"{path.stem}.{case.name}"
            if only and only not in name:
                continue
            yield module.ct, name, case


def run(impl: str, seed: int, gpu: bool, only: str | None = None) -> dict[str, Any]:
    """Every case under `impl`: {name: result}, each checked against its reference."""
    results = {}
    for ct, name, case in all_cases(impl, seed, only):
        if isinstance(case, Exception):
            results[name] = {"outputs": [], "printed": "", "rtol": 0, "atol": 0, "prints": False,
                             "inputs": "", "error": f"{type(case).__name__}: {case}",
                             "trace": "".join(traceback.format_exception(case))}
            continue
        r = run_case(ct, case, gpu)
        if r["error"] is None and case.reference is not None:
            want = case.reference(*case.args)
            problems = [close(g, w, case.rtol, case.atol) for g, w in zip(r["outputs"], want)]
            r["vs_reference"] = "; ".join(f"output {case.outputs[i]}: {p}"
                                          for i, p in enumerate(problems) if p) or None
        r["rtol"], r["atol"], r["prints"] = case.rtol, case.atol, case.prints
        r["inputs"] = fingerprint(case.args, case.outputs)
        results[name] = r
    return results


def save(results: dict[str, Any], path: str, meta: dict[str, Any]) -> None:
    arrays, info = {}, {"meta": meta, "cases": {}}
    for name, r in results.items():
        for i, a in enumerate(r["outputs"]):
            a = np.asarray(a)
            arrays[f"{name}#{i}"] = a.view(np.uint16) if _is_bf16(a) else a
        keys = ("printed", "error", "vs_reference", "rtol", "atol", "prints", "inputs")
        info["cases"][name] = {k: r.get(k) for k in keys}
        info["cases"][name]["bf16"] = [bool(_is_bf16(np.asarray(a))) for a in r["outputs"]]
        info["cases"][name]["n"] = len(r["outputs"])
    np.savez_compressed(path, **arrays)
    Path(path).with_suffix(".json").write_text(json.dumps(info, indent=1))


def read(path: str) -> dict[str, Any]:
    info = json.loads(Path(path).with_suffix(".json").read_text())
    arrays = np.load(path if path.endswith(".npz") else path + ".npz")
    for name, c in info["cases"].items():
        outs = []
        for i in range(c["n"]):
            a = arrays[f"{name}#{i}"]
            if c["bf16"][i]:
                import ml_dtypes
                a = a.view(ml_dtypes.bfloat16)
            outs.append(a)
        c["outputs"] = outs
    return info


def merge(paths: list[str], out: str) -> None:
    """One run file from several of the same implementation (a rerun of some cases with
    `--only`): a case takes its result from the last file that has it."""
    infos = [read(p) for p in paths]
    cases: dict[str, Any] = {}
    for info in infos:
        cases.update(info["cases"])
    save(cases, out, infos[-1]["meta"])


def normalized_print(text: str) -> list[str]:
    return sorted(line.rstrip() for line in text.splitlines() if line.strip())


def compare(a_path: str, b_path: str) -> int:
    """Prints a table of the cases in both runs; 1 if any differs or failed."""
    a, b = read(a_path), read(b_path)
    la, lb = a["meta"].get("impl", a_path), b["meta"].get("impl", b_path)
    print(f"| case | {la} vs reference | {lb} vs reference | {la} vs {lb} |")
    print("|---|---|---|---|")
    failed = 0
    for name in sorted(set(a["cases"]) | set(b["cases"])):
        ca, cb = a["cases"].get(name), b["cases"].get(name)
        cells = []
        for c in (ca, cb):
            if c is None:
                cells.append("not run")
            elif c["error"]:
                cells.append("error: " + c["error"].splitlines()[0][:120])
            else:
                cells.append(c["vs_reference"] or "ok")
        if ca is None or cb is None or ca["error"] or cb["error"]:
            cells.append("—")
        elif ca["inputs"] != cb["inputs"]:
            cells.append("inputs differ: run both from the same kernel files and seed")
        else:
            diffs = [close(x, y, max(ca["rtol"], cb["rtol"]), max(ca["atol"], cb["atol"]))
                     for x, y in zip(ca["outputs"], cb["outputs"])]
            if ca["prints"] and normalized_print(ca["printed"]) != normalized_print(cb["printed"]):
                diffs.append(f"printed {ca['printed']!r} vs {cb['printed']!r}")
            cells.append("; ".join(d for d in diffs if d) or "same")
        if any(c not in ("ok", "same") for c in cells):
            failed += 1
        print(f"| {name} | " + " | ".join(cells) + " |")
    total = len(set(a["cases"]) | set(b["cases"]))
    print(f"\n{total - failed} of {total} cases agree everywhere")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--impl", choices=("cuda.tile", "tileir"), required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--seed", type=int, default=20261126)
    r.add_argument("--only", help="run the cases whose name contains this")
    r.add_argument("--interpret", action="store_true", help="tileir's interpreter, no GPU")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    m = sub.add_parser("merge", help="join runs of one implementation (later files win)")
    m.add_argument("runs", nargs="+")
    m.add_argument("--out", required=True)
    ns = p.parse_args(argv)
    if ns.cmd == "compare":
        return compare(ns.a, ns.b)
    if ns.cmd == "merge":
        merge(ns.runs, ns.out)
        return 0
    gpu = have_gpu() and not ns.interpret
    if ns.impl == "cuda.tile" and not gpu:
        p.error("cuTile runs only on a GPU")
    if not gpu:
        print("no GPU: tileir's interpreter runs the kernels", file=sys.stderr)
    results = run(ns.impl, ns.seed, gpu, ns.only)
    meta = {"impl": ns.impl, "seed": ns.seed, "gpu": gpu}
    if gpu:
        import torch
        meta["device"] = torch.cuda.get_device_name()
    save(results, ns.out, meta)
    bad = 0
    for name, res in results.items():
        state = "error: " + res["error"].splitlines()[0] if res["error"] else \
            (res.get("vs_reference") or "ok")
        bad += state != "ok"
        print(f"{name}: {state}")
    print(f"{len(results) - bad} of {len(results)} cases match their reference ({ns.impl})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
