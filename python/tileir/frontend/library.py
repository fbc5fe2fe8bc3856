"""Calls a kernel refuses at its own line: functions of NumPy, `math`, the standard
library and other installed packages.

A kernel compiles the tileir API, the builtins it takes (`calls._BUILTINS`) and
the user's own functions, inline (plain helpers, as cuTile does).  A Python
function of a library is host code: compiled inline like the user's, NumPy's `ones`
failed deep in NumPy's source (`numpy/_core/numeric.py:232:9: cannot call empty`),
naming a line the user never wrote.  `is_library_function` tells those apart by
where their code lives, and `refusal` says at the kernel's call what to write
instead.  Nothing here imports MLIR: `tileir.function.is_plain_helper` (which the
compile cache uses too) asks `is_library_function`.
"""

from __future__ import annotations

import functools
import inspect
import os
import site
import sys
import sysconfig
import types
from typing import Any

from .. import api


def is_library_function(fn: Any) -> bool:
    """A function of the standard library or of an installed package (its code under
    site-packages or the standard library's directory), a builtin, or a callable
    object of theirs (a NumPy ufunc, a class), other than tileir's own.  A module of
    an installed package that imports tileir is kernel code (a library of helpers
    written for kernels), not a library's."""
    if isinstance(fn, types.FunctionType):
        if _is_tileir(fn.__module__ or ""):
            return False
        return _is_library_file(fn.__code__.co_filename) and \
            not _imports_tileir(fn.__globals__)
    if not callable(fn):
        return False
    return _is_library_module(_module_of(fn))


def _module_of(fn: Any) -> str:
    """The module a callable that is not a Python function belongs to: its own
    (`math.exp`, `numpy.exp`, `numpy.float32`), or its receiver's class's for a bound
    builtin method (`random.random` is a `random.Random`'s)."""
    module = getattr(fn, "__module__", None)
    owner = getattr(fn, "__self__", None)
    if not isinstance(module, str) and owner is not None and \
            not isinstance(owner, types.ModuleType):
        module = type(owner).__module__
    return module if isinstance(module, str) else ""


def _is_library_module(module: str) -> bool:
    top = module.split(".")[0]
    if not top or _is_tileir(module):
        return False
    if top == "builtins" or top.lstrip("_") in sys.stdlib_module_names:
        return True
    file = getattr(sys.modules.get(top), "__file__", None)
    return file is not None and os.path.realpath(file).startswith(_library_dirs())


def _is_tileir(module: str) -> bool:
    return module == "tileir" or module.startswith("tileir.")


@functools.lru_cache(maxsize=1024)
def _is_library_file(filename: str) -> bool:
    if filename.startswith("<frozen "):          # the standard library's frozen modules
        return True
    return os.path.realpath(filename).startswith(_library_dirs())


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """The standard library's and the installed packages' directories."""
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    dirs.update(getattr(site, "getsitepackages", list)())
    dirs.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


def _imports_tileir(globals_: dict) -> bool:
    """The module holds tileir or something of it (`import tileir as ct`, `from tileir
    import load`)."""
    for v in list(globals_.values()):
        if isinstance(v, types.ModuleType):
            name = v.__name__
        elif isinstance(v, (types.FunctionType, type)):
            name = v.__module__ or ""
        else:
            continue
        if _is_tileir(name):
            return True
    return False


def qualified_name(fn: Any, spelled: str | None = None) -> str:
    """`numpy.ones`, `math.exp`, `random.random`, `sorted`: the function as its
    package names it.  `spelled`: the call's own dotted name with its first part
    resolved to a module (`np.ones` -> `numpy.ones`), when it is one."""
    if spelled:
        return spelled
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return type(fn).__qualname__
    if isinstance(fn, (types.FunctionType, type)):
        name = fn.__qualname__
    module = _module_of(fn)
    module = "operator" if module == "_operator" else module
    return f"{module}.{name}" if module and module != "builtins" else name


def whose(name: str) -> str:
    """Why the function `name` (qualified) is not compiled, in a few words."""
    package = name.split(".")[0] if "." in name else ""
    host = ", which runs on the host (a kernel compiles the tileir API, the builtins it " \
           "takes and your own functions)"
    if not package:
        return "it is not one of the builtins a kernel takes (range, len, min, max, abs, " \
               "int, float, bool, tuple, divmod, pow, print)"
    if package == "numpy":
        return "it is NumPy's" + host
    if package.lstrip("_") in sys.stdlib_module_names:
        return "it is the standard library's" + host
    return f"it comes from the installed package '{package}'" + host


