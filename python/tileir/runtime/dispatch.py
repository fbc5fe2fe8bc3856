"""The launch fast path: a launch that looks like an earlier one costs a dictionary
lookup, a few stores into a prebuilt parameter buffer and one driver call.

`tileir.launch` first offers the call to the kernel's `Dispatcher`; only when that
declines (returns False) does it take the checked path, which explains every error,
compiles, and hands the dispatcher a `LaunchPlan` for next time.

- `LaunchPlan`: one exact argument signature, prepared once: the function loaded,
  the hardware grid computed, a parameter buffer laid out per the kernel ABI
  (docs/gpu-backend.md) with every array's dims and strides already written, and
  the TMA descriptors cached by base pointer.  A launch writes the pointers and
  scalars into their slots, takes the stream and calls `cuLaunchKernel` with
  prebuilt handles (`driver.launch_entry`).  The thread's current context is not
  queried: a launch the driver refuses for want of the device's context (none
  current, or another device's) is made again in it (`LaunchPlan._retry`).
- `Dispatcher`: one per kernel and *argument kinds* (which positions hold CUDA
  torch tensors, lists of them, ints, floats, bools or compile-time constants).  Its `fast`
  function is generated for those kinds, so it unpacks the arguments and builds the
  key with no loop and no introspection beyond what packing needs: a tensor's
  `data_ptr()`, `shape`, `stride()`, `dtype` and `get_device()`.  The key holds the
  exact shapes and strides, so alignment, size class and the retiling wish, which
  the specialization depends on, are all settled by it.

Two implementations of `fast` and `key_of`, with one contract: generated Python
(below), and the C extension `_fastlaunch` (_fastlaunch.c, built by setup.py where a
compiler is) which makes the key, finds the plan, writes its slots and calls the
driver without the interpreter in between: a launch costs about what the driver
call does (bench/launch.py).  A plan then has a C half (`LaunchPlan.native`) with a
buffer of its own; it asks the driver for the thread's current context (a
thread-local read) and makes the device's primary context current where none or
another one is (restoring the other one after), so it never launches into a
refusal (which compute-sanitizer reports as an API error).  What the C half does
not handle (another thread, a stream other than None, an int or a torch stream of
the plan's device, an error from the driver) it hands to `LaunchPlan.launch`.  The C path is used when built,
unless TILEIR_PY_LAUNCH=1.

The fast path declines, and the checked path decides, for anything else: other
array types, a new shape, an int outside its slot's range, a float that overflows
f32, a stream of another kind than None or an int handle, and whenever
TILEIR_INTERPRET or TILEIR_SYNC_LAUNCH is set.  Plans are kept per dispatcher up
to PLANS_PER_DISPATCHER, then dropped all at once (a kernel launched over ever new
shapes keeps working at the checked path's cost).

Thread safety: a plan's buffer is written and launched by the thread that made
it; other threads share a second buffer under a lock, and make the device's context
current first (`driver.device_context`) instead of learning from a refused launch.  CUDA graphs: a launch inside `torch.cuda.graph` is captured on
torch's current stream like any other (nothing here synchronizes or allocates).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any, Callable, Mapping, Sequence

from ..specialization import typed_key

PLANS_PER_DISPATCHER = 512
MAPS_PER_PLAN = 256
_I32_BIAS = 1 << 31                 # (v + bias) >> 32 == 0 exactly for int32 values
_F32_OVERFLOW = 2.0**128 - 2.0**103  # finite values at or above this round to inf in f32

# The knobs that send launches down the checked path, read at every launch.  On POSIX
# `os.environ._data` is the bytes mapping os.environ reads and writes: one dict probe.
_ENV = getattr(os.environ, "_data", None)
_OFF = (None, b"", b"0", b"false", b"no", b"off")

try:    # the C fast path (_fastlaunch.c), built by setup.py where a compiler is
    from . import _fastlaunch as _native
except ImportError:
    _native = None


def knobs_quiet() -> bool:
    """True when neither TILEIR_INTERPRET nor TILEIR_SYNC_LAUNCH asks for the checked path
    (a malformed value does too, so that the checked path reports it)."""
    if _ENV is None:
        return all(os.environ.get(k, "0").strip().lower() in ("", "0", "false", "no", "off")
                   for k in ("TILEIR_INTERPRET", "TILEIR_SYNC_LAUNCH"))
    get = _ENV.get
    return get(b"TILEIR_INTERPRET") in _OFF and get(b"TILEIR_SYNC_LAUNCH") in _OFF


# ---------------------------------------------------------------------------
# Argument kinds and the generated dispatch function
# ---------------------------------------------------------------------------
TENSOR, LIST, INT, FLOAT, BOOL, CONST, TUPLE = "T", "L", "I", "F", "B", "C", "U"


def _item_consts(consts: Any, j: int) -> Any:
    """The constness (`annotations.tuple_constness`) of item `j` of a tuple with
    `consts`; an IndexError past a heterogeneous annotation's items (the fast path then
    declines, and the checked path explains)."""
    if consts is None or consts is True:
        return consts
    if consts.__class__ is tuple:
        return consts[j]
    return consts.constness                       # an EachConstant


def _tuple_leaves_ok(t: tuple, consts: Any) -> tuple[bool, bool]:
    """(whether every leaf of tuple `t` has a fast-path kind, whether one is a tensor)."""
    tensor = False
    for j, x in enumerate(t):
        try:
            c = _item_consts(consts, j)
        except IndexError:
            return False, tensor
        if c is True:
            continue
        if type(x) is tuple:
            ok, inner = _tuple_leaves_ok(x, c)
            if not ok:
                return False, tensor
            tensor = tensor or inner
        elif type(x).__module__ == "torch" and hasattr(x, "data_ptr"):
            if not x.is_cuda:
                return False, tensor
            tensor = True
        elif type(x) not in (bool, int, float):
            return False, tensor
    return True, tensor


def tuple_key(t: tuple, consts: Any) -> tuple:
    """The fast path's key of a tuple argument: its length and each item's, a tensor's
    as a tensor argument's, an int's class and int32 range, a float's or bool's class, a
    Constant item's value, a tuple's recursively; raises for anything else (declined)."""
    if t.__class__ is not tuple:
        raise TypeError("not a tuple")
    out: list[Any] = [len(t)]
    for j, x in enumerate(t):
        c = _item_consts(consts, j)
        cls = x.__class__
        if c is True:
            out.append(typed_key(x))
        elif cls is tuple:
            out.append(tuple_key(x, c))
        elif cls is int:
            out.append((int, (x + _I32_BIAS) >> 32))
        elif cls is float or cls is bool:
            out.append(cls)
        elif type(x).__module__ == "torch" and x.is_cuda:
            out.append((x.dtype, x.get_device(), x.shape, x.stride(), x.data_ptr() & 15))
        else:
            raise TypeError(f"no fast-path kind for a {cls.__name__} in a tuple")
    return tuple(out)


def tuple_leaves(t: tuple, consts: Any) -> list[Any]:
    """The runtime leaves of a tuple argument, in ABI order (its Constant items dropped)."""
    out: list[Any] = []
    for j, x in enumerate(t):
        c = _item_consts(consts, j)
        if c is True:
            continue
        if x.__class__ is tuple:
            out.extend(tuple_leaves(x, c))
        else:
            out.append(x)
    return out


def tuple_values(t: tuple, consts: Any) -> list[Any]:
    """What the plan writes for a tuple argument: its tensors' pointers and its scalars."""
    return [x.data_ptr() if hasattr(x, "data_ptr") else x for x in tuple_leaves(t, consts)]


