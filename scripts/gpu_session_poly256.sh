#!/usr/bin/env bash
# 2026-12-02 eleventh session: how many exp2s the 256-key d128 default should take on the FP32 pipe (every 4th lost
# 8-11% in kb256-h200-20261202-0758): variants key_block_256_fused_turn_poly8 / _poly16 against the default (all on
# MUFU) and poly4, kernel only, K/V tiles of 768; their exact-score tests first. Carry build (libfa3nn_hopper.so).
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-poly256
stamp tests
gpu_pytest tests.log 150 tests/test_hopper_fp8.py -k "key_block_256"
grep -E "^(FAILED|ERROR)" "$out/tests.log" | head -n 12
stamp bench
timeout 300 python3 scripts/bench_hopper_fp8.py --json "$out/fp8_d128.json" --headdims 128 \
    --seqlens 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 768 \
    --variants key_block_256_fused_turn key_block_256_fused_turn_poly4 key_block_256_fused_turn_poly8 \
    key_block_256_fused_turn_poly16 > "$out/fp8_d128.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_d128.log"
stamp done
