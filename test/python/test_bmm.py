"""CPU tests of the batched GEMM with the batch on a grid axis, written as cuTile's
BatchMatMul sample writes it: (1, BM, BK) and (1, BK, BN) loads reshaped to 2-d for
`mma`, the accumulator reshaped to a (1, BM, BN) store.

As launched on an H200-sized grid, the sm_90a kernel compiles to the 2-d GEMM's
instructions at the same tiles (the TMA ring, the epilogue's TMA store with its
stmatrix, cluster pairs with multicast where the 2-d kernel has them, the same ring
depth, persistence and retiling), and the simulator runs it correctly at ragged
batched sizes, with the batch on grid axis 0 (the sample's) or 2, into aligned and
unaligned arrays, for both targets.  The candidates bench/bmm.py --schedules times
run right too: the L2 lookahead (`persistent.L2_AHEAD`: the boxes it prefetches are
those the ring loads later) and stream-K (the batch walked last).  The GPU runs are
test_gpu_bmm.py; the speed against torch.bmm is bench/bmm.py."""

from __future__ import annotations

import collections
import re

import ml_dtypes
import numpy as np
import pytest

import tileir as ct
from mlir import ir
from tileir.dialect import context as tile_context
from tileir.kernel import hardware_grid
from tileir.examples.bmm import bmm, bmm_grid
from tileir.sim import simulate

from test_tensor_cores import _sass_text, gemm

BF16 = ml_dtypes.bfloat16
ZERO = ct.PaddingMode.ZERO
SLOW = pytest.mark.slow
TMA_STORE = "nvvm.cp.async.bulk.tensor.global.shared.cta"


@ct.kernel
def bmm_residual(A, B, D, C, alpha: float, TM: ct.Constant[int], TN: ct.Constant[int],
                 TK: ct.Constant[int]):
    """C[z] = alpha A[z] @ B[z] + D[z], the epilogue on the (1, TM, TN) tile: the
    residual is loaded in the accumulator's layout."""
    i, j, z = ct.bid(0), ct.bid(1), ct.bid(2)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[2], TK)):
        a = ct.load(A, index=(z, i, k), shape=(1, TM, TK), padding_mode=ZERO).reshape((TM, TK))
        b = ct.load(B, index=(z, k, j), shape=(1, TK, TN), padding_mode=ZERO).reshape((TK, TN))
        acc = ct.mma(a, b, acc)
    d = ct.load(D, index=(z, i, j), shape=(1, TM, TN), padding_mode=ZERO)
    out = acc.reshape((1, TM, TN)) * alpha + d.astype(ct.float32)
    ct.store(C, index=(z, i, j), tile=out.astype(C.dtype))


@ct.kernel
def bmm_heads(Q, K, S, H: ct.Constant[int], TM: ct.Constant[int], TN: ct.Constant[int],
              TD: ct.Constant[int]):
    """S[b, h] = Q[b, h] @ K[b, h]^T for 4-d (batch, heads, rows, D) arrays: (1, 1, TM, TD)
    tiles, a store with two leading unit dims."""
    i, j, bh = ct.bid(0), ct.bid(1), ct.bid(2)
    b, h = bh // H, bh % H
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for d in range(ct.cdiv(Q.shape[3], TD)):
        q = ct.load(Q, index=(b, h, i, d), shape=(1, 1, TM, TD), padding_mode=ZERO)
        k = ct.load(K, index=(b, h, j, d), shape=(1, 1, TN, TD), padding_mode=ZERO)
        acc = ct.mma(q.reshape((TM, TD)), ct.transpose(k.reshape((TN, TD))), acc)
    ct.store(S, index=(b, h, i, j), tile=acc.astype(S.dtype).reshape((1, 1, TM, TN)))


def _ops(cubin: bytes, tmp_path) -> collections.Counter:
    """SASS opcodes with their modifiers, a TMA copy's dimensionality dropped (.2D, .3D)."""
    text = _sass_text(cubin, tmp_path)
    ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", text, re.M)
    return collections.Counter(re.sub(r"\.\dD\b", "", op) for op in ops)


