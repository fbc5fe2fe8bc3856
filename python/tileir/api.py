"""The tile language: functions usable inside `@kernel` and `@function` bodies.

These mirror cuTile Python's public surface (`import tileir as ct`).  They are
never executed by Python: the frontend recognizes them while translating a
kernel's AST and emits Tile IR.  Called outside a kernel they raise.
"""

from __future__ import annotations

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


def _outside(name: str):
    if name == "cdiv":                 # cuTile's cdiv also works on the host
        def cdiv(a, b):
            return -(-a // b)
        return cdiv

    def fn(*args, **kwargs):
        raise TileError(f"tileir.{name}() can only be used inside a @kernel or @function "
                        f"body (it is translated to Tile IR, not run by Python)")
    fn.__name__ = fn.__qualname__ = name
    return fn


# Signatures are the documentation; bodies never run.
def bid(axis): """Index of the executing block along `axis` (0, 1, 2)."""
def num_blocks(axis): """Number of blocks of the grid along `axis`."""
def num_tiles(array, axis, shape): """Number of tiles of `shape` covering `array` along `axis`."""
def cdiv(a, b): """Ceiling division of integers."""
def load(array, index, shape, padding_mode=PaddingMode.UNDETERMINED, latency=None,
         allow_tma=None): """Load the tile at tile index `index` with `shape` from `array`."""
def store(array, index, tile): """Store `tile` at tile index `index` of `array` (edges dropped)."""
def full(shape, fill_value, dtype=None): """A tile of `shape` filled with `fill_value`."""
def zeros(shape, dtype=None): """A tile of zeros (float32 unless `dtype`)."""
def ones(shape, dtype=None): """A tile of ones (float32 unless `dtype`)."""
def arange(size, dtype=None): """The 1-D tile [0, 1, ..., size-1] (int32 unless `dtype`)."""
def astype(x, dtype): """`x` converted to `dtype`."""
def where(cond, x, y): """Element-wise `x if cond else y`, broadcasting."""
def reshape(x, shape): """`x` with a new shape (row-major)."""
def permute(x, axes): """`x` with dims permuted: result dim i is `x` dim axes[i]."""
def transpose(x, axis0=None, axis1=None): """Swap two dims (the last two by default)."""
def broadcast_to(x, shape): """`x` broadcast to `shape` (NumPy rules)."""
def expand_dims(x, axis): """`x` with a new size-1 dim at `axis`."""
def sum(x, axis=None, keepdims=False): """Sum over `axis` (all axes if None)."""
def prod(x, axis=None, keepdims=False): """Product over `axis`."""
def max(x, axis=None, keepdims=False): """Maximum over `axis` (NaN propagates)."""
def min(x, axis=None, keepdims=False): """Minimum over `axis` (NaN propagates)."""
def argmax(x, axis=None, keepdims=False): """int32 index of the first maximum."""
def argmin(x, axis=None, keepdims=False): """int32 index of the first minimum."""
def exp(x): """e**x"""
def exp2(x): """2**x"""
def log(x): """Natural logarithm."""
def log2(x): """Base-2 logarithm."""
def sqrt(x): """Square root."""
def rsqrt(x): """1 / sqrt(x)."""
def tanh(x): """Hyperbolic tangent."""
def sin(x): """Sine."""
def cos(x): """Cosine."""
def tan(x): """Tangent."""
def floor(x): """Round down."""
def ceil(x): """Round up."""
def abs(x): """Absolute value."""
def maximum(x, y): """Element-wise maximum (NaN propagates)."""
def minimum(x, y): """Element-wise minimum (NaN propagates)."""
def pow(x, y): """x ** y."""
def mma(a, b, acc): """`a @ b + acc` in the accumulator's precision."""
def matmul(a, b): """`a @ b` (f16/bf16 accumulate in f32, result in the operand type)."""
def static_assert(cond, message=None): """Fail compilation unless `cond` holds (compile-time)."""


INTRINSIC_NAMES = (
    "bid num_blocks num_tiles cdiv load store full zeros ones arange astype where reshape "
    "permute transpose broadcast_to expand_dims sum prod max min argmax argmin exp exp2 log "
    "log2 sqrt rsqrt tanh sin cos tan floor ceil abs maximum minimum pow mma matmul "
    "static_assert").split()

# Keep the signatures (the frontend binds arguments against them) but make a
# stray call outside a kernel fail loudly instead of returning None.
SIGNATURES = {name: globals()[name] for name in INTRINSIC_NAMES}
for _name in INTRINSIC_NAMES:
    _stub = _outside(_name)
    _stub.__doc__ = SIGNATURES[_name].__doc__
    _stub.__wrapped__ = SIGNATURES[_name]      # inspect.signature follows __wrapped__
    globals()[_name] = _stub
del _name, _stub
