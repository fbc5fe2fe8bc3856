"""What a kernel needs to know about an array argument: pointer, shape, strides, dtype, device.

`describe(x)` reads any array the runtime accepts without copying it:

| source | how |
|---|---|
| NumPy (`np.ndarray`, incl. ml_dtypes bfloat16) | `__array_interface__` pointer and byte strides; device `("cpu", 0)` |
| torch tensors (CUDA or CPU) | `data_ptr()`, `stride()`, `dtype`, `device` (torch is never imported here) |
| `__cuda_array_interface__` v2/v3 (cupy, numba, ...) | the dict's `data`, `shape`, `strides`, `typestr`; the device from cupy's `.device.id` or from the driver |
| `__dlpack__` (JAX, ...) | the DLTensor in the capsule, read with ctypes |

Strides are in elements and may be 0 (broadcast) or negative (reversed views).
Where the array's own library names a dtype (`x.dtype`) it wins over the
interchange format's spelling: bfloat16 has no standard `typestr` (`'<V2'` at
best) and old DLPack producers export bool as uint8.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..errors import TileTypeError, TileValueError

HOST = ("cpu", 0)


@dataclasses.dataclass(frozen=True)
class DeviceArrayInfo:
    """An array as the kernel ABI sees it.

    `device` is `("cuda", ordinal)` or `("cpu", 0)`; the ordinal is None only for a
    `__cuda_array_interface__` object described where no CUDA driver can be asked.
    """

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]          # in elements
    dtype: dt.DType
    device: tuple[str, int | None]

    @property
    def itemsize(self) -> int:
        return itemsize(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_cuda(self) -> bool:
        return self.device[0] == "cuda"


def itemsize(d: dt.DType) -> int:
    """Bytes per element in memory (bool is one byte)."""
    return max(1, d.bits // 8)


def aligned(info: DeviceArrayInfo) -> bool:
    """Whether `info` qualifies for the 16-byte vectorized path (docs/gpu-backend.md).

    Base address % 16 == 0, last-dim stride 1, every other stride * itemsize % 16 == 0.
    Dims of size 1 are exempt: their only index is 0, so their stride never moves an
    address (torch gives such dims arbitrary strides, e.g. after `unsqueeze`).
    """
    if info.ptr % 16:
        return False
    last = info.ndim - 1
    for axis, (size, stride) in enumerate(zip(info.shape, info.strides)):
        if size == 1:
            continue
        if axis == last:
            if stride != 1:
                return False
        elif (stride * info.itemsize) % 16:
            return False
    return True


# An array at least this many times the GPU's L2 cache is "large": it streams from
# DRAM whatever the cache keeps, so the backend may give its loads an L2 policy that
# would cost a smaller array its reuse between kernels (docs/gpu-backend.md; the
# measurements that place the line are in bench/RESULTS.md).
LARGE_L2_MULTIPLE = 4


def nbytes(info: DeviceArrayInfo) -> int:
    """Bytes of the elements the array holds (not of its span in memory)."""
    return math.prod(info.shape) * info.itemsize


def large(info: DeviceArrayInfo) -> bool:
    """Whether a CUDA array is at least `LARGE_L2_MULTIPLE` times its device's L2."""
    if not info.is_cuda or info.device[1] is None:
        return False
    return nbytes(info) >= large_bytes(info.device[1])


def large_bytes(ordinal: int) -> int:
    """The size from which arrays on CUDA device `ordinal` are large."""
    from . import driver
    return LARGE_L2_MULTIPLE * driver.l2_cache_bytes(ordinal)


