"""Stages `llvm`, `ptx` and `cubin`: upstream conversions, NVPTX, then ptxas.

Targets are explicit: `Target("sm_90a")` or `Target("sm_80")`.  Both use PTX
8.0 (`+ptx80`: sm_90a needs it; cache-hint forms on sm_80 need >= 7.4).
ptxas is looked up, in order: the `TILEIR_PTXAS` knob, the pip wheel
(`nvidia-cuda-nvcc`), `PATH`, `CUDA_HOME`/`CUDA_PATH`, `/usr/local/cuda`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import subprocess
import tempfile

from mlir import ir
from mlir.dialects import gpu
from mlir.passmanager import PassManager

from tileir import deadline
from tileir.dialect import TileIRError
from tileir.dialect.diagnostics import from_mlir_error
from tileir.dialect.types import by_type
from . import llvm_options

TARGETS = ("sm_80", "sm_90a")

# gpu.module contents to the LLVM/NVVM dialects.  No convert-vector-to-llvm:
# convert-gpu-to-nvvm lowers vector ops itself with the workgroup address space,
# and an earlier convert-vector-to-llvm aborts on workgroup memrefs (STACK.md).
LLVM_PIPELINE = (
    "builtin.module(convert-nvgpu-to-nvvm,"
    "gpu.module(convert-vector-to-scf,convert-scf-to-cf,convert-nvvm-to-llvm,"
    "expand-strided-metadata,lower-affine,convert-gpu-to-nvvm{index-bitwidth=64},"
    "canonicalize,cse),reconcile-unrealized-casts)")


@dataclasses.dataclass(frozen=True)
class Target:
    chip: str
    ptx_features: str = "+ptx80"
    opt_level: int = 3

    def __post_init__(self):
        if self.chip not in TARGETS:
            raise ValueError(f"unknown target '{self.chip}'; supported: {', '.join(TARGETS)}")

    @property
    def is_hopper(self) -> bool:
        return self.chip.startswith("sm_90")

    @property
    def compute_capability(self) -> tuple[int, int]:
        digits = self.chip[3:].rstrip("a")
        return int(digits[:-1]), int(digits[-1])

    def attr(self) -> str:
        return (f'#nvvm.target<O = {self.opt_level}, chip = "{self.chip}", '
                f'features = "{self.ptx_features}">')


def _run(module: ir.Module, pipeline: str) -> None:
    from tileir.passes.pipeline import upstream_verifier
    try:
        with module.context:
            manager = PassManager.parse(pipeline)
            # the stage's output is verified after it (passes/pipeline.py); between
            # these passes only where the pipeline verifies between its own
            manager.enable_verifier(upstream_verifier())
            manager.run(module.operation)
    except ir.MLIRError as e:
        raise TileIRError(from_mlir_error(e)) from None


def lower_to_llvm(module: ir.Module, target: Target, grid_constants: list[int] = ()) -> None:
    """Stage `llvm`: attaches the NVVM target and converts the gpu.module to NVVM/LLVM.

    `grid_constants` are the kernel's CUtensorMap parameters (ABI slots): they become
    128-byte by-value parameters the kernel takes the address of (`llvm.byval` +
    `nvvm.grid_constant`, 64-byte aligned).  convert-gpu-to-nvvm drops `llvm.byval`
    from `gpu.func` arguments, and the NVVM verifier rejects `nvvm.grid_constant`
    anywhere but on an `llvm.func` kernel, so both are set here, after the conversion.
    """
    _check_id_bounds(module)
    tgt = ir.Attribute.parse(target.attr(), module.context)
    for op in module.body.operations:
        if op.operation.name == "gpu.module":
            op.operation.attributes["targets"] = ir.ArrayAttr.get([tgt], module.context)
    _run(module, LLVM_PIPELINE)
    if grid_constants:
        _mark_grid_constants(module, list(grid_constants))


MAX_ID_BOUND = (1 << 31) - 1      # a grid's or block's extent along an axis, at most


def _check_id_bounds(module: ir.Module) -> None:
    """A located error for an id op (`gpu.thread_id x upper_bound N` and its kin)
    whose bound is not 1 to 2^31 - 1: convert-gpu-to-nvvm builds a 32-bit range from it
    and aborts the process on some (2^32 - 1, -1; found by test/fuzz/fuzz_mlir.py)."""
    bad = []

    def visit(op):
        if "upper_bound" in op.attributes:
            attr = op.attributes["upper_bound"]
            if isinstance(attr, ir.IntegerAttr) and \
                    not 1 <= ir.IntegerAttr(attr).value <= MAX_ID_BOUND:
                bad.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if bad:
        op = bad[0]
        raise TileIRError(f"'{op.name}' has upper_bound "
                          f"{ir.IntegerAttr(op.attributes['upper_bound']).value}; an id's "
                          f"bound is 1 to {MAX_ID_BOUND}", op.location)


def _llvm_compatible(t: ir.Type) -> bool:
    """Whether the translation to LLVM IR knows `t`: integers, floats, vectors of them,
    and the LLVM dialect's own types."""
    if isinstance(t, ir.VectorType):
        return _llvm_compatible(t.element_type)
    return isinstance(t, (ir.IntegerType, ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type,
                          ir.NoneType)) or str(t).startswith("!llvm.") or \
        type(t).__name__.startswith("Float")


