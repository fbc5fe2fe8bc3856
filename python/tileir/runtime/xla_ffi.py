"""The XLA FFI launch of `tileir.jax.cutile_call` on JAX's CUDA backend.

A cutile_call traced for JAX's GPU backend becomes one XLA custom call to the FFI
target `tileir_cutile_call`, whose handler is C (`_xla_ffi.c`): at execution XLA
hands it its stream and its device buffers, and it launches the compiled kernel with
no Python in between.  Everything fixed at trace time is prepared here, once per
distinct call, and filed in the handler's registry of *calls*:

- `describe_call` (no GPU needed): given the kernel compiled (by tileir.jax) for the
  buffers' shapes and dtypes, stood in for by `StandIn`s, lays out its parameter
  buffer per the kernel ABI (docs/gpu-backend.md): dims, strides, scalars and a
  persistent kernel's walked grid written, and for each array where its buffer's
  address goes (an operand's or a result's) and how it must be aligned; for each TMA
  descriptor the arguments of cuTensorMapEncodeTiled but the address.  Its `key` is a
  fingerprint of all that and of the cubin.
- `load_devices` (GPU): the kernel loaded on each GPU JAX may run it on, its
  hardware grid there (`file_call` loads and files a call once per key).
- `add_call`: copies both into the C registry; the custom call carries the call's
  index and key as attributes (`tileir_call`, `tileir_key`).  Calls are never
  freed, so no executable outlives its call; an index is checked against the key.

The handler is compiled on first use (`library`), against the XLA FFI header of the
jaxlib that will call it (`jax.ffi.include_dir()`), into the compile cache's
directory (`xla-ffi/` under TILEIR_CACHE_DIR), keyed by the source, the header and
the compiler: so it always speaks the running jaxlib's FFI API version, and is built
once per jaxlib.  No Python headers are needed: it is a plain shared library loaded
with ctypes.  Without a C compiler or the header, `XlaFfiUnavailable` says why and
tileir.jax launches through `jax.experimental.buffer_callback` instead.

Under vmap every buffer carries the same number of leading batch dims (the batching
rule in tileir.jax adds them); the handler launches the kernel once per batch
element.  An array batched with an element size that is not a multiple of 16 bytes
is compiled as not aligned (its elements' addresses are not).

For tests without a GPU, `record(1)` swaps the driver for fakes that record each
launch (its function, grid, block, shared memory, stream and parameter bytes;
`records()`) and write each tensor map's encoding arguments into its 128 bytes.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import math
import os
import platform as _platform
import shlex
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import dtypes as dt
from .. import knobs
from ..errors import TileError, TileValueError
from ..specialization import ArraySpec

TARGET = "tileir_cutile_call"
SOURCE = Path(__file__).with_name("_xla_ffi.c")
LAUNCH_HEADER = Path(__file__).with_name("_cuda_launch.h")   # shared with _fastlaunch.c
FLAGS = ("-O2", "-std=c11", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden",
         "-Wall", "-Wextra")
MAX_RANK = 16
MAX_PARAMS = 4096           # bytes: what a kernel parameter buffer may hold
_TENSOR_MAP_ALIGN = 64
_FAKE_ADDRESS = 1 << 32     # where a stand-in's bytes pretend to be (aligned)

# XLA_FFI_DataType (xla_data.proto's PrimitiveType) of each tileir dtype
_XLA_DTYPES = {
    "bool_": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "uint8": 6, "uint16": 7,
    "uint32": 8, "uint64": 9, "float16": 10, "float32": 11, "float64": 12, "bfloat16": 16,
    "float8_e5m2": 19, "float8_e4m3fn": 20,
}


class XlaFfiUnavailable(TileError):
    """tileir's XLA FFI handler cannot be built, loaded or registered here (the message
    says why); tileir.jax then launches through jax.experimental.buffer_callback."""


class NotForFfi(TileError):
    """A kernel the FFI handler does not launch (a stream-K kernel, which needs a
    workspace per stream): tileir.jax launches it through buffer_callback."""


# ---------------------------------------------------------------------------
# The C side's structures (_xla_ffi.c)
# ---------------------------------------------------------------------------
class BufferSpec(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.c_int64 * MAX_RANK), ("nbytes", ctypes.c_int64)]


class PointerSpec(ctypes.Structure):
    _fields_ = [("result", ctypes.c_int32), ("index", ctypes.c_int32),
                ("offset", ctypes.c_uint32), ("align", ctypes.c_uint32)]


class MapSpec(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint32), ("pointer", ctypes.c_uint32),
                ("data_type", ctypes.c_int32), ("interleave", ctypes.c_int32),
                ("swizzle", ctypes.c_int32), ("l2_promotion", ctypes.c_int32),
                ("oob_fill", ctypes.c_int32), ("rank", ctypes.c_uint32),
                ("dims", ctypes.c_uint64 * 5), ("strides", ctypes.c_uint64 * 4),
                ("box", ctypes.c_uint32 * 5), ("element_strides", ctypes.c_uint32 * 5)]


class DeviceSpec(ctypes.Structure):
    _fields_ = [("ordinal", ctypes.c_int32), ("grid", ctypes.c_uint32 * 3),
                ("context", ctypes.c_void_p), ("function", ctypes.c_void_p)]


class CallSpec(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("key", ctypes.c_uint64),
                ("block", ctypes.c_uint32 * 3), ("shared", ctypes.c_uint32),
                ("programmatic", ctypes.c_int32),
                ("params", ctypes.c_char_p), ("params_size", ctypes.c_uint32),
                ("slots", ctypes.POINTER(ctypes.c_uint32)), ("nslots", ctypes.c_uint32),
                ("pointers", ctypes.POINTER(PointerSpec)), ("npointers", ctypes.c_uint32),
                ("maps", ctypes.POINTER(MapSpec)), ("nmaps", ctypes.c_uint32),
                ("operands", ctypes.POINTER(BufferSpec)), ("noperands", ctypes.c_uint32),
                ("results", ctypes.POINTER(BufferSpec)), ("nresults", ctypes.c_uint32),
                ("devices", ctypes.POINTER(DeviceSpec)), ("ndevices", ctypes.c_uint32)]


class LaunchRecord(ctypes.Structure):
    _fields_ = [("function", ctypes.c_void_p), ("stream", ctypes.c_void_p),
                ("context", ctypes.c_void_p), ("grid", ctypes.c_uint32 * 3),
                ("block", ctypes.c_uint32 * 3), ("shared", ctypes.c_uint32),
                ("programmatic", ctypes.c_int32), ("params_size", ctypes.c_uint32),
                ("params", ctypes.c_uint8 * MAX_PARAMS)]


# ---------------------------------------------------------------------------
# Building and loading the handler
# ---------------------------------------------------------------------------
_lock = threading.RLock()
_library: ctypes.CDLL | None = None


def compiler() -> list[str]:
    """The C compiler command: TILEIR_CC, else cc, gcc or clang on PATH."""
    given = knobs.CC.raw().strip()
    if given:
        return shlex.split(given)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    raise XlaFfiUnavailable("no C compiler to build tileir's XLA FFI handler: none of cc, "
                            "gcc, clang is on PATH (or name one with TILEIR_CC)")


def header_dir() -> str:
    """jaxlib's include directory (`jax.ffi.include_dir()`), holding the XLA FFI C API."""
    import jax
    if not hasattr(jax, "ffi"):
        raise XlaFfiUnavailable(f"JAX {jax.__version__} has no jax.ffi (0.4.38 and later do)")
    include = jax.ffi.include_dir()
    if not Path(include, "xla", "ffi", "api", "c_api.h").is_file():
        raise XlaFfiUnavailable(f"this jaxlib ships no XLA FFI header "
                                f"({include}/xla/ffi/api/c_api.h is missing)")
    return include


