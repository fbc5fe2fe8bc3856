"""Every op on every dtype, compiled for both targets: success or a located error.

    python test/fuzz/sweep_dtypes.py [--jobs 2] [--only SUBSTRING] [--every N]

Where the kernel fuzzer draws random expressions, this walks a fixed matrix: each
case is a small kernel applying one op (copies of tiles 1 to 16 wide, reductions,
scans, casts between any two dtypes, arithmetic, bit operations, integer powers and
abs, gathers, scatters, atomics, tiled views, loops) to one dtype (the ints and
floats cuTile has, fp8 and bool), compiled to a cubin for sm_90a and sm_80 from
`ArraySpec`s (aligned arrays: the vector paths) in a child process of its own.  A
case passes when both targets build or refuse it with a tileir error naming the
kernel's line or argument; a crash, an abort inside LLVM or ptxas, an internal
error or an unlocated diagnostic is a finding.  It found, on 2026-11-26, the
two-element masked load that aborted the process, `atom.add.s64`, fp8 scans and
reductions, same-width float casts, f64 to fp8, integer abs and power, and
saturating float-to-int conversions (test/fuzz/README.md).

`test/python/test_fuzz.py` runs every 40th case; the whole matrix (900 cases)
takes about 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

FLOATS = ["float32", "float16", "bfloat16", "float64"]
FP8 = ["float8_e4m3fn", "float8_e5m2"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DTYPES = FLOATS + FP8 + INTS + ["bool_"]
SHAPES = [(1,), (2,), (16,), (64, 1), (64, 2), (1, 2), (4, 4), (16, 4), (2, 4, 2)]
BINARY = ["a + b", "a - b", "a * b", "a / b", "a // b", "a % b", "a ** b",
          "ct.minimum(a, b)", "ct.maximum(a, b)", "a & b", "a | b", "a ^ b", "a << b",
          "a >> b", "ct.where(a > b, a, b)", "-a", "ct.abs(a)", "~a"]
REDUCTIONS = ["ct.sum(a, axis=1)", "ct.max(a, axis=0)", "ct.argmin(a, axis=1)",
              "ct.cumsum(a, axis=1)", "ct.cumprod(a, axis=0)"]


def _spec(d: str, ndim: int) -> str:
    return f"ct.ArraySpec(ct.{d}, {ndim})"


def cases() -> dict[str, tuple[str, str]]:
    """{name: (kernel source defining `k`, its argument list as Python source)}."""
    out = {}
    for d, shape in itertools.product(DTYPES, SHAPES):
        n = len(shape)
        at = "(ct.bid(0)" + ", 0" * (n - 1) + ")"
        load = f"ct.load(x, index={at}, shape={shape})"
        two = f"[{_spec(d, n)}, {_spec(d, n)}]"
        out[f"copy {d} {shape}"] = (f"    ct.store(y, index={at}, tile={load})", two)
        out[f"atomic_add {d} {shape}"] = (f"    ct.atomic_add(y, {at}, {load})", two)
    for d in DTYPES:
        for expr in BINARY:
            out[f"op {d} {expr}"] = (
                "    a = ct.load(x, index=(ct.bid(0),), shape=(32,))\n"
                "    b = ct.load(x, index=(ct.bid(0) + 1,), shape=(32,))\n"
                f"    ct.store(y, index=(ct.bid(0),), tile=ct.astype({expr}, y.dtype))",
                f"[{_spec(d, 1)}, {_spec(d, 1)}]")
        for expr in REDUCTIONS:
            out[f"reduce {d} {expr}"] = (
                "    a = ct.load(x, index=(ct.bid(0), 0), shape=(4, 64))\n"
                f"    r = ct.astype({expr}, ct.float32)\n"
                "    ct.store(y, index=(ct.bid(0),), tile=ct.reshape(ct.sum(r), (1,)))",
                f"[{_spec(d, 2)}, {_spec('float32', 1)}]")
        for e in DTYPES:
            out[f"astype {d} {e}"] = (
                "    t = ct.load(x, index=(ct.bid(0),), shape=(16,))\n"
                f"    ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, ct.{e}))",
                f"[{_spec(d, 1)}, {_spec(e, 1)}]")
        out[f"gather {d}"] = (
            "    j = ct.load(i, index=(ct.bid(0),), shape=(8,))\n"
            "    ct.store(y, index=(ct.bid(0),), tile=ct.gather(x, j))",
            f"[{_spec(d, 1)}, {_spec('int32', 1)}, {_spec(d, 1)}]")
        out[f"scatter {d}"] = (
            "    j = ct.load(i, index=(ct.bid(0),), shape=(8,))\n"
            "    ct.scatter(y, j, ct.load(x, index=(ct.bid(0),), shape=(8,)))",
            f"[{_spec(d, 1)}, {_spec('int32', 1)}, {_spec(d, 1)}]")
        out[f"tiled_view {d}"] = (
            "    ty = y.tiled_view((4, 8))\n"
            "    ty.store((ct.bid(0), 0), x.tiled_view((4, 8)).load((ct.bid(0), 0)))",
            f"[{_spec(d, 2)}, {_spec(d, 2)}]")
        out[f"loop {d}"] = (
            "    t = ct.load(x, index=(ct.bid(0), 0), shape=(4, 8))\n"
            "    for _ in range(2):\n"
            "        t = ct.where(t == t, t, t)\n"
            "    ct.store(y, index=(ct.bid(0), 0), tile=t)",
            f"[{_spec(d, 2)}, {_spec(d, 2)}]")
    return out


def _source(body: str, args: str) -> str:
    params = "x, y" if args.count("ArraySpec") == 2 else "x, i, y"
    return f"import tileir as ct\n\n\n@ct.kernel\ndef k({params}):\n{body}\n"


_DRIVER = """
import sys
import tileir as ct
from tileir.errors import TileError
from tileir.dialect import TileIRError
sys.path.insert(0, {dir!r})
from case import k
for target in ("sm_90a", "sm_80"):
    try:
        k.compile({args}, target=target)
    except (TileError, TileIRError) as e:
        text = str(e)
        if not ({name!r} + ":" in text and ": error:" in text) or "internal error" in text \\
                or "is invalid" in text:
            print("UNLOCATED", target, text.splitlines()[0][:300])
            sys.exit(2)
