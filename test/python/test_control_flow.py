"""Control flow of cuTile kernels: `break` and `continue` in `for` and `while` loops,
early `return` in helpers and kernels, nested `def`s (closures), and helpers with
`*args` / `**kwargs`; each in the interpreter, in the GPU code the simulator runs
(sm_90a and sm_80) and in a cubin, against the same code run by Python; then the
errors, at the user's line.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import tileir as ct
from tileir.errors import (TileRecursionError, TileSyntaxError, TileTypeError,
                           TileUnsupportedFeatureError)

# (the interpreter, the simulated sm_90a and sm_80 code and their cubins)
from test_cutile_api import TARGETS, run_everywhere  # noqa: E402,F401


def frontend_ir(kernel, args) -> str:
    return str(kernel.compile(args, stage="frontend").module)


def line_of(fn, needle: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    for i, text in enumerate(lines):
        if needle in text:
            return first + i
    raise AssertionError(needle)


# ---------------------------------------------------------------------------
# break / continue in for loops
# ---------------------------------------------------------------------------
@ct.kernel
def for_exits(x, out, trace, n, stop):
    acc = ct.zeros((4,), ct.int32)
    last = -1
    for i in range(n):
        t = ct.load(x, (i,), shape=(4,))
        if i % 3 == 1:
            continue
        ct.store(trace, (i,), t)            # not after a continue, nor after the break
        if ct.sum(t) > stop:
            if i > 0:
                break
        acc = acc + t
        last = i
    ct.store(out, (0,), acc)
    ct.store(out, (1,), ct.full((4,), last, ct.int32))


def for_exits_reference(x, n, stop):
    trace = np.zeros_like(x)
    acc, last = np.zeros(4, np.int64), -1
    for i in range(n):
        t = x[4 * i:4 * i + 4]
        if i % 3 == 1:
            continue
        trace[4 * i:4 * i + 4] = t
        if t.sum() > stop:
            if i > 0:
                break
        acc = acc + t
        last = i
    return np.concatenate([acc, [last] * 4]), trace


@pytest.mark.parametrize("stop", [40, 150, 10**6])
def test_for_loops_break_and_continue_as_python_does(stop):
    x = np.arange(48, dtype=np.int32)
    n = 12
    want_out, want_trace = for_exits_reference(x, n, stop)
    args = (x, np.zeros(8, np.int32), np.zeros(48, np.int32), n, stop)
    for got in run_everywhere(for_exits, (1,), args, 1):
        np.testing.assert_array_equal(got, want_out)
    for got in run_everywhere(for_exits, (1,), args, 2):
        np.testing.assert_array_equal(got, want_trace)


def test_a_for_loop_with_a_break_stops_iterating():
    """It becomes an scf.while whose condition reads the carried break flag; a loop
    with only `continue` stays an scf.for."""
    text = frontend_ir(for_exits, (np.zeros(48, np.int32), np.zeros(8, np.int32),
                                   np.zeros(48, np.int32), 12, 0))
    assert "scf.while" in text and "scf.for" not in text, text
    text = frontend_ir(while_exits, (np.zeros(8, np.int32), np.zeros(4, np.int32),
                                     np.zeros(2, np.int32), 9, 4))
    assert text.count("scf.while") == 2


@ct.kernel
def maybe_early(x, out, n, EARLY: ct.Constant[bool]):
    acc = ct.zeros((4,), ct.int32)
    for i in range(n):
        t = ct.load(x, (i,), shape=(4,))
        if EARLY:
            if ct.sum(t) > 50:
                break
        acc = acc + t
    ct.store(out, (0,), acc)


@pytest.mark.parametrize("early", [False, True])
def test_a_break_compiled_away_leaves_a_counted_loop(early):
    """A break under a compile-time false condition keeps the loop an scf.for (loop
    passes see a counted loop); a live one makes it an scf.while."""
    x = np.arange(40, dtype=np.int32)
    args = (x, np.zeros(4, np.int32), 10, early)
    text = frontend_ir(maybe_early, args)
    assert ("scf.while" in text) == early and ("scf.for" in text) != early, text
    tiles = x.reshape(10, 4)
    want = tiles[:3].sum(0) if early else tiles.sum(0)      # tile 3 sums to 54 > 50
    for got in run_everywhere(maybe_early, (1,), args, 1):
        np.testing.assert_array_equal(got, want)


@ct.kernel
def nested_loops(out, n, m):
    tot = 0
    for i in range(n):
        for j in range(m):
            if j <= i:
                w = i * 10 + j              # defined where the loop goes on
            else:
                break                       # the inner loop only
            if (i + j) % 3 == 0:
                continue
            tot += w
        if i == 5:
            continue
        tot += 1000
    ct.store(out, (0,), tot)


def test_break_and_continue_belong_to_the_innermost_loop():
    def reference(n, m):
        tot = 0
        for i in range(n):
            for j in range(m):
                if j > i:
                    break
                if (i + j) % 3 == 0:
                    continue
                tot += i * 10 + j
            if i == 5:
                continue
            tot += 1000
        return tot
    for got in run_everywhere(nested_loops, (1,), (np.zeros(1, np.int32), 8, 6), 0):
        assert got[0] == reference(8, 6)


# ---------------------------------------------------------------------------
# break / continue in while loops
# ---------------------------------------------------------------------------
@ct.kernel
def while_exits(x, out, cnt, n, limit):
    i = 0
    s = 0
    # the condition runs before every trip, and not after the break
    while ct.atomic_add(cnt, (0,), 1) < limit:
        v = ct.load(x, (i,), shape=())
        i += 1
        if v % 2 == 0:
            continue
        ct.atomic_add(cnt, (1,), 1)         # odd values seen: not after a continue
        if v > 20:
            break
        s += v
    j = 0
    while True:
        j += 1
        if j * j > n:
            break
    ct.store(out, (0,), s)
    ct.store(out, (1,), i)
    ct.store(out, (2,), j)


def while_exits_reference(x, n, limit):
    cnt = [0, 0]
    i = s = 0
    while True:
        cnt[0] += 1
        if not cnt[0] - 1 < limit:
            break
        v = x[i]
        i += 1
        if v % 2 == 0:
            continue
        cnt[1] += 1
        if v > 20:
            break
        s += v
    j = 0
    while True:
        j += 1
        if j * j > n:
            break
    return [s, i, j, 0], cnt


@pytest.mark.parametrize("limit", [3, 8])
def test_while_loops_break_and_continue_as_python_does(limit):
    x = np.array([1, 4, 7, 31, 9, 2, 5, 3], np.int32)
    want_out, want_cnt = while_exits_reference(x, 19, limit)
    args = (x, np.zeros(4, np.int32), np.zeros(2, np.int32), 19, limit)
    for got in run_everywhere(while_exits, (1,), args, 1):
        np.testing.assert_array_equal(got, want_out)
    for got in run_everywhere(while_exits, (1,), args, 2):
        np.testing.assert_array_equal(got, want_cnt)


# ---------------------------------------------------------------------------
# early return
# ---------------------------------------------------------------------------
@ct.function
def first_above(x, n, thr):
    """(index, value) of the first of x[:n] but 12 above thr, else (-1, 0)."""
    for i in range(n):
        v = ct.load(x, (i,), shape=())
        if v == 12:
            continue
        if v > thr:
            return i, v
    return -1, 0


@ct.function
def scaled(t, bias=None, flag=False):
    if bias is None:                        # compile time: no branch in the IR
        return t
    if flag:
        return t * 2 + bias
    return t + bias


def pairs(n, m):                            # a plain helper, loops exited early
    tot = 0
    for i in range(n):
        j = 0
        while True:
            if j >= m:
                break
            if j > i:
                return tot + 100000
            tot += i * 10 + j
            j += 1
    return tot


@ct.kernel
def early_returns(x, out, n, blocks):
    b = ct.bid(0)
    if b >= blocks:
        return                              # the blocks past `blocks` store nothing
    idx, val = first_above(x, n, b * 10)
    t = ct.full((4,), b, ct.int32)
    ct.store(out, (b, 0), ct.full((4,), idx, ct.int32))
    ct.store(out, (b, 1), ct.full((4,), val, ct.int32))
    ct.store(out, (b, 2), scaled(t) + scaled(t, 100) + scaled(t, 7, b > 1))
    ct.store(out, (b, 3), ct.full((4,), pairs(b, 3), ct.int32))


def test_returns_end_helpers_and_kernel_blocks_early():
    x = np.array([1, 5, 12, 7, 30, 2, 45, 3], np.int32)
    grid, blocks = 7, 5
    want = np.full((grid, 4, 4), -7, np.int64)
    for b in range(blocks):
        idx, val = next(((i, int(v)) for i, v in enumerate(x) if v > b * 10 and v != 12),
                        (-1, 0))
        tot, done = 0, False
        for i in range(b):
            for j in range(3):
                if j > i:
                    tot, done = tot + 100000, True
                    break
                tot += i * 10 + j
            if done:
                break
        want[b] = [[idx] * 4, [val] * 4,
                   [b + (b + 100) + (b * 2 + 7 if b > 1 else b + 7)] * 4, [tot] * 4]
    args = (x, np.full((grid, 16), -7, np.int32), 8, blocks)
    for got in run_everywhere(early_returns, (grid,), args, 1):
        np.testing.assert_array_equal(got.reshape(grid, 4, 4), want)


def test_a_compile_time_return_costs_nothing():
    text = frontend_ir(early_returns, (np.zeros(8, np.int32), np.zeros((7, 16), np.int32), 8,
                                       5))
    helpers = text.split("func.func private @scaled")[1:]
    assert len(helpers) == 3
    assert "scf.if" not in helpers[0] and "scf.if" not in helpers[1], text


@ct.kernel
def return_in_kernel_loop(x, out, n):
    for i in range(n):
        v = ct.load(x, (i,), shape=())
        if v < 0:
            return                          # the loop stops, nothing after it runs
        ct.store(out, (i,), v * 2)
    ct.store(out, (n,), 1)


@pytest.mark.parametrize("neg", [None, 3])
def test_a_return_inside_a_kernel_loop_ends_the_block(neg):
    x = np.arange(1, 9, dtype=np.int32)
    if neg is not None:
        x[neg] = -1
    want = np.full(9, -5, np.int32)
    stop = 8 if neg is None else neg
    want[:stop] = x[:stop] * 2
    if neg is None:
        want[8] = 1
    for got in run_everywhere(return_in_kernel_loop, (1,), (x, np.full(9, -5, np.int32), 8),
                              1):
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------
# static_iter and lists: unrolled loops
# ---------------------------------------------------------------------------
@ct.kernel
def static_exits(x, out, limit):
    acc = 0
    for k in ct.static_iter(range(6)):
        if k == 1:
            continue                        # compile time: nothing after it in copy 1
        v = ct.load(x, (k,), shape=())
        if v > limit:
            break                           # run time: guards the copies after it
        acc += v
    ct.store(out, (0,), acc)


@pytest.mark.parametrize("limit", [4, 100])
def test_static_iter_loops_break_and_continue(limit):
    x = np.array([1, 2, 3, 9, 4, 5], np.int32)
    acc = 0
    for k in range(6):
        if k == 1:
            continue
        if x[k] > limit:
            break
        acc += x[k]
    for got in run_everywhere(static_exits, (1,), (x, np.zeros(1, np.int32), limit), 1):
        assert got[0] == acc


# ---------------------------------------------------------------------------
# nested functions
# ---------------------------------------------------------------------------
@ct.function
def apply_twice(f, t):
    return f(f(t))


@ct.kernel
def nested_defs(x, out):
    t = ct.load(x, (0,), shape=(8,))
    s = 2

    def scale(a, k=3, *, off=0):
        return a * k * s + off              # `s` as it is at the call

    def clip(a):                            # runtime control flow, an early return
        if ct.max(a) < 100:
            return a
        return ct.minimum(a, 100)

    def larger(a, b):
        return ct.maximum(a, b)

    def plus(a, b):
        return a + b

    s = 5
    ct.store(out, (0, 0), scale(t))
    ct.store(out, (1, 0), scale(t, 2, off=1))
    ct.store(out, (2, 0), apply_twice(lambda a: a + t, t))     # t goes along as an argument
    ct.store(out, (3, 0), apply_twice(scale, t))
    ct.store(out, (4, 0), clip(scale(t)))
    ct.store(out, (5, 0), ct.full((8,), ct.reduce(t, 0, larger, -1), ct.int32))
    ct.store(out, (6, 0), ct.scan(t, 0, plus, 0))


def test_nested_functions_close_over_the_kernels_names():
    x = np.arange(3, 11, dtype=np.int32)
    want = np.stack([x * 15, x * 10 + 1, 3 * x, x * 225, np.minimum(x * 15, 100),
                     np.full(8, x.max()), np.cumsum(x)])
    for got in run_everywhere(nested_defs, (1,), (x, np.zeros((7, 8), np.int32)), 1):
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------
# *args and **kwargs
# ---------------------------------------------------------------------------
@ct.function
def combine(*args, scale=1, **kw):
    total = args[0]
    for k in ct.static_iter(range(1, len(args))):
        total = total + args[k]
    total = total * scale
    if kw.get("bias") is not None:
        total = total + kw["bias"]
    return total


def forward(*args, **kw):                   # a plain helper passing both on
    return combine(*args, **kw)


@ct.kernel
def star_args(x, out):
    t = ct.load(x, (0,), shape=(8,))
    u = ct.load(x, (1,), shape=(8,))
    ct.store(out, (0, 0), combine(t, u))
    ct.store(out, (1, 0), combine(t, u, t, scale=2))
    ct.store(out, (2, 0), forward(t, u, scale=3, bias=u))
    ct.store(out, (3, 0), combine(t, bias=7))


def test_helpers_take_star_args_and_star_star_kwargs():
    x = np.arange(16, dtype=np.int32)
    t, u = x[:8], x[8:]
    want = np.stack([t + u, (2 * t + u) * 2, (t + u) * 3 + u, t + 7])
    for got in run_everywhere(star_args, (1,), (x, np.zeros((4, 8), np.int32)), 1):
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------
# Exits with tuples and dataclasses (aggregates), structured helper arguments
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Tally:
    total: object
    count: object
    label: str = "tally"            # a compile-time field: the loop keeps it as it is


@ct.kernel
def aggregates_that_break(x, out, stop):
    st = (ct.zeros((4,), ct.int32), 0)          # (sum, trips): carried by its leaves
    for i in range(8):
        t = ct.load(x, (i,), shape=(4,))
        if ct.sum(t) > stop:
            break
        st = (st[0] + t, st[1] + 1)
    tally = Tally(ct.zeros((4,), ct.int32), 0)
    j = 0
    while j < 8:
        t = ct.load(x, (j,), shape=(4,))
        j += 1
        if j % 2 == 0:
            continue
        if ct.sum(t) > stop:
            break
        tally = Tally(tally.total + t, tally.count + 1, tally.label)
    ct.store(out, (0, 0), st[0])
    ct.store(out, (1, 0), ct.full((4,), st[1], ct.int32))
    ct.store(out, (2, 0), tally.total)
    five = 5 if tally.label == "tally" else 0      # (the label folds)
    ct.store(out, (3, 0), ct.full((4,), tally.count + five, ct.int32))


def aggregates_that_break_reference(x, stop):
    rows = x.reshape(8, 4)
    acc, trips = np.zeros(4, np.int64), 0
    for i in range(8):
        if rows[i].sum() > stop:
            break
        acc, trips = acc + rows[i], trips + 1
    total, count, j = np.zeros(4, np.int64), 0, 0
    while j < 8:
        t = rows[j]
        j += 1
        if j % 2 == 0:
            continue
        if t.sum() > stop:
            break
        total, count = total + t, count + 1
    return np.stack([acc, [trips] * 4, total, [count + 5] * 4])


@pytest.mark.parametrize("stop", [30, 70, 10**6])
def test_loops_carrying_tuples_and_dataclasses_break_and_continue(stop):
    x = np.arange(32, dtype=np.int32)
    want = aggregates_that_break_reference(x, stop)
    args = (x, np.zeros((4, 4), np.int32), stop)
    for got in run_everywhere(aggregates_that_break, (1,), args, 1):
        np.testing.assert_array_equal(got, want)


@dataclasses.dataclass(frozen=True)
class Found:
    tile: object
    index: object
    how: str


@ct.function
def first_row_above(x, limit):
    for i in range(8):
        t = ct.load(x, (i,), shape=(4,))
        if ct.sum(t) > limit:
            return t, i                             # a tuple, from inside the loop
    return ct.zeros((4,), ct.int32), -1


@ct.function
def search(x, limit):
    for i in range(8):
        t = ct.load(x, (i,), shape=(4,))
        if ct.sum(t) > limit:
            return Found(t, i, "scan")              # a dataclass, from inside the loop
    return Found(ct.full((4,), -1, ct.int32), 8, "scan")


@ct.kernel
def early_aggregate_returns(x, out, limit):
    t, i = first_row_above(x, limit)
    ct.store(out, (0, 0), t)
    ct.store(out, (1, 0), ct.full((4,), i, ct.int32))
    f = search(x, limit)
    ct.store(out, (2, 0), f.tile + (4 if f.how == "scan" else 0))

    def pick(a):                                    # inline: a runtime early return
        if ct.sum(a) > limit:
            return Found(a, 1, "inline")
        return Found(a * 0, 0, "inline")
    g = pick(ct.load(x, (1,), shape=(4,)))
    ct.store(out, (3, 0), g.tile + ct.full((4,), g.index * 100, ct.int32))


def early_aggregate_returns_reference(x, limit):
    rows = x.reshape(8, 4)
    hit = next((i for i in range(8) if rows[i].sum() > limit), None)
    first = rows[hit] if hit is not None else np.zeros(4, np.int64)
    index = hit if hit is not None else -1
    found = rows[hit] + 4 if hit is not None else np.full(4, -1 + 4)
    g = rows[1] + 100 if rows[1].sum() > limit else np.zeros(4, np.int64)
    return np.stack([first, [index] * 4, found, g])


@pytest.mark.parametrize("limit", [10, 60, 10**6])
def test_helpers_return_tuples_and_dataclasses_early(limit):
    x = np.arange(32, dtype=np.int32)
    want = early_aggregate_returns_reference(x, limit)
    args = (x, np.zeros((4, 4), np.int32), limit)
    for got in run_everywhere(early_aggregate_returns, (1,), args, 1):
        np.testing.assert_array_equal(got, want)


@ct.function
def find_row(x, lim):
    for i in range(8):
        t = ct.load(x, (i,), shape=(4,))
        if ct.sum(t) > lim:
            return t, None, i, ct.float32           # compile-time items: not carried
    return ct.zeros((4,), ct.int32), None, -1, ct.float32


@ct.kernel
def compile_time_items_leave_loops(x, out, lim):
    t, nothing, i, d = find_row(x, lim)

    def source():                                   # an array from before the loop
        for j in range(3):
            if ct.sum(ct.load(x, (j,), shape=(4,))) > lim:
                return x, j
        return x, 7
    arr, j = source()
    u = ct.load(arr, (0,), shape=(4,))
    ct.store(out, (0,), (t + i + j + u + (0 if nothing is None else 1000)).astype(d))


@pytest.mark.parametrize("lim", [10, 30, 10**6])
def test_returns_from_loops_keep_their_compile_time_items(lim):
    x = np.arange(32, dtype=np.int32)
    rows = x.reshape(8, 4)
    i = next((k for k in range(8) if rows[k].sum() > lim), -1)
    j = next((k for k in range(3) if rows[k].sum() > lim), 7)
    t = rows[i] if i >= 0 else np.zeros(4)
    want = (t + i + j + rows[0]).astype(np.float32)
    args = (x, np.zeros(4, np.float32), lim)
    for got in run_everywhere(compile_time_items_leave_loops, (1,), args, 1):
        np.testing.assert_array_equal(got, want)


@dataclasses.dataclass(frozen=True)
class Affine:
    scale: object
    shift: object

    def apply(self, t):
        return t * self.scale + self.shift


@ct.function
def with_options(t, **kw):
    if "bias" in kw:                                # a **kwargs dict's keys
        t = t + kw["bias"]
    if "scale" not in kw:
        return t
    return t * kw["scale"]


@ct.kernel
def closures_over_aggregates(x, out):
    t = ct.load(x, (0,), shape=(4,))
    pair = (t, 3)
    aff = Affine(t, 1)

    def mix(a):                                     # captures a tuple and a dataclass
        return a * pair[1] + pair[0] + aff.shift

    ct.store(out, (0, 0), mix(t))
    ct.store(out, (1, 0), apply_twice(mix, t))      # the captures go along as arguments
    ct.store(out, (2, 0), apply_twice(aff.apply, t))   # a dataclass's bound method
    ct.store(out, (3, 0), with_options(t, bias=2) + with_options(t, bias=t, scale=3))


def test_nested_functions_capture_tuples_and_dataclasses():
    x = np.arange(4, dtype=np.int32) + 1
    mix = x * 3 + x + 1
    want = np.stack([mix, mix * 3 + x + 1, (x * x + 1) * x + 1,
                     x + 2 + (x + x) * 3])
    for got in run_everywhere(closures_over_aggregates, (1,), (x, np.zeros((4, 4), np.int32)),
                              1):
        np.testing.assert_array_equal(got, want)


@ct.function
def labels_differ(t, c):
    if c:
        return Found(t, 0, "hit")
    return Found(t, 1, "miss")


@ct.function
def returns_a_closure(t):
    def g(a):
        return a + t
    return g, t


@ct.kernel
def bad_aggregates(x, MODE: ct.Constant[int]):
    t = ct.load(x, (0,), shape=(4,))
    c = ct.bid(0) > 0
    if MODE == 0:
        ct.store(x, (0,), labels_differ(t, c).tile)
    elif MODE == 1:
        ct.store(x, (0,), returns_a_closure(t)[1])
    else:
        def has(**kw):
            return c in kw
        has(a=t)


@pytest.mark.parametrize("mode,exc,where,message", [
    (0, TileTypeError, (labels_differ, 'return Found(t, 1, "miss")'),
     "this return gives str 'miss' where the return at line {first} gives str 'hit'; every "
     "return of 'labels_differ' must give the same compile-time items"),
    (1, TileTypeError, (returns_a_closure, "return g, t"),
     "a @function returns tiles, scalars, numbers and compile-time values such as strings "
     "and dtypes (or tuples and dataclass instances of them), got the nested function 'g'"),
    (2, TileTypeError, (bad_aggregates, "return c in kw"),
     "a dict's keys are compile-time: 'in' needs a compile-time key, got a bool_ scalar"),
])
def test_errors_of_exits_with_aggregates(mode, exc, where, message):
    with pytest.raises(exc) as info:
        bad_aggregates.compile((np.zeros(4, np.int32), mode), stage="frontend")
    text = str(info.value)
    fn, needle = where
    fn = getattr(fn, "fn", fn)
    line = line_of(fn, needle)
    message = message.format(first=line_of(fn, 'return Found(t, 0, "hit")') if mode == 0
                             else 0)
    assert f"{__file__}:{line}:" in text, text
    assert message in text, text


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------
@ct.function
def returns_two_dtypes(t, c):
    if c:
        return t
    return ct.astype(t, ct.float16)


@ct.function
def returns_two_shapes(t, c):
    for i in range(4):
        if c > i:
            return t
    return ct.full((8,), 0.0, ct.float32)


@ct.function
def returns_tuple_or_not(t, c):
    if c:
        return t, t
    return t


@ct.function
def may_fall_off(t, c):
    if c:
        return t


@ct.kernel
def bad_control(x, MODE: ct.Constant[int]):
    t = ct.load(x, (0,), shape=(4,))
    c = ct.bid(0) > 0
    if MODE == 0:
        ct.store(x, (0,), returns_two_dtypes(t, c))
    elif MODE == 1:
        ct.store(x, (0,), returns_two_shapes(t, c))
    elif MODE == 2:
        ct.store(x, (0,), returns_tuple_or_not(t, c))
    elif MODE == 3:
        ct.store(x, (0,), may_fall_off(t, c))
    elif MODE == 4:
        return t
    elif MODE == 5:
        @ct.function
        def decorated(a):
            return a
    elif MODE == 6:
        def forever(a):
            return forever(a)
        forever(t)
    elif MODE == 7:
        def early(a):
            b = a + later   # noqa: F821
            later = 1   # noqa: F841
            return b
        early(t)
    elif MODE == 8:
        def one(a):
            return a
        one(t, t)
    elif MODE == 9:
        def pick(**kw):
            return kw["b"]
        pick(a=t)
    else:
        if c:
            u = t
        else:
            w = t   # noqa: F841
        ct.store(x, (0,), u)


@pytest.mark.parametrize("mode,exc,where,message", [
    (0, TileTypeError, (returns_two_dtypes, "return ct.astype"),
     "this return gives a float16 tile of shape (4,) but the return at line {line0} gives a "
     "float32 tile of shape (4,); every return of 'returns_two_dtypes' must give the same "
     "dtypes and shapes"),
    (1, TileTypeError, (returns_two_shapes, "return ct.full"),
     "this return gives a float32 tile of shape (8,) but the return at line {line0} gives a "
     "float32 tile of shape (4,)"),
    (2, TileTypeError, (returns_tuple_or_not, "    return t\n"),
     "this return gives a float32 tile of shape (4,) but the return at line {line0} gives a "
     "tuple of 2"),
    (3, TileTypeError, (may_fall_off, "if c:"),
     "'may_fall_off' returns a float32 tile of shape (4,) (line {line}) but can also reach its "
     "end, which returns None; return a value on every path"),
    (4, TileSyntaxError, (bad_control, "return t"),
     "a kernel cannot return a value; store results into an array"),
    (5, TileUnsupportedFeatureError, (bad_control, "@ct.function"),
     "a nested function takes no decorator"),
    (6, TileRecursionError, (bad_control, "return forever(a)"),
     "recursive call to the nested function 'forever' at line {line_m1}"),
    (7, TileSyntaxError, (bad_control, "b = a + later"),
     "'later' is used before it is assigned in 'early'"),
    (8, TileTypeError, (bad_control, "one(t, t)"),
     "the nested function 'one' takes 1 arguments, got 2"),
    (9, TileTypeError, (bad_control, '["b"]'),
     "str 'b' is not a key of the dict (its keys: 'a')"),
    (10, TileSyntaxError, (bad_control, "(0,), u)"),
     "'u' is assigned in only one branch of the 'if' at line"),
])
def test_control_flow_errors_point_at_the_source(mode, exc, where, message):
    with pytest.raises(exc) as info:
        bad_control.compile((np.zeros(4, np.float32), mode), stage="frontend")
    text = str(info.value)
    fn, needle = where
    fn = getattr(fn, "fn", fn)
    line = line_of(fn, needle)
    first_return = line_of(fn, "return t")
    message = message.format(line0=first_return, line=first_return, line_m1=line - 1)
    assert f"{__file__}:{line}:" in text, text
    assert message in text, text
    assert "Traceback" not in text


# ---------------------------------------------------------------------------
# Kernel tuple arguments, raw memory and foreign pointers with exits and helpers
# ---------------------------------------------------------------------------
@ct.function
def scaled_tile(t, i):
    """A kernel's tuple argument (or a tuple rebuilt from one) passed to a helper."""
    x, (scale, n) = t
    return ct.load(x, (i,), shape=(4,)) * scale + ct.astype(n, ct.float32)