# what the 2-d GEMM's main loop and epilogue are made of: TMA loads (multicast ones
# in a cluster pair), mbarriers, wgmma, stmatrix and the TMA store, cluster barriers
FAMILIES = ("UTMALDG", "UTMASTG", "UTMACMDFLUSH", "HGMMA", "STSM", "SYNCS", "UCGABAR",
            "WARPGROUP", "ELECT")
# the register path's exchange and global stores, local memory: none in either
ABSENT = ("STG", "LDS", "LDL", "STL")


def _family_counts(ops: collections.Counter) -> dict[str, int]:
    return {f: sum(n for op, n in ops.items() if op.startswith(f)) for f in FAMILIES}


@pytest.mark.parametrize("batch,m,n,k,tiles,dtype,axis", [
    (8, 4096, 4096, 1024, (128, 128, 64), BF16, 0),       # the sample's grid: batch on axis 0
    pytest.param(8, 4096, 4096, 1024, (128, 128, 64), BF16, 2, marks=SLOW),
    pytest.param(32, 1024, 1024, 1024, (128, 128, 64), BF16, 0, marks=SLOW),
    pytest.param(8, 4096, 4096, 1024, (128, 256, 128), np.float16, 0,   # cuTile's BatchMatMul
                 marks=SLOW),                                            # tiles
])
def test_batched_gemm_compiles_to_the_2d_gemms_instructions(batch, m, n, k, tiles, dtype,
                                                            axis, tmp_path):
    """The batched kernel as launched for 132 SMs against the 2-d GEMM over the same
    tiles (batch x M rows): the same shared memory, threads, ring depth, retiling,
    persistence and cluster; in the SASS the same TMA loads (multicast too), wgmma,
    mbarrier and cluster instructions and the same TMA store of the epilogue, with no
    register-path stores, exchanges or local memory."""
    tm, tn, tk = tiles
    a2, b2, c2 = (np.empty(s, dtype) for s in ((batch * m, k), (k, n), (batch * m, n)))
    flat = gemm.compile((a2, b2, c2, tm, tn, tk), target="sm_90a",
                        grid=(ct.cdiv(batch * m, tm), ct.cdiv(n, tn)), sm_count=132)
    a, b, c = (np.empty(s, dtype) for s in ((batch, m, k), (batch, k, n), (batch, m, n)))
    batched = bmm.compile((a, b, c, tm, tn, tk, axis), target="sm_90a",
                          grid=bmm_grid(batch, m, n, tm, tn, axis), sm_count=132)
    for key in ("shared_bytes", "num_threads", "persistent", "cluster"):
        assert batched.meta.get(key) == flat.meta.get(key), (key, batched.meta, flat.meta)
    # the same tile retiling (on the grid axis of the batched kernel's columns)
    scale = lambda meta: (meta.get("grid_scale") or [0, 1, 1])[1:]  # noqa: E731
    assert scale(batched.meta) == scale(flat.meta)
    stages = lambda ck: re.findall(r"stages = (\d+)", ck.artifacts["pipeline"])  # noqa: E731
    assert stages(batched) == stages(flat)
    ops, flat_ops = _ops(batched.cubin, tmp_path), _ops(flat.cubin, tmp_path)
    assert _family_counts(ops) == _family_counts(flat_ops)
    assert ops["UTMASTG"] and ops["STSM.16.M88.4"], sorted(ops)
    assert not [op for op in ops if op.startswith(ABSENT)], sorted(ops)
    assert batched.spills == (0, 0)
    assert "C7520" not in batched.ptxas_report and "C7519" not in batched.ptxas_report


