"""The launch fast path (runtime/dispatch.py) without a GPU: the key, the plan's
parameter buffer as the driver would read it, and when the fast path declines.  The
driver's hot calls are replaced by recorders: a Python one for cuda.bindings'
cuLaunchKernel, a ctypes callback for the address the C fast path calls.

Every test runs twice, `fast_path` "python" (the generated code) and "c" (the
extension, _fastlaunch.c): the two must behave the same.  The C one calls back into
the Python plan for what it does not handle, so a refused launch is tried once more
on that path (`attempts`)."""

import ctypes
import shutil
import struct

import pytest

from tileir.runtime import dispatch, driver

NATIVE = dispatch._native


@pytest.fixture(params=["python", "c"])
def fast_path(request, monkeypatch):
    if request.param == "c":
        if NATIVE is None:
            pytest.skip("the C fast path is not built here (no compiler at install time)")
    else:
        monkeypatch.setattr(dispatch, "_native", None)
    return request.param


def launch_of(plan):
    """The launch a dispatcher makes through `plan`: its C half's, else its own."""
    return plan.native.launch if plan.native is not None else plan.launch


def attempts(fast_path, n):
    """How many driver calls `n` failing launches of the Python path take on `fast_path`."""
    return n + (fast_path == "c")


def test_the_c_fast_path_is_built_where_a_compiler_is():
    if shutil.which("cc") or shutil.which("gcc"):
        assert NATIVE is not None, "setup.py should have built tileir.runtime._fastlaunch"


class Tensor:
    """Enough of a CUDA torch tensor for the dispatcher (its module says torch)."""

    __module__ = "torch"
    is_cuda = True

    def __init__(self, ptr, shape, strides, dtype="bf16", device=0):
        self.ptr, self.shape, self.strides = ptr, tuple(shape), tuple(strides)
        self.dtype, self.device = dtype, device

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self.strides

    def get_device(self):
        return self.device


def test_kinds_name_each_argument_or_decline():
    t = Tensor(256, (4,), (1,))
    consts = (False, False, False, False, True)
    assert dispatch.arg_kinds((t, 3, 2.0, True, 64), consts) == "TIFBC"
    assert dispatch.arg_kinds((t, 3), (False,)) is None                   # arity differs
    assert dispatch.arg_kinds((3, 2.0), (False, False)) is None           # no tensor
    import numpy as np
    assert dispatch.arg_kinds((t, np.float32(1)), (False, False)) is None  # NumPy scalar
    cpu = Tensor(256, (4,), (1,))
    cpu.is_cuda = False
    assert dispatch.arg_kinds((cpu,), (False,)) is None


def test_key_settles_the_specialization(fast_path):
    d = dispatch.Dispatcher("k", "TIFBC")
    assert d.native == (fast_path == "c")
    t = Tensor(4096, (8, 16), (16, 1))
    key = d.key_of((2,), (t, 5, 1.0, False, 64))
    # pointers enter only through their alignment; shapes and strides exactly
    assert d.key_of((2,), (Tensor(8192, (8, 16), (16, 1)), 7, -3.5, True, 64)) == key
    for other in [((3,), (t, 5, 1.0, False, 64)),                       # grid
                  ((2,), (Tensor(4098, (8, 16), (16, 1)), 5, 1.0, False, 64)),   # misaligned
                  ((2,), (Tensor(4096, (8, 17), (17, 1)), 5, 1.0, False, 64)),   # shape
                  ((2,), (Tensor(4096, (8, 16), (1, 8)), 5, 1.0, False, 64)),    # strides
                  ((2,), (Tensor(4096, (8, 16), (16, 1), dtype="f16"), 5, 1.0, False, 64)),
                  ((2,), (Tensor(4096, (8, 16), (16, 1), device=1), 5, 1.0, False, 64)),
                  ((2,), (t, 2**31, 1.0, False, 64)),                   # int64 range
                  ((2,), (t, -2**31 - 1, 1.0, False, 64)),
                  ((2,), (t, 5, 1.0, False, 128)),                      # constant value
                  ((2,), (t, 5, 1.0, False, True))]:                    # constant type
        assert d.key_of(*other) != key, other
    assert d.key_of((2,), (t, 2**31 - 1, 1.0, False, 64)) == key
    assert d.key_of((2,), (t, -2**31, 1.0, False, 64)) == key


def test_source_is_readable_python():
    src = dispatch.dispatch_source("TFC")
    assert "p0 = a0.data_ptr()" in src
    assert "plans[(grid, a0.dtype, a0.get_device(), a0.shape, a0.stride(), p0 & 15, " \
           "a1.__class__, typed_key(a2),)]" in src
    assert "return plan.launch(stream, args, (p0, a1, ))" in src
    compile(dispatch.dispatch_source("T"), "<test>", "exec")


PRIMARY = 0xC0C0        # the device's primary context in the fake driver


class Driver:
    """Records cuLaunchKernel calls with the parameter bytes they point at; `results`
    are the codes the next calls return (then 0)."""

    def __init__(self):
        self.launches = []
        self.results = []
        pointer, uint = ctypes.c_void_p, ctypes.c_uint
        signature = ctypes.CFUNCTYPE(ctypes.c_int, pointer, *[uint] * 7, pointer, pointer,
                                     pointer)
        self.c_launch = signature(lambda f, gx, gy, gz, bx, by, bz, shared, stream, params,
                                  extra: self.launch(f or 0, gx, gy, gz, bx, by, bz, shared,
                                                     stream or 0, params, extra, "c")[0])
        self.c_address = ctypes.cast(self.c_launch, ctypes.c_void_p).value
        # the thread's current context, as the C half asks for it and sets it
        self.context, self.switches = PRIMARY, []

        def get(out):
            out[0] = self.context or None
            return 0

        def set_(ctx):
            self.switches.append(ctx or 0)
            self.context = ctx or 0
            return 0

        self.c_get = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))(get)
        self.c_set = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(set_)
        self.ctx_addresses = tuple(ctypes.cast(f, ctypes.c_void_p).value
                                   for f in (self.c_get, self.c_set))

    def launch(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra,
               via="python"):
        self.launches.append({"function": function, "grid": (gx, gy, gz),
                              "block": (bx, by, bz), "shared": shared, "stream": stream,
                              "params": params, "via": via})
        return (self.results.pop(0) if self.results else 0,)

    def slot_bytes(self, n, sizes):
        ptrs = ctypes.cast(self.launches[-1]["params"], ctypes.POINTER(ctypes.c_void_p))
        return [ctypes.string_at(ptrs[i], sizes[i]) for i in range(n)], \
            [ptrs[i] for i in range(n)]


