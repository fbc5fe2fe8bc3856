"""Shared pytest setup: the `gpu` marker skips cleanly without an NVIDIA GPU; the
`sweep` marker puts all but a sweep's first cases in the full tier (`slow`); tests
compile through one compile cache for the run (a specialization another test or
worker compiled is loaded, not compiled again), except those that patch anything or
are marked `private_cache`, which get an empty one of their own (`_compile_cache`);
tests that run tile-opt as a command can reach a warm one (`tile_opt_server`);
`full_tier()` says whether the run includes the tests marked `slow`."""

import hashlib
import importlib
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from tileir.tools.check import have_gpu     # (tile-check asks the same)

_HAVE_GPU = have_gpu()
_FULL_TIER = True       # set by pytest_configure from the run's `-m`


def _have_gpu() -> bool:
    return _HAVE_GPU


def pytest_configure(config):
    global _FULL_TIER
    _FULL_TIER = selects_slow(config.getoption("markexpr", "") or "")


def selects_slow(expr: str) -> bool:
    """Whether `-m EXPR` selects a test marked `slow` and nothing else: true without a
    `-m` (`tile-check --full`, CI's, a plain `pytest`), false for the fast tier's
    `not slow and not gpu` and `--gpu`'s `gpu and not slow`."""
    if not expr:
        return True
    from _pytest.mark.expression import Expression
    return Expression.compile(expr).evaluate(lambda name, **kwargs: name == "slow")


def full_tier() -> bool:
    """Whether this run includes the full tier (the tests marked `slow`).  A helper
    whose tests fold a proof of the full tier into a fast case asks it: test_cutile_api's
    `run_everywhere` runs each kernel in the interpreter and its gpu-stage code in the
    simulator always, and compiles its cubins (ptxas: LLVM's NVPTX and ptxas, ~0.1 s
    a kernel and target) in the full tier, as the policy puts a family's per-case SASS
    and ptxas proofs there (bench/RESULTS.md, session 24)."""
    return _FULL_TIER


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    share_rewriting(session.config)     # (returns None: pytest then collects as ever)


