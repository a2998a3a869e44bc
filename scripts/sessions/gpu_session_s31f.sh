#!/usr/bin/env bash
# 2026-12-04 (thirty-first session, sixth call): the final varlen-window library (bwd_tile_empty spelled out, so the
# plain varlen kernels are bitwise s31d's again, checked offline; the window varlen kernels rebuilt): the varlen tests
# of both directions (windows included), then the varlen window backward A/B again at d64 / d128 / d256. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s31f
stamp start
gpu_pytest varlen_tests.log 150 tests/test_hopper.py tests/test_hopper_bwd.py -k "varlen or window"
grep -E "^(FAILED|ERROR) " "$out/varlen_tests.log" | head -n 10
stamp tests
timeout 150 python scripts/bwd_varlen_ab.py --headdims 64 128 256 --varlen-cases 2048 mixed --window 1024 \
    --json "$out/varlen_window_ab.json" > "$out/varlen_window_ab.log" 2>&1
echo "varlen ab rc $?"; sed -n '/^| d | lengths/,$p' "$out/varlen_window_ab.log"
grep -E "Error" "$out/varlen_window_ab.log" | head -n 3
stamp done