@ct.function
def next_state(t):
    x, (scale, n) = t
    return scale * 2.0, n + 1


@ct.kernel
def tuple_argument_loop(out, t: tuple[ct.Array, tuple[float, int]], limit):
    acc = ct.zeros((4,), ct.float32)
    state = t
    for i in range(8):
        if ct.sum(acc) > limit:
            break
        acc = acc + scaled_tile(state, i)
        x, (scale, n) = state
        if n == 2:
            continue
        if i % 2:
            state = (x, (scale, n + 1))
        else:
            state = (x, next_state(state))
    x, (scale, n) = state
    ct.store(out, (0, 0), ct.reshape(acc, (1, 4)))
    ct.store(out, (1, 0), ct.full((1, 4), scale, ct.float32))
    ct.store(out, (2, 0), ct.full((1, 4), n, ct.float32))
    ct.store(out, (3, 0), ct.reshape(scaled_tile(t, 0), (1, 4)))


def _tuple_argument_loop(x, scale, n, limit):
    acc = np.zeros(4, np.float32)
    for i in range(8):
        if acc.sum() > limit:
            break
        acc = acc + x[4 * i:4 * i + 4] * scale + n
        if n == 2:
            continue
        if i % 2:
            n += 1
        else:
            scale, n = scale * 2.0, n + 1
    return acc, scale, n