@pytest.fixture
def fake_driver(monkeypatch):
    drv = Driver()
    monkeypatch.setattr(driver, "launch_entry", lambda: (drv.launch, int, int, 0))
    monkeypatch.setattr(driver, "launch_address", lambda: drv.c_address)
    monkeypatch.setattr(driver, "context_addresses", lambda: drv.ctx_addresses)
    monkeypatch.setattr(driver, "primary_handle", lambda ordinal: PRIMARY)
    return drv


def plan_for(slots, dynamic, *, float_values=(), maps=(), streams=None):
    return dispatch.LaunchPlan(
        name="k", function=0xF00, device=0, grid=(4, 1, 1),
        block=(128, 1, 1), shared=1024, slots=slots, dynamic=dynamic,
        float_values=float_values, maps=maps,
        current_stream=lambda device: 77,
        stream_of=streams or (lambda stream, args: 99))


ARRAY_AND_SCALARS = [ctypes.c_uint64(0x1000), ctypes.c_int32(8), ctypes.c_int32(16),
                     ctypes.c_int64(16), ctypes.c_int64(1), ctypes.c_float(1.0),
                     ctypes.c_int32(3), ctypes.c_uint8(0)]
SIZES = [8, 4, 4, 8, 8, 4, 4, 1]


def test_plan_writes_pointers_and_scalars_and_keeps_the_rest(fast_path, fake_driver):
    plan = plan_for(ARRAY_AND_SCALARS, dynamic=[0, 5, 6, 7], float_values=[1])
    launch = launch_of(plan)
    assert launch(None, (), (0x2000, -2.5, -7, True))
    got, addresses = fake_driver.slot_bytes(8, SIZES)
    assert got == [struct.pack("<Q", 0x2000), struct.pack("<i", 8), struct.pack("<i", 16),
                   struct.pack("<q", 16), struct.pack("<q", 1), struct.pack("<f", -2.5),
                   struct.pack("<i", -7), b"\x01"]
    assert all(a % min(s, 8) == 0 for a, s in zip(addresses, SIZES))      # natural alignment
    call = fake_driver.launches[-1]
    assert (call["function"], call["grid"], call["block"], call["shared"], call["stream"]) \
        == (0xF00, (4, 1, 1), (128, 1, 1), 1024, 77)
    assert launch(5, (), (0x3000, 0.0, 2**31 - 1, False))             # an int handle
    got, _ = fake_driver.slot_bytes(8, SIZES)
    assert got[0] == struct.pack("<Q", 0x3000) and got[6] == struct.pack("<i", 2**31 - 1)
    assert fake_driver.launches[-1]["stream"] == 5
    launch(object(), (), (0x3000, 0.0, 1, False))                     # other streams
    assert fake_driver.launches[-1]["stream"] == 99


@pytest.mark.parametrize("values", [(0x2000, 1e39, 1, False),          # overflows f32
                                    (0x2000, 1.0, 2**31, False),        # not an int32
                                    (0x2000, 1.0, 1.5, False),          # not an int
                                    (-1, 1.0, 1, False)])               # not a pointer
def test_plan_declines_values_that_do_not_fit(fast_path, fake_driver, values):
    plan = plan_for(ARRAY_AND_SCALARS, dynamic=[0, 5, 6, 7], float_values=[1])
    launch = launch_of(plan)
    assert not launch(None, (), values)
    assert not fake_driver.launches
    assert launch(None, (), (0x2000, float("inf"), 1, False))       # inf is a value


def test_plan_tensor_maps_are_encoded_once_per_pointer(fast_path, fake_driver):
    from tileir.runtime.tensor_maps import TensorMap
    encoded = []

    def encode(args):
        encoded.append(args[0])
        return bytes([len(encoded)]) * 128

    slots = [ctypes.c_uint64(0), ctypes.c_int32(4), ctypes.c_int64(1), TensorMap()]
    plan = plan_for(slots, dynamic=[0], maps=[(0, 3, encode)])
    for ptr in (0x100, 0x200, 0x100):
        assert launch_of(plan)(None, (ptr,), (ptr,))
    assert encoded == [0x100, 0x200]
    got, addresses = fake_driver.slot_bytes(4, [8, 4, 8, 128])
    assert got[3] == b"\x01" * 128 and addresses[3] % 64 == 0


@pytest.fixture
def entered(monkeypatch):
    """The ordinals whose context `driver.device_context` was entered for, in order."""
    import contextlib
    ordinals = []

    @contextlib.contextmanager
    def device_context(ordinal):
        ordinals.append(ordinal)
        yield

    monkeypatch.setattr(driver, "device_context", device_context)
    return ordinals


@pytest.mark.parametrize("refusal", [201, 400])   # INVALID_CONTEXT, INVALID_HANDLE
def test_plan_retries_in_the_devices_context_when_the_driver_refuses(fast_path, fake_driver,
                                                                      entered, refusal):
    plan = plan_for(ARRAY_AND_SCALARS, dynamic=[0, 5, 6, 7], float_values=[1])
    launch = launch_of(plan)
    launch(None, (), (0x2000, 1.0, 1, False))
    assert entered == []
    fake_driver.results = [refusal] * attempts(fast_path, 1)   # no context, or a foreign one
    assert launch(None, (), (0x2000, 1.0, 1, False))
    assert entered == [0] and len(fake_driver.launches) == 2 + attempts(fast_path, 1)


