"""Lists of arrays as kernel parameters (cuTile's `ListAnnotation`, or plain Python
lists): `len`, constant, run-time and 0-d tile indices, loops over the list,
helpers that take it, and a grouped GEMM over ragged groups, in the interpreter,
in the GPU code the simulator runs (sm_90a and sm_80) and in a cubin, against
NumPy references; then the errors of bad lists.

GPU launches of the same kernels are in test_gpu_cutile.py.
"""

from __future__ import annotations

import typing

import numpy as np
import pytest

import tileir as ct
from tileir.errors import TileTypeError, TileValueError
from tileir.sim import simulate
from tileir.specialization import format_arg_specs, parse_arg_specs

from conftest import full_tier

ConstInt = ct.Constant[int]
TARGETS = ("sm_90a", "sm_80")


def _copy(a):
    if isinstance(a, list):
        return [x.copy() for x in a]
    return a.copy() if isinstance(a, np.ndarray) else a


def run_everywhere(kernel, grid, args, out_index, stages=TARGETS):
    """The output argument `out_index` (an array or a list of arrays) after running
    `kernel` in the interpreter and, per target, its gpu-stage code in the simulator
    (each over fresh copies of `args`, and in the full tier a cubin compiled, as
    test_cutile_api's run_everywhere: the fast tier's ptxas check of lists is
    test_the_grouped_gemm_runs_on_the_tensor_cores_through_selected_arrays, both
    targets): [interpreter, *targets]."""
    cubins = full_tier()
    outs = []
    fresh = [_copy(a) for a in args]
    ct.launch(None, grid, kernel, tuple(fresh))
    outs.append(fresh[out_index])
    for target in stages:
        fresh = [_copy(a) for a in args]
        ck = kernel.compile(tuple(fresh), stage="gpu", target=target)
        simulate(ck, grid, tuple(fresh))
        outs.append(fresh[out_index])
        if cubins:
            kernel.compile(tuple(fresh), stage="cubin", target=target)
    return outs


def _lists(rng, n, shape=(16, 16)):
    return [rng.integers(0, 100, shape).astype(np.int32) for _ in range(n)]


# ---------------------------------------------------------------------------
# Indexing a list
# ---------------------------------------------------------------------------
@ct.kernel
def sum_over_len(arrays, out):
    res = ct.zeros((16, 16), dtype=out.dtype)
    for i in range(len(arrays)):
        res += ct.load(arrays[i], (0, 0), (16, 16))
    ct.store(out, (0, 0), res)


@ct.kernel
def sum_over_elements(arrays, out):
    res = ct.zeros((16, 16), dtype=out.dtype)
    for a in arrays:                        # unrolled: the length is compile time
        res += ct.load(a, (0, 0), (16, 16))
    ct.store(out, (0, 0), res)


# the fast tier: 3 arrays through each loop; 1 and 8 in `tile-check --full`
@pytest.mark.sweep(keep=("kernel",))
@pytest.mark.parametrize("kernel", [sum_over_len, sum_over_elements])
@pytest.mark.parametrize("n", [3, 1, 8])
def test_a_loop_over_len_reads_every_array(kernel, n, rng):
    arrays = _lists(rng, n)
    for got in run_everywhere(kernel, (1,), (arrays, np.zeros((16, 16), np.int32)), 1):
        np.testing.assert_array_equal(got, sum(arrays))


@ct.kernel
def sum_until(arrays, out, limit):
    res = ct.zeros((16, 16), dtype=out.dtype)
    for a in arrays:                        # unrolled: a break guards the copies after it
        t = ct.load(a, (0, 0), (16, 16))
        if ct.sum(t) > limit:
            break
        res += t
    ct.store(out, (0, 0), res)