@pytest.mark.parametrize("limit", [1e9, 60.0])
def test_a_tuple_argument_is_carried_through_a_breaking_loop_and_passed_to_helpers(limit):
    """A kernel's tuple argument (host's TupleParam) is the tuple kernel code builds:
    a loop that breaks and continues carries its run-time leaves (its array stays),
    helpers take it through structured.py, a runtime `if` merges it."""
    x = np.arange(32, dtype=np.float32) / 4
    args = (np.zeros((4, 4), np.float32), (x, (0.5, 0)), limit)
    acc, scale, n = _tuple_argument_loop(x, 0.5, 0, limit)
    for got in run_everywhere(tuple_argument_loop, (1,), args, 0):
        np.testing.assert_allclose(got[0], acc, rtol=1e-6)
        np.testing.assert_array_equal(got[1], scale)
        np.testing.assert_array_equal(got[2], n)
        np.testing.assert_allclose(got[3], x[:4] * 0.5, rtol=1e-6)
    assert "scf.while" in frontend_ir(tuple_argument_loop, args)


@ct.function
def raw_sum(mem, offsets):
    """Raw memory as a helper's argument."""
    return ct.sum(mem.load_offset(offsets))


@ct.function
def apply_to(fn, offsets):
    """A nested function capturing raw memory, passed to a helper."""
    return fn(offsets)


