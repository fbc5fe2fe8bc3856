"""RoPE frequency tables as transformers computes them: default, linear, llama3, yarn.

`rope_tables(cfg, dim, n)` returns float32 cos and sin of shape (n, dim // 2) (the
"rotate half" form: the two halves of a head share a frequency), already multiplied
by the scheme's attention factor (YaRN's mscale ratio); `softmax_scale(cfg)` is the
attention's scale, which for DeepSeek-V3 with YaRN carries mscale(factor,
mscale_all_dim)^2.
"""

from __future__ import annotations

import math

import numpy as np

from .config import ModelConfig


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def inv_freq(cfg: ModelConfig, dim: int) -> tuple[np.ndarray, float]:
    """(inverse frequencies (dim // 2,) float64, attention factor)."""
    rope = cfg.rope
    base = float(rope.get("rope_theta", 10000.0))
    kind = rope.get("rope_type", "default")
    exps = np.arange(0, dim, 2, dtype=np.float64) / dim
    freq = 1.0 / base ** exps
    if kind == "default":
        return freq, 1.0
    if kind == "linear":
        return freq / float(rope["factor"]), 1.0
    if kind == "llama3":
        factor, lo, hi = (float(rope[k]) for k in ("factor", "low_freq_factor", "high_freq_factor"))
        old = float(rope["original_max_position_embeddings"])
        wavelen = 2 * math.pi / freq
        scaled = np.where(wavelen > old / lo, freq / factor, freq)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        return np.where(medium, smoothed, scaled), 1.0
    if kind == "yarn":
        orig = float(rope["original_max_position_embeddings"])
        factor = rope.get("factor") or cfg.max_position_embeddings / orig
        factor = float(factor)
        mscale, mscale_all = rope.get("mscale"), rope.get("mscale_all_dim")
        attn = rope.get("attention_factor")
        if attn is None:
            attn = (_yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all)
                    if mscale and mscale_all else _yarn_mscale(factor))
        fast, slow = rope.get("beta_fast") or 32, rope.get("beta_slow") or 1

        def corr_dim(rot):
            return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

        low, high = corr_dim(fast), corr_dim(slow)
        if rope.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        extrap = 1 - ramp
        return freq / factor * (1 - extrap) + freq * extrap, float(attn)
    raise ValueError(f"unsupported rope_type {kind!r} (tileir.llm knows default, linear, llama3, "
                     "yarn)")


def rope_tables(cfg: ModelConfig, dim: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    # transformers forms the angles in float32 (inv_freq float32 @ positions float32)
    freq, attn = inv_freq(cfg, dim)
    ang = np.arange(n, dtype=np.float32)[:, None] * freq.astype(np.float32)[None, :]
    return ((np.cos(ang) * attn).astype(np.float32), (np.sin(ang) * attn).astype(np.float32))


def softmax_scale(cfg: ModelConfig) -> float:
    if cfg.arch != "deepseek_v3":
        return cfg.head_dim ** -0.5
    scale = cfg.qk_head_dim ** -0.5
    rope = cfg.rope
    if rope.get("mscale_all_dim") and rope.get("factor"):      # transformers: any scaling dict
        m = _yarn_mscale(float(rope["factor"]), float(rope["mscale_all_dim"]))
        scale *= m * m
    return scale
