#!/usr/bin/env bash
# Fifteenth session (2026-12-02), second call. next15 (results/next15-h200-20261202-1907) measured the batched
# descriptors (FA3NN_TRITON_TMA_BATCHED) on the d128 backward: +1..+4% non-causal, +19 / +15 / +10% causal at 512 /
# 1k / 2k, the dQ kernel on 64x64/4w/2 with descriptors +4 / +1% more at 512 / 1k causal. Its forward runs were not
# the same run (the unbatched one timed out compiling). Here, same run, gradients / outputs checked against the
# first variant: (1) the forward at d64 / d128 / d256 with and without batched views, plus d256 on 64x64/4w/2
# (offline, Triton 3.6, batched causal: 466 warp instructions per 1024 scores against 128x64/8w/2's 473, no spill,
# 161 KB); (2) the d64 and d256 backward with batched views and the dQ kernel's descriptors, and at d256 the
# output-split kernels' Q / dO through descriptors too.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-ab15
gpu_ab fwd 200 --reps 3 --direction fwd --headdims 64 128 256 --seqlens 512 1024 2048 8192 16384 \
    --variants pinned pinned+tma3d
gpu_ab fwd256 120 --reps 3 --direction fwd --headdims 256 --seqlens 512 1024 2048 8192 \
    --variants pinned+tma3d pinned+tma3d+fwd-64x64x4x2 pinned+fwd-64x64x4x2
gpu_ab bwd64 150 --reps 3 --headdims 64 --seqlens 512 1024 2048 8192 16384 \
    --variants pinned+row-stats pinned+row-stats+tma3d+dq-tma
gpu_ab bwd256 200 --reps 3 --headdims 256 --seqlens 512 1024 2048 8192 16384 \
    --variants pinned+row-stats pinned+row-stats+tma3d+dq-tma pinned+row-stats+tma3d+dq-tma+dkdv-tma
stamp done
gpu_archive ab15.tar.gz
