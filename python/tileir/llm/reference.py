"""The models in float64 NumPy, written from transformers' modeling code, no cache.

`logits(cfg, ckpt, tokens)` runs a whole token list and returns (len, vocab) float64
logits; `greedy(cfg, ckpt, prompt, n)` extends a prompt n tokens by argmax.  It reads
the checkpoint's tensors as stored (DeepSeek's interleaved rotary dims are
de-interleaved here as transformers does, not by permuting weights as models.py
does), so it checks the loader's rearrangements too.  It is the CPU tests' oracle and
`python -m tileir.llm check`'s.
"""

from __future__ import annotations

import numpy as np

from . import rope as rope_mod
from .config import ModelConfig


def _w(ckpt, name) -> np.ndarray:
    t = ckpt.get(name)
    if not isinstance(t, np.ndarray):
        t = t.float().numpy()
    return np.asarray(t, np.float64)


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _silu(x):
    return x / (1 + np.exp(-x))


def _rot(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c = np.concatenate([cos, cos], -1)
    s = np.concatenate([sin, sin], -1)
    return x * c + np.concatenate([-x2, x1], -1) * s


def _attend(q, k, v, scale):
    """q (H, S, D), k (H, S, D), v (H, S, Dv): causal."""
    s = q @ np.swapaxes(k, -1, -2) * scale
    n = s.shape[-1]
    s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def _tables(cfg, n):
    freq, attn = rope_mod.inv_freq(cfg, cfg.head_dim)
    ang = np.arange(n, dtype=np.float64)[:, None] * freq[None, :]
    return np.cos(ang) * attn, np.sin(ang) * attn


def _mlp(ckpt, p, x):
    g, u, d = (_w(ckpt, p + f"{n}_proj.weight") for n in ("gate", "up", "down"))
    return (_silu(x @ g.T) * (x @ u.T)) @ d.T


def _llama_attn(cfg, ckpt, p, x, cos, sin):
    s, d = x.shape[0], cfg.head_dim
    q = (x @ _w(ckpt, p + "q_proj.weight").T).reshape(s, -1, d).transpose(1, 0, 2)
    k = (x @ _w(ckpt, p + "k_proj.weight").T).reshape(s, -1, d).transpose(1, 0, 2)
    v = (x @ _w(ckpt, p + "v_proj.weight").T).reshape(s, -1, d).transpose(1, 0, 2)
    q, k = _rot(q, cos, sin), _rot(k, cos, sin)
    group = q.shape[0] // k.shape[0]
    o = _attend(q, np.repeat(k, group, 0), np.repeat(v, group, 0), rope_mod.softmax_scale(cfg))
    return o.transpose(1, 0, 2).reshape(s, -1) @ _w(ckpt, p + "o_proj.weight").T


def _deinterleave(x):
    *lead, d = x.shape
    return x.reshape(*lead, d // 2, 2).swapaxes(-1, -2).reshape(*lead, d)


def _mla_attn(cfg, ckpt, p, x, cos, sin):
    s, eps = x.shape[0], cfg.rms_norm_eps
    nope, rp, r, vd = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.kv_lora_rank, cfg.v_head_dim
    if cfg.q_lora_rank:
        qa = _rms(x @ _w(ckpt, p + "q_a_proj.weight").T, _w(ckpt, p + "q_a_layernorm.weight"), eps)
        q = qa @ _w(ckpt, p + "q_b_proj.weight").T
    else:
        q = x @ _w(ckpt, p + "q_proj.weight").T
    q = q.reshape(s, -1, nope + rp).transpose(1, 0, 2)
    kv = x @ _w(ckpt, p + "kv_a_proj_with_mqa.weight").T
    c, k_rot = kv[:, :r], kv[:, r:]
    kvb = _rms(c, _w(ckpt, p + "kv_a_layernorm.weight"), eps) @ _w(ckpt, p + "kv_b_proj.weight").T
    kvb = kvb.reshape(s, -1, nope + vd).transpose(1, 0, 2)
    k_pass, v = kvb[..., :nope], kvb[..., nope:]
    q_pass, q_rot = q[..., :nope], q[..., nope:]
    k_rot = k_rot[None]
    if cfg.rope_interleave:
        q_rot, k_rot = _deinterleave(q_rot), _deinterleave(k_rot)
    q_rot, k_rot = _rot(q_rot, cos, sin), _rot(k_rot, cos, sin)
    heads = q.shape[0]
    qs = np.concatenate([q_pass, q_rot], -1)
    ks = np.concatenate([k_pass, np.broadcast_to(k_rot, (heads, s, rp))], -1)
    o = _attend(qs, ks, v, rope_mod.softmax_scale(cfg))
    return o.transpose(1, 0, 2).reshape(s, -1) @ _w(ckpt, p + "o_proj.weight").T


def route(cfg: ModelConfig, scores_logits, bias):
    """transformers' DeepseekV3TopkRouter: (ids (T, k), weights (T, k)) from router logits."""
    scores = 1 / (1 + np.exp(-scores_logits))
    choice = scores + bias[None]
    t, e = choice.shape
    grouped = choice.reshape(t, cfg.n_group, e // cfg.n_group)
    group_scores = np.sort(grouped, -1)[..., -2:].sum(-1)
    top_groups = np.argsort(-group_scores, -1, kind="stable")[:, :cfg.topk_group]
    mask = np.zeros((t, cfg.n_group), bool)
    np.put_along_axis(mask, top_groups, True, -1)
    choice = np.where(np.repeat(mask, e // cfg.n_group, -1), choice, 0.0)
    ids = np.argsort(-choice, -1, kind="stable")[:, :cfg.num_experts_per_tok]
    weights = np.take_along_axis(scores, ids, -1)
    if cfg.norm_topk_prob:
        weights = weights / (weights.sum(-1, keepdims=True) + 1e-20)
    return ids, weights * cfg.routed_scaling_factor


def _moe(cfg, ckpt, p, x):
    bias_name = p + "gate.e_score_correction_bias"
    bias = _w(ckpt, bias_name) if bias_name in ckpt else np.zeros(cfg.n_routed_experts)
    ids, weights = route(cfg, x @ _w(ckpt, p + "gate.weight").T, bias)
    out = np.zeros_like(x)
    fused = p + "experts.gate_up_proj" in ckpt
    for e in np.unique(ids):
        rows, slot = np.nonzero(ids == e)
        if fused:
            gu, dn = _w(ckpt, p + "experts.gate_up_proj")[e], _w(ckpt, p + "experts.down_proj")[e]
            inter = cfg.moe_intermediate_size
            gu = gu if gu.shape[0] == 2 * inter else gu.T
            dn = dn if dn.shape[0] == cfg.hidden_size else dn.T
            h = _silu(x[rows] @ gu[:inter].T) * (x[rows] @ gu[inter:].T)
            y = h @ dn.T
        else:
            y = _mlp(ckpt, p + f"experts.{e}.", x[rows])
        out[rows] += y * weights[rows, slot][:, None]
    return out + _mlp(ckpt, p + "shared_experts.", x)


def logits(cfg: ModelConfig, ckpt, tokens) -> np.ndarray:
    s, eps = len(tokens), cfg.rms_norm_eps
    h = _w(ckpt, "model.embed_tokens.weight")[np.asarray(tokens)]
    cos, sin = _tables(cfg, s)
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        x = _rms(h, _w(ckpt, p + "input_layernorm.weight"), eps)
        attn = _llama_attn if cfg.arch == "llama" else _mla_attn
        h = h + attn(cfg, ckpt, p + "self_attn.", x, cos, sin)
        x = _rms(h, _w(ckpt, p + "post_attention_layernorm.weight"), eps)
        h = h + (_moe(cfg, ckpt, p + "mlp.", x) if cfg.is_moe_layer(i)
                 else _mlp(ckpt, p + "mlp.", x))
    h = _rms(h, _w(ckpt, "model.norm.weight"), eps)
    head = ("lm_head.weight" if "lm_head.weight" in ckpt and not cfg.tie_word_embeddings
            else "model.embed_tokens.weight")
    return h @ _w(ckpt, head).T


def greedy(cfg: ModelConfig, ckpt, prompt, n: int) -> list[int]:
    tokens = list(prompt)
    for _ in range(n):
        tokens.append(int(np.argmax(logits(cfg, ckpt, tokens)[-1])))
    return tokens[len(prompt):]
