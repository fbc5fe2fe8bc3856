"""MLA decode at DeepSeek-V3's shapes (batch 64, 128 heads, a 4k context in pages of 64,
one token, unsplit) as `bench/decode_attention.py --mla-variants` times it, for ncu:
four launches of the variant named on the command line (a name of MLA_VARIANTS, or a
word one name contains), the first three to compile and warm up.  The warp states of
the fourth say where a 64-key step's time goes (docs/attention.md, "Where the split
step goes"): per SASS instruction with the source page.

    ncu --target-processes all -k regex:mla --launch-skip 3 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats \\
        --section SourceCounters --section MemoryWorkloadAnalysis \\
        -o mla_split python3 bench/ncu_mla.py "early rescale, fp fusion"
    ncu --import mla_split.ncu-rep --page source --csv --print-source sass > mla_split.csv

Without ncu it prints each launch's time (CUDA events) and its fraction of the bound.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))

import decode_attention as bench  # noqa: E402
from tileir.examples import mla_decode as mla  # noqa: E402

BATCH, CTX, LAUNCHES = 64, 4096, 4


def variant(word: str):
    """The MLA_VARIANTS entry named `word`, or the only one whose name contains it."""
    exact = [v for v in bench.MLA_VARIANTS if v[0] == word]
    found = exact or [v for v in bench.MLA_VARIANTS if word in v[0]]
    if len(found) != 1:
        names = "\n  ".join(v[0] for v in bench.MLA_VARIANTS)
        raise SystemExit(f"ncu_mla: {len(found)} variants match {word!r}; one of:\n  {names}")
    return found[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variant", help="a name of bench/decode_attention.py's MLA_VARIANTS, "
                                    "or a word only one name contains")
    args = ap.parse_args(argv)
    name, bn, hints, page = variant(args.variant)
    kv, table, q, out, seq, nbytes, flops = bench._mla_case(BATCH, CTX, page)
    bound_ms = bench.mla_bound_ms(nbytes, flops, bench.copy_bandwidth())
    print(f"{name}: bn {bn}, hints {hints}, page {page}; bound {bound_ms * 1e3:.1f} us",
          flush=True)
    for i in range(LAUNCHES):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        mla.mla_decode(q, kv, table, seq, 0.0417, out, num_splits=1, bn=bn, hints=hints)
        b.record()
        b.synchronize()
        ms = a.elapsed_time(b)
        print(f"launch {i}: {ms * 1e3:.1f} us, {bound_ms / ms:.2f} of the bound", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
