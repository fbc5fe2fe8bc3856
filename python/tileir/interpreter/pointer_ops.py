"""Rules for addresses of arrays: `tile.array_address`, `tile.make_array`,
`tile.raw_memory` (dialect/pointers.py).

An address is the host address of an array's element 0 (the NumPy arrays the
launch runs on are in this process's memory).  Turning one back into an array is
checked: the array must lie inside memory the launch was given, an *allocation*
(the buffer an argument array views, as far as NumPy can tell: the outermost
NumPy array of its `.base` chain), so that a foreign pointer or a raw memory
offset that strays outside is a located error, not a wild read.  Raw memory is
the allocation from the address to its end: a negative offset, or one past the
end, is outside.  Raw memory at address 0 is empty (every offset is outside).
"""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np

from tileir.dialect.types import array_info

from .compiler import LAUNCH_SLOT, CompileContext, Step, pure, rule
from .dtypes import elem_of
from .errors import Fault


def address_of(array: np.ndarray) -> int:
    """The address of element 0 of `array`."""
    return array.__array_interface__["data"][0]


@dataclasses.dataclass(frozen=True)
class Allocation:
    """Bytes [low, high) that an argument array lies in, and what keeps them alive."""

    low: int
    high: int
    owner: np.ndarray
    writeable: bool

    def view(self, address: int, dtype: np.dtype, shape, strides) -> np.ndarray:
        """An array at `address` in this allocation (NumPy refuses one that does not fit:
        ValueError)."""
        raw = (ctypes.c_uint8 * (self.high - self.low)).from_address(self.low)
        out = np.ndarray(tuple(shape), dtype, buffer=raw, offset=address - self.low,
                         strides=tuple(strides))
        out.flags.writeable = self.writeable
        return out


def allocation_of(array: np.ndarray) -> Allocation:
    """The allocation `array` views: its outermost NumPy base's bytes."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    low, high = np.lib.array_utils.byte_bounds(root)
    return Allocation(low, high, root, bool(array.flags.writeable))


class Memory:
    """The allocations of one launch's array arguments, found by address."""

    def __init__(self, arrays):
        self.allocations: list[Allocation] = []
        for a in arrays:
            alloc = allocation_of(a)
            for i, other in enumerate(self.allocations):
                if other.low == alloc.low and other.high == alloc.high:
                    if alloc.writeable and not other.writeable:
                        self.allocations[i] = alloc
                    break
            else:
                self.allocations.append(alloc)

    def find(self, address: int) -> Allocation:
        for alloc in self.allocations:
            if alloc.low <= address < alloc.high:
                return alloc
        for alloc in self.allocations:      # one past the end: an empty array's address
            if address == alloc.high:
                return alloc
        raise Fault(f"address {address:#x} is not in the memory of any array the kernel was "
                    f"given")


def _memory(frame) -> Memory:
    memory = frame[LAUNCH_SLOT].memory
    if memory is None:
        raise Fault("this run has no argument arrays whose memory an address could be in")
    return memory


@rule("tile.array_address")
def _array_address(op, cx: CompileContext) -> Step:
    def address(array, *index):
        return np.int64(address_of(array) + sum(int(i) * s for i, s in
                                                zip(index, array.strides)))
    return pure(op, cx, address)


def _storage(result_type) -> np.dtype:
    return elem_of(array_info(result_type).element_type).storage


@rule("tile.make_array")
def _make_array(op, cx: CompileContext) -> Step:
    rank = array_info(op.result.type).rank
    dtype = _storage(op.result.type)
    slots = cx.slots(op.operands)
    out = cx.define(op.result)

    def step(frame):
        address, *extents = (int(frame[s]) for s in slots)
        dims, strides = extents[:rank], extents[rank:]
        if any(d < 0 for d in dims) or any(d >= 1 << 31 for d in dims):
            raise Fault(f"an array made from an address has dims {tuple(dims)}: each must be "
                        f"in [0, 2^31)")
        try:
            frame[out] = _memory(frame).find(address).view(
                address, dtype, dims, [s * dtype.itemsize for s in strides])
        except ValueError:
            raise Fault(f"the array at address {address:#x} with dims {tuple(dims)} and "
                        f"strides {tuple(strides)} (elements) reaches outside the memory "
                        f"of the array the address came from") from None
    return step


@rule("tile.raw_memory")
def _raw_memory(op, cx: CompileContext) -> Step:
    dtype = _storage(op.result.type)
    address_slot = cx.slot(op.address)
    out = cx.define(op.result)

    def step(frame):
        address = int(frame[address_slot])
        if address == 0:
            # no memory: what a run-time choice carries where no raw memory was chosen
            # yet (choices.unset_parts, an if's path that returned); any use of it is
            # an index outside it, a located fault there
            frame[out] = np.empty((0,), dtype)
            return
        alloc = _memory(frame).find(address)
        # up to the allocation's end: an offset past it (or below 0) is outside
        n = (alloc.high - address) // dtype.itemsize
        frame[out] = alloc.view(address, dtype, (n,), (dtype.itemsize,))
    return step