def _compatible(t: ir.Type) -> bool:
    return by_type("llvm", t, _llvm_compatible)


def _power_of_two_attr(attr: ir.Attribute) -> bool:
    if not isinstance(attr, ir.IntegerAttr):
        return True
    a = ir.IntegerAttr(attr).value
    return a > 0 and not a & (a - 1)


def _check_translatable(module: ir.Module) -> None:
    """A located error for what the translation to LLVM IR and NVPTX would abort the
    process on, or report without a place (found by test/fuzz/fuzz_mlir.py): a tensor
    or memref type left on an op of the gpu.module (an operand, a result or a type
    attribute such as a GEP's element type), an alignment that is not a power of
    two, a kernel's thread count out of 1..1024."""
    bad = []

    def visit(op):
        if op.name in ("gpu.module", "builtin.module"):
            return ir.WalkResult.ADVANCE
        types = [v.type for v in op.operands]
        types += [v.type for v in op.results]
        attrs = op.attributes          # (a new view on every read of op.attributes)
        for i in range(len(attrs)):
            named = attrs[i]
            attr, name = named.attr, named.name
            if isinstance(attr, ir.TypeAttr):
                types.append(attr.value)
            elif name == "alignment" and not _power_of_two_attr(attr):
                bad.append((op, f"alignment {ir.IntegerAttr(attr).value}, not a power of two"))
            elif name == "arg_attrs" and isinstance(attr, ir.ArrayAttr):
                for i, d in enumerate(ir.ArrayAttr(attr)):
                    d = ir.DictAttr(d)
                    if "llvm.align" in d and not _power_of_two_attr(d["llvm.align"]):
                        bad.append((op, f"argument #{i} aligned to "
                                        f"{ir.IntegerAttr(d['llvm.align']).value}, not a "
                                        f"power of two"))
            elif name in ("nvvm.maxntid", "nvvm.reqntid") and \
                    isinstance(attr, ir.DenseI32ArrayAttr):
                dims = list(ir.DenseI32ArrayAttr(attr))
                if any(d < 1 for d in dims) or math.prod(dims) > 1024:
                    bad.append((op, f"{name} {dims}: a block has 1 to 1024 threads"))
        for t in types:
            if not _compatible(t):
                bad.append((op, f"type {t}, which has no LLVM equivalent: the 'llvm' stage "
                                f"must leave only LLVM types"))
        return ir.WalkResult.INTERRUPT if bad else ir.WalkResult.ADVANCE

    for top in module.body.operations:
        if top.operation.name == "gpu.module":
            top.operation.walk(visit)
    if bad:
        op, what = bad[0]
        raise TileIRError(f"'{op.name}' has {what}", op.location)


TENSOR_MAP_BYTES = 128