def describe(x: Any, *, name: str | None = None, kernel: str | None = None) -> DeviceArrayInfo:
    """The `DeviceArrayInfo` of an array (a `DeviceArrayInfo` is returned as is).

    `name` (the parameter) and `kernel` only make errors say which argument is wrong.
    """
    what = f"argument '{name}'" if name else "the array"
    if kernel:
        what += f" of kernel '{kernel}'"
    if isinstance(x, DeviceArrayInfo):
        return x
    if isinstance(x, np.ndarray):
        return _from_numpy(x, what)
    if type(x).__module__.startswith("torch") and hasattr(x, "data_ptr"):
        return _from_torch(x, what)
    if hasattr(x, "__cuda_array_interface__"):
        return _from_cuda_array_interface(x, what)
    if hasattr(x, "__dlpack__"):
        return _from_dlpack(x, what)
    raise TileTypeError(f"{what} is a {type(x).__name__}, not an array: pass a torch tensor, a "
                        f"cupy array, an object with __cuda_array_interface__ or __dlpack__, or "
                        f"a NumPy array")


# ---------------------------------------------------------------------------
# NumPy and torch
# ---------------------------------------------------------------------------
def _from_numpy(a: np.ndarray, what: str) -> DeviceArrayInfo:
    d = _supported(dt.from_numpy(a.dtype), str(a.dtype), what)
    if not a.dtype.isnative:
        raise TileTypeError(f"{what} is a byte-swapped ({a.dtype.str}) array; convert it with "
                            f"a.astype(a.dtype.newbyteorder('='))")
    return DeviceArrayInfo(ptr=a.__array_interface__["data"][0], shape=tuple(a.shape),
                           strides=_byte_strides_to_elements(a.strides, itemsize(d), what),
                           dtype=d, device=HOST)


def _from_torch(t: Any, what: str) -> DeviceArrayInfo:
    if str(t.layout) != "torch.strided":
        raise TileTypeError(f"{what} is a {t.layout} torch tensor; kernels take dense tensors "
                            f"(call .to_dense())")
    d = _supported(dt.from_any(t.dtype), str(t.dtype), what)
    kind = t.device.type
    if kind == "cuda":
        device = ("cuda", t.device.index)
    elif kind == "cpu":
        device = HOST
    else:
        raise TileValueError(f"{what} is a torch tensor on '{t.device}'; kernels run on CUDA "
                             f"devices (or on the CPU in the interpreter)")
    # data_ptr() already includes the storage offset; stride() is in elements.
    return DeviceArrayInfo(ptr=t.data_ptr(), shape=tuple(t.shape), strides=tuple(t.stride()),
                           dtype=d, device=device)


# ---------------------------------------------------------------------------
# __cuda_array_interface__
# ---------------------------------------------------------------------------
def _from_cuda_array_interface(x: Any, what: str) -> DeviceArrayInfo:
    cai = x.__cuda_array_interface__
    version = cai.get("version", 0)
    if version < 2:
        raise TileTypeError(f"{what} exposes __cuda_array_interface__ version {version}; "
                            f"versions 2 and 3 are supported")
    if cai.get("mask") is not None:
        raise TileTypeError(f"{what} is a masked array (__cuda_array_interface__ 'mask'); "
                            f"kernels take plain arrays")
    shape = tuple(int(n) for n in cai["shape"])
    ptr = int(cai["data"][0])
    d = _cai_dtype(x, cai["typestr"], what)
    size = itemsize(d)
    byte_strides = cai.get("strides")
    strides = _contiguous_strides(shape) if byte_strides is None else \
        _byte_strides_to_elements(byte_strides, size, what)
    return DeviceArrayInfo(ptr=ptr, shape=shape, strides=strides, dtype=d,
                           device=("cuda", _cai_device(x, ptr)))


def _cai_dtype(x: Any, typestr: str, what: str) -> dt.DType:
    try:
        npdt = np.dtype(typestr)
    except TypeError:
        raise TileTypeError(f"{what} has __cuda_array_interface__ typestr {typestr!r}, which "
                            f"is not a NumPy type string") from None
    if npdt.byteorder == ">":
        raise TileTypeError(f"{what} is big-endian (typestr {typestr!r}); GPUs are little-endian")
    return _pick_dtype(dt.from_numpy(npdt), f"{npdt.name} (typestr {typestr!r})", npdt.itemsize,
                       x, what)


def _cai_device(x: Any, ptr: int) -> int | None:
    """The ordinal owning `ptr`: cupy says so itself, anything else is asked of the driver."""
    if type(x).__module__.startswith("cupy"):
        return int(x.device.id)
    from . import driver
    if ptr == 0 or not driver.has_gpu():
        return None
    return driver.pointer_device(ptr)


