"""Ordered loads and stores (cuTile's memory_order RELAXED / ACQUIRE / RELEASE with a
memory_scope): the checks cuTile makes, the IR (relaxed accesses no pass merges or
moves, fences), a hand-off between blocks in the interpreter and in the simulator
of both targets' code, and the PTX.  (On the GPU: test_gpu_numerics.py.)"""

import numpy as np
import pytest

import tileir as ct
from tileir.sim import simulate

ACQUIRE, RELEASE, RELAXED = ct.MemoryOrder.ACQUIRE, ct.MemoryOrder.RELEASE, ct.MemoryOrder.RELAXED
DEVICE = ct.MemoryScope.DEVICE


@ct.kernel
def handoff(data, flag, out, T: ct.Constant[int]):
    """Block 0 writes `data`, then raises `flag` with a release store; block 1 spins on
    an acquire load of `flag`, then copies `data` to `out`."""
    if ct.bid(0) == 0:
        ct.store(data, index=(0,), tile=ct.arange(T, dtype=ct.int32) * 3 + 1)
        ct.store(flag, index=(0,), tile=ct.full((1,), 1, ct.int32), memory_order=RELEASE,
                 memory_scope=DEVICE)
    else:
        ready = ct.load(flag, index=(0,), shape=(), memory_order=ACQUIRE, memory_scope=DEVICE)
        while ready == 0:
            ready = ct.load(flag, index=(0,), shape=(), memory_order=ACQUIRE,
                            memory_scope=DEVICE)
        ct.store(out, index=(0,), tile=ct.load(data, index=(0,), shape=(T,)))


def _args(t=64):
    return (np.zeros(t, np.int32), np.zeros(1, np.int32), np.full(t, -1, np.int32), t)


def test_a_release_acquire_hand_off_runs_everywhere():
    want = np.arange(64, dtype=np.int32) * 3 + 1
    args = _args()
    ct.launch(None, (2,), handoff, args)
    np.testing.assert_array_equal(args[2], want)
    for target in ("sm_90a", "sm_80"):
        args = _args()
        ck = handoff.compile(args, stage="gpu", target=target)
        simulate(ck, (2, 1, 1), args)
        np.testing.assert_array_equal(args[2], want)
        ptx = handoff.compile(args, target=target).artifacts["ptx"]
        assert "st.relaxed.gpu.global.b32" in ptx and "ld.relaxed.gpu.global.b32" in ptx
        assert ptx.count("fence.acq_rel.gpu") >= 2          # LLVM may share the acquires'
        assert str(ck.module).count("fence.acq_rel.gpu") == 3   # one release, two acquires


def test_relaxed_loads_are_not_merged_moved_or_dropped():
    @ct.kernel
    def twice(flag, out):
        a = ct.load(flag, index=(0,), shape=(1,), memory_order=RELAXED,
                    memory_scope=ct.MemoryScope.BLOCK)
        b = ct.load(flag, index=(0,), shape=(1,), memory_order=RELAXED,
                    memory_scope=ct.MemoryScope.BLOCK)
        ct.load(flag, index=(0,), shape=(1,), memory_order=RELAXED, memory_scope=DEVICE)
        ct.store(out, index=(0,), tile=a + b)

    text = str(twice.compile((np.zeros(1, np.int32), np.zeros(1, np.int32)), stage="tile")
               .module)
    assert text.count('tile.memory_scope = "block"') == 2
    assert text.count('tile.memory_scope = "device"') == 1


@ct.kernel
def relaxed_copy(x, out, BM: ct.Constant[int], BN: ct.Constant[int]):
    """A (BM, BN) tile of f32 read with relaxed device-scope loads, copied out plainly:
    where a thread's part of the tile lies inside x, 16-byte relaxed loads; at the
    array's edge, element by element with the padding (zero) past it."""
    t = ct.load(x, index=(ct.bid(0), ct.bid(1)), shape=(BM, BN), memory_order=RELAXED,
                memory_scope=DEVICE, padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(ct.bid(0), ct.bid(1)), tile=t)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_relaxed_f32_tiles_load_16_bytes_at_a_time_inside_and_by_element_at_the_edge(target):
    rng = np.random.default_rng()
    rows, cols = 37, 200                 # ragged: the last tiles of both axes cross the edge
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.full((rows, cols), np.nan, np.float32)
    args = (x, out, 16, 64)
    grid = (ct.cdiv(rows, 16), ct.cdiv(cols, 64), 1)
    simulate(relaxed_copy.compile(args, stage="gpu", target=target), grid, args)
    np.testing.assert_array_equal(out, x)
    ptx = relaxed_copy.compile(args, target=target, grid=grid).artifacts["ptx"]
    assert "ld.relaxed.gpu.global.v4.b32" in ptx          # the interior threads
    assert "ld.relaxed.gpu.global.b32" in ptx             # the edge, by element


