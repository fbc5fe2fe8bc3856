"""Tests of the NumPy interpreter of Tile IR (pytest CPU tier: no GPU needed).

Kernels are written by hand as Tile IR text and checked against NumPy
references, computed in float64 (or in exact Python integers) and rounded the
way docs/tile-ir.md says.  Element-wise ops are checked twice: on tiles and on
scalars (extracted from 1-element tiles), because NumPy treats arrays and
scalars differently (warnings, promotion, 0-d results).
"""

from __future__ import annotations

import math
import re
import time

import ml_dtypes
import numpy as np
import pytest
from mlir import ir

import tileir.dialect as td
from tileir import interpreter
from tileir.dialect import TileIRError
from tileir.interpreter import ArgumentError, InterpreterError, UnsupportedOpError

BF16 = ml_dtypes.bfloat16
IR_TYPES = {np.dtype(np.float16): "f16", np.dtype(BF16): "bf16", np.dtype(np.float32): "f32",
            np.dtype(np.float64): "f64", np.dtype(np.bool_): "i1", np.dtype(np.int8): "i8",
            np.dtype(np.int16): "i16", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}
INT_DTYPES = (np.int8, np.int16, np.int32, np.int64)


@pytest.fixture(scope="module")
def ctx():
    with td.context() as c:
        yield c


@pytest.fixture
def rng(request):
    # Fresh inputs on every run; the seed is in the failure report to replay it.
    seed = np.random.SeedSequence().entropy % 2**32
    request.node.user_properties.append(("seed", seed))
    print(f"seed={seed}")
    return np.random.default_rng(seed)


def parse(text: str) -> ir.Module:
    return td.parse(text)


def run(text: str, grid, args, kernel: str = "k") -> None:
    interpreter.run(parse(text), kernel, grid, args)


def arr(t: str, rank: int = 1) -> str:
    return f"!tile.array<{t}, {rank} : i64>"


def load(name: str, array: str, t: str, shape, index: str, padding: str = "zero") -> str:
    dims = ", ".join(str(d) for d in shape)
    rank = len(shape)
    tile = "x".join(str(d) for d in shape)
    idx_types = ", ".join(["i32"] * rank)
    return (f'%{name} = "tile.load"(%{array}, {index}) {{tile_shape = array<i64: {dims}>, '
            f'padding = "{padding}"}} : ({arr(t, rank)}, {idx_types}) -> tensor<{tile}x'
            f'{t.replace("ui", "i").replace("si", "i")}>')


def store(array: str, t: str, value: str, shape, index: str) -> str:
    rank = len(shape)
    tile = "x".join(str(d) for d in shape)
    idx_types = ", ".join(["i32"] * rank)
    return (f'"tile.store"(%{array}, %{value}, {index}) : ({arr(t, rank)}, tensor<{tile}x'
            f'{t.replace("ui", "i").replace("si", "i")}>, {idx_types}) -> ()')


BID = '%b = "tile.bid"() {axis = 0 : i64} : () -> i32'


# ---------------------------------------------------------------------------
# An element-wise harness: one op body, checked on tiles and on scalars
# ---------------------------------------------------------------------------
def elementwise(body: str, inputs, result_dtype, mode: str = "tile"):
    """Runs `body` (defining %r from %x0, %x1, ...) on 1-D `inputs`; returns %r.

    In the body `{T0}`, `{T1}`, ... are the operand types, `{T}` is `{T0}` and
    `{R}` the result type: `tensor<NxT>` in "tile" mode, `T` in "scalar" mode,
    where each block extracts one element of each input.
    """
    n = len(inputs[0])
    types = [IR_TYPES[np.dtype(x.dtype)] for x in inputs]
    rtype = IR_TYPES[np.dtype(result_dtype)]
    args = [f"%a{i}: {arr(t)}" for i, t in enumerate(types)] + [f"%out: {arr(rtype)}"]
    lines = [f"func.func @k({', '.join(args)}) attributes {{tile.kernel}} {{"]
    if mode == "tile":
        lines.append("%b = arith.constant 0 : i32")
        lines += [load(f"x{i}", f"a{i}", t, [n], "%b") for i, t in enumerate(types)]
        subst = {f"T{i}": f"tensor<{n}x{t}>" for i, t in enumerate(types)}
        subst["R"] = f"tensor<{n}x{rtype}>"
        tail = [store("out", rtype, "r", [n], "%b")]
        grid = (1,)
    else:
        lines += [BID, "%c0 = arith.constant 0 : index"]
        for i, t in enumerate(types):
            lines.append(load(f"t{i}", f"a{i}", t, [1], "%b"))
            lines.append(f"%x{i} = tensor.extract %t{i}[%c0] : tensor<1x{t}>")
        subst = {f"T{i}": t for i, t in enumerate(types)}
        subst["R"] = rtype
        tail = [f"%rt = tensor.splat %r : tensor<1x{rtype}>", store("out", rtype, "rt", [1], "%b")]
        grid = (n,)
    subst["T"] = subst["T0"]
    lines += [body.format(**subst), *tail, "return", "}"]
    out = np.zeros(n, dtype=result_dtype)
    run("\n".join(lines), grid, [*inputs, out])
    return out


MODES = ("tile", "scalar")


def wrap(values, dtype):
    """Python ints wrapped to `dtype`, the reference for two's-complement results."""
    bits = np.dtype(dtype).itemsize * 8
    half = 1 << (bits - 1)
    return np.array([(int(v) + half) % (1 << bits) - half for v in values]).astype(dtype)


def edge_ints(dtype, n: int, rng) -> np.ndarray:
    """n values of `dtype` rich in edge cases: 0, +-1, min, max, random."""
    info = np.iinfo(dtype)
    edges = [0, 1, -1, info.min, info.max, info.min + 1, info.max - 1, 2, -2]
    randoms = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype)
    return np.concatenate([np.array(edges, dtype=dtype), randoms])[:n]


# ---------------------------------------------------------------------------
# Whole kernels
# ---------------------------------------------------------------------------
VADD = f"""
func.func @k(%x: {arr('f32')}, %y: {arr('f32')}, %z: {arr('f32')}) attributes {{tile.kernel}} {{
  {BID}
  {load('a', 'x', 'f32', [64], '%b')}
  {load('c', 'y', 'f32', [64], '%b')}
  %s = arith.addf %a, %c : tensor<64xf32>
  {store('z', 'f32', 's', [64], '%b')}
  return
}}"""


def test_vector_add_ragged(ctx, rng):
    n = 1000  # not a multiple of the 64-element tile
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    buffer = np.full(n + 100, -7.0, dtype=np.float32)
    z = buffer[:n]  # the last tile would spill into buffer[n:] if stores were not dropped
    run(VADD, (math.ceil(n / 64),), [x, y, z])
    np.testing.assert_array_equal(z, x + y)
    assert np.all(buffer[n:] == -7.0)


def test_grid_of_1000_blocks_is_fast(ctx, rng):
    n = 64 * 1000
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    z = np.zeros(n, dtype=np.float32)
    module = parse(VADD)
    interpreter.run(module, "k", (1000,), [x, y, z])  # compiles
    start = time.perf_counter()
    interpreter.run(module, "k", (1000,), [x, y, z])
    elapsed = time.perf_counter() - start
    np.testing.assert_array_equal(z, x + y)
    assert elapsed < 1.0, f"1000 blocks took {elapsed:.2f} s"


SOFTMAX = f"""
func.func @k(%x: {arr('f32', 2)}, %y: {arr('f32', 2)}) attributes {{tile.kernel}} {{
  {BID}
  %c0 = arith.constant 0 : i32
  {load('t', 'x', 'f32', [4, 64], '%b, %c0', 'neg_inf')}
  %m = "tile.reduce"(%t) {{kind = "max", axis = 1 : i64}} : (tensor<4x64xf32>) -> tensor<4xf32>
  %m2 = "tile.reshape"(%m) : (tensor<4xf32>) -> tensor<4x1xf32>
  %mb = "tile.broadcast"(%m2) : (tensor<4x1xf32>) -> tensor<4x64xf32>
  %d = arith.subf %t, %mb : tensor<4x64xf32>
  %e = math.exp %d : tensor<4x64xf32>
  %s = "tile.reduce"(%e) {{kind = "sum", axis = 1 : i64}} : (tensor<4x64xf32>) -> tensor<4xf32>
  %s2 = "tile.reshape"(%s) : (tensor<4xf32>) -> tensor<4x1xf32>
  %sb = "tile.broadcast"(%s2) : (tensor<4x1xf32>) -> tensor<4x64xf32>
  %r = arith.divf %e, %sb : tensor<4x64xf32>
  {store('y', 'f32', 'r', [4, 64], '%b, %c0')}
  return
}}"""


def test_row_softmax_with_neg_inf_padding(ctx, rng):
    rows, cols = 10, 50  # both ragged: padded columns must not change the sums
    x = rng.standard_normal((rows, cols)) * 4
    y = np.full((rows, cols), np.nan, dtype=np.float32)
    run(SOFTMAX, (math.ceil(rows / 4),), [x.astype(np.float32), y])
    e = np.exp(x.astype(np.float32).astype(np.float64) - x.max(axis=1, keepdims=True))
    # f32 rounding of x - max (up to 2**-19 absolute for |x - max| < 32) moves
    # exp by ~2e-6 relative: allow a few of those.
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-12)


def matmul_kernel(elem: str, acc: str, bm: int, bn: int, bk: int) -> str:
    """C[M, N] = A[M, K] @ B[K, N] with a K loop of mma over padded tiles."""
    a_t, b_t, c_t = f"tensor<{bm}x{bk}x{elem}>", f"tensor<{bk}x{bn}x{elem}>", \
        f"tensor<{bm}x{bn}x{acc}>"
    zero = "0.0" if acc.startswith("f") else "0"
    return f"""
func.func @k(%a: {arr(elem, 2)}, %bb: {arr(elem, 2)}, %c: {arr(acc, 2)})
    attributes {{tile.kernel}} {{
  %bm = "tile.bid"() {{axis = 0 : i64}} : () -> i32
  %bn = "tile.bid"() {{axis = 1 : i64}} : () -> i32
  %K = "tile.dim"(%a) {{axis = 1 : i64}} : ({arr(elem, 2)}) -> i32
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %bk = arith.constant {bk} : i32
  %kt = arith.ceildivsi %K, %bk : i32
  %init = arith.constant dense<{zero}> : {c_t}
  %r = scf.for %i = %c0 to %kt step %c1 iter_args(%acc = %init) -> ({c_t}) : i32 {{
    {load('ta', 'a', elem, [bm, bk], '%bm, %i')}
    {load('tb', 'bb', elem, [bk, bn], '%i, %bn')}
    %n = "tile.mma"(%ta, %tb, %acc) : ({a_t}, {b_t}, {c_t}) -> {c_t}
    scf.yield %n : {c_t}
  }}
  {store('c', acc, 'r', [bm, bn], '%bm, %bn')}
  return
}}"""


def test_k_loop_matmul(ctx, rng):
    m, n, k = 50, 70, 90  # ragged in every dim: zero padding must not change the result
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), dtype=np.float32)
    run(matmul_kernel("f16", "f32", 16, 32, 32), (math.ceil(m / 16), math.ceil(n / 32)),
        [a, b, c])
    assert_matmul_close(c, a, b, None, np.float32)


def test_k_loop_matmul_i8(ctx, rng):
    m, n, k = 20, 20, 40
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    c = np.zeros((m, n), dtype=np.int32)
    run(matmul_kernel("i8", "i32", 16, 16, 16), (2, 2), [a, b, c])
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


