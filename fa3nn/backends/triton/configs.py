"""Tile shapes for the Triton kernels: one pinned tile per (kernel, padded head dim, causal, sequence bucket), a rule
that shrinks it when the grid would leave SMs idle, and the opt-in autotune space.

The default never times anything: a call's tile is a pure function of its shape and the GPU's SM count and shared
memory, so two runs (or two processes) always run the same kernels. Autotuning was the default before, and it was
not reproducible: at head dim 128, seqlen 2048 one run picked (128, 64, 8 warps) and ran the forward at 428
TFLOP/s, another picked (64, 64, 4 warps) and ran it at 502 (benchmarks/NOTES.md, "Triton backend"). The pinned
tiles below are the winners of those measurements. FA3NN_TRITON_AUTOTUNE=1 still lets Triton's autotuner choose
among the pinned tile and ALTERNATIVES, keyed by (BLOCK_D, MASK_KIND, SEQ_BUCKET).

Tiles that would not fit the device's shared memory are shrunk before any launch (an A100 has 164 KB per block
against Hopper's 227 KB).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Tile:
    block_m: int  # query rows per tile
    block_n: int  # key rows per tile
    num_warps: int
    num_stages: int


def next_power_of_2(n: int) -> int:
    """triton.next_power_of_2 for the launchers' host-side sizes (n >= 1; 0 for n <= 0, as Triton's): Triton's is a
    ConstexprFunction, ~2 us per call from the host on the CPU machine, and one FP8 quantization call made 18 (s48:
    the FP8 training step is host-bound at 2k tokens per sequence)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


# Sequence buckets by max(seqlen_q, seqlen_k): <= 1024, <= 4096, longer. The autotune key uses the same buckets.
SEQ_BUCKET_LIMITS = (1024, 4096)
# One sequence length inside each bucket, for code that walks the buckets through the call-shape functions.
BUCKET_SEQLENS = (512, 2048, 8192)

# The backward's key-block (dK/dV) kernel kinds. "dkdv_split": split over head-dim parts (launch.dkdv_split),
# DKDV_SPLIT_PARTS programs per key block, each loading its part of the Q and dO columns besides the whole tiles
# (kernels._bwd_dkdv_kernel); "fused" / "fused_split": the same two with the opt-in atomic dQ (each part adding its
# dQ columns).
# "dv" / "dk": the output split, two kernels per key block instead of one: one accumulating dV (S, P, dV: 2
# matmuls), one dK (S, dP, dK: 3), so 8 matmuls with the dQ kernel's 3 instead of 7, each kernel holding one
# accumulator instead of two (the one-kernel d128 tiles run at 255 registers; launch.key_block_kinds). "dk_dq": the
# output split's dK kernel with the opt-in atomic dQ (S, dP, dK, dQ: 4 matmuls, so 6 in all with "dv"'s, no dQ
# kernel).
KEY_BLOCK_KINDS = ("dkdv", "dkdv_split", "fused", "fused_split", "dv", "dk", "dk_dq")
OUTPUT_SPLIT_KINDS = ("dv", "dk", "dk_dq")
SPLIT_KINDS = ("dkdv_split", "fused_split")
ATOMIC_DQ_KINDS = ("fused", "fused_split", "dk_dq")
DKDV_SPLIT_PARTS = 2
# The grid side of each kernel: forward and dQ programs own BLOCK_M query rows, dK/dV programs BLOCK_N key rows.
GRID_SIDE = {"fwd": "block_m", "dq": "block_m", **{kind: "block_n" for kind in KEY_BLOCK_KINDS}}
# The short-grid rule never goes below this many rows (one wgmma M tile per warpgroup).
MIN_GRID_BLOCK = 64

# The output split's kernels at d64 / d128 (not their default: OUTPUT_SPLIT below), one guess for both from offline
# compiles (Triton 3.6: d128 dk 64x128/8w/2 407 warp instructions per 1024 scores and no spill).
_OUTPUT_SPLIT_GUESSES = {(block_d, causal): (Tile(64, 128, 8, 2),) * 3
                         for block_d in (64, 128) for causal in (False, True)}

