"""Workspaces of stream-K kernels: device memory per (device, stream), zeroed once.

A stream-K GEMM (backend/pipeline/stream_k.py) hands partial sums between its blocks in a
workspace the runtime passes after the walked grid: `WORKSPACE_FLAG_SLOTS` i32
flags, then one slot of `meta["workspace"]` bytes per block.  Every flag a launch
sets it also clears, so a workspace stays valid for the next launch on its stream
without a memset; two streams get two workspaces (their launches may overlap),
launches on one stream share one (they run one after another).

A workspace is allocated when a launch first needs it (or a larger one) and never
freed while the process runs: a CUDA graph that captured a launch keeps using the
pointer it captured.  Allocating inside a stream capture is allowed here: the
allocation runs in relaxed capture mode, and the zeroing is a memset on the
stream itself (captured into the graph, harmless there: the flags are zero again
at every replay's start).
"""

from __future__ import annotations

import threading

# The layout (the ABI the compiler and AOT users follow): this many i32 flags, one
# per block, then one slot of partial sums per block.
WORKSPACE_FLAG_SLOTS = 1024
ALIGN = 256
_buffers: dict[tuple[int, int], tuple[int, int]] = {}     # (device, stream) -> (ptr, bytes)
_kept: list[int] = []                                      # outgrown, still referenced
_lock = threading.Lock()


def size(slot_bytes: int, blocks: int) -> int:
    """Bytes a launch of `blocks` blocks with `slot_bytes` a slot needs."""
    if blocks > WORKSPACE_FLAG_SLOTS:
        from ..errors import TileValueError
        raise TileValueError(f"a stream-K launch of {blocks} blocks; the workspace has "
                             f"flags for {WORKSPACE_FLAG_SLOTS}")
    return WORKSPACE_FLAG_SLOTS * 4 + blocks * slot_bytes


def pointer(device: int, stream: int, nbytes: int) -> int:
    """The device address of a workspace of at least `nbytes` for launches on `stream`
    (a CUstream handle as an int) of `device`."""
    key = (device, stream)
    found = _buffers.get(key)
    if found is not None and found[1] >= nbytes:
        return found[0]
    with _lock:
        found = _buffers.get(key)
        if found is not None and found[1] >= nbytes:
            return found[0]
        ptr = _allocate(device, stream, (nbytes + ALIGN - 1) // ALIGN * ALIGN)
        if found is not None:
            _kept.append(found[0])
        _buffers[key] = (ptr, nbytes)
        return ptr


def _allocate(device: int, stream: int, nbytes: int) -> int:
    from . import driver
    cu = driver.cuda()
    with driver.device_context(device):
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        before = driver.check("cuThreadExchangeStreamCaptureMode",
                              cu.cuThreadExchangeStreamCaptureMode(mode))
        try:
            ptr = driver.check(f"cuMemAlloc of a {nbytes}-byte stream-K workspace",
                               cu.cuMemAlloc(nbytes))
        finally:
            cu.cuThreadExchangeStreamCaptureMode(before)
        driver.check("cuMemsetD32Async (the stream-K workspace's flags)",
                     cu.cuMemsetD32Async(ptr, 0, WORKSPACE_FLAG_SLOTS, cu.CUstream(stream)))
    return int(ptr)


__all__ = ["ALIGN", "WORKSPACE_FLAG_SLOTS", "pointer", "size"]
