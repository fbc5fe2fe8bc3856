"""The simulator's models of asynchronous hardware: mbarriers, TMA copies and stores,
cp.async, stmatrix, wgmma and mma.sync fragments, ldmatrix (from the PTX ISA's
descriptions in `hardware.py`)."""

from __future__ import annotations

import re

import numpy as np
from mlir import ir

from . import hardware as hw
from .rules import BLOCKED, OPS, SimError, attr_int, op, operands, static, uniform


# -- tensor cores, copies, barriers ---------------------------------------------------------
def barrier_at(blk, addr: int, changing: bool = True) -> hw.Barrier:
    """The mbarrier at `addr`; `changing`: the caller is about to change it (which
    wakes the threads waiting on it)."""
    b = blk.shared.barriers.get(addr)
    if b is None:
        raise SimError(f"no initialized mbarrier at shared offset {addr}")
    if changing:
        blk.version += 1
    return b


@op("nvvm.mbarrier.init")
def _mb_init(sim, blk, o, mask):
    addr, count = operands(sim, blk, o)
    for a, c in zip(np.asarray(addr)[mask], np.asarray(count)[mask]):
        blk.shared.check_unread(int(a), hw.BARRIER_BYTES, "an mbarrier's initialization")
        blk.shared.barriers[int(a)] = hw.Barrier(int(c), int(c))


@op("nvvm.mbarrier.inval")
def _mb_inval(sim, blk, o, mask):
    (addr,) = operands(sim, blk, o)
    for a in np.asarray(addr)[mask]:
        blk.shared.barriers.pop(int(a), None)


@op("nvvm.mbarrier.arrive")
def _mb_arrive(sim, blk, o, mask):
    (addr,) = operands(sim, blk, o)
    for a in np.asarray(addr)[mask]:
        barrier_at(blk, int(a)).arrive()
    return np.zeros(sim.threads, np.int64)


@op("nvvm.mbarrier.arrive.expect_tx")
def _mb_arrive_tx(sim, blk, o, mask):
    addr, tx = operands(sim, blk, o)
    for a, n in zip(np.asarray(addr)[mask], np.asarray(tx)[mask]):
        b = barrier_at(blk, int(a))
        b.expect_tx(int(n))
        b.arrive()
    return np.zeros(sim.threads, np.int64) if o.results else None


@op("nvvm.mbarrier.try_wait.parity")
def _mb_wait(sim, blk, o, mask):
    addr, parity, _ = operands(sim, blk, o)
    for a, p in zip(np.asarray(addr)[mask], np.asarray(parity)[mask]):
        while True:
            b = barrier_at(blk, int(a), changing=False)
            if b.ready(int(p)):
                break
            blk.waiting = (f"a wait on the mbarrier at shared offset {int(a)} for parity "
                           f"{int(p)}: {b.phase} phases completed, {b.pending} arrivals "
                           f"and {b.tx} bytes still pending")
            yield BLOCKED
    return None


@op("nvvm.cp.async.bulk.tensor.shared.cluster.global")
def _tma(sim, blk, o, mask):
    """A TMA load into this block's shared memory, or with a multicast mask into that of
    each block of the cluster the mask names (the same offset, completing bytes on the
    mbarrier at the same offset in each)."""
    vals = operands(sim, blk, o)
    # operands: dst, tensor map, coords..., mbar, im2col offsets..., [multicast mask],
    # [L2 hint], [predicate]
    sizes = list(ir.DenseI32ArrayAttr(o.attributes["operandSegmentSizes"]))
    if sizes[4] or any(sizes[6:]):
        raise SimError("only TMA loads without im2col offsets, L2 hint or predicate are "
                       "modelled")
    dst, tmap = vals[0], vals[1]
    coords, mbar = vals[2:2 + sizes[2]], vals[2 + sizes[2]]
    multicast = vals[3 + sizes[2]] if sizes[5] else None
    for t in np.nonzero(mask)[0]:
        tm = sim.tensor_maps.get(int(tmap[t]))
        if tm is None:
            raise SimError(f"no tensor map behind parameter value {int(tmap[t])}")
        targets = [blk]
        if multicast is not None:
            bits = int(multicast[t]) & 0xFFFF
            if bits >> len(blk.cluster):
                raise SimError(f"TMA multicast mask {bits:#x} names blocks outside the "
                               f"cluster of {len(blk.cluster)}")
            targets = [b for r, b in enumerate(blk.cluster) if bits >> r & 1]
        for b in targets:
            n = hw.tma_load(sim.memory, b.shared, tm, int(dst[t]),
                            [int(c[t]) for c in coords])
            barrier_at(b, int(mbar[t])).complete_tx(n)


