"""`tileir.jax`: cuTile's `cuda.tile.jax` — launch a kernel from a JAX program.

    from tileir.jax import cutile_call, OutputPlaceholder, InputOutput

    @jax.jit(static_argnums=[1])
    def scaled(x, c):
        y = cutile_call((cdiv(x.shape[0], 128),), scale,
                        (x, OutputPlaceholder(x.shape, x.dtype), c, 128))
        return cutile_call(grid, halve, (InputOutput(y), 128))

`cutile_call(grid, kernel, args)` takes, for each kernel parameter: a JAX array (an
input, read only), an `OutputPlaceholder(shape, dtype)` (an output JAX allocates
and the call returns), an `InputOutput(array)` (an input the kernel updates in
place, returned as an output), a Python `bool`/`int`/`float` (a scalar: static
under `jax.jit`, `static_argnums`), or a tuple of these (nested too) for a tuple
parameter, which reaches the kernel as that tuple (a parameter annotated
`tuple[...]` checks its length and which items are `ct.Constant`s; a tuple of only
arrays for a parameter not annotated as a tuple reaches it as a list of arrays,
tileir's form of a list parameter).  It
returns the one output, or a tuple of them in the order of the arguments.  The
kernel is compiled when the call is traced, so one that does not compile for its
arguments is reported there.

Where it runs: on JAX's GPU backend the call is one XLA custom call to tileir's XLA
FFI handler (`runtime/xla_ffi.py`, C in `runtime/_xla_ffi.c`, built on first use
against the running jaxlib's FFI header): the kernel is compiled and loaded, and its
parameters laid out, when the call is traced; at execution XLA hands the handler its
stream and its device buffers (the outputs allocated, each `InputOutput` aliased to
its input) and the handler launches the kernel there, in order with XLA's own work,
without a copy and with no Python in between.  Where the handler cannot be built or
registered (no C compiler, a jaxlib without the FFI header; `ffi_status()` says why,
`uses_ffi()` whether it is in use), or with TILEIR_JAX_FFI=0, the call is a buffer
callback (`jax.experimental.buffer_callback`) that launches through tileir's checked
Python path instead: the same semantics, hundreds of microseconds a call.  On JAX's
CPU backend the call is a host callback (`jax.pure_callback`) that runs the kernel
in tileir's interpreter, the same semantics a GPU launch has.  Under `jax.vmap` the
kernel runs once per batch element (nested vmaps too; an operand the batch does not
vary is read by every element, an unbatched `InputOutput` is copied for each).
Other backends are refused with an error.  An array passed in several places is one
array to the kernel (updated in place everywhere when one of them is an
`InputOutput`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

try:
    import jax
    HAS_JAX = True
except ImportError:          # tileir works without JAX; cutile_call then says so
    jax = None
    HAS_JAX = False

from .errors import TileTypeError, TileUnsupportedFeatureError, TileValueError


@dataclasses.dataclass
class OutputPlaceholder:
    """An output of `cutile_call`: JAX allocates an array of `shape` and `dtype`."""

    shape: tuple[int, ...]
    dtype: Any


@dataclasses.dataclass
class InputOutput:
    """An input array the kernel updates in place; `cutile_call` returns it updated."""

    array: Any


@dataclasses.dataclass
class _Roles:
    """What each leaf of the arguments is, collected in argument order."""

    inputs: list = dataclasses.field(default_factory=list)        # JAX arrays, distinct
    outputs: list = dataclasses.field(default_factory=list)       # (kind, source) per output
    written: set = dataclasses.field(default_factory=set)         # inputs an io updates


def cutile_call(grid, kernel, args: tuple):
    """Runs `kernel` over `grid` on JAX arrays (see the module doc); returns the output,
    or a tuple of the outputs in argument order."""
    if not HAS_JAX:
        raise TileUnsupportedFeatureError("tileir.jax needs JAX: pip install jax")
    from .kernel import Kernel, normalize_grid
    if not isinstance(kernel, Kernel):
        raise TileTypeError(f"cutile_call needs a @tileir.kernel, got {type(kernel).__name__}")
    grid = normalize_grid(grid)
    names = list(kernel.signature.parameters)
    if not isinstance(args, tuple):
        raise TileTypeError(f"cutile_call takes the kernel's arguments as a tuple, got "
                            f"{type(args).__name__}")
    if len(args) != len(names):
        raise TileTypeError(f"kernel '{kernel.name}' takes {len(names)} arguments "
                            f"({', '.join(names)}), got {len(args)}")
    backend = jax.default_backend()
    if backend not in ("cpu", "gpu", "cuda"):
        raise TileUnsupportedFeatureError(
            f"tileir.jax runs kernels on JAX's CUDA GPU backend (launched on XLA's "
            f"stream) and on its CPU backend (in tileir's interpreter), not on "
            f"'{backend}'")
    roles = _Roles()
    shapes = [_leaves(kernel, name, arg, roles, kernel.param_annotations[name])
              for name, arg in zip(names, args)]
    outs = [jax.ShapeDtypeStruct(tuple(s), d) for s, d in
            (_out_shape(kind, src, roles) for kind, src in roles.outputs)]
    import numpy as np

    def fresh(placeholder):
        return np.empty(tuple(placeholder.shape), np.dtype(placeholder.dtype))

    # compiled now, on stand-ins of the arrays' shapes and dtypes: a kernel that does
    # not compile for these arguments is reported here, not from inside JAX's callback
    stand_ins = [np.empty(tuple(a.shape), np.dtype(a.dtype)) for a in roles.inputs]
    kernel.compile(tuple(_build(s, stand_ins, fresh, []) for s in shapes))

    if backend == "cpu":
        def host(*arrays):
            own = [np.array(a) if i in roles.written else np.asarray(a)
                   for i, a in enumerate(arrays)]
            results: list = []
            launch_args = tuple(_build(s, own, fresh, results) for s in shapes)
            from .kernel import launch
            launch(None, grid, kernel, launch_args)
            return tuple(results)

        got = jax.pure_callback(host, tuple(outs), *roles.inputs, vmap_method="sequential")
    else:
        got = _on_gpu(kernel, grid, shapes, roles, outs)
    return got[0] if len(outs) == 1 else tuple(got)


def uses_ffi() -> bool:
    """Whether `cutile_call` on JAX's CUDA backend launches through tileir's XLA FFI
    handler (native code: no Python per call), building and registering it on first
    use; False where it launches through `jax.experimental.buffer_callback` instead
    (`ffi_status()` says why), and on the CPU backend (the interpreter)."""
    return _ffi_refusal() is None


def ffi_status() -> str:
    """How `cutile_call` launches here, in words: the FFI handler (its library and XLA
    FFI API version), or buffer_callback and why."""
    why = _ffi_refusal()
    if why is not None:
        return why
    from .runtime import xla_ffi
    major, minor = xla_ffi.api_version()
    return (f"XLA FFI target '{xla_ffi.TARGET}' on CUDA: {xla_ffi.library()._name} "
            f"(XLA FFI API {major}.{minor})")


_ffi_error: list[str] = []          # why the handler cannot be used, once found


def _ffi_refusal() -> str | None:
    """None when GPU calls go through the FFI handler; else why they do not."""
    if not HAS_JAX:
        return "JAX is not installed"
    backend = jax.default_backend()
    if backend not in ("gpu", "cuda"):
        return (f"JAX's default backend is {backend!r}: cutile_call runs kernels in "
                f"tileir's interpreter there")
    from . import knobs
    if not knobs.JAX_FFI.as_bool():
        return "buffer_callback: TILEIR_JAX_FFI=0"
    if not _ffi_error:
        from .runtime import xla_ffi
        try:
            xla_ffi.register("CUDA")
            xla_ffi.set_driver()
            _ffi_error.append("")
        except xla_ffi.XlaFfiUnavailable as e:
            import warnings
            why = "; ".join(d.message for d in e.diagnostics)
            _ffi_error.append(f"buffer_callback: {why}")
            warnings.warn(f"tileir.jax launches kernels through jax.experimental."
                          f"buffer_callback, hundreds of microseconds a call: {why}",
                          RuntimeWarning, stacklevel=3)
    return _ffi_error[0] or None


def _on_gpu(kernel, grid, shapes: list, roles: _Roles, outs: list):
    """The call on JAX's CUDA backend: the XLA FFI handler's custom call where it can
    be used, else a buffer callback."""
    if _ffi_refusal() is None:
        from .runtime import xla_ffi
        try:
            return _ffi_launcher(kernel, grid, shapes, roles, 0)(*roles.inputs)
        except xla_ffi.NotForFfi:      # (a stream-K kernel, a dtype XLA's FFI lacks)
            pass
    from jax.experimental.buffer_callback import buffer_callback
    aliases = {k: j for j, (kind, k) in enumerate(roles.outputs) if kind == "io"}
    return buffer_callback(_on_stream(kernel, grid, shapes, roles), tuple(outs),
                           input_output_aliases=aliases,
                           vmap_method="sequential")(*roles.inputs)


def _ffi_launcher(kernel, grid, shapes: list, roles: _Roles, nbatch: int):
    """The XLA custom call of a cutile_call whose operands (`roles.inputs`) carry
    `nbatch` leading batch dims, as a function of them; under `jax.vmap` its rule
    adds one (an unbatched operand gets a dim of 1, which the handler does not step
    along; an unbatched `InputOutput` is broadcast, each batch element its own
    output), so the kernel runs once per batch element (`runtime/xla_ffi.py`)."""
    from jax.custom_batching import custom_vmap
    from .runtime import xla_ffi
    aliases = {k: j for j, (kind, k) in enumerate(roles.outputs) if kind == "io"}

    @custom_vmap
    def call(*inputs):
        on = _ffi_device()
        batch = tuple(max(x.shape[i] for x in inputs) for i in range(nbatch))
        spread = math.prod(batch) > 1
        own = [xla_ffi.stand_in(x.shape[nbatch:], x.dtype, result=k in aliases,
                                index=aliases.get(k, k), device=on,
                                batched=spread if k in aliases else
                                math.prod(x.shape[:nbatch]) > 1)
               for k, x in enumerate(inputs)]
        fresh = iter(xla_ffi.stand_in(ph.shape, ph.dtype, result=True, index=j, device=on,
                                      batched=spread)
                     for j, (kind, ph) in enumerate(roles.outputs) if kind == "out")
        args = tuple(_build(s, own, lambda _: next(fresh), []) for s in shapes)
        operands = [xla_ffi.buffer_spec(x.shape[nbatch:], x.dtype) for x in inputs]
        results = [xla_ffi.buffer_spec(*_out_shape(kind, src, roles))
                   for kind, src in roles.outputs]
        index, key = _ffi_prepare(kernel, grid, args, operands, results, on)
        outs = [jax.ShapeDtypeStruct(batch + tuple(shape), jax.numpy.dtype(dtype))
                for shape, dtype in (_out_shape(kind, src, roles)
                                     for kind, src in roles.outputs)]
        import numpy as np
        got = jax.ffi.ffi_call(xla_ffi.TARGET, outs, input_output_aliases=aliases,
                               vmap_method="sequential")(
            *inputs, tileir_call=np.int64(index), tileir_key=np.int64(key))
        return tuple(got)

    @call.def_vmap
    def batched(axis_size, in_batched, *inputs):
        moved = [x if b else jax.numpy.broadcast_to(x[None], (axis_size, *x.shape))
                 if k in aliases else x[None]
                 for k, (x, b) in enumerate(zip(inputs, in_batched))]
        out = _ffi_launcher(kernel, grid, shapes, roles, nbatch + 1)(*moved)
        return out, tuple(True for _ in out)

    return call


def _ffi_device():
    """The `xla_ffi.Device` of JAX's local GPUs: the first one's target, SM count and
    L2 size, and every one's ordinal."""
    from .kernel import device_target
    from .runtime import driver, xla_ffi
    from .runtime.arrays import DeviceArrayInfo
    from . import dtypes
    ordinals = tuple(d.local_hardware_id if d.local_hardware_id is not None else d.id
                     for d in jax.local_devices(backend="gpu"))
    first = DeviceArrayInfo(0, (), (), dtypes.float32, ("cuda", ordinals[0]))
    return xla_ffi.Device(device_target([first]), driver.sm_count(ordinals[0]),
                          driver.l2_cache_bytes(ordinals[0]), ordinals)


