"""Stage `gpu`: a layout-annotated `tile.kernel` -> `gpu.module` with one `gpu.func`.

The kernel's ABI follows docs/gpu-backend.md: each `!tile.array<T, R>` argument
becomes a global pointer, R i32 dims and R i64 strides (in elements); scalars
stay scalars; `Constant` arguments are already folded away.  On sm_90a every
distinct TMA copy (array, box, swizzle) of the kernel's rings adds one trailing
parameter: a 128-byte CUtensorMap the runtime encodes, passed by value
(`llvm.byval` + `nvvm.grid_constant`, set by the `llvm` stage) and listed in the
metadata's `tensor_maps`.  A persistent kernel (`tile.grid_size` in its body:
backend/pipeline/persistent.py) takes the grid it walks as three i32 parameters before
the tensor maps, and its metadata says `"persistent": true`: the runtime passes
the grid there and launches one block per SM.  A stream-K kernel
(`tile.partial_store` in its body: backend/pipeline/stream_k.py) takes a workspace pointer
after that grid; its metadata's `workspace` is the bytes of one block's slot (the
runtime passes `WORKSPACE_FLAG_SLOTS` i32 flags, then one slot per block, zeroed
once, one workspace per stream).  The block is `32 *
tile.num_warps` threads; shared memory is one dynamic buffer whose size is
returned in the metadata.
"""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import gpu

from tileir.dialect import TileIRError
from tileir.dialect.types import array_info, bitwidth, signless
from tileir.dialect.verifier import arg_has, kernel_functions, module_chip
from tileir.backend.layout.assign import NUM_WARPS_ATTR, check_tile_registers
from tileir.backend.layout import tma_store
from tileir.backend.layout.budget import SharedMemoryOverflow
from tileir.backend.pipeline.programmatic import ALWAYS, ON_REQUEST, launch_mode
from tileir.backend.layout.warpgroup_split import (alternate_owners, early_rescale,
                                                    mbarrier_handoffs, merged_handoffs,
                                                    owner_alone, skewed_handoffs)
from tileir.backend.layout.retile import (CLUSTER_ATTR, GRID_REWRITES_ATTR, GRID_SCALE_ATTR,
                                          PERM_ATTR)
from . import owner_runs
from .context import I32, I64, ArrayABI, LoweringContext
from .rules import lower_block
from .rules.cluster import finish_cluster
from .rules.ring import copy_box, multicast_buffers

GPU_MODULE = "tileir_kernels"


@dataclasses.dataclass
class KernelMeta:
    """What the runtime needs to launch the kernel (JSON-serializable)."""

    name: str
    num_threads: int
    shared_bytes: int
    params: list[dict]
    # one per trailing CUtensorMap parameter: {"slot": ABI slot, "param": index into
    # params of its array, "box": [...] (tile dim order), "swizzle": bytes}
    tensor_maps: list[dict] = dataclasses.field(default_factory=list)
    # [axis, num, den] when tile-retile-blocks rescaled the tiles of a grid axis: the
    # launch's grid along `axis` is multiplied by den / num
    grid_scale: list[int] | None = None
    # the kernel walks the tiles of the grid it is given (3 i32 parameters after the
    # user's) on a grid of one block per SM
    persistent: bool = False
    # the passes that rewrote the kernel for the launch's grid (tile.grid_rewrites)
    grid_rewrites: list[str] | None = None
    # the kernel waits for / releases its neighbours in the stream (tile.grid_dependency):
    # launched with programmatic stream serialization (runtime/launcher.py), always, or
    # (its author's ops: backend/pipeline/programmatic.py) where the launch asks
    programmatic_launch: bool = False
    programmatic_on_request: bool = False
    # the blocks of a cluster along each grid axis (tile-cluster-rows), when not 1 x 1 x 1
    cluster: list[int] | None = None
    # the launch's grid axes in the order the kernel reads them (tile-launch-order)
    grid_perm: list[int] | None = None
    # stream-K: the bytes of one block's slot of partial sums in the workspace the
    # runtime passes after the walked grid (backend/pipeline/stream_k.py)
    workspace: int | None = None

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        if not out["tensor_maps"]:
            del out["tensor_maps"]        # kernels without TMA keep the plain ABI record
        if out["grid_scale"] is None:
            del out["grid_scale"]
        if not out["persistent"]:
            del out["persistent"]
        if not out["grid_rewrites"]:
            del out["grid_rewrites"]
        for flag in ("programmatic_launch", "programmatic_on_request"):
            if not out[flag]:
                del out[flag]
        if out["cluster"] is None:
            del out["cluster"]
        if out["grid_perm"] is None:
            del out["grid_perm"]
        if out["workspace"] is None:
            del out["workspace"]
        return out


