"""Run cuTile's own samples through tileir, ported by their import lines alone.

    python test/parity/samples.py --samples DIR [--only A,B] [--timeout 300] [--out FILE]

DIR is a checkout of cuTile's `samples/` folder (NVIDIA/cutile-python; not part of
this repository).  Each sample is copied to a scratch folder with `cuda.tile`
replaced by `tileir` in its import lines, and nothing else changed, then run as
`python SAMPLE.py --correctness-check` on the GPU; the sample's own checks
(`torch.testing.assert_close` against torch) decide.  BlockScaledMatMul imports
cuTile's internals (`cuda.tile._cext`, `_bytecode`) and is reported as such, not run.
Prints one line a sample and `N passed, N failed`; `--out` writes them as JSON.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

INTERNALS = re.compile(r"^\s*(from|import)\s+cuda\.tile\._", re.M)
IMPORTS = [
    (re.compile(r"^(\s*)import cuda\.tile as ", re.M), r"\1import tileir as "),
    (re.compile(r"^(\s*)import cuda\.tile_experimental as ", re.M),
     r"\1import tileir.tune as "),
    (re.compile(r"^(\s*)from cuda\.tile\.", re.M), r"\1from tileir."),
    (re.compile(r"^(\s*)from cuda\.tile import ", re.M), r"\1from tileir import "),
    (re.compile(r"^(\s*)import cuda\.tile$", re.M), r"\1import tileir"),
]


def port(text: str) -> str:
    for pattern, repl in IMPORTS:
        text = pattern.sub(repl, text)
    return text


def run_one(work: str, name: str, timeout: int, internal: bool) -> dict:
    """Runs one ported sample with --correctness-check; its result, printed."""
    path = os.path.join(work, name + ".py")
    if internal:
        print(f"{name:24s} not run: imports cuTile internals", flush=True)
        return {"sample": name, "status": "not run",
                "why": "imports cuTile internals (cuda.tile._*)"}
    t = time.time()
    try:
        proc = subprocess.run([sys.executable, path, "--correctness-check"], cwd=work,
                              capture_output=True, text=True, timeout=timeout)
        out = proc.stdout + proc.stderr
        ok = proc.returncode == 0 and "Correctness check passed" in out and \
            "Correctness check failed" not in out
        checks = out.count("Correctness check passed")
        why = "" if ok else (out.strip().splitlines() or ["(no output)"])[-1][:300]
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
            else (e.stdout or "")
        ok, checks, why = False, 0, f"timed out after {timeout} s"
    print(f"{name:24s} {'passed' if ok else 'FAILED'} ({checks} checks, "
          f"{time.time() - t:.0f} s) {why}", flush=True)
    return {"sample": name, "status": "passed" if ok else "failed", "checks_passed": checks,
            "seconds": round(time.time() - t, 1), "why": why, "output_tail": out[-3000:]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", required=True, help="cuTile's samples/ folder")
    p.add_argument("--only", default="", help="comma-separated sample names")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--out", default=None)
    p.add_argument("--jobs", type=int, default=4, help="samples run at once")
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cutile-samples-")
    shutil.copytree(args.samples, work, dirs_exist_ok=True)
    names = sorted(f[:-3] for f in os.listdir(work)
                   if f.endswith(".py") and f[0].isupper())
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    internal = {n for n in names
                if INTERNALS.search(open(os.path.join(work, n + ".py")).read())}
    for root, _, files in os.walk(work):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                with open(path) as fh:
                    text = fh.read()
                with open(path, "w") as fh:
                    fh.write(port(text))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda n: run_one(work, n, args.timeout, n in internal),
                                names))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    passed = sum(r["status"] == "passed" for r in results)
    failed = sum(r["status"] == "failed" for r in results)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
