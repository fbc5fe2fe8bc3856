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

from .api import (PaddingMode, abs, arange, argmax, argmin, astype, bid, broadcast_to, cdiv,
                  ceil, cos, exp, exp2, expand_dims, floor, full, load, log, log2, matmul, max,
                  maximum, min, minimum, mma, num_blocks, num_tiles, ones, permute, pow, prod,
                  reshape, rsqrt, sin, sqrt, static_assert, store, sum, tan, tanh, transpose,
                  where, zeros)
from .dtypes import (DType, bfloat16, bool_, float8_e4m3fn, float8_e5m2, float16, float32,
                     float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
from .errors import (TileCacheWarning, TileCompilerExecutionError, TileError, TileSyntaxError,
                     TileTypeError, TileUnsupportedFeatureError, TileValueError)
from .function import Function, function
from .kernel import CompiledKernel, Kernel, kernel, launch
from .specialization import ArraySpec, ConstBool, ConstInt, Constant

__version__ = "0.1.0"

