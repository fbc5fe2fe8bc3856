"""The one seam where tensor parallelism goes (issue 31 fills it in).

Every weight the models hold comes through `Shard`: a linear layer is column-parallel
(its output features split: Q/K/V, gate/up, the LM head's vocabulary), row-parallel
(its input features split, the partial products summed across ranks: O, down) or
replicated; the embedding is split by vocabulary rows; attention heads and routed
experts are dealt out by `heads` and `experts`.  Where the ranks' work meets — the token
embedding, a row-parallel GEMM adding into the residual stream, the routed experts'
sum, the logits — the models call this class too (`embedding`, `add_row_parallel`,
`add_partial`, `gather_logits`).  With one rank every split is the whole tensor and
each meeting is the plain kernel, so the models are written once for both.  A group of more than one rank is refused until issue 31 adds the
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
        """A linear weight (out, in) split along its inputs (summed by add_row_parallel)."""
        lo, hi = self._range(w.shape[1], what)
        return w[:, lo:hi]

    def vocab(self, w, what: str):
        lo, hi = self._range(w.shape[0], what)
        return w[lo:hi]

    def replicated(self, w, what: str):
        return w

    # ---- where the ranks' work meets: every cross-rank step of the models is one of these

    def embedding(self, be, ids, table):
        """Token rows of a vocabulary-split table (a rank has rows lo..hi; the others'
        tokens read zeros there and an all-reduce fills them in)."""
        return be.embedding(ids, table)

    def add_row_parallel(self, be, x, w, residual):
        """residual += x @ w^T for a row-parallel weight (x holds this rank's slice of the
        inputs).  One rank: the add is the GEMM's epilogue.  More: each rank's partial
        product is all-reduced and added once (issue 31)."""
        be.linear(x, w, residual=residual)

    def add_partial(self, be, x, residual):
        """residual += the sum over ranks of x (the routed experts' outputs: each rank's
        experts' share)."""
        be.add_(x, residual)

    def gather_logits(self, x):
        """The ranks' vocabulary slices of the logits side by side."""
        return x
