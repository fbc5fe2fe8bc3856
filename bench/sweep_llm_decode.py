"""Tile sweep of tileir.llm's decode GEMMs (Llama-3-8B widths), weights streamed from memory.

    OUT=DIR python bench/sweep_llm_decode.py [M]        (M rows, default 1)
    OUT=DIR python bench/sweep_llm_decode.py [M] --gemv (the decode GEMVs against the
                                                         backend's tiles and torch)
    OUT=DIR python bench/sweep_llm_decode.py 1 --cand   (only the plan, gemv.CANDIDATES
                                                         and torch: a short run)
    OUT=DIR python bench/sweep_llm_decode.py 1 --early  (only the early-loads pairs,
                                                         the plan and torch: shorter)
    OUT=DIR python bench/sweep_llm_decode.py 1 --qkv-rope (QKV alone: the plan's gemv
                                                         with and without rope and
                                                         write_slots, gemv_qkv_rope)
    python bench/sweep_llm_decode.py --model            (no GPU: the SASS facts and the
                                                         streaming model of SWEPT and
                                                         CANDIDATES, without and with
                                                         early loads, docs/llm.md)

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
/combine two), ring stages, a producer warpgroup, FMA products; at one row
"gemv/cand/NAME/l2pf", gemv.CANDIDATES (persistent walks, deeper rings, finer tiles,
the fused SwiGLU), timed right after the plan so that the budget never cuts them.
Early weight loads (the `early_loads` option on the weights, Backend.gemv_early_loads)
are timed against the same kernel without them, neither with l2_prefetch, first:
"gemv/plan" and "gemv/plan/early"; where the plan is the FMA form (no ring: QKV at one
row) the tensor cores' ring forms instead, "gemv/ring/BNxBK/k1[/early]"; at one row
each non-persistent candidate, "gemv/cand/NAME[/early]".
QKV with its epilogue (Backend.qkv_rope): "qkv_rope/3launch", the plan's gemv then
`rope` and `write_slots` as the backend launches them, against "qkv_rope/fused"
(gemv_qkv_rope, one launch; "/w8" on 8 warps), in weight bytes x copy over all the
launches (with --gemv, and alone with --qkv-rope: writes qkv_rope_m{M}.json).
With --gemv: only
the backend's current kernels (plain/l2pf, tuned/l2pf), the GEMVs and torch, and the
LM head (128256 x 4096) too.
Prints the best four per shape, writes sweep_m{M}.json (--gemv: gemv_m{M}.json,
--early: early_m{M}.json) into $OUT.  The measurement behind tileir.llm.backend's decode tiles (_DECODE) and
Backend.decode_gemv."""
import os, sys, json, time
sys.path.insert(0, "bench")


# ------------------------------------------------------------------ --model (no GPU)
# What ptxas makes of each one-row plan (sm_90a) and a streaming model of it: the
# candidates of gemv.CANDIDATES were chosen by it, the GPU run (--gemv, --cand) judges.
SMS, COPY_BW, LATENCY_US, START_US = 132, 4.23e12, 0.9, 0.6
# issue: a warp of a dependent loop (waits, products, converts) at half an instruction
# a cycle, an SM's four schedulers at one each, at the H200's clock under load
CLOCK, WARP_IPC, SM_IPC = 1.75e9, 0.5, 4.0
SM_REGS, SM_THREADS, SM_SHARED, BLOCK_RESERVED = 65536, 2048, 233472, 1024
NEED_PER_SM = COPY_BW * LATENCY_US * 1e-6 / SMS     # Little's law: bytes in flight an SM


def _sass_ops(cubin):
    """[(address, opcode, operands)] of the cubin's SASS (cuobjdump)."""
    import re, subprocess, tempfile
    from tileir.backend.target.toolchain import find_cuda_tool
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin); f.flush()
        text = subprocess.run([find_cuda_tool("cuobjdump"), "-sass", f.name],
                              capture_output=True, text=True, check=True).stdout
    pat = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?"
                     r"([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)([^;]*);", re.M)
    return [(int(a, 16), op, rest) for a, op, rest in pat.findall(text)]