def test_programmatic_plans_launch_through_their_config(fake_driver, monkeypatch, entered):
    """A programmatic plan's Python launch calls cuLaunchKernelEx with a config made once
    per buffer, only its stream set per launch; a refusal retries in the device's
    context, and an error names the call."""
    import types
    calls, made, results = [], [], []

    def make_config(grid, block, shared):
        made.append((grid, block, shared))
        return types.SimpleNamespace(hStream=None)

    def launch_ex(config, function, params, extra):
        calls.append((config, config.hStream, function, params))
        return (results.pop(0) if results else 0,)

    monkeypatch.setattr(driver, "programmatic_entry", lambda: (launch_ex, make_config))
    monkeypatch.setattr(driver, "error", lambda call, err: driver.CudaError(call, f"E{err}", ""))
    plan = dispatch.LaunchPlan(
        name="k", function=0xF00, device=0, grid=(4, 1, 1), block=(128, 1, 1), shared=64,
        slots=ARRAY_AND_SCALARS, dynamic=[0, 5, 6, 7], float_values=[1], maps=(),
        current_stream=lambda device: 77, stream_of=lambda stream, args: 99,
        programmatic=True, native=False)
    assert made == [((4, 1, 1), (128, 1, 1), 64)] * 2          # the owner's and the others'
    assert plan.launch(None, (), (0x2000, 1.0, 1, False))
    assert plan.launch(5, (), (0x2000, 1.0, 1, False))
    (c1, s1, f1, p1), (c2, s2, _, _) = calls
    assert c1 is c2 and (s1, s2, f1) == (77, 5, 0xF00) and p1 == plan.own.address
    assert not fake_driver.launches                            # never cuLaunchKernel
    results[:] = [201]                                         # no context current
    assert plan.launch(None, (), (0x2000, 1.0, 1, False))
    assert entered == [0] and len(calls) == 4
    results[:] = [1, 1]
    with pytest.raises(driver.CudaError, match=r"cuLaunchKernelEx\('k'.*programmatic"):
        plan.launch(None, (), (0x2000, 1.0, 1, False))


def test_plan_reports_driver_errors_with_the_kernel(fast_path, fake_driver, monkeypatch):
    monkeypatch.setattr(driver, "error", lambda call, err: driver.CudaError(
        call, f"CUDA_ERROR_{err}", "refused"))
    plan = plan_for(ARRAY_AND_SCALARS, dynamic=[0, 5, 6, 7], float_values=[1])
    launch = launch_of(plan)
    fake_driver.results = [1] * attempts(fast_path, 1)
    with pytest.raises(driver.CudaError, match=r"cuLaunchKernel\('k', grid=\(4, 1, 1\).*"
                                               r"CUDA_ERROR_1"):
        launch(None, (), (0x2000, 1.0, 1, False))
    import contextlib
    monkeypatch.setattr(driver, "device_context", lambda ordinal: contextlib.nullcontext())
    fake_driver.results = [201] * attempts(fast_path, 2)   # refused in the device's context too
    with pytest.raises(driver.CudaError, match="CUDA_ERROR_201"):
        launch(None, (), (0x2000, 1.0, 1, False))


def test_other_threads_write_a_buffer_of_their_own(fast_path, fake_driver, monkeypatch):
    import contextlib
    import threading
    entered = []

    @contextlib.contextmanager
    def device_context(ordinal):
        entered.append(threading.get_ident())
        yield

    monkeypatch.setattr(driver, "device_context", device_context)
    plan = plan_for(ARRAY_AND_SCALARS, dynamic=[0, 5, 6, 7], float_values=[1])
    launch = launch_of(plan)
    launch(None, (), (0x2000, 1.0, 1, False))
    mine = fake_driver.launches[-1]["params"]
    t = threading.Thread(target=launch, args=(None, (), (0x5000, 2.0, 2, True)))
    t.start()
    t.join()
    theirs = fake_driver.launches[-1]["params"]
    assert theirs != mine
    assert entered == [t.ident]        # they make the device's context current first
    got, _ = fake_driver.slot_bytes(8, SIZES)
    assert got[0] == struct.pack("<Q", 0x5000) and got[1:5] == [
        struct.pack("<i", 8), struct.pack("<i", 16), struct.pack("<q", 16), struct.pack("<q", 1)]


def test_dispatcher_launches_known_signatures_and_declines_the_rest(fast_path, fake_driver,
                                                                    monkeypatch):
    d = dispatch.Dispatcher("k", "TFC")
    t = Tensor(0x4000, (8,), (1,))
    slots = [ctypes.c_uint64(0x4000), ctypes.c_int32(8), ctypes.c_int64(1), ctypes.c_float(0)]
    d.remember((1,), (t, 0.5, 64), plan_for(slots, dynamic=[0, 3], float_values=[1]))
    assert d.fast(None, (1,), (Tensor(0x8000, (8,), (1,)), 2.0, 64))
    assert fake_driver.launches[-1]["via"] == fast_path        # C launches from C
    got, _ = fake_driver.slot_bytes(4, [8, 4, 8, 4])
    assert got[0] == struct.pack("<Q", 0x8000) and got[3] == struct.pack("<f", 2.0)
    assert not d.fast(None, (1,), (Tensor(0x8000, (9,), (1,)), 2.0, 64))   # new shape
    assert not d.fast(None, (1,), (t, 2.0))                                # arity
    assert not d.fast(None, [1], (t, 2.0, 64))                             # unhashable grid
    assert not d.fast(None, (1,), (t, 2, 64))                              # int for a float
    for knob in ("TILEIR_INTERPRET", "TILEIR_SYNC_LAUNCH"):
        monkeypatch.setenv(knob, "1")
        assert not d.fast(None, (1,), (t, 2.0, 64))
        monkeypatch.setenv(knob, "0")
        assert d.fast(None, (1,), (t, 2.0, 64))
        monkeypatch.setenv(knob, "maybe")           # the checked path reports it
        assert not d.fast(None, (1,), (t, 2.0, 64))
        monkeypatch.delenv(knob)
    assert len(fake_driver.launches) == 3


