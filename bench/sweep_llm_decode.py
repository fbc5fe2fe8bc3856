"""Tile sweep of tileir.llm's decode GEMMs (Llama-3-8B widths), weights streamed from memory.

    OUT=DIR python bench/sweep_llm_decode.py [M]        (M rows, default 1)
    OUT=DIR python bench/sweep_llm_decode.py [M] --gemv (the decode GEMVs against the
                                                         backend's tiles and torch)

Each variant: 8 launches over 8 weight copies in one CUDA graph (no launch finds its
weight in L2), replayed; weight bytes over the time a launch, against the run's copy
bandwidth (bench/llm_ops.copy_bandwidth); with more than 64 rows (a prompt) TFLOP/s,
over the tiles of large GEMMs.  Variants: the kernel as the compiler
retiles it ("plain"), retile=False with explicit tiles, ring stages and warp
specialization, tileir.llm's decode tiles ("tuned"), at decode rows the plain and tuned
kernels with `l2_prefetch` ("/l2pf"), and torch (cuBLAS; SwiGLU as two products and
silu * up).  At decode rows also tileir.llm.gemv's kernels: "gemv/plan/l2pf" as
Backend.decode_gemv launches them (gemv.plan's tiles and split, the l2_prefetch
option; a split K added up by each weight-row slice's last block, one launch),
"gemv/plan/combine/l2pf" the same plan with the combine kernel's second launch
instead (where the plan splits K; both launches in the timed graph), and
"gemv/BNxBK/kS[/combine][/sN][/ws][/fma]" other tiles, splits (one launch, or with
/combine two), ring stages, a producer warpgroup, FMA products.  With --gemv: only
the backend's current kernels (plain/l2pf, tuned/l2pf), the GEMVs and torch, and the
LM head (128256 x 4096) too.
Prints the best four per shape, writes sweep_m{M}.json (--gemv: gemv_m{M}.json) into
$OUT.  The measurement behind tileir.llm.backend's decode tiles (_DECODE) and
Backend.decode_gemv."""
import os, sys, json, time, torch
sys.path.insert(0, "bench")
from llm_ops import copy_bandwidth
import tileir as ct
from tileir.llm import kernels as K
from tileir.llm import gemv as G
from tileir.llm.backend import _DECODE
bw = copy_bandwidth() * 1e12
print(f"copy {bw/1e12:.2f} TB/s", flush=True)
GEMV_ONLY = "--gemv" in sys.argv
pos = [a for a in sys.argv[1:] if not a.startswith("--")]
M = int(pos[0]) if pos else 1
# the sweep stops adding candidates past this many seconds (SWEEP_BUDGET_S overrides)
BUDGET_S = float(os.environ.get("SWEEP_BUDGET_S", 420 if GEMV_ONLY else 230))
COPIES = 8
def graph_us(fn):
    fn(); torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        fn(); torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            fn()
    torch.cuda.synchronize()
    for _ in range(3): g.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True)
    e0.record()
    for _ in range(20): g.replay()
    e1.record(); torch.cuda.synchronize()
    return e0.elapsed_time(e1) / 20 / COPIES * 1e3
TILES = [(64, 32, 256), (64, 64, 128), (64, 64, 256), (64, 128, 64), (64, 128, 128), (64, 16, 256)]
variants = {}
def kern(fn, stages, ws):
    key = (fn.__name__, stages, ws)
    if key not in variants:
        opts = dict(retile=False, warp_specialize=ws)
        if stages: opts["num_stages"] = stages
        variants[key] = ct.kernel(**opts)(fn)
    return variants[key]
out = []
t0 = time.time()