def test_a_loop_over_a_list_breaks(rng):
    arrays = _lists(rng, 4)
    arrays[2] += 100                        # the third stops the loop, the fourth is skipped
    limit = int(max(arrays[0].sum(), arrays[1].sum(), arrays[3].sum()))
    want = arrays[0] + arrays[1]
    for got in run_everywhere(sum_until, (1,), (arrays, np.zeros((16, 16), np.int32), limit),
                              1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def constant_indices(arrays, out):
    tx = ct.load(arrays[0], (0, 0), (16, 16))
    ty = ct.load(arrays[1], (0, 0), (16, 16))
    tz = ct.load(arrays[-1], (0, 0), (16, 16))
    ct.store(out, (0, 0), tx + ty * 2 + tz * 3)


@ct.kernel
def tile_indices(arrays, out):
    first = ct.full((), 0, dtype=ct.int32)
    tx = ct.load(arrays[first], (0, 0), (16, 16))
    ty = ct.load(arrays[first + 1], (0, 0), (16, 16))
    tz = ct.load(arrays[first + 2], (0, 0), (16, 16))
    ct.store(out, (0, 0), tx + ty * 2 + tz * 3)


@pytest.mark.parametrize("kernel", [constant_indices, tile_indices])
def test_constant_and_0d_tile_indices(kernel, rng):
    arrays = _lists(rng, 3)
    want = arrays[0] + arrays[1] * 2 + arrays[2] * 3
    for got in run_everywhere(kernel, (1,), (arrays, np.zeros((16, 16), np.int32)), 1):
        np.testing.assert_array_equal(got, want)


def test_a_constant_index_picks_the_argument_and_a_runtime_one_selects():
    arrays = [np.zeros((16, 16), np.int32)] * 3
    out = np.zeros((16, 16), np.int32)
    text = constant_indices.tile_ir(arrays, out)
    assert "tile.select_array" not in text
    assert 'tile.arg_names = ["arrays[0]", "arrays[1]", "arrays[2]", "out"]' in text
    # a 0-d tile index selects in the frontend; known at compile time, tile-canonicalize
    # picks the argument; a loop counter selects at run time
    assert "tile.select_array" in tile_indices.tile_ir(arrays, out, stage="frontend")
    assert "tile.select_array" not in tile_indices.tile_ir(arrays, out)
    assert "tile.select_array" in sum_over_len.tile_ir(arrays, out)


@ct.kernel
def copy_block_s_array(xs, ys, T: ConstInt):
    # block (g, j) copies tile j of array g: a run-time scalar index, lists as outputs
    g, j = ct.bid(0), ct.bid(1)
    ct.store(ys[g], (j,), ct.load(xs[g], (j,), (T,), padding_mode=ct.PaddingMode.ZERO) + g)


def test_a_runtime_scalar_index_reads_and_writes_arrays_of_different_lengths(rng):
    sizes = [5, 64, 33, 17]
    xs = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    ys = [np.zeros(n, np.float32) for n in sizes]
    for got in run_everywhere(copy_block_s_array, (4, 4), (xs, ys, 16), 1):
        for g, (x, y) in enumerate(zip(xs, got)):
            np.testing.assert_array_equal(y, x + g)


@ct.function
def sum_rows_of(arrays, row, T: ConstInt):
    acc = ct.zeros((T,), ct.float32)
    for i in range(len(arrays)):
        acc += ct.load(arrays[i], (row,), (T,), padding_mode=ct.PaddingMode.ZERO)
    return acc


def scaled_first(arrays, k, T: ConstInt):
    return ct.load(arrays[k], (0,), (T,), padding_mode=ct.PaddingMode.ZERO) * 2.0


@ct.kernel
def helpers_take_lists(arrays, out, k, T: ConstInt):
    i = ct.bid(0)
    ct.store(out, (i,), sum_rows_of(arrays, i, T) + scaled_first(arrays, k, T))


def test_helpers_receive_the_list(rng):
    arrays = [rng.standard_normal(40).astype(np.float32) for _ in range(3)]
    want = sum(arrays) + np.tile(arrays[2][:16] * 2, 3)[:40]     # every block: arrays[2][:16]
    for got in run_everywhere(helpers_take_lists, (3,), (arrays, np.zeros(40, np.float32), 2,
                                                         16), 1):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# ---------------------------------------------------------------------------
# cuTile's grouped GEMM (test/kernels/group_gemm.py), ported by `import tileir as ct`
# ---------------------------------------------------------------------------
@ct.kernel
def grouped_matmul_kernel(As, Bs, Cs, num_sm: ConstInt, tm: ConstInt, tn: ConstInt,
                          tk: ConstInt):
    tile_idx = ct.bid(0)
    last_problem_end = 0
    group_size = len(As)
    zero_pad = ct.PaddingMode.ZERO
    for g in range(group_size):
        Ai = As[g]
        Bi = Bs[g]
        Ci = Cs[g]
        num_m_tiles = ct.num_tiles(Ai, 0, (tm, tk))
        num_k_tiles = ct.num_tiles(Ai, 1, (tm, tk))
        num_n_tiles = ct.num_tiles(Bi, 1, (tk, tn))
        num_tiles = num_m_tiles * num_n_tiles
        while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles
            acc = ct.zeros((tm, tn), dtype=ct.float32)
            for kk in range(num_k_tiles):
                ta = ct.load(Ai, (tile_m_idx, kk), shape=(tm, tk), padding_mode=zero_pad)
                tb = ct.load(Bi, (kk, tile_n_idx), shape=(tk, tn), padding_mode=zero_pad)
                acc = ct.mma(ta, tb, acc)
            acc = ct.astype(acc, Ci.dtype)
            ct.store(Ci, (tile_m_idx, tile_n_idx), tile=acc)
            tile_idx += num_sm
        last_problem_end = last_problem_end + num_tiles


GROUPS = [(40, 24, 64), (96, 64, 32), (16, 40, 48)]      # (m, n, k), ragged


def grouped_args(rng, tiles=(64, 64, 32), groups=GROUPS, num_sm=4, dtype=np.float16):
    As = [rng.standard_normal((m, k)).astype(dtype) for m, n, k in groups]
    Bs = [rng.standard_normal((k, n)).astype(dtype) for m, n, k in groups]
    Cs = [np.zeros((m, n), dtype) for m, n, k in groups]
    return (As, Bs, Cs, num_sm, *tiles)


@pytest.mark.parametrize("tiles", [(64, 64, 32), pytest.param((16, 8, 16), marks=pytest.mark.slow)])
def test_cutile_s_grouped_gemm_over_ragged_groups(tiles, rng):
    args = grouped_args(rng, tiles)
    As, Bs = args[0], args[1]
    for got in run_everywhere(grouped_matmul_kernel, (4,), args, 2):
        for a, b, c in zip(As, Bs, got):
            np.testing.assert_allclose(c.astype(np.float32),
                                       a.astype(np.float32) @ b.astype(np.float32),
                                       rtol=2e-2, atol=5e-2)


def test_the_grouped_gemm_runs_on_the_tensor_cores_through_selected_arrays(rng):
    """The groups' arrays are selected at run time, so their loads take the register
    path (no TMA ring or cp.async, which need a kernel argument), into wgmma / mma.sync."""
    args = grouped_args(rng)
    for target, instruction in (("sm_90a", "wgmma"), ("sm_80", "mma.sync")):
        ck = grouped_matmul_kernel.compile(args, stage="cubin", target=target)
        assert instruction in ck.artifacts["ptx"]
        assert not ck.meta.get("tensor_maps")


@ct.kernel
def list_batched_gemm(As, Bs, Cs, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    # one problem per grid layer: the array chosen by bid(2), the K loop through it
    g = ct.bid(2)
    a, b, c = As[g], Bs[g], Cs[g]
    acc = ct.zeros((TM, TN), ct.float32)
    for k in range(ct.num_tiles(a, 1, (TM, TK))):
        acc = ct.mma(ct.load(a, (ct.bid(0), k), (TM, TK), padding_mode=ct.PaddingMode.ZERO),
                     ct.load(b, (k, ct.bid(1)), (TK, TN), padding_mode=ct.PaddingMode.ZERO),
                     acc)
    ct.store(c, (ct.bid(0), ct.bid(1)), ct.astype(acc, c.dtype))


def batched_args(rng, g=3, m=256, n=256, k=256):
    return ([rng.standard_normal((m, k)).astype(np.float16) for _ in range(g)],
            [rng.standard_normal((k, n)).astype(np.float16) for _ in range(g)],
            [np.zeros((m, n), np.float16) for _ in range(g)], 128, 128, 64)


# the fast tier: sm_90a; sm_80 (1.9 s of CPU) in --full: the selection by bid(2) is
# rewritten with the grid before the lowering splits by target, and lists on sm_80 are
# kept by this file's other tests (each runs both targets)
# Since session 24 the persistent case in --full too (2.9 s of CPU; the policy: each
# option's simulator proof in --full): the fast tier keeps lists of arrays selected at
# run time in the grouped GEMM (test_cutile_s_grouped_gemm_over_ragged_groups[tiles0], on
# both targets, and test_the_grouped_gemm_runs_on_the_tensor_cores_through_selected_arrays)
# and the retiled, persistent schedules in the simulator on the GEMM (test_simt's
# test_persistent_gemm_runs_correctly)
@pytest.mark.sweep(keep=("hints",))
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("hints", [pytest.param({}, marks=pytest.mark.slow),
                                   pytest.param({"persistent": True, "retile": (1, 2)},
                                                marks=pytest.mark.slow)])
def test_selected_arrays_through_retiled_and_persistent_gemms(target, hints, rng):
    """A launch's grid lets the compiler retile (and on request walk tiles
    persistently): the selection by bid(2) follows the rewritten grid."""
    from tileir.kernel import hardware_grid
    kernel = list_batched_gemm.replace_hints(**hints) if hints else list_batched_gemm
    args, grid = batched_args(rng, g=2, k=128), (2, 2, 2)
    ck = kernel.compile(args, stage="gpu", target=target, grid=grid, sm_count=132)
    assert ck.meta.get("grid_scale")                 # retiled for the small grid
    simulate(ck, hardware_grid(ck.meta, grid), args, sm_count=3)
    for a, b, c in zip(*args[:3]):
        np.testing.assert_allclose(c.astype(np.float32),
                                   a.astype(np.float32) @ b.astype(np.float32),
                                   rtol=2e-2, atol=1e-1)
    kernel.compile(args, target=target, grid=grid, sm_count=132)


# ---------------------------------------------------------------------------
# Annotations and specialization
# ---------------------------------------------------------------------------
StaticShapes = typing.Annotated[
    list, ct.ListAnnotation(element=ct.ArrayAnnotation(static_shape_dims=(0, 1)))]
StaticStrides = typing.Annotated[
    list, ct.ListAnnotation(element=ct.ArrayAnnotation(static_stride_dims=(0,)))]
Int64Indexed = typing.Annotated[list, ct.ListAnnotation(element=ct.IndexedWithInt64)]


@ct.kernel
def static_shapes(arrays: StaticShapes, out):
    ct.static_assert(arrays[1].shape[0] == 16)
    res = ct.zeros((16, 16), dtype=out.dtype)
    for i in range(len(arrays)):
        res += ct.load(arrays[i], (0, 0), (16, 16))
    ct.store(out, (0, 0), res)


@ct.kernel
def static_strides(arrays: StaticStrides, out):
    ct.static_assert(arrays[0].strides[0] == 10)
    res = ct.zeros((4, 8), dtype=out.dtype)
    for i in range(len(arrays)):
        res += ct.load(arrays[i], (0, 0), (4, 8))
    ct.store(out, (0, 0), res)


@ct.kernel
def int64_indexed(arrays: Int64Indexed, out, T: ConstInt):
    i = ct.bid(0)
    res = ct.zeros((T, 1), dtype=out.dtype)
    for k in range(len(arrays)):
        res += ct.load(arrays[k], (i, 0), (T, 1))
    ct.store(out, (i, 0), res)


def test_list_annotations_apply_to_every_element(rng):
    arrays = _lists(rng, 3)
    for got in run_everywhere(static_shapes, (1,), (arrays, np.zeros((16, 16), np.int32)), 1):
        np.testing.assert_array_equal(got, sum(arrays))
    wide = [np.full((4, 10), v, np.int32)[:, :8] for v in (1, 2, 3)]
    out = np.zeros((4, 8), np.int32)
    ct.launch(None, (1,), static_strides, (wide, out))
    np.testing.assert_array_equal(out, np.full((4, 8), 6))
    cols = [np.full((40, 1), v, np.int8) for v in (1, 2, 3)]
    out = np.zeros((40, 1), np.int8)
    ct.launch(None, (5,), int64_indexed, (cols, out, 8))
    np.testing.assert_array_equal(out, np.full((40, 1), 6))


def test_static_entries_must_agree_across_the_list():
    arrays = [np.zeros((16, 16), np.int32), np.zeros((32, 16), np.int32)]
    with pytest.raises(TileValueError, match="vary in static shape at axis 0"):
        static_shapes.compile((arrays, np.zeros((16, 16), np.int32)), stage="frontend")
    wide = [np.zeros((4, 10), np.int32)[:, :8], np.zeros((4, 12), np.int32)[:, :8]]
    with pytest.raises(TileValueError, match="vary in static stride at axis 0"):
        static_strides.compile((wide, np.zeros((4, 8), np.int32)), stage="frontend")


def test_kernels_specialize_on_the_list_s_length_and_elements():
    out = np.zeros((16, 16), np.int32)
    two = sum_over_len.compile(([out, out], out), stage="tile")
    three = sum_over_len.compile(([out, out, out], out), stage="tile")
    assert two is not three
    assert sum_over_len.compile(([out.copy(), out.copy()], out), stage="tile") is two
    specs = format_arg_specs(sum_over_len.classify(([out] * 3, out), gpu=True))
    assert specs == "[i32[2]]*3,i32[2]"
    parsed = parse_arg_specs(specs)
    assert len(parsed[0]) == 3 and parsed[0][0].ndim == 2
    ck = sum_over_len.compile(tuple(parsed), stage="gpu", target="sm_80")
    assert [p["name"] for p in ck.meta["params"]] == ["arrays[0]", "arrays[1]", "arrays[2]",
                                                      "out"]


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------
def test_bad_lists_are_reported_with_the_parameter_s_name():
    out = np.zeros((16, 16), np.int32)
    a = np.zeros((16, 16), np.int32)
    with pytest.raises(TileValueError, match="argument 'arrays' of kernel 'sum_over_len' is an "
                                             "empty list"):
        ct.launch(None, (1,), sum_over_len, ([], out))
    with pytest.raises(TileTypeError, match=r"'arrays'.*element 1 is a 2-d float32 array but "
                                            r"element 0 is a 2-d int32 one"):
        ct.launch(None, (1,), sum_over_len, ([a, a.astype(np.float32)], out))
    with pytest.raises(TileTypeError, match="element 1 is a 1-d int32 array"):
        ct.launch(None, (1,), sum_over_len, ([a, a[0]], out))
    with pytest.raises(TileTypeError, match="element 1 is int; a list argument holds arrays"):
        ct.launch(None, (1,), sum_over_len, ([a, 3], out))
    with pytest.raises(TileTypeError, match="element 0 is list"):
        ct.launch(None, (1,), sum_over_len, ([[a]], out))
    with pytest.raises(TileTypeError, match="annotated as a list of arrays"):
        ct.launch(None, (1,), static_shapes, (a, out))


@ct.kernel
def out_of_range(arrays, out):
    ct.store(out, (0, 0), ct.load(arrays[3], (0, 0), (16, 16)))


@ct.kernel
def float_index(arrays, out):
    ct.store(out, (0, 0), ct.load(arrays[ct.bid(0) * 1.0], (0, 0), (16, 16)))


@ct.kernel
def runtime_out_of_range(arrays, out):
    ct.store(out, (0, 0), ct.load(arrays[ct.bid(0) + 2], (0, 0), (16, 16)))


def test_bad_indices_are_located_errors():
    a = [np.zeros((16, 16), np.int32)] * 3
    out = np.zeros((16, 16), np.int32)
    with pytest.raises(TileValueError, match=r"index 3 is out of range for a list of 3 2-d "
                                             r"int32 arrays \('arrays'\)") as e:
        out_of_range.compile((a, out), stage="frontend")
    assert "test_cutile_lists.py" in str(e.value)
    with pytest.raises(TileTypeError, match="indexed by an int, an integer scalar or a 0-d "
                                            "integer tile, got a float32 scalar"):
        float_index.compile((a, out), stage="frontend")
    with pytest.raises(Exception, match="index 3 is out of range for a list of 3 arrays"):
        ct.launch(None, (2,), runtime_out_of_range, (a, out))


def test_a_gpu_launch_names_the_list_element_in_host_memory():
    """What the launcher checks of each element (bind_args: no GPU needed)."""
    from tileir.runtime import launcher
    a = [np.zeros((16, 16), np.int32)] * 2
    ck = sum_over_len.compile((a, a[0]), stage="gpu", target="sm_90a")
    with pytest.raises(TileValueError, match=r"argument 'arrays\[0\]' of kernel "
                                             r"'sum_over_len' is in host memory"):
        launcher.bind_args(ck.meta, ck.runtime_args((a, a[0])))


def test_lists_of_host_arrays_take_the_checked_launch_path():
    """(Lists of CUDA torch tensors take the fast path: test_dispatch.py.)"""
    from tileir.runtime import dispatch
    assert dispatch.arg_kinds(([np.zeros(4)], 3), (False, False)) is None