def test_lists_of_tensors_have_a_kind_a_key_and_spread_pointers(fast_path, fake_driver):
    """A list of CUDA tensors (cuTile's list-of-arrays parameter) takes the fast path:
    its length and every element's dtype, device, shape, strides and alignment are in
    the key, and each element's pointer goes to its own slot.  Lists launch from the
    generated Python (the C half keys no lists)."""
    t = [Tensor(0x1000, (8,), (1,)), Tensor(0x2000, (8,), (1,))]
    out = Tensor(0x3000, (8,), (1,))
    assert dispatch.arg_kinds((t, out, 64), (False, False, True)) == "LTC"
    assert dispatch.arg_kinds(([], out), (False, False)) is None            # empty
    cpu = Tensor(0x1000, (8,), (1,))
    cpu.is_cuda = False
    assert dispatch.arg_kinds(([t[0], cpu], out), (False, False)) is None   # a host element
    assert dispatch.arg_kinds(([t[0], 3], out), (False, False)) is None     # not a tensor
    assert dispatch.spread("LTC", (t, out, 64), [0, 1]) == ((t[0], t[1], out, 64), [0, 1, 2])
    d = dispatch.Dispatcher("k", "LTC")
    assert not d.native
    slots = [ctypes.c_uint64(0x1000), ctypes.c_int32(8), ctypes.c_int64(1),
             ctypes.c_uint64(0x2000), ctypes.c_int32(8), ctypes.c_int64(1),
             ctypes.c_uint64(0x3000), ctypes.c_int32(8), ctypes.c_int64(1)]
    seen = []
    plan = plan_for(slots, dynamic=[0, 3, 6],
                    streams=lambda stream, args: seen.append(args) or 99)
    d.remember((1,), (t, out, 64), plan)
    assert plan.native is None or fast_path == "c"
    moved = [Tensor(0x5000, (8,), (1,)), Tensor(0x6000, (8,), (1,))]
    assert d.fast(object(), (1,), (moved, Tensor(0x7000, (8,), (1,)), 64))
    got, _ = fake_driver.slot_bytes(9, [8, 4, 8] * 3)
    assert [got[0], got[3], got[6]] == [struct.pack("<Q", p) for p in (0x5000, 0x6000, 0x7000)]
    assert seen[-1][:2] == tuple(moved)                   # the plan reads the lists spread
    for other in ([moved[0]], moved + moved[:1],                          # length
                  [moved[0], Tensor(0x6000, (9,), (1,))],                 # an element's shape
                  [moved[0], Tensor(0x6008, (8,), (1,))]):                # its alignment
        assert not d.fast(None, (1,), (other, out, 64)), other
    src = dispatch.dispatch_source("LTC")
    assert "flat = (*a0, a1, a2, )" in src
    assert "return plan.launch(stream, flat, (*[t.data_ptr() for t in a0], p1, ))" in src


def test_tuples_have_a_kind_a_key_and_spread_their_runtime_leaves(fast_path, fake_driver):
    """A tuple of CUDA tensors and numbers (nested too; cuTile 1.7's tuple arguments)
    takes the fast path: its structure, each leaf's key and its Constant items' values
    (by the annotation: `tuple_consts`) are in the key; its tensors' pointers and its
    scalars go to their slots.  Tuples launch from the generated Python."""
    from tileir.annotations import EachConstant
    t0, t1, out = (Tensor(p, (8,), (1,)) for p in (0x1000, 0x2000, 0x3000))
    consts = (None, (None, True), None)            # t: tuple[tuple[Array, int], Constant]
    args = (((t0, 5), 64), (t1, 2.5), out)
    assert dispatch.arg_kinds(args, (False,) * 3, (consts[1], None, None)) == "UUT"
    assert dispatch.arg_kinds(((3, 4), out), (False, False)) == "UT"
    assert dispatch.arg_kinds(((3, 4),), (False,)) is None                # no tensor
    assert dispatch.arg_kinds(((t0, [t1]), out), (False, False)) is None   # a list inside
    cpu = Tensor(0x1000, (8,), (1,))
    cpu.is_cuda = False
    assert dispatch.arg_kinds(((cpu,), out), (False, False)) is None
    assert dispatch.arg_kinds(((t0, "relu"), out), (False, False)) is None
    assert dispatch.arg_kinds(((t0, "relu"), out), (False, False), ((None, True), None)) == "UT"
    tc = ((None, True), None, None)
    assert dispatch.spread("UUT", args, [0, 1, 2], tc) == \
        ((t0, 5, t1, 2.5, out), [0, 1, 2, 3, 4])
    assert dispatch.dynamic_values("UUT", args, tc) == (0x1000, 5, 0x2000, 2.5, 0x3000)
    d = dispatch.Dispatcher("k", "UUT", tuple_consts=tc)
    assert not d.native
    slots = [ctypes.c_uint64(0x1000), ctypes.c_int32(8), ctypes.c_int64(1), ctypes.c_int32(5),
             ctypes.c_uint64(0x2000), ctypes.c_int32(8), ctypes.c_int64(1), ctypes.c_float(2.5),
             ctypes.c_uint64(0x3000), ctypes.c_int32(8), ctypes.c_int64(1)]
    seen = []
    plan = plan_for(slots, dynamic=[0, 3, 4, 7, 8], float_values=[3],
                    streams=lambda stream, a: seen.append(a) or 99)
    d.remember((1,), args, plan)
    moved = (((Tensor(0x5000, (8,), (1,)), -7), 64), (Tensor(0x6000, (8,), (1,)), -1.5),
             Tensor(0x7000, (8,), (1,)))
    assert d.fast(object(), (1,), moved)
    got, _ = fake_driver.slot_bytes(11, [8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8])
    assert [got[i] for i in (0, 3, 4, 7, 8)] == [
        struct.pack("<Q", 0x5000), struct.pack("<i", -7), struct.pack("<Q", 0x6000),
        struct.pack("<f", -1.5), struct.pack("<Q", 0x7000)]
    assert seen[-1] == (moved[0][0][0], -7, moved[1][0], -1.5, moved[2])   # spread
    for other in [(((t0, 5), 32), (t1, 2.5), out),                  # the Constant item
                  (((t0, 5.0), 64), (t1, 2.5), out),                 # a leaf's type
                  (((t0, 2**31), 64), (t1, 2.5), out),               # an int's range
                  (((t0, 5, 1), 64), (t1, 2.5), out),                # a tuple's length
                  (((Tensor(0x1000, (9,), (1,)), 5), 64), (t1, 2.5), out),   # a shape
                  ((t0, 64), (t1, 2.5), out)]:                       # the structure
        assert not d.fast(None, (1,), other), other
    each = dispatch.Dispatcher("k", "UT", tuple_consts=(EachConstant(True), None))
    assert each.key_of((1,), ((1, 2), out)) != each.key_of((1,), ((1, 3), out))
    plain = dispatch.Dispatcher("k", "UT")
    assert plain.key_of((1,), ((1, 2), out)) == plain.key_of((1,), ((1, 3), out))