def arg_kinds(args: Sequence[Any], const_mask: Sequence[bool],
              tuple_consts: Sequence[Any] | None = None) -> str | None:
    """The kinds string of `args` ("TTTFFC"), or None when some argument has no fast path
    (arrays other than CUDA torch tensors, NumPy scalars, ...) or none is a tensor.
    `tuple_consts`: per parameter, which items of a tuple are Constants
    (`annotations.tuple_constness`); a tuple of tensors and numbers (nested too) is kind
    `U`."""
    if len(args) != len(const_mask):
        return None
    tuple_consts = tuple_consts or (None,) * len(args)
    kinds = []
    tensor_in_tuple = False
    for a, const, consts in zip(args, const_mask, tuple_consts):
        if const:
            kinds.append(CONST)
        elif type(a) is tuple:
            ok, tensor = _tuple_leaves_ok(a, consts)
            if not ok:
                return None
            tensor_in_tuple = tensor_in_tuple or tensor
            kinds.append(TUPLE)
        elif type(a).__module__ == "torch" and hasattr(a, "data_ptr"):
            if not a.is_cuda:
                return None
            kinds.append(TENSOR)
        elif type(a) is list:
            if not a or not all(type(t).__module__ == "torch" and hasattr(t, "data_ptr") and
                                t.is_cuda for t in a):
                return None
            kinds.append(LIST)
        elif type(a) is bool:
            kinds.append(BOOL)
        elif type(a) is int:
            kinds.append(INT)
        elif type(a) is float:
            kinds.append(FLOAT)
        else:
            return None
    return "".join(kinds) if TENSOR in kinds or LIST in kinds or tensor_in_tuple else None