# The most dynamic shared memory one block may opt in to (CUDA's
# cudaDevAttrMaxSharedMemoryPerBlockOptin on H100/H200 and A100).
SMEM_PER_BLOCK = {"sm_90a": 227 * 1024, "sm_80": 163 * 1024}
# Kernel parameter bytes ptxas takes at PTX ISA 8.0 (what the ptx stage emits; 8.1
# and a CUDA 12.1 driver would allow 32764)
MAX_PARAM_BYTES = 4352


def _kernel_func(module: ir.Module) -> ir.Operation:
    kernels = kernel_functions(module)
    if len(kernels) != 1:
        raise TileIRError(f"the gpu stage needs exactly one tile.kernel function, found "
                          f"{len(kernels)}", module.operation.location)
    return kernels[0]


def _arg_names(func: ir.Operation) -> list[str]:
    if "tile.arg_names" in func.attributes:
        return [ir.StringAttr(a).value for a in ir.ArrayAttr(func.attributes["tile.arg_names"])]
    return [f"arg{i}" for i in range(len(func.regions[0].blocks[0].arguments))]


def lower_to_gpu(module: ir.Module) -> KernelMeta:
    """Rewrites `module` in place: the kernel function becomes a `gpu.func`; returns its metadata."""
    func = _kernel_func(module)
    name = ir.StringAttr(func.attributes["sym_name"]).value
    if NUM_WARPS_ATTR not in func.attributes:
        raise TileIRError("the kernel has no layouts: run the 'layout' stage first",
                          func.location)
    # (range-checked by the dialect verifier, dialect/verifier.py)
    num_warps = ir.IntegerAttr(func.attributes[NUM_WARPS_ATTR]).value
    # (again here: a hand-written layout-stage input skipped the layout stage's check,
    # and lowering a tile far past the register file unrolls it without bound)
    check_tile_registers(func, num_warps)
    producer_warps = ir.IntegerAttr(func.attributes["tile.producer_warps"]).value \
        if "tile.producer_warps" in func.attributes else 0
    threads = 32 * (num_warps + producer_warps)
    entry = func.regions[0].blocks[0]
    names = _arg_names(func)
    params, types, arg_attrs = [], [], []
    ptr_t = ir.Type.parse("!llvm.ptr<1>")
    for i, a in enumerate(entry.arguments):
        info = array_info(a.type)
        if info is not None:
            aligned = arg_has(func, i, "tile.aligned")
            params.append({"kind": "array", "name": names[i], "dtype": str(info.element_type),
                           "ndim": info.rank, "aligned": aligned})
            types += [ptr_t] + [I32()] * info.rank + [I64()] * info.rank
            ptr_attrs = {"llvm.align": ir.IntegerAttr.get(I64(), 16)} if aligned else {}
            arg_attrs += [ir.DictAttr.get(ptr_attrs)] + [ir.DictAttr.get({})] * (2 * info.rank)
        else:
            params.append({"kind": "scalar", "name": names[i], "dtype": str(a.type)})
            types.append(a.type)
            arg_attrs.append(ir.DictAttr.get({}))
    chip = module_chip(module)
    persistent = _uses(func, "tile.grid_size")
    grid_slot = len(types)
    if persistent:
        types += [I32()] * 3
        arg_attrs += [ir.DictAttr.get({})] * 3
    stream_k = _uses(func, "tile.partial_store")
    workspace_slot = len(types)
    if stream_k:
        types.append(ptr_t)
        arg_attrs.append(ir.DictAttr.get({"llvm.align": ir.IntegerAttr.get(I64(), 16)}))
    maps = _tensor_maps(func, chip) if chip.startswith("sm_90") else []
    tmap_t = ir.Type.parse("!llvm.ptr")
    tensor_maps = []
    for arg_index, box, swizzle, clip in maps:
        tm = {"slot": len(types), "param": arg_index, "box": list(box), "swizzle": swizzle}
        if clip is not None:
            tm["clip"] = clip
        tensor_maps.append(tm)
        types.append(tmap_t)
        arg_attrs.append(ir.DictAttr.get({}))
    _check_param_bytes(name, types, params, func.location)
    module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
    with ir.InsertionPoint(module.body), func.location:
        gmod = gpu.GPUModuleOp(GPU_MODULE)
        gmod.bodyRegion.blocks.append()
        with ir.InsertionPoint(gmod.bodyRegion.blocks[0]):
            gfunc = gpu.GPUFuncOp(ir.FunctionType.get(types, []), sym_name=name, kernel=True,
                                  known_block_size=[threads, 1, 1])
            gfunc.operation.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
            if "tile.occupancy" in func.attributes:
                # ptxas caps registers so this many blocks fit on one SM (.minnctapersm)
                gfunc.operation.attributes["nvvm.minctasm"] = func.attributes["tile.occupancy"]
            elif producer_warps:
                # setmaxnreg needs a register cap at entry: one block per SM
                gfunc.operation.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(I32(), 1)
            if CLUSTER_ATTR in func.attributes:
                # tile-cluster-rows: the cluster's shape in the kernel (.reqnctapercluster),
                # so a plain launch runs its blocks as clusters
                dims = list(ir.DenseI64ArrayAttr(func.attributes[CLUSTER_ATTR]))
                gfunc.operation.attributes["nvvm.cluster_dim"] = ir.DenseI32ArrayAttr.get(dims)
            body = gfunc.body.blocks.append(*types)
    hints = ir.BoolAttr(func.attributes["tile.cache_hints"]).value \
        if "tile.cache_hints" in func.attributes else None
    cx = LoweringContext(num_warps, body, hints, chip, producer_warps)
    # owned ops run by their warpgroup alone (owner_runs.py): a warpgroup split not
    # asked to keep replicas
    cx.owner_exec = owner_alone(func)
    cx.owner_rescale = early_rescale(func)
    cx.owner_mbarriers = mbarrier_handoffs(func)
    cx.owner_skew = skewed_handoffs(func)
    cx.owner_merge = merged_handoffs(func) and cx.owner_skew and not cx.owner_mbarriers
    cx.alternating = alternate_owners(func)     # owners 0 and 1 by step (owner_runs.py)
    if CLUSTER_ATTR in func.attributes:
        cx.cluster_dims = list(ir.DenseI64ArrayAttr(func.attributes[CLUSTER_ATTR]))
    cx.globals_before = gfunc.operation
    it = iter(body.arguments)
    for i, a in enumerate(entry.arguments):
        info = array_info(a.type)
        if info is None:
            cx.values[a] = next(it)
            continue
        ptr = next(it)
        dims = [next(it) for _ in range(info.rank)]
        strides = [next(it) for _ in range(info.rank)]
        cx.arrays[a] = ArrayABI(ptr, dims, strides, signless(info.element_type),
                                arg_has(func, i, "tile.aligned"),
                                arg_has(func, i, "tile.large"))
    for (arg_index, box, swizzle, _), tm in zip(maps, tensor_maps):
        cx.tensor_maps[(arg_index, box, swizzle)] = body.arguments[tm["slot"]]
    if persistent:
        cx.grid_size = [body.arguments[grid_slot + a] for a in range(3)]
    if stream_k:
        cx.workspace = body.arguments[workspace_slot]
    cx.tma_store = tma_store.enabled(func)
    mode = launch_mode(func) if chip.startswith("sm_90") else None
    planned = tma_store.stores(func, chip)
    cx.bulk_stores = bool(planned)
    cx.bulk_by_warps = any(p.warp_rows for _, p in planned)   # then every warp issues
    with ir.InsertionPoint(body):
        # the hand-offs' mbarriers before any buffer: below the rings, which the
        # epilogue's exchanges reuse once freed (owner_runs.prepare_handoffs)
        with func.location:
            owner_runs.prepare_handoffs(cx)
        lower_block(cx, entry)
        with func.location:
            cx.wait_bulk_reads()          # the block's shared memory outlives its TMA stores
            finish_cluster(cx)            # ... and the cluster's reads of it
            gpu.ReturnOp([])
    limit = SMEM_PER_BLOCK["sm_90a" if chip.startswith("sm_90") else "sm_80"]
    if cx.smem_bytes > limit:
        # the stage driver answers with shallower rings (backend/layout/budget.py)
        raise SharedMemoryOverflow(name, cx.smem_bytes, limit, chip, func.location)
    scale = list(ir.DenseI64ArrayAttr(func.attributes[GRID_SCALE_ATTR])) \
        if GRID_SCALE_ATTR in func.attributes else None
    rewrites = [ir.StringAttr(a).value for a in ir.ArrayAttr(func.attributes[GRID_REWRITES_ATTR])] \
        if GRID_REWRITES_ATTR in func.attributes else None
    cluster = list(ir.DenseI64ArrayAttr(func.attributes[CLUSTER_ATTR])) \
        if CLUSTER_ATTR in func.attributes else None
    perm = list(ir.DenseI64ArrayAttr(func.attributes[PERM_ATTR])) \
        if PERM_ATTR in func.attributes else None
    func.erase()
    return KernelMeta(name, threads, cx.smem_bytes, params, tensor_maps, scale, persistent,
                      rewrites, mode == ALWAYS, mode == ON_REQUEST, cluster, perm,
                      cx.workspace_bytes if stream_k else None)


