"""The GPU runtime: array descriptions, the `aligned` rule, parameter packing, argument
checks, streams, targets, the driver wrapper; and, marked `gpu`, launches of hand-written
PTX kernels on torch tensors that check the kernel ABI end to end.

Everything above the GPU section runs without a GPU: packing and checking are pure
functions, and the driver is only asked where a test says so.
"""

from __future__ import annotations

import ctypes
import math
import os
import struct
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from tileir.runtime import driver, launcher
from tileir.runtime.arrays import DeviceArrayInfo, aligned, describe
from tileir.runtime.launcher import bind_args, pack_array, pack_scalar, stream_handle

from conftest import _have_gpu

F32 = ct.float32


@pytest.fixture
def no_driver(monkeypatch):
    """Describing `__cuda_array_interface__` fakes must not ask a real driver about their
    made-up pointers, on a GPU machine too."""
    monkeypatch.setattr(driver, "has_gpu", lambda: False)


def info(shape, strides, dtype=F32, ptr=0x10000, device=("cuda", 0)):
    return DeviceArrayInfo(ptr=ptr, shape=tuple(shape), strides=tuple(strides), dtype=dtype,
                           device=device)


# ---------------------------------------------------------------------------
# describe: NumPy
# ---------------------------------------------------------------------------
def test_describe_numpy_contiguous():
    a = np.zeros((3, 5), np.float32)
    d = describe(a)
    assert (d.ptr, d.shape, d.strides, d.dtype, d.device, d.itemsize) == \
        (a.ctypes.data, (3, 5), (5, 1), ct.float32, ("cpu", 0), 4)
    assert not d.is_cuda and d.ndim == 2


@pytest.mark.parametrize("view, shape, strides, offset", [
    (lambda a: a.T, (6, 4), (1, 6), 0),
    (lambda a: a[:, ::2], (4, 3), (6, 2), 0),
    (lambda a: a[::-1], (4, 6), (-6, 1), 3 * 6),
    (lambda a: a[1:, 2:], (3, 4), (6, 1), 6 + 2),
    (lambda a: np.broadcast_to(a[0], (5, 6)), (5, 6), (0, 1), 0),
])
def test_describe_numpy_views(view, shape, strides, offset):
    a = np.zeros((4, 6), np.float16)
    d = describe(view(a))
    assert d.shape == shape and d.strides == strides
    assert d.ptr == a.ctypes.data + 2 * offset


@pytest.mark.parametrize("np_dtype, want", [
    (np.bool_, ct.bool_), (np.uint8, ct.uint8), (np.int8, ct.int8), (np.int64, ct.int64),
    (np.uint32, ct.uint32), (np.float64, ct.float64), (ml_dtypes.bfloat16, ct.bfloat16),
])
def test_describe_numpy_dtypes(np_dtype, want):
    assert describe(np.zeros(4, np_dtype)).dtype == want


def test_describe_rejects_unsupported_numpy_arrays():
    with pytest.raises(ct.TileTypeError, match=r"element type complex64, which tile kernels "
                                               r"do not support; supported: bool_, int8"):
        describe(np.zeros(3, np.complex64))
    with pytest.raises(ct.TileTypeError, match="byte-swapped"):
        describe(np.zeros(3, ">f4"))
    rec = np.zeros(4, dtype=[("x", "<f4"), ("tag", "u1")])
    with pytest.raises(ct.TileValueError, match=r"argument 'x' has a stride of 5 bytes, not a "
                                                r"multiple of its 4-byte elements"):
        describe(rec["x"], name="x")
    with pytest.raises(ct.TileTypeError, match=r"argument 'n' of kernel 'k' is a list, not an "
                                               r"array"):
        describe([1.0, 2.0], name="n", kernel="k")


def test_describe_passes_descriptions_through():
    d = info((2,), (1,))
    assert describe(d) is d


# ---------------------------------------------------------------------------
# describe: __cuda_array_interface__
# ---------------------------------------------------------------------------
class FakeCAI:
    """An array known only by its `__cuda_array_interface__` (and, optionally, `dtype`)."""

    def __init__(self, shape, typestr, ptr=0x7f0000000000, strides=None, version=3,
                 dtype=None, **extra):
        self.__cuda_array_interface__ = dict(shape=shape, typestr=typestr, data=(ptr, False),
                                             strides=strides, version=version, **extra)
        if dtype is not None:
            self.dtype = dtype


def test_cai_contiguous_strides_are_computed(no_driver):
    d = describe(FakeCAI((2, 3, 4), "<f4"))
    assert d.strides == (12, 4, 1) and d.shape == (2, 3, 4)
    assert d.device == ("cuda", None)     # no driver here to ask which device owns it
    assert d.is_cuda


def test_cai_transposed_and_strided_views(no_driver):
    # A (4, 6) float32 array transposed: byte strides (4, 24); every other column: (4, 48).
    assert describe(FakeCAI((6, 4), "<f4", strides=(4, 24))).strides == (1, 6)
    assert describe(FakeCAI((6, 2), "<f4", strides=(4, 48))).strides == (1, 12)
    assert describe(FakeCAI((3,), "<f8", strides=(-8,))).strides == (-1,)
    with pytest.raises(ct.TileValueError, match="stride of 6 bytes"):
        describe(FakeCAI((3,), "<f4", strides=(6,)))


def test_cai_version_2_and_pointer_kept_exactly(no_driver):
    d = describe(FakeCAI((8,), "<i4", ptr=0x7f0000000004, version=2))
    assert d.ptr == 0x7f0000000004 and d.dtype == ct.int32
    assert not aligned(d)                 # 4 bytes off a 16-byte boundary


@pytest.mark.parametrize("typestr, want", [
    ("|b1", ct.bool_), ("|u1", ct.uint8), ("|i1", ct.int8), ("<f2", ct.float16),
    ("<u8", ct.uint64),
])
def test_cai_typestr(no_driver, typestr, want):
    assert describe(FakeCAI((4,), typestr)).dtype == want