def _key_lines(kinds: str) -> tuple[list[str], str, str]:
    """Source lines that bind the arguments and pointers, the key expression, and the
    tuple of dynamic values (pointers and runtime scalars, in ABI order)."""
    names = [f"a{i}" for i in range(len(kinds))]
    lines = [f"{', '.join(names)}{',' if len(names) == 1 else ''} = args"] if names else []
    parts, values = ["grid"], []
    for i, k in enumerate(kinds):
        a = names[i]
        if k == TENSOR:
            lines.append(f"p{i} = {a}.data_ptr()")
            parts.append(f"{a}.dtype, {a}.get_device(), {a}.shape, {a}.stride(), p{i} & 15")
            values.append(f"p{i}")
        elif k == INT:        # the range picks i32 or i64 (specialization._runtime_kind)
            parts.append(f"{a}.__class__, ({a} + {_I32_BIAS}) >> 32")
            values.append(a)
        elif k in (FLOAT, BOOL):
            parts.append(f"{a}.__class__")
            values.append(a)
        elif k == LIST:       # a list of tensors: its length and each element's key
            parts.append(f"len({a}), tuple((t.dtype, t.get_device(), t.shape, t.stride(), "
                         f"t.data_ptr() & 15) for t in {a})")
            values.append(f"*[t.data_ptr() for t in {a}]")
        elif k == TUPLE:      # a tuple: its structure, its leaves' keys, its Constants
            parts.append(f"tuple_key({a}, tconsts[{i}])")
            values.append(f"*tuple_values({a}, tconsts[{i}])")
        else:                 # a Constant: typed (1, 1.0 and True differ; -0.0 and 0.0)
            parts.append(f"typed_key({a})")
    if LIST in kinds or TUPLE in kinds:   # the plan reads the arguments with each spread
        spread_args = "".join(
            ("*" + a if k == LIST else f"*tuple_leaves({a}, tconsts[{i}])" if k == TUPLE
             else a) + ", " for i, (a, k) in enumerate(zip(names, kinds)))
        lines.append(f"flat = ({spread_args})")
    key = "(" + ", ".join(parts) + ",)"
    return lines, key, "(" + "".join(v + ", " for v in values) + ")"


def dispatch_source(kinds: str) -> str:
    """The Python source of a dispatcher's two functions for `kinds` (tests read it):
    `fast(stream, grid, args)` launches through a known plan or returns False;
    `key_of(grid, args)` is the key a plan for these arguments is filed under."""
    lines, key, values = _key_lines(kinds)
    body = "\n".join("        " + line for line in lines)
    return (
        "def fast(stream, grid, args):\n"
        "    try:\n"
        f"{body}\n"
        f"        plan = plans[{key}]\n"
        "    except Exception:        # not a launch seen before: the checked path decides\n"
        "        return False\n"
        "    if not quiet():\n"
        "        return False\n"
        f"    return plan.launch(stream, {'flat' if LIST in kinds or TUPLE in kinds else 'args'}, "
        f"{values})\n"
        "\n"
        "def key_of(grid, args):\n"
        f"{body.replace('        ', '    ')}\n"
        f"    return {key}\n")


def use_native() -> bool:
    """Whether launches go through the C fast path: built, and not turned off."""
    from .. import knobs
    return _native is not None and not knobs.PY_LAUNCH.as_bool()