def share_rewriting(config) -> list[Path]:
    """Under pytest-xdist, worker k of n (k > 0) rewrites the asserts of the test files
    from the k-th n-th of the list on and writes their rewritten bytecode where pytest
    looks for it, before it collects: its own n-th (skipping a file that has it already,
    as one that another worker's test file imports), then on until it meets a file that
    has it; worker 0 collects from the first file.  Each xdist worker collects every test file, and
    pytest's rewriting of a file (~70 ms of CPU for each of the 63 files, 4.5 s a
    worker) was done by every worker at once: now each file once a run, by whichever
    worker gets there first, and the others load it (pytest checks the source's hash).
    Only where bytecode is written (tile-check's PYTHONPYCACHEPREFIX, or no
    PYTHONDONTWRITEBYTECODE) and asserts are rewritten.  Goes through pytest's own
    functions (`_rewrite_test`, `_write_pyc`): a pytest without them collects as it
    always did.  Returns the files this worker rewrote."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if not worker.startswith("gw") or worker == "gw0" or count < 2 or \
            sys.dont_write_bytecode or config.getoption("assertmode", "plain") != "rewrite":
        return []
    try:
        from _pytest.assertion import rewrite
        state = config.stash[rewrite.assertstate_key]
        make, write, tail = rewrite._rewrite_test, rewrite._write_pyc, rewrite.PYC_TAIL
    except (ImportError, AttributeError, KeyError):      # another pytest's internals
        return []
    files = _test_files(config)
    k = int(worker[2:])
    start, end = k * len(files) // count, (k + 1) * len(files) // count
    done = []
    for i, fn in enumerate(files[start:] + files[:start]):
        folder = rewrite.get_cache_dir(fn)
        pyc = folder / (fn.name[:-3] + tail)
        if pyc.exists():
            # in its own share, a file another worker's test file imported; past it,
            # where the next worker has been
            if start + i < end:
                continue
            break
        if not rewrite.try_makedirs(folder):
            break
        source_hash, co = make(fn, config)
        write(state, co, source_hash, pyc)
        done.append(fn)
    return done


def _test_files(config) -> list[Path]:
    """The test files (`python_files`) under the run's paths, in pytest's order."""
    import fnmatch
    patterns = config.getini("python_files")
    found: dict[Path, None] = {}
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0])
        paths = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for p in paths:
            if p.is_file() and any(fnmatch.fnmatch(p.name, pat) for pat in patterns):
                found[Path(os.path.abspath(p))] = None
    return list(found)


@pytest.hookimpl(tryfirst=True)     # before `-m "not slow"` deselects
def pytest_collection_modifyitems(config, items):
    _tier_sweeps(items)
    if not _have_gpu():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def _tier_sweeps(items):
    """The tiers of `sweep`-marked tests: in each, the first case for every value of
    `keep` stays in the fast tier, the others get the `slow` mark.  Decided over every
    case collected, before `-k` or `-m` deselect, so a case's tier does not depend on
    the selection."""
    first: set = set()
    for item in items:
        mark = item.get_closest_marker("sweep")
        if mark is None or "slow" in item.keywords or not hasattr(item, "callspec"):
            continue
        keep = mark.kwargs.get("keep", ())
        key = (item.module.__name__, item.originalname,
               tuple(repr(item.callspec.params[name]) for name in keep))
        if key in first:
            item.add_marker(pytest.mark.slow)
        else:
            first.add(key)


@pytest.fixture(scope="session")
def _private_caches(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tileir-caches")


_PRIVATE_CACHES = itertools.count()
# the run's shared compile cache in this folder instead (`--basetemp`'s): a second run
# given the first one's folder finds every cubin compiled, as a test does whose kernels
# other tests compiled first (how the tests that need a private cache were found)
SHARED_CACHE_ENV = "TILEIR_TEST_SHARED_CACHE"


@pytest.fixture(autouse=True)
def _compile_cache(request, _private_caches, session_dir):
    """Tests never read or fill the user's compile cache (~/.cache/tileir).  They share
    one for the run (`shared_compile_cache`: new each run, so what it holds this tree's
    compiler compiled; its writes are atomic, tileir/cache.py, so workers share it),
    except a test that could fill it with what another compiler compiles or must see
    its own compile: one that uses `monkeypatch` (itself or through a fixture: it may
    patch the compiler, whose key covers the source files, not a patched function) or
    is marked `private_cache` (it reads a compiled kernel's `module`, which a cache hit
    does not have, or counts compiles).  Those get an empty folder of their own,
    numbered by this worker's count and made directly (tmp_path_factory.mktemp lists
    every folder made before: near the end of a run ~2 ms a test).  Set here, not
    through monkeypatch, so that `monkeypatch` in a test's closure says the test's own."""
    if "monkeypatch" in request.fixturenames or request.node.get_closest_marker("private_cache"):
        path = _private_caches / str(next(_PRIVATE_CACHES))
        path.mkdir()
    else:
        path = shared_cache_dir(session_dir)
    old = os.environ.get("TILEIR_CACHE_DIR")
    os.environ["TILEIR_CACHE_DIR"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("TILEIR_CACHE_DIR", None)
        else:
            os.environ["TILEIR_CACHE_DIR"] = old


def shared_cache_dir(session_dir: Path) -> Path:
    return Path(os.environ.get(SHARED_CACHE_ENV) or session_dir / "compile-cache")


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory) -> Path:
    """A directory of this pytest run that every xdist worker sees (they run in
    processes of their own, each with its own basetemp: `<run's basetemp>/popen-gwN`).
    What is kept there is named by its content and written atomically, so a worker
    finds it whole or not at all, whichever worker wrote it."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    path = base / "session"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def shared_compile_cache(request, session_dir) -> Path:
    """The run's shared compile cache, which this test's compiles go through (a test that
    patches nothing and is not marked `private_cache`: `_compile_cache`)."""
    path = shared_cache_dir(session_dir)
    if os.environ.get("TILEIR_CACHE_DIR") != str(path):
        raise RuntimeError(f"{request.node.nodeid} asks for the shared compile cache but "
                           f"patches something or is marked private_cache")
    return path


