"""A deviceless executor of `gpu`-stage IR: the lowering's output run on NumPy.

`simulate(compiled, grid, args)` runs the `gpu.func` of a kernel compiled to the
`gpu` stage (or later: the stage's IR is kept as an artifact) block by block,
all threads of a block in lockstep, each SSA value a NumPy array with one entry
per thread.  What the GPU does in hardware is modelled from the PTX ISA's
descriptions (`sim.hardware`): wgmma and mma.sync fragments and shared-memory
descriptors, ldmatrix, TMA copies with swizzles and out-of-bounds zeros,
mbarrier phases and transaction counts, cp.async with zero fill.

What it checks beyond the numbers: every memory access is inside an argument
array or the block's shared memory, a warpgroup's wgmma operands agree across
its threads, an mbarrier wait that could never complete is an error ("would
hang"), and a copy lands in shared memory before anything reads it
(asynchronous work completes when issued, so program order is the only order:
a missing wait is not detected, a wrong slot or phase is).

This is a test tier (docs/tensor-cores.md), not a way to run kernels: a block
of a GEMM takes a good fraction of a second.
"""

from .executor import ListTable, SimError, simulate

__all__ = ["ListTable", "SimError", "simulate"]