def _use_torch_tensors() -> None:
    """Lets the C keys describe torch.Tensor objects through torch's DLPack C exchange
    API where torch has one (`_fastlaunch.use_dlpack_exchange`), and read the
    accessors of its subclasses through the C functions behind its descriptors
    (`_fastlaunch.use_tensor_type`), once torch is imported (a launch of torch
    tensors has imported it)."""
    global _torch_tensor_type
    torch = sys.modules.get("torch")
    tensor = getattr(torch, "Tensor", None)
    if tensor is None or tensor is _torch_tensor_type:
        return
    # (both absent from older builds of the extension)
    for use in (getattr(_native, "use_tensor_type", None),
                getattr(_native, "use_dlpack_exchange", None)):
        if use is not None:
            use(tensor)
    _torch_tensor_type = tensor


_torch_tensor_type = None


class Dispatcher:
    """The fast path of one kernel for one kinds string, and its plans: the C one
    (`_fastlaunch.Dispatcher`) when the extension is built, else generated Python.
    Both file plans in `self.plans` under their own keys; `native` says which."""

    def __init__(self, kernel: str, kinds: str, native: bool | None = None,
                 tuple_consts: Sequence[Any] | None = None):
        self.kinds = kinds
        self.plans: dict[Any, LaunchPlan] = {}
        # (the C half keys no lists or tuples: those launch through the generated Python)
        self.native = (use_native() and len(kinds) <= _native.MAX_ARGS and LIST not in kinds
                       and TUPLE not in kinds if native is None else native)
        if self.native:
            _use_torch_tensors()
            c = _native.Dispatcher(kinds, self.plans, _ENV if isinstance(_ENV, dict) else None)
            self.fast: Callable[[Any, Any, Sequence[Any]], bool] = c.fast
            self.key_of: Callable[[Any, Sequence[Any]], Any] = c.key_of
            return
        namespace = {"plans": self.plans, "quiet": knobs_quiet, "tuple_key": tuple_key,
                     "typed_key": typed_key,
                     "tuple_values": tuple_values, "tuple_leaves": tuple_leaves,
                     "tconsts": tuple(tuple_consts or (None,) * len(kinds))}
        exec(compile(dispatch_source(kinds), f"<tileir launch of {kernel} ({kinds})>", "exec"),
             namespace)
        self.fast = namespace["fast"]
        self.key_of = namespace["key_of"]

    def remember(self, grid, args: Sequence[Any], plan: "LaunchPlan") -> None:
        if len(self.plans) >= PLANS_PER_DISPATCHER:
            self.plans.clear()
        self.plans[self.key_of(grid, args)] = plan


def dynamic_values(kinds: str, args: Sequence[Any],
                   tuple_consts: Sequence[Any] | None = None) -> tuple:
    """What `fast` passes to `LaunchPlan.launch` for `args` (for the checked path's first
    launch through a new plan)."""
    tuple_consts = tuple_consts or (None,) * len(kinds)
    out = []
    for k, a, consts in zip(kinds, args, tuple_consts):
        if k == TENSOR:
            out.append(a.data_ptr())
        elif k == LIST:
            out.extend(t.data_ptr() for t in a)
        elif k == TUPLE:
            out.extend(tuple_values(a, consts))
        elif k != CONST:
            out.append(a)
    return tuple(out)


def spread(kinds: str, args: Sequence[Any], positions: Sequence[int],
           tuple_consts: Sequence[Any] | None = None) -> tuple[tuple, list[int]]:
    """`args` with each list argument spread into its elements and each tuple into its
    runtime leaves, and `positions` (the args index of each runtime parameter, a list
    or tuple one position) as indices into that: what a plan for a launch with lists
    or tuples is made from and launched with."""
    if LIST not in kinds and TUPLE not in kinds:
        return tuple(args), list(positions)
    tuple_consts = tuple_consts or (None,) * len(kinds)
    flat: list[Any] = []
    where: dict[int, list[int]] = {}
    for i, (k, a) in enumerate(zip(kinds, args)):
        items = a if k == LIST else tuple_leaves(a, tuple_consts[i]) if k == TUPLE else [a]
        where[i] = list(range(len(flat), len(flat) + len(items)))
        flat.extend(items)
    return tuple(flat), [j for i in positions for j in where[i]]


# ---------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------
_FORMATS = {ctypes.c_uint64: "Q", ctypes.c_int64: "q", ctypes.c_int32: "i",
            ctypes.c_uint32: "I", ctypes.c_int16: "h", ctypes.c_uint16: "H",
            ctypes.c_int8: "b", ctypes.c_uint8: "B", ctypes.c_float: "f",
            ctypes.c_double: "d"}