def test_batched_gemm_pairs_rows_in_a_cluster_as_the_2d_gemm_does(tmp_path):
    """At 8 x 4096^2 x 1024 the row tiles of one batch pair in (2, 1, 1) clusters and
    share B by multicast, as the 2-d GEMM's do; the batch (axis 0) is walked last."""
    a, b, c = (np.empty(s, BF16) for s in ((8, 4096, 1024), (8, 1024, 4096), (8, 4096, 4096)))
    ck = bmm.compile((a, b, c, 128, 128, 64, 0), target="sm_90a",
                     grid=bmm_grid(8, 4096, 4096, 128, 128, 0), sm_count=132, stage="gpu")
    assert ck.meta["cluster"] == [2, 1, 1] and ck.meta["persistent"]
    pipeline = ck.artifacts["pipeline"]
    assert "tile.cluster_pairs = 1" in pipeline                  # the rows' axis
    assert "multicast_mask" in ck.artifacts["gpu"]
    # the tile loop's batch index is its tile counter over a plane of the row and column
    # tiles: t / (row pairs x column tiles), the slowest part of the walk
    with tile_context():
        module = ir.Module.parse(pipeline)
        loads = []
        module.operation.walk(lambda op: (loads.append(op) if op.name == "tile.ring_load"
                                          else None) or ir.WalkResult.ADVANCE)
        assert loads
        counters = 0
        for load in loads:
            zs = [load.operands[4]]                        # (ring, slot, pred, array, z, ...)
            while zs[0].owner.name == "arith.select":      # this tile's or the next one's
                zs = list(zs[0].owner.operands)[1:] + zs[1:]
            for z in zs:
                assert z.owner.name == "arith.divui", z.owner
                assert z.owner.operands[1].owner.name == "arith.muli"     # the plane
                t = z.owner.operands[0]
                counters += isinstance(t.owner, ir.Block) and t.owner.owner.name == "scf.for"
        assert counters


def _run_bmm(rng, batch, m, n, k, dtype, axis, sms, tiles=(128, 128, 64), target="sm_90a",
             kernel=bmm):
    a = rng.standard_normal((batch, m, k)).astype(dtype)
    b = rng.standard_normal((batch, k, n)).astype(dtype)
    c = np.full((batch, m, n), np.nan, dtype)
    args = (a, b, c, *tiles, axis)
    grid = bmm_grid(batch, m, n, tiles[0], tiles[1], axis)
    ck = kernel.compile(args, stage="gpu", target=target, grid=grid, sm_count=sms)
    simulate(ck, hardware_grid(ck.meta, grid), args, sm_count=sms)
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    return ck, c, ref


def _check(c, ref, dtype):
    assert np.isfinite(c.astype(np.float64)).all(), "unwritten elements"
    err = np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err < (1e-2 if dtype == BF16 else 2e-3), err


@pytest.mark.parametrize("batch,m,n,k,axis,sms,tma_store,clustered", [
    (3, 200, 264, 40, 0, 2, True, False),       # persistent, 256-row tiles, ragged M and N
    pytest.param(3, 200, 260, 100, 2, 2, False, False,  # rows of 200 and 520 bytes: no TMA
                 marks=SLOW),         # at all (test_simt's unaligned-operand GEMMs keep it)
    pytest.param(3, 200, 264, 100, 2, 2, True, False, marks=SLOW),  # A unaligned, C not
    pytest.param(2, 500, 1000, 72, 0, 2, True, True, marks=SLOW),   # cluster pairs
    pytest.param(2, 500, 1000, 72, 2, 2, True, True, marks=SLOW),
    pytest.param(3, 200, 264, 40, 1, 132, True, False, marks=SLOW),  # a small grid: narrowed
])
def test_batched_gemm_runs_correctly(batch, m, n, k, axis, sms, tma_store, clustered, rng):
    """The kernel as launched (retiled, persistent, paired as the grid and SM count
    make it) in the simulator at ragged sizes: every element written and right; an
    aligned output stored by TMA (boxes clipped at the array's edges), an unaligned
    one from registers."""
    ck, c, ref = _run_bmm(rng, batch, m, n, k, BF16, axis, sms)
    assert (TMA_STORE in ck.artifacts["gpu"]) == tma_store
    assert (ck.meta.get("cluster") == [2, 1, 1]) == clustered
    _check(c, ref, BF16)


