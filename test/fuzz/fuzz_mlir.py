"""Fuzzing `tile-opt` with mutated `.mlir` inputs, through every stage.

    python test/fuzz/fuzz_mlir.py [--fuzz-n 10000] [--seed 0] [--jobs 2] [--out DIR]

The corpus is every input chunk of the lit tests under test/ (files split at
`// -----`, CHECK lines dropped).  A mutant is a chunk with 1 to 3 token-level
edits: a token deleted, duplicated or moved; a number replaced by an edge value
(0, -1, 2^31, a huge one, NaN); a type, shape or attribute swapped for another
the corpus uses; a line deleted or duplicated.  Mutants go through `tile-opt
--stop-after=S -split-input-file` in batches, S cycling through the stages from
`tile` to `ptx`, so each stage sees inputs recorded at every earlier one.

Every chunk must end in success or in diagnostics that each name a place in the
input (`file:line:col: error: ...`).  A finding is anything else: an internal
error (an exception in tileir, which tile-opt reports as such), a diagnostic
without a location, a process that crashes or hangs.  Findings are written to
--out as reproducers (`finding-<n>.mlir`, with the command and what happened)
and counted; the exit status is 1 if there is any.

`run(n, seed)` is what `test/python/test_fuzz.py` calls for the short run that
`tile-check` includes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("tile", "layout", "pipeline", "gpu", "llvm", "ptx")
BATCH = 40                        # mutants per tile-opt process
TIMEOUT = 300                     # seconds for one batch

_TOKEN = re.compile(r'"[^"\n]*"|%[\w#]+|\^\w+|@\w+|#[\w.]+|!\w[\w.]*|[A-Za-z_][\w.]*|'
                    r'0x[0-9A-Fa-f]+|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\S')
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")
_EDGE_NUMBERS = ["0", "-1", "1", "3", "2147483648", "99999999999999999999", "0x7FC00000",
                 "-2147483649", "1.5", "65536"]
_LOCATED = re.compile(r"^\S+:\d+:\d+: (error|warning|note|remark):")


@dataclasses.dataclass
class Finding:
    stage: str
    text: str
    what: str


def corpus(root: Path = ROOT) -> list[str]:
    """The input chunks of the lit tests: each file split at `// -----`, comment
    lines (RUN, CHECK, prose) dropped; expected-error annotations kept as text."""
    chunks = []
    for path in sorted((root / "test").glob("*/*.mlir")):
        for chunk in path.read_text().split("// -----"):
            lines = [l for l in chunk.splitlines() if not l.lstrip().startswith("//")]
            text = "\n".join(lines).strip()
            if "func.func" in text or "gpu.module" in text or "module" in text:
                chunks.append(_with_stage(text) + "\n")
    return chunks


def _with_stage(text: str) -> str:
    """A pass's lit input written past the `layout` stage (layout encodings, rings)
    but without `tile.stage` (it runs one pass, not a stage) gets the stage it is
    at, so that the fuzzer's mutants of it reach the later stages."""
    if "tile.stage" in text or "gpu.module" in text:
        return text
    if re.search(r"tile\.ring_|tile\.mma_async|tile\.mma_wait", text):
        stage = "pipeline"
    elif "#tile." in text:
        stage = "layout"
    else:
        return text
    lines = text.splitlines()
    aliases = [l for l in lines if re.match(r"^[#!]\w+ = ", l)]
    body = [l for l in lines if l not in aliases]
    rest = "\n".join(body).strip()
    if rest.startswith("module attributes {"):
        rest = rest.replace("module attributes {", f'module attributes {{tile.stage = "{stage}", ', 1)
    elif rest.startswith("module {"):
        rest = rest.replace("module {", f'module attributes {{tile.stage = "{stage}"}} {{', 1)
    else:
        rest = f'module attributes {{tile.stage = "{stage}"}} {{\n{rest}\n}}'
    return "\n".join(aliases + [rest])


_SWAPPABLE = re.compile(r"tensor<[^<>]*(?:<[^<>]*>[^<>]*)*>|!tile\.\w+<[^>]*>|"
                        r"array<i\d+:[^>]*>|\b(?:f16|bf16|f32|f64|i1|i8|i32|i64|index)\b|"
                        r'"(?:zero|neg_inf|undetermined|sum|max|min|prod|argmax)"')


def _vocabulary(chunks: list[str]) -> list[str]:
    """Types, shapes and attributes seen in the corpus: what a swap picks from."""
    vocab = set()
    for text in chunks:
        vocab.update(_SWAPPABLE.findall(text))
    return sorted(vocab)