def refusal(name: str, constant_args: bool) -> str:
    """The message for a kernel's call of the library function `name` (qualified):
    what it is and what to write instead.  `constant_args`: every argument is a
    compile-time value (`math.exp(1.0)`), which `ct.static_eval` computes."""
    return f"cannot call {name} inside a kernel: {whose(name)}; {_instead(name, constant_args)}"


def _instead(name: str, constant_args: bool) -> str:
    package, _, short = name.rpartition(".")
    root = package.split(".")[0]
    if root == "numpy" and short in _NUMPY_CONSTRUCTORS:
        return _NUMPY_CONSTRUCTORS[short]
    if root in ("random", "secrets") or package == "numpy.random":
        return ("a kernel draws no random numbers: draw them on the host and pass them "
                "in an array")
    if root in ("logging", "pprint", "sys", "warnings"):
        return ("print(...) and ct.printf(format, ...) print from a kernel (once per "
                "block, tiles too)")
    if constant_args and root in ("math", "cmath", "numpy"):
        return (f"on compile-time numbers, ct.static_eval({name}(...)) computes it while "
                f"compiling (with {package} imported)")
    if not package and short in _BUILTIN_HINTS:
        return _BUILTIN_HINTS[short]
    same = _SAME_AS.get(short, short)
    if same in api.SIGNATURES:
        return f"use {_api_call(same)}"
    return ("compute it with tileir's functions (ct.exp, ct.where, ct.sum, ...) or in a "
            "helper function of your own")


def _api_call(name: str) -> str:
    """`ct.ones(shape, dtype=None)`: a tileir function with its parameters."""
    params = inspect.signature(api.SIGNATURES[name]).parameters.values()
    shown = ", ".join(p.name if p.default is inspect.Parameter.empty else
                      f"{p.name}={p.default!r}" for p in params)
    return f"ct.{name}({shown})"


_LIKE = "ct.{}(t.shape, t.dtype) for a tile shaped like t"
_NUMPY_CONSTRUCTORS = {
    "empty": "use ct.zeros(shape, dtype=None) or ct.full(shape, fill_value, dtype=None) "
             "(a tile is never uninitialized)",
    "empty_like": "use " + _LIKE.format("zeros"),
    "zeros_like": "use " + _LIKE.format("zeros"),
    "ones_like": "use " + _LIKE.format("ones"),
    "ones": "use ct.ones(shape, dtype=None)",
    "zeros": "use ct.zeros(shape, dtype=None)",
    "full": "use ct.full(shape, fill_value, dtype=None)",
    "arange": "use ct.arange(size, dtype=None, start=0, step=1)",
    "full_like": "use ct.full(t.shape, fill_value, t.dtype) for a tile shaped like t",
    "array": "tiles come from ct.load, ct.full, ct.zeros and ct.arange",
    "asarray": "tiles come from ct.load, ct.full, ct.zeros and ct.arange",
    "linspace": "use ct.arange(size, dtype=ct.float32) * step + start",
}

# NumPy's and math's names for what tileir calls otherwise
_SAME_AS = {"fabs": "abs", "absolute": "abs", "power": "pow", "arctan2": "atan2",
            "concatenate": "cat", "amax": "max", "amin": "min", "fmax": "maximum",
            "fmin": "minimum", "subtract": "sub", "multiply": "mul", "divide": "truediv",
            "true_divide": "truediv", "floor_divide": "floordiv", "remainder": "mod",
            "dot": "matmul", "left_shift": "bitwise_lshift", "right_shift": "bitwise_rshift",
            "invert": "bitwise_not", "cumulative_sum": "cumsum", "float32": "astype",
            "float16": "astype", "float64": "astype", "int32": "astype", "int64": "astype",
            "int8": "astype", "int16": "astype", "uint8": "astype", "uint32": "astype"}

_BUILTIN_HINTS = {
    "sum": "use ct.sum(t, axis=None) to add up a tile (sum() of a tuple: write the "
           "additions out, or a helper looping over it)",
    "round": "use ct.floor(x + 0.5) for a tile or scalar",
    "list": "a kernel's lists are tuples: tuple(...) or (a, b, ...)",
    "isinstance": "the kinds of a kernel's values are known while compiling: "
                  "ct.static_eval(isinstance(...)) tests one",
    "type": "a tile's dtype is t.dtype, its shape t.shape",
    "any": "use ct.max(ct.astype(cond, ct.int32)) > 0 over a tile of conditions",
    "all": "use ct.min(ct.astype(cond, ct.int32)) > 0 over a tile of conditions",
    "enumerate": "enumerate(...) is taken in a comprehension over compile-time values; "
                 "loop with for i in range(len(t))",
    "zip": "zip(...) is taken in a comprehension over compile-time values",
    "sorted": "sort compile-time values with ct.static_eval(sorted(...))",
    "str": "print(...) and f-strings format values in a kernel",
}