def gemv_variants(n, k, swiglu=False):
    """(name, hints, plan) of the decode GEMVs for an (M, k) x (n, k)^T product: the
    plan as the backend launches it (and without l2_prefetch), other tiles and splits
    (64 weight rows on wgmma, 16-32 on mma.sync), deeper rings, a producer warpgroup,
    at one row the FMA form, and for SwiGLU gemv_swiglu_fused ("gemv/fused/...": both
    weights in one loop; hints "fused")."""
    plan = G.plan(M, n, k)
    out = [("gemv/plan/l2pf", "l2pf", plan), ("gemv/plan", None, plan)]
    if plan.split > 1:              # the split's second launch, as before the ticket
        out.append(("gemv/plan/combine/l2pf", "l2pf", plan._replace(ticket=False)))
    for bn, bk, splits in ((64, 128, (1, 2, 4, 8)), (64, 256, (1, 2)), (128, 128, (1, 2)),
                           (32, 128, (1, 2, 4)), (32, 256, (1, 2)), (16, 256, (1, 2)),
                           (16, 512, (1,))):
        for sp in splits:
            p = plan._replace(bn=bn, bk=bk, split=sp, ticket=sp > 1)
            if p != plan and ct.cdiv(k, bk) >= 2 * sp:
                out.append((f"gemv/{bn}x{bk}/k{sp}/l2pf", "l2pf", p))
                if sp > 1:
                    out.append((f"gemv/{bn}x{bk}/k{sp}/combine/l2pf", "l2pf",
                                p._replace(ticket=False)))
    for hint, tag in ((dict(num_stages=6), "s6"), (dict(num_stages=8), "s8"),
                      (dict(warp_specialize=True), "ws")):
        out.append((f"gemv/plan/{tag}/l2pf", dict(hint, l2_prefetch=True), plan))
    if M == 1:                         # one row on the FMA units, 16-byte weight loads
        for bn, bk, sp in ((8, 256, 1), (16, 256, 1), (8, 512, 2), (4, 512, 1)):
            out.append((f"gemv/{bn}x{bk}/k{sp}/fma/l2pf", "l2pf",
                        G.Plan(1, bn, bk, sp, True, sp > 1)))
    if swiglu:
        for bn, bk in ((64, 128), (32, 128), (16, 256)):
            out.append((f"gemv/fused/{bn}x{bk}/k1/l2pf", "fused",
                        plan._replace(bn=bn, bk=bk, split=1)))
    return out


shapes = [("qkv", 6144, 4096), ("o", 4096, 4096), ("down", 4096, 14336), ("gate_up", 14336, 4096)]
if GEMV_ONLY:
    shapes.append(("lm_head", 128256, 4096))