# PINNED[kind][(block_d, causal)] = (tile for seqlen <= 1k, <= 4k, longer). Sources, all H200 + Triton 3.6, bf16,
# the benchmark's shapes (benchmarks/results/): `sweep` = triton-h200-tune-hdim128-seqlen4096.json (one kernel's
# tile varied, the rest fixed); `runs` = the autotuner's picks and their TFLOP/s in final-h200.json,
# triton-h200-hdim128-final.json and triton-h200-atomic-dq-*.json (same forward code in all of them).
PINNED: dict[str, dict[tuple[int, bool], tuple[Tile, Tile, Tile]]] = {
    "fwd": {
        # d64, runs: 128x64/4w won where both were measured (2048 causal 327 vs 255; 8192 non-causal 420 vs 360);
        # causal past 4k took 128x128/8w before (the runs' only pick there). H200 sweeps 2026-12-01
        # (fa3nn.backends.triton.tune; results/tritonshort-h200-20261201-1308, tritonshort2-…-1310), 4 warps win up
        # to 4k: non-causal 128x64/4w 320 / 376 at 512 / 1024 (64x64/4w 313 / 374; 128x128/8w 220 / 281), 64x64/4w
        # 408 / 412 at 2048 / 4096 (128x64/4w 402 / 415; 128x128/8w 321 / 347); causal 64x64/4w 233 / 313 / 371 /
        # 408 at 512-4096 (128x64/4w 185 / 262 / 325 / 365; 128x128/8w 129 / 194 / 255 / 302), and at 8192
        # (tritonsweep3-…-1315) causal 64x64/4w 424 against 128x128/8w's 334, non-causal 128x64/4w 428 (64x64/4w 406).
        (64, False): (Tile(128, 64, 4, 3), Tile(64, 64, 4, 3), Tile(128, 64, 4, 3)),
        (64, True): (Tile(64, 64, 4, 3),) * 3,
        # d128: 64x64/4w/3 stages (two CTAs per SM, TMA loads) won every comparison: sweep at 4096 498 vs 456-484
        # non-causal, 475 vs 365-420 causal; runs at 2048 502 vs 428, 8192 536 vs 489, 512 376 vs 302.
        (128, False): (Tile(64, 64, 4, 3),) * 3,
        (128, True): (Tile(64, 64, 4, 3),) * 3,
        # d256: 128x64/8w (486 warp instructions per 1024 scores offline against 64x64/8w's 826 and 128x32/8w's
        # 682, at 24-32 B of stack). H200, 2026-12-01 (scripts/bench.py, same GPU, 2 stages against the tiles
        # before: 64x64/8w up to 4k, 128x32/8w past it): 2048 382 vs 295 non-causal, 303 vs 236 causal; 8192 407
        # vs 378 and 371 vs 357 (benchmarks/results/triton256-h200-20261201-1252). 3 stages (192 KB through TMA
        # descriptors; the pointer path without them shrinks to 2 in fit_shared_memory), sweep
        # (triton256sweep-…-1322): 1024 429 vs 348 non-causal, 294 vs 251 causal; 2048 483 vs 382, 369 vs 304.
        # Since 2026-12-02 (sixteenth session) 64x128/4w/1 through the batched descriptor views (TMA_BATCHED below;
        # offline 334 warp instructions per 1024 scores against 473, 5-9 hot spill instructions; by the (rows,
        # heads * dim) views it spills 5-10x more, so calls without the batched views keep 128x64/8w/3,
        # POINTER_FALLBACK), same run (results/next16-h200-20261202-2041): non-causal 442 / 536 / 602 / 640 / 626
        # TFLOP/s at 512 / 1k / 2k / 8k / 16k against 354 / 431 / 482 / 534 / 519 (+20..+25%), causal 265 / 363 /
        # 446 / 531 / 572 against 244 / 326 / 397 / 489 / 541 (+6..+12%); 128x128/8w/1 0.76-0.90x.
        (256, False): (Tile(64, 128, 4, 1),) * 3,
        (256, True): (Tile(64, 128, 4, 1),) * 3,
    },
    "dkdv": {
        # d64, runs: 32x128 up to 4k, 64x128 past it (both 8 warps, 3 stages). Non-causal past 1k: 64x128/2 stages
        # (H200, 2026-11-30, scripts/triton_tile_ab.py with the unmasked row stats, whole backward: 280 vs 265
        # TFLOP/s at 2048, 311 vs 295 at 8192, bitwise the same gradients); causal keeps 32x128 (64x128/2: 210 vs
        # 227 at 2048, 264 vs 291 at 8192). Up to 4k, H200 sweeps 2026-12-01 (whole backward, other kernels
        # pinned): 32x64/4 warps/3 stages beat every candidate: 238 / 284 / 298 / 312 TFLOP/s at 512-4096
        # non-causal (32x128/8w/3 207 / 245, 64x128/8w/2 280 / 305 at 2048 / 4096), 154 / 212 / 254 / 278 causal
        # (32x128/8w/3 132 / 183 / 228 / 258). At 8192 (tritonsweep3-…-1315): causal 32x64/4w 304 against
        # 64x128/8w/3's 293 (taken); non-causal 320 against 64x128/8w/2's 314 (within run-to-run noise: kept).
        # Since 2026-12-02 the d64 kernel takes query-major scores (QUERY_MAJOR below) and these tiles from
        # its sweep (whole backward, H200, results/querymajor-h200-20261202-1207, querymajor2-…-1213), TFLOP/s at
        # 512 / 1k / 2k / 4k / 8k / 16k: 64x64/4w/3 non-causal 258.8 / 314.7 / 333.3 / 339.9 / 349.7 / 347.5
        # against the key-major pinned tiles above 239.9 / 283.2 / 308.5 / 308.9 / 315.1 / 313.3; causal 64x64/4w/3
        # from 2k 278.9 / 305.4 / 337.6 / 349.4 (key-major 256.8 / 279.1 / 303.7 / 312.6), 64x64/4w/2 up to 1k
        # 165.9 / 226.5 (154.4 / 210.9; 3 stages 153.4 / 220.9). The best key-major tile at 8k non-causal,
        # 128x64/4w/2, read 355.9 (query-major 349.7: within the spread; elsewhere it lost).
        (64, False): (Tile(64, 64, 4, 3),) * 3,
        (64, True): (Tile(64, 64, 4, 2), Tile(64, 64, 4, 3), Tile(64, 64, 4, 3)),
        # d128, sweep at 4096 (whole backward): 64x128/8w/2 stages 244 non-causal, 211 causal; the 32-row tiles
        # (the only spill-free ones) 230-238 and 206-208. Runs picked 32x128/3 stages at 512. Non-causal past 1k
        # with one stage (no software pipelining: 24 B of stack instead of 184, 604 instructions per 1024 scores
        # instead of 647): H200, same run as d64's, 340 vs 333 at 2048, 369 vs 363 at 8192, bitwise the same.
        # Causal keeps 2 stages (one spills 696 B there). H200 sweeps 2026-12-01 (whole backward): 32x64/4w/3
        # non-causal 256 / 317 / 357 at 512 / 1024 / 2048 against the pinned 235 / 287 (32x128/8w/3) / 341
        # (64x128/8w/1); causal 2048 278 against 64x128/8w/2's 268; up to 1k causal 32x128/8w/2 148 / 207 against
        # 32x64/4w's 143 / 210 (kept). At 8192 the pinned ones stay (non-causal 377 vs 369, causal 348 vs 350).
        # Causal up to 4k from the twelfth session to the fourteenth: query-major scores on 64x64/4w/2 by pointers,
        # whole backward 218.7 / 285.2 / 322.3 TFLOP/s at 1024 / 2048 / 4096 against the key-major tiles' 208.1
        # (32x128/8w/2) / 277.5 / 316.4 (32x64/4w/3) (results/final12-h200-20261202-1224, querymajor-…-1207).
        # Since 2026-12-02 (fourteenth session), causal and not: key-major 64x64/4w/2 with Q and dO
        # through descriptors (TMA_LOADS["dkdv"] below), the shape of scripts/triton_ws_probe.py's fastest loop; whole
        # backward, gradients checked (results/4w2-h200-20261202-1726): 2048 392 vs 368 non-causal (32x64/4w/3),
        # 307 vs 296 causal (query-major 64x64/4w/2 by pointers); 8192 413 vs 382 (64x128/8w/1), 392 vs 361
        # (64x128/8w/2); 16384 410 vs 365, 401 vs 378.
        # Up to 1k too (results/final14-h200-20261202-1733): 512 273 vs 262 non-causal (32x64/4w/3), 152 vs 150
        # causal (query-major); 1024 345 vs 325, 228 vs 223.
        (128, False): (Tile(64, 64, 4, 2),) * 3,
        (128, True): (Tile(64, 64, 4, 2),) * 3,
        # d256 (only with FA3NN_TRITON_DKDV_SPLIT_D=1; by default d256 runs "dkdv_split"), runs: 64x32 up to 4k,
        # 32x64 past it (8 warps, 2 stages).
        (256, False): (Tile(64, 32, 8, 2), Tile(64, 32, 8, 2), Tile(32, 64, 8, 2)),
        (256, True): (Tile(64, 32, 8, 2), Tile(64, 32, 8, 2), Tile(32, 64, 8, 2)),
    },
    "dkdv_split": {
        # With half the dK/dV columns per program the d256 kernel takes wgmma-sized tiles. Triton 3.6 offline (per
        # program): 32x128/8w/2 stages 852 warp instructions per 1024 scores (786 causal), no spill in the loop;
        # 64x128/8w/1 stage 552 (881 causal) with 24 (414 causal) spill instructions in the loop; the one-program
        # tiles 1700-2028 for the whole head dim. H200, 2026-12-01, whole backward against the one-program kernel
        # (scripts/triton_tile_ab.py, gradients checked): 2048 190 vs 157 TFLOP/s non-causal, 161 vs 139 causal;
        # 8192 201 vs 165 and 197 vs 177 (benchmarks/results/triton256-h200-20261201-1252). Up to 1k: not measured.
        # 1k-4k non-causal since 2026-12-02 (fa3nn.backends.triton.tune at 2048, results/d256short12-h200-20261202-
        # 1236): 64x128/8w/1 226.7 TFLOP/s whole backward against 32x128/8w/2's 209.7 (causal: 127.5 against 179.3,
        # kept; 16x128 and 32x64 tiles 102-192).
        (256, False): (Tile(32, 128, 8, 2), Tile(64, 128, 8, 1), Tile(64, 128, 8, 1)),
        (256, True): (Tile(32, 128, 8, 2),) * 3,
    },
    "dq": {
        # d64, runs: 64x64/4w everywhere except causal past 4k (128x64/8w).
        (64, False): (Tile(64, 64, 4, 3),) * 3,
        (64, True): (Tile(64, 64, 4, 3), Tile(64, 64, 4, 3), Tile(128, 64, 8, 3)),
        # d128, sweep at 4096: 128x64/8w/3 stages 243 non-causal, 225 causal, against 206-238 and 193-219. Causal
        # up to 1k since 2026-12-02 (fifteenth session), with K / V through descriptors (TMA_LOADS below): 64x64/4w/2
        # (offline, Triton 3.6: 282 warp instructions per 1024 scores, no spill, 97 KB, two CTAs per SM; the
        # 128x64/8w/3 by pointers 290), whole backward 190 vs 182 TFLOP/s at 512, 266 vs 263 at 1k; non-causal
        # 1.00 / 0.97x, and 0.95-0.99x from 2k (results/next15-h200-20261202-1907).
        (128, False): (Tile(128, 64, 8, 3),) * 3,
        (128, True): (Tile(64, 64, 4, 2), Tile(128, 64, 8, 3), Tile(128, 64, 8, 3)),
        # d256: 128x32/8w/2 stages (no spills offline; 64x32/4w spills 136-160 B). H200 sweep 2026-12-01 (whole
        # backward, triton256sweep-…-1322): 1024 193 vs 172 non-causal, 146 vs 133 causal; 2048 210 vs 190, 180 vs
        # 161 against 64x32/4w (64x64/8w 164-178).
        # Since 2026-12-02 (sixteenth session) 64x64/4w/2 with K / V through the batched descriptor views (offline
        # 339 warp instructions per 1024 scores against 540, 7-8 hot spill instructions; 26-63 through the (rows,
        # heads * dim) views, so calls without the batched views keep 128x32/8w/2, POINTER_FALLBACK), whole
        # backward, same run (results/next16-h200-20261202-2041): non-causal +1.0 / +0.4 / +2.9 / +7.8 / +5.3% at
        # 512 / 1k / 2k / 8k / 16k, causal -0.7 / +0.2 / +0.7 / +0.4 / +2.5% (up to 1k causal: not taken).
        (256, False): (Tile(64, 64, 4, 2),) * 3,
        (256, True): (Tile(128, 32, 8, 2), Tile(64, 64, 4, 2), Tile(64, 64, 4, 2)),
    },
    "fused_split": {
        # The opt-in atomic dQ with the head-dim split (d256); H200 2026-12-01 (results/tritondq-fusedsplit-…-1503):
        # whole backward 0.82-0.86x the default split backward at 2048 / 8192. Triton 3.6 offline, warp instructions
        # per 1024 scores for both parts: 32x128/8w/1 stage 1980 (1912 causal), 3 spill instructions in the loop,
        # 208 KB; against the default split backward's 2 x 852 + 518 (dQ kernel) = 2222 up to 4k and 2 x 552 + 518
        # = 1622 past it. 32x128/8w/2 needs 280 KB; 16x128 3040; 64x64 and 4-warp tiles spill 100-270 words.
        (256, False): (Tile(32, 128, 8, 1),) * 3,
        (256, True): (Tile(32, 128, 8, 1),) * 3,
    },
    # The output split's kernels (FA3NN_TRITON_DKDV_OUTPUTS; the d256 default, OUTPUT_SPLIT below). d64 / d128:
    # first guesses from offline compiles (Triton 3.6), measured 0.70-0.83x the one dK/dV kernel at d128 (H200,
    # 2026-12-02, results/outsplit-h200-20261202-1528). d256 (results/o2-h200-20261202-1529, whole backward with
    # the dQ kernel on a second stream, TFLOP/s at 2048 / 8192): non-causal dv + dk 64x128/8w/1 263 / 264 against
    # the head-dim split's 234 / 235 (32x128/8w/2 for both 257 / 259); causal dk 32x128/8w/2 221 / 277 (dv
    # 64x128/8w/1 or 32x128/8w/2 alike) against 187 / 227 (dk 64x128/8w/1: 186 / 241). d256 non-causal dv past 1k
    # on two stages (results/next14-h200-20261202-1702, whole backward, gradients checked): 278 / 287 / 286 against
    # 264 / 264 / 262 at 2048 / 8192 / 16384 (+5 / +9 / +9%); causal 0.98-1.01x, not changed; 512 / 1024 not measured.
    # d256 up to 1k since 2026-12-02 (sixteenth session): 64x64/4w/1 with Q / dO through the batched descriptors
    # (TMA_LOADS["dv"]; 96 KB and 255 registers, two CTAs per SM; offline 282 / 314 warp instructions per 1024 scores
    # non-causal / causal against 298 / 342 by pointers), whole backward, same run (results/s16c-h200-20261202-2144):
    # 204 / 242 vs 200 / 238 TFLOP/s at 512 / 1k non-causal, 137 / 183 vs 132 / 179 causal (+1.5..+4.1%); past 1k
    # 0.93-0.96x non-causal, 1.00x causal. Through the (rows, heads * dim) views 0.99x causal: BATCHED_ONLY.
    "dv": {**_OUTPUT_SPLIT_GUESSES,
           (256, False): (Tile(64, 64, 4, 1), Tile(64, 128, 8, 2), Tile(64, 128, 8, 2)),
           (256, True): (Tile(64, 64, 4, 1), Tile(64, 128, 8, 1), Tile(64, 128, 8, 1))},
    "dk": {**_OUTPUT_SPLIT_GUESSES, (256, False): (Tile(64, 128, 8, 1),) * 3, (256, True): (Tile(32, 128, 8, 2),) * 3},
    # The opt-in atomic dQ with the output split (FA3NN_TRITON_ATOMIC_DQ=1 where OUTPUT_SPLIT holds). d256, whole
    # backward against the default (H200, 2026-12-02, results/dkdq2-h200-20261202-1939, gradients checked):
    # 64x128/8w/1 0.91 / 0.96 / 1.045 at 512 / 2k / 8k non-causal, 0.81 / 0.89 / 0.92 causal (offline, Triton 3.6:
    # 649 warp instructions per 1024 scores against the dK + dQ kernels' 445 + 518, but 17 spill instructions in the
    # loop non-causal, 99 causal); 32x128/8w/1 (no spill in the loop) 0.79-0.85; 32x64/8w/2 0.56-0.64. So opt-in.
    "dk_dq": {**_OUTPUT_SPLIT_GUESSES, **{(256, causal): (Tile(64, 128, 8, 1),) * 3 for causal in (False, True)}},
    "fused": {  # the opt-in atomic-dQ backward (FA3NN_TRITON_ATOMIC_DQ=1), runs with it as the default
        (64, False): (Tile(32, 128, 8, 3), Tile(64, 128, 8, 3), Tile(64, 128, 8, 3)),
        (64, True): (Tile(32, 128, 8, 3), Tile(64, 128, 8, 3), Tile(64, 128, 8, 3)),
        (128, False): (Tile(64, 64, 8, 2), Tile(64, 64, 8, 2), Tile(64, 128, 8, 2)),
        (128, True): (Tile(64, 64, 8, 2),) * 3,
        (256, False): (Tile(64, 32, 8, 2), Tile(64, 32, 8, 2), Tile(32, 64, 8, 2)),
        (256, True): (Tile(64, 32, 8, 2), Tile(64, 32, 8, 2), Tile(32, 64, 8, 2)),
    },
}
# The "dkdv" kernel's score orientation per (padded head dim, causal) and sequence bucket, the tiles above measured
# with it (launch.dkdv_query_major; FA3NN_TRITON_DKDV_QUERY_MAJOR=0/1 overrides): True = queries x keys (lse and
# delta per row), False = keys x queries (one lse and delta value per column and thread). Query-major won at d64
# everywhere (+7..+12% on the whole backward) and at d128 causal up to 4k (+2..+5%, by pointers; key-major with
# descriptors beat it by 1-4% since, TMA_LOADS below); it lost at d128 non-causal (4096: 343.6 vs 362.1 TFLOP/s for
# the best tile of each) and spills in the loop at d256 (offline).
QUERY_MAJOR: dict[tuple[int, bool], tuple[bool, bool, bool]] = {
    (64, False): (True,) * 3, (64, True): (True,) * 3,
    (128, False): (False,) * 3, (128, True): (False,) * 3,
    (256, False): (False,) * 3, (256, True): (False,) * 3,
}
# Where the backward's kernels load through tensor descriptors (launch.tma_loads: sm_90 with
# descriptors, the pointer path elsewhere; FA3NN_TRITON_DKDV_TMA / FA3NN_TRITON_DQ_TMA=0/1 override), per kernel kind
# ("dkdv": Q and dO; "dq": K and V), (padded head dim, causal) and sequence bucket; the tiles above were measured
# with them. "dkdv" d128, every bucket: key-major 64x64/4w/2 spills in its loop by pointers (21 instructions
# offline) and not through descriptors (452 instructions per loop step, 2 spill instructions; Triton 3.6); with
# one stage descriptors lost (0.82x at 16k, 64x128/8w/1), with two they won (PINNED above). d64 on that tile:
# 0.90-0.96x its query-major pinned tiles (results/4w2-h200-20261202-1726). "dq", with TMA_BATCHED's views below
# (scripts/triton_tile_ab.py, whole backward, H200, 2026-12-02): d128 -0.9..+1.8% over the batched views alone, at
# noise level, and its causal-short 64x64/4w/2 tile (PINNED above) was measured with them
# (results/next15-h200-20261202-1907); d64 +1.5..+2.1% up to 2k and +0.9 / +1.1% at 8k /
# 16k non-causal, -4.4 / -6.1% at 8k / 16k causal (with the batched views, results/ab15-h200-20261202-1912);
# d256 -1.7..-2.3% everywhere on the 128x32/8w/2 tile (ab15); with 64x64/4w/2 and the batched views +0.2..+7.8% from
# 1k causal and everywhere non-causal (next16; PINNED above). "dv" d256 up to 1k: its 64x64/4w/1 tile (s16c; PINNED).
TMA_LOADS: dict[str, dict[tuple[int, bool], tuple[bool, bool, bool]]] = {
    "dkdv": {(128, False): (True,) * 3, (128, True): (True,) * 3},
    "dv": {(256, False): (True, False, False), (256, True): (True, False, False)},
    "dq": {(64, False): (True,) * 3, (64, True): (True, True, False),
           (128, False): (True,) * 3, (128, True): (True,) * 3,
           (256, False): (True,) * 3, (256, True): (False, True, True)},
}
# Where descriptors lie over the (batch, seqlen, heads * dim) views instead of (batch * seqlen, heads * dim) ones
# (launch.tma_batched; FA3NN_TRITON_TMA_BATCHED=0/1 overrides), per direction, (padded head dim, causal) and sequence
# bucket, for dense calls: the copy engine then zero-fills rows past each sequence, so no masked run zeroes
# Q / dO / K / V tiles through registers (offline, Triton 3.6: d128 dK/dV causal masked loops 1395 / 1160 -> 944 /
# 846 instructions, d256 causal forward 821 -> 634 with barriers 25 -> 4, d128 dQ masked loop 616 -> 428). Only
# where the call uses descriptors at all. H200, 2026-12-02, same run each (scripts/triton_tile_ab.py; forward
# results/ab15-h200-20261202-1912, d128 backward next15-…-1907): forward d128 +3.8 / +7.9% at 512 (non-causal /
# causal), 1.00 / +3.3% at 1k, 0.92-0.99x from 2k (the short rows' masked tails are most of their work); d256
# causal +16 / +11 / +8 / +7 / +3% at 512 / 1k / 2k / 8k / 16k, non-causal 0.97-1.01x (its 3 stages do not fit
# through these views: 257 KB, so 2); d64 0.93-0.98x causal, 0.94-1.01x non-causal. Backward d128 +0.8..+4% non-
# causal, +19 / +15 / +10 / +3 / +1% causal at 512 / 1k / 2k / 8k / 16k (the dK/dV kernel's Q / dO and, with
# TMA_LOADS["dq"], the dQ kernel's K / V); d64 as TMA_LOADS["dq"] (the only descriptors of its backward). d256
# forward, dQ and dV (up to 1k) since the sixteenth session: their tiles in PINNED were measured (the first two
# only fit without spills) through these views (BATCHED_ONLY).
TMA_BATCHED: dict[str, dict[tuple[int, bool], tuple[bool, bool, bool]]] = {
    "fwd": {(128, False): (True, False, False), (128, True): (True, False, False),
            (256, False): (True,) * 3, (256, True): (True,) * 3},
    "bwd": {(64, False): (True,) * 3, (64, True): (True, True, False),
            (128, False): (True,) * 3, (128, True): (True,) * 3,
            (256, False): (True,) * 3, (256, True): (True,) * 3},
}
# A kernel's tiles (and, for "dkdv", its score orientation) where TMA_LOADS asks for descriptors (the forward: always)
# but the call cannot have them (GPUs before sm_90, Triton without descriptors, a head dim padded to the block such as
# 96 -> 128, FA3NN_TRITON_TMA=0), or, for the (kind, padded head dim) pairs of BATCHED_ONLY, lacks the batched views
# (varlen calls, FA3NN_TRITON_TMA_BATCHED=0): the H200's choices from before the descriptor tiles (d128 "dkdv"
# 64x64/4w/2 spills in its loop by pointers; "dq" 64x64/4w/2 was only measured through descriptors), with the "dkdv"
# orientation measured with them (query-major up to 4k causal). launch passes `pointers=True` to pinned /
# query_major there.
POINTER_FALLBACK: dict[str, dict[tuple[int, bool], tuple[tuple[Tile, Tile, Tile], tuple[bool, bool, bool] | None]]] = {
    "dkdv": {
        (128, False): ((Tile(32, 64, 4, 3), Tile(32, 64, 4, 3), Tile(64, 128, 8, 1)), (False,) * 3),
        (128, True): ((Tile(64, 64, 4, 2), Tile(64, 64, 4, 2), Tile(64, 128, 8, 2)), (True, True, False)),
    },
    "dq": {(128, True): ((Tile(128, 64, 8, 3),) * 3, None),
           **{(256, causal): ((Tile(128, 32, 8, 2),) * 3, None) for causal in (False, True)}},
    "fwd": {(256, causal): ((Tile(128, 64, 8, 3),) * 3, None) for causal in (False, True)},
    "dv": {(256, False): ((Tile(64, 128, 8, 1), Tile(64, 128, 8, 2), Tile(64, 128, 8, 2)), None),
           (256, True): ((Tile(64, 128, 8, 1),) * 3, None)},
}
# The (kind, padded head dim) pairs whose table tiles were measured only through the batched views and are worse
# through the (rows, heads * dim) ones (sixteenth session): d256 forward 64x128/4w/1 and dQ 64x64/4w/2 spill there
# (offline, Triton 3.6: 5-10x the hot spill instructions), dV 64x64/4w/1 up to 1k measured 0.99x causal there against
# 1.04x batched; their calls without the batched views take POINTER_FALLBACK's tiles.
BATCHED_ONLY: frozenset[tuple[str, int]] = frozenset({("fwd", 256), ("dq", 256), ("dv", 256)})
# Where the backward runs the output split ("dv" + "dk" kernels) instead of the one dK/dV kernel, per (padded head
# dim, causal) and sequence bucket (launch.key_block_kinds; FA3NN_TRITON_DKDV_OUTPUTS=joint/split overrides). The
# split kernels take key-major scores unless FA3NN_TRITON_DKDV_QUERY_MAJOR=1. d256: +12..+23% over the head-dim
# split at 2048 / 8192 (5 matmul-equivalents per key and query block instead of 6, one accumulator per program);
# d128: 0.70-0.83x the one kernel (8 matmuls instead of 7, and no faster per matmul). H200, 2026-12-02.
OUTPUT_SPLIT: dict[tuple[int, bool], tuple[bool, bool, bool]] = {
    (64, False): (False,) * 3, (64, True): (False,) * 3,
    (128, False): (False,) * 3, (128, True): (False,) * 3,
    (256, False): (True,) * 3, (256, True): (True,) * 3,
}
for _table in (QUERY_MAJOR, OUTPUT_SPLIT):
    _table[(32, False)], _table[(32, True)] = _table[(64, False)], _table[(64, True)]

