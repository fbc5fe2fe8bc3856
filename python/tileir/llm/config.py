"""A Hugging Face `config.json`, read into the fields the models use.

Two architectures: `LlamaForCausalLM` and `DeepseekV3ForCausalLM`.  RoPE parameters
come from either spelling transformers has used: `rope_theta` + `rope_scaling`
(4.x) or `rope_parameters` (5.x); both are merged into `ModelConfig.rope`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

ARCHITECTURES = ("LlamaForCausalLM", "DeepseekV3ForCausalLM")


class ModelDirError(ValueError):
    """A model directory that cannot be loaded: a missing file, an unknown architecture."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    arch: str                       # "llama" or "deepseek_v3"
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int                   # Llama's q/k/v head dim; DeepSeek: qk_rope_head_dim (RoPE)
    intermediate_size: int
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    rope: dict                      # rope_type, rope_theta, factor, ... (see rope.py)
    eos_token_ids: tuple = ()
    # DeepSeek-V3 only
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    rope_interleave: bool = True
    n_routed_experts: int = 0
    n_shared_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    first_k_dense_replace: int = 0
    n_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    norm_topk_prob: bool = True

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def is_moe_layer(self, layer: int) -> bool:
        return self.arch == "deepseek_v3" and self.n_routed_experts > 0 \
            and layer >= self.first_k_dense_replace


def _rope(raw: dict) -> dict:
    rope = {"rope_type": "default", "rope_theta": raw.get("rope_theta", 10000.0)}
    for key in ("rope_scaling", "rope_parameters"):
        extra = raw.get(key)
        if isinstance(extra, dict):
            rope.update({k: v for k, v in extra.items() if v is not None})
    if "type" in rope and rope.get("rope_type", "default") == "default":
        rope["rope_type"] = rope["type"]
    rope.pop("type", None)
    return rope


def _eos(raw: dict) -> tuple:
    eos = raw.get("eos_token_id")
    if eos is None:
        return ()
    return tuple(eos) if isinstance(eos, (list, tuple)) else (int(eos),)


def from_dict(raw: dict[str, Any], where: str = "config.json") -> ModelConfig:
    archs = raw.get("architectures") or []
    model_type = raw.get("model_type", "")
    if "LlamaForCausalLM" in archs or (not archs and model_type == "llama"):
        arch = "llama"
    elif "DeepseekV3ForCausalLM" in archs or (not archs and model_type == "deepseek_v3"):
        arch = "deepseek_v3"
    else:
        raise ModelDirError(f"{where}: unsupported architecture {archs or model_type!r}; "
                            f"tileir.llm runs {', '.join(ARCHITECTURES)}")
    heads = raw["num_attention_heads"]
    common = dict(
        arch=arch, vocab_size=raw["vocab_size"], hidden_size=raw["hidden_size"],
        num_layers=raw["num_hidden_layers"], num_heads=heads,
        num_kv_heads=raw.get("num_key_value_heads") or heads,
        intermediate_size=raw["intermediate_size"], rms_norm_eps=raw.get("rms_norm_eps", 1e-6),
        max_position_embeddings=raw.get("max_position_embeddings", 4096),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        rope=_rope(raw), eos_token_ids=_eos(raw))
    if arch == "llama":
        return ModelConfig(head_dim=raw.get("head_dim") or raw["hidden_size"] // heads, **common)
    return ModelConfig(
        head_dim=raw["qk_rope_head_dim"], q_lora_rank=raw.get("q_lora_rank"),
        kv_lora_rank=raw["kv_lora_rank"], qk_nope_head_dim=raw["qk_nope_head_dim"],
        qk_rope_head_dim=raw["qk_rope_head_dim"], v_head_dim=raw["v_head_dim"],
        rope_interleave=bool(raw.get("rope_interleave", True)),
        n_routed_experts=raw.get("n_routed_experts") or 0,
        n_shared_experts=raw.get("n_shared_experts") or 0,
        num_experts_per_tok=raw.get("num_experts_per_tok") or 0,
        moe_intermediate_size=raw.get("moe_intermediate_size") or 0,
        first_k_dense_replace=raw.get("first_k_dense_replace", 0),
        n_group=raw.get("n_group") or 1, topk_group=raw.get("topk_group") or 1,
        routed_scaling_factor=raw.get("routed_scaling_factor", 1.0),
        norm_topk_prob=bool(raw.get("norm_topk_prob", True)), **common)


def load(model_dir: str) -> ModelConfig:
    path = os.path.join(model_dir, "config.json")
    if not os.path.isdir(model_dir):
        raise ModelDirError(f"model directory {model_dir!r} does not exist")
    if not os.path.isfile(path):
        raise ModelDirError(f"{model_dir!r} has no config.json (a Hugging Face model directory "
                            "holds config.json and *.safetensors)")
    with open(path) as f:
        raw = json.load(f)
    # generation_config.json's stop tokens (Llama-3-Instruct's <|eot_id|>) join config's
    gen = os.path.join(model_dir, "generation_config.json")
    if os.path.isfile(gen):
        with open(gen) as f:
            extra = _eos(json.load(f))
        if extra:
            raw = dict(raw, eos_token_id=sorted(set(_eos(raw)) | set(extra)))
    return from_dict(raw, where=path)
