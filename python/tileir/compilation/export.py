"""Compiling signatures as tileir specializations and writing them into one cubin
(`export_kernel`)."""

from __future__ import annotations

import io
import os
import re
import secrets
from typing import (IO, TYPE_CHECKING, Any, Literal, Sequence)

from ..annotations import ArrayAnnotation, ListAnnotation, TupleAnnotation
from ..errors import (TileInternalError, TileTypeError, TileUnsupportedFeatureError, TileValueError)
from ..kernel import Kernel
from ..specialization import (ArrayParam, ArraySpec, ConstantAnnotation, ScalarParam,
                              TableListParam, TupleParam, classify_arg)
from .elf import _elf_functions
from .mangling import mangle_kernel_name
from .signatures import (_TILEIR, ArrayConstraint, ConstantConstraint, KernelSignature,
                         ListConstraint, ParameterConstraint, ScalarConstraint, TupleConstraint,
                         _check_kernel, _item_bits)

if TYPE_CHECKING:
    from ..kernel import CompiledKernel


# ---------------------------------------------------------------------------
# Signatures as tileir specializations
# ---------------------------------------------------------------------------
def _specialize(kernel: Kernel, signature: KernelSignature) -> list[tuple[str, Any]]:
    """What `Kernel.classify` gives for a launch the signature describes."""
    names = list(kernel.signature.parameters)
    if len(signature.parameters) != len(names):
        raise TileTypeError(f"kernel '{kernel.name}' takes {len(names)} parameters "
                            f"({', '.join(names)}) but the signature describes "
                            f"{len(signature.parameters)}")
    return [(name, _param_kind(kernel, name, c))
            for name, c in zip(names, signature.parameters)]


def _param_kind(kernel: Kernel, name: str, c: ParameterConstraint) -> Any:
    return _kind(kernel, name, kernel.param_annotations[name], c)


def _kind(kernel: Kernel, name: str, annotation: Any, c: ParameterConstraint) -> Any:
    """The specialization entry of parameter (or tuple item) `name`, annotated
    `annotation`, that constraint `c` describes."""
    what = f"parameter '{name}' of kernel '{kernel.name}'"
    if isinstance(c, TupleConstraint) and not isinstance(annotation, ConstantAnnotation) \
            and _constant_value(c) is _RUNTIME or isinstance(annotation, TupleAnnotation):
        return _tuple_kind(kernel, name, annotation, c)
    if isinstance(c, ListConstraint):
        # the length is the launch's: the list is passed as a table (TableListParam)
        if annotation is not None and not isinstance(annotation, ListAnnotation):
            raise TileTypeError(f"{what} is annotated {annotation!r}, not as a list of arrays, "
                                f"but the signature describes it with a ListConstraint")
        element = annotation.element if annotation is not None else None
        return TableListParam(_array_param(f"{what} (its elements)", element, c.element))
    if isinstance(annotation, ListAnnotation):
        raise TileTypeError(f"{what} is annotated as a list of arrays (ListAnnotation): "
                            f"describe it with a ListConstraint, got {type(c).__name__}")
    value = _constant_value(c)
    if isinstance(annotation, ConstantAnnotation):
        if value is _RUNTIME:
            raise TileTypeError(f"{what} is a ct.Constant parameter, compiled in: its "
                                f"constraint must be a ConstantConstraint (or a tuple of "
                                f"them), got {type(c).__name__}")
        return classify_arg(kernel.name, name, annotation, value, True)
    if isinstance(c, ConstantConstraint):
        raise TileTypeError(f"{what} is not a ct.Constant parameter, so its value is passed at "
                            f"launch: describe it with a ScalarConstraint (or annotate it "
                            f"ct.Constant[...] to compile {c.value!r} in)")
    if isinstance(c, TupleConstraint):     # of constants, for a plain parameter
        return _tuple_kind(kernel, name, annotation, c)
    if isinstance(c, ScalarConstraint):
        kind = classify_arg(kernel.name, name, annotation, ScalarParam(c.dtype), True)
        if kind != ScalarParam(c.dtype):
            raise TileTypeError(f"{what} is annotated {kind.dtype.name} but the signature says "
                                f"{c.dtype.name}")
        return kind
    if not isinstance(annotation, ArrayAnnotation):      # None, or the error it is
        classify_arg(kernel.name, name, annotation, ArraySpec(c.dtype, c.ndim), True)
    return _array_param(what, annotation, c)


