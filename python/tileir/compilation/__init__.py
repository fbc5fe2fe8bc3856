"""`tileir.compilation`: export kernels ahead of time (cuTile's `cuda.tile.compilation`).

    sig = KernelSignature([ArrayConstraint(ct.float32, 1, base_addr_divisible_by=16,
                                           stride_constant=(1,))] * 3 + [1024],
                          CallingConvention.tileir_v1())
    export_kernel(vector_add, [sig, ...], "kernels.cubin", gpu_code="sm_90a",
                  output_format="cubin")

A `KernelSignature` describes one compiled variant: a constraint per kernel
parameter (`ArrayConstraint`, `ScalarConstraint`, `ConstantConstraint`, ...), the
calling convention, and the kernel's symbol in the cubin (by default the
mangled name, `mangle_kernel_name`).  `export_kernel` compiles every signature
and writes ONE cubin holding all of them.  The names, signatures and checks
are cuTile's; what tileir does differently:

* **Calling convention.**  Exported kernels take arguments as tileir's kernels
  do (docs/gpu-backend.md, "Kernel ABI"): `CallingConvention.tileir_v1()`, an
  array as pointer, ndim int32 dims, ndim int64 strides.  cuTile's
  `cutile_python_v1/v2` pass dims and strides both as `index_dtype` values, and
  tileir's sm_90a TMA kernels take trailing CUtensorMap parameters, so
  exporting with them is refused (TileUnsupportedFeatureError).
  `kernel_launch_info` (tileir's addition) says what a host must pass: block
  size, shared memory, every parameter slot with its C type and offset.
* **What a constraint compiles to.**  An `ArrayConstraint` becomes an
  `ArrayParam`: `aligned` when its facts imply 16-byte vector access (a base
  divisible by 16 bytes, unit last stride, other strides multiples of 16
  bytes), its `shape_constant`/`stride_constant` entries compiled in.  Index
  dtype, lower bounds, shape divisibility and aliasing are checked and kept in the
  symbol; tileir's code generation uses none of them (assuming less is safe).  Its
  code assumes what it assumes for launches: arrays that share memory are the
  same array (an in-place launch) or disjoint, never partly overlapping views
  (passes/iterations.py), whatever the alias groups allow.  tileir indexes with
  32 bits, also for `index_dtype=int64`: a host must not pass an array with a dim
  above 2**31 - 1 (tileir's launcher refuses them).
* **Lists.**  A `ListConstraint` parameter has a run-time length: the kernel takes
  the list's *table*, an int64 array of shape (length, 1 + 2 ndim), row i holding
  element i's address, dims and strides (`TableListParam`, `tile.list_get`;
  docs/compilation.md).
* **Not supported:** tuples passed at run time (TileUnsupportedFeatureError naming
  the parameter; tuples of constants for a `ct.Constant` parameter work), and
  `output_format="tileir_bytecode"` (NVIDIA's Tile IR bytecode, which tileir does not
  produce).

How one cubin holds several kernels: each signature compiles (through the compile
cache) like a launch's specialization; the `llvm`-stage IR of each is parsed
back, their gpu.modules merged into one with each kernel renamed to its symbol and
each module's other definitions renamed apart (`_combined_ptx`), and that module goes
through the `ptx` and `cubin` stages' own functions (the NVPTX backend, ptxas).
Each kernel's PTX is the same as when it is compiled alone, but for its names.
"""

from .export import export_kernel
from .launch_info import kernel_launch_info
from .mangling import demangle_kernel_name, mangle_kernel_name
from .signatures import (ArrayConstraint, CallingConvention, ConstantConstraint, ConstantValue,
                         KernelSignature, ListConstraint, ParameterConstraint, ScalarConstraint,
                         TupleConstraint)

__all__ = ["ScalarConstraint", "ArrayConstraint", "ListConstraint", "TupleConstraint",
           "ConstantConstraint", "ParameterConstraint", "ConstantValue", "KernelSignature",
           "CallingConvention", "export_kernel", "mangle_kernel_name", "demangle_kernel_name",
           "kernel_launch_info"]