def test_plans_are_bounded(fast_path, fake_driver, monkeypatch):
    monkeypatch.setattr(dispatch, "PLANS_PER_DISPATCHER", 3)
    d = dispatch.Dispatcher("k", "T")
    slots = [ctypes.c_uint64(0), ctypes.c_int32(1), ctypes.c_int64(1)]
    for n in range(1, 8):
        d.remember((1,), (Tensor(0, (n,), (1,)),), plan_for(slots, dynamic=[0]))
        assert 1 <= len(d.plans) <= 3


def test_keys_hold_compile_time_constants_of_every_kind(fast_path):
    """Constant parameters may be strings, enum members, None and dtypes (ours or NumPy's):
    each value and type keys its own plan, as each compiles its own kernel."""
    import enum

    import numpy as np

    import tileir as ct

    class Level(enum.IntEnum):
        ONE = 1

    d = dispatch.Dispatcher("k", "TCCCC")
    t = Tensor(64, (4,), (1,))
    args = (t, "relu", ct.RoundingMode.RN, None, np.int32)
    key = d.key_of(1, args)
    assert d.key_of(1, (Tensor(128, (4,), (1,)), "relu", ct.RoundingMode.RN, None,
                        np.int32)) == key
    for other in [(t, "gelu", ct.RoundingMode.RN, None, np.int32),
                  (t, "relu", ct.RoundingMode.RZ, None, np.int32),
                  (t, "relu", ct.RoundingMode.RN, 0, np.int32),
                  (t, "relu", ct.RoundingMode.RN, None, np.float16),
                  (t, "relu", ct.RoundingMode.RN, None, np.dtype("int32")),
                  (t, "relu", ct.RoundingMode.RN, None, ct.int32),
                  (t, "relu", "nearest_even", None, np.int32)]:
        assert d.key_of(1, other) != key, other
    # an IntEnum member equals its value but is a constant of another type
    assert d.key_of(1, (t, "relu", Level.ONE, None, np.int32)) != \
        d.key_of(1, (t, "relu", 1, None, np.int32))
    assert dispatch.arg_kinds(args, (False, True, True, True, True)) == "TCCCC"


def test_c_keys_hold_constants_of_any_kind_and_keep_dtypes_alive(fast_path):
    if fast_path != "c":
        pytest.skip("the C key's own representation")
    d = dispatch.Dispatcher("k", "TCC")
    dtype = object()                    # a dtype only the key and the tensor know
    t = Tensor(64, (4,), (1,), dtype=dtype)
    key = d.key_of(2, (t, "tanh", 2**70))
    assert d.key_of(2, (Tensor(128, (4,), (1,), dtype=dtype), "tanh", 2**70)) == key
    assert d.key_of((2,), (t, "tanh", 2**70)) != key                # int grid != tuple grid
    assert d.key_of(2, (t, "relu", 2**70)) != key
    assert d.key_of(2, (t, "tanh", 2**70 + 1)) != key
    assert d.key_of(2, (t, "tanh", 2.0**70)) != key                 # type counts
    assert d.key_of(2, (Tensor(64, (4,), (1,), dtype=object()), "tanh", 2**70)) != key
    with pytest.raises(TypeError):
        d.key_of((2.5,), (t, "tanh", 2**70))                       # grid of ints only
    import gc
    import weakref

    class DType:
        pass
    kept = DType()
    ref = weakref.ref(kept)
    d.key_of(2, (Tensor(64, (4,), (1,), dtype=kept), "tanh", 1))
    del kept
    gc.collect()
    assert ref() is not None          # its address is in a filed key: it must not be reused


def test_a_plan_filed_again_under_the_last_key_is_the_one_launched(fast_path, fake_driver):
    """The C dispatcher remembers the last launch's key and plan; a plan filed anew under
    that key, or the plans cleared, must be seen at the next launch."""
    d = dispatch.Dispatcher("k", "T")
    t = Tensor(0x4000, (8,), (1,))
    slots = [ctypes.c_uint64(0), ctypes.c_int32(1), ctypes.c_int64(1)]

    def plan(function):
        return dispatch.LaunchPlan(
            name="k", function=function, device=0, grid=(4, 1, 1), block=(128, 1, 1),
            shared=0, slots=slots, dynamic=[0], float_values=(), maps=(),
            current_stream=lambda device: 77, stream_of=lambda stream, args: 99)

    d.remember((1,), (t,), plan(0xA00))
    for _ in range(2):
        assert d.fast(None, (1,), (t,))
        assert fake_driver.launches[-1]["function"] == 0xA00
    d.remember((1,), (t,), plan(0xB00))
    assert d.fast(None, (1,), (Tensor(0x5000, (8,), (1,)),))
    assert fake_driver.launches[-1]["function"] == 0xB00
    d.plans.clear()
    assert not d.fast(None, (1,), (t,))
    assert len(fake_driver.launches) == 3


def test_c_keys_read_tensors_through_lookups_unless_their_type_has_c_accessors(fast_path):
    """`use_tensor_type` takes a type whose five accessors are C descriptors (torch.Tensor);
    a Python class's are not, and its tensors keep being read through lookups."""
    if fast_path != "c":
        pytest.skip("the C key's accessors")
    assert NATIVE.use_tensor_type(Tensor) is False
    with pytest.raises(TypeError):
        NATIVE.use_tensor_type(Tensor(0, (1,), (1,)))
    d = dispatch.Dispatcher("k", "T")
    assert d.key_of(1, (Tensor(64, (4,), (1,)),)) == d.key_of(1, (Tensor(128, (4,), (1,)),))
    assert d.key_of(1, (Tensor(64, (4,), (1,)),)) != d.key_of(1, (Tensor(64, (5,), (1,)),))


