"""GPU runtime: arrays as the kernel ABI sees them, the CUDA driver, launch.

Nothing here imports CUDA, torch or cupy at import time: the driver is loaded on
the first GPU call, and array libraries are only touched through their objects.
"""

from .arrays import DeviceArrayInfo, aligned, describe
from .driver import CudaError, has_gpu
from .launcher import bind_args, launch

__all__ = ["CudaError", "DeviceArrayInfo", "aligned", "bind_args", "describe", "has_gpu",
           "launch"]