def _mark_grid_constants(module: ir.Module, slots: list[int]) -> None:
    with module.context:
        byval = ir.TypeAttr.get(ir.Type.parse(f"!llvm.array<{TENSOR_MAP_BYTES} x i8>"))
        align = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)

        def visit(op):
            if op.name == "llvm.func" and "nvvm.kernel" in op.attributes:
                attrs = list(ir.ArrayAttr(op.attributes["arg_attrs"]))
                for slot in slots:
                    d = ir.DictAttr(attrs[slot])
                    new = {d[i].name: d[i].attr for i in range(len(d))}
                    new.update({"llvm.byval": byval, "nvvm.grid_constant": ir.UnitAttr.get(),
                                "llvm.align": align})
                    attrs[slot] = ir.DictAttr.get(new)
                op.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)


def emit_ptx(module: ir.Module) -> str:
    """Stage `ptx`: NVPTX code generation of the (LLVM-stage) gpu.module."""
    _check_translatable(module)
    # Before LLVM optimizes: the SLP vectorizer's copyable lanes abort the process on
    # some kernels (a warp-shuffle sum in an f16 store; llvm_options.py).
    llvm_options.apply()
    _run(module, "builtin.module(gpu-module-to-binary{format=isa})")
    return binary_object(module)[1].object.decode()


def binary_object(module: ir.Module) -> tuple[ir.Operation, "gpu.ObjectAttr"]:
    """The `gpu.binary` op of a ptx/cubin-stage module and its (single) object."""
    for op in module.body.operations:
        if op.operation.name == "gpu.binary":
            obj = ir.ArrayAttr(op.operation.attributes["objects"])[0]
            return op.operation, gpu.ObjectAttr(obj)
    raise TileIRError("no gpu.binary in the module: run the 'ptx' stage first")


def find_cuda_tool(name: str) -> str | None:
    """A CUDA binary utility (`ptxas`, `cuobjdump`): the pip wheels' (nvidia-cuda-nvcc,
    nvidia-cuda-cuobjdump) first, then PATH, CUDA_HOME/CUDA_PATH, /usr/local/cuda."""
    try:
        import nvidia
        for root in nvidia.__path__:
            for sub in ("cu13", "cuda_nvcc", "cuda_cuobjdump"):
                cand = os.path.join(root, sub, "bin", name)
                if os.path.exists(cand):
                    return cand
    except ImportError:
        pass
    found = shutil.which(name)
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "bin", name)):
            return os.path.join(root, "bin", name)
    return None


def find_ptxas() -> str:
    from tileir import knobs
    explicit = knobs.PTXAS.raw()
    if explicit:
        if not os.path.exists(explicit):
            raise TileIRError(f"TILEIR_PTXAS={explicit} does not exist")
        return explicit
    found = find_cuda_tool("ptxas")
    if found is None:
        raise TileIRError("ptxas not found: pip install nvidia-cuda-nvcc, put a CUDA "
                          "toolkit's bin/ on PATH, or set TILEIR_PTXAS=/path/to/ptxas")
    return found


def ptxas_version(ptxas: str | None = None) -> str:
    out = subprocess.run([ptxas or find_ptxas(), "--version"], capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1] if out.returncode == 0 else "unknown"


def assemble(ptx: str, target: Target, *, verbose: bool = False) -> tuple[bytes, str]:
    """Stage `cubin`: ptxas on the PTX; returns (cubin bytes, ptxas' resource report)."""
    ptxas = find_ptxas()
    from tileir import knobs
    scratch = knobs.temp_dir()
    with tempfile.TemporaryDirectory(prefix="tileir-ptxas-", dir=scratch) as d:
        src, dst = os.path.join(d, "kernel.ptx"), os.path.join(d, "kernel.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [ptxas, f"-arch={target.chip}", f"-O{target.opt_level}", "-v", src, "-o", dst]
        clock = deadline.active()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=clock.remaining() if clock else None)
        except subprocess.TimeoutExpired:
            raise clock.expired("in ptxas") from None
        if r.returncode != 0:
            keep = os.path.join(scratch or tempfile.gettempdir(), "tileir-failed.ptx")
            with open(keep, "w") as f:
                f.write(ptx)
            raise TileIRError(f"ptxas failed:\n{r.stderr.strip()}\nreproduce with: "
                              f"{' '.join(cmd[:-3])} -v {keep} -o /tmp/kernel.cubin")
        with open(dst, "rb") as f:
            return f.read(), r.stderr
