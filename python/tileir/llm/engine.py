"""The engine: a paged KV cache, a scheduler with continuous batching, sampling.

Each `step()` either prefills the waiting requests that fit (their whole prompts in
one batch) or, when none is waiting or none fits, decodes one token for every running
request.  A request joins the running set after its prefill and leaves it when it
has its tokens or samples a stop token; its pages go back to the pool at once, so the
next step can admit another.  Page 0 is never given out: rows that pad a CUDA-graph
batch write their keys there.

On the GPU, decode steps of each padded batch size (powers of two up to max_batch)
are captured once as CUDA graphs and replayed, when the paged attention kernels are
installed (the dense fallback loops over sequences on the host, which a graph cannot
replay).
"""

from __future__ import annotations

import dataclasses
import sys
import time
import warnings
from typing import Iterator

import numpy as np

from . import kernels as K
from .models import Batch


class ContextLengthError(ValueError):
    """A prompt (with its new tokens) longer than the model's context."""


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 16
    temperature: float = 0.0
    top_k: int = 0              # 0: no top-k cut
    top_p: float = 1.0          # 1.0: no nucleus cut
    stop_token_ids: tuple = ()
    ignore_eos: bool = False

    def __post_init__(self):
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0: off), got {self.top_k}")


@dataclasses.dataclass
class Request:
    id: int
    prompt: list
    params: SamplingParams
    output: list = dataclasses.field(default_factory=list)
    pages: list = dataclasses.field(default_factory=list)
    finish_reason: str | None = None

    @property
    def tokens(self) -> list:          # what a (re-)prefill computes: prompt and output so far
        return self.prompt + self.output

    @property
    def length(self) -> int:           # tokens whose keys are (or are about to be) cached
        return len(self.prompt) + len(self.output)


