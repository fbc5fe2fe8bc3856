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

    python3 bench/ncu_mla.py --sass '{"merged_handoffs": true}'

needs no GPU (nor torch): it compiles DeepSeek's launch with mla_decode's hints given
as JSON over the default's, disassembles the sm_90a cubin (nvdisasm) and counts the
consumer loop of a 64-key step: its wgmmas, waits, barriers, the instruction slots
between each product's last issue and its wait, and warpgroup 0's path from the scores'
wait to the first `P c` wgmma and from `P c`'s wait to the next step's first score
wgmma, with the stall cycles ptxas encoded on them (a static lower bound: barrier and
memory waits not counted), where the tensor cores have nothing of this block to run
(docs/attention.md, "Merged hand-offs").
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

BATCH, CTX, LAUNCHES = 64, 4096, 4


def variant(word: str):
    """The MLA_VARIANTS entry named `word`, or the only one whose name contains it."""
    import decode_attention as bench
    exact = [v for v in bench.MLA_VARIANTS if v[0] == word]
    found = exact or [v for v in bench.MLA_VARIANTS if word in v[0]]
    if len(found) != 1:
        names = "\n  ".join(v[0] for v in bench.MLA_VARIANTS)
        raise SystemExit(f"ncu_mla: {len(found)} variants match {word!r}; one of:\n  {names}")
    return found[0]


def _sass(hints: dict) -> list[tuple[int, str, int]]:
    """(address, instruction, encoded stall cycles) of the innermost loop around `P c`
    in the sm_90a SASS of DeepSeek's launch (batch 64, 128 heads, pages of 64) with
    `hints` over mla_decode's defaults."""
    import ml_dtypes
    import numpy as np
    from tileir.backend.target.toolchain import find_cuda_tool
    from tileir.examples import mla_decode as mla
    q = np.zeros((BATCH, 1, 128, 576), ml_dtypes.bfloat16)
    kv = np.zeros((64, 64, 576), ml_dtypes.bfloat16)
    out = np.zeros((BATCH, 1, 128, 512), ml_dtypes.bfloat16)
    _, calls = mla.launches(q, kv, np.zeros((BATCH, 64), np.int32), np.ones(BATCH, np.int32),
                            0.04, out, 1, hints=hints)
    kernel, grid, args = calls[0]
    ck = kernel.compile(args, target="sm_90a", grid=grid, sm_count=132)
    print(ck.ptxas_report.strip().splitlines()[-2].strip())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mla.cubin")
        with open(path, "wb") as f:
            f.write(ck.cubin)
        text = subprocess.run([find_cuda_tool("nvdisasm"), "-pb", "-hex", "-novliw", "-ndf",
                               path], capture_output=True, text=True, check=True).stdout
    lines = text.splitlines()
    ins = []
    for i, line in enumerate(lines[:-1]):
        m = re.match(r"\s+/\*([0-9a-f]+)\*/\s+(.*?);\s+/\* (0x[0-9a-f]+) \*/", line)
        hi = re.search(r"/\* (0x[0-9a-f]+) \*/", lines[i + 1])
        if m and hi and not re.match(r"\s+/\*[0-9a-f]+\*/", lines[i + 1]):
            ins.append((int(m.group(1), 16), m.group(2).strip(), (int(hi.group(1), 16) >> 41) & 15))
    addr = [a for a, _, _ in ins]
    loops = []                                  # (first, last) of each backward branch
    for k, (_, t, _) in enumerate(ins):
        m = re.search(r"BRA (?:`\()?0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) in addr[:k]:
            first = addr.index(int(m.group(1), 16))
            if any("HGMMA.64x256x16" in x for _, x, _ in ins[first:k + 1]):
                loops.append((first, k))
    if not loops:
        raise SystemExit("ncu_mla --sass: no loop around a HGMMA.64x256x16")
    first, last = min(loops, key=lambda t: t[1] - t[0])
    return ins[first:last + 1]


def _owner_path(loop, start: int, stop: int) -> list[int]:
    """Warpgroup 0's instructions from `start` up to `stop` (indices into `loop`): its
    taken branches followed (every predicate false, so warpgroup 1's `@P1 BRA` over the
    owner's run is not taken and a predicated skip `@!Pn BRA` is: the mask's block and
    warpgroup 1's rescale skipped, as on every step but the last), `@P1` lines left out."""
    at = {a: k for k, (a, _, _) in enumerate(loop)}
    k, path = start, []
    while k < stop and len(path) < len(loop):
        t = loop[k][1]
        m = re.match(r"(@(!?)P\d+ )?BRA (?:`\()?0x([0-9a-f]+)", t)
        if not t.startswith("@P"):
            path.append(k)
        if m and (not m.group(1) or m.group(2)) and int(m.group(3), 16) in at:
            k = at[int(m.group(3), 16)]
            continue
        k += 1
    return path


def sass_report(hints: dict) -> dict:
    """The counts `--sass` prints (see the module docstring)."""
    loop = _sass(hints)
    txt = [t for _, t, _ in loop]
    find = lambda word: [k for k, t in enumerate(txt) if word in t]  # noqa: E731
    scores, pc, waits = find("HGMMA.64x64x16"), find("HGMMA.64x256x16"), find("DEPBAR")
    s_wait = min(w for w in waits if w > scores[-1])
    p_wait = min(w for w in waits if w > pc[-1])
    softmax = _owner_path(loop, s_wait, pc[0])
    turn = list(range(p_wait, len(loop))) + list(range(0, scores[0]))
    return {
        "instructions": len(loop),
        "score wgmmas": len(scores), "P c wgmmas": len(pc), "wgmma waits": len(waits),
        "score issue slots (first to last wgmma)": scores[-1] - scores[0] + 1,
        "slots between the scores' last issue and their wait": s_wait - scores[-1] - 1,
        "slots between P c's last issue and its wait": p_wait - pc[-1] - 1,
        "named barriers": [re.sub(r"\.DEFER_BLOCKING", "", t) for t in txt if " BAR." in " " + t
                           and re.search(r"\bBAR\.", t)],
        "owner, scores' wait to P c: instructions": len(softmax),
        "owner, scores' wait to P c: encoded stall cycles": sum(loop[k][2] for k in softmax),
        "owner, scores' wait to P c: barrier waits": [
            txt[k] for k in softmax if "BAR.SYNC" in txt[k]],
        "P c's wait to the next scores: instructions": len(turn),
        "P c's wait to the next scores: encoded stall cycles": sum(loop[k][2] for k in turn),
        "MUFU.EX2": len(find("MUFU.EX2")),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variant", help="a name of bench/decode_attention.py's MLA_VARIANTS, "
                                    "or a word only one name contains; with --sass, "
                                    "mla_decode's hints as JSON")
    ap.add_argument("--sass", action="store_true", help="count the compiled loop (no GPU)")
    args = ap.parse_args(argv)
    if args.sass:
        for key, value in sass_report(json.loads(args.variant)).items():
            print(f"{key}: {value}")
        return 0
    import torch
    import decode_attention as bench
    from tileir.examples import mla_decode as mla
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
