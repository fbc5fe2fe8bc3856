"""tileir.llm: Llama-3 and DeepSeek-V3 inference whose math runs in tileir kernels.

    from tileir.llm import LLM
    llm = LLM("path/to/hf-model-dir", dtype="bfloat16")
    out = llm.generate([[1, 2, 3]], max_new_tokens=32)[0].token_ids

`python -m tileir.llm generate|bench|check|random` drives it from a shell
(docs/llm.md).
"""

from .api import LLM, RequestOutput
from .config import ModelConfig, ModelDirError
from .engine import ContextLengthError, Engine, SamplingParams
from .parallel import Shard

__all__ = ["LLM", "RequestOutput", "ModelConfig", "ModelDirError", "ContextLengthError",
           "Engine", "SamplingParams", "Shard"]
