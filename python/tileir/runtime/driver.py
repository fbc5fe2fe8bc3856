"""The CUDA driver, through `cuda.bindings.driver`, imported on first use.

Importing tileir never touches CUDA: `cuda.bindings.driver` imports without a GPU,
but its first call raises `DynamicLibNotFoundError` where no driver is installed,
and a machine without a GPU must still compile kernels and run the interpreter.

Contexts: every launch runs in the device's *primary* context, the one the CUDA
runtime (and so torch and cupy) uses, so pointers, streams and modules are shared
with them.  `device_context(ordinal)` makes it current for the duration of a launch
and then restores whatever context the thread had.  Primary contexts are retained
once and never released: loaded modules live in them for the life of the process.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from typing import Any, Iterator

from ..errors import TileError, TileUnsupportedFeatureError

# The default per-block shared-memory limit; above it a kernel must opt in per function.
DEFAULT_SHARED_BYTES = 48 * 1024

# Reentrant: loading a module takes the lock, then retains the primary context under it.
_lock = threading.RLock()
_primary: dict[int, Any] = {}                  # ordinal -> CUcontext
_modules: dict[tuple[int, bytes], Any] = {}    # (ordinal, image) -> CUmodule
_functions: dict[tuple[int, int, str], Any] = {}   # (ordinal, module, name) -> CUfunction
_shared_optin: dict[tuple[int, int], int] = {}     # (ordinal, function) -> bytes opted into


class CudaError(TileError):
    """A CUDA driver call failed: names the call, the driver's error and what to do."""

    def __init__(self, call: str, name: str, description: str, hint: str | None = None):
        self.call = call
        self.name = name
        self.description = description
        hint = hint or _HINTS.get(name)
        message = f"{call} failed: {name} ({description})"
        super().__init__(f"{message}; {hint}" if hint else message)


_HINTS = {
    "CUDA_ERROR_NO_DEVICE": "no CUDA device is visible (check nvidia-smi and "
                            "CUDA_VISIBLE_DEVICES), or run with TILEIR_INTERPRET=1",
    "CUDA_ERROR_INVALID_DEVICE": "the device ordinal does not exist on this machine",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the cubin was compiled for another GPU architecture; "
                                    "recompile for this device's sm_XY target",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the PTX is newer than this driver can JIT; compile "
                                          "to a cubin with ptxas instead, or update the driver",
    "CUDA_ERROR_INVALID_PTX": "the driver could not compile the PTX (see the JIT log above)",
    "CUDA_ERROR_NOT_FOUND": "no kernel of that name in the module: the metadata's 'name' must "
                            "be the entry point's name",
    "CUDA_ERROR_OUT_OF_MEMORY": "the device is out of memory",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "the kernel needs more registers or shared memory "
                                          "per block than the device has: use fewer warps or "
                                          "smaller tiles",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "a kernel accessed memory out of bounds; the CUDA context is "
                                  "now unusable, restart the process. Rerun with "
                                  "TILEIR_SYNC_LAUNCH=1 to find the launch, and under "
                                  "compute-sanitizer to find the access",
    "CUDA_ERROR_LAUNCH_FAILED": "a kernel failed; the CUDA context is now unusable, restart "
                                "the process and rerun with TILEIR_SYNC_LAUNCH=1 to find it",
    "CUDA_ERROR_INVALID_HANDLE": "a stream, module or function handle does not belong to the "
                                 "current context (a stream created on another device?)",
}


# ---------------------------------------------------------------------------
# Loading and initializing the driver
# ---------------------------------------------------------------------------
@functools.cache
def _import_driver():
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise TileError(f"the GPU runtime needs the CUDA Python bindings ({e}); install them "
                        f"with `pip install cuda-bindings`, or run kernels in the interpreter "
                        f"with TILEIR_INTERPRET=1") from None
    return driver