@op("nvvm.cp.async.bulk.tensor.prefetch")
def _tma_prefetch(sim, blk, o, mask):
    """An L2 prefetch of a TMA box: a hint, no data moves here (memory has no caches);
    its tensor map and coordinates are checked as a load's would be."""
    vals = operands(sim, blk, o)
    # operands: tensor map, coords..., im2col offsets..., [L2 hint]
    sizes = list(ir.DenseI32ArrayAttr(o.attributes["operandSegmentSizes"]))
    if any(sizes[2:]):
        raise SimError("only TMA prefetches without im2col offsets or L2 hint are modelled")
    tmap, coords = vals[0], vals[1:1 + sizes[1]]
    for t in np.nonzero(mask)[0]:
        tm = sim.tensor_maps.get(int(tmap[t]))
        if tm is None:
            raise SimError(f"no tensor map behind parameter value {int(tmap[t])}")
        if len(coords) != len(tm.dims):
            raise SimError(f"a TMA prefetch with {len(coords)} coordinates through a "
                           f"rank-{len(tm.dims)} tensor map")


@op("nvvm.cp.async.bulk.tensor.global.shared.cta")
def _tma_store(sim, blk, o, mask):
    vals = operands(sim, blk, o)
    tmap, src, coords = vals[0], vals[1], vals[2:]
    if len(o.operands) != 2 + len(coords):
        raise SimError("only TMA stores without predicate or cache hint are modelled")
    for t in np.nonzero(mask)[0]:
        tm = sim.tensor_maps.get(int(tmap[t]))
        if tm is None:
            raise SimError(f"no tensor map behind parameter value {int(tmap[t])}")
        hw.tma_store(sim.memory, blk.shared, tm, int(src[t]), [int(c[t]) for c in coords],
                     int(t))


@op("nvvm.cp.async.bulk.commit.group")
def _bulk_commit(sim, blk, o, mask):
    for t in np.nonzero(mask)[0]:
        blk.shared.bulk_commit(int(t))


@op("nvvm.cp.async.bulk.wait_group")
def _bulk_wait(sim, blk, o, mask):
    if "read" not in o.attributes:
        raise SimError("only cp.async.bulk.wait_group.read is modelled")
    for t in np.nonzero(mask)[0]:
        blk.shared.bulk_wait(int(t), attr_int(o, "group"))


