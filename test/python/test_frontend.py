"""Frontend: Python kernels -> Tile IR, with locations, specialization and clear errors."""

import inspect

import numpy as np
import pytest

import tileir as ct
from tileir.errors import (TileError, TileSyntaxError, TileTypeError,
                           TileUnsupportedFeatureError, TileValueError)

F32 = np.zeros(100, np.float32)
F32_2D = np.zeros((10, 100), np.float32)
F16_2D = np.zeros((10, 100), np.float16)
I32 = np.zeros(100, np.int32)


def line_of(fn, needle: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    for i, text in enumerate(lines):
        if needle in text:
            return first + i
    raise AssertionError(needle)


@ct.kernel
def vadd(a, b, c, TILE: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    y = ct.load(b, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(i,), tile=x + y)


def test_vector_add_ir():
    text = vadd.tile_ir(F32, F32, F32, 64, stage="frontend")
    assert "tile.kernel" in text
    assert text.count('"tile.load"') == 2
    assert 'padding = "zero"' in text and "tile_shape = array<i64: 64>" in text
    assert "arith.addf" in text and '"tile.store"' in text
    assert "!tile.array<f32, 1 : i64>" in text


def test_every_op_carries_the_user_location():
    ck = vadd.compile((F32, F32, F32, 64), stage="frontend")
    asm = ck.module.operation.get_asm(enable_debug_info=True)
    want = f'{__file__}":{line_of(vadd, "x + y")}'
    assert want in asm, asm
    func = ck.module.body.operations[0]
    for op in func.regions[0].blocks[0].operations:
        loc = op.location
        assert loc.is_a_file() and loc.filename == __file__, (op.name, loc)


def test_constant_specialization_and_cache():
    a = vadd.compile((F32, F32, F32, 64), stage="frontend")
    b = vadd.compile((F32, F32, F32, 64), stage="frontend")
    c = vadd.compile((F32, F32, F32, 128), stage="frontend")
    assert a is b and a is not c
    assert "array<i64: 128>" in c.ir()
    d = vadd.compile((F16_2D[0], F16_2D[0], F16_2D[0], 64), stage="frontend")
    assert "!tile.array<f16, 1 : i64>" in d.ir()


@ct.kernel
def static_branch(a, FLAG: ct.Constant[bool]):
    t = ct.zeros((16,), dtype=ct.float32)
    if FLAG:
        t = t + 1.0
    else:
        t = ct.exp(t)
    ct.store(a, index=(0,), tile=t)


def test_constant_bool_compiles_one_branch():
    on = static_branch.tile_ir(F32, True, stage="frontend")
    off = static_branch.tile_ir(F32, False, stage="frontend")
    assert "arith.addf" in on and "math.exp" not in on and "scf.if" not in on
    assert "math.exp" in off and "arith.addf" not in off


@ct.kernel
def runtime_branch(a, n):
    t = ct.zeros((16,), dtype=ct.float32)
    if n > 3:
        t = t + 1.0
    ct.store(a, index=(0,), tile=t)


def test_runtime_if_yields_assigned_names():
    text = runtime_branch.tile_ir(F32, 5, stage="frontend")
    assert "scf.if" in text and "-> (tensor<16xf32>)" in text and "scf.yield" in text


@ct.kernel
def k_loop(a, c, BK: ct.Constant[int]):
    acc = ct.zeros((16, 16), dtype=ct.float32)
    for k in range(ct.num_tiles(a, 1, (16, BK))):
        t = ct.load(a, index=(0, k), shape=(16, BK), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(t, ct.transpose(t), acc)
    ct.store(c, index=(0, 0), tile=acc)


def test_for_loop_carries_values():
    text = k_loop.tile_ir(F16_2D, F32_2D, 32, stage="frontend")
    assert "scf.for" in text and "iter_args" in text and '"tile.mma"' in text
    assert '"tile.permute"' in text


@ct.function
def twice(x):
    return x + x


@ct.kernel
def uses_helper(a):
    t = ct.load(a, index=(0,), shape=(16,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(a, index=(0,), tile=twice(twice(t)))


def test_helpers_become_private_functions():
    text = uses_helper.tile_ir(F32, stage="frontend")
    assert "func.func private @twice" in text and "tile.function" in text
    assert text.count("call @twice") == 2      # one specialization, called twice


@ct.kernel
def promotions(a, h, out):
    x = ct.load(a, index=(0,), shape=(16,), padding_mode=ct.PaddingMode.ZERO)   # f32
    y = ct.load(h, index=(0,), shape=(16,), padding_mode=ct.PaddingMode.ZERO)   # f16
    ct.static_assert((y * 1.5).dtype == ct.float16, "weak float keeps f16")
    ct.static_assert((x + y).dtype == ct.float32, "f16 meets f32 at f32")
    ct.static_assert(ct.arange(16, dtype=ct.int32).dtype == ct.int32)
    ct.static_assert((ct.arange(16) + 0.5).dtype == ct.float32, "int tile + float is f32")
    ct.static_assert((ct.arange(16) / 2).dtype == ct.float32, "true division gives float")
    ct.static_assert((ct.arange(16) // 2).dtype == ct.int32)
    ct.static_assert(ct.sum(x).shape == (), "full reduction gives a scalar")
    ct.static_assert(ct.sum(x[None, :], axis=1, keepdims=True).shape == (1, 1))
    ct.static_assert(ct.argmax(x).dtype == ct.int32)
    ct.store(out, index=(0,), tile=x + y)


def test_type_promotion_rules():
    promotions.tile_ir(F32, np.zeros(100, np.float16), F32, stage="frontend")


# ---------------------------------------------------------------------------
# Errors: located, with the source line and a caret, and what to do
# ---------------------------------------------------------------------------
@ct.kernel
def bad_shape(a):
    t = ct.load(a, index=(0,), shape=(100,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(a, index=(0,), tile=t)


@ct.kernel
def bad_while(a):
    i = 0
    while i < 3:
        i = i + 1
    else:
        i = 0


@ct.kernel
def bad_name(a):
    ct.store(a, index=(0,), tile=undefined_thing)  # noqa: F821


@ct.kernel
def bad_carry(a, n):
    acc = ct.zeros((16,), dtype=ct.float32)
    for i in range(n):
        acc = ct.astype(acc, ct.float16)
    ct.store(a, index=(0,), tile=acc)


@ct.kernel
def bad_tile_condition(a):
    t = ct.zeros((16,), dtype=ct.float32)
    if t > 0:
        t = t + 1
    ct.store(a, index=(0,), tile=t)


@ct.kernel
def bad_padding(a):
    t = ct.load(a, index=(0,), shape=(16,), padding_mode=ct.PaddingMode.NEG_INF)
    ct.store(a, index=(0,), tile=t)


@ct.kernel
def bad_python_call(a):
    t = ct.zeros((16,), dtype=ct.float32)
    ct.store(a, index=(0,), tile=np.exp(t))


@ct.kernel
def bad_broadcast(a):
    t = ct.zeros((16,), dtype=ct.float32) + ct.zeros((32,), dtype=ct.float32)
    ct.store(a, index=(0,), tile=t)


@ct.kernel
def bad_mma(a):
    x = ct.zeros((16, 16), dtype=ct.bfloat16)
    acc = ct.mma(x, x, ct.zeros((16, 16), dtype=ct.float16))
    ct.store(a, index=(0, 0), tile=acc)


@ct.kernel
def bad_loop_local(a, n):
    for i in range(n):
        inner = ct.zeros((16,), dtype=ct.float32)
    ct.store(a, index=(0,), tile=inner)


@ct.kernel
def bad_loop_variable_after(a, n):
    i = 7
    for i in range(n):
        ct.store(a, index=(i,), tile=ct.zeros((16,), dtype=ct.float32))
    ct.store(a, index=(i + 1,), tile=ct.zeros((16,), dtype=ct.float32))


@ct.kernel
def bad_index_rank(a):
    ct.store(a, index=(0, 0), tile=ct.zeros((16,), dtype=ct.float32))


@ct.kernel
def bad_shape_param(a, n):
    t = ct.zeros((n,), dtype=ct.float32)
    ct.store(a, index=(0,), tile=t)


ERROR_CASES = [
    (bad_shape, (F32,), TileValueError, "shape=(100,)", "must have power-of-two dims; got 100"),
    (bad_while, (F32,), TileUnsupportedFeatureError, "while i < 3", "while/else is not "
     "supported"),
    (bad_name, (F32,), TileSyntaxError, "undefined_thing", "name 'undefined_thing' is not "
     "defined"),
    (bad_carry, (F32, 4), TileTypeError, "for i in range(n)", "must keep its dtype and shape"),
    (bad_tile_condition, (F32,), TileTypeError, "t > 0", "use where(cond, x, y)"),
    (bad_padding, (I32,), TileTypeError, "NEG_INF)", "needs a float array"),
    (bad_python_call, (F32,), TileUnsupportedFeatureError, "np.exp(t)",
     "cannot call numpy.exp inside a kernel: it is NumPy's"),
    (bad_broadcast, (F32,), TileTypeError, "+ ct.zeros((32,)", "do not broadcast"),
    (bad_mma, (F32_2D,), TileTypeError, "acc = ct.mma", "accumulates in float32"),
    (bad_loop_local, (F32, 3), TileSyntaxError, "tile=inner", "not available after it"),
    # Python would leave i at n - 1; an error, not the 7 from before the loop
    (bad_loop_variable_after, (F32, 3), TileSyntaxError, "index=(i + 1,)",
     "'i' is the variable of the loop at line"),
    (bad_index_rank, (F32,), TileTypeError, "index=(0, 0)", "index has 2 entries"),
    (bad_shape_param, (F32, 16), TileTypeError, "(n,)", "declare kernel parameters used "
     "here as Constant[int]"),
]


@pytest.mark.parametrize("kern,args,exc,snippet,message", ERROR_CASES,
                         ids=[c[0].name for c in ERROR_CASES])
def test_errors_point_at_the_source(kern, args, exc, snippet, message):
    with pytest.raises(exc) as info:
        kern.compile(args, stage="frontend")
    text = str(info.value)
    line = line_of(kern, snippet)
    assert f"{__file__}:{line}:" in text, text
    assert message in text, text
    # the offending source line is echoed with a caret under the column
    src_line = [ln for ln in text.splitlines() if snippet in ln]
    assert src_line and "^" in text, text
    assert "Traceback" not in text


def test_argument_errors_before_compiling():
    with pytest.raises(TileTypeError, match="takes 4 arguments"):
        vadd.compile((F32, F32, F32))
    with pytest.raises(TileTypeError, match=r"Constant\[int\] but got float"):
        vadd.compile((F32, F32, F32, 1.5))
    with pytest.raises(TileTypeError, match="kernels take arrays"):
        vadd.compile((F32, F32, "x", 64))
    with pytest.raises(TypeError, match="launched with tileir.launch"):     # as cuTile's
        vadd(F32, F32, F32, 64)
    with pytest.raises(TileError, match="only be used inside a @kernel"):
        ct.load(F32, index=(0,), shape=(16,))
    with pytest.raises(ct.TileValueError, match="grid must be"):
        ct.launch(None, (0,), vadd, (F32, F32, F32, 64))
    assert ct.cdiv(10, 4) == 3        # cdiv also works on the host, as in cuTile


def test_unreadable_source_is_reported():
    ns = {}
    exec("import tileir as ct\n@ct.kernel\ndef k(a):\n    pass\n", ns)
    with pytest.raises(TileSyntaxError, match="must be defined in a file"):
        ns["k"].compile((F32,), stage="frontend")


def test_intrinsic_signatures_are_read_once_per_function():
    """The tracer binds each call against its function's public signature, read once per
    function object (`intrinsics._signature`): the same answer as inspect's, and a
    different function (even of the same name) gets its own."""
    from tileir import api
    from tileir.frontend import intrinsics

    fn = api.SIGNATURES["load"]
    assert intrinsics._signature(fn) is intrinsics._signature(fn)
    assert intrinsics._signature(fn) == inspect.signature(fn)

    def load(array, index, shape, extra=1):
        pass
    assert intrinsics._signature(load) == inspect.signature(load)
    assert intrinsics._signature(load) != intrinsics._signature(fn)
