#!/usr/bin/env bash
# Prepared 2026-12-01 (fourth session), not yet run: the Triton d256 backward with the opt-in atomic dQ split over
# the head dim (kind "fused_split": each dK/dV part adds its dQ columns by TMA reduce-adds; 7 matmul-equivalents
# per block pair against the default split backward's 9; offline 1980 warp instructions per 1024 scores against
# 2222 up to 4k and 1622 past it). (1) the Triton GPU suite with FA3NN_TRITON_ATOMIC_DQ=1 (d256 tests then run it);
# (2) the whole backward, default vs atomic, d256 2048 / 8192 (scripts/triton_tile_ab.py checks the gradients).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fusedsplit
stamp tests
(export FA3NN_TRITON_ATOMIC_DQ=1; gpu_pytest tests_atomic.log 200 tests/test_triton_gpu.py)
stamp bwd
timeout 200 python3 scripts/triton_tile_ab.py --variants pinned+row-stats+split-d pinned+row-stats+split-d+atomic \
    --headdims 256 --seqlens 2048 8192 --json "$out/fused_split.json" > "$out/fused_split.log" 2>&1
echo "bwd rc $?"; grep -E "^\| pinned" "$out/fused_split.log"
stamp done
