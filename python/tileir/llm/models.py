"""Llama and DeepSeek-V3 as a sequence of tileir kernel launches over a paged cache.

A forward step takes a `Batch`: either a prefill of whole prompts (their tokens one
after another, `cu_seqlens` marking where each starts) or a decode step of one new
token per running sequence.  Each token has a position and a cache slot (page * PAGE
+ offset) where its keys and values (Llama) or its latent (DeepSeek's MLA) are
written before attention reads them.  The step returns float32 logits of each
sequence's last token.

The residual stream stays in one (T, hidden) array: the O and down projections add
into it in their GEMM's epilogue, and each norm reads it.  Every weight is loaded
through `parallel.Shard` (column, row, vocab, heads, experts), the seam for tensor
parallelism.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import rope as rope_mod
from .backend import Backend
from .config import ModelConfig, ModelDirError
from .parallel import Shard


@dataclasses.dataclass
class Batch:
    """One step's inputs, on the backend; the host lists drive per-sequence loops."""
    prefill: bool
    ids: object                 # (T,) int32
    positions: object           # (T,) int32
    slots: object               # (T,) int32
    last_rows: object           # (B,) int32: each sequence's last token row in the batch
    block_table: object         # (B, max_pages) int32
    seq_lens: object            # (B,) int32: context length including this step's tokens
    host_seq_lens: list         # the same on the host
    cu_seqlens: list            # prefill: token offsets of the sequences (B + 1)


def _cat(xs, axis=0):
    if isinstance(xs[0], np.ndarray):
        return np.concatenate(xs, axis=axis)
    import torch
    return torch.cat(xs, dim=axis)


def _perm(x, axes):
    """A contiguous copy of x with its axes permuted."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x.transpose(axes))
    return x.permute(*axes).contiguous()


def _stack(xs):
    if isinstance(xs[0], np.ndarray):
        return np.stack(xs)
    import torch
    return torch.stack(xs)


def _take(x, index, axis):
    """x's entries at the integer index along axis (index: a NumPy array)."""
    if isinstance(x, np.ndarray):
        return np.take(x, index, axis=axis)
    import torch
    return x.index_select(axis, torch.as_tensor(index, device=x.device))


def _itemsize(x) -> int:
    return x.itemsize if isinstance(x, np.ndarray) else x.element_size()


