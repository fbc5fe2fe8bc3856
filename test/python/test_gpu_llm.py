"""tileir.llm on the GPU against transformers' own LlamaForCausalLM and
DeepseekV3ForCausalLM: random weights in real widths (fewer layers and experts),
saved with save_pretrained and loaded back by tileir.llm.

- bf16: the last-token logits of ragged prompts, ours and transformers' bf16 run both
  measured against transformers in fp32 on the same weights: ours may be at most twice
  as far (and 2e-2 relative) as transformers' own bf16 run, and its argmax may miss
  fp32's on at most one prompt more;
- fp32: 32 greedy tokens identical to transformers' generate.
"""

import copy
import gc

import numpy as np
import pytest
from conftest import _have_gpu

pytestmark = pytest.mark.gpu
if not _have_gpu():     # asked before importing torch (3 s of CPU a pytest worker)
    pytest.skip("needs an NVIDIA GPU", allow_module_level=True)
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from tileir.llm import LLM, checkpoint  # noqa: E402
from tileir.llm.backend import _optional  # noqa: E402

LLAMA3_8B_2L = checkpoint.shaped("llama3-8b", num_hidden_layers=2, initializer_range=0.02)

DEEPSEEK_V3_SMALL = checkpoint.shaped(
    "deepseek-v3-small", num_hidden_layers=2, n_routed_experts=16, num_experts_per_tok=4,
    n_group=4, topk_group=2, initializer_range=0.02)


def _dense_deepseek():
    raw = copy.deepcopy(DEEPSEEK_V3_SMALL)
    raw["first_k_dense_replace"] = raw["num_hidden_layers"]
    return raw


def _needs(arch_raw):
    if arch_raw["model_type"] == "deepseek_v3":
        if _optional("tileir.examples.mla_decode", "mla_decode") is None:
            pytest.skip("tileir.examples.mla_decode (branch decode) not merged: the dense "
                        "fallback pads MLA's 576-wide latent to 1024, too wide for one tile")
        if (arch_raw["first_k_dense_replace"] < arch_raw["num_hidden_layers"]
                and _optional("tileir.examples.moe", "experts") is None):
            pytest.skip("tileir.examples.moe (branch moe) not merged")


@pytest.fixture
def tmp_path(tmp_path):
    """A test's checkpoint folder, deleted when it ends: the real-width checkpoints take
    up to ~10 GB each in float32, and pytest keeps its last runs' folders (three parallel
    workers filled the GPU machine's 64 GB disk)."""
    import shutil
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


def _save_hf(raw, path, dtype):
    """transformers' model of raw's configuration, random, saved to path; returns it."""
    import json
    (path / "config.json").write_text(json.dumps(raw))
    config = transformers.AutoConfig.from_pretrained(str(path))
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    model = model.to(dtype).eval()
    model.save_pretrained(str(path))
    return model


def _hf_last_logits(model, prompts):
    out = []
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([p], device="cuda")
            out.append(model(ids).logits[0, -1].float())
    return torch.stack(out)


def _ours_last_logits(llm, prompts):
    from tileir.llm.engine import SamplingParams
    eng = llm.engine
    index = {eng.add_request(p, SamplingParams(max_new_tokens=1, ignore_eos=True)): i
             for i, p in enumerate(prompts)}
    rows = [None] * len(prompts)
    while eng.has_work():
        new = eng.step()
        for r, (req, _) in enumerate(new):
            rows[index[req.id]] = eng.last_logits[r].float()
    return torch.stack(rows)


def _rel(a, b):
    return (torch.linalg.norm(a - b) / torch.linalg.norm(b)).item()


@pytest.mark.parametrize("fuse_norm", [False, True])
@pytest.mark.parametrize("raw", [LLAMA3_8B_2L, _dense_deepseek(), DEEPSEEK_V3_SMALL],
                         ids=["llama3-8b-2l", "deepseek-v3-dense", "deepseek-v3-moe"])
def test_bf16_logits_match_transformers(tmp_path, raw, fuse_norm):
    _needs(raw)
    rng = np.random.default_rng()
    prompts = [rng.integers(0, raw["vocab_size"], n).tolist() for n in (1, 37, 129, 300)]
    model = _save_hf(raw, tmp_path, torch.float32)
    fp32 = _hf_last_logits(model, prompts)
    model = model.to(torch.bfloat16)
    hf16 = _hf_last_logits(model, prompts)
    del model
    gc.collect()
    torch.cuda.empty_cache()
    # RMSNorm apart, or inside the GEMMs that read it
    llm = LLM(str(tmp_path), dtype="bfloat16", max_model_len=1024, max_batch=8,
              fuse_norm=fuse_norm)
    ours = _ours_last_logits(llm, prompts)
    assert torch.isfinite(ours).all()
    err, hf_err = _rel(ours, fp32), _rel(hf16, fp32)
    agree = (ours.argmax(-1) == fp32.argmax(-1)).float().mean().item()
    hf_agree = (hf16.argmax(-1) == fp32.argmax(-1)).float().mean().item()
    print(f"bf16 logits against float32: error {err:.3g} (transformers' bf16 {hf_err:.3g}), "
          f"argmax agreeing {agree:.2f} ({hf_agree:.2f})")
    assert err < max(2 * hf_err, 1e-3) and err < 2e-2, (err, hf_err)
    assert agree >= hf_agree - 0.25, (agree, hf_agree)   # one prompt of 4


