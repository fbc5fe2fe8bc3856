"""Where the host time of one `tileir.launch` goes (cProfile over many launches)."""

import cProfile
import pstats
import time

import torch

import tileir as ct
from tileir.examples import vector_add

a = torch.randn(1 << 20, device="cuda", dtype=torch.bfloat16)
b, c = torch.randn_like(a), torch.empty_like(a)
args, grid = (a, b, c, 2048), (ct.cdiv(a.numel(), 2048),)
ct.launch(None, grid, vector_add.vector_add, args)
torch.cuda.synchronize()
n = 300
t0 = time.perf_counter()
for _ in range(n):
    ct.launch(None, grid, vector_add.vector_add, args)
print(f"host time per launch: {(time.perf_counter() - t0) / n * 1e6:.1f} us")
t0 = time.perf_counter()
for _ in range(n):
    torch.add(a, b, out=c)
print(f"torch.add host time per call: {(time.perf_counter() - t0) / n * 1e6:.1f} us")
prof = cProfile.Profile()
prof.enable()
for _ in range(n):
    ct.launch(None, grid, vector_add.vector_add, args)
prof.disable()
pstats.Stats(prof).sort_stats("tottime").print_stats(25)