def test_cai_bfloat16_needs_the_librarys_own_dtype(no_driver):
    with pytest.raises(ct.TileTypeError, match=r"element type void16 \(typestr '<V2'\), "
                                               r"which tile kernels do not support"):
        describe(FakeCAI((4,), "<V2"))
    assert describe(FakeCAI((4,), "<V2", dtype=ml_dtypes.bfloat16)).dtype == ct.bfloat16


def test_cai_own_dtype_wins_over_typestr_of_the_same_size(no_driver):
    # A producer that exports bool as uint8 still means bool.
    assert describe(FakeCAI((4,), "|u1", dtype=np.bool_)).dtype == ct.bool_
    with pytest.raises(ct.TileTypeError, match=r"says its dtype is float32 \(4 bytes\) but "
                                               r"exports elements of 2 bytes "
                                               r"\(float16 \(typestr '<f2'\)\)"):
        describe(FakeCAI((4,), "<f2", dtype=np.float32))


def test_cai_rejections(no_driver):
    with pytest.raises(ct.TileTypeError, match="version 1; versions 2 and 3"):
        describe(FakeCAI((4,), "<f4", version=1))
    with pytest.raises(ct.TileTypeError, match="masked array"):
        describe(FakeCAI((4,), "<f4", mask=object()))
    with pytest.raises(ct.TileTypeError, match="big-endian"):
        describe(FakeCAI((4,), ">f4"))
    with pytest.raises(ct.TileTypeError, match="complex64"):
        describe(FakeCAI((4,), "<c8"))


def test_cai_device_of_a_cupy_array_comes_from_the_array():
    class Device:
        id = 3

    class CupyLike(FakeCAI):
        device = Device()

    CupyLike.__module__ = "cupy._core.core"
    assert describe(CupyLike((4,), "<f4")).device == ("cuda", 3)