@ct.kernel
def raw_in_nested_defs(x, out, limit):
    raw = x.get_raw_memory()
    offsets = ct.arange(4, dtype=ct.int32)

    def window(start, mem=raw):             # raw memory as a default and a capture
        return mem.load_offset(offsets + start) + raw.load_offset(offsets + start)

    def bump(start):
        raw.atomic_add_offset(offsets + start, 1.0)

    total = ct.zeros((4,), ct.float32)
    for i in range(4):
        if raw_sum(raw, offsets + 4 * i) > limit:
            break
        total = total + window(4 * i)
        bump(4 * i)
    ct.store(out, (0, 0), ct.reshape(total, (1, 4)))
    ct.store(out, (1, 0), ct.reshape(apply_to(lambda o: raw.load_offset(o) * 2.0,
                                              offsets), (1, 4)))


@pytest.mark.parametrize("limit", [1e9, 30.0])
def test_raw_memory_enters_nested_defs_and_helpers(limit):
    """Raw memory (host's RawMemoryValue, a structured kind here) captured by nested
    defs (also as a default), used in a loop that breaks, passed to a helper directly
    and inside a lambda's captures."""
    x = np.arange(16, dtype=np.float32)
    args = (x, np.zeros((2, 4), np.float32), limit)
    want_x, total = x.copy(), np.zeros(4, np.float32)
    for i in range(4):
        if want_x[4 * i:4 * i + 4].sum() > limit:
            break
        total += 2 * want_x[4 * i:4 * i + 4]
        want_x[4 * i:4 * i + 4] += 1
    for got in run_everywhere(raw_in_nested_defs, (1,), args, 1):
        np.testing.assert_array_equal(got[0], total)
        np.testing.assert_array_equal(got[1], want_x[:4] * 2)
    for got in run_everywhere(raw_in_nested_defs, (1,), args, 0):
        np.testing.assert_array_equal(got, want_x)