class PagePool:
    def __init__(self, num_pages: int, page: int):
        if num_pages < 2:
            raise ValueError(f"the KV cache needs at least 2 pages, got {num_pages}")
        self.page = page
        self.free = list(range(num_pages - 1, 0, -1))     # page 0: the padding rows' scratch

    def need(self, req: Request, tokens: int) -> int:
        return max(0, -(-tokens // self.page) - len(req.pages))

    def grow(self, req: Request, tokens: int) -> bool:
        n = self.need(req, tokens)
        if n > len(self.free):
            return False
        req.pages += [self.free.pop() for _ in range(n)]
        return True

    def release(self, req: Request):
        self.free += reversed(req.pages)
        req.pages = []


class Progress:
    """One status line on stderr, rewritten at most twice a second."""

    def __init__(self, total_requests: int, enabled: bool):
        self.total, self.enabled = total_requests, enabled
        self.start = self.last = time.perf_counter()
        self.tokens = self.done = 0

    def update(self, new_tokens: int, finished: int):
        self.tokens += new_tokens
        self.done += finished
        now = time.perf_counter()
        if self.enabled and (now - self.last > 0.5 or self.done == self.total):
            self.last = now
            rate = self.tokens / max(now - self.start, 1e-9)
            print(f"\r{self.done}/{self.total} requests, {self.tokens} tokens, {rate:.1f} tok/s",
                  end="\n" if self.done == self.total else "", file=sys.stderr, flush=True)


# Logits a block of greedy sampling takes (`Engine._sample`): a row wider than this is
# split over blocks, a tile each (kernels.argmax_tiles), and merged by a second launch
GREEDY_TILE = 4096


def default_page_size(cfg) -> int:
    """Slots a KV-cache page when none is asked for: 64, for both architectures.
    Llama's `paged_decode_attention` runs an online-softmax step a page, so a 64-slot
    page reads four times the keys a step of a 16-slot one: batch 1, 8 KV heads on an
    H200 (2026-11-29, `bench/decode_attention.py --short`, the best split count of
    each), a 256-token context 5.8 us a call at 64 against 8.7 at 16, 1k 8.6 against
    11.4, 4k 12.2 against 20.0.  DeepSeek's MLA: a whole step of `mla_decode`'s 64-row
    loop (FlashMLA asks for 64 too); at 16 a step holds 16 rows and its score
    products are bound by shared memory: batch 64, 4k context, 0.43 of the kernel's
    bound at 64 slots against 0.20 at 16 (`--mla-variants`).  (vLLM's default, 16,
    suits kernels that gather a step's rows across pages.)"""
    return 64


class Engine:
    def __init__(self, model, *, page_size: int | None = None, num_pages: int | None = None,
                 max_batch: int = 64, max_model_len: int | None = None,
                 max_prefill_tokens: int = 8192, cuda_graphs: bool = True, seed: int = 0,
                 cache_memory_fraction: float = 0.5):
        """page_size: slots a page of the KV cache (default `default_page_size`: 64).  max_model_len: the longest prompt + new tokens
        (default: the model's context, at most 8192; pass more for long contexts).  num_pages: the KV cache's pages of
        page_size tokens (default: on the GPU, cache_memory_fraction of the memory free
        after the weights, at most what max_batch full-length requests need; on the CPU
        that need, at most 4096 pages)."""
        self.model, self.be, self.cfg = model, model.be, model.cfg
        page_size = page_size or default_page_size(self.cfg)
        ctx = self.cfg.max_position_embeddings
        self.max_model_len = min(max_model_len or min(ctx, 8192), ctx)
        self.max_batch, self.max_prefill_tokens = max_batch, max_prefill_tokens
        self.max_pages = -(-self.max_model_len // page_size)
        if num_pages is None:
            num_pages = min(max_batch * self.max_pages, self._pages_that_fit(
                page_size, cache_memory_fraction)) + 1
        self.pool = PagePool(num_pages, page_size)
        model.allocate_cache(num_pages, page_size)
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.next_id = 0
        self.rng = np.random.default_rng(seed)
        if self.be.torch is not None:
            self.gen = self.be.torch.Generator(device="cuda")
            self.gen.manual_seed(seed)
        self.graphs_ok = (cuda_graphs and self.be.torch is not None
                          and self._paged_kernels_installed())
        self.graphs: dict[tuple[int, int], tuple] = {}   # (batch, table width) -> graph
        self.last_logits = None

    def _pages_that_fit(self, page_size: int, fraction: float) -> int:
        if self.be.torch is None:
            return 4096
        free, _ = self.be.torch.cuda.mem_get_info()
        per_page = self.model.cache_bytes_per_token() * page_size
        # every rank of a tensor-parallel group schedules alike: the same pages
        return self.model.shard.agree_min(max(2, int(free * fraction) // per_page))

    def _paged_kernels_installed(self) -> bool:
        """Whether decode runs on the paged kernels (no host loop a graph cannot replay)."""
        if self.cfg.arch == "llama":
            return self.be.paged_ok(self.pool.page)
        width = self.cfg.kv_lora_rank + self.cfg.qk_rope_head_dim
        return self.be.mla_ok(self.model.heads, width, self.pool.page)

    # ---- requests
    def add_request(self, prompt, params: SamplingParams) -> int:
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise ValueError("a prompt needs at least one token")
        total = len(prompt) + params.max_new_tokens
        if total > self.max_model_len:
            raise ContextLengthError(
                f"prompt of {len(prompt)} tokens + {params.max_new_tokens} new ones = {total} "
                f"exceeds the context of {self.max_model_len} tokens")
        bad = [t for t in prompt if not 0 <= t < self.cfg.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} outside the vocabulary of "
                             f"{self.cfg.vocab_size}")
        req = Request(self.next_id, prompt, params)
        self.next_id += 1
        self.waiting.append(req)
        return req.id

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # ---- one step
    def step(self) -> list[tuple[Request, int]]:
        """Runs one prefill or decode step; returns (request, new token) pairs."""
        admitted = self._admit()
        if admitted:
            batch = self._prefill_batch(admitted)
            reqs = admitted
            logits = self.model.forward(batch)
            self.running += admitted
        else:
            if not self.running:
                if self.waiting:
                    raise RuntimeError("the KV cache cannot hold the first waiting request "
                                       f"({self.waiting[0].length} tokens); "
                                       "raise num_pages")
                return []
            reqs = self._grow_running()
            logits = self._decode(reqs)
        self.last_logits = logits           # (len(reqs), vocab) float32, for checks
        tokens = self._sample(logits, reqs)
        out = []
        for req, tok in zip(reqs, tokens):
            req.output.append(tok)
            out.append((req, tok))
            p = req.params
            stops = set(p.stop_token_ids) | (set() if p.ignore_eos else set(self.cfg.eos_token_ids))
            if tok in stops:
                req.finish_reason = "stop"
            elif len(req.output) >= p.max_new_tokens:
                req.finish_reason = "length"
            if req.finish_reason:
                self.running.remove(req)
                self.pool.release(req)
        return out

    def _admit(self) -> list[Request]:
        admitted, tokens = [], 0
        while self.waiting and len(self.running) + len(admitted) < self.max_batch:
            req = self.waiting[0]
            if admitted and tokens + req.length > self.max_prefill_tokens:
                break
            if not self.pool.grow(req, req.length):
                break
            admitted.append(self.waiting.pop(0))
            tokens += req.length
        return admitted

    def _grow_running(self) -> list[Request]:
        """Pages for each running request's next token; when the pool runs dry the
        newest requests go back to waiting (their cache is recomputed on re-admission)."""
        for req in list(self.running):
            if req not in self.running:                  # pre-empted for an older one
                continue
            while not self.pool.grow(req, req.length):
                victim = self.running.pop()
                self.pool.release(victim)
                self.waiting.insert(0, victim)           # re-prefilled with its output
                if victim is req:
                    break
        return list(self.running)

    def _dev(self, values, dtype=np.int32):
        return self.be.asarray(np.asarray(values, dtype), self.be.int32)

    def _table(self, reqs) -> np.ndarray:
        table = np.zeros((len(reqs), self.max_pages), np.int32)
        for i, r in enumerate(reqs):
            table[i, :len(r.pages)] = r.pages
        return table

    def _slot(self, req, pos) -> int:
        return req.pages[pos // self.pool.page] * self.pool.page + pos % self.pool.page

    def _prefill_batch(self, reqs) -> Batch:
        ids, pos, slots, cu = [], [], [], [0]
        for r in reqs:
            n = r.length
            ids += r.tokens
            pos += range(n)
            slots += [self._slot(r, p) for p in range(n)]
            cu.append(cu[-1] + n)
        lens = [r.length for r in reqs]
        return Batch(True, self._dev(ids), self._dev(pos), self._dev(slots),
                     self._dev([c - 1 for c in cu[1:]]), self._dev(self._table(reqs)),
                     self._dev(lens), lens, cu)

    def _decode_pages(self, reqs) -> int:
        """The block table's width for a decode step of reqs: a power of two of pages (at
        least 4) that holds every sequence's tokens.  The attention kernels size their
        split of each context by it, so a short context is not split as finely as the
        longest the engine allows; each width is a CUDA graph of its own."""
        need = max(-(-r.length // self.pool.page) for r in reqs)
        return min(self.max_pages, max(4, 1 << (need - 1).bit_length()))

    def _decode_arrays(self, reqs, size, width):
        ids = np.zeros(size, np.int32)
        pos = np.zeros(size, np.int32)
        slots = np.zeros(size, np.int32)                 # padding rows: page 0
        lens = np.ones(size, np.int32)
        table = np.zeros((size, width), np.int32)
        table[:len(reqs)] = self._table(reqs)[:, :width]
        for i, r in enumerate(reqs):
            p = r.length - 1
            ids[i], pos[i], slots[i], lens[i] = r.output[-1], p, self._slot(r, p), p + 1
        return ids, pos, slots, np.arange(size, dtype=np.int32), table, lens

    def _decode(self, reqs):
        if self.graphs_ok:
            return self._decode_graph(reqs)
        ids, pos, slots, rows, table, lens = self._decode_arrays(reqs, len(reqs),
                                                                 self._decode_pages(reqs))
        batch = Batch(False, self._dev(ids), self._dev(pos), self._dev(slots), self._dev(rows),
                      self._dev(table), self._dev(lens), lens.tolist(), [])
        return self.model.forward(batch)

    def _decode_graph(self, reqs):
        torch = self.be.torch
        size = 1 << max(len(reqs) - 1, 0).bit_length()
        width = self._decode_pages(reqs)
        arrays = self._decode_arrays(reqs, size, width)
        key = (size, width)
        if key not in self.graphs:
            # the step's int32 arrays as views of one device buffer, filled by one copy
            # from one pinned host buffer per step
            sizes = [a.size for a in arrays]
            flat = torch.empty(sum(sizes), dtype=torch.int32, device="cuda")
            host = torch.empty(sum(sizes), dtype=torch.int32, pin_memory=True)
            static, at = [], 0
            for a, n in zip(arrays, sizes):
                static.append(flat[at:at + n].view(a.shape))
                at += n
            flat.copy_(torch.from_numpy(np.concatenate([a.ravel() for a in arrays])))
            batch = Batch(False, *static, arrays[5].tolist(), [])
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):                   # compile and warm up outside
                for _ in range(2):
                    self.model.forward(batch)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    logits = self.model.forward(batch)
            except Exception as e:                          # run eagerly from now on
                warnings.warn(f"decode steps run without CUDA graphs: capturing one failed "
                              f"({type(e).__name__}: {e})", RuntimeWarning, stacklevel=2)
                self.graphs_ok = False
                self.graphs.clear()
                torch.cuda.synchronize()
                return self._decode(reqs)
            self.graphs[key] = (graph, (flat, host), logits)
        graph, (flat, host), logits = self.graphs[key]
        # the host buffer is free again: the last step's sampling waited for its copy
        np.concatenate([a.ravel() for a in arrays], out=host.numpy())
        flat.copy_(host, non_blocking=True)
        graph.replay()
        return logits[:len(reqs)]

    def _sample(self, logits, reqs) -> list[int]:
        be = self.be
        b, v = logits.shape
        out = be.empty((b,), be.int32)
        if all(r.params.temperature == 0 for r in reqs):
            c = min(GREEDY_TILE, 1 << (v - 1).bit_length())
            tiles = -(-v // c)
            if tiles == 1:
                be._launch((b,), K.argmax_rows, (logits, out, c))
            else:           # a block a tile of the row, then a block a row (kernels.py)
                best, best_i = be.empty((b, tiles), be.float32), be.empty((b, tiles), be.int32)
                be._launch((b, tiles), K.argmax_tiles, (logits, best, best_i, c))
                be._launch((b,), K.argmax_merge,
                           (best, best_i, out, 1 << (tiles - 1).bit_length()))
        else:
            if be.torch is not None:
                u = be.torch.rand((b, v), generator=self.gen, device="cuda")
            else:
                u = self.rng.random((b, v), dtype=np.float32)
            temp = np.array([r.params.temperature for r in reqs], np.float32)
            top_k = np.array([r.params.top_k for r in reqs], np.int32)
            top_p = np.array([r.params.top_p for r in reqs], np.float32)
            # (16, C) candidate tiles: C = 1024 keeps them in registers; 8 rounds of a
            # 16-way search narrow a threshold 17^8 (~2^33)-fold
            be._launch((b,), K.sample_rows,
                       (logits, u, be.asarray(temp, be.float32), self._dev(top_k),
                        be.asarray(top_p, be.float32), out,
                        min(1024, 1 << (v - 1).bit_length()), 16, 8))
            # tensor-parallel ranks hold the same logits but draw their own noise: all
            # keep rank 0's tokens, so that their schedulers stay in step
            self.model.shard.broadcast(out)
        return [int(t) for t in be.numpy(out).tolist()]

    # ---- whole runs
    def stream(self, prompts, params, progress: bool | None = None) -> Iterator[tuple[int, int]]:
        """Yields (prompt index, new token) as the tokens are sampled."""
        index = {self.add_request(p, params[i]): i for i, p in enumerate(prompts)}
        total = sum(q.params.max_new_tokens for q in self.waiting)
        show = sys.stderr.isatty() and total > 256 if progress is None else progress
        bar = Progress(len(index), show and self.model.shard.rank == 0)
        while self.has_work():
            new = self.step()
            bar.update(len(new), sum(1 for r, _ in new if r.finish_reason))
            for req, tok in new:
                yield index[req.id], tok