# Head dim 32 has no measurements: it takes head dim 64's tiles (its accumulators are half as large).
for _table in PINNED.values():
    for _causal in (False, True):
        if (64, _causal) in _table:
            _table[(32, _causal)] = _table[(64, _causal)]

# Candidate tables, not yet timed on a GPU: each replaces some PINNED entries and is selected by name with
# FA3NN_TRITON_TILES=<name> (or configs.TILE_TABLE = <name>, as scripts/triton_tile_ab.py does to time them side
# by side with "pinned"). They come from compiling for sm_90a on the CPU with Triton 3.6 + its ptxas 12.8, the
# H200's versions (scripts/triton_offline_compile.py; table and stack bytes in benchmarks/NOTES.md, "v3"): the
# pinned dK/dV tiles spill (d128 64x128/8w/2: 184 B of stack non-causal, 520 B causal; d64 64x128/8w/3: 152 B
# and 640 B; d256 64x32 and 32x64: 96-312 B; d256 dQ 64x32/4w: 136-160 B), but the spill code sits outside the
# loops that run at the benchmark's shapes; `least-spill` removes it anyway, `fewest-instructions` goes by the
# issue cost per score instead.
CANDIDATE_TABLES: dict[str, dict[str, dict[tuple[int, bool], tuple[Tile, Tile, Tile]]]] = {
    # The fewest spills of any tile checked, per kernel. dK/dV d128: 16 query rows per step (the one 8-warp tile
    # with 0 B causal and non-causal); d64 past 4k: 2 stages, not 3 (0 B non-causal); d256: 16x64 on wgmma (0 B
    # non-causal, 88 B causal) instead of 64x32 on mma.sync / 32x64 (96-312 B). dQ d256: 8 warps instead of 4
    # (0 B, against 136-160 B).
    "least-spill": {
        "dkdv": {
            (64, False): (Tile(32, 128, 8, 3), Tile(32, 128, 8, 3), Tile(64, 128, 8, 2)),
            (128, False): (Tile(16, 128, 8, 2),) * 3,
            (128, True): (Tile(16, 128, 8, 2),) * 3,
            (256, False): (Tile(16, 64, 8, 2),) * 3,
            (256, True): (Tile(16, 64, 8, 2),) * 3,
        },
        "dq": {
            (256, False): (Tile(64, 32, 8, 2),) * 3,
            (256, True): (Tile(64, 32, 8, 2),) * 3,
        },
    },
    # The fewest SASS instructions per score in the hot loop among tiles without spills there and with >= 2 stages
    # (scripts/triton_offline_compile.py, column w/kscore; Triton 3.6). dK/dV d64: 64x128/2 stages, 549 (608
    # causal) warp instructions per 1024 scores against the pinned 712-778 (<= 4k) and 690-702 (> 4k); dQ d128:
    # 128x128, 236-246 against 288-290 (but v1's sweep measured it 2% slower, old code: the metric is a guide);
    # dQ d256: 128x32/8 warps, 518-528 against 590, and no spills (pinned 64x32/4w: 136-160 B). d128 and d256 dK/dV
    # are at the minimum already.
    "fewest-instructions": {
        "dkdv": {
            (64, False): (Tile(64, 128, 8, 2),) * 3,
            (64, True): (Tile(64, 128, 8, 2),) * 3,
        },
        "dq": {
            (128, False): (Tile(128, 128, 8, 2),) * 3,
            (128, True): (Tile(128, 128, 8, 2),) * 3,
            (256, False): (Tile(128, 32, 8, 2),) * 3,
            (256, True): (Tile(128, 32, 8, 2),) * 3,
        },
    },
    # Query-major d128 dK/dV tiles with 128 queries per step on 8 warps (run with FA3NN_TRITON_DKDV_QUERY_MAJOR=1;
    # not timed): Triton 3.6 offline 128x64/8w/2 422 warp instructions per 1024 scores (419 causal), 2 spill
    # instructions in the loop non-causal (0 causal), against the pinned key-major 64x128/8w/1's 373 with one stage
    # (no prefetch; the d128 dK/dV kernel measured 1.4x the dQ kernel's time per matmul, NOTES "2026-12-02 twelfth").
    "d128-query-major": {
        "dkdv": {
            (128, False): (Tile(128, 64, 8, 2),) * 3,
            (128, True): (Tile(128, 64, 8, 2),) * 3,
        },
    },
    # Key-major d128 non-causal dK/dV on 4 warps, one stage, with Q / dO through tensor descriptors (run with
    # FA3NN_TRITON_DKDV_TMA=1 FA3NN_TRITON_DKDV_QUERY_MAJOR=0; not timed): Triton 3.6 offline 396 warp instructions
    # per 1024 scores, 10 spill words outside the loop, 64 KB, so two CTAs per SM that do not wait at each other's
    # barriers (the pinned 64x128/8w/1: 373, one CTA of two warpgroups in lockstep; without descriptors the 4-warp
    # tile spills in its loop, 21 instructions, and causal with them too, 147).
    "d128-4w-tma": {
        "dkdv": {
            (128, False): (Tile(64, 64, 4, 1),) * 3,
        },
    },
    # Key-major 64x64/4w on two stages with Q / dO through descriptors (FA3NN_TRITON_DKDV_TMA), d64 / d128: a
    # minimal dK/dV loop of that shape (scripts/triton_ws_probe.py "plain 64x64/4w/2": K / V / Q / dO by TMA, no
    # masking, 241 registers, no spill) ran its 4 matmuls at 562 / 636 / 609 TFLOP/s at 2k / 8k / 16k (H200,
    # results/wsprobe2-h200-20261202-1722) where the library's dK/dV kernel runs them at 459 / 467 / 428
    # (bwd_breakdown, wsprobe-…-1717). This kernel at that tile, offline (Triton 3.6): unmasked loop 452
    # instructions with 2 spill instructions (d128 causal 486 / 3; d64 403 / 0), the masked loops 29-56.
    "4w2-tma": {
        "dkdv": {(d, causal): (Tile(64, 64, 4, 2),) * 3 for d in (64, 128) for causal in (False, True)},
    },
    # The pinned d128 non-causal dK/dV tile before 2026-11-30 evening (two stages), and d64's (32x128/3 stages
    # at 1k-4k, 64x128/3 past it): for A/B runs against the current pinned ones.
    "dkdv-two-stage": {
        "dkdv": {
            (64, False): (Tile(32, 128, 8, 3), Tile(32, 128, 8, 3), Tile(64, 128, 8, 3)),
            (128, False): (Tile(32, 128, 8, 3), Tile(64, 128, 8, 2), Tile(64, 128, 8, 2)),
        },
    },
}
TILE_TABLE = os.environ.get("FA3NN_TRITON_TILES", "pinned")


