"""One small MLA decode launch for compute-sanitizer (racecheck, synccheck): batch 1,
128 heads, one token, a ragged context in pages of 64, unsplit, checked against fp32
torch.  --no-skew lowers every hand-off of the warpgroup split between two barriers
of both warpgroups (the kernel option `skewed_handoffs=False`), so one racecheck run of each tells whether its reports
follow the skewed hand-offs' `bar.arrive` / `bar.sync` pairs (docs/attention.md,
"The warpgroup split").

    compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 20 \\
        python3 bench/race_mla.py
    compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 20 \\
        python3 bench/race_mla.py --no-skew
    compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 20 \\
        python3 bench/race_mla.py --hints '{"warpgroup_split": true, "mbarrier_handoffs": true}'

    compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 20 \
        python3 bench/race_mla.py --hints '{"warpgroup_split": true, "merged_handoffs": true}'

(the third: the same skewed protocol signalled through mbarriers, the kernel option
`mbarrier_handoffs`; the last: a step's alpha and P under one wait and one arrival each
way, `merged_handoffs`, in separate bytes, whose reports, if any, should follow the same
`bar.arrive` / `bar.sync` pairs).
"""

import argparse
import json
import math
import sys

import torch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hints", default='{"warpgroup_split": true}',
                    help="mla_decode's hints, JSON (default: the warpgroup split)")
    ap.add_argument("--no-skew", action="store_true",
                    help="every hand-off between barriers of both warpgroups")
    ap.add_argument("--len", type=int, default=700, help="the context's tokens")
    args = ap.parse_args(argv)
    from tileir.examples import mla_decode as mla
    hints = json.loads(args.hints)
    if args.no_skew:
        hints["skewed_handoffs"] = False
    torch.manual_seed(3)
    n, page, heads = args.len, 64, 128
    pages = -(-n // page)
    kv = torch.randn(pages + 2, page, 576, device="cuda", dtype=torch.bfloat16)
    table = torch.randperm(pages + 2, device="cuda")[:pages].to(torch.int32)[None]
    q = torch.randn(1, 1, heads, 576, device="cuda", dtype=torch.bfloat16)
    seq = torch.tensor([n], device="cuda", dtype=torch.int32)
    out = torch.full((1, 1, heads, 512), float("nan"), device="cuda", dtype=torch.bfloat16)
    scale = 1 / math.sqrt(576)
    mla.mla_decode(q, kv, table, seq, scale, out, num_splits=1, hints=hints)
    torch.cuda.synchronize()
    lat = kv[table[0].long()].reshape(-1, 576)[:n].float()
    p = torch.softmax(q[0, 0].float() @ lat.T * scale, dim=-1)
    ref = p @ lat[:, :512]
    err = ((out[0, 0].float() - ref).norm() / ref.norm()).item()
    print(f"hints {hints}: relative error {err:.2e}, "
          f"finite {bool(torch.isfinite(out).all())}")
    return 0 if err < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
