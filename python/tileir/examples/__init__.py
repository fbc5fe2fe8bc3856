"""Example kernels shipped with tileir, each with a NumPy reference.

Every module defines its kernel(s) and `run(rng, **sizes) -> (out, ref, rtol, atol)`
that builds fresh random inputs of ragged sizes, launches the kernel and
computes a float64 reference.  `python -m tileir.examples` runs them all.
"""

NAMES = ("vector_add", "softmax", "rmsnorm", "layernorm", "transpose", "matmul", "llm_ops",
         "attention", "bmm")


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (tile dims must be powers of two)."""
    return 1 << max(n - 1, 0).bit_length()
