"""Stages `llvm`, `ptx` and `cubin`: upstream conversions, NVPTX, then ptxas."""
