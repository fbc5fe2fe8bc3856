"""`tile-check`: run the CPU test suite (lit and pytest) and print one summary.

This is the README's test command, what `.ci/run` and CMake's `check-tile` run.
Counts come from each runner's JUnit XML report, so the final line
`N passed, N failed, N skipped` is exact whatever the runners print.
Extra arguments go to pytest (e.g. `tile-check -k frontend`).

Two tiers: plain `tile-check` runs the fast tier, every test but those marked
`slow` (the long sweeps: fuzz runs, simulator GEMM grids), and on a machine without
a GPU but those marked `gpu` (each would only skip); `tile-check --full`
runs every test, as CI does; the line before the totals names the tier that ran,
its time, and the other tier's time as last measured on the project's 2-core
machine (`MEASURED`, from bench/RESULTS.md).  Both runners use one worker per CPU (`lit -j`,
pytest-xdist's `-n`) and run at the same time, lit's output printed after
pytest's; `-j 1` runs each in one process, one after the other.  `tile-check
--durations` lists the slowest tests of both runners.

On a GPU machine, `tile-check --gpu` runs the GPU tier only (pytest `-m gpu`, in
one process unless `-j` says otherwise), and `tile-check --gpu --sanitizer memcheck`
(or racecheck, synccheck, initcheck) runs it under compute-sanitizer: any error the
tool reports fails the run (its exit code), and the tool's summary lines are
printed before the totals.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path


SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
SANITIZER_ERROR = 86            # compute-sanitizer's exit code when its tool found errors
PYTEST_NO_TESTS = 5             # pytest's exit code when no test was selected

# Each tier's time as last measured (`tile-check` and `tile-check --full`, wall and the
# CPU time of every process, on the project's 2-core machine; bench/RESULTS.md), for
# the closing line: a newcomer running one tier learns what the other costs.
MEASURED = {
    "fast": "64-65 s wall, 2953-2955 passed (5a7a474-ad83287, 2026-11-29, on session 28's "
            "2-core machine; 62-66 s at f8a6c5f on session 27's; session 26's, at 764b8aa: "
            "96-116 s, median 98: the machines differ by a third)",
    "full": "281 s wall, 3945 passed (5a7a474, 2026-11-29, CI on a clean clone on session "
            "28's machine; 279 s at f8a6c5f on session 27's; 499 s at 764b8aa on session 26's)",
}


def find_root(start: Path) -> Path | None:
    for d in (start, *start.parents):
        if (d / "test" / "lit.cfg.py").exists() and (d / "pyproject.toml").exists():
            return d
    return None


def junit_counts(path: Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) from a JUnit XML file; a missing file counts as one failure."""
    if not path.exists():
        return 0, 1, 0
    passed = failed = skipped = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            failed += 1
        elif "skipped" in tags:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def cpu_count() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:             # macOS
        return os.cpu_count() or 1


def split_marker_expression(pytest_args: list[str]) -> tuple[str | None, list[str]]:
    """The `-m EXPR` among pytest's arguments (the last one, as pytest takes it) and
    the arguments without it."""
    expr, rest, i = None, [], 0
    while i < len(pytest_args):
        arg = pytest_args[i]
        if arg == "-m" and i + 1 < len(pytest_args):
            expr, i = pytest_args[i + 1], i + 2
            continue
        if arg.startswith("-m") and len(arg) > 2 and not arg.startswith("--"):
            expr = arg[2:].lstrip("=")
        else:
            rest.append(arg)
        i += 1
    return expr, rest


def tier_arguments(full: bool, gpu: bool, pytest_args: list[str],
                   leave_out_gpu: bool = False) -> list[str]:
    """pytest's `-m` for the tier asked for: the fast tier leaves out tests marked
    `slow` (and with `leave_out_gpu`, unless the user gave a `-m`, those marked
    `gpu`), `--gpu` keeps the `gpu` ones; a `-m` the user gave is kept, and-ed in."""
    expr, rest = split_marker_expression(pytest_args)
    terms = [f"({expr})"] if expr else []
    if gpu:
        terms.append("gpu")
    if not full:
        terms.append("not slow")
        if leave_out_gpu and not gpu and not expr:
            terms.append("not gpu")
    return (["-m", " and ".join(terms)] if terms else []) + rest


