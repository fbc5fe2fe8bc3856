"""GPU backend: the layout, pipeline, gpu, llvm, ptx and cubin stages, one subpackage each
step of the way, in pipeline order:

    layout/    tiles rescaled for the launch's grid, then a layout on every tile
    pipeline/  loops of loads into rings, persistent tile loops, clusters, versions
    gpu/       layout-annotated Tile IR -> per-thread code in a `gpu.module` (rules/)
    target/    llvm, ptx and cubin: upstream conversions, NVPTX, ptxas

Imports run one way: a stage may import an earlier one, never a later one, and no
modules import each other in a circle (test_backend.py checks both)."""
