"""The decode step's all-reduce over peer memory, fused with the residual add and the
RMSNorm after it: one tileir kernel in place of an NCCL all-reduce and a norm.

At batch 1 a tensor-parallel step of Llama-3-8B holds 64 all-reduces of one 8 KB row;
NCCL spends several microseconds on each, and the norm after it is a kernel of its
own.  Here every rank's row-parallel GEMM writes its partial product into a buffer
that the other ranks can read (torch's symmetric memory: each rank maps the others'
allocation into its address space, as vLLM's and SGLang's custom all-reduces do), and
one kernel, `reduce_norm`, does the rest, a block per row:

1. **arrive**: for every other rank q, compare-and-swap q's flag [me, row] from 0 to 1
   (release, system scope: this rank's partial row, written by the GEMM before, is
   visible to q first);
2. **wait**: for every other rank q, spin on a compare-and-swap of this rank's flag
   [q, row] from 1 back to 0 (acquire, system scope);
3. residual += partial_0 + ... + partial_{N-1} (float32, in rank order: every rank
   gets the same bits), stored back; with a norm, RMSNorm(residual) * g stored for
   the GEMM after.

The flags are consumed as they are read, so nothing counts calls and a CUDA graph
replays the kernel as captured.  The buffers alternate between two slots: rank q
overwrites its slot-s partial only in the GEMM of the reduction after next, which
starts after q's next reduction has passed its wait, so after this rank arrived
there, which it does only once this reduction's kernel is over (every kernel of the
step waits for the whole kernel before it: stream order, or griddepcontrol.wait
under programmatic launch).  A grid of at most `ROWS` blocks (< the SMs) keeps
every block resident, so no spinning block waits on one that cannot start.

Decode and short prompts (at most ROWS rows) take this path on CUDA with more than one
rank; longer prompts, the MoE layers' sum and the NumPy backend (gloo) keep the plain
all-reduce (`parallel.Shard`).  Opt-in (TILEIR_PEER_REDUCE=1) until measured on two
GPUs.  NVLink multicast is not used: only peer loads and atomics.
"""

from __future__ import annotations

import numpy as np

import tileir as ct

ZERO = ct.PaddingMode.ZERO
ACQUIRE, RELEASE, SYS = ct.MemoryOrder.ACQUIRE, ct.MemoryOrder.RELEASE, ct.MemoryScope.SYS

MAX_RANKS = 4        # reduce_norm's partial and flag parameters
ROWS = 128           # the most rows a reduction takes (a block each, fewer than the SMs)
SLOTS = 2


@ct.kernel
def reduce_norm(P0, P1, P2, P3, F0, F1, F2, F3, mine, residual, g, normed, eps: float,
                rank: int, N: ct.Constant[int], TILE: ct.Constant[int],
                NORM: ct.Constant[bool]):
    """residual[row] += P0[row] + ... + P{N-1}[row]; with NORM, normed[row] =
    RMSNorm(residual[row]) * g.  Pq is rank q's partial (a peer view, or this rank's
    own), Fq rank q's flags (N, rows) and `mine` this rank's (see the module's
    docstring); parameters past N are ignored."""
    row = ct.bid(0)
    for q, flags in ct.static_iter(enumerate((F0, F1, F2, F3)[:N])):
        if q != rank:                                    # arrive at every other rank
            while ct.atomic_cas(flags, (rank, row), 0, 1, memory_order=RELEASE,
                                memory_scope=SYS) != 0:
                pass
    for q in ct.static_iter(range(N)):
        if q != rank:                                    # wait for every other rank
            while ct.atomic_cas(mine, (q, row), 1, 0, memory_order=ACQUIRE,
                                memory_scope=SYS) != 1:
                pass
    acc = ct.astype(ct.load(residual, index=(row, 0), shape=(1, TILE), padding_mode=ZERO),
                    ct.float32)
    for part in ct.static_iter((P0, P1, P2, P3)[:N]):      # plain loads, peer memory too
        acc = acc + ct.astype(ct.load(part, index=(row, 0), shape=(1, TILE),
                                      padding_mode=ZERO, allow_tma=False), ct.float32)
    out = ct.astype(acc, residual.dtype)
    ct.store(residual, index=(row, 0), tile=out)
    if NORM:                                             # the norm reads the stored residual
        r = ct.astype(out, ct.float32)
        ms = ct.sum(r * r, axis=1, keepdims=True) / residual.shape[1]
        w = ct.astype(ct.load(g, index=(0,), shape=(TILE,), padding_mode=ZERO), ct.float32)
        ct.store(normed, index=(row, 0), tile=ct.astype(r * ct.rsqrt(ms + eps) * w,
                                                         normed.dtype))