def _tuple_kind(kernel: Kernel, name: str, annotation: Any, c: ParameterConstraint
                ) -> TupleParam:
    """A tuple passed at launch: each item's kind under its item annotation (the
    TupleParam a launch with such a tuple classifies to)."""
    what = f"parameter '{name}' of kernel '{kernel.name}'"
    if not isinstance(c, TupleConstraint):
        raise TileTypeError(f"{what} is annotated as a tuple ({annotation!r}): describe it "
                            f"with a TupleConstraint, got {type(c).__name__}")
    if annotation is not None and not isinstance(annotation, TupleAnnotation):
        raise TileTypeError(f"{what} is annotated {annotation!r}, not as a tuple, but the "
                            f"signature describes it with a TupleConstraint")
    n = len(c.items)
    if annotation is None or annotation.items is None:
        items = [None if annotation is None else annotation.each] * n
    else:
        items = list(annotation.items)
        if len(items) != n:
            raise TileTypeError(f"{what} is annotated {annotation!r}, a tuple of "
                                f"{len(items)}, but its TupleConstraint has {n} items")
    kinds = []
    for i, (ann, item) in enumerate(zip(items, c.items)):
        if isinstance(item, ListConstraint):
            raise TileUnsupportedFeatureError(f"item {i} of {what} is a ListConstraint: a list "
                                              f"inside a tuple is not exported by tileir; "
                                              f"pass the list as a parameter of its own")
        kinds.append(_kind(kernel, f"{name}[{i}]", ann, item))
    return TupleParam(tuple(kinds))


def _array_param(what: str, annotation: ArrayAnnotation | None,
                 c: ArrayConstraint) -> ArrayParam:
    """The ArrayParam an ArrayConstraint compiles to (the module docstring says how)."""
    aligned = _aligned(c)
    # an aligned array's unit last stride is part of `aligned`: compiling it in as well
    # would only make a variant apart from the one launches of such arrays compile
    strides = tuple((d, v) for d, v in _known(c.stride_constant)
                    if not (aligned and d == c.ndim - 1 and v == 1))
    param = ArrayParam(c.dtype, c.ndim, aligned=aligned, static_shape=_known(c.shape_constant),
                       static_strides=strides)
    if isinstance(annotation, ArrayAnnotation):
        _check_static_dims(what, annotation, param)
    return param


_RUNTIME = object()


def _constant_value(c: ParameterConstraint) -> Any:
    """The Python value of a constant (or tuple of constants); _RUNTIME otherwise."""
    if isinstance(c, ConstantConstraint):
        return c.value
    if isinstance(c, TupleConstraint):
        items = tuple(_constant_value(i) for i in c.items)
        return _RUNTIME if any(i is _RUNTIME for i in items) else items
    return _RUNTIME


def _known(entries: tuple[int | None, ...]) -> tuple[tuple[int, int], ...]:
    return tuple((d, v) for d, v in enumerate(entries) if v is not None)


def _aligned(c: ArrayConstraint) -> bool:
    """Whether the constraint promises docs/gpu-backend.md's aligned arrays: base % 16
    bytes, unit last stride, other strides multiples of 16 bytes (dims of size 1
    exempt: their stride never moves an address)."""
    if c.base_addr_divisible_by % 16:
        return False
    bits = _item_bits(c.dtype)
    for d in range(c.ndim):
        if c.shape_constant[d] == 1:
            continue
        stride = c.stride_constant[d]
        if d == c.ndim - 1:
            if stride != 1:
                return False
        elif (stride if stride is not None else c.stride_divisible_by[d]) * bits % 128:
            return False
    return True