_TENSOR_MAP_ALIGN = 64               # CUtensorMap is declared alignas(64)


class _Parameters:
    """A parameter buffer laid out per the ABI: the slots' bytes at their natural
    alignment (a tensor map's at 64), the `void*[]` the driver reads, and views of
    the slots a launch rewrites."""

    def __init__(self, slots, dynamic: Sequence[int], map_slots: Sequence[int],
                 workspace_slot: int | None = None):
        offsets, end = [], 0
        for v in slots:
            size = ctypes.sizeof(v)
            align = _TENSOR_MAP_ALIGN if size > 8 else size
            end = (end + align - 1) // align * align
            offsets.append(end)
            end += size
        self.buffer = ctypes.create_string_buffer(end + _TENSOR_MAP_ALIGN)
        base = -ctypes.addressof(self.buffer) % _TENSOR_MAP_ALIGN
        raw = memoryview(self.buffer).cast("B")
        spans = [(base + off, base + off + ctypes.sizeof(v)) for v, off in zip(slots, offsets)]
        for v, (start, stop) in zip(slots, spans):
            raw[start:stop] = bytes(v)
        self.pointers = (ctypes.c_void_p * max(1, len(slots)))(
            *(ctypes.addressof(self.buffer) + start for start, _ in spans))
        self.address = ctypes.addressof(self.pointers) if slots else 0
        self.views = tuple(raw[spans[s][0]:spans[s][1]].cast(_FORMATS[type(slots[s])])
                           for s in dynamic)
        self.map_views = tuple(raw[spans[s][0]:spans[s][1]] for s in map_slots)
        self.workspace_view = None if workspace_slot is None else \
            raw[spans[workspace_slot][0]:spans[workspace_slot][1]].cast("Q")
        # For the C half (_fastlaunch.Plan): where each rewritten slot is, and its format.
        at = ctypes.addressof(self.buffer)
        self.slots = tuple((at + spans[s][0], _FORMATS[type(slots[s])]) for s in dynamic)
        self.map_addresses = tuple(at + spans[s][0] for s in map_slots)
        # a programmatic plan's CUlaunchConfig for launches with this buffer (its stream
        # set per launch: one per buffer, as the buffers are per thread)
        self.config: Any = None


