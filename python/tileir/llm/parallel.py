"""Tensor parallelism: the one seam where a model is split over ranks and the ranks meet.

Every weight the models hold comes through `Shard`, split as Megatron-LM and vLLM split
it: a linear layer is column-parallel (its output features split: Q/K/V, gate/up,
DeepSeek's q_b and kv_b), row-parallel (its input features split, the partial
products summed across ranks: O, down) or replicated (norms, DeepSeek's q_a and kv_a,
the MoE router); the embedding and LM head are split by vocabulary rows; attention
heads (Llama's KV heads with their query heads, DeepSeek's MLA heads) and routed
experts are dealt out in contiguous blocks.  DeepSeek's latent cache is replicated:
every rank computes and stores each token's whole [c_kv, k_rope] row (kv_a is
replicated) and reads it with its own heads, as vLLM does (its MLA attention takes
`num_heads // tp_size` local heads over one shared latent; q_a and kv_a are its
replicated linears).

Where the ranks' work meets, the models call this class:

- `embedding`: each rank gathers the token rows its vocabulary slice holds (the others
  read zeros: `vocab_embedding`), one all-reduce;
- `add_row_parallel`: a row-parallel GEMM into the residual stream.  Rank 0's GEMM adds
  its partial product to the residual in its epilogue (`linear_add`, as with one rank);
  the other ranks' GEMMs write their partial products over their copy of the residual;
  one in-place all-reduce then leaves residual + every partial on every rank (no extra
  buffer, no add kernel);
- `add_partial`: the MoE layer's sum (routed experts and shared expert) all-reduced, then
  added to the residual;
- on CUDA with TILEIR_PEER_REDUCE=1, the decode step's reductions (at most `peer.ROWS`
  rows) go over peer memory instead: the partial products into buffers the other GPUs read, one tileir kernel
  summing them into the residual with the next RMSNorm (`connect`, tileir.llm.peer);
- `local_experts`: the router runs replicated; each rank keeps the (token, expert)
  pairs of its own experts (renumbered from 0) and gives the others weight 0 on its
  first expert (`local_experts`): each rank's experts run for every token they were
  routed, and `add_partial`'s all-reduce sums the ranks' shares.  The simplest correct
  dispatch (no all-to-all); its cost is the zero-weight pairs, which still run through
  the grouped GEMM on the rank's first expert (see docs/llm.md);
- `gather_logits`: the LM head's vocabulary slices all-gathered into whole rows;
- `agree_min`, `broadcast`: the engine's host-side agreements (the KV cache's page
  count; sampled tokens when sampling is random).

Collectives run on torch.distributed: NCCL on torch CUDA tensors (capturable, so the
decode step's CUDA graph holds them), gloo on the NumPy backend's arrays, reached
through `torch.from_numpy` views of the same memory (`_as_torch`, the one place the
two meet).  With one rank every split is the whole tensor and each meeting the plain
kernel, and torch is never imported.

`init(device, size)` makes the Shard of one process of a `torchrun` launch.
"""

from __future__ import annotations

import atexit
import dataclasses
import os

import numpy as np

import tileir as ct
from tileir.examples import next_pow2

ZERO = ct.PaddingMode.ZERO

# NVLink multicast (NVLS) stays off in every process: on the shared GPU machines a program
# that uses it can take the host's GPUs out of service.  Set before the process group
# (and so NCCL, torch's symmetric memory, NVSHMEM) starts; nothing here calls
# cuMulticastCreate.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


# ----------------------------------------------------------------------------- kernels