def tile_table(kind: str) -> dict[tuple[int, bool], tuple[Tile, Tile, Tile]]:
    """PINNED[kind], with the entries of the candidate table TILE_TABLE names (when not "pinned") replaced."""
    if TILE_TABLE == "pinned":
        return PINNED[kind]
    if TILE_TABLE not in CANDIDATE_TABLES:
        raise ValueError(f"FA3NN_TRITON_TILES={TILE_TABLE!r} names no tile table; use one of "
                         f"{['pinned', *CANDIDATE_TABLES]}")
    return {**PINNED[kind], **CANDIDATE_TABLES[TILE_TABLE].get(kind, {})}


# Extra tiles the opt-in autotuner may pick, per (kind, block_d): the previous candidate lists (ptxas-guided).
ALTERNATIVES: dict[str, dict[int, list[Tile]]] = {
    "fwd": {32: [Tile(128, 64, 4, 3), Tile(128, 128, 8, 3)], 64: [Tile(128, 64, 4, 3), Tile(128, 128, 8, 3)],
            128: [Tile(64, 64, 4, 3), Tile(128, 64, 8, 3), Tile(128, 128, 8, 3)],
            256: [Tile(128, 64, 8, 3), Tile(128, 64, 8, 2), Tile(128, 32, 8, 2), Tile(64, 64, 8, 2)]},
    "dkdv": {32: [Tile(32, 128, 8, 3), Tile(64, 128, 8, 3)], 64: [Tile(32, 128, 8, 3), Tile(64, 128, 8, 3)],
             128: [Tile(64, 128, 8, 2), Tile(32, 128, 8, 2), Tile(32, 128, 8, 3)],
             256: [Tile(64, 32, 8, 2), Tile(32, 64, 8, 2)]},
    "dkdv_split": {256: [Tile(32, 128, 8, 2), Tile(64, 128, 8, 1)]},
    "fused_split": {256: [Tile(32, 128, 8, 1), Tile(16, 128, 8, 2)]},
    "fused": {32: [Tile(64, 128, 8, 3), Tile(32, 128, 8, 3)], 64: [Tile(64, 128, 8, 3), Tile(32, 128, 8, 3)],
              128: [Tile(64, 128, 8, 2), Tile(32, 128, 8, 2), Tile(64, 64, 8, 2)],
              256: [Tile(64, 32, 8, 2), Tile(32, 64, 8, 2)]},
    **{kind: {32: [Tile(64, 128, 8, 2), Tile(32, 64, 4, 3)], 64: [Tile(64, 128, 8, 2), Tile(32, 64, 4, 3)],
              128: [Tile(64, 128, 8, 2), Tile(64, 128, 8, 3), Tile(32, 64, 4, 3)],
              256: [Tile(64, 64, 8, 2), Tile(32, 128, 8, 2)]} for kind in OUTPUT_SPLIT_KINDS},
    "dq": {32: [Tile(128, 64, 8, 3), Tile(64, 64, 4, 3)], 64: [Tile(128, 64, 8, 3), Tile(64, 64, 4, 3)],
           128: [Tile(128, 64, 8, 3), Tile(128, 64, 8, 2), Tile(128, 128, 8, 2)],
           256: [Tile(64, 32, 4, 2), Tile(64, 64, 8, 2)]},
}

