"""The short fuzz run of `tile-check --full` (test/fuzz/): mutated lit inputs through
every stage end in success or located diagnostics; random kernels agree with the
interpreter in the simulator or fail with a located error.  The long runs are
documented in test/fuzz/README.md.  The fast tier (plain `tile-check`) keeps the
fixed findings and the harness's own tests; the mutant runs, the random kernel and
GEMM runs and the dtype sweep are marked `slow`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import fuzz_gemm  # noqa: E402
import fuzz_kernels  # noqa: E402
import fuzz_mlir  # noqa: E402
import sweep_dtypes  # noqa: E402


def test_the_corpus_covers_every_stage():
    chunks = fuzz_mlir.corpus()
    assert len(chunks) > 200
    import re
    recorded = {m.group(1) if m else "frontend"
                for m in (re.search(r'tile\.stage = "(\w+)"', c) for c in chunks)}
    assert {"frontend", "layout", "pipeline", "gpu", "llvm"} <= recorded


def test_mutations_are_seeded_and_change_the_input():
    chunks = fuzz_mlir.corpus()
    vocab = fuzz_mlir._vocabulary(chunks)
    import random
    one = [fuzz_mlir.mutate(c, random.Random(5), vocab) for c in chunks[:50]]
    two = [fuzz_mlir.mutate(c, random.Random(5), vocab) for c in chunks[:50]]
    assert one == two and sum(a != b for a, b in zip(one, chunks[:50])) >= 45


# A fuzz run (400 mutants through tile-opt, 13 s of CPU): `tile-check --full`, as the
# other sweeps; the fast tier keeps the harness's own tests below
@pytest.mark.parametrize("seed", [pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(2, marks=pytest.mark.slow)])
def test_mutated_inputs_end_in_success_or_located_diagnostics(seed, tmp_path):
    findings = fuzz_mlir.run(400, seed=seed, jobs=2, out=tmp_path)
    assert not findings, "\n".join(f"[{f.stage}] {f.what}" for f in findings[:10])


def test_a_finding_is_reported(tmp_path, monkeypatch):
    """The harness itself: a crashing tile-opt is a finding, bisected to its mutant."""
    import subprocess

    def crashing(path, stage):
        text = Path(path).read_text()
        return subprocess.CompletedProcess([], -6 if "CRASH" in text else 0, "", "")

    monkeypatch.setattr(fuzz_mlir, "_tile_opt", crashing)
    found = fuzz_mlir.check_batch(["module {}\n", "// CRASH\nmodule {}\n", "module {}\n"],
                                  "tile", tmp_path)
    assert [(f.text, f.what) for f in found] == [("// CRASH\nmodule {}\n",
                                                  "tile-opt exit status -6")]


@pytest.mark.slow
def test_random_kernels_agree_with_the_interpreter_or_fail_located(tmp_path):
    findings = fuzz_kernels.run(60, seed=1, jobs=2, out=tmp_path)
    assert not findings, "\n".join(f"[seed {f.seed}] {f.what}" for f in findings[:5])


@pytest.mark.parametrize("seed", [20261271787673, 20261271791100])
def test_kernel_findings_stay_fixed(seed):
    """fuzz_kernels.py --seed 20261211 (2026-11-26): a loop that breaks (an scf.while)
    in a kernel tile-split-blocks splits; the pass retyped its body, not its condition
    region, and left invalid IR."""
    finding = fuzz_kernels._check_one(seed)
    assert finding is None, finding.what


def test_the_kernel_generator_makes_invalid_cases_too():
    kinds = {fuzz_kernels.generate(s)[1]["invalid"] for s in range(200)}
    assert kinds == {None, "shape", "rank", "name", "dtype"}


@pytest.mark.slow
def test_random_gemms_match_the_interpreter_or_fail_located(tmp_path):
    """A few random GEMMs (test/fuzz/fuzz_gemm.py): every dtype, accumulator, tile and
    option the generator draws, simulated for both targets, bit for bit."""
    findings = fuzz_gemm.run(12, seed=3, jobs=2, out=tmp_path)
    assert not findings, "\n".join(f"[seed {f.seed}] {f.what}" for f in findings[:5])


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [20261278784057, 20261278786168])
def test_gemm_findings_stay_fixed_on_the_gpu(seed):
    """fuzz_gemm.py --gpu --seed 20261218 (2026-11-26): 5 of 3000 GEMMs asked for exactly
    48 KiB of dynamic shared memory, which with the dynamic buffer symbol's static byte
    passes the default limit; the launcher did not opt in and cuLaunchKernelEx failed
    (CUDA_ERROR_INVALID_VALUE).  test_runtime checks the rule without a GPU."""
    pytest.importorskip("torch")
    finding, _ = fuzz_gemm._check_one(seed, True)
    assert finding is None, finding.what


def test_the_gemm_generator_covers_the_dtypes_and_invalid_cases():
    cases = [fuzz_gemm.generate(s)[1] for s in range(300)]
    assert {c["invalid"] for c in cases} == {None, "tile", "operands", "accumulator", "mix"}
    assert {(c["a"], c["b"]) for c in cases if c["invalid"] is None} == \
        {(a, b) for a, b, _ in fuzz_gemm.OPERANDS}
    assert {c["acc"] for c in cases} >= {"float32", "float16", "float64", "int32"}
    fp8 = [c for c in cases if c["invalid"] is None and c["a"].startswith("float8")]
    assert {c["fast_acc"] for c in fp8} == {True, False}


@pytest.mark.slow
def test_every_40th_op_and_dtype_compiles_or_fails_located():
    """A slice of test/fuzz/sweep_dtypes.py's matrix (ops x dtypes x both targets); the
    whole matrix is documented in test/fuzz/README.md."""
    findings = sweep_dtypes.run(every=40, jobs=2)
    assert not findings, "\n".join(f"[{n}] {w}" for n, w in findings[:5])


def test_the_sweep_reports_a_process_that_dies(tmp_path):
    what = sweep_dtypes.check("abort", "    pass", "__import__('os').abort()", tmp_path)
    assert what is not None and what.startswith("exit -6")
