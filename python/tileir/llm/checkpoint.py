"""Random-weight Hugging Face checkpoints: config.json and model.safetensors.

For tests and benchmarks without downloads: `write_random(dir, config)` draws each
weight transformers' way (normal with std `initializer_range`, norms around one) and
saves the names `LlamaForCausalLM` / `DeepseekV3ForCausalLM` save.  `TINY` holds
configurations small enough for the interpreter, `SHAPED` real widths.
"""

from __future__ import annotations

import copy
import json
import os

import numpy as np

from . import config as config_mod

TINY = {
    "llama": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 300,
        "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "rms_norm_eps": 1e-5, "max_position_embeddings": 256, "tie_word_embeddings": False,
        "rope_theta": 500000.0, "initializer_range": 0.2,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
    },
    "deepseek_v3": {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96,
        "moe_intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 4, "q_lora_rank": 48, "kv_lora_rank": 32,
        "qk_nope_head_dim": 16, "qk_rope_head_dim": 16, "v_head_dim": 16,
        "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
        "n_group": 2, "topk_group": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
        "first_k_dense_replace": 1, "rms_norm_eps": 1e-6, "max_position_embeddings": 256,
        "tie_word_embeddings": False, "rope_theta": 10000.0, "rope_interleave": True,
        "initializer_range": 0.2, "hidden_act": "silu",
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                         "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                         "mscale_all_dim": 1.0},
    },
}


# Real widths (Llama-3-8B; DeepSeek-V3 with 4 layers and 32 routed experts, which fits
# one GPU), for benchmarks and the GPU tests against transformers (`shaped`).
SHAPED = {
    "llama3-8b": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
        "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "rms_norm_eps": 1e-5, "max_position_embeddings": 131072, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        "tie_word_embeddings": False, "bos_token_id": 128000, "eos_token_id": 128001,
    },
    "deepseek-v3-small": {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 128,
        "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "n_routed_experts": 32, "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8,
        "topk_group": 4, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
        "first_k_dense_replace": 1, "rms_norm_eps": 1e-6, "max_position_embeddings": 163840,
        "rope_theta": 10000.0, "rope_interleave": True, "hidden_act": "silu",
        "rope_scaling": {"rope_type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1,
                         "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": 4096},
        "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1,
    },
}


def shaped(name: str, **overrides) -> dict:
    """A copy of `SHAPED[name]` with `overrides` (fewer layers or experts, say)."""
    raw = copy.deepcopy(SHAPED[name])
    raw.update(overrides)
    return raw


def _names(cfg: config_mod.ModelConfig, raw: dict) -> dict[str, tuple]:
    h, shapes = cfg.hidden_size, {}
    shapes["model.embed_tokens.weight"] = (cfg.vocab_size, h)
    shapes["model.norm.weight"] = (h,)
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, h)
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        a = p + "self_attn."
        if cfg.arch == "llama":
            d = cfg.head_dim
            shapes[a + "q_proj.weight"] = (cfg.num_heads * d, h)
            shapes[a + "k_proj.weight"] = (cfg.num_kv_heads * d, h)
            shapes[a + "v_proj.weight"] = (cfg.num_kv_heads * d, h)
            shapes[a + "o_proj.weight"] = (h, cfg.num_heads * d)
        else:
            qd = cfg.num_heads * cfg.qk_head_dim
            if cfg.q_lora_rank:
                shapes[a + "q_a_proj.weight"] = (cfg.q_lora_rank, h)
                shapes[a + "q_a_layernorm.weight"] = (cfg.q_lora_rank,)
                shapes[a + "q_b_proj.weight"] = (qd, cfg.q_lora_rank)
            else:
                shapes[a + "q_proj.weight"] = (qd, h)
            shapes[a + "kv_a_proj_with_mqa.weight"] = (cfg.kv_lora_rank + cfg.qk_rope_head_dim, h)
            shapes[a + "kv_a_layernorm.weight"] = (cfg.kv_lora_rank,)
            shapes[a + "kv_b_proj.weight"] = (
                cfg.num_heads * (cfg.qk_nope_head_dim + cfg.v_head_dim), cfg.kv_lora_rank)
            shapes[a + "o_proj.weight"] = (h, cfg.num_heads * cfg.v_head_dim)
        m = p + "mlp."
        if cfg.is_moe_layer(i):
            inter = cfg.moe_intermediate_size
            for e in range(cfg.n_routed_experts):
                shapes[m + f"experts.{e}.gate_proj.weight"] = (inter, h)
                shapes[m + f"experts.{e}.up_proj.weight"] = (inter, h)
                shapes[m + f"experts.{e}.down_proj.weight"] = (h, inter)
            shapes[m + "gate.weight"] = (cfg.n_routed_experts, h)
            shapes[m + "gate.e_score_correction_bias"] = (cfg.n_routed_experts,)
            inter *= cfg.n_shared_experts
            shapes[m + "shared_experts.gate_proj.weight"] = (inter, h)
            shapes[m + "shared_experts.up_proj.weight"] = (inter, h)
            shapes[m + "shared_experts.down_proj.weight"] = (h, inter)
        else:
            shapes[m + "gate_proj.weight"] = (cfg.intermediate_size, h)
            shapes[m + "up_proj.weight"] = (cfg.intermediate_size, h)
            shapes[m + "down_proj.weight"] = (h, cfg.intermediate_size)
    return shapes


def random_weights(raw: dict, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    cfg = config_mod.from_dict(raw)
    rng = np.random.default_rng(seed)
    std = raw.get("initializer_range", 0.02)
    out = {}
    for name, shape in _names(cfg, raw).items():
        if name.endswith("norm.weight"):
            w = 1.0 + 0.1 * rng.standard_normal(shape)        # not all ones: norms must matter
        elif name.endswith("e_score_correction_bias"):
            w = 0.1 * rng.standard_normal(shape)
        else:
            w = std * rng.standard_normal(shape)
        out[name] = w.astype(dtype)
    return out


def fuse_experts(weights: dict, raw: dict) -> dict:
    """transformers 5's layout of routed experts: per layer `experts.gate_up_proj`
    (E, 2I, H), each expert's gate rows then its up rows, and `experts.down_proj`
    (E, H, I), in place of the per-expert `experts.{e}.*_proj.weight`."""
    cfg = config_mod.from_dict(raw)
    out = dict(weights)
    for i in range(cfg.num_layers):
        if not cfg.is_moe_layer(i):
            continue
        p = f"model.layers.{i}.mlp.experts."
        experts = range(cfg.n_routed_experts)
        out[p + "gate_up_proj"] = np.stack([np.concatenate(
            [out.pop(p + f"{e}.gate_proj.weight"), out.pop(p + f"{e}.up_proj.weight")])
            for e in experts])
        out[p + "down_proj"] = np.stack([out.pop(p + f"{e}.down_proj.weight") for e in experts])
    return out


def write_random(model_dir: str, raw: dict, seed: int = 0, dtype=np.float32,
                 fused_experts: bool = False) -> str:
    from safetensors.numpy import save_file
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(raw, f, indent=1)
    weights = random_weights(raw, seed, dtype)
    if fused_experts:
        weights = fuse_experts(weights, raw)
    save_file(weights, os.path.join(model_dir, "model.safetensors"), metadata={"format": "pt"})
    return model_dir