class LaunchPlan:
    """One prepared launch signature (see the module docstring).

    `slots` are the packed parameters of a checked launch (`launcher.bind_args`), in
    ABI order; `dynamic` gives, per runtime parameter, the slot its value is written
    to (an array's pointer, a scalar); `maps` the tensor maps' slots, each with the
    value index of its array's pointer and what re-encodes it for another pointer.

    The thread that made the plan writes its own buffer; other threads share a second
    one under a lock (the driver reads a buffer during cuLaunchKernel, which runs
    without the GIL).
    """

    def __init__(self, *, name: str, function: Any, device: int,
                 grid: tuple[int, int, int], block: tuple[int, int, int], shared: int,
                 slots: Sequence[ctypes._SimpleCData | ctypes.Structure],
                 dynamic: Sequence[int], float_values: Sequence[int],
                 maps: Sequence[tuple[int, int, Callable[[Any], bytes]]],
                 current_stream: Callable[[int], int], stream_of: Callable[[Any, Any], int],
                 programmatic: bool = False, workspace: tuple[int, int] | None = None,
                 native: bool = True):
        from . import driver
        self.name = name
        # stream-K: (slot, bytes) of the workspace, one per stream (runtime/workspace.py)
        self.workspace = workspace
        # the kernel waits for / releases its neighbours (tile.grid_dependency): launched
        # by cuLaunchKernelEx with programmatic stream serialization
        self.programmatic = programmatic
        self.device = device
        self.grid = grid
        self.block = block
        self.shared = shared
        self.current_stream = current_stream
        self.stream_of = stream_of
        self.float_values = tuple(float_values)    # value indices checked for f32 overflow
        map_slots = [s for _, s, _ in maps]
        self.encoders = tuple((j, encode, {}) for j, _, encode in maps)   # cache by pointer
        ws_slot = workspace[0] if workspace else None
        self.own = _Parameters(slots, dynamic, map_slots, ws_slot)
        self.others = _Parameters(slots, dynamic, map_slots, ws_slot)
        self.owner = threading.get_ident()
        self.lock = threading.Lock()
        self._launch, self._function, self._stream, self._success = driver.launch_entry()
        self.function = self._function(function)
        if programmatic:
            self._launch_ex, make_config = driver.programmatic_entry()
            for params in (self.own, self.others):
                params.config = make_config(grid, block, shared)
        self._streams: dict[int, Any] = {}
        # (the C half passes no workspace: a stream-K plan launches from here)
        self.native = self._native_half(slots, dynamic, map_slots) \
            if use_native() and workspace is None and native else None

    def _native_half(self, slots, dynamic: Sequence[int], map_slots: Sequence[int]):
        """The C half of this plan (`_fastlaunch.Plan`): a buffer of its own for the
        owner thread, written and launched from C; anything else comes back to
        `self.launch`."""
        from . import driver
        params = _Parameters(slots, dynamic, map_slots)
        ctx_get, ctx_set = driver.context_addresses()
        return _native.Plan(
            launch=driver.launch_address(), ctx_get=ctx_get, ctx_set=ctx_set,
            context=driver.primary_handle(self.device), function=int(self.function),
            grid=self.grid,
            block=self.block, shared=self.shared, params=params.address, slots=params.slots,
            maps=tuple((j, address, encode, cache) for (j, encode, cache), address
                       in zip(self.encoders, params.map_addresses)),
            owner=self.owner, device=self.device, current_stream=self.current_stream,
            stream_of=self.stream_of, fallback=self.launch, keepalive=params,
            launch_ex=driver.launch_ex_address() if self.programmatic else 0)

    def launch(self, stream, args: Sequence[Any], values: Sequence[Any]) -> bool:
        """Writes `values` into their slots and launches; False (nothing launched) when a
        value does not fit its slot."""
        if stream is None:
            handle = self.current_stream(self.device)
        elif stream.__class__ is int and stream >= 0:
            handle = stream
        else:
            handle = self.stream_of(stream, args)
        cu_stream = self._streams.get(handle)
        if cu_stream is None:
            if len(self._streams) >= MAPS_PER_PLAN:
                self._streams.clear()
            cu_stream = self._streams[handle] = self._stream(handle)
        if _get_ident() == self.owner:
            return self._write_and_launch(self.own, cu_stream, args, values, handle)
        from . import driver          # another thread: its context is checked, not assumed
        with self.lock, driver.device_context(self.device):
            return self._write_and_launch(self.others, cu_stream, args, values, handle)

    def _write_and_launch(self, params: _Parameters, cu_stream, args, values,
                          handle: int = 0) -> bool:
        try:
            for view, v in zip(params.views, values):
                view[0] = v
        except (TypeError, ValueError, OverflowError):
            return False
        for j in self.float_values:
            if _F32_OVERFLOW <= abs(values[j]) < float("inf"):
                return False
        if self.encoders:
            self._write_maps(params, args, values)
        if self.workspace is not None:
            from . import workspace
            params.workspace_view[0] = workspace.pointer(self.device, handle,
                                                         self.workspace[1])
        err = self._enqueue(params, cu_stream)
        if err is not self._success and err != self._success:
            self._retry(err, params, cu_stream)
        return True

    def _enqueue(self, params: _Parameters, cu_stream):
        """The driver call (cuLaunchKernelEx with the buffer's config for a programmatic
        plan): its result."""
        if self.programmatic:
            config = params.config
            config.hStream = cu_stream
            err, = self._launch_ex(config, self.function, params.address, 0)
            return err
        err, = self._launch(self.function, *self.grid, *self.block, self.shared, cu_stream,
                            params.address, 0)
        return err

    def _write_maps(self, params: _Parameters, args, values) -> None:
        for (j, encode, cache), view in zip(self.encoders, params.map_views):
            encoded = cache.get(values[j])
            if encoded is None:
                if len(cache) >= MAPS_PER_PLAN:
                    cache.clear()
                encoded = cache[values[j]] = encode(args)
            view[:] = encoded

    def _retry(self, err, params: _Parameters, cu_stream) -> None:
        """A failed launch: when the thread has no context or another one current (the
        driver says the handle or context is invalid), once more in the device's
        primary context, the thread's own one restored after (as the checked path)."""
        from . import driver
        if int(err) in _WRONG_CONTEXT:
            with driver.device_context(self.device):
                err = self._enqueue(params, cu_stream)
            if err == self._success:
                return
        call = "cuLaunchKernelEx" if self.programmatic else "cuLaunchKernel"
        raise driver.error(f"{call}('{self.name}', grid={self.grid}, "
                           f"block={self.block}, shared={self.shared}"
                           f"{', programmatic' if self.programmatic else ''})", err)


