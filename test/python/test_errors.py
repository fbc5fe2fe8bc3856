"""Every frontend error names the user's line first.

A call of a library's function (NumPy, `math`, the standard library, another
installed package) is refused at the kernel's call, naming the function and what to
write instead (`frontend/library.py`), never compiled inline into an error inside
the library's source.  An error inside the user's helpers shows the chain of calls
from the kernel's line down to the failing line."""

from __future__ import annotations

import importlib.util
import inspect
import math
import operator
import random
import sys
import typing
from pathlib import Path

import numpy as np
import pytest

import tileir as ct
from tileir.errors import TileTypeError, TileUnsupportedFeatureError, file_line_col
from tileir.frontend import library
from tileir.function import is_plain_helper

from conftest import refused_at_the_line

F32 = np.zeros(16, np.float32)


def line_of(fn, needle: str) -> int:
    lines, first = inspect.getsourcelines(getattr(fn, "fn", fn))
    for i, text in enumerate(lines):
        if needle in text:
            return first + i
    raise AssertionError(needle)


def first_location(error) -> tuple[str, int]:
    """The file and line an error names first (the line it prints first)."""
    where = file_line_col(error.diagnostics[0].location)
    assert where is not None, str(error)
    return where[0], where[1]


def refused_here(kernel, message: str, needle: str, fn=None, args=(F32,),
                 exc=TileUnsupportedFeatureError):
    """`kernel` is refused with `message`, whose first location is this file at the
    line of `fn` (the kernel by default) holding `needle`."""
    error = refused_at_the_line(kernel, args, exc, message, __file__)
    assert first_location(error) == (__file__, line_of(fn or kernel, needle)), str(error)
    assert "site-packages" not in str(error) and "Traceback" not in str(error), str(error)
    return error


# ---------------------------------------------------------------------------
# library functions: refused at the call, named, with what to use instead
# ---------------------------------------------------------------------------
@ct.kernel
def np_ones(a):
    t = np.ones(16)
    ct.store(a, index=(0,), tile=t)


@ct.kernel
def np_zeros(a):
    t = np.zeros((16,), dtype=np.float32)
    ct.store(a, index=(0,), tile=t)


@ct.kernel
def np_empty(a):
    t = np.empty(16)
    ct.store(a, index=(0,), tile=t)


@ct.kernel
def np_arange(a):
    t = np.arange(16)
    ct.store(a, index=(0,), tile=t)


@ct.kernel
def np_exp(a):
    t = ct.load(a, index=(0,), shape=(16,))
    ct.store(a, index=(0,), tile=np.exp(t))


@ct.kernel
def math_exp(a):
    t = ct.load(a, index=(0,), shape=(16,))
    ct.store(a, index=(0,), tile=math.exp(t))


@ct.kernel
def math_on_numbers(a):
    t = ct.load(a, index=(0,), shape=(16,))
    ct.store(a, index=(0,), tile=t * math.sqrt(2.0))


@ct.kernel
def stdlib_random(a):
    t = ct.load(a, index=(0,), shape=(16,))
    ct.store(a, index=(0,), tile=t + random.random())


@ct.kernel
def builtin_sorted(a):
    t = ct.load(a, index=(0,), shape=(16,))
    ct.store(a, index=(0,), tile=t + sorted((3, 1))[0])


@pytest.mark.parametrize("kernel,needle,message", [
    (np_ones, "np.ones(16)", ["numpy.ones", "NumPy's", "ct.ones(shape, dtype=None)"]),
    (np_zeros, "np.zeros(", ["numpy.zeros", "ct.zeros(shape, dtype=None)"]),
    (np_empty, "np.empty(16)", ["numpy.empty", "ct.zeros", "ct.full"]),
    (np_arange, "np.arange(16)", ["numpy.arange", "ct.arange(size"]),
    (np_exp, "np.exp(t)", ["numpy.exp", "ct.exp(x"]),
    (math_exp, "math.exp(t)", ["math.exp", "standard library's", "ct.exp(x"]),
    (math_on_numbers, "math.sqrt(2.0)", ["math.sqrt", "ct.static_eval(math.sqrt(...))"]),
    (stdlib_random, "random.random()", ["random.random", "draw them on the host"]),
    (builtin_sorted, "sorted((3, 1))", ["cannot call sorted", "builtins a kernel takes"]),
], ids=lambda x: x.name if isinstance(x, ct.Kernel) else "")
def test_a_library_call_is_refused_at_the_kernels_line(kernel, needle, message):
    error = refused_here(kernel, message[0], needle)
    for m in message[1:]:
        assert m in str(error), str(error)
    # the caret is under the call, on the echoed source line
    lines = str(error).splitlines()
    assert needle in lines[1] and lines[2].strip() == "^", str(error)