def _check_static_dims(what: str, annotation: ArrayAnnotation, param: ArrayParam) -> None:
    """An annotated parameter compiles those entries in: the signature must give them."""
    for field, dims, known, constraint_field in (
            ("static_shape_dims", annotation.static_shape_dims, param.static_shape,
             "shape_constant"),
            ("static_stride_dims", annotation.static_stride_dims, param.static_strides,
             "stride_constant")):
        have = dict(known)
        for d in dims:
            if not -param.ndim <= d < param.ndim:
                raise TileValueError(f"{what}: {field} names dim {d} of a {param.ndim}-d "
                                     f"array")
            if d % param.ndim not in have:
                raise TileValueError(f"{what} is annotated {field}={dims}, which the kernel "
                                     f"compiles in: the signature's ArrayConstraint must give "
                                     f"{constraint_field}[{d % param.ndim}]")


_PTX_SYMBOL = re.compile(r"[A-Za-z][A-Za-z0-9_]*|_[A-Za-z0-9_]+")


def _symbol(kernel: Kernel, signature: KernelSignature) -> str:
    symbol = signature.symbol
    if symbol is None:
        symbol = mangle_kernel_name(kernel.name, signature)
    if not _PTX_SYMBOL.fullmatch(symbol):
        raise ValueError(f"symbol {symbol!r} cannot name a kernel in a cubin: use letters, "
                         f"digits and '_', starting with a letter (or '_' and one more)")
    return symbol


def _check_convention(signature: KernelSignature, index: int) -> None:
    convention = signature.calling_convention
    if convention.code == _TILEIR:
        return
    raise TileUnsupportedFeatureError(
        f"signature #{index} uses calling convention {convention.name}, which tileir does not "
        f"implement: cuTile's conventions pass an array's shape and strides as 2 x ndim "
        f"values of its index_dtype, tileir's kernels take ndim int32 dims then ndim int64 "
        f"strides, and on sm_90a a kernel that copies with TMA takes CUtensorMap parameters "
        f"after the others (docs/gpu-backend.md, \"Kernel ABI\").  Export with "
        f"CallingConvention.tileir_v1() and launch as kernel_launch_info() describes")


_GPU_CODES = {"sm_80": "sm_80", "sm_90": "sm_90a", "sm_90a": "sm_90a"}


def _target(gpu_code: Any) -> str:
    if gpu_code is None:
        raise ValueError("gpu_code is required for output_format='cubin': the GPU to compile "
                         "for, 'sm_80' or 'sm_90a'")
    if not isinstance(gpu_code, str):
        raise TypeError(f"gpu_code must be a str such as 'sm_90a', got {gpu_code!r}")
    target = _GPU_CODES.get(gpu_code)
    if target is not None:
        return target
    if re.fullmatch(r"sm_[0-9]+[a-z]?", gpu_code):
        raise TileUnsupportedFeatureError(
            f"tileir does not compile for {gpu_code}: it compiles for sm_80 (Ampere; those "
            f"cubins run on every 8.x GPU) and sm_90a (Hopper; 'sm_90' means sm_90a)")
    raise ValueError(f"gpu_code must name a GPU such as 'sm_80' or 'sm_90a', got {gpu_code!r}")


def _compile(kernel: Kernel, params: list[tuple[str, Any]], target: str) -> CompiledKernel:
    """The `cubin`-stage specialization, through the compile cache (whose entry keeps
    every stage's artifact, the `llvm` stage's IR among them).  `Kernel.compile`
    would classify arguments, and an ArraySpec cannot carry the constant shape and
    stride entries a signature may give: the specialization goes in as built."""
    from ..cache import Cache
    return kernel._load_or_build(params, target, Cache())


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------
def export_kernel(kernel: Kernel, signatures: Sequence[KernelSignature],
                  output_file: IO | str | bytes | os.PathLike, *, gpu_code: str | None = None,
                  output_format: Literal["cubin", "tileir_bytecode"],
                  bytecode_version: str | None = None) -> None:
    """Compiles `kernel` for each signature and writes one cubin holding them all, each
    under its signature's symbol (the mangled name when it has none).

    `output_file`: a path (written atomically) or a binary file object (io.BytesIO
    keeps it in memory).  `gpu_code`: "sm_80" or "sm_90a" ("sm_90" means sm_90a).
    `output_format`: "cubin"; "tileir_bytecode" (with `bytecode_version`
    "major.minor") is NVIDIA's Tile IR bytecode, which tileir does not produce.
    Signatures must use `CallingConvention.tileir_v1()`; `kernel_launch_info`
    says how to launch each symbol.
    """
    _check_kernel(kernel)
    signatures = _check_signatures(signatures)
    _check_output(output_file)
    _check_format(output_format, bytecode_version)
    if output_format == "tileir_bytecode":
        raise TileUnsupportedFeatureError(
            "tileir does not produce Tile IR bytecode (output_format='tileir_bytecode', "
            "NVIDIA's format, compiled by its tileiras): tileir exports cubins; use "
            "output_format='cubin' with gpu_code='sm_80' or 'sm_90a'")
    target = _target(gpu_code)
    symbols = []
    for i, signature in enumerate(signatures):
        _check_convention(signature, i)
        symbols.append(_symbol(kernel, signature))
    _check_distinct(symbols)
    specializations = [_specialize(kernel, s) for s in signatures]   # all checked first
    parts = [(symbol, _llvm_ir(_compile(kernel, params, target)))
             for symbol, params in zip(symbols, specializations)]
    _write(output_file, _combine(parts, target))


