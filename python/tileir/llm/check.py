"""The kernel model against the float64 NumPy reference, step by step.

`compare(llm, prompts, steps)` runs greedy generation through the engine (prefill
then `steps - 1` decode steps, all prompts batched) and, for every prompt and step,
the reference on the same tokens: the logits' largest difference relative to the
reference's largest magnitude, and whether the engine's token is the reference's
argmax.  Teacher-forced on the engine's own tokens, so one near tie does not make
every later step differ.
"""

from __future__ import annotations

import numpy as np

from . import reference
from .engine import SamplingParams


def compare(llm, prompts, steps: int) -> dict:
    eng = llm.engine
    params = SamplingParams(max_new_tokens=steps, ignore_eos=True)
    index = {eng.add_request(p, params): i for i, p in enumerate(prompts)}
    logits = [[] for _ in prompts]
    tokens = [[] for _ in prompts]
    while eng.has_work():
        new = eng.step()
        got = llm.backend.numpy(eng.last_logits)
        for row, (req, tok) in enumerate(new):
            i = index[req.id]
            logits[i].append(got[row].astype(np.float64))
            tokens[i].append(tok)
    worst, agree = 0.0, True
    for i, p in enumerate(prompts):
        seq = list(p) + tokens[i]
        ref = reference.logits(llm.cfg, llm.ckpt, seq[:-1])[len(p) - 1:]
        ours = np.stack(logits[i])
        worst = max(worst, float(np.abs(ours - ref).max() / np.abs(ref).max()))
        agree &= bool(np.array_equal(ref.argmax(axis=1), np.asarray(tokens[i])))
    return {"max_rel_err": worst, "tokens_agree": agree, "tokens": tokens}