@functools.cache
def cuda():
    """`cuda.bindings.driver`, with `cuInit` done (once per process)."""
    driver = _import_driver()
    try:
        result = driver.cuInit(0)
    except RuntimeError as e:    # DynamicLibNotFoundError: no libcuda.so on this machine
        raise TileError(f"cannot load the NVIDIA driver library ({e}); run on a machine with a "
                        f"GPU, or run kernels in the interpreter with TILEIR_INTERPRET=1") \
            from None
    check("cuInit", result)
    return driver


@functools.cache
def has_gpu() -> bool:
    """Whether a CUDA device is usable here. Never raises; the answer holds for the process."""
    try:
        return device_count() > 0
    except Exception:   # no bindings, no driver library, cuInit refused: all mean "no"
        return False


def check(call: str, result: tuple, hint: str | None = None) -> Any:
    """Unpacks a cuda.bindings `(CUresult, *values)` tuple, raising `CudaError` on failure."""
    err, *values = result
    driver = _import_driver()
    if err != driver.CUresult.CUDA_SUCCESS:
        raise error(call, err, hint)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def error(call: str, err: Any, hint: str | None = None) -> CudaError:
    """A `CudaError` for the CUresult `err`, with the driver's own name and description."""
    driver = _import_driver()
    name = getattr(err, "name", str(err))
    try:
        status, text = driver.cuGetErrorString(err)
        description = text.decode() if status == driver.CUresult.CUDA_SUCCESS else "no description"
    except RuntimeError:
        description = "no description"
    return CudaError(call, name, description, hint)


# ---------------------------------------------------------------------------
# Devices and contexts
# ---------------------------------------------------------------------------
def device_count() -> int:
    driver = cuda()
    return check("cuDeviceGetCount", driver.cuDeviceGetCount())


def _device(ordinal: int):
    driver = cuda()
    count = device_count()
    if not 0 <= ordinal < count:
        raise TileError(f"CUDA device {ordinal} does not exist: this machine has {count} "
                        f"device(s) (CUDA_VISIBLE_DEVICES renumbers them)")
    return check("cuDeviceGet", driver.cuDeviceGet(ordinal))


def _attribute(ordinal: int, name: str) -> int:
    driver = cuda()
    attr = getattr(driver.CUdevice_attribute, name)
    return check(f"cuDeviceGetAttribute({name})",
                 driver.cuDeviceGetAttribute(attr, _device(ordinal)))


