#!/usr/bin/env bash
# 2026-12-02 (sixteenth session): the d256 backward's dV kernel on 4-warp 64x64 tiles with one stage through the
# batched descriptors, two CTAs per SM (offline, Triton 3.6: 96 KB, 255 registers, 282 warp instructions per 1024
# scores non-causal with no spill, 314 causal with 10 spill instructions outside the loop; the pinned 64x128/8w/1 by
# pointers 298 / 342 with 13 hot spill instructions causal, one CTA per SM), against the pinned tiles with and without
# descriptors (s16b: descriptors for dV and dK together lost 1-7%); and the dQ kernel on 64x32/4w/1 (96 KB, two CTAs
# per SM; offline 504 warp instructions per 1024 scores and 25 hot spill instructions against the pinned 339).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s16c
gpu_ab bwd256dv 240 --headdims 256 --seqlens 512 1024 2048 8192 16384 --variants pinned+row-stats \
    pinned+row-stats+dv-tma+dv-64x64x4x1 pinned+row-stats+dv-tma+tma3d+dv-64x64x4x1 pinned+row-stats+dv-tma \
    pinned+row-stats+dq-64x32x4x1
stamp done
gpu_archive s16c.tar.gz