# ---------------------------------------------------------------------------
# Grid and array queries, strided views
# ---------------------------------------------------------------------------
def test_bid_and_num_blocks_on_three_axes(ctx):
    lines = [f"func.func @k(%o: {arr('i32', 4)}) attributes {{tile.kernel}} {{"]
    for axis in range(3):
        lines.append(f'%b{axis} = "tile.bid"() {{axis = {axis} : i64}} : () -> i32')
        lines.append(f'%n{axis} = "tile.num_blocks"() {{axis = {axis} : i64}} : () -> i32')
    lines += ["%v = tensor.from_elements %b0, %b1, %b2, %n0 : tensor<1x1x1x4xi32>",
              "%c0 = arith.constant 0 : i32",
              store("o", "i32", "v", [1, 1, 1, 4], "%b2, %b1, %b0, %c0"), "return", "}"]
    out = np.full((4, 3, 2, 4), -1, dtype=np.int32)
    run("\n".join(lines), (2, 3, 4), [out])
    z, y, x = np.meshgrid(range(4), range(3), range(2), indexing="ij")
    np.testing.assert_array_equal(out[..., 0], x)
    np.testing.assert_array_equal(out[..., 1], y)
    np.testing.assert_array_equal(out[..., 2], z)
    assert np.all(out[..., 3] == 2)


def test_missing_grid_axes_are_one(ctx):
    text = f"""
func.func @k(%o: {arr('i32')}) attributes {{tile.kernel}} {{
  %n1 = "tile.num_blocks"() {{axis = 1 : i64}} : () -> i32
  %n2 = "tile.num_blocks"() {{axis = 2 : i64}} : () -> i32
  %v = tensor.from_elements %n1, %n2 : tensor<2xi32>
  %c0 = arith.constant 0 : i32
  {store('o', 'i32', 'v', [2], '%c0')}
  return
}}"""
    out = np.zeros(2, dtype=np.int32)
    run(text, 5, [out])
    np.testing.assert_array_equal(out, [1, 1])


DIMS_AND_STRIDES = f"""
func.func @k(%x: {arr('f32', 2)}, %o: {arr('i32')}) attributes {{tile.kernel}} {{
  %d0 = "tile.dim"(%x) {{axis = 0 : i64}} : ({arr('f32', 2)}) -> i32
  %d1 = "tile.dim"(%x) {{axis = 1 : i64}} : ({arr('f32', 2)}) -> i32
  %s0 = "tile.stride"(%x) {{axis = 0 : i64}} : ({arr('f32', 2)}) -> i32
  %s1 = "tile.stride"(%x) {{axis = 1 : i64}} : ({arr('f32', 2)}) -> i32
  %v = tensor.from_elements %d0, %d1, %s0, %s1 : tensor<4xi32>
  %c0 = arith.constant 0 : i32
  {store('o', 'i32', 'v', [4], '%c0')}
  return
}}"""


@pytest.mark.parametrize("view", ["plain", "transposed", "reversed", "every_other_column"])
def test_dim_and_stride_of_views(ctx, view):
    base = np.zeros((6, 10), dtype=np.float32)
    x = {"plain": base, "transposed": base.T, "reversed": base[::-1],
         "every_other_column": base[:, ::2]}[view]
    out = np.zeros(4, dtype=np.int32)
    run(DIMS_AND_STRIDES, (1,), [x, out])
    assert list(out) == [*x.shape, *(s // 4 for s in x.strides)]


COPY_2D = f"""
func.func @k(%x: {arr('f32', 2)}, %y: {arr('f32', 2)}) attributes {{tile.kernel}} {{
  %i = "tile.bid"() {{axis = 0 : i64}} : () -> i32
  %j = "tile.bid"() {{axis = 1 : i64}} : () -> i32
  {load('t', 'x', 'f32', [4, 8], '%i, %j')}
  %u = arith.negf %t : tensor<4x8xf32>
  {store('y', 'f32', 'u', [4, 8], '%i, %j')}
  return
}}"""


@pytest.mark.parametrize("view", ["transposed", "reversed", "strided", "transposed_output"])
def test_strided_views_in_and_out(ctx, rng, view):
    base = rng.standard_normal((21, 13)).astype(np.float32)
    x = {"transposed": base.T, "reversed": base[::-1, ::-1], "strided": base[::2, 1::3],
         "transposed_output": base}[view]
    if view == "transposed_output":
        y_base = np.zeros(x.shape[::-1], dtype=np.float32)
        y = y_base.T
    else:
        y = np.zeros(x.shape, dtype=np.float32)
    run(COPY_2D, (math.ceil(x.shape[0] / 4), math.ceil(x.shape[1] / 8)), [x, y])
    np.testing.assert_array_equal(y, -x)


# ---------------------------------------------------------------------------
# Loads: padding; stores: dropped elements
# ---------------------------------------------------------------------------
def _padded_load(t: str, padding: str, values: np.ndarray) -> np.ndarray:
    text = f"""
func.func @k(%x: {arr(t)}, %o: {arr(t)}) attributes {{tile.kernel}} {{
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  {load('v', 'x', t, [8], '%c1', padding)}
  {store('o', t, 'v', [8], '%c0')}
  return
}}"""
    out = np.zeros(8, dtype=values.dtype)
    run(text, (1,), [values, out])
    return out


@pytest.mark.parametrize("padding,expected", [
    ("zero", 0.0), ("neg_zero", -0.0), ("neg_inf", -np.inf), ("pos_inf", np.inf),
    ("nan", np.nan), ("undetermined", 0.0)])
@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64])
def test_float_padding(ctx, rng, padding, expected, dtype):
    values = rng.standard_normal(11).astype(dtype)  # tile 1 covers elements 8..15
    out = _padded_load(IR_TYPES[np.dtype(dtype)], padding, values)
    np.testing.assert_array_equal(out[:3], values[8:])
    tail = out[3:].astype(np.float64)
    np.testing.assert_array_equal(tail, np.full(5, expected))
    assert np.all(np.signbit(tail) == np.signbit(expected))


@pytest.mark.parametrize("t,dtype,expected", [
    ("i32", np.int32, 0), ("i8", np.int8, 0), ("ui8", np.uint8, 0),
    ("ui16", np.uint16, 0), ("i1", np.bool_, False)])
def test_int_padding(ctx, rng, t, dtype, expected):
    values = (rng.integers(0, 2, 11) if dtype is np.bool_ else rng.integers(0, 100, 11))
    values = values.astype(dtype)
    np.testing.assert_array_equal(_padded_load(t, "zero", values)[3:], np.zeros(5, dtype))
    undetermined = _padded_load(t, "undetermined", values)
    np.testing.assert_array_equal(undetermined[:3], values[8:])
    np.testing.assert_array_equal(undetermined[3:], np.full(5, expected, dtype=dtype))


LOAD_STORE_2D = f"""
func.func @k(%x: {arr('f32', 2)}, %y: {arr('f32', 2)}, %i: i32, %j: i32)
    attributes {{tile.kernel}} {{
  {load('t', 'x', 'f32', [4, 8], '%i, %j', 'nan')}
  {store('y', 'f32', 't', [4, 8], '%i, %j')}
  return
}}"""


@pytest.mark.parametrize("i,j", [(0, 0), (2, 1), (1, 1), (-1, 0), (0, -1), (3, 0), (0, 2)])
def test_load_and_store_at_ragged_and_outside_edges(ctx, rng, i, j):
    x = rng.standard_normal((10, 13)).astype(np.float32)
    sentinel = np.float32(12345.0)
    y = np.full((10, 13), sentinel)
    run(LOAD_STORE_2D, (1,), [x, y, i, j])
    rows = slice(max(4 * i, 0), max(min(4 * i + 4, 10), 0))
    cols = slice(max(8 * j, 0), max(min(8 * j + 8, 13), 0))
    expected = np.full((10, 13), sentinel)
    expected[rows, cols] = x[rows, cols]
    np.testing.assert_array_equal(y, expected)


def test_loaded_tile_is_a_snapshot(ctx):
    # Stores after a load must not change the loaded value (tiles are values).
    text = f"""
func.func @k(%x: {arr('f32')}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  {load('t', 'x', 'f32', [4], '%c0')}
  %z = arith.constant dense<0.0> : tensor<4xf32>
  {store('x', 'f32', 'z', [4], '%c0')}
  {store('x', 'f32', 't', [4], '%c1')}
  return
}}"""
    x = np.arange(8, dtype=np.float32)
    run(text, (1,), [x])
    np.testing.assert_array_equal(x, [0, 0, 0, 0, 0, 1, 2, 3])


# ---------------------------------------------------------------------------
# Shape ops, iota, tensor ops
# ---------------------------------------------------------------------------
SHAPES = f"""
func.func @k(%x: {arr('f32', 2)}, %o1: {arr('f32', 2)}, %o2: {arr('f32', 2)},
             %o3: {arr('f32', 3)}, %o4: {arr('i32')}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  {load('t', 'x', 'f32', [4, 8], '%c0, %c0')}
  %p = "tile.permute"(%t) {{permutation = array<i64: 1, 0>}} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  {store('o1', 'f32', 'p', [8, 4], '%c0, %c0')}
  %r = "tile.reshape"(%t) : (tensor<4x8xf32>) -> tensor<2x16xf32>
  {store('o2', 'f32', 'r', [2, 16], '%c0, %c0')}
  %col = "tile.reshape"(%p) : (tensor<8x4xf32>) -> tensor<8x1x4xf32>
  %bc = "tile.broadcast"(%col) : (tensor<8x1x4xf32>) -> tensor<8x2x4xf32>
  {store('o3', 'f32', 'bc', [8, 2, 4], '%c0, %c0, %c0')}
  %io = "tile.iota"() : () -> tensor<16xi32>
  {store('o4', 'i32', 'io', [16], '%c0')}
  return
}}"""