# DLPack's structs, as the runtime reads a capsule's
from tileir.runtime.arrays import _DLDataType as DLDataType  # noqa: E402
from tileir.runtime.arrays import _DLDevice as DLDevice  # noqa: E402
from tileir.runtime.arrays import _DLTensor as DLTensor  # noqa: E402

DESCRIBE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(DLTensor))


class ExchangeAPI(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("prev_api", ctypes.c_void_p), ("allocator", ctypes.c_void_p),
                ("managed_from", ctypes.c_void_p), ("managed_to", ctypes.c_void_p),
                ("describe", DESCRIBE), ("current_work_stream", ctypes.c_void_p)]


def exchange_capsule(api, name=b"dlpack_exchange_api"):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                   ctypes.c_void_p]
    return new(ctypes.addressof(api), name, None)


class DLPackTensor(Tensor):
    """A stand-in tensor that also describes itself through DLPack's C exchange API (as
    torch.Tensor does since torch 2.10); `refuse` makes the table decline it."""

    DTYPES = {"bf16": (4, 16), "f16": (2, 16), "f32": (2, 32),     # DLPack (code, bits)
              "i8": (0, 8), "u8": (1, 8)}

    def __init__(self, ptr, shape, strides, dtype="bf16", device=0, byte_offset=0,
                 refuse=False):
        super().__init__(ptr + byte_offset, shape, strides, dtype, device)
        self.base, self.byte_offset, self.refuse = ptr, byte_offset, refuse
        self.c_shape = (ctypes.c_int64 * len(shape))(*shape)
        self.c_strides = (ctypes.c_int64 * len(strides))(*strides)


def describe(py_object, out):
    t = ctypes.cast(py_object, ctypes.py_object).value
    if t.refuse:
        return -1
    code, bits = DLPackTensor.DTYPES[t.dtype]
    out[0] = DLTensor(t.base, DLDevice(1 if t.device == -1 else 2, max(t.device, 0)),
                      len(t.shape), DLDataType(code, bits, 1),
                      ctypes.cast(t.c_shape, ctypes.POINTER(ctypes.c_int64)),
                      ctypes.cast(t.c_strides, ctypes.POINTER(ctypes.c_int64)), t.byte_offset)
    return 0


@pytest.fixture
def dlpack_exchange(fast_path):
    """DLPackTensor's table, in use by the C keys (the C path only)."""
    if fast_path != "c":
        pytest.skip("the C key's DLPack exchange")
    api = ExchangeAPI(1, 3, None, None, None, None, DESCRIBE(describe), None)
    DLPackTensor.__dlpack_c_exchange_api__ = exchange_capsule(api)
    assert NATIVE.use_dlpack_exchange(DLPackTensor) is True
    yield api
    NATIVE.use_dlpack_exchange(None)
    del DLPackTensor.__dlpack_c_exchange_api__


def test_c_keys_describe_tensors_through_a_dlpack_exchange_table(dlpack_exchange, fake_driver):
    """Tensors of exactly the table's type are keyed from the DLTensor it fills: the key
    settles dtype, device, shape, strides and alignment as the accessors' key does, and
    the pointer launched is data + byte_offset."""
    d = dispatch.Dispatcher("k", "T")

    def key(*a, **k):
        return d.key_of(1, (DLPackTensor(*a, **k),))

    base = key(4096, (8, 16), (16, 1))
    assert key(8192, (8, 16), (16, 1)) == base
    assert key(4096 - 64, (8, 16), (16, 1), byte_offset=64) == base
    for other in [key(4096, (8, 16), (16, 1), byte_offset=2),          # misaligned
                  key(4096, (8, 17), (17, 1)), key(4096, (16, 8), (8, 1)),
                  key(4096, (8, 16), (1, 8)), key(4096, (8, 16), (16, 1), dtype="f16"),
                  key(4096, (8, 16), (16, 1), device=1),
                  key(4096, (8, 16), (16, 1), device=-1), key(4096, (128,), (1,))]:
        assert other != base
    # the accessors' key, for a tensor the table declines and for a subclass
    t = DLPackTensor(4096, (8, 16), (16, 1), refuse=True)
    assert d.key_of(1, (t,)) == d.key_of(1, (Tensor(4096, (8, 16), (16, 1)),)) != base

    class Sub(DLPackTensor):
        pass
    assert d.key_of(1, (Sub(4096, (8, 16), (16, 1)),)) == d.key_of(1, (t,))
    # 8-bit integers too: torch describes its sub-byte integers as 8-bit ones
    for dtype in ("i8", "u8"):
        assert key(4096, (8, 16), (16, 1), dtype=dtype) == \
            d.key_of(1, (Tensor(4096, (8, 16), (16, 1), dtype=dtype),))

    slots = [ctypes.c_uint64(0), ctypes.c_int32(1), ctypes.c_int64(1)]
    plan = dispatch.LaunchPlan(
        name="k", function=0xA00, device=0, grid=(4, 1, 1), block=(128, 1, 1), shared=0,
        slots=slots, dynamic=[0], float_values=(), maps=(),
        current_stream=lambda device: 77, stream_of=lambda stream, args: 99)
    d.remember((1,), (DLPackTensor(0x4000, (8,), (1,)),), plan)
    assert d.fast(None, (1,), (DLPackTensor(0x8000, (8,), (1,), byte_offset=0x40),))
    got, _ = fake_driver.slot_bytes(1, [8])
    assert got[0] == struct.pack("<Q", 0x8040)
    NATIVE.use_dlpack_exchange(None)            # forgotten: keyed through the accessors
    assert key(4096, (8, 16), (16, 1)) == d.key_of(1, (t,))


@pytest.mark.parametrize("table", ["old", "no function", "misnamed", "not a capsule"])
def test_c_keys_take_only_a_dlpack_exchange_table_they_can_read(fast_path, table):
    if fast_path != "c":
        pytest.skip("the C key's DLPack exchange")
    api = ExchangeAPI(1, 2 if table == "old" else 3, None, None, None, None,
                      DESCRIBE(describe) if table != "no function" else DESCRIBE(), None)

    class Typed(DLPackTensor):
        __dlpack_c_exchange_api__ = (exchange_capsule(api, b"other") if table == "misnamed"
                                     else 7 if table == "not a capsule"
                                     else exchange_capsule(api))
    assert NATIVE.use_dlpack_exchange(Typed) is False
    assert NATIVE.use_dlpack_exchange(int) is False
    with pytest.raises(TypeError):
        NATIVE.use_dlpack_exchange(Typed(0, (1,), (1,)))