def _ffi_prepare(kernel, grid, args, operands, results, on) -> tuple[int, int]:
    """The (index, key) of the FFI handler's call launching `kernel` over `grid` with
    `args` (`StandIn`s for the buffers) on the GPUs of `on`: compiled, laid out,
    loaded and filed the first time it is seen in this process."""
    from . import dtypes
    from .kernel import hardware_grid, launch_image
    from .runtime import xla_ffi
    from .runtime.arrays import DeviceArrayInfo
    ck = kernel.compile(args, target=on.target, grid=grid, sm_count=on.sm_count)
    desc = xla_ffi.describe_call(ck, hardware_grid(ck.meta, grid), args, operands, results,
                                 on.target)

    def image(ordinal: int) -> bytes:
        return launch_image(ck, [DeviceArrayInfo(0, (), (), dtypes.float32,
                                                 ("cuda", ordinal))])

    return xla_ffi.file_call(desc, image, on.ordinals), desc.key


def _build(shape, own: list, fresh, results: list):
    """The kernel argument for one `_leaves` shape: inputs from `own` (by index), outputs
    from `fresh(placeholder)`, each output also appended to `results` in argument order."""
    kind, value = shape
    if kind == "in":
        return own[value]
    if kind == "io":
        results.append(own[value])
        return own[value]
    if kind == "out":
        out = fresh(value)
        results.append(out)
        return out
    if kind in ("tuple", "list"):   # ("list": arrays for a parameter not annotated tuple)
        items = [_build(x, own, fresh, results) for x in value]
        return items if kind == "list" else tuple(items)
    return value                    # a scalar or a constant