# ---------------------------------------------------------------------------
# describe: DLPack (the capsule is read with ctypes)
# ---------------------------------------------------------------------------
class DLPackOnly:
    """Exports a NumPy array through DLPack only: no dtype attribute, no interface dict."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__(**kwargs)


@pytest.mark.parametrize("view", [lambda a: a, lambda a: a.T, lambda a: a[::-1, 1::2]])
def test_dlpack_matches_numpy(view):
    a = view(np.arange(24, dtype=np.int16).reshape(4, 6))
    d = describe(DLPackOnly(a))
    n = describe(a)
    assert (d.ptr, d.shape, d.strides, d.dtype, d.device) == \
        (n.ptr, n.shape, n.strides, ct.int16, ("cpu", 0))


def test_dlpack_bool_and_float_codes():
    assert describe(DLPackOnly(np.zeros(3, np.bool_))).dtype == ct.bool_
    assert describe(DLPackOnly(np.zeros(3, np.uint8))).dtype == ct.uint8
    assert describe(DLPackOnly(np.zeros((2, 2), np.float64))).dtype == ct.float64


def test_dlpack_refusals_are_reported():
    class Refuses:
        def __dlpack__(self):
            raise BufferError("read-only arrays cannot be exported")

    class NotACapsule:
        def __dlpack__(self):
            return 42

    with pytest.raises(ct.TileTypeError, match="refused to export itself through DLPack: "
                                               "read-only"):
        describe(Refuses())
    with pytest.raises(ct.TileTypeError, match="returned a int from __dlpack__"):
        describe(NotACapsule())


# ---------------------------------------------------------------------------
# aligned
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("ptr, shape, strides, dtype, want", [
    (0x1000, (4, 4), (4, 1), ct.float32, True),        # 16-byte rows
    (0x1004, (4, 4), (4, 1), ct.float32, False),       # base off by 4
    (0x1000, (3, 3), (3, 1), ct.float32, False),       # 12-byte rows
    (0x1000, (2, 8), (8, 1), ct.float16, True),
    (0x1000, (2, 8), (1, 2), ct.float16, False),       # transposed: last stride 2
    (0x1000, (8,), (2,), ct.float32, False),           # strided vector
    (0x1000, (8,), (1,), ct.int8, True),
    (0x1000, (5, 1), (3, 7), ct.float32, False),       # last dim exempt, rows 12 bytes
    (0x1000, (1, 5), (3, 1), ct.float32, True),        # a size-1 dim's stride never matters
    (0x1000, (4, 5, 1), (8, 1, 9), ct.float64, False),
    (0x1000, (4, 1, 2), (4, 99, 1), ct.float64, True),
    (0x1000, (6, 4), (0, 1), ct.float32, True),        # broadcast rows
    (0x1040, (4, 4), (-4, 1), ct.float32, True),       # reversed rows, -16 bytes
    (0x1000, (4,), (-1,), ct.float32, False),
    (0x1000, (), (), ct.float32, True),
    (0x1008, (), (), ct.float64, False),
])
def test_aligned_truth_table(ptr, shape, strides, dtype, want):
    assert aligned(info(shape, strides, dtype, ptr)) is want


# ---------------------------------------------------------------------------
# Packing
# ---------------------------------------------------------------------------
def half_bits(value, np_type) -> bytes:
    return np.array(value, np_type).view(np.uint16).tobytes()


@pytest.mark.parametrize("dtype, value, raw", [
    (ct.bool_, True, b"\x01"),
    (ct.bool_, np.False_, b"\x00"),
    (ct.int8, -1, b"\xff"),
    (ct.int16, -2, struct.pack("<h", -2)),
    (ct.int32, np.int32(-70000), struct.pack("<i", -70000)),
    (ct.int64, -(2**40), struct.pack("<q", -(2**40))),
    (ct.uint8, 255, b"\xff"),
    (ct.uint16, 65535, b"\xff\xff"),
    (ct.uint32, 2**32 - 1, b"\xff" * 4),
    (ct.uint64, 2**64 - 1, b"\xff" * 8),
    (ct.float16, 1.0, b"\x00\x3c"),
    (ct.float16, -2.5, half_bits(-2.5, np.float16)),
    (ct.bfloat16, 1.0, b"\x80\x3f"),
    (ct.bfloat16, -2.0, b"\x00\xc0"),
    (ct.bfloat16, 1 + 2**-8, b"\x80\x3f"),             # a tie rounds to even (down)
    (ct.bfloat16, 1 + 3 * 2**-8, b"\x82\x3f"),         # a tie rounds to even (up)
    (ct.float32, 3.25, struct.pack("<f", 3.25)),
    (ct.float32, 7, struct.pack("<f", 7.0)),
    (ct.float32, math.inf, struct.pack("<f", math.inf)),
    (ct.float64, -1e300, struct.pack("<d", -1e300)),
    (ct.float64, np.float32(0.1), struct.pack("<d", float(np.float32(0.1)))),
])
def test_pack_scalar_bytes(dtype, value, raw):
    assert bytes(pack_scalar(dtype, value)) == raw


@pytest.mark.parametrize("dtype, value, error, message", [
    (ct.int8, 128, ct.TileValueError, r"is 128, out of range for int8 \[-128, 127\]"),
    (ct.uint8, -1, ct.TileValueError, r"out of range for uint8 \[0, 255\]"),
    (ct.int32, 2**31, ct.TileValueError, "out of range for int32"),
    (ct.uint64, 2**64, ct.TileValueError, "out of range for uint64"),
    (ct.float16, 70000.0, ct.TileValueError, "overflows float16 to infinity"),
    (ct.bfloat16, 1e39, ct.TileValueError, "overflows bfloat16 to infinity"),
    (ct.float32, 1e39, ct.TileValueError, "overflows float32 to infinity"),
    (ct.float64, 10**400, ct.TileValueError, "too large for float64"),
    (ct.int32, True, ct.TileTypeError, "is a int32 parameter; got bool True"),
    (ct.int32, 1.5, ct.TileTypeError, "got the float 1.5"),
    (ct.bool_, 1, ct.TileTypeError, "is a bool parameter; got int 1"),
    (ct.float32, "1.0", ct.TileTypeError, "got str '1.0'"),
])
def test_pack_scalar_rejects(dtype, value, error, message):
    with pytest.raises(error, match=message):
        pack_scalar(dtype, value, "argument 'x' of kernel 'k'")


def test_pack_array_slots():
    slots = pack_array(info((3, 5), (1, -3), ptr=0xDEADBEEF00))
    assert [bytes(s) for s in slots] == [
        struct.pack("<Q", 0xDEADBEEF00), struct.pack("<i", 3), struct.pack("<i", 5),
        struct.pack("<q", 1), struct.pack("<q", -3)]


META = {
    "name": "k", "target": "sm_90a", "num_threads": 128, "shared_bytes": 0,
    "params": [
        {"kind": "array", "name": "a", "dtype": "float32", "ndim": 2, "aligned": True},
        {"kind": "scalar", "name": "n", "dtype": "int32"},
        {"kind": "array", "name": "m", "dtype": "bool", "ndim": 1, "aligned": False},
        {"kind": "scalar", "name": "alpha", "dtype": "f16"},
    ],
}


def test_bind_args_packs_every_slot_in_abi_order():
    a = info((4, 8), (8, 1), ptr=0x7000)
    m = info((9,), (3,), ct.bool_, ptr=0x7101)
    bound = bind_args(META, (a, 42, m, 0.5))
    assert bound.kernel == "k" and bound.device == 0
    assert bound.params.raw() == [
        struct.pack("<Q", 0x7000), struct.pack("<i", 4), struct.pack("<i", 8),
        struct.pack("<q", 8), struct.pack("<q", 1),
        struct.pack("<i", 42),
        struct.pack("<Q", 0x7101), struct.pack("<i", 9), struct.pack("<q", 3),
        half_bits(0.5, np.float16)]


def test_packed_params_address_is_a_void_pointer_array_over_the_slots():
    bound = bind_args(META, (info((4, 8), (8, 1)), -7, info((2,), (1,), ct.bool_), 2.0))
    params = bound.params
    pointers = (ctypes.c_void_p * len(params)).from_address(params.address)
    for pointer, raw in zip(pointers, params.raw()):
        assert ctypes.string_at(pointer, len(raw)) == raw
    assert bind_args({**META, "params": []}, ()).params.address == 0   # NULL: no params


@pytest.mark.parametrize("args, message", [
    ((info((4, 8), (8, 1)), 1), r"kernel 'k' takes 4 runtime arguments \(a, n, m, alpha\), "
                                r"got 2; Constant arguments are compiled in"),
    ((info((4, 8, 2), (16, 2, 1)), 1, info((2,), (1,), ct.bool_), 1.0),
     r"argument 'a' of kernel 'k' was specialized for 2-d arrays but got a 3-d array of "
     r"shape \(4, 8, 2\)"),
    ((info((4, 8), (8, 1), ct.float16), 1, info((2,), (1,), ct.bool_), 1.0),
     r"argument 'a' of kernel 'k' was specialized for float32 arrays but got float16$"),
    ((info((4, 8), (8, 1)), 1, info((2,), (1,), ct.uint8), 1.0),
     r"specialized for bool_ arrays but got uint8 \(bool and 8-bit integer arrays share a "
     r"layout but not a type"),
    ((info((4, 8), (8, 1)), 1, info((2,), (1,), ct.bool_, device=("cuda", 1)), 1.0),
     r"arguments of kernel 'k' are on different devices: 'a' on cuda:0, 'm' on cuda:1"),
    ((np.zeros((4, 8), np.float32), 1, info((2,), (1,), ct.bool_), 1.0),
     r"argument 'a' of kernel 'k' is in host memory \(ndarray\), but the GPU kernel needs "
     r"device memory: move it with .cuda\(\) \(torch\) or cupy.asarray\(\), or run the "
     r"kernel in the interpreter with TILEIR_INTERPRET=1"),
    ((info((4, 8), (8, 1), ptr=0x1008), 1, info((2,), (1,), ct.bool_), 1.0),
     r"argument 'a' of kernel 'k' was specialized for aligned arrays .* base 0x1008, strides "
     r"\(8, 1\) in 4-byte elements. tileir.launch picks the unaligned variant itself"),
    ((info((4, 6), (6, 1)), 1, info((2,), (1,), ct.bool_), 1.0), r"not: base 0x10000, strides "
                                                                  r"\(6, 1\)"),
    ((info((4, 2**31), (2**31, 1)), 1, info((2,), (1,), ct.bool_), 1.0),
     r"argument 'a' of kernel 'k' has 2147483648 elements along axis 1; kernels take 32-bit "
     r"dims \(at most 2147483647\)"),
    ((info((4, 8), (8, 1)), 2**31, info((2,), (1,), ct.bool_), 1.0),
     r"argument 'n' of kernel 'k' is 2147483648, out of range for int32"),
    ((info((4, 8), (8, 1)), 1, info((2,), (1,), ct.bool_), 1e6),
     r"argument 'alpha' of kernel 'k' is 1000000.0, which overflows float16"),
    ((info((4, 8), (8, 1)), 1, 3.0, 1.0), r"argument 'm' of kernel 'k' is a float, not an array"),
])
def test_bind_args_rejects_before_launching(args, message):
    with pytest.raises((ct.TileTypeError, ct.TileValueError), match=message):
        bind_args(META, args)


def test_bind_args_rejects_bad_metadata():
    with pytest.raises(ct.TileValueError, match="kernel metadata has no 'params'"):
        bind_args({"name": "k"}, ())
    bad_kind = {**META, "params": [{"kind": "tensor", "name": "t"}]}
    with pytest.raises(ct.TileValueError, match="kind 'tensor'; kinds are 'array' and 'scalar'"):
        bind_args(bad_kind, (1,))
    bad_dtype = {**META, "params": [{"kind": "scalar", "name": "s", "dtype": "half"}]}
    with pytest.raises(ct.TileValueError, match="gives parameter 's' the dtype 'half'; expected "
                                                "a tileir dtype name such as 'float16'"):
        bind_args(bad_dtype, (1.0,))


def test_bind_args_device_comes_from_arrays_with_a_known_device(no_driver):
    meta = {**META, "params": [{"kind": "array", "name": "e", "dtype": "float32", "ndim": 1},
                               {"kind": "array", "name": "f", "dtype": "float32", "ndim": 1}]}
    empty = FakeCAI((0,), "<f4", ptr=0)          # an empty array: no pointer, no device
    assert bind_args(meta, (empty, info((2,), (1,), device=("cuda", 2)))).device == 2
    assert bind_args(meta, (empty, empty)).device is None


@pytest.mark.parametrize("grid, message", [
    ((1, 1), r"must be 3 ints, got \(1, 1\)"),
    ((0, 1, 1), r"axis 0 must be in \[1, 2147483647\]"),
    ((1, 65536, 1), r"axis 1 must be in \[1, 65535\]"),
    ((1.0, 1, 1), "must be 3 ints"),
])
def test_grid_checks(grid, message):
    with pytest.raises(ct.TileValueError, match=message):
        launcher.check_grid("k", grid)


def test_block_comes_from_num_threads():
    assert launcher.block_of(META) == (128, 1, 1)
    with pytest.raises(ct.TileValueError, match="asks for 2048 threads per block"):
        launcher.block_of({**META, "num_threads": 2048})


def test_launch_checks_arguments_before_touching_the_driver(monkeypatch):
    def no_driver_calls(*args, **kwargs):
        raise AssertionError("the driver was called")

    monkeypatch.setattr(driver, "cuda", no_driver_calls)
    with pytest.raises(ct.TileValueError, match="is in host memory"):
        launcher.launch(b"\x7fELF", META, (1, 1, 1),
                        (np.zeros((4, 8), np.float32), 1, np.zeros(2, np.bool_), 1.0))
    with pytest.raises(ct.TileValueError, match="axis 0 must be"):
        launcher.launch(b"\x7fELF", META, (0, 1, 1),
                        (info((4, 8), (8, 1)), 1, info((2,), (1,), ct.bool_), 1.0))


@pytest.mark.skipif(_have_gpu(), reason="checks the failure without a driver")
def test_launch_without_a_driver_says_what_to_do():
    with pytest.raises(ct.TileError, match="TILEIR_INTERPRET=1"):
        launcher.launch(b"\x7fELF", META, (1, 1, 1),
                        (info((4, 8), (8, 1)), 1, info((2,), (1,), ct.bool_), 1.0))


# ---------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------
def test_stream_handles():
    from cuda.bindings import driver as cu

    class TorchLike:
        cuda_stream = 0xABC
        device = type("D", (), {"index": 0})()

    class Protocol:
        def __cuda_stream__(self):
            return (0, 0xBEEF)

    class CupyLike:
        ptr = 0x123
        device_id = 0

    CupyLike.__module__ = "cupy.cuda.stream"
    assert stream_handle(7, (), 0) == 7
    assert stream_handle(TorchLike(), (), 0) == 0xABC
    assert stream_handle(Protocol(), (), 0) == 0xBEEF
    assert stream_handle(CupyLike(), (), 0) == 0x123
    assert stream_handle(cu.CUstream(0x55), (), 0) == 0x55
    assert stream_handle(None, (info((2,), (1,)), 3), 0) == 0   # not torch or cupy: legacy
    with pytest.raises(ct.TileValueError, match="the stream belongs to cuda:0 but the arrays "
                                                "are on cuda:1"):
        stream_handle(TorchLike(), (), 1)
    with pytest.raises(ct.TileValueError, match="negative"):
        stream_handle(-1, (), 0)
    with pytest.raises(ct.TileTypeError, match="stream must be None, an int handle"):
        stream_handle("default", (), 0)
    with pytest.raises(ct.TileTypeError, match="got True"):
        stream_handle(True, (), 0)


# ---------------------------------------------------------------------------
# Targets and images
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("target, kind, cc, runs", [
    ("sm_80", "cubin", (8, 0), True),
    ("sm_80", "cubin", (8, 6), True),       # SASS runs on later minors of its major
    ("sm_86", "cubin", (8, 0), False),
    ("sm_80", "cubin", (9, 0), False),      # ... and never on another major
    ("sm_80", "ptx", (9, 0), True),         # PTX is JIT-compiled forward
    ("sm_90", "ptx", (8, 9), False),
    ("sm_90a", "cubin", (9, 0), True),
    ("sm_90a", "cubin", (10, 0), False),    # arch-specific: exactly 9.0
    ("sm_90a", "ptx", (10, 0), False),
    ("sm_100f", "cubin", (10, 3), True),    # family-specific: same major, later minor
    ("sm_100f", "ptx", (11, 0), False),
    ("sm_120", "fatbin", (9, 0), True),     # the driver picks from a fatbin
])
def test_binary_compatibility_rules(target, kind, cc, runs):
    assert driver.runs_on(target, kind, cc) is runs


def test_target_parsing_and_image_kinds():
    assert driver.parse_target("sm_90a") == (9, 0, "a")
    assert driver.parse_target("compute_100f") == (10, 0, "f")
    assert driver.parse_target("sm_121") == (12, 1, "")
    with pytest.raises(ct.TileUnsupportedFeatureError, match="'gfx90a' is not an NVIDIA"):
        driver.parse_target("gfx90a")
    assert driver.image_kind(b"\x7fELF\x02\x01") == "cubin"
    assert driver.image_kind(b"\x50\xed\x55\xba\x01\x00") == "fatbin"
    assert driver.image_kind(b"//\n.version 8.0\n") == "ptx"


def test_target_mismatch_is_reported_before_loading(monkeypatch):
    monkeypatch.setattr(driver, "compute_capability", lambda ordinal: (9, 0))
    monkeypatch.setattr(driver, "device_name", lambda ordinal: "NVIDIA H100")
    with pytest.raises(ct.TileUnsupportedFeatureError, match=(
            r"kernel 'k' was compiled to a cubin for sm_80, which cannot run on device 0 "
            r"\(NVIDIA H100, compute capability 9.0\); recompile it with target='sm_90a'")):
        driver.check_target("sm_80", b"\x7fELF", 0, "k")
    driver.check_target("sm_80", b".version 8.0", 0, "k")      # PTX: JIT-compiled


# ---------------------------------------------------------------------------
# The driver wrapper without a GPU
# ---------------------------------------------------------------------------
def test_importing_the_runtime_loads_no_gpu_library():
    code = ("import sys, tileir.runtime, tileir.cache\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('cuda', 'torch', 'cupy')]\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(_have_gpu(), reason="checks a machine without a GPU")
def test_has_gpu_is_false_here_and_does_not_raise():
    driver.has_gpu.cache_clear()
    assert driver.has_gpu() is False


@pytest.mark.parametrize("failure", [
    ImportError("No module named 'cuda'"),
    RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search'),
    ct.TileError("cuInit failed: CUDA_ERROR_NO_DEVICE"),
])
def test_has_gpu_turns_every_failure_into_false(monkeypatch, failure):
    def fails():
        raise failure

    monkeypatch.setattr(driver, "device_count", fails)
    driver.has_gpu.cache_clear()
    try:
        assert driver.has_gpu() is False
    finally:
        monkeypatch.undo()
        driver.has_gpu.cache_clear()


def test_cuda_errors_name_the_call_the_error_and_the_fix():
    from cuda.bindings import driver as cu
    with pytest.raises(driver.CudaError) as e:
        driver.check("cuModuleLoadData", (cu.CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU, None))
    assert e.value.name == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert "cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU (" in str(e.value)
    assert "recompile for this device's sm_XY target" in str(e.value)
    assert driver.check("cuDeviceGetCount", (cu.CUresult.CUDA_SUCCESS, 2)) == 2
    assert driver.check("cuCtxSetCurrent", (cu.CUresult.CUDA_SUCCESS,)) is None


# ===========================================================================
# GPU: hand-written PTX kernels that follow the kernel ABI, launched on torch tensors
# ===========================================================================
PTX_HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"


def ptx(body: str) -> bytes:
    return (PTX_HEADER + textwrap.dedent(body)).encode()


# y[i] = x[i] + alpha over two 1-d f32 arrays (ptr, i32 dim, i64 stride) and an f32 scalar.
ADD_PTX = ptx("""
    .visible .entry add_scalar(
        .param .u64 x_ptr, .param .u32 x_dim, .param .u64 x_stride,
        .param .u64 y_ptr, .param .u32 y_dim, .param .u64 y_stride,
        .param .f32 alpha)
    {
        .reg .pred %p<2>;
        .reg .b32 %r<8>;
        .reg .b64 %rd<12>;
        .reg .f32 %f<4>;
        ld.param.u64 %rd1, [x_ptr];
        ld.param.u64 %rd2, [x_stride];
        ld.param.u64 %rd3, [y_ptr];
        ld.param.u64 %rd4, [y_stride];
        ld.param.u32 %r1, [y_dim];
        ld.param.f32 %f1, [alpha];
        mov.u32 %r2, %ctaid.x;
        mov.u32 %r3, %ntid.x;
        mov.u32 %r4, %tid.x;
        mad.lo.s32 %r5, %r2, %r3, %r4;
        setp.ge.s32 %p1, %r5, %r1;
        @%p1 bra DONE;
        cvta.to.global.u64 %rd1, %rd1;
        cvta.to.global.u64 %rd3, %rd3;
        cvt.s64.s32 %rd5, %r5;
        mul.lo.s64 %rd6, %rd5, %rd2;
        shl.b64 %rd6, %rd6, 2;
        add.s64 %rd7, %rd1, %rd6;
        ld.global.f32 %f2, [%rd7];
        add.f32 %f3, %f2, %f1;
        mul.lo.s64 %rd8, %rd5, %rd4;
        shl.b64 %rd8, %rd8, 2;
        add.s64 %rd9, %rd3, %rd8;
        st.global.f32 [%rd9], %f3;
    DONE:
        ret;
    }