@ct.kernel
def bad_load(x, MODE: ct.Constant[int]):
    if MODE == 0:
        ct.load(x, index=(0,), shape=(16,), memory_order=RELEASE, memory_scope=DEVICE)
    elif MODE == 1:
        ct.load(x, index=(0,), shape=(16,), memory_order=ACQUIRE)
    elif MODE == 2:
        ct.load(x, index=(0,), shape=(16,), memory_scope=DEVICE)
    else:
        ct.load(x, index=(0,), shape=(16,), memory_order=ct.MemoryOrder.ACQ_REL,
                memory_scope=DEVICE)


@pytest.mark.parametrize("mode,message", [
    (0, "Invalid memory order for tile_load"),
    (1, "tile_load with ACQUIRE memory ordering requires a memory scope"),
    (2, "tile_load with WEAK memory ordering cannot specify a memory scope"),
    (3, "Invalid memory order for tile_load"),
])
def test_loads_check_order_and_scope_as_cutile_does(mode, message):
    with pytest.raises(ct.TileTypeError, match=message):
        bad_load.compile((np.zeros(16, np.float32), mode), stage="frontend")


def test_stores_take_release_not_acquire():
    @ct.kernel
    def bad(x):
        ct.store(x, index=(0,), tile=ct.zeros((16,), ct.float32), memory_order=ACQUIRE,
                 memory_scope=DEVICE)

    with pytest.raises(ct.TileTypeError, match="Invalid memory order for tile_store"):
        bad.compile((np.zeros(16, np.float32),), stage="frontend")


def test_ordered_kernels_keep_their_grid():
    x = np.zeros((4, 4096), np.float32)

    @ct.kernel
    def publish(x, y):
        t = ct.load(x, index=(ct.bid(0), 0), shape=(1, 4096))
        ct.store(y, index=(ct.bid(0), 0), tile=t, memory_order=RELEASE, memory_scope=DEVICE)

    ck = publish.compile((x, x), target="sm_90a", grid=(4,), sm_count=132)
    assert "grid_rewrites" not in ck.meta


@ct.kernel(num_warps=16)
def rotate_in_place(x, big, S: ct.Constant[int]):
    """x (S, 64) updated in place, in a block of 16 warps (sized for `big`'s 2048
    elements): x's tile of S x 64 has fewer elements than the block's threads hold at
    4 a thread, so its layout keeps each element in several threads."""
    a = ct.load(x, index=(0, 0), shape=(S, 64))
    ct.store(x, index=(0, 0), tile=a * 2.0 + 1.0)
    b = ct.load(big, index=(0, 0), shape=(32, 64))
    ct.store(big, index=(0, 0), tile=b + 1.0)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_an_in_place_store_from_a_replicated_layout_waits_for_the_loads(target):
    """A tile stored where the block loaded it: every copy of a replicated element
    loads before any copy stores (a barrier between, or one copy's store would feed
    another copy's load: RoPE rotated twice on the GPU, 2026-11-29); a layout with one
    copy an element (`big`'s 32 x 64 at 4 a thread) stores without one."""
    import re
    for s, replicated in ((8, True), (32, False)):
        args = (np.zeros((s, 64), np.float32), np.zeros((32, 64), np.float32), s)
        ptx = rotate_in_place.compile(args, target=target).artifacts["ptx"]
        body = ptx[ptx.index(".entry"):]
        first_store = body.index("st.global")
        # (LLVM may copy the barrier into the interior and the edge paths of the store)
        assert ("bar.sync" in body[:first_store]) == replicated, (s, body[:first_store])
        assert bool(re.findall(r"^\s*bar\.sync", body, re.M)) == replicated, s
    args = (np.arange(8 * 64, dtype=np.float32).reshape(8, 64), np.ones((32, 64), np.float32), 8)
    ck = rotate_in_place.compile(args, stage="gpu", target="sm_90a")
    want = args[0] * 2.0 + 1.0
    simulate(ck, (1, 1, 1), args)
    np.testing.assert_array_equal(args[0], want)
    np.testing.assert_array_equal(args[1], 2.0)
