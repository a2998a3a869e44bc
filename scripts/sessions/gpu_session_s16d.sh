#!/usr/bin/env bash
# 2026-12-02 (sixteenth session): the d256 backward's dK kernel (38% of its time) on 4-warp tiles of 64 keys with Q / dO
# through the batched descriptors: 32x64/4w/1 (96 KB, two CTAs per SM; offline, Triton 3.6: 694 / 706 warp
# instructions per 1024 scores non-causal / causal, 12 / 32 spill instructions outside the loop) and 32x64/4w/2
# (128 KB; 670 / 670, 0 / 6), against the pinned 64x128/8w/1 (445, by pointers) and causal 32x128/8w/2 (702).
# s16c: the dV kernel's two-CTA tile won +1.5..+4.1% up to 1k, lost past it.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s16d
gpu_ab bwd256dk 200 --headdims 256 --seqlens 512 1024 2048 8192 16384 --variants pinned+row-stats \
    pinned+row-stats+dk-tma+dk-32x64x4x1 pinned+row-stats+dk-tma+dk-32x64x4x2
stamp done
gpu_archive s16d.tar.gz