class Model:
    def __init__(self, cfg: ModelConfig, ckpt, backend: Backend, shard: Shard | None = None):
        self.cfg, self.ckpt, self.be = cfg, ckpt, backend
        self.shard = shard or Shard()
        sh = self.shard
        sh.check(cfg)
        self.embed = self.w("model.embed_tokens.weight", sh.vocab)
        if "lm_head.weight" in ckpt and not cfg.tie_word_embeddings:
            self.lm_head = self.w("lm_head.weight", sh.vocab)
        else:
            self.lm_head = self.embed
        self.norm = self.w("model.norm.weight")
        self.cos, self.sin = (backend.asarray(t, backend.float32) for t in
                              rope_mod.rope_tables(cfg, cfg.head_dim, cfg.max_position_embeddings))
        self.scale = rope_mod.softmax_scale(cfg)
        self.layers = [self.load_layer(i) for i in range(cfg.num_layers)]
        self.caches = None
        sh.connect(backend, cfg.hidden_size)   # the decode step's reductions over peer memory

    def w(self, name, split=None, dtype=None, host=None):
        """A checkpoint tensor, split by the shard, on the backend."""
        t = self.ckpt.get(name) if host is None else host
        if split is not None:
            t = split(t, name)
        return self.be.asarray(t, dtype)

    def host(self, name):
        """A checkpoint tensor as stored (NumPy or torch), to be rearranged before upload."""
        return self.ckpt.get(name)

    def normed(self, x, g, *ws, fuse: bool = True):
        """(input, norm) for the GEMMs over weights ws that read RMSNorm(x) * g: x and
        (g, eps) when the backend applies the norm inside each of them for x's rows
        (`Backend.fuses_norm`: fuse_norm's GEMMs, or gemv_norm's decode GEMVs), else
        the norm's output and None (fuse=False: always, for readers that are not
        GEMMs)."""
        eps = self.cfg.rms_norm_eps
        if fuse and self.be.fuses_norm(x.shape[0], *ws):
            return x, (g, eps)
        return self.be.rmsnorm(x, g, eps), None

    def logits(self, residual, batch: Batch, ready=None):
        """ready: RMSNorm(residual) * g of the final norm where the last layer's GEMV
        made it (its tail), gathered in place of residual's rows (the norm is a row's)."""
        be = self.be
        if ready is not None:
            x, norm = be.embedding(batch.last_rows, ready), None
        else:
            rows = be.embedding(batch.last_rows, residual)   # the last token of each sequence
            x, norm = self.normed(rows, self.norm, self.lm_head)
        out = be.empty((x.shape[0], self.lm_head.shape[0]), be.float32)
        return self.shard.gather_logits(be, be.linear(x, self.lm_head, out=out, norm=norm),
                                        self.cfg.vocab_size)

    def mlp(self, x, norm, residual, gate, up, down, then=None):
        a = self.be.linear_swiglu(x, gate, up, norm=norm)
        return self.add_row(a, down, residual, then)

    def add_row(self, x, w, residual, then=None):
        """residual += x @ w^T (a row-parallel weight: O, down); returns RMSNorm(residual)
        * g for then = (g, eps) where the kernels made it (one rank: the decode GEMV's
        tail, `Backend.linear_add_norm`; more: the peer reduction,
        `Shard.add_row_parallel`), else None (the caller norms)."""
        if self.shard.size == 1:
            return self.be.linear_add_norm(x, w, residual, then)
        return self.shard.add_row_parallel(self.be, x, w, residual, then)

    def then(self, g):
        """The norm (g, eps) that the residual GEMM before it may apply to the residual
        rows it makes (`add_row`: a decode GEMV's tail, or a tensor-parallel reduction),
        for the GEMM after it; None where the backend fuses norms into GEMMs."""
        return None if self.be.fuse_norm else (g, self.cfg.rms_norm_eps)

    def forward(self, batch: Batch):
        be = self.be
        self.shard.begin_step()
        residual = self.shard.embedding(be, batch.ids, self.embed)
        # RMSNorm(residual) * g of the next norm, where a residual GEMV's tail or a
        # reduction made it (`add_row`)
        ready = None
        for i, layer in enumerate(self.layers):
            if i + 1 < len(self.layers):
                after = self.then(self.layers[i + 1]["ln1"])
            else:       # the final norm: one rank's GEMV tail (the peer path's own norms)
                after = self.then(self.norm) if self.shard.size == 1 else None
            x, norm = (ready, None) if ready is not None else self.normed(
                residual, layer["ln1"], *self.attention_weights(layer))
            ready = self.attention(i, layer, x, norm, residual, batch, self.then(layer["ln2"]))
            if "router" in layer:                # route and experts read the normed rows
                x = ready if ready is not None else self.normed(residual, layer["ln2"],
                                                                fuse=False)[0]
                ready = self.moe(layer, x, residual, after)
            else:
                x, norm = (ready, None) if ready is not None else self.normed(
                    residual, layer["ln2"], layer["gate"], layer["up"])
                ready = self.mlp(x, norm, residual, layer["gate"], layer["up"], layer["down"],
                                 after)
        return self.logits(residual, batch, ready)