def test_permute_reshape_broadcast_iota(ctx, rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    o1, o2 = np.zeros((8, 4), np.float32), np.zeros((2, 16), np.float32)
    o3, o4 = np.zeros((8, 2, 4), np.float32), np.zeros(16, np.int32)
    run(SHAPES, (1,), [x, o1, o2, o3, o4])
    np.testing.assert_array_equal(o1, x.T)
    np.testing.assert_array_equal(o2, x.reshape(2, 16))
    np.testing.assert_array_equal(o3, np.broadcast_to(x.T[:, None, :], (8, 2, 4)))
    np.testing.assert_array_equal(o4, np.arange(16))


def test_permute_3d(ctx, rng):
    text = f"""
func.func @k(%x: {arr('f32', 3)}, %o: {arr('f32', 3)}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  {load('t', 'x', 'f32', [2, 4, 8], '%c0, %c0, %c0')}
  %p = "tile.permute"(%t) {{permutation = array<i64: 2, 0, 1>}}
      : (tensor<2x4x8xf32>) -> tensor<8x2x4xf32>
  {store('o', 'f32', 'p', [8, 2, 4], '%c0, %c0, %c0')}
  return
}}"""
    x = rng.standard_normal((2, 4, 8)).astype(np.float32)
    o = np.zeros((8, 2, 4), np.float32)
    run(text, (1,), [x, o])
    np.testing.assert_array_equal(o, np.transpose(x, (2, 0, 1)))


def test_tensor_extract_splat_from_elements(ctx, rng):
    text = f"""
func.func @k(%x: {arr('f32')}, %o: {arr('f32')}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  {load('t', 'x', 'f32', [8], '%c0')}
  %s = "tile.reduce"(%t) {{kind = "sum", axis = 0 : i64}} : (tensor<8xf32>) -> tensor<f32>
  %total = tensor.extract %s[] : tensor<f32>
  %i3 = arith.constant 3 : i32
  %i = arith.index_cast %i3 : i32 to index
  %third = tensor.extract %t[%i] : tensor<8xf32>
  %pair = tensor.from_elements %total, %third : tensor<2xf32>
  %pair4 = "tile.reshape"(%pair) : (tensor<2xf32>) -> tensor<2x1xf32>
  %wide = "tile.broadcast"(%pair4) : (tensor<2x1xf32>) -> tensor<2x2xf32>
  %flat = "tile.reshape"(%wide) : (tensor<2x2xf32>) -> tensor<4xf32>
  %sp = tensor.splat %third : tensor<4xf32>
  %both = arith.addf %flat, %sp : tensor<4xf32>
  {store('o', 'f32', 'both', [4], '%c0')}
  return
}}"""
    x = rng.standard_normal(8).astype(np.float32)
    o = np.zeros(4, np.float32)
    run(text, (1,), [x, o])
    total = np.sum(x, dtype=np.float32)
    np.testing.assert_allclose(o, [total + x[3]] * 2 + [2 * x[3]] * 2, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------
def reduce_2d(kind: str, axis: int, x: np.ndarray, options: str = "") -> np.ndarray:
    """`tile.reduce` of `kind` along `axis` of x; `options`: more attributes (", a = b")."""
    t = IR_TYPES[x.dtype]
    shape = list(x.shape)
    out_shape = [d for i, d in enumerate(shape) if i != axis]
    rt = "i32" if kind.startswith("arg") else t
    src = f"tensor<{shape[0]}x{shape[1]}x{t}>"
    text = f"""
func.func @k(%x: {arr(t, 2)}, %o: {arr(rt)}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  {load('v', 'x', t, shape, '%c0, %c0')}
  %r = "tile.reduce"(%v) {{kind = "{kind}", axis = {axis} : i64{options}}}
      : ({src}) -> tensor<{out_shape[0]}x{rt}>
  {store('o', rt, 'r', out_shape, '%c0')}
  return
}}"""
    out = np.zeros(out_shape, dtype=np.int32 if rt == "i32" else x.dtype)
    run(text, (1,), [x, out])
    return out


def _with_nan_and_ties(rng, shape):
    x = rng.integers(-3, 4, shape).astype(np.float32)  # small ints: many ties
    x[1, 2] = np.nan
    x[2, 0] = np.nan
    x[3, :] = 5.0  # a row (and columns) of ties
    return x


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("kind", ["max", "min", "argmax", "argmin"])
def test_ordering_reductions_nan_and_ties(ctx, rng, kind, axis):
    x = _with_nan_and_ties(rng, (4, 8))
    out = reduce_2d(kind, axis, x)
    ref = {"max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin}[kind]
    expected = ref(x, axis=axis)
    np.testing.assert_array_equal(out, expected)
    if kind.startswith("arg"):
        # first occurrence: the extreme never appears before the returned index
        moved = np.moveaxis(x, axis, 0)
        for col, idx in enumerate(out):
            line = moved[:, col]
            extreme = np.nan if np.isnan(line).any() else (
                line.max() if kind == "argmax" else line.min())
            first = np.flatnonzero(np.isnan(line) if np.isnan(extreme) else line == extreme)[0]
            assert idx == first


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("kind", ["maxnum", "minnum", "argmaxnum", "argminnum"])
def test_nan_ignoring_reductions(ctx, rng, kind, axis):
    """The ...num kinds skip NaN elements: the extreme of the rest (NaN if there is
    none), the first index holding it (0 if none)."""
    x = _with_nan_and_ties(rng, (4, 8))
    x[:, 6] = np.nan                                   # a column of NaN
    out = reduce_2d(kind, axis, x)
    largest = "max" in kind
    moved = np.moveaxis(x, axis, 0)
    extreme = (np.fmax if largest else np.fmin).reduce(moved, axis=0)
    if kind.startswith("arg"):
        want = [np.flatnonzero(moved[:, c] == extreme[c])[:1] for c in range(moved.shape[1])]
        np.testing.assert_array_equal(out, [w[0] if len(w) else 0 for w in want])
    else:
        np.testing.assert_array_equal(out, extreme)
    if axis == 0:
        assert (np.isnan(out[6]) if not kind.startswith("arg") else out[6] == 0)


def test_reduction_float_options(ctx):
    """tile.ftz flushes f32 subnormal elements and partial results; a directed
    tile.rounding rounds every step (bracketing the exact sum)."""
    tiny = np.float32(1e-40)
    x = np.full((2, 8), tiny, np.float32)
    x[1] = [1.0 + 2.0 ** -20] * 8
    flushed = reduce_2d("sum", 1, x, ', tile.ftz = "true"')
    assert flushed[0] == 0 and reduce_2d("sum", 1, x)[0] == np.float32(8 * tiny)
    assert reduce_2d("maxnum", 1, x, ', tile.ftz = "true"')[0] == 0
    y = np.array([[1.0 + 2.0 ** -23, 1.0] * 4] * 2, np.float32)   # 1 + 1 + u: inexact
    y[1] *= -1
    down = reduce_2d("sum", 1, y, ', tile.rounding = "rm"').astype(np.float64)
    up = reduce_2d("sum", 1, y, ', tile.rounding = "rp"').astype(np.float64)
    exact = 8 + 4 * 2.0 ** -23
    assert down[0] < exact < up[0] and down[1] < -exact < up[1]
    assert reduce_2d("sum", 1, y, ', tile.rounding = "rz"').tolist() == [down[0], up[1]]


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("kind", ["sum", "prod"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_prod_float(ctx, rng, kind, axis, dtype):
    x = rng.uniform(0.5, 1.5, (4, 8)).astype(dtype)
    x[0, 3] = np.nan
    out = reduce_2d(kind, axis, x)
    ref = (np.sum if kind == "sum" else np.prod)(x.astype(np.float64), axis=axis)
    np.testing.assert_allclose(out, ref, rtol=1e-6 if dtype == np.float32 else 1e-14)
    assert np.isnan(out[0 if axis == 1 else 3])


@pytest.mark.parametrize("dtype", [np.float16, BF16])
@pytest.mark.parametrize("kind", ["sum", "prod"])
def test_16_bit_float_reductions_accumulate_in_f32(ctx, rng, dtype, kind):
    if kind == "sum":
        # 2048 + 1 is not representable in f16 or bf16: accumulating in the
        # 16-bit type would stall at 2048 (f16) or 256 (bf16).
        x = np.ones((2, 4096), dtype=dtype)
    else:
        x = rng.uniform(0.9, 1.1, (2, 64)).astype(dtype)
    out = reduce_2d(kind, 1, x)
    wide = (np.sum if kind == "sum" else np.prod)(x.astype(np.float32), axis=1,
                                                  dtype=np.float32)
    np.testing.assert_array_equal(out.astype(np.float32), wide.astype(dtype).astype(np.float32))
    if kind == "sum":
        assert np.all(out.astype(np.float32) == 4096)


@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_int_reductions_wrap(ctx, rng, kind, dtype):
    x = edge_ints(dtype, 32, rng).reshape(4, 8)
    out = reduce_2d(kind, 1, x)
    if kind in ("sum", "prod"):
        exact = [math.prod(int(v) for v in row) if kind == "prod" else sum(int(v) for v in row)
                 for row in x]
        np.testing.assert_array_equal(out, wrap(exact, dtype))
    else:
        ref = {"max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin}[kind]
        np.testing.assert_array_equal(out, ref(x, axis=1))


@pytest.mark.parametrize("kind", ["max", "argmax", "min", "argmin"])
def test_bf16_ordering_reductions(ctx, rng, kind):
    x = rng.standard_normal((4, 8)).astype(BF16)
    x[2, 5] = np.nan
    out = reduce_2d(kind, 1, x)
    ref = {"max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin}[kind]
    np.testing.assert_array_equal(out.astype(np.float64),
                                  ref(x.astype(np.float64), axis=1).astype(np.float64))


# ---------------------------------------------------------------------------
# mma and matmul
# ---------------------------------------------------------------------------
def mma_text(op: str, a: str, b: str, c: str, shape_a, shape_b, shape_c) -> str:
    def t(shape, e):
        return f"tensor<{'x'.join(map(str, shape))}x{e}>"
    rank = len(shape_a)
    zeros = ", ".join(["%c0"] * rank)
    acc_load = load("acc", "c", c, shape_c, zeros) if op == "mma" else ""
    operands = "%ta, %tb, %acc" if op == "mma" else "%ta, %tb"
    operand_types = f"{t(shape_a, a)}, {t(shape_b, b)}" + (
        f", {t(shape_c, c)}" if op == "mma" else "")
    return f"""
func.func @k(%a: {arr(a, rank)}, %b: {arr(b, rank)}, %c: {arr(c, rank)})
    attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  {load('ta', 'a', a, shape_a, zeros)}
  {load('tb', 'b', b, shape_b, zeros)}
  {acc_load}
  %r = "tile.{op}"({operands}) : ({operand_types}) -> {t(shape_c, c)}
  {store('c', c, 'r', shape_c, zeros)}
  return
}}"""


MMA_COMBOS = [(np.float16, np.float16), (np.float16, np.float32), (BF16, np.float32),
              (np.float32, np.float32), (np.float64, np.float64), (np.int8, np.int32)]
MATMUL_COMBOS = MMA_COMBOS + [(BF16, BF16)]  # a matmul may also round to the operand type


def _operands(rng, dtype, shape):
    if np.dtype(dtype) == np.int8:
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.standard_normal(shape).astype(dtype)


UNIT_ROUNDOFF = {np.dtype(np.float16): 2.0**-11, np.dtype(BF16): 2.0**-8,
                 np.dtype(np.float32): 2.0**-24, np.dtype(np.float64): 2.0**-53}


def assert_matmul_close(out, a, b, c, result_dtype):
    """`out` against `a @ b (+ c)` in float64, within the error bound of computing
    it: K additions at the accumulator precision (f32, or f64 for f64 operands)
    plus one final rounding to the result type."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    c64 = 0 if c is None else c.astype(np.float64)
    ref = a64 @ b64 + c64
    acc = np.float64 if a.dtype == np.float64 else np.float32
    k = a.shape[-1] + 1
    bound = (k * UNIT_ROUNDOFF[np.dtype(acc)] * (np.abs(a64) @ np.abs(b64) + np.abs(c64))
             + UNIT_ROUNDOFF[np.dtype(result_dtype)] * np.abs(ref))
    err = np.abs(out.astype(np.float64) - ref)
    assert np.all(err <= bound), f"max excess {np.max(err - bound)}"


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("op,a_dtype,c_dtype", [("mma", *combo) for combo in MMA_COMBOS]
                         + [("matmul", *combo) for combo in MATMUL_COMBOS])
def test_mma_and_matmul(ctx, rng, op, a_dtype, c_dtype, batched):
    batch = [2] if batched else []
    sa, sb, sc = batch + [16, 32], batch + [32, 8], batch + [16, 8]
    a, b = _operands(rng, a_dtype, sa), _operands(rng, a_dtype, sb)
    c = _operands(rng, c_dtype if np.dtype(c_dtype) != np.int32 else np.int8, sc).astype(c_dtype)
    out = c.copy()
    at, ct = IR_TYPES[np.dtype(a_dtype)], IR_TYPES[np.dtype(c_dtype)]
    run(mma_text(op, at, at, ct, sa, sb, sc), (1,), [a, b, out])
    if np.dtype(a_dtype) == np.int8:
        ref = a.astype(np.int64) @ b.astype(np.int64) + (c.astype(np.int64) if op == "mma" else 0)
        np.testing.assert_array_equal(out, ref)
    else:
        assert_matmul_close(out, a, b, c if op == "mma" else None, c_dtype)


def test_mma_rounds_once(ctx):
    # 1 + 2**-11 + 2**-11 in f16: rounding after the product (1 + 2**-11 -> 1,
    # a tie to even) would lose both halves; one final rounding keeps 1 + 2**-10.
    a = np.array([[1.0, 1.0], [0, 0]], dtype=np.float16)
    b = np.array([[1.0, 0], [2.0**-11, 0]], dtype=np.float16)
    c = np.array([[2.0**-11, 0], [0, 0]], dtype=np.float16)
    run(mma_text("mma", "f16", "f16", "f16", [2, 2], [2, 2], [2, 2]), (1,), [a, b, c])
    assert c[0, 0] == np.float16(1 + 2.0**-10)


def test_i8_matmul_wraps_to_i32(ctx):
    # 2**18 products of 127*127 sum to about 4.2e9, beyond i32: the result wraps.
    k = 2**18
    a = np.full((1, k), 127, np.int8)
    b = np.full((k, 1), 127, np.int8)
    c = np.zeros((1, 1), np.int32)
    run(mma_text("matmul", "i8", "i8", "i32", [1, k], [k, 1], [1, 1]), (1,), [a, b, c])
    assert c[0, 0] == wrap([k * 127 * 127], np.int32)[0]


def test_i8_mma_wraps_the_i32_accumulator(ctx):
    a = np.zeros((2, 2), np.int8)
    a[0, 0] = 1
    b = np.zeros((2, 2), np.int8)
    b[0, 0] = 1
    c = np.full((2, 2), 2**31 - 1, np.int32)
    run(mma_text("mma", "i8", "i8", "i32", [2, 2], [2, 2], [2, 2]), (1,), [a, b, c])
    assert c[0, 0] == -2**31 and c[1, 1] == 2**31 - 1


# ---------------------------------------------------------------------------
# Control flow and calls
# ---------------------------------------------------------------------------
def test_scf_if_with_results(ctx):
    text = f"""
func.func @k(%o: {arr('i32')}) attributes {{tile.kernel}} {{
  {BID}
  %c2 = arith.constant 2 : i32
  %c0 = arith.constant 0 : i32
  %rem = arith.remsi %b, %c2 : i32
  %even = arith.cmpi eq, %rem, %c0 : i32
  %v = scf.if %even -> (tensor<4xi32>) {{
    %t = "tile.iota"() : () -> tensor<4xi32>
    scf.yield %t : tensor<4xi32>
  }} else {{
    %t = tensor.splat %b : tensor<4xi32>
    scf.yield %t : tensor<4xi32>
  }}
  scf.if %even {{
    {store('o', 'i32', 'v', [4], '%b')}
  }}
  return
}}"""
    o = np.full(16, -1, dtype=np.int32)
    run(text, (4,), [o])
    np.testing.assert_array_equal(o, [0, 1, 2, 3, -1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1])


def test_scf_while_gcd(ctx):
    text = f"""
func.func @k(%o: {arr('i32')}, %x: i32, %y: i32) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %g:2 = scf.while (%a = %x, %b = %y) : (i32, i32) -> (i32, i32) {{
    %nz = arith.cmpi ne, %b, %c0 : i32
    scf.condition(%nz) %a, %b : i32, i32
  }} do {{
  ^bb0(%a2: i32, %b2: i32):
    %r = arith.remsi %a2, %b2 : i32
    scf.yield %b2, %r : i32, i32
  }}
  %t = tensor.splat %g#0 : tensor<1xi32>
  {store('o', 'i32', 't', [1], '%c0')}
  return
}}"""
    o = np.zeros(1, dtype=np.int32)
    run(text, (1,), [o, 1071, 462])
    assert o[0] == math.gcd(1071, 462)


@pytest.mark.parametrize("lb,ub,step", [(0, 10, 3), (5, 5, 1), (7, 2, 1), (-4, 4, 2),
                                        (2**31 - 3, 2**31 - 1, 1)])
def test_scf_for_induction_values(ctx, lb, ub, step):
    text = f"""
func.func @k(%o: {arr('f64')}, %lb: i32, %ub: i32, %st: i32) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %z = arith.constant 0.0 : f64
  %s = scf.for %i = %lb to %ub step %st iter_args(%acc = %z) -> (f64) : i32 {{
    %f = arith.sitofp %i : i32 to f64
    %a = arith.addf %acc, %f : f64
    scf.yield %a : f64
  }}
  %t = tensor.splat %s : tensor<1xf64>
  {store('o', 'f64', 't', [1], '%c0')}
  return
}}"""
    o = np.full(1, np.nan)
    run(text, (1,), [o, lb, ub, step])
    assert o[0] == sum(range(lb, ub, step))


def test_scf_for_unsigned_bounds(ctx):
    # With unsignedCmp, -1 is the largest bound: 0..(2**32-1) step 2**30 runs
    # for i = 0, 2**30, 2**31, 3 * 2**30 (the last two negative as signless i32).
    text = f"""
func.func @k(%o: {arr('i64')}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %z = arith.constant 0 : i64
  %ub = arith.constant -1 : i32
  %st = arith.constant 1073741824 : i32
  %n = scf.for unsigned %i = %c0 to %ub step %st iter_args(%acc = %z) -> (i64) : i32 {{
    %w = arith.extui %i : i32 to i64
    %a = arith.addi %acc, %w : i64
    scf.yield %a : i64
  }}
  %t = tensor.splat %n : tensor<1xi64>
  {store('o', 'i64', 't', [1], '%c0')}
  return
}}"""
    o = np.zeros(1, dtype=np.int64)
    run(text, (1,), [o])
    assert o[0] == 6 * 2**30


HELPERS = f"""
func.func private @square(%x: tensor<8xf32>) -> tensor<8xf32> attributes {{tile.function}} {{
  %r = arith.mulf %x, %x : tensor<8xf32>
  return %r : tensor<8xf32>
}}
func.func private @sum_of_squares(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, f32)
    attributes {{tile.function}} {{
  %a = func.call @square(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %b = func.call @square(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %s = arith.addf %a, %b : tensor<8xf32>
  %t = "tile.reduce"(%s) {{kind = "max", axis = 0 : i64}} : (tensor<8xf32>) -> tensor<f32>
  %m = tensor.extract %t[] : tensor<f32>
  return %s, %m : tensor<8xf32>, f32
}}
func.func private @fact(%n: i32) -> i32 attributes {{tile.function}} {{
  %c1 = arith.constant 1 : i32
  %small = arith.cmpi sle, %n, %c1 : i32
  %r = scf.if %small -> (i32) {{
    scf.yield %c1 : i32
  }} else {{
    %m = arith.subi %n, %c1 : i32
    %f = func.call @fact(%m) : (i32) -> i32
    %p = arith.muli %n, %f : i32
    scf.yield %p : i32
  }}
  return %r : i32
}}
func.func private @load8(%x: {arr('f32')}, %i: i32) -> tensor<8xf32> attributes {{tile.function}} {{
  {load('t', 'x', 'f32', [8], '%i')}
  return %t : tensor<8xf32>
}}
func.func @k(%x: {arr('f32')}, %y: {arr('f32')}, %o: {arr('f32')}, %f: {arr('i32')}, %n: i32)
    attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %a = func.call @load8(%x, %c0) : ({arr('f32')}, i32) -> tensor<8xf32>
  %b = func.call @load8(%y, %c0) : ({arr('f32')}, i32) -> tensor<8xf32>
  %s:2 = func.call @sum_of_squares(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, f32)
  %m = tensor.splat %s#1 : tensor<8xf32>
  %r = arith.divf %s#0, %m : tensor<8xf32>
  {store('o', 'f32', 'r', [8], '%c0')}
  %fn = func.call @fact(%n) : (i32) -> i32
  %ft = tensor.splat %fn : tensor<1xi32>
  {store('f', 'i32', 'ft', [1], '%c0')}
  return
}}"""


def test_func_call_helpers_and_recursion(ctx, rng):
    x, y = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    o, f = np.zeros(8, np.float32), np.zeros(1, np.int32)
    run(HELPERS, (1,), [x, y, o, f, 10])
    s = x * x + y * y
    np.testing.assert_allclose(o, s / s.max(), rtol=1e-6)
    assert f[0] == math.factorial(10)


def test_unbounded_recursion_is_reported_at_the_call(ctx):
    text = """
func.func private @loop(%n: i32) -> i32 attributes {tile.function} {
  %r = func.call @loop(%n) : (i32) -> i32
  return %r : i32
}
func.func @k(%n: i32) attributes {tile.kernel} {
  %r = func.call @loop(%n) : (i32) -> i32
  return
}"""
    with pytest.raises(InterpreterError, match=r"-:3:8: error: 'func.call': call depth "
                                               r"exceeds 64 at a call to @loop"):
        run(text, (1,), [1])


def test_error_inside_a_helper_notes_the_call_site(ctx):
    text = """
func.func private @pick(%t: tensor<4xi32>, %i: index) -> i32 attributes {tile.function} {
  %v = tensor.extract %t[%i] : tensor<4xi32>
  return %v : i32
}
func.func @k(%n: i32) attributes {tile.kernel} {
  %t = "tile.iota"() : () -> tensor<4xi32>
  %i = arith.index_cast %n : i32 to index
  %v = func.call @pick(%t, %i) : (tensor<4xi32>, index) -> i32
  return
}"""
    with pytest.raises(InterpreterError) as info:
        run(text, (1,), [4])
    message = str(info.value)
    assert "-:3:8: error: 'tensor.extract': index [4] is out of bounds for a tile of shape [4]" \
        in message
    assert "-:9:8: note: in the call to @pick here" in message


# ---------------------------------------------------------------------------
# Float arithmetic and rounding
# ---------------------------------------------------------------------------
FLOAT_DTYPES = [np.float16, BF16, np.float32, np.float64]


def round_like(ref64: np.ndarray, dtype) -> np.ndarray:
    """The float64 reference rounded once to `dtype`."""
    return ref64.astype(dtype)


FLOAT_BINARY = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.remf": np.fmod,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", sorted(FLOAT_BINARY))
def test_float_binary_ops_round_to_their_type(ctx, rng, op, dtype, mode):
    x = rng.standard_normal(64).astype(dtype)
    y = rng.standard_normal(64).astype(dtype)
    y[:2] = 0  # division and remainder by zero give IEEE inf/nan
    out = elementwise(f"%r = {op} %x0, %x1 : {{T}}", [x, y], dtype, mode)
    # + - * / are exact in f64 for these inputs up to one rounding, so the
    # correctly rounded result is the f64 result rounded once.  bf16 rounds
    # through f32 (twice) by the contract, which the reference mimics.
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = FLOAT_BINARY[op](x.astype(np.float64), y.astype(np.float64))
    if np.dtype(dtype) == np.dtype(BF16):
        ref = ref.astype(np.float32)
    np.testing.assert_array_equal(out.astype(np.float64), round_like(ref, dtype).astype(np.float64))


@pytest.mark.parametrize("mode", MODES)
def test_bf16_rounds_after_every_op(ctx, mode):
    # a*a - 1 for a = 1 + 3*2**-7 is 3*2**-6 + 9*2**-14.  Rounding a*a to bf16
    # drops the 9*2**-14 (the contract); keeping it in f32 until the end would
    # give 3*2**-6 + 2**-11.
    a = np.full(2, 1 + 3 * 2**-7, dtype=BF16)
    c = np.full(2, -1.0, dtype=BF16)
    out = elementwise("%p = arith.mulf %x0, %x0 : {T}\n%r = arith.addf %p, %x1 : {T}",
                      [a, c], BF16, mode)
    np.testing.assert_array_equal(out.astype(np.float64), [3 * 2**-6] * 2)


def test_f16_overflow_and_subnormals(ctx):
    x = np.array([60000, 2**-14, -60000, 2**-24], dtype=np.float16)
    two = np.full(4, 2, dtype=np.float16)
    out = elementwise("%r = arith.mulf %x0, %x1 : {T}", [x, two], np.float16)
    np.testing.assert_array_equal(out, [np.inf, 2**-13, -np.inf, 2**-23])
    half = np.full(4, 0.5, dtype=np.float16)
    out = elementwise("%r = arith.mulf %x0, %x1 : {T}", [x, half], np.float16)
    np.testing.assert_array_equal(out, [30000, 2**-15, -30000, 0])  # 2**-25 ties to even 0


@pytest.mark.parametrize("mode", MODES)
def test_negf_and_signed_zero(ctx, mode):
    x = np.array([0.0, -0.0, 1.5, -np.inf, np.nan, 3, 4, 5], dtype=np.float32)
    out = elementwise("%r = arith.negf %x0 : {T}", [x], np.float32, mode)
    np.testing.assert_array_equal(out, -x)
    np.testing.assert_array_equal(np.signbit(out), ~np.signbit(x))


MINMAX_CASES = np.array([
    [1.0, 2.0], [2.0, 1.0], [np.nan, 1.0], [1.0, np.nan], [np.nan, np.nan],
    [0.0, -0.0], [-0.0, 0.0], [-np.inf, np.inf]], dtype=np.float32)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["maximumf", "minimumf", "maxnumf", "minnumf"])
def test_float_min_max_nan_and_signed_zero(ctx, op, mode):
    x, y = MINMAX_CASES[:, 0].copy(), MINMAX_CASES[:, 1].copy()
    out = elementwise(f"%r = arith.{op} %x0, %x1 : {{T}}", [x, y], np.float32, mode)
    nan_wins = op in ("maximumf", "minimumf")
    is_max = op.startswith("max")
    for i, (a, b) in enumerate(zip(x, y)):
        if np.isnan(a) and np.isnan(b) or nan_wins and (np.isnan(a) or np.isnan(b)):
            assert np.isnan(out[i])
        elif np.isnan(a) or np.isnan(b):
            assert out[i] == (b if np.isnan(a) else a)
        elif a == b == 0:
            assert np.signbit(out[i]) == (not is_max)  # -0 < +0
        else:
            assert out[i] == (max(a, b) if is_max else min(a, b))


CMPF_REF = {
    "false": lambda a, b: np.zeros_like(a, dtype=bool),
    "oeq": lambda a, b: a == b, "ogt": lambda a, b: a > b, "oge": lambda a, b: a >= b,
    "olt": lambda a, b: a < b, "ole": lambda a, b: a <= b,
    "one": lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b),
    "ord": lambda a, b: ~np.isnan(a) & ~np.isnan(b),
    "ueq": lambda a, b: (a == b) | np.isnan(a) | np.isnan(b),
    "ugt": lambda a, b: (a > b) | np.isnan(a) | np.isnan(b),
    "uge": lambda a, b: (a >= b) | np.isnan(a) | np.isnan(b),
    "ult": lambda a, b: (a < b) | np.isnan(a) | np.isnan(b),
    "ule": lambda a, b: (a <= b) | np.isnan(a) | np.isnan(b),
    "une": lambda a, b: a != b,
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
    "true": lambda a, b: np.ones_like(a, dtype=bool),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("predicate", sorted(CMPF_REF))
def test_cmpf_predicates(ctx, rng, predicate, dtype, mode):
    values = np.array([np.nan, -np.inf, -1, -0.0, 0.0, 1, np.inf, 2.5])
    x = np.repeat(values, 8).astype(dtype)
    y = np.tile(values, 8).astype(dtype)
    out = elementwise(f"%r = arith.cmpf {predicate}, %x0, %x1 : {{T}}", [x, y], np.bool_, mode)
    np.testing.assert_array_equal(out, CMPF_REF[predicate](x.astype(np.float64),
                                                           y.astype(np.float64)))


@pytest.mark.parametrize("mode", MODES)
def test_select(ctx, rng, mode):
    c = rng.integers(0, 2, 16).astype(np.bool_)
    x = rng.standard_normal(16).astype(BF16)
    y = rng.standard_normal(16).astype(BF16)
    body = ("%r = arith.select %x0, %x1, %x2 : {T0}, {T1}" if mode == "tile"
            else "%r = arith.select %x0, %x1, %x2 : {T1}")
    out = elementwise(body, [c, x, y], BF16, mode)
    np.testing.assert_array_equal(out.astype(np.float32),
                                  np.where(c, x, y).astype(np.float32))


# ---------------------------------------------------------------------------
# math
# ---------------------------------------------------------------------------
def _domain(name: str, rng, n: int) -> list[np.ndarray]:
    """Inputs (float64) inside the op's domain and away from overflow."""
    positive = rng.uniform(0.05, 8.0, n)
    small = rng.uniform(-3.0, 3.0, n)
    unit = rng.uniform(-0.95, 0.95, n)
    return {
        "log": [positive], "log2": [positive], "log10": [positive], "sqrt": [positive],
        "rsqrt": [positive], "log1p": [rng.uniform(-0.9, 8.0, n)], "acos": [unit],
        "asin": [unit], "atanh": [unit], "acosh": [rng.uniform(1.05, 8.0, n)],
        "powf": [positive, small], "atan2": [small, rng.uniform(-3.0, 3.0, n)],
        "copysign": [small, rng.uniform(-3.0, 3.0, n)],
        "fma": [small, rng.uniform(-3.0, 3.0, n), rng.uniform(-3.0, 3.0, n)],
    }.get(name, [small])


MATH_REF = {
    "absf": np.abs, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin,
    "asinh": np.arcsinh, "atan": np.arctan, "atanh": np.arctanh, "atan2": np.arctan2,
    "cbrt": np.cbrt, "ceil": np.ceil, "copysign": np.copysign, "cos": np.cos,
    "cosh": np.cosh, "erf": np.vectorize(math.erf), "erfc": np.vectorize(math.erfc),
    "exp": np.exp, "exp2": np.exp2,
    "expm1": np.expm1, "floor": np.floor, "fma": lambda a, b, c: a * b + c, "log": np.log,
    "log10": np.log10, "log1p": np.log1p, "log2": np.log2, "powf": np.power,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "sinh": np.sinh, "sqrt": np.sqrt,
    "tan": np.tan, "tanh": np.tanh, "trunc": np.trunc, "roundeven": np.rint,
    "round": lambda x: np.vectorize(lambda v: math.copysign(math.floor(abs(v) + 0.5), v))(x),
}
TOLERANCE = {np.dtype(np.float16): 2e-3, np.dtype(BF16): 1.6e-2,
             np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(MATH_REF))
def test_math_functions(ctx, rng, name, dtype, mode):
    inputs = [x.astype(dtype) for x in _domain(name, rng, 64)]
    operands = ", ".join(f"%x{i}" for i in range(len(inputs)))
    out = elementwise(f"%r = math.{name} {operands} : {{T}}", inputs, dtype, mode)
    ref = MATH_REF[name](*(x.astype(np.float64) for x in inputs))
    tol = TOLERANCE[np.dtype(dtype)]
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=tol, atol=tol)


def test_round_is_half_away_from_zero_and_roundeven_is_half_even(ctx):
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -1.25, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(elementwise("%r = math.round %x0 : {T}", [x], np.float32),
                                  [1, 2, 3, -1, -3, 0, -1, 3])
    np.testing.assert_array_equal(elementwise("%r = math.roundeven %x0 : {T}", [x], np.float32),
                                  [0, 2, 2, -0.0, -2, 0, -1, 3])


def test_fma_rounds_once(ctx):
    # a*a - 1 for a = 1 + 3*2**-10 is 3*2**-9 + 9*2**-20.  Rounding the product
    # to f16 first drops the 9*2**-20; a fused multiply-add keeps 2*2**-18 of it.
    a = np.full(4, 1 + 3 * 2**-10, dtype=np.float16)
    c = np.full(4, -1, dtype=np.float16)
    out = elementwise("%r = math.fma %x0, %x0, %x1 : {T}", [a, c], np.float16)
    np.testing.assert_array_equal(out, np.full(4, 3 * 2**-9 + 2**-17, dtype=np.float16))
    assert out[0] != np.float16(np.float16(a[0] * a[0]) - 1)


@pytest.mark.parametrize("mode", MODES)
def test_fpowi(ctx, rng, mode):
    x = rng.uniform(0.5, 2.0, 16).astype(np.float32)
    n = rng.integers(-6, 7, 16).astype(np.int32)
    out = elementwise("%r = math.fpowi %x0, %x1 : {T0}, {T1}", [x, n], np.float32, mode)
    np.testing.assert_allclose(out, x.astype(np.float64) ** n, rtol=2e-7)


@pytest.mark.parametrize("mode", MODES)
def test_ipowi_wraps_and_negative_exponents(ctx, mode):
    a = np.array([3, 3, 2, 1, -1, -1, 0, 5, 0, 7, -2, 2, -3, 10, 1, -7], dtype=np.int32)
    n = np.array([4, 40, 31, -3, -3, -4, -1, -2, 0, 0, 3, 32, 5, 9, 2**31 - 1, 1],
                 dtype=np.int32)
    out = elementwise("%r = math.ipowi %x0, %x1 : {T}", [a, n], np.int32, mode)
    expected = [81, 3**40, 2**31, 1, -1, 1, -1, 0, 1, 1, -8, 0, -243, 10**9, 1, -7]
    np.testing.assert_array_equal(out, wrap(expected, np.int32))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_absi_wraps_at_min(ctx, rng, dtype, mode):
    x = edge_ints(dtype, 16, rng)
    out = elementwise("%r = math.absi %x0 : {T}", [x], dtype, mode)
    np.testing.assert_array_equal(out, wrap([abs(int(v)) for v in x], dtype))


def test_float_classification(ctx):
    x = np.array([np.nan, np.inf, -np.inf, 0, 1, -2, np.nan, 5], dtype=BF16)
    for name, ref in [("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)]:
        out = elementwise(f"%r = math.{name} %x0 : {{T}}", [x], np.bool_)
        np.testing.assert_array_equal(out, ref(x.astype(np.float32)), err_msg=name)


# ---------------------------------------------------------------------------
# Integer arithmetic
# ---------------------------------------------------------------------------
def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _bits(dtype) -> int:
    return np.dtype(dtype).itemsize * 8


def _unsigned(v: int, dtype) -> int:
    return int(v) % (1 << _bits(dtype))


# Reference semantics in exact Python integers (results are then wrapped).
INT_REF = {
    "addi": lambda a, b, d: a + b,
    "subi": lambda a, b, d: a - b,
    "muli": lambda a, b, d: a * b,
    "divsi": lambda a, b, d: -1 if b == 0 else _trunc_div(a, b),
    "remsi": lambda a, b, d: a if b == 0 else a - b * _trunc_div(a, b),
    "floordivsi": lambda a, b, d: -1 if b == 0 else a // b,
    "ceildivsi": lambda a, b, d: -1 if b == 0 else -(-a // b),
    "divui": lambda a, b, d: -1 if b == 0 else _unsigned(a, d) // _unsigned(b, d),
    "remui": lambda a, b, d: a if b == 0 else _unsigned(a, d) % _unsigned(b, d),
    "ceildivui": lambda a, b, d: -1 if b == 0 else -(-_unsigned(a, d) // _unsigned(b, d)),
    "maxsi": lambda a, b, d: max(a, b),
    "minsi": lambda a, b, d: min(a, b),
    "maxui": lambda a, b, d: max(_unsigned(a, d), _unsigned(b, d)),
    "minui": lambda a, b, d: min(_unsigned(a, d), _unsigned(b, d)),
    "andi": lambda a, b, d: a & b,
    "ori": lambda a, b, d: a | b,
    "xori": lambda a, b, d: a ^ b,
    "shli": lambda a, b, d: 0 if _unsigned(b, d) >= _bits(d) else a << _unsigned(b, d),
    "shrui": lambda a, b, d: 0 if _unsigned(b, d) >= _bits(d) else
    _unsigned(a, d) >> _unsigned(b, d),
    "shrsi": lambda a, b, d: a >> min(_unsigned(b, d), _bits(d) - 1),
}


def _int_operands(op: str, dtype, rng):
    a = edge_ints(dtype, 64, rng)
    b = np.roll(edge_ints(dtype, 64, rng), 3)
    if op.startswith("sh"):  # mostly in-range shift amounts, plus a few too large
        b = rng.integers(0, _bits(dtype), 64).astype(dtype)
        b[:4] = [_bits(dtype), _bits(dtype) + 1, -1, np.iinfo(dtype).max]
    if op in ("divsi", "remsi", "floordivsi", "ceildivsi"):
        a[:3] = np.iinfo(dtype).min
        b[:3] = [-1, 0, 1]  # INT_MIN / -1 overflows and wraps; / 0 follows the rule
    return a, b


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", sorted(INT_REF))
def test_int_binary_ops(ctx, rng, op, dtype, mode):
    a, b = _int_operands(op, dtype, rng)
    out = elementwise(f"%r = arith.{op} %x0, %x1 : {{T}}", [a, b], dtype, mode)
    expected = wrap([INT_REF[op](int(x), int(y), dtype) for x, y in zip(a, b)], dtype)
    np.testing.assert_array_equal(out, expected)


I1_REF = {  # i1 is a 1-bit integer: true is -1 signed, 1 unsigned
    "addi": lambda a, b: a ^ b, "subi": lambda a, b: a ^ b, "muli": lambda a, b: a & b,
    "maxsi": lambda a, b: a & b, "minsi": lambda a, b: a | b,
    "maxui": lambda a, b: a | b, "minui": lambda a, b: a & b,
    "andi": lambda a, b: a & b, "ori": lambda a, b: a | b, "xori": lambda a, b: a ^ b,
}


@pytest.mark.parametrize("op", sorted(I1_REF))
def test_i1_arithmetic_is_one_bit(ctx, op):
    a = np.array([False, False, True, True] * 2)
    b = np.array([False, True, False, True] * 2)
    out = elementwise(f"%r = arith.{op} %x0, %x1 : {{T}}", [a, b], np.bool_)
    np.testing.assert_array_equal(out, I1_REF[op](a, b))


CMPI_REF = {"eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
            "sgt": np.greater, "sge": np.greater_equal}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", INT_DTYPES + (np.bool_,))
@pytest.mark.parametrize("predicate", ["eq", "ne", "slt", "sle", "sgt", "sge",
                                       "ult", "ule", "ugt", "uge"])
def test_cmpi_predicates(ctx, rng, predicate, dtype, mode):
    if dtype is np.bool_:
        a = np.array([False, False, True, True] * 4)
        b = np.array([False, True, False, True] * 4)
        signed_a, signed_b = -a.astype(int), -b.astype(int)  # true is -1 when signed
    else:
        a, b = edge_ints(dtype, 16, rng), np.roll(edge_ints(dtype, 16, rng), 5)
        signed_a, signed_b = a.astype(object), b.astype(object)
    out = elementwise(f"%r = arith.cmpi {predicate}, %x0, %x1 : {{T}}", [a, b], np.bool_, mode)
    if predicate.startswith("u"):
        bits = 1 if dtype is np.bool_ else _bits(dtype)
        ua = np.array([int(v) % (1 << bits) for v in signed_a], dtype=object)
        ub = np.array([int(v) % (1 << bits) for v in signed_b], dtype=object)
        expected = CMPI_REF["s" + predicate[1:]](ua, ub)
    else:
        expected = CMPI_REF[predicate](signed_a, signed_b)
    np.testing.assert_array_equal(out, expected.astype(bool))


def test_scalar_integer_wrap(ctx):
    text = f"""
func.func @k(%o: {arr('i32')}, %x: i32, %y: i32) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %s = arith.addi %x, %y : i32
  %p = arith.muli %x, %y : i32
  %v = tensor.from_elements %s, %p : tensor<2xi32>
  {store('o', 'i32', 'v', [2], '%c0')}
  return
}}"""
    o = np.zeros(2, np.int32)
    run(text, (1,), [o, 2**31 - 1, 3])
    np.testing.assert_array_equal(o, wrap([2**31 + 2, 3 * (2**31 - 1)], np.int32))


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dst", [np.int8, np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("op", ["fptosi", "fptoui"])
def test_float_to_int_truncates_and_saturates(ctx, op, dst, mode):
    x = np.array([2.9, -2.9, 0.5, -0.5, np.nan, np.inf, -np.inf, 1e30, -1e30, 127.9, 128.0,
                  -129.0, 255.5, 3e9, -3e9, 1.0], dtype=np.float32)
    out = elementwise(f"%r = arith.{op} %x0 : {{T}} to {{R}}", [x], dst, mode)
    bits = 1 if dst is np.bool_ else _bits(dst)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if op == "fptosi" else (0, (1 << bits) - 1)
    expected = [0 if math.isnan(v) else min(max(math.trunc(v) if math.isfinite(v)
                                                else (hi if v > 0 else lo), lo), hi)
                for v in x.astype(np.float64)]
    if dst is np.bool_:
        np.testing.assert_array_equal(out, np.array(expected) != 0)
    else:
        np.testing.assert_array_equal(out, wrap(expected, dst))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("src", [np.int8, np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("dst", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["sitofp", "uitofp"])
def test_int_to_float(ctx, rng, op, src, dst, mode):
    if src is np.bool_:
        x = np.array([True, False] * 4)
        exact = [(-1 if op == "sitofp" else 1) * int(v) for v in x]
    else:
        x = edge_ints(src, 16, rng)
        exact = [int(v) if op == "sitofp" else _unsigned(v, src) for v in x]
    out = elementwise(f"%r = arith.{op} %x0 : {{T}} to {{R}}", [x], dst, mode)
    # Each integer rounded once to the target (through f64, exact below 2**53,
    # and with 2**53 <= |v| only i64 ranges can tell the difference).
    from tileir.interpreter.dtypes import ELEMS, f64_to
    expected = [float(f64_to(ELEMS[IR_TYPES[np.dtype(dst)]], float(v))) for v in exact]
    np.testing.assert_array_equal(out.astype(np.float64), expected)


def test_truncf_f64_to_bf16_rounds_once(ctx):
    # 1 + 2**-8 + 2**-30 lies just above the bf16 tie 1 + 2**-8: the correct
    # result is 1 + 2**-7.  Through f32 it would first become the tie exactly,
    # then round to even: 1.0.
    x = np.array([1 + 2**-8 + 2**-30, 1 + 2**-8, -(1 + 2**-8 + 2**-30), 1e300], dtype=np.float64)
    out = elementwise("%r = arith.truncf %x0 : {T} to {R}", [x], BF16)
    np.testing.assert_array_equal(out.astype(np.float64), [1 + 2**-7, 1.0, -(1 + 2**-7), np.inf])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("src,dst", [(np.float32, np.float16), (np.float32, BF16),
                                     (np.float64, np.float32), (np.float64, np.float16)])
def test_truncf_rounds_to_nearest_even(ctx, rng, src, dst, mode):
    x = (rng.standard_normal(32) * 1000).astype(src)
    x[:3] = [1e10, -1e10, np.nan]
    out = elementwise("%r = arith.truncf %x0 : {T} to {R}", [x], dst, mode)
    with np.errstate(over="ignore"):  # 1e10 overflows f16 to inf, as it should
        expected = x.astype(dst).astype(np.float64)
    np.testing.assert_array_equal(out.astype(np.float64), expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("src,dst", [(np.float16, np.float32), (BF16, np.float32),
                                     (BF16, np.float64), (np.float32, np.float64)])
def test_extf_is_exact(ctx, rng, src, dst, mode):
    x = rng.standard_normal(32).astype(src)
    out = elementwise("%r = arith.extf %x0 : {T} to {R}", [x], dst, mode)
    np.testing.assert_array_equal(out, x.astype(np.float64).astype(dst))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op,src,dst", [
    ("extsi", np.int8, np.int32), ("extui", np.int8, np.int32), ("extsi", np.bool_, np.int8),
    ("extui", np.bool_, np.int64), ("trunci", np.int32, np.int8), ("trunci", np.int64, np.bool_),
    ("extui", np.int32, np.int64)])
def test_int_resize(ctx, rng, op, src, dst, mode):
    x = np.array([True, False] * 8) if src is np.bool_ else edge_ints(src, 16, rng)
    out = elementwise(f"%r = arith.{op} %x0 : {{T}} to {{R}}", [x], dst, mode)
    bits = 1 if src is np.bool_ else _bits(src)
    values = [-int(v) if src is np.bool_ else int(v) for v in x]  # signed view of i1
    if op == "extui":
        values = [v % (1 << bits) for v in values]
    if dst is np.bool_:
        np.testing.assert_array_equal(out, np.array([v & 1 for v in values]) != 0)
    else:
        np.testing.assert_array_equal(out, wrap(values, dst))


@pytest.mark.parametrize("mode", MODES)
def test_bitcast(ctx, rng, mode):
    x = rng.standard_normal(16).astype(np.float32)
    out = elementwise("%r = arith.bitcast %x0 : {T} to {R}", [x], np.int32, mode)
    np.testing.assert_array_equal(out, x.view(np.int32))
    h = rng.standard_normal(16).astype(BF16)
    out = elementwise("%r = arith.bitcast %x0 : {T} to {R}", [h], np.int16, mode)
    np.testing.assert_array_equal(out, h.view(np.int16))


# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------
CONSTANTS = [
    ("dense<[1.5, -2.25, 0x7FC0, 0xFF80]> : tensor<4xbf16>", BF16, [1.5, -2.25, np.nan, -np.inf]),
    ("dense<0.1> : tensor<4xbf16>", BF16, [float(np.float32(0.1).astype(BF16))] * 4),
    ("dense<[0.1, 65504.0, -0.0, 0x7C00]> : tensor<4xf16>", np.float16,
     [float(np.float16(0.1)), 65504, -0.0, np.inf]),
    ("dense<2.5> : tensor<4xf16>", np.float16, [2.5] * 4),
    ("dense<[true, false, true, true]> : tensor<4xi1>", np.bool_, [True, False, True, True]),
    ("dense<true> : tensor<4xi1>", np.bool_, [True] * 4),
    ("dense<false> : tensor<4xi1>", np.bool_, [False] * 4),
    ("dense<[200, -1, 127, -128]> : tensor<4xi8>", np.int8, [-56, -1, 127, -128]),
    ("dense<-3> : tensor<4xi64>", np.int64, [-3] * 4),
    ("dense<[1.0, 0x7FC00000, -0.0, 1.0e-45]> : tensor<4xf32>", np.float32,
     [1.0, np.nan, -0.0, float(np.float32(1e-45))]),
    ("dense<0.3> : tensor<4xf64>", np.float64, [0.3] * 4),
]


@pytest.mark.parametrize("attr,dtype,expected", CONSTANTS)
def test_dense_constants(ctx, attr, dtype, expected):
    t = IR_TYPES[np.dtype(dtype)]
    text = f"""
func.func @k(%o: {arr(t)}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %v = arith.constant {attr}
  {store('o', t, 'v', [4], '%c0')}
  return
}}"""
    out = np.zeros(4, dtype=dtype)
    run(text, (1,), [out])
    got = out.astype(np.float64)
    np.testing.assert_array_equal(got, np.array(expected, dtype=np.float64))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.array(expected, np.float64)))


def test_large_non_splat_bf16_and_i1_constants(ctx, rng):
    values = rng.standard_normal((16, 16)).astype(BF16)
    mask = rng.integers(0, 2, (16, 16)).astype(bool)
    def literal(a, fmt):
        return "[" + ", ".join("[" + ", ".join(fmt(v) for v in row) + "]" for row in a) + "]"
    text = f"""
func.func @k(%o: {arr('bf16', 2)}, %m: {arr('i1', 2)}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %v = arith.constant dense<{literal(values, lambda v: repr(float(v)))}> : tensor<16x16xbf16>
  %b = arith.constant dense<{literal(mask, lambda v: 'true' if v else 'false')}> : tensor<16x16xi1>
  {store('o', 'bf16', 'v', [16, 16], '%c0, %c0')}
  {store('m', 'i1', 'b', [16, 16], '%c0, %c0')}
  return
}}"""
    out, m = np.zeros((16, 16), BF16), np.zeros((16, 16), bool)
    run(text, (1,), [out, m])
    np.testing.assert_array_equal(out.view(np.uint16), values.view(np.uint16))
    np.testing.assert_array_equal(m, mask)


def test_large_splat_i1_constant(ctx):
    # The bindings' buffer view of an i1 splat is wrong beyond the first byte.
    text = f"""
func.func @k(%m: {arr('i1', 2)}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %b = arith.constant dense<true> : tensor<16x16xi1>
  {store('m', 'i1', 'b', [16, 16], '%c0, %c0')}
  return
}}"""
    m = np.zeros((16, 16), bool)
    run(text, (1,), [m])
    assert m.all()


@pytest.mark.parametrize("literal,t,dtype,expected", [
    ("3.0 : bf16", "bf16", BF16, 3.0), ("-0.0 : f16", "f16", np.float16, -0.0),
    ("true", "i1", np.bool_, True), ("200 : i8", "i8", np.int8, -56),
    ("-1 : i64", "i64", np.int64, -1), ("0x7FF0000000000000 : f64", "f64", np.float64, np.inf)])
def test_scalar_constants(ctx, literal, t, dtype, expected):
    text = f"""
func.func @k(%o: {arr(t)}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %s = arith.constant {literal}
  %v = tensor.splat %s : tensor<1x{t}>
  {store('o', t, 'v', [1], '%c0')}
  return
}}"""
    out = np.zeros(1, dtype=dtype)
    run(text, (1,), [out])
    assert float(out[0]) == float(expected)
    assert np.signbit(float(out[0])) == np.signbit(float(expected))


# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------
def test_bf16_arrays_as_uint16_bits(ctx, rng):
    x = rng.standard_normal(64).astype(BF16)
    y = rng.standard_normal(64).astype(BF16)
    bits = np.zeros(64, dtype=np.uint16)
    text = VADD.replace("f32", "bf16")
    run(text, (1,), [x.view(np.uint16), y, bits])
    expected = (x.astype(np.float32) + y.astype(np.float32)).astype(BF16)
    np.testing.assert_array_equal(bits, expected.view(np.uint16))


def test_unsigned_array_elements(ctx):
    text = f"""
func.func @k(%x: {arr('ui8')}, %o: {arr('ui8')}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  {load('t', 'x', 'ui8', [4], '%c0')}
  %two = arith.constant dense<2> : tensor<4xi8>
  %q = arith.divui %t, %two : tensor<4xi8>
  {store('o', 'ui8', 'q', [4], '%c0')}
  return
}}"""
    x = np.array([255, 128, 7, 0], dtype=np.uint8)
    o = np.zeros(4, dtype=np.uint8)
    run(text, (1,), [x, o])
    np.testing.assert_array_equal(o, x // 2)


SCALARS = f"""
func.func @k(%o: {arr('f32')}, %a: i8, %b: i8, %c: i8, %f: f16, %g: bf16, %h: i1)
    attributes {{tile.kernel, tile.arg_names = ["o", "a", "b", "c", "f", "g", "h"]}} {{
  %c0 = arith.constant 0 : i32
  %a1 = arith.sitofp %a : i8 to f32
  %b1 = arith.uitofp %b : i8 to f32
  %c1 = arith.sitofp %c : i8 to f32
  %f1 = arith.extf %f : f16 to f32
  %g1 = arith.extf %g : bf16 to f32
  %h1 = arith.uitofp %h : i1 to f32
  %v = tensor.from_elements %a1, %b1, %c1, %f1, %g1, %h1, %a1, %a1 : tensor<8xf32>
  {store('o', 'f32', 'v', [8], '%c0')}
  return
}}"""


def test_scalar_arguments_are_converted(ctx):
    o = np.zeros(8, np.float32)
    run(SCALARS, (1,), [o, -5, 200, np.int8(-7), 0.1, 1 / 3, True])
    np.testing.assert_array_equal(o[:6], [-5, 200, -7, float(np.float16(0.1)),
                                          float(np.float32(1 / 3).astype(BF16)), 1])


@pytest.mark.parametrize("args,message", [
    ([np.zeros(8, np.float32), 300, 0, 0, 0.0, 0.0, True],
     r"argument #1 'a' of @k 300 does not fit i8 \(range -128\.\.255\)"),
    ([np.zeros(8, np.float32), 1.0, 0, 0, 0.0, 0.0, True],
     r"argument #1 'a' of @k expects an int for i8, got float 1\.0"),
    ([np.zeros(8, np.float32), 0, 0, 0, 1e6, 0.0, True],
     r"argument #4 'f' of @k 1000000\.0 overflows f16 \(largest finite value 65504\.0\)"),
    ([np.zeros(8, np.float32), 0, 0, 0, 0.0, 0.0, 2],
     r"argument #6 'h' of @k expects a bool for i1, got 2"),
    ([np.zeros(8, np.float32), 0, 0, 0, "x", 0.0, True],
     r"argument #4 'f' of @k expects a float for f16, got str 'x'"),
    ([np.zeros(8, np.float32), 0, 0, 0, 0.0, 1e39, True],
     r"argument #5 'g' of @k 1e\+39 overflows bf16 \(largest finite value 3\.38953\d*e\+38\)"),
    ([np.zeros(8, np.float32), True, 0, 0, 0.0, 0.0, True],
     r"argument #1 'a' of @k expects a number for i8, got bool True"),
])
def test_bad_scalar_arguments(ctx, args, message):
    with pytest.raises(ArgumentError, match=message):
        run(SCALARS, (1,), args)


def test_signed_and_unsigned_scalar_ranges(ctx):
    text = f"""
func.func @k(%o: {arr('i32')}, %u: ui8, %s: si8) attributes {{tile.kernel}} {{
  return
}}"""
    run(text, (1,), [np.zeros(1, np.int32), 255, -128])
    with pytest.raises(ArgumentError, match=r"-1 does not fit ui8 \(range 0\.\.255\)"):
        run(text, (1,), [np.zeros(1, np.int32), -1, 0])
    with pytest.raises(ArgumentError, match=r"128 does not fit si8 \(range -128\.\.127\)"):
        run(text, (1,), [np.zeros(1, np.int32), 0, 128])


@pytest.mark.parametrize("args,message", [
    ([np.zeros(4, np.float32)] * 2,
     r"-:2:1: error: @k takes 3 arguments \(arg0, arg1, arg2\), got 2"),
    ([np.zeros(4, np.float64)] + [np.zeros(4, np.float32)] * 2,
     r"argument #0 'arg0' of @k expects a float32 array for !tile.array<f32, 1 : i64>, "
     r"got float64"),
    ([np.zeros((4, 4), np.float32)] + [np.zeros(4, np.float32)] * 2,
     r"argument #0 'arg0' of @k expects a 1-D array for !tile.array<f32, 1 : i64>, got a 2-D "
     r"array of shape \(4, 4\)"),
    ([[1.0, 2.0]] + [np.zeros(4, np.float32)] * 2,
     r"argument #0 'arg0' of @k expects a NumPy array for !tile.array<f32, 1 : i64>, got list"),
])
def test_bad_array_arguments(ctx, args, message):
    with pytest.raises(ArgumentError, match=message):
        run(VADD, (1,), args)


def test_bf16_array_rejects_other_16_bit_dtypes(ctx):
    with pytest.raises(ArgumentError, match="expects a bfloat16 or uint16 array for "
                                            r"!tile.array<bf16, 1 : i64>, got float16"):
        run(VADD.replace("f32", "bf16"), (1,), [np.zeros(4, np.float16)] * 3)


@pytest.mark.parametrize("grid,message", [
    ((), r"the grid has 1 to 3 axes, got 0"), ((1, 1, 1, 1), r"the grid has 1 to 3 axes, got 4"),
    ((2.0,), r"grid sizes are ints in 0\.\.2147483647, got \(2\.0,\)"),
    ((-1,), r"grid sizes are ints")])
def test_bad_grid(ctx, grid, message):
    with pytest.raises(ArgumentError, match=message):
        run(VADD, grid, [np.zeros(4, np.float32)] * 3)


def test_empty_grid_runs_nothing(ctx):
    z = np.full(4, 9.0, np.float32)
    run(VADD, (0,), [np.zeros(4, np.float32), np.zeros(4, np.float32), z])
    assert np.all(z == 9.0)


def test_unknown_kernel_name(ctx):
    with pytest.raises(ArgumentError, match=r"no tile.kernel function @nope in the module "
                                            r"\(kernels: @k\)"):
        run(VADD, (1,), [], kernel="nope")


def test_store_into_read_only_array(ctx):
    z = np.zeros(4, np.float32)
    z.flags.writeable = False
    with pytest.raises(InterpreterError, match=r"-:7:3: error: 'tile.store': cannot store "
                                               r"into a read-only array argument"):
        run(VADD, (1,), [np.zeros(4, np.float32), np.zeros(4, np.float32), z])


# ---------------------------------------------------------------------------
# Unsupported ops and run-time faults
# ---------------------------------------------------------------------------
def test_op_without_a_rule_is_reported_with_its_location(ctx):
    text = f"""
func.func @k(%x: {arr('i32')}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %n = math.ctlz %c0 : i32
  return
}}"""
    with pytest.raises(UnsupportedOpError, match=r"-:4:8: error: no interpreter rule for "
                                                 r"math.ctlz") as info:
        run(text, (1,), [np.zeros(1, np.int32)])
    assert isinstance(info.value, NotImplementedError)
    assert isinstance(info.value, TileIRError)


def test_unsupported_rounding_mode(ctx):
    """Directed truncf rounds (cuTile's astype RZ/RM/RP); ties away from zero does not."""
    text = """
func.func @k(%x: f32) attributes {tile.kernel} {
  %y = arith.truncf %x to_nearest_away : f32 to f16
  return
}"""
    with pytest.raises(UnsupportedOpError, match=r"'arith.truncf': rounding mode "
                                                 r"to_nearest_away of a conversion to f16 is "
                                                 r"not supported"):
        run(text, (1,), [1.0])


def test_directed_truncf_rounds_once_its_way(ctx):
    text = f"""
func.func @k(%x: {arr('f64')}, %y: {arr('f16')}, %z: {arr('f16')}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %t = "tile.load"(%x, %c0) {{padding = "zero", tile_shape = array<i64: 4>}}
      : ({arr('f64')}, i32) -> tensor<4xf64>
  %u = arith.truncf %t upward : tensor<4xf64> to tensor<4xf16>
  %d = arith.truncf %t toward_zero : tensor<4xf64> to tensor<4xf16>
  "tile.store"(%y, %u, %c0) : ({arr('f16')}, tensor<4xf16>, i32) -> ()
  "tile.store"(%z, %d, %c0) : ({arr('f16')}, tensor<4xf16>, i32) -> ()
  return
}}"""
    x = np.array([1.0 + 2.0 ** -30, -(1.0 + 2.0 ** -30), 1e6, -1e-12])
    y, z = np.zeros(4, np.float16), np.zeros(4, np.float16)
    run(text, (1,), [x, y, z])
    np.testing.assert_array_equal(y, np.array([1.0 + 2.0 ** -10, -1.0, np.inf, -0.0],
                                              np.float16))
    np.testing.assert_array_equal(z, np.array([1.0, -1.0, 65504.0, -0.0], np.float16))
    assert np.signbit(y[3]) and np.signbit(z[3])


def test_zero_step_loop_is_a_located_fault(ctx):
    text = """
func.func @k(%s: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c4 = arith.constant 4 : i32
  scf.for %i = %c0 to %c4 step %s : i32 {
  }
  return
}"""
    with pytest.raises(InterpreterError, match=r"-:5:3: error: 'scf.for': the step must be "
                                               r"positive, got 0"):
        run(text, (1,), [0])


@pytest.mark.parametrize("wrong", ["dtype", "shape"])
@pytest.mark.parametrize("checked_inside", [True, False], ids=["pure", "wrapped"])
def test_a_rule_giving_the_wrong_result_type_is_a_located_interpreter_bug(
        ctx, monkeypatch, wrong, checked_inside):
    """The check of each result against its IR type (`pure`'s step does it itself, other
    rules' steps get it around them): the same fault, at the op's line, either way."""
    from tileir.interpreter import compiler
    bad = ((lambda a, c: (a + c).astype(np.float64)) if wrong == "dtype"
           else (lambda a, c: np.concatenate([a, c])))

    def addf_pure(op, cx):
        return compiler.pure(op, cx, bad)

    def addf_plain(op, cx):                     # a rule written without `pure`
        a, c, out = cx.slot(op.operands[0]), cx.slot(op.operands[1]), cx.define(op.result)

        def step(frame):
            frame[out] = bad(frame[a], frame[c])
        return step
    addf = addf_pure if checked_inside else addf_plain
    monkeypatch.setitem(compiler.RULES, "arith.addf", addf)
    interpreter.CACHE.clear()
    got = ("float64 value of shape (64,)" if wrong == "dtype"
           else "float32 value of shape (128,)")
    with pytest.raises(InterpreterError, match=rf"-:6:8: error: 'arith.addf': interpreter bug: "
                                               rf"the result is a {re.escape(got)}, but its IR "
                                               rf"type needs float32 of shape \(64,\)"):
        run(VADD, (1,), [np.zeros(64, np.float32)] * 3)
    interpreter.CACHE.clear()


@pytest.mark.parametrize("wrong", ["dtype", "shape"])
def test_a_load_giving_the_wrong_result_type_is_a_located_interpreter_bug(
        ctx, monkeypatch, wrong):
    """tile.load's step checks its tile against the IR type itself, as `pure`'s do."""
    from tileir.interpreter import tile_ops
    real = tile_ops._load_tile

    def bad_load_tile(e, shape, padding, array_type):
        load = real(e, shape, padding, array_type)
        if wrong == "dtype":
            return lambda array, indices: load(array, indices).astype(np.float16)
        return lambda array, indices: load(array, indices)[:32]
    monkeypatch.setattr(tile_ops, "_load_tile", bad_load_tile)
    interpreter.CACHE.clear()
    got = "float16 value of shape (64,)" if wrong == "dtype" else "float32 value of shape (32,)"
    with pytest.raises(InterpreterError, match=rf"-:4:8: error: 'tile.load': interpreter bug: "
                                               rf"the result is a {re.escape(got)}, but its IR "
                                               rf"type needs float32 of shape \(64,\)"):
        run(VADD, (1,), [np.zeros(64, np.float32)] * 3)
    interpreter.CACHE.clear()


def test_invalid_ir_is_rejected_by_the_verifier(ctx):
    module = td.parse(VADD.replace("arith.addf %a, %c : tensor<64xf32>",
                                   "arith.addf %a, %c : tensor<64xf32>\n"
                                   "%m = memref.alloc() : memref<4xf32>"), do_verify=False)
    with pytest.raises(TileIRError, match="'memref.alloc' is not part of Tile IR"):
        interpreter.run(module, "k", (1,), [np.zeros(4, np.float32)] * 3)


def test_every_tile_ir_op_has_a_rule():
    from tileir.dialect import DIALECT
    from tileir.dialect.verifier import ALLOWED_OPS
    from tileir.interpreter.compiler import TERMINATORS
    missing = (set(DIALECT.ops) | ALLOWED_OPS) - set(interpreter.RULES) - TERMINATORS
    assert not missing, f"ops of Tile IR without an interpreter rule: {sorted(missing)}"


# ---------------------------------------------------------------------------
# The compile cache follows the module's content
# ---------------------------------------------------------------------------
def test_cache_recompiles_a_changed_module(ctx):
    module = parse(VADD)
    x, y, z = np.ones(4, np.float32), np.ones(4, np.float32), np.zeros(4, np.float32)
    interpreter.run(module, "k", (1,), [x, y, z])
    assert np.all(z == 2)
    compiled = interpreter.CACHE.get(module, "k")
    assert interpreter.CACHE.get(module, "k") is compiled  # unchanged module: cached
    # Change the IR in place: addf becomes subf.
    add = [op for op in module.body.operations[0].regions[0].blocks[0].operations
           if op.operation.name == "arith.addf"][0]
    with ir.InsertionPoint(add), add.location:
        sub = ir.Operation.create("arith.subf", results=[add.result.type],
                                  operands=list(add.operands))
    add.result.replace_all_uses_with(sub.result)
    add.operation.erase()
    interpreter.run(module, "k", (1,), [x, y, z])
    assert np.all(z == 0)


def test_a_persistent_tile_loop_runs_in_the_interpreter(ctx):
    """The interpreter runs the grid a persistent kernel walks, one block per tile:
    `tile.grid_size` is that grid, so each block's tile loop takes its own tile."""
    from tileir.passes import persistent_tiles
    module = td.parse('''
func.func @k(%c: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.persistent = true,
                                                       tile.block_order = "linear"} {
  %i = "tile.bid"() {axis = 0 : i64} : () -> i32
  %n = "tile.num_blocks"() {axis = 0 : i64} : () -> i32
  %f = arith.sitofp %i : i32 to f32
  %g = arith.sitofp %n : i32 to f32
  %s = arith.addf %f, %g : f32
  %v = tensor.splat %s : tensor<4xf32>
  "tile.store"(%c, %v, %i) : (!tile.array<f32, 1 : i64>, tensor<4xf32>, i32) -> ()
  return
}''')
    persistent_tiles.run(module)
    assert "tile.persistent_loop" in str(module)
    c = np.full(12, np.nan, np.float32)
    interpreter.run(module, "k", (3,), [c])
    np.testing.assert_array_equal(c, np.repeat([3.0, 4.0, 5.0], 4))


def test_a_tiles_window_is_its_part_inside_the_array():
    """tile_ops._window against its definition, written plainly: tile index i covers
    elements [i*s, (i+1)*s) of its dim, clipped to the array; None when nothing is left
    (negative indices, past the end, an empty dim)."""
    from tileir.interpreter.tile_ops import _window

    def plain(indices, shape, dims):
        src, dst = [], []
        for i, s, n in zip(indices, shape, dims):
            start = int(i) * s
            lo, hi = max(start, 0), min(start + s, n)
            if hi <= lo:
                return None
            src.append(slice(lo, hi))
            dst.append(slice(lo - start, hi - start))
        return tuple(src), tuple(dst)

    for dims in [(0,), (1,), (7,), (64,), (100, 37), (5, 0), (3, 64, 65)]:
        for shape in [(1,) * len(dims), (4,) * len(dims), (64,) * len(dims)]:
            for i in (-3, -1, 0, 1, 2, 16, 100):
                indices = [np.int32(i)] + [np.int32(0)] * (len(dims) - 1)
                assert _window(indices, shape, dims) == plain(indices, shape, dims)
                indices = [np.int32(0)] * (len(dims) - 1) + [np.int32(i)]
                assert _window(indices, shape, dims) == plain(indices, shape, dims)


@pytest.mark.parametrize("value", ["right", "wrong dtype", "wrong shape"])
def test_a_constant_is_checked_once_when_right_and_at_its_line_when_wrong(
        ctx, monkeypatch, value):
    """`compiler.constant`'s value is checked against the IR type where the rule is
    compiled: a right one runs with no check around its step (it cannot change); a
    wrong one (an interpreter bug) still fails at run time, at the constant's line."""
    from tileir.interpreter import compiler
    text = f"""
func.func @k(%x: {arr('f32')}) attributes {{tile.kernel}} {{
  %c0 = arith.constant 0 : i32
  %t = arith.constant dense<2.5> : tensor<4xf32>
  {store('x', 'f32', 't', [4], '%c0')}
  return
}}"""
    given = {"right": np.full(4, 2.5, np.float32), "wrong dtype": np.full(4, 2.5),
             "wrong shape": np.full(8, 2.5, np.float32)}[value]
    real = compiler.RULES["arith.constant"]

    def tensor_constant(op, cx):
        if isinstance(op.result.type, ir.RankedTensorType):
            return compiler.constant(op, cx, given)
        return real(op, cx)
    monkeypatch.setitem(compiler.RULES, "arith.constant", tensor_constant)
    interpreter.CACHE.clear()
    x = np.zeros(4, np.float32)
    if value == "right":
        kernel = interpreter.compile_kernel(parse(text), "k")
        assert all(getattr(step, compiler.CHECKED, False)
                   for step in kernel.function.body.steps[:2])
        run(text, (1,), [x])
        np.testing.assert_array_equal(x, given)
    else:
        got = "float64 value of shape (4,)" if value == "wrong dtype" \
            else "float32 value of shape (8,)"
        with pytest.raises(InterpreterError, match=rf"-:4:8: error: 'arith.constant': "
                                                   rf"interpreter bug: the result is a "
                                                   rf"{re.escape(got)}, but its IR type needs "
                                                   rf"float32 of shape \(4,\)"):
            run(text, (1,), [x])
    interpreter.CACHE.clear()


def test_a_block_id_of_the_wrong_type_is_a_located_interpreter_bug(ctx):
    """tile.bid's step checks the id it reads against the IR type itself (no wrapper):
    a launcher that set an int64 id is caught at the op, as any step's wrong result."""
    from tileir.interpreter.compiler import CHECKED, LAUNCH_SLOT, Launch, execute
    text = f"""
func.func @k(%x: {arr('i32')}) attributes {{tile.kernel}} {{
  {BID}
  return
}}"""
    kernel = interpreter.compile_kernel(parse(text), "k")
    assert getattr(kernel.function.body.steps[0], CHECKED, False)
    frame = kernel.bind([np.zeros(1, np.int32)])
    frame[LAUNCH_SLOT] = launch = Launch((1, 1, 1))
    launch.bid = (np.int32(0), np.int32(0), np.int32(0))
    execute(kernel.function.body, frame)
    launch.bid = (np.int64(0), np.int32(0), np.int32(0))
    with pytest.raises(InterpreterError, match=r"-:3:8: error: 'tile.bid': interpreter bug: "
                                               r"the result is a int64 value of shape \(\), "
                                               r"but its IR type needs int32 of shape \(\)"):
        execute(kernel.function.body, frame)
