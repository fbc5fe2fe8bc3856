"""Models of what the GPU does in hardware, from the PTX ISA, for `sim.executor`.

Memory is bytes: `Memory` holds the kernel's global arrays in one flat buffer
with a validity map (a read or write of a byte no array owns is an error);
shared memory is a per-block byte array.  Register fragments of tensor-core
instructions, the canonical shared-memory layouts a wgmma descriptor names and
the TMA swizzle modes are written out here as the ISA describes them, apart
from the compiler's own layout code, so that the two can disagree.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

BASE_ADDRESS = 1 << 32        # global addresses start here (0 stays invalid)
GUARD = 1024                  # invalid bytes between arrays


def _span(a: np.ndarray) -> tuple[int, int]:
    """(bytes from the lowest to the highest byte the array's elements occupy, the
    first element's offset from the lowest)."""
    if a.size == 0:
        return 0, 0
    low = sum((n - 1) * st for n, st in zip(a.shape, a.strides) if st < 0)
    high = sum((n - 1) * st for n, st in zip(a.shape, a.strides) if st > 0)
    return high - low + a.itemsize, -low


class SimError(Exception):
    """The simulated kernel did something the GPU would fault or hang on."""


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------
class Memory:
    """The global arrays of one launch, side by side in one byte buffer.

    A strided view keeps its strides: its elements sit at their byte offsets from
    its first one, and only their bytes are valid (a kernel that reads the gaps
    between a view's rows reads what its array does not hold).  Negative strides
    are laid out from the lowest address the view touches.
    """

    def __init__(self, arrays: list[np.ndarray]):
        spans = [_span(a) for a in arrays]
        total = sum((s + GUARD + 255) // 256 * 256 for s, _ in spans) + GUARD
        self.bytes = np.zeros(total, np.uint8)
        self.valid = np.zeros(total, bool)
        self.addresses = []
        self._views = []
        at = GUARD
        for a, (span, first) in zip(arrays, spans):
            if a.flags.c_contiguous:
                flat = a.reshape(-1).view(np.uint8)      # (reshape first: 0-d arrays)
                self.bytes[at:at + flat.size] = flat
                self.valid[at:at + flat.size] = True
                self._views.append(None)
            else:
                view = np.ndarray(a.shape, a.dtype, buffer=self.bytes.data,
                                  offset=at + first, strides=a.strides)
                view[...] = a
                ok = np.ndarray(a.shape + (a.itemsize,), bool, buffer=self.valid.data,
                                offset=at + first, strides=a.strides + (1,))
                ok[...] = True
                self._views.append(view)
            self.addresses.append(BASE_ADDRESS + at + first)
            at += (span + GUARD + 255) // 256 * 256

    def copy_out(self, arrays: list[np.ndarray]) -> None:
        for a, addr, view in zip(arrays, self.addresses, self._views):
            if view is not None:
                a[...] = view
                continue
            off = addr - BASE_ADDRESS
            flat = a.reshape(-1).view(np.uint8)
            flat[:] = self.bytes[off:off + flat.size]

    def _offsets(self, addr: np.ndarray, nbytes: int, what: str) -> np.ndarray:
        off = addr.astype(np.int64) - BASE_ADDRESS
        idx = off[:, None] + np.arange(nbytes)[None, :]
        if not idx.size:
            return idx
        # in bounds (checked on the addresses, not on every byte's index), then valid
        if 0 <= off.min() and off.max() + nbytes <= self.bytes.size and self.valid[idx].all():
            return idx
        bad = (idx < 0) | (idx >= self.bytes.size)
        if bad.any() or not self.valid[np.clip(idx, 0, self.bytes.size - 1)].all():
            first = addr[np.nonzero(bad.any(1) | ~self.valid[np.clip(
                idx, 0, self.bytes.size - 1)].all(1))[0][0]]
            raise SimError(f"{what} of {nbytes} bytes at global address 0x{int(first):x} is "
                           f"outside every argument array")
        return idx

    def read(self, addr: np.ndarray, nbytes: int) -> np.ndarray:
        """(T, nbytes) uint8 read at each address."""
        return self.bytes[self._offsets(addr, nbytes, "a load")]

    def write(self, addr: np.ndarray, data: np.ndarray) -> None:
        idx = self._offsets(addr, data.shape[1], "a store")
        self.bytes[idx] = data


class Shared:
    """One block's dynamic shared memory."""

    def __init__(self, nbytes: int):
        self.bytes = np.zeros(max(nbytes, 16), np.uint8)
        self.written = np.zeros(self.bytes.size, bool)
        self.barriers: dict[int, Barrier] = {}
        # TMA stores whose reads of shared memory may not be over, per issuing thread:
        # committed bulk groups (oldest first) and the open one, as (start, end) ranges
        self.bulk_groups: dict[int, list[list[tuple[int, int]]]] = {}
        self.bulk_open: dict[int, list[tuple[int, int]]] = {}

    def _idx(self, addr: np.ndarray, nbytes: int, what: str) -> np.ndarray:
        at = addr.astype(np.int64)
        idx = at[:, None] + np.arange(nbytes)[None, :]
        # (on the addresses: the first and last byte of each access)
        if idx.size and (at.min() < 0 or at.max() + nbytes > self.bytes.size):
            raise SimError(f"{what} of {nbytes} bytes at shared offset "
                           f"{int(addr.min())}..{int(addr.max())} is outside the block's "
                           f"{self.bytes.size} bytes of shared memory")
        return idx

    def read(self, addr: np.ndarray, nbytes: int) -> np.ndarray:
        idx = self._idx(addr, nbytes, "a shared load")
        if not self.written[idx].all():
            raise SimError(f"a shared load at offset {int(addr.flat[0])} reads bytes nothing "
                           f"wrote")
        return self.bytes[idx]

    def write(self, addr: np.ndarray, data: np.ndarray) -> None:
        idx = self._idx(addr, data.shape[1], "a shared store")
        if self._overlaps_barrier(addr, data.shape[1]):
            raise SimError(f"a shared store overwrites a live mbarrier near offset "
                           f"{int(addr.flat[0])}")
        lo, hi = int(idx.min()), int(idx.max()) + 1
        for start, end in self.bulk_reads():
            if lo < end and start < hi and ((idx >= start) & (idx < end)).any():
                raise SimError(f"a shared store overwrites bytes {start}..{end} that a TMA "
                               f"store may still be reading (no cp.async.bulk.wait_group"
                               f".read before it)")
        self.bytes[idx] = data
        self.written[idx] = True

    def check_unread(self, addr: int, nbytes: int, what: str) -> None:
        """`what` overwrites [addr, addr + nbytes): an error if a TMA store may still be
        reading any of it."""
        for start, end in self.bulk_reads():
            if addr < end and start < addr + nbytes:
                raise SimError(f"{what} overwrites bytes {start}..{end} that a TMA store may "
                               f"still be reading (no cp.async.bulk.wait_group.read before it)")

    def bulk_reads(self):
        """The shared ranges that TMA stores may still be reading."""
        for groups in self.bulk_groups.values():
            for g in groups:
                yield from g
        for g in self.bulk_open.values():
            yield from g

    def bulk_commit(self, thread: int) -> None:
        self.bulk_groups.setdefault(thread, []).append(self.bulk_open.pop(thread, []))

    def bulk_wait(self, thread: int, pending: int) -> None:
        """cp.async.bulk.wait_group.read: all but the `pending` youngest groups are read."""
        groups = self.bulk_groups.get(thread, [])
        del groups[:max(0, len(groups) - pending)]

    def _overlaps_barrier(self, addr: np.ndarray, n: int) -> bool:
        """Whether any n-byte store at the offsets `addr` touches a live mbarrier's 8
        bytes: a comparison of every offset against each of the block's (few) barriers,
        not a Python loop over the offsets (a TMA box writes thousands)."""
        if not self.barriers:
            return False
        a = np.asarray(addr, np.int64).reshape(-1)
        return any(((a < b + 8) & (b < a + n)).any() for b in self.barriers)


# ---------------------------------------------------------------------------
# mbarriers
# ---------------------------------------------------------------------------
BARRIER_BYTES = 8


@dataclasses.dataclass
class Barrier:
    count: int
    pending: int
    tx: int = 0
    phase: int = 0            # completed phases

    def arrive(self, n: int = 1) -> None:
        self.pending -= n
        if self.pending < 0:
            raise SimError("more arrivals on an mbarrier than its count")
        self._maybe_complete()

    def expect_tx(self, n: int) -> None:
        self.tx += n

    def complete_tx(self, n: int) -> None:
        self.tx -= n
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def ready(self, parity: int) -> bool:
        """try_wait.parity: the phase of that parity completed (the current, incomplete
        phase has the other parity)."""
        return self.phase % 2 != parity % 2


class RegisterPool:
    """A block's register pool under `setmaxnreg` (PTX ISA): every warp launches with
    the registers ptxas gives a kernel of the block's size (the register file over its
    threads, in steps of 8); `dec` puts a warp's surplus in the block's own pool and
    `inc` takes from it, waiting until the pool holds enough.  The SM's other free
    registers never enter it, so a block whose increases outgrow its decreases waits in
    its `inc` for good.  Checked at the block's end, as the named barriers are (the
    executor runs the warpgroups in lockstep, not in the order the GPU would)."""

    FILE = 65536                 # 32-bit registers of an SM

    def __init__(self, threads: int):
        self.threads = threads
        self.launch = min(255, self.FILE // threads) // 8 * 8
        self.now: dict[int, int] = {}       # warp -> its count, where it changed
        self.first_inc = None               # (op, count) of the first increase

    def record(self, action: str, count: int, mask: np.ndarray, op) -> None:
        if count % 8 or not 24 <= count <= 256:
            raise SimError(f"setmaxnreg.{action} {count}: a multiple of 8 in [24, 256]")
        for w in np.unique(np.nonzero(mask)[0] // 32):
            was = self.now.get(int(w), self.launch)
            if (action == "inc") != (count >= was) and count != was:
                raise SimError(f"setmaxnreg.{action} {count} from {was} registers")
            self.now[int(w)] = count
        if action == "inc" and self.first_inc is None:
            self.first_inc = (op, count)

    def check(self) -> str | None:
        """None when every increase can be met from what the decreases released."""
        grown = sum(32 * (n - self.launch) for n in self.now.values())
        if grown <= 0:
            return None
        op, count = self.first_inc
        released = sum(32 * (self.launch - n) for n in self.now.values() if n < self.launch)
        return (f"{op.location}: setmaxnreg.inc to {count} waits for good: the block's "
                f"{self.threads} threads launch with {self.launch} registers each, the "
                f"decreases release {released} registers and the increases ask "
                f"{released + grown}")


class NamedBarriers:
    """A block's named barriers (`bar.sync id, n` and `bar.arrive id, n`, ids 0-15), as
    the hardware counts them: a barrier's phase completes once `n` threads arrived,
    waiting (sync) or not (arrive), and releases the threads that wait in it.

    The executor runs a block's threads in lockstep, which no barrier holds up, so the
    barriers are checked apart from it: each warp's barrier operations are recorded in
    its program order (`record`) and replayed at the block's end (`check`) with each
    warp running until it waits, round after round.  A replay that stops with warps
    still waiting means the GPU would hang; a phase whose arrivals name different
    thread counts, or one that receives more arrivals than its count, means two uses of
    one id collide; arrivals left in a phase at the end were never waited for.
    mbarriers are not part of the replay (the executor models them as it runs)."""

    def __init__(self):
        # warp -> [(kind, id, count, threads of the warp, op)], in its program order
        self.events: dict[int, list[tuple]] = {}

    def record(self, kind: str, ids: np.ndarray, count: int, mask: np.ndarray,
               op) -> None:
        # each (warp, id) of the active threads with its thread count, by warp and id
        # (one np.unique over both, not one per warp: a block's warps in one pass)
        active = np.nonzero(mask)[0]
        bars = np.asarray(ids)[active].astype(np.int64)
        low = int(bars.min()) if bars.size else 0
        span = int(bars.max()) - low + 1 if bars.size else 1
        keys, counts = np.unique((active // 32) * span + (bars - low), return_counts=True)
        for key, n in zip(keys.tolist(), counts.tolist()):
            w, bar = divmod(key, span)
            self.events.setdefault(w, []).append((kind, bar + low, count, n, op))

    def check(self) -> str | None:
        """None when the recorded operations complete on the GPU; else what goes wrong."""
        queues = {w: list(reversed(ev)) for w, ev in self.events.items()}
        phases: dict[int, list] = {}        # id -> [count, arrived, waiting warps, first op]
        waiting: dict[int, tuple] = {}      # warp -> the (id, op) it waits at
        moved = True
        while moved:
            moved = False
            for w, queue in queues.items():
                while queue and w not in waiting:
                    kind, bar, count, n, op = queue.pop()
                    moved = True
                    phase = phases.setdefault(bar, [count, 0, [], op])
                    if phase[0] != count:
                        return (f"barrier {bar} is used for {phase[0]} threads at "
                                f"{phase[3].location} and for {count} at {op.location} "
                                f"in one phase: two uses of one id collide")
                    phase[1] += n
                    if phase[1] > count:
                        return (f"barrier {bar} of {count} threads gets {phase[1]} "
                                f"arrivals (last at {op.location}): two uses of one id "
                                f"collide")
                    if kind == "sync":
                        waiting[w] = (bar, op)
                        phase[2].append(w)
                    if phase[1] == count:
                        for x in phase[2]:
                            del waiting[x]
                        del phases[bar]
        if waiting:
            w, (bar, op) = next(iter(waiting.items()))
            count, arrived = phases[bar][:2]
            return (f"warp {w} waits at barrier {bar} ({op.location}) with {arrived} of "
                    f"its {count} threads arrived, and no other warp can move on "
                    f"(warps waiting: {sorted(waiting)})")
        for bar, (count, arrived, _, op) in phases.items():
            return (f"barrier {bar} is left with {arrived} of {count} arrivals at the "
                    f"block's end (first at {op.location}): a wait is missing")
        return None


# ---------------------------------------------------------------------------
# Tensor maps and TMA
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class TensorMap:
    """What cuTensorMapEncodeTiled was given (runtime.tensor_maps.encode_args)."""

    address: int
    dims: list[int]           # innermost first
    strides: list[int]        # bytes, dims 1.. (innermost first)
    box: list[int]            # innermost first
    elem_bytes: int
    swizzle: int              # bytes, 0 for none


def swizzle(offset: int, mode: int) -> int:
    """The TMA/wgmma swizzle on a shared address: bits [4, 4+b) ^= bits [7, 7+b)."""
    if mode == 0:
        return offset
    b = {32: 1, 64: 2, 128: 3}[mode]
    return offset ^ (((offset >> 7) & ((1 << b) - 1)) << 4)


def _box(tm: TensorMap, coords: list[int], shared_at: int, what: str):
    """Every element of the box at `coords` (innermost first), as (global addresses,
    in-bounds mask, shared addresses: box rows of the innermost dim one after another
    from `shared_at`, swizzled)."""
    eb = tm.elem_bytes
    row_bytes = tm.box[0] * eb
    if tm.swizzle and row_bytes > tm.swizzle:
        raise SimError(f"a TMA box row of {row_bytes} bytes exceeds its {tm.swizzle}-byte "
                       f"swizzle")
    if shared_at % (1024 if tm.swizzle == 128 else 128):
        raise SimError(f"TMA {what} {shared_at} is not aligned for the swizzle")
    grids = np.meshgrid(*[np.arange(b) for b in tm.box], indexing="ij")
    g = [coords[d] + grids[d].reshape(-1) for d in range(len(tm.box))]
    inside = np.ones(g[0].shape, bool)
    for d in range(len(g)):
        inside &= (g[d] >= 0) & (g[d] < tm.dims[d])
    addr = tm.address + g[0] * eb
    for d in range(1, len(g)):
        addr = addr + g[d] * tm.strides[d - 1]
    # the element's place in shared memory: its box row, then its column
    row = np.zeros(g[0].shape, np.int64)
    for d in reversed(range(1, len(g))):
        row = row * tm.box[d] + grids[d].reshape(-1)
    off = row * row_bytes + grids[0].reshape(-1) * eb
    return addr, inside, shared_at + swizzle_array(off, tm.swizzle)


def tma_load(memory: Memory, shared: Shared, tm: TensorMap, dst: int,
             coords: list[int]) -> int:
    """Copies one box to shared memory at `dst` (rows of the innermost box dim, one
    after another, swizzled; out-of-bounds elements zero); returns the bytes."""
    addr, inside, at = _box(tm, coords, dst, "destination")
    data = np.zeros((addr.size, tm.elem_bytes), np.uint8)
    if inside.any():
        data[inside] = memory.read(addr[inside], tm.elem_bytes)
    shared.write(at, data)
    return addr.size * tm.elem_bytes


def tma_store(memory: Memory, shared: Shared, tm: TensorMap, src: int, coords: list[int],
              thread: int) -> None:
    """Copies one box from shared memory at `src` (laid out as `tma_load` writes it) to
    the array, dropping out-of-bounds elements; the box's bytes stay in `thread`'s open
    bulk group until a wait says the store has read them."""
    addr, inside, at = _box(tm, coords, src, "store source")
    data = shared.read(at, tm.elem_bytes)
    if inside.any():
        memory.write(addr[inside], data[inside])
    shared.bulk_open.setdefault(thread, []).append((src, src + addr.size * tm.elem_bytes))


# ---------------------------------------------------------------------------
# wgmma
# ---------------------------------------------------------------------------
ELEM = {"f16": (np.float16, 2), "bf16": (ml_dtypes.bfloat16, 2), "tf32": (np.float32, 4),
        "e4m3": (ml_dtypes.float8_e4m3fn, 1), "e5m2": (ml_dtypes.float8_e5m2, 1),
        "f32": (np.float32, 4)}


def decode_descriptor(desc: int) -> tuple[int, int, int, int]:
    """(start, leading byte offset, stride byte offset, swizzle bytes)."""
    desc &= (1 << 64) - 1
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    mode = desc >> 62
    return start, lbo, sbo, {0: 0, 1: 128, 2: 64, 3: 32}[mode]


def read_operand(shared: Shared, desc: int, rows: int, k: int, k_major: bool,
                 elem: str) -> np.ndarray:
    """The rows x k matrix (rows = M of A, N of B) a descriptor names, in the canonical
    layouts: K-major, 8-row groups `sbo` apart, rows `swizzle` bytes long; MN-major,
    `swizzle` bytes of M/N per row of one k, 8-k groups `sbo` apart, swizzle-wide
    M/N chunks `lbo` apart."""
    start, lbo, sbo, swz = decode_descriptor(desc)
    if swz == 0:
        raise SimError("wgmma descriptors without a swizzle are not modelled")
    dtype, eb = ELEM[elem]
    r = np.arange(rows)[:, None]
    c = np.arange(k)[None, :]
    if k_major:
        addr = start + (r // 8) * sbo + (r % 8) * swz + c * eb
    else:
        w = swz // eb
        addr = start + (r // w) * lbo + (c // 8) * sbo + (c % 8) * swz + (r % w) * eb
    addr = swizzle_array(addr, swz).reshape(-1)
    raw = shared.read(addr, eb)                       # (rows * k, eb)
    return raw.reshape(-1).view(dtype).reshape(rows, k)


def swizzle_array(offset: np.ndarray, mode: int) -> np.ndarray:
    if mode == 0:
        return offset
    b = {32: 1, 64: 2, 128: 3}[mode]
    return offset ^ (((offset >> 7) & ((1 << b) - 1)) << 4)


import functools  # noqa: E402


@functools.cache
def wgmma_accumulator_index(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(thread, register, row, col) arrays of m64nN's accumulator fragment."""
    t, i, r, c = [], [], [], []
    for (tt, ii), (rr, cc) in wgmma_accumulator_coords(n).items():
        t.append(tt), i.append(ii), r.append(rr), c.append(cc)
    return tuple(np.array(x) for x in (t, i, r, c))


def wgmma_accumulator_coords(n: int):
    """(thread of the warpgroup, register) -> (row, col) of m64nN's accumulator."""
    coords = {}
    for t in range(128):
        w, lane = divmod(t, 32)
        g, q = divmod(lane, 4)
        for i in range(n // 2):
            coords[(t, i)] = (16 * w + g + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * q + i % 2)
    return coords


def a_fragment_coords():
    """(lane, element) -> (row, col) of a 16 x 16 A fragment (mma.m16n8k16, and each
    warp's 16 rows of wgmma's register A)."""
    return {(lane, i): (lane // 4 + 8 * ((i // 2) % 2), 2 * (lane % 4) + i % 2 + 8 * (i // 4))
            for lane in range(32) for i in range(8)}


def b_fragment_coords():
    """(lane, element) -> (k, n) of a 16 x 8 B fragment (mma.m16n8k16)."""
    return {(lane, i): (2 * (lane % 4) + i % 2 + 8 * (i // 2), lane // 4)
            for lane in range(32) for i in range(4)}


def a_fragment_coords_tf32():
    """(lane, element) -> (row, col) of a 16 x 8 tf32 A fragment (mma.m16n8k8)."""
    return {(lane, i): (lane // 4 + 8 * (i % 2), lane % 4 + 4 * (i // 2))
            for lane in range(32) for i in range(4)}


def b_fragment_coords_tf32():
    """(lane, element) -> (k, n) of an 8 x 8 tf32 B fragment (mma.m16n8k8)."""
    return {(lane, i): (lane % 4 + 4 * i, lane // 4) for lane in range(32) for i in range(2)}


def c_fragment_coords():
    """(lane, element) -> (row, col) of a 16 x 8 accumulator (mma.m16n8k16)."""
    return {(lane, i): (lane // 4 + 8 * (i // 2), 2 * (lane % 4) + i % 2)
            for lane in range(32) for i in range(4)}


def to_float(x: np.ndarray, elem: str) -> np.ndarray:
    if elem == "tf32":     # the tensor core reads the top 19 bits of an f32
        bits = np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
        return bits.view(np.float32).astype(np.float64)
    return np.asarray(x).astype(np.float64)
