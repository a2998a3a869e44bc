"""scripts/quantize_offline_compile.py's SASS counting on a hand-written cuobjdump listing (the compile itself needs
Triton's CUDA backend; benchmarks/NOTES.md, "The rotation as a fast Walsh-Hadamard transform", has its output)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from script_module import load_script

REPO = Path(__file__).resolve().parents[1]

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


# Compiled in a child process without TRITON_INTERPRET: CI sets it for the interpreter tests, and with it set every
# @triton.jit function of this process is an InterpretedFunction, which cannot be compiled.
_DUMP_PTX = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import quantize_offline_compile as offline
for headdim in (128, 256):
    launches = offline.record_launches(headdim, "fwht")
    assert len(launches) == 2, len(launches)  # Q, then K and V
    ptx = [offline.compile_offline(offline.KERNEL, args, kwargs, module=offline.quantize).asm["ptx"]
           for args, kwargs in launches]
    Path(sys.argv[2], f"d{headdim}.ptx").write_text(chr(10).join(ptx))
"""


@pytest.fixture(scope="module")
def quantize_ptx(tmp_path_factory):
    """PTX of the pass as the H200 runs it (sm_90a, d = 128 and 256, the default recipe: FWHT rotation, the default K/V
    tiles), compiled offline by whichever Triton is installed: its two launches (Q; K and V) each, their PTX
    joined (~20 s)."""
    pytest.importorskip("triton")
    out = tmp_path_factory.mktemp("quantize_ptx")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", _DUMP_PTX, str(REPO / "scripts"), str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {headdim: (out / f"d{headdim}.ptx").read_text() for headdim in (128, 256)}


@pytest.mark.parametrize("headdim", [128, 256])
def test_the_cast_saturates_and_vt_leaves_in_16_byte_stores(quantize_ptx, headdim):
    """What the pass's speed and values rest on (NOTES "The quantization pass: 33% fewer instructions"): the fp32 ->
    e4m3 cast is the saturating cvt (the kernel no longer clamps before it on the GPU, so a cast without .satfinite
    would turn 449..464 and +-Inf into NaN), no clamp is left (min.NaN appears only in it), and no operand is
    stored a byte at a time (Vᵀ was: 96 st.global.b8 per thread at d128 before its stores covered whole 16-column
    groups)."""
    ptx = quantize_ptx[headdim]
    casts = re.findall(r"cvt\.\S*e4m3x2\.f32", ptx)
    assert casts and set(casts) == {"cvt.rn.satfinite.e4m3x2.f32"}, sorted(set(casts))
    assert "min.NaN" not in ptx
    assert "st.global.b8" not in ptx and "st.global.v4.b32" in ptx