def _llvm_ir(compiled: CompiledKernel) -> str:
    if "llvm" not in compiled.artifacts:
        where = getattr(compiled.entry, "path", None) or "(in memory)"
        raise TileInternalError(f"kernel '{compiled.name}': the compile cache entry {where} "
                                f"has no llvm-stage IR; clear it (python -m tileir.cache "
                                f"--clear) and export again")
    return compiled.artifacts["llvm"]


def _check_signatures(signatures: Any) -> list[KernelSignature]:
    if isinstance(signatures, KernelSignature) or not hasattr(signatures, "__iter__"):
        raise TypeError(f"signatures is a sequence of KernelSignature (a list, even of one), "
                        f"got {signatures!r}")
    signatures = list(signatures)
    if not signatures:
        raise ValueError("signatures is empty: export_kernel needs at least one signature")
    for i, s in enumerate(signatures):
        if not isinstance(s, KernelSignature):
            raise TypeError(f"signatures[{i}] is a {type(s).__name__}, not a KernelSignature")
    return signatures


def _check_output(output_file: Any) -> None:
    if isinstance(output_file, (str, bytes, os.PathLike)):
        return
    if isinstance(output_file, io.TextIOBase):
        raise TypeError("output_file is a text stream; a cubin is bytes: open it with 'wb', "
                        "or pass io.BytesIO()")
    if not callable(getattr(output_file, "write", None)):
        raise TypeError(f"output_file must be a path or a binary file object, got "
                        f"{type(output_file).__name__}")


def _check_format(output_format: Any, bytecode_version: Any) -> None:
    if output_format not in ("cubin", "tileir_bytecode"):
        raise ValueError(f"output_format must be 'cubin' or 'tileir_bytecode', got "
                         f"{output_format!r}")
    if bytecode_version is None:
        return
    if output_format != "tileir_bytecode":
        raise ValueError(f"bytecode_version goes with output_format='tileir_bytecode' only, "
                         f"got it with {output_format!r}")
    if not isinstance(bytecode_version, str) or not re.fullmatch(r"[0-9]+\.[0-9]+",
                                                                 bytecode_version):
        raise ValueError(f"bytecode_version must be 'major.minor' (e.g. '13.1'), got "
                         f"{bytecode_version!r}")


def _check_distinct(symbols: Sequence[str]) -> None:
    first: dict[str, int] = {}
    for i, s in enumerate(symbols):
        if s in first:
            raise ValueError(f"signatures #{first[s]} and #{i} both export the symbol '{s}'; "
                             f"give one another symbol (KernelSignature.with_symbol)")
        first[s] = i


def _write(output_file: Any, data: bytes) -> None:
    if not isinstance(output_file, (str, bytes, os.PathLike)):
        output_file.write(data)
        return
    path = os.path.abspath(os.fsdecode(output_file))
    # a scratch file beside it (created as open() creates files, under the umask), then
    # renamed over it: readers see the whole cubin or the old file, never a part
    scratch = os.path.join(os.path.dirname(path),
                           f".{os.path.basename(path)}.tmp-{secrets.token_hex(6)}")
    try:
        with open(scratch, "xb") as f:
            f.write(data)
        os.replace(scratch, path)
    except BaseException:
        if os.path.exists(scratch):
            os.unlink(scratch)
        raise