def build(include: str | None = None, out_dir: str | os.PathLike | None = None) -> Path:
    """The handler library compiled against the XLA FFI header in `include`, built
    once into `out_dir` (default: `xla-ffi/` in the compile cache, or a temporary
    directory where the cache is off or cannot be written); its path."""
    include = include or header_dir()
    cc = compiler()
    source = SOURCE.read_bytes() + LAUNCH_HEADER.read_bytes()
    header = Path(include, "xla", "ffi", "api", "c_api.h").read_bytes()
    digest = hashlib.sha256(b"\0".join([source, header, " ".join(cc + list(FLAGS)).encode(),
                                        _platform.machine().encode()])).hexdigest()[:16]
    folder = Path(out_dir) if out_dir is not None else _output_dir()
    lib = folder / f"tileir_xla_ffi-{digest}.so"
    if lib.is_file():
        return lib
    scratch = folder / f".tmp-{lib.name}-{uuid.uuid4().hex[:8]}"
    command = [*cc, *FLAGS, f"-I{include}", str(SOURCE), "-o", str(scratch)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise XlaFfiUnavailable(f"cannot run the C compiler ({e}): {shlex.join(command)}") \
            from None
    if done.returncode != 0:
        scratch.unlink(missing_ok=True)
        raise XlaFfiUnavailable(f"compiling tileir's XLA FFI handler failed:\n"
                                f"{done.stderr.strip()}\nreproduce with: {shlex.join(command)}")
    os.replace(scratch, lib)              # atomic: another process sees all of it or none
    return lib


def _output_dir() -> Path:
    if knobs.cache_enabled():
        folder = Path(os.path.expanduser(knobs.cache_dir())) / "xla-ffi"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".probe-{uuid.uuid4().hex[:8]}"
            probe.touch()
            probe.unlink()
            return folder
        except OSError:
            pass                          # a read-only cache: a private directory then
    return Path(tempfile.mkdtemp(prefix="tileir-xla-ffi-"))


def library() -> ctypes.CDLL:
    """The handler library, built on first use and loaded once per process."""
    global _library
    with _lock:
        if _library is None:
            path = build()
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as e:
                raise XlaFfiUnavailable(f"cannot load {path}: {e}") from None
            _declare(lib)
            _library = lib
        return _library


def _declare(lib: ctypes.CDLL) -> None:
    lib.tileir_xla_ffi_add_call.argtypes = [ctypes.POINTER(CallSpec), ctypes.c_char_p,
                                            ctypes.c_size_t]
    lib.tileir_xla_ffi_add_call.restype = ctypes.c_int64
    lib.tileir_xla_ffi_set_driver.argtypes = [ctypes.c_void_p] * 7
    lib.tileir_xla_ffi_set_driver.restype = None
    lib.tileir_xla_ffi_api_version.restype = ctypes.c_int
    lib.tileir_xla_ffi_calls.restype = ctypes.c_int64
    lib.tileir_xla_ffi_record.argtypes = [ctypes.c_int]
    lib.tileir_xla_ffi_record.restype = None
    lib.tileir_xla_ffi_records.argtypes = [ctypes.POINTER(LaunchRecord), ctypes.c_int]
    lib.tileir_xla_ffi_records.restype = ctypes.c_int


def api_version() -> tuple[int, int]:
    """The XLA FFI API version (major, minor) the handler was compiled against."""
    v = library().tileir_xla_ffi_api_version()
    return divmod(v, 1000)


_registered: set[tuple[str, str]] = set()


def register(platform: str = "CUDA", target: str = TARGET) -> None:
    """Registers the handler as XLA FFI target `target` for `platform` (once); XLA
    checks there that it speaks an FFI API version this jaxlib supports."""
    import jax
    with _lock:
        if (platform, target) in _registered:
            return
        lib = library()
        try:
            jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(lib.tileir_xla_ffi_call),
                                        platform=platform)
        except Exception as e:          # (XLA's own error types vary between jaxlibs)
            raise XlaFfiUnavailable(f"XLA refused tileir's FFI handler for {platform} "
                                    f"(built for XLA FFI API "
                                    f"{'.'.join(map(str, api_version()))}): {e}") from None
        _registered.add((platform, target))