_get_ident = threading.get_ident
_WRONG_CONTEXT = (201, 400)     # CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE


def make_plan(image: bytes, meta: Mapping[str, Any], grid: tuple[int, int, int],
              args: Sequence[Any], positions: Sequence[int], native: bool = True,
              programmatic_dependent_launch: bool = False) -> LaunchPlan:
    """The plan for launching `image` over `grid` with `args` (torch tensors among them,
    lists spread: `spread`; `positions`: the args index of each runtime parameter),
    after every check the checked path makes (`launcher.bind_args`); `native`: give it
    a C half; `programmatic_dependent_launch`: the launches ask for programmatic stream
    serialization (`launcher.programmatic`)."""
    from . import driver, launcher
    name = meta["name"]
    runtime_args = [args[i] for i in positions]
    logical = launcher.check_grid(name, grid)
    bound = launcher.bind_args(meta, runtime_args, logical)
    device = bound.device if bound.device is not None else driver.current_device()
    block = launcher.block_of(meta)
    shared = int(meta["shared_bytes"])
    with driver.device_context(device):
        function = launcher._function(image, meta, device, block[0], shared)
    dynamic, float_values, shapes, slot = [], [], {}, 0
    for j, (spec, arg) in enumerate(zip(meta["params"], runtime_args)):
        dynamic.append(slot)          # the pointer of an array, the value of a scalar
        if spec["kind"] == "array":
            shapes[j] = tuple(arg.shape)
            slot += 1 + 2 * spec["ndim"]
        else:
            if launcher.param_dtype(name, spec).name == "float32":
                float_values.append(j)
            slot += 1
    if meta.get("persistent"):
        slot += 3                     # the walked grid: fixed by the key's grid
    hw = launcher.launch_grid(meta, logical, device, function)
    space = None
    if meta.get("workspace"):         # stream-K: the stream's workspace, at each launch
        from . import workspace
        space = (slot, workspace.size(int(meta["workspace"]), hw[0] * hw[1] * hw[2]))
        slot += 1
    return LaunchPlan(
        name=name, function=function, device=device,
        grid=hw, block=block,
        shared=shared, slots=bound.params.values, dynamic=dynamic, float_values=float_values,
        maps=tensor_map_slots(meta, slot, positions, shapes),
        current_stream=torch_current_stream(),
        stream_of=lambda stream, a: launcher.stream_handle(stream, a, device),
        programmatic=launcher.programmatic(meta, programmatic_dependent_launch),
        workspace=space, native=native)


def torch_current_stream() -> Callable[[int], int]:
    """torch's current stream handle of a device, as cheaply as torch offers it."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: int(torch.cuda.current_stream(device).cuda_stream)


def tensor_map_slots(meta: Mapping[str, Any], first_map_slot: int, runtime_params: Sequence[int],
                     shapes: Mapping[int, Sequence[int]]) -> list[tuple[int, int, Callable]]:
    """(value index, slot, encoder) for each of the metadata's tensor maps: the encoder
    takes the launch's arguments and returns the map's 128 bytes.  The box is clipped
    once, for the shapes the plan is keyed by."""
    from .arrays import describe
    from .tensor_maps import clipped_box, tensor_map
    out = []
    for k, tm in enumerate(meta.get("tensor_maps", ())):
        j = tm["param"]
        box = clipped_box(tm["box"], tm.get("clip"), shapes[j])
        position, swizzle = runtime_params[j], tm["swizzle"]
        pname, kname = meta["params"][j]["name"], meta["name"]

        def encode(args, position=position, box=box, swizzle=swizzle, pname=pname):
            return bytes(tensor_map(describe(args[position]), box, swizzle, kname, pname))

        out.append((j, first_map_slot + k, encode))
    return out


__all__ = ["Dispatcher", "LaunchPlan", "arg_kinds", "dispatch_source", "dynamic_values",
           "knobs_quiet", "make_plan", "spread", "tensor_map_slots", "torch_current_stream",
           "tuple_key", "tuple_leaves", "tuple_values"]
