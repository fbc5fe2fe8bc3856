"""GPU runtime: CUDA driver, arrays, launch."""