# In --full since session 24 (the policy: a kernel family's first SASS check and its
# default configuration once or twice in the simulator in the fast tier, the proofs of
# its options in --full): the fast tier keeps the batched
# GEMM's SASS as launched (test_batched_gemm_compiles_to_the_2d_gemms_instructions
# [8-4096-4096-1024-tiles0-bfloat16-0]: retiled, persistent, its ring) and a persistent
# walk in the simulator (test_batched_gemm_runs_correctly[3-200-264-40-0-2-True-False])
@SLOW
def test_tiles_written_wide_run_persistent_with_a_deeper_ring(rng, tmp_path):
    """cuTile's BatchMatMul tiles (128 x 256 x 128) on a grid of many waves cannot be
    widened; they run persistent (one block an SM walking the tiles) and their 96 KB K
    slots are halved, a ring of 64-long K tiles twice as deep: at 32 x 1024^3 for 132
    SMs, no spills; in the simulator at ragged sizes on 2 SMs, every element right."""
    a, b, c = (np.empty(s, np.float16) for s in ((32, 1024, 1024),) * 3)
    ck = bmm.compile((a, b, c, 128, 256, 128, 0), target="sm_90a",
                     grid=bmm_grid(32, 1024, 1024, 128, 256, 0), sm_count=132)
    assert ck.meta["persistent"] and not ck.meta.get("grid_scale"), ck.meta
    pipeline = ck.artifacts["pipeline"]
    assert "tensor<1x128x64xf16," in pipeline and "tensor<1x64x256xf16," in pipeline
    assert "tensor<1x128x128xf16," not in pipeline
    assert min(int(n) for n in re.findall(r"stages = (\d+)", pipeline)) >= 4
    assert ck.spills == (0, 0)
    # as written for a grid of one wave: one block a tile, the K tiles kept
    one = bmm.compile((a[:2], b[:2], c[:2], 128, 256, 128, 0), target="sm_90a",
                      grid=bmm_grid(2, 1024, 1024, 128, 256, 0), sm_count=132, stage="pipeline")
    assert "tile.persistent_loop" not in one.artifacts["pipeline"]
    assert "tensor<1x128x128xf16," in one.artifacts["pipeline"]
    ck, c, ref = _run_bmm(rng, 2, 200, 500, 200, np.float16, 0, 2, tiles=(128, 256, 128))
    assert ck.meta["persistent"]
    _check(c, ref, np.float16)


@SLOW
def test_batched_gemm_on_sm80_runs_correctly(rng):
    """mma.sync: the (1, M, N) tile keeps the accumulator's registers up to the store,
    which converts it for its coalesced global stores."""
    ck, c, ref = _run_bmm(rng, 2, 100, 72, 40, np.float16, 0, 2, tiles=(64, 64, 32),
                          target="sm_80")
    _check(c, ref, np.float16)


def test_batched_epilogue_on_the_accumulator_runs_correctly(rng):
    """alpha A @ B + D with D loaded as a (1, TM, TN) tile: element-wise ops and a load in
    the accumulator's layout with a leading unit dim, stored by TMA."""
    batch, m, n, k = 2, 130, 72, 40
    a = rng.standard_normal((batch, m, k)).astype(BF16)
    b = rng.standard_normal((batch, k, n)).astype(BF16)
    d = rng.standard_normal((batch, m, n)).astype(BF16)
    c = np.full((batch, m, n), np.nan, BF16)
    args = (a, b, d, c, 0.5, 64, 64, 32)
    grid = (ct.cdiv(m, 64), ct.cdiv(n, 64), batch)
    ck = bmm_residual.compile(args, stage="gpu", target="sm_90a")
    assert TMA_STORE in ck.artifacts["gpu"]
    assert "array<i64: 1, 4, 1>, array<i64: 1, 64, 64>" in ck.artifacts["layout"]
    simulate(ck, grid, args)
    ref = 0.5 * np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64)) + \
        d.astype(np.float64)
    _check(c, ref, BF16)