""")

ADD_META = {
    "name": "add_scalar", "target": "sm_80", "num_threads": 128, "shared_bytes": 0,
    "params": [{"kind": "array", "name": "x", "dtype": "float32", "ndim": 1, "aligned": False},
               {"kind": "array", "name": "y", "dtype": "float32", "ndim": 1, "aligned": False},
               {"kind": "scalar", "name": "alpha", "dtype": "float32"}],
}

# Writes what it received for a 2-d array and every scalar type into 64 output bytes,
# with the parameter spellings LLVM's NVPTX backend uses (i1 as .u8, f16/bf16 as .b8[2]).
ABI_PTX = ptx("""
    .visible .entry abi_probe(
        .param .u64 a_ptr, .param .u32 a_d0, .param .u32 a_d1,
        .param .u64 a_s0, .param .u64 a_s1,
        .param .u64 out_ptr, .param .u32 out_d0, .param .u64 out_s0,
        .param .u8 p_b, .param .u8 p_i8, .param .u16 p_i16, .param .u32 p_i32,
        .param .u64 p_i64, .param .align 2 .b8 p_f16[2], .param .align 2 .b8 p_bf16[2],
        .param .f32 p_f32, .param .f64 p_f64)
    {
        .reg .pred %p<2>;
        .reg .b16 %rs<6>;
        .reg .b32 %r<6>;
        .reg .b64 %rd<6>;
        .reg .f32 %f<2>;
        .reg .f64 %fd<2>;
        mov.u32 %r0, %tid.x;
        setp.ne.u32 %p0, %r0, 0;
        @%p0 bra DONE;
        ld.param.u64 %rd0, [out_ptr];
        cvta.to.global.u64 %rd0, %rd0;
        ld.param.u64 %rd1, [a_ptr];
        st.global.u64 [%rd0+0], %rd1;
        ld.param.u32 %r1, [a_d0];
        st.global.u32 [%rd0+8], %r1;
        ld.param.u32 %r2, [a_d1];
        st.global.u32 [%rd0+12], %r2;
        ld.param.u64 %rd2, [a_s0];
        st.global.u64 [%rd0+16], %rd2;
        ld.param.u64 %rd3, [a_s1];
        st.global.u64 [%rd0+24], %rd3;
        ld.param.u8 %rs0, [p_b];
        st.global.u8 [%rd0+32], %rs0;
        ld.param.u8 %rs1, [p_i8];
        st.global.u8 [%rd0+33], %rs1;
        ld.param.u16 %rs2, [p_i16];
        st.global.u16 [%rd0+34], %rs2;
        ld.param.u32 %r3, [p_i32];
        st.global.u32 [%rd0+36], %r3;
        ld.param.u64 %rd4, [p_i64];
        st.global.u64 [%rd0+40], %rd4;
        ld.param.b16 %rs3, [p_f16];
        st.global.b16 [%rd0+48], %rs3;
        ld.param.b16 %rs4, [p_bf16];
        st.global.b16 [%rd0+50], %rs4;
        ld.param.f32 %f0, [p_f32];
        st.global.f32 [%rd0+52], %f0;
        ld.param.f64 %fd0, [p_f64];
        st.global.f64 [%rd0+56], %fd0;
    DONE:
        ret;
    }