def test_torch_tensors_key_as_their_lookups_say(fast_path):
    """torch.Tensor's accessors are read through the C functions behind its descriptors
    (`use_tensor_type`); the key is the one the lookups give (a stand-in with the same
    values), and a subclass that overrides one of them is read through its override."""
    torch = pytest.importorskip("torch")
    d = dispatch.Dispatcher("k", "T")
    makers = (lambda: torch.empty(6, 8, dtype=torch.bfloat16), lambda: torch.empty(8, 6).t(),
              lambda: torch.empty(4, 4, 3)[:, 1:3], lambda: torch.empty(4, 4, 3)[:, 2:3])
    # torch.Tensor itself is described through torch's DLPack exchange table where
    # torch has one: a key per layout, the same for the same layout elsewhere
    exchange = fast_path == "c" and NATIVE.use_dlpack_exchange(torch.Tensor)
    if fast_path == "c" and tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 10):
        assert exchange                     # torch 2.10+ publishes a DLPack 1.3 table
    if exchange:
        keys = [d.key_of(1, (make(),)) for make in makers]
        assert keys == [d.key_of(1, (make(),)) for make in makers]
        assert len(set(keys)) == len(keys)
        if hasattr(torch, "uint4"):         # described as uint8 by the table: told apart
            u8 = torch.empty(4, 4, dtype=torch.uint8)
            assert d.key_of(1, (u8,)) != d.key_of(1, (u8.view(torch.uint4),))
        NATIVE.use_dlpack_exchange(None)
    try:
        for make in makers:
            t = make()
            stand_in = Tensor(t.data_ptr(), t.shape, t.stride(), dtype=t.dtype,
                              device=t.get_device())
            assert d.key_of(1, (t,)) == d.key_of(1, (stand_in,))
    finally:
        if exchange:
            NATIVE.use_dlpack_exchange(torch.Tensor)
    if fast_path == "c":
        assert NATIVE.use_tensor_type(torch.Tensor) is True

    class Narrow(torch.Tensor):
        def stride(self, *args):
            return tuple(2 * s for s in super().stride(*args))

    t = torch.empty(4, 4)
    n = t.as_subclass(Narrow)
    assert d.key_of(1, (n,)) == d.key_of(1, (Tensor(t.data_ptr(), (4, 4), (8, 2),
                                                     dtype=t.dtype, device=-1),))
    p = torch.nn.Parameter(t)                   # a subclass that overrides none of them
    plain = Tensor(t.data_ptr(), (4, 4), (4, 1), dtype=t.dtype, device=-1)
    assert d.key_of(1, (p,)) == d.key_of(1, (plain,))


@pytest.fixture
def recorded_checked_launch(monkeypatch):
    """`tileir.kernel.launch_checked` (Python's and the C launch's) replaced by one that
    records its calls: yields (the kernel module, the calls, the real launch_checked)."""
    import importlib
    kernel_module = importlib.import_module("tileir.kernel")
    checked, original = [], kernel_module.launch_checked
    monkeypatch.setattr(kernel_module, "launch_checked", lambda *a, **k: checked.append((a, k)))
    if NATIVE is not None:
        NATIVE.set_checked_launch(kernel_module.launch_checked)
    try:
        yield kernel_module, checked, original
    finally:
        if NATIVE is not None:
            NATIVE.set_checked_launch(original)


def test_launch_takes_the_kernels_fast_path_and_checks_the_rest(recorded_checked_launch):
    """`tileir.launch` (C where built): a kernel's `_fast` that launched is the whole
    launch; one that declines, keywords, another arity or an object without a fast
    path go to the checked path, which raises for what is not a launch."""
    import tileir as ct
    kernel_module, checked, _ = recorded_checked_launch

    class K:
        def __init__(self, answer):
            self.answer, self.calls = answer, []

        def _fast(self, stream, grid, args):
            self.calls.append((stream, grid, args))
            return self.answer

    class Raises(K):
        def _fast(self, stream, grid, args):
            raise ValueError("from the fast path")

    # the C launch, and the Python one it stands in for where no compiler built it
    for launch in (ct.launch, kernel_module._launch):
        checked.clear()
        k = K(True)
        assert launch(5, (2,), k, (1,)) is None
        assert k.calls == [(5, (2,), (1,))] and checked == []
        k = K(False)
        launch(None, (1,), k, ())
        assert len(k.calls) == 1 and checked[-1][0] == (None, (1,), k, ())
        launch(None, (1,), object(), ())                        # no fast path
        assert checked[-1][0][2].__class__ is object
        with pytest.raises(ValueError, match="from the fast path"):
            launch(None, (1,), Raises(True), ())
    ct.launch(None, (1,), K(True), (), extra=1)                 # keywords: as given
    assert checked[-1][1] == {"extra": 1}


def test_programmatic_dependent_launches_have_a_fast_path_of_their_own(
        recorded_checked_launch):
    """`launch(..., programmatic_dependent_launch=True)` (cuTile's keyword) takes the
    kernel's `_fast_pdl`, False or no keyword `_fast`, in C and in Python; anything but a
    bool there goes to the checked path, which refuses it."""
    import tileir as ct
    kernel_module, checked, original = recorded_checked_launch

    class K:
        def __init__(self):
            self.calls = []
            self._fast = lambda stream, grid, args: self.calls.append("plain") or True
            self._fast_pdl = lambda stream, grid, args: self.calls.append("pdl") or True

    for launch in (ct.launch, kernel_module._launch):
        k = K()
        launch(None, (1,), k, (), programmatic_dependent_launch=True)
        launch(None, (1,), k, (), programmatic_dependent_launch=False)
        launch(None, (1,), k, ())
        assert k.calls == ["pdl", "plain", "plain"]
        checked.clear()
        launch(None, (1,), k, (), programmatic_dependent_launch=1)
        assert k.calls == ["pdl", "plain", "plain"] and \
            checked == [((None, (1,), k, ()), {"programmatic_dependent_launch": 1})]
    with pytest.raises(TypeError, match="programmatic_dependent_launch must be True or False, "
                       "got 1"):
        original(None, (1,), object(), (), programmatic_dependent_launch=1)


