"""RMSNorm 16384x8192 bf16: tileir variants vs torch.compile, for an ncu comparison.

    ncu --clock-control none -k regex:"rmsnorm|triton" --section SpeedOfLight \\
        --section Occupancy --section WarpStateStats python3 bench/ncu_rmsnorm.py
Without ncu it prints graph-replay bandwidth of each variant as a fraction of a copy.
"""

import torch
import torch.nn.functional as F
from triton.testing import do_bench_cudagraph

import tileir as ct
from tileir.examples import rmsnorm

m, n = 16384, 8192
x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x)
variants = {"default": rmsnorm.rmsnorm}
for nw, occ in ((16, None), (32, None)):
    variants[f"num_warps={nw},occupancy={occ}"] = ct.kernel(num_warps=nw, occupancy=occ)(
        rmsnorm.rmsnorm.fn)
compiled = torch.compile(lambda t, g: F.rms_norm(t, (n,), g, 1e-6))
compiled(x, w)
copy = do_bench_cudagraph(lambda: y.copy_(x), rep=100, return_mode="median")
for name, k in variants.items():
    ct.launch(None, (m,), k, (x, w, y, 1e-6, n))
    t = do_bench_cudagraph(lambda: ct.launch(None, (m,), k, (x, w, y, 1e-6, n)), rep=100,
                           return_mode="median")
    ck = next(iter(k._cache.values()))
    print(f"tileir {name:<26} {copy / t:.3f} x copy   {ck.meta['num_threads']} threads")
t = do_bench_cudagraph(lambda: compiled(x, w), rep=100, return_mode="median")
print(f"torch.compile {'':<19} {copy / t:.3f} x copy")
from tileir.examples import softmax  # noqa: E402
for nw in (8, 16):
    k = ct.kernel(num_warps=nw)(softmax.softmax.fn)
    ct.launch(None, (m,), k, (x, y, n))
    t = do_bench_cudagraph(lambda: ct.launch(None, (m,), k, (x, y, n)), rep=100,
                           return_mode="median")
    print(f"tileir softmax num_warps={nw:<12} {copy / t:.3f} x copy")
