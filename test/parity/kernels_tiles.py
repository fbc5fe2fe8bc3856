"""Tile arithmetic and shaping as a cuTile user writes it: functional operators and
Python's, integer division and remainders of negative numbers, rounding modes, fp8
round trips, bit casts and bytes, concatenation, sub-tiles, compile-time helpers, and
device printing."""

import numpy as np

import cuda.tile as ct
from harness import Case

ConstInt = ct.Constant[int]


@ct.kernel
def int_arith(x, y, q, r, f, m, T: ConstInt):
    b = ct.bid(0)
    a = ct.load(x, index=(b,), shape=(T,))
    d = ct.load(y, index=(b,), shape=(T,))
    ct.store(q, index=(b,), tile=a // d)
    ct.store(r, index=(b,), tile=a % d)
    fq, fr = ct.divmod(a, d)
    ct.store(f, index=(b,), tile=ct.floordiv(fq, 1) * 0 + fq + ct.mod(fr, 1000003) - fr)
    bits = ct.bitwise_xor(ct.bitwise_and(a, 0xFF0), ct.bitwise_or(d, 3))
    ct.store(m, index=(b,), tile=ct.bitwise_rshift(bits, 2) + ct.bitwise_not(a))


@ct.kernel
def float_math(x, y, out, T: ConstInt):
    b = ct.bid(0)
    a = ct.load(x, index=(b,), shape=(T,))
    c = ct.load(y, index=(b,), shape=(T,))
    s = ct.add(a, c) * ct.sub(a, c) + ct.mul(a, 0.5) - ct.truediv(c, 4.0)
    t = ct.atan2(a, c) + ct.cosh(a * 0.1) - ct.sinh(c * 0.1) + ct.tanh(a) + ct.negative(c)
    u = ct.where(ct.isnan(ct.log(a)), 0.0, 1.0) + ct.sqrt(ct.abs(c)) + ct.floor(a) + ct.ceil(c)
    v = (ct.pow(ct.abs(a) + 1, 0.5) + ct.exp2(c * 0.25) + ct.log2(ct.abs(c) + 1)
         + ct.sin(a) * ct.cos(c))
    ct.store(out, index=(b,), tile=s + t + u + v)


@ct.kernel
def comparisons(x, y, out, T: ConstInt):
    b = ct.bid(0)
    a = ct.load(x, index=(b,), shape=(T,))
    c = ct.load(y, index=(b,), shape=(T,))
    k = (ct.astype(ct.equal(a, c), ct.int32) + 2 * ct.astype(ct.not_equal(a, c), ct.int32)
         + 4 * ct.astype(ct.less(a, c), ct.int32) + 8 * ct.astype(ct.less_equal(a, c), ct.int32)
         + 16 * ct.astype(ct.greater(a, c), ct.int32)
         + 32 * ct.astype(ct.greater_equal(a, c), ct.int32))
    ct.store(out, index=(b,), tile=k)


@ct.kernel
def rounding(x, y, rz, ru, rd, T: ConstInt):
    b = ct.bid(0)
    a = ct.load(x, index=(b,), shape=(T,))
    c = ct.load(y, index=(b,), shape=(T,))
    ct.store(rz, index=(b,), tile=ct.truediv(a, c, rounding_mode=ct.RoundingMode.RZ))
    ct.store(ru, index=(b,), tile=ct.add(a, c, rounding_mode=ct.RoundingMode.RP))
    ct.store(rd, index=(b,), tile=ct.mul(a, c, rounding_mode=ct.RoundingMode.RM))


@ct.kernel
def fp8_round_trip(x, e4, e5, T: ConstInt):
    b = ct.bid(0)
    a = ct.load(x, index=(b,), shape=(T,))
    ct.store(e4, index=(b,), tile=ct.astype(ct.astype(a, ct.float8_e4m3fn), ct.float32))
    ct.store(e5, index=(b,), tile=ct.astype(ct.astype(a, ct.float8_e5m2), ct.float32))


@ct.kernel
def bits_and_bytes(x, as_int, back, T: ConstInt):
    b = ct.bid(0)
    a = ct.load(x, index=(b,), shape=(T,))
    ct.store(as_int, index=(b,), tile=ct.bitcast(a, ct.int32))
    raw = ct.pack_to_bytes(a)
    ct.store(back, index=(b,), tile=ct.unpack_from_bytes(raw, ct.float32))


@ct.kernel
def shaping(x, out, T: ConstInt):
    b = ct.bid(0)
    a = ct.load(x, index=(b, 0), shape=(1, T))
    halves = ct.cat((ct.extract(a, (0, 1), (1, T // 2)), ct.extract(a, (0, 0), (1, T // 2))),
                    axis=1)
    grid = ct.reshape(halves, (T // 8, 8))
    grid = ct.permute(ct.expand_dims(grid, 0), (0, 2, 1))
    flat = ct.reshape(grid, (1, T))
    zeroed = ct.insert(flat, (0, 0), ct.zeros((1, 4), dtype=x.dtype))
    one = ct.broadcast_to(ct.full((1, 1), 1.0, x.dtype), (1, T))
    ct.store(out, index=(b, 0), tile=zeroed + one)


def scaled(v):
    return ct.static_eval(2 ** 3) * v


@ct.kernel
def compile_time(x, out, n: int, T: ConstInt):
    b = ct.bid(0)
    ct.static_assert(T % 32 == 0, "T must be a multiple of 32")
    n = ct.assume_divisible_by(n, 4)
    total = ct.zeros((T,), dtype=ct.float32)
    for k in ct.static_iter((1, 2, 3)):
        total += ct.load(x, index=(b,), shape=(T,)) * k
    W = ct.ensure_constant(T // 2)
    half = ct.extract(total, (0,), (W,))
    ct.store(out, index=(b,), tile=ct.cat((scaled(half), half), axis=0) + n)


@ct.kernel
def say(x, T: ConstInt):
    b = ct.bid(0)
    t = ct.load(x, index=(b,), shape=(T,))
    ct.printf("block %d sum %.2f\n", b, ct.sum(t))
    ct.print(f"max {ct.max(t):.3f} count", T)
    ct.assert_(ct.sum(t) < 1e9, "sums are small")


def cases(rng):
    a = rng.integers(-10**6, 10**6, 256).astype(np.int32)
    d = rng.integers(1, 100, 256).astype(np.int32) * rng.choice([-1, 1], 256).astype(np.int32)
    z = np.empty(256, np.int32)
    yield Case("int_arith", int_arith, (4,), [a, d, z, z.copy(), z.copy(), z.copy(), 64],
               [2, 3, 4, 5], lambda a, d, *_: [a // d, a % d,
                                               a // d + (a % d) % 1000003 - a % d, _bits(a, d)])

    x = rng.standard_normal(512).astype(np.float32)
    y = rng.standard_normal(512).astype(np.float32)
    yield Case("float_math", float_math, (4,), [x, y, np.empty_like(x), 128], [2],
               lambda x, y, *_: [_float_math(x.astype(np.float64), y.astype(np.float64))],
               rtol=1e-4, atol=1e-4)

    p = rng.integers(-2, 3, 256).astype(np.float32)
    q = rng.integers(-2, 3, 256).astype(np.float32)
    yield Case("comparisons", comparisons, (2,), [p, q, np.empty(256, np.int32), 128], [2],
               lambda p, q, *_: [((p == q) + 2 * (p != q) + 4 * (p < q) + 8 * (p <= q)
                                  + 16 * (p > q) + 32 * (p >= q)).astype(np.int32)])

    x = rng.standard_normal(256).astype(np.float32)
    y = rng.standard_normal(256).astype(np.float32) + 3
    yield Case("rounding", rounding, (2,), [x, y, np.empty_like(x), np.empty_like(x),
                                            np.empty_like(x), 128], [2, 3, 4],
               lambda x, y, *_: _directed(x, y), rtol=0, atol=0)

    x = (rng.standard_normal(256) * 50).astype(np.float32)
    yield Case("fp8_round_trip", fp8_round_trip, (2,),
               [x, np.empty_like(x), np.empty_like(x), 128], [1, 2],
               lambda x, *_: _fp8(x), rtol=0, atol=0)

    x = rng.standard_normal(256).astype(np.float32)
    yield Case("bits_and_bytes", bits_and_bytes, (2,),
               [x, np.empty(256, np.int32), np.empty_like(x), 128], [1, 2],
               lambda x, *_: [x.view(np.int32), x], rtol=0, atol=0)

    x = rng.standard_normal((3, 64)).astype(np.float32)
    yield Case("shaping", shaping, (3,), [x, np.empty_like(x), 64], [1],
               lambda x, *_: [_shaping(x)])

    x = rng.standard_normal(256).astype(np.float32)
    yield Case("compile_time", compile_time, (2,), [x, np.empty_like(x), 12, 128], [1],
               lambda x, o, n, t: [_compile_time(x, n, t)], rtol=1e-5, atol=1e-5)

    # One block: the pieces of two blocks' lines interleave (cuTile's do).
    x = np.arange(32, dtype=np.float32) / 8
    yield Case("say", say, (1,), [x, 32], [], None, prints=True)


def _bits(a, d):
    bits = (a & 0xFF0) ^ (d | 3)
    return (bits >> 2) + ~a


def _float_math(a, c):
    s = (a + c) * (a - c) + a * 0.5 - c / 4.0
    t = np.arctan2(a, c) + np.cosh(a * 0.1) - np.sinh(c * 0.1) + np.tanh(a) - c
    with np.errstate(invalid="ignore"):
        u = np.where(np.isnan(np.log(a)), 0.0, 1.0) + np.sqrt(np.abs(c)) + np.floor(a) + np.ceil(c)
    v = (np.abs(a) + 1) ** 0.5 + np.exp2(c * 0.25) + np.log2(np.abs(c) + 1) + np.sin(a) * np.cos(c)
    return s + t + u + v


def _directed(x, y):
    """x / y toward zero, x + y upward, x * y downward: the exact result (fractions)
    rounded to float32 once in that direction."""
    from fractions import Fraction

    def rounded(values, direction):
        out = np.empty(len(values), np.float32)
        for i, v in enumerate(values):
            f = np.float32(float(v))                      # nearest
            above, below = Fraction(float(f)) > v, Fraction(float(f)) < v
            if direction == "z" and ((above and v > 0) or (below and v < 0)):
                f = np.nextafter(f, np.float32(0))
            elif direction == "u" and below:
                f = np.nextafter(f, np.float32(np.inf))
            elif direction == "d" and above:
                f = np.nextafter(f, np.float32(-np.inf))
            out[i] = f
        return out
    fx = [Fraction(float(v)) for v in x]
    fy = [Fraction(float(v)) for v in y]
    return [rounded([a / b for a, b in zip(fx, fy)], "z"),
            rounded([a + b for a, b in zip(fx, fy)], "u"),
            rounded([a * b for a, b in zip(fx, fy)], "d")]


def _fp8(x):
    import ml_dtypes
    return [x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32),
            x.astype(ml_dtypes.float8_e5m2).astype(np.float32)]


def _shaping(x):
    t = x.shape[1]
    halves = np.concatenate([x[:, t // 2:], x[:, :t // 2]], axis=1)
    out = halves.reshape(3, t // 8, 8).transpose(0, 2, 1).reshape(3, t)
    out[:, :4] = 0
    return out + 1


def _compile_time(x, n, t):
    total = x.reshape(-1, t) * 6
    half = total[:, :t // 2]
    return (np.concatenate([8 * half, half], axis=1) + n).reshape(-1)