""")

ABI_META = {
    "name": "abi_probe", "target": "sm_80", "num_threads": 32, "shared_bytes": 0,
    "params": [{"kind": "array", "name": "a", "dtype": "float32", "ndim": 2, "aligned": False},
               {"kind": "array", "name": "out", "dtype": "uint8", "ndim": 1, "aligned": True}]
    + [{"kind": "scalar", "name": n, "dtype": n} for n in
       ("bool", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
        "float64")],
}

def smem_probe(name: str, shared_bytes: int, static_byte: bool) -> tuple[bytes, dict]:
    """(PTX, meta) of a kernel that stores 42 at the last word of its `shared_bytes` of
    dynamic shared memory, reads it back and writes it out; with `static_byte` the 42
    is 40 there plus 2 kept in one byte of static shared memory (as the NVPTX backend
    declares the dynamic buffer's symbol)."""
    static = ".shared .align 16 .b8 one[1];" if static_byte else ""
    value, via_static = (40, """
        st.shared.u8 [one], 2;
        ld.shared.u8 %r3, [one];
        add.u32 %r2, %r2, %r3;""") if static_byte else (42, "")
    text = ptx(f"""
    {static}
    .extern .shared .align 16 .b8 smem[];
    .visible .entry {name}(.param .u64 out_ptr, .param .u32 out_d0, .param .u64 out_s0)
    {{
        .reg .pred %p<2>;
        .reg .b32 %r<4>;
        .reg .b64 %rd<4>;
        mov.u32 %r0, %tid.x;
        setp.ne.u32 %p0, %r0, 0;
        @%p0 bra DONE;
        mov.u64 %rd0, smem;
        add.s64 %rd1, %rd0, {shared_bytes - 4};
        mov.u32 %r1, {value};
        st.shared.u32 [%rd1], %r1;
        ld.shared.u32 %r2, [%rd1];{via_static}
        ld.param.u64 %rd2, [out_ptr];
        cvta.to.global.u64 %rd2, %rd2;
        st.global.u32 [%rd2], %r2;
    DONE:
        ret;
    }}
""")
    meta = {"name": name, "target": "sm_80", "num_threads": 32, "shared_bytes": shared_bytes,
            "params": [{"kind": "array", "name": "out", "dtype": "int32", "ndim": 1,
                        "aligned": True}]}
    return text, meta


# 96 KiB of dynamic shared memory: above the 48 KiB default, so the runtime must opt in.
SMEM_PTX, SMEM_META = smem_probe("smem_probe", 96 * 1024, static_byte=False)
# Exactly 48 KiB beside one static byte: the two pass the default limit (opt in too).
SMEM48_PTX, SMEM48_META = smem_probe("smem48_probe", 48 * 1024, static_byte=True)


class _FakeFunctionDriver:
    """What reserve_shared_memory asks of the driver, recorded."""

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = "max_dynamic"

    def __init__(self):
        self.set = []

    def cuFuncSetAttribute(self, function, attr, value):
        self.set.append((function, attr, value))
        return (0,)


@pytest.mark.parametrize("nbytes,static,opt_in", [
    (0, 0, False), (1024, 16, False), (48 * 1024 - 1, 1, False), (48 * 1024, 0, False),
    (48 * 1024, 1, True), (48 * 1024 - 16, 32, True), (64 * 1024, 1, True)])
def test_shared_memory_opt_in_counts_the_static_part(monkeypatch, nbytes, static, opt_in):
    """A block's static and dynamic shared memory together past 48 KiB need the
    function's opt-in (fuzz_gemm --gpu, 2026-11-26: GEMMs asking for exactly 48 KiB
    besides the dynamic buffer symbol's static byte failed to launch)."""
    fake = _FakeFunctionDriver()
    monkeypatch.setattr(driver, "cuda", lambda: fake)
    monkeypatch.setattr(driver, "check", lambda call, result, hint=None: None)
    monkeypatch.setattr(driver, "function_attribute", lambda f, name: {
        "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": static}[name])
    monkeypatch.setattr(driver, "max_shared_bytes", lambda ordinal: 227 * 1024)
    monkeypatch.setattr(driver, "_shared_optin", {})
    driver.reserve_shared_memory(7, nbytes, 0, "k")
    assert fake.set == ([(7, "max_dynamic", nbytes)] if opt_in else [])
    driver.reserve_shared_memory(7, nbytes, 0, "k")          # once per function
    assert len(fake.set) == int(opt_in)


@pytest.mark.gpu
def test_gpu_has_gpu():
    driver.has_gpu.cache_clear()
    assert driver.has_gpu() is True
    assert driver.compute_capability(0) >= (8, 0)


@pytest.mark.gpu
def test_gpu_add_on_strided_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    n = 1000                                           # not a multiple of the block
    base = torch.from_numpy(rng.standard_normal(3 * n).astype(np.float32)).cuda()
    x = base[::3]                                      # stride 3
    y = torch.full((n,), float("nan"), device="cuda")  # poisoned
    launcher.launch(ADD_PTX, ADD_META, (math.ceil(n / 128), 1, 1), (x, y, 2.5))
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x + 2.5)


