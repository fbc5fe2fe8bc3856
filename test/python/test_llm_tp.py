"""Tensor parallelism of tileir.llm on the CPU: the tiny Llama and DeepSeek-V3 models split
over 2 and 4 ranks, one process each, torch.distributed's gloo backend between them and
every kernel in the interpreter, against the same model on one rank: logits within
float32 rounding, the same greedy tokens.  At the end, the same over NCCL on two GPUs
(marked gpu; this file is also the script torchrun starts for its ranks)."""

import copy
import datetime
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("safetensors")

from tileir.llm import LLM, SamplingParams, Shard  # noqa: E402
from tileir.llm import checkpoint, config, parallel  # noqa: E402

# Ragged sizes that still split: GQA of two query heads a KV head at 4 ranks, a
# vocabulary that does not divide by 4 (the last slice padded); DeepSeek with tied
# embeddings (one vocabulary-split table for both ends), MLA heads one a rank at 4 ranks,
# two routed experts a rank, one dense layer and one MoE layer.
LLAMA = {"num_attention_heads": 8, "num_key_value_heads": 4, "hidden_size": 64,
         "vocab_size": 302}
DEEPSEEK = {"tie_word_embeddings": True, "vocab_size": 298}
PROMPT_LENS = (9, 3, 14)
STEPS = 4


def _write(tmp_path, arch, overrides, seed):
    raw = copy.deepcopy(checkpoint.TINY[arch])
    raw.update(overrides)
    return checkpoint.write_random(str(tmp_path / arch), raw, seed=seed)


def _run(llm, prompts, steps):
    """Greedy generation through the engine, two batch slots so that a request joins
    mid-run: each prompt's tokens and its logits at each step."""
    eng = llm.engine
    params = SamplingParams(max_new_tokens=steps, ignore_eos=True)
    index = {eng.add_request(p, params): i for i, p in enumerate(prompts)}
    tokens = [[] for _ in prompts]
    logits = [[] for _ in prompts]
    while eng.has_work():
        new = eng.step()
        got = llm.backend.numpy(eng.last_logits)
        for row, (req, tok) in enumerate(new):
            tokens[index[req.id]].append(tok)
            logits[index[req.id]].append(got[row].copy())
    return tokens, [np.stack(x) for x in logits]


def _cases(tmp_path, size):
    """The models every rank compares with one rank (name: (dir, dtype)), a one-layer
    model for sampling, the prompts: fresh weights and prompts each run."""
    rng = np.random.default_rng()
    seed = lambda: int(rng.integers(1 << 30))  # noqa: E731
    cases = {
        "llama": (_write(tmp_path, "llama", LLAMA, seed()), "float32"),
        "deepseek": (_write(tmp_path, "deepseek_v3", DEEPSEEK, seed()), "float32"),
    }
    short = _write(tmp_path / "short", "llama", {**LLAMA, "num_hidden_layers": 1}, seed())
    if size == 2:                  # bfloat16 arrays through the gloo collectives
        cases["llama-bf16"] = (short, "bfloat16")
    prompts = [rng.integers(0, 298, n).tolist() for n in PROMPT_LENS]
    return cases, short, prompts


def _llm(model_dir, dtype, **kw):
    return LLM(model_dir, dtype=dtype, device="numpy", page_size=16, max_batch=2, **kw)


def _worker(rank, size, store, cases, short, prompts, out_dir):
    """One rank: the process group over a file store, then each model's run; its
    results pickled for the test to read."""
    import torch.distributed as dist
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=size, timeout=datetime.timedelta(seconds=240))
    try:
        res = {}
        for name, (model_dir, dtype) in cases.items():
            llm = _llm(model_dir, dtype, tensor_parallel_size=size)
            res[name] = _run(llm, prompts, STEPS)
            res[name + "/heads"] = getattr(llm.model, "hq", getattr(llm.model, "heads", None))
        # random sampling, each rank with its own seed: rank 0's tokens win everywhere
        llm = _llm(short, "float32", tensor_parallel_size=size, seed=rank)
        res["sampled"] = [o.token_ids for o in llm.generate(prompts, max_new_tokens=5,
                                                            temperature=1.0)]
        res["env"] = {k: os.environ.get(k) for k in parallel.MULTICAST_OFF}
        res["agree_min"] = llm.shard.agree_min(10 + rank)      # the GPU's page count agreement
        with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
            pickle.dump(res, f)
    finally:
        dist.destroy_process_group()


def _torch():
    """torch, or a skip where it is missing; CI installs it (the test extra), and there
    its absence fails the run instead."""
    if os.environ.get("CI") == "true":
        import torch
        return torch
    return pytest.importorskip("torch")


