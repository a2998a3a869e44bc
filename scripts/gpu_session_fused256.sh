#!/usr/bin/env bash
# 2026-12-02 eleventh session: the FP8 fused turn at head dim 256 (variant fused_turn; P V in two head-dim halves,
# the K stage wait inside the turn, which took its 336-352 B of spill to 0). Its GPU tests (exact scores against the
# emulation, mean of V over 8192 keys), then kernel-only timing against the d256 default (serial steps) and the same
# default as a variant (noise reference), 1k-16k, causal and not. Carry build (libfa3nn_hopper.so).
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-fused256
stamp tests
gpu_pytest tests.log 150 tests/test_hopper_fp8.py -k "fused_turn"
grep -E "^(FAILED|ERROR)" "$out/tests.log" | head -n 12
stamp bench
timeout 300 python3 scripts/bench_hopper_fp8.py --json "$out/fp8_d256.json" --headdims 256 \
    --seqlens 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 384 --variants serial fused_turn \
    > "$out/fp8_d256.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_d256.log"
stamp done