# Under the interpreter: small, unequal tiles, so that small test shapes still cross several blocks of each kind.
INTERPRETER = {"fwd": Tile(32, 16, 4, 1), "dq": Tile(32, 16, 4, 1),
               **{kind: Tile(16, 32, 4, 1) for kind in KEY_BLOCK_KINDS}}

# A tile pinned per kind for a sweep (fa3nn.backends.triton.tune): used as is, before any table, rule or tuner.
OVERRIDES: dict[str, Tile] = {}


def switch(value: str, env: str, auto: bool = False) -> bool | None:
    """The backend's switches, one reading: True for "1", False for "0", None for "auto" where the switch has that
    mode (`auto`). Anything else raises, naming the variable `env`: read as `== "1"`, "true" turned default-on
    switches off, "yes" did nothing and FA3NN_TRITON_TMA=on meant auto."""
    if value not in (("auto", "1", "0") if auto else ("1", "0")):
        raise ValueError(f"{env}={value}: use auto (the default), 1 or 0" if auto else f"{env}={value}: use 1 or 0")
    return None if value == "auto" else value == "1"


def env_switch(env: str, default: str) -> bool | None:
    """The environment variable `env` through switch, `default` ("1", "0" or "auto", which gives it that mode)
    where it is unset."""
    return switch(os.environ.get(env, default), env, auto=default == "auto")