@functools.cache
def compute_capability(ordinal: int) -> tuple[int, int]:
    return (_attribute(ordinal, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
            _attribute(ordinal, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"))


@functools.cache
def device_name(ordinal: int) -> str:
    driver = cuda()
    raw = check("cuDeviceGetName", driver.cuDeviceGetName(256, _device(ordinal)))
    return raw.split(b"\0", 1)[0].decode()


@functools.cache
def sm_count(ordinal: int) -> int:
    return _attribute(ordinal, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")


@functools.cache
def l2_cache_bytes(ordinal: int) -> int:
    return _attribute(ordinal, "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE")


_active_clusters: dict[int, int] = {}


def max_active_clusters(function, grid_x: int, threads: int, shared: int) -> int | None:
    """How many clusters of a kernel compiled with a cluster shape (`.reqnctapercluster`)
    fit the GPU at once (cuOccupancyMaxActiveClusters); None when the driver cannot
    say.  Cached per function: its shape and shared memory do not change."""
    key = int(function) if not isinstance(function, int) else function
    if key not in _active_clusters:
        cu = cuda()
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid_x, 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = threads, 1, 1
        cfg.sharedMemBytes = shared
        cfg.numAttrs = 0
        err, n = cu.cuOccupancyMaxActiveClusters(function, cfg)
        _active_clusters[key] = int(n) if int(err) == 0 and int(n) > 0 else -1
    n = _active_clusters[key]
    return n if n > 0 else None


def max_shared_bytes(ordinal: int) -> int:
    """The most shared memory one block may opt into on this device."""
    return _attribute(ordinal, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")


def primary_context(ordinal: int):
    """The device's primary context, retained on first use and kept for the process."""
    with _lock:
        ctx = _primary.get(ordinal)
        if ctx is None:
            driver = cuda()
            ctx = check("cuDevicePrimaryCtxRetain",
                        driver.cuDevicePrimaryCtxRetain(_device(ordinal)))
            _primary[ordinal] = ctx
        return ctx


@contextlib.contextmanager
def device_context(ordinal: int) -> Iterator[Any]:
    """Makes `ordinal`'s primary context current, restoring the thread's previous one
    after; a thread that had none keeps this one current (as the CUDA runtime sets one
    on a thread's first call), so that its next launches find it."""
    driver = cuda()
    ctx = primary_context(ordinal)
    previous = check("cuCtxGetCurrent", driver.cuCtxGetCurrent())
    switch = int(previous) != int(ctx)
    if switch:
        check("cuCtxSetCurrent", driver.cuCtxSetCurrent(ctx))
    try:
        yield ctx
    finally:
        if switch and int(previous) != 0:
            check("cuCtxSetCurrent", driver.cuCtxSetCurrent(previous))


def current_device() -> int:
    """The ordinal of the thread's current context, or 0 when it has none (as the runtime)."""
    driver = cuda()
    ctx = check("cuCtxGetCurrent", driver.cuCtxGetCurrent())
    if int(ctx) == 0:
        return 0
    return int(check("cuCtxGetDevice", driver.cuCtxGetDevice()))


def pointer_device(ptr: int) -> int:
    """The ordinal of the device that owns device pointer `ptr`."""
    driver = cuda()
    attr = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    return int(check("cuPointerGetAttribute(DEVICE_ORDINAL)",
                     driver.cuPointerGetAttribute(attr, ptr),
                     hint=f"0x{ptr:x} is not a CUDA device pointer"))


# ---------------------------------------------------------------------------
# Targets: which images run on which devices
# ---------------------------------------------------------------------------
_TARGET = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


def parse_target(target: str) -> tuple[int, int, str]:
    """`"sm_90a"` -> `(9, 0, "a")`; `"sm_80"` -> `(8, 0, "")`; `"sm_100f"` -> `(10, 0, "f")`."""
    m = _TARGET.match(target)
    if m is None:
        raise TileUnsupportedFeatureError(f"target {target!r} is not an NVIDIA architecture "
                                          f"name like 'sm_80' or 'sm_90a'")
    return int(m.group(2)), int(m.group(3)), m.group(4)


def image_kind(image: bytes) -> str:
    """`"cubin"` (ELF), `"fatbin"` or `"ptx"` (text), from the image's first bytes."""
    if image[:4] == b"\x7fELF":
        return "cubin"
    if image[:4] == b"\x50\xed\x55\xba":
        return "fatbin"
    return "ptx"


def runs_on(target: str, kind: str, cc: tuple[int, int]) -> bool:
    """CUDA's binary-compatibility rules for an image built for `target` on a device of `cc`.

    - SASS (cubin) for sm_XY runs on compute capability X.Z with Z >= Y: same major only.
    - PTX for compute_XY is JIT-compiled for any compute capability >= X.Y.
    - Architecture-specific targets ("a", e.g. sm_90a: wgmma, setmaxnreg) run on exactly X.Y.
    - Family-specific targets ("f", e.g. sm_100f) run on X.Z with Z >= Y, for SASS and PTX.
    - A fatbin carries several images: the driver picks one, so it is not checked here.
    """
    if kind == "fatbin":
        return True
    major, minor, suffix = parse_target(target)
    if suffix == "a":
        return cc == (major, minor)
    if suffix == "f" or kind == "cubin":
        return cc[0] == major and cc[1] >= minor
    return cc >= (major, minor)


def check_target(target: str, image: bytes, ordinal: int, kernel: str) -> None:
    """Raises a clear error, before any load, when `image` cannot run on device `ordinal`."""
    kind = image_kind(image)
    cc = compute_capability(ordinal)
    if not runs_on(target, kind, cc):
        arch = f"sm_{cc[0]}{cc[1]}" + ("a" if cc >= (9, 0) else "")
        raise TileUnsupportedFeatureError(
            f"kernel '{kernel}' was compiled to a {kind} for {target}, which cannot run on "
            f"device {ordinal} ({device_name(ordinal)}, compute capability {cc[0]}.{cc[1]}); "
            f"recompile it with target='{arch}'")


# ---------------------------------------------------------------------------
# Modules and functions
# ---------------------------------------------------------------------------
def load_module(image: bytes, ordinal: int):
    """Loads a cubin, fatbin or PTX image into `ordinal`'s primary context, once per content.

    The cache is keyed by the image bytes themselves: Python caches a bytes object's
    hash, so a launch that passes the same cubin object again costs one dict lookup,
    where a sha256 would rehash the whole image every launch.
    """
    key = (ordinal, bytes(image))
    with _lock:
        module = _modules.get(key)
        if module is None:
            with device_context(ordinal):
                module = _load(key[1])
            _modules[key] = module
        return module


def _load(image: bytes):
    driver = cuda()
    if image_kind(image) != "ptx":
        return check("cuModuleLoadData", driver.cuModuleLoadData(image))
    # The driver reads PTX as a C string, and JIT errors are only readable from its log.
    if not image.endswith(b"\0"):
        image += b"\0"
    log = bytearray(16 * 1024)
    opts = [driver.CUjit_option.CU_JIT_ERROR_LOG_BUFFER,
            driver.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
    err, module = driver.cuModuleLoadDataEx(image, len(opts), opts, [log, len(log)])
    if err != driver.CUresult.CUDA_SUCCESS:
        text = bytes(log).split(b"\0", 1)[0].decode(errors="replace").strip()
        raise error("cuModuleLoadDataEx (PTX JIT)", err,
                    f"the JIT log says:\n{text}" if text else None)
    return module


def get_function(module, name: str, ordinal: int):
    """The kernel `name` in `module` (loaded on `ordinal`)."""
    key = (ordinal, int(module), name)
    with _lock:
        function = _functions.get(key)
        if function is None:
            driver = cuda()
            function = check(f"cuModuleGetFunction('{name}')",
                             driver.cuModuleGetFunction(module, name.encode()))
            _functions[key] = function
        return function


def function_attribute(function, name: str) -> int:
    driver = cuda()
    attr = getattr(driver.CUfunction_attribute, name)
    return check(f"cuFuncGetAttribute({name})", driver.cuFuncGetAttribute(attr, function))


def reserve_shared_memory(function, nbytes: int, ordinal: int, kernel: str) -> None:
    """Lets `function` use `nbytes` of dynamic shared memory.

    A block's static and dynamic shared memory together up to 48 KiB need nothing;
    beyond it a kernel must opt in per function with
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, up to the device's opt-in limit
    minus the kernel's static shared memory.  (The static part counts: the NVPTX
    backend declares the dynamic buffer's symbol as one static byte, so a kernel
    asking for exactly 48 KiB fails to launch without the opt-in.)
    """
    key = (ordinal, int(function))
    if _shared_optin.get(key, 0) >= nbytes:
        return
    static = function_attribute(function, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES")
    if nbytes + static <= DEFAULT_SHARED_BYTES:
        _shared_optin[key] = nbytes
        return
    limit = max_shared_bytes(ordinal)
    if nbytes + static > limit:
        raise TileUnsupportedFeatureError(
            f"kernel '{kernel}' needs {nbytes} bytes of dynamic shared memory (+{static} "
            f"static), but a block on device {ordinal} ({device_name(ordinal)}) may use at "
            f"most {limit}; use smaller tiles or fewer pipeline stages")
    driver = cuda()
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
          driver.cuFuncSetAttribute(function, attr, nbytes))
    _shared_optin[key] = nbytes


# ---------------------------------------------------------------------------
# Launching
# ---------------------------------------------------------------------------
def launch_kernel(function, grid: tuple[int, int, int], block: tuple[int, int, int],
                  shared_bytes: int, stream: int, params_address: int, kernel: str) -> None:
    """cuLaunchKernel with `kernelParams` given as the address of a `void*[]` (see launcher)."""
    driver = cuda()
    result = driver.cuLaunchKernel(function, *grid, *block, shared_bytes,
                                   driver.CUstream(stream), params_address, 0)
    check(f"cuLaunchKernel('{kernel}', grid={grid}, block={block}, shared={shared_bytes})",
          result)


def programmatic_config(grid: tuple[int, int, int], block: tuple[int, int, int],
                        shared_bytes: int) -> Any:
    """A CUlaunchConfig for cuLaunchKernelEx with programmatic stream serialization, its
    stream left for the caller to set (a plan keeps one and sets only the stream)."""
    driver = cuda()
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = shared_bytes
    config.attrs = [attr]
    config.numAttrs = 1
    return config


def programmatic_entry() -> tuple[Any, Any]:
    """What a programmatic plan's Python launch calls: `(cuLaunchKernelEx,
    programmatic_config)`."""
    return cuda().cuLaunchKernelEx, programmatic_config


def launch_kernel_programmatic(function, grid: tuple[int, int, int],
                               block: tuple[int, int, int], shared_bytes: int, stream: int,
                               params_address: int, kernel: str) -> None:
    """cuLaunchKernelEx with programmatic stream serialization: the kernel may start
    before the one before it in the stream has finished (its `griddepcontrol.wait`
    waits for that), and lets the next one start at its `launch_dependents`."""
    driver = cuda()
    config = programmatic_config(grid, block, shared_bytes)
    config.hStream = driver.CUstream(stream)
    result = driver.cuLaunchKernelEx(config, function, params_address, 0)
    check(f"cuLaunchKernelEx('{kernel}', grid={grid}, block={block}, shared={shared_bytes}, "
          f"programmatic stream serialization)", result)


def launch_entry() -> tuple[Any, Any, Any, Any]:
    """What the launch fast path (runtime/dispatch.py) calls per launch:
    `(cuLaunchKernel, CUfunction, CUstream, CUDA_SUCCESS)`, so that a plan builds its
    function and stream handles once and compares results by identity.

    cuda.bindings' Cython entry points cost less than a ctypes call with declared
    argument types (bench/launch.py measures both, and the same call from C).
    """
    driver = cuda()
    return (driver.cuLaunchKernel, driver.CUfunction, driver.CUstream,
            driver.CUresult.CUDA_SUCCESS)


@functools.cache
def launch_address() -> int:
    """The address of the driver's `cuLaunchKernel` (legacy default stream, as
    cuda.bindings calls it), for the C fast path (runtime/_fastlaunch.c)."""
    import ctypes
    cuda()                                    # loads libcuda.so.1 and initializes it
    return ctypes.cast(ctypes.CDLL("libcuda.so.1").cuLaunchKernel, ctypes.c_void_p).value


def launch_ex_address() -> int:
    """The address of the driver's `cuLaunchKernelEx`, for programmatic launches on the C
    fast path."""
    import ctypes
    cuda()
    return ctypes.cast(ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx, ctypes.c_void_p).value


def context_addresses() -> tuple[int, int]:
    """The addresses of the driver's `cuCtxGetCurrent` and `cuCtxSetCurrent`, for the C
    fast path (it makes the device's context current where another one is)."""
    import ctypes
    cuda()
    lib = ctypes.CDLL("libcuda.so.1")
    return (ctypes.cast(lib.cuCtxGetCurrent, ctypes.c_void_p).value,
            ctypes.cast(lib.cuCtxSetCurrent, ctypes.c_void_p).value)


def primary_handle(ordinal: int) -> int:
    """The device's primary context as an integer handle."""
    return int(primary_context(ordinal))


def synchronize(stream: int, kernel: str) -> None:
    """Waits for `stream`, reporting an asynchronous error as the kernel's."""
    driver = cuda()
    check(f"cuStreamSynchronize after kernel '{kernel}'",
          driver.cuStreamSynchronize(driver.CUstream(stream)))