@dataclasses.dataclass(frozen=True)
class View:
    pointer: object
    length: object


@ct.function
def pointer_and_length(a, k):
    """A foreign pointer inside a tuple and a dataclass instance, returned."""
    p = a.foreign_pointer
    if k > 0:
        return (p, a.shape[0] - k), View(p, k)
    return (p, a.shape[0]), View(p, 1)


@ct.function
def load_view(v, pair):
    """The returned values passed on to a helper: a dataclass and a tuple holding
    pointers."""
    p, n = pair
    whole = ct.Array.from_foreign(p, (n,), (1,))
    head = ct.Array.from_foreign(v.pointer, (v.length,), (1,))
    return (ct.load(whole, (0,), shape=(8,), padding_mode=ct.PaddingMode.ZERO) +
            ct.load(head, (0,), shape=(8,), padding_mode=ct.PaddingMode.ZERO))


@ct.kernel
def pointers_through_helpers(x, out, k):
    pair, v = pointer_and_length(x, k)
    ct.static_assert(pair[0].dtype == ct.foreign_pointer_dtype(ct.float32))
    ct.store(out, (0,), load_view(v, pair))


@pytest.mark.parametrize("k", [3, 0])
def test_foreign_pointers_return_from_helpers_inside_tuples_and_dataclasses(k):
    x = np.arange(1, 9, dtype=np.float32)
    args = (x, np.zeros(8, np.float32), k)
    n, m = (8 - k, k) if k > 0 else (8, 1)
    want = np.where(np.arange(8) < n, x, 0) + np.where(np.arange(8) < m, x, 0)
    for got in run_everywhere(pointers_through_helpers, (1,), args, 1):
        np.testing.assert_array_equal(got, want)


@ct.function
def raw_of(a, n):
    if n > 0:
        return a.slice(0, 1, 8).get_raw_memory()
    return a.get_raw_memory()


