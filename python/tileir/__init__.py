"""tileir: tile-based GPU programming in Python, on MLIR.

A kernel written for cuTile ports by changing `import cuda.tile as ct` to
`import tileir as ct`:

    @ct.kernel
    def vadd(a, b, c, TILE: ct.Constant[int]):
        i = ct.bid(0)
        x = ct.load(a, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
        ct.store(c, index=(i,), tile=x + y)

    ct.launch(None, (ct.cdiv(n, 256),), vadd, (a, b, c, 256))
"""

from .api import (abs, add, arange, argmax, argmin, assert_, assume_divisible_by, astile, astype,
                  atan2, atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min, atomic_or,
                  atomic_xchg, atomic_xor, bid, bitcast, bitwise_and, bitwise_lshift, bitwise_not,
                  bitwise_or, bitwise_rshift, bitwise_xor, broadcast_to, cat, cdiv, ceil, cos, cosh,
                  cumprod, cumsum, divmod, ensure_constant, equal, exp, exp2, expand_dims, extract,
                  floor, floordiv, full, gather, greater, greater_equal,
                  grid_dependency_control_launch_dependents, grid_dependency_control_wait, insert,
                  isnan, less, less_equal, load, load_advanced_indexing, log, log2, matmul, max,
                  maximum, min, minimum, mma, mma_scaled, mod, mul, negative, not_equal, num_blocks,
                  num_tiles, ones, pack_to_bytes, PaddingMode, permute, pow, print, printf, prod,
                  reduce, reshape, rsqrt, scan, scatter, sin, sinh, sqrt, static_assert,
                  static_eval, static_exception, static_iter, store, store_advanced_indexing, sub,
                  sum, tan, tanh, transpose, truediv, unpack_from_bytes, where, zeros)
from .annotations import (Array, ArrayAnnotation, IndexedWithInt64, ListAnnotation,
                          RawArrayMemory, Scalar, ScalarInt64, Slice, Tile, TiledView)
from .dtypes import (DType, bfloat16, bool_, float4_e2m1fn, float8_e4m3fn, float8_e5m2,
                     float8_e5m3fnu, float8_e8m0fnu, float16, float32, float64,
                     foreign_pointer_dtype, int8, int16, int32, int64, tfloat32, uint8, uint16,
                     uint32, uint64)
from .errors import (StaticException, TileCacheWarning, TileCompilerExecutionError,
                     TileCompilerTimeoutError, TileError, TileInternalError, TileRecursionError,
                     TileStaticAssertionError, TileStaticEvalError, TileSyntaxError,
                     TileTypeError, TileUnsupportedFeatureError, TileValueError)
from .function import Function, function
from .kernel import CompiledKernel, Kernel, kernel, launch
from .semantics import ByTarget, MemoryOrder, MemoryScope, RoundingMode
from .deadline import compiler_timeout
from .specialization import ArraySpec, ConstBool, ConstInt, Constant, ConstantAnnotation
from . import compilation, tune  # cuTile's submodules (export_kernel; exhaustive_search)

__version__ = "0.1.0"