def _spawn(tmp_path, size):
    torch = _torch()
    cases, short, prompts = _cases(tmp_path, size)
    torch.multiprocessing.spawn(_worker, args=(size, str(tmp_path / "store"), cases, short,
                                               prompts, str(tmp_path)), nprocs=size)
    ranks = []
    for r in range(size):
        with open(tmp_path / f"rank{r}.pkl", "rb") as f:
            ranks.append(pickle.load(f))
    return cases, prompts, ranks


def _near_tie(row, tol):
    top = np.sort(row)[-2:]
    return top[1] - top[0] <= tol * np.abs(row).max()


def _same_run(ours, ref, rel):
    """Tokens identical and logits within rel of the largest, prompt by prompt; past a
    step where the reference's two best logits tie within rel (so either token is
    right) the two runs may part, and only the steps before are compared."""
    (tok, lg), (ref_tok, ref_lg) = ours, ref
    for i in range(len(ref_tok)):
        n = len(ref_tok[i])
        for s in range(n):
            err = np.abs(lg[i][s] - ref_lg[i][s]).max() / np.abs(ref_lg[i][s]).max()
            assert err < rel, (i, s, err)
            if tok[i][s] != ref_tok[i][s]:
                assert _near_tie(ref_lg[i][s], rel), (i, s, tok[i], ref_tok[i])
                break
        else:
            assert tok[i] == ref_tok[i]


# Both sizes in --full: two processes that import torch and run three models each
# (15 s of CPU, 21 s of wall: the fast tier's longest test).  The fast tier keeps
# the sharding itself (test_splits_that_*, test_one_rank_seam_is_the_whole_tensor,
# test_vocab_slices_padded, test_local_experts_kernel, test_more_ranks_need_torchrun)
# and the one-rank models (test_llm.py).
@pytest.mark.slow
@pytest.mark.parametrize("size", [2, 4])
def test_sharded_models_match_one_rank(tmp_path, size):
    cases, prompts, ranks = _spawn(tmp_path, size)
    for name, (model_dir, dtype) in cases.items():
        ref = _run(_llm(model_dir, dtype), prompts, STEPS)
        for r, res in enumerate(ranks):
            # every rank ends with the same logits (all-gathered) and tokens
            assert res[name][0] == ranks[0][name][0], (name, r)
            np.testing.assert_array_equal(np.concatenate(res[name][1]),
                                          np.concatenate(ranks[0][name][1]))
        _same_run(ranks[0][name], ref, 1e-4 if dtype == "float32" else 5e-2)
    assert ranks[0]["llama/heads"] == LLAMA["num_attention_heads"] // size
    assert ranks[0]["deepseek/heads"] == checkpoint.TINY["deepseek_v3"][
        "num_attention_heads"] // size
    # sampled with different seeds, kept alike: rank 0's draw
    assert all(res["sampled"] == ranks[0]["sampled"] for res in ranks)
    assert all(res["env"] == parallel.MULTICAST_OFF for res in ranks)
    assert [res["agree_min"] for res in ranks] == [10] * size


