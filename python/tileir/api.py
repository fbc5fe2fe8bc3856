"""The tile language: functions usable inside `@kernel` and `@function` bodies.

These mirror cuTile Python's public surface (`import tileir as ct`).  They are
never executed by Python: the frontend recognizes them while translating a
kernel's AST and emits Tile IR.  Called outside a kernel they raise.
"""

from __future__ import annotations

import contextvars
import enum

from .errors import TileError


class PaddingMode(enum.Enum):
    """What `load` reads for elements outside the array."""

    UNDETERMINED = "undetermined"
    ZERO = "zero"
    NEG_ZERO = "neg_zero"
    NAN = "nan"
    POS_INF = "pos_inf"
    NEG_INF = "neg_inf"


# While a static_eval runs, what calls to these functions do (frontend/static.py): some
# build expressions of runtime values, as cuTile's static_eval allows.
STATIC_CALL: contextvars.ContextVar = contextvars.ContextVar("STATIC_CALL", default=None)


def _outside(name: str):
    if name == "cdiv":                 # cuTile's cdiv also works on the host
        def cdiv(a, b):
            return -(-a // b)
        return cdiv

    def fn(*args, **kwargs):
        static_call = STATIC_CALL.get()
        if static_call is not None:
            return static_call(name, args, kwargs)
        raise TileError(f"tileir.{name}() can only be used inside a @kernel or @function "
                        f"body (it is translated to Tile IR, not run by Python)")
    fn.__name__ = fn.__qualname__ = name
    return fn


# Signatures are the documentation; bodies never run.
def bid(axis): """Index of the executing block along `axis` (0, 1, 2)."""
def num_blocks(axis): """Number of blocks of the grid along `axis`."""
def num_tiles(array, /, axis, shape, order="C"):
    """Number of tiles of `shape` covering `array` along `axis` of its tile space (the
    array's axes permuted by `order`, as `load` takes it)."""
def cdiv(a, b): """Ceiling division of integers."""
def load(array, index, shape, *, order="C", padding_mode=PaddingMode.UNDETERMINED,
         check_bounds=True, latency=None, allow_tma=None, memory_order=None, memory_scope=None):
    """Load the tile at tile index `index` with `shape` from `array` (`order`: the array's
    axes permuted first; `shape=()` reads one element)."""
def store(array, index, tile, *, order="C", check_bounds=True, latency=None, allow_tma=None,
          memory_order=None, memory_scope=None):
    """Store `tile` at tile index `index` of `array` (edges dropped)."""
def full(shape, fill_value, dtype=None): """A tile of `shape` filled with `fill_value`."""
def zeros(shape, dtype=None): """A tile of zeros (float32 unless `dtype`)."""
def ones(shape, dtype=None): """A tile of ones (float32 unless `dtype`)."""
def arange(size, /, *, dtype=None, start=0, step=1):
    """The 1-D tile [start, start + step, ..., start + (size-1) * step] of `dtype` (int32
    if None)."""
def astype(x, dtype, /, *, rounding_mode=None):
    """`x` converted to `dtype` (float to float: rounded by `rounding_mode`, RN if None)."""
def where(cond, x, y): """Element-wise `x if cond else y`, broadcasting."""
def reshape(x, shape): """`x` with a new shape (row-major)."""
def permute(x, axes): """`x` with dims permuted: result dim i is `x` dim axes[i]."""
def transpose(x, axis0=None, axis1=None): """Swap two dims (the last two by default)."""
def broadcast_to(x, shape): """`x` broadcast to `shape` (NumPy rules)."""
def expand_dims(x, axis): """`x` with a new size-1 dim at `axis`."""
def sum(x, /, axis=None, *, keepdims=False, rounding_mode=None, flush_to_zero=False):
    """Sum over `axis` (an int, a tuple of them, or None: all axes)."""
def prod(x, /, axis=None, *, keepdims=False, rounding_mode=None, flush_to_zero=False):
    """Product over `axis`."""
def max(x, /, axis=None, *, keepdims=False, flush_to_zero=False, propagate_nan=False):
    """Maximum over `axis` (NaN elements are ignored unless `propagate_nan`)."""
def min(x, /, axis=None, *, keepdims=False, flush_to_zero=False, propagate_nan=False):
    """Minimum over `axis` (NaN elements are ignored unless `propagate_nan`)."""
def argmax(x, /, axis=None, *, keepdims=False, propagate_nan=False):
    """int32 index of the first maximum (of the first NaN if `propagate_nan`)."""
def argmin(x, /, axis=None, *, keepdims=False, propagate_nan=False):
    """int32 index of the first minimum (of the first NaN if `propagate_nan`)."""
def exp(x, /, *, rounding_mode=None): """e**x"""
def exp2(x, /, *, flush_to_zero=False): """2**x"""
def log(x): """Natural logarithm."""
def log2(x): """Base-2 logarithm."""
def sqrt(x, /, *, rounding_mode=None, flush_to_zero=False): """Square root."""
def rsqrt(x, /, *, flush_to_zero=False): """1 / sqrt(x)."""
def tanh(x, /, *, rounding_mode=None): """Hyperbolic tangent."""
def sin(x): """Sine."""
def cos(x): """Cosine."""
def tan(x): """Tangent."""
def floor(x): """Round down."""
def ceil(x): """Round up."""
def abs(x): """Absolute value."""
def maximum(x, y, /, *, flush_to_zero=False, propagate_nan=False):
    """Element-wise maximum (a NaN operand is ignored unless `propagate_nan`)."""
def minimum(x, y, /, *, flush_to_zero=False, propagate_nan=False):
    """Element-wise minimum (a NaN operand is ignored unless `propagate_nan`)."""
def pow(x, y): """x ** y."""
def mma(a, b, /, acc, *, use_fast_acc=False):
    """`a @ b + acc` in the accumulator's precision (`use_fast_acc`: fp8 products summed
    on the tensor cores across the whole loop, in fewer bits than f32)."""
def matmul(a, b): """`a @ b` (f16/bf16 accumulate in f32, result in the operand type)."""
def static_assert(cond, message=None): """Fail compilation unless `cond` holds (compile-time)."""
def static_eval(expr, /): """`expr` evaluated as Python while compiling (runtime values as
    proxies that know their shape and dtype)."""
def static_iter(iterable, /): """`for x in static_iter(...)`: the body compiled per item."""
def static_exception(exc, /): """`raise static_exception(exc)`: raise `exc` while compiling."""
def ensure_constant(value, /): """`value`, which must be known at compile time."""
def assume_divisible_by(x, divisor): """`x`, promised to be a multiple of `divisor`."""


# Pieces of tiles and their bytes
def cat(tiles, /, axis): """The two tiles of `tiles` side by side along `axis`."""
def extract(x, /, index, shape): """The `shape`-sized sub-tile at sub-tile grid `index` of `x`."""
def insert(x, /, index, value): """`x` with the sub-tile at grid `index` replaced by `value`."""
def astile(value, /, *, dtype=None): """A scalar or nested tuple of scalars as a tile."""
def bitcast(x, /, dtype): """`x`'s bits read as `dtype` (same width)."""
def pack_to_bytes(x, /): """`x` flattened to its bytes: a 1-D uint8 tile (little-endian)."""
def unpack_from_bytes(x, /, dtype): """A 1-D uint8 tile's bytes read as `dtype` elements."""
def item(x, /): """A 1-element tile as a scalar (the tile method `t.item()`)."""


# Reductions and scans with a combine function (a lambda, a helper, an operator)
def reduce(x, /, axis, func, identity, *, keepdims=False):
    """`func`-combination of `x` (a tile or tuple of tiles) along `axis`."""
def scan(x, /, axis, func, identity, *, reverse=False):
    """Inclusive prefix `func`-combination of `x` along `axis` (from the end if `reverse`)."""
def cumsum(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    """Inclusive running sum along `axis`."""
def cumprod(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    """Inclusive running product along `axis`."""


# Element-indexed memory (`indices`: one integer tile or scalar per array dim)
from .semantics import MemoryOrder as _Order, MemoryScope as _Scope  # noqa: E402


def gather(array, indices, /, *, mask=None, padding_value=0, check_bounds=True, latency=None):
    """array[indices] element-wise; masked-off or out-of-bounds elements read padding_value."""
def scatter(array, indices, value, /, *, mask=None, check_bounds=True, latency=None):
    """array[indices] = value element-wise, where mask holds and the indices are in bounds."""
def atomic_add(array, indices, update, /, *, check_bounds=True, memory_order=_Order.ACQ_REL,
               memory_scope=_Scope.DEVICE): """Atomic +=; returns the old values."""
def atomic_and(array, indices, update, /, *, check_bounds=True, memory_order=_Order.ACQ_REL,
               memory_scope=_Scope.DEVICE): """Atomic &=; returns the old values."""
def atomic_or(array, indices, update, /, *, check_bounds=True, memory_order=_Order.ACQ_REL,
              memory_scope=_Scope.DEVICE): """Atomic |=; returns the old values."""
def atomic_xor(array, indices, update, /, *, check_bounds=True, memory_order=_Order.ACQ_REL,
               memory_scope=_Scope.DEVICE): """Atomic ^=; returns the old values."""
def atomic_min(array, indices, update, /, *, check_bounds=True, memory_order=_Order.ACQ_REL,
               memory_scope=_Scope.DEVICE): """Atomic minimum; returns the old values."""
def atomic_max(array, indices, update, /, *, check_bounds=True, memory_order=_Order.ACQ_REL,
               memory_scope=_Scope.DEVICE): """Atomic maximum; returns the old values."""
def atomic_xchg(array, indices, update, /, *, check_bounds=True, memory_order=_Order.ACQ_REL,
                memory_scope=_Scope.DEVICE): """Atomic exchange; returns the old values."""
def atomic_cas(array, indices, expected, desired, /, *, check_bounds=True,
               memory_order=_Order.ACQ_REL, memory_scope=_Scope.DEVICE):
    """Atomic compare-and-swap (bitwise compare); returns the old values."""

def load_advanced_indexing(array, indices, /, *, padding_mode=PaddingMode.UNDETERMINED,
                           latency=None, allow_tma=None):
    """A tile from one 1-D integer index tile (the sparse dim) and `Slice(start, length)`s
    (the dense dims); out-of-bounds elements read the padding."""
def store_advanced_indexing(array, indices, tile, /, *, latency=None, allow_tma=None):
    """Stores `tile` where `load_advanced_indexing` with the same indices reads."""


# Block-scaled products and programmatic dependent launch
def mma_scaled(x, x_scale, y, y_scale, /, acc):
    """`(x * x_scale) @ (y * y_scale) + acc`, each scale covering a block of K."""
def grid_dependency_control_wait():
    """Waits until the kernel this one depends on (programmatic dependent launch) is done."""
def grid_dependency_control_launch_dependents():
    """Lets the kernels that depend on this one start launching."""


# Debugging
def printf(format, *args): """Prints `format` (C conversions) with tiles, once per block."""
def print(*args, sep=" ", end="\n"): """Python-style print of strings, f-strings and tiles."""
def assert_(cond, /, message=None): """Stops the kernel unless every element of `cond` holds."""


# Functional forms of the operators (cuTile's names; `rounding_mode` takes a
# tileir.RoundingMode, `flush_to_zero` flushes f32 subnormals).
def add(x, y, /, *, rounding_mode=None, flush_to_zero=False): """`x + y`"""
def sub(x, y, /, *, rounding_mode=None, flush_to_zero=False): """`x - y`"""
def mul(x, y, /, *, rounding_mode=None, flush_to_zero=False): """`x * y`"""
def truediv(x, y, /, *, rounding_mode=None, flush_to_zero=False): """`x / y` (ints give float32)"""
def floordiv(x, y, /): """`x // y` (rounds toward -inf, as Python)"""
def mod(x, y, /): """`x % y` (the divisor's sign, as Python)"""
def divmod(x, y, /): """`(x // y, x % y)` of integers"""
def negative(x, /): """`-x`"""
def equal(x, y, /): """`x == y` element-wise (bool_)"""
def not_equal(x, y, /): """`x != y` element-wise (bool_)"""
def less(x, y, /): """`x < y` element-wise (bool_)"""
def less_equal(x, y, /): """`x <= y` element-wise (bool_)"""
def greater(x, y, /): """`x > y` element-wise (bool_)"""
def greater_equal(x, y, /): """`x >= y` element-wise (bool_)"""
def bitwise_and(x, y, /): """`x & y` of integers or booleans"""
def bitwise_or(x, y, /): """`x | y` of integers or booleans"""
def bitwise_xor(x, y, /): """`x ^ y` of integers or booleans"""
def bitwise_lshift(x, y, /): """`x << y` of integers"""
def bitwise_rshift(x, y, /): """`x >> y` of integers (arithmetic for signed types)"""
def bitwise_not(x, /): """`~x` (logical not of booleans)"""
def isnan(x, /): """Element-wise NaN test of a float tile (bool_)"""
def atan2(x1, x2, /): """arctan(x1 / x2) in the right quadrant, in [-pi, pi]"""
def sinh(x, /): """Hyperbolic sine."""
def cosh(x, /): """Hyperbolic cosine."""


INTRINSIC_NAMES = (
    "bid num_blocks num_tiles cdiv load store full zeros ones arange astype where reshape "
    "permute transpose broadcast_to expand_dims sum prod max min argmax argmin exp exp2 log "
    "log2 sqrt rsqrt tanh sin cos tan floor ceil abs maximum minimum pow mma matmul "
    "static_assert add sub mul truediv floordiv mod divmod negative equal not_equal less "
    "less_equal greater greater_equal bitwise_and bitwise_or bitwise_xor bitwise_lshift "
    "bitwise_rshift bitwise_not isnan atan2 sinh cosh static_eval static_iter static_exception "
    "ensure_constant assume_divisible_by cat extract insert astile bitcast pack_to_bytes "
    "unpack_from_bytes item reduce scan cumsum cumprod gather scatter atomic_add atomic_and "
    "atomic_or atomic_xor atomic_min atomic_max atomic_xchg atomic_cas printf print "
    "assert_ load_advanced_indexing store_advanced_indexing mma_scaled "
    "grid_dependency_control_wait grid_dependency_control_launch_dependents").split()

# Keep the signatures (the frontend binds arguments against them) but make a
# stray call outside a kernel fail loudly instead of returning None.
SIGNATURES = {name: globals()[name] for name in INTRINSIC_NAMES}
for _name in INTRINSIC_NAMES:
    _stub = _outside(_name)
    _stub.__doc__ = SIGNATURES[_name].__doc__
    _stub.__wrapped__ = SIGNATURES[_name]      # inspect.signature follows __wrapped__
    globals()[_name] = _stub
del _name, _stub
