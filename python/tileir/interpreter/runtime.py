"""`run()`: binds NumPy arguments to a compiled kernel and executes its grid.

Kernels are compiled once per module *content* and kernel name (a bounded LRU
cache keyed by the SHA-256 of the module's printed form with locations), so
running a module that a pass has since changed recompiles it.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
from typing import Sequence

import ml_dtypes
import numpy as np
from mlir import ir

from tileir.dialect import KERNEL_ATTR, verify
from tileir.dialect.types import array_info

from .cluster_ops import run_clusters
from .compiler import LAUNCH_SLOT, CompileContext, CompiledFunction, Frame, Launch, execute
from .dtypes import BF16, Elem, elem_of, f64_to, wrap_int
from .errors import ArgumentError
from .pointer_ops import Memory

I32_MAX = 2**31 - 1
CLUSTER_ATTR = "tile.cluster"       # [x, y, z] blocks a cluster (passes/cluster_rows.py)
MAX_GRID_AXES = 3
CACHE_SIZE = 64


# ---------------------------------------------------------------------------
# Parameters: checking and converting one argument
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Param:
    index: int
    name: str
    type: ir.Type

    def describe(self, kernel: str) -> str:
        return f"argument #{self.index} '{self.name}' of @{kernel}"


@dataclasses.dataclass(frozen=True)
class ArrayParam(Param):
    elem: Elem
    rank: int
    accepted: tuple[np.dtype, ...]  # NumPy dtypes whose bits this array type reads

    def convert(self, value) -> np.ndarray:
        """The argument as an array viewed in the tile storage dtype (stores write through)."""
        if not isinstance(value, np.ndarray):
            raise ValueError(f"expects a NumPy array for {self.type}, got "
                             f"{type(value).__name__}")
        if value.dtype not in self.accepted:
            names = " or ".join(str(d) for d in self.accepted)
            raise ValueError(f"expects a {names} array for {self.type}, got {value.dtype}")
        if value.ndim != self.rank:
            raise ValueError(f"expects a {self.rank}-D array for {self.type}, got a "
                             f"{value.ndim}-D array of shape {value.shape}")
        for axis, (dim, stride) in enumerate(zip(value.shape, value.strides)):
            if dim > I32_MAX:
                raise ValueError(f"dim {axis} has {dim} elements, more than i32 can index")
            if stride % value.itemsize or abs(stride // value.itemsize) > I32_MAX:
                raise ValueError(f"stride {stride} bytes in dim {axis} is not a whole number "
                                 f"of {value.itemsize}-byte elements that fits i32")
        return value if value.dtype == self.elem.storage else value.view(self.elem.storage)


@dataclasses.dataclass(frozen=True)
class ScalarParam(Param):
    elem: Elem

    def convert(self, value) -> np.generic:
        """The argument as a NumPy scalar of the storage dtype, range-checked."""
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if self.elem.is_bool:
            return self._bool(value)
        # bool is an int in Python, but passing one for a number is a mistake.
        if isinstance(value, (bool, np.bool_)):
            raise ValueError(f"expects a number for {self.type}, got bool {value!r}")
        return self._int(value) if self.elem.is_int else self._float(value)

    def _bool(self, value) -> np.generic:
        if not (isinstance(value, (bool, np.bool_))
                or isinstance(value, (int, np.integer)) and value in (0, 1)):
            raise ValueError(f"expects a bool for i1, got {value!r}")
        return self.elem.scalar(bool(value))

    def _int(self, value) -> np.generic:
        if not isinstance(value, (int, np.integer)):
            raise ValueError(f"expects an int for {self.type}, got "
                             f"{type(value).__name__} {value!r}")
        lo, hi = self._int_bounds()
        if not lo <= int(value) <= hi:
            raise ValueError(f"{int(value)} does not fit {self.type} (range {lo}..{hi})")
        return self.elem.scalar(wrap_int(int(value), self.elem.bits))

    def _float(self, value) -> np.generic:
        if not isinstance(value, (int, float, np.integer, np.floating, BF16.type)):
            raise ValueError(f"expects a float for {self.type}, got "
                             f"{type(value).__name__} {value!r}")
        try:
            wide = float(value)
        except OverflowError:  # a Python int beyond float64
            raise ValueError(f"{value} does not fit {self.type}") from None
        converted = f64_to(self.elem, wide)
        if np.isfinite(wide) and not np.isfinite(converted):
            largest = float(ml_dtypes.finfo(self.elem.storage).max)
            raise ValueError(f"{wide!r} overflows {self.type} (largest finite value "
                             f"{largest!r})")
        return converted

    def _int_bounds(self) -> tuple[int, int]:
        """Signless integers take either interpretation of their bits."""
        e, t = self.elem, self.type
        if t.is_signed:
            return e.int_range
        if t.is_unsigned:
            return 0, e.uint_max
        return e.int_range[0], e.uint_max


def _accepted_dtypes(t: ir.Type, e: Elem) -> tuple[np.dtype, ...]:
    if e.storage == BF16:
        return (BF16, np.dtype(np.uint16))  # bf16 bits, as many frameworks hold them
    if isinstance(t, ir.IntegerType) and t.is_unsigned:
        return (e.unsigned,)
    return (e.storage,)


def _param(index: int, name: str, t: ir.Type) -> Param:
    info = array_info(t)
    if info is not None:
        e = elem_of(info.element_type)
        return ArrayParam(index, name, t, e, info.rank,
                          _accepted_dtypes(info.element_type, e))
    return ScalarParam(index, name, t, elem_of(t))


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Kernel:
    """A compiled `tile.kernel` function, ready to run on any arguments and grid."""

    name: str
    location: ir.Location
    params: tuple[Param, ...]
    function: CompiledFunction
    cluster: tuple[int, int, int] | None = None     # blocks a cluster ("tile.cluster")

    def error(self, message: str) -> ArgumentError:
        return ArgumentError.at(self.location, message)

    def bind(self, args: Sequence) -> Frame:
        """A frame holding the converted arguments in their slots."""
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise self.error(f"@{self.name} takes {len(self.params)} arguments ({names}), "
                             f"got {len(args)}")
        frame = self.function.new_frame(None)
        for param, slot, value in zip(self.params, self.function.arg_slots, args):
            try:
                frame[slot] = param.convert(value)
            except ValueError as e:
                raise self.error(f"{param.describe(self.name)} {e}") from None
        return frame

    def grid(self, grid) -> tuple[int, int, int]:
        axes = (grid,) if isinstance(grid, (int, np.integer)) else tuple(grid)
        if not 1 <= len(axes) <= MAX_GRID_AXES:
            raise self.error(f"the grid has 1 to 3 axes, got {len(axes)}: {axes}")
        for n in axes:
            if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) \
                    or not 0 <= n <= I32_MAX:
                raise self.error(f"grid sizes are ints in 0..{I32_MAX}, got {axes}")
        return tuple(int(n) for n in axes) + (1,) * (MAX_GRID_AXES - len(axes))

    def launch(self, grid: tuple[int, int, int], frame: Frame) -> None:
        """Runs every block, x fastest; a kernel whose result depends on the order races."""
        launch = Launch(grid)
        launch.memory = Memory(frame[slot] for param, slot in
                               zip(self.params, self.function.arg_slots)
                               if isinstance(param, ArrayParam))
        frame[LAUNCH_SLOT] = launch
        gx, gy, gz = grid
        xs = [np.int32(i) for i in range(gx)]
        body = self.function.body
        if self.cluster is not None:
            if any(n % d for n, d in zip(grid, self.cluster)):
                raise self.error(f"the grid {grid} is not a whole number of clusters "
                                 f"{self.cluster}")
            run_clusters(body, frame, launch, grid, self.cluster)
            return
        # Wrapping integer math and IEEE specials are the semantics, not accidents.
        with np.errstate(all="ignore"):
            for bz in range(gz):
                for by in range(gy):
                    z, y = np.int32(bz), np.int32(by)
                    for x in xs:
                        launch.bid = (x, y, z)
                        # Reusing one frame is safe: in SSA every slot a block
                        # reads was written earlier in the same execution.
                        execute(body, frame)


def _arg_names(func: ir.Operation, count: int) -> list[str]:
    if "tile.arg_names" in func.attributes:
        names = [ir.StringAttr(a).value for a in ir.ArrayAttr(func.attributes["tile.arg_names"])]
        if len(names) == count:
            return names
    return [f"arg{i}" for i in range(count)]


def _find_kernel(module: ir.Module, name: str) -> ir.Operation:
    kernels = [op for op in module.body.operations
               if op.operation.name == "func.func" and KERNEL_ATTR in op.attributes]
    for op in kernels:
        if ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    available = ", ".join("@" + ir.StringAttr(k.attributes["sym_name"]).value
                          for k in kernels) or "none"
    raise ArgumentError.at(module.operation.location,
                           f"no tile.kernel function @{name} in the module (kernels: {available})")


def compile_kernel(module: ir.Module, name: str) -> Kernel:
    """Verifies `module` and compiles its kernel `name` (and the helpers it calls)."""
    verify(module)
    func = _find_kernel(module, name)
    cx = CompileContext(module)
    function = cx.function(name, at=func.location)
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    names = _arg_names(func, len(ftype.inputs))
    params = tuple(_param(i, n, t) for i, (n, t) in enumerate(zip(names, ftype.inputs)))
    cluster = tuple(ir.DenseI64ArrayAttr(func.attributes[CLUSTER_ATTR])) \
        if CLUSTER_ATTR in func.attributes else None
    return Kernel(name, func.location, params, function, cluster)


class KernelCache:
    """Compiled kernels by (module content, kernel name), least recently used out."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self._kernels: collections.OrderedDict[tuple[bytes, str], Kernel] = \
            collections.OrderedDict()

    def get(self, module: ir.Module, name: str) -> Kernel:
        text = module.operation.get_asm(binary=True, enable_debug_info=True)
        key = (hashlib.sha256(text).digest(), name)
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._kernels[key] = compile_kernel(module, name)
            if len(self._kernels) > self.size:
                self._kernels.popitem(last=False)
        else:
            self._kernels.move_to_end(key)
        return kernel

    def clear(self) -> None:
        self._kernels.clear()


CACHE = KernelCache()


def run(module: ir.Module, kernel: str, grid, args: Sequence) -> None:
    """Runs `kernel` of `module` over `grid` on NumPy `args`, storing into them in place.

    `args` align with the kernel's arguments: NumPy arrays (any strides) for
    `!tile.array` arguments, Python or NumPy scalars for scalar arguments.
    `grid` is 1 to 3 block counts (missing axes are 1).  Raises `TileIRError`
    (`ArgumentError` for bad arguments, `UnsupportedOpError` for ops without a
    rule, `InterpreterError` for run-time faults), located in the IR.
    """
    k = CACHE.get(module, kernel)
    grid3 = k.grid(grid)
    k.launch(grid3, k.bind(args))