@pytest.fixture(scope="session")
def tile_opt_server(tmp_path_factory):
    """A warm tile-opt for this worker (tools/tile_opt_server.py, as lit's RUN lines
    get): yields the socket path, for the client's TILEIR_OPT_SERVER.  A run through it
    prints and exits as a fresh `python -m tileir.tools.tile_opt` (each is a fork of
    the server), without the 0.5 s of imports.  None off Linux (as in lit.cfg.py):
    the client then runs a fresh tile-opt itself."""
    if not sys.platform.startswith("linux"):
        yield None
        return
    path = str(tmp_path_factory.mktemp("tile-opt-server") / "socket")
    server = subprocess.Popen([sys.executable, "-m", "tileir.tools.tile_opt_server", path],
                              stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        if server.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the tile-opt server did not start (exit status {server.poll()})")
        time.sleep(0.01)
    yield path
    server.terminate()
    server.wait(timeout=60)


class _LazyModule:
    """A module imported when a test first reads one of its names (`lazy_import`)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("_"):        # pytest probes a module's names as it collects
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)


def lazy_import(name: str):
    """`name`, imported when a test first uses it, or the whole file skipped where it is
    not installed (as pytest.importorskip).  For the GPU test files: without a GPU
    each of their tests skips, and importing torch while pytest collects them cost
    each xdist worker of `tile-check` about 3 s of CPU."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"could not import {name!r}", allow_module_level=True)
    return _LazyModule(name)


def session_memo(session_dir: Path, kind: str, data: bytes, make) -> str:
    """`make()` (text derived from `data` alone: a cubin's SASS, say), kept in
    `session_dir` by `data`'s sha256, so the run computes it once whatever the test or
    worker that asks; written to a temporary file and renamed into place."""
    path = session_dir / kind / f"{hashlib.sha256(data).hexdigest()}.txt"
    try:
        return path.read_text()
    except FileNotFoundError:
        pass
    text = make()
    path.parent.mkdir(exist_ok=True)
    scratch = path.with_name(f".tmp-{uuid.uuid4().hex[:8]}-{path.name}")
    scratch.write_text(text)
    os.replace(scratch, path)
    return text


# The run's folder (`session_dir`) for `sass_text`, which the helpers of test files call
# without fixtures; set by `_sass_memo` before the first test
_SESSION_DIR: Path | None = None


@pytest.fixture(scope="session", autouse=True)
def _sass_memo(session_dir):
    global _SESSION_DIR
    _SESSION_DIR = session_dir
    yield
    _SESSION_DIR = None


# What cuobjdump -sass runs on a cubin (its nvdisasm command line, CUDA 13), and
# -ndf: no dataflow analysis, which only labels jumps through the branch stack (none in
# our kernels: the text is the same, byte for byte, for 169 cubins of the suite,
# 2026-11-29) and costs ~20 % of nvdisasm's CPU
NVDISASM_AS_CUOBJDUMP = ("-pb", "-hex", "-novliw", "-ndf")


def sass_text(cubin: bytes, scratch: Path | None = None) -> str:
    """`cuobjdump -sass` of `cubin` (its text), disassembled once a run (`session_memo`:
    by the cubin's bytes, whichever test or worker asks).  nvdisasm costs ~0.5 s of CPU
    a cubin however small (its start-up), and tests of one kernel each read its SASS:
    the fast tier disassembled 12 of 80 cubins twice or more (2026-11-29).  nvdisasm is
    run directly, as cuobjdump runs it but without its dataflow pass
    (NVDISASM_AS_CUOBJDUMP), with cuobjdump's header line; cuobjdump itself where
    nvdisasm is not found.  `scratch`: a folder for the cubin's file (a test's
    tmp_path; by default a temporary one)."""
    from tileir.backend.target.toolchain import find_cuda_tool

    def run(folder: Path) -> str:
        path = folder / f"{hashlib.sha256(cubin).hexdigest()[:16]}.cubin"
        path.write_bytes(cubin)
        nvdisasm = find_cuda_tool("nvdisasm")
        if nvdisasm is None:
            return subprocess.run([find_cuda_tool("cuobjdump"), "-sass", str(path)],
                                  capture_output=True, text=True, check=True).stdout
        text = subprocess.run([nvdisasm, *NVDISASM_AS_CUOBJDUMP, str(path)],
                              capture_output=True, text=True, check=True).stdout
        target = re.search(r"^\s*\.target\s+(\S+)", text, re.M)
        return f"\n\tcode for {target.group(1)}\n{text}" if target else text

    def disassemble() -> str:
        if scratch is not None:
            return run(scratch)
        with tempfile.TemporaryDirectory(prefix="tileir-sass-") as folder:
            return run(Path(folder))

    if _SESSION_DIR is None:                # (a helper called outside a test)
        return disassemble()
    return session_memo(_SESSION_DIR, "sass", cubin, disassemble)


@pytest.fixture
def rng():
    """Fresh random inputs every run; the seed is printed on failure."""
    seed = np.random.SeedSequence().entropy % 2**32
    print(f"seed={seed}")
    return np.random.default_rng(seed)


def refused_at_the_line(kernel, args, exc, message: str, filename: str):
    """Compiling `kernel` for `args` (to the frontend stage) raises `exc`, whose text
    holds `message` and names `filename` (the kernel's line); returns the error."""
    with pytest.raises(exc) as info:
        kernel.compile(args, stage="frontend")
    assert message in str(info.value), str(info.value)
    assert filename in str(info.value), str(info.value)
    return info.value