@pytest.mark.gpu
def test_gpu_kernel_receives_exactly_the_packed_abi():
    torch = pytest.importorskip("torch")
    a = torch.empty((3, 5), device="cuda").t()         # shape (5, 3), strides (1, 5)
    out = torch.zeros(64, dtype=torch.uint8, device="cuda")
    scalars = (True, -5, -300, -70000, -(2**40), 1.5, -2.0, 3.25, -1e300)
    launcher.launch(ABI_PTX, ABI_META, (1, 1, 1), (a, out, *scalars))
    torch.cuda.synchronize()
    want = struct.pack("<QiiqqBbhiq", a.data_ptr(), 5, 3, 1, 5, 1, -5, -300, -70000, -(2**40))
    want += b"\x00\x3e" + b"\x00\xc0" + struct.pack("<fd", 3.25, -1e300)
    assert bytes(out.cpu().numpy()) == want


@pytest.mark.gpu
@pytest.mark.parametrize("probe", ["above_48k", "exactly_48k_beside_a_static_byte"])
def test_gpu_dynamic_shared_memory_past_the_default_limit(probe):
    torch = pytest.importorskip("torch")
    text, meta = (SMEM_PTX, SMEM_META) if probe == "above_48k" else (SMEM48_PTX, SMEM48_META)
    out = torch.zeros(4, dtype=torch.int32, device="cuda")
    launcher.launch(text, meta, (1, 1, 1), (out,))
    torch.cuda.synchronize()
    assert out[0].item() == 42