@pytest.mark.parametrize("raw", [LLAMA3_8B_2L, _dense_deepseek(), DEEPSEEK_V3_SMALL],
                         ids=["llama3-8b-2l", "deepseek-v3-dense", "deepseek-v3-moe"])
def test_fp32_greedy_matches_transformers(tmp_path, raw):
    _needs(raw)
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng()
    prompts = [rng.integers(0, raw["vocab_size"], n).tolist() for n in (5, 64)]
    model = _save_hf(raw, tmp_path, torch.float32)
    theirs = []
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([p], device="cuda")
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=32, min_new_tokens=32)
            theirs.append(out[0, len(p):].tolist())
    llm = LLM(str(tmp_path), dtype="float32", max_model_len=512, max_batch=4)
    ours = [o.token_ids for o in llm.generate(prompts, max_new_tokens=32, ignore_eos=True)]
    if ours != theirs:
        # where they part, how close transformers' own top two were (a near tie that
        # the attention kernels' tf32 products may flip, or a real difference)
        i = next(i for i in range(len(prompts)) if ours[i] != theirs[i])
        step = next(j for j, (a, b) in enumerate(zip(ours[i], theirs[i])) if a != b)
        with torch.no_grad():
            seq = torch.tensor([prompts[i] + theirs[i][:step]], device="cuda")
            logits = model(seq).logits[0, -1]
        top = torch.topk(logits, 2).values
        pytest.fail(f"prompt {i} parts at step {step}: ours {ours[i][step]} (logit "
                    f"{logits[ours[i][step]].item():.5f}), transformers {theirs[i][step]} "
                    f"(top two {top[0].item():.5f}, {top[1].item():.5f})")


def _small_llama(tmp_path):
    """A two-layer Llama of 1024 columns (GQA 8 / 2, vocabulary 4096) saved in tmp_path,
    and five prompts of 2 to 40 tokens; skips without the paged decode kernel."""
    raw = copy.deepcopy(LLAMA3_8B_2L)
    _needs(raw)
    if _optional("tileir.examples.decode_attention", "paged_decode_attention") is None:
        pytest.skip("needs the paged decode kernel (branch decode)")
    raw.update(hidden_size=1024, intermediate_size=2048, num_attention_heads=8,
               num_key_value_heads=2, vocab_size=4096)
    _save_hf(raw, tmp_path, torch.bfloat16)
    rng = np.random.default_rng()
    return [rng.integers(0, 4096, n).tolist() for n in (3, 17, 40, 2, 9)]


def _generate_twice(llm, prompts):
    """The tokens of three prompts at batch 3, then of all five at batch 5 (graphs of 4
    and 8 where captured)."""
    return ([o.token_ids for o in llm.generate(prompts[:3], max_new_tokens=12)] +
            [o.token_ids for o in llm.generate(prompts, max_new_tokens=12)])


def test_cuda_graph_decode_matches_eager(tmp_path):
    """The captured decode graphs give the eager steps' tokens (batch sizes 3 and 5 pad to
    graphs of 4 and 8)."""
    prompts = _small_llama(tmp_path)
    runs = []
    for graphs in (False, True):
        llm = LLM(str(tmp_path), dtype="bfloat16", max_model_len=256, cuda_graphs=graphs)
        runs.append(_generate_twice(llm, prompts))
        assert bool(llm.engine.graphs) == graphs
    assert runs[0] == runs[1]


