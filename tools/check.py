"""`tile-check`: run the whole CPU test suite (lit, then pytest) and print one summary.

This is the README's test command, what `.ci/run` and CMake's `check-tile` run.
Counts come from each runner's JUnit XML report, so the final line
`N passed, N failed, N skipped` is exact whatever the runners print.
Extra arguments go to pytest (e.g. `tile-check -k frontend`).

On a GPU machine, `tile-check --gpu` runs the GPU tier only (pytest `-m gpu`), and
`tile-check --gpu --sanitizer memcheck` (or racecheck, synccheck, initcheck) runs it
under compute-sanitizer: any error the tool reports fails the run (its exit code),
and the tool's summary lines are printed before the totals.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path


SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
SANITIZER_ERROR = 86            # compute-sanitizer's exit code when its tool found errors


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tile-check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, default=None, help="project root (default: found from cwd)")
    p.add_argument("--no-lit", action="store_true", help="skip the lit suite")
    p.add_argument("--no-pytest", action="store_true", help="skip pytest")
    p.add_argument("--gpu", action="store_true",
                   help="the GPU tests only (pytest -m gpu, no lit)")
    p.add_argument("--sanitizer", choices=SANITIZER_TOOLS, default=None,
                   help="run the tests under compute-sanitizer with this tool")
    args, pytest_args = p.parse_known_args(argv)
    if args.gpu:
        args.no_lit = True
        pytest_args = ["-m", "gpu", *pytest_args]
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
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        if not args.no_lit:
            xml = Path(tmp) / "lit.xml"
            # lit has no __main__ module: call its entry point the way its script does
            runs.append(("lit", [sys.executable, "-c", "import lit.main; lit.main.main()", "-sv",
                                 str(root / "test"), f"--xunit-xml-output={xml}"], xml))
        if not args.no_pytest:
            xml = Path(tmp) / "pytest.xml"
            runs.append(("pytest", [*wrapper, sys.executable, "-m", "pytest", "-q", "-rs",
                                    f"--junitxml={xml}", *pytest_args], xml))
        for name, cmd, xml in runs:
            print(f"== {name}: {' '.join(cmd)}", flush=True)
            env = dict(os.environ)
            if wrapper:       # tests that trap on purpose skip: the trap is the tool's error
                env["TILEIR_SANITIZER"] = args.sanitizer
            rc = subprocess.call(cmd, cwd=root, env=env)
            counts = junit_counts(xml)
            if rc == SANITIZER_ERROR and wrapper:
                print(f"== {name}: compute-sanitizer ({args.sanitizer}) reported errors")
                counts = (counts[0], counts[1] + 1, counts[2])
            elif rc != 0 and counts[1] == 0:
                counts = (counts[0], 1, counts[2])     # the runner itself failed
            print(f"== {name}: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped\n")
            totals = [t + c for t, c in zip(totals, counts)]
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] else 0


if __name__ == "__main__":
    sys.exit(main())
