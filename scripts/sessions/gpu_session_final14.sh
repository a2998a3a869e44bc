#!/usr/bin/env bash
# 2026-12-02 (fourteenth session), after the d128 dK/dV change (key-major 64x64/4w/2 with Q / dO through
# descriptors past 1k): (1) the same tile at 512 / 1024 against the pinned ones (the bucket it was not measured
# in); (2) the Triton GPU suite; (3) the d128 backward table (triton / cuDNN / FA2).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final14
stamp ab-short
timeout 120 python3 scripts/triton_tile_ab.py --headdims 128 --seqlens 512 1024 --precompile 16 --reps 3 \
    --variants pinned+row-stats 4w2-tma+row-stats+dkdv-tma+key-major \
    --json "$out/ab_short.json" > "$out/ab_short.log" 2>&1
echo "ab rc $?"; grep -E "^\|" "$out/ab_short.log"
stamp tests
gpu_pytest tests_triton.log 170 tests/test_triton_gpu.py
stamp bench128
gpu_bench final14_128 200 --headdims 128 --directions bwd
stamp done
gpu_archive final14.tar.gz