def test_kernels_file_programmatic_dependent_plans_apart(fast_path):
    """The checked path files a flagged launch's plan with the kernel's dispatchers for
    flagged launches: a launch without the flag never finds it."""
    import tileir as ct

    @ct.kernel
    def k(x):
        pass

    t = Tensor(4096, (8,), (1,))
    flagged, plain = object(), object()
    k._remember("T", (1,), (t,), flagged, True)
    assert k._fast is None and k._dispatchers == {}
    assert list(k._pdl_dispatchers["T"].plans.values()) == [flagged]
    k._remember("T", (1,), (t,), plain)
    assert list(k._dispatchers["T"].plans.values()) == [plain]
    assert list(k._pdl_dispatchers["T"].plans.values()) == [flagged]
    assert k._fast_pdl is not None and k._fast is not None and k._fast is not k._fast_pdl


@pytest.mark.parametrize("meta,requested,programmatic", [
    ({}, False, False), ({}, True, False),                                # no ops, sm_80, off
    ({"programmatic_launch": True}, False, True),                         # tileir's wait
    ({"programmatic_launch": True}, True, True),
    ({"programmatic_on_request": True}, False, False),                    # the author's ops
    ({"programmatic_on_request": True}, True, True)])
def test_a_launch_is_programmatic_as_the_meta_and_the_launch_say(meta, requested,
                                                                 programmatic):
    from tileir.runtime import launcher
    assert launcher.programmatic(meta, requested) is programmatic


@pytest.mark.parametrize("requested", [False, True])
def test_programmatic_launch_off_launches_every_kernel_plainly(requested, monkeypatch):
    """TILEIR_PROGRAMMATIC_LAUNCH=0: no launch is programmatic, whatever the kernel or the
    launch asks (a profiler then sees each kernel's own time)."""
    from tileir.runtime import launcher
    monkeypatch.setenv("TILEIR_PROGRAMMATIC_LAUNCH", "0")
    for meta in ({"programmatic_launch": True}, {"programmatic_on_request": True}):
        assert launcher.programmatic(meta, requested) is False
    monkeypatch.setenv("TILEIR_PROGRAMMATIC_LAUNCH", "1")
    assert launcher.programmatic({"programmatic_launch": True}, requested) is True


def test_launch_of_a_kernel_not_launched_before_is_checked():
    import tileir as ct
    from tileir.errors import TileTypeError
    with pytest.raises(TileTypeError, match="launch\\(\\) needs a @tileir.kernel"):
        ct.launch(None, (1,), object(), ())
    with pytest.raises(TypeError):
        ct.launch(None, (1,), object())


class Stream:
    """Enough of a torch.cuda.Stream: its device and handle."""

    def __init__(self, device_index, cuda_stream):
        self.device_index, self.cuda_stream = device_index, cuda_stream


def test_torch_streams_launch_on_their_handle_and_other_devices_are_refused(fast_path,
                                                                            fake_driver):
    asked = []

    def stream_of(stream, args):          # the checked rule (launcher.stream_handle)
        asked.append(stream)
        if stream.device_index != 0:
            raise ValueError(f"the stream belongs to cuda:{stream.device_index}")
        return stream.cuda_stream

    plan = plan_for(ARRAY_AND_SCALARS, dynamic=[0, 5, 6, 7], float_values=[1],
                    streams=stream_of)
    launch = launch_of(plan)
    assert launch(Stream(0, 55), (), (0x2000, 1.0, 1, False))
    assert fake_driver.launches[-1]["stream"] == 55
    # the C path reads a torch stream of the plan's device itself; Python asks the rule
    assert len(asked) == (0 if fast_path == "c" else 1)
    with pytest.raises(ValueError, match="cuda:1"):
        launch(Stream(1, 66), (), (0x2000, 1.0, 1, False))
    assert len(fake_driver.launches) == 1


@pytest.mark.parametrize("foreign", [0xBAD0, 0])
def test_the_c_half_launches_in_the_devices_context(fake_driver, foreign):
    """Another context current: the device's is current for the launch only; none
    current: the device's is made current and stays (as the CUDA runtime).  No launch
    is refused on the way."""
    if NATIVE is None:
        pytest.skip("the C fast path is not built here (no compiler at install time)")
    plan = plan_for(ARRAY_AND_SCALARS, dynamic=[0, 5, 6, 7], float_values=[1])
    fake_driver.context = foreign
    assert plan.native.launch(None, (), (0x2000, 1.0, 1, False))
    assert [l["via"] for l in fake_driver.launches] == ["c"]
    assert fake_driver.switches == ([PRIMARY, foreign] if foreign else [PRIMARY])
    assert fake_driver.context == (foreign or PRIMARY)
    fake_driver.switches.clear()
    fake_driver.context = PRIMARY
    assert plan.native.launch(None, (), (0x2000, 1.0, 1, False))
    assert fake_driver.switches == []


@pytest.mark.parametrize("native", [False, True])
def test_constant_keys_are_typed_as_the_compile_cache_types_them(native):
    """A Constant argument's key tells apart what `==` merges (review, 2026-11-26): 1,
    1.0 and True, -0.0 and 0.0, and so inside a Constant tuple, on both fast paths and
    the checked one; else a launch finds a kernel compiled for another value."""
    import importlib
    if native and dispatch._native is None:
        pytest.skip("the C extension is not built here")
    kernel_key = importlib.import_module("tileir.kernel")._key
    d = dispatch.Dispatcher("k", "IC", native=native)
    grid = (1, 1, 1)
    keys = [d.key_of(grid, (5, c)) for c in ((1, 2), (1.0, 2), (True, 2), 0.0, -0.0, 1, 1.0)]
    assert len(set(keys)) == len(keys)
    assert d.key_of(grid, (5, (1, 2))) == d.key_of(grid, (5, (1, 2)))
    assert d.key_of(grid, (5, float("nan"))) == d.key_of(grid, (5, float("nan")))
    assert len({kernel_key(c) for c in ((1, 2), (1.0, 2), (True, 2), 0.0, -0.0)}) == 5
