"""Prefill attention: the tutorial-source tileir kernel against cuDNN, FlashAttention-2
and a Triton kernel, in one run.

    python bench/attention.py [--out DIR] [--quick] [--tiles 128x128,128x64,64x64]
                              [--tiles 128x128,128x128:fence,128x128:unrotated]

The tileir kernel is `tileir.examples.attention` as written (a Q tile, a loop over
K/V tiles, an online softmax in fp32 with exp2), launched at each tile shape of
--tiles; a shape the compiler refuses is reported, not skipped.  A tile may name a
variant of the kernel's hints after a colon (VARIANTS: `fence`, rotation_fence=True;
`unrotated`, product_rotation=False; `noproducer`, warp_specialize=False; `pingpong`,
pingpong=True; `nopingpong`, pingpong=False (the compiler chooses it at head dim >=
128); `pingpong+fence`; `fma`, fp_fusion=True; `pingpong+fma`, `nopingpong+fma`; `w16`,
num_warps=16, four consumer warpgroups, for 256 x 64 tiles at D=64; `w16+fma`;
`reversed`, block_order="reversed", `reversed+fma`; `persistent`, persistent=True
with a producer warpgroup; `persistent+fma`), timed
as a column of its own beside the default.  Every tile is checked for correctness at
each head dim of the shapes run (D=64 and D=128), and a shape's cell is left empty
(`-`) where a tile was not meant for its head dim (`--tiles 256x64:w16@64`: only D=64
rows).  References, timed in the same run with triton's do_bench (median):
- cuDNN: torch SDPA with the CUDNN_ATTENTION backend;
- FA2: torch SDPA with the FLASH_ATTENTION backend (FlashAttention-2);
- Triton: the fused-attention algorithm of Triton's tutorial (written for this bench,
  `_triton_attention` below), at the best of its usual configurations.
Shapes (issue 29, item 7): bf16 B4 H32 S4096 D128 and B1 H32 S16384 D128, full and
causal; GQA 32/8; D=64.  TFLOP/s count 4 B H S^2 D (half of it causal).  Each kernel
is first checked against SDPA's math backend in fp32 on a ragged shape (poisoned
output, fresh random inputs).  Prints a table; writes attention.json and
attention.png into --out.

After the main table (or alone, --only-extra; not with --quick or --shapes): D=256
(B4 H16 S4096, full and causal, the same references, tileir at 128x64 and 128x128),
and a packed batch of 16 sequences of 1 to 8192 tokens (GQA 32/8, D=128) through
`flash_attention_varlen`, against torch's FlashAttention-2 varlen forward
(aten::_flash_attention_forward) and SDPA (cuDNN, FA2) over the zero-padded batch;
TFLOP/s count the packed batch's work for all of them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

import tileir as ct
from tileir.examples import attention as example

DT = torch.bfloat16
# (label, batch, heads, kv heads, seq, d, causal)
SHAPES = [
    ("B4 H32 S4096 D128", 4, 32, 32, 4096, 128, False),
    ("B4 H32 S4096 D128 causal", 4, 32, 32, 4096, 128, True),
    ("B1 H32 S16384 D128", 1, 32, 32, 16384, 128, False),
    ("B1 H32 S16384 D128 causal", 1, 32, 32, 16384, 128, True),
    ("B4 H32/8 S4096 D128 GQA", 4, 32, 8, 4096, 128, False),
    ("B4 H32/8 S4096 D128 GQA causal", 4, 32, 8, 4096, 128, True),
    ("B4 H32 S4096 D64", 4, 32, 32, 4096, 64, False),
    ("B4 H32 S4096 D64 causal", 4, 32, 32, 4096, 64, True),
]


# ---------------------------------------------------------------------------
# Triton: the tutorial's algorithm, written for this bench
# ---------------------------------------------------------------------------
@triton.jit
def _triton_attention(Q, K, V, O, qk_scale, seq, H: tl.constexpr, GROUP: tl.constexpr,
                      D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                      CAUSAL: tl.constexpr):
    mb = tl.program_id(0)
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    kvh = h // GROUP
    q_base = Q + (b * H + h).to(tl.int64) * seq * D
    kv_base = (b * (H // GROUP) + kvh).to(tl.int64) * seq * D
    rows = mb * BM + tl.arange(0, BM)
    dims = tl.arange(0, D)
    q = tl.load(q_base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < seq, other=0.0)
    m = tl.full([BM], float("-inf"), tl.float32)
    l = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    hi = tl.minimum((mb + 1) * BM, seq) if CAUSAL else seq
    for start in range(0, hi, BN):
        cols = start + tl.arange(0, BN)
        kv_off = kv_base + cols[:, None] * D + dims[None, :]
        k = tl.load(K + kv_off, mask=cols[:, None] < seq, other=0.0)
        s = tl.dot(q, tl.trans(k))
        keep = cols[None, :] < seq
        if CAUSAL:
            keep = keep & (rows[:, None] >= cols[None, :])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(V + kv_off, mask=cols[:, None] < seq, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    out = acc / l[:, None]
    tl.store(O + (b * H + h).to(tl.int64) * seq * D + rows[:, None] * D + dims[None, :],
             out.to(O.dtype.element_ty), mask=rows[:, None] < seq)


TRITON_CONFIGS = [(128, 64, 8, 3), (128, 128, 8, 2), (128, 64, 4, 3), (64, 64, 4, 3)]


def triton_call(q, k, v, o, causal, cfg):
    bm, bn, warps, stages = cfg
    b, h, s, d = q.shape
    grid = (triton.cdiv(s, bm), b * h)
    return lambda: _triton_attention[grid](q, k, v, o, (1.0 / math.sqrt(d)) / math.log(2.0), s,
                                           h, h // k.shape[1], d, bm, bn, causal,
                                           num_warps=warps, num_stages=stages)


# ---------------------------------------------------------------------------
def sdpa(q, k, v, causal, backend):
    gqa = q.shape[1] != k.shape[1]
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)


# variants of the kernel's hints a --tiles entry may name ("128x128:fence")
# (the ping-pong is the compiler's choice at head dim >= 128 and off below it:
# `pingpong` forces it, `nopingpong` turns it off; `fma`, fp_fusion=True: s * scale - m
# as one FFMA; `w16`, 16 warps: four consumer warpgroups of 64 rows, for 256-row tiles;
# `reversed`, block_order="reversed": the causal blocks with the most key tiles first;
# `persistent`: one block an SM walks the tiles, its producer warpgroup copying the next
# tile's K and V while the consumers finish this one -- products not rotated)
VARIANTS = {"fence": {"rotation_fence": True}, "unrotated": {"product_rotation": False},
            "noproducer": {"warp_specialize": False}, "pingpong": {"pingpong": True},
            "nopingpong": {"pingpong": False},
            "pingpong+fence": {"pingpong": True, "rotation_fence": True},
            "fma": {"fp_fusion": True}, "pingpong+fma": {"pingpong": True, "fp_fusion": True},
            "nopingpong+fma": {"pingpong": False, "fp_fusion": True},
            "w16": {"num_warps": 16}, "w16+fma": {"num_warps": 16, "fp_fusion": True},
            "reversed": {"block_order": "reversed"},
            "reversed+fma": {"block_order": "reversed", "fp_fusion": True},
            "persistent": {"persistent": True, "warp_specialize": True},
            "persistent+fma": {"persistent": True, "warp_specialize": True,
                               "fp_fusion": True}}
_kernels: dict = {}


def _kernel(variant: str | None):
    if not variant:
        return example.attention
    if variant not in _kernels:
        _kernels[variant] = example.attention.replace_hints(**VARIANTS[variant])
    return _kernels[variant]


def parse_tiles(text: str) -> list[tuple]:
    """'128x128,128x64:fence,256x64:w16@64' -> [(128, 128, None, None), (128, 64,
    'fence', None), (256, 64, 'w16', 64)]: BM, BN, the variant, the only head dim."""
    tiles = []
    for t in text.split(","):
        t, _, dim = t.partition("@")
        size, _, variant = t.partition(":")
        if variant and variant not in VARIANTS:
            raise SystemExit(f"--tiles: unknown variant {variant!r}; known: {sorted(VARIANTS)}")
        bm, bn = map(int, size.split("x"))
        tiles.append((bm, bn, variant or None, int(dim) if dim else None))
    return tiles


def tile_key(bm, bn, variant=None, dim=None) -> str:
    return f"tileir {bm}x{bn}" + (f" {variant}" if variant else "") + \
        (f" @D{dim}" if dim else "")


def tileir_call(q, k, v, o, causal, bm, bn, variant=None):
    h, d = q.shape[1], q.shape[3]
    args = (q, k, v, o, 1.0 / math.sqrt(d), h, h // k.shape[1], bm, bn, d, causal)
    kernel = _kernel(variant)
    return lambda: ct.launch(None, example.grid(q, bm), kernel, args)


def rel_err(out, ref) -> float:
    out, ref = out.float(), ref.float()
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.norm(out - ref) / torch.linalg.norm(ref)).item()


def check(label, fn_of, b=2, h=8, hkv=4, s=1000, d=128) -> dict:
    """Relative error of each candidate against fp32 math attention on a ragged shape."""
    errs = {}
    for causal in (False, True):
        q = torch.randn(b, h, s, d, device="cuda", dtype=DT)
        k = torch.randn(b, hkv, s, d, device="cuda", dtype=DT)
        v = torch.randn(b, hkv, s, d, device="cuda", dtype=DT)
        ref = sdpa(q.float(), k.float(), v.float(), causal, SDPBackend.MATH)
        o = torch.full_like(q, float("nan"))
        try:
            fn_of(q, k, v, o, causal)()
            torch.cuda.synchronize()
            errs["causal" if causal else "full"] = rel_err(o, ref)
        except Exception as e:              # a refused tile shape: say why
            errs["causal" if causal else "full"] = f"refused: {str(e).splitlines()[0][:160]}"
    return errs


def measure(shape, tiles: list[tuple]) -> dict:
    label, b, h, hkv, s, d, causal = shape
    flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
    q = torch.randn(b, h, s, d, device="cuda", dtype=DT)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=DT)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=DT)
    o = torch.empty_like(q)
    tf = lambda ms: flops / ms / 1e9          # noqa: E731  (TFLOP/s)
    row = {"shape": label, "flops": flops}
    row["cudnn"] = tf(do_bench(lambda: sdpa(q, k, v, causal, SDPBackend.CUDNN_ATTENTION),
                               return_mode="median"))
    try:
        row["fa2"] = tf(do_bench(lambda: sdpa(q, k, v, causal, SDPBackend.FLASH_ATTENTION),
                                 return_mode="median"))
    except RuntimeError as e:
        row["fa2"] = None
        row["fa2_error"] = str(e).splitlines()[0]
    best = None
    for cfg in TRITON_CONFIGS:
        try:
            t = tf(do_bench(triton_call(q, k, v, o, causal, cfg), return_mode="median"))
        except Exception:                   # a configuration that does not fit: next
            continue
        if best is None or t > best[0]:
            best = (t, cfg)
    row["triton"], row["triton_cfg"] = (best if best else (None, None))
    for bm, bn, *rest in tiles:
        key = tile_key(bm, bn, *rest)
        if len(rest) > 1 and rest[1] not in (None, d):
            continue                        # a tile meant for another head dim
        try:
            fn = tileir_call(q, k, v, o, causal, bm, bn, *rest[:1])
            fn()
            row[key] = tf(do_bench(fn, return_mode="median"))
        except Exception as e:
            row[key] = None
            row[key + " error"] = str(e).splitlines()[0][:200]
    return row


# ---------------------------------------------------------------------------
# head dim 256, and a variable-length batch through flash_attention_varlen
# ---------------------------------------------------------------------------
D256_SHAPES = [
    ("B4 H16 S4096 D256", 4, 16, 16, 4096, 256, False),
    ("B4 H16 S4096 D256 causal", 4, 16, 16, 4096, 256, True),
]
D256_TILES = [(128, 64), (128, 128)]     # the host's choice; the ring-less 128x128 plan

# 16 sequences from 1 to 8192 tokens (chunked prefill mixes long and short ones)
VARLEN_LENGTHS = [8192, 4096, 3000, 2048, 1500, 1024, 777, 512, 300, 256, 129, 100, 64, 17,
                  2, 1]
VARLEN_SHAPES = [
    ("varlen 16 seqs (40 k tokens) H32/8 D128", VARLEN_LENGTHS, 32, 8, 128, False),
    ("varlen 16 seqs (40 k tokens) H32/8 D128 causal", VARLEN_LENGTHS, 32, 8, 128, True),
]


def _torch_flash_varlen(q, k, v, cu, max_len, causal, scale):
    """torch's FlashAttention-2 varlen forward (aten::_flash_attention_forward) on the
    packed batch, or None where this torch lacks it or refuses the shapes."""
    try:
        fn = lambda: torch.ops.aten._flash_attention_forward(      # noqa: E731
            q, k, v, cu, cu, max_len, max_len, 0.0, causal, False, scale=scale)[0]
        fn()
        return fn
    except (AttributeError, RuntimeError, TypeError):
        return None


def _padded(x, lengths, max_len):
    """(batch, heads, max_len, D) of a packed (tokens, heads, D) batch, zero padded."""
    out = x.new_zeros(len(lengths), x.shape[1], max_len, x.shape[2])
    start = 0
    for i, n in enumerate(lengths):
        out[i, :, :n] = x[start:start + n].transpose(0, 1)
        start += n
    return out


def measure_varlen(shape) -> dict:
    """flash_attention_varlen on a packed ragged batch against torch's flash varlen
    (SDPA over the zero-padded batch where torch has none: a time for the padded
    work, counted at the packed batch's FLOPs), and its error against fp32."""
    label, lengths, h, hkv, d, causal = shape
    tokens, max_len = sum(lengths), max(lengths)
    flops = sum(4 * h * n * n * d * (0.5 if causal else 1.0) for n in lengths)
    q = torch.randn(tokens, h, d, device="cuda", dtype=DT)
    k = torch.randn(tokens, hkv, d, device="cuda", dtype=DT)
    v = torch.randn(tokens, hkv, d, device="cuda", dtype=DT)
    cu = torch.tensor([0] + [sum(lengths[:i + 1]) for i in range(len(lengths))],
                      dtype=torch.int32, device="cuda")
    scale = 1.0 / math.sqrt(d)
    o = torch.empty_like(q)
    tf = lambda ms: flops / ms / 1e9          # noqa: E731
    row = {"shape": label, "flops": flops}
    ours = lambda: example.flash_attention_varlen(q, k, v, cu, cu, max_len, max_len, scale,  # noqa: E731
                                                  causal=causal, out=o)
    ours()
    # error of a long and a short sequence against fp32 math attention
    errs = []
    for i in (2, len(lengths) - 3):
        a, n = sum(lengths[:i]), lengths[i]
        qs, ks, vs = (x[a:a + n].transpose(0, 1)[None] for x in (q, k, v))
        ref = sdpa(qs.float(), ks.float(), vs.float(), causal, SDPBackend.MATH)
        errs.append(rel_err(o[a:a + n].transpose(0, 1)[None], ref))
    row["tileir_err"] = max(errs)
    row["tileir"] = tf(do_bench(ours, return_mode="median"))
    flash = _torch_flash_varlen(q, k, v, cu, max_len, causal, scale)
    if flash is None and hkv != h:
        # a torch whose varlen entry point wants equal head counts: K/V repeated for it
        kr, vr = (x.repeat_interleave(h // hkv, dim=1) for x in (k, v))
        flash = _torch_flash_varlen(q, kr, vr, cu, max_len, causal, scale)
        row["flash_varlen_kv_repeated"] = flash is not None
    if flash is not None:
        row["flash_varlen"] = tf(do_bench(flash, return_mode="median"))
    qp, kp, vp = (_padded(x, lengths, max_len) for x in (q, k, v))
    for key, backend in (("cudnn_padded", SDPBackend.CUDNN_ATTENTION),
                         ("fa2_padded", SDPBackend.FLASH_ATTENTION)):
        try:
            row[key] = tf(do_bench(lambda: sdpa(qp, kp, vp, causal, backend),
                                   return_mode="median"))
        except RuntimeError as e:
            row[key] = None
            row[key + "_error"] = str(e).splitlines()[0][:200]
    return row


def varlen_table(rows) -> str:
    keys = ["tileir", "flash_varlen", "cudnn_padded", "fa2_padded"]
    out = ["| batch | " + " | ".join(keys) + " | tileir / flash varlen | rel. err |",
           "|" + "---|" * (len(keys) + 3)]
    for r in rows:
        cells = [f"{r[k]:.0f}" if r.get(k) else "-" for k in keys]
        vs = f"{r['tileir'] / r['flash_varlen']:.2f}" if r.get("flash_varlen") else "-"
        out.append(f"| {r['shape']} | " + " | ".join(cells) + f" | {vs} | "
                   f"{r['tileir_err']:.1e} |")
    return "\n".join(out)


def table(rows, tiles) -> str:
    keys = ["cudnn", "fa2", "triton"] + [tile_key(*t) for t in tiles]
    head = "| shape | " + " | ".join(keys) + " | best tileir / cuDNN | / Triton |"
    out = [head, "|" + "---|" * (len(keys) + 3)]
    for r in rows:
        cells = [f"{r[k]:.0f}" if r.get(k) else "refused" if k + " error" in r else "-"
                 for k in keys]
        ours = max((r.get(tile_key(*t)) or 0) for t in tiles)
        vs_triton = f"{ours / r['triton']:.2f}" if r.get("triton") else "-"
        out.append(f"| {r['shape']} | " + " | ".join(cells) +
                   f" | {ours / r['cudnn']:.2f} | {vs_triton} |")
    return "\n".join(out)


def plot(rows, tiles, path, device):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    keys = ["cudnn", "fa2", "triton"] + [tile_key(*t) for t in tiles]
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        ax.bar([x + i * width for x in range(len(rows))], [r.get(key) or 0 for r in rows],
               width, label=key)
    ax.set_xticks([x + 0.4 for x in range(len(rows))])
    ax.set_xticklabels([r["shape"] for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"attention forward, bf16 — {device}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run_extra() -> dict:
    """The D = 256 rows (the main table's columns, tileir at D256_TILES) and the
    variable-length batch, each with its own table."""
    checks = {}
    for bm, bn in D256_TILES:
        checks[f"tileir {bm}x{bn}"] = check(f"tileir {bm}x{bn}", lambda q, k, v, o, c:
                                            tileir_call(q, k, v, o, c, bm, bn), d=256)
    print("relative error vs fp32 math (B2 H8/4 S1000 D256):", json.dumps(checks), flush=True)
    d256 = []
    for shape in D256_SHAPES:
        d256.append(measure(shape, D256_TILES))
        print(json.dumps(d256[-1]), flush=True)
    print(table(d256, D256_TILES))
    varlen = []
    for shape in VARLEN_SHAPES:
        varlen.append(measure_varlen(shape))
        print(json.dumps(varlen[-1]), flush=True)
    print(varlen_table(varlen))
    return {"d256_checks": checks, "d256": d256, "varlen": varlen}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--quick", action="store_true", help="the first two shapes only")
    p.add_argument("--tiles", default="128x128,128x128:fma@128,256x64:w16+fma@64,128x64,64x64",
                   help="BMxBN[:variant],... (variants: " + ", ".join(VARIANTS) + ")")
    p.add_argument("--shapes", default="", help="only shapes whose label holds this text")
    p.add_argument("--only-extra", action="store_true",
                   help="only the D=256 rows and the variable-length batch")
    args = p.parse_args(argv)
    tiles = parse_tiles(args.tiles)
    device = torch.cuda.get_device_name()
    print(f"{device}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
          flush=True)
    if args.only_extra:
        extra = run_extra()
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "attention.json"), "w") as f:
            json.dump({"device": device, **extra}, f, indent=1)
        return 0
    checks = {"triton": check("triton", lambda q, k, v, o, c:
                              triton_call(q, k, v, o, c, TRITON_CONFIGS[0]))}
    shapes = [s for s in (SHAPES[:2] if args.quick else SHAPES) if args.shapes in s[0]]
    for bm, bn, variant, dim in tiles:
        key = tile_key(bm, bn, variant, dim)
        checks[key] = {}
        for d in sorted({s[5] for s in shapes if dim in (None, s[5])}):
            errs = check(key, lambda q, k, v, o, c: tileir_call(q, k, v, o, c, bm, bn,
                                                                variant), d=d)
            checks[key].update({f"D{d} {kind}": e for kind, e in errs.items()})
    print("relative error vs fp32 math (B2 H8/4 S1000):", json.dumps(checks), flush=True)
    rows = []
    for shape in shapes:
        rows.append(measure(shape, tiles))
        print(json.dumps(rows[-1]), flush=True)
    text = table(rows, tiles)
    print(text)
    extra = {}
    if not args.quick and not args.shapes:
        extra = run_extra()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "attention.json"), "w") as f:
        json.dump({"device": device, "checks": checks, "rows": rows, **extra}, f, indent=1)
    plot(rows, tiles, os.path.join(args.out, "attention.png"), device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
