"""`tokenizer.json` through the `tokenizers` package, when both are present."""

from __future__ import annotations

import os


class Tokenizer:
    def __init__(self, path: str):
        from tokenizers import Tokenizer as HFTokenizer
        self.tok = HFTokenizer.from_file(path)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text).ids

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids))


def load(model_dir: str) -> Tokenizer | None:
    path = os.path.join(model_dir, "tokenizer.json")
    if not os.path.isfile(path):
        return None
    try:
        return Tokenizer(path)
    except ImportError:
        return None