def helper_calling_numpy(t):
    return np.zeros_like(t) + t


@ct.kernel
def calls_a_helper_calling_numpy(a):
    t = ct.load(a, index=(0,), shape=(16,))
    ct.store(a, index=(0,), tile=helper_calling_numpy(t))


def test_a_library_call_in_a_helper_is_refused_at_the_helpers_line():
    """Not inside NumPy's source (numpy/_core/numeric.py, as before)."""
    error = refused_here(calls_a_helper_calling_numpy, "numpy.zeros_like",
                         "np.zeros_like(t)", fn=helper_calling_numpy)
    assert "ct.zeros(t.shape, t.dtype)" in str(error)
    assert f"{__file__}:{line_of(calls_a_helper_calling_numpy, 'helper_calling_numpy(t)')}" \
        in str(error)


def test_library_functions_are_not_plain_helpers():
    assert not is_plain_helper(np.ones) and not is_plain_helper(np.zeros_like)
    assert library.is_library_function(np.ones) and library.is_library_function(math.exp)
    assert library.is_library_function(random.random) and library.is_library_function(np.exp)
    assert is_plain_helper(helper_calling_numpy)
    assert not library.is_library_function(helper_calling_numpy)
    assert not library.is_library_function(ct.exp)


# ---------------------------------------------------------------------------
# what works keeps working
# ---------------------------------------------------------------------------
def user_helper(t):
    return t * 2.0


@ct.function
def decorated_helper(t):
    return user_helper(t) + 1.0


@ct.kernel
def what_compiles(a, out):
    t = ct.load(a, index=(0,), shape=(16,))
    c = ct.static_eval(math.exp(1.0)) + ct.static_eval(sorted((3, 1))[0])
    twice = lambda x: x + x                                    # noqa: E731
    def nested(x):
        return x - 1.0
    print(t)
    n = len(t) + (1, 2, 3).index(2) + operator.add(1, 2)
    u = typing.cast(ct.Tile, t)
    r = decorated_helper(nested(twice(u))) + c + n + max(1.0, 2.0) + abs(-1.0)
    for i in range(2):
        r = operator.add(r, t)
    ct.store(out, index=(0,), tile=ct.maximum(r, r))


def test_what_kernels_call_today_still_compiles():
    """static_eval of math and builtins, print and len of a tile, lambdas, nested defs,
    plain and @function helpers, range, min/max/abs, operator functions, tuple.index,
    typing.cast."""
    a = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    ct.launch(None, (1,), what_compiles, (a, out))
    c, n = math.exp(1.0) + 1, 16 + 1 + 3
    r = ((a + a - 1.0) * 2.0 + 1.0) + c + n + 2.0 + 1.0 + 2 * a
    np.testing.assert_allclose(out, r, rtol=1e-5)


@ct.kernel
def len_of_a_scalar(a):
    t = ct.sum(ct.load(a, index=(0,), shape=(16,)))
    ct.store(a, index=(0,), tile=t + len(t))


def test_len_of_a_0d_tile_points_at_the_shape():
    refused_here(len_of_a_scalar, ".shape", "len(t)", exc=TileTypeError)


GLOBAL_LAMBDA = lambda x: x + 1                                 # noqa: E731


@ct.kernel
def calls_a_global_lambda(a):
    t = ct.load(a, index=(0,), shape=(16,))
    ct.store(a, index=(0,), tile=GLOBAL_LAMBDA(t))


def test_a_lambda_from_outside_kernel_code_is_refused_by_name():
    """A lambda compiles where kernel code defines it (the nested ones: above); one
    from the module is refused at the call, saying where it was defined."""
    error = refused_here(calls_a_global_lambda, "cannot call the lambda 'GLOBAL_LAMBDA'",
                         "GLOBAL_LAMBDA(t)")
    assert f"defined at {__file__}:" in str(error) and "make it a def" in str(error)


# ---------------------------------------------------------------------------
# helpers in other files: the user's compile, an installed package's are refused
# ---------------------------------------------------------------------------
def _module(path: Path, text: str):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


HELPERS = "def triple(t):\n    return t * 3\n"


def _kernel_calling(fn):
    @ct.kernel
    def k(a):
        t = ct.load(a, index=(0,), shape=(16,))
        ct.store(a, index=(0,), tile=fn(t))
    return k


def test_helpers_of_the_users_other_files_compile(tmp_path):
    helpers = _module(tmp_path / "user_helpers_a.py", HELPERS)
    a = np.arange(16, dtype=np.float32)
    ct.launch(None, (1,), _kernel_calling(helpers.triple), (a,))
    np.testing.assert_array_equal(a, np.arange(16) * 3)


