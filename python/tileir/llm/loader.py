"""Lazy weights of a Hugging Face model directory.

`Checkpoint(model_dir)` maps tensor names to the `*.safetensors` file holding them
(from `model.safetensors.index.json` when present, else from each file's header) and
reads a tensor only when asked, as a NumPy array (`framework="numpy"`, bf16 through
ml_dtypes) or a torch tensor (`framework="pt"`).  `DictCheckpoint` serves the same
`get` from tensors already in memory (the benchmark's random weights).
"""

from __future__ import annotations

import glob
import json
import os

from .config import ModelDirError


class Checkpoint:
    def __init__(self, model_dir: str, framework: str = "numpy"):
        try:
            from safetensors import safe_open
        except ImportError as e:      # pragma: no cover - the llm extra installs it
            raise ModelDirError("reading *.safetensors needs the safetensors package "
                                "(pip install 'tileir[llm]')") from e
        self._open = safe_open
        self.framework = framework
        self.dir = model_dir
        self._files: dict[str, str] = {}
        self._handles: dict[str, object] = {}
        index = os.path.join(model_dir, "model.safetensors.index.json")
        if os.path.isfile(index):
            with open(index) as f:
                for name, file in json.load(f)["weight_map"].items():
                    self._files[name] = os.path.join(model_dir, file)
        else:
            files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
            if not files:
                raise ModelDirError(f"{model_dir!r} has no *.safetensors weights")
            for file in files:
                for name in self._handle(file).keys():
                    self._files[name] = file
        for file in set(self._files.values()):
            if not os.path.isfile(file):
                raise ModelDirError(f"{file!r}, named in model.safetensors.index.json, is missing")

    def _handle(self, file: str):
        h = self._handles.get(file)
        if h is None:
            h = self._handles[file] = self._open(file, framework=self.framework)
        return h

    def __contains__(self, name: str) -> bool:
        return name in self._files

    def names(self):
        return self._files.keys()

    def get(self, name: str):
        file = self._files.get(name)
        if file is None:
            raise ModelDirError(f"{self.dir!r}: no tensor {name!r} in the checkpoint")
        return self._handle(file).get_tensor(name)


class DictCheckpoint:
    def __init__(self, tensors: dict):
        self.tensors = tensors

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def names(self):
        return self.tensors.keys()

    def get(self, name: str):
        if name not in self.tensors:
            raise ModelDirError(f"no tensor {name!r} among the given weights")
        return self.tensors[name]
