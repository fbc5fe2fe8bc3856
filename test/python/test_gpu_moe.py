"""GPU tests of the DeepSeek-V3 mixture-of-experts kernels (tileir.examples.moe) against a
float32 torch reference: the router as transformers' DeepseekV3TopkRouter computes it
(ties aside), the routed experts at DeepSeek-V3's shapes (H 7168, I 2048, 256 experts,
top 8) for decode (1, 7, 64 tokens) and prefill (2048), ragged shapes and a
non-power-of-two top_k, float32 activations, a side stream, and a CUDA graph of
route + experts replayed on new inputs (no host synchronization, grids by shape).
Marked `gpu`: skipped cleanly without an NVIDIA GPU.  Fresh random inputs, outputs
poisoned with NaN."""

from __future__ import annotations

import pytest
from conftest import lazy_import

from tileir.examples import moe

from test_moe import assert_same_routing

pytestmark = pytest.mark.gpu
torch = lazy_import("torch")

V3 = dict(top_k=8, n_group=8, topk_group=4, routed_scaling_factor=2.5, norm_topk_prob=True)


def torch_route(hidden, gate, bias, *, top_k, n_group, topk_group, routed_scaling_factor,
                norm_topk_prob):
    """The router in float32 torch, step by step as transformers' DeepseekV3TopkRouter;
    also the biased masked scores and group scores (float64 NumPy) for the tie checks.
    The logits are summed in float64 and rounded to float32 (whatever torch's float32
    matmul precision is set to: tf32 would move them by ~1e-3)."""
    logits = (hidden.double() @ gate.double().T).float()
    scores = logits.sigmoid()
    t, e = scores.shape
    choice = scores + bias.float()[None, :]
    gscore = choice.view(t, n_group, e // n_group).topk(2, dim=-1).values.sum(-1)
    groups = gscore.topk(topk_group, dim=-1).indices
    keep = torch.zeros_like(gscore).scatter_(1, groups, 1.0)
    keep = keep[:, :, None].expand(t, n_group, e // n_group).reshape(t, e)
    masked = choice.masked_fill(keep == 0, 0.0)
    ids = masked.topk(top_k, dim=-1).indices
    w = scores.gather(1, ids)
    if norm_topk_prob:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return (ids.cpu().numpy(), (w * routed_scaling_factor).double().cpu().numpy(),
            masked.double().cpu().numpy(), gscore.double().cpu().numpy())


def torch_experts(hidden, ids, weights, w_gate_up, w_down):
    """float32 routed experts: one expert at a time over the tokens it got."""
    i = w_gate_up.shape[1] // 2
    x = hidden.float()
    out = torch.zeros_like(x)
    for e in torch.unique(ids).tolist():
        tok, k = torch.where(ids == e)
        wgu = w_gate_up[e].float()
        h = x[tok] @ wgu.T
        y = (torch.nn.functional.silu(h[:, :i]) * h[:, i:]) @ w_down[e].float().T
        out.index_add_(0, tok, y * weights[tok, k].float().unsqueeze(1))
    return out


def _rel(out, ref) -> float:
    assert not out.isnan().any(), "some output elements were not written"
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def _router(t, h, e, dtype, bias_scale=0.1):
    x = torch.randn(t, h, device="cuda").to(dtype)
    gate = (torch.randn(e, h, device="cuda") / h ** 0.5).to(dtype)
    bias = torch.randn(e, device="cuda") * bias_scale
    return x, gate, bias


def _experts(e, h, i, dtype):
    """Drawn in their dtype and scaled in place: 22.5 GB at DeepSeek-V3's bf16 shapes,
    with no float32 copy beside them."""
    w_gate_up = torch.randn(e, 2 * i, h, device="cuda", dtype=dtype).div_(h ** 0.5)
    w_down = torch.randn(e, h, i, device="cuda", dtype=dtype).div_(i ** 0.5)
    return w_gate_up, w_down


@pytest.mark.parametrize("t", [1, 7, 64, 2048])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_routing_matches_transformers_router(t, dtype):
    dtype = getattr(torch, dtype)
    x, gate, bias = _router(t, 7168, 256, dtype)
    ids, w = moe.route(x, gate, bias, **V3)
    assert ids.dtype == torch.int32 and w.dtype == torch.float32 and ids.shape == (t, 8)
    assert_same_routing(ids.cpu().numpy(), w.cpu().numpy(), *torch_route(x, gate, bias, **V3),
                        V3["topk_group"], tol=2e-5, rtol=2e-5, max_ties=0.01)


def test_routing_with_ragged_sizes_and_top_6():
    kw = dict(top_k=6, n_group=8, topk_group=3, routed_scaling_factor=1.5, norm_topk_prob=False)
    x, gate, bias = _router(333, 1000, 64, torch.bfloat16)
    ids, w = moe.route(x, gate, bias, **kw)
    assert_same_routing(ids.cpu().numpy(), w.cpu().numpy(), *torch_route(x, gate, bias, **kw),
                        3, tol=2e-5, rtol=2e-5, max_ties=0.01)


@pytest.mark.parametrize("t", [1, 7, 64, 2048])
def test_experts_at_deepseek_v3_shapes(t):
    x, gate, bias = _router(t, 7168, 256, torch.bfloat16)
    w_gate_up, w_down = _experts(256, 7168, 2048, torch.bfloat16)
    ids, w = moe.route(x, gate, bias, **V3)
    out = torch.full_like(x, float("nan"))
    assert moe.experts(x, ids, w, w_gate_up, w_down, out=out) is out
    # bf16 rounds the SwiGLU product, each expert's output and the sum: 2^-9 each
    assert _rel(out, torch_experts(x, ids, w, w_gate_up, w_down)) < 1e-2


@pytest.mark.parametrize("t,e,top_k", [(5, 64, 6), (300, 64, 6), (1000, 16, 4)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_experts_with_ragged_sizes(t, e, top_k, dtype):
    dtype = getattr(torch, dtype)
    h, i = 1000, 360
    x = torch.randn(t, h, device="cuda").to(dtype)
    w_gate_up, w_down = _experts(e, h, i, dtype)
    ids = torch.stack([torch.randperm(e, device="cuda")[:top_k] for _ in range(t)]).int()
    w = torch.rand(t, top_k, device="cuda")
    out = moe.experts(x, ids, w, w_gate_up, w_down)
    # float32 operands run on the tensor cores as tf32 (docs/tensor-cores.md)
    assert _rel(out, torch_experts(x, ids, w, w_gate_up, w_down)) < (1e-2 if dtype ==
                                                                     torch.bfloat16 else 5e-3)


def test_experts_with_every_token_on_the_same_experts():
    """Experts 0..7 get all 2048 tokens (32 blocks of 64 rows each), 248 experts idle."""
    t, h, i, e = 2048, 2048, 512, 256
    x = torch.randn(t, h, device="cuda").bfloat16()
    w_gate_up, w_down = _experts(e, h, i, torch.bfloat16)
    ids = torch.arange(8, device="cuda", dtype=torch.int32).repeat(t, 1)
    w = torch.rand(t, 8, device="cuda")
    out = moe.experts(x, ids, w, w_gate_up, w_down)
    assert _rel(out, torch_experts(x, ids, w, w_gate_up, w_down)) < 1e-2


def test_launches_follow_torchs_current_stream():
    x, gate, bias = _router(64, 2048, 64, torch.bfloat16)
    w_gate_up, w_down = _experts(64, 2048, 512, torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ids, w = moe.route(x, gate, bias, **V3)
        out = moe.experts(x, ids, w, w_gate_up, w_down)
    torch.cuda.current_stream().wait_stream(side)
    assert _rel(out, torch_experts(x, ids, w, w_gate_up, w_down)) < 1e-2


@pytest.mark.parametrize("t", [1, 64])
def test_a_cuda_graph_of_route_and_experts_replays_on_new_inputs(t):
    """Captured once, replayed on other tokens: the routing changes, the grids do not, and
    nothing waits for the device while capturing."""
    # DeepSeek-V3's 256 experts and routing; narrower experts than its 7168 x 2048, so
    # that the suite's parallel workers each hold 0.3 GB of weights, not 22
    x, gate, bias = _router(t, 1024, 256, torch.bfloat16)
    w_gate_up, w_down = _experts(256, 1024, 256, torch.bfloat16)

    def step():
        ids, w = moe.route(x, gate, bias, **V3)
        return ids, w, moe.experts(x, ids, w, w_gate_up, w_down)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()                                  # compile and warm up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ids_g, w_g, out_g = step()
    for _ in range(3):
        x.copy_(torch.randn_like(x.float()).bfloat16())
        out_g.fill_(float("nan"))
        graph.replay()
        ids, w, out = step()
        torch.cuda.synchronize()
        assert torch.equal(ids_g, ids) and torch.equal(w_g, w)
        assert torch.equal(out_g, out)          # the same kernels: the same bits
        assert _rel(out, torch_experts(x, ids, w, w_gate_up, w_down)) < 1e-2