class Llama(Model):
    def attention_weights(self, layer) -> tuple:
        """The weights whose GEMMs read the layer's first norm."""
        return (layer["qkv"],)

    def load_layer(self, i: int) -> dict:
        cfg, sh, p = self.cfg, self.shard, f"model.layers.{i}."
        col = sh.column
        qkv = [col(self.host(p + f"self_attn.{n}_proj.weight"), p + n) for n in "qkv"]
        self.hq = qkv[0].shape[0] // cfg.head_dim
        self.hkv = qkv[1].shape[0] // cfg.head_dim
        return {
            "ln1": self.w(p + "input_layernorm.weight"),
            "ln2": self.w(p + "post_attention_layernorm.weight"),
            "qkv": self.be.asarray(_cat(qkv)),
            "o": self.w(p + "self_attn.o_proj.weight", sh.row),
            "gate": self.w(p + "mlp.gate_proj.weight", col),
            "up": self.w(p + "mlp.up_proj.weight", col),
            "down": self.w(p + "mlp.down_proj.weight", sh.row),
        }

    def cache_bytes_per_token(self) -> int:
        return 2 * self.hkv * self.cfg.head_dim * len(self.layers) * _itemsize(self.embed)

    def allocate_cache(self, num_pages: int, page: int):
        # keys and values of a token side by side, (pages, PAGE, 2 * Hkv, D): one launch
        # writes both; the attention kernels read the K and V halves as views
        shape = (num_pages, page, 2 * self.hkv, self.cfg.head_dim)
        self.caches = [self.be.zeros(shape) for _ in self.layers]

    def attention(self, i, layer, x, norm, residual, batch, then=None):
        be, d, hq, hkv = self.be, self.cfg.head_dim, self.hq, self.hkv
        t = x.shape[0]
        cache = self.caches[i]
        if batch.prefill:
            qkv = be.linear(x, layer["qkv"], norm=norm)
            # q and k rotated in place, k and v into the cache
            be.rope_write_slots(qkv, self.cos, self.sin, batch.positions, cache, batch.slots)
        else:       # the same, in the QKV GEMV's epilogue where the backend can
            qkv = be.linear_rope_write_slots(x, layer["qkv"], self.cos, self.sin,
                                             batch.positions, cache, batch.slots, norm=norm)
        heads = qkv.reshape(t, hq + 2 * hkv, d)
        q, k, v = heads[:, :hq], heads[:, hq:hq + hkv], heads[:, hq + hkv:]
        if batch.prefill:
            lens = [batch.cu_seqlens[j + 1] - batch.cu_seqlens[j]
                    for j in range(len(batch.cu_seqlens) - 1)]
            o = be.attention_prefill(q, k, v, batch.cu_seqlens, lens, self.scale)
        else:
            o = be.attention_decode(q, cache[:, :, :hkv], cache[:, :, hkv:], batch.block_table,
                                    batch.seq_lens, batch.host_seq_lens, self.scale)
        return self.add_row(o.reshape(t, -1), layer["o"], residual, then)


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _deinterleave(n: int) -> np.ndarray:
    """transformers' rope_interleave reads a head's rotary dims as pairs (0, 1), (2, 3)
    ...; putting the evens first and the odds after makes them the rotate-half form."""
    return np.concatenate([np.arange(0, n, 2), np.arange(1, n, 2)])