def _combine(parts: Sequence[tuple[str, str]], target: str) -> bytes:
    """One cubin holding each part's kernel under its symbol: ptxas on `_combined_ptx`."""
    from ..backend.target.toolchain import Target, assemble
    cubin, _ = assemble(_combined_ptx(parts), Target(target))
    missing = [s for s, _ in parts if s not in _elf_functions(cubin)]
    if missing:
        raise TileInternalError(f"the combined cubin lacks the kernel(s) {missing}")
    return cubin


def _combined_ptx(parts: Sequence[tuple[str, str]]) -> str:
    """One PTX module holding each part's kernel under its symbol.

    A part is (symbol, the `llvm`-stage IR of one specialization).  Their gpu.modules
    become one: each kernel renamed to its symbol, each module's other definitions
    (shared-memory globals, constant tables, helpers) prefixed apart, external
    declarations (libdevice functions) kept once.  The NVPTX backend then writes each
    kernel as it wrote it alone, but for those names.  Merged as IR, not as PTX text:
    the symbol tables rename, LLVM writes PTX.
    """
    from mlir import ir
    from ..backend.target.toolchain import emit_ptx
    from ..kernel import mlir_context
    with mlir_context() as ctx:
        merged = into = None
        for i, (symbol, text) in enumerate(parts):
            module = ir.Module.parse(text, ctx)
            gpu_module = _gpu_module(module)
            _rename(gpu_module, symbol, f"__tileir_export{i}_")
            if merged is None:
                merged, into = module, gpu_module
            else:
                _move_symbols(gpu_module, into)
        return emit_ptx(merged)


def _gpu_module(module: Any) -> Any:
    found = [op.operation for op in module.body.operations if op.operation.name == "gpu.module"]
    if len(found) != 1:
        raise TileInternalError(f"an llvm-stage module holds {len(found)} gpu.modules, not 1")
    return found[0]


def _symbol_ops(gpu_module: Any) -> list[Any]:
    return [op.operation for op in gpu_module.regions[0].blocks[0].operations
            if "sym_name" in op.operation.attributes]


def _sym_name(op: Any) -> str:
    from mlir import ir
    return ir.StringAttr(op.attributes["sym_name"]).value


def _is_declaration(op: Any) -> bool:
    return op.name == "llvm.func" and len(op.regions[0].blocks) == 0


def _rename(gpu_module: Any, symbol: str, prefix: str) -> None:
    """The kernel becomes `symbol`, other definitions `prefix + name`."""
    from mlir import ir
    ops = _symbol_ops(gpu_module)
    kernels = [op for op in ops if "nvvm.kernel" in op.attributes]
    if len(kernels) != 1:
        raise TileInternalError(f"an llvm-stage module holds {len(kernels)} kernels, not 1")
    if any(_sym_name(op) == symbol for op in ops if op is not kernels[0]):
        raise TileValueError(f"symbol '{symbol}' is the name of a function or global the "
                             f"kernel uses: choose another")
    for op in ops:
        if _is_declaration(op):
            continue
        old = _sym_name(op)
        new = symbol if op is kernels[0] else prefix + old
        ir.SymbolTable.replace_all_symbol_uses(old, new, gpu_module)
        ir.SymbolTable.set_symbol_name(op, new)


def _move_symbols(source: Any, into: Any) -> None:
    """Moves `source`'s symbols to the end of `into`; a declaration `into` has is dropped."""
    existing = {_sym_name(op): op for op in _symbol_ops(into)}
    last = list(into.regions[0].blocks[0].operations)[-1].operation
    for op in _symbol_ops(source):
        name = _sym_name(op)
        there = existing.get(name)
        if there is not None:
            if _is_declaration(op) and _is_declaration(there) and \
                    str(op.attributes["function_type"]) == str(there.attributes["function_type"]):
                continue
            raise TileValueError(f"two of the exported kernels define '{name}': give them "
                                 f"distinct symbols")
        op.move_after(last)
        last = op
        existing[name] = op