def test_tables_early_decode_gives_the_same_tokens(tmp_path):
    """Backend.decode_tables_early: decode attention reads its lengths and first page
    numbers before its wait for the QKV GEMV (paged_decode_attention(tables_early=True));
    the step inputs it reads early are the engine's host copy, so the tokens of eager
    steps and of the captured graphs are the plain kernel's, batch sizes 3 and 5."""
    prompts = _small_llama(tmp_path)
    runs = []
    for early, graphs in ((False, True), (True, False), (True, True)):
        llm = LLM(str(tmp_path), dtype="bfloat16", max_model_len=256, cuda_graphs=graphs)
        llm.backend.decode_tables_early = early
        runs.append(_generate_twice(llm, prompts))
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("graphs", [False, True])
def test_norm_tail_decode_matches_the_norm_launches(tmp_path, graphs):
    """Llama-3-8B widths, two layers, one sequence at a time (the one-row GEMVs: O and
    down split K with the ticket): with gemv_norm_tail each decode step's logits are
    those of the rmsnorm launches bit for bit, eager and replayed in CUDA graphs, and
    an eager decode step launches one rmsnorm (the first layer's ln1) against five."""
    raw = copy.deepcopy(LLAMA3_8B_2L)
    _needs(raw)
    if graphs and _optional("tileir.examples.decode_attention",
                            "paged_decode_attention") is None:
        pytest.skip("CUDA graphs need the paged decode kernel (branch decode)")
    from tileir.llm.engine import SamplingParams
    _save_hf(raw, tmp_path, torch.bfloat16)
    gc.collect()
    torch.cuda.empty_cache()
    rng = np.random.default_rng()
    prompts = [rng.integers(0, raw["vocab_size"], n).tolist() for n in (1, 7, 40)]
    runs, norms = [], []
    for tail in (True, False):
        llm = LLM(str(tmp_path), dtype="bfloat16", max_model_len=256, cuda_graphs=graphs)
        be, eng = llm.backend, llm.engine
        be.gemv_norm_tail = tail
        names = []
        run = be._launch
        be._launch = lambda grid, kernel, args: (names.append(kernel.name),
                                                 run(grid, kernel, args))
        steps = []
        for p in prompts:
            eng.add_request(p, SamplingParams(max_new_tokens=10, ignore_eos=True))
            while eng.has_work():
                names.clear()
                eng.step()
                steps.append(eng.last_logits.float().clone())
                if len(steps) == 2:          # the first prompt's first decode step
                    norms.append(names.count("rmsnorm"))
        runs.append(torch.stack(steps))
        del llm, be, eng
        gc.collect()
        torch.cuda.empty_cache()
    assert torch.isfinite(runs[0]).all()
    assert torch.equal(runs[0], runs[1])
    if not graphs:
        assert norms == [1, 5], norms


def test_fused_norm_linear_at_the_qkv_shape():
    """The fused-RMSNorm GEMM at Llama-3-8B's QKV shape (467 x 6144 x 4096: 4 x 48 blocks,
    two consumer warpgroups, A made in registers each iteration), ten launches: each one
    finite and within bf16 error of float64 (it left NaN in every launch while its
    product ran asynchronously past its A registers' rewrite)."""
    import tileir as ct
    from tileir.llm import kernels as K
    m, n, k = 467, 6144, 4096
    x = torch.randn(m, k, device="cuda").bfloat16()
    g = (1 + 0.1 * torch.randn(k, device="cuda")).bfloat16()
    w = (torch.randn(n, k, device="cuda") * 0.02).bfloat16()
    xf = x.double()
    xn = (xf / torch.sqrt((xf * xf).mean(1, keepdim=True) + 1e-5) * g.double()).bfloat16()
    ref = xn.double() @ w.double().T
    for _ in range(10):
        y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        ct.launch(None, (ct.cdiv(m, 128), ct.cdiv(n, 128), 1), K.linear,
                  (x, g, 1e-5, w, y, 128, 128, 64, False, True))
        torch.cuda.synchronize()
        assert torch.isfinite(y).all()
        assert (y.double() - ref).abs().max().item() < 0.05


