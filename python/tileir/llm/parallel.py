"""The one seam where tensor parallelism goes (issue 31 fills it in).

Every weight the models hold comes through `Shard`: a linear layer is column-parallel
(its output features split: Q/K/V, gate/up, the LM head's vocabulary), row-parallel
(its input features split, the partial products summed across ranks: O, down) or
replicated; the embedding is split by vocabulary rows; attention heads and routed
experts are dealt out by `heads` and `experts`.  With one rank every split is the whole
tensor and `all_reduce` / `all_gather` return their input, so the models are written
once for both.  A group of more than one rank is refused until issue 31 adds the
collectives.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Shard:
    rank: int = 0
    size: int = 1

    def __post_init__(self):
        if self.size != 1 or self.rank != 0:
            raise ValueError(f"tensor parallelism over {self.size} ranks is not built yet "
                             "(issue 31); tileir.llm runs on one GPU (Shard(rank=0, size=1))")

    def _range(self, n: int, what: str) -> tuple[int, int]:
        if n % self.size:
            raise ValueError(f"{what}: {n} does not split over {self.size} ranks")
        step = n // self.size
        return self.rank * step, (self.rank + 1) * step

    def heads(self, n: int, what: str = "attention heads") -> tuple[int, int]:
        return self._range(n, what)

    def experts(self, n: int) -> tuple[int, int]:
        return self._range(n, "routed experts")

    def column(self, w, what: str):
        """A linear weight (out, in) split along its outputs."""
        lo, hi = self._range(w.shape[0], what)
        return w[lo:hi]

    def row(self, w, what: str):
        """A linear weight (out, in) split along its inputs (summed by all_reduce)."""
        lo, hi = self._range(w.shape[1], what)
        return w[:, lo:hi]

    def vocab(self, w, what: str):
        lo, hi = self._range(w.shape[0], what)
        return w[lo:hi]

    def replicated(self, w, what: str):
        return w

    def all_reduce(self, x):
        """The sum of the ranks' partial outputs of a row-parallel layer."""
        return x

    def all_gather(self, x):
        """The ranks' vocabulary slices of the logits side by side."""
        return x
