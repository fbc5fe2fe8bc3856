"""tileir.interpreter: the NumPy interpreter of Tile IR.

The semantic oracle for CI and a debugger for users: it runs a `tile.kernel`
function over its whole grid on the CPU, with the rounding, padding and
wrapping rules of docs/tile-ir.md (see docs/interpreter.md).

    from tileir import interpreter
    interpreter.run(module, "vadd", grid=(cdiv(n, 64),), args=[x, y, out, n])

How it works: `runtime` checks arguments and runs the grid; `compiler` turns
each function into Python closures once (cached per module content); the
other modules hold the op rules, one function per op, grouped by dialect:
`tile_ops`, `arith_int`, `arith_float`, `arith_cast`, `constants`,
`reduce_ops`, `math_ops`, `tensor_ops`, `control_flow`, `ring_ops`, `cluster_ops`,
`ordering_ops`, `pointer_ops`.
"""

from . import (arith_cast, arith_float, arith_int, cluster_ops, constants,  # noqa: F401
               control_flow, math_ops, ordering_ops, pointer_ops, reduce_ops, ring_ops,
               stream_k_ops, tensor_ops, tile_ops)  # importing them registers rules
from .compiler import RULES
from .errors import ArgumentError, InterpreterError, UnsupportedOpError
from .runtime import CACHE, compile_kernel, run

__all__ = ["ArgumentError", "CACHE", "InterpreterError", "RULES", "UnsupportedOpError",
           "compile_kernel", "run"]