# In --full since session 24 (the policy: a kernel family's first SASS check and its
# default configuration once or twice in the simulator in the fast tier, the proofs of
# its options in --full): the fast tier keeps the TMA store
# of a batched tile with a leading unit dim (test_batched_epilogue_on_the_accumulator_runs
# _correctly, test_batched_gemm_runs_correctly[3-200-264-40-0-2-True-False])
@SLOW
def test_two_leading_unit_dims_store_by_tma(rng):
    """(batch, heads, rows, D) arrays: the (1, 1, TM, TN) tile is stored by TMA from
    the accumulator, one (1, 1, 64, 64) box at (column, row, head, batch)."""
    bsz, heads, s, d = 2, 3, 72, 64
    q = rng.standard_normal((bsz, heads, s, d)).astype(np.float16)
    k = rng.standard_normal((bsz, heads, s, d)).astype(np.float16)
    out = np.full((bsz, heads, s, s), np.nan, np.float16)
    args = (q, k, out, heads, 64, 64, 32)
    grid = (ct.cdiv(s, 64), ct.cdiv(s, 64), bsz * heads)
    ck = bmm_heads.compile(args, stage="gpu", target="sm_90a")
    assert TMA_STORE in ck.artifacts["gpu"]
    assert [tm["box"] for tm in ck.meta["tensor_maps"] if tm["param"] == 2] == [[1, 1, 64, 64]]
    simulate(ck, grid, args)
    ref = np.einsum("bhmd,bhnd->bhmn", q.astype(np.float64), k.astype(np.float64))
    _check(out, ref, np.float16)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_the_interpreter_agrees(axis, rng):
    """The same source in the NumPy interpreter (the semantic oracle), ragged sizes."""
    batch, m, n, k = 3, 70, 50, 45
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    c = np.full((batch, m, n), np.nan, np.float32)
    ct.launch(None, bmm_grid(batch, m, n, 32, 32, axis), bmm, (a, b, c, 32, 32, 16, axis))
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    assert np.abs(c - ref).max() < 1e-4 * np.abs(ref).max()


def _record_tma(monkeypatch):
    """Wraps the simulator's TMA loads and L2 prefetches: returns the list they append
    (kind, block id, cluster's block ids, array address, array dims, box coordinates)
    to, one entry a thread that issues one, in the order the simulator runs them."""
    from tileir.sim import rules
    events = []

    def wrap(name, kind, first):        # first: where the tensor map is among operands
        inner = rules.OPS[name]

        def recorded(sim, blk, o, mask):
            vals = rules.operands(sim, blk, o)
            sizes = list(ir.DenseI32ArrayAttr(o.attributes["operandSegmentSizes"]))
            coords = vals[first + 1:first + 1 + sizes[first + 1]]
            cluster = tuple(b.bid for b in getattr(blk, "cluster", None) or [blk])
            for t in np.nonzero(mask)[0]:
                tm = sim.tensor_maps[int(vals[first][t])]
                events.append((kind, blk.bid, cluster, tm.address, tuple(tm.dims),
                               tuple(int(c[t]) for c in coords)))
            return inner(sim, blk, o, mask)
        monkeypatch.setitem(rules.OPS, name, recorded)

    wrap("nvvm.cp.async.bulk.tensor.shared.cluster.global", "load", 1)
    wrap("nvvm.cp.async.bulk.tensor.prefetch", "prefetch", 0)
    return events


