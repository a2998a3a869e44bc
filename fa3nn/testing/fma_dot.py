"""Triton's interpreter with the compiled fp32 tl.dot's rounding: a chain of fused multiply-adds over K.

The interpreter computes tl.dot(a, b, acc) as numpy.matmul(a, b) + acc, whose rounding is the CPU BLAS's: OpenBLAS
picks its kernel by CPU, and the same fp32 test measured 2.5e-7 from the truth with its SkylakeX kernel and 7.7e-7
with its Haswell one (the machine of the CI), against plain fp32 PyTorch's 3.0e-7 (benchmarks/NOTES.md "fp32
backward"). An fp32 tl.dot with input_precision="ieee" compiles to no tensor-core instruction: Triton lowers it to
one FMA per product, accumulated in K's order starting from `acc` (FMADotUtility's multiplyVectors). `fma_chain_dot`
computes that on the CPU: each product is exact in float64 (24 + 24 significand bits), each add is rounded to
float32 (through float64 first: a different result only when the float64 sum lands exactly halfway between two
float32 values, which these tests' sums essentially never do). Other dtypes and precisions keep numpy's matmul.
fa3nn runs fp32 through the Triton kernels only under the interpreter (the GPU path is 16-bit), so this makes the
fp32 tests measure the kernels' algorithm with the rounding Triton defines for it, the same on every CPU.
"""

from __future__ import annotations

import contextlib

import numpy as np


def fma_chain(a: np.ndarray, b: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """acc + a @ b for float32 arrays (..., M, K) @ (..., K, N), one rounded FMA per product in K's order."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    out = acc.astype(np.float32, copy=True)
    for k in range(a.shape[-1]):
        out = (out + a64[..., :, k, None] * b64[..., k, None, :]).astype(np.float32)
    return out


@contextlib.contextmanager
def compiled_fp32_dots():
    """While active, the interpreter's fp32 'ieee' tl.dot is `fma_chain` (set TRITON_INTERPRET=1 first)."""
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    numpy_dot = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        operands = (a.data.dtype, b.data.dtype, d.data.dtype)
        if operands == (np.float32,) * 3 and str(input_precision).endswith("IEEE"):
            return interpreter.TensorHandle(fma_chain(a.data, b.data, d.data), d.dtype.scalar)
        return numpy_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot
    try:
        yield
    finally:
        builder.create_dot = numpy_dot