_driver_set = False


def set_driver() -> None:
    """Hands the handler the CUDA driver's entry points (once)."""
    global _driver_set
    with _lock:
        if _driver_set:
            return
        from . import driver
        try:
            ctx_get, ctx_set = driver.context_addresses()
            cuda = ctypes.CDLL("libcuda.so.1")
            addresses = [ctypes.cast(getattr(cuda, name), ctypes.c_void_p).value
                         for name in ("cuStreamGetCtx", "cuTensorMapEncodeTiled",
                                      "cuGetErrorName")]
            launch, launch_ex = driver.launch_address(), driver.launch_ex_address()
        except (TileError, OSError, AttributeError) as e:
            raise XlaFfiUnavailable(f"the CUDA driver's entry points are not at hand: {e}") \
                from None
        library().tileir_xla_ffi_set_driver(launch, launch_ex, ctx_get, ctx_set, *addresses)
        _driver_set = True


# ---------------------------------------------------------------------------
# Describing a call (no GPU needed)
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class StandIn(ArraySpec):
    """A buffer of the custom call as a kernel argument at trace time: an `ArraySpec`
    (what the kernel is compiled for) with its shape, and which buffer it is: operand
    or result `index`.  Compared by identity."""

    shape: tuple[int, ...] = ()
    result: bool = False
    index: int = 0