@ct.function
def either_pointer(a, b, c):
    if c > 0:
        return a.foreign_pointer
    return b.foreign_pointer


@ct.function
def pointer_from_loop(a, n):
    for i in range(n):
        return a.slice(0, i, 8).foreign_pointer
    return a.foreign_pointer


@ct.kernel
def bad_host_values(x, n, MODE: ct.Constant[int]):
    p = x.foreign_pointer
    if MODE == 4:
        a = x
        if n > 0:
            a = ct.Array.from_foreign(p, (4,), (1,))
        ct.store(a, (0,), 1.0)
    elif MODE == 5:
        a = x
        for j in range(n):
            a = ct.Array.from_foreign(p, (4,), (1,))
        ct.store(a, (0,), 1.0)
    elif MODE == 6:
        q = p if n > 0 else x
        ct.Array.from_foreign(q, (4,), (1,))
    else:
        t = (p, n)
        if t == (p, n):
            pass


@pytest.mark.parametrize("mode,exc,needle,message", [
    (4, TileUnsupportedFeatureError, "if n > 0:",
     "'a' is a 1-d float32 array after one branch of a runtime 'if' and a 1-d float32 array "
     "after the other: a 1-d float32 array is made inside the 'if' or loop that chooses; the "
     "arrays a run-time choice picks from must exist before it"),
    (5, TileUnsupportedFeatureError, "for j in range(n):",
     "'a' is a 1-d float32 array before the loop and a 1-d float32 array after a trip: a "
     "1-d float32 array is not among the arrays the choice can hold (it is made inside the "
     "loop or 'if' that chooses)"),
    (6, TileTypeError, "q = p if n > 0",
     "a runtime condition chooses between a foreign pointer (foreign_pointer[float32]) and a "
     "1-d float32 array: a foreign pointer (foreign_pointer[float32]) and a 1-d float32 "
     "array are not of one kind"),
    (7, TileTypeError, "if t == (p, n):",
     "operator '==' does not apply to a foreign pointer"),
])
def test_host_values_with_exits_and_helpers_are_refused_by_name(mode, exc, needle, message):
    """What cannot be done with raw memory and foreign pointers across helpers, loops and
    runtime ifs: a located error naming it."""
    with pytest.raises(exc) as info:
        bad_host_values.compile((np.zeros(16, np.float32), 4, mode), stage="frontend")
    text = str(info.value)
    fn = bad_host_values
    assert f"{__file__}:{line_of(getattr(fn, 'fn', fn), needle)}:" in text, text
    assert message in text, text


@ct.kernel
def loop_over_tuples(xs, ys, out, limit):
    x0, x1, x2 = xs
    total = ct.zeros((4,), ct.float32)
    for x, (y, w) in ((x0, (ys[0], 1.0)), (x1, (ys[1], 2.0)), (x2, (ys[0], 3.0))):
        if ct.sum(total) > limit:
            break
        t = ct.load(x, (0,), shape=(4,)) * w
        ct.store(y, (0,), t)
        total = total + t
    ct.store(out, (0,), total)


@pytest.mark.parametrize("limit", [1e9, 10.0])
def test_a_for_loop_over_a_tuple_unrolls_and_breaks(limit):
    """`for x, (y, w) in (...)` over a tuple holding a tuple argument's arrays: one copy
    of the body per item, unpacked; a runtime break guards the later copies.  (cuTile
    1.7 refuses loops over tuples; tileir unrolls them as it does `static_iter`.)"""
    xs = tuple(np.full(4, v, np.float32) for v in (1.0, 2.0, 3.0))
    args = (xs, [np.zeros(4, np.float32), np.zeros(4, np.float32)], np.zeros(4, np.float32),
            limit)
    total, ys = np.zeros(4, np.float32), [np.zeros(4, np.float32), np.zeros(4, np.float32)]
    for x, (y, w) in ((xs[0], (0, 1.0)), (xs[1], (1, 2.0)), (xs[2], (0, 3.0))):
        if total.sum() > limit:
            break
        ys[y][:] = x * w
        total = total + x * w
    for got in run_everywhere(loop_over_tuples, (1,), args, 2):
        np.testing.assert_array_equal(got, total)
    for got, want in zip(args[1], ys):          # (each run wrote the same list's arrays)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(TileUnsupportedFeatureError, match="a for loop runs over range"
                       r"\(...\), a tuple or a list of arrays, got a 1-d float32 array"):
        ct.kernel(_loop_over_an_array).compile((xs[0],), stage="frontend")


def _loop_over_an_array(x):
    for a in x:
        pass


# ---------------------------------------------------------------------------
# Helpers that return arrays; runtime conditional expressions of tuples
# ---------------------------------------------------------------------------
def pick(a, b, first):                      # a plain helper, as cuTile allows
    return a if first else b


@ct.function
def window_of(a, start):
    return a.slice(0, start, start + 8)


def view_and_array(a):
    return a.tiled_view(8), a


def picked_twice(a, b, first):
    return pick(pick(a, b, first), a, True)


@ct.kernel
def helpers_return_arrays(x, y, out, FIRST: ct.Constant[int], start):
    src = picked_twice(x, y, FIRST)
    t = ct.load(src, (0,), (8,))
    t2 = ct.load(window_of(src, start), (0,), (8,))
    tv, same = view_and_array(out)
    tv.store(0, t)
    tv.store(1, t2)
    ct.store(same, (2,), t + t2)
    ct.store(out, (3,), ct.load(pick(y, x, FIRST), (3,), (8,)))     # the other array


@pytest.mark.parametrize("first", [0, 1])
def test_helpers_return_arrays_slices_and_views(first, rng):
    """A helper (plain or @function) may return an array, a slice, or a tuple holding a
    tiled view, as in cuTile: such a helper is compiled inline at each call.  Which
    array it returns must be known at compile time."""
    x, y = (rng.standard_normal(32).astype(np.float32) for _ in range(2))
    start = int(rng.integers(0, 24))
    src, other = (x, y) if first else (y, x)
    want = np.concatenate([src[:8], src[start:start + 8], src[:8] + src[start:start + 8],
                           other[24:]])
    args = (x, y, np.full(32, np.nan, np.float32), first, start)
    for got in run_everywhere(helpers_return_arrays, (1,), args, 2):
        np.testing.assert_array_equal(got, want)
    text = frontend_ir(helpers_return_arrays, args)
    assert "func.call" not in text and "@window_of" not in text, text


def pick_at_run_time(a, b, n):
    if n > 0:
        return a
    return b