def autotune_enabled() -> bool:
    """FA3NN_TRITON_AUTOTUNE=1 opts into timing the candidates on first use of each key (not reproducible run to
    run; deterministic=True calls still take the pinned tile)."""
    return env_switch("FA3NN_TRITON_AUTOTUNE", "0")


def seq_bucket(max_seqlen: int) -> int:
    """0 for max_seqlen <= 1024, 1 for <= 4096, 2 for longer (table column, and autotune key)."""
    return sum(max_seqlen > limit for limit in SEQ_BUCKET_LIMITS)


def _pointer_fallback(kind: str, block_d: int, causal: bool, pointers: bool):
    """POINTER_FALLBACK's entry where it applies (the kernel asked for descriptors it cannot have), else None."""
    return POINTER_FALLBACK.get(kind, {}).get((max(32, block_d), causal)) if pointers else None


def lacks_measured_views(kind: str, block_d: int, measured_tma: bool, views_rank: int | None) -> bool:
    """Whether a call of `kind` lacks the descriptor views its table tile was measured with (POINTER_FALLBACK then
    serves): `measured_tma`, the table's tile came through descriptors; `views_rank`, the rank of the call's
    descriptor views (2: (rows, heads * dim), 3: batched; None: by pointers)."""
    if not measured_tma:
        return False
    return views_rank is None or (views_rank == 2 and (kind, max(32, block_d)) in BATCHED_ONLY)


