"""What a host passes to an exported kernel (`kernel_launch_info`, tileir's
addition), read from the cubin's ELF parameter tables."""

from __future__ import annotations

from typing import Any

from ..errors import TileInternalError
from ..kernel import Kernel
from ..specialization import ArrayParam, Param, TableListParam, TupleParam, leaf_params
from .elf import _kernel_params
from .export import _check_convention, _compile, _specialize, _symbol, _target
from .signatures import KernelSignature, _check_kernel


# ---------------------------------------------------------------------------
# What a host passes: tileir's addition
# ---------------------------------------------------------------------------
_C_TYPES = {"bool_": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
            "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
            "uint64": "uint64_t", "float16": "__half", "bfloat16": "__nv_bfloat16",
            "float32": "float", "float64": "double", "float8_e4m3fn": "__nv_fp8_e4m3",
            "float8_e5m2": "__nv_fp8_e5m2"}
_TENSOR_MAP_BYTES = 128


def kernel_launch_info(kernel: Kernel, signature: KernelSignature,
                       gpu_code: str) -> dict[str, Any]:
    """How a host launches what `export_kernel` exports for `signature` (tileir's
    addition; JSON-serializable):

    - `symbol`, `target`; `block`: [threads, 1, 1]; `shared_bytes` of dynamic shared
      memory (when it and the kernel's static shared memory, one byte, pass 48 KiB,
      raise CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first).
    - `slots`: the kernel's parameters in order, each `{"param", "what", "axis"?,
      "ctype", "size", "offset"}`, `what` one of pointer, dim, stride, scalar, grid,
      tensor_map.  cuLaunchKernel's `kernelParams` takes one pointer per slot; a
      packed buffer (`extra`) of `param_bytes` puts each at its `offset`, read from
      the cubin's parameter table.
    - The grid is the user's, but `grid_perm` (when present) permutes its axes first,
      `grid_scale` `[axis, num, den]` multiplies that axis
      by den/num, and a `persistent` kernel takes the user's grid in its three `grid`
      slots and runs (min(blocks, SMs), 1, 1) blocks.
    - `workspace` (a stream-K kernel, backend/pipeline/stream_k.py): its `workspace` slot is a
      device buffer of `4 * WORKSPACE_FLAG_SLOTS` (4096) bytes of flags, zero before
      its first launch, then `workspace` bytes for each block; one buffer per stream
      (launches on one stream may share it: each launch leaves the flags zero).
    - A list of arrays (a `ListConstraint`) is passed as its *table*: an int64 array
      of shape (length, 1 + 2 ndim), row i holding element i's address, dims and
      strides (in elements), whose slots are an array's; its `pointer` slot says so
      (`list`: the elements' dtype and ndim, the row's words).  The table must stay
      in device memory until the kernel has run.
    - `tensor_maps` (sm_90a): each `tensor_map` slot is a CUtensorMap of array `param`,
      encoded as tileir.runtime.tensor_maps does (`box`, `swizzle`, `clip`).
    - `meta`: the metadata tileir's launcher takes, named for the symbol:
      `tileir.runtime.launcher.launch(cubin, info["meta"], grid, args)`.
    """
    _check_kernel(kernel)
    if not isinstance(signature, KernelSignature):
        raise TypeError(f"signature must be a KernelSignature, got {signature!r}")
    _check_convention(signature, 0)
    target = _target(gpu_code)
    symbol = _symbol(kernel, signature)
    params = _specialize(kernel, signature)
    compiled = _compile(kernel, params, target)
    meta = compiled.meta
    slots = _abi_slots(params, meta)
    table = _kernel_params(compiled.cubin, meta["name"])
    if [size for _, size in table] != [s["size"] for s in slots]:
        raise TileInternalError(f"kernel '{meta['name']}': ptxas laid out parameters of sizes "
                                f"{[size for _, size in table]}, the ABI says "
                                f"{[s['size'] for s in slots]}")
    for s, (offset, _) in zip(slots, table):
        s["offset"] = offset
    return {"symbol": symbol, "target": target, "block": [meta["num_threads"], 1, 1],
            "shared_bytes": meta["shared_bytes"], "slots": slots,
            "param_bytes": max((s["offset"] + s["size"] for s in slots), default=0),
            "persistent": bool(meta.get("persistent")), "grid_scale": meta.get("grid_scale"),
            "grid_perm": meta.get("grid_perm"), "workspace": meta.get("workspace"),
            "tensor_maps": meta.get("tensor_maps", []), "meta": {**meta, "name": symbol}}


def _abi_slots(params: list[tuple[str, Any]], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The kernel's parameters per docs/gpu-backend.md's ABI, without offsets."""
    runtime: list[tuple[str, Any]] = []
    for name, kind in params:
        if isinstance(kind, TupleParam):          # its runtime items, named t[0], t[1][0]
            runtime.extend(leaf_params(kind, name))
        elif isinstance(kind, (Param, TableListParam)):
            runtime.append((name, kind))
    if len(runtime) != len(meta["params"]):
        raise TileInternalError(f"kernel '{meta['name']}': {len(runtime)} runtime parameters "
                                f"but its metadata lists {len(meta['params'])}")
    slots: list[dict[str, Any]] = []

    def slot(param: str | None, what: str, ctype: str, size: int, **extra):
        slots.append({"param": param, "what": what, **extra, "ctype": ctype, "size": size})

    for name, kind in runtime:
        table = {}
        if isinstance(kind, TableListParam):      # the list's table, an int64 array
            e = kind.element
            row = ["pointer"] + [f"dim {a}" for a in range(e.ndim)] + \
                [f"stride {a}" for a in range(e.ndim)]
            table = {"list": {"dtype": e.dtype.name, "ndim": e.ndim, "row": row}}
            kind = kind.table
        if isinstance(kind, ArrayParam):
            slot(name, "pointer", "void*", 8, **table)
            for axis in range(kind.ndim):
                slot(name, "dim", "int32_t", 4, axis=axis)
            for axis in range(kind.ndim):
                slot(name, "stride", "int64_t", 8, axis=axis)
        else:
            size = max(1, kind.dtype.bits // 8)
            slot(name, "scalar", _C_TYPES.get(kind.dtype.name, f"uint{8 * size}_t"), size)
    if meta.get("persistent"):
        for axis in range(3):
            slot(None, "grid", "int32_t", 4, axis=axis)
    if meta.get("workspace"):
        slot(None, "workspace", "void*", 8)
    for tm in meta.get("tensor_maps", []):
        if tm["slot"] != len(slots):
            raise TileInternalError(f"kernel '{meta['name']}': tensor map slot {tm['slot']}, "
                                    f"expected {len(slots)}")
        slot(runtime[tm["param"]][0], "tensor_map", "CUtensorMap", _TENSOR_MAP_BYTES)
    return slots
