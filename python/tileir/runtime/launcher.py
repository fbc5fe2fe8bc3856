"""Launching a compiled kernel: check the arguments, pack them per the ABI, call the driver.

`launch(cubin, meta, grid, args, stream)` takes the kernel metadata of
docs/gpu-backend.md, whose `params` list the *runtime* parameters only (the
caller drops `Constant` arguments).  Everything that can be wrong with the
arguments is reported before the driver is touched; `bind_args` does that part
and packs the parameters, without a GPU, so it is tested on any machine.

Parameters are packed as the driver's `void **kernelParams`: one ctypes value per
ABI slot (array: u64 pointer, ndim x i32 dims, ndim x i64 strides in elements;
scalars at their width, i1 as one byte 0/1, f16/bf16 as 16-bit patterns; then
one 128-byte CUtensorMap per metadata `tensor_maps` entry, `runtime.tensor_maps`)
and an array of pointers to them, passed by address.  We pack ourselves rather than hand
cuda.bindings a `((values), (ctypes types))` tuple so the bytes the kernel reads are
exactly the ones the tests inspect, whatever the bindings' converters do.

Stream rule: an explicit `stream` is used as given (an int handle, a torch or cupy
stream, a cuda.bindings `CUstream`, or anything with `__cuda_stream__`).
`stream=None` means the current stream of the library that owns the array
arguments, so a launch orders with that library's work: torch's
`torch.cuda.current_stream(device)` for torch tensors, else cupy's current stream
for cupy arrays, else the legacy default stream (handle 0).
"""

from __future__ import annotations

import ctypes
import dataclasses
import sys
from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes as dt
from .. import knobs
from ..errors import TileTypeError, TileValueError
from .arrays import DeviceArrayInfo, aligned, describe

I32_MAX = 2**31 - 1
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_THREADS = 1024

_INT_CTYPES = {
    dt.int8: ctypes.c_int8, dt.int16: ctypes.c_int16, dt.int32: ctypes.c_int32,
    dt.int64: ctypes.c_int64, dt.uint8: ctypes.c_uint8, dt.uint16: ctypes.c_uint16,
    dt.uint32: ctypes.c_uint32, dt.uint64: ctypes.c_uint64,
}
_FLOAT_CTYPES = {dt.float32: ctypes.c_float, dt.float64: ctypes.c_double}
_HALF_NUMPY = {dt.float16: lambda: np.dtype(np.float16), dt.bfloat16: lambda: dt.bfloat16.numpy}


class PackedParams:
    """Kernel parameters as the driver reads them: one ctypes value per ABI slot.

    `address` is a `void **` to pass as cuLaunchKernel's `kernelParams`; it stays
    valid while this object lives (the driver copies the values at launch).
    """

    def __init__(self, values: Sequence[ctypes._SimpleCData]):
        self.values = tuple(values)
        self._pointers = (ctypes.c_void_p * len(self.values))(
            *(ctypes.addressof(v) for v in self.values))

    @property
    def address(self) -> int:
        return ctypes.addressof(self._pointers) if self.values else 0

    def raw(self) -> list[bytes]:
        """Each slot's bytes as the kernel receives them (little-endian)."""
        return [bytes(v) for v in self.values]

    def __len__(self) -> int:
        return len(self.values)


@dataclasses.dataclass(frozen=True)
class BoundArgs:
    """Checked and packed arguments of one launch; `device` is None when no array says."""

    kernel: str
    device: int | None
    params: PackedParams