class DeepseekV3(Model):
    def attention_weights(self, layer) -> tuple:
        """The weights whose GEMMs read the layer's first norm: q_a and kv_a stacked, or
        kv_a and q (no q LoRA)."""
        return (layer["a"],) + ((layer["q"],) if "q" in layer else ())

    def load_layer(self, i: int) -> dict:
        cfg, sh, p = self.cfg, self.shard, f"model.layers.{i}."
        a = p + "self_attn."
        nope, rp, r, vd = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.kv_lora_rank, \
            cfg.v_head_dim
        perm = _deinterleave(rp) if cfg.rope_interleave else np.arange(rp)
        qname = a + ("q_b_proj.weight" if cfg.q_lora_rank else "q_proj.weight")
        qw = self.host(qname)
        qw = qw.reshape(-1, nope + rp, qw.shape[1])
        qw = _cat([qw[:, :nope], _take(qw, nope + perm, 1)], 1).reshape(-1, qw.shape[2])
        qw = sh.column(qw, qname)
        self.heads = qw.shape[0] // (nope + rp)
        kva = self.host(a + "kv_a_proj_with_mqa.weight")
        kva = _cat([kva[:r], _take(kva, r + perm, 0)])
        kvb = sh.column(self.host(a + "kv_b_proj.weight"), a + "kv_b_proj").reshape(
            self.heads, nope + vd, r)
        layer = {
            "ln1": self.w(p + "input_layernorm.weight"),
            "ln2": self.w(p + "post_attention_layernorm.weight"),
            "kv_a_ln": self.w(a + "kv_a_layernorm.weight"),
            "w_uk_t": self.be.asarray(_perm(kvb[:, :nope], (0, 2, 1))),
            "w_uv": self.be.asarray(_perm(kvb[:, nope:], (0, 1, 2))),
            "kv_b": self.be.asarray(kvb.reshape(-1, r)),
            "o": self.w(a + "o_proj.weight", sh.row),
        }
        if cfg.q_lora_rank:
            # q_a and kv_a read the same x: one GEMM of their stacked weights
            qa = self.host(a + "q_a_proj.weight")
            layer["a"] = self.be.asarray(_cat([qa, kva]))
            layer["q_a_ln"] = self.w(a + "q_a_layernorm.weight")
            layer["q_b"] = self.be.asarray(qw)
        else:
            layer["q"] = self.be.asarray(qw)
            layer["a"] = self.be.asarray(kva)
        if cfg.is_moe_layer(i):
            self.load_moe(layer, p + "mlp.")
        else:
            layer["gate"] = self.w(p + "mlp.gate_proj.weight", sh.column)
            layer["up"] = self.w(p + "mlp.up_proj.weight", sh.column)
            layer["down"] = self.w(p + "mlp.down_proj.weight", sh.row)
        return layer

    def load_moe(self, layer, p):
        cfg, be = self.cfg, self.be
        if be.moe_route is None or be.moe_experts is None:
            raise ModelDirError("this DeepSeek-V3 checkpoint has MoE layers; they run on "
                                "tileir.examples.moe (route, experts), which this install lacks")
        lo, hi = self.shard.experts(cfg.n_routed_experts)
        inter = cfg.moe_intermediate_size
        if p + "experts.gate_up_proj" in self.ckpt:          # transformers 5's fused layout
            gu = self.shard.own(self.host(p + "experts.gate_up_proj")[lo:hi])
            dn = self.shard.own(self.host(p + "experts.down_proj")[lo:hi])
            gu = gu if gu.shape[1] == 2 * inter else _perm(gu, (0, 2, 1))
            dn = dn if dn.shape[1] == cfg.hidden_size else _perm(dn, (0, 2, 1))
        else:
            gu = _stack([_cat([self.host(p + f"experts.{e}.gate_proj.weight"),
                               self.host(p + f"experts.{e}.up_proj.weight")])
                         for e in range(lo, hi)])
            dn = _stack([self.host(p + f"experts.{e}.down_proj.weight") for e in range(lo, hi)])
        layer["w_gate_up"] = be.asarray(gu)
        layer["w_down"] = be.asarray(dn)
        layer["router"] = self.w(p + "gate.weight", dtype=be.float32)
        bias = p + "gate.e_score_correction_bias"
        layer["router_bias"] = (self.w(bias, dtype=be.float32) if bias in self.ckpt
                                else be.zeros((cfg.n_routed_experts,), be.float32))
        layer["sgate"] = self.w(p + "shared_experts.gate_proj.weight", self.shard.column)
        layer["sup"] = self.w(p + "shared_experts.up_proj.weight", self.shard.column)
        layer["sdown"] = self.w(p + "shared_experts.down_proj.weight", self.shard.row)

    def cache_bytes_per_token(self) -> int:
        width = self.cfg.kv_lora_rank + self.cfg.qk_rope_head_dim
        return width * len(self.layers) * _itemsize(self.embed)

    def allocate_cache(self, num_pages: int, page: int):
        width = self.cfg.kv_lora_rank + self.cfg.qk_rope_head_dim
        self.caches = [self.be.zeros((num_pages, page, width)) for _ in self.layers]

    def attention(self, i, layer, x, norm, residual, batch, then=None):
        be, cfg = self.be, self.cfg
        t, h = x.shape[0], self.heads
        nope, rp, r = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.kv_lora_rank
        a = be.linear(x, layer["a"], norm=norm)
        if cfg.q_lora_rank:
            qa, qnorm = self.normed(a[:, :cfg.q_lora_rank], layer["q_a_ln"], layer["q_b"])
            q = be.linear(qa, layer["q_b"], norm=qnorm)
            latent = a[:, cfg.q_lora_rank:]
        else:
            q = be.linear(x, layer["q"], norm=norm)
            latent = a
        q = q.reshape(t, h, nope + rp)
        be.rmsnorm(latent[:, :r], layer["kv_a_ln"], cfg.rms_norm_eps, out=latent[:, :r])
        cache = self.caches[i]
        # k_rope rotated in place, the latent row into the cache: one launch
        be.rope_write_latent(latent, r, self.cos, self.sin, batch.positions, cache,
                             batch.slots)
        mla_ok = be.mla_ok(h, r + rp, cache.shape[1])
        if batch.prefill:
            if mla_ok and not be.varlen_ok(_pow2(max(nope + rp, cfg.v_head_dim))):
                o = self.absorbed(layer, q, cache, batch)
            else:
                o = self.expanded_prefill(layer, q, latent, batch)
        elif mla_ok:
            o = self.absorbed(layer, q, cache, batch)
        else:
            o = self.expanded_decode(layer, q, cache, batch)
        return self.add_row(o.reshape(t, -1), layer["o"], residual, then)

    def absorbed(self, layer, q, cache, batch):
        """Attention in the absorbed form: q_abs = [q_nope @ W_UK, rope(q_rope)] against the
        latent rows [c_kv, k_rope], the output's latents through W_UV; (T, H, v)."""
        be, cfg = self.be, self.cfg
        t, h = q.shape[0], self.heads
        nope, rp, r = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.kv_lora_rank
        q_abs = be.empty((t, h, r + rp))
        be.head_linear(q[:, :, :nope], layer["w_uk_t"], out=q_abs[:, :, :r])
        be.rope(q[:, :, nope:], self.cos, self.sin, batch.positions, out=q_abs[:, :, r:])
        if not batch.prefill:
            lat = be.mla_attention(q_abs.reshape(t, 1, h, r + rp), cache, batch.block_table,
                                   batch.seq_lens, self.scale, r)
            return be.head_linear(lat.reshape(t, h, r), layer["w_uv"])
        o = be.empty((t, h, cfg.v_head_dim))
        cu = batch.cu_seqlens
        for b in range(len(cu) - 1):
            lo, n = cu[b], cu[b + 1] - cu[b]
            lat = be.mla_attention(q_abs[lo:lo + n].reshape(1, n, h, r + rp), cache,
                                   batch.block_table[b:b + 1], batch.seq_lens[b:b + 1],
                                   self.scale, r)
            be.head_linear(lat.reshape(n, h, r), layer["w_uv"], out=o[lo:lo + n])
        return o

    def _expand(self, layer, latent):
        """Per-head keys and values from latent rows [c_kv, k_rope] (n, R + P): k =
        [c_kv W_UK, k_rope] and v = c_kv W_UV, both zero-padded to one power-of-two head
        dim D (DeepSeek-V3: 192 and 128 -> 256; the zeros add nothing to q . k, and the
        extra output columns are dropped): (n, H, D) each."""
        be, cfg = self.be, self.cfg
        n, h = latent.shape[0], self.heads
        nope, rp, r, vd = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.kv_lora_rank, \
            cfg.v_head_dim
        d = _pow2(max(nope + rp, vd))
        kv = be.linear(latent[:, :r], layer["kv_b"]).reshape(n, h, nope + vd)
        kf, vf = be.zeros((n, h, d)), be.zeros((n, h, d))
        be.copy_heads(kv[:, :, :nope], kf[:, :, :nope])
        be.copy_heads(latent[:, r:].reshape(n, 1, rp), kf[:, :, nope:nope + rp])
        be.copy_heads(kv[:, :, nope:], vf[:, :, :vd])
        return kf, vf

    def _padded_q(self, q, positions):
        """q (T, H, nope + rope) with its rope part rotated, zero-padded like `_expand`'s k."""
        be, cfg = self.be, self.cfg
        nope, rp = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim
        be.rope(q[:, :, nope:], self.cos, self.sin, positions)
        qf = be.zeros((q.shape[0], q.shape[1], _pow2(max(nope + rp, cfg.v_head_dim))))
        be.copy_heads(q, qf[:, :, :nope + rp])
        return qf

    def expanded_prefill(self, layer, q, latent, batch):
        """A prompt's attention in FlashAttention's form over keys and values expanded
        from its latent rows (`_expand`), q padded alike: flash_attention_varlen (or the
        dense kernel per sequence where varlen does not fit); (T, H, v)."""
        be, vd = self.be, self.cfg.v_head_dim
        t, h = q.shape[0], self.heads
        qf = self._padded_q(q, batch.positions)
        kf, vf = self._expand(layer, latent)
        cu = batch.cu_seqlens
        lens = [cu[j + 1] - cu[j] for j in range(len(cu) - 1)]
        of = be.attention_prefill(qf, kf, vf, cu, lens, self.scale)
        return be.copy_heads(of[:, :, :vd], be.empty((t, h, vd)))

    def expanded_decode(self, layer, q, cache, batch):
        """A decode step where mla_decode does not fit (float32 on the GPU, the tiny test
        models): each sequence's latent rows gathered from its pages and expanded
        (`_expand`), the dense kernel over them; recomputes the expansion every step:
        correct, not fast; (B, H, v)."""
        be, vd = self.be, self.cfg.v_head_dim
        b, h = q.shape[0], self.heads
        qf = self._padded_q(q, batch.positions)
        o = be.empty((b, h, vd))
        for i, n in enumerate(batch.host_seq_lens):
            kf, vf = self._expand(layer, be.gather_rows(cache, batch.block_table, i, n))
            of = be.attention_one(qf[i:i + 1], kf, vf, self.scale)
            be.copy_heads(of[:, :, :vd], o[i:i + 1])
        return o

    def moe(self, layer, x, residual, then=None):
        be, cfg = self.be, self.cfg
        ids, weights = be.moe_route(x, layer["router"], layer["router_bias"],
                                    top_k=cfg.num_experts_per_tok, n_group=cfg.n_group,
                                    topk_group=cfg.topk_group,
                                    routed_scaling_factor=cfg.routed_scaling_factor,
                                    norm_topk_prob=cfg.norm_topk_prob)
        ids, weights = self.shard.local_experts(be, ids, weights, cfg.n_routed_experts)
        # float32 on the GPU: exact products (the tensor cores would take tf32)
        out = be.moe_experts(x, ids, weights, layer["w_gate_up"], layer["w_down"],
                             exact=be.exact and be.torch is not None)
        # the shared expert adds into the routed sum: with several ranks, both are this
        # rank's share, and one all-reduce sums them
        a = be.linear_swiglu(x, layer["sgate"], layer["sup"])
        part = self.shard.partial_out(*residual.shape)     # the peer buffer, or None
        out = be.linear(a, layer["sdown"], residual=out, out=part)
        return self.shard.add_partial(be, out, residual, then)


ARCHS = {"llama": Llama, "deepseek_v3": DeepseekV3}
