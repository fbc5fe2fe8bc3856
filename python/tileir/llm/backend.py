"""Where the model's arrays live and how each op launches its kernel.

`Backend("numpy")` holds NumPy arrays and runs every kernel in tileir's interpreter
(`ct.launch(None, ...)`); `Backend("cuda")` holds torch CUDA tensors and launches the
same kernels on the GPU (torch allocates; tileir computes).  The model code calls
only these methods, so one model source runs in both.

Attention runs the attention branches' kernels where their shapes allow:
`tileir.examples.attention.flash_attention_varlen` for prompts (head dims 16-256, powers
of two), `tileir.examples.decode_attention.paged_decode_attention` for decode steps
(pages of 16 or more tokens, a power of two), `tileir.examples.mla_decode.mla_decode`
for DeepSeek-V3's MLA (its 512 + 64 latent, heads in blocks of 64; prompts 8 tokens a
call).  Other shapes (the tiny test models' MLA, pages under 16) run the dense tutorial
kernel `tileir.examples.attention.attention` one sequence at a time over the
sequence's pages gathered into rows (`kernels.gather_pages`): correct, not fast.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np

import tileir as ct
from tileir.examples import llm_ops, next_pow2
from tileir.examples import attention as dense_attention
from tileir.examples.rmsnorm import rmsnorm as _rmsnorm

from . import gemv as G
from . import kernels as K


def _optional(module: str, name: str):
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


# Decode GEMMs (at most DECODE_ROWS rows) that run faster with tiles of their own than
# as the compiler retiles the 128-row source: a sweep of one-row products over weights
# streamed from memory (H200, 2026-11-28, Llama-3-8B widths; weight bytes x copy
# bandwidth): SwiGLU's two products 0.70 retiled -> 0.81 at 64 x 64 x 128 without a
# producer warpgroup; QKV 0.61 -> 0.65 at 64 x 128 x 128.  O and down (`linear_add`)
# were fastest as retiled; the LM head (128256 wide, persistent as retiled) streams at
# 0.99x copy and keeps the compiler's choice.  Each entry:
# (kernel, tiles, the narrowest and the widest N measured: a narrower weight leaves
# SMs idle at these tiles, where the retiler splits K).
DECODE_ROWS = 16
_DECODE = {
    "linear_swiglu": (K.linear_swiglu.replace_hints(retile=False, warp_specialize=False),
                      (64, 64, 128), 14336, 14336),
    "linear": (K.linear.replace_hints(retile=False, warp_specialize=True), (64, 128, 128),
               6144, 6144),
}

# Prompt GEMMs (PREFILL_ROWS rows or more) likewise: at 2048 rows (H200, 2026-11-29,
# bench/sweep_llm_decode.py 2048, TFLOP/s against cuBLAS in the same run) the residual
# GEMMs (`linear_add`: O and down) ran at 449 and 459 TFLOP/s as the compiler retiles
# 128 x 128 x 64, at 713 and 680 with 128 x 256 x 64 tiles as written (cuBLAS 785, 708);
# `linear` (QKV; the split SwiGLU's products) ran at cuBLAS's speed as retiled (776
# against 778).  Each entry as in _DECODE.
PREFILL_ROWS = 1024
_PREFILL = {
    "linear_add": (K.linear_add.replace_hints(retile=False, warp_specialize=False),
                   (128, 256, 64), 4096, 7168),
}


@functools.cache
def _l2_prefetching(kernel):
    """`kernel` with the `l2_prefetch` option (its own compiled specializations, made
    once per kernel)."""
    return kernel.replace_hints(l2_prefetch=True)


@functools.cache
def _early_loading(kernel):
    """`kernel` (a decode GEMV) with `early_loads` on its weights (`gemv.early_loading`;
    made once per kernel)."""
    return G.early_loading(kernel)


@functools.cache
def _with_hints(kernel, hints: tuple):
    """`kernel` with the options `hints` ((name, value) pairs; one Kernel per set)."""
    return kernel.replace_hints(**dict(hints)) if hints else kernel


def _tile(n: int, cap: int) -> int:
    return min(next_pow2(n), cap)


class Tickets:
    """Ticket counters of kernels whose last block finishes a launch's work (a GEMV's
    split K, decode attention's split KV): int32 zeros that every launch leaves zero,
    so that launches one after another in the stream, and CUDA-graph replays of them,
    share one buffer.  `at_least(n)` allocates it zeroed the first time (`first`
    counters at least: the engine's first steps run before any graph capture) and anew,
    larger, when a launch needs more; the old buffers stay alive for the graphs
    captured with them."""

    def __init__(self, backend, first: int):
        self.backend, self.first = backend, first
        self.buffers = []

    def at_least(self, n: int):
        if not self.buffers or self.buffers[-1].shape[0] < n:
            size = max(self.first, next_pow2(n))
            self.buffers.append(self.backend.zeros((size,), self.backend.int32))
        return self.buffers[-1]

    def all_zero(self) -> bool:
        """Whether every counter is back at zero (no launch left a ticket drawn)."""
        return not any(b.any() for b in self.buffers)


class Backend:
    def __init__(self, device: str = "numpy", dtype: str = "float32", fuse_norm: bool = False):
        if device not in ("numpy", "cuda"):
            raise ValueError(f"device must be 'numpy' or 'cuda', got {device!r}")
        if dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be 'float32' or 'bfloat16', got {dtype!r}")
        self.device, self.dtype_name = device, dtype
        self.exact = dtype == "float32"          # f32 GEMMs on the FMA units, not as tf32
        self.fuse_norm = fuse_norm                # RMSNorm inside the GEMM that reads it
        # SwiGLU of this many rows or more as two GEMMs and silu_mul (None: always
        # fused).  Measured on an H200 (bench/RESULTS.md, 2026-11-29): Llama-3-8B's
        # 2048-token prefill 75.0 ms fused, 60.4 ms split.
        self.split_swiglu_rows: int | None = 256
        # the decode GEMMs (linear, linear_add, linear_swiglu over at most DECODE_ROWS
        # rows) with the `l2_prefetch` kernel option: their first weight tiles into L2
        # before the wait for the previous kernel (docs/gpu-backend.md).  Off: on an
        # H200 it paid on the wgmma-tile GEMMs (2026-11-29, 185.7 -> 191.9 tok/s at
        # Llama-3-8B batch 1) and costs on the GEMVs that replaced them (06:16 UTC,
        # bench/sweep_llm_decode.py: gate/up 0.925 of copy without it, 0.888 with, down
        # 0.845 / 0.817, O 0.641 / 0.601; the whole step 208.7 / 205.6 tok/s).
        self.l2_prefetch = False
        # GEMMs of at most DECODE_ROWS rows (a fused norm: gemv_norm) on tileir.llm.gemv's
        # decode GEMVs (a block per weight-row slice and K run, split K added up by the
        # slice's last block: gemv_ticket) instead of the GEMM kernels' tiles: on the GPU
        # by default, for the one-row shapes a sweep measured faster (gemv.SWEPT; H200,
        # 2026-11-29, Llama-3-8B batch 1: 188.1 -> 200.4 tok/s in one run,
        # bench/RESULTS.md); in the interpreter when set (every shape, for the tests).
        self.decode_gemv = device == "cuda"
        # with decode_gemv, the GEMVs launched with the `early_loads` kernel option on their
        # weights (gemv.WEIGHTS): on sm_90a each block's first S - 1 weight tiles start
        # into its ring's shared memory before the wait for the previous kernel (which
        # the weights need not wait for: no kernel of a step writes them), the activation
        # rows after it (docs/gpu-backend.md, "Early loads").  On: measured on the H200
        # (2026-11-29 09:16 UTC, `bench/sweep_llm_decode.py 1 --early`, x copy, without ->
        # with) O 0.641 -> 0.652, down 0.846 -> 0.848, gate/up 0.929 -> 0.930, and down's
        # 6-stage candidate 0.828 -> 0.891 (gemv.ROUTED, `gemv_routed`); QKV's FMA form
        # has no ring.  bench/llm.py times the step without it ("weight tiles after the
        # wait"): 216.5 tok/s against 219.5 with it (09:32 UTC).
        self.gemv_early_loads = True
        # with decode_gemv, True launches the one-row shapes gemv.ROUTED names on their
        # candidate (down, O: deeper rings with early loads, 5-8 % faster alone); off: in
        # a Llama-3-8B batch-1 step (H200, 2026-11-29 09:32 UTC, one run of bench/llm.py)
        # 219.5 tok/s with them, 220.4 on gemv.SWEPT's plans: what a GEMV gains alone the
        # step does not (their rings take a whole SM's shared memory, so fewer of the
        # next kernel's blocks are placed early beside them)
        self.gemv_routed = False
        # with decode_gemv, a product that reads RMSNorm(x) * g (`linear`'s and
        # `linear_swiglu`'s norm) and takes a GEMV applies the norm in the GEMV's
        # prologue (each block finds its rows' rsqrt(mean(x^2) + eps) from the whole
        # rows, then rounds x * rs * g to the activation dtype as the separate norm's
        # output is) instead of a launch of its own before it; the models ask
        # `fuses_norm` per call.  Off until measured on the GPU.
        self.gemv_norm = False
        # with decode_gemv, a split K finished in the GEMV's own launch: the last block
        # of each weight-row slice (a ticket on `gemv_tickets`) adds the partials up and
        # applies the epilogue (gemv's TICKET; O and down, split in two at one row);
        # False: the combine kernel's second launch, as before (bench/llm.py times both).
        self.gemv_ticket = True
        # with decode_gemv, the RMSNorm after a residual GEMV (O, down: `linear_add_norm`)
        # in that GEMV's tail: the block that stores the last tile of the new residual
        # rows (a grid-wide ticket after the weight-row slices' own) norms all of them
        # into the next GEMV's input, as the norm's own launch (gemv_add_norm; a row's
        # squares summed in another order: an output may round a bf16 step apart);
        # False: the `rmsnorm` launch after the GEMV (bench/llm.py times both).  Off:
        # slower on the H200 (2026-11-29, Llama-3-8B batch 1: 195.3 tok/s against 218.0)
        self.gemv_norm_tail = False
        # RoPE of q and k and the K/V cache write in one launch (`rope_write_slots`,
        # `rope_write_latent`) instead of `rope` then `write_slots`.  Off: on an H200
        # (2026-11-29) the one launch took 108 us a Llama-3-8B decode step against the
        # two's 100, and in float32 at Llama-3-8B's widths its greedy tokens parted from
        # transformers' (k's in-place store from a replicated layout, fixed since in the
        # lowering: gpu/memory.py `lower_store`; not yet re-run on a GPU)
        self.rope_slots = False
        # with decode_gemv, Llama's decode QKV (`linear_rope_write_slots`) on
        # `gemv.gemv_qkv_rope`: the GEMV's blocks own rotary pairs of one head, rotate q
        # and k in its epilogue and write k and v into the cache at their slots, so a
        # layer's `rope` and `write_slots` launches go; the same bits as the three
        # launches in the interpreter.  On: Llama-3-8B batch 1 on the H200 (2026-11-29
        # 13:52 UTC, one run of `bench/llm.py --quick --no-compile`) 224.4 tok/s (0.85 of
        # the bound) against 214.2 with the three launches; alone (`sweep_llm_decode.py 1
        # --qkv-rope`, x copy over all launches) 0.718 against 0.666 (on 8 warps: 0.465)
        self.qkv_rope = True
        # paged decode attention with `tables_early` (decode_attention.py): its sequence
        # lengths and block table are the step's inputs, copied from the host before the
        # step's first kernel, so the kernel reads the length and its first pages'
        # numbers before its wait for the QKV GEMV instead of in a chain after it.  Off
        # until measured on the GPU (`bench/llm.py --alternatives decode_tables_early`)
        self.decode_tables_early = False
        self._part_dummies = {}
        # the GEMVs' split-K tickets, and paged decode attention's split-KV tickets (one
        # launch: the last split block of each sequence and KV head merges)
        self.gemv_tickets = Tickets(self, 256)
        self.decode_tickets = Tickets(self, 4096)
        if device == "cuda":
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("device='cuda' but torch sees no CUDA GPU")
            self.torch = torch
            self.dtype = getattr(torch, dtype)
            self.int32, self.float32 = torch.int32, torch.float32
            # the GEMVs' 64-row tiles on wgmma (four warps a block) or mma.sync (one)
            self.wgmma = torch.cuda.get_device_capability()[0] >= 9
        else:
            self.wgmma = True            # the interpreter: the plans as on an H200
            self.torch = None
            if dtype == "bfloat16":
                import ml_dtypes
                self.dtype = np.dtype(ml_dtypes.bfloat16)
            else:
                self.dtype = np.dtype(np.float32)
            self.int32, self.float32 = np.dtype(np.int32), np.dtype(np.float32)
        self.flash_varlen = _optional("tileir.examples.attention", "flash_attention_varlen")
        self.paged_decode = _optional("tileir.examples.decode_attention", "paged_decode_attention")
        self.mla_decode = _optional("tileir.examples.mla_decode", "mla_decode")
        self.moe_route = _optional("tileir.examples.moe", "route")
        self.moe_experts = _optional("tileir.examples.moe", "experts")

    # ---- arrays
    def empty(self, shape, dtype=None):
        dtype = self.dtype if dtype is None else dtype
        if self.torch is not None:
            return self.torch.empty(shape, dtype=dtype, device="cuda")
        return np.full(shape, np.nan, dtype) if dtype.kind == "f" else np.zeros(shape, dtype)

    def zeros(self, shape, dtype=None):
        dtype = self.dtype if dtype is None else dtype
        if self.torch is not None:
            return self.torch.zeros(shape, dtype=dtype, device="cuda")
        return np.zeros(shape, dtype)

    def asarray(self, x, dtype=None):
        """A host or checkpoint array (NumPy or torch) as this backend's, in dtype."""
        dtype = self.dtype if dtype is None else dtype
        if self.torch is not None:
            t = x if isinstance(x, self.torch.Tensor) else self.torch.from_numpy(np.asarray(x))
            return t.to(device="cuda", dtype=dtype).contiguous()
        if not isinstance(x, np.ndarray):          # a torch CPU tensor from a checkpoint
            x = x.float().numpy() if str(x.dtype) == "torch.bfloat16" else x.numpy()
        return np.ascontiguousarray(np.asarray(x).astype(dtype, copy=False))

    def numpy(self, x) -> np.ndarray:
        if self.torch is not None:
            return x.float().cpu().numpy() if x.is_floating_point() else x.cpu().numpy()
        return np.asarray(x)

    def _launch(self, grid, kernel, args):
        ct.launch(None, tuple(grid), kernel, tuple(args))

    # ---- row and element ops
    def embedding(self, ids, table, out=None):
        n, width = ids.shape[0], table.shape[1]
        out = self.empty((n, width)) if out is None else out
        tile = _tile(width, 1024)
        self._launch((n, ct.cdiv(width, tile)), K.embedding, (ids, table, out, tile))
        return out

    def rmsnorm(self, x, w, eps, out=None):
        out = self.empty(x.shape) if out is None else out
        self._launch((x.shape[0],), _rmsnorm, (x, w, out, float(eps), next_pow2(x.shape[1])))
        return out

    def add_(self, x, y):
        """y += x."""
        tile = _tile(y.shape[1], 1024)
        self._launch((y.shape[0], ct.cdiv(y.shape[1], tile)), K.add, (x, y, tile))
        return y

    def silu_mul(self, gate, up, out=None):
        out = self.empty(gate.shape) if out is None else out
        tile = _tile(gate.shape[1], 1024)
        self._launch((gate.shape[0], ct.cdiv(gate.shape[1], tile)), llm_ops.silu_mul,
                     (gate, up, out, tile))
        return out

    def copy_heads(self, src, dst):
        """dst (T, H, w) = src (T, H or 1, w), views both."""
        self._launch((dst.shape[0],), K.copy_heads,
                     (src, dst, next_pow2(dst.shape[1]), next_pow2(dst.shape[2])))
        return dst

    def rope(self, x, cos, sin, positions, out=None):
        """x (T, H, 2 * HALF) rotated at positions; out may be x."""
        out = x if out is None else out
        self._launch((x.shape[0],), K.rope,
                     (x, out, cos, sin, positions, next_pow2(x.shape[1]), x.shape[2] // 2))
        return out

    # ---- GEMMs: y = x @ w^T, w stored (out_features, in_features)
    def _gemm_tiles(self, m: int, n: int, accumulators: int = 1):
        """Tiles as bench/gemm.py writes them (the compiler retiles small grids, e.g. a
        decode step's few rows); the exact f32 product is a (BM, BN, BK) tile of FMAs."""
        if self.exact:
            return 16, 32, 16
        return 128, 128 // accumulators, 64

    def _gemm(self, kernel, m: int, n: int, norm, accumulators: int = 1):
        """The kernel and (BM, BN, BK) tiles a GEMM launches with: the source's tiles
        (`_gemm_tiles`), or for a GEMM over at most DECODE_ROWS rows, or PREFILL_ROWS
        and more (and no fused norm), the tiles of its own that a sweep of those shapes
        found faster than the compiler's retiling (`_DECODE`, `_PREFILL`;
        bench/sweep_llm_decode.py, figures in bench/RESULTS.md); with `l2_prefetch`, a
        decode GEMM's kernel with that option."""
        tiles = self._gemm_tiles(m, n, accumulators)
        table = _DECODE if m <= DECODE_ROWS else _PREFILL if m >= PREFILL_ROWS else {}
        tuned = table.get(kernel.name)
        if (tuned is not None and norm is None and not self.exact and self.torch is not None
                and tuned[2] <= n <= tuned[3]):
            kernel, tiles = tuned[:2]
        prefetch = self.l2_prefetch and m <= DECODE_ROWS
        return (_l2_prefetching(kernel) if prefetch else kernel), tiles

    def _route(self, m: int, n: int, k: int) -> tuple[G.Candidate | None, G.Plan]:
        """The decode GEMV for an (m, k) x (n, k)^T product: the routed candidate
        (`gemv.routed`) or None, and the plan (the candidate's, else `gemv.plan`; the
        combine launch in place of the ticket without `gemv_ticket`)."""
        cand = None if self.exact or not self.gemv_routed else G.routed(m, n, k)
        p = cand.plan if cand is not None else \
            G.plan(m, n, k, exact=self.exact, on_gpu=self.torch is not None)
        return cand, (p if self.gemv_ticket else p._replace(ticket=False))

    def _plan(self, m: int, n: int, k: int) -> G.Plan:
        return self._route(m, n, k)[1]

    def _gemv(self, x, ws, out, residual=None, norm=None, then=None, normed=None,
              rope=None):
        """A decode GEMV (`decode_gemv`): x @ ws[0]^T (+ residual) into out (which may be
        residual), or SwiGLU of two weights; with norm = (g, eps), RMSNorm(x) * g in
        place of x (not with a residual); with a split K, the partials (f32, in a
        buffer of this call) added up by the last block of each weight-row slice
        (`gemv_ticket`, the plans' TICKET) or by the matching combine kernel.  With a
        residual and then = (g, eps), also RMSNorm(out) * g into normed, in the same
        launch (`gemv_add_norm`: the plan must finish in it, split 1 or TICKET).  With
        rope = (cos, sin, positions, cache, slots), Llama's QKV finished as
        `rope_write_slots` finishes it, in the same launch (`gemv_qkv_rope`: the plan
        must fit, `gemv.qkv_rope_fits`)."""
        m, k = x.shape
        n = ws[0].shape[0]
        cand, p = self._route(m, n, k)
        lead = (2,) if len(ws) == 2 else ()
        if p.split > 1:
            part = self.empty(lead + (p.split, m, n), self.float32)
        else:                         # not read: the block applies the epilogue itself
            key = len(lead)
            if key not in self._part_dummies:
                self._part_dummies[key] = self.empty(lead + (1, 1, 1), self.float32)
            part = self._part_dummies[key]
        count = self.gemv_tickets.at_least(G.counters(n, p, tail=then is not None))
        tiles = tuple(p)
        g, eps = norm if norm is not None else (x, 0.0)
        if rope is not None:
            d = rope[3].shape[3]
            if residual is not None or not G.qkv_rope_fits(d, p):
                raise ValueError(f"gemv_qkv_rope takes no residual, and a plan whose "
                                 f"blocks own rotary pairs of one head ({d} wide) and "
                                 f"finish in its own launch; got {p}")
            kernel, fin = G.gemv_qkv_rope, None
            args = (x, g, float(eps), ws[0], out, part, count) + tuple(rope)
            tiles += (norm is not None, d)
        elif then is not None:
            if residual is None or (p.split > 1 and not p.ticket):
                raise ValueError("a norm in the GEMV's tail takes a residual GEMV that "
                                 "finishes in its own launch (split 1 or gemv_ticket)")
            kernel, fin = G.gemv_add_norm, None
            args = (x, ws[0], residual, out, part, count, then[0], float(then[1]), normed)
            tiles += (next_pow2(n),)
        elif residual is not None:
            kernel, args, fin = G.gemv_add, (x, ws[0], residual, out, part, count), \
                (G.gemv_combine_add, (part, residual, out))
        elif len(ws) == 2:
            kernel, fin = G.gemv_swiglu, (G.gemv_combine_swiglu, (part, out))
            args = (x, g, float(eps), ws[0], ws[1], out, part, count)
            tiles += (norm is not None,)
        else:
            kernel, fin = G.gemv, (G.gemv_combine, (part, out))
            args = (x, g, float(eps), ws[0], out, part, count)
            tiles += (norm is not None,)
        if cand is not None:          # a routed candidate's kernel options (and kernel)
            if cand.fused and kernel is G.gemv_swiglu:
                kernel = G.gemv_swiglu_fused
            kernel = _with_hints(kernel, tuple(sorted(cand.hints(kernel).items())))
        if self.l2_prefetch and self.torch is not None:
            kernel = _l2_prefetching(kernel)
        if self.gemv_early_loads and "early_loads" not in kernel.options:
            kernel = _early_loading(kernel)   # (the interpreter takes it and ignores it)
        self._launch(G.grid(n, p), kernel, args + tiles)
        if p.split > 1 and not p.ticket:
            bs, bm, bc = G.combine_tiles(m, n, p)
            self._launch((ct.cdiv(n, bc),), fin[0], fin[1] + (bs, bm, bc))
        return out

    def _gemv_ok(self, m: int, norm, n: int, k: int) -> bool:
        """Whether `decode_gemv` takes this product: at most DECODE_ROWS rows, a fused
        norm only with `gemv_norm`, and on the GPU a shape whose plan was measured
        faster than the wgmma tiles (`gemv.SWEPT`: one row at Llama-3-8B's widths; the
        LM head keeps its wgmma kernel, at 0.99x copy)."""
        if not (self.decode_gemv and m <= DECODE_ROWS and (norm is None or self.gemv_norm)):
            return False
        return self.torch is None or (m == 1 and ((n, k) in G.SWEPT or (n, k) in G.ROUTED))

    def fuses_norm(self, m: int, *ws) -> bool:
        """Whether `linear` / `linear_swiglu` over m rows and each weight of ws (those
        that read the same normed rows) applies norm = (g, eps) in its own kernel: with
        `fuse_norm` always (the GEMM kernels' NORM), with `gemv_norm` where every one
        of them runs on a decode GEMV (`_gemv_ok`: m rows and the weights' shapes; a
        prompt's many rows keep the norm's own launch).  The models decide per call
        (`Model.normed`)."""
        if not ws:
            raise ValueError("fuses_norm needs the weights that read the normed rows")
        if self.fuse_norm:
            return True
        return self.gemv_norm and all(self._gemv_ok(m, (None, 0.0), w.shape[0], w.shape[1])
                                      for w in ws)

    def linear(self, x, w, out=None, residual=None, norm=None):
        """x @ w^T; with residual, residual + x @ w^T in the GEMM's epilogue, into out
        (by default residual itself); with norm = (g, eps), RMSNorm(x) * g @ w^T.  With
        `decode_gemv`, at most DECODE_ROWS rows run on tileir.llm.gemv (with a norm
        only with `gemv_norm`)."""
        m, n = x.shape[0], w.shape[0]
        if residual is not None and norm is not None:
            raise ValueError("a residual GEMM takes no fused norm")
        if self._gemv_ok(m, norm, n, x.shape[1]):
            if residual is not None:
                return self._gemv(x, (w,), residual if out is None else out, residual)
            return self._gemv(x, (w,), self.empty((m, n)) if out is None else out, norm=norm)
        if residual is not None:
            out = residual if out is None else out
            kernel, (bm, bn, bk) = self._gemm(K.linear_add, m, n, None)
            self._launch((ct.cdiv(m, bm), ct.cdiv(n, bn)), kernel,
                         (x, w, residual, out, bm, bn, bk, self.exact))
            return out
        out = self.empty((m, n)) if out is None else out
        g, eps = norm if norm is not None else (x, 0.0)
        kernel, (bm, bn, bk) = self._gemm(K.linear, m, n, norm)
        self._launch((ct.cdiv(m, bm), ct.cdiv(n, bn)), kernel,
                     (x, g, float(eps), w, out, bm, bn, bk, self.exact, norm is not None))
        return out

    def linear_rope_write_slots(self, x, w, cos, sin, positions, cache, slots, norm=None):
        """Llama's QKV at decode: qkv = x @ w^T (norm as `linear`), then
        `rope_write_slots` (q and k rotated in qkv, k and v into cache at slots);
        returns qkv.  One launch (`gemv_qkv_rope`) where `qkv_rope` is set and the
        product takes a decode GEMV (`_gemv_ok`) whose plan fits (`gemv.qkv_rope_fits`:
        its blocks own rotary pairs of one head), else the GEMM then RoPE's launches."""
        m, n, k = x.shape[0], w.shape[0], x.shape[1]
        if self.qkv_rope and self._gemv_ok(m, norm, n, k) and \
                G.qkv_rope_fits(cache.shape[3], self._plan(m, n, k)):
            return self._gemv(x, (w,), self.empty((m, n)), norm=norm,
                              rope=(cos, sin, positions, cache, slots))
        qkv = self.linear(x, w, norm=norm)
        self.rope_write_slots(qkv, cos, sin, positions, cache, slots)
        return qkv

    def linear_add_norm(self, x, w, residual, then):
        """residual += x @ w^T, and with then = (g, eps) RMSNorm(residual) * g of the
        new rows: returned where the GEMV made it in its tail (`gemv_norm_tail`; a
        decode GEMV that finishes in its own launch, whose blocks hold a row:
        `gemv.norm_tail_fits`), else None (the caller launches the norm; a prompt's
        rows always)."""
        m, n, k = x.shape[0], w.shape[0], x.shape[1]
        if then is not None and self.gemv_norm_tail and self._gemv_ok(m, None, n, k):
            p = self._plan(m, n, k)
            if (p.split == 1 or p.ticket) and G.norm_tail_fits(n, p, self.wgmma):
                normed = self.empty(residual.shape)
                self._gemv(x, (w,), residual, residual, then=then, normed=normed)
                return normed
        self.linear(x, w, residual=residual)
        return None

    def linear_swiglu(self, x, w_gate, w_up, out=None, norm=None):
        """silu(x @ w_gate^T) * (x @ w_up^T), each projection rounded to the activation
        dtype first (as transformers).  One kernel with two accumulators; with
        `split_swiglu_rows` set and at least that many rows (and no fused norm), two plain
        GEMMs and `silu_mul` instead: the products on the GEMM's widest tiles, at the cost
        of the projections' round trip through memory (bench/llm.py measures both)."""
        m, n = x.shape[0], w_gate.shape[0]
        out = self.empty((m, n)) if out is None else out
        if self._gemv_ok(m, norm, n, x.shape[1]):
            return self._gemv(x, (w_gate, w_up), out, norm=norm)
        if (self.split_swiglu_rows is not None and m >= self.split_swiglu_rows
                and norm is None):
            return self.silu_mul(self.linear(x, w_gate), self.linear(x, w_up), out)
        g, eps = norm if norm is not None else (x, 0.0)
        kernel, (bm, bn, bk) = self._gemm(K.linear_swiglu, m, n, norm, accumulators=2)
        self._launch((ct.cdiv(m, bm), ct.cdiv(n, bn)), kernel,
                     (x, g, float(eps), w_gate, w_up, out, bm, bn, bk, self.exact,
                      norm is not None))
        return out

    def head_linear(self, x, w, out=None):
        t, h, n = x.shape[0], x.shape[1], w.shape[1]
        bm, bn, bk = self._gemm_tiles(t, n)
        out = self.empty((t, h, n)) if out is None else out
        self._launch((ct.cdiv(t, bm), h, ct.cdiv(n, bn)), K.head_linear,
                     (x, w, out, bm, bn, bk, self.exact))
        return out

    # ---- paged cache
    def rope_write_slots(self, qkv, cos, sin, positions, cache, slots):
        """Llama's attention: qkv (T, (Hq + 2 Hkv) * D), the QKV projection's rows; RoPE of
        its q and k heads in place (cos and sin rows at positions), and its k (rotated)
        and v heads into cache (pages, PAGE, 2 Hkv, D) at slots (T,).  One launch
        (`rope_slots`), or `rope` then `write_slots`: the same bits."""
        t = qkv.shape[0]
        pages, page, kv_heads, d = cache.shape
        hkv = kv_heads // 2
        heads = qkv.reshape(t, -1, d)
        hq = heads.shape[1] - kv_heads
        if not self.rope_slots:
            self.rope(heads[:, :hq + hkv], cos, sin, positions)      # q and k at once
            self.write_slots(qkv[:, hq * d:], cache.reshape(pages, page, -1), slots)
            return
        self._launch((t,), K.rope_write_slots,
                     (heads[:, :hq], heads[:, hq:hq + hkv], heads[:, hq + hkv:], cos, sin,
                      positions, cache[:, :, :hkv], cache[:, :, hkv:], slots, next_pow2(hq),
                      next_pow2(hkv), d // 2, page))

    def rope_write_latent(self, latent, rank: int, cos, sin, positions, cache, slots):
        """MLA's latent rows [c_kv, k_rope] (T, rank + rp): RoPE of k_rope in place, and
        the rows into cache (pages, PAGE, rank + rp) at slots.  One launch (`rope_slots`),
        or `rope` then `write_slots`: the same bits."""
        t = latent.shape[0]
        kr = latent[:, rank:][:, None]                  # (T, 1, rp): one head
        if not self.rope_slots:
            self.rope(kr, cos, sin, positions)
            self.write_slots(latent, cache, slots)
            return
        self._launch((t,), K.rope_write_latent,
                     (latent[:, :rank], kr, cos, sin, positions, cache[:, :, :rank],
                      cache[:, :, rank:][:, :, None], slots, next_pow2(rank),
                      kr.shape[2] // 2, cache.shape[1]))

    def write_slots(self, src, cache, slots):
        """src (T, W) rows into cache (pages, PAGE, W) at slots (T,)."""
        width = src.shape[1]
        tile = _tile(width, 1024)
        self._launch((src.shape[0], ct.cdiv(width, tile)), K.write_slots,
                     (src, cache, slots, cache.shape[1], tile))

    def _gather(self, cache, block_table, b: int, length: int):
        width, page = cache.shape[2], cache.shape[1]
        out = self.empty((length, width), cache.dtype)
        tile = _tile(width, 1024)
        self._launch((ct.cdiv(length, page), ct.cdiv(width, tile)), K.gather_pages,
                     (cache, block_table, b, out, page, tile))
        return out

    def _dense(self, q, k, v, out, scale, causal):
        """q (1, H, S, D), k/v (1, Hkv, L, D) views; out like q.  Causal only where S == L
        (a whole prompt).  The float32 mode takes `kernels.attention_exact` (no tf32)."""
        heads, d = q.shape[1], next_pow2(q.shape[3])
        if self.exact:
            bm, bn = (8, 16) if d <= 128 else (4, 16)
            self._launch((ct.cdiv(q.shape[2], bm), heads), K.attention_exact,
                         (q, k, v, out, float(scale), heads, heads // k.shape[1], bm, bn, d,
                          causal))
            return
        self._launch(dense_attention.grid(q, 32), dense_attention.attention,
                     (q, k, v, out, float(scale), heads, heads // k.shape[1], 32, 32, d, causal))

    def _t(self, x):
        """(S, H, D) -> a (1, H, S, D) view."""
        if self.torch is not None:
            return x.permute(1, 0, 2).unsqueeze(0)
        return x.transpose(1, 0, 2)[None]

    # ---- attention: the attention branches' kernels where their shapes allow
    def _tiles_fit(self) -> bool:
        # On the GPU the branch kernels are for 16-bit types: the varlen and MLA kernels'
        # tiles pass the shared memory in float32, and all of them would take float32
        # products as tf32; the float32 mode there runs `attention_exact` instead.  (The
        # interpreter computes float32 products exactly and has no shared memory.)
        return self.torch is None or self.dtype_name != "float32"

    def varlen_ok(self, d: int) -> bool:
        return (self.flash_varlen is not None and 16 <= d <= 256 and d & (d - 1) == 0
                and self._tiles_fit())

    def paged_ok(self, page: int) -> bool:
        return (self.paged_decode is not None and page >= 16 and page & (page - 1) == 0
                and self._tiles_fit())

    def mla_ok(self, heads: int, width: int, page: int) -> bool:
        # mla_decode is DeepSeek-V3's: a 512 + 64 latent row, heads in blocks of 64
        return (self.mla_decode is not None and width == 576 and heads % 64 == 0
                and page >= 16 and page & (page - 1) == 0 and self._tiles_fit())

    def attention_prefill(self, q, k, v, cu_seqlens, lengths, scale, out=None):
        """Causal attention of fresh prompts: q (T, Hq, D), k/v (T, Hkv, D) rows of each
        sequence one after another (cu_seqlens: the host's list of offsets)."""
        out = self.empty(q.shape) if out is None else out
        if self.varlen_ok(q.shape[2]):
            cu = self.asarray(np.asarray(cu_seqlens, np.int32), self.int32)
            mx = max(lengths)
            self.flash_varlen(q, k, v, cu, cu, mx, mx, scale, causal=True, out=out)
            return out
        for b, n in enumerate(lengths):
            lo = cu_seqlens[b]
            self._dense(self._t(q[lo:lo + n]), self._t(k[lo:lo + n]), self._t(v[lo:lo + n]),
                        self._t(out[lo:lo + n]), scale, True)
        return out

    def attention_decode(self, q, k_cache, v_cache, block_table, seq_lens_dev, seq_lens,
                         scale, out=None):
        """One new token per sequence: q (B, Hq, D); caches (pages, PAGE, Hkv, D)."""
        out = self.empty(q.shape) if out is None else out
        if self.paged_ok(k_cache.shape[1]):
            b, hq, d = q.shape
            self.paged_decode(q.reshape(b, 1, hq, d), k_cache, v_cache, block_table,
                              seq_lens_dev, scale, out=out.reshape(b, 1, hq, d),
                              counters=self.decode_tickets.at_least(b * k_cache.shape[2]),
                              tables_early=self.decode_tables_early)
            return out
        pages, page, hkv, d = k_cache.shape
        kc, vc = k_cache.reshape(pages, page, hkv * d), v_cache.reshape(pages, page, hkv * d)
        for b, n in enumerate(seq_lens):
            keys = self._gather(kc, block_table, b, n).reshape(n, hkv, d)
            vals = self._gather(vc, block_table, b, n).reshape(n, hkv, d)
            self._dense(self._t(q[b:b + 1]), self._t(keys), self._t(vals),
                        self._t(out[b:b + 1]), scale, False)
        return out

    def mla_attention(self, q, kv_cache, block_table, seq_lens_dev, scale, latent_dim):
        """Absorbed MLA on mla_decode (where `mla_ok`): q (B, Tq, H, R + P) against the
        latent cache (pages, PAGE, R + P), each sequence's Tq tokens its last (causal among
        them); returns (B, Tq, H, R), the attention-weighted latents (W_UV comes after).
        A prompt (Tq above 8, one sequence) runs 8 tokens a call, each chunk against the
        cache up to its last token."""
        b, tq, h, width = q.shape
        if tq <= 8:
            return self.mla_decode(q, kv_cache, block_table, seq_lens_dev, scale)
        if b != 1:
            raise ValueError("a prompt's MLA runs one sequence at a time")
        out = self.empty((1, tq, h, latent_dim))
        ends = list(range(8, tq, 8)) + [tq]
        ends_dev = self.asarray(np.asarray(ends, np.int32), self.int32)
        start = 0
        for i, end in enumerate(ends):
            self.mla_decode(q[:, start:end], kv_cache, block_table, ends_dev[i:i + 1], scale,
                            out=out[:, start:end])
            start = end
        return out

    def gather_rows(self, cache, block_table, b: int, length: int):
        """Sequence b's first `length` cache rows, (length, W), out of its pages."""
        return self._gather(cache, block_table, b, length)

    def attention_one(self, q, k, v, scale):
        """One sequence's new query rows against all its keys (no mask): q (Tq, Hq, D),
        k/v (L, Hkv, D); the dense kernel."""
        out = self.empty(q.shape)
        self._dense(self._t(q), self._t(k), self._t(v), self._t(out), scale, False)
        return out