@pytest.mark.slow
def test_cli_under_torchrun(tmp_path):
    """`torchrun --nproc-per-node 2 -m tileir.llm generate --tp 2` (gloo on the NumPy
    device) prints, once, the tokens one rank gives."""
    _torch()
    d = _write(tmp_path, "llama", {**LLAMA, "num_hidden_layers": 1},
               int(np.random.default_rng().integers(1 << 30)))
    ids = ",".join(str(t) for t in np.random.default_rng().integers(0, 302, 5))
    args = ["generate", d, "--dtype", "float32", "--device", "numpy", "--ids", ids,
            "--max-new-tokens", "4"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", "2", "-m", "tileir.llm"]
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(torchrun + args + ["--tp", "2"], capture_output=True, text=True,
                         env=env, timeout=280)
    assert run.returncode == 0, run.stderr[-3000:]
    one = _llm(d, "float32").generate([[int(t) for t in ids.split(",")]],
                                      max_new_tokens=4)[0].token_ids
    assert run.stdout.split() == [str(t) for t in one]


# ---- errors and the one-rank seam, no process group needed

def _cfg(arch, **overrides):
    raw = copy.deepcopy(checkpoint.TINY[arch])
    raw.update(overrides)
    return config.from_dict(raw)


@pytest.mark.parametrize("arch,overrides,size,field", [
    ("llama", {}, 4, "num_key_value_heads = 2"),                  # 4 query heads, 2 KV heads
    ("llama", {"num_attention_heads": 6, "num_key_value_heads": 6}, 4,
     "num_attention_heads = 6"),
    ("llama", {"num_key_value_heads": 4, "intermediate_size": 94}, 4,
     "intermediate_size = 94"),
    ("deepseek_v3", {"num_attention_heads": 6, "num_key_value_heads": 6}, 3,
     "n_routed_experts = 8"),
    ("deepseek_v3", {"moe_intermediate_size": 30}, 4, "moe_intermediate_size"),
])
def test_splits_that_do_not_divide(arch, overrides, size, field):
    with pytest.raises(ValueError, match=f"over {size} ranks: {field}.*does not divide"):
        parallel.check_config(_cfg(arch, **overrides), size)


def test_splits_that_divide():
    parallel.check_config(_cfg("llama"), 2)
    parallel.check_config(_cfg("deepseek_v3"), 4)
    # all layers MoE: the dense intermediate size is never split
    parallel.check_config(_cfg("deepseek_v3", first_k_dense_replace=0, intermediate_size=7), 2)


def test_one_rank_seam_is_the_whole_tensor():
    w = np.arange(12.0).reshape(3, 4)
    s = Shard()
    assert s.column(w, "w") is w or np.array_equal(s.column(w, "w"), w)
    assert s.vocab(w, "w") is w
    assert s.heads(8) == (0, 8) and s.experts(16) == (0, 16)
    with pytest.raises(ValueError, match="0 <= rank < size"):
        Shard(rank=2, size=2)
    assert parallel.init("numpy", 1) == Shard()


def test_more_ranks_need_torchrun(tmp_path, monkeypatch):
    torch = _torch()
    if torch.distributed.is_initialized():
        pytest.skip("a process group is already running here")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    for var in parallel.MULTICAST_OFF:          # unset, and unset again afterwards
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    with pytest.raises(RuntimeError, match="needs torch.distributed's process group"):
        Shard(rank=0, size=2)
    d = _write(tmp_path, "llama", {}, 0)
    with pytest.raises(RuntimeError, match="launch under torchrun"):
        _llm(d, "float32", tensor_parallel_size=2)
    # multicast is off before anything else happens
    assert {k: os.environ.get(k) for k in parallel.MULTICAST_OFF} == parallel.MULTICAST_OFF
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ValueError, match="torchrun started 4 processes"):
        _llm(d, "float32", tensor_parallel_size=2)


def test_vocab_slices_padded():
    """A vocabulary of 10 over 4 ranks: slices of 3 rows, the last one padded with zeros;
    each rank's embedding kernel reads zeros for the others' ids, and their sum is the
    whole table's rows (the kernel alone, in the interpreter)."""
    import tileir as ct
    table = np.random.default_rng().standard_normal((10, 8)).astype(np.float32)
    slices = [parallel.vocab_slice(table, r, 4) for r in range(4)]
    assert [x.shape[0] for x in slices] == [3] * 4
    np.testing.assert_array_equal(np.concatenate(slices)[:10], table)
    assert not slices[3][1:].any()
    ids = np.random.default_rng().integers(0, 10, 7).astype(np.int32)
    total = np.zeros((7, 8), np.float32)
    for r, part in enumerate(slices):
        out = np.full((7, 8), np.nan, np.float32)
        ct.launch(None, (7, 1), parallel.vocab_embedding, (ids, part, out, 3 * r, 8))
        assert not np.isnan(out).any()
        total += out
    np.testing.assert_array_equal(total, table[ids])


def test_local_experts_kernel():
    """Routed pairs for experts 4..7 of 12 with top_k 3 (a padded tile)."""
    import tileir as ct
    rng = np.random.default_rng()
    ids = rng.integers(0, 12, (9, 3)).astype(np.int32)
    w = rng.random((9, 3)).astype(np.float32)
    lid, lw = np.full((9, 3), -99, np.int32), np.full((9, 3), np.nan, np.float32)
    ct.launch(None, (9,), parallel.local_experts, (ids, w, lid, lw, 4, 4, 4))
    mine = (ids >= 4) & (ids < 8)
    np.testing.assert_array_equal(lid, np.where(mine, ids - 4, 0))
    np.testing.assert_array_equal(lw, np.where(mine, w, 0))


# ---- two GPUs: NCCL, one process a GPU under torchrun (this file is the ranks' script)

GPU_MODELS = {
    "llama": checkpoint.shaped("llama3-8b", num_hidden_layers=2, initializer_range=0.02),
    "deepseek": checkpoint.shaped("deepseek-v3-small", num_hidden_layers=2,
                                  n_routed_experts=16, num_experts_per_tok=4, n_group=4,
                                  topk_group=2, initializer_range=0.02),
}