@pytest.mark.gpu
def test_gpu_stream_rule_follows_torch():
    torch = pytest.importorskip("torch")
    x = torch.ones(256, device="cuda")
    y = torch.zeros(256, device="cuda")
    side = torch.cuda.Stream()
    assert stream_handle(None, (x, y, 1.0), 0) == torch.cuda.current_stream().cuda_stream
    with torch.cuda.stream(side):
        assert stream_handle(None, (x, y, 1.0), 0) == side.cuda_stream
        side.wait_stream(torch.cuda.default_stream())
        launcher.launch(ADD_PTX, ADD_META, (2, 1, 1), (x, y, 1.0))
    side.synchronize()
    assert torch.equal(y, torch.full_like(y, 2.0))


@pytest.mark.gpu
def test_gpu_explicit_streams():
    torch = pytest.importorskip("torch")
    from cuda.bindings import driver as cu
    x = torch.arange(300, dtype=torch.float32, device="cuda")
    side = torch.cuda.Stream()
    for i, stream in enumerate([side, side.cuda_stream, cu.CUstream(side.cuda_stream)]):
        y = torch.zeros(300, device="cuda")
        torch.cuda.synchronize()
        launcher.launch(ADD_PTX, ADD_META, (3, 1, 1), (x, y, float(i)), stream=stream)
        side.synchronize()
        assert torch.equal(y, x + i), type(stream)


@pytest.mark.gpu
def test_gpu_cupy_arrays_and_streams():
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(300, dtype=cupy.float32)
    d = describe(x[::2])
    assert d.device == ("cuda", 0) and d.strides == (2,) and d.ptr == x.data.ptr
    y = cupy.zeros(300, dtype=cupy.float32)
    cupy.cuda.Device(0).synchronize()
    with cupy.cuda.Stream(non_blocking=True) as stream:
        assert stream_handle(None, (x, y, 1.0), 0) == stream.ptr      # cupy's current stream
        launcher.launch(ADD_PTX, ADD_META, (3, 1, 1), (x, y, 1.0))
    stream.synchronize()
    assert bool((y == x + 1).all())
    other = cupy.cuda.Stream(non_blocking=True)
    launcher.launch(ADD_PTX, ADD_META, (3, 1, 1), (x, y, 5.0), stream=other)
    other.synchronize()
    assert bool((y == x + 5).all())


