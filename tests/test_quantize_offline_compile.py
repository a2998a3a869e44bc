"""scripts/quantize_offline_compile.py's SASS counting on a hand-written cuobjdump listing (the compile itself needs
Triton's CUDA backend; benchmarks/NOTES.md, "The rotation as a fast Walsh-Hadamard transform", has its output)."""

from __future__ import annotations

import pytest
from script_module import load_script

# 9 instructions: predicated ones (@P0, @!PT) count under their opcode, modifiers (.F32, .BFLY) are dropped, the
# encoding comments (/* 0x... */) and the header are not instructions.
LISTING = """
        Function : _quantize_qkv_kernel
        /*0000*/                   LDG.E.128 R4, desc[UR6][R2.64] ;   /* 0x0000000001007387 */
        /*0010*/                   FADD R8, R4, R5 ;                  /* 0x0000000001007387 */
        /*0020*/                   FFMA R9, R4, -1, R5 ;              /* 0x0000000001007387 */
        /*0030*/                   SHFL.BFLY PT, R10, R8, 0x8, 0x1f ; /* 0x0000000001007387 */
        /*0040*/               @P0 FADD R11, R10, -R8 ;               /* 0x0000000001007387 */
        /*0050*/              @!PT LDS.128 R12, [R3] ;                /* 0x0000000001007387 */
        /*0060*/                   HMMA.1688.F32.TF32 R16, R12, R14, R16 ; /* 0x0000000001007387 */
        /*0070*/                   STS [R3], R16 ;                    /* 0x0000000001007387 */
        /*0080*/                   EXIT ;                             /* 0x0000000001007387 */
"""


@pytest.fixture(scope="module")
def offline():
    pytest.importorskip("triton")
    return load_script("quantize_offline_compile")


def test_opcode_counts(offline):
    counts = offline.opcode_counts(LISTING)
    assert counts == dict(sass=9, mma=1, falu=3, shared=2, shfl=1)