# In --full since session 24 (the policy: a kernel family's first SASS check and its
# default configuration once or twice in the simulator in the fast tier, the proofs of
# its options in --full): [3-200-264-200-0-2-False] too: L2_AHEAD
# is off by default (persistent.L2_AHEAD = 0, a setting for bench/bmm.py's schedules, no
# kernel option), so the fast tier's persistent rings run without it
# (test_batched_gemm_runs_correctly, test_stream_k_walks_the_batch_last[0])
@pytest.mark.parametrize("batch,m,n,k,axis,ahead,clustered", [
    pytest.param(3, 200, 264, 200, 0, 2, False, marks=SLOW),
    pytest.param(2, 500, 1000, 264, 2, 3, True, marks=SLOW),     # pairs: B multicast
])
def test_l2_lookahead_prefetches_what_the_ring_loads_later(batch, m, n, k, axis, ahead,
                                                           clustered, rng, monkeypatch):
    """persistent.L2_AHEAD = D: with each copy into the ring an L2 prefetch of the tiles
    D iterations on, across tiles of a block.  In the simulator, at ragged sizes:
    every box a block prefetches is one its cluster loads later (A's, which no pair
    shares, by the block itself, after the prefetch), most loads were prefetched
    first, and the product is right.  Off (0, the default), no prefetch at all."""
    from tileir.backend.pipeline import persistent
    monkeypatch.setenv("TILEIR_CACHE", "0")
    monkeypatch.setattr(persistent, "L2_AHEAD", ahead)
    events = _record_tma(monkeypatch)
    # (kernels of their own: the module knob is no part of a specialization's key)
    ck, c, ref = _run_bmm(rng, batch, m, n, k, BF16, axis, 2, kernel=ct.kernel(bmm.fn))
    _check(c, ref, BF16)
    assert ck.meta["persistent"] and (ck.meta.get("cluster") == [2, 1, 1]) == clustered
    assert "nvvm.cp.async.bulk.tensor.prefetch" in ck.artifacts["gpu"]
    a_dims = (k, m, batch)                                 # innermost first
    prefetched = [e for e in events if e[0] == "prefetch"]
    loads = [e for e in events if e[0] == "load"]
    assert prefetched and loads
    own_later = collections.defaultdict(set)               # block -> boxes it loads after
    for i, e in enumerate(events):
        if e[0] == "prefetch":
            own_later[(i, e[1])] = {x[3:] for x in events[i:] if x[0] == "load" and x[1] == e[1]}
    by_cluster = collections.defaultdict(set)
    for e in loads:
        by_cluster[e[2]].add(e[3:])
    for i, e in enumerate(events):
        if e[0] != "prefetch":
            continue
        assert e[3:] in by_cluster[e[2]], f"prefetched a box its cluster never loads: {e}"
        if e[4] == a_dims:
            assert e[3:] in own_later[(i, e[1])], f"A's box prefetched after its load: {e}"
    # the loads of A that a prefetch of the same block announced
    seen = collections.defaultdict(set)
    announced = total = 0
    for e in events:
        if e[4] != a_dims:
            continue
        if e[0] == "prefetch":
            seen[e[1]].add(e[3:])
        else:
            total += 1
            announced += e[3:] in seen[e[1]]
    assert announced >= total // 2, (announced, total)
    # the default: none
    monkeypatch.setattr(persistent, "L2_AHEAD", 0)
    off = ct.kernel(bmm.fn).compile(ck_args(batch, m, n, k, axis), stage="gpu",
                                    target="sm_90a", grid=bmm_grid(batch, m, n, 128, 128, axis),
                                    sm_count=2)
    assert "prefetch" not in off.artifacts["gpu"]


def ck_args(batch, m, n, k, axis, tiles=(128, 128, 64)):
    """bmm's arguments (uninitialized) for a compile."""
    a, b, c = (np.empty(s, BF16) for s in ((batch, m, k), (batch, k, n), (batch, m, n)))
    return (a, b, c, *tiles, axis)


@pytest.mark.parametrize("axis", [0, pytest.param(2, marks=SLOW)])
def test_stream_k_walks_the_batch_last(axis, rng):
    """Stream-K (opt-in) on the batched kernel: its segment loop decodes the batch as
    the tile counter over a plane of the row and column tiles (the batch walked last,
    as the plain tile loop does), and in the simulator a last wave split along K
    (21 tiles on 2 blocks) gives every element right."""
    kernel = ct.kernel(bmm.fn, stream_k=True, persistent=True, retile=False)
    batch, m, n, k = 7, 100, 300, 200
    a = rng.standard_normal((batch, m, k)).astype(BF16)
    b = rng.standard_normal((batch, k, n)).astype(BF16)
    c = np.full((batch, m, n), np.nan, BF16)
    args = (a, b, c, 128, 128, 64, axis)
    grid = bmm_grid(batch, m, n, 128, 128, axis)
    ck = kernel.compile(args, stage="gpu", target="sm_90a", grid=grid, sm_count=2)
    assert "tile.partial_add" in ck.artifacts["pipeline"]
    with tile_context():
        module = ir.Module.parse(ck.artifacts["pipeline"])
        loads = []
        module.operation.walk(lambda op: (loads.append(op) if op.name == "tile.ring_load"
                                          else None) or ir.WalkResult.ADVANCE)
        planes = set()
        for load in loads:
            z = load.operands[4]                           # (ring, slot, pred, array, z, ...)
            while z.owner.name == "arith.select":
                z = z.owner.operands[1]
            assert z.owner.name == "arith.divui", z.owner
            plane = z.owner.operands[1].owner
            assert plane.name == "arith.muli", plane
            planes.add(frozenset(ir.IntegerAttr(v.owner.attributes["axis"]).value
                                 for v in plane.operands))
        assert planes == {frozenset({0, 1, 2}) - {axis}}
    simulate(ck, hardware_grid(ck.meta, grid), args, sm_count=2)
    _check(c, np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64)), BF16)