def test_an_installed_packages_function_is_refused_unless_it_imports_tileir(tmp_path,
                                                                            monkeypatch):
    """A function under site-packages is a library's; a module there that imports
    tileir holds helpers written for kernels, which compile."""
    site = tmp_path / "site-packages"
    (site / "somepkg").mkdir(parents=True)
    (site / "somepkg" / "__init__.py").write_text("")
    plain = _module(site / "somepkg" / "plain_helpers.py", HELPERS)
    tiled = _module(site / "somepkg" / "tile_helpers.py", "import tileir as ct\n" + HELPERS)
    plain.__name__ = plain.triple.__module__ = "somepkg.plain_helpers"
    monkeypatch.setattr(library, "_library_dirs", lambda: (str(site.resolve()) + "/",))
    library._is_library_file.cache_clear()       # (and again below: the true directories)
    kernel = _kernel_calling(plain.triple)
    error = refused_at_the_line(kernel, (F32,), TileUnsupportedFeatureError,
                                "cannot call somepkg.plain_helpers.triple", __file__)
    assert "the installed package 'somepkg'" in str(error)
    assert first_location(error) == (__file__, line_of(_kernel_calling, "fn(t)"))
    a = np.arange(16, dtype=np.float32)
    ct.launch(None, (1,), _kernel_calling(tiled.triple), (a,))
    np.testing.assert_array_equal(a, np.arange(16) * 3)
    library._is_library_file.cache_clear()


# ---------------------------------------------------------------------------
# the chain of calls from the kernel's line down
# ---------------------------------------------------------------------------
def inner_helper(t):
    return t + ct.zeros((32,), dtype=ct.float32)


def outer_helper(t):
    return inner_helper(t) * 2


@ct.kernel
def fails_two_levels_down(a):
    t = ct.load(a, index=(0,), shape=(16,))
    ct.store(a, index=(0,), tile=outer_helper(t))


@ct.function
def decorated_outer(t):
    nest = lambda u: inner_helper(u)                            # noqa: E731
    return nest(t)


@ct.kernel
def fails_through_a_function_and_a_lambda(a):
    t = ct.load(a, index=(0,), shape=(16,))
    ct.store(a, index=(0,), tile=decorated_outer(t))


def test_an_error_two_helpers_down_shows_the_chain_of_calls():
    error = refused_here(fails_two_levels_down, "do not broadcast", "+ ct.zeros((32,)",
                         fn=inner_helper, exc=TileTypeError)
    notes = [(file_line_col(n.location)[:2], n.message) for n in error.diagnostics[0].notes]
    assert notes == [
        ((__file__, line_of(fails_two_levels_down, "outer_helper(t)")),
         "kernel 'fails_two_levels_down' calls 'outer_helper' here"),
        ((__file__, line_of(outer_helper, "inner_helper(t)")),
         "'outer_helper' calls 'inner_helper' here")]
    text = str(error).splitlines()
    assert text[0].startswith(f"{__file__}:{line_of(inner_helper, '+ ct.zeros')}:")
    assert text[3].startswith(f"{__file__}:{notes[0][0][1]}:") and " note: " in text[3]
    assert text[4].startswith(f"{__file__}:{notes[1][0][1]}:")


def test_the_chain_goes_through_functions_and_lambdas():
    error = refused_here(fails_through_a_function_and_a_lambda, "do not broadcast",
                         "+ ct.zeros((32,)", fn=inner_helper, exc=TileTypeError)
    assert [n.message for n in error.diagnostics[0].notes] == [
        "kernel 'fails_through_a_function_and_a_lambda' calls 'decorated_outer' here",
        "'decorated_outer' calls 'lambda' here",
        "'lambda' calls 'inner_helper' here"]


# ---------------------------------------------------------------------------
# the kernel fuzzer checks it (test/fuzz/fuzz_kernels.py)
# ---------------------------------------------------------------------------
def test_the_kernel_fuzzer_finds_an_error_outside_the_users_file(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
    import fuzz_kernels
    from tileir.errors import SourceLocation
    case = tmp_path / "case_1.py"
    inside = TileTypeError("bad", SourceLocation(str(case), 3, 5))
    outside = TileTypeError("bad", SourceLocation(np.__file__, 232, 9))
    assert fuzz_kernels._outside(inside, case) is None
    assert "error outside the user's file" in fuzz_kernels._outside(outside, case)
    calls = {fuzz_kernels.generate(s)[0].count("np.") > 0 for s in range(60)
             if fuzz_kernels.generate(s)[1]["invalid"] == "name"}
    assert calls == {True, False}          # library calls among the unknown ones