print("OK")
"""


def check(name: str, body: str, args: str, workdir: Path) -> str | None:
    """None when the case passes, else what went wrong."""
    d = Path(tempfile.mkdtemp(dir=workdir))
    (d / "case.py").write_text(_source(body, args))
    (d / "driver.py").write_text(_DRIVER.format(dir=str(d), args=args, name="case.py"))
    env = dict(os.environ, TILEIR_CACHE="0")
    p = subprocess.run([sys.executable, str(d / "driver.py")], capture_output=True,
                       text=True, env=env, timeout=600)
    if p.returncode == 0 and p.stdout.strip().endswith("OK"):
        return None
    last = (p.stdout.strip().splitlines() or [""])[-1]
    err = " | ".join(p.stderr.strip().splitlines()[-2:])
    return f"exit {p.returncode}: {last} {err}"[:600]


def run(every: int = 1, only: str = "", jobs: int = 2) -> list[tuple[str, str]]:
    """(case, what went wrong) for each failing case of every `every`-th case."""
    all_cases = [(n, c) for n, c in sorted(cases().items()) if only in n][::every]
    with tempfile.TemporaryDirectory(prefix="tileir-sweep-") as w, \
            ThreadPoolExecutor(max(1, jobs)) as pool:
        results = pool.map(lambda nc: (nc[0], check(nc[0], *nc[1], Path(w))), all_cases)
        return [(n, r) for n, r in results if r is not None]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--only", default="", help="cases whose name contains this")
    p.add_argument("--every", type=int, default=1, help="every N-th case")
    a = p.parse_args(argv)
    total = len([n for n in cases() if a.only in n][::a.every])
    bad = run(a.every, a.only, a.jobs)
    for name, what in bad:
        print(f"  [{name}] {what}")
    print(f"{total} cases: {len(bad)} findings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
