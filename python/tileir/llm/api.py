"""`LLM`: the offline API, shaped as vLLM's.

    llm = LLM("path/to/model", dtype="bfloat16")
    outs = llm.generate(["Hello", [1, 2, 3]], max_new_tokens=32, temperature=0.0)
    outs[0].token_ids, outs[0].text
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Iterator, Sequence

from . import config as config_mod
from . import parallel
from . import tokenizer as tokenizer_mod
from .backend import Backend
from .engine import Engine, SamplingParams
from .loader import Checkpoint
from .models import ARCHS


@dataclasses.dataclass
class RequestOutput:
    prompt_token_ids: list
    token_ids: list
    text: str | None
    finish_reason: str


def default_device() -> str:
    try:
        import torch
        return "cuda" if torch.cuda.is_available() else "numpy"
    except ImportError:
        return "numpy"


class LLM:
    """A model directory loaded for generation.

    dtype: "bfloat16" or "float32" (weights and activations; logits are float32).
    device: "cuda" (torch tensors on the GPU) or "numpy" (the interpreter); by default
    the GPU when torch sees one.  weights: tensors by checkpoint name in place of the
    directory's safetensors (`loader.DictCheckpoint`).  fuse_norm: RMSNorm inside the
    GEMM that reads it (one launch less a norm; off until measured on the GPU).
    backend: a `Backend` in place of device, dtype and fuse_norm (the tests' simulator
    backend).  tensor_parallel_size: the model split over that many ranks, one process
    each, started by torchrun (`parallel.init`; every process makes the same LLM and
    calls generate alike, and each gets the outputs).  Other
    keywords go to `Engine` (page_size, num_pages, max_batch, max_model_len,
    max_prefill_tokens, cuda_graphs, seed, cache_memory_fraction).
    """

    def __init__(self, model_dir: str, dtype: str = "bfloat16", device: str | None = None,
                 weights=None, fuse_norm: bool = False, backend: Backend | None = None,
                 tensor_parallel_size: int = 1, **engine_args):
        self.cfg = config_mod.load(model_dir)
        device = backend.device if backend is not None else device or default_device()
        # the process group first: it picks this process's GPU, where the backend allocates
        self.shard = parallel.init(device, tensor_parallel_size)
        self.backend = backend or Backend(device, dtype, fuse_norm)
        framework = "pt" if self.backend.torch is not None else "numpy"
        self.ckpt = weights if weights is not None else Checkpoint(model_dir, framework)
        self.model = ARCHS[self.cfg.arch](self.cfg, self.ckpt, self.backend, self.shard)
        self.tokenizer = tokenizer_mod.load(model_dir)
        self.engine = Engine(self.model, **engine_args)

    def _ids(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError("a text prompt needs tokenizer.json in the model directory and "
                                 "the tokenizers package; pass token ids instead")
            return self.tokenizer.encode(prompt)
        return [int(t) for t in prompt]

    def _params(self, n, max_new_tokens, temperature, top_k, top_p, stop_token_ids,
                ignore_eos, sampling_params) -> list[SamplingParams]:
        if sampling_params is None:
            one = SamplingParams(max_new_tokens, temperature, top_k or 0,
                                 1.0 if top_p is None else top_p,
                                 tuple(stop_token_ids or ()), ignore_eos)
            return [one] * n
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params] * n
        params = list(sampling_params)
        if len(params) != n:
            raise ValueError(f"{len(params)} sampling_params for {n} prompts")
        return params

    def stream(self, prompts: Sequence, max_new_tokens: int = 16, temperature: float = 0.0,
               top_k: int | None = None, top_p: float | None = None, stop_token_ids=None,
               ignore_eos: bool = False, progress: bool | None = None, sampling_params=None
               ) -> Iterator[tuple[int, int]]:
        """Yields (prompt index, token id) as each token is sampled.  sampling_params (a
        SamplingParams, or one per prompt) replaces the keyword settings."""
        ids = [self._ids(p) for p in prompts]
        params = self._params(len(ids), max_new_tokens, temperature, top_k, top_p,
                              stop_token_ids, ignore_eos, sampling_params)
        yield from self.engine.stream(ids, params, progress)

    def generate(self, prompts: Sequence, max_new_tokens: int = 16, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None, stop_token_ids=None,
                 ignore_eos: bool = False, progress: bool | None = None,
                 sampling_params=None) -> list[RequestOutput]:
        """Each prompt (token ids, or text with a tokenizer) extended; one output each, in
        the prompts' order.  sampling_params (a SamplingParams, or one per prompt, as
        vLLM takes them) replaces the keyword settings."""
        single = isinstance(prompts, str) or (len(prompts) > 0
                                              and isinstance(prompts[0], numbers.Integral))
        prompts = [prompts] if single else list(prompts)
        ids = [self._ids(p) for p in prompts]
        params = self._params(len(ids), max_new_tokens, temperature, top_k, top_p,
                              stop_token_ids, ignore_eos, sampling_params)
        new = [[] for _ in ids]
        for i, tok in self.engine.stream(ids, params, progress):
            new[i].append(tok)
        outs = []
        for p, toks, sp in zip(ids, new, params):
            stops = set(sp.stop_token_ids) | (set() if sp.ignore_eos else
                                              set(self.cfg.eos_token_ids))
            reason = "stop" if toks and toks[-1] in stops else "length"
            text = self.tokenizer.decode(toks) if self.tokenizer is not None else None
            outs.append(RequestOutput(p, toks, text, reason))
        return outs