def query_major(block_d: int, causal: bool, max_seqlen: int, pointers: bool = False) -> bool:
    """QUERY_MAJOR's entry for a call of the "dkdv" kernel (POINTER_FALLBACK's with `pointers`, where it has one)."""
    fallback = _pointer_fallback("dkdv", block_d, causal, pointers)
    table = fallback[1] if fallback else QUERY_MAJOR[(max(32, block_d), causal)]
    return table[seq_bucket(max_seqlen)]


def _bucket_entry(table: dict, block_d: int, causal: bool, max_seqlen: int) -> bool:
    """A (padded head dim, causal) -> per-bucket flags table's entry for a call (False where it has none)."""
    return table.get((max(32, block_d), causal), (False,) * 3)[seq_bucket(max_seqlen)]


def tma_loads(kind: str, block_d: int, causal: bool, max_seqlen: int) -> bool:
    """TMA_LOADS's entry for a call of the `kind` kernel ("dkdv", "dv" or "dq"; False where the table has none)."""
    return _bucket_entry(TMA_LOADS.get(kind, {}), block_d, causal, max_seqlen)


def tma_batched(direction: str, block_d: int, causal: bool, max_seqlen: int) -> bool:
    """TMA_BATCHED's entry for a dense call's `direction` ("fwd" or "bwd"; False where the table has none)."""
    return _bucket_entry(TMA_BATCHED[direction], block_d, causal, max_seqlen)


def output_split(block_d: int, causal: bool, max_seqlen: int) -> bool:
    """OUTPUT_SPLIT's entry for a call of the default (non-atomic) backward."""
    return OUTPUT_SPLIT[(max(32, block_d), causal)][seq_bucket(max_seqlen)]


