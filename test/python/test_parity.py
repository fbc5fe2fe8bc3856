"""Kernels written for NVIDIA's `cuda.tile`, ported by changing their import line.

test/parity/kernels_*.py import `cuda.tile as ct` and nothing of tileir; the harness
(test/parity/harness.py) rewrites that one line to `import tileir as ct` and runs each
case.  Here every case runs in the interpreter (CPU) and, marked `gpu`, on the GPU,
against its NumPy reference.  The same files run under cuTile itself on a GPU with
`harness.py run --impl cuda.tile`; `harness.py compare` checks the two bit for bit
(integers) or to each case's tolerance (floats): bench/RESULTS.md has the last run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PARITY = Path(__file__).resolve().parents[1] / "parity"
sys.path.insert(0, str(PARITY))

import harness  # noqa: E402

SEED = 20261126


def case_names() -> list[str]:
    return [name for _, name, _ in harness.all_cases("tileir", SEED)]


CASES = case_names()
# The cases that take longest in the interpreter run in the full tier only (--full)
SLOW_CASES = {"kernels_mma.matmul_tuned"}


def run(name: str, gpu: bool) -> None:
    (found,) = [(ct, case) for ct, n, case in harness.all_cases("tileir", SEED, name) if n == name]
    ct, case = found
    if isinstance(case, Exception):
        raise case
    result = harness.run_case(ct, case, gpu)
    assert result["error"] is None, result.get("trace")
    if case.reference is not None:
        want = case.reference(*case.args)
        for i, (got, exp) in enumerate(zip(result["outputs"], want)):
            problem = harness.close(got, exp, case.rtol, case.atol)
            assert problem is None, f"output {case.outputs[i]}: {problem}"
    if case.prints:
        assert result["printed"].strip(), "the case prints nothing"


def test_every_kernel_file_imports_cuda_tile_and_not_tileir():
    for path in harness.kernel_files():
        text = path.read_text()
        assert harness.IMPORT_CUTILE in text and "tileir" not in text, path.name


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CASES
                                  else n for n in CASES])
def test_ported_kernel_in_the_interpreter(name):
    run(name, gpu=False)


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
def test_ported_kernel_on_the_gpu(name):
    run(name, gpu=True)


def test_compare_reports_a_difference(tmp_path):
    """`compare` fails on outputs that differ and on a case only one run has."""
    import numpy as np
    a = {"k.one": {"outputs": [np.arange(4, dtype=np.int32)], "printed": "", "error": None,
                   "vs_reference": None, "rtol": 0, "atol": 0, "prints": False, "inputs": "x"}}
    b = {"k.one": {**a["k.one"], "outputs": [np.array([0, 1, 2, 4], np.int32)]}}
    harness.save(a, str(tmp_path / "a.npz"), {"impl": "cuda.tile"})
    harness.save(b, str(tmp_path / "b.npz"), {"impl": "tileir"})
    assert harness.compare(str(tmp_path / "a.npz"), str(tmp_path / "a.npz")) == 0
    assert harness.compare(str(tmp_path / "a.npz"), str(tmp_path / "b.npz")) == 1


def test_merge_takes_each_case_from_the_last_run_that_has_it(tmp_path):
    import numpy as np
    one = {"outputs": [np.zeros(2, np.float32)], "printed": "", "error": "TypeError: x",
           "vs_reference": None, "rtol": 0, "atol": 0, "prints": False, "inputs": "a"}
    harness.save({"k.a": one, "k.b": one}, str(tmp_path / "first.npz"), {"impl": "cuda.tile"})
    fixed = {**one, "error": None, "outputs": [np.ones(2, np.float32)]}
    harness.save({"k.b": fixed}, str(tmp_path / "rerun.npz"), {"impl": "cuda.tile"})
    harness.merge([str(tmp_path / "first.npz"), str(tmp_path / "rerun.npz")],
                  str(tmp_path / "all.npz"))
    cases = harness.read(str(tmp_path / "all.npz"))["cases"]
    assert cases["k.a"]["error"] == "TypeError: x" and cases["k.b"]["error"] is None
    assert cases["k.b"]["outputs"][0].tolist() == [1.0, 1.0]