@ct.kernel
def runtime_choices(x, y, out, n, start):
    a = x if n > 0 else y                                   # whole arrays
    s = x.slice(0, start, start + 8) if n > 1 else y        # a slice or an array
    if n > 2:                                               # statement form, in a tuple
        pair = (x.tiled_view(8), 1.0)
    else:
        pair = (y.tiled_view(8), 2.0)
    raw = pick_at_run_time(x, y.slice(0, start, 48), n - 3).get_raw_memory()
    p = x.foreign_pointer if n > 0 else y.slice(0, 8, 16).foreign_pointer
    q = either_pointer(x, y, n - 1)                          # a @function's (made inside)
    w = out if n > 0 else y                                  # a store through a choice
    ct.store(out, (0,), ct.load(a, (0,), (8,)))
    ct.store(out, (1,), ct.load(s, (0,), (8,)))
    tv, weight = pair
    ct.store(out, (2,), tv.load(1) * weight)
    ct.store(out, (3,), raw.load_offset(ct.arange(8, dtype=ct.int32) + 16))
    ct.store(out, (4,), ct.load(ct.Array.from_foreign(p, (8,), (1,)), (0,), (8,)))
    ct.store(w, (5,), ct.load(a, (0,), (8,)) + 1.0)
    ct.store(out, (6,), ct.load(ct.Array.from_foreign(q, (8,), (1,)), (0,), (8,)))
    ct.store(out, (7,), raw_of(x, n).load_offset(ct.arange(8, dtype=ct.int32) + 2))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_a_runtime_condition_chooses_between_arrays_views_and_pointers(n, rng):
    """As cuTile allows: `a if c else b` of arrays, slices, tiled views, raw memory and
    foreign pointers; a runtime `if` assigning one or the other; a helper returning one
    or the other.  The arrays are selected by `tile.select_array`, a slice's bounds and
    a pointer by `arith.select` or as the if's results."""
    x, y = (rng.standard_normal(48).astype(np.float32) for _ in range(2))
    start = int(rng.integers(0, 16))
    a = x if n > 0 else y
    s = x[start:start + 8] if n > 1 else y[:8]
    tv, weight = (x, 1.0) if n > 2 else (y, 2.0)
    raw = x if n > 3 else y[start:]
    p = x[:8] if n > 0 else y[8:16]
    want = np.concatenate([a[:8], s, tv[8:16] * weight, raw[16:24], p,
                           a[:8] + 1 if n > 0 else np.full(8, np.nan, np.float32),
                           x[:8] if n > 1 else y[:8], x[3:11] if n > 0 else x[2:10]])
    args = (x, y, np.full(64, np.nan, np.float32), n, start)
    for got in run_everywhere(runtime_choices, (1,), args, 2):
        np.testing.assert_array_equal(got, want)
    if n == 0:                                  # the store through the choice hit y
        got_y = y.copy()
        ct.launch(None, (1,), runtime_choices, (x, got_y, np.zeros(64, np.float32), n, start))
        np.testing.assert_array_equal(got_y[40:], y[:8] + 1)
    assert "tile.select_array" in frontend_ir(runtime_choices, args)


@ct.kernel
def arrays_through_loops(x, y, out, n):
    src, dst = x, y                         # swapped each trip: whole arrays stay whole
    for i in range(n):
        ct.store(dst, (0,), ct.load(src, (0,), (8,)) + 1.0)
        src, dst = dst, src
    window = x                              # a slice assigned: the loop carries bounds
    k = 0
    while k < n:
        window = x if k % 2 == 0 else y.slice(0, k, k + 8)
        k += 1
    raw = x.get_raw_memory()                # raw memory and pointers: their addresses
    p = y.foreign_pointer
    for i in range(n):
        if i == 2:
            break
        raw = y.get_raw_memory() if i % 2 == 0 else x.get_raw_memory()
        p = x.slice(0, i + 1, 32).foreign_pointer
    ct.store(out, (0,), ct.load(src, (0,), (8,)))
    ct.store(out, (1,), ct.load(window, (0,), (8,)))
    ct.store(out, (2,), raw.load_offset(ct.arange(8, dtype=ct.int32) + 8))
    ct.store(out, (3,), ct.load(ct.Array.from_foreign(p, (8,), (1,)), (0,), (8,)))


def arrays_through_loops_reference(x, y, n):
    x, y = x.copy(), y.copy()
    src, dst = x, y
    for i in range(n):
        dst[:8] = src[:8] + 1
        src, dst = dst, src
    window = x
    for k in range(n):
        window = x if k % 2 == 0 else y[k:k + 8]
    raw, p = x, y
    for i in range(min(n, 2)):
        raw = y if i % 2 == 0 else x
        p = x[i + 1:]
    return np.concatenate([src[:8], window[:8], raw[8:16], p[:8]]), x, y


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_loops_carry_arrays_slices_raw_memory_and_pointers(n, rng):
    """As cuTile allows: a loop that reassigns an array (a swap of two), a slice, raw
    memory or a foreign pointer carries it as the parts of a run-time choice among the
    arrays before the loop (`tile.select_array`), a slice's bounds and the addresses."""
    x, y = (rng.standard_normal(32).astype(np.float32) for _ in range(2))
    want, want_x, want_y = arrays_through_loops_reference(x, y, n)
    args = (x, y, np.full(32, np.nan, np.float32), n)
    for got in run_everywhere(arrays_through_loops, (1,), args, 2):
        np.testing.assert_array_equal(got, want)
    got_x, got_y = x.copy(), y.copy()
    ct.launch(None, (1,), arrays_through_loops, (got_x, got_y, np.zeros(32, np.float32), n))
    np.testing.assert_array_equal(got_x, want_x)
    np.testing.assert_array_equal(got_y, want_y)
    text = frontend_ir(arrays_through_loops, args)
    assert text.count("tile.select_array") >= 2, text


@dataclasses.dataclass(frozen=True)
class Buffers:
    src: object
    dst: object
    scale: object


@ct.kernel
def aggregates_holding_arrays_through_loops(x, y, out, n):
    pair = (x, y)                           # a trip replaces its arrays: carried
    bufs = Buffers(x, y, 1.0)
    kept = (x, 0)                           # its array stays: not chosen
    at = (x.foreign_pointer, 0)
    for i in range(n):
        pair = (pair[1], pair[0])
        bufs = Buffers(bufs.dst, bufs.src, bufs.scale * 2.0)
        kept = (kept[0], kept[1] + 1)
        at = (x.slice(0, i + 1, 32).foreign_pointer, at[1] + 1)
    ct.store(out, (0,), ct.load(pair[0], (0,), (8,)))
    ct.store(out, (1,), ct.load(bufs.src, (0,), (8,)) * bufs.scale)
    ct.store(out, (2,), ct.load(kept[0], (0,), (8,)) + kept[1])
    ct.store(out, (3,), ct.load(ct.Array.from_foreign(at[0], (8,), (1,)), (0,), (8,)) + at[1])


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_loops_carry_arrays_inside_tuples_and_dataclasses(n, rng):
    """An array or pointer inside a tuple or dataclass instance that a trip replaces is
    carried as a run-time choice (the loop compiled again so); one that stays is not."""
    x, y = (rng.standard_normal(32).astype(np.float32) for _ in range(2))
    s = x if n % 2 == 0 else y
    want = np.concatenate([s[:8], s[:8] * 2.0 ** n, x[:8] + n, x[n:n + 8] + n])
    args = (x, y, np.full(32, np.nan, np.float32), n)
    for got in run_everywhere(aggregates_holding_arrays_through_loops, (1,), args, 2):
        np.testing.assert_array_equal(got, want)
    text = frontend_ir(aggregates_holding_arrays_through_loops, args)
    assert text.count("tile.select_array") == 8, text     # pair's two, bufs' two; twice


