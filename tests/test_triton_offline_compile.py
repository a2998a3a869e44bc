"""scripts/triton_offline_compile.py's SASS reading: spill instructions inside the tensor-core loops ("hot") and
the first such loop's length, on a hand-written cuobjdump listing (the compile itself needs Triton's CUDA backend
and ~5 s per kernel; benchmarks/NOTES.md, "v3", has its output)."""

from __future__ import annotations

import pytest
from script_module import load_script

# prologue spill; loop A (0x0040-0x0080) with HGMMA and one LDL; loop B (0x00b0-0x00d0) without tensor-core
# instructions but with an STL; an outer loop (0x0030-0x00e0) around both; an epilogue reload.
LISTING = """
        /*0000*/                   STL [R1], R200 ;                 /* 0x0000000001007387 */
        /*0010*/                   MOV R2, R3 ;                     /* 0x0000000001007387 */
        /*0020*/                   MOV R4, R5 ;                     /* 0x0000000001007387 */
        /*0030*/                   IADD3 R6, R6, 0x1, RZ ;          /* 0x0000000001007387 */
        /*0040*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ ; /* 0x0000000001007387 */
        /*0050*/                   LDL R7, [R1+0x4] ;               /* 0x0000000001007387 */
        /*0060*/                   FFMA R8, R8, R9, R10 ;           /* 0x0000000001007387 */
        /*0070*/                   ISETP.GE.AND P0, PT, R6, R11, PT ; /* 0x0000000001007387 */
        /*0080*/               @P0 BRA 0x40 ;                       /* 0x0000000001007387 */
        /*0090*/                   LDL R12, [R1+0x8] ;              /* 0x0000000001007387 */
        /*00a0*/                   MOV R13, R14 ;                   /* 0x0000000001007387 */
        /*00b0*/                   STL [R1+0xc], R15 ;              /* 0x0000000001007387 */
        /*00c0*/                   FADD R16, R16, R17 ;             /* 0x0000000001007387 */
        /*00d0*/               @P1 BRA 0xb0 ;                       /* 0x0000000001007387 */
        /*00e0*/               @P2 BRA 0x30 ;                       /* 0x0000000001007387 */
        /*00f0*/                   LDL R18, [R1] ;                  /* 0x0000000001007387 */
        /*0100*/                   EXIT ;                           /* 0x0000000001007387 */
"""


@pytest.fixture(scope="module")
def offline():
    pytest.importorskip("triton")
    return load_script("triton_offline_compile")


def test_hot_spills_count_only_tensor_core_loops(offline):
    hot, loop = offline.hot_loops(LISTING)
    assert hot == 1  # the LDL in loop A; loop B has no HGMMA, the others are outside innermost loops
    assert loop == 5  # 0x40..0x80


def test_sass_digest_reads_instructions_only(offline):
    """Two listings that differ only in addresses and encodings digest alike; one changed register does not."""
    moved = LISTING.replace("/*00", "/*10").replace("0x0000000001007387", "0x00000000ffffffff")
    assert offline.sass_digest(moved) == offline.sass_digest(LISTING)
    assert offline.sass_digest(LISTING.replace("MOV R4, R5", "MOV R4, R6")) != offline.sass_digest(LISTING)


def test_tiles_parse_and_the_tables_list_their_sources(offline):
    from fa3nn.backends.triton.configs import Tile

    assert offline.parse_tile("64x128x8x2") == Tile(64, 128, 8, 2)
    checked = dict(offline.tiles_to_check("dkdv", 128, True, ["pinned", "tables"]))
    assert checked[Tile(64, 64, 4, 2)] == "pinned<=1k,pinned<=4k,pinned>4k,4w2-tma<=1k,4w2-tma<=4k,4w2-tma>4k"
    assert checked[Tile(128, 64, 8, 2)] == "d128-query-major<=1k,d128-query-major<=4k,d128-query-major>4k"
    assert checked[Tile(16, 128, 8, 2)] == "least-spill<=1k,least-spill<=4k,least-spill>4k"
    d64 = dict(offline.tiles_to_check("dkdv", 64, False, ["pinned"]))
    assert d64 == {Tile(64, 64, 4, 3): "pinned<=1k,pinned<=4k,pinned>4k"}