def have_gpu() -> bool:
    """Whether the CUDA driver sees a GPU (test/python/conftest.py asks it too, for the
    `gpu` marker)."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return False
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, n = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and n > 0
    except Exception:   # the driver library itself is missing
        return False


def share_bytecode(env: dict[str, str], tmp: Path) -> None:
    """Lets the run's Python processes (pytest's workers, the ~60 that tests start:
    tile-compile, tile-opt, pytest inside test_check) share compiled bytecode in `tmp`
    (`PYTHONPYCACHEPREFIX`), removed with it, so each module is compiled once a run,
    not once a process.  Where PYTHONDONTWRITEBYTECODE is set (the project's machine
    sets it) every process compiled every module it imports (~0.3 s of CPU for tileir
    alone); it is lifted for the run's processes, as nothing is written to the tree.
    A prefix the user set is kept, and with it their PYTHONDONTWRITEBYTECODE."""
    if env.get("PYTHONPYCACHEPREFIX"):
        return
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "bytecode")
    env.pop("PYTHONDONTWRITEBYTECODE", None)


def seed_bytecode(prefix: Path, dirs: list[str], root: Path) -> int:
    """Links the bytecode installed beside the modules of `dirs` (sys.path: the
    standard library, site-packages; not the tree under `root`) into `prefix`, where a
    process with PYTHONPYCACHEPREFIX looks for it: with a prefix, Python reads no
    `__pycache__` at all, and the run compiled again every module it imported from
    outside the tree (the first import of torch 6.1 s of CPU instead of 2.3 s, a
    worker's pytest, numpy, MLIR and JAX 4.4 s instead of 1.3 s; both workers at
    once as they start).  Hard links, or symbolic ones where the folders are on
    different file systems (a stale file is replaced by the compile, `os.replace`, never
    written through); none where neither can be made.  Returns how many files were
    linked."""
    tag = sys.implementation.cache_tag
    linked, link = 0, os.link
    for top in dirs:
        if not os.path.isdir(top) or Path(top).resolve().is_relative_to(root.resolve()):
            continue
        for folder, subdirs, files in os.walk(top):
            if os.path.basename(folder) != "__pycache__":
                continue
            subdirs.clear()
            names = [f for f in files if f.count(".") == 2 and f.split(".")[1] == tag]
            if not names:
                continue
            out = prefix / os.path.dirname(folder).lstrip(os.sep)
            out.mkdir(parents=True, exist_ok=True)
            for name in names:
                try:
                    link(os.path.join(folder, name), out / name)
                except FileExistsError:
                    continue
                except OSError:
                    if link is os.symlink:      # a read-only folder, say: none at all
                        return linked
                    link = os.symlink           # another file system
                    try:
                        link(os.path.join(folder, name), out / name)
                    except FileExistsError:
                        continue
                    except OSError:
                        return linked
                linked += 1
    return linked


def tier_line(full: bool, gpu: bool, seconds: float) -> str:
    """What ran and how long it took, and what the other tier costs."""
    took = f"{seconds:.0f} s here"
    if gpu:
        return f"== the GPU tier (tests marked `gpu`): {took}"
    if full:
        return (f"== the full tier (every test, as CI runs it): {took}; the fast tier "
                f"(plain `tile-check`): {MEASURED['fast']}")
    return (f"== the fast tier (tests marked `slow` left out): {took}; the full tier "
            f"(`tile-check --full`, what CI runs): {MEASURED['full']}")


def _run_all(runs: list[tuple[str, list[str], Path]], root: Path, env: dict[str, str],
             tmp: Path, alongside: bool) -> list[tuple[str, int, Path]]:
    """Runs each (name, command, xml); returns (name, exit status, xml) of each, in order.

    With `alongside`, the first (lit) runs in the background while the second
    (pytest) runs: lit alone leaves a CPU idle while its last tests finish, and it
    is short (a few seconds of CPU since its RUN lines reach a warm tile-opt).  Its
    output is kept in a file and printed after pytest's, so the two do not
    interleave."""
    results = []
    background = None
    if alongside and len(runs) == 2:
        (name, cmd, xml), runs = runs[0], runs[1:]
        log = tmp / f"{name}.log"
        print(f"== {name}, alongside pytest (its output follows pytest's): {' '.join(cmd)}",
              flush=True)
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out,
                                    stderr=subprocess.STDOUT)
        background = (name, proc, xml, log)
    try:
        for name, cmd, xml in runs:
            print(f"== {name}: {' '.join(cmd)}", flush=True)
            results.append((name, subprocess.call(cmd, cwd=root, env=env), xml))
        if background is not None:
            name, proc, xml, log = background
            rc = proc.wait()
            print(f"\n== {name} (ran alongside pytest):", flush=True)
            sys.stdout.write(log.read_text(errors="replace"))
            sys.stdout.flush()
            results.insert(0, (name, rc, xml))
    finally:
        if background is not None and background[1].poll() is None:
            background[1].kill()            # interrupted: do not leave lit running
            background[1].wait()
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tile-check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, default=None, help="project root (default: found from cwd)")
    p.add_argument("--no-lit", action="store_true", help="skip the lit suite")
    p.add_argument("--no-pytest", action="store_true", help="skip pytest")
    p.add_argument("--full", action="store_true",
                   help="every test, the slow sweeps too (what CI runs); default: the fast "
                        "tier, tests marked `slow` left out")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="workers for lit and pytest (default: one per CPU; --gpu and "
                        "--sanitizer: 1)")
    p.add_argument("--durations", type=int, nargs="?", const=25, default=None, metavar="N",
                   help="list the N slowest tests of each runner (default N: 25)")
    p.add_argument("--gpu", action="store_true",
                   help="the GPU tests only (pytest -m gpu, no lit)")
    p.add_argument("--sanitizer", choices=SANITIZER_TOOLS, default=None,
                   help="run the tests under compute-sanitizer with this tool")
    args, pytest_args = p.parse_known_args(argv)
    if args.gpu:
        args.no_lit = True
    # Without a GPU the fast tier leaves the GPU tests out instead of running each to
    # its skip: a thousand of them cost pytest-xdist's workers and reports ~4 s of CPU
    leave_out_gpu = not (args.full or args.gpu) and not have_gpu()
    pytest_args = tier_arguments(args.full, args.gpu, pytest_args, leave_out_gpu)
    # The GPU tier shares one GPU (and its timings) between tests: one process, unless asked
    jobs = args.jobs or (1 if args.gpu or args.sanitizer else cpu_count())
    if args.durations is not None:
        pytest_args = [f"--durations={args.durations}", "--durations-min=0.5", *pytest_args]
    if jobs > 1:
        if importlib.util.find_spec("xdist") is None:
            print("tile-check: pytest-xdist is not installed (pip install -e '.[test]'): "
                  "pytest runs in one process", file=sys.stderr)
        else:
            # worksteal: a worker that runs out takes queued tests from the other, so
            # one long test near the end does not leave the other CPUs idle
            pytest_args = ["-n", str(jobs), "--dist", "worksteal", *pytest_args]
    wrapper: list[str] = []
    if args.sanitizer:
        tool = shutil.which("compute-sanitizer")
        if tool is None:
            print("tile-check: --sanitizer needs compute-sanitizer on PATH (CUDA toolkit)",
                  file=sys.stderr)
            return 2
        args.no_lit = True
        wrapper = [tool, "--tool", args.sanitizer, "--error-exitcode", str(SANITIZER_ERROR),
                   "--print-limit", "20"]
    root = args.root or find_root(Path.cwd())
    if root is None:
        print("tile-check: run it inside the tileir checkout (no test/lit.cfg.py found)",
              file=sys.stderr)
        return 2
    totals = [0, 0, 0]
    start = time.monotonic()
    env = dict(os.environ)
    if wrapper:       # tests that trap on purpose skip: the trap is the tool's error
        env["TILEIR_SANITIZER"] = args.sanitizer
    with tempfile.TemporaryDirectory() as tmp:
        share_bytecode(env, Path(tmp))
        seeding = None
        if env["PYTHONPYCACHEPREFIX"] == str(Path(tmp) / "bytecode"):
            # beside the runs (~1 s of CPU): a module a process imports before its file
            # is linked is compiled into the folder as before, and the link skipped
            seeding = threading.Thread(target=seed_bytecode,
                                       args=(Path(tmp) / "bytecode", sys.path, root))
            seeding.start()
        runs = []
        if not args.no_lit:
            xml = Path(tmp) / "lit.xml"
            # lit has no __main__ module: call its entry point the way its script does
            lit_args = [f"-j{jobs}"]
            if args.durations is not None:
                lit_args.append(f"--time-tests={args.durations}")
            runs.append(("lit", [sys.executable, "-c", "import lit.main; lit.main.main()", "-sv",
                                 *lit_args, str(root / "test"), f"--xunit-xml-output={xml}"],
                         xml))
        if not args.no_pytest:
            xml = Path(tmp) / "pytest.xml"
            # Its own temporary folder, removed with the rest: pytest would otherwise
            # rotate /tmp/pytest-of-USER, deleting a run from before (thousands of
            # compile-cache files) while this one runs
            basetemp = [] if any(a.startswith("--basetemp") for a in pytest_args) \
                else [f"--basetemp={Path(tmp) / 'pytest'}"]
            runs.append(("pytest", [*wrapper, sys.executable, "-m", "pytest", "-q", "-rs",
                                    f"--junitxml={xml}", *basetemp, *pytest_args], xml))
        try:
            results = _run_all(runs, root, env, Path(tmp), alongside=jobs > 1)
        finally:
            if seeding is not None:
                seeding.join()
        for name, rc, xml in results:
            counts = junit_counts(xml)
            if rc == SANITIZER_ERROR and wrapper:
                print(f"== {name}: compute-sanitizer ({args.sanitizer}) reported errors")
                counts = (counts[0], counts[1] + 1, counts[2])
            elif rc == PYTEST_NO_TESTS and name == "pytest" and counts == (0, 0, 0):
                gpu_too = ", and without a GPU those marked `gpu`" if leave_out_gpu else ""
                print(f"== pytest: no test selected (the fast tier leaves out tests marked "
                      f"`slow`{gpu_too}: --full runs them)")
            elif rc != 0 and counts[1] == 0:
                counts = (counts[0], 1, counts[2])     # the runner itself failed
            print(f"== {name}: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped\n")
            totals = [t + c for t, c in zip(totals, counts)]
    if leave_out_gpu and not args.no_pytest:
        print("== no GPU here: the tests marked `gpu` were left out (each would skip); "
              "`tile-check --full` counts them as skipped, `tile-check --gpu` runs them "
              "on a GPU machine")
    print(tier_line(args.full, args.gpu, time.monotonic() - start))
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] else 0


if __name__ == "__main__":
    sys.exit(main())