def _on_stream(kernel, grid, shapes: list, roles: _Roles):
    """The buffer callback of a GPU `cutile_call`: the kernel launched on XLA's stream
    with XLA's buffers.  An `InputOutput` is its output buffer (aliased to the input,
    so holding the input's values), everywhere its array is passed."""

    def call(ctx, outs, *ins):
        from jax.experimental.buffer_callback import ExecutionStage
        if ctx.stage != ExecutionStage.EXECUTE:
            return
        own = list(ins)
        for j, (kind, k) in enumerate(roles.outputs):
            if kind == "io":
                own[k] = outs[j]
        placeholders = iter(outs[j] for j, (kind, _) in enumerate(roles.outputs)
                            if kind == "out")
        launch_args = tuple(_build(s, own, lambda _: next(placeholders), []) for s in shapes)
        from .kernel import launch
        launch(int(ctx.stream), grid, kernel, launch_args)

    return call


def _leaves(kernel, name: str, x, roles: _Roles, ann, path: str | None = None):
    """The argument `x` of parameter `name` (or of its tuple item `path`), annotated `ann`
    (as `annotations.param_annotation` reads it), as ("in" | "io", input index), ("out",
    placeholder), ("tuple" | "list", items) or ("value", a static scalar)."""
    from .annotations import TupleAnnotation
    from .specialization import ConstantAnnotation
    what = f"argument {path or repr(name)} of kernel '{kernel.name}'"
    constant = isinstance(ann, ConstantAnnotation)
    if isinstance(x, tuple):
        items = _item_annotations(ann, len(x), what)
        shapes = tuple(_leaves(kernel, name, v, roles, a, f"{path or name}[{i}]")
                       for i, (v, a) in enumerate(zip(x, items)))
        as_list = path is None and not isinstance(ann, TupleAnnotation) and not constant \
            and bool(shapes) and all(s[0] in ("in", "io", "out") for s in shapes)
        return ("list" if as_list else "tuple", shapes)
    if isinstance(ann, TupleAnnotation):
        raise TileTypeError(f"{what} is a tuple parameter ({ann!r}): pass a tuple, got "
                            f"{type(x).__name__}")
    if constant and not isinstance(x, (bool, int, float)):
        raise TileTypeError(f"{what} is a ct.Constant parameter: it takes a static Python "
                            f"value (under jax.jit, a static argument: static_argnums), got "
                            f"{type(x).__name__}")
    if isinstance(x, OutputPlaceholder):
        try:
            shape = tuple(int(d) for d in x.shape)
            dtype = jax.numpy.dtype(x.dtype)
        except (TypeError, ValueError) as e:
            raise TileValueError(f"{what}: OutputPlaceholder({x.shape!r}, {x.dtype!r}) is "
                                 f"not a shape and a dtype ({e})") from None
        roles.outputs.append(("out", jax.ShapeDtypeStruct(shape, dtype)))
        return ("out", jax.ShapeDtypeStruct(shape, dtype))
    if isinstance(x, InputOutput):
        if not isinstance(x.array, jax.Array):
            raise TileTypeError(f"{what}: InputOutput wraps a JAX array, got "
                                f"{type(x.array).__name__}")
        k = _input(roles, x.array)
        roles.written.add(k)
        roles.outputs.append(("io", k))
        return ("io", k)
    if isinstance(x, jax.Array):
        if x.ndim == 0 and name in kernel.param_annotations and \
                _scalar_param(kernel, name):
            raise TileTypeError(f"{what} is a scalar parameter: pass a static Python value "
                                f"(under jax.jit, a static argument: static_argnums), not "
                                f"a traced JAX value")
        return ("in", _input(roles, x))
    if isinstance(x, (bool, int, float)):
        return ("value", x)
    raise TileTypeError(f"{what} is a {type(x).__name__}; cutile_call takes JAX arrays, "
                        f"OutputPlaceholder, InputOutput, bool, int, float or tuples of them")