# ---------------------------------------------------------------------------
# DLPack (read with ctypes: no consumer library needed)
# ---------------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    # The first member of DLManagedTensor, so the capsule pointer points at one.
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_BOOL = 0, 1, 2, 4, 6
_DL_CODES = {_DL_INT: "int", _DL_UINT: "uint", _DL_FLOAT: "float", _DL_BFLOAT: "bfloat",
             _DL_BOOL: "bool"}

# A private prototype, so that we do not set argtypes on ctypes.pythonapi's shared function.
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))


def _from_dlpack(x: Any, what: str) -> DeviceArrayInfo:
    try:
        capsule = x.__dlpack__()
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        raise TileTypeError(f"{what} ({type(x).__name__}) refused to export itself through "
                            f"DLPack: {e}") from None
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise TileTypeError(f"{what} ({type(x).__name__}) returned a {type(capsule).__name__} "
                            f"from __dlpack__(), not an unused 'dltensor' capsule")
    # We only read the DLTensor and never rename the capsule: when it is collected its
    # destructor calls the producer's deleter, and `x` itself keeps the memory alive.
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = _contiguous_strides(shape) if not t.strides else \
        tuple(t.strides[i] for i in range(t.ndim))
    d = _dlpack_dtype(x, t.dtype, what)
    ptr = (t.data or 0) + t.byte_offset
    return DeviceArrayInfo(ptr=ptr, shape=shape, strides=strides, dtype=d,
                           device=_dlpack_device(t.device, what))


def _dlpack_dtype(x: Any, d: _DLDataType, what: str) -> dt.DType:
    spelled = f"DLPack type (code {d.code}, {d.bits} bits, {d.lanes} lanes)"
    if d.lanes != 1:
        raise TileTypeError(f"{what} has vector elements ({spelled}); kernels take scalar "
                            f"element types")
    kind = _DL_CODES.get(d.code)
    found = None
    if kind == "bfloat" and d.bits == 16:
        found = dt.bfloat16
    elif kind == "bool":
        found = dt.bool_
    elif kind is not None:
        found = dt.BY_NAME.get(f"{kind}{d.bits}")
    return _pick_dtype(found, spelled, max(1, d.bits // 8), x, what)


def _dlpack_device(dev: _DLDevice, what: str) -> tuple[str, int]:
    if dev.device_type in (_DL_CUDA, _DL_CUDA_MANAGED):
        return ("cuda", dev.device_id)
    if dev.device_type in (_DL_CPU, _DL_CUDA_HOST):
        return HOST
    raise TileValueError(f"{what} lives on DLPack device type {dev.device_type}; kernels run "
                         f"on CUDA devices (DLPack type 2) or host memory")


# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------
def _pick_dtype(found: dt.DType | None, spelled: str, size: int, x: Any,
                what: str) -> dt.DType:
    """The element type: the library's own `x.dtype` where it has one of the same size."""
    own = dt.from_any(x.dtype) if hasattr(x, "dtype") else None
    if own is not None:
        if itemsize(own) != size:
            raise TileTypeError(f"{what} says its dtype is {own.name} ({itemsize(own)} bytes) "
                                f"but exports elements of {size} bytes ({spelled}); the array "
                                f"library is inconsistent")
        return own
    return _supported(found, spelled, what)


def _supported(d: dt.DType | None, spelled: str, what: str) -> dt.DType:
    if d is None:
        names = ", ".join(x.name for x in dt.ALL)
        raise TileTypeError(f"{what} has element type {spelled}, which tile kernels do not "
                            f"support; supported: {names}")
    return d


def _byte_strides_to_elements(byte_strides, size: int, what: str) -> tuple[int, ...]:
    out = []
    for s in byte_strides:
        if s % size:
            raise TileValueError(f"{what} has a stride of {s} bytes, not a multiple of its "
                                 f"{size}-byte elements; copy it into a contiguous array")
        out.append(s // size)
    return tuple(out)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