def _check_param_bytes(name: str, types: list[ir.Type], params: list[dict], loc) -> None:
    """A located error for a kernel whose parameters outgrow what ptxas takes (each
    at its natural alignment: a 3-d array's pointer, dims and strides take 48 bytes)."""
    at = 0
    for t in types:
        size = 128 if str(t) == "!llvm.ptr" else 8 if str(t).startswith("!llvm.ptr") \
            else max(1, bitwidth(t) // 8)
        align = 64 if size == 128 else size
        at = -(-at // align) * align + size
    if at > MAX_PARAM_BYTES:
        arrays = sum(1 for p in params if p["kind"] == "array")
        raise TileIRError(f"kernel '{name}' takes {at} bytes of parameters ({arrays} arrays "
                          f"and {len(params) - arrays} scalars); the GPU takes at most "
                          f"{MAX_PARAM_BYTES}: pass the arrays as a list (one table, "
                          f"whatever its length)", loc)


def _uses(func: ir.Operation, name: str) -> bool:
    from tileir.passes.effects import contains
    return contains(func, name)


def _tensor_maps(func: ir.Operation, chip: str) -> list[tuple]:
    """(array argument index, box, swizzle, clip dim) of every distinct TMA copy in the
    kernel (distinct by the first three): the rings' loads, then the TMA stores."""
    from tileir.dialect.layout import tile_layout
    found: list[tuple] = []

    def visit(op):
        # a ring's loads, and the L2 prefetches of their tiles (the same maps, unshared)
        if op.name in ("tile.ring_load", "tile.prefetch_l2"):
            view = op.opview
            t = view.tile_type()
            lay = tile_layout(t)
            eb = max(1, bitwidth(t.element_type) // 8)
            shared = op.name == "tile.ring_load" and \
                view.buffer in multicast_buffers(view.ring.owner)
            box, clip = copy_box(lay, tuple(t.shape), eb, shared)
            key = (view.array.arg_number, box, lay.swizzle)
            same = [f for f in found if f[:3] == key]
            if not same:
                found.append(key + (clip,))
            elif same[0][3] != clip:
                raise TileIRError(f"internal error: TMA copies {key} clip dims "
                                  f"{same[0][3]} and {clip}", op.location)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    for op, p in tma_store.stores(func, chip):          # stores: never clipped
        key = (op.operands[0].arg_number, p.box, p.swizzle)
        if not any(f[:3] == key for f in found):
            found.append(key + (None,))
    return found