def pinned(kind: str, block_d: int, causal: bool, max_seqlen: int, pointers: bool = False) -> Tile:
    """The table's tile for one kernel and call shape, before the grid and shared-memory adjustments; `pointers`:
    the call loads by pointers where the table's tile was measured with descriptors (POINTER_FALLBACK)."""
    fallback = _pointer_fallback(kind, block_d, causal, pointers)
    tiles = fallback[0] if fallback else tile_table(kind)[(max(32, block_d), causal)]
    return tiles[seq_bucket(max_seqlen)]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def fill_sms(kind: str, tile: Tile, grid_units: int, grid_seqlen: int, num_sms: int) -> Tile:
    """Halve the tile's grid-side block (query rows for fwd/dq, key rows for dK/dV) while the halved grid still fits
    in one wave of `num_sms` programs and the block stays >= MIN_GRID_BLOCK rows.

    `grid_units` is batch * heads of the grid (K/V heads for dK/dV), `grid_seqlen` the sequence the grid side
    walks. When the grid has fewer programs than SMs, the kernel's time is one program's time, which is
    proportional to its rows: half the rows on twice the SMs halves it. Past one wave the larger tile's better
    per-SM throughput wins, so the rule stops there."""
    side = GRID_SIDE[kind]
    block = getattr(tile, side)
    while block // 2 >= MIN_GRID_BLOCK and grid_units * _cdiv(grid_seqlen, block // 2) <= num_sms:
        block //= 2
    if block == getattr(tile, side):
        return tile
    if side == "block_m":
        return Tile(block, tile.block_n, tile.num_warps, tile.num_stages)
    return Tile(tile.block_m, block, tile.num_warps, tile.num_stages)


def shared_memory_bytes(kind: str, tile: Tile, block_d: int, block_dv: int, elem_bytes: int, tma: bool = False) -> int:
    """Rough shared-memory need of a tile: the streamed operands times the pipeline depth, plus resident tiles.

    `tma`: the forward's K/V stream through (rows, heads * dim) tensor descriptors, for which Triton 3.6 and 3.9
    keep num_stages - 1 buffers, not num_stages (offline, d256 forward 128x64/8 warps: 128 KB at 2 stages, 192 KB at
    3). Not a rule of descriptors in general: through the batched (batch, seqlen, heads * dim) views the same
    forward keeps num_stages (257 KB at 3 stages, Triton 3.6), and the dQ kernel's opt-in descriptor loads compile
    to num_stages buffers (d128 128x64/3: 161 KB), as do the pointer paths (dK/dV split 32x128/2 at d256: 224 KB)."""
    if kind == "fwd":
        resident, streamed = tile.block_m * block_d, tile.block_n * (block_d + block_dv)
    elif kind in SPLIT_KINDS:  # + one part of Q and dO per stage (Triton 3.6: 224 KB at 32x128/2)
        resident = tile.block_n * (block_d + block_dv)
        streamed = tile.block_m * (block_d + block_dv) * (DKDV_SPLIT_PARTS + 1) // DKDV_SPLIT_PARTS
        if kind in ATOMIC_DQ_KINDS:  # + K's part for dQ, resident
            resident += tile.block_n * block_d // DKDV_SPLIT_PARTS
    elif kind == "dv":  # K resident (V is not read: the dV kernel has no dP), Q and dO streamed
        resident, streamed = tile.block_n * block_d, tile.block_m * (block_d + block_dv)
    elif kind in KEY_BLOCK_KINDS:
        resident, streamed = tile.block_n * (block_d + block_dv), tile.block_m * (block_d + block_dv)
    else:
        resident, streamed = tile.block_m * (block_d + block_dv), tile.block_n * (block_d + block_dv)
    buffers = tile.num_stages - 1 if tma else tile.num_stages
    return (resident + max(1, buffers) * streamed) * elem_bytes


def fit_shared_memory(kind: str, tile: Tile, block_d: int, block_dv: int, elem_bytes: int, smem_limit: int,
                      tma: bool = False) -> Tile:
    """The tile, or a smaller one that fits `smem_limit` bytes: fewer stages first, then fewer key rows, then
    fewer query rows."""
    while shared_memory_bytes(kind, tile, block_d, block_dv, elem_bytes, tma) > smem_limit:
        if tile.num_stages > 1:
            tile = Tile(tile.block_m, tile.block_n, tile.num_warps, tile.num_stages - 1)
        elif tile.block_n > 16:
            tile = Tile(tile.block_m, tile.block_n // 2, tile.num_warps, 1)
        elif tile.block_m > 16:
            tile = Tile(tile.block_m // 2, tile.block_n, tile.num_warps, 1)
        else:
            break
    return tile


def tile_for(kind: str, block_d: int, block_dv: int, causal: bool, max_seqlen: int, elem_bytes: int,
             grid_units: int, grid_seqlen: int, num_sms: int | None = None, smem_limit: int | None = None,
             tma: bool = False, pointers: bool = False) -> Tile:
    """The tile one kernel runs with for one call: OVERRIDES, else the pinned tile, shrunk by fill_sms (when
    `num_sms` is known) and to the shared memory (when `smem_limit` is; `tma` as shared_memory_bytes, `pointers` as
    pinned)."""
    if kind in OVERRIDES:
        return OVERRIDES[kind]
    tile = pinned(kind, block_d, causal, max_seqlen, pointers)
    if num_sms:
        tile = fill_sms(kind, tile, grid_units, grid_seqlen, num_sms)
    if smem_limit:
        tile = fit_shared_memory(kind, tile, block_d, block_dv, elem_bytes, smem_limit, tma)
    return tile


def autotune_candidates(kind: str, block_d: int, block_dv: int, causal: bool, max_seqlen: int, elem_bytes: int,
                        smem_limit: int | None = None, tma: bool = False, pointers: bool = False) -> list[Tile]:
    """The opt-in autotuner's choices: the pinned tile first (`pointers` as pinned), then ALTERNATIVES, those over
    `smem_limit` dropped (the pinned one shrunk instead, so the list is never empty)."""
    first = pinned(kind, block_d, causal, max_seqlen, pointers)
    tiles = [first] + [t for t in ALTERNATIVES[kind][max(32, block_d)] if t != first]
    if smem_limit is None:
        return tiles
    fitting = [t for t in tiles if shared_memory_bytes(kind, t, block_d, block_dv, elem_bytes, tma) <= smem_limit]
    return fitting or [fit_shared_memory(kind, first, block_d, block_dv, elem_bytes, smem_limit, tma)]
