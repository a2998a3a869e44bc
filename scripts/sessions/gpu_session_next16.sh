#!/usr/bin/env bash
# Prepared at the end of the fifteenth session (2026-12-02; device time spent), for the next session's first call
# (Triton only, no carry): forward tiles with 128 keys per step, offline (Triton 3.6, sm_90a) the fewest warp
# instructions per 1024 scores of any forward tile checked. d128: 64x128/4w/1 280 (241-244 registers, 49 KB, no
# spill; two CTAs per SM by registers) and 64x128/4w/2 276 (145 KB), against the pinned 64x64/4w/3's 368; d64
# 64x128/4w/2 254 against the pinned 128x64/4w/3's 281 and 64x64/4w/3's 323 (no spill; 512 non-causal reads 1.203x
# FA2 in final15, the closest row to the target). d256
# through the batched views: 128x128/8w/1 337 (8 hot spill instructions causal, 10 non-causal) and 64x128/4w/1 334
# (9 / 5), against the pinned 128x64/8w/2's 473 (no spill); by the (rows, heads * dim) views both spill 5-10x more.
# Same run, outputs checked against the first variant's: the forward at 512-16k, causal and not. d256 short causal
# rows are the forward's last miss of issue 3 (512 causal 1.14x FA2). Then the d256 backward (0.92-1.13x FA2) with
# the dQ kernel (38% of its time, bd256-h200-20261202-1930) on 64x64/4w/2 or 128x64/8w/1 through batched
# descriptors: offline 339 / 372-374 warp instructions per 1024 scores against the pinned 128x32/8w/2's 540 (7-8 /
# 15-26 hot spill instructions; by the (rows, heads * dim) views 64x64/4w/2 spills 26-63), gradients checked.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-next16
gpu_ab fwd128 150 --direction fwd --headdims 128 --seqlens 512 1024 2048 8192 16384 \
    --variants pinned pinned+fwd-64x128x4x1 pinned+fwd-64x128x4x2
gpu_ab fwd64 100 --direction fwd --headdims 64 --seqlens 512 1024 2048 8192 16384 \
    --variants pinned pinned+fwd-64x128x4x2
gpu_ab fwd256 150 --direction fwd --headdims 256 --seqlens 512 1024 2048 8192 16384 \
    --variants pinned pinned+tma3d+fwd-128x128x8x1 pinned+tma3d+fwd-64x128x4x1
gpu_ab bwd256 200 --headdims 256 --seqlens 512 1024 2048 8192 16384 --variants pinned+row-stats \
    pinned+row-stats+tma3d+dq-tma+dq-64x64x4x2 pinned+row-stats+tma3d+dq-tma+dq-128x64x8x1
stamp done
gpu_archive next16.tar.gz