def _item_annotations(ann, n: int, what: str) -> list:
    """The annotations of the `n` items of a tuple passed for `ann`."""
    from .annotations import TupleAnnotation
    from .specialization import ConstantAnnotation
    if isinstance(ann, ConstantAnnotation):
        return [ann] * n                   # a Constant tuple: every item static
    if not isinstance(ann, TupleAnnotation):
        return [None] * n
    if ann.items is None:
        return [ann.each] * n
    if len(ann.items) != n:
        raise TileTypeError(f"{what} is annotated {ann!r}, a tuple of {len(ann.items)}, got "
                            f"a tuple of {n}")
    return list(ann.items)


def _input(roles: _Roles, array) -> int:
    """The callback operand index of `array` (one per distinct array)."""
    for i, a in enumerate(roles.inputs):
        if a is array:
            return i
    roles.inputs.append(array)
    return len(roles.inputs) - 1


def _out_shape(kind: str, src, roles: _Roles):
    if kind == "out":
        return src.shape, src.dtype
    a = roles.inputs[src]
    return a.shape, a.dtype


def _scalar_param(kernel, name: str) -> bool:
    """Whether parameter `name` is annotated as a scalar (`float`, `ct.Scalar[...]`)."""
    from .annotations import ScalarAnnotation
    return isinstance(kernel.param_annotations[name], ScalarAnnotation) or \
        kernel.annotations.get(name) in (bool, int, float)


__all__ = ["HAS_JAX", "InputOutput", "OutputPlaceholder", "cutile_call", "ffi_status", "uses_ffi"]
