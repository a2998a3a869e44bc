"""Triton's interpreter with numpy's xor reduction: tl.flip (and tl.xor_sum) at numpy speed.

The interpreter reduces with the combine functions it knows (sum, min, max, argmin, argmax) through numpy and with any
other one element by element in Python (interpreter.ReduceOps.generic_reduce: a Python call of the combine function
per element). tl.flip is an xor reduction (triton.language.standard: `y ^ xor_sum(y, dim)` on the bits), so the fused
FP8 quantization pass, whose fast Walsh-Hadamard transform swaps each butterfly's pair with tl.flip
(fa3nn/backends/triton/quantize.py), spent 174 of a 176 s test in that loop (cProfile, Triton 3.9, d128). Bitwise
xor is associative and commutative and exact, so numpy's bitwise_xor.reduce gives the same bits as the element loop
(tests/test_fp8_triton_interpreter.py checks both on one tile); the GPU compiles tl.flip itself, untouched by this.
"""

from __future__ import annotations

import contextlib

import numpy as np


@contextlib.contextmanager
def numpy_xor_reductions():
    """While active, the interpreter's reductions with triton.language.standard's xor combine run as
    numpy.bitwise_xor.reduce (set TRITON_INTERPRET=1 first). Anything else reduces as before."""
    import triton.language as tl
    from triton.runtime import interpreter

    ops = interpreter.ReduceOps
    element_loop = ops.apply_impl
    xor_combine = tl.standard._xor_combine

    def apply_impl(self, input):
        if self.combine_fn is xor_combine and len(input) == 1:
            data = input[0].handle.data
            return self.to_tensor(np.bitwise_xor.reduce(data, axis=self.axis, keepdims=self.keep_dims),
                                  input[0].dtype)
        return element_loop(self, input)

    ops.apply_impl = apply_impl
    try:
        yield
    finally:
        ops.apply_impl = element_loop