@pytest.mark.gpu
def test_gpu_describe_torch_cai_and_dlpack_agree():
    torch = pytest.importorskip("torch")
    t = torch.zeros((6, 8), dtype=torch.bfloat16, device="cuda")[1:, ::2]
    d = describe(t)
    assert d.device == ("cuda", 0) and d.dtype == ct.bfloat16
    assert d.ptr == t.data_ptr() and d.strides == (8, 2) and d.shape == (5, 4)
    via_dlpack = describe(DLPackOnly(t))
    assert (via_dlpack.ptr, via_dlpack.strides, via_dlpack.dtype, via_dlpack.device) == \
        (d.ptr, d.strides, ct.bfloat16, ("cuda", 0))

    class CAIOnly:                       # not cupy: the device comes from the driver
        def __init__(self, t):
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    f = torch.zeros((4, 4), device="cuda").t()
    via_cai = describe(CAIOnly(f))
    assert (via_cai.ptr, via_cai.strides, via_cai.device) == (f.data_ptr(), (1, 4), ("cuda", 0))
    assert describe(torch.zeros(3, dtype=torch.bool)).device == ("cpu", 0)


@pytest.mark.gpu
def test_gpu_wrong_target_is_refused_before_loading():
    torch = pytest.importorskip("torch")
    x = torch.zeros(4, device="cuda")
    cc = driver.compute_capability(0)
    other = "sm_100a" if cc != (10, 0) else "sm_90a"
    with pytest.raises(ct.TileUnsupportedFeatureError, match=f"for {other}, which cannot run"):
        launcher.launch(ADD_PTX, {**ADD_META, "target": other}, (1, 1, 1), (x, x, 1.0))


@pytest.mark.gpu
@pytest.mark.skipif(bool(os.environ.get("TILEIR_SANITIZER")),
                    reason="traps on purpose: under compute-sanitizer the trap is an error")
def test_gpu_sync_launch_reports_a_trap_at_its_launch():
    # A trapping kernel ruins its context: run it in a process of its own.
    trap = PTX_HEADER + ".visible .entry trap_now()\n{\n    trap;\n    ret;\n}\n"
    code = textwrap.dedent(f"""
        import os
        os.environ["TILEIR_SYNC_LAUNCH"] = "1"
        from tileir.runtime import CudaError, driver, launcher
        driver.has_gpu()     # cuda.bindings set up before torch (conftest.py says why)
        import torch
        torch.zeros(1, device="cuda")
        meta = {{"name": "trap_now", "target": "sm_80", "num_threads": 32,
                 "shared_bytes": 0, "params": []}}
        try:
            launcher.launch({trap.encode()!r}, meta, (1, 1, 1), ())
        except CudaError as e:
            print("raised:", e)
        else:
            print("no error")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "cuStreamSynchronize after kernel 'trap_now' failed: CUDA_ERROR_LAUNCH_FAILED" \
        in out.stdout


@pytest.mark.gpu
@pytest.mark.skipif(bool(os.environ.get("TILEIR_SANITIZER")),
                    reason="fails a PTX load on purpose: the tool reports the API error")
def test_gpu_ptx_jit_errors_show_the_drivers_log():
    torch = pytest.importorskip("torch")
    broken = ptx("""
        .visible .entry broken(.param .u64 out_ptr, .param .u32 out_d0, .param .u64 out_s0)
        {
            not_an_instruction %r99;
            ret;
        }
    """)
    meta = {**SMEM_META, "name": "broken", "shared_bytes": 0}
    with pytest.raises(driver.CudaError, match=r"(?s)cuModuleLoadDataEx \(PTX JIT\) failed: "
                                               r"CUDA_ERROR_INVALID_PTX .*the JIT log says:\n"
                                               r".*not_an_instruction"):
        launcher.launch(broken, meta, (1, 1, 1), (torch.zeros(4, dtype=torch.int32,
                                                              device="cuda"),))


# ---------------------------------------------------------------------------
# TILEIR_LAUNCH_TARGET: another target's code on the GPU at hand
# ---------------------------------------------------------------------------
def test_launch_target_picks_the_code_a_launch_runs(monkeypatch):
    import importlib
    from types import SimpleNamespace
    kernel_module = importlib.import_module("tileir.kernel")   # the module, not ct.kernel
    cc = {"now": (9, 0)}
    monkeypatch.setattr(driver, "current_device", lambda: 0)
    monkeypatch.setattr(driver, "compute_capability", lambda ordinal: cc["now"])
    monkeypatch.delenv("TILEIR_LAUNCH_TARGET", raising=False)
    assert kernel_module.device_target([]) == "sm_90a"
    monkeypatch.setenv("TILEIR_LAUNCH_TARGET", "sm_80")
    assert kernel_module.device_target([]) == "sm_80"
    ampere = SimpleNamespace(target="sm_80", cubin=b"\x7fELF...",
                             artifacts={"ptx": ".version 8.0\n.target sm_80\n"})
    hopper = SimpleNamespace(target="sm_90a", cubin=b"\x7fELF hopper", artifacts={})
    # sm_80 machine code cannot run on Hopper: its PTX goes to the driver's JIT
    assert kernel_module.launch_image(ampere, []) == b".version 8.0\n.target sm_80\n"
    assert kernel_module.launch_image(hopper, []) == b"\x7fELF hopper"
    cc["now"] = (8, 0)
    assert kernel_module.launch_image(ampere, []) == b"\x7fELF..."
    monkeypatch.setenv("TILEIR_LAUNCH_TARGET", "sm_90a")
    with pytest.raises(ct.TileUnsupportedFeatureError, match=r"sm_90a: its code cannot run on "
                       r"GPU 0 \(compute capability 8\.0\)"):
        kernel_module.device_target([])
    monkeypatch.setenv("TILEIR_LAUNCH_TARGET", "sm_75")
    with pytest.raises(ct.TileValueError, match="tileir targets sm_80 and sm_90a"):
        kernel_module.device_target([])


@pytest.mark.gpu
def test_gpu_launch_target_sm80_runs_ampere_code_on_the_gpu(monkeypatch):
    """The sm_80 path on a Hopper GPU: compute_80 PTX through the driver's JIT."""
    torch = pytest.importorskip("torch")
    from tileir.examples.vector_add import vector_add
    monkeypatch.setenv("TILEIR_LAUNCH_TARGET", "sm_80")
    k = ct.kernel(vector_add.fn)            # a fresh kernel: no fast path remembered
    n = 5000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    ct.launch(None, (ct.cdiv(n, 1024),), k, (a, b, c, 1024))
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
