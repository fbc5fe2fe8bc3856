"""TMA tensor maps: encoded on the host for each launch, cached per array and box.

A kernel whose rings copy tiles with TMA (sm_90a) takes one trailing 128-byte
`CUtensorMap` parameter per distinct copy (metadata `tensor_maps`: the array
parameter, the box in tile dim order, the swizzle in bytes).  `tensor_map(...)`
builds it with the driver's `cuTensorMapEncodeTiled` from the array's pointer,
shape and strides: global dims and byte strides innermost first, unit element
strides, no interleave, the box's swizzle, 256-byte L2 promotion and zero
out-of-bounds fill (so tiles past the array's edges arrive padded with zeros).
Encodings are cached by everything that goes into them, so a launch with arrays
seen before costs one dictionary lookup per map.

A map's `clip` (a tile dim, or absent) cuts the box short along that dim to the
array's extent when the array is shorter than the tile (`clipped_box`): a decode
GEMM's 16 rows of activations arrive as a 16-row box instead of a 128-row one that
is 7/8 out-of-bounds zeros, which TMA delivers several times slower than data.
The kernel computes the same box from the same extent (`rules/ring.py`: the
slot's transaction bytes, and the rows it zeroes once instead).
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Mapping, Sequence

from ..errors import TileValueError
from .arrays import DeviceArrayInfo

TENSOR_MAP_BYTES = 128
L2_PROMOTION = "L2_256B"      # CUtensorMapL2promotion suffix: NONE, L2_64B, L2_128B, L2_256B
MAX_BOX = 256
CACHE_ENTRIES = 4096

# tileir dtype name -> CUtensorMapDataType member (TMA copies bits: fp8 moves as bytes,
# f32 tiles bound for tf32 tensor cores as f32)
_DATA_TYPES = {
    "bool_": "UINT8", "int8": "UINT8", "uint8": "UINT8", "float8_e4m3fn": "UINT8",
    "float8_e5m2": "UINT8", "int16": "UINT16", "uint16": "UINT16", "float16": "FLOAT16",
    "bfloat16": "BFLOAT16", "int32": "INT32", "uint32": "UINT32", "float32": "FLOAT32",
    "int64": "INT64", "uint64": "UINT64", "float64": "FLOAT64",
}
_SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}


class TensorMap(ctypes.Structure):
    """The 128 bytes of a CUtensorMap, as the kernel parameter receives them."""

    _pack_ = 8
    _fields_ = [("words", ctypes.c_uint64 * (TENSOR_MAP_BYTES // 8))]


_cache: "OrderedDict[tuple, TensorMap]" = OrderedDict()


def encode_args(info: DeviceArrayInfo, box: Sequence[int], swizzle: int,
                kernel: str = "?", param: str = "?") -> dict:
    """The arguments of cuTensorMapEncodeTiled for `info` and a box in tile dim order.

    Pure (no driver): what the tests inspect.  A dim of size 0 is encoded as 1 (no
    copy reads such an array: its tiles are all out of range and no block loads
    them); a stride of a size-1 dim, which the array never steps by, as the packed
    stride.
    """
    what = f"argument '{param}' of kernel '{kernel}'"
    name = _DATA_TYPES.get(info.dtype.name)
    if name is None:
        raise TileValueError(f"{what}: TMA does not copy {info.dtype.name} arrays")
    if len(box) != info.ndim:
        raise TileValueError(f"{what}: a {len(box)}-d TMA box for a {info.ndim}-d array")
    if any(not 1 <= b <= MAX_BOX for b in box):
        raise TileValueError(f"{what}: TMA boxes are 1 to {MAX_BOX} per dim, got {list(box)}")
    if swizzle not in _SWIZZLES:
        raise TileValueError(f"{what}: swizzle {swizzle} is not one of {sorted(_SWIZZLES)}")
    size = info.itemsize
    dims = [max(1, n) for n in info.shape]
    packed = size
    strides = []
    for d in range(info.ndim - 1, -1, -1):          # innermost first
        if d != info.ndim - 1:
            step = info.strides[d] * size if info.shape[d] > 1 else packed
            if step % 16:
                raise TileValueError(f"{what}: TMA needs strides that are multiples of 16 "
                                     f"bytes; axis {d} steps {step} bytes")
            strides.append(step)
        packed = (packed * dims[d] + 15) // 16 * 16
    if info.ptr % 16:
        raise TileValueError(f"{what}: TMA needs a 16-byte aligned base address, got "
                             f"0x{info.ptr:x}")
    return {"data_type": name, "rank": info.ndim, "address": info.ptr,
            "dims": list(reversed(dims)), "strides": strides,
            "box": list(reversed([int(b) for b in box])), "element_strides": [1] * info.ndim,
            "swizzle": _SWIZZLES[swizzle]}


def clipped_box(box: Sequence[int], clip: int | None, shape: Sequence[int]) -> list[int]:
    """`box` with dim `clip` cut to the array's extent there (at least 1): the box the
    kernel expects (the rule shared with `rules/ring.py`)."""
    box = [int(b) for b in box]
    if clip is not None:
        box[clip] = max(1, min(box[clip], int(shape[clip])))
    return box


def tensor_map(info: DeviceArrayInfo, box: Sequence[int], swizzle: int, kernel: str = "?",
               param: str = "?") -> TensorMap:
    """The encoded tensor map (cached)."""
    key = (info.ptr, info.shape, info.strides, info.dtype.name, tuple(box), swizzle,
           L2_PROMOTION)
    found = _cache.get(key)
    if found is not None:
        _cache.move_to_end(key)
        return found
    args = encode_args(info, box, swizzle, kernel, param)
    tm = _encode(args, kernel, param)
    _cache[key] = tm
    if len(_cache) > CACHE_ENTRIES:
        _cache.popitem(last=False)
    return tm


def _encode(args: Mapping, kernel: str, param: str) -> TensorMap:
    from . import driver
    cu = driver.cuda()
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    result = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + args["data_type"]),
        args["rank"], args["address"], [u64(d) for d in args["dims"]],
        [u64(s) for s in args["strides"]], [u32(b) for b in args["box"]],
        [u32(e) for e in args["element_strides"]],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + args["swizzle"]),
        getattr(cu.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_" + L2_PROMOTION),
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    encoded = driver.check(f"cuTensorMapEncodeTiled for argument '{param}' of kernel "
                           f"'{kernel}' ({args})", result)
    tm = TensorMap()
    ctypes.memmove(ctypes.addressof(tm), encoded.getPtr(), TENSOR_MAP_BYTES)
    return tm


def pack_tensor_maps(meta: Mapping, infos: Mapping[int, DeviceArrayInfo]) -> list[TensorMap]:
    """The trailing parameters of a launch: one tensor map per metadata entry, from the
    described array arguments (`infos`: parameter index -> description)."""
    out = []
    params = meta["params"]
    for tm in meta.get("tensor_maps", ()):
        p = tm["param"]
        box = clipped_box(tm["box"], tm.get("clip"), infos[p].shape)
        out.append(tensor_map(infos[p], box, tm["swizzle"], meta["name"], params[p]["name"]))
    return out


def clear_cache() -> None:
    _cache.clear()


__all__ = ["TensorMap", "tensor_map", "clipped_box", "encode_args", "pack_tensor_maps", "clear_cache",
           "TENSOR_MAP_BYTES"]
