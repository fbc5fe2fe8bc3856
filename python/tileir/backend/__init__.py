"""GPU backend: the layout, gpu, llvm, ptx and cubin stages."""
