"""The simulator's models of the inline PTX the lowering emits (atomics, fences,
`griddepcontrol`, float options, wgmma with A in registers, mbarrier arrivals on a
cluster peer) and of thread-block clusters (`mapa` addresses, cluster barriers), and
`gpu.printf`."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
from mlir import ir

from . import hardware as hw
from .rules import BLOCKED, SimError, np_dtype, op, operands, static
from .async_ops import barrier_at, wgmma_register_a
from .memory_ops import read_memory, write_memory


# -- inline PTX the lowering emits ----------------------------------------------------------
_F32_INSTRUCTIONS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                     "max": np.fmax, "min": np.fmin, "sqrt": np.sqrt, "ex2": np.exp2,
                     "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh}


_ATOM_DTYPES = {("f", 32): np.float32, ("f", 64): np.float64, ("f", 16): np.float16,
                ("s", 32): np.int32, ("s", 64): np.int64, ("u", 32): np.uint32,
                ("u", 64): np.uint64, ("b", 32): np.uint32, ("b", 64): np.uint64}


def _atom(sim, blk, o, mask, kind: str, cls: str, bits: int, args):
    """`atom.<sem>.<scope>.global.<kind>.<type>`: one thread after another (lane order),
    each reading the old value and writing the new; returns each thread's old value."""
    result_t = o.results[0].type
    if cls in ("b", "bf") and bits == 16 or (cls == "f" and bits == 16 and
                                             isinstance(result_t, ir.BF16Type)):
        dt_ = ml_dtypes.bfloat16
    else:
        dt_ = _ATOM_DTYPES[(cls, bits)]
    dt_ = np.dtype(dt_)
    ptr = np.asarray(args[0], np.int64)
    values = [np.asarray(a).view(dt_) if np.asarray(a).dtype.itemsize == dt_.itemsize
              else np.asarray(a).astype(dt_) for a in args[1:]]
    old = np.zeros(sim.threads, np_dtype(result_t))
    ops = {"add": lambda a, b: a + b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
           "xor": lambda a, b: a ^ b, "min": min, "max": max, "exch": lambda a, b: b}
    for t in np.nonzero(mask)[0]:
        one = np.zeros(sim.threads, bool)
        one[t] = True
        before = read_memory(sim, blk, 1, ptr, dt_, one, None)[t]
        if kind == "cas":
            new = values[1][t] if before.tobytes() == values[0][t].tobytes() else before
        else:
            with np.errstate(over="ignore"):
                new = dt_.type(ops[kind](before, values[0][t]))
        cell = np.zeros(sim.threads, dt_)
        cell[t] = new
        write_memory(sim, blk, 1, ptr, cell, one)
        old[t] = np.asarray(before).view(old.dtype) if old.dtype.itemsize == dt_.itemsize \
            else before
    return old


def _flush(x):
    """f32 subnormals to signed zero (the `.ftz` of an instruction)."""
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x)