def _steady_loop(insns):
    """The innermost backward-branch body that loads weights and multiplies them (TMA
    and HGMMA/HMMA, or 16-byte loads and FFMA): the mbarrier waits' retry loops, which
    also branch back, multiply nothing."""
    import re
    loops = []
    for addr, op, rest in insns:
        t = re.search(r"0x([0-9a-f]+)", rest)
        if op.startswith("BRA") and t and int(t.group(1), 16) < addr:
            body = [i for i in insns if int(t.group(1), 16) <= i[0] <= addr]
            ops = {o.split(".")[0] for _, o, _ in body}
            if ops & {"UTMALDG", "LDG"} and ops & {"HGMMA", "HMMA", "FFMA", "FMUL"}:
                loops.append(body)
    return min(loops, key=len) if loops else []


def plan_facts(kind, n, k, p, hints):
    """Registers, threads, shared memory, ring stages, blocks an SM, bytes in flight an
    SM in the steady loop, waves, and the steady loop's SASS, of plan p at one row."""
    import re
    import numpy as np
    import tileir as ct
    from tileir.llm import gemv as G
    bf = np.dtype("bfloat16") if hasattr(np, "bfloat16") else __import__("ml_dtypes").bfloat16
    x, w, y = np.zeros((1, k), bf), np.zeros((n, k), bf), np.zeros((1, n), bf)
    lead = (2,) if kind in ("swiglu", "fused") else ()
    part = np.zeros(lead + (p.split, 1, n), np.float32)
    count = np.zeros(max(1, G.counters(n, p)), np.int32)
    kernel = {"linear": G.gemv, "add": G.gemv_add, "swiglu": G.gemv_swiglu,
              "fused": G.gemv_swiglu_fused}[kind].replace_hints(l2_prefetch=True, **hints)
    if kind == "add":
        args = (x, w, y, y, part, count) + tuple(p)
    elif kind in ("swiglu", "fused"):
        args = (x, x[0], 1e-5, w, w, y, part, count) + tuple(p) + (False,)
    else:
        args = (x, x[0], 1e-5, w, y, part, count) + tuple(p) + (False,)
    grid = G.grid(n, p) + (1,)
    ir = kernel.compile(args, "pipeline", target="sm_90a", grid=grid, sm_count=SMS).ir()
    stages = [int(v) for v in re.findall(r'"tile.ring_alloc"\(\) \{stages = (\d+)', ir)]
    ck = kernel.compile(args, target="sm_90a", grid=grid, sm_count=SMS)
    regs = int(re.findall(r"Used (\d+) registers", ck.ptxas_report)[0])
    spill = int(re.findall(r"(\d+) bytes spill stores", ck.ptxas_report)[0])
    threads, smem = ck.meta["num_threads"], ck.meta["shared_bytes"]
    warps = threads // 32
    per_warp = -(-regs * 32 // 256) * 256
    resident = min(SM_REGS // (per_warp * warps), SM_THREADS // threads, 32,
                   SM_SHARED // (smem + BLOCK_RESERVED))
    persistent = bool(ck.meta.get("persistent"))
    tiles = grid[0] * grid[1]
    blocks = min(tiles, SMS) if persistent else tiles
    body = _steady_loop(_sass_ops(ck.cubin))
    ops = [op for _, op, _ in body]
    # what a trip executes: the bounds checks' element-wise slow paths (a BSSY ..
    # BSYNC region the full tiles branch over, past its first few instructions) left out
    executed, skip = 0, False
    for i, o in enumerate(ops):
        if o.startswith("BSSY"):
            skip, start = True, i
        elif o.startswith("BSYNC"):
            skip = False
        if not skip or i - start < 4:
            executed += 1
    tile = p.bn * p.bk * 2 * (2 if kind == "fused" else 1)     # weight bytes a step
    if stages:          # a TMA ring: S - 1 weight tiles in flight while one is consumed
        flight = (stages[0] - 1) * tile
        load = "UTMALDG"
    else:               # plain 16-byte loads, issued a trip ahead (register prefetch)
        flight = tile
        load = "LDG.E.128"
    bytes_per_step = flight / (stages[0] - 1) if stages else flight
    on_sm = 1 if persistent else max(1, min(resident, -(-blocks // SMS)))
    return dict(regs=regs, spill=spill, threads=threads, smem=smem, stages=stages,
                resident=resident, persistent=persistent, blocks=blocks, tiles=tiles,
                waves=blocks / (SMS * (1 if persistent else resident)),
                flight_block=flight, flight_sm=flight * on_sm, load=load,
                loop_insns=len(ops), per_byte=len(ops) * warps / bytes_per_step,
                exec_per_byte=executed * warps / bytes_per_step, warps=warps, on_sm=on_sm,
                step=bytes_per_step, executed=executed,
                serial=sorted({o.split(".")[0] for o in ops
                               if o.startswith(("BAR", "SHFL", "MEMBAR", "DEPBAR"))}))


def predict(kind, n, k, p, f, early=False):
    """Fraction of copy bandwidth the fluid model gives plan p (facts f): blocks take
    slots (f["resident"] an SM, or one persistent block an SM walking its tiles), each
    streams after a latency's ramp at (its bytes in flight) / latency, all of them
    scaled down together when their sum passes the copy bandwidth; a block streams
    again after a ramp where its ring drains (gemv_swiglu's second loop); the kernel
    starts START_US after launch; a ticket adds two latencies at the end.  `early`
    (the `early_loads` option on the weights): the first wave's blocks, placed while
    the kernel before runs, have their ring's first tiles in flight at the wait, so
    they start without the ramp (a ring in the kernel's body only: not the FMA form's
    plain loads, not a persistent walk's ring)."""
    import heapq
    weights = n * k * 2 * (2 if kind in ("swiglu", "fused") else 1)
    per_tile = weights / f["tiles"]
    rate = f["flight_block"] / (LATENCY_US * 1e-6)          # bytes/s a block alone
    # ... unless its warps cannot issue the loop that fast (each warp runs the whole
    # trip), or the SM's schedulers cannot for all its blocks
    if f["executed"]:
        rate = min(rate, WARP_IPC * CLOCK * f["step"] / f["executed"],
                   SM_IPC * CLOCK / (f["exec_per_byte"] * f["on_sm"]))
    loops = 2 if kind == "swiglu" else 1
    if f["persistent"]:   # tile t to block t % P; one K loop's ring runs on across a
        P = f["blocks"]   # block's tiles, gemv_swiglu's two rings ramp in every tile
        work = [[per_tile * len(range(b, f["tiles"], P)),
                 loops * len(range(b, f["tiles"], P)) if loops > 1 else 1]
                for b in range(P)]
        slots, queue = P, []
    else:
        slots = min(f["blocks"], SMS * f["resident"])
        work, queue = [], [[per_tile, loops] for _ in range(f["tiles"])]
    dt, t = 0.02e-6, START_US * 1e-6
    active = []                                # [bytes left, ramps left, ramp ends at]
    first_ramp = 0.0 if early and f["stages"] and not f["persistent"] else LATENCY_US * 1e-6
    for w in (work or [queue.pop() for _ in range(slots)]):
        active.append([w[0], w[1], t + first_ramp, w[0] / w[1]])
    while active:
        streaming = [a for a in active if a[2] <= t]
        scale = min(1.0, COPY_BW / (rate * len(streaming))) if streaming else 1.0
        for a in streaming:
            a[0] -= rate * scale * dt
            # gemv_swiglu: the first weight done, its ring drained: the second's ramp
            if a[1] > 1 and a[0] <= a[3] * (a[1] - 1):
                a[1] -= 1
                a[2] = t + LATENCY_US * 1e-6
        t += dt
        done = [a for a in active if a[0] <= 0]
        active = [a for a in active if a[0] > 0]
        for _ in done:
            if queue:
                w = queue.pop()
                active.append([w[0], w[1], t + LATENCY_US * 1e-6, w[0] / w[1]])
    if p.split > 1 and p.ticket:
        t += 2 * LATENCY_US * 1e-6
    return weights / (t * COPY_BW)


def model_main():
    """Prints, per one-row shape, the swept plan and the candidates: what ptxas made
    of them and the model's fraction of copy bandwidth (docs/llm.md's table)."""
    from tileir.llm import gemv as G
    shapes = [("qkv", "linear", 6144, 4096), ("o", "add", 4096, 4096),
              ("down", "add", 4096, 14336), ("gate_up", "swiglu", 14336, 4096)]
    print(f"copy {COPY_BW / 1e12:.2f} TB/s, latency {LATENCY_US} us: "
          f"{NEED_PER_SM / 1024:.1f} KB in flight an SM needed")
    print("shape    plan                    regs thr  smem  st res waves  "
          "KB/blk KB/SM load      insn/B (run)  serial   model early")
    for name, kind, n, k in shapes:
        rows = [("swept", kind, G.SWEPT[n, k], {})]
        rows += [(c.name, "fused" if c.fused else kind, c.plan, c.hints(
                     {"linear": G.gemv, "add": G.gemv_add, "swiglu": G.gemv_swiglu}[kind]))
                 for c in G.CANDIDATES[n, k]]
        for label, kd, p, hints in rows:
            f = plan_facts(kd, n, k, p, hints)
            print(f"{name:8s} {label:23s} {f['regs']:4d} {f['threads']:3d} "
                  f"{f['smem'] // 1024:4d}K {','.join(map(str, f['stages'])) or '-':>3s} "
                  f"{'P' if f['persistent'] else f['resident']:>3} {f['waves']:5.2f} "
                  f"{f['flight_block'] / 1024:6.1f} {f['flight_sm'] / 1024:5.1f} "
                  f"{f['load']:9s} {f['per_byte']:.3f} ({f['exec_per_byte']:.3f}) "
                  f"{','.join(f['serial']) or '-':8s} "
                  f"{predict(kd, n, k, p, f):.2f}  {predict(kd, n, k, p, f, True):.2f}",
                  flush=True)
    return 0


if "--model" in sys.argv:
    sys.exit(model_main())
import torch
from llm_ops import copy_bandwidth
import tileir as ct
from tileir.llm import kernels as K
from tileir.llm import gemv as G
from tileir.llm.backend import _DECODE
bw = copy_bandwidth() * 1e12
print(f"copy {bw/1e12:.2f} TB/s", flush=True)
EARLY_ONLY = "--early" in sys.argv  # the GEMVs with and without early_loads, the plan, cuBLAS
# QKV alone: its plan's gemv, then with rope and write_slots, against gemv_qkv_rope
QKV_ROPE_ONLY = "--qkv-rope" in sys.argv
GEMV_ONLY = "--gemv" in sys.argv or "--cand" in sys.argv or EARLY_ONLY or QKV_ROPE_ONLY
CAND_ONLY = "--cand" in sys.argv or EARLY_ONLY  # the plan, the candidates, cuBLAS
pos = [a for a in sys.argv[1:] if not a.startswith("--")]
M = int(pos[0]) if pos else 1
# the sweep stops adding candidates past this many seconds (SWEEP_BUDGET_S overrides)
BUDGET_S = float(os.environ.get("SWEEP_BUDGET_S", 150 if EARLY_ONLY else
                                60 if QKV_ROPE_ONLY else 420 if GEMV_ONLY else 230))
# --early: each row timed three times, the best kept (the pairs differ by a few percent,
# about what runs of one kernel move)
REPEATS = 3 if EARLY_ONLY else 1
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
    # the weights' first ring tiles loaded before the wait for the previous kernel
    # (Backend.gemv_early_loads), against "gemv/plan" (neither with l2_prefetch)
    if not plan.fma:
        out.append(("gemv/plan/early", "early", plan))
    else:           # (the FMA form has no ring): the tensor cores' ring forms, both ways
        bm = 8 if M <= 8 else 16
        for bn, bk in ((32, 128), (64, 128)):
            p = G.Plan(bm, bn, bk, 1, False)
            out += [(f"gemv/ring/{bn}x{bk}/k1", None, p),
                    (f"gemv/ring/{bn}x{bk}/k1/early", "early", p)]
    if plan.split > 1:              # the split's second launch, as before the ticket
        out.append(("gemv/plan/combine/l2pf", "l2pf", plan._replace(ticket=False)))
    if M == 1:      # the streaming model's candidates (gemv.CANDIDATES), before the budget
        for c in G.CANDIDATES.get((n, k), ()):
            hints = dict(c.hints(), l2_prefetch=True)
            if c.fused:
                hints["fused"] = True
            if c.early:             # its early_loads (resolved by run_gemv: the kernel's)
                hints["early"] = True
            out.append((f"gemv/cand/{c.name}/l2pf", hints, c.plan))
            # without l2_prefetch, without and with early loads (a persistent walk's ring
            # is not the body's: none); an early candidate's row is its twin's pair
            plain = {h: v for h, v in hints.items() if h not in ("l2_prefetch", "early")}
            pair = [(f"gemv/cand/{c.name}", plain, c.plan),
                    (f"gemv/cand/{c.name}/early", dict(plain, early=True), c.plan)]
            if c.early:
                pair = [(f"gemv/cand/{c.name}", dict(plain, early=True), c.plan)]
            if not c.persistent:
                names = {v[0] for v in out}
                out += [v for v in pair if v[0] not in names]
    if EARLY_ONLY:      # each early row, the row it is timed against, and the plan
        names = {c for c, _, _ in out}
        return [v for v in out if v[0] == "gemv/plan" or v[0].endswith("/early")
                or v[0] + "/early" in names]
    if CAND_ONLY:
        return out
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
if GEMV_ONLY and not (EARLY_ONLY or QKV_ROPE_ONLY):   # (--early: the head's GEMV walks
    shapes.append(("lm_head", 128256, 4096))        # persistent, no early loads)
if QKV_ROPE_ONLY:
    shapes = shapes[:1]
# QKV's epilogue in the GEMV (gemv_qkv_rope, Backend.qkv_rope) against the plan's gemv
# followed by `rope` (q and k) and `write_slots` (k and v), as Backend launches them:
# Llama-3-8B's 32 q and 8 kv heads of 128, each row at its own position and slot.  Both
# in weight bytes x copy over the launches' whole time (the two launches' gaps inside),
# so the pair shows what a step gains per layer; "/w8": the fused kernel on 8 warps
# (the plan's gemv takes 256 threads for its 8 x 256 tile, the fused one 128 for its
# two 4 x 256 halves).
QKV_ROPE = (("qkv_rope/3launch", None), ("qkv_rope/fused", {}),
            ("qkv_rope/fused/w8", {"num_warps": 8}))


def qkv_rope_fn(hints, x, ws_, y):
    """The COPIES QKV launches with RoPE and the cache write, fused (hints: the fused
    kernel's options) or as three launches (hints None)."""
    from tileir.examples import next_pow2
    hq, hkv, d, page = 32, 8, 128, 64
    p = G.plan(M, ws_[0].shape[0], ws_[0].shape[1])
    n = ws_[0].shape[0]
    ang = torch.rand(8192, d // 2, device="cuda") * 6.3
    cos, sin = ang.cos(), ang.sin()
    pos = torch.randint(0, 8192, (M,), device="cuda", dtype=torch.int32)
    cache = torch.zeros(64, page, 2 * hkv, d, device="cuda", dtype=torch.bfloat16)
    slots = torch.randperm(64 * page, device="cuda")[:M].to(torch.int32)
    part = torch.empty(p.split, M, n, device="cuda", dtype=torch.float32)
    count = torch.zeros(max(1, G.counters(n, p)), device="cuda", dtype=torch.int32)
    grid = G.grid(n, p) + (1,)
    if hints is not None:
        if not G.qkv_rope_fits(d, p):
            raise ValueError(f"gemv_qkv_rope does not take the plan {p}")
        kernel = G.gemv_qkv_rope.replace_hints(**G.early_hints(G.gemv_qkv_rope), **hints)
        def fn():
            for i in range(COPIES):
                ct.launch(None, grid, kernel, (x, x, 0.0, ws_[i], y, part, count, cos, sin,
                                               pos, cache, slots) + tuple(p) + (False, d))
        return fn
    if p.split > 1 and not p.ticket:
        raise ValueError("the three launches' gemv takes no combine launch here")
    kernel = G.gemv.replace_hints(**G.early_hints(G.gemv))
    heads = y.view(M, -1, d)[:, :hq + hkv]
    flat = cache.view(64, page, -1)
    tile = min(next_pow2(2 * hkv * d), 1024)
    def fn():
        for i in range(COPIES):
            ct.launch(None, grid, kernel, (x, x, 0.0, ws_[i], y, part, count) + tuple(p) +
                      (False,))
            ct.launch(None, (M, 1, 1), K.rope, (heads, heads, cos, sin, pos,
                                                next_pow2(hq + hkv), d // 2))
            ct.launch(None, (M, ct.cdiv(2 * hkv * d, tile), 1), K.write_slots,
                      (y[:, hq * d:], flat, slots, page, tile))
    return fn


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
        if hints == "early":
            hints = dict(early=True)
        if isinstance(hints, dict) and hints.get("fused"):      # a fused candidate
            kind, hints = G.gemv_swiglu_fused, {h: v for h, v in hints.items() if h != "fused"}
        if isinstance(hints, dict) and hints.get("early"):      # early_loads on the weights
            hints = dict({h: v for h, v in hints.items() if h != "early"},
                         **G.early_hints(kind))
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
    if EARLY_ONLY:      # (no GEMM-tile kernels: the GEMVs' pairs alone)
        cands = []
    elif M <= 64:       # the first tiles into L2 before the wait (l2_prefetch), as retiled
        cands.append(("plain/l2pf", base.replace_hints(l2_prefetch=True), plain_tiles))
        if base.name in _DECODE:        # ... and with tileir.llm's decode tiles, both ways
            tuned, tl = _DECODE[base.name][:2]
            cands += [("tuned", tuned, tl),
                      ("tuned/l2pf", tuned.replace_hints(l2_prefetch=True), tl)]
    if M <= 16 and name == "qkv":       # the QKV epilogue pair, before the budget
        cands += [(c, ("qkv_rope", h), None) for c, h in QKV_ROPE]
    if QKV_ROPE_ONLY:   # ... beside the plan's gemv alone and torch
        cands = [("gemv/plan", ("gemv", None), G.plan(M, n, k))] + cands[-len(QKV_ROPE):]
    elif M <= 16:       # the decode GEMVs (Backend.decode_gemv), first: the budget
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
            elif isinstance(kernel, tuple) and kernel[0] == "qkv_rope":
                fn = qkv_rope_fn(kernel[1], x, ws_, y)
            elif isinstance(kernel, tuple):
                fn = run_gemv(kernel[1], tl)
            else:
                fn = run(kernel, *tl)
            us = min(graph_us(fn) for _ in range(REPEATS))
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
    cand = sorted(((v, c[len("gemv/cand/"):]) for c, v in res.items()
                   if c.startswith("gemv/cand/")), key=lambda t: -t[0] if isinstance(t[0], float) else 0)
    if cand:            # the model's candidates against the plan (x copy; errors as text)
        print(f"  {name} candidates vs plan {res.get('gemv/plan/l2pf')}:", cand, flush=True)
    if "qkv_rope/fused" in res:         # the epilogue in the GEMV against the launches
        print(f"  {name} QKV + RoPE + cache write (x copy over all launches): three "
              f"launches {res.get('qkv_rope/3launch')}, fused {res.get('qkv_rope/fused')}, "
              f"fused on 8 warps {res.get('qkv_rope/fused/w8')}; the gemv alone "
              f"{res.get('gemv/plan')}", flush=True)
    early = {c: v for c, v in res.items() if c.endswith("/early")}
    if early:           # early weight loads against the same kernel without them
        print(f"  {name} early loads (without -> with):", {
            c[:-len("/early")]: (res.get(c[:-len("/early")]), v) for c, v in early.items()},
            flush=True)
    out.append(res)
    del ws_, wu
    torch.cuda.empty_cache()
import os
stem = ("early" if EARLY_ONLY else "qkv_rope" if QKV_ROPE_ONLY else "gemv" if GEMV_ONLY
        else "sweep")
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), f"{stem}_m{M}.json"), "w"), indent=1)