for name, n, k in shapes:
    ws_ = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(COPIES)]
    wu = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(COPIES)] if name == "gate_up" else None
    x = torch.randn(M, k, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(M, n, device="cuda",        # the LM head's logits are float32
                    dtype=torch.float32 if name == "lm_head" else torch.bfloat16)
    nbytes = n * k * 2 * (2 if wu else 1)
    res = {"shape": name, "M": M}
    def run_gemv(hints, p):
        """gemv (+ its combine when K is split) over the copies, as Backend._gemv."""
        kind = {"qkv": G.gemv, "lm_head": G.gemv, "o": G.gemv_add, "down": G.gemv_add,
                "gate_up": G.gemv_swiglu}[name]
        fin = {G.gemv: G.gemv_combine, G.gemv_add: G.gemv_combine_add,
               G.gemv_swiglu: G.gemv_combine_swiglu}[kind]
        if hints == "fused":
            kind, hints = G.gemv_swiglu_fused, "l2pf"
        if hints == "l2pf":
            hints = dict(l2_prefetch=True)
        kernel = kind.replace_hints(**hints) if hints else kind
        swiglu = kind in (G.gemv_swiglu, G.gemv_swiglu_fused)
        lead = (2,) if swiglu else ()
        part = torch.empty(lead + (p.split, M, n), device="cuda", dtype=torch.float32)
        count = torch.zeros(max(1, G.counters(n, p)), device="cuda", dtype=torch.int32)
        tiles = tuple(p)
        grid = G.grid(n, p) + (1,)
        ctiles = G.combine_tiles(M, n, p)
        cgrid = (ct.cdiv(n, ctiles[2]), 1, 1)
        def args(i):
            # (gemv and the SwiGLU kernels: x as RMSNorm's weight, unread without NORM)
            if swiglu:
                return (x, x, 0.0, ws_[i], wu[i], y, part, count), (part, y)
            if kind is G.gemv_add:
                return (x, ws_[i], y, y, part, count), (part, y, y)
            return (x, x, 0.0, ws_[i], y, part, count), (part, y)
        flag = () if kind is G.gemv_add else (False,)           # NORM
        def fn():
            for i in range(COPIES):
                a, c = args(i)
                ct.launch(None, grid, kernel, a + tiles + flag)
                if p.split > 1 and not p.ticket:
                    ct.launch(None, cgrid, fin, c + ctiles)
        return fn

    def run(kernel, bm, bn, bk):
        grid = (ct.cdiv(M, bm), ct.cdiv(n, bn), 1)
        if name == "gate_up":
            return lambda: [ct.launch(None, grid, kernel, (x, x, 0.0, ws_[i], wu[i], y, bm, bn, bk, False, False)) for i in range(COPIES)]
        if name in ("o", "down"):
            return lambda: [ct.launch(None, grid, kernel, (x, ws_[i], y, y, bm, bn, bk, False)) for i in range(COPIES)]
        if name == "lm_head":          # float32 logits, as the model's head
            return lambda: [ct.launch(None, grid, kernel, (x, x, 0.0, ws_[i], y, bm, bn, bk, False, False)) for i in range(COPIES)]
        return lambda: [ct.launch(None, grid, kernel, (x, x, 0.0, ws_[i], y, bm, bn, bk, False, False)) for i in range(COPIES)]
    base = {"qkv": K.linear, "lm_head": K.linear, "o": K.linear_add, "down": K.linear_add,
            "gate_up": K.linear_swiglu}[name]
    plain_tiles = (128, 64, 64) if name == "gate_up" else (128, 128, 64)
    cands = [("plain", base, plain_tiles)]
    if M <= 64:         # the first tiles into L2 before the wait (l2_prefetch), as retiled
        cands.append(("plain/l2pf", base.replace_hints(l2_prefetch=True), plain_tiles))
        if base.name in _DECODE:        # ... and with tileir.llm's decode tiles, both ways
            tuned, tl = _DECODE[base.name][:2]
            cands += [("tuned", tuned, tl),
                      ("tuned/l2pf", tuned.replace_hints(l2_prefetch=True), tl)]
    if M <= 16:         # the decode GEMVs (Backend.decode_gemv), first: the budget
        cands += [(c, ("gemv", h), p) for c, h, p in gemv_variants(n, k, name == "gate_up")]
    if GEMV_ONLY:
        tiles, depths = [], ()
    elif M > 64:        # prefill rows: the tiles of large GEMMs, deeper rings
        tiles = [(128, 128, 64), (128, 256, 64)] if name != "gate_up" else \
            [(128, 64, 64), (128, 128, 64)]
        depths = (None, 4)
    else:
        tiles = TILES if name != "gate_up" else \
            [(64, 32, 256), (64, 64, 128), (64, 32, 128), (64, 16, 256)]
        depths = (None, 8)
    for (bm, bn, bk) in tiles:
        for stages in depths:
            cands.append((f"{bm}x{bn}x{bk}/s{stages or 'auto'}/ws", kern(base.fn, stages, True), (bm, bn, bk)))
        cands.append((f"{bm}x{bn}x{bk}/sauto/nows", kern(base.fn, None, False), (bm, bn, bk)))
    cands.insert(0, ("torch", None, None))     # first: the sweep's budget may cut the tail
    for cname, kernel, tl in cands:
        try:
            if kernel is None:
                if name == "gate_up":
                    fn = lambda: [torch.mul(torch.nn.functional.silu(x @ ws_[i].T), x @ wu[i].T) for i in range(COPIES)]
                elif name == "lm_head":
                    fn = lambda: [torch.matmul(x, ws_[i].T) for i in range(COPIES)]
                else:
                    fn = lambda: [torch.matmul(x, ws_[i].T, out=y) for i in range(COPIES)]
            elif isinstance(kernel, tuple):
                fn = run_gemv(kernel[1], tl)
            else:
                fn = run(kernel, *tl)
            us = graph_us(fn)
            # one-row products: weight bytes x copy bandwidth; prefill rows: TFLOP/s
            res[cname] = round(nbytes / (us * 1e-6) / bw, 3) if M <= 64 else \
                round(nbytes * M / (us * 1e-6) / 1e12, 1)
        except Exception as e:
            res[cname] = f"{type(e).__name__}: {e}"[:120]
        if time.time() - t0 > BUDGET_S:
            break
    best = sorted(((v, c) for c, v in res.items() if isinstance(v, float)), reverse=True)[:4]
    print(name, "plain", res.get("plain"), "torch", res.get("torch"), "gemv/plan/l2pf",
          res.get("gemv/plan/l2pf"), "gemv/plan/combine/l2pf",
          res.get("gemv/plan/combine/l2pf"), "best", best, flush=True)
    out.append(res)
    del ws_, wu
    torch.cuda.empty_cache()
import os
stem = "gemv" if GEMV_ONLY else "sweep"
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), f"{stem}_m{M}.json"), "w"), indent=1)