@pytest.mark.parametrize("t", [1, 37])
@pytest.mark.parametrize("arch", ["llama", "deepseek"])
def test_rope_and_cache_write_in_one_launch_match_the_two(arch, t):
    """Backend.rope_slots: RoPE and the cache write in one launch give the two kernels'
    bits (rope, then write_slots) at Llama-3-8B's heads (32 q, 8 k/v of 128) and
    DeepSeek-V3's latent row (512 + 64), for a decode step's token and a ragged prompt's
    37 at scattered slots of a NaN-poisoned cache (untouched outside the slots)."""
    from tileir.llm.backend import Backend
    be = Backend("cuda", "bfloat16")
    gen = torch.Generator(device="cuda").manual_seed(t * 31 + len(arch))
    page, pages = 16, 40
    d = 128 if arch == "llama" else 64
    ang = torch.rand(4096, d // 2, device="cuda", generator=gen) * 6.3
    cos, sin = ang.cos(), ang.sin()
    pos = torch.randint(0, 4096, (t,), device="cuda", generator=gen, dtype=torch.int32)
    slots = torch.randperm(pages * page, device="cuda", generator=gen)[:t].to(torch.int32)
    if arch == "llama":
        rows = torch.randn(t, 48 * d, device="cuda", generator=gen).bfloat16()
        cache = torch.full((pages, page, 16, d), float("nan"), device="cuda",
                           dtype=torch.bfloat16)
    else:
        rows = torch.randn(t, 1536 + 576, device="cuda", generator=gen).bfloat16()
        cache = torch.full((pages, page, 576), float("nan"), device="cuda",
                           dtype=torch.bfloat16)
    outs = []
    for fused in (True, False):
        be.rope_slots = fused
        x, c = rows.clone(), cache.clone()
        if arch == "llama":
            be.rope_write_slots(x, cos, sin, pos, c, slots)
        else:
            be.rope_write_latent(x[:, 1536:], 512, cos, sin, pos, c, slots)
        torch.cuda.synchronize()
        outs.append((x, c))
    (x, c), (x2, c2) = outs
    assert torch.equal(x, x2) and not torch.equal(x, rows)           # rotated, alike
    flat, flat2 = c.reshape(pages * page, -1), c2.reshape(pages * page, -1)
    assert torch.equal(flat[slots.long()], flat2[slots.long()])
    assert not flat[slots.long()].isnan().any()
    rest = torch.ones(pages * page, dtype=torch.bool, device="cuda")
    rest[slots.long()] = False
    assert flat[rest].isnan().all() and flat2[rest].isnan().all()


def _decode_logits(llm, prompts, steps):
    """Each prompt generated alone (one-row decode steps), greedy: its tokens and the
    logits of each decode step (steps - 1 of them), float32."""
    from tileir.llm.engine import SamplingParams
    eng = llm.engine
    tokens, logits = [], []
    for p in prompts:
        eng.add_request(p, SamplingParams(max_new_tokens=steps, ignore_eos=True))
        toks, rows = [], []
        while eng.has_work():
            for row, (req, tok) in enumerate(eng.step()):
                toks.append(tok)
                rows.append(eng.last_logits[row].float().clone())
        tokens.append(toks)
        logits.append(torch.stack(rows[1:]))
    return tokens, logits


@pytest.mark.parametrize("graphs", [False, True])
def test_qkv_rope_decode_logits_match_transformers(tmp_path, graphs):
    """Backend.qkv_rope at Llama-3-8B widths, two layers: each one-row decode step's QKV
    on gemv_qkv_rope (q and k rotated, k and v into the cache in its epilogue; asserted
    from the launches), eager and replayed in CUDA graphs.  Every decode step's logits
    (teacher-forced on our tokens) against transformers' fp32 within twice its own bf16
    run's error, and within bf16 error of the three-launch path (gemv, rope,
    write_slots)."""
    raw = copy.deepcopy(LLAMA3_8B_2L)
    _needs(raw)
    if graphs and _optional("tileir.examples.decode_attention",
                            "paged_decode_attention") is None:
        pytest.skip("CUDA graphs need the paged decode kernel (branch decode)")
    rng = np.random.default_rng()
    prompts = [rng.integers(0, raw["vocab_size"], n).tolist() for n in (1, 7, 40)]
    model = _save_hf(raw, tmp_path, torch.float32)
    runs = {}
    for on in (True, False):
        llm = LLM(str(tmp_path), dtype="bfloat16", max_model_len=256, cuda_graphs=graphs)
        be = llm.backend
        be.qkv_rope = on
        names = set()
        run = be._launch
        be._launch = lambda grid, kernel, args: (names.add(kernel.name),
                                                 run(grid, kernel, args))
        runs[on] = _decode_logits(llm, prompts, 6)
        if not graphs:      # (a replayed graph launches nothing through the backend)
            assert ("gemv_qkv_rope" in names) == on, names
            assert ("rope" in names) and ("write_slots" in names)      # the prompts'
        del llm, be
        gc.collect()
        torch.cuda.empty_cache()
    tokens, ours = runs[True]
    fp32, hf16 = [], []
    with torch.no_grad():
        for p, toks in zip(prompts, tokens):
            ids = torch.tensor([p + toks[:-1]], device="cuda")
            fp32.append(model(ids).logits[0, len(p):].float())
        model = model.to(torch.bfloat16)
        for p, toks in zip(prompts, tokens):
            ids = torch.tensor([p + toks[:-1]], device="cuda")
            hf16.append(model(ids).logits[0, len(p):].float())
    ours, fp32, hf16 = torch.cat(ours), torch.cat(fp32), torch.cat(hf16)
    off = torch.cat(runs[False][1])
    assert torch.isfinite(ours).all()
    err, hf_err = _rel(ours, fp32), _rel(hf16, fp32)
    print(f"decode logits with qkv_rope against float32: error {err:.3g} (transformers' "
          f"bf16 {hf_err:.3g}); against the three launches {_rel(ours, off):.3g}")
    assert err < max(2 * hf_err, 1e-3) and err < 2e-2, (err, hf_err)
    if runs[True][0] == runs[False][0]:      # the same tokens: the same rows to compare
        assert _rel(ours, off) < max(hf_err, 1e-3), _rel(ours, off)