@dataclasses.dataclass(frozen=True)
class Pair:
    lo: object
    hi: object
    name: str = "pair"


@ct.kernel
def runtime_ternaries_of_tuples(x, out, n):
    t = ct.load(x, (0,), (8,))
    a, (b, kind) = (t, (t + 1, "f")) if n > 0 else (t * 2, (t - 1.0, "f"))
    scale, = (2,) if n > 1 else (3.5,)
    p = Pair(t, a) if n > 2 else Pair(a, t + b)
    ct.store(out, (0,), (a + b) * scale)
    ct.store(out, (1,), p.lo - p.hi)


@pytest.mark.parametrize("n", [-1, 1, 2, 3])
def test_a_runtime_conditional_expression_chooses_between_tuples(n, rng):
    """`(x, y) if c else (u, v)` with a runtime `c`: item by item, through nested
    tuples and dataclass instances (numbers promoted, equal compile-time items kept)."""
    x = rng.standard_normal(8).astype(np.float32)
    a, b = (x, x + 1) if n > 0 else (x * 2, x - 1)
    scale = np.float32(2 if n > 1 else 3.5)
    lo, hi = (x, a) if n > 2 else (a, x + b)
    want = np.concatenate([(a + b) * scale, lo - hi])
    args = (x, np.full(16, np.nan, np.float32), n)
    for got in run_everywhere(runtime_ternaries_of_tuples, (1,), args, 1):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def _ternary_of_two_structures(x, n):
    t = ct.load(x, (0,), (8,))
    a, b = (t, t) if n > 0 else (t, (t, t))


def _ternary_of_two_strings(x, n):
    t = ct.load(x, (0,), (8,))
    a, b = (t, "sum") if n > 0 else (t, "max")


def first_of(a, b, n):
    for i in range(n):
        if i == 2:
            return a
        if i == 3:
            return b
    return b


def window_from(a, b, n):
    for i in range(n):
        if i == 1:
            return a.slice(0, i, 32)          # made inside the loop
    return b


def raw_from(a, b, n):
    for i in range(n):
        if i == 1:
            return a.slice(0, 3, 32).get_raw_memory()
    return b.get_raw_memory()


@ct.kernel
def handles_returned_from_loops(x, y, out, n):
    ct.store(out, (0,), ct.load(first_of(x, y, n), (0,), (8,)))
    ct.store(out, (1,), ct.load(window_from(x, y, n), (0,), (8,)))
    p = pointer_from_loop(x, n)
    ct.store(out, (2,), ct.load(ct.Array.from_foreign(p, (8,), (1,)), (0,), (8,)))
    ct.store(out, (3,), raw_from(x, y, n).load_offset(ct.arange(8, dtype=ct.int32)))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_helpers_return_handles_from_inside_loops(n, rng):
    """A helper returning, from inside a loop, one array or another, a slice, a pointer
    or raw memory made in the loop: the loop carries the returned value's parts."""
    x, y = (rng.standard_normal(32).astype(np.float32) for _ in range(2))
    want = np.concatenate([(x if n >= 3 else y)[:8], x[1:9] if n >= 2 else y[:8],
                           x[:8], x[3:11] if n >= 2 else y[:8]])
    args = (x, y, np.full(32, np.nan, np.float32), n)
    for got in run_everywhere(handles_returned_from_loops, (1,), args, 2):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn,exc,needle,message", [
    (_ternary_of_two_structures, TileTypeError, "a, b = ",
     "a runtime condition chooses between a float32 tile of shape (8,) and a tuple of 2 (at "
     "item [1]); both sides must have the same structure"),
    (_ternary_of_two_strings, TileTypeError, "a, b = ",
     "a runtime condition chooses between str 'sum' and str 'max' (at item [1]); a "
     "compile-time item (a string, a dtype, None, ...) must be the same on both sides"),
])
def test_runtime_choices_that_cannot_compile_are_located(fn, exc, needle, message):
    x = np.zeros(8, np.float32)
    with pytest.raises(exc) as info:
        ct.kernel(fn).compile((x, 1), stage="frontend")
    assert f"{__file__}:{line_of(fn, needle)}:" in str(info.value), str(info.value)
    assert message in str(info.value), str(info.value)


def _lists_chosen_in_an_if(xs, ys, out, n):
    zs = xs
    if n > 0:
        zs = ys
    ct.store(out, (0,), ct.load(zs[0], (0,), (8,)))


def _lists_chosen_by_an_expression(xs, ys, out, n):
    zs = xs if n > 0 else ys
    ct.store(out, (0,), ct.load(zs[0], (0,), (8,)))


@pytest.mark.parametrize("fn,needle", [(_lists_chosen_in_an_if, "if n > 0:"),
                                       (_lists_chosen_by_an_expression, "zs = xs if")])
def test_lists_of_arrays_chosen_at_run_time_are_refused_at_the_line(fn, needle):
    """A list of arrays is not chosen at run time (its elements are: `xs[i]`)."""
    xs = [np.zeros(8, np.float32)]
    with pytest.raises(TileTypeError) as info:
        ct.kernel(fn).compile((xs, xs, np.zeros(8, np.float32), 1), stage="frontend")
    assert f"{__file__}:{line_of(fn, needle)}:" in str(info.value), str(info.value)
    assert "a list of 1 1-d float32 arrays cannot be chosen at run time" in str(info.value)


@ct.function
def raw_chosen_in_a_helper(r1, r2, n):
    r = r1 if n > 0 else r2                 # the helper's arguments: raw arrays
    for i in range(n):
        r = r2 if i % 2 == 0 else r1
    return r.load_offset(ct.arange(8, dtype=ct.int32))


@ct.kernel
def raw_memory_chosen_in_helpers(x, y, out, n):
    ct.store(out, (0,), raw_chosen_in_a_helper(x.get_raw_memory(), y.get_raw_memory(), n))


@pytest.mark.parametrize("n", [0, 1, 2])
def test_raw_memory_passed_to_a_helper_is_chosen_there(n, rng):
    x, y = (rng.standard_normal(8).astype(np.float32) for _ in range(2))
    r = x if n > 0 else y
    for i in range(n):
        r = y if i % 2 == 0 else x
    args = (x, y, np.full(8, np.nan, np.float32), n)
    for got in run_everywhere(raw_memory_chosen_in_helpers, (1,), args, 2):
        np.testing.assert_array_equal(got, r)