@op("llvm.inline_asm")
def _inline_asm(sim, blk, o, mask):
    asm = static(sim, o, asm_text)
    args = operands(sim, blk, o)
    if asm.startswith(("wgmma.fence", "wgmma.wait_group")):
        return tuple(args)                         # registers tied through the statement
    m = re.match(r"(add|sub|mul|div|sqrt)\.(rz|rm|rp)\.(ftz\.)?(f32|f64) ", asm)
    if m:                     # cuTile's directed roundings, exactly (interpreter.directed)
        from tileir.interpreter import directed
        t = np.float32 if m.group(4) == "f32" else np.float64
        x = [np.asarray(a, t) for a in args]
        if m.group(3):
            x = [_flush(v) for v in x]
        out = directed.sqrt(m.group(2), x[0], t) if m.group(1) == "sqrt" else \
            directed.binary(m.group(1), m.group(2), x[0], x[1], t)
        return _flush(out) if m.group(3) else out
    m = re.match(r"cvt\.(rz|rm|rp)\.(f16|f32)\.(f32|f64) ", asm)
    if m:                     # directed conversions (cvt.rm.f16.f32, cvt.rz.f32.f64)
        from tileir.interpreter import directed
        return directed.convert(m.group(1), np.asarray(args[0], m.group(3).replace("f", "float")),
                                m.group(2).replace("f", "float"))
    m = re.match(r"(\w+)\.(?:rn\.|full\.|approx\.)?(ftz\.)?(?:NaN\.)?f32 ", asm)
    if m and m.group(1) in _F32_INSTRUCTIONS:   # f32 arithmetic with cuTile's float options
        x = [np.asarray(a, np.float32) for a in args]
        if m.group(2):
            x = [_flush(v) for v in x]
        with np.errstate(all="ignore"):
            fn = _F32_INSTRUCTIONS[m.group(1)]
            if ".NaN." in asm:                    # max.NaN / min.NaN propagate NaN
                fn = np.maximum if m.group(1) == "max" else np.minimum
            out = fn(*x).astype(np.float32)
        return _flush(out) if m.group(2) else out
    m = re.match(r"atom\.\w+\.\w+\.global\.(\w+)\.(?:noftz\.)?(bf|[a-z])(\d+) ", asm)
    if m:
        return _atom(sim, blk, o, mask, m.group(1), m.group(2), int(m.group(3)), args)
    if "SK_WAIT_" in asm:          # stream-K: thread 0 waits for a partial's flag, clears it
        flag = read_memory(sim, blk, 1, args[0], np.dtype(np.int32), mask, None).view(np.int32)
        if (flag[mask] != 1).any():
            raise SimError(f"block {blk.bid} waits for a stream-K partial no block has "
                           f"written (on the GPU it would wait forever)")
        write_memory(sim, blk, 1, args[0], np.zeros(sim.threads, np.int32), mask)
        return None
    if asm.startswith("fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.b32"):
        write_memory(sim, blk, 1, args[0], np.asarray(args[1], np.int32), mask)
        return None
    if asm.startswith("griddepcontrol.") or asm.startswith("fence.acq_rel."):
        # one grid at a time, in program order; the wait's token (an i32 the policy
        # loads after it take as an operand) is 0
        return np.zeros(sim.threads, np.int32) if len(o.results) else None
    m = re.match(r"(ld|st)\.relaxed\.(?:cta|gpu|sys)\.global\.b(\d+) ", asm)
    if m:                                         # relaxed accesses: plain ones here
        bits = int(m.group(2))
        if m.group(1) == "st":
            value = np.asarray(args[1])
            value = (value.astype(np.uint16) & 0xFF).astype(np.uint8) if bits == 8 else \
                value.view(f"uint{bits}")
            write_memory(sim, blk, 1, args[0], value, mask)
            return None
        got = read_memory(sim, blk, 1, args[0], np.dtype(f"uint{bits}"), mask, None)
        return got.astype(np.int16) if bits == 8 else got.view(f"int{bits}")
    if asm.startswith("barrier.cluster.arrive"):
        _whole_warps(mask, "barrier.cluster.arrive")
        blk.cluster_arrivals[mask] += 1
        return None
    if asm.startswith("mapa.shared::cluster.u32"):
        return _mapa(blk, args)
    if asm.startswith("mbarrier.arrive.shared::cluster.b64 _,"):
        for t in np.nonzero(mask)[0]:
            owner, off = _cluster_address(blk, int(np.asarray(args[0])[t]), "mbarrier.arrive")
            barrier_at(owner, off).arrive()
        return None
    m = re.match(r"ld\.shared::cluster\.b(\d+) ", asm)
    if m:
        return _load_cluster(sim, blk, args[0], int(m.group(1)), mask)
    if asm.startswith("trap;"):
        if mask.any():
            raise SimError(f"the kernel trapped (block {blk.bid}, threads "
                           f"{np.nonzero(mask)[0].tolist()[:8]})")
        return None
    m = re.match(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32 (\d+);", asm)
    if m:                                         # checked at the block's end
        blk.registers.record(m.group(1), int(m.group(2)), mask, o)
        return None
    if asm.startswith("createpolicy"):
        return np.zeros(sim.threads, np.int64)
    if asm == "mov.b32 $0, $1;":                  # a value LLVM may not fold (rules/ring.py)
        return np.asarray(args[0]).copy()
    # 16-byte accesses: streaming stores, loads with an L2 policy, stream-K partials,
    # relaxed loads of four words (plain ones here, as the scalar relaxed accesses)
    m = re.match(r"(ld|st)(?:\.relaxed\.(?:cta|gpu|sys))?\.global(?:\.cs|\.cg|\.L2::cache_hint)?"
                 r"\.v4\.(f32|b32) ", asm)
    if m:
        t = np.float32 if m.group(2) == "f32" else np.int32
        if m.group(1) == "st":
            write_memory(sim, blk, 1, args[0], np.stack([np.asarray(w, t) for w in args[1:5]], 1),
                   mask)
            return None
        words = read_memory(sim, blk, 1, args[0], np.dtype(t), mask, 4)
        return tuple(words[:, j] for j in range(4))
    if "wgmma.mma_async" in asm:
        return wgmma_register_a(sim, blk, o, asm, args, mask)
    m = re.search(r"cvt\.rn\.f16x2\.(e4m3|e5m2)x2", asm)
    if m:                     # fp8 bits (low byte of a b16) -> f32 through f16
        t = hw.ELEM[m.group(1)][0]
        low = (np.asarray(args[0]).astype(np.int64) & 0xFF).astype(np.uint8)
        return low.view(t).astype(np.float32)
    m = re.search(r"cvt\.rn\.satfinite\.(e4m3|e5m2)x2\.f32", asm)
    if m:                     # (a, b) -> b16 with a's fp8 high, b's low; saturating
        t = hw.ELEM[m.group(1)][0]
        limit = float(ml_dtypes.finfo(t).max)
        with np.errstate(all="ignore"):
            hi, lo = (np.clip(np.asarray(x, np.float32), -limit, limit).astype(t)
                      .view(np.uint8).astype(np.int16) for x in args[:2])
        return (hi << 8) | lo
    raise SimError(f"no model of the inline PTX {asm[:60]!r}")


# -- thread-block clusters -------------------------------------------------------------
# A `mapa` address: the block's rank + 1 above bit 24, the shared offset below it.
_RANK_SHIFT = 24


def asm_text(o) -> str:
    return ir.StringAttr(o.attributes["asm_string"]).value


def _mapa(blk, args):
    addr, rank = (np.asarray(a, np.int64) for a in args)
    if (rank < 0).any() or (rank >= len(blk.cluster)).any():
        raise SimError(f"mapa to a block rank outside the cluster of {len(blk.cluster)}: "
                       f"{np.unique(rank)[:4]}")
    if (addr >= 1 << _RANK_SHIFT).any():
        raise SimError("mapa of an address that is not a shared-memory offset of this block")
    return ((rank + 1) << _RANK_SHIFT | addr).astype(np.int32)


def _cluster_address(blk, addr: int, what: str):
    """(the block, its shared offset) a `mapa` address names."""
    rank = addr >> _RANK_SHIFT
    if rank == 0:
        raise SimError(f"{what} of a shared::cluster address mapa did not make")
    return blk.cluster[rank - 1], addr & ((1 << _RANK_SHIFT) - 1)


def _load_cluster(sim, blk, addr, bits: int, mask):
    """`ld.shared::cluster`: each thread reads the block its address names."""
    addr = np.asarray(addr, np.int64)
    dtype = np.dtype(f"uint{bits}")
    out = np.zeros(sim.threads, dtype)
    for t in np.nonzero(mask)[0]:
        owner, at = _cluster_address(blk, int(addr[t]), "ld.shared::cluster")
        off = np.array([at], np.int64)
        out[t] = owner.shared.read(off, bits // 8).view(dtype)[0, 0]
    return out.view(f"int{bits}")


def _whole_warps(mask, what: str) -> None:
    """The `.aligned` barriers: every thread of a warp executes the same one."""
    warps = np.asarray(mask).reshape(-1, 32)
    if not (warps.all(axis=1) | ~warps.any(axis=1)).all():
        raise SimError(f"{what}.aligned reached by only some threads of a warp")


def cluster_wait(sim, blk, o, mask):
    """`barrier.cluster.wait`: until every thread of every block of the cluster has
    arrived as often as the waiting threads have waited (phase k completes with the
    k-th arrival of all of them; a thread waiting before its own arrive is an error).
    Counted by thread: a warp-specialized kernel's producer warps reach a phase at an
    instruction of their own branch."""
    _whole_warps(mask, "barrier.cluster.wait")
    blk.cluster_waits[mask] += 1
    if (blk.cluster_waits[mask] > blk.cluster_arrivals[mask]).any():
        raise SimError("barrier.cluster.wait without an arrive before it")
    phase = int(blk.cluster_waits[mask].max())
    while any(int(b.cluster_arrivals.min()) < phase for b in blk.cluster):
        blk.waiting = f"a cluster barrier (phase {phase}) some threads never reach"
        yield BLOCKED
    return None


@op("gpu.printf")
def _printf(sim, blk, o, mask):
    """Device printf: each active thread's line, threads in order (C conversions, the
    `ll` length dropped for Python)."""
    from tileir.dialect.debug import PRINTF_CONVERSION
    fmt = re.sub(PRINTF_CONVERSION, lambda m: re.sub(r"(hh|h|ll|l|z|j|t)(?=.$)", "", m.group(0)),
                 ir.StringAttr(o.attributes["format"]).value)
    args = [np.broadcast_to(np.asarray(a), (sim.threads,)) for a in operands(sim, blk, o)]
    for t in np.nonzero(mask)[0]:
        values = tuple(float(a[t]) if a.dtype.kind == "f" else int(a[t]) for a in args)
        sim.stdout.write(fmt % values)