def mutate(text: str, rng: random.Random, vocab: list[str]) -> str:
    # mostly one edit, and mostly ones that keep the syntax (a number, a type or an
    # attribute swapped): what reaches the verifiers and the passes, not the parser
    for _ in range(1 if rng.random() < 0.6 else rng.randint(2, 3)):
        kind = rng.random() if rng.random() < 0.4 else 0.5 + 0.4 * rng.random()
        if kind < 0.15:                                     # a line deleted or duplicated
            lines = text.splitlines()
            i = rng.randrange(len(lines))
            if rng.random() < 0.5:
                del lines[i]
            else:
                lines.insert(rng.randrange(len(lines) + 1), lines[i])
            text = "\n".join(lines) + "\n"
            continue
        spans = [m.span() for m in _TOKEN.finditer(text)]
        if not spans:
            break
        a, b = rng.choice(spans)
        tok = text[a:b]
        if kind < 0.35:
            new = ""                                        # deleted
        elif kind < 0.5:
            new = tok + " " + tok                           # duplicated
        elif kind < 0.7:
            numbers = [(c, d) for c, d in spans if _NUMBER.match(text[c:d])]
            if numbers:
                a, b = rng.choice(numbers)
            new = rng.choice(_EDGE_NUMBERS) if numbers else tok
        elif kind < 0.9 and vocab:
            typed = [(c, d) for c, d in (m.span() for m in _SWAPPABLE.finditer(text))]
            if typed:
                a, b = rng.choice(typed)
            new = rng.choice(vocab)                         # another type or attribute
        else:
            c, d = rng.choice(spans)                        # another token moved here
            new = text[c:d]
        text = text[:a] + new + text[b:]
    return text


def _stage_index(text: str) -> int:
    """The index in STAGES of the first stage a chunk may stop after (its recorded
    `tile.stage`, or `tile` when it has none or an unknown one)."""
    m = re.search(r'tile\.stage = "(\w+)"', text)
    if m and m.group(1) in STAGES:
        return min(STAGES.index(m.group(1)) + 1, len(STAGES) - 1)
    return 0


MEMORY = 6 << 30                  # bytes of address space for one tile-opt process


def _limit_memory() -> None:
    """A mutant that makes tileir allocate without bound (a ring of 2^31 stages) ends
    in a failed allocation, a finding, not in the machine's OOM killer."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _tile_opt(path: Path, stage: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tileir.tools.tile_opt", str(path),
                           "-split-input-file", f"--stop-after={stage}", "-o", os.devnull],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT,
                          preexec_fn=_limit_memory if sys.platform == "linux" else None)


def check_batch(mutants: list[str], stage: str, workdir: Path) -> list[Finding]:
    """Runs one batch through `stage`; the findings (a crashed batch is bisected to
    the mutants that crash it)."""
    path = workdir / f"batch-{os.getpid()}-{random.getrandbits(32):08x}.mlir"
    path.write_text("\n// -----\n".join(mutants))
    try:
        proc = _tile_opt(path, stage)
    except subprocess.TimeoutExpired:
        return _bisect(mutants, stage, workdir, "timed out")
    finally:
        path.unlink(missing_ok=True)
    if proc.returncode not in (0, 1):
        return _bisect(mutants, stage, workdir, f"exit status {proc.returncode}")
    findings = []
    for line in proc.stderr.splitlines():
        if "internal error" in line:
            findings.append(Finding(stage, _chunk_of(line, mutants), line.strip()))
        elif line.startswith("error:") or line.startswith("tile-opt: "):
            findings.append(Finding(stage, "\n// -----\n".join(mutants), line.strip()))
    return findings


def _chunk_of(line: str, mutants: list[str]) -> str:
    """The mutant a located line points into (by its line number in the batch)."""
    m = re.match(r"^\S+:(\d+):\d+:", line)
    if not m:
        return "\n// -----\n".join(mutants)
    target, start = int(m.group(1)), 1
    for text in mutants:
        end = start + text.count("\n") + 1
        if start <= target < end + 1:
            return text
        start = end + 1
    return "\n// -----\n".join(mutants)


def _bisect(mutants: list[str], stage: str, workdir: Path, what: str) -> list[Finding]:
    if len(mutants) == 1:
        return [Finding(stage, mutants[0], f"tile-opt {what}")]
    half = len(mutants) // 2
    out = []
    for part in (mutants[:half], mutants[half:]):
        out += check_batch(part, stage, workdir)
    return out


def run(n: int, seed: int = 0, jobs: int = 1, out: Path | None = None) -> list[Finding]:
    """`n` mutants from `seed` through every stage in turn; the findings."""
    chunks = corpus()
    vocab = _vocabulary(chunks)
    rng = random.Random(seed)
    by_stage: dict[str, list[str]] = {s: [] for s in STAGES}
    made = 0
    while made < n:                 # each mutant goes to a stage at or after its own
        text = mutate(rng.choice(chunks), rng, vocab)
        stages = STAGES[_stage_index(text):] or STAGES[-1:]
        by_stage[rng.choice(stages)].append(text)
        made += 1
    batches = [(texts[i:i + BATCH], stage) for stage, texts in by_stage.items()
               for i in range(0, len(texts), BATCH)]
    with tempfile.TemporaryDirectory(prefix="tileir-fuzz-") as d, \
            ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        found = pool.map(lambda b: check_batch(b[0], b[1], Path(d)), batches)
        findings = [f for batch in found for f in batch]
    if out is not None and findings:
        out.mkdir(parents=True, exist_ok=True)
        for i, f in enumerate(findings):
            (out / f"finding-{i}.mlir").write_text(
                f"// tile-opt %s -split-input-file --stop-after={f.stage}\n// {f.what}\n"
                + f.text)
    return findings


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fuzz-n", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", type=Path, default=Path("fuzz-findings"))
    args = p.parse_args(argv)
    findings = run(args.fuzz_n, args.seed, args.jobs, args.out)
    print(f"{args.fuzz_n} mutants, seed {args.seed}: {len(findings)} findings"
          + (f" (reproducers in {args.out})" if findings else ""))
    for f in findings[:20]:
        print(f"  [{f.stage}] {f.what}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