# ---------------------------------------------------------------------------
# Checking and packing (pure: no driver)
# ---------------------------------------------------------------------------
def bind_args(meta: Mapping[str, Any], args: Sequence[Any],
              grid: Sequence[int] | None = None) -> BoundArgs:
    """Checks `args` against the metadata's runtime params and packs them (a persistent
    kernel's `grid`, the one it walks, after them)."""
    kernel = _field(meta, "name")
    params = _field(meta, "params")
    if len(args) != len(params):
        names = ", ".join(p.get("name", "?") for p in params)
        raise TileTypeError(f"kernel '{kernel}' takes {len(params)} runtime arguments "
                            f"({names}), got {len(args)}; Constant arguments are compiled in "
                            f"and must not be passed to the runtime launch")
    values: list[ctypes._SimpleCData] = []
    device: tuple[str, int] | None = None       # (parameter name, ordinal) of the first array
    infos: dict[int, DeviceArrayInfo] = {}
    for i, (spec, arg) in enumerate(zip(params, args)):
        kind = spec.get("kind")
        if kind == "array":
            info = check_array(kernel, spec, arg)
            infos[i] = info
            device = _same_device(kernel, device, spec["name"], info)
            values += pack_array(info)
        elif kind == "scalar":
            what = f"argument '{spec['name']}' of kernel '{kernel}'"
            values.append(pack_scalar(param_dtype(kernel, spec), arg, what))
        else:
            raise TileValueError(f"metadata of kernel '{kernel}' has a parameter of kind "
                                 f"{kind!r}; kinds are 'array' and 'scalar'")
    if meta.get("persistent"):
        if grid is None:
            raise TileValueError(f"kernel '{kernel}' is persistent: its launch needs the grid")
        values += [ctypes.c_int32(int(g)) for g in grid]
    if meta.get("workspace"):                # stream-K: set per stream at launch
        values.append(ctypes.c_uint64(0))
    if meta.get("tensor_maps"):              # TMA descriptors trail the parameters
        from .tensor_maps import pack_tensor_maps
        values += pack_tensor_maps(meta, infos)
    return BoundArgs(kernel, device[1] if device else None, PackedParams(values))