@pytest.mark.gpu
@pytest.mark.parametrize("arch,peer", [("llama", True), ("deepseek", True), ("llama", False)])
def test_nccl_two_gpus_match_one(tmp_path, arch, peer):
    """Real widths, two layers, random weights: TP=2 over NCCL against TP=1 on one of the
    GPUs: float32 greedy tokens identical and logits within 2e-3; bfloat16 logits within
    5e-2 and the same tokens (but past a near tie); CUDA-graph decode (collectives in
    the graph) identical to eager.  With peer, the decode steps' reductions go over peer
    memory (tileir.llm.peer; the ranks must have made it), else all through NCCL
    (TILEIR_PEER_REDUCE=0, the default).  Each rank asserts; `_gpu_rank` below."""
    torch = _torch()
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    (tmp_path / "config.json").write_text(json.dumps(GPU_MODELS[arch]))
    seed = str(int(np.random.default_rng().integers(1 << 30)))
    env = {**os.environ, **parallel.MULTICAST_OFF, "TILEIR_PEER_REDUCE": str(int(peer))}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc-per-node", "2", __file__, "--gpu-rank", str(tmp_path),
                          seed], capture_output=True, text=True, env=env, timeout=1200)
    print(run.stdout[-5000:])
    assert run.returncode == 0, run.stderr[-5000:]
    assert "rank 0: TP=2 matches TP=1" in run.stdout


def _gpu_weights(raw, seed):
    """Random weights as checkpoint.random_weights draws them, made on this rank's GPU
    (each rank the same, from the seed)."""
    import torch
    from tileir.llm.loader import DictCheckpoint
    cfg = config.from_dict(raw)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    std = raw.get("initializer_range", 0.02)
    out = {}
    for name, shape in checkpoint._names(cfg, raw).items():
        w = torch.randn(shape, generator=gen, device="cuda")
        if name.endswith("norm.weight"):
            w = 1.0 + 0.1 * w
        elif name.endswith("e_score_correction_bias"):
            w = 0.1 * w
        else:
            w = std * w
        out[name] = w
    return DictCheckpoint(out)


def _gpu_rank(model_dir, seed):
    import torch
    import torch.distributed as dist
    shard = parallel.init("cuda", 2)
    with open(os.path.join(model_dir, "config.json")) as f:
        raw = json.load(f)
    weights = _gpu_weights(raw, seed)
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(0, raw["vocab_size"], n).tolist() for n in (37, 5, 120, 64)]
    kw = dict(weights=weights, device="cuda", max_batch=4, max_model_len=512, page_size=16)
    for dtype, steps, rel in (("float32", 32, 2e-3), ("bfloat16", 32, 5e-2)):
        ref = None
        if shard.rank == 0:
            one = LLM(model_dir, dtype=dtype, **kw)
            ref = _run(one, prompts, steps)
            del one
            torch.cuda.empty_cache()
        dist.barrier()
        llm = LLM(model_dir, dtype=dtype, tensor_parallel_size=2, **kw)
        peer = os.environ.get("TILEIR_PEER_REDUCE") == "1"
        assert (llm.model.shard.peer is not None) == peer, "peer all-reduce not made"
        ours = _run(llm, prompts, steps)
        if dtype == "bfloat16":
            assert llm.engine.graphs, "bf16 decode should replay CUDA graphs"
            llm.engine.graphs_ok = False          # the same run eagerly
            eager = _run(llm, prompts, steps)
            assert eager[0] == ours[0], (eager[0], ours[0])
            a, b = np.concatenate(eager[1]), np.concatenate(ours[1])
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-3 * np.abs(b).max())
        if shard.rank == 0:
            _same_run(ours, ref, rel)
            same = "identical" if ours[0] == ref[0] else "identical up to a near tie"
            print(f"{dtype}: greedy tokens {same}", flush=True)
        del llm
        torch.cuda.empty_cache()
    if shard.rank == 0:
        print(f"rank 0: TP=2 matches TP=1 (peer all-reduce "
              f"{os.environ.get('TILEIR_PEER_REDUCE') == '1'})", flush=True)
    parallel.shutdown()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--gpu-rank":
        try:
            _gpu_rank(sys.argv[2], int(sys.argv[3]))
        except BaseException:
            # a rank that fails leaves at once: the other would wait in its next
            # collective until the launcher's timeout (seen on two H200s), and NCCL's
            # teardown at a normal exit can wait for it too
            import traceback
            traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
    else:
        sys.exit("usage: torchrun --nproc-per-node 2 test_llm_tp.py --gpu-rank DIR SEED")
