"""python -m tileir.llm generate|bench|check|random (docs/llm.md)."""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def _common(p):
    p.add_argument("model_dir")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--device", default=None, choices=["cuda", "numpy"],
                   help="default: cuda when torch sees a GPU, else the NumPy interpreter")
    p.add_argument("--page-size", type=int, default=None,
                   help="KV-cache slots a page (default: 64)")
    p.add_argument("--no-cuda-graphs", action="store_true")
    p.add_argument("--fuse-norm", action="store_true",
                   help="each RMSNorm inside the GEMM that reads it")
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--tp", type=int, default=1, metavar="N",
                   help="tensor parallelism over N ranks, one process each: run under "
                        "`torchrun --nproc-per-node N -m tileir.llm ...` (docs/llm.md)")


def _llm(args, **kw):
    from . import LLM
    return LLM(args.model_dir, dtype=args.dtype, device=args.device, page_size=args.page_size,
               cuda_graphs=not args.no_cuda_graphs, fuse_norm=args.fuse_norm,
               max_model_len=args.max_model_len, tensor_parallel_size=args.tp, **kw)


def _say(llm):
    """print, on the first rank only (every rank of a tensor-parallel run computes the
    same tokens)."""
    first = llm.shard.rank == 0
    return lambda *a, **kw: print(*a, **kw) if first else None


def generate(args):
    llm = _llm(args)
    prompts = [[int(t) for t in s.split(",")] for s in args.ids] + list(args.prompt)
    if not prompts:
        sys.exit("give --prompt TEXT or --ids 1,2,3")
    tok, say = llm.tokenizer, _say(llm)
    for i, t in llm.stream(prompts, args.max_new_tokens, args.temperature, args.top_k,
                           args.top_p, ignore_eos=args.ignore_eos):
        piece = tok.decode([t]) if tok is not None else f" {t}"
        say(f"[{i}] {piece}" if len(prompts) > 1 else piece, end="" if len(prompts) == 1
            else "\n", flush=True)
    say()


def bench(args):
    llm = _llm(args, max_batch=max(args.batch, 1))
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, llm.cfg.vocab_size, args.prompt_len).tolist()
               for _ in range(args.batch)]
    eng = llm.engine
    from .engine import SamplingParams
    params = SamplingParams(max_new_tokens=args.new_tokens, ignore_eos=True)
    for p in prompts:                      # warm-up: compile every kernel, capture graphs
        eng.add_request(p[:8], SamplingParams(max_new_tokens=3, ignore_eos=True))
    while eng.has_work():
        eng.step()
    sync = (lambda: llm.backend.torch.cuda.synchronize()) if llm.backend.torch else (lambda: None)
    for p in prompts:
        eng.add_request(p, params)
    sync()
    t0 = time.perf_counter()
    eng.step()                              # the whole batch's prefill
    sync()
    t1 = time.perf_counter()
    steps = 0
    while eng.has_work():
        eng.step()
        steps += 1
    sync()
    t2 = time.perf_counter()
    res = {"model_dir": args.model_dir, "dtype": args.dtype, "tp": args.tp, "batch": args.batch,
           "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
           "prefill_s": t1 - t0, "prefill_tok_s": args.batch * args.prompt_len / (t1 - t0),
           "decode_step_ms": 1e3 * (t2 - t1) / max(steps, 1),
           "decode_tok_s": args.batch * steps / max(t2 - t1, 1e-9)}
    _say(llm)(json.dumps(res, indent=1))


def check(args):
    from .check import compare
    llm = _llm(args)
    rng = np.random.default_rng(args.seed)
    prompts = [rng.integers(0, llm.cfg.vocab_size, n).tolist() for n in args.prompt_lens]
    res = compare(llm, prompts, args.steps)
    tol = 2e-3 if args.dtype == "float32" else 5e-2
    agree = "agree" if res["tokens_agree"] else "DIFFER"
    _say(llm)(f"logits: max |ours - ref| / max |ref| = {res['max_rel_err']:.2e} "
              f"(tolerance {tol:g}); greedy tokens {agree}")
    if res["max_rel_err"] > tol or (args.dtype == "float32" and not res["tokens_agree"]):
        sys.exit(1)


def random(args):
    from . import checkpoint
    raw = json.loads(json.dumps(checkpoint.TINY[args.arch]))
    for item in args.set:
        key, _, value = item.partition("=")
        raw[key] = json.loads(value)
    checkpoint.write_random(args.out_dir, raw, args.seed)
    print(f"wrote {args.out_dir}/config.json and model.safetensors ({args.arch})")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tileir.llm")
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="generate from a prompt, streaming tokens")
    _common(g)
    g.add_argument("--prompt", action="append", default=[], help="text (needs tokenizer.json)")
    g.add_argument("--ids", action="append", default=[], help="token ids, comma-separated")
    g.add_argument("--max-new-tokens", type=int, default=32)
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--ignore-eos", action="store_true")
    g.set_defaults(fn=generate)
    b = sub.add_parser("bench", help="prefill and decode timings on random prompts")
    _common(b)
    b.add_argument("--batch", type=int, default=1)
    b.add_argument("--prompt-len", type=int, default=128)
    b.add_argument("--new-tokens", type=int, default=128)
    b.set_defaults(fn=bench)
    c = sub.add_parser("check", help="logits and greedy tokens against the NumPy reference")
    _common(c)
    c.add_argument("--prompt-lens", type=int, nargs="+", default=[7, 12])
    c.add_argument("--steps", type=int, default=8)
    c.add_argument("--seed", type=int, default=0)
    c.set_defaults(fn=check)
    r = sub.add_parser("random", help="write a random-weight checkpoint (tiny configurations)")
    r.add_argument("out_dir")
    r.add_argument("--arch", choices=["llama", "deepseek_v3"], default="llama")
    r.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="override a config.json field, e.g. --set num_hidden_layers=4")
    r.add_argument("--seed", type=int, default=0)
    r.set_defaults(fn=random)
    args = ap.parse_args(argv)
    from .config import ModelDirError
    from .engine import ContextLengthError
    from .parallel import shutdown
    try:
        args.fn(args)
    except (ModelDirError, ContextLengthError) as e:
        sys.exit(f"error: {e}")
    finally:
        if getattr(args, "tp", 1) > 1:
            shutdown()


if __name__ == "__main__":
    main()
