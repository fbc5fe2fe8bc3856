"""Fuzzing the tensor-core path with random GEMM kernels, checked against the interpreter.

    python test/fuzz/fuzz_gemm.py [--fuzz-n 300] [--seed 0] [--jobs 2] [--out DIR]

Each case is a cuTile-style GEMM: a K loop of two `ct.load`s and `acc = ct.mma(a, b,
acc)` (B as (K, N), or as (N, K) through `ct.transpose`), an epilogue, a store.  It
draws the operand dtypes (f16, bf16, f32 as tf32, f64, i8, u8, e4m3, e5m2, the two
fp8 types mixed, int8 with uint8; fp8 with and without use_fast_acc) and an accumulator they allow (f16 for f16 and fp8), tiles of 16 to
128 (K tiles 16 to 64), ragged M, N and K from 1, kernel options (persistent, warp
specialization, stages), and the grid's SM count the launch is compiled for (1 to
132: retiling, persistent tiles, cluster pairs, decode shrinking).  Operands hold
small integers, so every product and sum is exact in every accumulator and the
simulator must match the interpreter bit for bit (f16 accumulators: within their
per-mma rounding).  About one case in three is invalid on purpose (a tile that is not
a power of two, operands mma does not take, two operand dtypes it does not mix, an
accumulator the operands do not allow), and must fail with an error naming the
kernel's line.

A valid case runs in the interpreter (the oracle), then is compiled for sm_90a and
sm_80 down to cubins (ptxas runs) and simulated (tileir.sim); with `--gpu` it is
launched on the GPU instead (compiled as the launch compiles it for that GPU).  A located tileir
error from a target (a combination the GPU path refuses, such as a 3-d product) is
counted, not a finding; a crash, an unlocated error or a mismatch is.  Cases run in
child processes (fuzz_kernels._pooled), so an abort inside LLVM is a finding too.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_kernels as fk  # noqa: E402

# (a dtype, b dtype, accumulators) the tensor-core path takes
OPERANDS = [("float16", "float16", ("float32", "float16")),
            ("bfloat16", "bfloat16", ("float32",)),
            ("float32", "float32", ("float32",)),
            ("float64", "float64", ("float64",)),
            ("int8", "int8", ("int32",)),
            ("uint8", "uint8", ("int32",)),
            ("int8", "uint8", ("int32",)),
            ("uint8", "int8", ("int32",)),
            ("float8_e4m3fn", "float8_e4m3fn", ("float32", "float16")),
            ("float8_e5m2", "float8_e5m2", ("float32",)),
            ("float8_e4m3fn", "float8_e5m2", ("float32", "float16"))]
OPTIONS = [{}, {}, {"persistent": True}, {"warp_specialize": True}, {"num_stages": 3},
           {"persistent": True, "warp_specialize": True}, {"num_warps": 4}]
EPILOGUES = {"float": ["acc", "acc * 2.0", "ct.maximum(acc, 0.0)", "acc - 1.0"],
             "int": ["acc", "acc + 1", "ct.maximum(acc, 0)"]}
SM_COUNTS = [1, 2, 4, 132]
TARGETS = ("sm_90a", "sm_80")


def generate(seed: int) -> tuple[str, dict]:
    """(kernel module source, case parameters) for `seed`."""
    rng = random.Random(seed)
    a_dt, b_dt, accs = rng.choice(OPERANDS)
    acc = rng.choice(accs)
    invalid = rng.choice([None] * 7 + ["tile", "operands", "accumulator", "mix"])
    if invalid == "operands":
        a_dt, b_dt = rng.choice([("int16", "int16"), ("int32", "int32"), ("bool", "bool")])
        acc = "int32"
    if invalid == "mix":                      # mma does not promote (cuTile's rule)
        a_dt, b_dt, acc = rng.choice([("float16", "bfloat16", "float32"),
                                      ("float32", "float16", "float32"),
                                      ("int8", "float16", "float32")])
    if invalid == "accumulator":
        a_dt, b_dt, acc = rng.choice([("bfloat16", "bfloat16", "float16"),
                                      ("int8", "int8", "float32"),
                                      ("float32", "float32", "float16")])
    nt = rng.random() < 0.5
    bm, bn, bk = rng.choice([16, 32, 64, 64, 128]), rng.choice([16, 32, 64, 128]), \
        rng.choice([16, 32, 64])
    if invalid == "tile":
        bm = rng.choice([24, 48, 96])
    m, n, k = rng.randint(1, 3 * bm), rng.randint(1, 3 * bn), rng.randint(1, 4 * bk)
    options = rng.choice(OPTIONS)
    kind = "int" if acc == "int32" else "float"
    epilogue = rng.choice(EPILOGUES[kind])
    out = rng.choice([acc, acc, "float32" if kind == "float" else "int32",
                      "bfloat16" if kind == "float" else "int32"])
    b_load = ("ct.transpose(ct.load(b, index=(j, kk), shape=(BN, BK), "
              "padding_mode=ct.PaddingMode.ZERO))") if nt else \
        "ct.load(b, index=(kk, j), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)"
    opts = ", ".join(f"{key}={value!r}" for key, value in options.items())
    # fp8: the tensor cores' sums across the loop, or (default) each tile's K there
    fast = a_dt.startswith("float8") and rng.random() < 0.5
    lines = [
        "import tileir as ct",
        "",
        "",
        f"@ct.kernel({opts})" if opts else "@ct.kernel",
        "def k(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):",
        "    i = ct.bid(0)",
        "    j = ct.bid(1)",
        f"    acc = ct.zeros((BM, BN), dtype=ct.{acc})",
        "    for kk in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):",
        "        ta = ct.load(a, index=(i, kk), shape=(BM, BK), "
        "padding_mode=ct.PaddingMode.ZERO)",
        f"        tb = {b_load}",
        f"        acc = ct.mma(ta, tb, acc{', use_fast_acc=True' if fast else ''})",
        f"    ct.store(c, index=(i, j), tile=ct.astype({epilogue}, c.dtype))",
        "",
    ]
    case = {"a": a_dt, "b": b_dt, "acc": acc, "out": out, "nt": nt, "tiles": (bm, bn, bk),
            "shape": (m, n, k), "options": options, "invalid": invalid, "fast_acc": fast,
            "sm_count": rng.choice(SM_COUNTS)}
    return "\n".join(lines), case


def _operand(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    """Small integers (-2 to 2; 0 to 2 unsigned): every product and sum is exact."""
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    lo = 0 if dtype.startswith("uint") else -2
    return rng.integers(lo, 3, shape).astype(fk._np_dtype(dtype))


def check(seed: int, workdir: Path, gpu: bool = False) -> tuple[fk.Finding | None, str | None]:
    """(a finding or None, the located refusal a target gave, if any).  With `gpu`, the
    case is also launched on the GPU (torch tensors) and compared the same way."""
    import tileir as ct
    from tileir.errors import TileIRError
    from tileir.kernel import hardware_grid
    from tileir.sim import simulate
    source, case = generate(seed)
    try:
        kernel, path = fk._load(source, workdir, seed)
    except Exception as e:                         # a generator bug, not tileir's
        return fk.Finding(seed, source, f"the case does not import: {e!r}"), None
    rng = np.random.default_rng(seed)
    (m, n, k), (bm, bn, bk) = case["shape"], case["tiles"]
    a = _operand(rng, (m, k), case["a"])
    b = _operand(rng, (n, k) if case["nt"] else (k, n), case["b"])
    out_dtype = fk._np_dtype(case["out"])
    grid = (-(-m // bm), -(-n // bn), 1)
    args = lambda c: (a, b, c, bm, bn, bk)  # noqa: E731
    ref = np.full((m, n), fk._poison(out_dtype), out_dtype)
    try:
        ct.launch(None, grid, kernel, args(ref))
    except (TileIRError, ct.TileError) as e:
        if case["invalid"] and fk._located(e, path):
            return None, None
        return fk.Finding(seed, source, f"interpreter: {type(e).__name__}: {e}"[:2000]), None
    except Exception:
        return fk.Finding(seed, source, "interpreter crashed:\n" +
                          traceback.format_exc()[-2000:]), None
    if case["invalid"]:
        return fk.Finding(seed, source, f"the invalid case ({case['invalid']}) ran"), None
    refused = None
    if gpu:
        import torch
        tout = fk._to_torch(np.full((m, n), fk._poison(out_dtype), out_dtype))
        try:
            ct.launch(None, grid, kernel, (fk._to_torch(a), fk._to_torch(b), tout, bm, bn, bk))
            torch.cuda.synchronize()
        except (TileIRError, ct.TileError) as e:
            if not fk._located(e, path):
                return fk.Finding(seed, source, f"GPU: unlocated {e}"[:2000]), None
            refused = f"GPU: {str(e).splitlines()[0]}"
        except Exception:
            return fk.Finding(seed, source, "GPU launch failed:\n" +
                              traceback.format_exc()[-2000:]), None
        else:
            bad = _mismatch(fk._from_torch(tout, out_dtype), ref, case)
            if bad:
                return fk.Finding(seed, source, f"GPU: {bad} (case {case})"), None
        return None, refused                 # (the GPU is the check: no simulation)
    for target in TARGETS:
        got = np.full((m, n), fk._poison(out_dtype), out_dtype)
        try:
            ck = kernel.compile(args(got), target=target, grid=grid,
                                sm_count=case["sm_count"])
            simulate(ck, hardware_grid(ck.meta, grid), args(got), sm_count=case["sm_count"])
        except (TileIRError, ct.TileError) as e:
            if fk._located(e, path):
                refused = f"{target}: {str(e).splitlines()[0]}"
                continue
            return fk.Finding(seed, source, f"{target}: unlocated {type(e).__name__}: "
                              f"{e}"[:2000]), None
        except Exception:
            return fk.Finding(seed, source, f"{target} crashed:\n" +
                              traceback.format_exc()[-2000:]), None
        bad = _mismatch(got, ref, case)
        if bad:
            return fk.Finding(seed, source, f"{target}: simulator {bad} (case {case})"), None
    return None, refused


def _mismatch(got: np.ndarray, ref: np.ndarray, case: dict) -> str | None:
    g, r = got.astype(np.float64), ref.astype(np.float64)
    # exact sums; an f16 accumulator rounds once per mma (sums past 2048 in f16 may round
    # in another order), a narrower output rounds the same exact value on both sides
    tol = 2 ** -10 if case["acc"] == "float16" else 0.0
    if np.allclose(g, r, rtol=tol, atol=0, equal_nan=True):
        return None
    at = tuple(np.argwhere(~np.isclose(g, r, rtol=tol, atol=0, equal_nan=True))[0])
    return f"{g[at]} vs the interpreter's {r[at]} at {at}"


def _check_one(seed: int, gpu: bool = False) -> tuple[fk.Finding | None, str | None]:
    with tempfile.TemporaryDirectory(prefix="tileir-gfuzz-") as d:
        return check(seed, Path(d), gpu)


def run(n: int, seed: int = 0, jobs: int = 1, out: Path | None = None,
        gpu: bool = False) -> list[fk.Finding]:
    seeds = [seed * 1_000_003 + i for i in range(n)]
    os.environ.setdefault("TILEIR_CACHE", "0")
    results = fk._pooled(seeds, max(1, jobs), script=__file__, gen=generate, gpu=gpu)
    findings = [f for f in results if f is not None]
    fk.write_findings(out, findings)
    return findings


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fuzz-n", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", type=Path, default=Path("fuzz-findings"))
    p.add_argument("--gpu", action="store_true",
                   help="also launch each valid GEMM on the GPU (torch tensors)")
    p.add_argument("--cases", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cases is not None:               # fk._run_child's child: report each case
        return fk.serve_cases(args.cases, lambda s: _check_one(s, args.gpu)[0])
    findings = run(args.fuzz_n, args.seed, args.jobs, args.out, args.gpu)
    return fk.report(findings, f"{args.fuzz_n} GEMMs, seed {args.seed}", args.out)


if __name__ == "__main__":
    sys.exit(main())
