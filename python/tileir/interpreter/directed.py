"""Directed rounding (cuTile's RoundingMode RZ, RM, RP), exactly.

`add sub mul truediv sqrt` with `tile.rounding` = rz (toward zero), rm (toward
-inf) or rp (toward +inf) round the exact result once, in the element type.  NumPy
has no directed rounding, so each element is computed exactly in rational
arithmetic (`fractions.Fraction`; a square root by comparing squares) and the
nearest-even candidate is stepped to the float on the right side: an oracle, slow
per element but exact for float16, bfloat16, float32 and float64 alike (the GPU
rules and the simulator are checked against it).

IEEE's special cases do not depend on the rounding direction and come from NumPy:
NaN and infinite operands, division by zero, square roots of negative numbers.
What does: an exact zero sum is +0 except toward -inf (-0), a finite result too
large for the type is the largest finite number unless rounding goes away from
zero (then infinity).
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np

MODES = ("rz", "rm", "rp")

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _step(x, dtype, up: bool):
    """The next float of `dtype` after `x` toward +inf (`up`) or -inf."""
    x = dtype.type(x)
    if np.isnan(x) or (np.isinf(x) and (x > 0) == up):
        return x
    u = _UINT[dtype.itemsize]
    bits = np.array(x, dtype).view(u)[()]
    sign = bool(bits >> (8 * dtype.itemsize - 1))
    if x == 0:                                       # +-0: the smallest subnormal
        tiny = u(1) | (u(0) if up else u(1) << u(8 * dtype.itemsize - 1))
        return np.array(tiny, u).view(dtype)[()]
    grow = up != sign                                # magnitude grows
    return np.array(bits + u(1) if grow else bits - u(1), u).view(dtype)[()]


def _compare(c, exact: Fraction) -> int:
    """sign(c - exact) for a float c (possibly infinite)."""
    if np.isinf(c):
        return 1 if c > 0 else -1
    f = Fraction(float(c))
    return (f > exact) - (f < exact)


def _round_to(compare, positive: bool, guess, dtype, mode: str):
    """The float of `dtype` that `mode` rounds an exact value to, from a nearby `guess`:
    `compare(c)` is sign(c - exact value), `positive` its sign."""
    down = mode == "rm" or (mode == "rz" and positive)
    c = dtype.type(guess)
    if down:                                         # the largest float <= exact
        while compare(c) > 0:
            c = _step(c, dtype, up=False)
        while True:
            n = _step(c, dtype, up=True)
            if np.isinf(n) or compare(n) > 0:
                return c
            c = n
    while compare(c) < 0:                            # the smallest float >= exact
        c = _step(c, dtype, up=True)
    while True:
        n = _step(c, dtype, up=False)
        if np.isinf(n) or compare(n) < 0:
            return c
        c = n


def _exact_binary(name: str, a: Fraction, b: Fraction) -> Fraction:
    if name == "add":
        return a + b
    if name == "sub":
        return a - b
    if name == "mul":
        return a * b
    return a / b


def _zero_sign(name: str, a: float, b: float, mode: str) -> float:
    """The signed zero an exact zero result takes (IEEE 754 section 6.3)."""
    if name in ("mul", "div"):
        return -0.0 if np.signbit(a) != np.signbit(b) else 0.0
    if name == "sub":
        b = -b
    if a == 0 and b == 0 and np.signbit(a) == np.signbit(b):
        return a                                     # (+0) + (+0), (-0) + (-0)
    return -0.0 if mode == "rm" else 0.0


def binary(name: str, mode: str, a, b, dtype) -> np.ndarray:
    """`a <name> b` (name: add, sub, mul, div) rounded by `mode`, elementwise, in `dtype`."""
    dtype = np.dtype(dtype)
    a, b = np.broadcast_arrays(np.asarray(a, dtype), np.asarray(b, dtype))
    ufunc = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[name]
    with np.errstate(all="ignore"):
        nearest = ufunc(a.astype(np.float64), b.astype(np.float64))
    out = np.empty(a.shape, dtype)
    for i in np.ndindex(a.shape):
        x, y = float(a[i]), float(b[i])
        if not (np.isfinite(x) and np.isfinite(y)) or (name == "div" and y == 0):
            out[i] = dtype.type(nearest[i])
            continue
        exact = _exact_binary(name, Fraction(x), Fraction(y))
        if exact == 0:
            out[i] = dtype.type(_zero_sign(name, x, y, mode))
            continue
        out[i] = _round_to(lambda c, e=exact: _compare(c, e), exact > 0,
                           _guess(nearest[i], dtype), dtype, mode)
    return out


def sqrt(mode: str, a, dtype) -> np.ndarray:
    """sqrt(a) rounded by `mode`, elementwise, in `dtype`."""
    dtype = np.dtype(dtype)
    a = np.asarray(a, dtype)
    with np.errstate(all="ignore"):
        nearest = np.sqrt(a.astype(np.float64))
    out = np.empty(a.shape, dtype)
    for i in np.ndindex(a.shape):
        x = float(a[i])
        if not np.isfinite(x) or x <= 0:             # NaN, inf, +-0 and negatives: IEEE's
            out[i] = dtype.type(nearest[i])
            continue
        square = Fraction(x)

        def compare(c, square=square):
            if np.isinf(c):
                return 1 if c > 0 else -1
            f = Fraction(float(c))
            return -1 if f < 0 else (f * f > square) - (f * f < square)
        out[i] = _round_to(compare, True, _guess(nearest[i], dtype), dtype, mode)
    return out


def _guess(x: float, dtype):
    """A float of `dtype` near `x` (round to nearest, through float32 for the 16-bit
    types: one or two roundings, within a step of the answer)."""
    with np.errstate(all="ignore"):
        if dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
            return dtype.type(np.float32(x))
        return dtype.type(x)


def convert(mode: str, a, dtype) -> np.ndarray:
    """`a` rounded to float type `dtype` by `mode`, elementwise."""
    dtype = np.dtype(dtype)
    a = np.asarray(a)
    out = np.empty(a.shape, dtype)
    for i in np.ndindex(a.shape):
        x = float(a[i])
        if not np.isfinite(x) or x == 0:
            out[i] = dtype.type(x)
            continue
        exact = Fraction(x)
        out[i] = _round_to(lambda c, e=exact: _compare(c, e), x > 0, _guess(x, dtype), dtype,
                           mode)
    return out


_OPS = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div"}


def rounding_of(op) -> str | None:
    """The op's directed `tile.rounding` (rz, rm, rp), or None."""
    attrs = op.operation.attributes
    if "tile.rounding" not in attrs:
        return None
    return rounding_of_options({"tile.rounding": str(attrs["tile.rounding"]).strip('"')})


def rounding_of_options(options: dict[str, str]) -> str | None:
    """The directed mode of float options {`tile.rounding`: mode, ...}, or None."""
    mode = options.get("tile.rounding")
    return mode if mode in MODES else None


def rounded(name: str, mode: str, storage: np.dtype):
    """The elementwise function of MLIR op `name` (an arith float op or math.sqrt)
    rounded by `mode`, on arrays of `storage`."""
    if name == "math.sqrt":
        return lambda a: sqrt(mode, a, storage)[()]
    kind = _OPS[name]
    return lambda a, b: binary(kind, mode, a, b, storage)[()]