@ct.kernel
def vocab_embedding(ids, table, out, lo, TILE: ct.Constant[int]):
    """out[t] = table[ids[t] - lo] for the ids this rank's rows hold, zeros for the others'."""
    t = ct.bid(0)
    j = ct.bid(1)
    row = ct.load(ids, index=(t,), shape=(1,)).item() - lo
    if row >= 0 and row < table.shape[0]:
        vals = ct.load(table, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
        ct.store(out, index=(t, j), tile=ct.astype(vals, out.dtype))
    else:
        ct.store(out, index=(t, j), tile=ct.zeros((1, TILE), dtype=out.dtype))


@ct.kernel
def local_experts(ids, weights, local_ids, local_weights, lo, n, K: ct.Constant[int]):
    """A token's routed pairs for the experts lo .. lo + n - 1: their ids less lo, weights
    kept; the other ranks' pairs on expert 0 with weight 0."""
    t = ct.bid(0)
    e = ct.load(ids, index=(t, 0), shape=(1, K), padding_mode=ZERO)
    w = ct.load(weights, index=(t, 0), shape=(1, K), padding_mode=ZERO)
    mine = (e >= lo) & (e < lo + n)
    ct.store(local_ids, index=(t, 0), tile=ct.where(mine, e - lo, 0))
    ct.store(local_weights, index=(t, 0), tile=ct.where(mine, w, 0.0))


# ----------------------------------------------------------------------------- collectives

def _as_torch(x):
    """x as a torch tensor over the same memory: a torch tensor as it is, a NumPy array
    through torch.from_numpy (bfloat16, which NumPy holds as ml_dtypes', through its bits)."""
    if not isinstance(x, np.ndarray):
        return x
    import torch
    if not x.flags.c_contiguous:
        raise ValueError("a collective on a NumPy array needs it contiguous (it works in place)")
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def _dist():
    import torch.distributed as dist
    return dist


@dataclasses.dataclass(frozen=True)
class Shard:
    """This process's place in a tensor-parallel group: rank `rank` of `size`, over the
    torch.distributed process group `group` (None: the default group)."""
    rank: int = 0
    size: int = 1
    group: object = dataclasses.field(default=None, compare=False)
    # the peer reductions once `connect` made them, and those `use_peer(False)` set
    # aside (lists: the dataclass is frozen)
    _peer: list = dataclasses.field(default_factory=list, compare=False, repr=False)
    _peer_off: list = dataclasses.field(default_factory=list, compare=False, repr=False)

    def __post_init__(self):
        if self.size < 1 or not 0 <= self.rank < self.size:
            raise ValueError(f"rank {self.rank} of {self.size}: need size >= 1 and "
                             f"0 <= rank < size")
        if self.size > 1:
            try:
                dist = _dist()
            except ImportError as e:
                raise RuntimeError("tensor parallelism runs on torch.distributed: install "
                                   "torch") from e
            if not dist.is_initialized():
                raise RuntimeError(
                    f"Shard(rank={self.rank}, size={self.size}) needs torch.distributed's "
                    "process group: run one process per rank under torchrun (tileir.llm's "
                    "--tp N, LLM(tensor_parallel_size=N)), or init_process_group first")
            world = dist.get_world_size(self.group)
            if world != self.size or dist.get_rank(self.group) != self.rank:
                raise ValueError(f"Shard(rank={self.rank}, size={self.size}) in a process "
                                 f"group where this process is rank "
                                 f"{dist.get_rank(self.group)} of {world}")

    def check(self, cfg):
        """Every split the model will make, against cfg (`check_config`)."""
        check_config(cfg, self.size)

    # ---- splits of a weight (host arrays: NumPy or torch CPU/GPU tensors)

    def _range(self, n: int, what: str) -> tuple[int, int]:
        if n % self.size:
            raise ValueError(f"{what}: {n} does not split over {self.size} ranks")
        step = n // self.size
        return self.rank * step, (self.rank + 1) * step

    def heads(self, n: int, what: str = "attention heads") -> tuple[int, int]:
        return self._range(n, what)

    def experts(self, n: int) -> tuple[int, int]:
        return self._range(n, "routed experts")

    def own(self, part):
        """A slice as a tensor of its own: a view would keep the whole tensor's memory
        alive (a checkpoint's tensors already on the GPU), and a rank keeps only its
        share."""
        if self.size == 1:
            return part
        return part.copy() if isinstance(part, np.ndarray) else part.clone()

    def column(self, w, what: str):
        """A linear weight (out, in) split along its outputs."""
        lo, hi = self._range(w.shape[0], what)
        return self.own(w[lo:hi])

    def row(self, w, what: str):
        """A linear weight (out, in) split along its inputs (summed by add_row_parallel)."""
        lo, hi = self._range(w.shape[1], what)
        return self.own(w[:, lo:hi])

    def vocab(self, w, what: str):
        """This rank's rows of an embedding or LM head table (`vocab_slice`)."""
        return self.own(vocab_slice(w, self.rank, self.size))

    def replicated(self, w, what: str):
        return w

    # ---- where the ranks' work meets: every cross-rank step of the models is one of these

    def all_reduce(self, x):
        """x summed over the ranks, in place (a contiguous backend array)."""
        if self.size > 1:
            _dist().all_reduce(_as_torch(x), group=self.group)
        return x

    def embedding(self, be, ids, table):
        """Token rows of a vocabulary-split table (a rank has rows lo..hi; the others'
        tokens read zeros there and an all-reduce fills them in)."""
        if self.size == 1:
            return be.embedding(ids, table)
        n, width = ids.shape[0], table.shape[1]
        out = be.empty((n, width))
        tile = min(next_pow2(width), 1024)
        be._launch((n, ct.cdiv(width, tile)), vocab_embedding,
                   (ids, table, out, self.rank * table.shape[0], tile))
        return self.all_reduce(out)

    def add_row_parallel(self, be, x, w, residual, norm=None):
        """residual += x @ w^T for a row-parallel weight (x holds this rank's slice of the
        inputs).  Returns RMSNorm(residual) * g for norm = (g, eps) where the reduction
        made it (the peer path), else None (the caller norms).  One rank: the add is the
        GEMM's epilogue.  More, on the peer path (`connect`): each rank's GEMM writes its
        partial product into its peer buffer and `peer.reduce_norm` sums them into the
        residual, the norm after it in the same kernel.  Otherwise rank 0 adds its
        partial product in the epilogue, the others write theirs over their copy of the
        residual, and one all-reduce in place sums them."""
        part = self.partial_out(x.shape[0], w.shape[0])
        if part is not None:
            be.linear(x, w, out=part)
            return self.reduce_into(be, part, residual, norm)
        if self.size == 1 or self.rank == 0:
            be.linear(x, w, residual=residual)
        else:
            be.linear(x, w, out=residual)
        self.all_reduce(residual)
        return None

    def add_partial(self, be, x, residual, norm=None):
        """residual += the sum over ranks of x (the MoE layer's output: each rank's
        experts' share and its slice of the shared expert); x from `partial_out` when
        that gave a buffer.  Returns what `reduce_into` does."""
        return self.reduce_into(be, x, residual, norm)

    # ---- peer reductions (tileir.llm.peer): the decode step's all-reduces

    def connect(self, be, width: int):
        """Peer reductions of rows `width` wide for this group, where it can take them: a
        CUDA backend, 2 to peer.MAX_RANKS ranks, TILEIR_PEER_REDUCE=1 (opt-in until
        measured on two GPUs: docs/llm.md), and GPUs that map each other's memory (all
        ranks agree; where any cannot, each keeps the plain all-reduce and rank 0 says
        why)."""
        if (self.size == 1 or be.torch is None or self._peer or self._peer_off
                or os.environ.get("TILEIR_PEER_REDUCE", "0") != "1"):
            return
        from . import peer
        if self.size > peer.MAX_RANKS:
            return
        import torch
        made, why = None, ""
        try:
            made = peer.PeerReduce(self.group, self.rank, self.size, width, be.dtype,
                                   torch.device("cuda", torch.cuda.current_device()))
        except Exception as e:             # no peer mapping here: the plain all-reduce
            why = f"{type(e).__name__}: {e}"
        if self.agree_min(int(made is not None)):
            self._peer.append(made)
        elif self.rank == 0:
            import sys
            print(f"tileir.llm: peer all-reduce unavailable, NCCL all-reduces instead"
                  f"{' (' + why[:300] + ')' if why else ''}", file=sys.stderr)

    def use_peer(self, on: bool):
        """Takes the peer path (on, where `connect` made it) or the plain all-reduce for
        the reductions to come (the benchmark's comparison; decode graphs captured
        before keep the path they were captured with)."""
        src, dst = (self._peer_off, self._peer) if on else (self._peer, self._peer_off)
        dst.extend(src)
        src.clear()

    @property
    def peer(self):
        """The PeerReduce that `connect` made, or None."""
        return self._peer[0] if self._peer else None

    def begin_step(self):
        """A forward pass starts: its reductions take the peer slots from the first (so
        a CUDA graph captured at any step replays the same slot order)."""
        if self._peer:
            self._peer[0].calls = 0

    def partial_out(self, rows: int, width: int):
        """The array a rank's partial sum of (rows, width) goes into for the next
        `reduce_into`: its peer buffer on the peer path, else None (any array)."""
        p = self.peer
        return p.partial(rows) if p is not None and p.fits(rows, width) else None

    def reduce_into(self, be, part, residual, norm=None):
        """residual += the sum over ranks of part; returns RMSNorm(residual) * g (norm =
        (g, eps)) where the peer path made it in the same kernel, else None."""
        p = self.peer
        if p is not None and p.fits(*residual.shape):
            if part.data_ptr() != p.partial(residual.shape[0]).data_ptr():
                raise ValueError("on the peer path a partial sum must be in the buffer "
                                 "that partial_out gave")
            return p.reduce(be, residual, norm)
        be.add_(self.all_reduce(part), residual)
        return None

    def local_experts(self, be, ids, weights, experts: int):
        """The router's (T, top_k) expert ids and weights for this rank's experts (see
        the module's docstring): ids renumbered from this rank's first expert, the
        other ranks' pairs given weight 0."""
        if self.size == 1:
            return ids, weights
        n = experts // self.size
        t, k = ids.shape
        local_ids, local_weights = be.empty((t, k), be.int32), be.empty((t, k), be.float32)
        be._launch((t,), local_experts,
                   (ids, weights, local_ids, local_weights, self.rank * n, n, next_pow2(k)))
        return local_ids, local_weights

    def gather_logits(self, be, x, vocab: int):
        """The ranks' vocabulary slices of the logits (B, vocab_rows) side by side, the
        padding dropped: (B, vocab) float32 on every rank."""
        if self.size == 1:
            return x
        b, per = x.shape
        parts = be.empty((self.size * b, per), x.dtype)
        dist = _dist()
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(_as_torch(parts), _as_torch(x), group=self.group)
        # (ranks, B, per) -> (B, ranks * per): one copy; the padding rows' columns dropped
        if isinstance(parts, np.ndarray):
            rows = parts.reshape(self.size, b, per).transpose(1, 0, 2).reshape(b, -1)
            return np.ascontiguousarray(rows[:, :vocab])
        rows = parts.view(self.size, b, per).permute(1, 0, 2).reshape(b, -1)
        return rows[:, :vocab].contiguous()

    # ---- the engine's agreements (host side, outside any graph)

    def agree_min(self, n: int) -> int:
        """The least of the ranks' n (each rank's scheduler must make the same choices:
        the KV cache's page count, sized by each GPU's free memory)."""
        if self.size == 1:
            return n
        import torch
        dist = _dist()
        device = "cuda" if "nccl" in str(dist.get_backend(self.group)) else "cpu"
        t = torch.tensor([n], dtype=torch.int64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.group)
        return int(t.item())

    def broadcast(self, x):
        """x as rank 0 has it, in place (sampled tokens: every rank keeps rank 0's)."""
        if self.size > 1:
            _dist().broadcast(_as_torch(x), src=self.global_rank(0), group=self.group)
        return x

    def global_rank(self, rank: int) -> int:
        if self.group is None:
            return rank
        return _dist().get_global_rank(self.group, rank)




def vocab_slice(w, rank: int, size: int):
    """Rank `rank`'s rows of a (vocab, hidden) table split over `size` ranks: slices of
    ceil(vocab / size) rows, the last padded with zero rows where the vocabulary does
    not divide (no id reads them; `gather_logits` drops their logits)."""
    if size == 1:
        return w
    vocab = w.shape[0]
    per = -(-vocab // size)
    part = w[rank * per:min((rank + 1) * per, vocab)]
    if part.shape[0] == per:
        return part
    if isinstance(w, np.ndarray):
        return np.concatenate([part, np.zeros((per - part.shape[0], w.shape[1]), w.dtype)])
    import torch
    pad = torch.zeros((per - part.shape[0], w.shape[1]), dtype=w.dtype, device=w.device)
    return torch.cat([part, pad])

def check_config(cfg, size: int):
    """Every split a model of cfg makes over `size` ranks, before any weight loads: a
    ValueError naming the config.json field that does not divide by the size.  (The
    vocabulary need not divide: its last slice is padded.)"""
    if size == 1:
        return
    splits = [("num_attention_heads", cfg.num_heads)]
    if cfg.arch == "llama":
        splits.append(("num_key_value_heads", cfg.num_kv_heads))
    if any(not cfg.is_moe_layer(i) for i in range(cfg.num_layers)):
        splits.append(("intermediate_size", cfg.intermediate_size))
    if cfg.n_routed_experts:
        splits += [("n_routed_experts", cfg.n_routed_experts),
                   ("moe_intermediate_size * n_shared_experts",
                    cfg.moe_intermediate_size * cfg.n_shared_experts)]
    for field, n in splits:
        if n % size:
            why = (" (a rank holds whole KV heads and the query heads that read them)"
                   if field == "num_key_value_heads" else "")
            raise ValueError(f"tensor parallelism over {size} ranks: {field} = {n} does not "
                             f"divide by {size}{why}; choose a tensor-parallel size that "
                             f"divides it")

def init(device: str, size: int) -> Shard:
    """The Shard of this process for tensor parallelism over `size` ranks.

    size 1: `Shard()`.  More: one process per rank, as torchrun starts them (RANK,
    WORLD_SIZE, LOCAL_RANK in the environment): NVLink multicast turned off
    (`MULTICAST_OFF`), and, unless the caller made it already, the default process
    group initialised: NCCL on device "cuda" (this process's GPU is LOCAL_RANK), gloo on
    "numpy".  The group's size must be `size`."""
    if size < 1:
        raise ValueError(f"tensor_parallel_size must be >= 1, got {size}")
    if size == 1:
        return Shard()
    os.environ.update(MULTICAST_OFF)
    try:
        import torch
        dist = _dist()
    except ImportError as e:
        raise RuntimeError("tensor parallelism runs on torch.distributed: install torch") from e
    if not dist.is_initialized():
        env = os.environ
        if "RANK" not in env or "WORLD_SIZE" not in env:
            raise RuntimeError(
                f"tensor_parallel_size={size} runs one process per rank: launch under "
                f"torchrun, e.g. `torchrun --nproc-per-node {size} -m tileir.llm generate "
                f"MODEL_DIR --tp {size} ...` (RANK and WORLD_SIZE are not set)")
        if int(env["WORLD_SIZE"]) != size:
            raise ValueError(f"tensor_parallel_size={size} but torchrun started "
                             f"{env['WORLD_SIZE']} processes (--nproc-per-node)")
        if device == "cuda":
            local = int(env.get("LOCAL_RANK", env["RANK"]))
            torch.cuda.set_device(local)
            dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        else:
            dist.init_process_group("gloo")
        atexit.register(shutdown)           # the group this made ends with the process
    if dist.get_world_size() != size:
        raise ValueError(f"tensor_parallel_size={size} in a process group of "
                         f"{dist.get_world_size()} ranks")
    return Shard(dist.get_rank(), size)


def shutdown():
    """Ends the default process group, where one was started."""
    try:
        dist = _dist()
    except ImportError:
        return
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