@op("nvvm.stmatrix")
def _stmatrix(sim, blk, o, mask):
    vals = operands(sim, blk, o)
    ptr, words = vals[0], vals[1:]
    trans = "col" in str(o.attributes["layout"])
    _whole_warps(mask, "stmatrix")
    active = mask.reshape(-1, 32).all(1)                     # the warps that run it
    warps = int(active.sum())
    p = np.asarray(ptr, np.int64).reshape(-1, 32)[active]
    lane = np.arange(32)
    for j, w in enumerate(words):
        pair = np.asarray(w, np.int32).reshape(-1, 32)[active].view(np.uint16) \
            .reshape(warps, 32, 2)
        mat = np.zeros((warps, 8, 8), np.uint16)
        for e in range(2):
            if not trans:   # thread t: row t / 4, elements 2 (t % 4) and the next
                mat[:, lane // 4, 2 * (lane % 4) + e] = pair[:, :, e]
            else:           # thread t: column t / 4, rows 2 (t % 4) and the next
                mat[:, 2 * (lane % 4) + e, lane // 4] = pair[:, :, e]
        rows = p[:, 8 * j:8 * j + 8].reshape(-1)                 # lanes 8j.. point at rows
        blk.shared.write(rows, np.ascontiguousarray(mat).view(np.uint8).reshape(-1, 16))


@op("nvvm.cp.async.shared.global")
def _cp_async(sim, blk, o, mask):
    vals = operands(sim, blk, o)
    dst, src = vals[:2]
    size = attr_int(o, "size")
    cp = np.asarray(vals[2] if len(vals) > 2 else np.full(sim.threads, size), np.int64)
    if not mask.any():
        return
    t = np.nonzero(mask)[0]
    data = np.zeros((t.size, size), np.uint8)
    for n in np.unique(cp[t]):
        sel = t[cp[t] == n]
        if n:
            data[np.isin(t, sel), :n] = sim.memory.read(np.asarray(src, np.int64)[sel], int(n))
    blk.shared.write(np.asarray(dst, np.int64)[t], data)


def _nothing(sim, blk, o, mask):
    return None


for _name in ("nvvm.fence.proxy", "nvvm.fence.mbarrier.init", "nvvm.cp.async.commit.group",
              "nvvm.cp.async.wait.group", "nvvm.wgmma.fence.aligned",
              "nvvm.wgmma.commit.group.sync.aligned"):
    OPS[_name] = _nothing


@op("nvvm.wgmma.wait.group.sync.aligned")
def _wgmma_wait(sim, blk, o, mask):
    return None


def _warpgroups(sim, mask):
    """The warpgroups a wgmma runs in: all of whose threads are here (none of a
    group: not its turn; some: an error, wgmma is warpgroup-collective)."""
    for g in range(sim.threads // 128):
        sel = slice(128 * g, 128 * (g + 1))
        if not mask[sel].any():
            continue
        if not mask[sel].all():
            raise SimError("a wgmma reached by part of a warpgroup")
        yield g, sel


def _whole_warps(mask: np.ndarray, what: str) -> None:
    warps = mask.reshape(-1, 32)
    if (warps.any(1) & ~warps.all(1)).any():
        raise SimError(f"{what} reached by part of a warp")


@op("nvvm.wgmma.mma_async")
def _wgmma(sim, blk, o, mask):
    acc, desc_a, desc_b = operands(sim, blk, o)
    n, k, ta, tb, a_kmajor, b_kmajor, zero = static(sim, o, _wgmma_static)
    out = np.stack([np.asarray(x, np.float32) for x in acc])      # (regs, threads)
    if zero:                                                      # D = A * B
        out = np.zeros_like(out)
    for g, sel in _warpgroups(sim, mask):
        da = uniform(np.asarray(desc_a)[sel], np.ones(128, bool), "wgmma descriptor A")
        db = uniform(np.asarray(desc_b)[sel], np.ones(128, bool), "wgmma descriptor B")
        A = hw.to_float(hw.read_operand(blk.shared, da, 64, k, a_kmajor, ta), ta)
        B = hw.to_float(hw.read_operand(blk.shared, db, n, k, b_kmajor, tb), tb)   # n x k
        _accumulate(out, 128 * g, n, A @ B.T)
    return tuple(out[i] for i in range(out.shape[0]))


def _wgmma_static(o) -> tuple:
    """(n, k, A's and B's element types, whether A and B are K-major, whether D starts
    at zero) of a wgmma.mma_async, read from its attributes once per op."""
    m, n, k = (int(x) for x in re.findall(r"= (\d+)", str(o.attributes["shape"])))
    ta = re.search(r"<(\w+)>", str(o.attributes["typeA"])).group(1)
    tb = re.search(r"<(\w+)>", str(o.attributes["typeB"])).group(1)     # (e4m3 x e5m2)
    return (n, k, ta, tb, "row" in str(o.attributes["layoutA"]),
            "col" in str(o.attributes["layoutB"]), "zero" in str(o.attributes["scaleD"]))


def _accumulate(out: np.ndarray, first: int, n: int, product: np.ndarray) -> None:
    """out[reg, thread] += product at the accumulator fragment's (row, col), in f32."""
    t, i, r, c = hw.wgmma_accumulator_index(n)
    d = out[i, first + t].astype(np.float64) + product[r, c]
    out[i, first + t] = d.astype(np.float32)


def wgmma_register_a(sim, blk, o, asm, args, mask):
    mt = re.search(r"\.m64n(\d+)k16\.f32\.(\w+)\.", asm)
    n, elem = int(mt.group(1)), mt.group(2)
    nd = n // 2
    acc, a_words, desc_b = args[:nd], args[nd:nd + 4], args[nd + 4]
    tnsp_b = asm.rstrip().rstrip("}").rstrip().rstrip(";").split(",")[-1].strip() == "1"
    dtype = hw.ELEM[elem][0]
    thread, element, row, col = _WGMMA_A16
    out = [np.array(x, np.float32, copy=True) for x in acc]
    for g, sel in _warpgroups(sim, mask):
        db = uniform(np.asarray(desc_b)[sel], np.ones(128, bool), "wgmma descriptor B")
        B = hw.to_float(hw.read_operand(blk.shared, db, n, 16, not tnsp_b, elem), elem)
        # each thread's 4 words as its 8 elements, in order (words j = 0..3, each
        # word's low half first), placed at their (row, col) of the 64 x 16 A
        vals = np.concatenate([np.ascontiguousarray(np.asarray(a_words[j])[sel])
                               .view(dtype).reshape(128, -1) for j in range(4)], axis=1)
        A = np.zeros((64, 16))
        A[row, col] = vals[thread, element].astype(np.float64)
        stacked = np.stack(out)
        _accumulate(stacked, 128 * g, n, A @ B.T)
        out = list(stacked)
    return tuple(out)


@op("nvvm.ldmatrix")
def _ldmatrix(sim, blk, o, mask):
    (ptr,) = operands(sim, blk, o)
    num = attr_int(o, "num")
    trans = "col" in str(o.attributes["layout"])
    _whole_warps(mask, "ldmatrix")
    warps = sim.threads // 32
    p = np.asarray(ptr, np.int64).reshape(warps, 32)
    lane = np.arange(32)
    words = []
    for j in range(num):
        rows = p[:, 8 * j:8 * j + 8].reshape(-1)                 # lanes 8j.. point at rows
        mat = blk.shared.read(rows, 16).view(np.uint16).reshape(warps, 8, 8)
        if not trans:       # thread t: row t / 4, elements 2 (t % 4) and the next
            pair = np.stack([mat[:, lane // 4, 2 * (lane % 4)],
                             mat[:, lane // 4, 2 * (lane % 4) + 1]], axis=-1)
        else:               # thread t: column t / 4, rows 2 (t % 4) and the next
            pair = np.stack([mat[:, 2 * (lane % 4), lane // 4],
                             mat[:, 2 * (lane % 4) + 1, lane // 4]], axis=-1)
        words.append(np.ascontiguousarray(pair).view(np.int32).reshape(sim.threads))
    return tuple(words) if num > 1 else words[0]


def _fragment_index(coords: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    lane, i, r, c = zip(*[(ln, ii, rr, cc) for (ln, ii), (rr, cc) in coords.items()])
    return tuple(np.array(x) for x in (lane, i, r, c))


_A16 = _fragment_index(hw.a_fragment_coords())
# wgmma's register A: warp w of the warpgroup holds rows 16 w to 16 w + 15 as mma.sync's
# 16 x 16 A fragment: (thread of the warpgroup, element, row, col)
_WGMMA_A16 = tuple(np.concatenate(x) for x in zip(*[
    (32 * w + _A16[0], _A16[1], 16 * w + _A16[2], _A16[3]) for w in range(4)]))
_B16 = _fragment_index(hw.b_fragment_coords())
_C16 = _fragment_index(hw.c_fragment_coords())
_ATF32 = _fragment_index(hw.a_fragment_coords_tf32())
_BTF32 = _fragment_index(hw.b_fragment_coords_tf32())


@op("nvvm.mma.sync")
def _mma_sync(sim, blk, o, mask):
    vals = operands(sim, blk, o)
    k = int(re.search(r"k = (\d+)", str(o.attributes["shape"])).group(1))
    elem = re.search(r"<(\w+)>", str(o.attributes["multiplicandAPtxType"])).group(1)
    if len(o.operands) != 10 or (k, elem == "tf32") not in ((16, False), (8, True)):
        raise SimError("only mma.sync.m16n8k16 (16-bit types) and m16n8k8 (tf32) are "
                       "modelled")
    a_words, b_words, c = vals[:4], vals[4:6], vals[6:10]
    dtype = hw.ELEM[elem][0]
    _whole_warps(mask, "mma.sync")
    warps = sim.threads // 32

    def elements(ws):        # (threads, elements) of the packed operand
        raw = np.concatenate([np.ascontiguousarray(np.asarray(w)).view(np.uint8)
                              .reshape(sim.threads, -1) for w in ws], axis=1)
        return raw.view(dtype).astype(np.float64).reshape(warps, 32, -1)

    va, vb = elements(a_words), elements(b_words)
    if elem == "tf32":          # the tensor core reads the top 19 bits of each f32
        va, vb = hw.to_float(va.astype(np.float32), elem), hw.to_float(vb.astype(np.float32),
                                                                        elem)
    vc = np.stack([np.asarray(x, np.float64) for x in c], axis=1).reshape(warps, 32, 4)
    A = np.zeros((warps, 16, k))
    B = np.zeros((warps, k, 8))
    C = np.zeros((warps, 16, 8))
    lane, i, r, col = _ATF32 if k == 8 else _A16
    A[:, r, col] = va[:, lane, i]
    lane, i, r, col = _BTF32 if k == 8 else _B16
    B[:, r, col] = vb[:, lane, i]
    lane, i, r, col = _C16
    C[:, r, col] = vc[:, lane, i]
    D = (C + A @ B).astype(np.float32)
    out = np.zeros((warps, 32, 4), np.float32)
    out[:, lane, i] = D[:, r, col]
    out = out.reshape(sim.threads, 4)
    return tuple(out[:, j] for j in range(4))