def persistent_grid(meta: Mapping[str, Any], grid: tuple[int, int, int],
                    sm_count: int, active_clusters: int | None = None) -> tuple[int, int, int]:
    """The grid a kernel runs on: `grid`, or for a persistent kernel (which walks the
    tiles of `grid` itself) one block per SM, at most one per tile; whole clusters for
    a kernel of clusters (a cluster pair walks pairs of tiles), as many as fit the GPU
    at once (`active_clusters`, the driver's count, else one per `size` SMs)."""
    if not meta.get("persistent"):
        return grid
    tiles = grid[0] * grid[1] * grid[2]
    size = cluster_size(meta)
    fit = active_clusters if active_clusters is not None else sm_count // size
    clusters = max(1, min(-(-tiles // size), fit))
    return (clusters * size, 1, 1)


def cluster_size(meta: Mapping[str, Any]) -> int:
    size = 1
    for d in meta.get("cluster") or (1,):
        size *= int(d)
    return size


def launch_grid(meta: Mapping[str, Any], grid: tuple[int, int, int], device: int,
                function) -> tuple[int, int, int]:
    """`persistent_grid` on `device`, asking the driver how many clusters of `function`
    fit when the kernel is a persistent kernel of clusters."""
    from . import driver
    sms = driver.sm_count(device)
    active = None
    if meta.get("persistent") and cluster_size(meta) > 1:
        with driver.device_context(device):
            active = driver.max_active_clusters(function, sms // cluster_size(meta) *
                                                cluster_size(meta), block_of(meta)[0],
                                                int(_field(meta, "shared_bytes")))
    return persistent_grid(meta, grid, sms, active)


def check_array(kernel: str, spec: Mapping[str, Any], arg: Any) -> DeviceArrayInfo:
    """The description of array argument `arg`, after checking it against `spec`."""
    name = spec["name"]
    what = f"argument '{name}' of kernel '{kernel}'"
    info = describe(arg, name=name, kernel=kernel)
    if not info.is_cuda:
        raise TileValueError(f"{what} is in host memory ({type(arg).__name__}), but the GPU "
                             f"kernel needs device memory: move it with .cuda() (torch) or "
                             f"cupy.asarray(), or run the kernel in the interpreter with "
                             f"TILEIR_INTERPRET=1")
    want = param_dtype(kernel, spec)
    if info.dtype != want:
        raise TileTypeError(f"{what} was specialized for {want.name} arrays but got "
                            f"{info.dtype.name}{_bool_hint(want, info.dtype)}")
    if info.ndim != spec["ndim"]:
        raise TileTypeError(f"{what} was specialized for {spec['ndim']}-d arrays but got a "
                            f"{info.ndim}-d array of shape {info.shape}")
    for axis, size in enumerate(info.shape):
        if size > I32_MAX:
            raise TileValueError(f"{what} has {size} elements along axis {axis}; kernels take "
                                 f"32-bit dims (at most {I32_MAX}): split the array")
    if spec.get("aligned") and not aligned(info):
        raise TileValueError(
            f"{what} was specialized for aligned arrays (base address % 16 == 0, last-dim "
            f"stride 1, other strides a multiple of 16 bytes) but this one is not: base "
            f"0x{info.ptr:x}, strides {info.strides} in {info.itemsize}-byte elements. "
            f"tileir.launch picks the unaligned variant itself; elsewhere pass a contiguous "
            f"copy or compile for unaligned arrays")
    return info


def _bool_hint(want: dt.DType, got: dt.DType) -> str:
    if {want, got} & {dt.bool_} and {want, got} & {dt.uint8, dt.int8}:
        return (" (bool and 8-bit integer arrays share a layout but not a type: convert "
                "with .bool() / .to(torch.uint8) or .astype(...), or recompile for this dtype)")
    return ""


def _same_device(kernel: str, first: tuple[str, int] | None, name: str,
                 info: DeviceArrayInfo) -> tuple[str, int] | None:
    ordinal = info.device[1]
    if ordinal is None:            # an empty array from a producer that cannot say
        return first
    if first is None:
        return (name, ordinal)
    if first[1] != ordinal:
        raise TileValueError(f"arguments of kernel '{kernel}' are on different devices: "
                             f"'{first[0]}' on cuda:{first[1]}, '{name}' on cuda:{ordinal}; "
                             f"move them to one device")
    return first


def pack_array(info: DeviceArrayInfo) -> list[ctypes._SimpleCData]:
    """ABI slots of an array: u64 pointer, then ndim x i32 dims, then ndim x i64 strides."""
    return ([ctypes.c_uint64(info.ptr)]
            + [ctypes.c_int32(n) for n in info.shape]
            + [ctypes.c_int64(s) for s in info.strides])


def pack_scalar(d: dt.DType, value: Any, what: str = "the scalar") -> ctypes._SimpleCData:
    """The ABI slot of a scalar of dtype `d`, range-checked."""
    if d.is_bool:
        if not isinstance(value, (bool, np.bool_)):
            raise TileTypeError(f"{what} is a bool parameter; got {type(value).__name__} "
                                f"{value!r}")
        return ctypes.c_uint8(1 if value else 0)
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TileTypeError(f"{what} is a {d.name} parameter; got {type(value).__name__} "
                            f"{value!r}")
    if d.is_int:
        return _pack_int(d, value, what)
    return _pack_float(d, value, what)


def _pack_int(d: dt.DType, value: Any, what: str) -> ctypes._SimpleCData:
    if not isinstance(value, (int, np.integer)):
        raise TileTypeError(f"{what} is a {d.name} parameter; got the float {value!r}")
    lo, hi = (-(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1) if d.is_signed else \
        (0, (1 << d.bits) - 1)
    v = int(value)
    if not lo <= v <= hi:
        raise TileValueError(f"{what} is {v}, out of range for {d.name} [{lo}, {hi}]")
    return _INT_CTYPES[d](v)


def _pack_float(d: dt.DType, value: Any, what: str) -> ctypes._SimpleCData:
    try:
        v = float(value)
    except OverflowError:
        raise TileValueError(f"{what} is {value}, too large for {d.name}") from None
    if d in _FLOAT_CTYPES:
        if d == dt.float32:
            _check_finite(np.float32, v, d, what)
        return _FLOAT_CTYPES[d](v)
    np_type = _HALF_NUMPY[d]()
    _check_finite(np_type.type, v, d, what)
    bits = np.array(v, dtype=np.float64).astype(np_type).view(np.uint16)
    return ctypes.c_uint16(int(bits))


def _check_finite(np_type, v: float, d: dt.DType, what: str) -> None:
    with np.errstate(over="ignore"):
        narrowed = np.array(v, dtype=np.float64).astype(np_type)
    if np.isinf(narrowed) and np.isfinite(v):
        raise TileValueError(f"{what} is {v}, which overflows {d.name} to infinity")


def param_dtype(kernel: str, spec: Mapping[str, Any]) -> dt.DType:
    """A metadata param's dtype: a tileir name ('float16'), or an MLIR spelling ('f16', 'ui8')."""
    name = spec.get("dtype")
    d = dt.BY_NAME.get(name) if isinstance(name, str) else None
    if d is None and isinstance(name, str):
        try:
            d = dt.from_mlir(name)
        except (ValueError, KeyError):
            d = None
    if d is None:
        raise TileValueError(f"metadata of kernel '{kernel}' gives parameter "
                             f"'{spec.get('name')}' the dtype {name!r}; expected a tileir "
                             f"dtype name such as 'float16'")
    return d


def _field(meta: Mapping[str, Any], key: str) -> Any:
    if key not in meta:
        raise TileValueError(f"kernel metadata has no '{key}' (docs/gpu-backend.md lists its "
                             f"fields): {dict(meta)}")
    return meta[key]


def check_grid(kernel: str, grid: Sequence[int]) -> tuple[int, int, int]:
    if len(grid) != 3 or any(isinstance(g, bool) or not isinstance(g, (int, np.integer))
                             for g in grid):
        raise TileValueError(f"grid of kernel '{kernel}' must be 3 ints, got {grid!r}")
    for axis, (g, most) in enumerate(zip(grid, MAX_GRID)):
        if not 1 <= g <= most:
            raise TileValueError(f"grid of kernel '{kernel}' is {tuple(grid)}: axis {axis} "
                                 f"must be in [1, {most}]")
    return tuple(int(g) for g in grid)


def block_of(meta: Mapping[str, Any]) -> tuple[int, int, int]:
    threads = _field(meta, "num_threads")
    if not 1 <= threads <= MAX_THREADS:
        raise TileValueError(f"metadata of kernel '{meta['name']}' asks for {threads} threads "
                             f"per block; CUDA allows 1 to {MAX_THREADS}")
    return (threads, 1, 1)


# ---------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------
def stream_handle(stream: Any, args: Sequence[Any], device: int) -> int:
    """The CUstream handle (an int) for `stream`, following the module's stream rule."""
    if stream is None:
        return _default_stream(args, device)
    if isinstance(stream, bool):
        raise TileTypeError(f"stream must be a stream or a handle, got {stream!r}")
    if isinstance(stream, (int, np.integer)):
        if stream < 0:
            raise TileValueError(f"stream handle {stream} is negative")
        return int(stream)
    if hasattr(stream, "cuda_stream"):                       # torch.cuda.Stream
        index = getattr(getattr(stream, "device", None), "index", None)
        _check_stream_device(index, device)
        return int(stream.cuda_stream)
    if hasattr(stream, "__cuda_stream__"):                   # the CUDA stream protocol
        _, handle = stream.__cuda_stream__()
        return int(handle)
    if type(stream).__module__.startswith("cupy") and hasattr(stream, "ptr"):
        _check_stream_device(getattr(stream, "device_id", None), device)
        return int(stream.ptr)
    if type(stream).__name__ == "CUstream":                  # cuda.bindings.driver.CUstream
        return int(stream)
    raise TileTypeError(f"stream must be None, an int handle, a torch.cuda.Stream, a cupy "
                        f"Stream or a cuda.bindings CUstream; got {type(stream).__name__}")


def _check_stream_device(index: int | None, device: int) -> None:
    # None or a negative index (cupy's ExternalStream default) means "not said".
    if index is not None and index >= 0 and index != device:
        raise TileValueError(f"the stream belongs to cuda:{index} but the arrays are on "
                             f"cuda:{device}; use a stream of cuda:{device}")


def _default_stream(args: Sequence[Any], device: int) -> int:
    owners = {type(a).__module__.split(".", 1)[0] for a in args}
    if "torch" in owners:
        torch = sys.modules["torch"]        # imported: its tensors are among the args
        return int(torch.cuda.current_stream(device).cuda_stream)
    if "cupy" in owners:
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device):
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


# ---------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------
# (ordinal, image, name, target, shared bytes) -> CUfunction, ready to launch: target
# checked, module loaded, shared memory reserved.  Keyed by the image bytes themselves
# (see driver.load_module), and by the target, which is checked only here.
_ready: dict[tuple[int, bytes, str, str, int], Any] = {}


def programmatic(meta: Mapping[str, Any], requested: bool = False) -> bool:
    """Whether a launch of the kernel `meta` describes uses programmatic stream
    serialization: always for `programmatic_launch` (its wait opens the body), and for
    `programmatic_on_request` (its author's grid_dependency_control ops) where the
    launch asks (`requested`: cuTile's `programmatic_dependent_launch`); never with
    TILEIR_PROGRAMMATIC_LAUNCH=0 (the kernel's wait then returns at once)."""
    if not knobs.PROGRAMMATIC_LAUNCH.as_bool():
        return False
    return bool(meta.get("programmatic_launch")) or \
        (requested and bool(meta.get("programmatic_on_request")))


def launch(cubin: bytes, meta: Mapping[str, Any], grid: tuple[int, int, int],
           args: Sequence[Any], stream: Any = None, *,
           programmatic_dependent_launch: bool = False) -> None:
    """Launches the kernel in `cubin` (a cubin, fatbin or PTX image) described by `meta`
    (with programmatic stream serialization where `programmatic(meta, ...)` says)."""
    bound = bind_args(meta, args, grid)
    kernel = bound.kernel
    grid = check_grid(kernel, grid)
    block = block_of(meta)
    shared = int(_field(meta, "shared_bytes"))
    from . import driver
    device = bound.device if bound.device is not None else driver.current_device()
    with driver.device_context(device):
        function = _function(cubin, meta, device, block[0], shared)
    grid = launch_grid(meta, grid, device, function)
    handle = stream_handle(stream, args, device)
    if meta.get("workspace"):
        set_workspace(meta, bound.params, grid, device, handle)
    with driver.device_context(device):
        launch_kernel = driver.launch_kernel_programmatic \
            if programmatic(meta, programmatic_dependent_launch) else driver.launch_kernel
        launch_kernel(function, grid, block, shared, handle, bound.params.address, kernel)
        if knobs.SYNC_LAUNCH.as_bool():
            driver.synchronize(handle, kernel)


def workspace_slot(meta: Mapping[str, Any]) -> int:
    """The ABI slot of a stream-K kernel's workspace pointer (after the walked grid)."""
    slots = sum(1 + 2 * p["ndim"] if p["kind"] == "array" else 1 for p in meta["params"])
    return slots + 3


def set_workspace(meta: Mapping[str, Any], params: PackedParams, grid: tuple[int, int, int],
                  device: int, stream: int) -> None:
    """Writes the workspace of `stream` into a stream-K kernel's packed parameters."""
    from . import workspace
    nbytes = workspace.size(int(meta["workspace"]), grid[0] * grid[1] * grid[2])
    params.values[workspace_slot(meta)].value = workspace.pointer(device, stream, nbytes)


def _function(image: bytes, meta: Mapping[str, Any], device: int, threads: int,
              shared: int):
    key = (device, bytes(image), meta["name"], _field(meta, "target"), shared)
    function = _ready.get(key)
    if function is None:
        function = _load_function(key[1], meta, device, threads, shared)
        _ready[key] = function
    return function


def _load_function(image: bytes, meta: Mapping[str, Any], device: int, threads: int,
                   shared: int):
    from . import driver
    kernel = meta["name"]
    driver.check_target(_field(meta, "target"), image, device, kernel)
    module = driver.load_module(image, device)
    function = driver.get_function(module, kernel, device)
    most = driver.function_attribute(function, "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK")
    if threads > most:
        raise TileValueError(f"kernel '{kernel}' is launched with {threads} threads per block "
                             f"but, with the registers it uses, can run at most {most}; "
                             f"compile it with fewer warps")
    driver.reserve_shared_memory(function, shared, device, kernel)
    return function