@dataclasses.dataclass(frozen=True)
class Device:
    """What a call is compiled for: the target, the GPU's SM count and L2 size (for the
    specialization), and the ordinals of the GPUs JAX may run it on."""

    target: str
    sm_count: int | None
    l2_bytes: int
    ordinals: tuple[int, ...]


def stand_in(shape: Sequence[int], dtype: Any, *, result: bool, index: int, batched: bool,
             device: Device) -> StandIn:
    """The stand-in of one buffer (one batch element's part of it when `batched`): aligned
    unless batched with elements whose size is not a multiple of 16 bytes; large as
    `runtime.arrays.large` says for its size."""
    d = dt.from_any(dtype)
    if d is None or d.name not in _XLA_DTYPES:
        raise NotForFfi(f"XLA FFI buffers of dtype {dtype} are not handled")
    shape = tuple(int(n) for n in shape)
    nbytes = math.prod(shape) * max(1, d.bits // 8)
    from .arrays import LARGE_L2_MULTIPLE
    return StandIn(d, len(shape), aligned=not batched or nbytes % 16 == 0,
                   large=nbytes >= LARGE_L2_MULTIPLE * device.l2_bytes, shape=shape,
                   result=result, index=index)


def buffer_spec(shape: Sequence[int], dtype: Any) -> tuple[int, tuple[int, ...], int]:
    """(XLA dtype, shape, bytes) of a buffer as the handler checks it."""
    d = dt.from_any(dtype)
    if d is None or d.name not in _XLA_DTYPES:
        raise NotForFfi(f"XLA FFI buffers of dtype {dtype} are not handled")
    shape = tuple(int(n) for n in shape)
    if len(shape) > MAX_RANK:
        raise NotForFfi(f"XLA FFI buffers of rank {len(shape)} (more than {MAX_RANK}, batch "
                        f"dims included) are not handled")
    return _XLA_DTYPES[d.name], shape, math.prod(shape) * max(1, d.bits // 8)


@dataclasses.dataclass
class CallDescription:
    """One call, as `describe_call` lays it out (see the module doc)."""

    name: str
    key: int
    compiled: Any                       # the CompiledKernel
    grid: tuple[int, int, int]          # the hardware grid (a persistent kernel's: per device)
    block: tuple[int, int, int]
    shared: int
    programmatic: bool
    params: bytes                       # the parameter buffer, from a 64-byte aligned base
    slots: list[int]                    # each ABI slot's offset in it
    pointers: list[tuple[int, int, int, int]]   # (result?, index, offset, align)
    maps: list[tuple[int, int, dict]]   # (offset, pointer, cuTensorMapEncodeTiled's args)
    operands: list[tuple[int, tuple[int, ...], int]]
    results: list[tuple[int, tuple[int, ...], int]]


def describe_call(ck, grid: tuple[int, int, int], args: Sequence[Any],
                  operands: Sequence[tuple], results: Sequence[tuple],
                  target: str) -> CallDescription:
    """Lays out the launch of `ck` (the kernel compiled for `args`, launch arguments whose
    arrays are `StandIn`s) over the hardware grid `grid` (`kernel.hardware_grid`) with
    the custom call's `operands` and `results` (`buffer_spec`s); see the module doc."""
    from . import launcher, tensor_maps
    meta = ck.meta
    name = meta["name"]
    if meta.get("workspace"):
        raise NotForFfi(f"kernel '{name}' is a stream-K kernel: its workspace is per stream")
    logical = launcher.check_grid(name, grid)
    leaves = ck.runtime_args(args)
    if len(leaves) != len(meta["params"]):
        raise TileValueError(f"kernel '{name}' takes {len(meta['params'])} runtime arguments, "
                             f"got {len(leaves)}")
    values: list = []
    arrays: dict[int, tuple[int, StandIn]] = {}      # param index -> (slot, stand-in)
    for j, (spec, leaf) in enumerate(zip(meta["params"], leaves)):
        if spec["kind"] == "array":
            if not isinstance(leaf, StandIn):
                raise TileValueError(f"argument '{spec['name']}' of kernel '{name}' is an "
                                     f"array parameter, got {type(leaf).__name__}")
            arrays[j] = (len(values), leaf)
            values += launcher.pack_array(_info(leaf, name, spec["name"]))
        else:
            what = f"argument '{spec['name']}' of kernel '{name}'"
            values.append(launcher.pack_scalar(launcher.param_dtype(name, spec), leaf, what))
    if meta.get("persistent"):
        values += [ctypes.c_int32(g) for g in logical]
    maps = []
    for tm in meta.get("tensor_maps", ()):
        j = tm["param"]
        slot, leaf = arrays[j]
        info = _info(leaf, name, meta["params"][j]["name"])
        box = tensor_maps.clipped_box(tm["box"], tm.get("clip"), info.shape)
        encode = tensor_maps.encode_args(info, box, tm["swizzle"], name,
                                         meta["params"][j]["name"])
        maps.append((len(values), j, encode))
        values.append(tensor_maps.TensorMap())
    offsets, size = _layout(values)
    if size > MAX_PARAMS:
        raise NotForFfi(f"kernel '{name}' takes {size} bytes of parameters; the FFI handler "
                        f"passes at most {MAX_PARAMS}")
    buffer = bytearray(size)
    for v, at in zip(values, offsets):
        buffer[at:at + ctypes.sizeof(v)] = bytes(v)
    index_of = {j: i for i, j in enumerate(sorted(arrays))}
    pointers = [(int(leaf.result), leaf.index, offsets[slot], 16 if leaf.aligned else 1)
                for slot, leaf in (arrays[j] for j in sorted(arrays))]
    map_specs = [(offsets[slot], index_of[j], encode) for slot, j, encode in maps]
    block = launcher.block_of(meta)
    shared = int(meta["shared_bytes"])
    programmatic = launcher.programmatic(meta)
    key_text = repr(("tileir-xla-ffi", 1, name, target,
                     hashlib.sha256(bytes(ck.cubin)).hexdigest(), logical, block, shared,
                     programmatic, bytes(buffer).hex(), offsets, pointers,
                     [(o, p, sorted((k, str(v)) for k, v in e.items() if k != "address"))
                      for o, p, e in map_specs], list(operands), list(results)))
    key = int(hashlib.sha256(key_text.encode()).hexdigest()[:15], 16)   # a positive i64
    return CallDescription(name, key, ck, logical, block, shared, programmatic, bytes(buffer),
                           offsets, pointers, map_specs, list(operands), list(results))


def _info(leaf: StandIn, kernel: str, param: str):
    """A `DeviceArrayInfo` of the stand-in: row-major strides, an address as aligned as
    the stand-in says (the handler writes the real one)."""
    from .arrays import DeviceArrayInfo
    for axis, n in enumerate(leaf.shape):
        if n >= 1 << 31:
            raise TileValueError(f"argument '{param}' of kernel '{kernel}' has {n} elements "
                                 f"along axis {axis}; kernels take 32-bit dims: split it")
    strides, step = [], 1
    for n in reversed(leaf.shape):
        strides.append(step)
        step *= n
    d = dt.from_any(leaf.dtype)
    address = _FAKE_ADDRESS if leaf.aligned else _FAKE_ADDRESS + max(1, d.bits // 8)
    return DeviceArrayInfo(address, tuple(leaf.shape), tuple(reversed(strides)), d,
                           ("cuda", 0))


def _layout(values) -> tuple[list[int], int]:
    """Each slot's offset at its natural alignment (a tensor map's at 64, as
    `dispatch._Parameters` lays them out), and the buffer's size."""
    offsets, end = [], 0
    for v in values:
        size = ctypes.sizeof(v)
        align = _TENSOR_MAP_ALIGN if size > 8 else size
        end = (end + align - 1) // align * align
        offsets.append(end)
        end += size
    return offsets, end


# ---------------------------------------------------------------------------
# Loading it on the GPUs and filing it
# ---------------------------------------------------------------------------
def load_devices(desc: CallDescription, images: Callable[[int], bytes],
                 ordinals: Sequence[int]) -> list[tuple]:
    """(ordinal, hardware grid, primary context, function) of the call on each GPU of
    `ordinals`, loading `images(ordinal)` there (`kernel.launch_image`)."""
    from . import driver, launcher
    meta = desc.compiled.meta
    out = []
    for ordinal in ordinals:
        image = images(ordinal)
        with driver.device_context(ordinal):
            function = launcher._function(image, meta, ordinal, desc.block[0], desc.shared)
        grid = launcher.launch_grid(meta, desc.grid, ordinal, function)
        out.append((ordinal, grid, driver.primary_handle(ordinal), int(function)))
    return out


def add_call(desc: CallDescription, devices: Sequence[tuple]) -> int:
    """Files the call in the handler's registry: its index."""
    lib = library()

    def array(ctype, items):
        return (ctype * max(1, len(items)))(*items)

    def buffers(specs):
        out = []
        for dtype, shape, nbytes in specs:
            b = BufferSpec(dtype, len(shape))
            b.dims[:len(shape)] = shape
            b.nbytes = nbytes
            out.append(b)
        return array(BufferSpec, out)

    maps = []
    cu = _map_enums() if desc.maps else None
    for offset, pointer, e in desc.maps:
        m = MapSpec(offset, pointer, cu["data_type"][e["data_type"]], 0,
                    cu["swizzle"][e["swizzle"]], cu["l2"], 0, e["rank"])
        m.dims[:e["rank"]] = e["dims"]
        m.strides[:e["rank"] - 1] = e["strides"]
        m.box[:e["rank"]] = e["box"]
        m.element_strides[:e["rank"]] = e["element_strides"]
        maps.append(m)
    kept = dict(slots=array(ctypes.c_uint32, desc.slots),
                pointers=array(PointerSpec, [PointerSpec(*p) for p in desc.pointers]),
                maps=array(MapSpec, maps), operands=buffers(desc.operands),
                results=buffers(desc.results),
                devices=array(DeviceSpec, [DeviceSpec(o, (ctypes.c_uint32 * 3)(*g), c, f)
                                           for o, g, c, f in devices]))
    spec = CallSpec(name=desc.name.encode(), key=desc.key,
                    block=(ctypes.c_uint32 * 3)(*desc.block), shared=desc.shared,
                    programmatic=int(desc.programmatic), params=desc.params,
                    params_size=len(desc.params), nslots=len(desc.slots),
                    npointers=len(desc.pointers), nmaps=len(maps),
                    noperands=len(desc.operands), nresults=len(desc.results),
                    ndevices=len(devices), **kept)
    error = ctypes.create_string_buffer(256)
    index = lib.tileir_xla_ffi_add_call(ctypes.byref(spec), error, len(error))
    if index < 0:
        raise TileError(f"tileir's XLA FFI handler refused the call of kernel "
                        f"'{desc.name}': {error.value.decode()}")
    return index


def _map_enums() -> dict:
    """cuTensorMapEncodeTiled's enum values, from cuda.bindings (no driver call)."""
    from . import driver
    cu = driver._import_driver()
    from .tensor_maps import L2_PROMOTION, _DATA_TYPES, _SWIZZLES
    return {"data_type": {n: int(getattr(cu.CUtensorMapDataType,
                                         "CU_TENSOR_MAP_DATA_TYPE_" + n))
                          for n in set(_DATA_TYPES.values())},
            "swizzle": {n: int(getattr(cu.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + n))
                        for n in _SWIZZLES.values()},
            "l2": int(getattr(cu.CUtensorMapL2promotion,
                              "CU_TENSOR_MAP_L2_PROMOTION_" + L2_PROMOTION))}


_calls: dict[int, int] = {}           # key -> index: a call traced again is filed once


def file_call(desc: CallDescription, images: Callable[[int], bytes],
              ordinals: Sequence[int]) -> int:
    """The index of the call in the handler's registry: loaded on the GPUs `ordinals`
    (`images(ordinal)`: what to load there) and filed the first time its key is seen in
    this process."""
    with _lock:
        index = _calls.get(desc.key)
        if index is None:
            set_driver()
            devices = load_devices(desc, images, ordinals)
            index = _calls[desc.key] = add_call(desc, devices)
    return index


# ---------------------------------------------------------------------------
# The recorder (tests)
# ---------------------------------------------------------------------------
def record(mode: int) -> None:
    """0: launch through the driver; 1: record launches instead (a fake driver); 2:
    record them and fail each one (CUDA_ERROR_ILLEGAL_ADDRESS)."""
    library().tileir_xla_ffi_record(mode)


def records() -> list[dict]:
    """The launches recorded since the last call: function, stream, context, grid,
    block, shared, programmatic and the parameter buffer's bytes."""
    out = (LaunchRecord * 64)()
    n = library().tileir_xla_ffi_records(out, 64)
    return [dict(function=r.function or 0, stream=r.stream or 0, context=r.context or 0,
                 grid=tuple(r.grid), block=tuple(r.block), shared=r.shared,
                 programmatic=bool(r.programmatic), params=bytes(r.params[:r.params_size]))
            for r in out[:n]]


__all__ = ["CallDescription", "Device", "NotForFfi", "StandIn", "TARGET", "XlaFfiUnavailable",
           "add_call", "api_version", "buffer_spec", "build", "compiler", "describe_call",
           "file_call", "header_dir", "library", "load_devices", "record", "records",
           "register", "set_driver", "stand_in"]