def launch_args(parts, flags, rank: int, residual, g, normed, eps: float) -> tuple:
    """reduce_norm's arguments for `len(parts)` ranks (parts and flags by rank; g None:
    no norm); the grid is (rows,)."""
    n = len(parts)
    if not 1 <= n <= MAX_RANKS or len(flags) != n:
        raise ValueError(f"reduce_norm takes 1 to {MAX_RANKS} ranks, got {n} partials "
                         f"and {len(flags)} flag arrays")
    if residual.shape[0] > ROWS:
        raise ValueError(f"reduce_norm takes at most {ROWS} rows, got {residual.shape[0]}")
    pad = MAX_RANKS - n
    norm = g is not None
    return (*parts, *parts[:1] * pad, *flags, *flags[:1] * pad, flags[rank], residual,
            g if norm else residual[0], normed if norm else residual, float(eps), rank, n,
            _pow2(residual.shape[1]), norm)


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


class PeerReduce:
    """This rank's symmetric buffers (SLOTS partials of (ROWS, width) and their flags)
    and the other ranks' views of theirs, for `reduce_norm` (see the module's
    docstring).  Made on every rank together (a collective); raises where the GPUs
    cannot map each other's memory."""

    def __init__(self, group, rank: int, size: int, width: int, dtype, device):
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm
        if size > MAX_RANKS:
            raise ValueError(f"peer reductions take at most {MAX_RANKS} ranks, not {size}")
        self.rank, self.size, self.width = rank, size, width
        item = torch.empty((), dtype=dtype).element_size()
        part = -(-ROWS * width * item // 128) * 128
        flag = SLOTS * size * ROWS * 4
        group = group or dist.group.WORLD
        enable = getattr(symm, "enable_symm_mem_for_group", None)
        if enable is not None:
            enable(group.group_name)
        buf = symm.empty(SLOTS * part + flag, dtype=torch.uint8, device=device)
        handle = symm.rendezvous(buf, group)
        self._keep = (buf, handle)
        self.parts = [[handle.get_buffer(q, (ROWS, width), dtype, (s * part) // item)
                       for q in range(size)] for s in range(SLOTS)]
        base = SLOTS * part // 4
        self.flags = [[handle.get_buffer(q, (size, ROWS), torch.int32,
                                         base + s * size * ROWS) for q in range(size)]
                      for s in range(SLOTS)]
        for s in range(SLOTS):
            self.flags[s][rank].zero_()
        torch.cuda.synchronize()
        dist.barrier(group)                 # every rank's flags zero before any is used
        self.calls = 0

    def fits(self, rows: int, width: int) -> bool:
        return rows <= ROWS and width == self.width

    def partial(self, rows: int):
        """This rank's buffer for the next reduction's partial product (rows, width)."""
        return self.parts[self.calls % SLOTS][self.rank][:rows]

    def reduce(self, be, residual, norm):
        """residual += every rank's partial (written into `partial(rows)`); with
        norm = (g, eps), returns RMSNorm(residual) * g, else None."""
        s = self.calls % SLOTS
        self.calls += 1
        rows = residual.shape[0]
        g, eps = norm if norm is not None else (None, 0.0)
        normed = be.empty(residual.shape) if norm is not None else None
        args = launch_args([p[:rows] for p in self.parts[s]], self.flags[s], self.rank,
                           residual, g, normed, eps)
        be._launch((rows,), reduce_norm, args)
        return normed


def simulate(parts, residual, g, eps):
    """Every rank's reduce_norm in the interpreter, rank after rank, for the tests.  When
    rank r runs, the ranks before it have arrived (their runs set its flags); those
    after it have not run yet, so their arrivals at r are set beforehand.  Returns
    each rank's (residual, normed) and the flags before and after (equal: each rank's
    later arrivals at the ranks before it leave what was set beforehand)."""
    n, rows = len(parts), residual.shape[0]
    flags = [np.zeros((n, rows), np.int32) for _ in range(n)]
    for r in range(n):
        flags[r][r + 1:] = 1
    before = [f.copy() for f in flags]
    outs = []
    for rank in range(n):
        res = residual.copy()
        normed = np.full(residual.shape, np.nan, residual.dtype) if g is not None else None
        ct.launch(None, (rows,), reduce_norm,
                  launch_args(parts, flags, rank, res, g, normed, eps))
        outs.append((res, normed))
    return outs, before, flags
