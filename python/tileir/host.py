"""Bringing user arrays to the interpreter and results back.

NumPy arrays are used in place.  torch CPU tensors are viewed as NumPy arrays
sharing memory (bf16 through an int16 view reinterpreted as ml_dtypes
bfloat16).  Device arrays (torch CUDA, cupy) are copied to the host, and their
host copies written back after the run.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import dtypes as dt
from .errors import TileTypeError


def to_host(a: Any) -> tuple[np.ndarray, Callable[[], None] | None]:
    """A NumPy view or copy of `a`, and a write-back function for copies (None for views)."""
    if isinstance(a, np.ndarray):
        return a, None
    mod = type(a).__module__
    if mod.startswith("torch"):
        return _torch_to_host(a)
    if mod.startswith("cupy"):
        host = a.get()
        return host, lambda: a.set(host)
    if hasattr(a, "__dlpack__"):
        # A CPU DLPack producer shares its memory, so stores land in place.
        try:
            return np.from_dlpack(a), None
        except (BufferError, RuntimeError, TypeError) as e:
            raise TileTypeError(f"cannot view a {type(a).__name__} as a host array through "
                                f"DLPack ({e}); pass a NumPy array, a torch tensor or a cupy "
                                f"array") from None
    # Anything else would be a copy whose results could not be written back.
    raise TileTypeError(f"cannot run a kernel on a {type(a).__name__}: pass a NumPy array, a "
                        f"torch tensor, a cupy array or a DLPack-capable host array")


def _torch_to_host(t) -> tuple[np.ndarray, Callable[[], None] | None]:
    import torch
    d = dt.from_any(t.dtype)
    if d is None:
        raise TileTypeError(f"torch dtype {t.dtype} is not supported")
    src = t.detach()
    on_cpu = src.device.type == "cpu"
    host = src if on_cpu else src.cpu()
    if d == dt.bfloat16:
        arr = host.view(torch.int16).numpy().view(dt.bfloat16.numpy)
    else:
        arr = host.numpy()
    if on_cpu:
        return arr, None

    def write_back():
        back = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16) \
            if d == dt.bfloat16 else torch.from_numpy(arr)
        t.copy_(back.to(t.device))
    return arr, write_back


def run_interpreted(ck, grid: tuple[int, int, int], args) -> None:
    """Runs a compiled kernel specialization in the NumPy interpreter."""
    host_args, write_backs = [], []
    for a in ck.runtime_args(args):
        if hasattr(a, "dtype") and hasattr(a, "shape") and not isinstance(a, np.generic):
            arr, wb = to_host(a)
            host_args.append(arr)
            if wb is not None:
                write_backs.append(wb)
        else:
            host_args.append(a)
    kernel = ck.interpreted()      # (what interpreter.run does, without the lookup by content)
    kernel.launch(kernel.grid(grid), kernel.bind(host_args))
    for wb in write_backs:
        wb()
