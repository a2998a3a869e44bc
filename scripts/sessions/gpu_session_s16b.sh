#!/usr/bin/env bash
# 2026-12-02 (sixteenth session), after adopting next16's d256 forward (64x128/4w/1) and dQ (64x64/4w/2) tiles through
# the batched views: (1) the Triton GPU suite on them (varlen calls take POINTER_FALLBACK's tiles: BATCHED_ONLY);
# (2) the d256 backward's dV / dK kernels with Q / dO through the batched descriptors (offline, Triton 3.6, warp
# instructions per 1024 scores: dV 64x128/8w/1 279 vs 298 by pointers, /2 330 vs 391; dK 64x128/8w/1 412 vs 445,
# causal 32x128/8w/1 684 with 4 spill instructions vs the pinned 32x128/8w/2 by pointers 702 with 50); (3) the d256
# forward rows of the table (triton / cuDNN / FA2, same run).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s16b
stamp tests
gpu_pytest tests_triton.log 170 tests/test_triton_gpu.py
gpu_ab bwd256 220 --headdims 256 --seqlens 512 1024 2048 8192 16384 --variants pinned+row-stats \
    pinned+row-stats+dkdv-tma+tma3d pinned+row-stats+dkdv-tma+tma3d+dv-64x128x8x1 \
    pinned+row-stats+dkdv-tma+tma3d+dk-32x128x8x1
stamp bench
gpu_bench fwd256 150 --headdims 256 --directions fwd
stamp done
gpu_archive s16b.tar.gz
